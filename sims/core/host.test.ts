// The core host in-process with the stepped clock (no sleeping): a full native Home and the 60 s Home
// bound in simulated time, the driver error boundary as the core sees it, the bounded arm wait, the fence
// and the lease held by the core itself, and the clocks' own rules.

import { expect, test } from 'vitest';
import { BUS_RC, type BusDriver, type BusSetup, type ProcessImage } from '../../drivers/bus.ts';
import { SW } from '../../drivers/ds402.ts';
import { SimBusDriver } from '../../drivers/sim/driver.ts';
import type { CompiledMachine } from '../config/types.ts';
import { CaptureReader } from './capture/reader.ts';
import { FastClock, RealTimeClock, RecordedClock, SteppedClock } from './clock.ts';
import { Core } from './core.ts';
import { FAULT } from './faults.ts';
import { CoreHost } from './host.ts';
import { type CommandResult, type CoreStartOptions, type FromCore, type NativeOpName } from './protocol.ts';
import { NATIVE_REASON } from './reasons.ts';
import { nineAxisMachine } from './test-machine.ts';

const MACHINE: CompiledMachine = nineAxisMachine();
const N = MACHINE.axes.length;
const ALL = (1 << N) - 1;
const CYCLE = MACHINE.cycle_ns;
const FOREVER = 1n << 62n;
const HOMEABLE = MACHINE.axes.reduce((m, a, i) => (a.native_home ? m | (1 << i) : m), 0);

interface Harness {
  sent: FromCore[];
  cmd(op: NativeOpName, axisMask?: number, generation?: bigint): number;
  reply(id: number): Extract<FromCore, { t: 'reply' }> | undefined;
  stepUntil(done: () => boolean, limit: number): number;
}

function harness(handle: (m: Parameters<Core['handle']>[0]) => void, step: () => void, sent: FromCore[]): Harness {
  let id = 1;
  const h: Harness = {
    sent,
    cmd(op, axisMask = 0, generation = 7n) {
      const myId = id++;
      handle({ t: 'cmd', id: myId, op, generation, axisMask });
      return myId;
    },
    reply: (rid) => sent.find((m): m is Extract<FromCore, { t: 'reply' }> => m.t === 'reply' && m.id === rid),
    stepUntil(done, limit) {
      let k = 0;
      for (; k < limit && !done(); k++) step();
      expect(done(), `condition reached within ${limit} cycles`).toBe(true);
      return k;
    },
  };
  return h;
}

async function steppedHost(extra: Partial<CoreStartOptions> = {}) {
  const sent: FromCore[] = [];
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 100, ...extra }, (m) => sent.push(m));
  host.handle({ t: 'grant', generation: 7n, deadlineNs: FOREVER, active: true, axisMask: ALL });
  return { host, ...harness((m) => host.handle(m), () => host.cycle(), sent) };
}

test('stepped clock: a 30 s native Home completes in simulated time, far faster than real time', async () => {
  expect(HOMEABLE).not.toBe(0);
  const { host, cmd, reply, sent, stepUntil } = await steppedHost({ driverParams: { homingNs: 30_000_000_000n } });
  const t0 = host.core.now;
  const wall = performance.now();
  const id = cmd('home', HOMEABLE);
  expect(reply(id)?.result.Result).toBe(0);
  const cycles = stepUntil(() => sent.some((m) => m.t === 'home_done'), 40_000);
  const wallMs = performance.now() - wall;
  const simNs = host.core.now - t0;
  const done = sent.find((m) => m.t === 'home_done') as Extract<FromCore, { t: 'home_done' }>;
  expect(done).toMatchObject({ ok: true, reason: NATIVE_REASON.none, sequence: reply(id)!.result.Sequence });
  expect(simNs).toBeGreaterThanOrEqual(30_000_000_000n);
  expect(simNs).toBe(BigInt(cycles) * CYCLE); // stepped: exactly one cycle of simulated time per step
  const st = host.core.status(host.core.now);
  expect(st.home_valid_mask & HOMEABLE).toBe(HOMEABLE);
  expect(st.enable_mask & HOMEABLE).toBe(0); // Home leaves the selected axes disabled
  expect(st.home_epoch).toBe(1n);
  expect(st.clock.mode).toBe('stepped');
  // Not a timing assertion: a stepped Home that ran slower than the 30 s it simulates would be no seam.
  expect(wallMs).toBeLessThan(30_000);
  console.log(`stepped Home: ${Number(simNs) / 1e9} s simulated in ${wallMs.toFixed(0)} ms (${((Number(simNs) / 1e6) / wallMs).toFixed(0)}x)`);
});

