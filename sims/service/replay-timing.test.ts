// The service's timing on a paced replay (replay-timing.ts ReplayedTiming) against the live one (timing.ts
// LiveTiming): the lease_expiry hold (a decision the recorded service refused because the lease had already
// run out waits for the grant to end; nothing else waits; a wait in vain is a lost hold), the recorded
// expiry at a fence check, and the live timing that holds and notes nothing on a run that does not record.

import { afterEach, expect, test, vi } from 'vitest';
import { CoreWaits, HostTimeMap, REPLAY_WAIT_MS, ReplayedTiming } from './replay-timing.ts';
import { liveRecords } from './telemetry.ts';
import { AX, axisOffset, encodeBatchHeader, HEADER_BYTES, REC, RECORD_BYTES } from '../core/capture/layout.ts';
import { LiveTiming, type TimingLink } from './timing.ts';
import { RecordingTiming } from './recording-timing.ts';
import { HandleTable } from './handles.ts';
import { FENCE_HOLD_MS } from './replay-timing.ts';
import { Authority } from './authority.ts';
import type { Refusal, Request } from './envelope.ts';

afterEach(() => vi.useRealTimers());

/** A replayed timing cued with the recorded fence decisions `ops` and their outcomes; its notes in `notes`. */
function replayed(cued: boolean, ops: string[], outcomes: string[]) {
  const notes: unknown[] = [];
  const t = new ReplayedTiming();
  const link: TimingLink = { status: undefined, statusFrom: async () => true, pollTurn: async () => true, note: (d) => void notes.push(d) };
  t.attach(link);
  if (cued) t.cue({ tap: 'cue', clockNs: 1n, hostClock: false, fences: ops, fenceOutcomes: outcomes });
  const lost = () => notes.filter((n) => (n as { t: string }).t === 'hold_lost').map((n) => `${(n as { kind: string }).kind}:${(n as { detail: string }).detail}`);
  return { t, lost };
}

test('a status read the recorded service served after letting a lease run out waits until the live service has let it run out too, even with its publication there; the reads before it do not wait', async () => {
  vi.useFakeTimers();
  const notes: unknown[] = [];
  const link: TimingLink = { status: { cycle: 30n } as never, statusFrom: async () => true, pollTurn: async () => true, note: (d) => void notes.push(d) };
  const t = new ReplayedTiming();
  t.attach(link);
  // suites/jog/jog.test.ts "lease lost during a jog ...": the third read came after the expiry, served from
  // a publication older than it; the fourth after a second expiry.
  t.cue({ tap: 'cue', clockNs: 1n, hostClock: true, fences: [], fenceOutcomes: [], statusReads: [10n, 20n, 28n, 30n], statusReadExpiries: [0, 0, 1, 2] });
  expect(await t.turn('status_read')).toBeUndefined();
  expect(await t.turn('status_read')).toBeUndefined();
  let served = false;
  void t.turn('status_read')!.then(() => (served = true));
  await vi.advanceTimersByTimeAsync(500);
  expect(served).toBe(false); // the live deadline lies ahead: the live service has not let the lease run out
  t.took('grant_ended', 'released'); // another grant end
  await vi.advanceTimersByTimeAsync(0);
  expect(served).toBe(false);
  t.took('grant_ended', 'expired');
  await vi.advanceTimersByTimeAsync(0);
  expect(served).toBe(true);
  // a second expiry that never comes here: served after the replay bound, and the hold reported lost
  let fourth = false;
  void t.turn('status_read')!.then(() => (fourth = true));
  await vi.advanceTimersByTimeAsync(REPLAY_WAIT_MS - 20);
  expect(fourth).toBe(false);
  await vi.advanceTimersByTimeAsync(40);
  expect(fourth).toBe(true);
  expect(notes).toEqual([{ t: 'hold_lost', kind: 'lease_expiry', detail: 'status read 4 after lease expiry 2' }]);
  // the next incarnation's cue counts its own expiries from its start, and a recording without them holds nothing
  t.cue({ tap: 'cue', clockNs: 1n, hostClock: true, fences: [], fenceOutcomes: [], statusReads: [5n] });
  expect(await t.turn('status_read')).toBeUndefined();
});

