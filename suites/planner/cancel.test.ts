// One plan at a time, fresh processes, cancellation (document 2 part 1, part 7 499, part 8): a client that
// goes away while its plan runs or while it waits gets 499 {"error": "Planning cancelled"} (read on the
// half-closed connection), and no trajectory is stored.
//
// The first block judges any planner by what a client sees: replies, their order and the progress route.
// Its plans are made long with valid input any planner must plan (a 600 s dwell: 60001 samples, about
// 9 MB of dense file to build, digest and store), plus the stub's stage hold (a delay after each stage that
// the test ends when it has seen what it waits for: toolkit.ts stageHold), which other planners ignore (an
// unknown extension). A planner that finishes before the client could hang up leaves the rule unjudged:
// the test skips and says so. "Nothing stored" is read in the dense store directory document 2
// part 4 documents (`--dense-store-dir`; HIL_PLANNER_STORE_DIR for a planner the harness did not start).
// The second block watches the stub's process groups through /proc (fresh process per plan, SIGTERM and the
// kill 2 s later), which only the planner the harness started can show.

import { connect } from 'node:net';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { afterEach } from 'vitest';
import { covers, describe, expect, inProfile } from '../../harness/fixture.ts';
import { planQueryString, type PlanQuery } from '../../harness/clients/planner.ts';
import { parseExact } from '../../harness/oracle/json.ts';
import { DENSE, needsStub, nodeById, obj, type Planner, plannerTest as test, stageHold, type StageHold, storeDirOf, usePlanner, weldplan } from './toolkit.ts';

const STAGES = ['sweep', 'weldseam', 'freespace seed', 'optimize', 'verify', 'dense'];

interface Proc {
  pid: number;
  ppid: number;
  pgid: number;
}