test('stepped clock: a Home that never completes is ended at the 60 s bound, not a cycle earlier', async () => {
  const { host, cmd, reply, sent, stepUntil } = await steppedHost({ driverParams: { homingNs: 3_600_000_000_000n } });
  const t0 = host.core.now;
  const id = cmd('home', HOMEABLE);
  expect(reply(id)?.result.Result).toBe(0);
  stepUntil(() => sent.some((m) => m.t === 'home_done'), 70_000);
  const done = sent.find((m) => m.t === 'home_done') as Extract<FromCore, { t: 'home_done' }>;
  expect(done).toMatchObject({ ok: false, reason: NATIVE_REASON.homing_failed, detail: 'Home did not complete within 60 s' });
  const elapsed = host.core.now - t0;
  expect(elapsed).toBeGreaterThan(60_000_000_000n);
  expect(elapsed).toBeLessThan(60_000_000_000n + 50n * CYCLE); // ended within a few cycles of the bound (drives leave enabled)
});

test('step is refused on a clock that is not stepped', async () => {
  const sent: FromCore[] = [];
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'fast', speed: 1000 }, captureRetentionMs: 0 }, (m) => sent.push(m));
  host.handle({ t: 'step', id: 9, cycles: 5 });
  expect(sent.find((m) => m.t === 'reply' && m.id === 9)).toMatchObject({ result: { Result: 1 }, detail: expect.stringContaining('stepped') });
  await host.close();
});

test('fault injection through the host: unknown kinds and axes are refused with a code, never a crash', async () => {
  const { host, sent } = await steppedHost();
  host.handle({ t: 'inject', id: 50, fault: { kind: 'melted' } as never });
  host.handle({ t: 'inject', id: 51, fault: { kind: 'slave_offline', axis: 40 } });
  host.handle({ t: 'inject', id: 52, fault: { kind: 'estop_open' } });
  const r = (id: number) => sent.find((m) => m.t === 'reply' && m.id === id) as Extract<FromCore, { t: 'reply' }>;
  expect(r(50)).toMatchObject({ result: { Result: 1 }, detail: expect.stringMatching(/^FAULT_UNKNOWN_KIND: /) });
  expect(r(51)).toMatchObject({ result: { Result: 1 }, detail: expect.stringMatching(/^FAULT_NO_SUCH_AXIS: /) });
  expect(r(52)).toMatchObject({ result: { Result: 0 } });
  host.cycle();
  expect(host.core.status(host.core.now).safety_fault_mask).toBe(ALL);
});

/** Sim drives under a wrapper that breaks the exchange from cycle `at` on, or pins axis 0 below enabled. */
class Broken implements BusDriver {
  readonly name = 'broken';
  private n = 0;
  constructor(
    private readonly sim: SimBusDriver,
    private readonly mode: 'throw' | 'negative' | 'stuck_switched_on',
    private readonly at = 0,
  ) {}
  open(s: BusSetup) {
    return this.sim.open(s);
  }
  exchange(img: ProcessImage, now: bigint): number {
    const rc = this.sim.exchange(img, now);
    if (this.mode === 'stuck_switched_on') {
      img.statusword[0] = 0x23 | SW.voltageEnabled | SW.remote; // switched on, never operation enabled
      return rc;
    }
    if (++this.n < this.at) return rc;
    if (this.mode === 'throw') throw new Error('EtherCAT frame lost for good');
    return -71;
  }
  close() {
    return this.sim.close();
  }
}

