// Paced replay of a recording made on the stepped clock (format 3): the recording keeps the test's steps
// as requests and the host time the core read in every cycle. The replayed core runs cycles only while a
// live step, matched with the recorded one, is under way, answers it at its last cycle as the stepped clock
// does (time, cycle count, answers produced), and judges host-time deadlines on the recorded host times: a
// lease that ran out between two steps while the test waited on the wall runs out at the same cycle.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import type { CompiledMachine } from '../config/types.ts';
import { CoreHost } from '../core/host.ts';
import type { FromCore, ToCore } from '../core/protocol.ts';
import { ReplayPacer } from './pacer.ts';
import { scanForPacing } from './scan.ts';
import { RecordingReader } from '../../drivers/replay/format.ts';
import { nineAxisMachine } from '../core/test-machine.ts';
import { pacedCoreHost } from './test-core.ts';

const DIR = mkdtempSync(join(tmpdir(), 'hil-pacer-steps-'));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));
let n = 0;
const tmp = (name: string) => join(DIR, `${n++}-${name}`);

const MACHINE: CompiledMachine = nineAxisMachine();
const ALL = (1 << MACHINE.axes.length) - 1;
const MS = 1_000_000n;
const hostNow = () => process.hrtime.bigint();

type Stepped = Extract<FromCore, { t: 'stepped' }>;
type Live = ToCore | { wallMs: number };

/**
 * Record on the stepped clock the way a stack does: messages handled as they come, cycles only on steps.
 * `{wallMs}` waits that long on the wall between two messages (a test doing something else).
 */
async function record(file: string, script: (gen: bigint) => Live[], o: { lateWakeAfterStep?: number } = {}): Promise<{ sent: FromCore[]; host: CoreHost }> {
  const sent: FromCore[] = [];
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, record: { path: file, run: 'steps' } }, (m) => sent.push(m));
  host.stepper = (cycles) => host.step(cycles);
  let steps = 0;
  for (const m of script(7n)) {
    if ('wallMs' in m) {
      // A timer may fire up to a millisecond early on the host clock (libuv's loop time is in whole ms):
      // wait until the host clock itself has moved on by wallMs.
      const until = hostNow() + BigInt(m.wallMs) * MS;
      while (hostNow() < until) await new Promise((r) => setTimeout(r, Math.max(1, Number((until - hostNow()) / MS))));
    }
    else {
      host.handle(m);
      if (m.t === 'step' && ++steps === o.lateWakeAfterStep) host.handle({ t: 'inject', id: 900, fault: { kind: 'late_wake', ns: 5_000_000 } });
    }
  }
  await host.close();
  return { sent, host };
}

/** Replay `file` paced, offering the live messages one by one whenever the core waits for the live side. */
async function replay(file: string, live: ToCore[]): Promise<{ sent: FromCore[]; verdict: ReturnType<ReplayPacer['finish']>; host: CoreHost; pacer: ReplayPacer }> {
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
    { steps: true },
  );
  const p = (pacer = new ReplayPacer(host, scan, { file, mode: 'strict' }));
  const queue = [...live];
  for (let guard = 0; guard < 10_000; guard++) {
    const s = p.advance(1000);
    if (s === 'more') continue;
    if (!queue.length) break;
    p.offer(queue.shift());
  }
  const verdict = p.finish();
  await host.close();
  return { sent, verdict, host, pacer: p };
}

const steppedOf = (xs: FromCore[]) => xs.filter((m): m is Stepped => m.t === 'stepped').map(({ nowNs, cycles, answered }) => ({ nowNs, cycles, answered }));
const live = (xs: Live[]) => xs.filter((m): m is ToCore => !('wallMs' in m));

test('format 3 on the stepped clock: the steps are requests and every frame keeps the host time of its cycle', async () => {
  const file = tmp('steps.hilrec');
  const before = hostNow();
  await record(file, (g) => [{ t: 'grant', generation: g, deadlineNs: 1n << 62n, active: true, axisMask: ALL }, { t: 'step', id: 1, cycles: 3 }, { wallMs: 30 }, { t: 'step', id: 2, cycles: 2 }]);
  const scan = scanForPacing(file);
  expect(scan.header).toMatchObject({ format: 3, clock: 'stepped', host_times: true });
  expect(scan.requests.map((r) => [r.cycle, r.data])).toEqual([
    [0, { t: 'grant', generation: '7', deadlineNs: String(1n << 62n), active: true, axisMask: ALL }],
    [0, { t: 'step', id: 1, cycles: 3 }],
    [3, { t: 'step', id: 2, cycles: 2 }],
  ]);
  // frame times: one cycle apart; host times: real, with the 30 ms the test waited between the steps
  const t0 = BigInt(scan.header.t0_ns);
  expect([...scan.times]).toEqual([0, 1, 2, 3, 4].map((k) => k * 1e6));
  const host = [...scan.hostTimes!].map((h) => t0 + BigInt(h));
  expect(host[0]! >= before).toBe(true);
  for (let k = 1; k < 5; k++) expect(host[k]! > host[k - 1]!).toBe(true);
  expect(host[3]! - host[2]! >= 30n * MS).toBe(true);
  // No upper bound on the gap inside one step: that is wall time on a shared machine (a GC pause or a
  // loaded core once made it over 30 ms in CI rehearsal); the 30 ms gap above already shows the host
  // times are the cycles' own, not one cycle apart like the frame times.
});

