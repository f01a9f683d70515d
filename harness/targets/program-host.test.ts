// Program hosts (program-host.ts, sims/sessions.ts): sessions of `hil serve` one after another in one process.
// Each session is a whole stack of its own (its sockets, its adapter incarnation), a refused start says why
// with its status and leaves the host serving, a host that dies ends its session without a hang, and two
// stacks open at once run in two hosts. Planners and OLP servers are sessions of hosts of their own program.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, test } from 'vitest';
import { Cell } from '../clients/cell.ts';
import { ControlClient, type BindingInput } from '../clients/control.ts';
import { HarnessError } from '../errors.ts';
import { startStack } from './sim.ts';
import { hostingEnabled, sessionEnv, startHosted } from './program-host.ts';
import { openStubPlanner } from './spawn.ts';
import { startReferenceOlp } from './olp.ts';
import type { StackProcess } from './types.ts';

const open: StackProcess[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.stop()));
});

async function hosted(args: string[] = []): Promise<StackProcess> {
  const s = await startStack({ args: ['--test-channel', ...args], hosted: true });
  open.push(s);
  return s;
}

async function incarnation(s: StackProcess): Promise<string> {
  const c = new ControlClient(s.ready.control);
  try {
    const r = await c.describe();
    expect(r.status).toBe(200);
    return (r.reply.data as { adapter_incarnation: string }).adapter_incarnation;
  } finally {
    await c.close();
  }
}

async function answers(address: string): Promise<boolean> {
  const c = new ControlClient(address);
  try {
    await c.describe();
    return true;
  } catch {
    return false;
  } finally {
    await c.close();
  }
}

test('two stacks open at once run in two hosts, each a stack of its own; a stopped one no longer answers, and the next session reuses a host', async () => {
  const [a, b] = await Promise.all([hosted(), hosted()]);
  expect(a.ready.pid).not.toBe(b.ready.pid);
  expect(a.ready.control).not.toBe(b.ready.control);
  const [ia, ib] = await Promise.all([incarnation(a), incarnation(b)]);
  expect(ia).not.toBe(ib);
  await a.stop();
  expect(await answers(a.ready.control)).toBe(false);
  const c = await hosted();
  // The host a served its session in serves the next one: same process, a new stack.
  expect([a.ready.pid, b.ready.pid]).toContain(c.ready.pid);
  expect(await incarnation(c)).not.toBe(ia);
  expect(await answers(b.ready.control)).toBe(true);
});

