// The nightly history (harness/history.ts): flaky only when nothing that explains a change changed, the
// first failing night with what changed that night, trends with their limits, and the history rebuilt
// from the nights' run records when a night is missing from it.

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { analyse, backfillHistory, compareNights, historySection, historyText, nightEntry, readHistory, recordNight, type NightEntry, type NightIdentity } from './history.ts';
import type { RunRecord, TestState } from './report/run-types.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const ID: NightIdentity = { git_revision: 'a'.repeat(40), package_version: '0.1.0', machine_sha256: 'm'.repeat(64), configuration_sha256: 'c'.repeat(64), deployment_sha256: 'd'.repeat(64), target: 'sim', driver: 'sim', node: 'v20', hostname: 'h' };
const limit = { kind: 'at_most' as const, hi: 500, source: 'configured' as const, ref: 'max_cycle_lateness_ns' };
const night = (name: string, tests: Record<string, TestState>, over: Partial<NightIdentity> = {}, p99 = 100): NightEntry => ({
  schema: 'cell-hil.night.v1',
  night: name,
  started_at: `${name.slice(0, 10)}T02:00:00Z`,
  verdict: Object.values(tests).some((s) => s === 'failed') ? 'FAIL' : 'PASS',
  identity: { ...ID, ...over },
  tests,
  measurements: { cycle_lateness_p99: { value: p99, unit: 'us', limit, outcome: p99 > 500 ? 'fail' : 'pass' } },
  soak: { stack_rss_max: { value: 80 + p99 / 100, unit: 'MB', outcome: 'unlimited' } },
});

test('a change of outcome is flaky only when revision, digests, target and driver stayed the same', () => {
  const a = analyse([
    night('2026-11-01', { 'f > steady': 'passed', 'f > flaky': 'passed', 'f > code': 'passed', 'f > machine': 'passed', 'f > skip': 'passed' }),
    night('2026-11-02', { 'f > steady': 'passed', 'f > flaky': 'failed', 'f > code': 'passed', 'f > machine': 'passed', 'f > skip': 'skipped' }),
    night('2026-11-03', { 'f > steady': 'passed', 'f > flaky': 'passed', 'f > code': 'failed', 'f > machine': 'passed', 'f > skip': 'passed' }, { git_revision: 'b'.repeat(40) }),
    night('2026-11-04', { 'f > steady': 'passed', 'f > flaky': 'passed', 'f > code': 'failed', 'f > machine': 'errored', 'f > skip': 'passed' }, { git_revision: 'b'.repeat(40), configuration_sha256: 'x'.repeat(64) }),
  ]);
  // flaky: failed on the 2nd night with nothing changed (its pass on the 3rd came with a new revision).
  expect(a.flaky.map((f) => [f.test, f.flips])).toEqual([['f > flaky', ['2026-11-02']]]);
  expect(a.flaky[0]!.outcomes.map((o) => o.state)).toEqual(['passed', 'failed', 'passed', 'passed']);
  // A host name or node version change does not explain a change of outcome: still flaky.
  const host = analyse([night('2026-11-01', { t: 'passed' }), night('2026-11-02', { t: 'failed' }, { hostname: 'other', node: 'v22' })]);
  expect(host.flaky.map((f) => f.test)).toEqual(['t']);
  // failing now: first failing night and what changed that night
  expect(a.failing).toEqual([
    { test: 'f > code', state: 'failed', since: '2026-11-03', nights: 2, before: '2026-11-02', changed: [`git_revision ${'a'.repeat(40)} -> ${'b'.repeat(40)}`] },
    { test: 'f > machine', state: 'errored', since: '2026-11-04', nights: 1, before: '2026-11-03', changed: [`configuration_sha256 ${'c'.repeat(64)} -> ${'x'.repeat(64)}`] },
  ]);
});

