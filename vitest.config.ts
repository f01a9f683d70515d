import { defineConfig } from 'vitest/config';

// Two projects: `unit` tests the harness's own code and the reference implementation from the inside;
// `conformance` runs the suites against whichever target HIL_TARGET names (sim by default).
export default defineConfig({
  test: {
    // One file at a time (the default on two cores). Two at a time cut the conformance run from 125 s to
    // 81 s here, but a file that uploads 222 MB starves the stack of the file beside it, and the cadence
    // checks of real-time behaviour (the telemetry stream's ~20 ms flushes) then fail.
    projects: [
      {
        test: {
          name: 'unit',
          include: ['harness/**/*.test.ts', 'sims/**/*.test.ts', 'drivers/**/*.test.ts'],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'conformance',
          include: ['suites/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
