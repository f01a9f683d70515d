// Paced replay (pacer.ts) with the real core in-process: a session recorded from the sim
// driver is replayed under "live" requests the way the replay target does it, on the recorded frame times.
// Same requests with other fence values and host times: zero divergence, every request, reply and event
// matched. A changed field, an inconsistent fence, a missing or an extra request: reported at the exact
// cycle with the field. A recording for another machine: refused as stale naming both digests.

import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import type { CompiledMachine } from '../config/types.ts';
import { CoreHost } from '../core/host.ts';
import { type ClockSpec, type FromCore, type NativeOpName, type ToCore } from '../core/protocol.ts';
import { NATIVE_REASON } from '../core/reasons.ts';
import { ReplayPacer, type ServiceCue } from './pacer.ts';
import type { RecordStamp, ToTap } from '../../drivers/replay/tap.ts';
import { HOLD_BOUND_MS } from './sync-points.ts';
import { collapseRepeats, compareNote, FenceMap } from './match.ts';
import { scanForPacing, type PacingScan } from './scan.ts';
import { RecordingError } from '../../drivers/replay/format.ts';
import { nineAxisMachine } from '../core/test-machine.ts';
import { pacedCoreHost } from './test-core.ts';

const DIR = mkdtempSync(join(tmpdir(), 'hil-pacer-'));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));
let seq = 0;
const tmp = (name: string) => join(DIR, `${seq++}-${name}`);

const MACHINE: CompiledMachine = nineAxisMachine();
const N = MACHINE.axes.length;
const ALL = (1 << N) - 1;
const HOMEABLE = MACHINE.axes.reduce((m, a, i) => (a.native_home ? m | (1 << i) : m), 0);
const FAR = 1n << 62n;

type Step = [cycle: number, msg: (gen: bigint, id: number) => ToCore];
const cmd = (op: NativeOpName, axisMask: number) => (generation: bigint, id: number): ToCore => ({ t: 'cmd', id, op, generation, axisMask });
const SCRIPT: Step[] = [
  [0, (generation) => ({ t: 'grant', generation, deadlineNs: FAR, active: true, axisMask: ALL })],
  [5, cmd('enable', ALL)],
  [120, cmd('arm', 0)],
  [400, cmd('stop', 0)],
  [700, cmd('home', HOMEABLE)],
];
const CYCLES = 1400;

/** Record the script on the sim driver (stepped clock), generation 7, message ids from 1. */
async function record(file: string): Promise<FromCore[]> {
  const sent: FromCore[] = [];
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, driverParams: { homingNs: 300_000_000n }, record: { path: file, run: 'pacer' } }, (m) => sent.push(m));
  let id = 1;
  for (let c = 0; c < CYCLES; c++) {
    for (const [at, make] of SCRIPT) if (at === c) host.handle(make(7n, id++));
    host.cycle();
  }
  await host.close();
  return sent;
}

/**
 * Replay `file` paced, offering the live messages as a client would: each as soon as the core blocks
 * waiting for a request (or all at once). Returns the verdict and what the core sent.
 */
async function paced(file: string, live: ToCore[], extraParams: Record<string, unknown> = {}) {
  const scan = scanForPacing(file);
  const sent: FromCore[] = [];
  let pacer: ReplayPacer | undefined;
  const host = await pacedCoreHost(
    MACHINE,
    file,
    scan,
    (m) => {
      pacer?.observe(m);
      sent.push(m);
    },
    { driverParams: extraParams },
  );
  const p = (pacer = new ReplayPacer(host, scan, { file, mode: 'strict' }));
  const queue = [...live];
  for (let guard = 0; guard < 100_000; guard++) {
    const s = p.advance(1000);
    if (s === 'end') break;
    if (s === 'wait') {
      if (!queue.length) break; // the live side has nothing more to send
      p.offer(queue.shift());
    }
  }
  // anything left is sent after the recording's last request
  for (const m of queue) p.offer(m);
  p.advance(0);
  const verdict = p.finish();
  await host.close();
  return { verdict, sent, host };
}

function liveScript(gen: bigint, firstId: number, change?: (i: number, m: ToCore) => ToCore): ToCore[] {
  return SCRIPT.map(([, make], i) => {
    const m = make(gen, firstId + i);
    // a live run's lease deadline is its own host time: never compared
    const withTime = m.t === 'grant' ? { ...m, deadlineNs: FAR - 12345n } : m;
    return change ? change(i, withTime) : withTime;
  });
}

test('same requests with other fences and host times: zero divergence, every request, reply and event matched, on the recorded times', async () => {
  const file = tmp('base.hilrec');
  const recorded = await record(file);
  const scan = scanForPacing(file);
  expect(scan.requests.map((n) => [n.cycle, (n.data as { t: string }).t])).toEqual(SCRIPT.map(([c], i) => [c, i === 0 ? 'grant' : 'cmd']));
  expect(scan.outputs.length).toBeGreaterThan(4); // replies and the Home's completion, at least
  const { verdict, sent, host } = await paced(file, liveScript(42n, 100));
  expect(verdict).toMatchObject({ cycles: CYCLES, requests_matched: SCRIPT.length, outputs_matched: scan.outputs.length, requests_unsent: 0, requests_extra: 0, divergence: null });
  expect(verdict.end).toBeNull(); // held at the last recorded frame, never past it
  // the replies are the recorded ones with the live fences (generation 42, ids from 100)
  const replies = (xs: FromCore[]) => xs.filter((m): m is Extract<FromCore, { t: 'reply' }> => m.t === 'reply');
  expect(replies(sent).map((r) => ({ ...r.result, Generation: 0n }))).toEqual(replies(recorded).map((r) => ({ ...r.result, Generation: 0n })));
  expect(replies(sent).map((r) => r.id)).toEqual(replies(recorded).map((r) => r.id + 99));
  // the core ran on the recorded frame times: its time after the last cycle is the last frame's
  expect(host.core.now).toBe(BigInt(scan.header.t0_ns) + BigInt(scan.times[CYCLES - 1]!));
});

test('a changed field of a request is reported at the cycle it was recorded, with the field and both messages', async () => {
  const file = tmp('changed.hilrec');
  await record(file);
  const live = liveScript(7n, 1, (i, m) => (i === 2 && m.t === 'cmd' ? { ...m, axisMask: 0b10 } : m)); // arm with a mask
  const { verdict } = await paced(file, live);
  expect(verdict.divergence).toMatchObject({ kind: 'request', cycle: 120, path: 'axisMask', expected: { cycle: 120, kind: 'request', data: { op: 'arm', axisMask: 0 } }, actual: { data: { op: 'arm', axisMask: 2 } } });
  expect(verdict.requests_matched).toBe(2);
});

test('fences are rewritten consistently: one recorded generation cannot stand for two live ones', async () => {
  const file = tmp('fence.hilrec');
  await record(file);
  const live = liveScript(42n, 1, (i, m) => (i === 3 && m.t === 'cmd' ? { ...m, generation: 43n } : m));
  const { verdict } = await paced(file, live);
  expect(verdict.divergence).toMatchObject({ kind: 'request', cycle: 400, path: 'generation', expected: { data: { op: 'stop', generation: '7' } }, actual: { data: { generation: '43' } } });
  // and two recorded values cannot share one live value
  const f = new FenceMap();
  expect(f.agree('generation', '7', '42')).toBe(true);
  expect(f.agree('Generation', '7', '42')).toBe(true); // one family: grants, commands and replies
  expect(f.agree('generation', '8', '42')).toBe(false);
  expect(f.agree('handle', '8', '42')).toBe(true); // handles are another family
  expect(compareNote({ deadlineNs: '1', x: 1 }, { deadlineNs: '2', x: 1 }, new FenceMap())).toBeNull();
  expect(compareNote({ x: 1 }, { x: 1, y: 2 }, new FenceMap())).toEqual({ path: 'y', expected: undefined, actual: 2 });
});

