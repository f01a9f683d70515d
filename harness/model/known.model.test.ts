// Defects of the reference stack the model found (harness/model/variants.ts KNOWN_DEFECTS): each minimal
// sequence replayed with the documented rules is an expected failure, with its reason. When sims/ is fixed
// the test passes unexpectedly (vitest reports test.fails that pass as failures), and the entry goes.

import { covers, describe, sharedVariant, test } from '../fixture.ts';
import { replaySequence, MODEL_VARIANT } from './commands.ts';
import { KNOWN_DEFECTS } from './variants.ts';

describe('defects of the reference stack found by the model (expected failures)', () => {
  const v = sharedVariant(MODEL_VARIANT);
  if (KNOWN_DEFECTS.length === 0) test('none known', ({ skip }) => skip('the model knows no defect of the reference stack today'));
  for (const d of KNOWN_DEFECTS) {
    test.fails(`${d.name}: ${d.reason}`, covers(...d.covers), async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot);
      // The sequence is short but timed (a legacy jog lives at most 250 ms): a run the timing spoiled is
      // tried again, up to three times; the first that shows the defect is the expected failure.
      for (let i = 0; i < 3; i++) await replaySequence(v.target, d.sequence);
    });
  }
});
