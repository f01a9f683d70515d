// hil fuzz writes its own record (reports/fuzz.json) and leaves a run record alone unless told to attach
// its figures to it (--attach RUN.json): the last run.json may be any earlier, unrelated run.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';

// hil fuzz runs in this process (harness/cli/in-process.ts): what it writes and answers is not a property
// of a process, and each spawned hil would start tsx again. Its reports directory is read once, when the
// command's modules load (harness/cli/common.ts DEFAULT_REPORTS), so it is set before they are imported.
const dir = mkdtempSync(join(tmpdir(), 'hil-fuzz-attach-'));
process.env.HIL_REPORTS_DIR = dir;
const { hilInProcess } = await import('./cli/in-process.ts');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const fuzz = (...args: string[]) => hilInProcess(['fuzz', '--minutes', '0.02', '--commands', '10', '--seed', '7', ...args]);

test('without --attach the run record is untouched and fuzz.json is the fuzz run\'s own record; --attach names a record that must exist', { timeout: 400_000 }, async () => {
  const runJson = join(dir, 'run.json');
  // --attach names a file that is not there: refused before anything runs.
  const missing = await fuzz('--attach', join(dir, 'nope.json'));
  expect(missing.status).toBe(2);
  expect(missing.stderr).toContain('no such run record');
  // Attached to a record that is not a run record: refused with the reason, the file left as it was.
  const before = '{"schema":"cell-hil.run.v3","note":"an unrelated earlier run"}';
  writeFileSync(runJson, before);
  const bad = await fuzz('--attach', runJson);
  expect(bad.status, bad.stdout + bad.stderr).toBe(0);
  expect(bad.stderr).toContain('run.json not updated: the record would not match run.schema.json');
  expect(readFileSync(runJson, 'utf8')).toBe(before);
  const valid = JSON.stringify({
    schema: 'cell-hil.run.v3',
    command: 'hil run --target sim',
    started_at: '2026-11-29T01:00:00.000Z',
    finished_at: '2026-11-29T01:01:00.000Z',
    target: { name: 'sim', driver: 'sim', address: '/tmp/x/control.sock', simulated: true },
    environment: { machine_sha256: '', configuration_sha256: '', deployment_sha256: '', package_version: '0.1.0', git_revision: 'unknown', node: 'v20', platform: 'linux x64', hostname: 'h' },
    tests: [],
    coverage: [],
    summary: { passed: 0, failed: 0, skipped: 0, errored: 0, duration_ms: 0 },
    gate: { ok: true, problems: [] },
    run_measurements: { measurements: [] },
  });
  // A real run record: untouched without --attach (a fuzz that attached to any valid run.json it found
  // would change it here), and fuzz.json the fuzz run's own record.
  writeFileSync(runJson, valid);
  const r = await fuzz();
  expect(r.status, r.stdout + r.stderr).toBe(0);
  expect(readFileSync(runJson, 'utf8')).toBe(valid);
  const own = JSON.parse(readFileSync(join(dir, 'fuzz.json'), 'utf8')) as Record<string, unknown>;
  expect(own.schema).toBe('cell-hil.fuzz.v1');
  expect(own.command).toBe('hil fuzz --minutes 0.02 --commands 10 --seed 7');
  expect((own.seeds as number[])[0]).toBe(7);
  expect(own.passed).toBe(true);
  expect(String(own.git_revision)).toMatch(/^([0-9a-f]{40}(\+dirty)?|unknown)$/);
  expect(r.stdout).toContain('(hil fuzz --attach RUN.json adds the figures to a run\'s report)');
  // With --attach: the figures under model.fuzz, the rest of the record as it was.
  const attached = await fuzz('--attach', runJson);
  expect(attached.status, attached.stderr).toBe(0);
  const rec = JSON.parse(readFileSync(runJson, 'utf8')) as { model?: { fuzz?: { seeds: number[]; passed: boolean } }; command: string };
  expect(rec.model?.fuzz?.seeds[0]).toBe(7);
  expect(rec.model?.fuzz?.passed).toBe(true);
  expect(rec.command).toBe('hil run --target sim');
});
