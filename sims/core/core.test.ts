// The core's cycle in stepped mode (no worker, synthetic host times) with the sim driver: one telemetry
// record per cycle read back through CaptureReader and decoded by the independent oracle
// (harness/oracle/telemetry.ts), checked against the times passed in and against status(); the cycle
// timing histogram; and the worker wiring (a ring per core incarnation, handed over in 'ready').

import { test, expect } from 'vitest';
import fc from 'fast-check';
import type { BusDriver, BusSetup, ProcessImage } from '../../drivers/bus.ts';
import { DS402_STATE_NAMES } from '../../drivers/ds402.ts';
import { SimBusDriver } from '../../drivers/sim/driver.ts';
import * as oracle from '../../harness/oracle/telemetry.ts';
import type { CompiledMachine } from '../config/types.ts';
import { CoreLink } from '../service/core-link.ts';
import { CaptureReader } from './capture/reader.ts';
import { CaptureRing } from './capture/ring.ts';
import { Core, CycleHistogram } from './core.ts';
import type { CoreStatus, FromCore, ToCore } from './protocol.ts';
import { nineAxisMachine } from './test-machine.ts';

const MACHINE: CompiledMachine = nineAxisMachine();
const N = MACHINE.axes.length;
const ALL = (1 << N) - 1;
const CYCLE = MACHINE.cycle_ns;
const T0 = 1_000_000_000_000n; // host monotonic ns of the first scheduled cycle
const INC = '0123456789abcdef0123456789abcdef';
const IDENTITY = { adapter_incarnation: 'fedcba9876543210fedcba9876543210', machine_sha256: 'a'.repeat(64), deployment_sha256: 'b'.repeat(64) };
/** One histogram bucket: the most a percentile over-estimates. */
const BUCKET = 10 ** (1 / CycleHistogram.PER_DECADE);

interface Rig {
  core: Core;
  ring: CaptureRing;
  reader: CaptureReader;
  sent: FromCore[];
  /** Run cycle k (scheduled T0 + k * cycle) woken `lateness` ns after its schedule. */
  step(lateness?: bigint): { now: bigint; scheduled: bigint };
  /** Run cycles until `done` holds (at most `limit`). */
  until(done: () => boolean, limit?: number): void;
  cmd(op: Extract<ToCore, { t: 'cmd' }>['op'], axisMask?: number): void;
  /** Every record after `after`, decoded by the oracle (no record lost unless `wrapped`). */
  records(after?: bigint, wrapped?: boolean): oracle.CycleCaptureRecordV2[];
  status(): CoreStatus;
}

async function rig(opts: { driver?: BusDriver; workClock?: () => number; capacity?: number; clockMode?: CoreStatus['clock']['mode'] } = {}): Promise<Rig> {
  const sent: FromCore[] = [];
  const ring = new CaptureRing({ axisCount: N, cycleNs: CYCLE, capacity: opts.capacity ?? 8192, incarnation: INC });
  // Synthetic host times: the core's own time is the host clock its lease checks read.
  const core: Core = new Core(MACHINE, opts.driver ?? new SimBusDriver(), INC, (m) => sent.push(m), { capture: ring, workClock: opts.workClock, hostClock: () => core.now, ...(opts.clockMode ? { clockMode: opts.clockMode } : {}) });
  await core.start(T0 - CYCLE);
  // The core holds the fence: commands need the grant they carry (generation 7, a lease that never ends).
  core.handle({ t: 'grant', generation: 7n, deadlineNs: 1n << 62n, active: true, axisMask: ALL });
  const reader = new CaptureReader(ring.buffer);
  let k = 0n;
  let id = 1;
  const step = (lateness = 0n) => {
    const scheduled = T0 + k++ * CYCLE;
    const now = scheduled + lateness;
    core.cycle(now, scheduled);
    return { now, scheduled };
  };
  return {
    core,
    ring,
    reader,
    sent,
    step,
    until(done, limit = 100) {
      for (let i = 0; i < limit && !done(); i++) step();
      expect(done()).toBe(true);
    },
    cmd(op, axisMask = 0) {
      const n = sent.length;
      const myId = id++;
      core.handle({ t: 'cmd', id: myId, op, generation: 7n, axisMask });
      const reply = sent.slice(n).find((m) => m.t === 'reply' && m.id === myId);
      expect(reply && reply.t === 'reply' && reply.result.Result, `${op} accepted`).toBe(0);
    },
    records(after = 0n, wrapped = false) {
      const out: oracle.CycleCaptureRecordV2[] = [];
      for (;;) {
        const bytes = reader.readBatch(after, 4096, IDENTITY);
        if (bytes === 'busy') throw new Error('ring busy');
        const batch = oracle.decodeBatch(bytes);
        after = oracle.checkBatchCursor(batch.header, after);
        if (!wrapped) expect(batch.header.dropped).toBe(0n);
        expect(batch.header.daemon_incarnation).toBe(INC);
        expect(batch.header.cycle_period_ns).toBe(CYCLE);
        expect(batch.header.axis_count).toBe(N);
        if (batch.records.length === 0) return out;
        out.push(...batch.records);
      }
    },
    status: () => core.status(T0),
  };
}