test('the first failing night looks past nights the test did not run; a failure on every night kept has no night before', () => {
  const a = analyse([night('2026-11-01', { t: 'passed' }), night('2026-11-02', { t: 'failed' }, { driver: 'ethercat-fake' }), night('2026-11-03', {}, { driver: 'ethercat-fake' }), night('2026-11-04', { t: 'failed' }, { driver: 'ethercat-fake' })]);
  expect(a.failing).toEqual([{ test: 't', state: 'failed', since: '2026-11-02', nights: 2, before: '2026-11-01', changed: ['driver sim -> ethercat-fake'] }]);
  const always = analyse([night('2026-11-01', { t: 'failed' }), night('2026-11-02', { t: 'failed' })]);
  expect(always.failing[0]).toEqual({ test: 't', state: 'failed', since: '2026-11-01', nights: 2, changed: [] });
  expect(historyText(always)).toContain('failed since 2026-11-01 (2 nights); failing on every night kept');
  // Only the last N nights count.
  expect(analyse([night('2026-11-01', { t: 'passed' }), night('2026-11-02', { t: 'failed' }), night('2026-11-03', { t: 'failed' })], 2).failing[0]!.since).toBe('2026-11-02');
  expect(analyse([night('2026-11-01', { t: 'passed' }), night('2026-11-02', { t: 'failed' }), night('2026-11-03', { t: 'failed' })], 2).failing[0]!.before).toBeUndefined();
});

test('trends: one point per night with its outcome, the limit kept; the report draws them with the limit and the marks', () => {
  const a = analyse([night('2026-11-01', { t: 'passed' }, {}, 120), night('2026-11-02', { t: 'failed' }, {}, 900), night('2026-11-03', { t: 'passed' }, {}, 110)]);
  const p99 = a.trends.find((t) => t.name === 'cycle_lateness_p99')!;
  expect(p99).toMatchObject({ source: 'run', unit: 'us', limit });
  expect(p99.points).toEqual([
    { night: '2026-11-01', value: 120, outcome: 'pass' },
    { night: '2026-11-02', value: 900, outcome: 'fail' },
    { night: '2026-11-03', value: 110, outcome: 'pass' },
  ]);
  expect(a.trends.find((t) => t.source === 'soak')!.name).toBe('stack_rss_max');
  expect(historyText(a)).toContain('run cycle_lateness_p99 (us): 120 900* 110  limit <= 500 (configured: max_cycle_lateness_ns)');
  const html = historySection(a);
  expect(html.match(/data-plot="trend"/g)?.length).toBe(2);
  expect(html).toContain('class="limit"');
  expect(html.match(/<circle class="pt outside"/g)?.length).toBe(1);
  expect(html).toContain('<span class="tag flaky">FLAKY</span> t');
});

