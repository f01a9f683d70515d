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

/** The mismatch text when `seq` with `rules` is refuted (in any of `tries` tries), else undefined. */
async function rejects(target: Target, seq: readonly Spec[], rules: Rules, tries = 2): Promise<string | undefined> {
  for (let i = 0; i < tries; i++) {
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

    // HIL_MODEL_VARIANTS=a,b: only the variants named (a search of a few).
    const only = process.env.HIL_MODEL_VARIANTS?.split(',').filter(Boolean);
    for (const w of WRONG_MODELS.filter(pick).filter((x) => !only || only.includes(x.name))) {
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
        // the stack's timing varies between runs, so a budget that ran out is tried once more with the next
        // seed. A rejection counts only when it is the variant's rule: the rejecting sequence, replayed, is
        // rejected again with the variant and agrees with the documented rules (a mismatch the stack's timing
        // made once, and the documented rules then explain, is no rejection: the search goes on).
        const tried: string[] = [];
        for (const seed of [w.budget.seed, w.budget.seed + 1]) {
          const r = await checkModel({ target: v.target, rules: rulesOf(w), seed, numRuns: w.budget.runs, maxCommands: w.budget.maxCommands, endOnFailure: true });
          if (!r.failed || !r.sequence) {
            tried.push(`seed ${seed}: not rejected in ${r.stats.sequences} sequences, ${r.stats.commands} commands`);
            continue;
          }
          const what = r.error?.split('\n')[0];
          // Timing (a lease, a legacy jog's 250 ms) may decide a rule's reach: two tries to see it again, one for the documented rules.
          const again = await rejects(v.target, r.sequence, rulesOf(w), 2);
          const documented = again === undefined ? undefined : await rejects(v.target, r.sequence, rulesWithKnownDefects(), 1);
          if (again === undefined || documented !== undefined) {
            tried.push(`seed ${seed}: a rejection that is not the variant's rule after ${r.stats.sequences} sequences (${what}; replayed: ${again === undefined ? 'not rejected again' : `the documented rules fail too: ${documented!.split('\n')[0]}`})`);
            continue;
          }
          // The figures the variant's budget records (variants.ts `needed`, `runs`): the sequence that rejected it and how many sequences it took.
          process.stderr.write(`wrong model ${w.name}: rejected at seed ${seed} in sequence ${r.numRuns} of ${w.budget.runs} (${r.stats.commands} commands in all); the rejecting sequence ran ${r.firstFailureLength} commands: ${what}\n`);
          return;
        }
        expect.fail(`${w.name} was not rejected within ${w.budget.runs} sequences of up to ${w.budget.maxCommands} commands: ${tried.join('; ')}`);
      });
    }
  });
}
