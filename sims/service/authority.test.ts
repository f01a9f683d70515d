// The grant authority with a controllable clock: the fence table of docs/profile.md row by row,
// including the stopping rows that a conformance run can only reach in a race.

import { expect, test, vi } from 'vitest';
import { Authority, type AuthorityTiming, type Grant } from './authority.ts';
import { Refusal, type Request } from './envelope.ts';
import type { Recorded, Takens } from './timing.ts';
import type { LeaseNotice } from '../../drivers/replay/tap.ts';

/** A decision log for the authority built from answers per kind (timing.ts DecisionLog), each defaulting to the live one. */
function fakeLog(o: { leaseOnClock: () => boolean; fenced?: (op: string, outcome: string) => void; expiredAtFence?: (op: string) => boolean; grantEnded?: () => void; leaseNotice?: () => LeaseNotice | undefined }): AuthorityTiming {
  return {
    get leaseOnClock() {
      return o.leaseOnClock();
    },
    took: ((k: keyof Takens, ...f: string[]) => {
      if (k === 'fence') o.fenced?.(f[0]!, f[1]!);
      if (k === 'grant_ended') o.grantEnded?.();
    }) as AuthorityTiming['took'],
    recorded: ((k: keyof Recorded, op?: string) => (k === 'expired_at_fence' ? (o.expiredAtFence?.(op!) ?? false) : o.leaseNotice?.())) as AuthorityTiming['recorded'],
  };
}

const binding = { pair_id: 'p', revision: 1n, configuration_sha256: 'c'.repeat(64), machine_sha256: 'm'.repeat(64) };

function setup(ceilingMs = 500n) {
  let now = 1_000_000_000n;
  const events: string[] = [];
  const a = new Authority(binding, ceilingMs, {
    now: () => now,
    daemonIncarnation: () => 'd',
    event: (type) => events.push(type),
    nativeGrant: () => undefined,
  });
  const acquire = (extra: Partial<Request> = {}) => {
    const r = a.acquire({ schema: 's', operation: 'acquire', controller: 'c', binding, ...extra } as Request, JSON.stringify(extra, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v)));
    return r.body.data as { session: string; generation: bigint; lease_ms: bigint };
  };
  return { a, events, acquire, advance: (ms: number) => (now += BigInt(ms) * 1_000_000n) };
}

function label(f: () => unknown): string {
  try {
    f();
    return 'ok';
  } catch (e) {
    if (e instanceof Refusal) return e.label;
    throw e;
  }
}

test('fence table: never issued, malformed, zero generation, wrong generation per operation', () => {
  const { a, acquire } = setup();
  const g = acquire();
  expect(label(() => a.fence('renew', 'ab'.repeat(32), 1n))).toBe('fence');
  expect(label(() => a.fence('renew', 'XY', 1n))).toBe('control_session_stale');
  expect(label(() => a.fence('renew', g.session, 0n))).toBe('control_session_stale');
  expect(label(() => a.fence('renew', g.session, g.generation + 1n))).toBe('control_session_stale');
  expect(label(() => a.fence('halt', g.session, g.generation + 1n))).toBe('wrong_generation');
  expect(label(() => a.fence('mark_telemetry', g.session, g.generation + 1n))).toBe('control_session_stale');
  expect(label(() => a.fence('halt', g.session, g.generation))).toBe('ok');
});

test('expiry: renew, release and stop answer expired; halt answers no_grant; others control_session_stale', () => {
  const { a, acquire, advance, events } = setup();
  const g = acquire({ requested_lease_ms: 100n });
  advance(101);
  expect(label(() => a.fence('renew', g.session, g.generation))).toBe('expired');
  expect(events).toContain('grant_expired');
  expect(label(() => a.fence('release', g.session, g.generation))).toBe('expired');
  expect(label(() => a.fence('stop', g.session, g.generation))).toBe('expired');
  expect(label(() => a.fence('halt', g.session, g.generation))).toBe('no_grant');
  expect(label(() => a.fence('enable', g.session, g.generation))).toBe('control_session_stale');
});

test('stopping: a stop advances the generation; renew and stop accept the older one; motion is refused; release works', () => {
  const { a, acquire } = setup();
  const g = acquire();
  const grant = a.fence('stop', g.session, g.generation) as Grant;
  a.beginStop(grant);
  expect(grant.stopping).toBe(true);
  expect(grant.generation).toBe(g.generation + 1n);
  expect(label(() => a.fence('renew', g.session, g.generation))).toBe('ok');
  expect(label(() => a.fence('stop', g.session, g.generation))).toBe('ok');
  expect(label(() => a.fence('halt', g.session, grant.generation))).toBe('inhibited');
  expect(label(() => a.fence('enable', g.session, grant.generation))).toBe('control_session_stale');
  // a new acquire waits for the drain
  a.release(grant);
  expect(label(() => acquire())).toBe('control_session_stale');
  a.drained();
  expect(label(() => acquire())).toBe('ok');
});

