// Bulk work off the service's main loop, behind it in the scheduler's queue.
//
// The decoders of large bodies (the prepare_trajectory upload, the dense program file, the planner's container
// intake) run in worker threads so that the main loop keeps answering observers. On a machine with few cores
// that is not enough: a decoder at full speed takes a core the main loop then waits for, and a status read or a
// lease renewal queues behind it, yet a controller renewing a 500 ms lease and a UI polling status must not
// notice an upload (bench/upload-impact.bench.ts measures both). Such a thread lowers its own priority (nice +10 for the
// calling thread: on Linux setpriority with pid 0 applies to the calling thread only) so that the main loop and
// the core are scheduled first and the decoder takes what is left. Best effort: where the call is refused or
// the platform has no per-thread nice, nothing changes.

import { setPriority } from 'node:os';

/** Nice value of a bulk decoder thread; HIL_BULK_NICE overrides it (0 leaves the thread as it is, for A/B runs of bench/upload-impact.bench.ts). */
export const BULK_NICE = 10;

/** Lower the calling thread's priority to BULK_NICE; returns the nice value set, or undefined. */
export function lowerThreadPriority(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const nice = env.HIL_BULK_NICE === undefined ? BULK_NICE : Number(env.HIL_BULK_NICE);
  if (process.platform !== 'linux' || !Number.isInteger(nice) || nice <= 0 || nice > 19) return undefined;
  try {
    setPriority(0, nice);
    return nice;
  } catch {
    return undefined;
  }
}