test('a decision recorded as refused for a lease already gone waits until the live grant ends (the authority tells the timing), then goes on', async () => {
  vi.useFakeTimers();
  const { t, lost } = replayed(true, ['halt'], ['no_grant']);
  const authority = { current: { session: 'S', generation: 4n, stopping: false } as { session: string; generation: bigint; stopping: boolean } | null };
  const turn = t.turn('session_end', 'halt', 'S', 4n, authority);
  expect(turn).not.toBeNull();
  let done = false;
  void turn!.then(() => (done = true));
  await vi.advanceTimersByTimeAsync(500);
  expect(done).toBe(false);
  t.took('grant_ended', 'superseded'); // told on every grant end: the grant is still this session's, so the decision keeps waiting
  await vi.advanceTimersByTimeAsync(0);
  expect(done).toBe(false);
  authority.current = null; // the pacer's expiry cue ended the grant
  t.took('grant_ended', 'expired');
  await vi.advanceTimersByTimeAsync(0); // no timer needed: the end itself lets the decision go on
  expect(done).toBe(true);
  expect(lost()).toEqual([]);
});

test('the pacer\'s expiry cue reaches the listener the service set (it ends the grant of that generation)', () => {
  const { t } = replayed(true, [], []);
  const expired: Array<[bigint, bigint | undefined]> = [];
  t.onExpiry((g, late) => void expired.push([g, late]));
  t.cue({ tap: 'cue', clockNs: 5n, hostClock: false, expire: { generation: 7n } });
  t.cue({ tap: 'cue', clockNs: 5n, hostClock: false, expire: { generation: 8n, lateNs: 3_000_000n } });
  expect(expired).toEqual([[7n, undefined], [8n, 3_000_000n]]);
});

test('nothing waits: before a cue, another session, a recorded ok, no such decision recorded, a session already ended, or a decision refused for another reason', () => {
  const authority = { current: { session: 'S', generation: 4n, stopping: false } };
  expect(replayed(false, [], []).t.turn('session_end', 'halt', 'S', 4n, authority)).toBeNull();
  expect(replayed(true, ['halt'], ['no_grant']).t.turn('session_end', 'halt', 'T', 4n, authority)).toBeNull();
  expect(replayed(true, ['halt'], ['ok']).t.turn('session_end', 'halt', 'S', 4n, authority)).toBeNull();
  expect(replayed(true, ['arm'], ['no_grant']).t.turn('session_end', 'halt', 'S', 4n, authority)).toBeNull();
  expect(replayed(true, ['halt'], ['no_grant']).t.turn('session_end', 'halt', 'S', 4n, { current: null })).toBeNull();
  // refused for another reason than the lease: an older generation, a stop in flight
  expect(replayed(true, ['halt'], ['control_session_stale']).t.turn('session_end', 'halt', 'S', 3n, authority)).toBeNull();
  expect(replayed(true, ['halt'], ['no_grant']).t.turn('session_end', 'halt', 'S', 4n, { current: { session: 'S', generation: 4n, stopping: true } })).toBeNull();
  // 'expired' is retaken at the decision itself (expiredAtFence), not waited for
  expect(replayed(true, ['halt'], ['expired']).t.turn('session_end', 'halt', 'S', 4n, authority)).toBeNull();
});

test('a cued expiry that never comes: the decision goes on after the replay bound and the hold is reported lost', async () => {
  vi.useFakeTimers();
  const { t, lost } = replayed(true, ['arm'], ['control_session_stale']);
  const turn = t.turn('session_end', 'arm', 'S', 4n, { current: { session: 'S', generation: 4n, stopping: false } })!;
  let done = false;
  void turn.then(() => (done = true));
  await vi.advanceTimersByTimeAsync(REPLAY_WAIT_MS - 20);
  expect(done).toBe(false);
  await vi.advanceTimersByTimeAsync(40);
  expect(done).toBe(true);
  expect(lost()).toEqual(['lease_expiry:arm']);
});

test('the replaying service runs on the live host clock whatever the recorded clock the pacer cues: a client compares its host times with its own (a renewed deadline between its readings around the call)', () => {
  const { t } = replayed(true, [], []);
  t.cue({ tap: 'cue', clockNs: 5_000n, hostClock: true }); // the recording's clock, minutes behind
  const before = process.hrtime.bigint();
  const now = t.now();
  const after = process.hrtime.bigint();
  expect(now >= before && now <= after).toBe(true);
  expect(t.coreOnServiceClock).toBe(true); // the core's time, on a host-clock recording, is host time (translated by the pacer)
  expect(t.leaseOnClock).toBe(false); // the lease still runs out only where the recording says
});

