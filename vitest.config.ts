import { defineConfig } from 'vitest/config';
import LongestFirst from './harness/sequencer.ts';

// `unit` tests the harness's own code and the reference implementation from the inside; the conformance
// projects run the suites against whichever target HIL_TARGET names (sim by default), in three groups:
//
// 1. `conformance`: most files, four at a time, longest first (harness/sequencer.ts). A conformance run
//    keeps about one of two cores busy: much of it is waiting for documented timeouts (the remote
//    listener's 30 s request bound, planner kill grace) that more workers overlap with real work.
// 2. `conformance-quiet`: files whose checks are about real-time behaviour of the stack (the telemetry
//    stream's ~20 ms flushes and blocked-write bound, idle and keepalive timers, a torn ring header held
//    for 1.5 s). They mostly wait, so they share a group with each other, never with the busy files of
//    group 1.
// 3. `conformance-solo`: one at a time, last: the 222 MB upload (it loads the machine) and jog (it steps
//    the core as fast as it can, and its input age and the session's input deadline are host monotonic
//    time even on the stepped clock: a neighbour that slows the stepping between two frames expires the
//    jog; seen with jog beside the stream file: one stream batch in 400 ms).
//
// Every conformance project starts stacks from a bundle built once per run (harness/targets/prebuild-setup.ts)
// and shares one module graph per worker (isolate: false; the harness keeps no state at module level).
export const QUIET_FILES = ['suites/telemetry/stream.test.ts', 'suites/telemetry/busy.test.ts', 'suites/observation/keepalive.test.ts'];
export const SOLO_FILES = ['suites/trajectory/upload.test.ts', 'suites/jog/jog.test.ts'];

const conformance = {
  globalSetup: ['harness/targets/prebuild-setup.ts'],
  setupFiles: ['harness/bigint-json.ts'],
  isolate: false,
  testTimeout: 60_000,
  hookTimeout: 120_000,
};

export default defineConfig({
  test: {
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['harness/**/*.test.ts', 'sims/**/*.test.ts', 'drivers/**/*.test.ts'],
          testTimeout: 30_000,
          maxWorkers: 1,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          name: 'conformance',
          include: ['suites/**/*.test.ts'],
          exclude: [...QUIET_FILES, ...SOLO_FILES],
          maxWorkers: 4,
          sequence: { groupOrder: 1 },
          ...conformance,
        },
      },
      {
        test: {
          name: 'conformance-quiet',
          include: QUIET_FILES,
          maxWorkers: 4,
          sequence: { groupOrder: 2 },
          ...conformance,
        },
      },
      {
        test: {
          name: 'conformance-solo',
          include: SOLO_FILES,
          maxWorkers: 1,
          sequence: { groupOrder: 3 },
          ...conformance,
        },
      },
    ],
  },
});
