// Sync points read from a recording (sync-points.ts): each kind typed and in recorded order, and the one
// bounded-hold rule every bounded kind shares (held until served, given up after the bound as lost).

import { expect, test } from 'vitest';
import type { RecordingHeader, RecordingNote } from '../../drivers/replay/format.ts';
import type { PacingScan } from './scan.ts';
import { BoundedHold, HOLD_BOUND_MS, leaseNotices, readSyncPoints, watchWindows, type LostHold } from './sync-points.ts';

const header = (o: Partial<RecordingHeader> = {}): RecordingHeader => ({ format: 3, driver: 'sim', axisCount: 1, cycle_ns: '1000000', setup_sha256: 'x', t0_ns: '1000', started_at: '', ...o });
const req = (cycle: number, data: unknown, o: Partial<RecordingNote> = {}): RecordingNote => ({ cycle, kind: 'request', data, sent_ns: String(100 + cycle), ...o });
const svc = (cycle: number, data: unknown): RecordingNote => ({ cycle, kind: 'service', data });
const scanOf = (requests: RecordingNote[], service: RecordingNote[], h: Partial<RecordingHeader> = {}): PacingScan => ({ header: header(h), frames: 100, complete: true, times: new Float64Array(100), requests, outputs: [], service });

test('what the recorded service did with each lease notice of the core: its next grant message for that generation says (ended it, told it again, neither)', () => {
  const grant = (generation: string, active: boolean) => ({ t: 'grant', generation, deadlineNs: '900', active, axisMask: 1 });
  const notice = (cycle: number, generation: string): RecordingNote => ({ cycle, kind: 'event', data: { t: 'event', type: 'native_lease_expired', payload: { generation } } });
  const scan: PacingScan = {
    ...scanOf(
      [
        req(4, grant('7', true)), // before the first notice: not its answer
        req(12, grant('7', true)), // told again: a renewal had crossed the notice
        req(30, { t: 'cancel_home' }, { origin: 'lease_expired' }),
        req(30, grant('7', false), { origin: 'lease_expired' }), // ended
        req(50, grant('9', false)), // another generation's end (a stop), not the answer to generation 8's notice
      ],
      [],
    ),
    outputs: [notice(10, '7'), { cycle: 11, kind: 'event', data: { t: 'event', type: 'enable_changed', payload: {} } }, notice(29, '7'), notice(40, '8'), notice(45, '9')],
  };
  expect(leaseNotices(scan)).toEqual(['retold', 'expired', 'none', 'none']);
});

test('every sync point is read with its kind: requests, renewals, lease expiries, status reads, telemetry polls, fences, commits, replies', () => {
  const grant = (generation: string, deadlineNs: string, active = true) => ({ t: 'grant', generation, deadlineNs, active, axisMask: 1 });
  const scan = scanOf(
    [
      req(0, grant('7', '500')),
      req(5, { t: 'cmd', id: 1, op: 'enable', generation: '7', axisMask: 1 }),
      req(8, grant('7', '900')), // same grant, later deadline: a renewal
      req(20, grant('7', '900', false), { origin: 'lease_expired' }),
      req(30, grant('8', '2000')),
    ],
    [
      svc(0, { t: 'status_read', cycle: 'none', now_ns: '120' }), // served before any publication
      svc(3, { t: 'status_read', cycle: '2', now_ns: '150' }),
      svc(9, { t: 'telemetry_read' }),
      svc(9, { t: 'fence', op: 'enable', outcome: 'ok' }),
      svc(9, { t: 'commit', op: 'trajectory' }),
      svc(9, { t: 'commit', op: 'program' }),
      svc(10, { t: 'http_reply', op: 'enable', status: 200, label: '' }),
      svc(11, { t: 'http_reply', op: 'enable', status: 200, label: '' }), // a repeat: compared once
      svc(12, { t: 'http_reply', op: 'arm', status: 409, label: 'mode_conflict' }),
    ],
  );
  const p = readSyncPoints(scan, true);
  expect(p.requests.map((r) => [r.kind, r.cycle, r.renewal])).toEqual([
    ['request', 0, false],
    ['request', 5, false],
    ['request', 8, true],
    ['lease_expiry', 20, false],
    ['request', 30, false],
  ]);
  expect(p.statusReads).toEqual([
    { kind: 'status_read', cycle: 0, published: -1, expiries: 0 },
    { kind: 'status_read', cycle: 3, published: 2, expiries: 0 },
  ]);
  expect(p.telemetryPolls).toEqual([{ kind: 'telemetry_poll', cycle: 9 }]);
  expect(p.fences).toEqual([{ kind: 'fence', op: 'enable', outcome: 'ok' }]);
  expect(p.commits).toEqual([
    { kind: 'commit', op: 'trajectory' },
    { kind: 'commit', op: 'program' },
  ]);
  expect(p.replies.map((r) => [r.cycle, r.reply.op, r.reply.label])).toEqual([
    [10, 'enable', ''],
    [12, 'arm', 'mode_conflict'],
  ]);
  expect(p.serviceLog).toBe(true);
  expect(p.steps).toBe(false);
  // a core driven without a live service: nobody serves the service's reads, so none is held for
  const alone = readSyncPoints(scan, false);
  expect([alone.statusReads.length, alone.telemetryPolls.length]).toEqual([0, 0]);
  // a request without the service's stamp: no service log, and no lease expiry to cue
  const format1 = readSyncPoints(scanOf([req(0, grant('7', '500'), { sent_ns: undefined, origin: 'lease_expired' })], [], { format: 1 }), true);
  expect([format1.serviceLog, format1.requests[0]!.kind]).toEqual([false, 'request']);
  // steps: a stepped recording of format 3 with the test's steps among its requests
  expect(readSyncPoints(scanOf([req(0, { t: 'step', id: 1, cycles: 5 })], [], { clock: 'stepped' }), true).steps).toBe(true);
  expect(readSyncPoints(scanOf([req(0, { t: 'step', id: 1, cycles: 5 })], [], { clock: 'stepped', format: 2 }), true).steps).toBe(false);
});

