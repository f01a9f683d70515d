// When the paced replay's worker loop looks at its verdict again (worker-loop.ts VerdictLooks): not at every
// hold of a test that sends requests back to back, but once the core has stood held for a whole period with
// nothing coming in, and then at a long interval while it stays so.

import { expect, test } from 'vitest';
import { VERDICT_LOOK_PERIODS, VerdictLooks } from './worker-loop.ts';

test('the verdict is looked at once per quiet spell of a held core, then every VERDICT_LOOK_PERIODS periods; activity starts a new spell', () => {
  const looks = new VerdictLooks();
  // Requests back to back: the core holds at each, but no held period passes, so nothing is looked at.
  for (let i = 0; i < 50; i++) looks.activity();
  const seen: number[] = [];
  for (let k = 0; k < 2 * VERDICT_LOOK_PERIODS + 1; k++) if (looks.heldPeriod()) seen.push(k);
  expect(seen).toEqual([0, VERDICT_LOOK_PERIODS, 2 * VERDICT_LOOK_PERIODS]);
  // A message in the middle of a quiet spell: the first quiet period after it looks again.
  looks.activity();
  expect(looks.heldPeriod()).toBe(true);
  expect(looks.heldPeriod()).toBe(false);
});
