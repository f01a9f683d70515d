// The hil command's contract with its users: exit 0 on success, 1 on failures, 2 on usage errors, and
// --help on every command.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { catalogue } from './catalogue/index.ts';

const HIL = fileURLToPath(new URL('./bin/hil.mjs', import.meta.url));
const hil = (...args: string[]) => spawnSync(process.execPath, [HIL, ...args], { encoding: 'utf8', timeout: 60_000 });

test('usage errors exit 2 with the command help', () => {
  for (const args of [['frobnicate'], ['run', '--target', 'nowhere'], ['run', '--target', 'external'], ['run', '--bogus'], ['coverage', '--bogus'], ['serve']]) {
    const r = hil(...args);
    expect(r.status, args.join(' ')).toBe(2);
    expect(r.stderr.length, args.join(' ')).toBeGreaterThan(0);
  }
});

test('--help on every command exits 0', () => {
  for (const cmd of ['run', 'test', 'serve', 'coverage', 'report', 'config']) {
    const r = hil(cmd, '--help');
    expect(r.status, cmd).toBe(0);
    expect(r.stdout, cmd).toMatch(/usage: hil/);
  }
  expect(hil('help').status).toBe(0);
});

test('coverage --json lists every catalogue item as covered with its tests or pending with a reason', () => {
  const r = hil('coverage', '--json');
  expect(r.status).toBe(0);
  const rows = JSON.parse(r.stdout) as Array<{ id: string; status: string; tests?: string[]; reason?: string }>;
  const ids = new Set(rows.map((x) => x.id));
  for (const e of catalogue) expect(ids.has(e.id), e.id).toBe(true);
  for (const row of rows) {
    if (row.status === 'covered') expect(row.tests!.length).toBeGreaterThan(0);
    else expect(row.reason!.length).toBeGreaterThan(0);
  }
});
