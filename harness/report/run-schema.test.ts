// The run record's JSON Schema: a v2 record with evidence and run measurements matches it; each kind of
// malformed record is refused with a path. The reporter checks every record it writes the same way
// (harness/report/reporter.ts); harness/report/e2e.test.ts checks a real run's run.json.

import { describe, expect, test } from 'vitest';
import type { ModelFuzzFigures, RunRecord } from './run-types.ts';
import { runMeasurements } from './run-measurements.ts';
import { runSchemaProblems } from './run-schema.ts';
import { histAdd, newHist } from '../motion.ts';
import type { TestEvidence } from '../evidence.ts';

function evidence(): TestEvidence {
  const lateness = newHist(1000);
  for (const v of [20_000, 40_000, 900_000]) histAdd(lateness, v);
  const renew_ms = newHist(0.001);
  histAdd(renew_ms, 0.4);
  return {
    measurements: [
      { name: 'following_error_max', unit: 'rad', axis: 'J1', value: 0.003, limit: { kind: 'at_most', hi: 0.01, source: 'configured', ref: 'axes[0].limits.following_error' }, outcome: 'pass' },
      { name: 'home_duration', unit: 'ms', value: 210, limit: { kind: 'at_most', hi: 60000, source: 'documented', ref: 'document 1 part 4' }, outcome: 'pass' },
    ],
    plots: [{ axis: 'J1', unit: 'rad', t: [0, 1], position: [0, 0.1], target: [0, 0.1], following_error: [0, 0.001], following_error_limit: 0.01 }],
    samples: { lateness, lateness_limit_ns: 500_000, overruns: 1, renew_ms, telemetry_dropped: 0, telemetry_gaps: 0 },
    transcript: { exchanges: [{ at_ms: 1, method: 'POST', path: '/v1/control', request: '{}', status: 200, reply: '{}', ms: 0.5 }], omitted: 0 },
  };
}

function record(): RunRecord {
  const tests: RunRecord['tests'] = [{ file: 'suites/t.test.ts', project: 'conformance', name: 'n', fullName: 'd > n', state: 'passed', duration_ms: 3, covers: ['reason:x'], kind: 'contract', evidence: evidence() }];
  return {
    schema: 'cell-hil.run.v2',
    command: 'hil run',
    started_at: '2026-01-01T00:00:00.000Z',
    finished_at: '2026-01-01T00:00:01.000Z',
    target: { name: 'sim', driver: 'sim', address: '/x', simulated: true, describe: { axes: [] } },
    environment: { machine_sha256: '', configuration_sha256: '', deployment_sha256: '', package_version: '0.1.0', git_revision: 'x', node: 'v20', platform: 'linux x64', hostname: 'h' },
    tests,
    coverage: [{ id: 'reason:x', family: 'reason', doc: 1, section: 's', title: 't', status: 'covered', tests: ['d > n'], outcome: 'passed' }],
    summary: { passed: 1, failed: 0, skipped: 0, errored: 0, duration_ms: 1000 },
    gate: { ok: true, problems: [] },
    run_measurements: runMeasurements(tests),
  };
}

test('a record with evidence and run measurements matches, also after a JSON round trip', () => {
  const r = record();
  expect(r.run_measurements!.measurements.map((m) => m.name)).toEqual([
    'cycle_lateness_p50',
    'cycle_lateness_p99',
    'cycle_lateness_max',
    'cycle_overruns',
    'cycles_observed',
    'control_round_trip_p50',
    'control_round_trip_p99',
    'home_duration_max',
    'telemetry_dropped',
    'telemetry_gaps',
  ]);
  // the 900 us cycle is above the configured 500 us: the max is outside, the median inside
  const byName = Object.fromEntries(r.run_measurements!.measurements.map((m) => [m.name, m]));
  expect(byName.cycle_lateness_max).toMatchObject({ value: 900, outcome: 'fail', limit: { hi: 500, source: 'configured' } });
  expect(byName.cycle_lateness_p50!.outcome).toBe('pass');
  expect(runSchemaProblems(r)).toEqual([]);
  expect(runSchemaProblems(JSON.parse(JSON.stringify(r)))).toEqual([]);
});

