// The jog lane in-process on the stepped clock, with host time equal to core time (so input expiry is as
// deterministic as the ramp): ramp profile at the jog acceleration, arrest within jog.arrest_ns when the
// input stops or expires, braking to stop exactly at a position limit, the begin / end / legacy commands
// and what stop and halt do to a jog.

import { expect, test } from 'vitest';
import { SimBusDriver } from '../../drivers/sim/driver.ts';
import type { CompiledMachine } from '../config/types.ts';
import { SteppedClock } from './clock.ts';
import { Core } from './core.ts';
import { JogLane } from './jog.ts';
import { JOG_REASON, NATIVE_REASON } from './reasons.ts';
import { type FromCore, type JogCmd, type NativeOpName } from './protocol.ts';
import { nineAxisMachine } from './test-machine.ts';

const MACHINE: CompiledMachine = nineAxisMachine();
const N = MACHINE.axes.length;
const ALL = (1 << N) - 1;
const CYCLE = MACHINE.cycle_ns;
const FOREVER = 1n << 62n;
const J1 = MACHINE.axes[0]!;
const cpu = (i: number) => MACHINE.axes[i]!.counts_per_unit * MACHINE.axes[i]!.sign;
// The simulated drives follow without velocity feedforward: following error is about 0.03 s x velocity,
// so jogs stay below the 0.01 rad following error limit (0.3 rad/s) unless an axis allows more.
const ACC = J1.jog_acceleration; // rad/s^2
const ARREST_CYCLES = Number(J1.jog_arrest_ns / CYCLE);

async function jogCore(machine: CompiledMachine = MACHINE) {
  const sent: FromCore[] = [];
  const core: Core = new Core(machine, new SimBusDriver(), 'cd'.repeat(16), (m) => sent.push(m), { hostClock: () => core.now });
  await core.start(1_000_000_000n);
  core.handle({ t: 'grant', generation: 7n, deadlineNs: FOREVER, active: true, axisMask: ALL });
  const clock = new SteppedClock(CYCLE, 1_000_000_000n);
  const step = (k = 1) => {
    for (let j = 0; j < k; j++) {
      const t = clock.next();
      core.cycle(t.nowNs, t.scheduledNs);
    }
  };
  let id = 1;
  const cmd = (op: NativeOpName, axisMask = 0, jog?: JogCmd, handle?: bigint) => {
    const my = id++;
    core.handle({ t: 'cmd', id: my, op, generation: 7n, axisMask, ...(jog ? { jog } : {}), ...(handle !== undefined ? { handle } : {}) });
    return sent.find((m): m is Extract<FromCore, { t: 'reply' }> => m.t === 'reply' && m.id === my)!;
  };
  const events = (type: string) => sent.filter((m): m is Extract<FromCore, { t: 'event' }> => m.t === 'event' && m.type === type);
  const ready = () => {
    cmd('enable', ALL);
    step(20);
    expect(cmd('arm').result.Result).toBe(0);
  };
  /** velocity (rad/s) of an axis's target, logical */
  const v1 = (i = 0) => core.jog.velocity[i]! / cpu(i);
  const target1 = (i = 0) => core.image.targetPosition[i]! / cpu(i);
  const update = (seq: bigint, v: number, inputDeadlineNs = FOREVER, axis = 0) =>
    core.handle({ t: 'jog_update', generation: 7n, jogGeneration: core.jog.generation, sequence: seq, captureNs: core.now, inputDeadlineNs, velocity: MACHINE.axes.map((_, i) => (i === axis ? v : 0)) });
  return { core, sent, step, cmd, events, ready, v1, target1, update };
}

