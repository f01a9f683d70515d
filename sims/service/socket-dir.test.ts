// The socket directory's lock when two starts find the same stale lock (docs/profile.md "Sockets": one
// service per directory). Both judge it stale; the first replaces it with its own lock; the second must
// then meet that lock and be refused, not remove it and serve beside the first.

import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { LOCK_NAME, SocketDirRefused, takeSocketDir } from './socket-dir.ts';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

test('two starts that both judged a lock stale: the one that took it over keeps it, the other is refused and removes nothing', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'socket-dir-'));
  dirs.push(dir);
  // A lock left by an owner that is gone (a pid no process has).
  await writeFile(join(dir, LOCK_NAME), '2147483646 1\n');
  let reached!: () => void;
  const atTakeover = new Promise<void>((r) => (reached = r));
  let go!: () => void;
  const resume = new Promise<void>((r) => (go = r));
  // The late start read the stale lock and is about to take it over ...
  const late = takeSocketDir(dir, {
    beforeTakeover: async () => {
      reached();
      await resume;
    },
  }).then(
    (held) => ({ held }),
    (e: unknown) => ({ refused: e }),
  );
  await atTakeover;
  // ... when the other start takes it over first.
  const first = await takeSocketDir(dir);
  const firstLock = await readFile(join(dir, LOCK_NAME), 'latin1');
  expect(firstLock.split(' ')[0]).toBe(String(process.pid));
  go();
  const outcome = await late;
  if ('held' in outcome) await outcome.held.release();
  expect('refused' in outcome, 'the late start took over a lock that was no longer stale').toBe(true);
  const refused = (outcome as { refused: unknown }).refused;
  expect(refused).toBeInstanceOf(SocketDirRefused);
  expect((refused as Error).message).toBe(`socket directory ${dir} is served by another hil serve (pid ${process.pid}); stop it first or give another --socket-dir`);
  // The first start's lock is where it was, whole, and nothing else was left in the directory.
  expect(await readFile(join(dir, LOCK_NAME), 'latin1')).toBe(firstLock);
  expect(await readdir(dir)).toEqual([LOCK_NAME]);
  await first.release();
  expect(await readdir(dir)).toEqual([]);
});