function procs(): Proc[] {
  const out: Proc[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // A zombie has ended; it only waits to be reaped (by init, for a reparented helper).
      if (f[0] !== 'Z' && f[0] !== 'X') out.push({ pid: Number(d), ppid: Number(f[1]), pgid: Number(f[2]) });
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

/**
 * The children of a process from its threads' /proc children lists (Linux with CONFIG_PROC_CHILDREN), or
 * undefined where the kernel has none: then a scan of every process answers instead. Cheaper than the
 * scan, which these tests otherwise repeat every few ms on a machine of hundreds of processes.
 */
function childrenOf(pid: number): number[] | undefined {
  try {
    const out: number[] = [];
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      for (const c of readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').split(' ')) if (c.trim() !== '') out.push(Number(c));
    }
    return out;
  } catch {
    return undefined;
  }
}

/** A process that has not ended (a zombie has: it only waits to be reaped). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Process groups led by children of the planner that have a helper beside the leader (a running hooked plan). */
function busyGroups(plannerPid: number): number[] {
  const kids = childrenOf(plannerPid);
  if (kids) {
    // While the leader runs, its helper is its child: a group of two or more is a leader with a running child.
    return kids.filter((k) => running(k) && (childrenOf(k) ?? []).some(running));
  }
  const all = procs();
  return all.filter((p) => p.ppid === plannerPid && p.pgid === p.pid && all.filter((q) => q.pgid === p.pid).length >= 2).map((p) => p.pid);
}
const groupAlive = (pgid: number) => procs().some((p) => p.pgid === pgid);

async function until<T>(what: string, f: () => T | undefined | Promise<T | undefined>, timeoutMs = 45_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    // Each look reads every /proc/<pid>/stat on the machine: 100 ms apart, well inside the 2 s kill grace.
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A plan over a raw TCP connection the test can half-close; the reply is read to the end. */
/**
 * The reply of a client that hung up. Document 2 part 1: the reply to a disconnected client is 499; whether a
 * client that only shut down its sending side can still read it is not shown. Ours writes it on the
 * half-closed connection (docs/profile.md "Weld planner: query and body", Disconnect); a planner that closes
 * the connection instead differs informatively, and any reply it does write must be the 499.
 */
async function expectCancelled(r: { status: number; body: unknown }): Promise<void> {
  await inProfile('profile:planner.half_close_reply', () => expect(r.status, 'a reply written on the half-closed connection').not.toBe(0));
  if (r.status !== 0) expect(r).toEqual({ status: 499, body: { error: 'Planning cancelled' } });
}

function rawPlan(p: Planner, bytes: Uint8Array, query: PlanQuery) {
  const url = new URL(p.url);
  const sock = connect(Number(url.port), url.hostname);
  const head = `POST /api/motion/plan${planQueryString(query)} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${bytes.length}\r\nConnection: close\r\n\r\n`;
  const sent = new Promise<void>((r) => sock.write(Buffer.concat([Buffer.from(head), bytes]), () => r()));
  const reply = new Promise<{ status: number; body: unknown }>((resolve, reject) => {
    const chunks: Buffer[] = [];
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.on('error', reject);
    sock.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
      const body = text.slice(text.indexOf('\r\n\r\n') + 4);
      resolve({ status: m ? Number(m[1]) : 0, body: body ? parseExact(body) : undefined });
    });
  });
  return { sent, reply, hangUp: () => sock.end() };
}

const slow = (delayMs: number, extra: Record<string, unknown> = {}) =>
  weldplan((q) => void (q.extensions = { weld_planner_stub: { stage_delay_ms: delayMs, helper_process: true, ...extra } }));
const storeFiles = (dir: string) => readdirSync(dir).filter((n) => n.endsWith('.rdt') || n.startsWith('.tmp')).sort();

/**
 * A long plan any planner must accept: the fixture with a dwell of 600 s (plus `cents` hundredths, so
 * each run's trajectory is new to a store that outlives the run), held on the stub at each stage by `hold`.
 */
const long = (cents: number, hold: StageHold) =>
  weldplan((q) => {
    q.nodes.splice(3, 0, { id: 'dwell-long', op: 'dwell', enabled: true, label: 'dwell-long', comment: '', row_hash: 'x', duration_s: 600 + cents / 100 });
    q.extensions = { weld_planner_stub: hold.hooks };
  });
/** The holds a test took, their release files removed after it. */
const holds: StageHold[] = [];
const held = (delayMs: number): StageHold => {
  const h = stageHold(delayMs);
  holds.push(h);
  return h;
};
afterEach(() => {
  for (const h of holds.splice(0)) h.close();
});
const fresh = () => Math.floor(Math.random() * 10_000);

/** Whether a reply came before `ms` (the plan ended before the client could act on it). */
async function settledWithin<T>(p: Promise<T>, ms: number): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true), () => (done = true));
  await new Promise((r) => setTimeout(r, ms));
  return done;
}

/** Polls progress until a stage is reported, or the reply `also` arrives first (then undefined). */
async function runningStage(p: Planner, also: Promise<unknown>, timeoutMs = 30_000): Promise<string | undefined> {
  let done = false;
  void also.then(() => (done = true), () => (done = true));
  const end = Date.now() + timeoutMs;
  while (!done && Date.now() < end) {
    const st = obj((await p.client.progress()).json).stage;
    if (typeof st === 'string') return st;
    await new Promise((r) => setTimeout(r, 20));
  }
  return undefined;
}

