// The fixture's side of cycleFree (fixture.ts): the file that declares it gets its `target` opened with the
// stepped file clock (the sim target then starts the stack stepped: targets/file-clock.test.ts).

import { cycleFree, expect, test } from './fixture.ts';

cycleFree();

test('a file that declared cycleFree() gets its file stack on the stepped clock', { timeout: 120_000 }, async ({ description }) => {
  expect((description as unknown as { clock?: unknown }).clock).toBe('stepped');
});