test('a stepped core that never stepped still leaves a readable recording: its header and notes, no frame', async () => {
  const file = tmp('never.hilrec');
  await record(file, (g) => [{ t: 'grant', generation: g, deadlineNs: 1n << 62n, active: true, axisMask: ALL }]);
  const r = RecordingReader.open(file);
  expect(r.next()).toBe(false);
  expect(r.complete).toBe(true);
  expect(r.frame).toBe(0);
  expect(r.header).toMatchObject({ format: 3, clock: 'stepped' });
  expect(r.takeNotes().map((x) => (x.data as { t: string }).t)).toEqual(['grant']);
});

test('replayed: cycles run only on the live steps, each answered at its last cycle with the recorded time, cycle count and answers; a lease that ran out on the wall between two steps runs out at the same cycle', async () => {
  const file = tmp('lease.hilrec');
  // The lease ends 40 ms of host time after it is granted; the test steps 10 cycles (10 ms of core time),
  // waits 80 ms on the wall, and steps again: the core finds the lease gone in the first cycle of the
  // second step. On frame times alone (20 ms of core time in all) it would never run out. The arm is
  // answered in the first step's cycles, once the drives have reached operation enabled.
  const script = (g: bigint): Live[] => [
    { t: 'grant', generation: g, deadlineNs: hostNow() + 40n * MS, active: true, axisMask: ALL },
    { t: 'cmd', id: 1, op: 'enable', generation: g, axisMask: ALL },
    { t: 'cmd', id: 4, op: 'arm', generation: g, axisMask: 0 },
    { t: 'step', id: 2, cycles: 10 },
    { wallMs: 80 },
    { t: 'step', id: 3, cycles: 10 },
  ];
  const rec = await record(file, script);
  const expired = (xs: FromCore[]) => xs.filter((m) => m.t === 'event' && m.type === 'native_lease_expired').length;
  expect(expired(rec.sent)).toBe(1);
  expect(steppedOf(rec.sent)).toEqual([
    { nowNs: expect.any(BigInt), cycles: 10n, answered: 1 }, // the arm's receipt
    { nowNs: expect.any(BigInt), cycles: 20n, answered: 0 },
  ]);

  // Live: other fences, host times of this run (never compared), no wall wait at all.
  const got = await replay(file, live(script(42n)).map((m) => ({ ...m, ...(m.t === 'step' || m.t === 'cmd' ? { id: m.id + 100 } : {}) }) as ToCore));
  expect(got.verdict).toMatchObject({ divergence: null, cycles: 20, steps: 2, requests_unsent: 0, requests_extra: 0, outputs_matched: got.verdict.recorded.outputs });
  expect(expired(got.sent)).toBe(1);
  expect(steppedOf(got.sent)).toEqual(steppedOf(rec.sent));
  expect(got.sent.filter((m): m is Stepped => m.t === 'stepped').map((m) => m.id)).toEqual([102, 103]);
});

test('replayed: the core stands still between steps, and a live step of another length is the divergence', async () => {
  const file = tmp('still.hilrec');
  const script = (g: bigint): Live[] => [
    { t: 'grant', generation: g, deadlineNs: 1n << 62n, active: true, axisMask: ALL },
    { t: 'step', id: 1, cycles: 5 },
    { t: 'step', id: 2, cycles: 5 },
  ];
  await record(file, script);
  // Only the grant and the first step: the core runs those 5 cycles and waits, however often it is advanced.
  const half = await replay(file, live(script(3n)).slice(0, 2));
  expect(half.verdict).toMatchObject({ cycles: 5, steps: 1, divergence: null, requests_unsent: 1 });
  const longer = await replay(file, [...live(script(3n)).slice(0, 2), { t: 'step', id: 2, cycles: 6 }]);
  expect(longer.verdict.divergence).toMatchObject({ kind: 'request', cycle: 5, path: 'cycles' });
});

