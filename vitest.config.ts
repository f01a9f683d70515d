import { defineConfig } from 'vitest/config';

// `unit` tests the harness's own code and the reference implementation from the inside; the two
// conformance projects run the suites against whichever target HIL_TARGET names (sim by default).
//
// Conformance files run two at a time, except the few whose checks are about real-time behaviour of the
// stack (the telemetry stream's ~20 ms flushes, idle and keepalive timers, a busy service, jog input age in
// host time) or that load the machine heavily (a 222 MB upload): those run one at a time after the rest (`conformance-solo`, a later
// group), so no neighbouring file can starve them or be starved by them. Both conformance projects start
// stacks from a bundle built once per run (harness/targets/prebuild-setup.ts), and share one module graph
// per worker (isolate: false; the harness keeps no state at module level).
export const SOLO_FILES = [
  'suites/trajectory/upload.test.ts',
  'suites/telemetry/stream.test.ts',
  'suites/telemetry/busy.test.ts',
  'suites/observation/keepalive.test.ts',
  // jog input age (250 ms) and the session's input deadline are host monotonic time even on the stepped
  // clock: a neighbour that slows the stepping between two frames expires the jog (seen: frame 3 refused,
  // no jog_limited, target velocity already 0 when halt and stop arrive).
  'suites/jog/jog.test.ts',
];

const conformance = {
  globalSetup: ['harness/targets/prebuild-setup.ts'],
  isolate: false,
  testTimeout: 60_000,
  hookTimeout: 120_000,
};

export default defineConfig({
  test: {
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
          exclude: SOLO_FILES,
          maxWorkers: 2,
          sequence: { groupOrder: 1 },
          ...conformance,
        },
      },
      {
        test: {
          name: 'conformance-solo',
          include: SOLO_FILES,
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
          ...conformance,
        },
      },
    ],
  },
});
