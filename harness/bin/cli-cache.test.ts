// The `hil` command's bundle (cli-cache.mjs, hil.mjs): a call runs the sources as they are on disk, never a
// bundle of older ones. Checked on a copy of the harness beside the checkout (its node_modules a link to
// the checkout's, so the two share the cache directory, as a worktree with linked packages would): an edit
// to a module a verb loads is in the next call's output; an unchanged tree reuses the bundle; a removed
// bundle is built again; each module's import.meta is its source file's (the version comes from the
// copy's package.json); a source esbuild cannot build runs through tsx, which names the file.

import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let copy = '';
const builds = new Set<string>();

beforeAll(() => {
  copy = mkdtempSync(join(tmpdir(), 'hil-cli-cache-'));
  cpSync(join(ROOT, 'harness'), join(copy, 'harness'), { recursive: true });
  // The sources the command imports: the harness, and the contract modules it shares with the suites.
  cpSync(join(ROOT, 'fixtures', 'contract'), join(copy, 'fixtures', 'contract'), { recursive: true });
  for (const f of ['tsconfig.json', 'package.json']) cpSync(join(ROOT, f), join(copy, f));
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
});
afterAll(() => {
  // The copy's builds and pointer live in the checkout's cache directory (through the link).
  for (const b of builds) rmSync(dirname(b), { recursive: true, force: true });
  const cache = join(ROOT, 'node_modules', '.cache', 'hil-cli');
  for (const e of existsSync(cache) ? (spawnSync('ls', [cache], { encoding: 'utf8' }).stdout.split('\n') as string[]) : []) {
    if (!e.startsWith('current-')) continue;
    try {
      if ((JSON.parse(readFileSync(join(cache, e), 'utf8')) as { root?: string }).root?.startsWith(copy)) rmSync(join(cache, e), { force: true });
    } catch {
      // another test's pointer being replaced
    }
  }
  if (copy) rmSync(copy, { recursive: true, force: true });
});

/** `hil ARGS` of the copy; which bundle it ran (or none), and whether it built one. */
function hil(...args: string[]): { status: number | null; stdout: string; stderr: string; built: boolean; bundle: string | undefined } {
  const env: NodeJS.ProcessEnv = { ...process.env, HIL_CLI_TRACE: '1' };
  delete env.HIL_CLI_BUNDLE;
  const r = spawnSync(process.execPath, [join(copy, 'harness', 'bin', 'hil.mjs'), ...args], { cwd: copy, env, encoding: 'utf8' });
  const bundle = /^hil: bundle (\/\S+cli\.js)$/m.exec(r.stderr)?.[1];
  if (bundle) builds.add(bundle);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, built: /^hil: bundle building$/m.test(r.stderr), bundle };
}

function edit(rel: string, from: string, to: string): void {
  const file = join(copy, rel);
  const text = readFileSync(file, 'utf8');
  expect(text).toContain(from);
  writeFileSync(file, text.replace(from, to));
}

test('an edited source is in the next call, an unchanged tree reuses the bundle, a removed bundle is built again', () => {
  const first = hil('--help');
  expect(first.status).toBe(0);
  expect(first.stdout).toMatch(/^usage: hil <command> \[options\]\n/);
  expect(first.bundle).toBeDefined();
  expect(first.bundle!.startsWith(join(copy, 'node_modules', '.cache', 'hil-cli', 'build-'))).toBe(true);

  const again = hil('--help');
  expect(again.built).toBe(false);
  expect(again.bundle).toBe(first.bundle);
  expect(again.stdout).toBe(first.stdout);

  // help.ts is loaded lazily, from a chunk of its own: the edit must still reach the output.
  edit('harness/cli/help.ts', 'usage: hil <command> [options]', 'usage: hil <command> [options] (edited)');
  const edited = hil('--help');
  expect(edited.built).toBe(true);
  expect(edited.bundle).not.toBe(first.bundle);
  expect(edited.stdout).toMatch(/^usage: hil <command> \[options\] \(edited\)\n/);

  // A module every verb loads: the usage error's wording.
  edit('harness/cli.ts', 'throw new UsageError(`unknown command ${cmd}`);', 'throw new UsageError(`no such command ${cmd}`);');
  const unknown = hil('frobnicate');
  expect(unknown.built).toBe(true);
  expect(unknown.status).toBe(2);
  expect(unknown.stderr).toContain('hil: no such command frobnicate');

  rmSync(dirname(unknown.bundle!), { recursive: true, force: true });
  const rebuilt = hil('frobnicate');
  expect(rebuilt.built).toBe(true);
  expect(rebuilt.stderr).toContain('hil: no such command frobnicate');
  expect(existsSync(rebuilt.bundle!)).toBe(true);
});

test("each module's import.meta.url is its source file's: the version is read from the copy's package.json", () => {
  const pkg = JSON.parse(readFileSync(join(copy, 'package.json'), 'utf8')) as { version: string };
  writeFileSync(join(copy, 'package.json'), JSON.stringify({ ...pkg, version: '9.8.7-copy' }));
  const r = hil('--version');
  expect(r.status).toBe(0);
  expect(r.bundle).toBeDefined();
  expect(r.stdout).toMatch(/^hil 9\.8\.7-copy\b/);
});

test('a source esbuild cannot build runs through tsx, which reports the file; fixed, the next call bundles again', () => {
  const file = join(copy, 'harness', 'cli', 'help.ts');
  const good = readFileSync(file, 'utf8');
  writeFileSync(file, `${good}\nexport const broken = ;\n`);
  const r = hil('--help');
  expect(r.built).toBe(true);
  expect(r.stderr).toContain('hil: bundle none: through tsx');
  expect(r.status).not.toBe(0);
  expect(r.stderr).toContain('help.ts');
  writeFileSync(file, good);
  const fixed = hil('--help');
  expect(fixed.status).toBe(0);
  expect(fixed.bundle).toBeDefined();
});
