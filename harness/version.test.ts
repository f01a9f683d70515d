// hil --version: the package version, and the git revision when the harness runs from a checkout.

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { versionText } from './version.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const HIL = fileURLToPath(new URL('./bin/hil.mjs', import.meta.url));

test('hil --version prints the package version and the checkout revision, exit 0', { timeout: 60_000 }, () => {
  const r = spawnSync(process.execPath, [HIL, '--version'], { encoding: 'utf8', timeout: 50_000 });
  expect(r.status).toBe(0);
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  expect(r.stdout).toMatch(new RegExp(`^hil ${version.replace(/\./g, '\\.')} \\(git ${head}(\\+dirty)?\\)\\n$`));
});

test('outside a git checkout only the package version is printed', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hil-version-'));
  try {
    writeFileSync(join(dir, 'package.json'), '{"version": "7.3.1"}');
    expect(versionText(dir)).toBe('hil 7.3.1');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
