// Motion measurements from telemetry windows written with the oracle's own encoder: following error,
// completion time, which axes moved, sequence gaps, the core's own clock, and the histograms.

import { describe, expect, test } from 'vitest';
import { encodeBatch, type RecordInput } from './oracle/telemetry.ts';
import { analyseMotion, histAdd, histMerge, histQuantile, newHist, WindowBuilder, type AxisInfo } from './motion.ts';

const CPU = 1000; // counts per unit
/** Records 1 ms apart (plus `jitterNs` of host time each), J1 position/target per cycle, J2 still at 5 counts. */
function records(pos: number[], target: number[], opts: { seq0?: bigint; hostJitter?: boolean; fe?: number[] } = {}): RecordInput[] {
  return pos.map((p, i) => ({
    seq: (opts.seq0 ?? 1n) + BigInt(i),
    t_ns: 1_000_000_000n + BigInt(i) * 1_000_000n + (opts.hostJitter ? BigInt(i % 3) * 7n : 0n),
    cycle_jitter_ns: BigInt(1000 * (i + 1)),
    ax: [
      { position: p, target: target[i]!, following_error_counts: opts.fe?.[i] ?? 0, following_error_valid: opts.fe ? 1 : 0 },
      { position: 5, target: 5 },
    ],
  }));
}
const window = (recs: RecordInput[], cap = 100) => {
  const b = new WindowBuilder(cap);
  b.add(encodeBatch({ header: { axis_count: 2 }, records: recs }));
  return b.build();
};
const AXES: AxisInfo[] = [
  { id: 'J1', unit: 'rad', countsPerUnit: CPU, followingError: 0.01, completionTolerance: 0.002, completionTimeoutMs: 50 },
  { id: 'J2', unit: 'rad', countsPerUnit: CPU, completionTolerance: 0.002 },
];

describe('analyseMotion', () => {
  // J1's target ramps 0 -> 100 counts over cycles 0..4 then holds; the position lags and settles at cycle 8.
  const target = [0, 25, 50, 75, 100, 100, 100, 100, 100, 100];
  const pos = [0, 10, 35, 60, 85, 95, 97, 97, 99, 100];

  test('following error: the largest |target - position| in units; only the axis that moved', () => {
    const m = analyseMotion(window(records(pos, target, { hostJitter: true })), AXES);
    expect(m.map((x) => x.axis.id)).toEqual(['J1']);
    expect(m[0]!.feMax).toBeCloseTo(0.015, 9); // cycles 1..4: 15 counts behind
  });

  test('a valid drive-reported following error is the one counted, larger or smaller than |target - position|', () => {
    // The drive's own figure: a spike of 40 counts where the position trails by 3 counts.
    const spike = [0, 15, 15, 15, 15, 5, -40, 3, 1, 0];
    expect(analyseMotion(window(records(pos, target, { fe: spike, hostJitter: true })), AXES)[0]!.feMax).toBeCloseTo(0.04, 9);
    // A drive that reports 2 counts while |target - position| is 15 (the bus's cycle of delay between the
    // target sent and the position read): 0.002, not 0.015.
    const small = pos.map(() => 2);
    expect(analyseMotion(window(records(pos, target, { fe: small, hostJitter: true })), AXES)[0]!.feMax).toBeCloseTo(0.002, 9);
  });

  test('following_error_max is the error held through following_error_timeout_ms; a one-cycle spike is only the peak', () => {
    const fe = [0, 15, 15, 15, 15, 5, -40, 3, 1, 0]; // one cycle of 0.04 among cycles of at most 0.015
    const held = analyseMotion(window(records(pos, target, { fe, hostJitter: true })), [{ ...AXES[0]!, followingErrorTimeoutMs: 3 }])[0]!;
    expect(held.fePeak).toBeCloseTo(0.04, 9);
    // cycles 1..4 (15 counts each) are the longest-held: 0.015 through 3 ms
    expect(held.feMax).toBeCloseTo(0.015, 9);
    // a timeout longer than the window: no stretch is long enough, nothing is held
    expect(analyseMotion(window(records(pos, target, { fe, hostJitter: true })), [{ ...AXES[0]!, followingErrorTimeoutMs: 50 }])[0]!.feMax).toBe(0);
  });

  test('completion: from the cycle after the target last changed to the first cycle that stays within tolerance', () => {
    // target last changes at cycle 4 (=100 from there); within 2 counts of 100 from cycle 6 (97 is 3 away: no), cycle 8 (99) on
    const m = analyseMotion(window(records(pos, target, { hostJitter: true })), AXES)[0]!;
    expect(m.completionMs).toBeCloseTo(4, 1); // cycle 8 - cycle 4, 1 ms apart
    // a tolerance of 3 counts admits cycle 6 (97), two cycles earlier
    const wide = analyseMotion(window(records(pos, target, { hostJitter: true })), [{ ...AXES[0]!, completionTolerance: 0.003 }])[0]!;
    expect(wide.completionMs).toBeCloseTo(2, 1);
  });

  test('no completion time when an execution fault latched in the window (the core holds the position as the target)', () => {
    // A fault at cycle 3 stops J1 where it stands: the target jumps to the position and stays there.
    const held = [0, 10, 35, 60, 60, 60, 60, 60, 60, 60];
    const stopped = [0, 25, 50, 60, 60, 60, 60, 60, 60, 60];
    const faulted = (faults: number[]) => records(held, stopped, { hostJitter: true }).map((r, i) => ({ ...r, execution_fault_reasons: faults[i]! }));
    expect(analyseMotion(window(faulted([0, 0, 0, 32, 32, 32, 32, 32, 32, 32])), AXES)[0]!.completionMs).toBeUndefined();
    // a bit already latched before the window and still latched is not a fault of this motion
    expect(analyseMotion(window(faulted(held.map(() => 32))), AXES)[0]!.completionMs).toBeCloseTo(0, 1);
    // a second bit latching beside one already set is
    expect(analyseMotion(window(faulted([32, 32, 32, 33, 33, 33, 33, 33, 33, 33])), AXES)[0]!.completionMs).toBeUndefined();
    // the same records with no fault: a completion 0 ms after the target's last change
    expect(analyseMotion(window(faulted(held.map(() => 0))), AXES)[0]!.completionMs).toBeCloseTo(0, 1);
  });

  test('no completion time when the window ends outside the tolerance', () => {
    const m = analyseMotion(window(records([...pos.slice(0, 9), 90], target, { hostJitter: true })), AXES)[0]!;
    expect(m.completionMs).toBeUndefined();
  });

  test('the plot series carries the limit and at most two points per bucket', () => {
    const m = analyseMotion(window(records(pos, target, { hostJitter: true })), AXES)[0]!;
    expect(m.series.following_error_limit).toBe(0.01);
    expect(m.series.t.length).toBe(pos.length);
    expect(m.series.target.at(-1)).toBe(0.1);
  });
});