test('the history file: one line per night in night order, a night replaced, a bad line reported; nights missing are read from their run records', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hil-history-'));
  dirs.push(dir);
  recordNight(dir, night('2026-11-02', { t: 'passed' }));
  recordNight(dir, night('2026-11-01-2', { t: 'passed' }));
  recordNight(dir, night('2026-11-02', { t: 'failed' }));
  expect(readHistory(dir).map((e) => [e.night, e.tests.t])).toEqual([['2026-11-01-2', 'passed'], ['2026-11-02', 'failed']]);
  expect(readFileSync(join(dir, 'history.jsonl'), 'utf8').trim().split('\n').length).toBe(2);
  writeFileSync(join(dir, 'history.jsonl'), `${readFileSync(join(dir, 'history.jsonl'), 'utf8')}{"broken"\n`);
  const warnings: string[] = [];
  expect(readHistory(dir, warnings).length).toBe(2);
  expect(warnings[0]).toMatch(/history\.jsonl line 3: /);
  expect([compareNights('2026-11-01', '2026-11-01-2'), compareNights('2026-11-01-10', '2026-11-01-9'), compareNights('2026-10-31-3', '2026-11-01')]).toEqual([-1, 1, -1]);
  // A night directory with a run record and no line: read from run.json (and soak.json).
  const run = { environment: { ...ID, git_revision: 'e'.repeat(40) }, target: { name: 'sim', driver: 'sim' }, started_at: '2026-11-03T02:00:00Z', tests: [{ file: 'suites/x.test.ts', fullName: 'a > b', state: 'failed', kind: 'contract', covers: [] }], run_measurements: { measurements: [{ name: 'home_duration_max', unit: 'ms', value: 614, outcome: 'pass', limit: { ...limit, hi: 60000 } }] }, coverage: [], gate: { ok: true, problems: [] }, summary: { passed: 0, failed: 1, skipped: 0, errored: 0, duration_ms: 1 } } as unknown as RunRecord;
  mkdirSync(join(dir, '2026-11-03', 'run'), { recursive: true });
  writeFileSync(join(dir, '2026-11-03', 'run', 'run.json'), '{}'); // read through the reader below
  writeFileSync(join(dir, '2026-11-03', 'soak.json'), JSON.stringify({ seconds: 6, measurements: [{ name: 'renewals_refused', unit: 'renewals', value: 0, outcome: 'pass' }] }));
  const read: string[] = [];
  const all = await backfillHistory(dir, async (f) => (read.push(f), run), [], false);
  expect(read).toEqual([join(dir, '2026-11-03', 'run', 'run.json')]);
  expect(all.at(-1)).toMatchObject({ night: '2026-11-03', verdict: 'FAIL', tests: { 'suites/x.test.ts > a > b': 'failed' }, measurements: { home_duration_max: { value: 614 } }, soak: { renewals_refused: { value: 0 } } });
  expect(readHistory(dir).length).toBe(2); // not written when asked not to
  await backfillHistory(dir, async () => run);
  expect(readHistory(dir).map((e) => e.night)).toEqual(['2026-11-01-2', '2026-11-02', '2026-11-03']);
  expect(nightEntry('n', run).identity.git_revision).toBe('e'.repeat(40));
});

test('hil history DIR prints what the nightly report shows, as text and as JSON; a missing directory is a usage error', { timeout: 240_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'hil-history-cli-'));
  dirs.push(dir);
  const nights = [night('2026-11-01', { 'f > a': 'passed', 'f > b': 'passed' }), night('2026-11-02', { 'f > a': 'failed', 'f > b': 'passed' }), night('2026-11-03', { 'f > a': 'passed', 'f > b': 'failed' }, { git_revision: 'b'.repeat(40) })];
  for (const n of nights) recordNight(dir, n);
  const HIL = fileURLToPath(new URL('./bin/hil.mjs', import.meta.url));
  const hil = (...args: string[]) => spawnSync(process.execPath, [HIL, 'history', ...args], { encoding: 'utf8', timeout: 120_000 });
  const text = hil(dir);
  expect(text.status, text.stderr).toBe(0);
  expect(text.stdout).toBe(historyText(analyse(nights)));
  expect(text.stdout).toContain('FLAKY f > a');
  expect(text.stdout).toContain(`failed since 2026-11-03 (1 night); changed since 2026-11-02: git_revision ${'a'.repeat(40)} -> ${'b'.repeat(40)}`);
  const json = JSON.parse(hil(dir, '--json').stdout) as { failing: unknown; flaky: unknown; nights: Array<{ night: string }> };
  const a = analyse(nights);
  expect(json.failing).toEqual(a.failing);
  expect(json.flaky).toEqual(a.flaky);
  expect(json.nights.map((n) => n.night)).toEqual(['2026-11-01', '2026-11-02', '2026-11-03']);
  expect(JSON.parse(hil(dir, '--json', '--nights', '1').stdout).nights.length).toBe(1);
  const missing = hil(join(dir, 'nope'));
  expect(missing.status).toBe(2);
  expect(missing.stderr).toContain('no such directory');
});