test('a recorded expiry at a fence check: only the decision the recording answered expired, and only once cued; the lease then runs out only where cued', () => {
  const before = replayed(false, ['halt', 'release'], ['ok', 'expired']).t;
  expect(before.recorded('expired_at_fence', 'release')).toBe(false);
  expect(before.leaseOnClock).toBe(true);
  const { t } = replayed(true, ['halt', 'release'], ['ok', 'expired']);
  expect(t.leaseOnClock).toBe(false);
  expect(t.recorded('expired_at_fence', 'halt')).toBe(false);
  expect(t.recorded('expired_at_fence', 'release')).toBe(true);
  t.took('fence', 'release', 'expired'); // taken: no later release was recorded as expired
  expect(t.recorded('expired_at_fence', 'release')).toBe(false);
});

test('the live timing: host clock, nothing held; notes only when recording, never renewals', () => {
  const notes: unknown[] = [];
  const link: TimingLink = { status: undefined, statusFrom: async () => true, pollTurn: async () => true, note: (d) => void notes.push(d) };
  const plain = new LiveTiming();
  plain.attach(link);
  const a = plain.now();
  expect(plain.now()).toBeGreaterThanOrEqual(a);
  const authority = { current: { session: 'S', generation: 4n, stopping: false } };
  expect([plain.turn('fence', 'x'), plain.turn('session_end', 'halt', 'S', 4n, authority), plain.turn('status_read'), plain.turn('commit', 'program'), plain.turn('telemetry_poll'), plain.recorded('expired_at_fence', 'x'), plain.recorded('lease_notice'), plain.leaseOnClock]).toEqual([null, null, null, null, null, false, undefined, true]);
  // The live wait is the caller's bound, and one object for every wait: nothing allocated on the request path.
  expect(plain.wait('inject', 1000).ms).toBeUndefined();
  expect(plain.wait('cmd:arm', 5000)).toBe(plain.wait(null, 50));
  plain.took('fence', 'halt', 'ok');
  plain.took('http_reply', { status: 200, body: { operation: 'enable' } });
  plain.took('status_read', 3n, 9n);
  plain.took('telemetry_read');
  plain.took('watch', 'telemetry', true);
  plain.wait('inject', 1000).done('ok');
  expect(notes).toEqual([]);
  const rec = new RecordingTiming();
  rec.attach(link);
  rec.took('fence', 'renew', 'ok');
  rec.took('fence', 'halt', 'no_grant');
  rec.took('http_reply', { status: 200, body: { operation: 'renew' } });
  rec.took('http_reply', { status: 409, body: { operation: 'arm', error: 'not_ready: axis 2' } });
  rec.took('status_read', undefined, 1n);
  rec.took('status_read', 3n, 9n);
  rec.took('telemetry_read');
  rec.took('watch', 'events', true);
  rec.took('watch', 'events', false);
  const w = rec.wait('inject', 1000);
  expect(w.ms).toBeUndefined(); // the caller's bound
  w.done('timeout');
  rec.wait(null, 50).done('timeout');
  expect(notes).toEqual([
    { t: 'fence', op: 'halt', outcome: 'no_grant' },
    { t: 'http_reply', op: 'arm', status: 409, label: 'not_ready' },
    { t: 'status_read', cycle: 'none', now_ns: '1' }, // served before the core published anything: noted too
    { t: 'status_read', cycle: '3', now_ns: '9' },
    { t: 'telemetry_read' },
    { t: 'watch', stream: 'events', open: true },
    { t: 'watch', stream: 'events', open: false },
    { t: 'core_wait', kind: 'inject', outcome: 'timeout' },
  ]);
});

test('a replayed timing tells the pacer each stream the live test opens (it holds the core at the recorded open), once a cue came; closes only when it records', () => {
  const notes: unknown[] = [];
  const link: TimingLink = { status: undefined, statusFrom: async () => true, pollTurn: async () => true, note: (d) => void notes.push(d) };
  const t = new ReplayedTiming();
  t.attach(link);
  t.took('watch', 'telemetry', true); // before any cue: a live run, nothing to tell
  t.cue({ tap: 'cue', clockNs: 1n, hostClock: false, fences: [], fenceOutcomes: [] });
  t.took('watch', 'telemetry', true);
  t.took('watch', 'telemetry', false);
  expect(notes).toEqual([{ t: 'watch', stream: 'telemetry', open: true }]);
});

