// What the A/B benches share (bench/conformance.bench.ts, bench/idle-core.bench.ts): an earlier
// revision's tree to measure beside this checkout, and the median of a round's figures.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * REV's tree extracted with `git archive` into a temporary directory (the caller removes it), sharing this
 * checkout's node_modules. Refused when REV's lockfile differs: the baseline would not be what REV ran.
 */
export function baselineTree(rev: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'hil-bench-base-'));
  execFileSync('sh', ['-c', `git -C "${ROOT}" archive "${rev}" | tar -x -C "${dir}"`]);
  const lock = (d: string) => readFileSync(join(d, 'package-lock.json'), 'utf8');
  if (lock(dir) !== lock(ROOT)) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`the lockfile of ${rev} differs from this checkout's: install the baseline's own packages and compare by hand`);
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

/** The median (the mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