test('begin_jog: not armed is not_ready; the handle is a new jog generation; jog_begin is published', async () => {
  const { core, cmd, events, ready } = await jogCore();
  expect(cmd('begin_jog', 1, { originNs: core.now, deadlineNs: core.now + 100_000_000n }).result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.not_ready });
  ready();
  const r = cmd('begin_jog', 1, { originNs: core.now, deadlineNs: core.now + 100_000_000n });
  expect(r.result).toMatchObject({ Result: 0, Handle: 1n, Operation: 16 });
  expect(events('jog_begin').map((e) => e.payload.jog_generation)).toEqual([1n]);
  expect(core.status(core.now).jog).toMatchObject({ JogGeneration: 1n, SessionOpen: 1, AxisMask: 1, Mode: 1 });
  expect(core.status(core.now).motion.mode).toBe(3);
  // end_jog needs the exact current generation
  expect(cmd('end_jog', 0, undefined, 2n).result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.jog_session_stale });
  expect(cmd('end_jog', 0, undefined, 1n).result).toMatchObject({ Result: 0, Handle: 1n });
  expect(events('jog_end').map((e) => e.payload.why)).toEqual(['end_jog']);
  expect(cmd('end_jog', 0, undefined, 1n).result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.jog_session_stale });
});

test('ramp: velocity rises at the jog acceleration, then input 0 brings the axis to rest within arrest_ns', async () => {
  const { core, step, cmd, events, ready, v1, update } = await jogCore();
  ready();
  cmd('begin_jog', 1, { originNs: core.now, deadlineNs: FOREVER });
  update(1n, 0.3);
  const dv = ACC * (Number(CYCLE) / 1e9);
  step(1);
  expect(v1()).toBeCloseTo(dv, 9);
  step(9);
  expect(v1()).toBeCloseTo(10 * dv, 9);
  step(200); // 0.3 rad/s at 3 rad/s^2 takes 100 ms
  expect(v1()).toBeCloseTo(0.3, 9);
  update(2n, 0);
  expect(events('jog_ramping')).toHaveLength(1);
  let k = 0;
  while (v1() !== 0 && k < 1000) {
    step(1);
    k++;
  }
  expect(k).toBeLessThanOrEqual(ARREST_CYCLES);
  // 0.3 rad/s at the jog acceleration of 3 rad/s^2 stops in 100 ms, inside the 200 ms arrest time
  expect(k).toBe(Math.ceil(0.3 / dv - 1e-9));
  // at rest with the session open the lane keeps the axes (input may resume)
  expect(core.jog.open).toBe(true);
});

test('arrest: from a speed the jog acceleration cannot stop in time, the lane decelerates harder and stops within arrest_ns', async () => {
  const { core, step, cmd, ready, v1, update } = await jogCore();
  ready();
  // J9: jog acceleration 1 rad/s^2 would need 500 ms to stop from 0.5 rad/s; the arrest time is 200 ms
  const J9 = 8;
  expect(MACHINE.axes[J9]!.jog_acceleration).toBe(1);
  cmd('begin_jog', 1 << J9, { originNs: core.now, deadlineNs: FOREVER });
  update(1n, 0.5, FOREVER, J9);
  step(600);
  expect(v1(J9)).toBeCloseTo(0.5, 9);
  update(2n, 0, FOREVER, J9);
  let k = 0;
  while (v1(J9) !== 0 && k < 1000) {
    step(1);
    k++;
  }
  expect(k).toBeGreaterThan(ARREST_CYCLES - 3);
  expect(k).toBeLessThanOrEqual(ARREST_CYCLES);
});

test('expiry: host time past the input deadline emits jog_expired and jog_ramping, closes the session and ramps to rest', async () => {
  const { core, step, cmd, events, ready, v1, update } = await jogCore();
  ready();
  cmd('begin_jog', 1, { originNs: core.now, deadlineNs: FOREVER });
  update(1n, 0.2, core.now + 200_000_000n);
  step(150);
  expect(events('jog_expired')).toHaveLength(0);
  step(51); // the cycle whose host time is past the deadline
  expect(events('jog_expired')).toHaveLength(1);
  expect(events('jog_ramping')).toHaveLength(1);
  expect(events('jog_end')).toHaveLength(0); // expiry is not jog_end
  expect(core.jog.open).toBe(false);
  expect(core.jog.stateReason).toBe(JOG_REASON.expired);
  step(ARREST_CYCLES);
  expect(v1()).toBe(0);
  expect(core.status(core.now).jog.Active).toBe(0); // axes given back to hold
  // a frame after expiry is for a closed session
  update(2n, 0.2);
  expect(core.jog.updateReason).toBe(JOG_REASON.jog_session_stale);
});

