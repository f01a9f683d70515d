// The order in which conformance files go to the shared pool (harness/sequencer.ts).

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { BUSY_NICE, fileNice, JOG_NICE, QUIET_NICE } from './priority.ts';
import { busyCores, childrenCpuSeconds, cpuJiffies, DURATION_MS, durations, hostLoadNow, LONG_TIER_MS, othersBusy, JOG_FILES, LAST_BESIDE, LAST_FILES, longestFirst, QUIET_FILES, workersForHost } from './sequencer.ts';

const ROOT = join(import.meta.dirname, '..');

test('every file with a duration figure exists, and every quiet, jog or last file is a suite file', () => {
  for (const f of [...Object.keys(DURATION_MS), ...Object.keys(LONG_TIER_MS), ...QUIET_FILES, ...JOG_FILES, ...LAST_FILES]) expect(existsSync(join(ROOT, f)), f).toBe(true);
});

test('quiet files first, then jog, then the rest heaviest first (unknown files in the order vitest gave), the upload last', () => {
  const project = { name: 'conformance', config: { root: ROOT } };
  const spec = (f: string) => ({ project, moduleId: join(ROOT, f) });
  // vitest's order: any
  const files = [
    spec('suites/trajectory/upload.test.ts'),
    spec('suites/grant/grant.test.ts'),
    spec('suites/telemetry/busy.test.ts'),
    spec('suites/events/other.test.ts'),
    spec('suites/jog/jog.test.ts'),
    spec('suites/planner/cancel.test.ts'),
    spec('suites/olp/execution.test.ts'),
    spec('suites/observation/keepalive.test.ts'),
  ];
  expect(longestFirst(files).map((s) => s.moduleId.slice(ROOT.length + 1))).toEqual([
    'suites/observation/keepalive.test.ts',
    'suites/telemetry/busy.test.ts',
    'suites/jog/jog.test.ts',
    'suites/olp/execution.test.ts',
    'suites/planner/cancel.test.ts',
    'suites/grant/grant.test.ts',
    'suites/events/other.test.ts',
    'suites/trajectory/upload.test.ts',
  ]);
});