/** A fake work clock advancing `stepNs` per reading (the cycle reads it twice). */
function fakeClock(stepNs: number): () => number {
  let t = 0;
  return () => (t += stepNs);
}

function expectContiguous(records: oracle.CycleCaptureRecordV2[], firstSeq = 1n): void {
  records.forEach((r, k) => {
    expect(r.seq).toBe(firstSeq + BigInt(k));
    expect(r.cycle).toBe(firstSeq + BigInt(k)); // one record per cycle from the first
    expect(r.axes).toBe(N);
  });
}

// ---------------------------------------------------------------------------------------------------

test('start hands the ring to the service in ready; the core refuses a ring of another axis count', async () => {
  const r = await rig();
  const ready = r.sent.find((m) => m.t === 'ready');
  expect(ready?.t === 'ready' && ready.capture).toBe(r.ring.buffer);
  expect(() => new Core(MACHINE, new SimBusDriver(), INC, () => {}, { capture: new CaptureRing({ axisCount: 2, cycleNs: CYCLE, capacity: 4 }) })).toThrow(RangeError);
  // Without a ring nothing is captured and the cycle still runs.
  const plain = new Core(MACHINE, new SimBusDriver(), INC, () => {});
  await plain.start(T0);
  plain.cycle(T0, T0);
  expect(plain.capture).toBeNull();
  expect(plain.status(T0).timing.cycles).toBe(1n);
});

test('one record per cycle: contiguous sequences, t_ns and signed cycle_jitter_ns as passed, measured work_ns', async () => {
  const r = await rig({ workClock: fakeClock(1_500) });
  const lateness = [0n, 12_345n, -2_000n, 700_000n, 5n, -1n, 499_999n, 500_001n, 3_000_000n, 40n];
  const times = lateness.map((l) => r.step(l));
  const recs = r.records();
  expect(recs.length).toBe(lateness.length);
  expectContiguous(recs);
  recs.forEach((rec, k) => {
    expect(rec.t_ns).toBe(times[k]!.now);
    expect(rec.cycle_jitter_ns).toBe(times[k]!.now - times[k]!.scheduled);
    expect(rec.work_ns).toBe(1_500n);
    expect(rec.bus_submission_return_code).toBe(0n);
  });
  const timing = r.status().timing;
  expect(timing.cycles).toBe(10n);
  // max_cycle_lateness_ns is 500 us in the fixture: 700 us, 500.001 us and 3 ms overran.
  expect(MACHINE.max_cycle_lateness_ns).toBe(500_000n);
  expect(timing.overruns).toBe(3n);
  expect(timing.max_lateness_ns).toBe(3_000_000n);
  expect([timing.p50_work_ns, timing.p99_work_ns, timing.max_work_ns]).toEqual([1_500n, 1_500n, 1_500n]);
});