test('a status read says how many leases the recorded service had let run out before it served it, in the order the recording holds (a read noted in the expiry\'s cycle before its messages was served before it)', () => {
  const grant = (generation: string, deadlineNs: string, active = true) => ({ t: 'grant', generation, deadlineNs, active, axisMask: 1 });
  const read = (cycle: number, published: number) => svc(cycle, { t: 'status_read', cycle: String(published), now_ns: '1' });
  const requests = [
    req(0, grant('7', '500')),
    req(40, { t: 'cancel_home' }, { origin: 'lease_expired' }),
    req(40, grant('7', '0', false), { origin: 'lease_expired' }),
    req(60, grant('8', '900')),
    req(90, { t: 'cancel_home' }, { origin: 'lease_expired' }),
    req(90, grant('8', '0', false), { origin: 'lease_expired' }),
  ];
  // suites/jog/jog.test.ts "lease lost during a jog ...": the read at cycle 42 was served from a publication
  // of cycle 28, before the expiry at cycle 40, but after the recorded service had let the lease run out.
  const service = [read(30, 20), read(40, 39), read(40, 39), read(42, 28), read(95, 91)];
  const scan: PacingScan = { ...scanOf(requests, service), serviceAt: [1, 1, 3, 3, 6] };
  expect(readSyncPoints(scan, true).statusReads.map((r) => [r.cycle, r.published, r.expiries])).toEqual([
    [30, 20, 0],
    [40, 39, 0], // noted in the expiry's cycle before its messages
    [40, 39, 1],
    [42, 28, 1],
    [95, 91, 2],
  ]);
  // a scan made without the order: the expiries of earlier cycles
  expect(readSyncPoints(scanOf(requests, service), true).statusReads.map((r) => r.expiries)).toEqual([0, 0, 0, 1, 2]);
});

test('a bounded hold: held at each noted cycle until served as many, given up after the bound with every point due reported lost', () => {
  let wall = 0;
  const lost: LostHold[] = [];
  const h = new BoundedHold('telemetry_poll', [10, 20, 20, 30], () => wall, (x) => lost.push(x));
  expect(h.holds(9)).toBe(false);
  expect(h.holds(10)).toBe(true);
  h.serve();
  expect(h.holds(10)).toBe(false);
  h.serve(); // served ahead of its cycle: no hold there
  expect(h.holds(20)).toBe(true); // two noted at 20, one served so far
  h.serve();
  expect(h.holds(20)).toBe(false);
  expect(h.holds(30)).toBe(true);
  wall = HOLD_BOUND_MS - 1;
  expect(h.holds(30)).toBe(true);
  wall = HOLD_BOUND_MS;
  expect(h.holds(30, (k) => `poll ${k}`)).toBe(false);
  expect(lost).toEqual([{ kind: 'telemetry_poll', cycle: 30, detail: 'poll 3' }]);
  expect([h.served, h.lostCount, h.next]).toEqual([3, 1, 4]);
  expect(h.holds(1_000)).toBe(false);
});

test('a bounded hold outlasts what a replay at a third of the recorded speed needs: a poll 0.76 s after the last meeting when recorded, 2.2 s later on the replay, is still held for', () => {
  let wall = 0;
  const lost: LostHold[] = [];
  const h = new BoundedHold('telemetry_poll', [1066], () => wall, (x) => lost.push(x));
  expect(h.holds(1066)).toBe(true);
  wall = 2_300; // suites/machine/startup.test.ts "anchors saved by another pair ..." at load average 12
  expect(h.holds(1066)).toBe(true);
  h.serve();
  expect(h.holds(1066)).toBe(false);
  expect(lost).toEqual([]);
});

