// inProfile: a profile decision checked inside a contract test is an assertion on the reference stack and
// an informative difference on someone else's service (DESIGN.md rule 3).

import { afterEach, expect, test } from 'vitest';
import { inProfile, isReferenceTarget, takeProfileDifferences } from './trace.ts';

const saved = process.env.HIL_TARGET;
afterEach(() => {
  if (saved === undefined) delete process.env.HIL_TARGET;
  else process.env.HIL_TARGET = saved;
  takeProfileDifferences();
});

const wrong = () => expect('frobnicate', 'operation of the refusal').toBe('unknown');

test.each(['sim', 'replay', 'rig'])('on the reference stack (%s) a profile check fails the test', async (name) => {
  process.env.HIL_TARGET = name;
  expect(isReferenceTarget()).toBe(true);
  await expect(inProfile('profile:envelope.refusal_operation', wrong)).rejects.toThrow(/operation of the refusal/);
  expect(takeProfileDifferences()).toEqual([]);
});

test('on an external target the difference is noted with its decision and the test goes on', async () => {
  process.env.HIL_TARGET = 'external';
  await inProfile('profile:envelope.refusal_operation', wrong);
  await inProfile('profile:other', () => undefined); // agrees: nothing noted
  const d = takeProfileDifferences();
  expect(d).toHaveLength(1);
  expect(d[0]!.profile).toBe('profile:envelope.refusal_operation');
  expect(d[0]!.message).toMatch(/^operation of the refusal: expected 'frobnicate' to be 'unknown'/);
  expect(takeProfileDifferences()).toEqual([]);
});

test('only profile: ids', async () => {
  await expect(inProfile('reason:unknown_operation', () => undefined)).rejects.toMatchObject({ code: 'HIL_ERR_TRACE' });
});