describe('WindowBuilder', () => {
  test('a break in the sequence is a gap; the core on its own clock is recognised', () => {
    const recs = records([0, 1, 2, 3], [0, 1, 2, 3]);
    recs[2]!.seq = 9n;
    recs[3]!.seq = 10n;
    const w = window(recs);
    expect(w.gaps).toBe(1);
    expect(w.coreTime).toBe(true); // every t_ns exactly one period apart
    expect(window(records([0, 1, 2, 3], [0, 1, 2, 3], { hostJitter: true })).coreTime).toBe(false);
  });

  test('dropped records are summed; the first record after a drop is not a gap', () => {
    const b = new WindowBuilder(100);
    b.add(encodeBatch({ header: { axis_count: 2 }, records: records([0, 1], [0, 1]) }));
    b.add(encodeBatch({ header: { axis_count: 2, dropped: 5n }, records: records([0, 1], [0, 1], { seq0: 8n }) }));
    const w = b.build();
    expect([w.dropped, w.gaps, w.count]).toEqual([5, 0, 4]);
  });

  test('the cap keeps the first records and says the window was cut', () => {
    const w = window(records([0, 1, 2, 3, 4], [0, 1, 2, 3, 4]), 3);
    expect([w.count, w.truncated]).toEqual([3, true]);
    expect(window(records([0, 1, 2], [0, 1, 2]), 3).truncated).toBe(false);
  });
});

describe('log histograms', () => {
  test('quantiles are bucket upper edges clamped to the maximum; merging adds counts', () => {
    const h = newHist(1);
    for (let i = 1; i <= 100; i++) histAdd(h, i);
    expect(histQuantile(h, 0.5)).toBeCloseTo(10 ** (Math.floor(20 * Math.log10(50)) / 20 + 1 / 20), 6);
    expect(histQuantile(h, 1)).toBe(100);
    const g = newHist(1);
    histAdd(g, 1000);
    histAdd(g, 0.5); // below the base: bucket 0
    histMerge(h, g);
    expect([h.count, h.max, h.buckets[0]]).toEqual([102, 1000, 1]);
    expect(histQuantile(newHist(1), 0.5)).toBeNaN();
    expect(() => histMerge(h, newHist(2))).toThrow();
  });
});
