// The model's mutation check (harness/model/variants.ts): each wrong-model variant is run against the
// reference stack on the stepped clock with its budget (fixed seed, sequences, commands) and must be
// rejected; the rejecting sequence, replayed with the documented rules (known defects of the stack allowed), must then pass, so the rejection
// is the variant's wrong rule and not a flaky run. A variant rejected this way is what counts its rule as
// covered by the model (covers()). The commands each rejection needed are printed. The tests are shared
// out over two files (mutation-a and mutation-b), so the `model` project's two workers run them side by side.

import { covers, describe, expect, sharedVariant, test } from '../fixture.ts';
import type { WrongModel } from './variants.ts';
import { checkModel, replaySequence } from './commands.ts';
import { WRONG_MODELS, rulesOf, rulesWithKnownDefects } from './variants.ts';

/** The mutation tests of the variants `pick` selects (two files share them out, one worker each). */
export function mutationTests(title: string, pick: (w: WrongModel, i: number) => boolean): void {
  describe(title, () => {
    const v = sharedVariant({ clock: 'stepped' });

    for (const w of WRONG_MODELS.filter(pick)) {
      test(`${w.name}: ${w.wrong}`, w.covers.length ? covers(...w.covers) : {}, async ({ skip }) => {
        skip(w.skip !== undefined, w.skip);
        skip(v.cannot !== undefined, v.cannot);
        // The stack's timing varies between runs (leases and plans are host and core time), so the same
        // seed can take another path: a budget that ran out is tried once more with the next seed.
        let r = await checkModel({ target: v.target, rules: rulesOf(w), seed: w.budget.seed, numRuns: w.budget.runs, maxCommands: w.budget.maxCommands, endOnFailure: true });
        if (!r.failed) {
          process.stderr.write(`wrong model ${w.name}: not rejected with seed ${w.budget.seed}; once more with seed ${w.budget.seed + 1}\n`);
          r = await checkModel({ target: v.target, rules: rulesOf(w), seed: w.budget.seed + 1, numRuns: w.budget.runs, maxCommands: w.budget.maxCommands, endOnFailure: true });
        }
        expect(r.failed, `${w.name} was not rejected within ${w.budget.runs} sequences of up to ${w.budget.maxCommands} commands (seeds ${w.budget.seed} and ${w.budget.seed + 1})`).toBe(true);
        process.stderr.write(`wrong model ${w.name}: rejected after ${r.stats.sequences} sequences, ${r.stats.commands} commands; the rejecting sequence ran ${r.firstFailureLength} commands: ${r.error?.split('\n')[0]}\n`);
        // The same sequence with the documented rules agrees with the stack (a second try absorbs timing).
        expect(r.sequence, 'the rejecting sequence').toBeDefined();
        let last: unknown;
        for (let i = 0; i < 2; i++) {
          try {
            await replaySequence(v.target, r.sequence!, rulesWithKnownDefects());
            return;
          } catch (e) {
            last = e;
          }
        }
        throw new Error(`the sequence that rejected ${w.name} also fails with the documented rules: ${(last as Error).message}`);
      });
    }
  });
}
