// pollPause (poll.ts): the poll loops' pause is the caller's on every target but the replay, where a read is
// a sync point and the pause only costs wall time.

import { afterEach, expect, test, vi } from 'vitest';
import { pollPause } from './poll.ts';

afterEach(() => vi.useRealTimers());

/** Whether the pause has ended after `ms` of fake time. */
async function endedAfter(p: Promise<void>, ms: number): Promise<boolean> {
  let ended = false;
  void p.then(() => (ended = true));
  await vi.advanceTimersByTimeAsync(ms);
  return ended;
}

test('the caller\'s pause on a live target, 1 ms on the replay target', async () => {
  vi.useFakeTimers();
  expect(await endedAfter(pollPause(10, { HIL_TARGET: 'sim' }), 9)).toBe(false);
  expect(await endedAfter(pollPause(10, {}), 10)).toBe(true);
  const live = pollPause(20, { HIL_TARGET: 'external' });
  expect(await endedAfter(live, 19)).toBe(false);
  expect(await endedAfter(live, 1)).toBe(true);
  expect(await endedAfter(pollPause(10, { HIL_TARGET: 'replay' }), 1)).toBe(true);
  expect(await endedAfter(pollPause(0, { HIL_TARGET: 'replay' }), 0)).toBe(true);
});
