// The core loop registry: which loop runs a core incarnation, chosen by its clock mode, as a driver is
// chosen by name (drivers/index.ts). Each loop is a worker entry of its own (sims/paths.ts workerEntry),
// so neither the core nor the service imports the paced replay: the core cycles on its own clock
// (sims/core/worker.ts), and a recorded clock is the replay component's paced loop (sims/replay/worker.ts).

import type { ClockSpec } from './core/protocol.ts';
import type { WorkerName } from './paths.ts';

export interface CoreLoopDescriptor {
  readonly clock: ClockSpec['mode'];
  /** The worker entry that runs the loop. */
  readonly worker: WorkerName;
  /**
   * Whether the thread, once its incarnation has ended cleanly, may serve a later one of the process on the
   * same loop (sims/service/core-threads.ts: any clock of the loop once the thread is back at normal
   * scheduling; only the same real-time request while it still holds a raised priority). The cycling loop's
   * thread is kept only for the simulated bus (a real master such as node-ethercat is one per process and
   * cannot restart).
   */
  readonly keepThread: boolean;
  readonly summary: string;
}

export const CORE_LOOPS: Readonly<Record<ClockSpec['mode'], CoreLoopDescriptor>> = Object.freeze({
  realtime: { clock: 'realtime', worker: 'core', keepThread: true, summary: 'cycles on the host monotonic clock, at real-time priority where granted' },
  fast: { clock: 'fast', worker: 'core', keepThread: true, summary: 'cycles on simulated time, the wall sleeping cycle / speed' },
  stepped: { clock: 'stepped', worker: 'core', keepThread: true, summary: 'cycles only when the test channel steps it' },
  recorded: { clock: 'recorded', worker: 'replay-core', keepThread: true, summary: 'paced replay: the pacer runs the core to each recorded sync point (sims/replay/)' },
});

/** The loop for a clock mode. */
export function coreLoop(mode: ClockSpec['mode']): CoreLoopDescriptor {
  return CORE_LOOPS[mode];
}
