// The report of a real run, checked as a person would see it (issue 22 items 3 and 7): `hil run` on the
// sim target over three trajectory tests, one of them failed on purpose through the test channel
// (--plant sluggish_drive: the drive lags its target). The failed test carries its measurement outside
// the configured limit with both numbers, its plot and its transcript; no artefact of the run holds a
// session token the run was issued; and the report opens in headless Chromium with no console error and
// no network request, the verdict and a plot on the first screen.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, test } from 'vitest';
import { chromiumPath, visit } from './browser.ts';
import { runSchemaProblems } from './run-schema.ts';
import type { RunRecord } from './run-types.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PLANTED = 'start moves J1 along the trajectory';
let dir: string;
let tokensFile: string;
let run: RunRecord;
let exit: number | null;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hil-e2e-'));
  tokensFile = join(mkdtempSync(join(tmpdir(), 'hil-e2e-tokens-')), 'tokens.txt');
  writeFileSync(tokensFile, '');
  const child = spawn(
    process.execPath,
    ['harness/bin/hil.mjs', 'run', '--reports', dir, '--blob', '--plant', `sluggish_drive@${PLANTED}`, '--grep', 'prepare, start, complete', 'suites/trajectory/trajectory.test.ts'],
    { cwd: ROOT, env: { ...process.env, HIL_TOKEN_LOG: tokensFile }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  exit = await new Promise((r) => child.once('exit', r));
  if (!existsSync(join(dir, 'run.json'))) throw new Error(`hil run wrote no run.json (exit ${exit}):\n${out.slice(-3000)}`);
  run = JSON.parse(readFileSync(join(dir, 'run.json'), 'utf8')) as RunRecord;
}, 240_000);

describe('a real run with a planted motion failure', () => {
  test('the planted test fails on its measurement, with both numbers; the others pass; run.json matches its schema', () => {
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

describe('the report in headless Chromium', () => {
  const bin = chromiumPath();
  test.skipIf(!bin)('opens with no console error and no network request; verdict and a plot on the first screen; the failed test shows its plot', async () => {
    const v = await visit(pathToFileURL(join(dir, 'html', 'index.html')).href, {
      verdict: `document.querySelector('.verdict-word').textContent`,
      plots: `document.querySelectorAll('svg[data-plot]').length`,
      firstScreenPlot: `[...document.querySelectorAll('svg[data-plot]')].some((e) => e.getBoundingClientRect().top < innerHeight && e.getBoundingClientRect().height > 50)`,
      failedCardPlot: `!!document.querySelector('article.card.s-failed svg[data-plot="motion"]')`,
      limitDrawn: `!!document.querySelector('article.card.s-failed svg[data-plot="motion"] .limit')`,
    });
    writeFileSync(join(dir, 'first-screen.png'), v.screenshot);
    process.stdout.write(`report ${statSync(join(dir, 'html', 'index.html')).size} bytes, loaded in Chromium in ${Math.round(v.loadMs)} ms; screenshot ${join(dir, 'first-screen.png')}\n`);
    expect(v.errors).toEqual([]);
    expect(v.requests).toEqual([]);
    expect(v.values).toMatchObject({ verdict: 'FAIL', firstScreenPlot: true, failedCardPlot: true, limitDrawn: true });
    expect(v.values.plots as number).toBeGreaterThanOrEqual(2);
    expect(v.screenshot.subarray(1, 4).toString('latin1')).toBe('PNG');
  }, 120_000);
  if (!bin) test.skip('Debian chromium is not installed (apt-get install chromium): the report was not opened in a browser', () => {});
});
