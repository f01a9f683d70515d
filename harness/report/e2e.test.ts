// The report of a real run, checked as a person would see it (docs/architecture.md "Report"): `hil run` on the
// sim target over three trajectory tests, one of them failed on purpose through the test channel
// (--plant sluggish_drive: the drive lags its target). The failed test carries its measurement outside
// the configured limit with both numbers, its plot and its transcript; no artefact of the run holds a
// session token the run was issued; and the report opens in headless Chromium with no console error and
// no network request, the verdict and a plot on the first screen; Allure's own command line (allure 3)
// renders the run's Allure results without an error, with every test, its status and the evidence; and
// `hil compare` of a run of the same tests with nothing planted against it names exactly the planted test
// and its measurement drift.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, onTestFinished, test } from 'vitest';
import { limitText } from '../measure.ts';
import { chromiumPath, visit } from './browser.ts';
import { runSchemaProblems } from './run-schema.ts';
import type { Comparison } from './compare.ts';
import type { RunRecord } from './run-types.ts';
import { hilInProcess } from '../cli/in-process.ts';
import { HarnessError } from '../errors.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PLANTED = 'start moves J1 along the trajectory';
let dir: string;
let tokensFile: string;
let run: RunRecord;
let exit: number | null;

/** `hil ARGS` in the project root: exit status and output. */
async function hil(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ['harness/bin/hil.mjs', ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  return { code, out };
}

const SELECTION = ['--grep', 'prepare, start, complete', 'suites/trajectory/trajectory.test.ts'];
let baselineDir: string;
// The run's own directory (`dir`, the report and its screenshot, whose path a test prints) stays for a
// person to look at when a test of this file failed, or with HIL_KEEP_E2E=1; otherwise it goes with the
// others (every `npm test` left one in the system's temporary directory).
let anyFailed = false;
afterEach((ctx) => {
  if (ctx.task.result?.state === 'fail') anyFailed = true;
});
afterAll(() => {
  const keep = anyFailed || process.env.HIL_KEEP_E2E === '1';
  if (keep && dir) process.stdout.write(`e2e: the planted run's reports are kept in ${dir}\n`);
  for (const d of [tokensFile && join(tokensFile, '..'), baselineDir, keep ? undefined : dir]) if (d) rmSync(d, { recursive: true, force: true });
});

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hil-e2e-'));
  tokensFile = join(mkdtempSync(join(tmpdir(), 'hil-e2e-tokens-')), 'tokens.txt');
  writeFileSync(tokensFile, '');
  const planted = await runJudged(dir, ['--blob', '--plant', `sluggish_drive@${PLANTED}`, ...SELECTION], { HIL_TOKEN_LOG: tokensFile }, 'hil run');
  run = planted.run;
  exit = planted.code;
  // The same tests with nothing planted: the baseline hil compare compares the planted run with.
  baselineDir = mkdtempSync(join(tmpdir(), 'hil-e2e-baseline-'));
  const base = (await runJudged(baselineDir, ['--no-report', ...SELECTION], {}, 'hil run (baseline)')).run;
  const slow = [...run.tests, ...base.tests].filter((t) => t.host_too_slow !== undefined);
  if (slow.length) unjudged = slow.map((t) => `${t.fullName}: ${t.host_too_slow}`).join('; ');
}, 900_000);

/**
 * `hil run --reports DIR ARGS` and its run.json. A run in which the host was too slow for the harness to
 * judge a test (HIL_ERR_HOST_TOO_SLOW: a keeper that lost its grant on a loaded machine) says nothing about
 * the report under test: it is run again, at most three attempts in all, as CI reruns such runs
 * (harness/report/retry-rule.ts).
 */
async function runJudged(d: string, args: string[], env: Record<string, string>, what: string): Promise<{ run: RunRecord; code: number | null }> {
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1) fresh(d);
    const r = await hil(['run', '--reports', d, ...args], env);
    if (!existsSync(join(d, 'run.json'))) throw new Error(`${what} wrote no run.json (exit ${r.code}):\n${r.out.slice(-3000)}`);
    const got = JSON.parse(readFileSync(join(d, 'run.json'), 'utf8')) as RunRecord;
    if (attempt === 3 || !got.tests.some((t) => t.host_too_slow !== undefined)) return { run: got, code: r.code };
  }
}