describe('cancellation and one plan at a time, judged by replies', () => {
  test('a client that hangs up while its plan runs gets 499 "Planning cancelled", and the planner plans on afterwards', covers('planner:plan.disconnect_cancels', 'planner:error.499_cancelled', 'field:PlannerProgress.stage', 'profile:planner.half_close_reply'), async ({ planner, skip }) => {
    const p = usePlanner({ skip }, planner);
    const store = storeDirOf(p);
    const before = store ? storeFiles(store) : [];
    const c = rawPlan(p, long(fresh(), held(800)), DENSE);
    await c.sent;
    const stage = await runningStage(p, c.reply);
    if (stage === undefined) skip(true, `the planner answered before it reported a stage: ${JSON.stringify(await c.reply).slice(0, 120)} (the plan was too short to hang up during it)`);
    c.hangUp();
    await expectCancelled(await c.reply);
    await until('progress back to null', async () => (obj((await p.client.progress()).json).stage === null) || undefined, 10_000);
    if (store) expect(storeFiles(store), 'a cancelled plan stores nothing').toEqual(before);
    // The planner is not left wedged: the next request plans.
    expect((await p.client.plan(weldplan(), DENSE)).status).toBe(200);
  });

  test('a cancelled plan never stores its trajectory (read in the documented store directory)', covers('planner:plan.cancelled_never_stores', 'planner:plan.disconnect_cancels', 'planner:dense.store_directory'), async ({ planner, skip }) => {
    const p = usePlanner({ skip }, planner);
    const store = storeDirOf(p);
    skip(!store, 'needs the planner\'s dense store directory (document 2 part 4 --dense-store-dir): set HIL_PLANNER_STORE_DIR');
    const hold = held(800);
    const bytes = long(fresh(), hold);
    const before = storeFiles(store!);
    const c = rawPlan(p, bytes, DENSE);
    await c.sent;
    if ((await runningStage(p, c.reply)) === undefined) skip(true, 'the planner answered before it reported a stage (the plan was too short to hang up during it)');
    c.hangUp();
    await expectCancelled(await c.reply);
    await until('progress back to null', async () => (obj((await p.client.progress()).json).stage === null) || undefined, 10_000);
    expect(storeFiles(store!), 'nothing stored, no temporary file left').toEqual(before);
    // The same request planned to the end names the file the cancelled plan would have stored: it was
    // not there after the cancellation, and it is there now (the directory is the one the planner uses).
    // Let go at each stage: the hold has done its part.
    hold.release();
    const done = await p.client.plan(bytes, DENSE);
    expect(done.status).toBe(200);
    const name = `sha256-${(obj(done.json).dense.trajectory_digest as string).slice(7)}.rdt`;
    expect(before).not.toContain(name);
    expect(storeFiles(store!)).toContain(name);
  });

  test('a request waiting behind a running plan can be cancelled: 499 at once, and the running plan completes', covers('planner:plan.one_at_a_time', 'planner:error.499_cancelled'), async ({ planner, skip }) => {
    const p = usePlanner({ skip }, planner);
    const hold = held(1500);
    const running = p.client.plan(long(fresh(), hold), DENSE);
    if ((await runningStage(p, running)) === undefined) skip(true, 'the first plan ended before it reported a stage (too short to queue behind)');
    const waiting = rawPlan(p, weldplan((q) => void (nodeById(q, 'weld-1').travel_speed_mm_s = 20)), DENSE);
    await waiting.sent;
    waiting.hangUp();
    // The waiting request is answered while the first still runs (it never started).
    const w = await waiting.reply;
    const firstDone = await settledWithin(running, 0);
    await expectCancelled(w);
    expect(firstDone, 'the 499 came before the running plan ended').toBe(false);
    hold.release();
    const done = await running;
    expect(done.status, done.text.slice(0, 200)).toBe(200);
    expect(obj(done.json).dense_error ?? null).toBeNull();
  });

  test('one plan at a time: a short request sent while a long one runs is answered after it', covers('planner:plan.one_at_a_time', 'limit:planner_concurrent_plans'), async ({ planner, skip }) => {
    const p = usePlanner({ skip }, planner);
    const order: string[] = [];
    // The short plan alone, timed here: the long one is let go only when the short one, sent behind it, has
    // had four times that (half a second at least). A planner that ran the two side by side would have
    // answered the short one by then; one that plans one at a time answers it after the long one.
    const t0 = performance.now();
    expect((await p.client.plan(weldplan(), DENSE)).status).toBe(200);
    const shortMs = performance.now() - t0;
    const hold = held(1000);
    const first = p.client.plan(long(fresh(), hold), DENSE).then((r) => (order.push('long'), r));
    if ((await runningStage(p, first)) === undefined) skip(true, 'the long plan ended before it reported a stage');
    const second = p.client.plan(weldplan(), DENSE).then((r) => (order.push('short'), r));
    await settledWithin(second, Math.max(500, 4 * shortMs));
    hold.release();
    const [a, b] = await Promise.all([first, second]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(order).toEqual(['long', 'short']);
  });
});

describe('cancellation and one plan at a time: the stub\'s processes', () => {
  test('a client that hangs up while its plan runs gets 499, the process group is gone and nothing is stored', covers('planner:plan.disconnect_cancels', 'planner:error.499_cancelled', 'planner:plan.cancelled_never_stores', 'planner:plan.fresh_process', 'field:PlannerProgress.stage'), async ({ planner, skip }) => {
    const p = usePlanner({ skip }, planner);
    needsStub({ skip }, p, 'watching planning processes');
    skip(!existsSync('/proc/self/stat'), 'needs /proc to see process groups');
    const before = storeFiles(p.storeDir!);
    const groups: number[] = [];
    for (const round of [1, 2]) {
      const c = rawPlan(p, slow(1500, { round }), DENSE);
      await c.sent;
      const stage = await until('a stage in progress', async () => (obj((await p.client.progress()).json).stage ?? undefined) as string | undefined);
      expect(STAGES).toContain(stage);
      const [g] = await until('the planning process group', () => (busyGroups(p.pid!).length === 1 ? busyGroups(p.pid!) : undefined));
      expect(g).not.toBe(p.pid);
      groups.push(g!);
      c.hangUp();
      const r = await c.reply;
      expect(r).toEqual({ status: 499, body: { error: 'Planning cancelled' } });
      // The group is signalled before the 499 is written; a killed process may take a moment to end.
      await until(`process group ${g} gone after the 499`, () => !groupAlive(g!) || undefined, 5_000);
    }
    // Each admitted plan ran in a fresh process.
    expect(groups[0]).not.toBe(groups[1]);
    expect(storeFiles(p.storeDir!)).toEqual(before);
    await until('progress back to null', async () => ((await p.client.progress()).json as Record<string, unknown>).stage === null || undefined);
  });

  test(
    'the termination signal comes first and the kill 2 s after it: a helper that takes SIGTERM goes at once, the plan that ignores it about 2 s later (the plan alone would take 6 minutes)',
    covers('limit:planner_cancel_kill_s', 'planner:plan.disconnect_cancels'),
    async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      needsStub({ skip }, p, 'a plan that ignores SIGTERM beside a helper that does not');
      skip(!existsSync('/proc/self/stat'), 'needs /proc to see process groups');
      const c = rawPlan(p, slow(60_000, { ignore_sigterm: true }), DENSE);
      await c.sent;
      const [g] = await until('the planning process group', () => (busyGroups(p.pid!).length === 1 ? busyGroups(p.pid!) : undefined));
      await until('a stage in progress', async () => (obj((await p.client.progress()).json).stage ?? undefined) as string | undefined);
      const members = () => procs().filter((x) => x.pgid === g);
      const helper = members().find((x) => x.pid !== g)!.pid;
      expect(helper).toBeDefined();
      c.hangUp();
      // Watched at 20 ms: when the helper (default SIGTERM action) went, and when the leader (ignoring it) went.
      let helperGone = 0;
      let leaderGone = 0;
      const start = performance.now();
      while ((!helperGone || !leaderGone) && performance.now() - start < 10_000) {
        // The two processes themselves, not a scan of the machine, every 20 ms.
        const t = performance.now();
        if (!helperGone && !running(helper)) helperGone = t;
        if (!leaderGone && !running(g!)) leaderGone = t;
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(await c.reply).toEqual({ status: 499, body: { error: 'Planning cancelled' } });
      expect({ helperGone: helperGone > 0, leaderGone: leaderGone > 0 }).toEqual({ helperGone: true, leaderGone: true });
      // SIGTERM first: the helper went well before the leader. The kill 2 s after it (document 2 limits):
      // not sooner (the kill can only be late; 250 ms allowed for seeing the helper go late, a /proc scan
      // on a loaded machine), and not seconds later (a kill after 5 s fails; 1.5 s of slack for timers).
      const after = leaderGone - helperGone;
      expect(after, `leader gone ${Math.round(after)} ms after the helper`).toBeGreaterThanOrEqual(2_000 - 250);
      expect(after, `leader gone ${Math.round(after)} ms after the helper`).toBeLessThan(3_500);
    },
  );
});