test('the drain revokes the stopping grant', () => {
  const { a, acquire, events } = setup();
  const g = acquire();
  a.beginStop(a.fence('stop', g.session, g.generation));
  a.drained();
  expect(events.at(-1)).toBe('grant_revoked');
  expect(label(() => a.fence('renew', g.session, g.generation + 1n))).toBe('control_session_stale');
});

test('a core loss turns current sessions into daemon_restarted', () => {
  const { a, acquire } = setup();
  const g = acquire();
  a.coreLost();
  expect(label(() => a.fence('renew', g.session, g.generation))).toBe('daemon_restarted');
});

test('lease is min(request, ceiling) with the 500 ms default', () => {
  expect(setup(300n).acquire().lease_ms).toBe(300n);
  expect(setup(3000n).acquire().lease_ms).toBe(500n);
  expect(setup(3000n).acquire({ requested_lease_ms: 2000n }).lease_ms).toBe(2000n);
});

test('the core\'s lease notice on a replay takes the recorded decision, whatever the live clock says: expired (the grant is left to the cued expiry and no longer holds its lease), retold, or nothing; outside a replay the clock decides', () => {
  let now = 1_000_000_000n;
  const notices: Array<'expired' | 'retold' | 'none' | undefined> = [];
  const native: Array<[bigint | null, string | undefined]> = [];
  const a = new Authority(binding, 500n, {
    now: () => now,
    daemonIncarnation: () => 'd',
    event: () => undefined,
    nativeGrant: (g, why) => native.push([g?.generation ?? null, why]),
    timing: fakeLog({ leaseOnClock: () => false, leaseNotice: () => notices.shift() }),
  });
  const g = a.acquire({ schema: 's', operation: 'acquire', controller: 'c', binding } as Request, '{}').body.data as { session: string; generation: bigint };
  native.length = 0;
  // Recorded: retold. The live clock is far before the deadline either way.
  notices.push('retold');
  a.nativeLeaseExpired(g.generation);
  expect(native).toEqual([[g.generation, undefined]]);
  expect(a.holdsLease(a.current!)).toBe(true);
  // Recorded: nothing.
  notices.push('none');
  a.nativeLeaseExpired(g.generation);
  expect(native).toHaveLength(1);
  // Recorded: expired. Not ended now (the live deadline is ahead): marked, and ended by the cued expiry.
  notices.push('expired');
  a.nativeLeaseExpired(g.generation);
  expect(native).toHaveLength(1);
  expect(a.current?.generation).toBe(g.generation);
  expect(a.holdsLease(a.current!)).toBe(false);
  expect(a.expireGeneration(g.generation)).toBe(true);
  expect(a.current).toBeNull();
  expect(native).toEqual([[g.generation, undefined], [null, 'expired']]);
  // A notice of another generation takes its decision too (the notices are taken in order) and changes nothing.
  const h = a.acquire({ schema: 's', operation: 'acquire', controller: 'c', binding } as Request, '{}').body.data as { session: string; generation: bigint };
  notices.push('expired', 'retold');
  a.nativeLeaseExpired(h.generation + 5n);
  a.nativeLeaseExpired(h.generation);
  expect(a.holdsLease(a.current!)).toBe(true);
  // Outside a replay (no recorded decision) the clock decides: past the deadline the grant ends at once.
  now += 10_000_000_000n;
  a.nativeLeaseExpired(h.generation);
  expect(a.current).toBeNull();
});

test('replaying a format 2 recording: the lease never runs out on the service clock, only where the timing says (expireGeneration), and the core is told why', () => {
  let now = 1_000_000_000n;
  let replaying = true;
  const events: string[] = [];
  const native: Array<[bigint | null, string | undefined]> = [];
  const fenced: string[] = [];
  let ended = 0;
  const a = new Authority(binding, 500n, {
    now: () => now,
    daemonIncarnation: () => 'd',
    event: (type) => events.push(type),
    nativeGrant: (g, why) => native.push([g?.generation ?? null, why]),
    timing: fakeLog({ leaseOnClock: () => !replaying, fenced: (op, outcome) => void fenced.push(`${op}:${outcome}`), grantEnded: () => void ended++ }),
  });
  const r = a.acquire({ schema: 's', operation: 'acquire', controller: 'c', binding } as Request, '{}');
  const g = r.body.data as { session: string; generation: bigint };
  now += 10_000_000_000n; // far past the 500 ms deadline on the (recorded) service clock
  expect(label(() => a.fence('halt', g.session, g.generation))).toBe('ok');
  expect(a.current?.generation).toBe(g.generation);
  // a recorded expiry of another generation changes nothing; of this one, ends it as a lease expiry does
  expect(a.expireGeneration(g.generation + 1n)).toBe(false);
  expect(a.expireGeneration(g.generation)).toBe(true);
  expect(ended).toBe(1); // the timing is told the grant ended (a hold on a cued expiry looks again)
  expect(events).toEqual(['grant_acquired', 'grant_expired']);
  expect(native).toEqual([[g.generation, undefined], [null, 'expired']]);
  expect(label(() => a.fence('renew', g.session, g.generation))).toBe('expired');
  // every fence decision is reported in order with its outcome (what a recording notes)
  expect(fenced).toEqual(['halt:ok', 'renew:expired']);
  // outside a replay the same clock ends the lease lazily at the next fence check
  replaying = false;
  const r2 = a.acquire({ schema: 's', operation: 'acquire', controller: 'c', binding } as Request, '{}');
  const g2 = r2.body.data as { session: string; generation: bigint };
  now += 600_000_000n;
  expect(label(() => a.fence('halt', g2.session, g2.generation))).toBe('no_grant');
  expect(native.at(-1)).toEqual([null, 'expired']);
  // every way a grant ends tells the timing: the lazy expiry above, and a core lost (no nativeGrant then)
  expect(ended).toBe(2);
  a.acquire({ schema: 's', operation: 'acquire', controller: 'c', binding } as Request, '{}');
  a.coreLost();
  expect(ended).toBe(3);
});