const c_enableMaskAfter = (core: Core) => core.enableMask;

async function coreOn(driver: BusDriver, opts: { armSettleNs?: bigint; hostNs?: () => bigint } = {}) {
  const sent: FromCore[] = [];
  const ring = (await import('./capture/ring.ts')).CaptureRing;
  const capture = new ring({ axisCount: N, cycleNs: CYCLE, capacity: 4096 });
  const core: Core = new Core(MACHINE, driver, 'ab'.repeat(16), (m) => sent.push(m), { capture, armSettleNs: opts.armSettleNs, hostClock: opts.hostNs ?? (() => core.now) });
  await core.start(1_000_000_000n);
  core.handle({ t: 'grant', generation: 7n, deadlineNs: FOREVER, active: true, axisMask: ALL });
  const clock = new SteppedClock(CYCLE, 1_000_000_000n);
  const step = () => {
    const t = clock.next();
    core.cycle(t.nowNs, t.scheduledNs);
  };
  return { core, step, capture, ...harness((m) => core.handle(m), step, sent) };
}

test('a driver that throws: the core keeps cycling, reports the failure, latches restart_required and stops the cell', async () => {
  const { core, step, cmd, reply, stepUntil, capture, sent } = await coreOn(new Broken(new SimBusDriver(), 'throw', 40));
  cmd('enable', ALL);
  stepUntil(() => core.status(core.now).enable_mask === ALL, 30);
  expect(reply(cmd('arm'))?.result.Result).toBe(0);
  stepUntil(() => core.host.state === 'errored', 60);
  for (let k = 0; k < 5; k++) step(); // still cycling
  const st = core.status(core.now);
  expect(st.driver).toMatchObject({ name: 'broken', state: 'errored', last_return_code: BUS_RC.inactive, failure: { hook: 'exchange', message: 'Error: EtherCAT frame lost for good' } });
  expect(st.armed).toBe(false);
  expect(st.execution_fault_reasons & (1 << FAULT.restart_required!)).not.toBe(0);
  expect(sent.some((m) => m.t === 'event' && m.type === 'fault_latched' && (m.payload as { name: string }).name === 'restart_required')).toBe(true);
  // telemetry shows the failed submission: the first failed cycle BUS_RC.threw, then BUS_RC.inactive
  const reader = new CaptureReader(capture.buffer);
  const batch = reader.read(0n);
  if (batch === 'busy') throw new Error('ring busy');
  const codes = new Set<bigint>();
  const view = new DataView(batch.records.buffer, batch.records.byteOffset, batch.records.byteLength);
  for (let r = 0; r < batch.count; r++) codes.add(view.getBigInt64(r * 5392 + 128, true)); // bus_submission_return_code at 128
  expect([...codes].sort()).toEqual([BigInt(BUS_RC.inactive), BigInt(BUS_RC.threw), 0n].sort());
  // motion needs a new incarnation: enable is refused with the restart reason
  expect(reply(cmd('enable', 1))?.result.Reason).toBe(NATIVE_REASON.pdo_mapping_mismatch);
});

test('a negative bus return: bus_submission latches and persists while the bus keeps failing', async () => {
  const { core, cmd, reply, stepUntil } = await coreOn(new Broken(new SimBusDriver(), 'negative', 20));
  cmd('enable', ALL);
  stepUntil(() => core.status(core.now).execution_fault_reasons !== 0, 40);
  const st = core.status(core.now);
  expect(st.execution_fault_reasons).toBe(1 << FAULT.bus_submission!);
  expect(st.driver).toMatchObject({ state: 'active', last_return_code: -71 });
  expect(c_enableMaskAfter(core)).toBe(0); // the core no longer wants any axis enabled
  stepUntil(() => core.status(core.now).enable_mask === 0, 50); // and the drives follow
  const id = cmd('reset_fault', 0);
  stepUntil(() => reply(id) !== undefined, 100);
  expect(reply(id)!.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.fault_persists });
});

