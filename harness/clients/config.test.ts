// The compiler client (harness/clients/config.ts): a compiler the harness ended at its own time bound is
// the host's slowness (ERROR HIL_ERR_HOST_TOO_SLOW with the figures), never a malformed batch (FAIL): the
// documents give the compiler no time limit, so its cut-off output says nothing about it.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { verdictOfError } from '../errors.ts';
import { compileMany, hilConfig, MACHINES } from './config.ts';

test('a compiler ended at the harness bound is HIL_ERR_HOST_TOO_SLOW (ERROR) with the figures, not a malformed batch', async () => {
  const out = mkdtempSync(join(tmpdir(), 'hil-config-bound-'));
  try {
    const files = ['nine-axis', 'bench-two-axis'].map((m) => join(MACHINES, `${m}.json`));
    // 1 ms: the process cannot even start its runtime before the bound.
    const e = await compileMany(files, out, 1).catch((x: unknown) => x);
    expect((e as { code?: string }).code).toBe('HIL_ERR_HOST_TOO_SLOW');
    expect(verdictOfError(e)).toBe('error');
    expect(String((e as Error).message)).toMatch(/ended by the harness after \d+ ms .* with 0 of 2 files done/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('hilConfig says when it ended the compiler itself, and not otherwise', async () => {
  const killed = await hilConfig(['--help'], 1);
  expect(killed.killedAfterMs).toBeGreaterThanOrEqual(0);
  const help = await hilConfig(['--help']);
  expect(help.killedAfterMs).toBeUndefined();
  expect(help.code).toBe(0);
});