/** Why the runs left a test the host was too slow to judge after their last attempt, if they did. */
let unjudged: string | undefined;

/**
 * A test of the report of a planted failure needs that failure judged (FAIL), and a baseline judged: when
 * the host was too slow in all three attempts, the report shows an ERROR instead, and what the test would
 * say of it is no finding about the report. Its outcome is then the host's (CI runs it once more).
 */
function needsJudgedRuns(): void {
  if (unjudged) throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `the runs this test reads were left with tests the host was too slow to judge, after three attempts: ${unjudged}`);
}

/** An attempt's directory emptied for the next one (its Allure results would otherwise add up). */
function fresh(d: string): void {
  rmSync(d, { recursive: true, force: true });
  mkdirSync(d);
}

describe('a real run with a planted motion failure', () => {
  test('the planted test fails on its measurement, with both numbers; the others pass; run.json matches its schema', () => {
    needsJudgedRuns();
    expect(exit).toBe(1);
    expect(runSchemaProblems(run)).toEqual([]);
    const t = run.tests.find((x) => x.fullName.includes(PLANTED))!;
    expect(t.state).toBe('failed');
    const m = t.evidence!.measurements.find((x) => x.name === 'following_error_max' && x.axis === 'J1')!;
    expect(m.outcome).toBe('fail');
    expect(m.value).toBeGreaterThan(m.limit!.hi!);
    expect(m.limit).toMatchObject({ kind: 'at_most', source: 'configured', ref: 'axes[0].limits.following_error' });
    expect(t.errors!.join('\n')).toContain(`HIL_ERR_MEASUREMENT_LIMIT: measured outside the limit: following_error_max J1 = `);
    expect(t.errors!.join('\n')).toContain(`limit <= ${m.limit!.hi} (configured: axes[0].limits.following_error)`);
    expect(t.evidence!.plots!.map((p) => p.axis)).toEqual(['J1']);
    // the fault stopped the motion: no completion time (it read 0 ms, within its limit, before)
    expect(t.evidence!.measurements.filter((x) => x.name === 'completion_time')).toEqual([]);
    const others = run.tests.filter((x) => x !== t);
    expect(others.length).toBeGreaterThan(0);
    for (const o of others) expect(o.state, o.fullName).toBe('passed');
  });

  test('the transcript: requests and replies with the session redacted, the events around the failure', () => {
    const tr = run.tests.find((x) => x.fullName.includes(PLANTED))!.evidence!.transcript!;
    const start = tr.exchanges.find((x) => x.request.includes('"operation":"start_trajectory"'))!;
    expect(start.status).toBe(200);
    expect(start.request).toMatch(/"session":"<session #\d+>"/);
    expect(tr.exchanges.some((x) => x.reply?.includes('"session":"<session #'))).toBe(true); // the acquire's grant
    expect(tr.events).toContain('fault_latched'); // the core tripped on the following error the drive made
  });

  test('no artefact of the run holds a session token the run was issued', () => {
    const tokens = readFileSync(tokensFile, 'utf8').split('\n').filter(Boolean);
    expect(tokens.length).toBeGreaterThan(0);
    const files: string[] = [];
    const walk = (d: string): void => {
      for (const f of readdirSync(d)) {
        const p = join(d, f);
        if (statSync(p).isDirectory()) walk(p);
        else files.push(p);
      }
    };
    walk(dir);
    expect(files.some((f) => f.endsWith('index.html'))).toBe(true);
    expect(files.some((f) => f.includes('allure-results'))).toBe(true);
    expect(files.some((f) => f.includes(join('blob', 'blob-')))).toBe(true);

    for (const f of files) {
      const text = readFileSync(f, 'latin1');
      for (const tok of tokens) expect(text.includes(tok), `${f} holds a session token`).toBe(false);
    }
  });
});