test('enable and arm through handle: records agree with status() cycle by cycle', async () => {
  const driver = new SimBusDriver();
  const r = await rig({ driver });
  const deadline = T0 + 500_000_000n;
  r.core.handle({ t: 'grant', generation: 7n, deadlineNs: deadline, active: true, axisMask: ALL });
  r.step();
  r.cmd('enable', ALL);
  const seen: Array<{ seq: bigint; status: CoreStatus }> = [];
  r.until(() => {
    r.step();
    seen.push({ seq: BigInt(r.ring.newest), status: r.status() });
    return r.status().enable_mask === ALL;
  });
  r.cmd('arm');
  r.step();
  seen.push({ seq: BigInt(r.ring.newest), status: r.status() });

  const recs = r.records();
  expectContiguous(recs);
  const bySeq = new Map(recs.map((rec) => [rec.seq, rec]));
  for (const { seq, status } of seen) {
    const rec = bySeq.get(seq)!;
    expect(rec.cycle).toBe(status.cycle);
    expect(rec.axis_enable_mask).toBe(status.enable_mask);
    expect(rec.armed).toBe(status.armed ? 1 : 0);
    expect(rec.home_valid_mask).toBe(status.home_valid_mask);
    expect(rec.home_epoch).toBe(status.home_epoch);
    expect(rec.safety_fault_mask).toBe(status.safety_fault_mask);
    expect(rec.execution_fault_reasons).toBe(status.execution_fault_reasons);
    expect([rec.wkc_actual, rec.wkc_expected]).toEqual([status.wkc_actual, status.wkc_expected]);
    expect([rec.io_input_word, rec.io_output_word, rec.io_armed]).toEqual([status.io_input_word, status.io_output_word, status.io_armed ? 1 : 0]);
    expect(rec.app_grant_generation).toBe(7n);
    expect(rec.control_generation).toBe(7n);
    expect(rec.grant_deadline_host_ns).toBe(deadline);
    expect([rec.grant_active, rec.grant_axis_mask]).toEqual([1, ALL]);
    expect(rec.io_configured).toBe(1);
    expect(rec.pdo_fresh_axis_mask).toBe(ALL);
    status.axes.forEach((a, i) => {
      const ax = rec.ax[i]!;
      expect(ax.statusword).toBe(a.statusword);
      expect(ax.position).toBe(a.position_counts);
      expect(ax.error_code).toBe(a.error_code);
      expect(ax.pdo_fresh).toBe(1);
      expect(ax.pdo_observed_time_ns).toBe(rec.t_ns);
      expect(ax.slave_online).toBe(1);
      expect(ax.brake_state).toBe(a.brake_engaged ? 1 : 2);
      expect(DS402_STATE_NAMES[ax.ds402_state]).toBe(a.ds402_state);
      expect(ax.absolute_value[0]).toBe(a.absolute_counts);
      expect(ax.absolute_valid[0]).toBe(a.absolute_valid ? 1 : 0);
      expect(ax.velocity_actual_valid).toBe(1);
      expect(ax.following_error_valid).toBe(1);
    });
  }
  // The enable mask only grows on the way up and ends with every axis enabled, then armed.
  const masks = recs.map((rec) => rec.axis_enable_mask);
  expect(masks[0]).toBe(0);
  for (let k = 1; k < masks.length; k++) expect(masks[k]! & masks[k - 1]!).toBe(masks[k - 1]);
  const last = recs.at(-1)!;
  expect([last.axis_enable_mask, last.armed]).toEqual([ALL, 1]);
  for (let i = 0; i < N; i++) expect([last.ax[i]!.ds402_state, last.ax[i]!.mode_display]).toEqual([4, 8]);

  // A fault: the E-stop chain opens; the latched bits and the safety mask appear in the next record.
  driver.inject({ kind: 'estop_open' });
  r.step();
  const st = r.status();
  const rec = r.records(BigInt(r.ring.newest - 1))[0]!;
  expect(st.execution_fault_reasons).not.toBe(0);
  expect(rec.execution_fault_reasons).toBe(st.execution_fault_reasons);
  expect(rec.safety_fault_mask).toBe(ALL);
  expect(rec.armed).toBe(0);
  // Released authority shows in the records too.
  r.core.handle({ t: 'grant', generation: 7n, deadlineNs: 0n, active: false, axisMask: 0 });
  r.step();
  const after = r.records(BigInt(r.ring.newest - 1))[0]!;
  expect([after.grant_active, after.grant_axis_mask, after.grant_deadline_host_ns]).toEqual([0, 0, 0n]);
});

/**
 * A stand-in for a trajectory lane: the sim driver, with axis 0's target replaced by a ramp at
 * `countsPerS` from the moment `start` is called (the core itself only holds in this build).
 */
class RampDriver implements BusDriver {
  readonly name = 'sim' as const;
  private from: { t: bigint; counts: number } | null = null;
  constructor(
    readonly sim: SimBusDriver,
    readonly countsPerS: number,
  ) {}
  open(setup: BusSetup) {
    return this.sim.open(setup);
  }
  close() {
    return this.sim.close();
  }
  start(img: ProcessImage, t: bigint): void {
    this.from = { t, counts: img.positionActual[0]! };
  }
  exchange(img: ProcessImage, nowNs: bigint): number {
    if (this.from) img.targetPosition[0] = Math.round(this.from.counts + (this.countsPerS * Number(nowNs - this.from.t)) / 1e9);
    return this.sim.exchange(img, nowNs);
  }
}