test('in the order files go out, their nice values never go down: a worker, which takes the next file when it is free, only ever lowers its priority', () => {
  const project = { name: 'conformance', config: { root: ROOT } };
  const suites = readdirSync(join(ROOT, 'suites'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => `suites/${f.split('\\').join('/')}`)
    .sort()
    .reverse(); // an order vitest might give, the quiet and jog files not first
  expect(suites.length).toBeGreaterThan(3 * LAST_BESIDE); // a whole run: the upload goes out before the end
  const out = longestFirst(suites.map((f) => ({ project, moduleId: join(ROOT, f) }))).map((s) => s.moduleId.slice(ROOT.length + 1));
  const nice = out.map(fileNice);
  expect(nice.slice(0, QUIET_FILES.length + JOG_FILES.length)).toEqual([...QUIET_FILES.map(() => QUIET_NICE), ...JOG_FILES.map(() => JOG_NICE)]);
  for (let i = 1; i < nice.length; i++) expect(nice[i]!, `${out[i - 1]} then ${out[i]}`).toBeGreaterThanOrEqual(nice[i - 1]!);
  expect(fileNice('suites/trajectory/upload.test.ts')).toBe(BUSY_NICE);
});

test('in a whole run the upload goes out when the last LAST_BESIDE files of the rest remain, after every heavy file; one short of that many files keeps it last', () => {
  const busy = { name: 'conformance', config: { root: ROOT } };
  const spec = (f: string) => ({ project: busy, moduleId: join(ROOT, f) });
  const heavy = Object.keys(DURATION_MS).filter((f) => !QUIET_FILES.includes(f) && !JOG_FILES.includes(f) && !LAST_FILES.includes(f));
  const small = (n: number) => Array.from({ length: n }, (_, i) => `suites/small/s${String(i).padStart(2, '0')}.test.ts`);
  const name = (s: { moduleId: string }) => s.moduleId.slice(ROOT.length + 1);
  const whole = [...small(2 * LAST_BESIDE), ...heavy]; // the small files have no figure: they go out after the heavy ones
  const out = longestFirst([spec('suites/trajectory/upload.test.ts'), ...whole.map(spec)]).map(name);
  expect(out.length).toBe(whole.length + 1);
  expect(out.indexOf('suites/trajectory/upload.test.ts')).toBe(whole.length - LAST_BESIDE);
  for (const f of heavy) expect(out.indexOf(f), f).toBeLessThan(out.indexOf('suites/trajectory/upload.test.ts'));
  // A selection of fewer than 3 x LAST_BESIDE files besides it: the upload stays last.
  const fewer = small(3 * LAST_BESIDE - 1);
  expect(longestFirst([spec('suites/trajectory/upload.test.ts'), ...fewer.map(spec)]).map(name).at(-1)).toBe('suites/trajectory/upload.test.ts');
  expect(longestFirst([spec('suites/trajectory/upload.test.ts'), ...small(3 * LAST_BESIDE).map(spec)]).map(name).at(-1)).not.toBe('suites/trajectory/upload.test.ts');
});

test('workers fit the host: 2 per core when idle, fewer as the load takes the cores, never fewer than 2', () => {
  expect(workersForHost(2, 0)).toBe(4); // the figure measured on this 2-core machine
  expect(workersForHost(2, 1)).toBe(3);
  expect(workersForHost(2, 2)).toBe(2); // two busy loops beside the run
  expect(workersForHost(2, 14)).toBe(2); // the loaded shared host: at least 2
  expect(workersForHost(8, 0)).toBe(16);
  expect(workersForHost(8, 8)).toBe(8);
  expect(workersForHost(8, 40)).toBe(5); // a third of 16
  expect(workersForHost(1, 0)).toBe(2);
  expect(workersForHost(1, 5)).toBe(2);
});

test('the load now is the busy share of the cores between two /proc/stat readings; idle and iowait are not busy', () => {
  const stat = (user: number, idle: number, iowait = 0) => `cpu  ${user} 0 0 ${idle} ${iowait} 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n`;
  // 100 jiffies passed, 50 of them busy: one of two cores.
  expect(busyCores(stat(1000, 5000), stat(1050, 5050), 2)).toBe(1);
  // All idle or waiting on I/O: nothing busy, whatever the load average says.
  expect(busyCores(stat(1000, 5000, 10), stat(1000, 5080, 30), 2)).toBe(0);
  expect(busyCores(stat(1000, 5000), stat(1100, 5000), 2)).toBe(2);
  // Readings that say nothing (no time passed, no cpu line) give undefined, and the caller keeps the load average.
  expect(busyCores(stat(1000, 5000), stat(1000, 5000), 2)).toBeUndefined();
  expect(busyCores('intr 1 2\n', stat(1000, 5000), 2)).toBeUndefined();
  expect(cpuJiffies(stat(7, 3, 2))).toEqual({ busy: 7, total: 12 });
});

test("the run's own start-up is not the host's load: its CPU over the window is taken out of the busy cores", () => {
  const stat = (user: number, idle: number) => `cpu  ${user} 0 0 ${idle} 0 0 0 0 0 0\n`;
  // Over 0.5 s, 100 jiffies on 2 cores, 75 busy: 1.5 cores; this process used 0.5 s of CPU (one core), so
  // others kept half a core busy.
  expect(othersBusy(stat(1000, 5000), stat(1075, 5025), 2, 0.5, 0.5)).toBe(0.5);
  // Its own work alone: nothing else busy (never below zero, whatever the two clocks' rounding).
  expect(othersBusy(stat(1000, 5000), stat(1050, 5050), 2, 0.55, 0.5)).toBe(0);
  expect(othersBusy(stat(1000, 5000), stat(1000, 5000), 2, 0, 0.5)).toBeUndefined();
  expect(othersBusy(stat(1000, 5000), stat(1050, 5050), 2, 0, 0)).toBeUndefined();
});

test("the window starts at the command's own start sample (harness/bin/hil.mjs) when there is one", () => {
  // A start sample that cannot be read leaves the load average: the sample taken at the start was used, not one
  // taken now. One read long enough ago is not waited for again.
  expect(hostLoadNow(2, 7.5, 400, { stat: 'intr 1 2\n', at: performance.now() - 1000, own: process.cpuUsage() })).toBe(7.5);
  // A real window: a sample, 450 ms, then the reading: a number of busy cores from the host's counters.
  const start = { stat: readFileSync('/proc/stat', 'utf8'), at: performance.now(), own: process.cpuUsage() };
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 450);
  const now = hostLoadNow(2, 7.5, 400, start);
  expect(now).toBeGreaterThanOrEqual(0);
  expect(now).toBeLessThanOrEqual(2);
});

