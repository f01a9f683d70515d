// The model's mutation check (harness/model/variants.ts): each wrong-model variant is run against the
// reference stack on the stepped clock with its budget (fixed seed, sequences, commands) and must be
// rejected; the rejecting sequence, replayed with the documented rules (known defects of the stack allowed), must then pass, so the rejection
// is the variant's wrong rule and not a flaky run. A variant rejected this way is what counts its rule as
// covered by the model (covers()). The commands each rejection needed are printed. The tests are shared
// out over two files (mutation-a and mutation-b), so the `model` project's two workers run them side by side.

import { covers, describe, expect, sharedVariant, test } from '../fixture.ts';
import type { WrongModel } from './variants.ts';
import type { Target } from '../targets/types.ts';
import { checkModel, replaySequence, MODEL_VARIANT } from './commands.ts';
import type { Rules, Spec } from './model.ts';
import { ModelMismatch } from './run.ts';
import { WRONG_MODELS, rulesOf, rulesWithKnownDefects } from './variants.ts';

/** The mismatch text when `seq` with `rules` is refuted (two tries), else undefined. */
async function rejects(target: Target, seq: readonly Spec[], rules: Rules): Promise<string | undefined> {
  for (let i = 0; i < 2; i++) {
    try {
      await replaySequence(target, seq, rules);
    } catch (e) {
      if (e instanceof ModelMismatch) return e.message;
      throw e;
    }
  }
  return undefined;
}

/** `seq` with the documented rules (known defects of the stack allowed) agrees with the stack (a second try absorbs timing). */
async function agrees(target: Target, seq: readonly Spec[], name: string): Promise<void> {
  let last: unknown;
  for (let i = 0; i < 2; i++) {
    try {
      await replaySequence(target, seq, rulesWithKnownDefects());
      return;
    } catch (e) {
      last = e;
    }
  }
  throw new Error(`the sequence that rejected ${name} also fails with the documented rules: ${(last as Error).message}`);
}

/** The mutation tests of the variants `pick` selects (two files share them out, one worker each). */
export function mutationTests(title: string, pick: (w: WrongModel, i: number) => boolean): void {
  describe(title, () => {
    const v = sharedVariant(MODEL_VARIANT);

    for (const w of WRONG_MODELS.filter(pick)) {
      test(`${w.name}: ${w.wrong}`, w.covers.length ? covers(...w.covers) : {}, async ({ skip }) => {
        skip(w.skip !== undefined, w.skip);
        skip(v.cannot !== undefined, v.cannot);
        if (process.env.HIL_MODEL_MUTATION !== 'search') {
          // The witness sequence with the variant: rejected; with the documented rules: agrees (a second
          // try each absorbs timing: leases and jog deadlines are host time).
          const rejected = await rejects(v.target, w.witness, rulesOf(w));
          expect(rejected, `${w.name}: its witness sequence was not rejected: ${JSON.stringify(w.witness)}`).toBeDefined();
          process.stderr.write(`wrong model ${w.name}: its ${w.witness.length}-command witness rejected it: ${rejected!.split('\n')[0]}\n`);
          await agrees(v.target, w.witness, w.name);
          return;
        }
        // The random search with the variant's budget (HIL_MODEL_MUTATION=search, the before-stop check):
        // the stack's timing varies between runs, so a budget that ran out is tried once more with the next seed.
        let r = await checkModel({ target: v.target, rules: rulesOf(w), seed: w.budget.seed, numRuns: w.budget.runs, maxCommands: w.budget.maxCommands, endOnFailure: true });
        if (!r.failed) {
          process.stderr.write(`wrong model ${w.name}: not rejected with seed ${w.budget.seed}; once more with seed ${w.budget.seed + 1}\n`);
          r = await checkModel({ target: v.target, rules: rulesOf(w), seed: w.budget.seed + 1, numRuns: w.budget.runs, maxCommands: w.budget.maxCommands, endOnFailure: true });
        }
        expect(r.failed, `${w.name} was not rejected within ${w.budget.runs} sequences of up to ${w.budget.maxCommands} commands (seeds ${w.budget.seed} and ${w.budget.seed + 1})`).toBe(true);
        process.stderr.write(`wrong model ${w.name}: rejected after ${r.stats.sequences} sequences, ${r.stats.commands} commands; the rejecting sequence ran ${r.firstFailureLength} commands: ${r.error?.split('\n')[0]}\n`);
        expect(r.sequence, 'the rejecting sequence').toBeDefined();
        await agrees(v.target, r.sequence!, w.name);
      });
    }
  });
}
