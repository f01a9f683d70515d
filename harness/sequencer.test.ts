// The order in which conformance files go to the shared pool (harness/sequencer.ts).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { busyCores, cpuJiffies, DURATION_MS, JOG_FILES, LAST_BESIDE, LAST_FILES, longestFirst, QUIET_FILES, workersForHost } from './sequencer.ts';

const ROOT = join(import.meta.dirname, '..');

test('every file with a duration figure exists, and every quiet, jog or last file is a suite file', () => {
  for (const f of [...Object.keys(DURATION_MS), ...QUIET_FILES, ...JOG_FILES, ...LAST_FILES]) expect(existsSync(join(ROOT, f)), f).toBe(true);
});

test('quiet files first, then jog, then the rest heaviest first (unknown files in the order vitest gave), the upload last', () => {
  const project = (name: string) => ({ name, config: { root: ROOT } });
  const busy = project('conformance');
  const quiet = project('conformance-quiet');
  const jog = project('conformance-jog');
  const spec = (p: ReturnType<typeof project>, f: string) => ({ project: p, moduleId: join(ROOT, f) });
  // vitest's order: projects contiguous, files in any order within them
  const files = [
    spec(busy, 'suites/trajectory/upload.test.ts'),
    spec(busy, 'suites/grant/grant.test.ts'),
    spec(busy, 'suites/events/other.test.ts'),
    spec(busy, 'suites/planner/cancel.test.ts'),
    spec(busy, 'suites/remote/timeouts.test.ts'),
    spec(jog, 'suites/jog/jog.test.ts'),
    spec(quiet, 'suites/telemetry/busy.test.ts'),
    spec(quiet, 'suites/observation/keepalive.test.ts'),
  ];
  const out = longestFirst(files);
  expect(out.map((s) => `${s.project.name}:${s.moduleId.slice(ROOT.length + 1)}`)).toEqual([
    'conformance-quiet:suites/observation/keepalive.test.ts',
    'conformance-quiet:suites/telemetry/busy.test.ts',
    'conformance-jog:suites/jog/jog.test.ts',
    'conformance:suites/remote/timeouts.test.ts',
    'conformance:suites/planner/cancel.test.ts',
    'conformance:suites/grant/grant.test.ts',
    'conformance:suites/events/other.test.ts',
    'conformance:suites/trajectory/upload.test.ts',
  ]);
});

test('in a whole run the upload goes out when the last LAST_BESIDE files of the rest remain, after every heavy file; one short of that many files keeps it last', () => {
  const busy = { name: 'conformance', config: { root: ROOT } };
  const spec = (f: string) => ({ project: busy, moduleId: join(ROOT, f) });
  const heavy = Object.keys(DURATION_MS).filter((f) => !QUIET_FILES.includes(f) && !JOG_FILES.includes(f));
  const small = (n: number) => Array.from({ length: n }, (_, i) => `suites/small/s${String(i).padStart(2, '0')}.test.ts`);
  const name = (s: { moduleId: string }) => s.moduleId.slice(ROOT.length + 1);
  const whole = [...small(LAST_BESIDE), ...heavy]; // the small files have no figure: they go out after the heavy ones
  const out = longestFirst([spec('suites/trajectory/upload.test.ts'), ...whole.map(spec)]).map(name);
  expect(out.length).toBe(whole.length + 1);
  expect(out.indexOf('suites/trajectory/upload.test.ts')).toBe(whole.length - LAST_BESIDE);
  for (const f of heavy) expect(out.indexOf(f), f).toBeLessThan(out.indexOf('suites/trajectory/upload.test.ts'));
  // A selection of fewer than 3 x LAST_BESIDE files besides it: the upload stays last.
  const fewer = small(3 * LAST_BESIDE - 1);
  expect(longestFirst([spec('suites/trajectory/upload.test.ts'), ...fewer.map(spec)]).map(name).at(-1)).toBe('suites/trajectory/upload.test.ts');
  expect(longestFirst([spec('suites/trajectory/upload.test.ts'), ...small(3 * LAST_BESIDE).map(spec)]).map(name).at(-1)).not.toBe('suites/trajectory/upload.test.ts');
});

test('workers fit the host: 3 per core when idle, fewer as the load takes the cores, never fewer than 2', () => {
  expect(workersForHost(2, 0)).toBe(6); // the figure measured on this 2-core machine, quiet
  expect(workersForHost(2, 1)).toBe(5);
  expect(workersForHost(2, 2)).toBe(3); // two busy loops beside the run
  expect(workersForHost(2, 14)).toBe(2); // the loaded shared host: a third of 6, at least 2
  expect(workersForHost(8, 0)).toBe(24);
  expect(workersForHost(8, 8)).toBe(12);
  expect(workersForHost(1, 0)).toBe(3);
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
