// The verdict as a table: one row per kind of run, with the verdict, the exit status and the closing
// line's failure count the CLI, the reporter and the HTML report all derive from verdictOf.

import { describe, expect, test } from 'vitest';
import { HarnessError } from '../errors.ts';
import { OracleError } from '../oracle/errors.ts';
import type { CoverageEntry, RunTest } from './run-types.ts';
import { closingLine, coverageOf, informativeOf, testStateOf, verdictOf, type Verdict } from './verdict.ts';

const t = (state: RunTest['state'], extra: Partial<RunTest> = {}): RunTest => ({
  file: 'suites/x.test.ts',
  project: 'conformance',
  name: state,
  fullName: state,
  state,
  duration_ms: 1,
  covers: [],
  kind: 'contract',
  ...extra,
});
const OK = { ok: true, problems: [] };
const pass = t('passed');

const ROWS: Array<{ row: string; tests: RunTest[]; gate?: { ok: boolean; problems: string[] }; verdict: Verdict; failed: number; reason?: RegExp; note?: RegExp }> = [
  { row: 'all passed', tests: [pass, pass], verdict: 'PASS', failed: 0 },
  { row: 'a failure', tests: [pass, t('failed')], verdict: 'FAIL', failed: 1, reason: /1 test failed/ },
  { row: 'an expected failure', tests: [pass, t('failed', { expected_failure: 'known' })], verdict: 'PASS', failed: 0, note: /1 expected failure/ },
  { row: 'an expected error', tests: [pass, t('errored', { expected_failure: 'known' })], verdict: 'PASS', failed: 0, note: /1 expected failure/ },
  { row: 'an unexpected pass', tests: [pass, t('passed', { unexpected_pass: true })], verdict: 'PASS', failed: 0, note: /1 unexpected pass:/ },
  { row: 'an error', tests: [pass, t('errored')], verdict: 'ERROR', failed: 1, reason: /1 test errored/ },
  { row: 'a failure and an error: the failure decides', tests: [pass, t('errored'), t('failed')], verdict: 'FAIL', failed: 2, reason: /errored/ },
  { row: 'skipped with a reason', tests: [pass, t('skipped', { skip_reason: 'target external cannot inject faults' })], verdict: 'PASS', failed: 0 },
  { row: 'skipped without a reason', tests: [pass, t('skipped')], verdict: 'ERROR', failed: 1, reason: /1 test skipped without a stated reason/ },
  { row: 'skipped with a blank reason', tests: [pass, t('skipped', { skip_reason: ' ' })], verdict: 'ERROR', failed: 1, reason: /without a stated reason/ },
  { row: 'gate failure', tests: [pass], gate: { ok: false, problems: ['reason:x has no covering test and is not pending'] }, verdict: 'ERROR', failed: 1, reason: /traceability gate failed \(1 problem\)/ },
  { row: 'gate failure and a failure', tests: [pass, t('failed')], gate: { ok: false, problems: ['p'] }, verdict: 'FAIL', failed: 1, reason: /gate/ },
  { row: 'an informative profile difference (a failed profile test on another target)', tests: [pass, t('failed', { kind: 'profile', informative: 'differs from profile:x' })], verdict: 'PASS', failed: 0, note: /1 profile difference \(1 profile test failed, 0 profile checks/ },
  { row: 'profile checks inside a passing contract test', tests: [pass, t('passed', { profile_differences: [{ profile: 'profile:a', message: 'm' }, { profile: 'profile:b', message: 'n' }] })], verdict: 'PASS', failed: 0, note: /2 profile differences \(0 profile tests failed, 2 profile checks/ },
  { row: 'a failed profile test on the reference stack', tests: [pass, t('failed', { kind: 'profile' })], verdict: 'FAIL', failed: 1, reason: /1 test failed/ },
  { row: 'nothing recorded', tests: [], verdict: 'ERROR', failed: 1, reason: /no test was recorded/ },
  { row: 'everything skipped', tests: [t('skipped', { skip_reason: 'no motion' })], verdict: 'ERROR', failed: 1, reason: /no test passed/ },
];

const meas = (name: string, value: number, hi: number) => ({ name, unit: 'us', value, limit: { kind: 'at_most' as const, hi, source: 'configured' as const, ref: 'max_cycle_lateness_ns' }, outcome: value <= hi ? ('pass' as const) : ('fail' as const) });

describe('whose figures: the run measurements and the nightly soak', () => {
  const late = { measurements: [meas('cycle_lateness_p99', 3981, 500)] };
  test('on the sim target a cycle lateness outside its limit is the host\'s figure: a note, the verdict PASS', () => {
    const v = verdictOf({ tests: [pass], gate: OK, run_measurements: late, target: { name: 'sim' } });
    expect(v.verdict).toBe('PASS');
    expect(v.notes.join('\n')).toMatch(/^host figure outside its limit \(the reference stack's core on the harness's own host, not a verdict on the target\): cycle_lateness_p99 = 3981 us/m);
  });
  test('on a rig the same figure is the target\'s: FAIL, with the limit in the reasons', () => {
    const v = verdictOf({ tests: [pass], gate: OK, run_measurements: late, target: { name: 'rig' } });
    expect(v.verdict).toBe('FAIL');
    expect(v.reasons[0]).toMatch(/^the target's run measurement outside its limit: cycle_lateness_p99 = 3981 us, limit <= 500/);
    expect(closingLine(v)).toBe('total: 1 passed, 1 failed, 0 errored, 0 skipped');
  });
  test('a rig rehearsal over the fake master runs the core on the harness\'s host: the host\'s figure, a note', () => {
    const v = verdictOf({ tests: [pass], gate: OK, run_measurements: late, target: { name: 'rig', driver: 'ethercat-fake' } });
    expect(v.verdict).toBe('PASS');
    expect(v.notes.join('\n')).toMatch(/^host figure outside its limit .*cycle_lateness_p99 = 3981 us/m);
    expect(verdictOf({ tests: [pass], gate: OK, run_measurements: late, target: { name: 'rig', driver: 'ethercat' } }).verdict).toBe('FAIL');
  });
  const refused = { name: 'soak_renewals_refused', unit: 'requests', value: 170, limit: { kind: 'equals' as const, lo: 0, source: 'documented' as const, ref: 'document 1 part 3' }, outcome: 'fail' as const };
  const first = { at_s: 12.3, status: 409, error: 'expired: the lease of this session expired' };
  test('a soak that broke a limit makes the run FAIL, with its figures and its first refusal', () => {
    const v = verdictOf({ tests: [pass], gate: OK, soak: { seconds: 60, measurements: [refused], first_refusal: first } });
    expect(v.verdict).toBe('FAIL');
    expect(v.reasons[0]).toBe('the soak (60 s) broke a limit: soak_renewals_refused = 170 requests, limit == 0 (documented: document 1 part 3); first refusal 12.3 s into the soak: 409 expired: the lease of this session expired');
  });
  test('a soak whose refusals were the host\'s doing is ERROR with the figures, not FAIL', () => {
    const v = verdictOf({ tests: [pass], gate: OK, soak: { seconds: 60, measurements: [refused], first_refusal: first, host_too_slow: 'renewal sent 900 ms after the last accepted one' } });
    expect(v.verdict).toBe('ERROR');
    expect(v.reasons[0]).toMatch(/HIL_ERR_HOST_TOO_SLOW: renewal sent 900 ms after the last accepted one/);
  });
  test('a soak within its limits leaves the verdict alone', () => {
    expect(verdictOf({ tests: [pass], gate: OK, soak: { seconds: 60, measurements: [{ ...refused, value: 0, outcome: 'pass' }] } }).verdict).toBe('PASS');
  });
});

describe('informativeOf', () => {
  const failedProfile = { kind: 'profile' as const, state: 'failed' as const, covers: ['profile:envelope.refusal_operation', 'reason:x'], errors: ['expected "frob" to be "unknown"\n  at ...'] };
  test('a failed profile test on an external target is informative, naming the decision and the first line', () => {
    expect(informativeOf(failedProfile, 'external')).toBe('differs from profile:envelope.refusal_operation: expected "frob" to be "unknown"');
  });
  test.each(['sim', 'replay', 'rig'])('on the reference stack (%s) it is a failure', (name) => {
    expect(informativeOf(failedProfile, name)).toBeUndefined();
  });
  test('a contract test, an errored profile test and a passing one are never informative', () => {
    expect(informativeOf({ ...failedProfile, kind: 'contract' }, 'external')).toBeUndefined();
    expect(informativeOf({ ...failedProfile, state: 'errored' }, 'external')).toBeUndefined();
    expect(informativeOf({ ...failedProfile, state: 'passed' }, 'external')).toBeUndefined();
  });
});

describe('verdictOf', () => {
  test.each(ROWS)('$row: $verdict', ({ tests, gate, verdict, failed, reason, note }) => {
    const v = verdictOf({ tests, gate: gate ?? OK });
    expect(v.verdict).toBe(verdict);
    expect(v.exitCode).toBe(verdict === 'PASS' ? 0 : 1);
    expect(v.reasons.length > 0).toBe(verdict !== 'PASS');
    if (reason) expect(v.reasons.join('\n')).toMatch(reason);
    if (note) expect(v.notes.join('\n')).toMatch(note);
    // The closing line says "0 failed, 0 errored" exactly when the exit status is 0, each test counted once.
    const m = /^total: (\d+) passed, (\d+) failed, (\d+) errored, (\d+) skipped$/.exec(closingLine(v))!;
    expect(Number(m[2]) + Number(m[3])).toBe(failed);
    expect(Number(m[2])).toBe(verdict === 'FAIL' ? Math.max(1, v.counts.failed) : 0);
  });
});

const cov = (id: string, family: string, status: CoverageEntry['status'], outcome?: CoverageEntry['outcome']): CoverageEntry => ({
  id,
  family,
  doc: 1,
  section: 's',
  title: id,
  status,
  tests: status === 'covered' ? ['t'] : [],
  ...(outcome ? { outcome } : { reason: 'later' }),
});

test('coverage counts documented items verified by a passing test; profile decisions apart', () => {
  const entries = [
    cov('reason:a', 'reason', 'covered', 'passed'),
    cov('reason:b', 'reason', 'covered', 'failed'),
    cov('reason:c', 'reason', 'covered', 'skipped'),
    cov('reason:d', 'reason', 'covered', 'not_run'),
    cov('reason:e', 'reason', 'pending'),
    cov('reason:f', 'reason', 'covered', 'informative'),
    cov('profile:p', 'profile', 'covered', 'passed'),
    cov('profile:q', 'profile', 'pending'),
  ];
  expect(coverageOf(entries)).toEqual({ documented: 6, verified: 1, failing: 1, differing: 1, unverified: 2, pending: 1, profileVerified: 1, profileTotal: 2, complete: false });
  const v = verdictOf({ tests: [pass], gate: OK, coverage: entries });
  expect(v.headline).toBe('PASS — 1 of 6 documented items covered');
  expect(v.completeness).toBe('partial: of the documented items, 1 with no test in this run, 1 with a failing test, 1 whose only tests that ran answered a profile decision otherwise (informative), 2 whose tests skipped or did not run');
  const all = verdictOf({ tests: [pass], gate: OK, coverage: [cov('reason:a', 'reason', 'covered', 'passed'), cov('profile:q', 'profile', 'pending')] });
  expect(all.coverage.complete).toBe(true);
  expect(all.completeness).toMatch(/^complete/);
  expect(coverageOf([]).complete).toBe(false);
});

describe('testStateOf: FAIL or ERROR by the class of the error', () => {
  const assertion = { name: 'AssertionError', message: 'expected 1 to be 2', showDiff: true, actual: 1, expected: 2 };
  const ROWS2: Array<{ row: string; errors: unknown[]; state: RunTest['state'] }> = [
    { row: 'an assertion (serialized)', errors: [assertion], state: 'failed' },
    { row: 'an oracle error: the target sent a malformed reply', errors: [new OracleError('reply_not_json', 'x')], state: 'failed' },
    { row: 'an oracle error, serialized', errors: [{ name: 'OracleError', code: 'reply_not_json', verdict: 'fail' }], state: 'failed' },
    { row: 'a transport failure: the target dropped the connection', errors: [new HarnessError('HIL_ERR_TRANSPORT', 'x')], state: 'failed' },
    { row: 'a refusal the target owed an answer', errors: [{ code: 'HIL_ERR_TARGET_REFUSED' }], state: 'failed' },
    { row: 'the stack did not start', errors: [new HarnessError('HIL_ERR_TARGET_START', 'x')], state: 'errored' },
    { row: 'the stack did not start, serialized (no verdict field)', errors: [{ code: 'HIL_ERR_TARGET_START' }], state: 'errored' },
    { row: 'a malformed variant', errors: [new HarnessError('HIL_ERR_VARIANT_INVALID', 'x')], state: 'errored' },
    { row: 'a TypeError in a suite', errors: [new TypeError('x is undefined')], state: 'errored' },
    { row: 'a test timeout', errors: [{ name: 'Error', message: 'Test timed out in 100ms.' }], state: 'errored' },
    { row: 'a harness error and an assertion: the assertion decides', errors: [new HarnessError('HIL_ERR_TEST_CHANNEL', 'x'), assertion], state: 'failed' },
    { row: 'failed with no error recorded', errors: [], state: 'failed' },
  ];
  test.each(ROWS2)('$row: $state', ({ errors, state }) => {
    expect(testStateOf('failed', errors)).toBe(state);
  });
  test('a replay that could not hold the recorded order: errored whatever else failed, passed and skipped kept', () => {
    expect(testStateOf('failed', [assertion], { replayUnheld: 'status_read at cycle 33' })).toBe('errored');
    expect(testStateOf('failed', [new HarnessError('HIL_ERR_REPLAY_DIVERGED', 'x'), new HarnessError('HIL_ERR_REPLAY_UNHELD', 'y')], { replayUnheld: 'y' })).toBe('errored');
    // without the mark a divergence is the target's
    expect(testStateOf('failed', [new HarnessError('HIL_ERR_REPLAY_DIVERGED', 'x')])).toBe('failed');
    expect(testStateOf('passed', [], { replayUnheld: 'y' })).toBe('passed');
    expect(testStateOf('skipped', [], { replayUnheld: 'y' })).toBe('skipped');
  });
  test("the harness's own equipment failed under it (a rig's bench box opened its chain on its own): errored whatever failed", () => {
    expect(testStateOf('failed', [assertion], { equipmentLoss: "the bench box's heartbeat watchdog opened the E-stop chain" })).toBe('errored');
    expect(testStateOf('failed', [new HarnessError('HIL_ERR_TARGET_REFUSED', 'safety chain open')], { equipmentLoss: 'x' })).toBe('errored');
    expect(testStateOf('passed', [], { equipmentLoss: 'x' })).toBe('passed');
  });
  test('passed and skipped are kept', () => {
    expect(testStateOf('passed', [])).toBe('passed');
    expect(testStateOf('skipped', [])).toBe('skipped');
  });
});

test('on the sim target a run measurement outside its limit (the host\'s figure) and a stale expectation are notes: the verdict stays what the tests say', () => {
  const v = verdictOf({
    tests: [pass],
    gate: OK,
    run_measurements: {
      measurements: [
        { name: 'cycle_lateness_max', unit: 'us', value: 812, limit: { kind: 'at_most', hi: 500, source: 'configured', ref: 'max_cycle_lateness_ns' }, outcome: 'fail' },
        { name: 'cycle_lateness_p50', unit: 'us', value: 30, limit: { kind: 'at_most', hi: 500, source: 'configured', ref: 'max_cycle_lateness_ns' }, outcome: 'pass' },
      ],
    },
    stale_expectations: ['suites/x.test.ts > gone'],
  });
  expect(v.verdict).toBe('PASS');
  expect(v.notes).toEqual([
    "host figure outside its limit (the reference stack's core on the harness's own host, not a verdict on the target): cycle_lateness_max = 812 us, limit <= 500 (configured: max_cycle_lateness_ns)",
    "1 expectation in the target's expectation file names no test of this run (stale): hil expectations update",
  ]);
});
