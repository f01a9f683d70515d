// The model run against the target on the stepped clock (the `model` vitest project): a fixed seed, so a
// commit's run is the same sequences each time, and a fresh seed, printed, so runs keep exploring. A
// failure prints HIL_MODEL_SEED and HIL_MODEL_PATH to replay it, and the shrunk sequence as a vitest example.
//
// HIL_MODEL_SEED / HIL_MODEL_PATH replay a printed failure; HIL_MODEL_RUNS and HIL_MODEL_COMMANDS set the
// volume (the before-stop check runs more).

import { randomInt } from 'node:crypto';
import { describe, expect, sharedVariant, test } from '../fixture.ts';
import { checkModel, failureReport, MODEL_VARIANT } from './commands.ts';
import { newStats } from './run.ts';
import { KNOWN_DEFECTS, rulesWithKnownDefects } from './variants.ts';

const RUNS = Number(process.env.HIL_MODEL_RUNS ?? 3);
const COMMANDS = Number(process.env.HIL_MODEL_COMMANDS ?? 80);
/** The commit's fixed seed (any constant: the point is that it does not change between runs). */
const FIXED_SEED = 23_001;

describe('the documented state machines as a model, against the target (stepped clock)', () => {
  const v = sharedVariant(MODEL_VARIANT);

  async function run(seed: number, path: string | undefined): Promise<void> {
    const stats = newStats();
    process.stderr.write(`model run: HIL_MODEL_SEED=${seed} HIL_MODEL_RUNS=${RUNS} HIL_MODEL_COMMANDS=${COMMANDS}${path ? ` HIL_MODEL_PATH='${path}'` : ''}\n`);
    // The reference stack's known defects are allowed here (each has an expected-failure test of its own).
    for (const d of KNOWN_DEFECTS) process.stderr.write(`model run: known defect allowed: ${d.name} (${d.reason})\n`);
    const r = await checkModel({ target: v.target, rules: rulesWithKnownDefects(), seed, numRuns: RUNS, maxCommands: COMMANDS, ...(path ? { path } : {}), stats });
    const reached = Object.keys(stats.hits).filter((k) => k.startsWith('transition:')).sort();
    process.stderr.write(`model run: ${stats.sequences} sequences, ${stats.commands} commands, ${reached.length} transitions reached: ${reached.map((k) => `${k} ${stats.hits[k]}`).join(', ')}\n`);
    if (r.failed) {
      const text = failureReport(r, { maxCommands: COMMANDS });
      process.stderr.write(`${text}\n`);
      expect.fail(text);
    }
  }

  test('a fixed seed: every reply, status and event agrees with the model', async ({ skip }) => {
    skip(v.cannot !== undefined, v.cannot);
    const env = process.env.HIL_MODEL_SEED;
    await run(env !== undefined ? Number(env) : FIXED_SEED, process.env.HIL_MODEL_PATH);
  });

  test('a fresh seed (printed): every reply, status and event agrees with the model', async ({ skip }) => {
    skip(v.cannot !== undefined, v.cannot);
    skip(process.env.HIL_MODEL_SEED !== undefined, 'a replay (HIL_MODEL_SEED) runs the given seed only');
    await run(randomInt(0, 2 ** 31), undefined);
  });
});