test('arm right after enable waits for operation enabled; at its bound it is refused not_ready, not earlier', async () => {
  const ok = await coreOn(new SimBusDriver());
  ok.cmd('enable', ALL);
  const a = ok.cmd('arm'); // same cycle: the drives are still in switch on disabled
  expect(ok.reply(a)).toBeUndefined();
  ok.stepUntil(() => ok.reply(a) !== undefined, 50);
  expect(ok.reply(a)!.result).toMatchObject({ Result: 0, AxisMask: ALL });
  expect(ok.core.armed).toBe(true);

  const settle = 20n * CYCLE;
  const stuck = await coreOn(new Broken(new SimBusDriver(), 'stuck_switched_on'), { armSettleNs: settle });
  stuck.cmd('enable', ALL);
  const t0 = stuck.core.now;
  const b = stuck.cmd('arm');
  stuck.stepUntil(() => stuck.reply(b) !== undefined, 100);
  expect(stuck.reply(b)!.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.not_ready });
  expect(stuck.core.now - t0).toBe(settle); // refused at the bound exactly, on the first cycle that reaches it
  expect(stuck.core.armed).toBe(false);
});

test('the core holds the fence: no grant, another generation, an expired lease are refused natively', async () => {
  let host = 5_000_000_000n;
  const c = await coreOn(new SimBusDriver(), { hostNs: () => host });
  expect(c.reply(c.cmd('enable', ALL, 8n))!.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.wrong_generation });
  c.core.handle({ t: 'grant', generation: 7n, deadlineNs: 6_000_000_000n, active: true, axisMask: ALL });
  expect(c.reply(c.cmd('enable', ALL))!.result).toMatchObject({ Result: 0 });
  host = 6_000_000_001n; // one ns past the deadline the service last sent
  expect(c.reply(c.cmd('enable', ALL))!.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.no_grant });
  c.core.handle({ t: 'grant', generation: 7n, deadlineNs: 0n, active: false, axisMask: 0 });
  host = 5_000_000_000n;
  expect(c.reply(c.cmd('mark'))!.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.no_grant });
  // stop is never refused: it only makes the cell safer
  expect(c.reply(c.cmd('stop', 0, 99n))!.result.Result).toBe(0);
});

test('the core enforces the lease on its own: past the deadline it stops the cell and says so once', async () => {
  let host = 5_000_000_000n;
  const c = await coreOn(new SimBusDriver(), { hostNs: () => host });
  c.core.handle({ t: 'grant', generation: 7n, deadlineNs: 5_500_000_000n, active: true, axisMask: ALL });
  c.cmd('enable', ALL);
  c.stepUntil(() => c.core.status(c.core.now).enable_mask === ALL, 30);
  expect(c.reply(c.cmd('arm'))!.result.Result).toBe(0);
  host = 5_520_000_000n; // at the deadline plus the grace for a renewal in flight: still valid
  c.step();
  expect(c.core.armed).toBe(true);
  host = 5_520_000_001n;
  c.step();
  c.step();
  expect(c.core.armed).toBe(false);
  expect(c.core.enableMask).toBe(0);
  expect(c.sent.filter((m) => m.t === 'event' && m.type === 'native_lease_expired')).toEqual([{ t: 'event', type: 'native_lease_expired', payload: { generation: 7n }, time_ns: expect.any(BigInt) }]);
});

test('clocks: speed must be > 0 (stepped is its own mode); stepped time is exact; real time measures lateness', () => {
  for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => new FastClock(CYCLE, bad)).toThrow(RangeError);
  const s = new SteppedClock(CYCLE, 10n);
  expect(s.next()).toEqual({ nowNs: 10n + CYCLE, scheduledNs: 10n + CYCLE });
  expect(s.next()).toEqual({ nowNs: 10n + 2n * CYCLE, scheduledNs: 10n + 2n * CYCLE });
  const f = new FastClock(CYCLE, 1e6, 0n);
  expect(f.next()).toEqual({ nowNs: CYCLE, scheduledNs: CYCLE });
  const r = new RealTimeClock(CYCLE);
  const t = r.next();
  expect(t.nowNs >= t.scheduledNs).toBe(true); // never woken before it was due
});

