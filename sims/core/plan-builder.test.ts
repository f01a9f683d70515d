// PlanBuilder (sims/core/trajectory.ts): a plan taken in slice by slice is the plan built at once, and the
// first refusal is the same whatever the slice size (large plans are taken in over many cycles:
// docs/architecture.md "Keeping the cycle while the service works").

import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { compileMachine } from '../config/compile.ts';
import { PlanBuilder, POINTS_PER_CHECK, buildPlan, type PlanInput } from './trajectory.ts';

const machine = { ...compileMachine(readFileSync(new URL('../../fixtures/machines/nine-axis.json', import.meta.url), 'utf8')).machine, dir: '' };
const N = machine.axes.length;

function input(n: number, edit?: (p: PlanInput) => void): PlanInput {
  const p: PlanInput = {
    handle: 3n, generation: 2n, axisMask: (1 << N) - 1,
    timeNs: new BigInt64Array(n), position: new Float64Array(n * N), velocity: new Float64Array(n * N), hasVelocity: new Uint8Array(n),
    ioMask: new Uint32Array(n), ioValues: new Uint32Array(n),
  };
  for (let k = 0; k < n; k++) {
    p.timeNs[k] = BigInt(k) * 10_000_000n;
    for (let i = 0; i < N; i++) p.position[k * N + i] = 0.1 * Math.sin(k / 50 + i);
    if (k % 7 === 3) {
      p.hasVelocity[k] = 1;
      for (let i = 0; i < N; i++) p.velocity[k * N + i] = 0.01 * i;
    }
  }
  edit?.(p);
  return p;
}

function sliced(p: PlanInput, slice: number) {
  const b = new PlanBuilder(machine, p);
  let steps = 0;
  for (;;) {
    steps++;
    const out = b.step(slice);
    if (out) return { out, steps };
  }
}

test('sliced at any size, the plan is the one built at once, after one step per slice of whole points (at least one a step)', () => {
  const whole = buildPlan(machine, input(500));
  const per = 1 + 2 * N;
  for (const slice of [1, 7, per - 1, per, per + 1, 499, 500, 501, 10_000]) {
    const { out, steps } = sliced(input(500), slice);
    expect(out).toEqual(whole);
    expect(steps).toBe(Math.ceil(500 / Math.max(1, Math.floor(slice / per))));
  }
});

test('the first refusal is the same: a position of axis 2 at point 400 before a velocity of axis 5 at point 10', () => {
  const edit = (p: PlanInput) => {
    p.position[400 * N + 2] = 99;
    p.hasVelocity[10] = 1;
    p.velocity[10 * N + 5] = 99;
  };
  const whole = buildPlan(machine, input(500, edit));
  expect(whole).toMatchObject({ kind: 'outside_limits', point: 400, axis: 2 });
  for (const slice of [1, 13, 1000]) expect(sliced(input(500, edit), slice).out).toEqual(whole);
});

/**
 * The profile's rules written out plainly (docs/profile.md "Native checks at prepare", "Velocities"): per
 * axis in order, its positions then its velocities, the first refusal answered. The builder reads points
 * row by row instead, and must answer exactly this.
 */
function byTheProfile(p: PlanInput): ReturnType<typeof buildPlan> {
  const n = p.timeNs.length;
  const t = Array.from(p.timeNs, (x) => Number(x));
  const q = new Float64Array(n * N);
  const qd = new Float64Array(n * N);
  let onIntents = false;
  for (let k = 0; k < n; k++) if (p.ioValues[k]! & p.ioMask[k]!) onIntents = true;
  for (let i = 0; i < N; i++) {
    const a = machine.axes[i]!;
    const owned = ((p.axisMask >>> i) & 1) === 1;
    const first = p.position[i]!;
    const lo = p.recovery ? Math.min(a.min_position, first) : a.min_position;
    const hi = p.recovery ? Math.max(a.max_position, first) : a.max_position;
    for (let k = 0; k < n; k++) {
      const x = p.position[k * N + i]!;
      if (owned && (x < lo || x > hi)) return { kind: 'outside_limits', point: k, axis: i, value: x };
    }
    const c = a.sign * a.counts_per_unit;
    for (let k = 0; k < n; k++) {
      const v = p.hasVelocity[k] ? p.velocity[k * N + i]! : k === 0 || k === n - 1 ? 0 : ((p.position[(k + 1) * N + i]! - p.position[(k - 1) * N + i]!) / (t[k + 1]! - t[k - 1]!)) * 1e9;
      if (owned && Math.abs(v) > a.max_velocity) return { kind: 'velocity', point: k, axis: i, value: v, limit: a.max_velocity };
      q[k * N + i] = p.position[k * N + i]! * c;
      qd[k * N + i] = v * c;
    }
  }
  return { handle: p.handle, generation: p.generation, axisMask: p.axisMask, count: n, axes: N, t: Float64Array.from(t), q, qd, ioMask: p.ioMask, ioValues: p.ioValues, onIntents };
}

test('the plan is the profile\'s: converted counts, given and derived velocities, times, output intents', () => {
  const p = input(700, (x) => {
    x.ioMask[0] = 2;
    x.ioValues[0] = 2;
  });
  const plan = buildPlan(machine, p);
  expect(plan).toEqual(byTheProfile(p));
  expect(plan).toMatchObject({ onIntents: true });
  // Not a plan that only matches itself: derived velocities are nonzero, and an intent-free plan says so.
  expect((plan as { qd: Float64Array }).qd.some((v) => v !== 0)).toBe(true);
  expect(buildPlan(machine, input(700))).toMatchObject({ onIntents: false });
});

