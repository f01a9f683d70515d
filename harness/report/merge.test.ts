// hil merge: four shards of a run (vitest --shard i/4, each with vitest's blob report, the harness
// reporter's run.json and Allure's results) merged give the verdict, test counts and coverage of the
// same run in one piece. The runs here are vitest runs of a few small test files written for the test
// (no stack: what is tested is the merge, through vitest's own --merge-reports and the harness reporter).

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, expect, test } from 'vitest';
import { HilReporter } from './reporter.ts';
import { mergeRuns, wholeMerge } from './merge.ts';
import { runSchemaProblems } from './run-schema.ts';
import type { RunRecord } from './run-types.ts';
import { verdictOf } from './verdict.ts';

const FILES: Record<string, string> = {
  'a.test.ts': `test('a1', { meta: { covers: ['reason:control_session_stale'], kind: 'contract' } }, () => {});\ntest('a2', () => {});`,
  'b.test.ts': `test('b1 fails', { meta: { covers: ['reason:no_grant'], kind: 'contract' } }, () => { expect(1).toBe(2); });\ntest('b2', { meta: { covers: ['reason:no_grant'], kind: 'contract' } }, () => {});`,
  'c.test.ts': `test('c1 skipped', ({ skip }) => { skip('not on this target'); });`,
  'd.test.ts': `test('d1', { meta: { covers: ['reason:grant_expired'], kind: 'contract' } }, () => {});\ntest('d2', () => {});\ntest('d3', () => {});`,
};

// The test files live in a temporary root: reporters are named by path, not resolved from there.
const ALLURE_REPORTER = fileURLToPath(new URL('../../node_modules/allure-vitest/dist/reporter.js', import.meta.url));
let root: string;
let whole: RunRecord;
const shardDirs: string[] = [];

async function runInto(dir: string, shard?: string): Promise<RunRecord> {
  const { startVitest } = await import('vitest/node');
  const reporter = new HilReporter({ command: `test run ${shard ?? ''}`, reportsDir: dir, gate: shard === undefined, selection: { filters: [], ...(shard ? { shard } : {}) }, targetName: 'sim', write: () => undefined });
  const v = await startVitest('test', [], {
    root,
    config: false,
    include: ['*.test.ts'],
    globals: true,
    watch: false,
    ...(shard ? { shard } : {}),
    reporters: [[ALLURE_REPORTER, { resultsDir: join(dir, 'allure-results') }], ['blob', { outputFile: join(dir, 'blob', `blob-${(shard ?? '1/1').replace('/', '-')}.json`) }], reporter],
  });
  await v.close();
  return reporter.record!;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'hil-shards-'));
  for (const [f, text] of Object.entries(FILES)) writeFileSync(join(root, f), text);
  whole = await runInto(join(root, 'out-whole'));
  for (let i = 1; i <= 4; i++) {
    const d = join(root, `out-shard-${i}`);
    mkdirSync(d);
    shardDirs.push(d);
    await runInto(d, `${i}/4`);
  }
}, 120_000);

test('four merged shards give the verdict, counts and coverage of the whole run; a failure in one shard fails the merge', async () => {
  const shards = shardDirs.map((d) => JSON.parse(readFileSync(join(d, 'run.json'), 'utf8')) as RunRecord);
  expect(shards.map((s) => s.tests.length).reduce((a, b) => a + b, 0)).toBe(whole.tests.length);
  expect(shards.every((s) => s.tests.length < whole.tests.length)).toBe(true);
  expect(wholeMerge(shards)).toBe(true);
  expect(wholeMerge(shards.slice(1))).toBe(false); // a share missing: no gate for the merge

  const out = join(root, 'merged');
  const [m] = await mergeRuns({ root, dirs: shardDirs, out, report: true, expectationsFor: () => ({}), write: () => undefined });
  const merged = JSON.parse(readFileSync(join(out, 'run.json'), 'utf8')) as RunRecord;
  expect(m!.out).toBe(out);
  expect(runSchemaProblems(merged)).toEqual([]);
  const key = (r: RunRecord) => ({
    verdict: verdictOf(r).verdict,
    headline: verdictOf(r).headline,
    counts: verdictOf(r).counts,
    summary: { ...r.summary, duration_ms: 0 },
    coverage: r.coverage.map((c) => [c.id, c.status, c.outcome ?? '']),
    gate: r.gate,
    tests: r.tests.map((t) => [t.file.replace(/^.*\//, ''), t.fullName, t.state, t.covers.join(',')]).sort(),
  });
  expect(key(merged)).toEqual(key(whole));
  expect(verdictOf(merged).verdict).toBe('FAIL');
  expect(merged.shards?.map((s) => s.selection?.shard).sort()).toEqual(['1/4', '2/4', '3/4', '4/4']);
  // Allure's own results: every shard's files, put together
  const allure = (d: string) => readdirSync(join(d, 'allure-results')).filter((f) => f.endsWith('-result.json')).length;
  expect(allure(out)).toBe(shardDirs.map(allure).reduce((a, b) => a + b, 0));
  expect(allure(out)).toBeGreaterThanOrEqual(whole.tests.filter((t) => t.state !== 'skipped').length);
  expect(readFileSync(join(out, 'html', 'index.html'), 'utf8')).toContain('<div class="verdict-word">FAIL</div>');
}, 120_000);

test('runs against different targets stay apart', async () => {
  const other = join(root, 'out-other');
  mkdirSync(other);
  await runInto(other);
  const rec = JSON.parse(readFileSync(join(other, 'run.json'), 'utf8')) as RunRecord;
  rec.target = { ...rec.target, name: 'rig', driver: 'ethercat' };
  writeFileSync(join(other, 'run.json'), JSON.stringify(rec));
  const out = join(root, 'merged-two');
  const merged = await mergeRuns({ root, dirs: [...shardDirs, other], out, report: false, expectationsFor: () => ({}), write: () => undefined });
  expect(merged.map((m) => m.group).sort()).toEqual(['rig-ethercat-unknown', 'sim-unknown-unknown']);
  expect(merged.find((m) => m.group.startsWith('rig'))!.record!.tests.length).toBe(whole.tests.length);
  expect(merged.find((m) => m.group.startsWith('sim'))!.record!.tests.length).toBe(whole.tests.length);
}, 120_000);
