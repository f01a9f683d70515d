// Kinematics of the fixture robot (fixtures/robots/sim-nine-axis.urdf) for Cartesian jog and moves:
// forward kinematics against the description's offsets, inverse kinematics round trips, and the
// refusals (a pose only reachable outside a joint limit, a singular pose).

import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { chainOf, forward, interpolate, inverse, jacobian, poseError, sigmaMin, SINGULAR_SIGMA, xyzRpy, poseOf } from './kinematics.ts';

const URDF = readFileSync(new URL('../../fixtures/robots/sim-nine-axis.urdf', import.meta.url), 'utf8');
const chain = chainOf(URDF);
const Q0 = { J9: 0, J1: 0, J2: 0.3, J3: 0.6, J4: 0.2, J5: 0.7, J6: -0.3 };

describe('kinematics of the fixture robot', () => {
  test('the tool chain: J9 holds, J1..J6 are active; at zero the tool sits at the summed offsets', () => {
    expect(chain.movable).toEqual(['J9', 'J1', 'J2', 'J3', 'J4', 'J5', 'J6']);
    expect(chain.active).toEqual(['J1', 'J2', 'J3', 'J4', 'J5', 'J6']);
    const p = xyzRpy(forward(chain, {}).pose);
    // x: 0.15 + 0.5 + 0.3 + 0.1; z: 0.45 + 0.2 + 0.7 + 0.1 + 0.4 (tool0 0.4 along the flange's z).
    p.xyz_m.forEach((v, k) => expect(v).toBeCloseTo([1.05, 0, 1.85][k]!, 12));
    // J1 a quarter turn swings the tool to +y.
    const q = xyzRpy(forward(chain, { J1: Math.PI / 2 }).pose);
    [0, 1.05, 1.85].forEach((v, k) => expect(q.xyz_m[k]).toBeCloseTo(v, 12));
  });

  test('the Jacobian matches finite differences of forward kinematics', () => {
    const J = jacobian(chain, Q0);
    const h = 1e-7;
    chain.active.forEach((n, i) => {
      const d = poseError(forward(chain, Q0).pose, forward(chain, { ...Q0, [n]: Q0[n as keyof typeof Q0] + h }).pose).map((x) => x / h);
      d.forEach((v, r) => expect(J[r]![i]).toBeCloseTo(v, 5));
    });
  });

  test('inverse kinematics returns to a pose from a nearby seed (property, inside the limits, away from singularities)', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: -0.25, max: 0.25, noNaN: true }), { minLength: 6, maxLength: 6 }), (d) => {
        const goal = { ...Q0 };
        chain.active.forEach((n, i) => ((goal as Record<string, number>)[n] += d[i]!));
        const target = forward(chain, goal).pose;
        const r = inverse(chain, target, Q0);
        expect(r.ok, JSON.stringify(r)).toBe(true);
        const e = poseError(forward(chain, (r as { q: Record<string, number> }).q).pose, target);
        expect(Math.hypot(e[0]!, e[1]!, e[2]!)).toBeLessThan(1e-6);
        expect(Math.hypot(e[3]!, e[4]!, e[5]!)).toBeLessThan(1e-6);
      }),
      { numRuns: 40 },
    );
  });

  test('a pose with J4 and J6 aligned (J5 = 0) is refused as a singularity', () => {
    const singular = { ...Q0, J5: 0 };
    expect(sigmaMin(jacobian(chain, singular))).toBeLessThan(SINGULAR_SIGMA);
    const r = inverse(chain, forward(chain, singular).pose, Q0);
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.reason).toBe('singularity');
  });

  test('a pose reached only past a joint limit is refused joint_limit with the joint; an unreachable one unreachable', () => {
    const past = { ...Q0, J3: 3.2 }; // J3 upper limit 3.0
    const r = inverse(chain, forward(chain, past).pose, { ...Q0, J3: 2.9 });
    expect(r.ok).toBe(false);
    if (!r.ok) expect([r.reason, r.joint, r.limit]).toEqual(['joint_limit', 'J3', 3]);
    const far = inverse(chain, poseOf([5, 0, 1], [0, 0, 0]), Q0);
    expect(far.ok ? '' : far.reason).toBe('unreachable');
  });

  test('interpolate: ends are the poses, the middle is halfway in position and angle', () => {
    const a = forward(chain, Q0).pose;
    const b = forward(chain, { ...Q0, J1: 0.4, J5: 1.0 }).pose;
    expect(poseError(interpolate(a, b, 0), a).every((x) => Math.abs(x) < 1e-12)).toBe(true);
    expect(poseError(interpolate(a, b, 1), b).every((x) => Math.abs(x) < 1e-9)).toBe(true);
    const m = interpolate(a, b, 0.5);
    const e1 = poseError(a, m);
    const e2 = poseError(m, b);
    e1.forEach((v, k) => expect(v).toBeCloseTo(e2[k]!, 6));
  });
});