test('a telemetry poll on a replay waits for its turn from the core; a turn that never comes is a lost hold; a live run and a replay before its cue poll at once', async () => {
  const notes: unknown[] = [];
  const asked: number[] = [];
  let answer = true;
  const link: TimingLink = { status: undefined, statusFrom: async () => true, pollTurn: async (ms) => (asked.push(ms), answer), note: (d) => void notes.push(d) };
  const live = new RecordingTiming();
  live.attach(link);
  expect(live.turn('telemetry_poll')).toBeNull();
  const t = new ReplayedTiming();
  t.attach(link);
  expect(t.turn('telemetry_poll')).toBeNull(); // no cue yet: not a paced replay
  t.cue({ tap: 'cue', clockNs: 1n, hostClock: false, fences: [], fenceOutcomes: [] });
  await t.turn('telemetry_poll');
  expect(asked).toEqual([10_000]); // the pacer's hold bound
  expect(notes).toEqual([]);
  answer = false;
  await t.turn('telemetry_poll');
  expect(notes).toEqual([{ t: 'hold_lost', kind: 'telemetry_poll', detail: "the recorded poll's cycle" }]);
});

test('host times of the replayed core in the live time base (HostTimeMap): moved by the last meeting\'s difference, so the times between records stay the recorded ones; a held cycle before the hold\'s end; a time the live side sent as sent; 0 as 0', () => {
  const m = new HostTimeMap();
  expect(m.live(1_000n, true)).toBe(1_000n); // no anchor yet: as recorded
  const L = process.hrtime.bigint() - 10_000_000_000n; // live times in the past of the live clock
  m.anchor(1_000_000n, L); // the start: the core at recorded 1 ms at live L
  m.anchor(5_000_000n, L + 9_000_000n); // held at recorded 5 ms; a status read served there at L+9 ms ...
  m.anchor(5_000_000n, L + 30_000_000n); // ... and the request it waited for handed over at L+30 ms (the last counts)
  expect(m.live(3_000_000n, true)).toBe(L + 2_000_000n);
  expect(m.live(5_000_000n, true)).toBe(L + 4_000_000n); // the held cycle ran before the hold
  expect(m.live(5_001_000n, true)).toBe(L + 30_001_000n); // after it: from where the hold ended
  expect(m.live(7_000_000n, true) - m.live(5_001_000n, true)).toBe(1_999_000n); // the recorded spacing
  expect(m.live(500_000n, true)).toBe(L - 500_000n); // before the first anchor: its difference
  expect(m.live(0n, false)).toBe(0n);
  m.pair(9_500_000_000n, 123n);
  expect(m.live(9_500_000_000n, false)).toBe(123n); // a deadline the live side sent
  // a time the core has reached is never later than the live clock; a deadline may lie ahead
  const ahead = 20_000_000_000n;
  expect(m.live(5_000_000n + ahead, true) <= process.hrtime.bigint()).toBe(true);
  expect(m.live(5_000_000n + ahead, false)).toBe(L + 30_000_000n + ahead);
});

