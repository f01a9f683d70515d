// The order of fence decisions (replay-timing.ts FenceOrder): noted in a recording, held to it on a replay.

import { afterEach, expect, test, vi } from 'vitest';
import { FENCE_HOLD_MS, FenceOrder } from './replay-timing.ts';

afterEach(() => vi.useRealTimers());

test('recording: every fence decision but renewals is noted in order with its outcome; a live run never holds one', () => {
  const notes: string[] = [];
  const f = new FenceOrder((d) => notes.push(`${d.op}:${d.outcome}`));
  expect(f.gate('release')).toBeNull();
  f.passed('reset_fault', 'ok');
  f.passed('renew', 'ok');
  f.passed('reset_fault', 'ok');
  f.passed('release', 'control_session_stale');
  expect(notes).toEqual(['reset_fault:ok', 'reset_fault:ok', 'release:control_session_stale']);
  expect(f.replaying).toBe(false);
});

test('replay: a release racing a reset_fault is held until the reset_fault decisions recorded before it are taken', async () => {
  const f = new FenceOrder();
  f.load(['reset_fault', 'renew', 'reset_fault', 'release', 'halt']);
  expect(f.replaying).toBe(true);
  // reset_fault arrives first and passes its fence at once, then waits (for a status publication)
  expect(f.gate('reset_fault')).toBeNull();
  f.passed('reset_fault', 'ok');
  // release arrives now: on a live run it would win the race; the recording says it came after the second reset_fault check
  const held = f.gate('release');
  expect(held).not.toBeNull();
  let released = false;
  void held!.then(() => (released = true));
  await Promise.resolve();
  expect(released).toBe(false);
  // a renewal is neither held nor counted
  expect(f.gate('renew')).toBeNull();
  f.passed('renew', 'ok');
  await Promise.resolve();
  expect(released).toBe(false);
  // reset_fault's check after its await is the recorded next decision: the release goes on after it
  expect(f.gate('reset_fault')).toBeNull();
  f.passed('reset_fault', 'ok');
  await held;
  expect(released).toBe(true);
  f.passed('release', 'control_session_stale');
  expect(f.gate('halt')).toBeNull();
  // a decision the recording does not have within its look-ahead is not held
  expect(f.gate('stop')).toBeNull();
  expect(f.held).toBe(1);
  expect(f.timedOut).toBe(0);
});

test('replay: a decision held for recorded ones the live run never takes goes on after FENCE_HOLD_MS, skipping them', async () => {
  vi.useFakeTimers();
  const lost: string[] = [];
  const f = new FenceOrder(undefined, (op) => lost.push(op));
  f.load(['enable', 'arm', 'halt']);
  const held = f.gate('halt')!;
  let done = false;
  void held.then(() => (done = true));
  await vi.advanceTimersByTimeAsync(FENCE_HOLD_MS - 1);
  expect(done).toBe(false);
  expect(lost).toEqual([]);
  await vi.advanceTimersByTimeAsync(1);
  expect(done).toBe(true);
  expect(f.timedOut).toBe(1);
  // reported as a lost hold of the held decision (the pacer's verdict, sims/replay/sync-points.ts)
  expect(lost).toEqual(['halt']);
  // the skipped decisions are gone: the next halt is not held
  f.passed('halt', 'ok');
  expect(f.gate('enable')).toBeNull();
});

test('replay across a core restart: decisions taken after the log ran out count against the next incarnation\'s log when it is loaded, so the one after them is not held', async () => {
  vi.useFakeTimers();
  const lost: string[] = [];
  const f = new FenceOrder(undefined, (op) => lost.push(op));
  f.load(['home']);
  f.passed('home', 'ok');
  // the core dies; the test's cleanup release is decided before the next incarnation's pacer cues its log
  expect(f.gate('release')).toBeNull();
  f.passed('release', 'daemon_restarted');
  f.load(['release', 'stop']);
  expect(f.gate('stop')).toBeNull();
  f.passed('stop', 'daemon_restarted');
  expect(lost).toEqual([]);
  // a decision not in the next log is no recorded one: it does not take the place of another
  f.load(['halt']);
  f.passed('halt', 'ok');
  f.passed('enable', 'ok');
  f.load(['release', 'stop']);
  const held = f.gate('stop');
  expect(held).not.toBeNull();
  await vi.advanceTimersByTimeAsync(FENCE_HOLD_MS);
  expect(lost).toEqual(['stop']);
});

test('replay: the decisions of a polled request (sync-points.ts fenceDecisions) are taken in order but never held for, so a live side that polled fewer times holds nothing, and one that repeats a refusal on purpose keeps its place', () => {
  // suites/trajectory/upload.test.ts "one upload at a time": the third upload polled busy twice when recorded.
  const fewer = new FenceOrder();
  fewer.load(['prepare_trajectory', 'prepare_trajectory', 'prepare_trajectory', 'release'], undefined, [false, true, false, false]);
  fewer.passed('prepare_trajectory', 'ok'); // the live side polled once: busy
  fewer.passed('prepare_trajectory', 'ok'); // then admitted
  expect(fewer.gate('release')).toBeNull(); // not held for the recorded second poll (2 s in vain before)
  // suites/jog/jog.test.ts: two jogs refused alike on purpose, then one admitted, then a halt.
  const same = new FenceOrder();
  same.load(['jog', 'jog', 'jog', 'halt'], ['invalid_request_envelope', 'invalid_request_envelope', 'ok', 'ok'], [false, true, false, false]);
  same.passed('jog', 'invalid_request_envelope');
  expect(same.gate('jog')).toBeNull();
  same.passed('jog', 'invalid_request_envelope'); // takes the polled entry, not the admitted jog's
  expect(same.recordedOutcome('jog')).toBe('ok');
  expect(same.gate('jog')).toBeNull(); // the admitted jog finds its own entry next, nothing before it to wait for
  same.passed('jog', 'ok');
  expect(same.gate('halt')).toBeNull();
});