describe('hil compare of the planted run against the same tests with nothing planted', () => {
  test('names exactly the planted test as the new failure, and its following error drifting across its limit', async () => {
    needsJudgedRuns();
    const baseline = JSON.parse(readFileSync(join(baselineDir, 'run.json'), 'utf8')) as RunRecord;
    // A baseline that failed on its own (a loaded machine) would make the comparison say something else.
    expect(baseline.tests.map((t) => `${t.name.slice(0, 40)}: ${t.state}`)).toEqual(run.tests.map((t) => `${t.name.slice(0, 40)}: passed`));
    // hil compare reads two files and answers: through cli.ts main() in this process (harness/cli/in-process.ts), not a second tsx start.
    const r = await hilInProcess(['compare', join(baselineDir, 'run.json'), join(dir, 'run.json'), '--json']);
    expect(r.status, r.stderr).toBe(1); // the run under review regressed
    const c = JSON.parse(r.stdout) as Comparison;
    const planted = run.tests.find((t) => t.name.startsWith(PLANTED))!;
    const plantedKey = `${planted.file} > ${planted.fullName}`;
    expect(c.verdict).toEqual({ before: 'PASS', after: 'FAIL' });
    expect(c.newFailures).toEqual([plantedKey]);
    expect([c.fixed, c.stillFailing, c.added, c.removed]).toEqual([[], [], [], []]);
    // The only test measurement that crossed its limit is the planted test's following error on J1. (The
    // run's own, cycle lateness above all, cross theirs with the machine's load: '(run)' drifts say nothing
    // about the planted test.)
    const crossed = c.drifts.filter((d) => d.outcome && d.test !== '(run)');
    expect(crossed).toHaveLength(1);
    const fe = planted.evidence!.measurements.find((m) => m.name === 'following_error_max' && m.axis === 'J1')!;
    expect(crossed[0]).toMatchObject({ test: plantedKey, name: 'following_error_max', axis: 'J1', unit: 'rad', after: fe.value, outcome: { before: 'pass', after: 'fail' } });
    expect(crossed[0]!.before).toBeLessThanOrEqual(fe.limit!.hi!);
    // the text form names the test and the drift too
    const text = await hilInProcess(['compare', join(baselineDir, 'run.json'), join(dir, 'run.json')]);
    expect(text.stdout).toContain(`new failures: 1\n  ${plantedKey}\n`);
    expect(text.stdout).toContain(`${plantedKey}: following_error_max J1 ${crossed[0]!.before} -> ${fe.value} rad  [pass -> fail]`);
  }, 60_000);
});

// Allure's own command line (allure 3, a devDependency) renders the run's results: the check that the
// results hil run writes (harness/report/allure-reporter.ts, harness/evidence-setup.ts) are Allure's format,
// not only what our own reader (harness/report/allure-results.ts) accepts. It runs in a temporary working
// directory (no allurerc there) and reads the report's data files, not its page.
const ALLURE_CLI = join(ROOT, 'node_modules', 'allure', (JSON.parse(readFileSync(join(ROOT, 'node_modules', 'allure', 'package.json'), 'utf8')) as { bin: string }).bin);