test('a request the recording does not have is reported (expected null); one never sent is counted as unsent', async () => {
  const file = tmp('extra.hilrec');
  await record(file);
  const extra = await paced(file, [...liveScript(7n, 1), { t: 'cmd', id: 99, op: 'halt', generation: 7n, axisMask: 0 }]);
  expect(extra.verdict.divergence).toMatchObject({ kind: 'request', cycle: CYCLES, expected: null, actual: { data: { op: 'halt' } } });
  expect(extra.verdict.requests_extra).toBe(1);
  const short = await paced(file, liveScript(7n, 1).slice(0, 3));
  expect(short.verdict.divergence).toBeNull();
  expect(short.verdict).toMatchObject({ requests_matched: 3, requests_unsent: 2, cycles: 400 }); // held where the stop was due
});

test('a recording made for another machine or configuration is refused as stale, naming both digests', async () => {
  const file = tmp('stale.hilrec');
  await record(file);
  const other = 'a'.repeat(64);
  const err = await paced(file, [], { machine_sha256: other }).then(
    () => null,
    (e: unknown) => e as Error & { cause?: unknown },
  );
  const cause = (err?.cause ?? err) as RecordingError;
  expect(cause).toBeInstanceOf(RecordingError);
  expect(cause.code).toBe('REPLAY_STALE');
  expect(cause.message).toContain(MACHINE.machine_sha256);
  expect(cause.message).toContain(other);
  // the same digests as recorded: accepted
  const ok = await paced(file, liveScript(7n, 1), { machine_sha256: MACHINE.machine_sha256, configuration_sha256: MACHINE.configuration_sha256 });
  expect(ok.verdict.divergence).toBeNull();
});

test('lease renewals replay from the recording at their cycles; live renewals are not handed over; arrival order races are matched', async () => {
  const file = tmp('renew.hilrec');
  const renew = (deadlineNs: bigint) => (generation: bigint): ToCore => ({ t: 'grant', generation, deadlineNs, active: true, axisMask: ALL });
  const script: Step[] = [SCRIPT[0]!, [5, cmd('enable', ALL)], [50, renew(FAR + 1n)], [120, cmd('arm', 0)], [121, cmd('halt', 0)], [300, renew(FAR + 2n)], [400, cmd('stop', 0)]];
  const sent: FromCore[] = [];
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, record: { path: file } }, (m) => sent.push(m));
  let id = 1;
  for (let c = 0; c < 600; c++) {
    for (const [at, make] of script) if (at === c) host.handle(make(7n, make.length > 1 ? id++ : 0));
    host.cycle();
  }
  await host.close();
  // live: no renewal at 50, three at other times, and halt sent before arm (two senders racing)
  const live: ToCore[] = [
    { t: 'grant', generation: 9n, deadlineNs: 5n, active: true, axisMask: ALL },
    { t: 'cmd', id: 1, op: 'enable', generation: 9n, axisMask: ALL },
    { t: 'grant', generation: 9n, deadlineNs: 6n, active: true, axisMask: ALL },
    { t: 'cmd', id: 3, op: 'halt', generation: 9n, axisMask: 0 },
    { t: 'cmd', id: 2, op: 'arm', generation: 9n, axisMask: 0 },
    { t: 'grant', generation: 9n, deadlineNs: 7n, active: true, axisMask: ALL },
    { t: 'grant', generation: 9n, deadlineNs: 8n, active: true, axisMask: ALL },
    { t: 'cmd', id: 4, op: 'stop', generation: 9n, axisMask: 0 },
  ];
  const { verdict, sent: got } = await paced(file, live);
  expect(verdict).toMatchObject({ divergence: null, requests_matched: 5, renewals_replayed: 2, live_renewals: 3, requests_unsent: 0, cycles: 600 });
  // handed to the core in the recorded order: the replies come back with the recorded sequence numbers
  const seqs = (xs: FromCore[]) => xs.filter((m): m is Extract<FromCore, { t: 'reply' }> => m.t === 'reply').map((m) => [m.result.Operation, m.result.Sequence, m.result.Result]);
  expect(seqs(got)).toEqual(seqs(sent));
  // an unmatched live message beyond the look-ahead is a divergence naming the first open recorded request
  const wrong = await paced(file, [live[0]!, { t: 'cmd', id: 1, op: 'enable', generation: 9n, axisMask: 1 }]);
  expect(wrong.verdict.divergence).toMatchObject({ kind: 'request', path: 'axisMask', expected: { cycle: 5, data: { op: 'enable' } } });
});

/** A core on the replay driver and the recorded clock of `scan`, as a paced replay runs it (the pacer is the test's). */
function pacedHost(file: string, scan: ReturnType<typeof scanForPacing>, send: (m: FromCore) => void = () => undefined): Promise<CoreHost> {
  return pacedCoreHost(MACHINE, file, scan, send);
}

/**
 * What the worker loop does with the core's messages (worker-loop.ts): a status publication goes out unless
 * the pacer keeps it back for a pending read, and a kept one goes out when flushed. `observe`: the pacer
 * also sees every message first, as the worker's does. Collects the cycles of the publications sent.
 */
function publications(pacer: () => ReplayPacer | undefined, o: { observe?: boolean } = {}) {
  const cycles: bigint[] = [];
  const out = (m: unknown) => {
    const x = m as { t?: string; status?: { cycle: bigint } } | null;
    if (x?.t === 'status') cycles.push(x.status!.cycle);
  };
  return {
    cycles,
    send: (m: FromCore) => {
      const p = pacer();
      if (o.observe) p?.observe(m);
      out(p ? p.publication(m) : m);
    },
    flush: () => pacer()!.takePublications().forEach(out),
  };
}

/** Record `script` (messages with the service's stamps) on the sim driver, stepped clock, for `cycles` cycles. */

async function recordStamped(file: string, script: Array<[number, (ToCore & RecordStamp) | ToTap]>, cycles: number, clock: ClockSpec = { mode: 'stepped' }): Promise<FromCore[]> {
  const sent: FromCore[] = [];
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock, captureRetentionMs: 0, record: { path: file, run: 'stamped' } }, (m) => sent.push(m));
  for (let c = 0; c < cycles; c++) {
    for (const [at, m] of script) if (at === c) host.handle(m);
    host.cycle();
  }
  await host.close();
  return sent;
}

