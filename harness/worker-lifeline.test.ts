// A run that dies leaves nothing running (harness/worker-lifeline.ts). Seen before it: `hil run | head -3`
// ended the run on its closed stdout just as a worker finished a file; that worker, idle, kept alive by a
// handle it held, and its stack host stayed up until somebody killed them.
//
// Here the run is a process that forks a worker the way vitest's forks pool does (an IPC channel), the
// worker holding a handle that keeps its event loop alive as a kept stack host does; the run is killed.

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pidAlive } from './pid-alive.ts';
import { afterAll, expect, test } from 'vitest';
import config from '../vitest.config.ts';

const LIFELINE = fileURLToPath(new URL('./worker-lifeline.ts', import.meta.url));
const started: number[] = [];
afterAll(() => {
  // Whatever the outcome, nothing this test started outlives it.
  for (const pid of started) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
});


/** Start a run that forks one worker (with the lifeline or without), wait for the worker, kill the run; is the worker still up 5 s on? */
async function workerOutlivesRun(withLifeline: boolean): Promise<boolean> {
  const worker = `${withLifeline ? `await import(${JSON.stringify(LIFELINE)});` : ''} setInterval(() => {}, 1000); process.send('up');`;
  const run = `const { spawn } = require('node:child_process');
    const w = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', ${JSON.stringify(worker)}], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    w.on('message', () => process.stdout.write(w.pid + '\\n'));`;
  const parent = spawn(process.execPath, ['-e', run], { stdio: ['ignore', 'pipe', 'inherit'] });
  started.push(parent.pid!);
  const pid = await new Promise<number>((done, fail) => {
    let out = '';
    parent.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.endsWith('\n')) done(Number(out.trim()));
    });
    parent.on('exit', (code) => fail(new Error(`the run ended (${code}) before its worker was up`)));
  });
  started.push(pid);
  parent.kill('SIGKILL');
  // A liveness bound, not a timing figure: the worker lets go as soon as its channel closes.
  const deadline = Date.now() + 5_000;
  while (pidAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  return pidAlive(pid);
}

test.skipIf(process.platform !== 'linux')('a worker whose run was killed ends, its handles notwithstanding; without the lifeline it stays', { timeout: 60_000 }, async () => {
  expect(await workerOutlivesRun(true)).toBe(false);
  // The control: the same worker without the setup file outlives its run (the defect this file is for).
  expect(await workerOutlivesRun(false)).toBe(true);
});

test('every vitest project loads the lifeline first', () => {
  const projects = (config.test?.projects ?? []) as { test: { name: string; setupFiles?: string[] } }[];
  expect(projects.map((p) => p.test.name)).toEqual(['unit', 'conformance', 'model']);
  for (const p of projects) expect(p.test.setupFiles?.[0], p.test.name).toBe('harness/worker-lifeline.ts');
});