test('a recorded lease expiry says how long after the grant\'s last recorded deadline (a renewal\'s) the recorded service ended it', () => {
  const grant = (generation: string, deadlineNs: string, active = true) => ({ t: 'grant', generation, deadlineNs, active, axisMask: 1 });
  const scan = scanOf(
    [
      req(0, grant('7', '1000'), { sent_ns: '500' }),
      req(8, grant('7', '1400'), { sent_ns: '900' }), // a renewal: the deadline the expiry is measured from
      req(20, { t: 'cancel_home' }, { origin: 'lease_expired', sent_ns: '1403' }),
      req(20, grant('7', '0', false), { origin: 'lease_expired', sent_ns: '1403' }),
      req(30, grant('8', '5000'), { sent_ns: '4500' }),
      req(40, grant('8', '0', false), { sent_ns: '4700' }), // released: no lease expiry
      req(50, grant('9', '9000'), { sent_ns: '8500' }),
      req(60, grant('9', '0', false), { origin: 'lease_expired', sent_ns: '9010' }),
    ],
    [],
  );
  expect(readSyncPoints(scan, true).requests.map((r) => (r.kind === 'lease_expiry' ? r.lateNs : r.kind))).toEqual(['request', 'request', 3n, 3n, 'request', 'request', 'request', 10n]);
});

test('watchWindows: the spans with at least one stream open (nested streams are one span, spans meeting in a cycle are one, one never closed runs to the end) and every open\'s cycle', () => {
  const note = (cycle: number, t: string, open?: boolean) => ({ cycle, kind: 'service' as const, data: { t, stream: 'telemetry', ...(open !== undefined ? { open } : {}) } });
  const { opens, windows } = watchWindows([
    note(3, 'watch', true),
    note(4, 'status_read'),
    note(5, 'watch', true),
    note(8, 'watch', false),
    note(9, 'watch', false),
    note(9, 'watch', true),
    note(12, 'watch', false),
    note(20, 'watch', false), // a close without an open changes nothing
    note(30, 'watch', true),
  ]);
  expect(opens).toEqual([3, 5, 9, 30]);
  expect(windows).toEqual([
    { from: 3, to: 12 },
    { from: 30, to: Number.POSITIVE_INFINITY },
  ]);
  expect(watchWindows([])).toEqual({ opens: [], windows: [] });
});

test('fence decisions of a polled refusal\'s repeats are marked polled (not held to); a request that checks its fence twice keeps both', () => {
  const fence = (cycle: number, op: string, outcome = 'ok') => svc(cycle, { t: 'fence', op, outcome });
  const reply = (cycle: number, op: string, status: number, label = '') => svc(cycle, { t: 'http_reply', op, status, label });
  const scan = scanOf(
    [],
    [
      // suites/trajectory/upload.test.ts "one upload at a time": the trickling upload (no answer: its client
      // went away), the second refused busy, then the third polled until the slot is free.
      fence(1, 'prepare_trajectory'),
      fence(2, 'prepare_trajectory'),
      reply(2, 'prepare_trajectory', 409, 'busy'),
      fence(3, 'prepare_trajectory'),
      reply(3, 'prepare_trajectory', 409, 'busy'),
      fence(4, 'prepare_trajectory'),
      reply(4, 'prepare_trajectory', 409, 'busy'),
      fence(5, 'prepare_trajectory'),
      reply(6, 'prepare_trajectory', 200),
      // reset_fault checks its fence before and after its wait for a publication; release raced it.
      fence(7, 'reset_fault'),
      fence(8, 'reset_fault'),
      reply(9, 'reset_fault', 200),
      fence(9, 'release'),
      reply(9, 'release', 200),
      // a refusal repeated: the same decisions and answer as the request of that operation before it
      fence(10, 'arm'),
      reply(10, 'arm', 409, 'not_ready'),
      fence(11, 'arm'),
      reply(11, 'arm', 409, 'not_ready'),
    ],
  );
  const p = readSyncPoints(scan, true);
  expect(p.fences.map((f) => `${f.op}${f.polled ? ' (polled)' : ''}`)).toEqual([
    // refused busy: whether the slot is still taken is the wall clock's (when the service saw a client go)
    'prepare_trajectory (polled)',
    'prepare_trajectory (polled)',
    'prepare_trajectory (polled)',
    'prepare_trajectory (polled)',
    'prepare_trajectory',
    'reset_fault',
    'reset_fault',
    'release',
    'arm',
    'arm (polled)',
  ]);
});

test('a fence decision keeps what the recorded service saw of its session (seen), and says nothing on a recording made before it was noted', () => {
  const p = readSyncPoints(
    scanOf(
      [],
      [
        svc(1, { t: 'fence', op: 'stop', outcome: 'ok', seen: 'current' }),
        svc(9, { t: 'fence', op: 'stop', outcome: 'control_session_stale', seen: 'revoked' }),
        svc(12, { t: 'fence', op: 'halt', outcome: 'control_session_stale' }),
      ],
    ),
    true,
  );
  expect(p.fences).toEqual([
    { kind: 'fence', op: 'stop', outcome: 'ok', seen: 'current' },
    { kind: 'fence', op: 'stop', outcome: 'control_session_stale', seen: 'revoked' },
    { kind: 'fence', op: 'halt', outcome: 'control_session_stale' },
  ]);
});
