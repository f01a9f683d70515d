// The run's bundle directories (reference.ts prebuildReference) of runs that have gone are removed by the
// next run (pruneBundles): Ctrl-C, SIGKILL or a crash leaves its ~11 MB behind, and a run beside this one
// keeps its own.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { pruneBundles } from './reference.ts';

const parent = mkdtempSync(join(tmpdir(), 'hil-bundles-'));
afterAll(() => rmSync(parent, { recursive: true, force: true }));

function bundle(name: string, owner: number | undefined, ageMs = 0): string {
  const dir = join(parent, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'main.js'), '');
  if (owner !== undefined) writeFileSync(join(dir, 'owner.pid'), `${owner}\n`);
  const t = (Date.now() - ageMs) / 1000;
  utimesSync(dir, t, t);
  return dir;
}

test('a bundle whose owner has gone is removed, and an unowned one past an hour; a running owner\'s, an unowned young one and what is not a bundle are kept', async () => {
  // A pid that was a process a moment ago and has ended.
  const ended = spawnSync(process.execPath, ['-e', '0']).pid!;
  const gone = bundle('run-gone', ended);
  const live = bundle('run-live', process.pid);
  const young = bundle('run-young', undefined, 60_000);
  const old = bundle('run-old', undefined, 2 * 3_600_000);
  const writing = bundle('run-writing', Number.NaN); // an owner file being written (no pid in it yet), young
  const other = bundle('keep-me', ended);
  expect((await pruneBundles(parent)).sort()).toEqual(['run-gone', 'run-old']);
  expect([gone, live, young, old, writing, other].map(existsSync)).toEqual([false, true, true, false, true, true]);
  // A parent that does not exist: nothing to do.
  expect(await pruneBundles(join(parent, 'none'))).toEqual([]);
});