test('format 2: a recorded lease expiry is cued to the live service at its cycle, with the recorded service clock and the live generation; the recorded fence order is handed over first', async () => {
  const file = tmp('expiry.hilrec');
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [1, { tap: 'note', data: { t: 'fence', op: 'enable', outcome: 'ok' } }],
      [5, { t: 'cmd', id: 1, op: 'enable', generation: 7n, axisMask: ALL, sentNs: 2_000n }],
      [60, { t: 'cancel_home', sentNs: 3_000n, origin: 'lease_expired' }],
      [60, { t: 'grant', generation: 7n, deadlineNs: 0n, active: false, axisMask: 0, sentNs: 3_001n, origin: 'lease_expired' }],
    ],
    200,
  );
  const scan = scanForPacing(file);
  expect(scan.header).toMatchObject({ format: 3, clock: 'stepped', host_times: true });
  // the stamps are beside the request, not in it; the service's note is neither a request nor an output
  expect(scan.requests.map((n) => [n.cycle, n.sent_ns, n.origin ?? null, typeof n.host_ns])).toEqual([
    [0, '1000', null, 'string'],
    [5, '2000', null, 'string'],
    [60, '3000', 'lease_expired', 'string'],
    [60, '3001', 'lease_expired', 'string'],
  ]);
  expect(scan.requests.every((n) => !('sentNs' in (n.data as object)) && !('origin' in (n.data as object)))).toBe(true);
  expect(scan.service.map((n) => n.data)).toEqual([{ t: 'fence', op: 'enable', outcome: 'ok' }]);
  expect(scan.outputs.every((n) => n.kind !== 'service')).toBe(true);
  // The stamps above are made up (1000, 2000 ...), not on the host clock the frames' host times are on:
  // replay it as format 2 recorded it, without them (the service's clock moves only at recorded requests).
  delete scan.hostTimes;

  const cues: ServiceCue[] = [];
  let pacer: ReplayPacer | undefined;
  const host = await pacedHost(file, scan, (m) => pacer?.observe(m));
  const p = (pacer = new ReplayPacer(host, scan, { file, mode: 'strict', toService: (m) => cues.push(m) }));
  // statusReadsAll: the recording's header says every status read is noted (none here).
  expect(cues).toEqual([{ tap: 'cue', clockNs: 1_000n, hostClock: false, fences: ['enable'], fenceOutcomes: ['ok'], statusReadsAll: true }]);
  // the live service: other generation and stamps; it ends its grant only when told the recorded lease ran out
  const queue: unknown[] = [
    { t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n },
    { t: 'cmd', id: 9, op: 'enable', generation: 42n, axisMask: ALL, sentNs: 78n },
  ];
  for (let guard = 0; guard < 1000; guard++) {
    const s = p.advance(50);
    if (s === 'end') break;
    if (s !== 'wait') continue;
    // (the early cue, given once the enable was sent, is not answered here: the core reaches the expiry's cycle)
    const expire = cues.find((c) => c.expire && c.clockNs === 3_000n);
    if (!queue.length && expire) {
      queue.push({ t: 'cancel_home', sentNs: 1n, origin: 'lease_expired' }, { t: 'grant', generation: expire.expire!.generation, deadlineNs: 0n, active: false, axisMask: 0, sentNs: 2n, origin: 'lease_expired' });
      cues.splice(cues.indexOf(expire), 1, { ...expire, expire: { generation: -1n } }); // answered once
    }
    if (!queue.length) break;
    p.offer(queue.shift());
  }
  const verdict = p.finish();
  await host.close();
  // waiting at the enable the service's clock was its recorded send time; at the expiry, the expiry's, and the cue named live generation 42
  // (cues of host times, anchors and pairs, repeat the clock: docs/recording.md "Two clocks")
  expect(cues.filter((c) => c.clockNs === 2_000n && !c.anchors && !c.pairs && !c.expire)).toHaveLength(1);
  expect(cues.find((c) => c.clockNs === 3_000n && c.expire)).toMatchObject({ expire: { generation: -1n } });
  expect(cues.map((c) => c.clockNs)).toEqual([...cues.map((c) => c.clockNs)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
  expect(verdict).toMatchObject({ divergence: null, requests_matched: 4, requests_unsent: 0, expiries_replayed: 1, service_clock: 'recorded', cycles: 200 });
});

test('format 2: a command the recorded core handled late (after a stall) is judged at the recorded host time, so a lease that ran out meanwhile runs out in the replay too', async () => {
  const file = tmp('stall.hilrec');
  // On the real-time clock (as a suite run records) the core's host clock and its cycle times are the
  // monotonic clock: the lease runs out during the 400 ms stall, which the core's next cycle also sees.
  const deadline = process.hrtime.bigint() + 150_000_000n;
  const script: Array<[number, ToCore]> = [
    [0, { t: 'grant', generation: 7n, deadlineNs: deadline, active: true, axisMask: ALL }],
    [2, { t: 'inject', id: 1, fault: { kind: 'stall_next_command', ms: 400 } }],
    [5, { t: 'cmd', id: 2, op: 'enable', generation: 7n, axisMask: ALL }],
  ];
  const recorded = await recordStamped(file, script, 40, { mode: 'realtime', spinNs: 0 });
  const reply = recorded.find((m): m is Extract<FromCore, { t: 'reply' }> => m.t === 'reply' && m.id === 2)!;
  expect(reply.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.no_grant });
  const scan = scanForPacing(file);
  expect(BigInt(scan.requests[2]!.host_ns!)).toBeGreaterThan(deadline);
  const { verdict, sent } = await paced(file, script.map(([, m]) => m));
  expect(verdict).toMatchObject({ divergence: null, requests_matched: 3, outputs_matched: scan.outputs.length });
  expect(sent.find((m): m is Extract<FromCore, { t: 'reply' }> => m.t === 'reply' && m.id === 2)!.result).toEqual(reply.result);
});

test('format 1 (no service stamps): the pacer gives the live service no clock and no cues (service_clock live)', async () => {
  const file = tmp('f1.hilrec');
  await record(file);
  const scan = scanForPacing(file);
  // what a format 1 recording is: the same requests without the stamps
  for (const n of scan.requests) delete n.sent_ns;
  const cues: ServiceCue[] = [];
  const host = await pacedHost(file, scan);
  const p = new ReplayPacer(host, scan, { file, mode: 'strict', toService: (m) => cues.push(m) });
  p.advance(100);
  expect(cues).toEqual([]);
  expect(p.finish()).toMatchObject({ service_clock: 'live', expiries_replayed: 0 });
  await host.close();
});

test('paced to the recorded time: a cycle runs at its recorded wall time counted from where the live side last met the replay; a late request re-anchors, an early one is caught up flat out', async () => {
  const file = tmp('wall.hilrec');
  await record(file); // stepped clock: frames 1 ms apart
  const scan = scanForPacing(file);
  let wall = 0;
  const host = await pacedHost(file, scan);
  try {
    const p = new ReplayPacer(host, scan, { file, mode: 'strict', speed: 1, wallMs: () => wall });
    const live = liveScript(42n, 100);
    expect(p.advance(100_000)).toBe('wait'); // the grant arrives at cycle 0
    p.offer(live[0]);
    // Met at wall 0: cycle 1 runs at once, cycle 2 is due 1 ms later.
    expect(p.advance(100_000)).toBe('pace');
    expect(host.core.cycleCount).toBe(1);
    expect(p.pauseMs).toBeCloseTo(1, 6);
    wall = 3.5; // cycles 2, 3, 4 are due (1, 2, 3 ms); cycle 5 at 4 ms
    expect(p.advance(100_000)).toBe('pace');
    expect(host.core.cycleCount).toBe(4);
    expect(p.pauseMs).toBeCloseTo(0.5, 6);
    wall = 100; // long past: the core runs to the next recorded request (enable at cycle 5) and waits
    expect(p.advance(100_000)).toBe('wait');
    expect(host.core.cycleCount).toBe(5);
    // The live enable comes 95 ms later than recorded: recorded time restarts from it, no burst.
    p.offer(live[1]);
    expect(p.advance(100_000)).toBe('pace');
    expect(host.core.cycleCount).toBe(6);
    expect(p.pauseMs).toBeCloseTo(1, 6);
    // The live arm comes before the core reached its recorded cycle 120: caught up flat out, then paced
    // again from that hand-over.
    p.offer(live[2]);
    expect(p.advance(100_000)).toBe('pace');
    expect(host.core.cycleCount).toBe(121);
    wall = 100.5;
    expect(p.advance(100_000)).toBe('pace');
    expect(host.core.cycleCount).toBe(121);
    wall = 150;
    expect(p.advance(100_000)).toBe('pace');
    expect(host.core.cycleCount).toBe(171); // frame k due at 100 + (k - 121) ms
    expect(p.finish()).toMatchObject({ pace: 1, divergence: null, requests_matched: 3 });
  } finally {
    await host.close();
  }
});