describe('the Allure results in allure 3', () => {
  test('allure generate renders them with no error output; its data has every test of run.json with its status, the measurement outside its limit and the transcript', async () => {
    needsJudgedRuns();
    const cwd = mkdtempSync(join(tmpdir(), 'hil-allure-cli-'));
    onTestFinished(() => rmSync(cwd, { recursive: true, force: true }));
    const out = join(cwd, 'report');
    const child = spawn(process.execPath, [ALLURE_CLI, 'generate', join(dir, 'allure-results'), '--output', out], { cwd, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const code = await new Promise((r) => child.once('exit', r));
    expect({ code, stderr }, stdout).toEqual({ code: 0, stderr: '' });

    // Allure's statuses: failed, broken (errored in run.json), passed, skipped. The planted test's first
    // error is its own TypeError once the motion faulted, its second the measurement outside its limit:
    // failed in run.json, and in Allure too (harness/report/allure-reporter.ts allureStatusOf).
    const allureStatus = (t: RunRecord['tests'][number]) => [t.state === 'errored' ? 'broken' : t.state];
    const byId = (JSON.parse(readFileSync(join(out, 'test-results.json'), 'utf8')) as { byId: Record<string, { name: string; status: string }> }).byId;
    const rendered = new Map(Object.values(byId).map((r) => [r.name, r.status]));
    expect([...rendered.keys()].sort()).toEqual(run.tests.map((t) => t.name).sort());
    expect(run.tests.length).toBe(3);
    // One result file per test: a file's results are written when it ends (allure-reporter.ts
    // onTestModuleEnd), and the run's end must not write them a second time.
    expect(readdirSync(join(dir, 'allure-results')).filter((f) => f.endsWith('-result.json')).length).toBe(run.tests.length);
    for (const t of run.tests) expect(allureStatus(t), t.name).toContain(rendered.get(t.name));
    const notPassed = [...rendered].filter(([, st]) => st !== 'passed').map(([n]) => n);
    expect(notPassed.length).toBe(1);
    expect(notPassed[0]!.startsWith(PLANTED)).toBe(true);

    const [id] = Object.entries(byId).find(([, r]) => r.name.startsWith(PLANTED))!;
    const failed = JSON.parse(readFileSync(join(out, 'data', 'test-results', `${id}.json`), 'utf8')) as {
      parameters: { name: string; value: string }[];
      attachments: { link: { name: string; id: string; ext: string; missed: boolean } }[];
    };
    const m = run.tests.find((t) => t.name.startsWith(PLANTED))!.evidence!.measurements.find((x) => x.name === 'following_error_max' && x.axis === 'J1')!;
    expect(failed.parameters.find((p) => p.name === 'following_error_max J1')?.value).toBe(`${m.value} rad, limit ${limitText(m.limit!)} OUTSIDE`);
    const transcript = failed.attachments.find((a) => a.link.name === 'transcript')!.link;
    expect(transcript.missed).toBe(false);
    const tr = JSON.parse(readFileSync(join(out, 'data', 'attachments', `${transcript.id}${transcript.ext}`), 'utf8')) as { exchanges: { request: string }[] };
    expect(tr.exchanges.some((x) => x.request.includes('"operation":"start_trajectory"'))).toBe(true);
  }, 120_000);
});

describe('the report in headless Chromium', () => {
  const bin = chromiumPath();
  test.skipIf(!bin)('opens with no console error and no network request; verdict and a plot on the first screen; the failed test shows its plot', async () => {
    needsJudgedRuns();
    const v = await visit(pathToFileURL(join(dir, 'html', 'index.html')).href, {
      verdict: `document.querySelector('.verdict-word').textContent`,
      plots: `document.querySelectorAll('svg[data-plot]').length`,
      firstScreenPlot: `[...document.querySelectorAll('svg[data-plot]')].some((e) => e.getBoundingClientRect().top < innerHeight && e.getBoundingClientRect().height > 50)`,
      failedCardPlot: `!!document.querySelector('article.card.s-failed svg[data-plot="motion"]')`,
      limitDrawn: `!!document.querySelector('article.card.s-failed svg[data-plot="motion"] .limit')`,
    });
    writeFileSync(join(dir, 'first-screen.png'), v.screenshot);
    process.stdout.write(`report ${statSync(join(dir, 'html', 'index.html')).size} bytes, loaded in Chromium in ${Math.round(v.loadMs)} ms (renderer main thread busy ${v.mainThreadMs.task} ms, layout ${v.mainThreadMs.layout} ms); screenshot ${join(dir, 'first-screen.png')} (kept when a test of this file fails, or with HIL_KEEP_E2E=1)\n`);
    expect(v.errors).toEqual([]);
    expect(v.requests).toEqual([]);
    expect(v.values).toMatchObject({ verdict: 'FAIL', firstScreenPlot: true, failedCardPlot: true, limitDrawn: true });
    expect(v.values.plots as number).toBeGreaterThanOrEqual(2);
    expect(v.screenshot.subarray(1, 4).toString('latin1')).toBe('PNG');
  }, 120_000);
  if (!bin) test.skip('Debian chromium is not installed (apt-get install chromium): the report was not opened in a browser', () => {});
});