test('limit: the lane brakes to stop exactly at max_position, never beyond; jog_limited once; outward input refused outside', async () => {
  const { core, step, cmd, events, ready, target1, update } = await jogCore();
  ready();
  const J7 = 6;
  const max = MACHINE.axes[J7]!.max_position;
  cmd('begin_jog', 1 << J7, { originNs: core.now, deadlineNs: FOREVER });
  update(1n, 0.3, FOREVER, J7);
  let top = -Infinity;
  for (let k = 0; k < 7000; k++) {
    step(1);
    top = Math.max(top, target1(J7));
    expect(core.image.positionActual[J7]! / cpu(J7)).toBeLessThanOrEqual(max);
  }
  const guard = 0.1 * MACHINE.axes[J7]!.completion_tolerance;
  expect(top).toBeLessThanOrEqual(max - guard + 1 / cpu(J7));
  expect(target1(J7)).toBeCloseTo(max - guard, 6);
  expect(events('jog_limited')).toHaveLength(1);
  expect(core.jog.stateReason).toBe(JOG_REASON.limited);
  expect(core.armed).toBe(true); // limited is accepted, not a failure
  // moving back inward is accepted
  update(2n, -0.2, FOREVER, J7);
  expect(core.jog.updateReason).toBe(JOG_REASON.none);
  step(50);
  expect(target1(J7)).toBeLessThan(max);
});

test('halt ramps the jog to rest and retires its generation; stop ends it at once and disables the drives', async () => {
  const { core, step, cmd, events, ready, v1, update } = await jogCore();
  ready();
  cmd('begin_jog', 1, { originNs: core.now, deadlineNs: FOREVER });
  update(1n, 0.3);
  step(200);
  expect(cmd('halt').result.Result).toBe(0);
  expect(events('jog_end').map((e) => e.payload.why)).toEqual(['halt']);
  expect(core.jog.open).toBe(false);
  expect(v1()).toBeGreaterThan(0.29); // still decelerating, not a jump
  step(ARREST_CYCLES);
  expect(v1()).toBe(0);
  expect(core.armed).toBe(true);
  // legacy jog on a new generation, then stop
  const r = cmd('jog', 1, { velocity: [0.2, 0, 0, 0, 0, 0, 0, 0, 0], timeoutNs: 250_000_000n });
  expect(r.result).toMatchObject({ Result: 0, Handle: 2n, Operation: 18 });
  step(100);
  expect(v1()).toBeGreaterThan(0);
  cmd('stop');
  // A stop ends the jog for what it is, a stop: no Home ran, so nothing mentions one.
  expect(events('jog_end').map((e) => e.payload.why)).toEqual(['halt', 'stop']);
  expect(core.jog.active).toBe(false);
  expect(core.enableMask).toBe(0);
});

test('an axis already outside its limits may only be jogged back inward: outward input is refused with jog reason 15', () => {
  const lane = new JogLane(MACHINE, () => undefined);
  const targets = new Int32Array(N);
  targets[0] = Math.round((J1.max_position + 0.05) * cpu(0)); // beyond max_position
  lane.begin(1, 1, targets, 0n, FOREVER);
  const v = new Float64Array(N);
  v[0] = 0.1 * cpu(0);
  expect(lane.input(v, 1n, FOREVER)).toBe(JOG_REASON.outside_limits_outward);
  expect(lane.updateReason).toBe(15);
  expect(lane.command[0]).toBe(0); // nothing taken
  v[0] = -0.1 * cpu(0);
  expect(lane.input(v, 2n, FOREVER)).toBe(JOG_REASON.none);
  expect(lane.command[0]).toBe(v[0]);
  // a velocity on an axis outside the session's mask is refused too
  const w = new Float64Array(N);
  w[1] = 0.1;
  expect(lane.input(w, 3n, FOREVER)).toBe(JOG_REASON.axis_outside_session);
});