test('paced at another speed: recorded time runs at that factor of wall time; a bad speed is refused', async () => {
  const file = tmp('speed.hilrec');
  await record(file);
  const scan = scanForPacing(file);
  let wall = 0;
  const host = await pacedHost(file, scan);
  try {
    expect(() => new ReplayPacer(host, scan, { file, mode: 'strict', speed: 0 })).toThrow(RangeError);
    const p = new ReplayPacer(host, scan, { file, mode: 'strict', speed: 4, wallMs: () => wall });
    const live = liveScript(42n, 100);
    expect(p.advance(100_000)).toBe('wait');
    p.offer(live[0]);
    p.offer(live[1]);
    expect(p.advance(100_000)).toBe('pace'); // caught up to the enable (live ahead), then paced from it
    expect(host.core.cycleCount).toBe(6);
    wall = 10; // 40 ms of recorded time
    expect(p.advance(100_000)).toBe('pace');
    expect(host.core.cycleCount).toBe(46);
  } finally {
    await host.close();
  }
});

/**
 * A 20-cycle recording on the real-time (host) clock: an acquire's grant at cycle 2 stamped now, and `then`
 * (made from that time) at cycle 6. For the two-clocks tests.
 */
async function hostClockRecording(name: string, then: (sent: bigint) => ToCore & RecordStamp) {
  const file = tmp(name);
  const sent = process.hrtime.bigint();
  await recordStamped(
    file,
    [
      [2, { t: 'grant', generation: 7n, deadlineNs: sent + 500_000_000n, active: true, axisMask: ALL, sentNs: sent }],
      [6, then(sent)],
    ],
    20,
    { mode: 'realtime', spinNs: 0 },
  );
  return { file, sent, scan: scanForPacing(file) };
}

test('two clocks: on a host-clock recording the core\'s times reach the live service in its own time base; a deadline it sent comes back as sent, a recorded one reads the same every time, 0 stays 0', async () => {
  // The frames' times are the host clock while recording; the replay's live clock is minutes ahead of them (a suite run).
  const { file, sent, scan } = await hostClockRecording('two-clocks.hilrec', (sent) => ({ t: 'grant', generation: 7n, deadlineNs: sent + 900_000_000n, active: true, axisMask: ALL, sentNs: sent + 4_000_000n }));
  expect(scan.header.clock).toBe('realtime');
  let live = sent + 300_000_000_000n; // the live host clock, moved by hand
  let published: FromCore | undefined;
  const host = await pacedHost(file, scan, (m) => {
    if (m.t === 'status') published = m;
  });
  try {
    const p = new ReplayPacer(host, scan, { file, mode: 'strict', toService: () => undefined, hostNs: () => live });
    expect(p.advance(1000)).toBe('wait');
    // the live service's acquire, with a deadline on its (live) clock: the core gets the recorded one
    p.offer({ t: 'grant', generation: 42n, deadlineNs: live + 500_000_000n, active: true, axisMask: ALL, sentNs: live });
    const acquired = live + 500_000_000n;
    p.advance(3);
    const status = () => {
      host.core.publish(host.core.now);
      return p.outward(published!) as Extract<FromCore, { t: 'status' }>;
    };
    live += 7_000n;
    let st = status().status;
    // the core's "now": the live time at which the replayed core publishes it
    expect(st.now_ns).toBe(live);
    // the core's grant receipt holds the recorded deadline; the live service sees the one it sent
    expect(BigInt(String(host.core.grant.deadlineNs))).toBe(sent + 500_000_000n);
    expect(st.grant_observation.DeadlineHostNs).toBe(acquired);
    // an event's time: the live time at which the core sent it
    live += 1_000n;
    const ev = p.outward({ t: 'event', type: 'limit_reached', payload: { axis: 1, host_ns: host.core.now }, time_ns: host.core.now } as FromCore) as Extract<FromCore, { t: 'event' }>;
    expect(ev.time_ns).toBe(live);
    expect(ev.payload.host_ns).toBe(live);
    // a recorded renewal's deadline (the live renewal never reaches the core): translated once, the same every time after
    p.advance(100);
    const renewed = status().status.grant_observation.DeadlineHostNs as bigint;
    expect(BigInt(String(host.core.grant.deadlineNs))).toBe(sent + 900_000_000n);
    expect(renewed > live).toBe(true);
    live += 5_000_000n;
    st = status().status;
    expect(st.grant_observation.DeadlineHostNs).toBe(renewed);
    expect(st.now_ns > renewed - 900_000_000n).toBe(true);
    // no deadline is no deadline in any time base
    expect((p.outward({ t: 'event', type: 'x', payload: { deadline_ns: 0n } } as unknown as FromCore) as Extract<FromCore, { t: 'event' }>).payload.deadline_ns).toBe(0n);
  } finally {
    await host.close();
  }
});

test('two clocks: the pacer cues the live service where the replay met the live side (the start, a request handed over) and each pair it made, for the telemetry ring', async () => {
  const { file, sent, scan } = await hostClockRecording('two-clocks-cues.hilrec', (sent) => ({ t: 'cmd', id: 1, op: 'enable', generation: 7n, axisMask: ALL, sentNs: sent + 1n }));
  let live = sent + 300_000_000_000n;
  const cues: ServiceCue[] = [];
  const host = await pacedHost(file, scan);
  try {
    const p = new ReplayPacer(host, scan, { file, mode: 'strict', toService: (m) => cues.push(m), hostNs: () => live });
    const anchors = () => cues.flatMap((c) => c.anchors ?? []).map((a) => [a.recordedNs - BigInt(scan.header.t0_ns), a.liveNs - sent]);
    const hostAt = (c: number) => BigInt(scan.times[c - 1]!); // the recorded host time of cycle c, from t0 (host clock: the frame time)
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(2);
    // the start (the core's origin, a cycle before its first frame) and the hold at the grant (pacing
    // counts from there too)
    expect(anchors()).toEqual([[-1_000_000n, 300_000_000_000n], [hostAt(2), 300_000_000_000n]]);
    live += 40_000_000n; // the live acquire comes 40 ms later
    p.offer({ t: 'grant', generation: 42n, deadlineNs: live + 500_000_000n, active: true, axisMask: ALL, sentNs: live });
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(6);
    // the acquire handed over at cycle 2, 40 ms later (for what the core did after it), then the hold at the enable
    expect(anchors().slice(2)).toEqual([[hostAt(2), 300_040_000_000n], [hostAt(6), 300_040_000_000n]]);
    expect(cues.flatMap((c) => c.pairs ?? [])).toEqual([[sent + 500_000_000n, live + 500_000_000n]]);
    // still held: met again where it stands (the service keeps the last of one recorded time)
    live += 5_000_000n;
    expect(p.advance(1000)).toBe('wait');
    expect(anchors().slice(4)).toEqual([[hostAt(6), 300_045_000_000n]]);
  } finally {
    await host.close();
  }
});

