// A harness fault inside a test the target's expectation file lists as an expected failure leaves the run
// ERROR, not PASS (README "Verdicts"): `hil run --driver ethercat-fake --plant harness_fault@...` throws a
// TypeError at the start of the listed frozen-feedback test (fixtures/expectations/sim+ethercat-fake.json
// allows only SKIP there). The run exits 1 with verdict ERROR, the test is errored and not booked as expected,
// and the terminal names the set the file allows.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, test } from 'vitest';
import type { RunRecord } from './run-types.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LISTED = 'frozen feedback (stale PDO) shows pdo_fresh false and latches a fault';
const dir = mkdtempSync(join(tmpdir(), 'hil-planted-fault-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function hil(args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ['harness/bin/hil.mjs', ...args], { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  return { code, out };
}

test('a TypeError planted in the listed expected failure gives ERROR, exit 1, the test errored and not expected', async () => {
  const r = await hil(['run', '--driver', 'ethercat-fake', '--reports', dir, '--no-report', '--plant', `harness_fault@${LISTED}`, '--grep', 'frozen feedback', 'suites/machine/machine.test.ts']);
  const run = JSON.parse(readFileSync(join(dir, 'run.json'), 'utf8')) as RunRecord;
  const t = run.tests.find((x) => x.name === LISTED)!;
  expect(t, r.out.slice(-2000)).toBeDefined();
  expect(t.state).toBe('errored');
  expect(t.expected_failure).toBeUndefined();
  expect(t.expected_outcomes).toEqual(['SKIP']);
  expect(t.errors?.[0]).toMatch(/^TypeError: planted harness fault/);
  expect(r.code).toBe(1);
  expect(r.out).toMatch(/\nverdict: ERROR/);
  expect(r.out).toContain(`ERROR suites/machine/machine.test.ts > faults and recovery > ${LISTED}`);
  expect(r.out).toContain('the expectation file allows SKIP here');
  expect(r.out).not.toMatch(/expected failure/);
}, 240_000);
