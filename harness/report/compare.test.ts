// hil compare on run records built here: each list of the comparison from both sides and the drift
// tolerance at its edges (the expectation files: harness/report/expectations.test.ts).

import { describe, expect, test } from 'vitest';
import type { MeasurementRecord } from '../measure.ts';
import { compareRuns, regressed, comparisonText, DEFAULT_TOLERANCE } from './compare.ts';
import type { CoverageEntry, RunRecord, RunTest } from './run-types.ts';

const fe = (value: number): MeasurementRecord => ({ name: 'following_error_max', unit: 'rad', axis: 'J1', value, limit: { kind: 'at_most', hi: 0.01, source: 'configured', ref: 'axes[0].limits.following_error' }, outcome: value <= 0.01 ? 'pass' : 'fail' });
const ms = (name: string, value: number): MeasurementRecord => ({ name, unit: 'ms', value, outcome: 'unlimited' });
const t = (name: string, state: RunTest['state'], measurements?: MeasurementRecord[], extra: Partial<RunTest> = {}): RunTest => ({
  file: 'suites/t.test.ts',
  project: 'conformance',
  name,
  fullName: `d > ${name}`,
  state,
  duration_ms: 1,
  covers: [],
  kind: 'contract',
  ...(measurements ? { evidence: { measurements } } : {}),
  ...extra,
});
const cov = (id: string, outcome: CoverageEntry['outcome']): CoverageEntry => ({ id, family: 'reason', doc: 1, section: 's', title: id, status: 'covered', tests: ['x'], outcome });
const run = (tests: RunTest[], coverage: CoverageEntry[] = [], runMs: MeasurementRecord[] = []): RunRecord =>
  ({ schema: 'cell-hil.run.v2', tests, coverage, gate: { ok: true, problems: [] }, run_measurements: { measurements: runMs }, selection: { filters: [] } }) as unknown as RunRecord;

describe('compareRuns', () => {
  const A = run(
    [t('moves', 'passed', [fe(0.004), ms('completion_time', 20)]), t('was failing', 'failed'), t('still failing', 'failed'), t('gone', 'passed'), t('known', 'failed', undefined, { expected_failure: 'x' })],
    [cov('reason:a', 'passed'), cov('reason:b', 'passed'), cov('reason:c', 'failed')],
    [ms('control_round_trip_p99', 2)],
  );
  const B = run(
    [t('moves', 'failed', [fe(0.031), ms('completion_time', 25)]), t('was failing', 'passed'), t('still failing', 'errored'), t('new', 'passed'), t('known', 'failed', undefined, { expected_failure: 'x' })],
    [cov('reason:a', 'passed'), cov('reason:b', 'failed'), cov('reason:c', 'passed')],
    [ms('control_round_trip_p99', 2.5)],
  );
  const c = compareRuns(A, B);

  test('names exactly the new failure, the fixed test, the one still failing, added and removed; an expected failure is none of them', () => {
    expect(c.newFailures).toEqual(['suites/t.test.ts > d > moves']);
    expect(c.fixed).toEqual(['suites/t.test.ts > d > was failing']);
    expect(c.stillFailing).toEqual(['suites/t.test.ts > d > still failing']);
    expect(c.added).toEqual(['suites/t.test.ts > d > new']);
    expect(c.removed).toEqual(['suites/t.test.ts > d > gone']);
    expect(regressed(c)).toBe(true);
    expect(regressed(compareRuns(A, A))).toBe(false);
  });

  test('coverage: verified items gained and lost', () => {
    expect(c.coverage).toMatchObject({ before: 2, after: 2, gained: ['reason:c'], lost: ['reason:b'] });
  });

  test('drift: the measurement that crossed its limit, not the ones within tolerance or under the noise floor', () => {
    expect(c.drifts).toEqual([{ test: 'suites/t.test.ts > d > moves', name: 'following_error_max', axis: 'J1', unit: 'rad', before: 0.004, after: 0.031, outcome: { before: 'pass', after: 'fail' } }]);
    expect(comparisonText(c)).toContain('following_error_max J1 0.004 -> 0.031 rad  [pass -> fail]');
  });

  test('the tolerance at its edges: relative and the unit floor both have to be exceeded', () => {
    const drift = (before: number, after: number, unit = 'rad') => compareRuns(run([t('m', 'passed', [{ ...ms('x', before), unit }])]), run([t('m', 'passed', [{ ...ms('x', after), unit }])])).drifts.length;
    expect(drift(1, 2)).toBe(0); // exactly 50% of the larger value
    expect(drift(1, 2.01)).toBe(1);
    expect(drift(0, 9, 'ms')).toBe(0); // under the 10 ms floor however large the ratio
    expect(drift(0, 11, 'ms')).toBe(1);
    expect(DEFAULT_TOLERANCE.relative).toBe(0.5);
    // with a limit the floor is a tenth of it: a Home 400 ms slower against 60 s is no drift, 6001 ms is
    const home = (v: number): MeasurementRecord => ({ name: 'home_duration', unit: 'ms', value: v, limit: { kind: 'at_most', hi: 60000, source: 'documented', ref: 'd' }, outcome: 'pass' });
    const homeDrift = (a: number, b: number) => compareRuns(run([t('h', 'passed', [home(a)])]), run([t('h', 'passed', [home(b)])])).drifts.length;
    expect(homeDrift(56, 440)).toBe(0);
    expect(homeDrift(56, 6000)).toBe(0);
    expect(homeDrift(56, 6057)).toBe(1);
  });
});