test('following error is recorded while a moving target is followed, in drive counts', async () => {
  const v = 2_000_000; // counts/s (about 0.1 rad/s on J1)
  const driver = new RampDriver(new SimBusDriver(), v);
  const r = await rig({ driver });
  r.core.handle({ t: 'grant', generation: 7n, deadlineNs: T0 + 10_000_000_000n, active: true, axisMask: ALL });
  r.cmd('enable', ALL);
  r.until(() => r.status().enable_mask === ALL);
  const { now } = r.step();
  driver.start(r.core.image, now);
  const before = BigInt(r.ring.newest);
  for (let k = 0; k < 400; k++) r.step();
  const st = r.status();
  const recs = r.records(before);
  expect(recs.length).toBe(400);
  const last = recs.at(-1)!;
  const ax0 = last.ax[0]!;
  // Second-order plant (wn 60 rad/s, zeta 0.9): steady ramp error 2 * zeta * v / wn counts.
  const steady = (2 * 0.9 * v) / 60;
  expect(ax0.following_error_counts).toBeGreaterThan(steady * 0.9);
  expect(ax0.following_error_counts).toBeLessThan(steady * 1.1);
  expect(Math.abs(ax0.target - ax0.position - ax0.following_error_counts)).toBeLessThanOrEqual(1);
  expect(ax0.velocity_actual_counts_per_s).toBeGreaterThan(v * 0.95);
  expect(ax0.velocity_actual_counts_per_s).toBeLessThan(v * 1.05);
  expect(ax0.torque_raw).not.toBe(0);
  // Held axes follow their own position: no error to speak of.
  for (let i = 1; i < N; i++) expect(Math.abs(last.ax[i]!.following_error_counts)).toBeLessThanOrEqual(1);
  // Counts in the record, logical units in status: logical = sign * counts / counts_per_unit.
  const a0 = MACHINE.axes[0]!;
  expect(st.axes[0]!.following_error).toBeCloseTo((a0.sign * ax0.following_error_counts) / a0.counts_per_unit, 12);
  expect(st.axes[0]!.position_counts).toBe(ax0.position);
  expect(last.execution_fault_reasons).toBe(0); // below limits.following_error: no trip
  // The target advances by v per second of records.
  const span = Number(last.t_ns - recs[0]!.t_ns) / 1e9;
  expect(ax0.target - recs[0]!.ax[0]!.target).toBeCloseTo(v * span, -1);
});

// ---------------------------------------------------------------------------------------------------
// Lateness histogram.

/** Nearest-rank quantile of exact samples. */
function exactQuantile(sorted: number[], q: number): number {
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]!;
}

/** A reported percentile is at or above the exact one and at most one bucket (or the 1 us floor) above. */
function expectWithinBucket(reported: number, exact: number, max: number): void {
  expect(reported).toBeGreaterThanOrEqual(exact);
  const bound = exact >= CycleHistogram.HIGH_NS ? max : Math.max(Math.ceil(exact * BUCKET), CycleHistogram.LOW_NS);
  expect(reported).toBeLessThanOrEqual(Math.min(bound, max));
}

test('lateness percentiles for a synthetic distribution, through the cycle and status().timing', async () => {
  const r = await rig({ capacity: 64 });
  // 1000 cycles: 90 % near 5 us, 9 % at 200 us, 1 % at 2 ms (overruns), some early wakes.
  const samples: number[] = [];
  for (let k = 0; k < 1000; k++) {
    const m = k % 100;
    const late = m < 5 ? -3_000 : m < 90 ? 5_000 + (k % 7) * 100 : m < 99 ? 200_000 : 2_000_000;
    samples.push(late);
    r.step(BigInt(late));
  }
  const sorted = [...samples].sort((a, b) => a - b);
  const t = r.status().timing;
  expect(t.cycles).toBe(1000n);
  expect(t.overruns).toBe(10n);
  expect(t.max_lateness_ns).toBe(2_000_000n);
  expectWithinBucket(Number(t.p50_lateness_ns), exactQuantile(sorted, 0.5), 2_000_000);
  expectWithinBucket(Number(t.p99_lateness_ns), exactQuantile(sorted, 0.99), 2_000_000);
  expect(exactQuantile(sorted, 0.99)).toBe(200_000);
  expect(Number(t.p99_lateness_ns)).toBeLessThan(200_000 * BUCKET);
  // The ring wrapped (capacity 64): the newest records remain, with their signed jitter.
  const recs = r.records(0n, true);
  expect(recs.length).toBe(64);
  expect(recs[0]!.seq).toBe(1000n - 63n);
  recs.forEach((rec) => expect(rec.cycle_jitter_ns).toBe(BigInt(samples[Number(rec.seq) - 1]!)));
});

