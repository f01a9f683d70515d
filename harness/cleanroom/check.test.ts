// The clean-room check's retry of tests the harness could not judge on a loaded host: only those take their
// second outcome, and the check passes only when none of them failed again.

import { expect, test } from 'vitest';
import type { RunRecord } from '../report/run-types.ts';
import { mergeRetry } from './check.ts';

type T = RunRecord['tests'][number];
const t = (name: string, state: string, extra: Partial<T> = {}): T => ({ file: 'suites/x.test.ts', project: 'conformance', name, fullName: name, state, duration_ms: 1, covers: [], kind: 'contract', ...extra }) as T;
const run = (...tests: T[]) => ({ tests }) as RunRecord;

test('a retried test that passes replaces its ERROR; a profile difference rerun alongside keeps its first outcome', () => {
  const slow = t('slow', 'errored', { host_too_slow: 'figures' });
  const diff = t('diff', 'failed', { kind: 'profile', informative: 'differs from profile:x' } as Partial<T>);
  const first = run(t('ok', 'passed'), slow, diff);
  // The rerun also ran the profile difference, which this time ended in an ERROR of its own.
  const again = run(t('slow', 'passed'), t('diff', 'errored', { host_too_slow: 'figures' }));
  const m = mergeRetry(first, again, [slow]);
  expect(m.record.tests.map((x) => [x.name, x.state])).toEqual([['ok', 'passed'], ['slow', 'passed'], ['diff', 'failed']]);
  expect(m.record.tests[2]).toBe(diff);
  expect(m.passed).toBe(true);
});

test('a retried test that errs or fails again, or did not run again, leaves the check failing', () => {
  const slow = t('slow', 'errored', { host_too_slow: 'figures' });
  const first = run(t('ok', 'passed'), slow);
  expect(mergeRetry(first, run(t('slow', 'errored', { host_too_slow: 'again' })), [slow]).passed).toBe(false);
  expect(mergeRetry(first, run(t('slow', 'failed')), [slow]).passed).toBe(false);
  expect(mergeRetry(first, run(), [slow]).passed).toBe(false);
  expect(mergeRetry(first, run(t('slow', 'passed')), [slow]).passed).toBe(true);
});