test('telemetry on a replay (liveRecords): each record\'s grant and jog deadlines always, its time and the axes\' feedback times only when the core\'s time is host time; other fields untouched', () => {
  const axes = 2;
  const batch = new Uint8Array(HEADER_BYTES + 2 * RECORD_BYTES);
  encodeBatchHeader({ adapter_incarnation: 'a'.repeat(32), daemon_incarnation: 'b'.repeat(32), machine_sha256: 'c'.repeat(64), deployment_sha256: 'd'.repeat(64), cycle_period_ns: 1_000_000n, first_sequence: 1n, last_sequence: 2n, dropped: 0n, axis_count: axes, record_count: 2 }, batch);
  const dv = new DataView(batch.buffer);
  const at = (r: number, off: number) => HEADER_BYTES + r * RECORD_BYTES + off;
  for (const r of [0, 1]) {
    dv.setBigUint64(at(r, REC.t_ns), 100n + BigInt(r), true);
    dv.setBigUint64(at(r, REC.grant_deadline_host_ns), 500n, true);
    dv.setBigUint64(at(r, REC.jog_input_deadline_host_ns), 0n, true);
    dv.setBigUint64(at(r, REC.cycle), 7n, true);
    for (let a = 0; a < axes; a++) dv.setBigUint64(at(r, axisOffset(a) + AX.pdo_observed_time_ns), 90n, true);
  }
  const copy = batch.slice();
  const shift = { coreTimeIsHost: true, live: (t: bigint, past: boolean) => (t === 0n ? 0n : t + (past ? 1_000n : 2_000n)) };
  liveRecords(batch, shift);
  for (const r of [0, 1]) {
    expect(dv.getBigUint64(at(r, REC.t_ns), true)).toBe(1_100n + BigInt(r));
    expect(dv.getBigUint64(at(r, REC.grant_deadline_host_ns), true)).toBe(2_500n);
    expect(dv.getBigUint64(at(r, REC.jog_input_deadline_host_ns), true)).toBe(0n);
    expect(dv.getBigUint64(at(r, REC.cycle), true)).toBe(7n);
    for (let a = 0; a < axes; a++) expect(dv.getBigUint64(at(r, axisOffset(a) + AX.pdo_observed_time_ns), true)).toBe(1_090n);
  }
  expect(dv.getBigUint64(at(1, axisOffset(axes) + AX.pdo_observed_time_ns), true)).toBe(0n); // no axis beyond axis_count
  expect(batch.subarray(0, HEADER_BYTES)).toEqual(copy.subarray(0, HEADER_BYTES));
  // a stepped core's own time is simulated: only the deadlines (host times from the service) move
  const stepped = copy.slice();
  liveRecords(stepped, { ...shift, coreTimeIsHost: false });
  const sv = new DataView(stepped.buffer);
  expect(sv.getBigUint64(at(0, REC.t_ns), true)).toBe(100n);
  expect(sv.getBigUint64(at(0, REC.grant_deadline_host_ns), true)).toBe(2_500n);
  expect(sv.getBigUint64(at(0, axisOffset(0) + AX.pdo_observed_time_ns), true)).toBe(90n);
});

test('a batch whose records straddle a meeting of replay and test keeps their recorded spacing, moved by the difference in force at its last record', () => {
  const batch = new Uint8Array(HEADER_BYTES + 3 * RECORD_BYTES);
  encodeBatchHeader({ adapter_incarnation: 'a'.repeat(32), daemon_incarnation: 'b'.repeat(32), machine_sha256: 'c'.repeat(64), deployment_sha256: 'd'.repeat(64), cycle_period_ns: 1_000_000n, first_sequence: 1n, last_sequence: 3n, dropped: 0n, axis_count: 1, record_count: 3 }, batch);
  const dv = new DataView(batch.buffer);
  const at = (r: number, off: number) => HEADER_BYTES + r * RECORD_BYTES + off;
  // Recorded 4, 5 and 6 ms; the replay was held at 5 ms and met the test 25 ms later than when recorded.
  [4_000_000n, 5_000_000n, 6_000_000n].forEach((t, r) => {
    dv.setBigUint64(at(r, REC.t_ns), t, true);
    dv.setBigUint64(at(r, axisOffset(0) + AX.pdo_observed_time_ns), t - 100_000n, true);
  });
  const m = new HostTimeMap();
  m.coreTimeIsHost = true;
  const L = process.hrtime.bigint() - 10_000_000_000n;
  m.anchor(1_000_000n, L);
  m.anchor(5_000_000n, L + 29_000_000n);
  liveRecords(batch, m);
  const t = [0, 1, 2].map((r) => dv.getBigUint64(at(r, REC.t_ns), true));
  expect(t[2]).toBe(m.live(6_000_000n, true)); // the last record as the map puts it
  expect([t[1]! - t[0]!, t[2]! - t[1]!]).toEqual([1_000_000n, 1_000_000n]); // one map per record would jump 25 ms here
  expect(dv.getBigUint64(at(0, axisOffset(0) + AX.pdo_observed_time_ns), true)).toBe(t[0]! - 100_000n);
});