test('a refused start rejects with the stack\'s status and its reason, and the host serves the next session', async () => {
  const first = await hosted();
  const pid = first.ready.pid;
  await first.stop();
  const refused = await startStack({ args: ['--clock', 'sundial'], hosted: true }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(refused).toBeInstanceOf(HarnessError);
  expect((refused as HarnessError).code).toBe('HIL_ERR_TARGET_START');
  expect((refused as HarnessError).detail).toMatchObject({ exit_code: 2 });
  expect((refused as HarnessError).message).toContain('--clock sundial: expected realtime, fast or stepped');
  const next = await hosted();
  expect(next.ready.pid).toBe(pid);
  await incarnation(next);
});

test('beginStop starts the orderly stop at once (the control socket stops answering); stop then waits for it', async () => {
  const s = await hosted();
  await incarnation(s);
  s.beginStop();
  for (let k = 0; k < 200 && (await answers(s.ready.control)); k++) await new Promise((r) => setTimeout(r, 10));
  expect(await answers(s.ready.control)).toBe(false);
  await s.stop();
});

test('a host that dies during its session: stop returns, and the next session starts in a new host', async () => {
  const s = await hosted();
  const dead = s.ready.pid;
  process.kill(dead, 'SIGKILL');
  await s.stop();
  const next = await hosted();
  expect(next.ready.pid).not.toBe(dead);
  await incarnation(next);
});

test('a session gets what changed in the harness\'s environment since its host started, and its own variables over both', () => {
  const host = { PATH: '/bin', KEPT: 'same', CHANGED: 'old' };
  const now = { PATH: '/bin', KEPT: 'same', CHANGED: 'new', ADDED: 'x', CELL_ANCHOR_DIR: '/harness' };
  expect(sessionEnv(host, now, { CELL_ANCHOR_DIR: '/stack/anchors' })).toEqual({ CHANGED: 'new', ADDED: 'x', CELL_ANCHOR_DIR: '/stack/anchors' });
});

/**
 * A grant asked for `leaseMs`: its deadline less the acquire's send and less its answer, ns (the stack
 * shares this host's monotonic clock; the service sets the deadline between the two).
 */
async function deadlineOf(s: StackProcess, leaseMs: bigint): Promise<{ afterSend: bigint; afterAnswer: bigint }> {
  const c = new ControlClient(s.ready.control);
  try {
    const binding = ((await c.describe()).reply.data as unknown as { binding: BindingInput }).binding;
    const cell = new Cell(c, binding);
    const sent = process.hrtime.bigint();
    const g = await cell.grant({ requested_lease_ms: leaseMs });
    const answered = process.hrtime.bigint();
    expect(g.grant.lease_ms).toBe(Number(leaseMs));
    await cell.cleanup();
    return { afterSend: g.grant.deadline_host_ns - sent, afterAnswer: g.grant.deadline_host_ns - answered };
  } finally {
    await c.close();
  }
}

test('a planted defect (HIL_STACK_DEFECT) is the session\'s own: a session given lease_ignored by a host started without it has it, the next session given none does not', async () => {
  const first = await hosted();
  const pid = first.ready.pid;
  // A correct stack: the deadline is the acquire's admission plus the lease (document 1 part 3), so no
  // later than the answer plus 400 ms.
  expect((await deadlineOf(first, 400n)).afterAnswer).toBeLessThanOrEqual(400_000_000n);
  await first.stop();
  const planted = await startStack({ args: ['--test-channel'], hosted: true, env: () => ({ HIL_STACK_DEFECT: 'lease_ignored' }) });
  open.push(planted);
  // The same host, started without the defect, serves this session.
  expect(planted.ready.pid).toBe(pid);
  // lease_ignored: the grant lives 10 s whatever lease it was given (sims/service/authority.ts stackDefects).
  expect((await deadlineOf(planted, 400n)).afterSend).toBeGreaterThanOrEqual(10_000_000_000n);
  await planted.stop();
  const after = await hosted();
  expect(after.ready.pid).toBe(pid);
  expect((await deadlineOf(after, 400n)).afterAnswer).toBeLessThanOrEqual(400_000_000n);
});

async function status(url: string): Promise<number | string> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(10_000) })).status;
  } catch (e) {
    return (e as Error).name;
  }
}

test('planners and OLP servers are sessions of hosts of their own program: the next one reuses the host, a stopped one no longer answers', async () => {
  const p1 = await openStubPlanner();
  const health = (u: string) => `${u}/api/motion/health`;
  expect(await status(health(p1.endpoint.url))).toBe(200);
  await p1.close();
  expect(await status(health(p1.endpoint.url))).not.toBe(200);
  const p2 = await openStubPlanner();
  try {
    expect(p2.endpoint.pid).toBe(p1.endpoint.pid);
    expect(await status(health(p2.endpoint.url))).toBe(200);
    // An OLP server with the stub planner beside it: an OLP host, not the idle planner host's process.
    const o1 = await startReferenceOlp({});
    const o1pid = o1.endpoint.pid;
    expect(o1pid).not.toBe(p2.endpoint.pid);
    expect(await status(`${o1.endpoint.url}/api/offline-programming/v1/robots`)).toBe(200);
    await o1.close();
    const o2 = await startReferenceOlp({ planner: 'none' });
    try {
      expect(o2.endpoint.pid).toBe(o1pid);
      expect(o2.endpoint.url).not.toBe(o1.endpoint.url);
      expect(await status(`${o2.endpoint.url}/api/offline-programming/v1/robots`)).toBe(200);
    } finally {
      await o2.close();
    }
  } finally {
    await p2.close();
  }
});

