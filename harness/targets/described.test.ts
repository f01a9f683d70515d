// On a target with a stack per test the file's Describe follows the test's stack: the object the tests
// hold gets the new stack's incarnations in place; a target the file never described is left alone; a
// refused Describe is an error, never a silently stale description.

import { expect, test } from 'vitest';
import { forgetDescription, refreshDescriptions, rememberDescription } from './described.ts';

function fakeTarget(replies: Array<Record<string, unknown>>, status = 200) {
  let calls = 0;
  return {
    get calls() {
      return calls;
    },
    client: () => ({
      describe: async () => ({ status, reply: { data: replies[Math.min(calls++, replies.length - 1)], error: status === 200 ? undefined : 'nope' } }),
    }),
  };
}

test('a held description takes the fresh stack\'s fields in place (same object), dropping fields the new one lacks', async () => {
  const t = fakeTarget([{ daemon_incarnation: 'd2', adapter_incarnation: 'a2', cycle_ns: 1_000_000n }]);
  const held: Record<string, unknown> = { daemon_incarnation: 'd1', adapter_incarnation: 'a1', cycle_ns: 1_000_000n, gone: true };
  const ref = held;
  rememberDescription(t, held);
  try {
    await refreshDescriptions([t]);
  } finally {
    forgetDescription(t);
  }
  expect(ref).toBe(held);
  expect(held).toEqual({ daemon_incarnation: 'd2', adapter_incarnation: 'a2', cycle_ns: 1_000_000n });
});

test('a target whose description no file holds is not described; a forgotten one neither', async () => {
  const t = fakeTarget([{ daemon_incarnation: 'd2' }]);
  await refreshDescriptions([t]);
  rememberDescription(t, { daemon_incarnation: 'd1' });
  forgetDescription(t);
  await refreshDescriptions([t]);
  expect(t.calls).toBe(0);
});

test('a refused Describe of the fresh stack is an error naming the status', async () => {
  const t = fakeTarget([{}], 503);
  rememberDescription(t, { daemon_incarnation: 'd1' });
  try {
    await expect(refreshDescriptions([t])).rejects.toThrow(/describe answered 503/);
  } finally {
    forgetDescription(t);
  }
});
