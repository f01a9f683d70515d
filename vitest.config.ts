import { defineConfig } from 'vitest/config';

// Two projects: `unit` tests the harness's own code and the reference implementation from the inside;
// `conformance` runs the suites against whichever target HIL_TARGET names (sim by default).
export default defineConfig({
  test: {
    // Two files at a time: a suite file mostly waits on its stack's real-time cycles, so two overlap well
    // on a two-core machine (the default here is one).
    maxWorkers: 2,
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