test("a paced replay of a real-time recording keeps the recorded clock's schedule: a late cycle is late by as much, a re-anchor where the clock re-anchored", () => {
  // The real-time clock started at O: its cycles are due at O + k cycles; the recording's frames are the wake times.
  const O = 1_000_000_000n;
  const wakes = [O + CYCLE + 3_000n, O + 2n * CYCLE + 400_000n, O + 3n * CYCLE + 5_000n, O + 4n * CYCLE + 15n * CYCLE, O + 21n * CYCLE];
  const t0 = wakes[0]!;
  const times = Float64Array.from(wakes, (w) => Number(w - t0));
  const c = new RecordedClock(CYCLE, t0, times, undefined, O);
  const ticks = wakes.map(() => c.next());
  expect(ticks.map((x) => x.nowNs)).toEqual(wakes);
  // Due on the grid; the fourth woke 15 cycles late (more than ten behind): the clock re-anchored one cycle after it.
  expect(ticks.map((x) => x.scheduledNs)).toEqual([O + CYCLE, O + 2n * CYCLE, O + 3n * CYCLE, O + 4n * CYCLE, wakes[3]! + CYCLE]);
  // Past the recorded frames, one cycle at a time on time.
  expect(c.next()).toEqual({ nowNs: wakes[4]! + CYCLE, scheduledNs: wakes[4]! + CYCLE });
  // A recording without its clock's origin (made before the header had it): every cycle on time, as before.
  const old = new RecordedClock(CYCLE, t0, times);
  expect(wakes.map(() => old.next().scheduledNs)).toEqual(wakes);
});

void ({} as CommandResult);

/** A point list for the nine axes: every axis holds `hold[i]`, axis 0 follows `j1` at `times`. */
function points(hold: number[], times: bigint[], j1: number[], vel?: number[]) {
  const n = times.length;
  const position = new Float64Array(n * N);
  const velocity = new Float64Array(n * N).fill(Number.NaN);
  const hasVelocity = new Uint8Array(n);
  for (let k = 0; k < n; k++) {
    for (let i = 0; i < N; i++) position[k * N + i] = hold[i]!;
    position[k * N] = j1[k]!;
    if (vel) {
      hasVelocity[k] = 1;
      for (let i = 0; i < N; i++) velocity[k * N + i] = 0;
      velocity[k * N] = vel[k]!;
    }
  }
  return { timeNs: BigInt64Array.from(times), position, velocity, hasVelocity, ioMask: new Uint32Array(n), ioValues: new Uint32Array(n) };
}

