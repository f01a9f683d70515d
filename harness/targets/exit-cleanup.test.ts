// exit-cleanup.ts in a process of its own: what it made and started is gone once it exits without its
// orderly stops (process.exit, as a worker does when its run's IPC channel closes), and what was removed
// in order is not touched again.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, test } from 'vitest';
import { pidAlive } from '../pid-alive.ts';

const MODULE = fileURLToPath(new URL('./exit-cleanup.ts', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'hil-exit-cleanup-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));


test('at exit the directories still made are removed after the hosts still running are killed; one removed before stays removed', () => {
  const script = `
    import { spawn } from 'node:child_process';
    import { writeFileSync } from 'node:fs';
    import { join } from 'node:path';
    const { makeTempDir, removeTempDir, killAtExit, leftAtExit } = await import(${JSON.stringify(MODULE)});
    const kept = await makeTempDir('hil-sim-');
    writeFileSync(join(kept, 'serve.lock'), 'x');
    const removed = await makeTempDir('hil-planner-');
    await removeTempDir(removed);
    const host = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)'], { stdio: 'ignore' });
    killAtExit(host);
    const ended = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
    killAtExit(ended);
    await new Promise((r) => ended.once('exit', r));
    console.log(JSON.stringify({ kept, removed, host: host.pid, left: leftAtExit() }));
    process.exit(0);
  `;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, TMPDIR: scratch }, timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { kept: string; removed: string; host: number; left: { dirs: string[]; children: number } };
  // Before the exit: the kept directory and the running host were left, the ended child forgotten.
  expect(out.left).toEqual({ dirs: [out.kept], children: 1 });
  expect(out.kept.startsWith(join(scratch, 'hil-sim-'))).toBe(true);
  expect(existsSync(out.kept)).toBe(false);
  expect(existsSync(out.removed)).toBe(false);
  expect(readdirSync(scratch).filter((f) => f.startsWith('hil-'))).toEqual([]); // tsx keeps its cache there too
  // SIGKILL was sent before the exit; the kernel reaps it a moment later.
  const until = Date.now() + 5_000;
  while (pidAlive(out.host) && Date.now() < until) spawnSync('sleep', ['0.05']);
  expect(pidAlive(out.host)).toBe(false);
});
