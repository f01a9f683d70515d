// Loaded in every conformance worker (vitest.config.ts setupFiles): lowers the worker's scheduling priority
// to the nice value its project names in HIL_NICE. The stacks, planners and helpers the worker starts
// inherit it, so real-time-sensitive files (nice 0) run ahead of the busy ones on a shared machine. Only
// ever lowers: an unprivileged process cannot take a raised nice value back, and a worker that already runs
// at the value (isolate: false runs many files in one worker) is left alone.

import { getPriority, setPriority } from 'node:os';

const wanted = Number(process.env.HIL_NICE ?? '0');
if (Number.isInteger(wanted) && wanted > 0 && wanted <= 19) {
  try {
    if (getPriority() < wanted) setPriority(wanted);
  } catch (e) {
    // Not fatal: the run only loses the ordering between busy and quiet files.
    process.stderr.write(`warning: could not set nice ${wanted}: ${(e as Error).message}\n`);
  }
}