test('trajectory lane: prepared, started, followed by cubic Hermite interpolation, completed and released to hold', async () => {
  const { host, cmd, reply, sent, stepUntil } = await steppedHost();
  const core = host.core;
  // J1 requires Home before it may move
  expect(reply(cmd('home', 1))?.result.Result).toBe(0);
  stepUntil(() => sent.some((m) => m.t === 'home_done'), 2_000);
  cmd('enable', ALL);
  stepUntil(() => core.status(core.now).enable_mask === ALL, 30);
  expect(reply(cmd('arm'))?.result.Result).toBe(0);
  const a = MACHINE.axes[0]!;
  const hold = core.status(core.now).axes.map((x) => x.position);
  const q0 = hold[0]!;
  const q1 = q0 + 0.05;
  host.handle({ t: 'prepare', id: 900, generation: 7n, handle: 41n, axisMask: 1, ...points(hold, [0n, 500_000_000n, 1_000_000_000n], [q0, (q0 + q1) / 2, q1]) });
  expect(reply(900)!.result).toMatchObject({ Result: 2, Handle: 41n });
  const start = 901;
  host.handle({ t: 'cmd', id: start, op: 'start', generation: 7n, axisMask: 0, handle: 41n });
  expect(reply(start)!.result, reply(start)!.detail).toMatchObject({ Result: 0, Handle: 41n });
  const t0 = core.now;
  // quarter way: Hermite with derived velocities (0 at the ends, (q1-q0)/1 s in the middle)
  for (let k = 0; k < 250; k++) host.cycle();
  const tau = Number(core.now - t0) / 1e9; // seconds into the plan at the last produce
  const s = tau / 0.5;
  const vmid = (q1 - q0) / 1.0;
  const expected = (2 * s ** 3 - 3 * s ** 2 + 1) * q0 + (-2 * s ** 3 + 3 * s ** 2) * ((q0 + q1) / 2) + (s ** 3 - s ** 2) * 0.5 * vmid;
  const counts = a.sign * a.counts_per_unit;
  expect(Math.abs(core.image.targetPosition[0]! - Math.round(expected * counts))).toBeLessThanOrEqual(1);
  expect(core.status(core.now).motion).toMatchObject({ mode: 2, state: 3, trajectory_id: 41n, done: false });
  stepUntil(() => sent.some((m) => m.t === 'event' && m.type === 'native_execution'), 1_000);
  const ev = sent.find((m) => m.t === 'event' && m.type === 'native_execution') as Extract<FromCore, { t: 'event' }>;
  expect(ev.payload).toMatchObject({ handle: 41n, outcome: 'completed', fault_bits: 0 });
  const st = core.status(core.now);
  expect(st.motion).toMatchObject({ mode: 0, state: 4, last_event: 2, done: true });
  expect(core.image.targetPosition[0]).toBe(Math.round(q1 * counts)); // hold keeps the last point
  for (let k = 0; k < 300; k++) host.cycle();
  expect(Math.abs(core.status(core.now).axes[0]!.position - q1)).toBeLessThan(1e-4);
});

test('trajectory start gate: unknown handle, not armed, a start away from the held position, positions outside limits', async () => {
  const { host, cmd, reply, stepUntil } = await steppedHost();
  const core = host.core;
  const hold = core.status(core.now).axes.map((x) => x.position);
  const a = MACHINE.axes[0]!;
  host.handle({ t: 'prepare', id: 800, generation: 7n, handle: 5n, axisMask: 1, ...points(hold, [0n, 1_000_000_000n], [hold[0]!, a.max_position + 0.001]) });
  expect(reply(800)!.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.outside_limits_outward, AxisMask: 1 });
  host.handle({ t: 'prepare', id: 801, generation: 7n, handle: 6n, axisMask: 1, ...points(hold, [0n, 1_000_000_000n], [hold[0]!, hold[0]! + 0.01]) });
  expect(reply(801)!.result.Result).toBe(2);
  host.handle({ t: 'cmd', id: 802, op: 'start', generation: 7n, axisMask: 0, handle: 7n });
  expect(reply(802)!.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.unknown_handle });
  host.handle({ t: 'cmd', id: 803, op: 'start', generation: 7n, axisMask: 0, handle: 6n });
  expect(reply(803)!.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.not_ready });
  cmd('enable', ALL);
  stepUntil(() => core.status(core.now).enable_mask === ALL, 30);
  expect(reply(cmd('arm'))?.result.Result).toBe(0);
  host.handle({ t: 'prepare', id: 804, generation: 7n, handle: 8n, axisMask: 1, ...points(hold, [0n, 1_000_000_000n], [hold[0]! + 0.2, hold[0]! + 0.21]) });
  expect(reply(804)!.result.Result).toBe(2); // replaces handle 6 in the plan slot
  host.handle({ t: 'cmd', id: 805, op: 'start', generation: 7n, axisMask: 0, handle: 8n });
  expect(reply(805)!.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.not_ready, AxisMask: 1 });
  expect(core.preparedPlan?.handle).toBe(8n); // a refused start keeps the plan
});
