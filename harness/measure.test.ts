// Measurements: each limit from both sides, the FAIL that names both numbers, and the declaration errors
// that are the harness's own (ERROR).

import { describe, expect, test } from 'vitest';
import { HarnessError, verdictOfError } from './errors.ts';
import { enterMeasuredTest, leaveMeasuredTest, limitText, measure, type MeasurementRecord, type MeasurementSink } from './measure.ts';

const sink = (): MeasurementSink & { got: MeasurementRecord[] } => {
  const got: MeasurementRecord[] = [];
  return { got, add: (m) => got.push(m) };
};
const thrown = (f: () => unknown): HarnessError | undefined => {
  try {
    f();
  } catch (e) {
    return e as HarnessError;
  }
  return undefined;
};

describe('limits, each from both sides', () => {
  const ROWS: Array<[string, (m: ReturnType<typeof measure>) => ReturnType<typeof measure>, number, boolean]> = [
    ['atMost at the limit', (m) => m.atMost(0.01, 'configured', 'axes[0].limits.following_error'), 0.01, true],
    ['atMost just above', (m) => m.atMost(0.01, 'configured', 'axes[0].limits.following_error'), 0.010001, false],
    ['atLeast at the limit', (m) => m.atLeast(2, 'profile', 'p'), 2, true],
    ['atLeast just below', (m) => m.atLeast(2, 'profile', 'p'), 1.999, false],
    ['within at the low edge', (m) => m.within(1, 3, 'documented', 'd'), 1, true],
    ['within at the high edge', (m) => m.within(1, 3, 'documented', 'd'), 3, true],
    ['within below', (m) => m.within(1, 3, 'documented', 'd'), 0.999, false],
    ['within above', (m) => m.within(1, 3, 'documented', 'd'), 3.001, false],
    ['equals', (m) => m.equals(0, 'documented', 'd'), 0, true],
    ['equals off by one', (m) => m.equals(0, 'documented', 'd'), 1, false],
  ];
  test.each(ROWS)('%s', (_row, limit, value, ok) => {
    const s = sink();
    const e = thrown(() => limit(measure('x_max', 'rad', { sink: s, axis: 'J1' })).record(value));
    expect(s.got).toHaveLength(1); // kept either way: the report shows it
    expect(s.got[0]!.outcome).toBe(ok ? 'pass' : 'fail');
    if (ok) expect(e).toBeUndefined();
    else {
      expect(e?.code).toBe('HIL_ERR_MEASUREMENT_LIMIT');
      expect(verdictOfError(e)).toBe('fail');
      expect(verdictOfError({ code: e!.code })).toBe('fail'); // as the reporter sees it, serialized
      expect(e!.message).toContain(`x_max J1 = ${value} rad`);
      expect(e!.message).toContain(limitText(s.got[0]!.limit!));
    }
  });
});

test('the limit text names the number and where it comes from', () => {
  expect(limitText({ kind: 'at_most', hi: 0.01, source: 'configured', ref: 'axes[0].limits.following_error' })).toBe('<= 0.01 (configured: axes[0].limits.following_error)');
  expect(limitText({ kind: 'within', lo: 1, hi: 2, source: 'documented', ref: 'd' })).toBe('within [1, 2] (documented: d)');
});

test('without a limit the value is recorded as unlimited', () => {
  const s = sink();
  measure('round_trip', 'ms', { sink: s }).record(3.5);
  expect(s.got).toEqual([{ name: 'round_trip', unit: 'ms', value: 3.5, outcome: 'unlimited' }]);
});

describe('declaration errors are the harness own (ERROR)', () => {
  const ROWS: Array<[string, () => unknown]> = [
    ['a malformed name', () => measure('Bad Name', 'ms', { sink: sink() })],
    ['a second limit', () => measure('x', 'ms', { sink: sink() }).atMost(1, 'profile', 'p').atLeast(0, 'profile', 'p')],
    ['an empty range', () => measure('x', 'ms', { sink: sink() }).within(2, 1, 'profile', 'p')],
    ['a non-finite limit', () => measure('x', 'ms', { sink: sink() }).atMost(NaN, 'profile', 'p')],
    ['a non-finite value', () => measure('x', 'ms', { sink: sink() }).record(Infinity)],
    ['outside a test', () => measure('x', 'ms')],
  ];
  test.each(ROWS)('%s', (_row, f) => {
    const e = thrown(f);
    expect(e?.code).toBe('HIL_ERR_MEASUREMENT');
    expect(verdictOfError(e)).toBe('error');
  });

  test('recorded twice', () => {
    const m = measure('x', 'ms', { sink: sink() });
    m.record(1);
    expect(thrown(() => m.record(2))?.code).toBe('HIL_ERR_MEASUREMENT');
  });

  test('the running test is found alone; two at once need their own sink', () => {
    const a = sink();
    const b = sink();
    enterMeasuredTest(a);
    try {
      measure('x', 'ms').record(1);
      expect(a.got).toHaveLength(1);
      enterMeasuredTest(b);
      expect(thrown(() => measure('y', 'ms'))?.code).toBe('HIL_ERR_MEASUREMENT');
    } finally {
      leaveMeasuredTest(a);
      leaveMeasuredTest(b);
    }
  });
});

test('with collection off (HIL_EVIDENCE=0) a measurement outside a collected test still checks its limit', () => {
  const saved = process.env.HIL_EVIDENCE;
  process.env.HIL_EVIDENCE = '0';
  try {
    expect(thrown(() => measure('upload_admission', 'ms').atMost(10, 'profile', 'p').record(5))).toBeUndefined();
    expect(thrown(() => measure('upload_admission', 'ms').atMost(10, 'profile', 'p').record(11))?.code).toBe('HIL_ERR_MEASUREMENT_LIMIT');
  } finally {
    if (saved === undefined) delete process.env.HIL_EVIDENCE;
    else process.env.HIL_EVIDENCE = saved;
  }
  expect(thrown(() => measure('upload_admission', 'ms'))?.code).toBe('HIL_ERR_MEASUREMENT');
});