test('a cue\'s anchor and pairs reach the replaying timing\'s host times; a live timing has none (the live path translates nothing)', () => {
  const { t } = replayed(false, [], []);
  expect(t.hostTimes).toBeNull();
  expect(new LiveTiming().hostTimes).toBeNull();
  t.cue({ tap: 'cue', clockNs: 1n, hostClock: true, anchors: [{ recordedNs: 1_000n, liveNs: 5_000n }], pairs: [[77n, 99n]] });
  expect(t.hostTimes!.coreTimeIsHost).toBe(true);
  expect(t.hostTimes!.live(77n, false)).toBe(99n);
  expect(t.hostTimes!.live(1_500n, false)).toBe(5_500n);
});

/**
 * Two preparations racing to commit (suites/trajectory/handles.test.ts "prepare_program and prepare_trajectory
 * committed while both wait on the core"): each takes its place in the commit queue when its checks are done,
 * here the program first; the handles are numbered in that order. `timing` decides the places.
 */
async function raceCommits(timing?: LiveTiming | ReplayedTiming): Promise<Record<string, bigint>> {
  const table = new HandleTable(() => undefined, timing);
  // Each commit peeks the number, waits a while for the core's receipt and creates the record (trajectories.ts commit).
  const commit = (kind: 'trajectory' | 'program') => async () => {
    const h = table.peekNext();
    await new Promise((r) => setTimeout(r, 5));
    expect(table.create(kind, 1n, 'i').handle).toBe(h);
    return h;
  };
  await table.serialise('program', commit('program')); // the warm-up upload: handle 1
  const program = table.serialise('program', commit('program'));
  await new Promise((r) => setTimeout(r, 1)); // the trajectory's checks end a little later
  const trajectory = table.serialise('trajectory', commit('trajectory'));
  return { program: await program, trajectory: await trajectory };
}

test('commit order: a recorded run notes each preparation\'s place in the commit queue; a replay holds a preparation until those recorded before it took theirs, so the handles are numbered as recorded', async () => {
  const notes: unknown[] = [];
  const live = new RecordingTiming();
  live.attach({ status: undefined, statusFrom: async () => true, pollTurn: async () => true, note: (d) => void notes.push(d) });
  // Live (and recorded): arrival order, the program first.
  expect(await raceCommits(live)).toEqual({ program: 2n, trajectory: 3n });
  expect(notes).toEqual([{ t: 'commit', op: 'program' }, { t: 'commit', op: 'program' }, { t: 'commit', op: 'trajectory' }]);
  // Recorded the other way round (the trajectory's place first): the replay numbers them as recorded,
  // where arrival order gave the program the trajectory's number (the replayed core then held the
  // trajectory's prepare under handle 2 in vain: HIL_ERR_REPLAY_DIVERGED on the handle).
  const { t, lost } = replayed(true, [], []);
  t.cue({ tap: 'cue', clockNs: 1n, hostClock: false, fences: [], commits: ['program', 'trajectory', 'program'] });
  expect(await raceCommits(t)).toEqual({ program: 3n, trajectory: 2n });
  expect(lost()).toEqual([]);
  // Without a recorded order (before a cue, or a recording without commit notes): arrival order.
  expect(await raceCommits(replayed(false, [], []).t)).toEqual({ program: 2n, trajectory: 3n });
  expect(await raceCommits()).toEqual({ program: 2n, trajectory: 3n });
});

test('commit order: a recorded commit the live side never makes holds the next one at most the fence bound, then it goes on and the hold is reported lost', async () => {
  vi.useFakeTimers();
  const { t, lost } = replayed(true, [], []);
  t.cue({ tap: 'cue', clockNs: 1n, hostClock: false, fences: [], commits: ['trajectory', 'program'] });
  const turn = t.turn('commit', 'program');
  expect(turn).not.toBeNull();
  let done = false;
  void turn!.then(() => (done = true));
  await vi.advanceTimersByTimeAsync(FENCE_HOLD_MS - 1);
  expect(done).toBe(false);
  await vi.advanceTimersByTimeAsync(1);
  expect(done).toBe(true);
  expect(lost()).toEqual(['commit:program']);
});

/** A replayed timing cued with recorded decisions that say what each saw of its session (`seen`). */
function replayedSeen(ops: string[], outcomes: string[], seen: string[]) {
  const notes: unknown[] = [];
  const t = new ReplayedTiming();
  t.attach({ status: undefined, statusFrom: async () => true, pollTurn: async () => true, note: (d) => void notes.push(d) });
  t.cue({ tap: 'cue', clockNs: 1n, hostClock: false, fences: ops, fenceOutcomes: outcomes, fenceSeen: seen });
  const lost = () => notes.filter((n) => (n as { t: string }).t === 'hold_lost').map((n) => `${(n as { kind: string }).kind}:${(n as { detail: string }).detail}`);
  return { t, lost };
}