test('two clocks: a stepped recording\'s core time is simulated, not host time: a publication\'s and an event\'s time go to the live service as recorded', async () => {
  const file = tmp('two-clocks-stepped.hilrec');
  await recordStamped(file, [[2, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }]], 10);
  const scan = scanForPacing(file);
  const host = await pacedHost(file, scan);
  try {
    const p = new ReplayPacer(host, scan, { file, mode: 'strict', toService: () => undefined, hostNs: () => 1_000_000_000_000n });
    p.advance(1000);
    const ev = p.outward({ t: 'event', type: 'limit_reached', payload: { axis: 1 }, time_ns: host.core.now } as FromCore) as Extract<FromCore, { t: 'event' }>;
    expect(ev.time_ns).toBe(host.core.now);
  } finally {
    await host.close();
  }
});

test('format 2: a recorded lease expiry is cued early once every request recorded before it has been sent, and not before: on a host-clock recording with how long after the deadline it came, on a stepped one to end it now', async () => {
  const D = 500_000_000n;
  for (const clock of [{ mode: 'realtime', spinNs: 0 }, { mode: 'stepped' }] as ClockSpec[]) {
    const file = tmp(`expiry-soon-${clock.mode}.hilrec`);
    await recordStamped(
      file,
      [
        [0, { t: 'grant', generation: 7n, deadlineNs: D, active: true, axisMask: ALL, sentNs: 1_000n }],
        [5, { t: 'cmd', id: 1, op: 'enable', generation: 7n, axisMask: ALL, sentNs: 2_000n }],
        [60, { t: 'cancel_home', sentNs: D + 3_000_000n, origin: 'lease_expired' }],
        [60, { t: 'grant', generation: 7n, deadlineNs: 0n, active: false, axisMask: 0, sentNs: D + 3_000_001n, origin: 'lease_expired' }],
      ],
      200,
      clock,
    );
    const scan = scanForPacing(file);
    delete scan.hostTimes; // made-up stamps (see the test above)
    const cues: ServiceCue[] = [];
    const host = await pacedHost(file, scan);
    try {
      const p = new ReplayPacer(host, scan, { file, mode: 'strict', toService: (m) => cues.push(m) });
      const expiries = () => cues.filter((c) => c.expire).map((c) => c.expire);
      expect(p.advance(1000)).toBe('wait'); // at the acquire
      p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n });
      expect(p.advance(2)).toBe('more');
      expect(expiries()).toEqual([]); // the enable recorded before the expiry is not sent yet
      p.offer({ t: 'cmd', id: 9, op: 'enable', generation: 42n, axisMask: ALL, sentNs: 78n });
      expect(p.advance(2)).toBe('more');
      expect(host.core.cycleCount).toBeLessThan(60);
      // nothing the live side sends comes before the expiry now: cued
      expect(expiries()).toEqual([clock.mode === 'realtime' ? { generation: 42n, lateNs: 3_000_000n } : { generation: 42n }]);
      p.offer({ t: 'cancel_home', sentNs: 1n, origin: 'lease_expired' });
      p.offer({ t: 'grant', generation: 42n, deadlineNs: 0n, active: false, axisMask: 0, sentNs: 2n, origin: 'lease_expired' });
      while (p.advance(1000) === 'more');
      expect(expiries()).toHaveLength(1); // the core never held there: no second cue
      expect(p.finish()).toMatchObject({ divergence: null, requests_matched: 4, requests_unsent: 0, expiries_replayed: 1 });
    } finally {
      await host.close();
    }
  }
});

test('format 2 status reads: the core publishes at each recorded read\'s publication cycle, nothing newer until the read, and holds where the read arrived until the live service serves it; a read never made is given up after the bound and counted', async () => {
  const file = tmp('reads.hilrec');
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [12, { tap: 'note', data: { t: 'status_read', cycle: '10' } }],
      [12, { tap: 'note', data: { t: 'status_read', cycle: '10' } }],
      [5, { t: 'cmd', id: 1, op: 'enable', generation: 7n, axisMask: ALL, sentNs: 2_000n }],
      [33, { tap: 'note', data: { t: 'status_read', cycle: '30' } }],
      [45, { tap: 'note', data: { t: 'status_read', cycle: '40' } }],
    ],
    60,
  );
  const scan = scanForPacing(file);
  const cues: ServiceCue[] = [];
  let wall = 0;
  let pacer: ReplayPacer | undefined;
  const { cycles: published, send, flush } = publications(() => pacer, { observe: true });
  const host = await pacedHost(file, scan, send);
  try {
    const p = (pacer = new ReplayPacer(host, scan, { file, mode: 'strict', toService: (m) => cues.push(m), wallMs: () => wall }));
    expect(cues[0]!.statusReads).toEqual([10n, 10n, 30n, 40n]);
    const read = { tap: 'note', data: { t: 'status_read', cycle: '10' } };
    expect(p.advance(1000)).toBe('wait');
    flush();
    p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n });
    p.offer({ t: 'cmd', id: 9, op: 'enable', generation: 42n, axisMask: ALL, sentNs: 78n });
    // held at cycle 12 where the reads arrived, the last publication the one of cycle 10 (the enable made
    // the core publish at 11 and 12 otherwise); twice (two reads of one publication)
    expect(p.advance(1000)).toBe('wait');
    flush();
    expect(host.core.cycleCount).toBe(12);
    expect(published.at(-1)).toBe(10n);
    expect(p.mayPublish()).toBe(false);
    p.note(read.data);
    flush();
    expect(p.advance(1000)).toBe('wait');
    flush();
    expect(host.core.cycleCount).toBe(12);
    expect(published.at(-1)).toBe(10n);
    p.note(read.data);
    flush();
    expect(p.advance(1000)).toBe('wait');
    flush();
    expect(host.core.cycleCount).toBe(33);
    expect(published.filter((c) => c > 30n && c <= 33n)).toEqual([]);
    expect(published).toContain(30n);
    // the live test never makes this read: held for the bound of wall time, then given up
    wall = HOLD_BOUND_MS - 1;
    expect(p.advance(1000)).toBe('wait');
    flush();
    expect(host.core.cycleCount).toBe(33);
    wall = HOLD_BOUND_MS;
    expect(p.advance(1000)).toBe('wait');
    flush();
    expect(host.core.cycleCount).toBe(45);
    p.note(read.data);
    flush();
    expect(p.advance(1000)).toBe('end');
    expect(p.finish()).toMatchObject({ status_reads: { recorded: 4, served: 3, missed: 1 }, divergence: null, requests_matched: 2 });
    // the read given up is a lost hold, where and what it waited for (the harness ends the test in ERROR)
    expect(p.finish().holds_lost).toEqual([{ kind: 'status_read', cycle: 33, detail: 'publication of cycle 30' }]);
  } finally {
    await host.close();
  }
});

