// The long tier's gate (harness/fixture.ts longTier): a long test skips, saying how to run it, unless the
// run asked for the tier (hil run --long sets HIL_LONG=1 for its workers).

import { afterEach, expect, test } from 'vitest';
import { longTier } from './fixture.ts';

const before = process.env.HIL_LONG;
afterEach(() => {
  if (before === undefined) delete process.env.HIL_LONG;
  else process.env.HIL_LONG = before;
});

function gate(): Array<[boolean, string | undefined]> {
  const calls: Array<[boolean, string | undefined]> = [];
  longTier({ skip: (c, note) => void calls.push([c, note]) });
  return calls;
}

test('without --long the test skips with a note naming hil run --long and hil nightly', () => {
  delete process.env.HIL_LONG;
  const [[skips, note]] = gate() as [[boolean, string]];
  expect(skips).toBe(true);
  expect(note).toContain('hil run --long');
  expect(note).toContain('hil nightly');
});

test('with HIL_LONG=1 it runs; any other value does not turn the tier on', () => {
  process.env.HIL_LONG = '1';
  expect(gate()[0]![0]).toBe(false);
  process.env.HIL_LONG = 'yes';
  expect(gate()[0]![0]).toBe(true);
});