test('childrenCpuSeconds: the children it waited for (its cutime and cstime) and the ones still running (theirs, whole), not other processes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hil-proc-'));
  try {
    // stat fields after "(comm) ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime ...
    const stat = (pid: number, comm: string, ppid: number, [ut, st, cut, cst]: number[]) => `${pid} (${comm}) S ${ppid} 1 1 0 -1 0 0 0 0 0 ${ut} ${st} ${cut} ${cst} 20 0 1 0\n`;
    const put = (pid: number, text: string) => {
      mkdirSync(join(dir, String(pid)));
      writeFileSync(join(dir, String(pid), 'stat'), text);
    };
    put(100, stat(100, 'node', 1, [900, 90, 30, 20])); // itself: its own CPU does not count, its reaped children's 50 ticks do
    put(201, stat(201, 'esbuild) (x', 100, [40, 5, 3, 2])); // a child whose name holds ") (": 50 ticks
    put(202, stat(202, 'node', 100, [7, 3, 0, 0])); // a child: 10 ticks
    put(300, stat(300, 'node', 1, [500, 500, 0, 0])); // another process: not counted
    writeFileSync(join(dir, 'stat'), 'cpu  1 2 3 4\n'); // not a process
    expect(childrenCpuSeconds(100, dir)).toBeCloseTo(1.1, 10);
    expect(childrenCpuSeconds(999, dir)).toBe(0); // no such process
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.runIf(process.platform === 'linux')('childrenCpuSeconds: a child that spun 300 ms and was reaped adds about that much', async () => {
  const before = childrenCpuSeconds();
  const child = spawn(process.execPath, ['-e', 'const t = process.cpuUsage(); while ((process.cpuUsage(t).user + process.cpuUsage(t).system) < 300_000);'], { stdio: 'ignore' });
  await new Promise((r) => child.once('exit', r));
  expect(childrenCpuSeconds() - before).toBeGreaterThanOrEqual(0.25);
});

test.runIf(process.platform === 'linux')("the command's own children are its own work, not the host's load (the esbuild service bundling `hil`)", async () => {
  // A child spins through the whole window: the host's counters see at least most of a core busy.
  const child = spawn(process.execPath, ['-e', 'const end = Date.now() + 2000; while (Date.now() < end);'], { stdio: 'ignore' });
  try {
    await new Promise((r) => setTimeout(r, 100));
    const start = { stat: readFileSync('/proc/stat', 'utf8'), at: performance.now(), own: process.cpuUsage(), children: 0 };
    // Its CPU, as childrenCpuSeconds reads it at the end: more than the window could hold on two cores.
    expect(hostLoadNow(2, 7.5, 400, start, () => 5)).toBe(0);
    // Only what the children took inside the window counts: 5 s already at the start sample and 5 s at the end
    // is none, and the spinning child is then the host's load (subtracting the whole 5 s would clamp it to 0).
    const again = { stat: readFileSync('/proc/stat', 'utf8'), at: performance.now(), own: process.cpuUsage(), children: 5 };
    expect(hostLoadNow(2, 7.5, 400, again, () => 5)).toBeGreaterThan(0);
  } finally {
    child.kill('SIGKILL');
  }
});

test('with the long tier (HIL_LONG=1) its files are ordered and estimated by their long durations, otherwise by the daily ones', () => {
  const f = 'suites/remote/timeouts.test.ts';
  expect(durations({})[f]).toBe(DURATION_MS[f]);
  expect(durations({ HIL_LONG: '1' })[f]).toBe(LONG_TIER_MS[f]);
  expect(LONG_TIER_MS[f]).toBeGreaterThan(DURATION_MS[f]!);
  expect(durations({ HIL_LONG: '1' })['suites/olp/execution.test.ts']).toBe(DURATION_MS['suites/olp/execution.test.ts']);
});