test('outputs the recorded service had not taken in when it served a status read (its `seen`) reach the live service only once that read is served or given up; a recording without `seen` keeps none back', async () => {
  const script = (seen?: number): Array<[number, (ToCore & RecordStamp) | ToTap]> => [
    [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
    [5, { t: 'cmd', id: 1, op: 'enable', generation: 7n, axisMask: ALL, sentNs: 2_000n }],
    // Served having taken in only the enable's receipt: the enable_changed event came after the read.
    [20, { tap: 'note', data: { t: 'status_read', cycle: '15', ...(seen !== undefined ? { seen } : {}) } }],
  ];
  for (const seen of [undefined, 'receipt'] as const) {
    const file = tmp(`seen-${seen ?? 'none'}.hilrec`);
    await recordStamped(file, script(), 40); // only to count the recorded outputs up to the receipt
    const first = scanForPacing(file);
    const receipt = first.outputs.findIndex((o) => o.kind === 'reply') + 1;
    const event = first.outputs.findIndex((o) => o.kind === 'event' && (o.data as { type?: string }).type === 'enable_changed');
    expect(event).toBeGreaterThanOrEqual(receipt); // the event is an output after the receipt
    await recordStamped(file, script(seen === 'receipt' ? receipt : undefined), 40);
    const scan = scanForPacing(file);
    let pacer: ReplayPacer | undefined;
    const delivered: FromCore[] = [];
    const send = (m: FromCore) => {
      pacer?.observe(m);
      const out = pacer ? pacer.publication(pacer.outward(m)) : m;
      if (out) delivered.push(out);
    };
    const host = await pacedHost(file, scan, send);
    try {
      const p = (pacer = new ReplayPacer(host, scan, { file, mode: 'strict', toService: () => undefined }));
      const flush = () => delivered.push(...(p.takePublications() as FromCore[]));
      const gotEvent = () => delivered.some((m) => m.t === 'event' && m.type === 'enable_changed');
      expect(p.advance(1000)).toBe('wait');
      p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n });
      p.offer({ t: 'cmd', id: 9, op: 'enable', generation: 42n, axisMask: ALL, sentNs: 78n });
      expect(p.advance(1000)).toBe('wait'); // held at the read (cycle 20)
      flush();
      expect(host.core.cycleCount).toBe(20);
      expect(delivered.some((m) => m.t === 'reply' && m.id === 9)).toBe(true);
      // With `seen`: the event waits for the read; without, it went at once.
      expect(gotEvent()).toBe(seen === undefined);
      p.note({ t: 'status_read', cycle: '15' });
      flush();
      expect(gotEvent()).toBe(true);
      expect(p.advance(1000)).toBe('end');
      expect(p.finish()).toMatchObject({ divergence: null });
    } finally {
      await host.close();
    }
  }
});

test('format 2 status reads: a publication newer than a pending read\'s (the next read\'s, forced at its cycle) reaches the live service only once that read is served or given up', async () => {
  const file = tmp('reads-kept.hilrec');
  // machine.test.ts "reset_fault after the condition cleared": read 1 served from publication 20 arrived at
  // cycle 23, read 2 was served from publication 23 (the core had published it; it was still on its way)
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [23, { tap: 'note', data: { t: 'status_read', cycle: '20' } }],
      [34, { tap: 'note', data: { t: 'status_read', cycle: '23' } }],
      [40, { tap: 'note', data: { t: 'status_read', cycle: '23' } }],
    ],
    50,
  );
  const scan = scanForPacing(file);
  let wall = 0;
  let pacer: ReplayPacer | undefined;
  const { cycles: sent, send, flush } = publications(() => pacer);
  const host = await pacedHost(file, scan, send);
  try {
    const p = (pacer = new ReplayPacer(host, scan, { file, mode: 'strict', toService: () => undefined, wallMs: () => wall }));
    expect(p.advance(1000)).toBe('wait');
    p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n });
    expect(p.advance(1000)).toBe('wait');
    flush();
    // held at 23 for read 1: publication 20 went out, 23 (forced for read 2) is kept back
    expect(host.core.cycleCount).toBe(23);
    expect(sent).toContain(20n);
    expect(sent.filter((c) => c > 20n)).toEqual([]);
    p.note({ t: 'status_read', cycle: '20' });
    flush();
    expect(sent.at(-1)).toBe(23n); // read 1 served: read 2 may have publication 23 now
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(34);
    p.note({ t: 'status_read', cycle: '23' });
    expect(p.advance(1000)).toBe('wait');
    flush();
    expect(host.core.cycleCount).toBe(40);
    // read 3 never made: what is kept back goes out when it is given up
    const before = sent.length;
    wall = HOLD_BOUND_MS;
    p.advance(1000);
    flush();
    expect(sent.length).toBeGreaterThan(before);
    expect(p.finish().holds_lost).toEqual([{ kind: 'status_read', cycle: 40, detail: 'publication of cycle 23' }]);
  } finally {
    await host.close();
  }
});

test('format 2 status reads: a kept publication a later read was served from is not given up for a newer one; each goes out in order once no pending read needs an older one', async () => {
  const file = tmp('reads-kept-two.hilrec');
  // Read 1 arrived at 34 and was served from publication 20; read 2 (arrived at 40) from 25 and read 3 from
  // 30, both already published by the core when read 1 was served (still on their way to the service).
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [34, { tap: 'note', data: { t: 'status_read', cycle: '20' } }],
      [40, { tap: 'note', data: { t: 'status_read', cycle: '25' } }],
      [45, { tap: 'note', data: { t: 'status_read', cycle: '30' } }],
    ],
    50,
  );
  const scan = scanForPacing(file);
  let pacer: ReplayPacer | undefined;
  const { cycles: sent, send, flush } = publications(() => pacer);
  const host = await pacedHost(file, scan, send);
  try {
    const p = (pacer = new ReplayPacer(host, scan, { file, mode: 'strict', toService: () => undefined, wallMs: () => 0 }));
    expect(p.advance(1000)).toBe('wait');
    p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n });
    expect(p.advance(1000)).toBe('wait');
    flush();
    // Held at 34 for read 1: 20 went out, 25 and 30 (forced for reads 2 and 3) are kept back.
    expect(host.core.cycleCount).toBe(34);
    expect(sent.filter((c) => c > 20n)).toEqual([]);
    p.note({ t: 'status_read', cycle: '20' });
    flush();
    // Read 2 needs 25: it goes out, 30 stays kept for read 3 (one place for both gave 25's to 30).
    expect(sent.filter((c) => c > 20n)).toEqual([25n]);
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(40);
    p.note({ t: 'status_read', cycle: '25' });
    flush();
    expect(sent.filter((c) => c > 20n)).toEqual([25n, 30n]);
    expect(p.advance(1000)).toBe('wait');
    p.note({ t: 'status_read', cycle: '30' });
    p.advance(1000);
    expect(p.finish().holds_lost).toEqual([]);
  } finally {
    await host.close();
  }
});

test('a live telemetry poll is served once the core has reached the cycle of the recorded poll it stands for, not from a core still on its way; at once when none is left', async () => {
  const file = tmp('pollturn.hilrec');
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [10, { tap: 'note', data: { t: 'telemetry_read' } }],
      [25, { tap: 'note', data: { t: 'telemetry_read' } }],
    ],
    40,
  );
  const scan = scanForPacing(file);
  const host = await pacedHost(file, scan);
  try {
    const p = new ReplayPacer(host, scan, { file, mode: 'strict', toService: () => undefined });
    const poll = { tap: 'note', data: { t: 'telemetry_read' } };
    // Held at the grant (cycle 0): a poll asking now must wait for cycle 10.
    expect(p.advance(1000)).toBe('wait');
    p.pollTurn(1);
    expect(p.takePollTurns()).toEqual([]);
    p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n });
    expect(p.takePollTurns()).toEqual([]);
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(10);
    expect(p.takePollTurns()).toEqual([1]);
    expect(p.takePollTurns()).toEqual([]); // answered once
    p.note(poll.data); // served and noted
    // The next live poll stands for the recorded one at 25: not before the core is there.
    p.pollTurn(2);
    expect(p.takePollTurns()).toEqual([]);
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(25);
    expect(p.takePollTurns()).toEqual([2]);
    p.note(poll.data);
    // No recorded poll left: a further poll is served at once.
    p.pollTurn(3);
    expect(p.takePollTurns()).toEqual([3]);
    expect(p.advance(1000)).toBe('end');
    expect(p.finish()).toMatchObject({ telemetry_reads: { recorded: 2, served: 2, missed: 0 }, divergence: null });
  } finally {
    await host.close();
  }
});