test.each([
  ['on one axis, a position refused at a later point than a velocity: the position', (p: PlanInput) => {
    p.position[300 * N + 4] = 99;
    p.hasVelocity[20] = 1;
    p.velocity[20 * N + 4] = 99;
  }, { kind: 'outside_limits', point: 300, axis: 4 }],
  ['a velocity on a lower axis before a position on a higher one: the lower axis', (p: PlanInput) => {
    p.position[5 * N + 6] = 99;
    p.hasVelocity[450] = 1;
    p.velocity[450 * N + 1] = -99;
  }, { kind: 'velocity', point: 450, axis: 1 }],
  ['two positions on one axis: the first point', (p: PlanInput) => {
    p.position[480 * N + 3] = -99;
    p.position[470 * N + 3] = 99;
  }, { kind: 'outside_limits', point: 470, axis: 3, value: 99 }],
  ['an axis outside axis_mask is not checked', (p: PlanInput) => {
    p.axisMask &= ~(1 << 2);
    p.position[100 * N + 2] = 99;
    p.position[200 * N + 7] = 99;
  }, { kind: 'outside_limits', point: 200, axis: 7 }],
])('%s, at every slice size', (_name, edit, expected) => {
  const p = () => input(500, edit);
  expect(byTheProfile(p())).toMatchObject(expected);
  for (const slice of [1, 19, 500, Infinity]) expect(sliced(p(), slice).out).toEqual(byTheProfile(p()));
});

test('a program (recovery) widens an axis\'s limits to its first position, never further', () => {
  const edit = (p: PlanInput) => {
    p.recovery = true;
    for (let k = 0; k < 500; k++) p.position[k * N] = machine.axes[0]!.max_position + 0.01;
    p.position[0] = machine.axes[0]!.max_position + 0.02;
    p.position[499 * N] = machine.axes[0]!.max_position + 0.03;
  };
  const out = buildPlan(machine, input(500, edit));
  expect(out).toEqual(byTheProfile(input(500, edit)));
  expect(out).toMatchObject({ kind: 'outside_limits', point: 499, axis: 0 });
});

test('times are read exactly as Number(bigint), across the 32-bit halves and above 2^53', () => {
  const p = input(8);
  const times = [0n, 4294967295n, 4294967296n, 4294967297n, 2n ** 53n - 1n, 2n ** 53n + 1n, 2n ** 62n + 12345n, 2n ** 63n - 1n];
  times.forEach((x, k) => (p.timeNs[k] = x));
  p.position.fill(0);
  const plan = buildPlan(machine, p) as { t: Float64Array };
  expect(Array.from(plan.t)).toEqual(times.map((x) => Number(x)));
});

test('a workspace of the right size is the plan\'s memory; one of another size is left alone', () => {
  const size = 500 * N;
  const ws = { t: new Float64Array(500).fill(7), q: new Float64Array(size).fill(7), qd: new Float64Array(size).fill(7) };
  const plan = new PlanBuilder(machine, input(500), ws).step(Infinity) as { t: Float64Array; q: Float64Array; qd: Float64Array };
  expect(plan.t).toBe(ws.t);
  expect(plan.q).toBe(ws.q);
  expect(plan.qd).toBe(ws.qd);
  expect(plan).toEqual(byTheProfile(input(500)));
  const small = { t: new Float64Array(499).fill(7), q: new Float64Array(size - N).fill(7), qd: new Float64Array(size - N).fill(7) };
  const other = new PlanBuilder(machine, input(500), small).step(Infinity) as { q: Float64Array };
  expect(other.q).not.toBe(small.q);
  expect(small.q.every((x) => x === 7)).toBe(true);
  expect(other).toEqual(byTheProfile(input(500)));
});

test('a step asked to stop reads its points in groups of POINTS_PER_CHECK and stops after the group it was told in', () => {
  const whole = buildPlan(machine, input(500));
  // Told at once: one group a step.
  const b = new PlanBuilder(machine, input(500));
  let steps = 0;
  let asked = 0;
  let out: ReturnType<PlanBuilder['step']> = null;
  while (!out) {
    steps++;
    out = b.step(Infinity, () => (asked++, true));
  }
  expect(steps).toBe(Math.ceil(500 / POINTS_PER_CHECK));
  expect(asked).toBe(steps);
  expect(out).toEqual(whole);
  // Told after the third question: three groups a step; never told: the whole plan (or the budget) at once.
  const c = new PlanBuilder(machine, input(500));
  let n = 0;
  expect(c.step(Infinity, () => ++n % 3 === 0)).toBeNull();
  expect(n).toBe(3);
  expect(new PlanBuilder(machine, input(500)).step(Infinity, () => false)).toEqual(whole);
  const d = new PlanBuilder(machine, input(500));
  expect(d.step(19 * 40, () => false)).toBeNull(); // a budget of 40 points: two questions, 32 + 8 points
  let rest = 0;
  while (!d.step(19 * 40)) rest++;
  expect(rest).toBe(Math.ceil(460 / 40) - 1);
});