test('property: histogram percentiles bound the exact nearest-rank percentiles within one bucket', () => {
  const value = fc.oneof(
    fc.integer({ min: -1_000_000, max: 1_000_000 }),
    fc.integer({ min: 0, max: 200_000_000 }),
    fc.constantFrom(0, 999, 1_000, 1_001, 99_999_999, 100_000_000, 100_000_001, 5_011, 5_012),
  );
  fc.assert(
    fc.property(fc.array(value, { minLength: 1, maxLength: 300 }), fc.constantFrom(0.01, 0.5, 0.9, 0.99, 1), (vs, q) => {
      const h = new CycleHistogram();
      for (const v of vs) h.record(v);
      const sorted = [...vs].sort((a, b) => a - b);
      expect(h.count).toBe(vs.length);
      expect(h.max).toBe(sorted.at(-1));
      expect(h.min).toBe(sorted[0]);
      expectWithinBucket(h.quantile(q), exactQuantile(sorted, q), sorted.at(-1)!);
    }),
  );
  // Bucket edges: each edge value opens its own bucket.
  const h = new CycleHistogram();
  for (let k = 0; k <= 100; k++) {
    h.reset();
    const edge = CycleHistogram.EDGES[k]!;
    h.record(edge);
    h.record(edge * 1e-9 + edge); // same bucket
    const bucket = h.counts.findIndex((c) => c > 0);
    expect(bucket).toBe(k + 1);
    expect(h.counts[bucket]).toBe(2);
  }
  h.reset();
  expect(h.quantile(0.5)).toBe(0);
});

// ---------------------------------------------------------------------------------------------------
// Worker wiring.

test('the worker creates a ring per incarnation and hands it over in ready; a restart brings a new one', async () => {
  const link = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'realtime', spinNs: 0 }, captureRetentionMs: 2_000 });
  try {
    await link.start();
    const first = link.captureBuffer!;
    expect(first).toBeInstanceOf(SharedArrayBuffer);
    const reader = new CaptureReader(first);
    expect(reader.daemonIncarnation).toBe(link.incarnation);
    expect(reader.capacity).toBe(2_000); // 2 s at 1 ms
    await new Promise((r) => setTimeout(r, 150));
    const bytes = reader.readBatch(0n, 4096, IDENTITY);
    if (bytes === 'busy') throw new Error('busy');
    const batch = oracle.decodeBatch(bytes);
    expect(batch.records.length).toBeGreaterThan(20);
    expectContiguous(batch.records);
    for (let k = 1; k < batch.records.length; k++) expect(batch.records[k]!.t_ns).toBeGreaterThan(batch.records[k - 1]!.t_ns);
    const s = await link.nextStatus(1_000);
    expect(s!.timing.cycles).toBeGreaterThan(0n);

    const previous = link.incarnation;
    link.once('exit', () => void link.start()); // what the service does on a core exit
    const incarnation = await link.crash();
    expect(incarnation).not.toBe(previous);
    expect(link.captureBuffer).toBeInstanceOf(SharedArrayBuffer);
    expect(link.captureBuffer).not.toBe(first);
    const again = new CaptureReader(link.captureBuffer!);
    expect(again.daemonIncarnation).toBe(incarnation);
    await new Promise((r) => setTimeout(r, 50));
    const b2 = again.read(0n, 8);
    if (b2 === 'busy') throw new Error('busy');
    expect(b2.first).toBe(1n); // the new incarnation numbers its records from 1
    // The ended incarnation's buffer was written again (sims/service/core-link.ts spare rings): the old
    // wrapper sees the same memory, now the new incarnation's ring from its first record.
    const old = new CaptureReader(first);
    expect(old.daemonIncarnation).toBe(incarnation);
    const b3 = old.read(0n, 8);
    if (b3 === 'busy') throw new Error('busy');
    expect(b3.first).toBe(1n);
    const b4 = again.readBatch(0n, 4096, IDENTITY);
    if (b4 === 'busy') throw new Error('busy');
    const seqs = oracle.decodeBatch(b4).records.map((r) => r.seq);
    expect(seqs).toEqual(seqs.map((_, k) => BigInt(k + 1)));
  } finally {
    await link.shutdown();
  }
});

test('capture off: captureRetentionMs 0 gives no ring', async () => {
  const link = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'realtime', spinNs: 0 }, captureRetentionMs: 0 });
  try {
    await link.start();
    expect(link.captureBuffer).toBeUndefined();
  } finally {
    await link.shutdown();
  }
});