test('session end: a stop of the old generation the recorded service refused control_session_stale because the drain had revoked the session waits while the live grant is still stopping, and is decided as recorded once the drain revokes it', async () => {
  // suites/grant/grant.test.ts "stop advances the application generation": the test's stop (generation 1)
  // turns the grant stopping with generation 2; the cleanup's stop of generation 1 found the session revoked
  // when recorded. Decided before the replayed core's drain came, the live one found it stopping: 200.
  vi.useFakeTimers();
  const now = 1_000_000_000n;
  const { t, lost } = replayedSeen(['stop', 'stop'], ['ok', 'control_session_stale'], ['current', 'revoked']);
  const a = new Authority({ pair_id: 'p', revision: 1n, configuration_sha256: 'c'.repeat(64), machine_sha256: 'm'.repeat(64) }, 500n, {
    now: () => now,
    daemonIncarnation: () => 'd',
    event: () => undefined,
    nativeGrant: () => undefined,
    timing: t,
  });
  const s = a.acquire({ schema: 's', operation: 'acquire', controller: 'c', binding: { pair_id: 'p', revision: 1n, configuration_sha256: 'c'.repeat(64) } } as Request, '{}').body.data as { session: string; generation: bigint };
  expect(t.turn('session_end', 'stop', s.session, s.generation, a)).toBeNull(); // recorded ok: never held
  a.beginStop(a.fence('stop', s.session, s.generation));
  expect(a.current?.stopping).toBe(true);
  expect(a.current?.generation).toBe(s.generation + 1n);
  const turn = t.turn('session_end', 'stop', s.session, s.generation, a);
  expect(turn).not.toBeNull();
  let decided: string | undefined;
  void turn!.then(() => {
    try {
      a.fence('stop', s.session, s.generation);
      decided = 'ok';
    } catch (e) {
      decided = (e as Refusal).label;
    }
  });
  await vi.advanceTimersByTimeAsync(1_000);
  expect(decided).toBeUndefined();
  a.drained(); // the replayed core's stop_drained: the stopping grant is revoked
  await vi.advanceTimersByTimeAsync(0);
  expect(decided).toBe('control_session_stale');
  expect(lost()).toEqual([]);
});

test('session end: what the recorded decision saw decides the hold, not its label: a refusal that saw the session current or stopping is never held, one that saw it ended is held whatever its label', () => {
  const live = { current: { session: 'S', generation: 4n, stopping: false }, sessionState: (s: string) => (s === 'S' ? 'current' : 'unknown') };
  // control_session_stale for a generation that differs, for a stop in flight: the session held the grant
  expect(replayedSeen(['halt'], ['control_session_stale'], ['current']).t.turn('session_end', 'halt', 'S', 4n, live)).toBeNull();
  expect(replayedSeen(['arm'], ['control_session_stale'], ['stopping']).t.turn('session_end', 'arm', 'S', 4n, live)).toBeNull();
  expect(replayedSeen(['halt'], ['inhibited'], ['stopping']).t.turn('session_end', 'halt', 'S', 4n, live)).toBeNull();
  // ended when recorded, but ended live too (or never this service's): decided at once
  const gone = { current: null, sessionState: () => 'revoked' };
  expect(replayedSeen(['stop'], ['control_session_stale'], ['revoked']).t.turn('session_end', 'stop', 'S', 1n, gone)).toBeNull();
  // 'expired' is retaken at the decision itself (expiredAtFence)
  expect(replayedSeen(['halt'], ['expired'], ['expired']).t.turn('session_end', 'halt', 'S', 4n, live)).toBeNull();
  // ended when recorded and still holding live: held, for every way a session ends and every label
  for (const [outcome, seen] of [['control_session_stale', 'revoked'], ['no_grant', 'expired'], ['control_session_stale', 'released'], ['control_session_stale', 'retired'], ['daemon_restarted', 'daemon_restarted']]) {
    expect(replayedSeen(['halt'], [outcome!], [seen!]).t.turn('session_end', 'halt', 'S', 3n, live), `${outcome} seen ${seen}`).not.toBeNull();
  }
  // a recording that does not say (''): the lease rule of older recordings
  expect(replayedSeen(['halt'], ['control_session_stale'], ['']).t.turn('session_end', 'halt', 'S', 4n, live)).not.toBeNull();
  expect(replayedSeen(['halt'], ['control_session_stale'], ['']).t.turn('session_end', 'halt', 'S', 3n, live)).toBeNull();
});