test('replayed: a cycle woken late is late by as much again (its schedule is one cycle_ns after another), so the overrun is counted as when recorded', async () => {
  const file = tmp('late.hilrec');
  const script = (g: bigint): Live[] => [
    { t: 'grant', generation: g, deadlineNs: 1n << 62n, active: true, axisMask: ALL },
    { t: 'step', id: 1, cycles: 3 },
    { t: 'step', id: 2, cycles: 3 },
  ];
  const rec = await record(file, script, { lateWakeAfterStep: 1 });
  // every cycle scheduled before the wake (5 ms after the first step) runs at the wake time: all three late
  expect(rec.host.core.overruns).toBe(3);
  const got = await replay(file, [...live(script(5n)).slice(0, 2), { t: 'inject', id: 77, fault: { kind: 'late_wake', ns: 5_000_000 } }, live(script(5n))[2]!]);
  expect(got.verdict).toMatchObject({ divergence: null, cycles: 6 });
  expect(got.host.core.overruns).toBe(3);
  expect(got.host.core.lateness.quantile(1)).toBe(rec.host.core.lateness.quantile(1));
});

test('host times the live side sent go back to it in its own time base: the jog session origin and deadlines in a status publication', async () => {
  const file = tmp('jog.hilrec');
  const script = (g: bigint, origin: bigint): Live[] => [
    { t: 'grant', generation: g, deadlineNs: 1n << 62n, active: true, axisMask: ALL },
    { t: 'cmd', id: 1, op: 'enable', generation: g, axisMask: ALL },
    { t: 'step', id: 2, cycles: 20 },
    { t: 'cmd', id: 3, op: 'arm', generation: g, axisMask: 0 },
    { t: 'step', id: 4, cycles: 20 },
    { t: 'cmd', id: 5, op: 'begin_jog', generation: g, axisMask: 1, jog: { originNs: origin, deadlineNs: origin + 1_000_000_000n } },
    { t: 'step', id: 6, cycles: 2 },
  ];
  const recordedOrigin = hostNow();
  const rec = await record(file, (g) => script(g, recordedOrigin));
  const jogOf = (xs: FromCore[]) => xs.filter((m): m is Extract<FromCore, { t: 'status' }> => m.t === 'status').at(-1)!.status.jog;
  expect(jogOf(rec.sent)).toMatchObject({ SessionOpen: 1, SourceOriginHostNs: recordedOrigin });
  const liveOrigin = recordedOrigin + 3_600_000_000_000n; // an hour later
  const got = await replay(file, live(script(9n, liveOrigin)));
  expect(got.verdict.divergence).toBeNull();
  // the core itself ran on the recorded times ...
  expect(got.host.core.jogStatus()).toMatchObject({ SourceOriginHostNs: recordedOrigin, DeadlineHostNs: recordedOrigin + 1_000_000_000n });
  // ... and what it published goes to the live side in the live time base
  const out = got.pacer.outward({ t: 'status', status: { ...({} as object), jog: got.host.core.jogStatus() } } as unknown as FromCore) as Extract<FromCore, { t: 'status' }>;
  expect(out.status.jog).toMatchObject({ SourceOriginHostNs: liveOrigin, DeadlineHostNs: liveOrigin + 1_000_000_000n });
});

test('a telemetry poll noted during a step\'s cycles (it raced the step) does not stop the step: the step is answered, and the poll is held for at its end', async () => {
  const file = tmp('poll-mid-step.hilrec');
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, record: { path: file, run: 'steps' } }, () => undefined);
  let k = 0;
  // the poll arrives between the step's first and second cycle, as the stepped clock drains messages there
  host.stepper = (cycles) => host.step(cycles, () => void (k++ === 1 && host.handle({ tap: 'note', data: { t: 'telemetry_read' } })));
  host.handle({ t: 'grant', generation: 7n, deadlineNs: 1n << 62n, active: true, axisMask: ALL });
  host.handle({ t: 'step', id: 1, cycles: 3 });
  await host.close();
  const scan = scanForPacing(file);
  expect(scan.service.map((n) => [n.cycle, (n.data as { t: string }).t])).toEqual([[1, 'telemetry_read']]);
  const sent: FromCore[] = [];
  let pacer: ReplayPacer | undefined;
  const replayed = await pacedCoreHost(MACHINE, file, scan, (m) => (pacer?.observe(m), sent.push(m)), { steps: true });
  try {
    const p = (pacer = new ReplayPacer(replayed, scan, { file, mode: 'strict', toService: () => undefined, wallMs: () => 0 }));
    expect(p.advance(1000)).toBe('wait');
    p.offer({ t: 'grant', generation: 42n, deadlineNs: 5n, active: true, axisMask: ALL });
    p.offer({ t: 'step', id: 9, cycles: 3 });
    // the step runs its three cycles and is answered; then the core holds at its end for the poll
    expect(p.advance(1000)).toBe('wait');
    expect(replayed.core.cycleCount).toBe(3);
    expect(sent.filter((m) => m.t === 'stepped').map((m) => (m as { id: number }).id)).toEqual([9]);
    p.note({ t: 'telemetry_read' });
    expect(p.advance(1000)).toBe('end');
    expect(p.finish()).toMatchObject({ steps: 1, telemetry_reads: { recorded: 1, served: 1, missed: 0 }, holds_lost: [], divergence: null });
  } finally {
    await replayed.close();
  }
});
