// The stack host's own bookkeeping (sims/sessions.ts): a session's environment is set for it and taken back
// exactly, and what a session leaves running is told by kind and count. The sessions themselves are tested
// through the harness's hosts (harness/targets/program-host.test.ts).

import { afterEach, expect, test } from 'vitest';
import { writeFile, unlink, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leftBehind, overlayEnv, settled } from './sessions.ts';

const KEYS = ['HIL_SESSIONS_TEST_A', 'HIL_SESSIONS_TEST_B'];
afterEach(() => {
  for (const k of KEYS) delete process.env[k];
});

test('a session\'s environment is set for it and taken back: a value it replaced comes back, one it added goes', () => {
  process.env.HIL_SESSIONS_TEST_A = 'before';
  const restore = overlayEnv({ HIL_SESSIONS_TEST_A: 'session', HIL_SESSIONS_TEST_B: 'added' });
  expect(process.env.HIL_SESSIONS_TEST_A).toBe('session');
  expect(process.env.HIL_SESSIONS_TEST_B).toBe('added');
  restore();
  expect(process.env.HIL_SESSIONS_TEST_A).toBe('before');
  expect('HIL_SESSIONS_TEST_B' in process.env).toBe(false);
});

test('what a session left running is counted by kind: one more timer of a kind already there is one left behind', async () => {
  const before = process.getActiveResourcesInfo();
  expect(leftBehind(before)).toEqual([]);
  const t1 = setTimeout(() => undefined, 60_000);
  const t2 = setTimeout(() => undefined, 60_000);
  try {
    expect(leftBehind(before).filter((r) => r === 'Timeout')).toEqual(['Timeout', 'Timeout']);
    // Taken as the baseline, the same two are not left behind.
    expect(leftBehind(process.getActiveResourcesInfo())).toEqual([]);
  } finally {
    clearTimeout(t1);
    clearTimeout(t2);
  }
  expect(leftBehind(before)).toEqual([]);
});

test('a file request the stop awaited last is not left behind, and is not waited for with a timed wait: only what stays running is', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'hil-sessions-'));
  try {
    await new Promise<void>((r) => setImmediate(r)); // the directory's own request gone from the list first
    const before = process.getActiveResourcesInfo();
    await writeFile(join(dir, 'lock'), 'x');
    await unlink(join(dir, 'lock'));
    // Resolved, but still listed until the event loop turns (what every session stop ended with).
    expect(leftBehind(before)).toContain('FSReqPromise');
    const sleeps: number[] = [];
    const sleep = (ms: number) => {
      sleeps.push(ms);
      return new Promise<void>((r) => setTimeout(r, ms));
    };
    expect(await settled(before, sleep)).toEqual([]);
    expect(sleeps).toEqual([]);
    // What stays (a listening socket) is left behind after every timed wait.
    const { createServer } = await import('node:net');
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      expect(await settled(before, sleep)).toContain('TCPServerWrap');
      expect(sleeps.length).toBeGreaterThan(1);
    } finally {
      await new Promise((r) => server.close(r));
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

/** A host whose `hil serve` is a stand-in: a session whose first argument is `leak` leaves an interval running. */
const FAKE_HOST = `
import { runSessions } from './sims/sessions.ts';
runSessions(async (argv, runner) => {
  const timer = setInterval(() => undefined, 60_000);
  const r = runner(async () => { if (argv[0] !== 'leak') clearInterval(timer); }, { name: 'fake' });
  r.ready('{}');
  return -1;
}, { name: 'fake sessions' });
`;

test('a session that leaves something running is told on standard output before the stop\'s answer, a clean one is not (the harness then uses that host no more)', async () => {
  const { spawn } = await import('node:child_process');
  const { fileURLToPath } = await import('node:url');
  const root = fileURLToPath(new URL('..', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', FAKE_HOST], { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  const waiters: Array<() => void> = [];
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    for (const w of waiters.splice(0)) w();
  });
  /** The lines so far, once `n` stops have been answered. */
  const afterStops = async (n: number) => {
    while (out.split('\n').filter((l) => l === 'stopped').length < n) await new Promise<void>((r) => waiters.push(r));
    return out.split('\n').slice(0, -1);
  };
  try {
    child.stdin.write('{"t":"start","args":["clean"]}\n{"t":"stop"}\n');
    expect(await afterStops(1)).toEqual(['ready {}', 'stopped']);
    child.stdin.write('{"t":"start","args":["leak"]}\n{"t":"stop"}\n');
    const got = await afterStops(2);
    expect(got).toHaveLength(5);
    expect(got[2]).toBe('ready {}');
    expect(got[3]).toMatch(/^left \[.*"Timeout".*\]$/);
    expect(got[4]).toBe('stopped');
  } finally {
    child.stdin.end();
    await new Promise((r) => child.once('exit', r));
  }
}, 30_000);
