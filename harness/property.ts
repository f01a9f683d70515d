// Property-test volume and seed (issue 7): every property run takes its case count from HIL_PROPERTY_RUNS
// (a nightly run turns it up to tens of thousands) and its seed from HIL_PROPERTY_SEED, or a fresh random
// one, and prints both, so any failing run can be replayed with the same seed.

import { randomInt } from 'node:crypto';

/** fast-check parameters for one property: `{ numRuns, seed }`, printed to stderr with the property name. */
export function propertyRun(name: string, defaultRuns: number, env: NodeJS.ProcessEnv = process.env): { numRuns: number; seed: number } {
  const runs = env.HIL_PROPERTY_RUNS === undefined ? defaultRuns : Number(env.HIL_PROPERTY_RUNS);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`HIL_PROPERTY_RUNS must be a positive integer, got ${env.HIL_PROPERTY_RUNS}`);
  const seed = env.HIL_PROPERTY_SEED === undefined ? randomInt(0, 2 ** 31) : Number(env.HIL_PROPERTY_SEED);
  if (!Number.isInteger(seed)) throw new Error(`HIL_PROPERTY_SEED must be an integer, got ${env.HIL_PROPERTY_SEED}`);
  process.stderr.write(`property ${name}: seed ${seed}, ${runs} runs (replay: HIL_PROPERTY_SEED=${seed} HIL_PROPERTY_RUNS=${runs})\n`);
  return { numRuns: runs, seed };
}