/** A replaying service's authority (the lease not on its own clock) on a clock the test sets, with one grant acquired at 1 s. */
function replayingAuthority() {
  const clock = { now: 1_000_000_000n };
  const events: Array<[string, bigint]> = [];
  const a = new Authority(binding, 500n, {
    now: () => clock.now,
    daemonIncarnation: () => 'd',
    event: (type) => void events.push([type, clock.now]),
    nativeGrant: () => undefined,
    timing: fakeLog({ leaseOnClock: () => false }),
  });
  const r = a.acquire({ schema: 's', operation: 'acquire', controller: 'c', binding } as Request, '{}');
  return { a, events, clock, g: r.body.data as { generation: bigint; deadline_host_ns: bigint } };
}

test('replaying: an expiry the timing cues before the grant\'s deadline (on the live clock) ends the grant at the deadline, not before', async () => {
  vi.useFakeTimers();
  try {
    const { a, events, clock, g } = replayingAuthority();
    expect(g.deadline_host_ns).toBe(clock.now + 500_000_000n); // the acquire's deadline is the service's clock plus the lease
    clock.now = g.deadline_host_ns - 2_500_000n; // the cue comes 2.5 ms before the live deadline
    expect(a.expireGeneration(g.generation, 0n)).toBe(true);
    expect(a.current?.generation).toBe(g.generation);
    clock.now = g.deadline_host_ns - 100n; // the timer fired a little early: look again
    await vi.advanceTimersByTimeAsync(3);
    expect(a.current?.generation).toBe(g.generation);
    clock.now = g.deadline_host_ns;
    await vi.advanceTimersByTimeAsync(1);
    expect(a.current).toBeNull();
    expect(events).toEqual([['grant_acquired', 1_000_000_000n], ['grant_expired', g.deadline_host_ns]]);
  } finally {
    vi.useRealTimers();
  }
});

test('replaying: an expiry cued before the core reached it, with the recorded 3 ms after the deadline, ends the grant 3 ms after its live deadline (as renewals moved it)', async () => {
  vi.useFakeTimers();
  try {
    const { a, events, clock, g } = replayingAuthority();
    expect(a.expireGeneration(g.generation, 3_000_000n)).toBe(true);
    clock.now = g.deadline_host_ns - 100_000_000n;
    a.renew(a.current!); // a live renewal after the cue: 400 ms later
    const deadline = a.current!.deadlineNs;
    expect(deadline).toBe(g.deadline_host_ns + 400_000_000n);
    clock.now = g.deadline_host_ns + 3_000_000n; // the first deadline plus 3 ms: the renewal moved it
    await vi.advanceTimersByTimeAsync(500);
    expect(a.current?.generation).toBe(g.generation);
    clock.now = deadline + 2_900_000n;
    await vi.advanceTimersByTimeAsync(400);
    expect(a.current?.generation).toBe(g.generation);
    clock.now = deadline + 3_000_000n;
    await vi.advanceTimersByTimeAsync(3);
    expect(a.current).toBeNull();
    expect(events.at(-1)).toEqual(['grant_expired', deadline + 3_000_000n]);
  } finally {
    vi.useRealTimers();
  }
});

test('replaying: where the recorded service found the lease run out at a fence check (release answered expired), the live one ends it there too, before deciding', () => {
  const events: string[] = [];
  const recorded: Record<string, string> = { halt: 'ok', release: 'expired' };
  const a = new Authority(binding, 500n, {
    now: () => 1_000_000_000n, // the replayed service clock has not reached the deadline
    daemonIncarnation: () => 'd',
    event: (type) => events.push(type),
    nativeGrant: () => undefined,
    timing: fakeLog({ leaseOnClock: () => false, expiredAtFence: (op) => recorded[op] === 'expired' }),
  });
  const g = a.acquire({ schema: 's', operation: 'acquire', controller: 'c', binding } as Request, '{}').body.data as { session: string; generation: bigint };
  expect(label(() => a.fence('halt', g.session, g.generation))).toBe('ok');
  expect(a.current?.generation).toBe(g.generation);
  expect(label(() => a.fence('release', g.session, g.generation))).toBe('expired');
  expect(a.current).toBeNull();
  expect(events).toEqual(['grant_acquired', 'grant_expired']);
});
