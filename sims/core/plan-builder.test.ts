// PlanBuilder (sims/core/trajectory.ts): a plan taken in slice by slice is the plan built at once, and the
// first refusal is the same whatever the slice size (issue 21 item 11 moved large plans off one cycle).

import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { compileMachine } from '../config/compile.ts';
import { PlanBuilder, buildPlan, type PlanInput } from './trajectory.ts';

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

test('sliced at any size, the plan is the one built at once, after elements / slice steps', () => {
  const whole = buildPlan(machine, input(500));
  for (const slice of [1, 7, 499, 500, 501, 10_000]) {
    const { out, steps } = sliced(input(500), slice);
    expect(out).toEqual(whole);
    expect(steps).toBe(Math.ceil((500 * (1 + 2 * N)) / slice));
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
