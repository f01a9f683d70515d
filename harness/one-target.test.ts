// The fixture's file-scoped target (fixture.ts) is one for the file whichever test API a test uses: vitest
// sets file-scoped fixtures up once for each API (test and recoveringTest, which extends it), and two targets
// were two stacks. On `hil run --record` a test of the second API then had its recording made on one stack
// while its requests went to the other, and its replay never saw them (HIL_ERR_REPLAY_DIVERGED, "the test
// never sent ... of the recorded requests").

import { expect, recoveringTest, test } from './fixture.ts';
import type { Target } from './targets/index.ts';

const seen: Target[] = [];

test('a plain test meets the file target', { timeout: 120_000 }, async ({ target }) => {
  seen.push(target);
  expect((await target.client().status()).status).toBe(200);
});

recoveringTest('a recovering test beside it meets the same target, not a second stack', { timeout: 120_000 }, async ({ target }) => {
  seen.push(target);
  expect(seen).toHaveLength(2);
  expect(seen[1]).toBe(seen[0]);
  expect(target.address).toBe(seen[0]!.address);
});

test('and a plain test after it too', { timeout: 120_000 }, async ({ target }) => {
  seen.push(target);
  expect(seen[2]).toBe(seen[0]);
});
