// hil run --last-failed, --covers and --watch, each through the real command on the sim target: the run
// record names exactly the tests chosen, and a watched file saved again is rerun alone; and a plain run
// interrupted by a signal, which says how far it got.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, test } from 'vitest';
import type { RunRecord } from './report/run-types.ts';
import { hilInProcess } from './cli/in-process.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const HIL = fileURLToPath(new URL('./bin/hil.mjs', import.meta.url));
const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'hil-select-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const hilWith = (env: Record<string, string>, ...args: string[]) => spawnSync(process.execPath, [HIL, ...args], { encoding: 'utf8', timeout: 170_000, env: { ...process.env, CI: 'true', ...env } });
const hil = (...args: string[]) => hilWith({}, ...args);
// What hil run answers before it starts vitest (nothing to rerun, a usage error) is checked through cli.ts
// main() in this process (harness/cli/in-process.ts): a spawned hil would start tsx for it. A run, and
// anything that collects suites (vitest inside vitest), is a process.
const hilHere = (...args: string[]) => hilInProcess(args, { CI: 'true' });
const record = (dir: string) => JSON.parse(readFileSync(join(dir, 'run.json'), 'utf8')) as RunRecord;

const FILE = 'suites/dense-format/format.test.ts';
const NAME = "every file-format reason through POST /v1/program > the reference file itself passes every format rule and reaches the live checks (manifest revision 7 is not the service's 1)";

test('--last-failed reruns exactly the failed and errored tests of the last run.json, and nothing when none failed', { timeout: 180_000 }, async () => {
  const dir = tmp();
  const t = (fullName: string, state: string, file = FILE) => ({ file, project: 'conformance', name: fullName, fullName, state, duration_ms: 1, covers: [], kind: 'contract' });
  writeFileSync(join(dir, 'run.json'), JSON.stringify({ tests: [t(NAME, 'failed'), t('every file-format reason through POST /v1/program > header_len_out_of_bounds: x', 'passed'), t('x', 'skipped', 'suites/grant/grant.test.ts')] }));
  // NODE_EXTRA_CA_CERTS naming no file: Node warns at the start of each process handed it, here hil's own
  // alone (the sim target's workers and what they start get an environment without it).
  const r = hilWith({ NODE_EXTRA_CA_CERTS: '/nonexistent/hil-extra-ca.pem' }, 'run', '--target', 'sim', '--no-report', '--reports', dir, '--last-failed');
  expect(r.status, r.stdout + r.stderr).toBe(0);
  expect(r.stderr.match(/Ignoring extra certs from/g), r.stderr).toHaveLength(1);
  expect(r.stdout).toContain(`--last-failed: 1 test from ${join(dir, 'run.json')}\n  ${FILE} > ${NAME}\n`);
  const rec = record(dir);
  expect(rec.tests.map((x) => `${x.file} > ${x.fullName} ${x.state}`)).toEqual([`${FILE} > ${NAME} passed`]);
  expect(rec.gate.ok).toBe(true);
  expect(rec.selection?.filters).toEqual([FILE]);
  // The rerun passed: the next --last-failed has nothing to run and says so.
  const again = await hilHere('run', '--target', 'sim', '--no-report', '--reports', dir, '--last-failed');
  expect(again.status).toBe(0);
  expect(again.stdout).toBe(`--last-failed: nothing failed in ${join(dir, 'run.json')}; nothing to run\n`);
  // With no run.json there is nothing to read: a usage error.
  const none = await hilHere('run', '--target', 'sim', '--reports', tmp(), '--last-failed');
  expect(none.status).toBe(2);
  expect(none.stderr).toMatch(/--last-failed: no .*run\.json/);
});

test('--covers runs the tests covering an item, by id or pattern, and refuses an argument naming no item', { timeout: 240_000 }, () => {
  const dir = tmp();
  const r = hil('run', '--target', 'sim', '--no-report', '--reports', dir, '--covers', 'reason:control_session_stale', 'suites/grant/grant.test.ts');
  expect(r.status, r.stdout + r.stderr).toBe(0);
  const rec = record(dir);
  const names = rec.tests.map((x) => `${x.file} > ${x.fullName}`).sort();
  expect(names.length).toBeGreaterThan(1);
  for (const x of rec.tests) {
    expect(x.file).toBe('suites/grant/grant.test.ts');
    expect(x.covers).toContain('reason:control_session_stale');
    expect(x.state).toBe('passed');
  }
  expect(r.stdout).toContain(`--covers: ${names.length} tests in 1 file cover 1 of the items named\n`);
  // A pattern over the same item selects the same tests.
  const dir2 = tmp();
  const p = hil('run', '--target', 'sim', '--no-report', '--reports', dir2, '--covers', 'reason:control_session_st*', 'suites/grant/grant.test.ts');
  expect(p.status, p.stdout + p.stderr).toBe(0);
  expect(record(dir2).tests.map((x) => `${x.file} > ${x.fullName}`).sort()).toEqual(names);
  // The refusal is about the catalogue, whichever files are collected: one file is collected, not every suite.
  const bad = hil('run', '--target', 'sim', '--reports', tmp(), '--covers', 'reason:no_such_label_anywhere', 'suites/grant/grant.test.ts');
  expect(bad.status).toBe(2);
  expect(bad.stderr).toContain('--covers: reason:no_such_label_anywhere names no catalogue item');
});

