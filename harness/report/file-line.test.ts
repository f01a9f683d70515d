// The numbers one run prints agree: the line after each file, the progress line and the closing total count a
// test the same way (an informative profile difference on another team's target is neither passed nor failed,
// a test the harness could not judge is errored), and a file is "(file errored)" only for an error no test of
// it carries. Built from vitest's reporter objects as a run hands them over, without running vitest.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import type { TestCase, TestModule } from 'vitest/node';
import { pending } from '../catalogue/pending.ts';
import { HilReporter } from './reporter.ts';
import { Progress } from './progress.ts';

const dir = mkdtempSync(join(tmpdir(), 'hil-file-line-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Fake {
  name: string;
  state: 'passed' | 'failed' | 'skipped';
  kind?: 'contract' | 'profile';
  covers?: string[];
  errors?: Array<{ message: string; name?: string; code?: string; showDiff?: boolean; actual?: string; expected?: string }>;
}

/** A module of tests as vitest's reporter API shows it (only what the reporter reads). */
function fakeModule(file: string, tests: Fake[], moduleErrors: Array<{ message: string }> = []): TestModule {
  const moduleId = join(process.cwd(), file);
  const m = {
    type: 'module',
    moduleId,
    relativeModuleId: file,
    project: { name: 'conformance' },
    errors: () => moduleErrors,
    diagnostic: () => ({ duration: 12 }),
    state: () => (moduleErrors.length || tests.some((t) => t.state === 'failed') ? 'failed' : 'passed'),
    children: { allTests: () => cases, allSuites: () => [] },
  };
  const cases = tests.map(
    (t) =>
      ({
        type: 'test',
        name: t.name,
        fullName: `d > ${t.name}`,
        module: m,
        parent: m,
        project: { name: 'conformance' },
        options: { mode: 'run' },
        result: () => ({ state: t.state, errors: t.errors ?? [], ...(t.state === 'skipped' ? { note: 'needs a second cell' } : {}) }),
        meta: () => ({ covers: t.covers ?? [], kind: t.kind ?? 'contract' }),
        diagnostic: () => ({ duration: 3 }),
      }) as unknown as TestCase,
  );
  return m as unknown as TestModule;
}

const TESTS: Fake[] = [
  { name: 'passes', state: 'passed' },
  { name: 'a profile decision answered otherwise', state: 'failed', kind: 'profile', covers: ['profile:olp.fence_labels'], errors: [{ message: "expected 'fence_required' to be 'target_fence_required'", name: 'AssertionError', showDiff: true, actual: 'fence_required', expected: 'target_fence_required' }] },
  { name: 'skips', state: 'skipped' },
];

function run(targetName: string, tests: Fake[], moduleErrors: Array<{ message: string }> = [], filters: string[] = []): { lines: string[]; progress: string; reporter: HilReporter; module: TestModule } {
  const lines: string[] = [];
  const reporter: HilReporter = new HilReporter({ command: 'hil run', reportsDir: dir, gate: false, selection: { filters }, targetName, write: (s) => lines.push(s) });
  const progress = new Progress({ tty: false, write: () => undefined, durations: {}, classify: (t) => reporter.outcomeOf(t) });
  const m = fakeModule('suites/olp/targets.test.ts', tests, moduleErrors);
  progress.start(['suites/olp/targets.test.ts']);
  for (const t of m.children.allTests()) progress.onTestCaseResult(t);
  reporter.onTestModuleEnd(m);
  return { lines, progress: progress.text(), reporter, module: m };
}

test("on another team's target a failed profile test is informative in the file line and the progress line, and the file did not error", () => {
  const { lines, progress } = run('external', TESTS);
  expect(lines[0]).toMatch(/^ok {3}suites\/olp\/targets\.test\.ts +1 passed, 0 failed, 1 expected or informative, 1 skipped {2}\d+ ms\n$/);
  expect(lines[0]).not.toContain('file errored');
  expect(progress).toBe('0 of 1 files, 1 passed, 0 failed, time left: estimating');
});

test('on the reference stack the same profile test is a failure in both lines', () => {
  const { lines, progress } = run('sim', TESTS);
  expect(lines[0]).toMatch(/^FAIL suites\/olp\/targets\.test\.ts +1 passed, 1 failed, 1 skipped/);
  expect(progress).toBe('0 of 1 files, 1 passed, 1 failed, time left: estimating');
});

test('a test the harness could not judge is errored in both lines, not failed', () => {
  const tooSlow: Fake = { name: 'too slow', state: 'failed', errors: [{ name: 'HarnessError', code: 'HIL_ERR_HOST_TOO_SLOW', message: 'HIL_ERR_HOST_TOO_SLOW: the keeper was late' }] };
  const { lines, progress } = run('sim', [TESTS[0]!, tooSlow]);
  expect(lines[0]).toMatch(/^ERR {2}suites\/olp\/targets\.test\.ts +1 passed, 0 failed, 1 errored, 0 skipped/);
  expect(progress).toBe('0 of 1 files, 1 passed, 0 failed, 1 errored, time left: estimating');
});

test('an error of the file itself (a file-level hook) is said beside an informative failure, never hidden by it', () => {
  const { lines, reporter, module } = run('external', TESTS, [{ message: 'afterAll: the stack did not stop' }]);
  expect(lines[0]).toMatch(/^ERR {2}suites\/olp\/targets\.test\.ts .*1 expected or informative.*\(file errored\)\n$/);
  expect(lines[1]).toContain('afterAll: the stack did not stop');
  // And in the run's record: the file's own error is an ERROR of the run, beside the informative difference.
  reporter.onTestRunEnd([module], []);
  const file = reporter.record!.tests.find((t) => t.name === '(file)');
  expect(file).toMatchObject({ state: 'errored', errors: ['afterAll: the stack did not stop'] });
  expect(lines.join('')).toMatch(/^verdict: ERROR/m);
});

test('the catalogue line of a filtered run counts the items it has no test for as not in its selection, a whole run as pending', () => {
  const one: Fake[] = [{ name: 'covers one item', state: 'passed', covers: ['profile:olp.fence_labels'] }];
  const onPendingList = Object.keys(pending).length;
  const filtered = run('sim', one, [], ['suites/olp/targets']);
  filtered.reporter.onTestRunEnd([filtered.module], []);
  const total = filtered.reporter.record!.coverage.length;
  const fline = filtered.lines.join('').split('\n').find((l) => l.startsWith('catalogue:'));
  expect(fline).toBe(`catalogue: 1 covered, ${onPendingList} pending, ${total - 1 - onPendingList} not in this selection (of ${total})`);

  const whole = run('sim', one);
  whole.reporter.onTestRunEnd([whole.module], []);
  const wline = whole.lines.join('').split('\n').find((l) => l.startsWith('catalogue:'));
  expect(wline).toBe(`catalogue: 1 covered, ${total - 1} pending of ${total}`);
});
