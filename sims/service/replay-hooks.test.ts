// The lease_expiry sync point on the service's side (replay-hooks.ts recordedExpiryTurn): a decision the
// recorded service refused because the lease had already run out waits, on a replay, for the cued expiry;
// nothing else waits, and a wait in vain is reported as a lost hold.

import { afterEach, expect, test, vi } from 'vitest';
import type { CoreLink } from './core-link.ts';
import { REPLAY_WAIT_MS } from './core-waits.ts';
import { FenceOrder } from './fence-order.ts';
import { recordedExpiryTurn } from './replay-hooks.ts';

afterEach(() => vi.useRealTimers());

function fakeCore(replaying: boolean, ops: string[], outcomes: string[]) {
  const lost: string[] = [];
  const fenceOrder = new FenceOrder();
  if (replaying) fenceOrder.load(ops, outcomes);
  const core = { replaying, fenceOrder, noteHoldLost: (kind: string, detail: string) => lost.push(`${kind}:${detail}`) } as unknown as CoreLink;
  return { core, lost };
}

test('a decision recorded as refused for a lease already gone waits until the live grant ends, then goes on', async () => {
  vi.useFakeTimers();
  const { core, lost } = fakeCore(true, ['halt'], ['no_grant']);
  const authority = { current: { session: 'S', generation: 4n, stopping: false } as never };
  const turn = recordedExpiryTurn(core, authority, 'halt', 'S', 4n);
  expect(turn).not.toBeNull();
  let done = false;
  void turn!.then(() => (done = true));
  await vi.advanceTimersByTimeAsync(500);
  expect(done).toBe(false);
  authority.current = null as never; // the pacer's expiry cue ended the grant
  await vi.advanceTimersByTimeAsync(10);
  expect(done).toBe(true);
  expect(lost).toEqual([]);
});

test('nothing waits: outside a replay, another session, a recorded ok, no such decision recorded, a session already ended, or a decision refused for another reason', () => {
  const authority = { current: { session: 'S', generation: 4n, stopping: false } as never };
  expect(recordedExpiryTurn(fakeCore(false, [], []).core, authority, 'halt', 'S', 4n)).toBeNull();
  expect(recordedExpiryTurn(fakeCore(true, ['halt'], ['no_grant']).core, authority, 'halt', 'T', 4n)).toBeNull();
  expect(recordedExpiryTurn(fakeCore(true, ['halt'], ['ok']).core, authority, 'halt', 'S', 4n)).toBeNull();
  expect(recordedExpiryTurn(fakeCore(true, ['arm'], ['no_grant']).core, authority, 'halt', 'S', 4n)).toBeNull();
  expect(recordedExpiryTurn(fakeCore(true, ['halt'], ['no_grant']).core, { current: null }, 'halt', 'S', 4n)).toBeNull();
  // refused for another reason than the lease: an older generation, a stop in flight
  expect(recordedExpiryTurn(fakeCore(true, ['halt'], ['control_session_stale']).core, authority, 'halt', 'S', 3n)).toBeNull();
  expect(recordedExpiryTurn(fakeCore(true, ['halt'], ['no_grant']).core, { current: { session: 'S', generation: 4n, stopping: true } as never }, 'halt', 'S', 4n)).toBeNull();
  // 'expired' is retaken by the authority's own check at the decision (authority.ts check), not waited for
  expect(recordedExpiryTurn(fakeCore(true, ['halt'], ['expired']).core, authority, 'halt', 'S', 4n)).toBeNull();
});

test('a cued expiry that never comes: the decision goes on after the replay bound and the hold is reported lost', async () => {
  vi.useFakeTimers();
  const { core, lost } = fakeCore(true, ['arm'], ['control_session_stale']);
  const turn = recordedExpiryTurn(core, { current: { session: 'S', generation: 4n, stopping: false } as never }, 'arm', 'S', 4n)!;
  let done = false;
  void turn.then(() => (done = true));
  await vi.advanceTimersByTimeAsync(REPLAY_WAIT_MS - 20);
  expect(done).toBe(false);
  await vi.advanceTimersByTimeAsync(40);
  expect(done).toBe(true);
  expect(lost).toEqual(['lease_expiry:arm']);
});
