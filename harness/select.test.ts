// Selections by what failed and by what is documented (harness/select.ts): exact names, nothing more.

import { expect, test } from 'vitest';
import { coversMatcher, lastFailed, selectCovering, selectionOf } from './select.ts';
import type { RunTest } from './report/run-types.ts';

const t = (file: string, fullName: string, state: RunTest['state'], covers: string[] = []): RunTest => ({ file, project: 'conformance', name: fullName.split(' > ').at(-1)!, fullName, state, duration_ms: 1, covers, kind: 'contract' });

test('the name pattern matches each chosen test exactly, in vitest\'s form and in the record\'s, and nothing else', () => {
  const s = selectionOf([
    { file: 'suites/a.test.ts', fullName: 'grant > renew (generation 2^32 + 1) [x]' },
    { file: 'suites/b.test.ts', fullName: 'plain' },
  ]);
  expect(s.files).toEqual(['suites/a.test.ts', 'suites/b.test.ts']);
  const re = new RegExp(s.pattern);
  expect(re.test('grant > renew (generation 2^32 + 1) [x]')).toBe(true);
  expect(re.test('grant renew (generation 2^32 + 1) [x]')).toBe(true); // vitest joins describe blocks with a space
  expect(re.test('plain')).toBe(true);
  expect(re.test('plain too')).toBe(false);
  expect(re.test('a plain')).toBe(false);
  expect(re.test('grant > renew (generation 2^32 + 1) [y]')).toBe(false);
  expect(re.test('grant > renew (generation 2^32 + 11) [x]')).toBe(false);
});

test('--last-failed takes failed and errored tests, not passed or skipped ones; a file that failed whole runs whole', () => {
  expect(lastFailed({ tests: [t('a', 'x', 'passed'), t('a', 'y', 'skipped')] })).toBeUndefined();
  const s = lastFailed({ tests: [t('a', 'x', 'passed'), t('a', 'y > z', 'failed'), t('b', 'w', 'errored'), t('c', 'v', 'skipped')] })!;
  expect(s.files).toEqual(['a', 'b']);
  expect(s.tests).toEqual(['a > y > z', 'b > w']);
  const re = new RegExp(s.pattern);
  expect(['y z', 'w', 'x', 'v'].map((n) => re.test(n))).toEqual([true, true, false, false]);
  const whole = lastFailed({ tests: [t('a', 'y', 'failed'), t('b', '(file)', 'errored')] })!;
  expect(whole.files).toEqual(['a', 'b']);
  expect(whole.pattern).toBe('');
  // An unhandled error names no file: nothing to rerun from it.
  expect(lastFailed({ tests: [t('', '(unhandled error)', 'errored')] })).toBeUndefined();
});

test('--covers: an exact id, a * pattern, the items nobody covers, and an argument naming nothing', () => {
  const items = ['reason:control_session_stale', 'reason:control_already_owned', 'reason:expired', 'field:Status.state'];
  const tests = [
    { file: 's/g.test.ts', fullName: 'stale', covers: ['reason:control_session_stale'] },
    { file: 's/g.test.ts', fullName: 'owned', covers: ['reason:control_already_owned', 'field:Status.state'] },
    { file: 's/h.test.ts', fullName: 'status', covers: ['field:Status.state'] },
  ];
  const exact = selectCovering(['reason:control_session_stale'], tests, items);
  expect(exact.selection!.tests).toEqual(['s/g.test.ts > stale']);
  expect(exact.uncovered).toEqual([]);
  const star = selectCovering(['reason:*'], tests, items);
  expect(star.selection!.tests).toEqual(['s/g.test.ts > stale', 's/g.test.ts > owned']);
  expect(star.uncovered).toEqual(['reason:expired']);
  expect(star.matched[0]!.items).toEqual(['reason:control_session_stale', 'reason:control_already_owned', 'reason:expired']);
  const none = selectCovering(['reason:nope', 'field:*'], tests, items);
  expect(none.matched.map((m) => m.items.length)).toEqual([0, 1]);
  expect(none.selection!.files).toEqual(['s/g.test.ts', 's/h.test.ts']);
  expect(selectCovering(['reason:expired'], tests, items).selection).toBeUndefined();
  // * is the only wildcard: a dot or bracket in an id is literal.
  const m = coversMatcher(['limit:a.b']);
  expect(m('limit:a.b')).toBe(true);
  expect(m('limit:aXb')).toBe(false);
});
