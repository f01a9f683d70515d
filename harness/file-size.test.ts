// The file-size bound (docs/architecture.md "File size"): no non-test source file under harness/, sims/,
// drivers/ or suites/ holds more than 900 lines, the catalogue's data tables excepted.

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAX_LINES = 900;
/** The documents' rows, one after another: tables, not code with jobs. */
const DATA_TABLES = new Set(['harness/catalogue/doc1.ts', 'harness/catalogue/doc2.ts', 'harness/catalogue/doc3.ts']);

function* sources(root: string, dir: string): Generator<string> {
  for (const name of readdirSync(join(root, dir))) {
    if (name === 'node_modules') continue;
    const p = join(dir, name);
    if (statSync(join(root, p)).isDirectory()) yield* sources(root, p);
    else if (name.endsWith('.ts') && !name.endsWith('.test.ts')) yield p;
  }
}

/** Every file over the bound, as "path: N lines". */
export function oversized(root: string): string[] {
  const out: string[] = [];
  for (const top of ['harness', 'sims', 'drivers', 'suites']) {
    for (const f of sources(root, top)) {
      if (DATA_TABLES.has(f)) continue;
      const text = readFileSync(join(root, f), 'utf8');
      const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
      if (lines > MAX_LINES) out.push(`${relative(root, join(root, f))}: ${lines} lines`);
    }
  }
  return out.sort();
}

test('no non-test source file holds more than 900 lines, the catalogue data tables excepted', () => {
  expect(oversized(ROOT)).toEqual([]);
});

test('the check counts lines at the bound from both sides, and leaves tests and data tables alone', () => {
  const root = mkdtempSync(join(tmpdir(), 'hil-file-size-'));
  try {
    for (const d of ['harness/catalogue', 'sims/core', 'drivers', 'suites/x']) mkdirSync(join(root, d), { recursive: true });
    const lines = (n: number) => 'x\n'.repeat(n);
    writeFileSync(join(root, 'sims/core/at.ts'), lines(900));
    writeFileSync(join(root, 'sims/core/over.ts'), lines(901));
    writeFileSync(join(root, 'drivers/no-final-newline.ts'), lines(900) + 'x');
    writeFileSync(join(root, 'suites/x/big.test.ts'), lines(2000));
    writeFileSync(join(root, 'harness/catalogue/doc1.ts'), lines(2000));
    writeFileSync(join(root, 'harness/catalogue/rows.ts'), lines(901));
    expect(oversized(root)).toEqual(['drivers/no-final-newline.ts: 901 lines', 'harness/catalogue/rows.ts: 901 lines', 'sims/core/over.ts: 901 lines']);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
