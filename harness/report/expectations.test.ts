// Expectations as data (harness/report/expectations.ts): the set of outcomes a rule allows, its conditions,
// the loud refusal of a malformed file, and `hil expectations update` writing the outcome seen (an ERROR as
// ERROR, never as a failure); and through the reporter, an outcome outside its set keeping its own class.

import { describe, expect, test } from 'vitest';
import { expectationProblems, judge, outcomeOf, REASON_TO_FILL, ruleFor, staleExpectations, updateExpectations, type ExpectationFile } from './expectations.ts';
import type { RunRecord, RunTest } from './run-types.ts';
import { verdictOf } from './verdict.ts';

const t = (name: string, state: RunTest['state'], extra: Partial<RunTest> = {}): RunTest => ({ file: 'suites/t.test.ts', project: 'conformance', name, fullName: `d > ${name}`, state, duration_ms: 1, covers: [], kind: 'contract', ...extra });
const run = (tests: RunTest[]): RunRecord => ({ tests, selection: { filters: [] } }) as unknown as RunRecord;
const SIM = { target: 'sim', driver: 'ethercat-fake' };

describe('rules and conditions', () => {
  const e: ExpectationFile[string] = [
    { expected: ['FAIL'], reason: 'the fake master cannot see it', when: { driver: 'ethercat-fake' } },
    { expected: ['SKIP', 'PASS'], reason: 'two axes only', when: { machine: 'bench-two-axis' } },
  ];
  test('the first rule whose conditions all hold applies; none: no rule (PASS and SKIP allowed)', () => {
    expect(ruleFor(e, SIM)?.reason).toBe('the fake master cannot see it');
    expect(ruleFor(e, { target: 'sim', machine: 'bench-two-axis' })?.reason).toBe('two axes only');
    expect(ruleFor(e, { target: 'sim', driver: 'sim' })).toBeUndefined();
    expect(ruleFor({ expected: ['FAIL'], reason: 'r', when: { target: 'rig', machine_sha256: 'ab' } }, { target: 'rig', machine_sha256: 'ac' })).toBeUndefined();
  });
  test('outcomes: a test timeout is TIMEOUT, other errors ERROR', () => {
    expect(outcomeOf(t('a', 'errored', { errors: ['Error: Test timed out in 60000ms.\nIf this is a long-running test, ...'] }))).toBe('TIMEOUT');
    expect(outcomeOf(t('a', 'errored', { errors: ['TypeError: x is not a function'] }))).toBe('ERROR');
    expect(outcomeOf(t('a', 'failed'))).toBe('FAIL');
    expect(outcomeOf(t('a', 'skipped'))).toBe('SKIP');
  });
  test('an ERROR where FAIL is expected is outside the set; a FAIL inside it', () => {
    const rule = ruleFor(e, SIM);
    expect(judge(t('a', 'errored', { errors: ['TypeError: planted'] }), rule)).toMatchObject({ outcome: 'ERROR', expected: false });
    expect(judge(t('a', 'failed'), rule)).toMatchObject({ outcome: 'FAIL', expected: true });
    expect(judge(t('a', 'passed'), rule)).toMatchObject({ outcome: 'PASS', expected: false });
  });
  test('a malformed file is refused with what is wrong, the older {"expected": "fail"} form included', () => {
    expect(expectationProblems({ x: { expected: 'fail', reason: 'r' } })[0]).toMatch(/"expected" is a list of outcomes .*the older \{"expected": "fail"\} form is \["FAIL"\]/);
    expect(expectationProblems({ x: { expected: ['BROKEN'], reason: 'r' } })[0]).toMatch(/non-empty list of PASS, FAIL, ERROR, TIMEOUT, SKIP/);
    expect(expectationProblems({ x: { expected: ['FAIL'], reason: ' ' } })).toEqual(['x: "reason" must say why']);
    expect(expectationProblems({ x: { expected: ['FAIL'], reason: 'r', when: { os: 'linux' } } })[0]).toMatch(/condition os must be one of target, driver, machine, machine_sha256/);
    expect(expectationProblems({ x: [] })).toEqual(['x: an empty list of rules']);
    expect(expectationProblems({ x: [{ expected: ['FAIL', 'ERROR'], reason: 'r', when: { driver: 'sim' } }, { expected: ['PASS'], reason: 'r' }] })).toEqual([]);
  });
});

