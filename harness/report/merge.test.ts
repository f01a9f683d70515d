// hil merge: four shards of a run (vitest --shard i/4, each with vitest's blob report, the harness
// reporter's run.json and Allure's results) merged give the verdict, test counts and coverage of the
// same run in one piece. The runs here are vitest runs of a few small test files written for the test
// (no stack: what is tested is the merge, through vitest's own --merge-reports and the harness reporter).

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { HilReporter } from './reporter.ts';
import { mergeRuns, wholeMerge } from './merge.ts';
import { runSchemaProblems } from './run-schema.ts';
import type { RunRecord } from './run-types.ts';
import { verdictOf } from './verdict.ts';

const FILES: Record<string, string> = {
  'a.test.ts': `test('a1', { meta: { covers: ['reason:control_session_stale'], kind: 'contract' } }, () => {});\ntest('a2', () => {});`,
  'b.test.ts': `test('b1 fails', { meta: { covers: ['reason:no_grant'], kind: 'contract' } }, () => { expect(1).toBe(2); });\ntest('b2', { meta: { covers: ['reason:no_grant'], kind: 'contract' } }, () => {});`,
  'c.test.ts': `test('c1 skipped', ({ skip }) => { skip('not on this target'); });`,
  'd.test.ts': `test('d1', { meta: { covers: ['reason:wrong_generation'], kind: 'contract' } }, () => {});\ntest('d2', () => {});\ntest('d3', () => {});\ntest('d4 passes', { meta: { covers: ['reason:no_grant'], kind: 'contract' } }, () => {});`,
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

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

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
  // Its times are the shards': first start, last finish, each shard's own duration and their sum.
  expect(merged.started_at).toBe(shards.map((s) => s.started_at).sort()[0]);
  expect(merged.finished_at).toBe(shards.map((s) => s.finished_at).sort().at(-1));
  expect(merged.summary.duration_ms).toBe(shards.reduce((a, s) => a + s.summary.duration_ms, 0));
  expect(merged.shards!.map((s) => [s.started_at, s.finished_at, s.duration_ms]).sort()).toEqual(shards.map((s) => [s.started_at, s.finished_at, s.summary.duration_ms]).sort());
  expect(readFileSync(join(out, 'html', 'index.html'), 'utf8')).toMatch(/in 4 shards \([^)]+ \+ [^)]+ \+ [^)]+ \+ [^)]+\); [^<]+ from the first start to the last finish/);
  // Allure's own results: every shard's files, put together
  const allure = (d: string) => readdirSync(join(d, 'allure-results')).filter((f) => f.endsWith('-result.json')).length;
  expect(allure(out)).toBe(shardDirs.map(allure).reduce((a, b) => a + b, 0));
  expect(allure(out)).toBeGreaterThanOrEqual(whole.tests.filter((t) => t.state !== 'skipped').length);
  expect(readFileSync(join(out, 'html', 'index.html'), 'utf8')).toContain('<div class="verdict-word">FAIL</div>');

  // An item covered on one shard only counts as covered in the merge; an item covered on two shards,
  // failed on one and passed on the other, is failing in the merge (as in the whole run).
  const shardOf = (test: string) => shards.findIndex((s) => s.tests.some((t) => t.name === test));
  const item = (r: RunRecord, id: string) => r.coverage.find((c) => c.id === id)!;
  expect(shardOf('b1 fails')).toBeGreaterThanOrEqual(0);
  expect(shardOf('d4 passes')).toBeGreaterThanOrEqual(0);
  expect(shardOf('b1 fails')).not.toBe(shardOf('d4 passes'));
  expect(shards.filter((s) => item(s, 'reason:wrong_generation').status === 'covered')).toHaveLength(1);
  expect(item(merged, 'reason:wrong_generation')).toMatchObject({ status: 'covered', outcome: 'passed', tests: ['d.test.ts > d1'] });
  expect(item(shards[shardOf('d4 passes')]!, 'reason:no_grant')).toMatchObject({ status: 'covered', outcome: 'passed' });
  expect(item(shards[shardOf('b1 fails')]!, 'reason:no_grant')).toMatchObject({ status: 'covered', outcome: 'failed' });
  expect(item(merged, 'reason:no_grant')).toMatchObject({ status: 'covered', outcome: 'failed' });
  expect([...item(merged, 'reason:no_grant').tests].sort()).toEqual(['b.test.ts > b1 fails', 'b.test.ts > b2', 'd.test.ts > d4 passes']);
  // The one failed test, on one shard, fails the merge; the same shards without it do not.
  expect(verdictOf(merged).counts).toMatchObject({ failed: 1, errored: 0, passed: whole.tests.filter((t) => t.state === 'passed').length });
  const without = shardDirs.filter((_, i) => i !== shardOf('b1 fails'));
  const [rest] = await mergeRuns({ root, dirs: without, out: join(root, 'merged-rest'), report: false, expectationsFor: () => ({}), write: () => undefined });
  expect(rest!.record!.tests.some((t) => t.state === 'failed')).toBe(false);
  expect(rest!.exitCode).toBe(0);
  expect(m!.exitCode).toBe(1);
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
  const rig = merged.find((m) => m.group.startsWith('rig'))!;
  const sim = merged.find((m) => m.group.startsWith('sim'))!;
  expect(rig.record!.tests.length).toBe(whole.tests.length);
  expect(sim.record!.tests.length).toBe(whole.tests.length);
  // each group is a run of its own, in a directory of its own, against its own target
  expect([rig.out, sim.out]).toEqual([join(out, 'rig-ethercat-unknown'), join(out, 'sim-unknown-unknown')]);
  expect(JSON.parse(readFileSync(join(rig.out, 'run.json'), 'utf8')).target).toMatchObject({ name: 'rig', driver: 'ethercat' });
  expect(JSON.parse(readFileSync(join(sim.out, 'run.json'), 'utf8')).target.name).toBe('sim');
  expect(rig.record!.shards).toHaveLength(1);
  expect(sim.record!.shards!.map((s) => s.selection?.shard).sort()).toEqual(['1/4', '2/4', '3/4', '4/4']);
}, 120_000);