test('a held observation publisher drops observations, then reports them once in publisher_overflow (document 1 part 6)', async () => {
  const r = await rig();
  r.step();
  const events = (from: number) => r.sent.slice(from).filter((m): m is Extract<FromCore, { t: 'event' }> => m.t === 'event');
  r.core.holds.holdEventPublisher(1_000); // host time is the core's synthetic clock: 1 s of cycles
  const from = r.sent.length;
  r.cmd('enable', ALL);
  r.until(() => {
    r.step();
    return r.status().enable_mask === ALL;
  });
  r.cmd('arm');
  r.step();
  // Held: the observations (enable_changed, arm_changed) are gone; replies still flow.
  expect(events(from).map((e) => e.type)).toEqual([]);
  const free = Number(1_000_000_000n / CYCLE) + 2;
  const at = r.sent.length;
  for (let i = 0; i < free; i++) r.step();
  const after = events(at);
  expect(after.map((e) => e.type)).toEqual(['publisher_overflow']);
  const p = after[0]!.payload as { dropped: bigint; first_dropped_ns: bigint; last_dropped_ns: bigint };
  expect(p.dropped).toBeGreaterThanOrEqual(2n);
  expect(p.first_dropped_ns).toBeLessThanOrEqual(p.last_dropped_ns);
  // Free again: the next observation is published, and no second overflow.
  const next = r.sent.length;
  r.cmd('enable', 0);
  r.until(() => {
    r.step();
    return r.status().enable_mask === 0;
  });
  expect(events(next).map((e) => e.type)).toContain('enable_changed');
  expect(events(next).map((e) => e.type)).not.toContain('publisher_overflow');
});

test('a message is judged on the one host time read for it (atHostTime): a hold ends that long after it, and a fence checks the lease at it, whatever the clock says meanwhile', async () => {
  // The host clock a message is handled on is the reading CoreHost.handle notes with it: a second read a
  // little later (here 5 ms) must not move a hold's end or a lease check, or a replay, which judges on the
  // noted reading, diverges.
  const sent: FromCore[] = [];
  let host = T0;
  const core = new Core(MACHINE, new SimBusDriver(), INC, (m) => sent.push(m), { hostClock: () => host });
  await core.start(T0 - CYCLE);
  let k = 0n;
  const step = () => core.cycle(T0 + k++ * CYCLE, T0 + (k - 1n) * CYCLE);
  step();
  const read = T0 + 1_000_000n;
  host = read + 5_000_000n;
  expect(core.atHostTime(read, () => core.hostNow())).toBe(read);
  expect(core.hostNow()).toBe(host);
  core.atHostTime(read, () => core.holds.holdEventPublisher(10));
  // Held until read + 10 ms: an observation at read + 9 ms is lost ...
  const deadline = read + 10_000_000n;
  const grant = (gen: bigint, deadlineNs: bigint) => core.atHostTime(host, () => core.handle({ t: 'grant', generation: gen, deadlineNs, active: true, axisMask: ALL }));
  host = deadline - 1_000_000n;
  grant(7n, 1n << 62n);
  core.atHostTime(host, () => core.handle({ t: 'cmd', id: 1, op: 'enable', generation: 7n, axisMask: ALL }));
  for (let i = 0; i < 50 && core.status(core.now).enable_mask !== ALL; i++) step();
  expect(core.status(core.now).enable_mask).toBe(ALL);
  const events = () => sent.filter((m): m is Extract<FromCore, { t: 'event' }> => m.t === 'event' && !m.type.startsWith('native_')).map((m) => m.type);
  expect(events()).toEqual([]);
  // ... and at read + 10 ms + 1 ns it is free (not at the later second read's + 10 ms).
  host = deadline + 1n;
  step();
  expect(events()).toEqual(['publisher_overflow']);
  // A fenced command handled at a reading before its lease's end is accepted though the clock has passed it.
  const lease = host + 2_000_000n;
  grant(8n, lease);
  host = lease + 1_000_000_000n;
  const n = sent.length;
  core.atHostTime(lease - 1n, () => core.handle({ t: 'cmd', id: 2, op: 'enable', generation: 8n, axisMask: 0 }));
  expect(sent.slice(n).find((m) => m.t === 'reply' && m.id === 2)).toMatchObject({ result: { Result: 0 } });
  const m = sent.length;
  core.atHostTime(lease + 1_000_000_000n, () => core.handle({ t: 'cmd', id: 3, op: 'enable', generation: 8n, axisMask: 0 }));
  expect(sent.slice(m).find((x) => x.t === 'reply' && x.id === 3)).not.toMatchObject({ result: { Result: 0 } });
});

