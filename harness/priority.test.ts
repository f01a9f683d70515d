// Nice values by file and how a worker and its stack hosts move between them (harness/priority.ts). The
// moves run in child processes, so that the test runner's own threads keep their priority.

import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { BUSY_NICE, fileNice, JOG_FILES, JOG_NICE, niceSpec, QUIET_FILES, QUIET_NICE } from './priority.ts';

const MODULE = JSON.stringify(fileURLToPath(new URL('./priority.ts', import.meta.url)));

test('the quiet files run at nice 0, jog at 5, every other file at 10', () => {
  for (const f of QUIET_FILES) expect(fileNice(f), f).toBe(QUIET_NICE);
  for (const f of JOG_FILES) expect(fileNice(f), f).toBe(JOG_NICE);
  expect(fileNice('suites/grant/grant.test.ts')).toBe(BUSY_NICE);
  expect(fileNice('suites/trajectory/upload.test.ts')).toBe(BUSY_NICE);
  expect([QUIET_NICE, JOG_NICE, BUSY_NICE]).toEqual([0, 5, 10]);
});

/** Run `body` (a module's text) under tsx with priority.ts imported as `p`; its last line of output, parsed. */
function inChild(body: string[], nice = 0): unknown {
  const code = [`import * as p from ${MODULE};`, `import { getPriority, setPriority } from 'node:os';`, ...body, `process.exit(0);`].join('\n');
  const c = spawnSync('nice', ['-n', String(nice), process.execPath, '--import', import.meta.resolve('tsx'), '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000 });
  expect(c.status, c.stderr).toBe(0);
  return JSON.parse(c.stdout.trim().split('\n').at(-1)!);
}

test('each file its own value on live runs, recorded ones included; a replayed run and a shared target every file at the worker\'s', () => {
  expect(niceSpec({})).toBe('file');
  expect(niceSpec({ HIL_RECORD_DIR: '/tmp/rec' })).toBe('file');
  expect(niceSpec({ HIL_RECORDINGS: '/tmp/rec' })).toBe('0');
  expect(niceSpec({}, true)).toBe('0');
  expect(niceSpec({}, false)).toBe('file');
});

test.skipIf(process.platform !== 'linux')('takeNice moves the calling thread to the wanted value, never below the one the process started at; going back up without privilege is refused and said', () => {
  const root = process.getuid?.() === 0;
  expect(inChild([`const a = p.takeNice(5); const b = p.takeNice(10); const c = p.takeNice(10);`, `console.log(JSON.stringify([a, b, c, getPriority()]));`])).toEqual([
    { from: 0, nice: 5 },
    { from: 5, nice: 10 },
    { from: 10, nice: 10 },
    10,
  ]);
  // A run started niced (nice -n 15 hil run): every file at 15 at least, whatever its own value.
  expect(inChild([`console.log(JSON.stringify([p.takeNice(0), p.takeNice(10), getPriority()]));`], 15)).toEqual([{ from: 15, nice: 15 }, { from: 15, nice: 15 }, 15]);
  // Back up from 10 to 0 (a quiet file after a busy one): with privilege it is taken; without, refused.
  if (root) expect(inChild([`p.takeNice(10);`, `console.log(JSON.stringify(p.takeNice(0)));`])).toEqual({ from: 10, nice: 0 });
  const dropped = [`p.takeNice(10);`, `process.setgid(65534); process.setuid(65534);`, `console.log(JSON.stringify(p.takeNice(0)));`];
  expect(inChild(root ? dropped : dropped.filter((l) => !l.startsWith('process.set')))).toEqual({ from: 10, nice: 10, error: 'EACCES' });
}, 120_000);

test.skipIf(process.platform !== 'linux')('reniceProcess moves every thread still at the old value and leaves a thread that set its own; refused, it throws', async () => {
  // A process at nice 2 whose worker thread set itself to 15 (as a decoder sets its own), then waits.
  const child = spawn(
    'nice',
    ['-n', '2', process.execPath, '-e', `const { Worker } = require('node:worker_threads'); new Worker("require('node:os').setPriority(0, 15); require('node:worker_threads').parentPort.postMessage(1); setInterval(() => {}, 1000)", { eval: true }).on('message', () => console.log('up')); setTimeout(() => {}, 60000);`],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    const threads = [`const ts = () => readdirSync('/proc/${child.pid}/task').map((t) => getPriority(Number(t))).sort((a, b) => a - b);`];
    const seen = inChild([`import { readdirSync } from 'node:fs';`, ...threads, `const before = ts(); p.reniceProcess(${child.pid}, 2, 9); console.log(JSON.stringify({ before, after: ts() }));`]) as { before: number[]; after: number[] };
    expect(seen.before.filter((n) => n === 15)).toEqual([15]);
    expect(seen.before.filter((n) => n !== 15).every((n) => n === 2)).toBe(true);
    expect(seen.after).toEqual(seen.before.map((n) => (n === 2 ? 9 : n)).sort((a, b) => a - b));
    // Another user's process (or, without privilege, back to a lower value): refused, and the caller is told.
    if (process.getuid?.() === 0) {
      const refused = inChild([`process.setgid(65534); process.setuid(65534);`, `try { p.reniceProcess(${child.pid}, 9, 12); console.log('null'); } catch (e) { console.log(JSON.stringify(e.info?.code ?? e.code)); }`]);
      expect(refused).toBe('EPERM');
    } else {
      const refused = inChild([`try { p.reniceProcess(${child.pid}, 9, 3); console.log('null'); } catch (e) { console.log(JSON.stringify(e.info?.code ?? e.code)); }`]);
      expect(refused).toBe('EACCES');
    }
  } finally {
    child.kill('SIGKILL');
  }
}, 120_000);