test('--covers of an item only the long tier covers says so, and the test skips with the note naming --long', { timeout: 120_000 }, () => {
  const dir = tmp();
  const r = hil('run', '--target', 'sim', '--no-report', '--reports', dir, '--covers', 'limit:remote_reply_write_timeout_s');
  expect(r.stdout).toContain('--covers: 1 test in 1 file cover 1 of the items named\n--covers: 1 of them is in the long tier and skips without --long\n');
  const rec = record(dir);
  expect(rec.tests).toHaveLength(1);
  expect(rec.tests[0]!.state).toBe('skipped');
  expect(JSON.stringify(rec.tests[0])).toContain('runs with hil run --long');
});

test('--watch runs the selection, then reruns only the suite file saved, until interrupted', { timeout: 240_000 }, async () => {
  const dir = tmp();
  const child = spawn(process.execPath, [HIL, 'run', '--target', 'sim', '--reports', dir, '--watch', FILE, 'suites/dense-format/rules.test.ts'], { env: { ...process.env, CI: 'true' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  const until = async (pred: () => boolean, what: string) => {
    const end = Date.now() + 150_000;
    while (!pred()) {
      if (Date.now() > end || child.exitCode !== null) throw new Error(`waiting for ${what}; output so far:\n${out}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  try {
    await until(() => out.includes('watching: '), 'the first run');
    expect(out).toContain('progress: 2 of 2 files');
    const first = out.length;
    const source = join(ROOT, FILE);
    // Saved with the same bytes: vitest sees the change, the working tree does not.
    writeFileSync(source, readFileSync(source));
    await until(() => /verdict: /.test(out.slice(first)), 'the rerun');
    const rerun = out.slice(first);
    expect(rerun).toMatch(new RegExp(`ok   ${FILE.replace(/\./g, '\\.')} +\\d+ passed, 0 failed`));
    expect(rerun).toContain('progress: 1 of 1 files');
    expect(rerun).not.toContain('rules.test.ts');
    expect(record(dir).tests.every((x) => x.file === FILE)).toBe(true);
  } finally {
    child.kill('SIGINT');
  }
  expect(await exited).toBe(0);
});

test('a plain run interrupted by Ctrl-C says how far it got, and that it wrote no verdict, before vitest exits', { timeout: 180_000 }, async () => {
  const dir = tmp();
  // The run's own temporary directory: what its stacks made there must be gone once it has ended.
  const scratch = tmp();
  // The short file ends first; the long one (a 30 s listener bound) is still running when the signal comes.
  const child = spawn(process.execPath, [HIL, 'run', '--target', 'sim', '--reports', dir, '--workers', '2', 'suites/grant/restart.test.ts', 'suites/remote/timeouts.test.ts'], { env: { ...process.env, CI: 'true', TMPDIR: scratch }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  const end = Date.now() + 150_000;
  while (!out.includes('progress: 1 of 2 files')) {
    if (Date.now() > end || child.exitCode !== null) throw new Error(`waiting for the first file; output so far:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGINT');
  expect(await exited).toBe(130);
  expect(out).toMatch(/\ninterrupted \(SIGINT\): 1 of 2 files done, \d+ passed, 0 failed; cut short: suites\/remote\/timeouts\.test\.ts; no verdict, run record or report was written\n/);
  expect(out).not.toContain('verdict: ');
  // The cut-short file's stack (a remote listener's: its sockets, pair and keys) was up when the run ended.
  // Its workers remove the directories they made as they exit, a moment after the run: waited for, bounded.
  const left = () => readdirSync(scratch).filter((f) => f.startsWith('hil-sim-') || f.startsWith('hil-planner-') || f.startsWith('hil-olp-'));
  for (const end = Date.now() + 20_000; left().length && Date.now() < end; ) await new Promise((r) => setTimeout(r, 100));
  expect(left()).toEqual([]);
});
