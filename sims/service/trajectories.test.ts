// The request's own point rules (document 1 part 2 Point: time_ns "first point 0, later strictly
// increasing"; positions finite) as TrajectoryOps.checkPoints applies them: the int64 time order is compared
// on 32-bit halves and the checks yield to the event loop between slices, so both are checked here against
// the plain bigint rule, at the half boundaries and across slices.

import { describe, expect, test } from 'vitest';
import { Refusal } from './envelope.ts';
import { pointArrays, TrajectoryOps } from './trajectories.ts';
import type { PointArrays } from './upload/decoder.ts';

const AXES = 2;
const machine = { axes: Array.from({ length: AXES }, () => ({})), io: { outputs: [{}, { torch: true }] } };
const ops = new TrajectoryOps({} as never, {} as never, machine as never, {} as never);

/** A plan of `times` with every position 0, built the way a decoded small body is (pointArrays). */
function points(times: readonly bigint[]): PointArrays {
  const p = pointArrays(times.map((time_ns) => ({ time_ns, position: new Array<number>(AXES).fill(0) })) as never, AXES);
  if (p instanceof Refusal) throw new Error(`pointArrays refused the plan: ${p.label}`);
  return p;
}

/** The first refused point's message, or 'ok'. */
async function verdict(p: PointArrays): Promise<string> {
  try {
    await ops.checkPoints(p, (1 << AXES) - 1);
    return 'ok';
  } catch (e) {
    if (e instanceof Refusal) return `${e.label}: ${e.detail}`;
    throw e;
  }
}

/** The rule with bigints: the index of the first point not later than the one before, or -1. */
function firstOutOfOrder(times: readonly bigint[]): number {
  for (let k = 1; k < times.length; k++) if (times[k]! <= times[k - 1]!) return k;
  return -1;
}

describe('checkPoints time order', () => {
  const H = 1n << 32n;
  test('later and not later across the 32-bit halves (low word carry, high word sign)', async () => {
    const cases: bigint[][] = [
      [0n, H - 1n, H],
      [0n, H, H - 1n],
      [0n, H, H],
      [0n, 0xffff_ffffn, 0x1_0000_0000n, 0x1_8000_0000n, 0x2_0000_0000n],
      [0n, 0x7fff_ffffn, 0x8000_0000n, 0xffff_fffen],
      [0n, 0x8000_0000n, 0x7fff_ffffn],
      [0n, (1n << 63n) - 1n],
      [0n, -1n],
      [0n, 5n, 5n],
      [0n, 3n * H + 7n, 3n * H + 6n],
      [0n, 3n * H + 7n, 4n * H + 6n],
    ];
    for (const times of cases) {
      const k = firstOutOfOrder(times);
      const want = k < 0 ? 'ok' : `invalid_request_envelope: points[${k}].time_ns must be greater than points[${k - 1}].time_ns`;
      expect(await verdict(points(times)), times.join(',')).toBe(want);
    }
  });

  test('a maximum-size plan is checked across slices, the first broken point named wherever it is', async () => {
    const n = 250_000;
    const times = Array.from({ length: n }, (_, k) => BigInt(k) * 1_000_000n);
    expect(await verdict(points(times))).toBe('ok');
    for (const at of [1, 16_383, 16_384, 16_385, 131_072, n - 1]) {
      const t = [...times];
      t[at] = t[at - 1]!;
      expect(await verdict(points(t)), `repeat at ${at}`).toBe(`invalid_request_envelope: points[${at}].time_ns must be greater than points[${at - 1}].time_ns`);
    }
    const p = points(times);
    p.position[(200_000 * AXES) + 1] = Number.NaN;
    expect(await verdict(p)).toBe('invalid_request_envelope: points[200000].position[1] is not finite');
    const q = points(times);
    q.ioMask[180_000] = 2;
    expect(await verdict(q)).toBe('io_torch_unqualified: points[180000].io_mask names a torch-class output');
  });
});