test('a renewal (same grant, later deadline) waits for the next regular publication; any other grant change is published on the next cycle', async () => {
  const r = await rig();
  const statuses = () => r.sent.filter((m): m is Extract<FromCore, { t: 'status' }> => m.t === 'status');
  const everyCycles = Number(10_000_000n / CYCLE); // PUBLISH_EVERY_NS: a cell in use publishes at least this often
  // As CoreHost hands it a message: handled, and noted as activity (no quiet publication rate after it).
  const grant = (over: Partial<{ generation: bigint; deadlineNs: bigint; active: boolean; axisMask: number }>) => {
    r.core.handle({ t: 'grant', generation: 7n, deadlineNs: 1n << 62n, active: true, axisMask: ALL, ...over });
    r.core.noteActivity();
  };
  r.step();
  // A client renewing on every cycle for 10 regular periods: one publication a period, not one a renewal.
  const before = statuses().length;
  let deadline = 1n << 62n;
  for (let i = 0; i < 10 * everyCycles; i++) {
    grant({ deadlineNs: (deadline += 1000n) });
    r.step();
  }
  const published = statuses().length - before;
  expect(published).toBeGreaterThanOrEqual(10);
  expect(published).toBeLessThanOrEqual(11);
  // The last publication carries a renewed deadline (at most a period old).
  expect(statuses().at(-1)!.status.grant_observation.DeadlineHostNs).toBeGreaterThan(deadline - BigInt(everyCycles) * 1000n);

  // Anything else about the grant is published on the very next cycle.
  for (const change of [{ generation: 8n }, { axisMask: 1 }, { active: false }]) {
    grant({ deadlineNs: deadline });
    r.step();
    const n = statuses().length;
    grant({ deadlineNs: deadline, ...change });
    r.step();
    expect(statuses().length, JSON.stringify(change, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).toBe(n + 1);
  }
});

/** A still plan of `n` points 1 ms apart at the machine's zero (inside every limit), for handle 1. */
function stillPlan(id: number, n: number, extra: Partial<Extract<ToCore, { t: 'prepare' }>> = {}): Extract<ToCore, { t: 'prepare' }> {
  const timeNs = new BigInt64Array(n);
  for (let k = 0; k < n; k++) timeNs[k] = BigInt(k) * 1_000_000n;
  return {
    t: 'prepare', id, generation: 7n, handle: 1n, axisMask: ALL, timeNs, position: new Float64Array(n * N), velocity: new Float64Array(n * N),
    hasVelocity: new Uint8Array(n), ioMask: new Uint32Array(n), ioValues: new Uint32Array(n), ...extra,
  };
}

/** Cycles run after the preparation `id` until its answer; the answer's Result. */
function answerOf(r: Rig, id: number, limit = 2000): { cycles: number; result: number } {
  for (let cycles = 0; cycles <= limit; cycles++) {
    const a = r.sent.find((m) => m.t === 'reply' && m.id === id);
    if (a && a.t === 'reply') return { cycles, result: a.result.Result };
    r.step();
  }
  throw new Error(`no answer to preparation ${id} within ${limit} cycles`);
}

// 20000 points of nine axes: 380000 element operations, above the 250000 built at once.
const LARGE = 20_000;

test('a large plan on the real-time clock is taken in for a share of each cycle\'s wall time (the work clock), however fast the code runs', async () => {
  // Each reading of the work clock 100 us later: the share (0.2 of 1 ms) ends at the second question,
  // two groups of 32 points a cycle.
  const slow = await rig({ workClock: fakeClock(100_000) });
  slow.core.handle(stillPlan(1, LARGE));
  expect(answerOf(slow, 1)).toEqual({ cycles: Math.ceil(LARGE / 64), result: 2 });
  expect(slow.core.preparedPlan?.count).toBe(LARGE);
  // Readings 1 ns apart: the whole plan in the first cycle (a fixed count would take 39).
  const quick = await rig({ workClock: fakeClock(1) });
  quick.core.handle(stillPlan(1, LARGE));
  expect(answerOf(quick, 1)).toEqual({ cycles: 1, result: 2 });
});

test('on the stepped and fast clocks a large plan takes the same cycles on every run (10000 element operations a cycle)', async () => {
  for (const clockMode of ['stepped', 'fast'] as const) {
    for (const step of [1, 100_000]) {
      const r = await rig({ workClock: fakeClock(step), clockMode });
      r.core.handle(stillPlan(1, LARGE));
      expect(answerOf(r, 1), `${clockMode}, work clock +${step} ns a reading`).toEqual({ cycles: Math.ceil(LARGE / Math.floor(10_000 / (1 + 2 * N))), result: 2 });
    }
  }
});

test('a preparation handed over with its recorded answer cycle (a replay\'s edge) is answered in that cycle, neither before nor after, whatever the clock', async () => {
  for (const clockMode of ['recorded', 'realtime', 'stepped'] as const) {
    for (const after of [3, 200]) {
      const r = await rig({ workClock: fakeClock(1), clockMode });
      r.step();
      const at = r.core.cycleCount + after;
      r.core.handle(stillPlan(1, LARGE), { answerAtCycle: at });
      const answer = answerOf(r, 1);
      expect(answer, `${clockMode}, ${after} cycles on`).toEqual({ cycles: after, result: 2 });
      expect(r.core.cycleCount).toBe(at);
    }
  }
  // A plan small enough to be built at once is answered at once, as it was when recorded.
  const r = await rig({ workClock: fakeClock(1), clockMode: 'recorded' });
  r.core.handle(stillPlan(1, 100), { answerAtCycle: r.core.cycleCount + 50 });
  expect(answerOf(r, 1)).toEqual({ cycles: 0, result: 2 });
});

test('a preparation arriving while a large plan is still being built ends that build: the older one is answered cancelled once, and only the newer plan is kept (document 1 part 3 prepare)', async () => {
  for (const newer of [100, LARGE]) {
    const r = await rig({ workClock: fakeClock(1), clockMode: 'stepped' });
    r.core.handle(stillPlan(1, LARGE));
    r.step();
    r.core.handle(stillPlan(2, newer, { handle: 2n }));
    answerOf(r, 2);
    // Run well past the cycles the first build needed on its own.
    for (let k = 0; k < 2 * Math.ceil(LARGE / Math.floor(10_000 / (1 + 2 * N))); k++) r.step();
    const first = r.sent.filter((m) => m.t === 'reply' && m.id === 1);
    expect(first.length, `newer plan of ${newer} points`).toBe(1);
    expect(first[0]!.t === 'reply' && first[0]!.detail).toBe('replaced by a newer preparation');
    expect(r.core.preparedPlan?.handle, `newer plan of ${newer} points`).toBe(2n);
  }
});

test('an output intent is due on the cycle grid counted from the Start\'s scheduled cycle: a Start after a late wake and a cycle a little late leave it on time; a cycle woken a whole cycle late misses it (docs/profile.md "Output intents")', async () => {
  /** Fault bit 10 (io_marker_late) after a Start following a cycle `startLate` ns late, the intent's cycle on time and the next `nextLate` ns late. */
  async function lateAfter(startLate: bigint, dueLate: bigint, nextLate: bigint): Promise<boolean> {
    const r = await rig();
    r.cmd('home', 1);
    r.until(() => r.sent.some((m) => m.t === 'home_done'), 2_000);
    r.cmd('enable', ALL);
    r.until(() => r.status().enable_mask === ALL, 30);
    r.cmd('arm');
    // Point 3 carries an intent and lies 5 us before the grid's 3 ms: due in the cycle 3 ms after the Start.
    const plan = stillPlan(500, 6);
    plan.timeNs[3] = 3_000_000n - 5_000n;
    plan.ioMask[3] = 1;
    plan.ioValues[3] = 0;
    plan.axisMask = 1; // J1 alone, the axis homed here
    r.core.handle(plan);
    expect(answerOf(r, 500).result).toBe(2);
    r.step(startLate);
    r.core.handle({ t: 'cmd', id: 900, op: 'start', generation: 7n, axisMask: 0, handle: 1n });
    const started = r.sent.find((m) => m.t === 'reply' && m.id === 900);
    expect(started, JSON.stringify(started, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).toMatchObject({ result: { Result: 0 } });
    r.step();
    r.step();
    r.step(dueLate); // 3 ms after the Start on the grid: the intent is due here
    r.step(nextLate);
    r.step();
    return (r.core.faults.bits & (1 << 10)) !== 0;
  }
  // The Start followed a wake 22 us late and the cycle after the due one ran 25 us late: the due cycle, on
  // time, reaches the point (from the late wake, plan time there was 22 us short of it).
  expect(await lateAfter(22_000n, 0n, 25_000n)).toBe(false);
  // Every cycle on time, and the due cycle itself a little late: on time.
  expect(await lateAfter(0n, 0n, 0n)).toBe(false);
  expect(await lateAfter(22_000n, 999_000n, 0n)).toBe(false);
  // The due cycle woken a whole cycle late: the intent missed its one-cycle bound.
  expect(await lateAfter(0n, CYCLE, 0n)).toBe(true);
  expect(await lateAfter(22_000n, CYCLE, 0n)).toBe(true);
});