describe('hil expectations update', () => {
  const file: ExpectationFile = {
    'suites/t.test.ts > d > still failing': { expected: ['FAIL'], reason: 'written by a person' },
    'suites/t.test.ts > d > now passes': { expected: ['FAIL'], reason: 'was broken' },
    'suites/t.test.ts > d > broke the harness': { expected: ['FAIL'], reason: 'known defect' },
    'suites/t.test.ts > d > renamed away': { expected: ['FAIL'], reason: 'old' },
    'suites/t.test.ts > d > other driver': { expected: ['FAIL'], reason: 'only on sim', when: { driver: 'sim' } },
  };
  const r = run([
    t('still failing', 'failed'),
    t('now passes', 'passed'),
    t('broke the harness', 'errored', { errors: ['TypeError: planted'] }),
    t('new error', 'errored', { errors: ['HIL_ERR_TARGET_START: no socket'] }),
    t('new failure', 'failed'),
    t('other driver', 'failed'),
    t('fine', 'passed'),
  ]);

  test('writes the outcome seen: an ERROR is written as ERROR (never as a failure), a FAIL as FAIL; reasons kept, fixed and stale go', () => {
    const u = updateExpectations(r, file, SIM);
    expect(u.kept).toEqual(['suites/t.test.ts > d > still failing']);
    expect(u.widened).toEqual(['suites/t.test.ts > d > broke the harness']);
    expect(u.fixed).toEqual(['suites/t.test.ts > d > now passes']);
    expect(u.stale).toEqual(['suites/t.test.ts > d > renamed away']);
    expect(u.added).toEqual(['suites/t.test.ts > d > new error', 'suites/t.test.ts > d > new failure', 'suites/t.test.ts > d > other driver']);
    expect(u.next).toEqual({
      'suites/t.test.ts > d > broke the harness': { expected: ['FAIL', 'ERROR'], reason: 'known defect' },
      'suites/t.test.ts > d > new error': { expected: ['ERROR'], reason: REASON_TO_FILL },
      'suites/t.test.ts > d > new failure': { expected: ['FAIL'], reason: REASON_TO_FILL },
      // The rule for the sim driver is kept; this run's context (ethercat-fake) gets one of its own.
      'suites/t.test.ts > d > other driver': [
        { expected: ['FAIL'], reason: 'only on sim', when: { driver: 'sim' } },
        { expected: ['FAIL'], reason: REASON_TO_FILL },
      ],
      'suites/t.test.ts > d > still failing': { expected: ['FAIL'], reason: 'written by a person' },
    });
    expect(expectationProblems(u.next)).toEqual([]);
    expect(staleExpectations(r, file)).toEqual(['suites/t.test.ts > d > renamed away']);
  });

  test('a partial run (a filter or a shard) cannot tell stale: the entry stays', () => {
    for (const selection of [{ filters: ['suites/t'] }, { filters: [], shard: '1/4' }, { filters: [], grep: 'x' }]) {
      const partial = { ...r, selection };
      expect(updateExpectations(partial, file, SIM).stale).toEqual([]);
      expect(updateExpectations(partial, file, SIM).next['suites/t.test.ts > d > renamed away']).toEqual(file['suites/t.test.ts > d > renamed away']);
      expect(staleExpectations(partial, file)).toEqual([]);
    }
  });
});

describe('the verdict of a run whose listed failure errored', () => {
  test('an ERROR inside a test expected to FAIL leaves the run ERROR, not PASS', () => {
    const rule = ruleFor(file1['suites/t.test.ts > d > known'], SIM)!;
    const errored = t('known', 'errored', { errors: ['TypeError: planted harness fault'] });
    const j = judge(errored, rule);
    // The reporter books an expected failure only when the outcome is inside the set (harness/report/reporter.ts).
    const booked: RunTest = { ...errored, expected_outcomes: rule.expected, ...(j.expected ? { expected_failure: rule.reason } : {}) };
    const v = verdictOf({ tests: [t('fine', 'passed'), booked], gate: { ok: true, problems: [] } });
    expect(v.verdict).toBe('ERROR');
    expect(v.counts.expectedFailures).toBe(0);
    expect(v.reasons[0]).toMatch(/^1 test errored/);
  });
});
const file1: ExpectationFile = { 'suites/t.test.ts > d > known': { expected: ['FAIL'], reason: 'known defect' } };
