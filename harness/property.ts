// Property-test volume and seed (docs/profile.md "Property tests"): every property run takes its case count
// from HIL_PROPERTY_RUNS (a nightly run turns it up to tens of thousands) and its seed from
// HIL_PROPERTY_SEED, or a fresh random one, and prints both, so any failing run can be replayed with the same
// seed. A recorded run keeps them with each test's recording, and the replay target replays the test with
// them (docs/recording.md).

import { randomInt } from 'node:crypto';
import { currentTest } from './targets/pertest.ts';

/** fast-check parameters for one property: `{ numRuns, seed }`, printed to stderr with the property name. */
export function propertyRun(name: string, defaultRuns: number, env: NodeJS.ProcessEnv = process.env): { numRuns: number; seed: number } {
  // Replaying a recorded test (the replay target): the cases its recording was made with, whatever the
  // environment says, since other cases would send other requests than were recorded.
  const test = currentTest();
  const recorded = test?.recordedProperty(name);
  if (recorded) {
    process.stderr.write(`property ${name}: seed ${recorded.seed}, ${recorded.numRuns} runs (from the recording)\n`);
    test!.noteProperty(name, recorded);
    return { numRuns: recorded.numRuns, seed: recorded.seed };
  }
  const runs = env.HIL_PROPERTY_RUNS === undefined ? defaultRuns : Number(env.HIL_PROPERTY_RUNS);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`HIL_PROPERTY_RUNS must be a positive integer, got ${env.HIL_PROPERTY_RUNS}`);
  const seed = env.HIL_PROPERTY_SEED === undefined ? randomInt(0, 2 ** 31) : Number(env.HIL_PROPERTY_SEED);
  if (!Number.isInteger(seed)) throw new Error(`HIL_PROPERTY_SEED must be an integer, got ${env.HIL_PROPERTY_SEED}`);
  process.stderr.write(`property ${name}: seed ${seed}, ${runs} runs (replay: HIL_PROPERTY_SEED=${seed} HIL_PROPERTY_RUNS=${runs})\n`);
  // A recorded run keeps them beside the test's recording (harness/targets/pertest.ts TestRun).
  test?.noteProperty(name, { seed, numRuns: runs });
  return { numRuns: runs, seed };
}

/**
 * A test that tries again when its host missed a timing window (its own sends came too late) makes as many
 * attempts as the wall clock gave it, each with requests of its own; a replay must make as many as the
 * recording did, whatever its own host's timing (more or fewer send requests the recording does not have
 * or never sends: a FAIL the replay caused, suites/remote/jog.test.ts "a cell on the internet profile ..."
 * retried under load and diverged in 2 of 2 replays). Kept beside the recording like a property's
 * parameters (`attempts:<name>`, numRuns the count). `recorded()`: on a replay, how many attempts the
 * recording made (undefined otherwise); `made(n)`: the test made n, for a recording.
 */
export function windowAttempts(name: string): { recorded(): number | undefined; made(n: number): void } {
  const key = `attempts:${name}`;
  return {
    recorded: () => currentTest()?.recordedProperty(key)?.numRuns,
    made: (n) => currentTest()?.noteProperty(key, { seed: 0, numRuns: n }),
  };
}

/**
 * A small seeded PRNG (mulberry32), uniform in [0, 1): for generators that must give the same output for
 * the same seed without fast-check's machinery (harness/machine-gen.ts, the digest suite's key orders).
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
