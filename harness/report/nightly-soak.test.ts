// A nightly whose soak crossed a limit is FAIL everywhere it is shown (README "Verdicts"): the soak goes
// into the night's run record (harness/soak.ts noteSoak) with its figures and first refusal, with the
// target's Describe and digests where the run noted none; the verdict, the HTML report and the comparison
// with the previous night then all say FAIL and show the soak. The same night without the soak is PASS.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { noteSoak, type SoakResult } from '../soak.ts';
import { parseExact, stringifyExact } from '../oracle/json.ts';
import { compareRuns, comparisonText, regressed } from './compare.ts';
import { writeHtmlReport } from './html.ts';
import { readRunRecord } from './run-reader.ts';
import { runSchemaProblems } from './run-schema.ts';
import type { RunRecord, RunTest } from './run-types.ts';
import { verdictOf } from './verdict.ts';

const dir = mkdtempSync(join(tmpdir(), 'hil-nightly-soak-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const test1: RunTest = { file: 'suites/grant/drain.test.ts', project: 'conformance', name: 'drains', fullName: 'stop > drains', state: 'passed', duration_ms: 5, covers: ['reason:expired'], kind: 'contract' };
const night = (): RunRecord => ({
  schema: 'cell-hil.run.v3',
  command: 'hil run --reports x',
  started_at: '2026-11-28T00:00:00.000Z',
  finished_at: '2026-11-28T00:01:00.000Z',
  // What a recorded night's run noted (no target note): the nightly fills it from the soak's Describe.
  target: { name: 'sim', driver: 'unknown', address: '', simulated: null },
  environment: { machine_sha256: '', configuration_sha256: '', deployment_sha256: '', package_version: '0', git_revision: 'r', node: 'v20', platform: 'linux x64', hostname: 'h' },
  tests: [test1],
  coverage: [],
  summary: { passed: 1, failed: 0, skipped: 0, errored: 0, duration_ms: 60_000 },
  gate: { ok: true, problems: [] },
  run_measurements: { measurements: [] },
});
const refused = { name: 'soak_renewals_refused', unit: 'requests', value: 170, limit: { kind: 'equals' as const, lo: 0, source: 'documented' as const, ref: 'document 1 part 3: a renewed grant stays owned' }, outcome: 'fail' as const };
const broken: SoakResult = {
  seconds: 60.1,
  measurements: [{ name: 'soak_renewals', unit: 'requests', value: 180, outcome: 'unlimited' }, refused, { name: 'soak_rss_growth', unit: 'KiB', value: 90_000, limit: { kind: 'at_most', hi: 65_536, source: 'configured', ref: 'hil nightly --soak-rss-growth-mib (64 MiB)' }, outcome: 'fail' }],
  first_refusal: { at_s: 6.7, status: 409, error: 'expired: the lease of this session expired' },
};
const DESCRIBE = { simulated: true, machine_sha256: 'a'.repeat(64), configuration_sha256: 'b'.repeat(64), deployment_sha256: 'c'.repeat(64), binding: { revision: 18446744073709551615n } };

test('the soak that broke a limit makes the night FAIL in its record, its report and the comparison with the night before', async () => {
  // The night before: the same run, its soak within every limit.
  const before = join(dir, 'before.json');
  writeFileSync(before, stringifyExact(night() as never));
  noteSoak(before, { seconds: 60, measurements: [{ ...refused, value: 0, outcome: 'pass' }] }, undefined);
  const file = join(dir, 'run.json');
  writeFileSync(file, stringifyExact(night() as never));
  noteSoak(file, broken, { driver: 'sim', describe: DESCRIBE });

  expect(runSchemaProblems(JSON.parse(readFileSync(file, 'utf8')) as RunRecord)).toEqual([]);
  const rec = JSON.parse(readFileSync(file, 'utf8')) as RunRecord;
  expect(rec.soak).toEqual(broken);
  // The target's Describe and digests, as any run records them (uint64 fields exact).
  expect(rec.target.driver).toBe('sim');
  expect(rec.target.simulated).toBe(true);
  expect(((parseExact(readFileSync(file)) as unknown as RunRecord).target.describe as typeof DESCRIBE).binding.revision).toBe(18446744073709551615n);
  expect([rec.environment.machine_sha256, rec.environment.configuration_sha256, rec.environment.deployment_sha256]).toEqual(['a'.repeat(64), 'b'.repeat(64), 'c'.repeat(64)]);

  const { run } = await readRunRecord(file, []);
  const v = verdictOf(run);
  expect(v.verdict).toBe('FAIL');
  expect(v.reasons[0]).toBe(
    'the soak (60.1 s) broke a limit: soak_renewals_refused = 170 requests, limit == 0 (documented: document 1 part 3: a renewed grant stays owned); soak_rss_growth = 90000 KiB, limit <= 65536 (configured: hil nightly --soak-rss-growth-mib (64 MiB)); first refusal 6.7 s into the soak: 409 expired: the lease of this session expired',
  );

  const c = compareRuns((await readRunRecord(before, [])).run, run);
  expect(c.verdict).toEqual({ before: 'PASS', after: 'FAIL' });
  expect(regressed(c)).toBe(true);
  const text = comparisonText(c);
  expect(text).toMatch(/^verdict: PASS -> FAIL\n {2}- the soak \(60\.1 s\) broke a limit: soak_renewals_refused = 170 requests/);
  expect(text).toContain('soak: 60 s, every limit kept -> 60.1 s, soak_renewals_refused = 170 requests OUTSIDE THE LIMIT, soak_rss_growth = 90000 KiB OUTSIDE THE LIMIT, first refusal at 6.7 s: 409 expired: the lease of this session expired');

  const out = join(dir, 'report.html');
  await writeHtmlReport({ runJson: file, allureDir: join(dir, 'no-allure'), outFile: out, baseline: before });
  const html = readFileSync(out, 'utf8');
  expect(html).toMatch(/class="[^"]*verdict[^"]*"[^>]*>[^<]*FAIL|>FAIL</);
  expect(html).not.toMatch(/>PASS —/);
  expect(html).toContain('The soak (60.1 s, part of the verdict)');
  expect(html).toContain('First refusal 6.7 s into the soak: 409 expired: the lease of this session expired');
  expect(html).toContain('the soak (60.1 s) broke a limit');
});

test('the same night with its soak within every limit is PASS (the soak alone decided the FAIL above)', async () => {
  const file = join(dir, 'ok.json');
  writeFileSync(file, stringifyExact(night() as never));
  noteSoak(file, { seconds: broken.seconds, measurements: broken.measurements.map((m) => (m.limit ? { ...m, value: 0, outcome: 'pass' as const } : m)) }, { driver: 'sim', describe: DESCRIBE });
  const { run } = await readRunRecord(file, []);
  expect(verdictOf(run).verdict).toBe('PASS');
});