test('the verdict is written again at a wait only when something in it but its wall time changed; the end always writes it', async () => {
  const file = tmp('written.hilrec');
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [10, { tap: 'note', data: { t: 'telemetry_read' } }],
    ],
    20,
  );
  const scan = scanForPacing(file);
  const host = await pacedHost(file, scan);
  const report = tmp('written-verdict.json');
  let wall = 0;
  try {
    const p = new ReplayPacer(host, scan, { file, mode: 'strict', toService: () => undefined, wallMs: () => wall, reportFile: report });
    expect(p.advance(1000)).toBe('wait');
    p.writeVerdict(true);
    expect(existsSync(report)).toBe(true);
    rmSync(report);
    wall = 500; // only the wall time moved
    p.writeVerdict(true);
    expect(existsSync(report)).toBe(false);
    p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n });
    expect(p.advance(1000)).toBe('wait'); // held at the poll: ten more cycles, one more request matched
    p.writeVerdict(true);
    expect(JSON.parse(readFileSync(report, 'utf8'))).toMatchObject({ cycles: 10, requests_matched: 1 });
    rmSync(report);
    p.finish();
    expect(existsSync(report)).toBe(true);
  } finally {
    await host.close();
  }
});

test('format 2 telemetry polls: the core never runs past a recorded poll before the live service has served as many; a poll never made is given up after the bound', async () => {
  const file = tmp('tpolls.hilrec');
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [10, { tap: 'note', data: { t: 'telemetry_read' } }],
      [20, { tap: 'note', data: { t: 'telemetry_read' } }],
      [20, { tap: 'note', data: { t: 'telemetry_read' } }],
      [30, { tap: 'note', data: { t: 'telemetry_read' } }],
    ],
    50,
  );
  const scan = scanForPacing(file);
  let wall = 0;
  const host = await pacedHost(file, scan);
  try {
    const p = new ReplayPacer(host, scan, { file, mode: 'strict', toService: () => undefined, wallMs: () => wall });
    const poll = { tap: 'note', data: { t: 'telemetry_read' } };
    expect(p.advance(1000)).toBe('wait');
    p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n });
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(10);
    p.note(poll.data);
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(20);
    p.note(poll.data); // one of the two noted at 20: still held
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(20);
    p.note(poll.data);
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(30);
    wall = HOLD_BOUND_MS - 1; // the last poll never comes: held for the bound, then given up
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(30);
    wall = HOLD_BOUND_MS;
    expect(p.advance(1000)).toBe('end');
    expect(p.finish()).toMatchObject({ telemetry_reads: { recorded: 4, served: 3, missed: 1 }, divergence: null });
    // a hold the live service kept in vain (a fence decision) is reported beside the core's own
    p.note({ t: 'hold_lost', kind: 'fence', detail: 'reset_fault' });
    expect(p.finish().holds_lost).toEqual([
      { kind: 'telemetry_poll', cycle: 30 },
      { kind: 'fence', cycle: 50, detail: 'reset_fault' },
    ]);
  } finally {
    await host.close();
  }
});

test('the default pace (auto): flat out to each sync point, paced to the recorded wall time only while the recorded test had a stream open; the core holds at a recorded open until the live stream opens, and a recording that does not note streams is paced throughout', async () => {
  const file = tmp('watch.hilrec');
  const watch = (open: boolean) => ({ tap: 'note', data: { t: 'watch', stream: 'telemetry', open } }) as ToTap & { tap: 'note' };
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [10, watch(true)],
      [30, watch(false)],
    ],
    50,
  );
  const scan = scanForPacing(file);
  expect(scan.header.watch_notes).toBe(true);
  let wall = 0;
  /** Replay `recording` in the default pace with the live acquire handed over, then `then`. */
  const watched = async (recording: PacingScan, then: (p: ReplayPacer, host: CoreHost) => void) => {
    wall = 0;
    const host = await pacedHost(file, recording);
    try {
      const p = new ReplayPacer(host, recording, { file, mode: 'strict', toService: () => undefined, speed: 1, watched: true, wallMs: () => wall });
      expect(p.advance(1000)).toBe('wait');
      p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n });
      then(p, host);
    } finally {
      await host.close();
    }
  };
  await watched(scan, (p, host) => {
    // Flat out (the wall clock stands still) to the recorded open, and held there.
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(10);
    wall = HOLD_BOUND_MS - 1;
    expect(p.advance(1000)).toBe('wait');
    expect(host.core.cycleCount).toBe(10);
    // The live stream opens: paced from here, frame k due (k - 10) ms later.
    p.note(watch(true).data);
    const opened = wall;
    expect(p.advance(1000)).toBe('pace');
    expect(host.core.cycleCount).toBe(11);
    expect(p.pauseMs).toBeCloseTo(1, 6);
    wall = opened + 5;
    expect(p.advance(1000)).toBe('pace');
    expect(host.core.cycleCount).toBe(16);
    // Past the recorded close the core runs flat out again: to the end without the wall clock moving on.
    wall = opened + 20;
    expect(p.advance(1000)).toBe('end');
    expect(host.core.cycleCount).toBe(50);
    expect(p.finish()).toMatchObject({ pace: 1, flat_between_watches: true, watches: { recorded: 1, served: 1, missed: 0 }, holds_lost: [], divergence: null });
  });
  // A stream the live test never opens: held for the bound, then given up (an ERROR for the harness).
  await watched(scan, (p) => {
    expect(p.advance(1000)).toBe('wait');
    wall = HOLD_BOUND_MS;
    p.advance(1000);
    expect(p.finish()).toMatchObject({ watches: { recorded: 1, served: 0, missed: 1 }, holds_lost: [{ kind: 'watch', cycle: 10 }] });
  });
  // Made before streams were noted: paced throughout (the first cycle after the grant is due 1 ms on).
  await watched({ ...scan, header: { ...scan.header, watch_notes: undefined } }, (p, host) => {
    expect(p.advance(1000)).toBe('pace');
    expect(host.core.cycleCount).toBe(1);
    const v = p.finish();
    expect(v).toMatchObject({ pace: 1 });
    expect(v).not.toHaveProperty('flat_between_watches');
    expect(v).not.toHaveProperty('watches');
  });
});

/** The live service's note of its answer to a control or program request (format 3). */
const reply = (op: string, status: number, label = '') => ({ tap: 'note', data: { t: 'http_reply', op, status, label } }) as ToTap & { tap: 'note' };

/** Replay `file` flat out with the live acquire and then `answers` offered, and return the verdict. */
async function replayAnswers(file: string, scan: PacingScan, answers: Array<ReturnType<typeof reply>>) {
  const host = await pacedHost(file, scan);
  const p = new ReplayPacer(host, scan, { file, mode: 'strict', toService: () => undefined });
  p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL, sentNs: 77n });
  for (const a of answers) p.note(a.data);
  while (p.advance(100) === 'more');
  const v = p.finish();
  await host.close();
  return v;
}

