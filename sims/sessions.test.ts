// The stack host's own bookkeeping (sims/sessions.ts): a session's environment is set for it and taken back
// exactly, and what a session leaves running is told by kind and count. The sessions themselves are tested
// through the harness's hosts (harness/targets/stack-host.test.ts).

import { afterEach, expect, test } from 'vitest';
import { leftBehind, overlayEnv } from './sessions.ts';

const KEYS = ['HIL_SESSIONS_TEST_A', 'HIL_SESSIONS_TEST_B'];
afterEach(() => {
  for (const k of KEYS) delete process.env[k];
});

test('a session\'s environment is set for it and taken back: a value it replaced comes back, one it added goes', () => {
  process.env.HIL_SESSIONS_TEST_A = 'before';
  const restore = overlayEnv({ HIL_SESSIONS_TEST_A: 'session', HIL_SESSIONS_TEST_B: 'added' });
  expect(process.env.HIL_SESSIONS_TEST_A).toBe('session');
  expect(process.env.HIL_SESSIONS_TEST_B).toBe('added');
  restore();
  expect(process.env.HIL_SESSIONS_TEST_A).toBe('before');
  expect('HIL_SESSIONS_TEST_B' in process.env).toBe(false);
});

test('what a session left running is counted by kind: one more timer of a kind already there is one left behind', async () => {
  const before = process.getActiveResourcesInfo();
  expect(leftBehind(before)).toEqual([]);
  const t1 = setTimeout(() => undefined, 60_000);
  const t2 = setTimeout(() => undefined, 60_000);
  try {
    expect(leftBehind(before).filter((r) => r === 'Timeout')).toEqual(['Timeout', 'Timeout']);
    // Taken as the baseline, the same two are not left behind.
    expect(leftBehind(process.getActiveResourcesInfo())).toEqual([]);
  } finally {
    clearTimeout(t1);
    clearTimeout(t2);
  }
  expect(leftBehind(before)).toEqual([]);
});
