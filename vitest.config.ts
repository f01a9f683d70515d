import { defineConfig } from 'vitest/config';

// Two projects: `unit` tests the harness's own code and the reference implementation from the inside;
// `conformance` runs the suites against whichever target HIL_TARGET names (sim by default).
export default defineConfig({
  test: {
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