test('format 3: the live service\'s answers to control and program requests are matched with the recorded ones (either order within the look-ahead); another status or label, or one the recording lacks, is the divergence; one never given is counted', async () => {
  const file = tmp('replies.hilrec');
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [0, reply('acquire', 200)],
      [3, reply('enable', 200)],
      [3, reply('arm', 409, 'not_ready')],
      [8, reply('stop', 200)],
    ],
    20,
  );
  const scan = scanForPacing(file);
  expect(scan.service.map((n) => n.data)).toEqual([
    { t: 'http_reply', op: 'acquire', status: 200, label: '' },
    { t: 'http_reply', op: 'enable', status: 200, label: '' },
    { t: 'http_reply', op: 'arm', status: 409, label: 'not_ready' },
    { t: 'http_reply', op: 'stop', status: 200, label: '' },
  ]);
  const run = (answers: Array<ReturnType<typeof reply>>) => replayAnswers(file, scan, answers);
  // the arm and the enable answered in the other order (two requests in flight): all four matched
  const same = await run([reply('acquire', 200), reply('arm', 409, 'not_ready'), reply('enable', 200), reply('stop', 200)]);
  expect(same).toMatchObject({ divergence: null, service_replies: { recorded: 4, matched: 4, first_missing: null } });
  // the arm admitted where the recording refused it: a divergence on its status
  const admitted = await run([reply('acquire', 200), reply('enable', 200), reply('arm', 200)]);
  expect(admitted.divergence).toMatchObject({ kind: 'service', path: 'status', expected: { data: { op: 'arm', status: 409 } }, actual: { data: { op: 'arm', status: 200, label: '' } } });
  // refused with another label: a divergence on the label
  const other = await run([reply('acquire', 200), reply('enable', 200), reply('arm', 409, 'fence')]);
  expect(other.divergence).toMatchObject({ kind: 'service', path: 'label' });
  // an answer the recording does not have
  const extra = await run([reply('acquire', 200), reply('home', 200)]);
  expect(extra.divergence).toMatchObject({ kind: 'service', expected: null, actual: { data: { op: 'home' } } });
  // a request polled until its answer changes: repeats of an answer are compared once, however many
  const polled = await run([reply('acquire', 200), reply('acquire', 200), reply('enable', 200), reply('arm', 409, 'not_ready'), reply('arm', 409, 'not_ready'), reply('stop', 200)]);
  expect(polled).toMatchObject({ divergence: null, service_replies: { recorded: 4, matched: 4 } });
  // the test stopped after the enable: two recorded answers never given, the first of them named
  const fewer = await run([reply('acquire', 200), reply('enable', 200)]);
  expect(fewer).toMatchObject({ divergence: null, service_replies: { recorded: 4, matched: 2, first_missing: { data: { op: 'arm', status: 409, label: 'not_ready' } } } });
});

test('format 3: answers of concurrent requests of one operation may come in another order than recorded (a stop whose reply the test does not wait for, answered after the test\'s next stops): an answer already matched is a repeat, one never recorded still diverges', async () => {
  const file = tmp('replies-order.hilrec');
  // suites/grant/drain.test.ts as recorded: the first stop answered at once, then the test's stop with the
  // older generation (200), the one with a newer generation (409), and the cleanup's stop (409 again)
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [0, reply('stop', 200)],
      [0, reply('stop', 200)],
      [0, reply('stop', 409, 'control_session_stale')],
      [9, reply('release', 409, 'control_session_stale')],
      [9, reply('stop', 409, 'control_session_stale')],
    ],
    20,
  );
  const scan = scanForPacing(file);
  const run = (answers: Array<ReturnType<typeof reply>>) => replayAnswers(file, scan, answers);
  // the first stop's answer after the other two (its core receipt came later on the replay): nothing differs
  const late = await run([reply('stop', 200), reply('stop', 409, 'control_session_stale'), reply('stop', 200), reply('release', 409, 'control_session_stale'), reply('stop', 409, 'control_session_stale')]);
  expect(late).toMatchObject({ divergence: null, service_replies: { recorded: 3, matched: 3, first_missing: null } });
  // as recorded: the same
  const asRecorded = await run([reply('stop', 200), reply('stop', 200), reply('stop', 409, 'control_session_stale'), reply('release', 409, 'control_session_stale'), reply('stop', 409, 'control_session_stale')]);
  expect(asRecorded).toMatchObject({ divergence: null, service_replies: { recorded: 3, matched: 3 } });
  // a stop answered with a label the recording never gave: still the divergence, after the repeats
  const other = await run([reply('stop', 200), reply('stop', 409, 'control_session_stale'), reply('stop', 200), reply('stop', 409, 'inhibited')]);
  expect(other.divergence).toMatchObject({ kind: 'service', actual: { data: { op: 'stop', status: 409, label: 'inhibited' } } });
  // a repeat counts only once it was matched: a 409 before any recorded 409 of the operation is not a
  // repeat of the stop's 200 (matched with the recorded 409 within the look-ahead instead)
  const early = await run([reply('stop', 409, 'control_session_stale'), reply('stop', 200)]);
  expect(early).toMatchObject({ divergence: null, service_replies: { matched: 2 } });
});

test('collapseRepeats: an answer equal to the previous answer of the same operation is dropped, whatever came between', () => {
  const r = (op: string, status: number, label = '') => ({ t: 'http_reply' as const, op, status, label });
  const xs = [r('prepare_program', 200), r('prepare_program', 409, 'busy'), r('status', 200), r('prepare_program', 409, 'busy'), r('prepare_program', 200), r('stop', 200), r('stop', 200)];
  expect(collapseRepeats(xs, (x) => x)).toEqual([r('prepare_program', 200), r('prepare_program', 409, 'busy'), r('status', 200), r('prepare_program', 200), r('stop', 200)]);
});

test('before a simulated crash the paced core runs flat out to the end of its recording (where the recorded core died), handing over what the live side sent, and writes its verdict', async () => {
  const file = tmp('crash.hilrec');
  await record(file);
  const scan = scanForPacing(file);
  const host = await pacedHost(file, scan);
  const report = tmp('crash-verdict.json');
  // A wall clock that never moves: paced at speed 1, no cycle after the first would ever be due.
  const p = new ReplayPacer(host, scan, { file, mode: 'strict', speed: 1, wallMs: () => 0, reportFile: report });
  for (const m of liveScript(42n, 100)) p.offer(m);
  expect(p.advance(1000)).toBe('pace');
  expect(host.core.cycleCount).toBeLessThan(CYCLES);
  p.runToEnd();
  expect(host.core.cycleCount).toBe(CYCLES);
  const written = JSON.parse(readFileSync(report, 'utf8')) as { cycles: number; requests_matched: number; requests_unsent: number; divergence: unknown };
  expect(written).toMatchObject({ cycles: CYCLES, requests_matched: SCRIPT.length, requests_unsent: 0, divergence: null });
  await host.close();
});

test('the first cue hands the live service what each recorded fence decision saw of its session, \'\' where a note does not say; a recording without any says nothing', async () => {
  const file = tmp('seen.hilrec');
  await recordStamped(
    file,
    [
      [0, { t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL, sentNs: 1_000n }],
      [1, { tap: 'note', data: { t: 'fence', op: 'stop', outcome: 'ok', seen: 'current' } }],
      [2, { tap: 'note', data: { t: 'fence', op: 'halt', outcome: 'control_session_stale' } }],
      [3, { tap: 'note', data: { t: 'fence', op: 'stop', outcome: 'control_session_stale', seen: 'revoked' } }],
    ],
    20,
  );
  const scan = scanForPacing(file);
  const cues: ServiceCue[] = [];
  const host = await pacedHost(file, scan);
  new ReplayPacer(host, scan, { file, mode: 'strict', toService: (m) => cues.push(m) });
  expect(cues[0]).toMatchObject({ fences: ['stop', 'halt', 'stop'], fenceOutcomes: ['ok', 'control_session_stale', 'control_session_stale'], fenceSeen: ['current', '', 'revoked'] });
  await host.close();
});