test('an OLP server session that refuses its arguments rejects with its status and reason, and its host serves the next', async () => {
  const before = await startReferenceOlp({ planner: 'none' });
  const host = before.endpoint.pid;
  await before.close();
  const e = await startHosted(['serve', '--listen', 'nowhere'], {}, 30_000, 'olp', 'OLP server').catch((x: unknown) => x);
  expect(e).toBeInstanceOf(HarnessError);
  expect((e as HarnessError).message).toMatch(/^HIL_ERR_TARGET_START: OLP server exited with code 2 before ready\n--listen must be HOST:PORT/);
  expect((e as HarnessError).detail).toMatchObject({ exit_code: 2 });
  const o = await startReferenceOlp({ planner: 'none' });
  try {
    expect(o.endpoint.pid).toBe(host);
    expect(await status(`${o.endpoint.url}/api/offline-programming/v1/robots`)).toBe(200);
  } finally {
    await o.close();
  }
});

test('HIL_STACK_HOST=off starts every stack as a process of its own', () => {
  expect(hostingEnabled({ HIL_STACK_HOST: 'off' })).toBe(false);
  expect(hostingEnabled({})).toBe(true);
});

/**
 * A worker's thread moves from one nice value to another between two sessions (harness/nice.ts, a file of
 * another priority), in a child process so that the test runner's own thread keeps its priority; each
 * session's host pid and the nice value of every thread of that host while the session runs. `drop`: the
 * process gives up root before the last step, so a host cannot be moved back up.
 */
function sessionsAcrossNice(steps: number[], drop: boolean) {
  const sim = JSON.stringify(fileURLToPath(new URL('./sim.ts', import.meta.url)));
  const code = [
    `import { readdirSync } from 'node:fs';`,
    `import { getPriority, setPriority } from 'node:os';`,
    `import { startStack } from ${sim};`,
    `const out = [];`,
    `const steps = ${JSON.stringify(steps)};`,
    `for (const [i, nice] of steps.entries()) {`,
    drop ? `  if (i === steps.length - 1) { process.setgid(65534); process.setuid(65534); }` : ``,
    `  let error = null;`,
    `  try { setPriority(nice); } catch (e) { error = e.info?.code ?? e.code; }`,
    `  const s = await startStack({ args: ['--test-channel'], hosted: true });`,
    `  const pid = s.ready.pid;`,
    `  const threads = readdirSync('/proc/' + pid + '/task').map((t) => { try { return getPriority(Number(t)); } catch { return null; } }).filter((n) => n !== null);`,
    `  out.push({ worker: getPriority(), error, pid, main: getPriority(pid), threads });`,
    `  await s.stop();`,
    `}`,
    `console.log(JSON.stringify(out));`,
    // The stack hosts end with this process (their standard input closes).
    `process.exit(0);`,
  ].join('\n');
  const c = spawnSync(process.execPath, ['--import', import.meta.resolve('tsx'), '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 120_000 });
  expect(c.status, c.stderr).toBe(0);
  return JSON.parse(c.stdout.trim().split('\n').at(-1)!) as Array<{ worker: number; error: string | null; pid: number; main: number; threads: number[] }>;
}

test.skipIf(process.platform !== 'linux')('an idle host serves the next session at the worker\'s new nice value, every thread that had the old value moved; a worker that cannot go back up keeps its stacks where it is', () => {
  const root = process.getuid?.() === 0;
  const r = sessionsAcrossNice([0, 7, ...(root ? [3] : [])], false);
  // One host for all: a file of another priority does not start a new one.
  expect(r.map((s) => s.pid)).toEqual(r.map(() => r[0]!.pid));
  expect(r.map((s) => s.worker)).toEqual(root ? [0, 7, 3] : [0, 7]);
  for (const s of r) {
    expect(s.main).toBe(s.worker);
    // No thread left at the value of an earlier step (those the stack sets itself, a core's raised
    // priority or a decoder's nice 10, hold neither).
    const earlier = r.slice(0, r.indexOf(s)).map((e) => e.worker);
    expect(s.threads.filter((n) => earlier.includes(n)), JSON.stringify(s)).toEqual([]);
    expect(s.threads.filter((n) => n === s.worker).length).toBeGreaterThan(2);
  }
  // Without the privilege to raise a priority: the worker stays at 7, and so does the stack its next file gets.
  const refused = sessionsAcrossNice([7, 0], root);
  expect(refused.map((s) => [s.worker, s.main, s.error])).toEqual([
    [7, 7, null],
    [7, 7, 'EACCES'],
  ]);
  expect(refused[1]!.threads).not.toContain(0);
}, 240_000);
