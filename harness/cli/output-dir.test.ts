// Output directories named on the command line: made level by level, so a path that cannot be made is one
// line and exit 2 at once. Node's recursive mkdir never returns under /proc, where `hil run --reports
// /proc/x` used to hang with nothing printed.

import { afterEach, expect, test, vi } from 'vitest';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../cli.ts';
import { makeDirs } from './common.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  vi.restoreAllMocks();
});

function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), 'hil-outdir-'));
  dirs.push(d);
  return d;
}

test('makeDirs makes every missing level, keeps what exists, and refuses a path through a file', () => {
  const d = scratch();
  expect(makeDirs(join(d, 'a', 'b', 'c'))).toBe(join(d, 'a', 'b', 'c'));
  expect(statSync(join(d, 'a', 'b', 'c')).isDirectory()).toBe(true);
  expect(makeDirs(join(d, 'a', 'b'))).toBe(join(d, 'a', 'b'));
  writeFileSync(join(d, 'file'), 'x');
  expect(() => makeDirs(join(d, 'file', 'under'))).toThrow(`${join(d, 'file')} is not a directory`);
  expect(() => makeDirs(join(d, 'file'))).toThrow(`${join(d, 'file')} is not a directory`);
});

test('makeDirs fails at once where the system cannot make a level (under /proc, where a recursive mkdir never returns)', { timeout: 10_000 }, () => {
  expect(() => makeDirs('/proc/hil-no-such-dir/reports')).toThrow(/ENOENT.*mkdir '\/proc\/hil-no-such-dir'/);
  expect(existsSync('/proc/hil-no-such-dir')).toBe(false);
});

test.each([
  [['run', '--reports', '/proc/hil-x', 'suites/envelope/uint64.test.ts'], "hil: --reports /proc/hil-x: cannot create the directory: ENOENT: no such file or directory, mkdir '/proc/hil-x'\n"],
  [['run', '--record', '/proc/hil-r', 'suites/envelope/uint64.test.ts'], "hil: --record /proc/hil-r: cannot create the directory: ENOENT: no such file or directory, mkdir '/proc/hil-r'\n"],
  [['nightly', '--out', '/proc/hil-n', '--soak-minutes', '0'], 'hil: --out /proc/hil-n: cannot create /proc/hil-n/'],
])('hil %j: one line and exit 2 before anything starts', { timeout: 20_000 }, async (args, line) => {
  const r = await quietMain(args);
  expect(r.code).toBe(2);
  expect(r.err.startsWith(line), r.err).toBe(true);
});

test('hil merge, report and allure: an --out that cannot be made is one line and exit 2, before the inputs are read', { timeout: 20_000 }, async () => {
  // Inputs that pass the commands' own checks (a run.json, an allure-results folder): only --out is wrong.
  const d = scratch();
  makeDirs(join(d, 'allure-results'));
  writeFileSync(join(d, 'run.json'), '{}');
  expect(await quietMain(['merge', d, '--out', '/proc/hil-m'])).toEqual({ code: 2, err: "hil: --out /proc/hil-m: cannot create the directory: ENOENT: no such file or directory, mkdir '/proc/hil-m'\n" });
  expect(await quietMain(['report', '--reports', d, '--out', '/proc/hil-h/index.html'])).toEqual({ code: 2, err: "hil: --out /proc/hil-h: cannot create the directory: ENOENT: no such file or directory, mkdir '/proc/hil-h'\n" });
  expect(await quietMain(['allure', '--reports', d, '--out', '/proc/hil-a'])).toEqual({ code: 2, err: "hil: --out /proc/hil-a: cannot create the directory: ENOENT: no such file or directory, mkdir '/proc/hil-a'\n" });
});

async function quietMain(args: string[]): Promise<{ code: number; err: string }> {
  const err: string[] = [];
  vi.spyOn(process.stderr, 'write').mockImplementation((c) => (err.push(String(c)), true));
  vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  const code = await main(args);
  vi.restoreAllMocks();
  return { code, err: err.join('') };
}