test('session end: a session the live service never ends is a lost hold of kind session_end after the replay bound (ERROR), and the decision then goes on', async () => {
  vi.useFakeTimers();
  const { t, lost } = replayedSeen(['stop'], ['control_session_stale'], ['revoked']);
  const live = { current: { session: 'S', generation: 2n, stopping: true }, sessionState: () => 'stopping' };
  const turn = t.turn('session_end', 'stop', 'S', 1n, live)!;
  let done = false;
  void turn.then(() => (done = true));
  t.took('grant_ended', 'released'); // another grant's end: still holding
  await vi.advanceTimersByTimeAsync(REPLAY_WAIT_MS - 20);
  expect(done).toBe(false);
  await vi.advanceTimersByTimeAsync(40);
  expect(done).toBe(true);
  expect(lost()).toEqual(['session_end:stop']);
});

test('the recorded service notes what each fence decision saw of its session (the authority asks; renewals stay unnoted)', () => {
  const notes: unknown[] = [];
  const rec = new RecordingTiming();
  rec.attach({ status: undefined, statusFrom: async () => true, pollTurn: async () => true, note: (d) => void notes.push(d) });
  const binding = { pair_id: 'p', revision: 1n, configuration_sha256: 'c'.repeat(64), machine_sha256: 'm'.repeat(64) };
  const a = new Authority(binding, 500n, { now: () => 1_000_000_000n, daemonIncarnation: () => 'd', event: () => undefined, nativeGrant: () => undefined, timing: rec });
  const s = a.acquire({ schema: 's', operation: 'acquire', controller: 'c', binding } as Request, '{}').body.data as { session: string; generation: bigint };
  const decide = (op: string, generation: bigint, session = s.session) => {
    try {
      return a.fence(op, session, generation);
    } catch {
      return undefined;
    }
  };
  decide('renew', s.generation);
  a.beginStop(decide('stop', s.generation)!);
  decide('halt', s.generation + 1n); // a stop in flight
  decide('halt', s.generation); // a generation that differs: the same label, the session still holds
  a.drained();
  decide('stop', s.generation); // revoked
  decide('stop', 1n, 'ab'.repeat(32)); // never issued
  expect(notes).toEqual([
    { t: 'fence', op: 'stop', outcome: 'ok', seen: 'current' },
    { t: 'fence', op: 'halt', outcome: 'inhibited', seen: 'stopping' },
    { t: 'fence', op: 'halt', outcome: 'wrong_generation', seen: 'stopping' },
    { t: 'fence', op: 'stop', outcome: 'control_session_stale', seen: 'revoked' },
    { t: 'fence', op: 'stop', outcome: 'fence', seen: 'unknown' },
  ]);
});

test('a replayed wait on the core that ran out when recorded runs out now (timedOut), whatever its bound; one answered when recorded waits for the recorded publication as long as it may', () => {
  const waits = new CoreWaits();
  waits.load([
    { kind: 'status', outcome: 'timeout' },
    { kind: 'status', outcome: 'ok', cycle: 5n },
    { kind: 'cmd:reset_fault', outcome: 'timeout' },
  ]);
  const ranOut = waits.begin('status', 1000);
  expect(ranOut.timedOut).toBe(true);
  expect(ranOut.atLeast).toBeUndefined();
  const answered = waits.begin('status', 1000);
  expect(answered.timedOut).toBeUndefined();
  expect(answered.atLeast).toBe(5n);
  expect(answered.ms).toBe(REPLAY_WAIT_MS);
  expect(waits.begin('cmd:reset_fault', 1000).timedOut).toBe(true);
  // Not a replay (nothing loaded): the live bound, nothing retaken.
  expect(new CoreWaits().begin('status', 1000)).toMatchObject({ ms: 1000 });
  expect(new CoreWaits().begin('status', 1000).timedOut).toBeUndefined();
});
