// The long tier: tests that wait out a documented bound of more than a minute (docs/architecture.md "The
// long tier"). Whether a run has it on, and the vitest tag its tests carry, decided here once for the test
// fixture (harness/fixture.ts longTier), the sequencer's durations, `hil run` and vitest.config.ts.

/** The vitest tag of a long-tier test. */
export const LONG_TAG = 'long';

/** Whether the run asked for the long tier (`hil run --long` sets HIL_LONG=1 for itself and its workers). */
export function longTierOn(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.HIL_LONG === '1';
}