/** The record as hil fuzz leaves it (schema v3, model.fuzz). */
function withModel(r: RunRecord): RunRecord {
  r.schema = 'cell-hil.run.v3';
  r.model = {
    fuzz: { target: 'sim', clock: 'stepped', minutes: 10, seeds: [1, 2], passed: true, sequences: 3, commands: 120, transitions_reached: 1, per_transition: { 'transition:a': 4 }, per_rule: { 'transition:a': 4, 'rule:b': 2 }, wall_ms: 600000 },
  };
  return r;
}

test('a v3 record with the model figures of hil fuzz matches; a v2 record without them still does', () => {
  expect(runSchemaProblems(record())).toEqual([]);
  expect(runSchemaProblems(withModel(record()))).toEqual([]);
  const failed = withModel(record());
  failed.model!.fuzz = { ...failed.model!.fuzz!, passed: false, failure: 'model run failed: ...' };
  expect(runSchemaProblems(failed)).toEqual([]);
});

describe('malformed records are refused with a path', () => {
  const ROWS: Array<[string, (r: RunRecord) => void, RegExp]> = [
    ['an older schema name', (r) => void ((r as { schema: string }).schema = 'cell-hil.run.v1'), /^\/schema/],
    ['model figures without their commands', (r) => void delete (withModel(r).model!.fuzz as Partial<ModelFuzzFigures>).commands, /^\/model\/fuzz/],
    ['a transition reached zero times', (r) => void (withModel(r).model!.fuzz!.per_transition['transition:x'] = 0), /^\/model\/fuzz\/per_transition/],
    ['an unknown clock', (r) => void ((withModel(r).model!.fuzz as { clock: string }).clock = 'fast'), /^\/model\/fuzz\/clock/],
    ['a field of the model section nobody reads', (r) => void ((withModel(r).model as Record<string, unknown>).runs = 1), /^\/model/],
    ['an unknown test state', (r) => void ((r.tests[0] as { state: string }).state = 'flaky'), /^\/tests\/0\/state/],
    ['a measurement judged without a limit', (r) => void delete r.tests[0]!.evidence!.measurements[0]!.limit, /^\/tests\/0\/evidence\/measurements\/0/],
    ['an at_most limit without its number', (r) => void delete r.tests[0]!.evidence!.measurements[0]!.limit!.hi, /limit/],
    ['a limit without its source', (r) => void ((r.tests[0]!.evidence!.measurements[0]!.limit as { source: string }).source = 'guessed'), /source/],
    ['an unlimited measurement with a limit', (r) => void (r.tests[0]!.evidence!.measurements[0]!.outcome = 'unlimited'), /measurements\/0/],
    ['a field nobody reads', (r) => void ((r as unknown as Record<string, unknown>).extra = 1), /additional/],
    ['a transcript entry without its request', (r) => void delete (r.tests[0]!.evidence!.transcript!.exchanges[0] as { request?: string }).request, /exchanges\/0/],
  ];
  test.each(ROWS)('%s', (_row, mutate, path) => {
    const r = record();
    mutate(r);
    const p = runSchemaProblems(r);
    expect(p.length).toBeGreaterThan(0);
    expect(p.join('\n')).toMatch(path);
  });
});

test('an external run: a failed profile test marked informative and profile differences inside a test match; a difference without its profile id does not', () => {
  const r = record();
  r.tests.push(
    { file: 'suites/t.test.ts', project: 'conformance', name: 'p', fullName: 'd > p', state: 'failed', duration_ms: 1, covers: ['profile:x'], kind: 'profile', errors: ['e'], informative: 'differs from profile:x: e' },
    { file: 'suites/t.test.ts', project: 'conformance', name: 'c', fullName: 'd > c', state: 'passed', duration_ms: 1, covers: ['reason:x', 'profile:y'], kind: 'contract', profile_differences: [{ profile: 'profile:y', message: 'm' }] },
  );
  expect(runSchemaProblems(r)).toEqual([]);
  (r.tests[2]!.profile_differences as Array<{ profile: string; message: string }>)[0]!.profile = 'y';
  expect(runSchemaProblems(r).join('\n')).toMatch(/profile_differences/);
});
