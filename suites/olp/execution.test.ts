// Dense execution through the OLP server on a simulated cell (document 3 part 4 /dense-execution/*,
// part 8; document 2 part 2 the robot and cell identity check), end to end: a program document is planned
// by /weld-plan, loaded, armed, homed and played; it completes on the cell, the telemetry window shows
// the motion, and stop leaves the cell stopped and released, as the control service itself reports.
// Around it: the heartbeat (a non-default interval stops the machine with ui_heartbeat_lost; the default
// is 5 s), a switch refused while playing, pause, joint jog and joint moves (joint limits only), the
// identity check, and a core that dies mid-play.

import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { sealProgram } from '../../harness/clients/weldplan.ts';
import { stringifyExact } from '../../harness/oracle/json.ts';
import type { ControlClient } from '../../harness/clients/control.ts';
import { readStatus } from '../../harness/clients/status.ts';
import { latestSequence, readBatch } from '../../harness/clients/telemetry.ts';
import { rotationAngle, rpyRotation, toolPose } from './kinematics.ts';
import { eventCursor, eventsSince } from '../../harness/clients/events.ts';
import { afterAll, afterEach } from 'vitest';
import { covers, describe, expect, inProfile, needsMotion, profile, sharedVariant, type Description } from '../../harness/fixture.ts';
import { HarnessError } from '../../harness/errors.ts';
import { hostBound, lateness } from '../../harness/lateness.ts';
import { openTarget, targetFromEnv, type OlpSpec, type Target } from '../../harness/targets/index.ts';
import { baseProgram } from '../planner/toolkit.ts';
import { cellStatus, discoverCells, expectMachineError, fence, olpTest as test, ownPlannerAddress, registerCell, released, until, useOlp, type Olp, type OlpReply } from './toolkit.ts';

const URDF_TEXT = readFileSync(new URL('../../fixtures/robots/sim-nine-axis.urdf', import.meta.url), 'utf8');
const URDF_SHA = 'sha256:' + createHash('sha256').update(URDF_TEXT).digest('hex');
const MODEL = 'sim-nine-axis';

// The cell runs the internet link profile (fixtures/machines/nine-axis-internet.json): its 3 s lease
// ceiling lets the OLP server's grant ride out a loaded machine between renewals (the lan ceiling is
// 500 ms); the OLP servers of this file ask for it.
// On someone else's OLP server (the external target) the cell is whichever of its cells is the run's
// control service (suites/olp/toolkit.ts discoverCells), on the machine its owner configured.
const EXTERNAL = targetFromEnv().name === 'external';
const v = EXTERNAL ? undefined : sharedVariant({ machine: 'nine-axis-internet' });
const LEASE_MS = 3_000;
let ext: Promise<{ target: Target; description: Description }> | undefined;
afterAll(async () => {
  const e = await ext?.catch(() => undefined);
  await e?.target.close();
});

// A test that left the cell with latched execution fault bits (a program that faulted on a loaded
// machine) would refuse the next test's arm: reset them through the control service, as any client may.
afterEach(async () => {
  if (v === undefined || v.cannot !== undefined) return;
  try {
    const st = await readStatus(v.target.client());
    if (st.core && st.core.execution_fault_reasons !== 0n) {
      const s = await v.cell.grant();
      await v.cell.fenced('reset_fault', s, { axis_mask: 0 });
    }
  } finally {
    await v.cell.cleanup();
  }
});

/** The file's cell (the run's control service on the external target), or a skip with the target's reason. */
async function theCell(skip: (c: boolean, n?: string) => void): Promise<{ target: Target; description: Description; client: ControlClient }> {
  if (v === undefined) {
    ext ??= (async () => {
      const target = await openTarget();
      return { target, description: (await target.client().describe()).reply.data as unknown as Description };
    })();
    const e = await ext;
    return { ...e, client: e.target.client() };
  }
  skip(v.cannot !== undefined, v.cannot);
  return { target: v.target, description: v.description, client: v.target.client() };
}

/** What a test of this file drives: the server, the cell it selects (and another), and that cell's control service. */
interface Exec {
  o: Olp;
  target: Target;
  description: Description;
  client: ControlClient;
  /** The cell a test selects, another usable one (for a switch), the robot model and description digest of it. */
  cell: string;
  cell2: string | undefined;
  model: string;
  desc: string;
  /** The server has a catalogue (else a single target: no selection, no fence, part 2). */
  catalogue: boolean;
  external: boolean;
}

async function execCell(olps: Pools, skip: (c: boolean, n?: string) => void): Promise<Exec> {
  const { target, description, client } = await theCell(skip);
  needsMotion({ skip }, target);
  const o = useOlp({ skip }, await olps.open('exec', () => (EXTERNAL ? {} : catalogue(target, description))));
  if (o.endpoint.configured) return { o, target, description, client, cell: 'cell-a', cell2: 'cell-a2', model: MODEL, desc: URDF_SHA, catalogue: true, external: false };
  const found = await discoverCells(o, target, description);
  const mine = found.usable.filter((c) => c.control);
  skip(mine.length === 0, `none of the cells the OLP server lists (${found.cells.map((c) => c.cell_id).join(', ') || 'none'}) is known to be the run's control service: name its control_socket in the OLP facts file (README "Your own OLP server")`);
  const c = mine[0]!;
  const own = c.control === target.client();
  const d = own ? description : ((await c.control!.describe()).reply.data as unknown as Description);
  const desc = typeof c.entry.robot_description_sha256 === 'string' && c.entry.robot_description_sha256 ? String(c.entry.robot_description_sha256) : 'sha256:' + '0'.repeat(64);
  return { o, target, description: d, client: c.control!, cell: c.cell_id, cell2: found.usable.find((x) => x !== c)?.cell_id, model: c.model_id!, desc, catalogue: found.catalogue, external: true };
}

/** A POST under /dense-execution carrying the current fence (selected). */
type Post = (route: string, body?: unknown) => ReturnType<Olp['client']['post']>;

type Pools = { open: (n: string, s: () => OlpSpec | Promise<OlpSpec>) => Promise<Olp | undefined>; drop: (n: string) => Promise<void> };

/** The catalogue of this file: the file's cell under two names, and once without a robot description. */
function catalogue(target: Target, d: Description): OlpSpec {
  const pin = { model_id: MODEL, mode: 'simulation', backend: 'core', pair_id: d.binding.pair_id, configuration_sha256: d.binding.configuration_sha256, control: { socket: target.address } };
  return {
    cells: [
      { cell_id: 'cell-a', robot_description_sha256: URDF_SHA, ...pin },
      { cell_id: 'cell-a2', robot_description_sha256: URDF_SHA, ...pin },
      { cell_id: 'cell-nodesc', ...pin },
    ],
    leaseMs: LEASE_MS,
    // The reference STEP worker for the CAD-to-play test.
    workers: { cad: 'builtin', seam: 'builtin', pool: 1 },
  };
}

/** The fixture program for the cell's robot (its model, its description pinned), sealed. */
function programFor(x: Pick<Exec, 'model' | 'desc'>, description = x.desc): Record<string, unknown> {
  const p = baseProgram() as Record<string, any>;
  p.robot.model_id = x.model;
  p.placement.cell_id = x.model; // equals robot.model_id (document 3 part 2)
  p.robot.robot_description_sha256 = description;
  return sealProgram(p);
}

async function plan(x: Exec, description = x.desc): Promise<{ digest: string; blob: Buffer; samples: bigint }> {
  const o = x.o;
  const program = programFor(x, description);
  const body = { program, tooling: { tool_id: 'torch-olp' }, step_base64: '', workpiece_absent: true, cell_id: x.cell, program_id: 'line_weld_demo', program_digest: program.program_digest };
  let r = await o.client.post('/weld-plan', body);
  // POST /weld-plan runs one at a time (document 3 parts 4 and 7: busy is 429) meanwhile: one an earlier
  // test left running (it ended before its plan did) is waited out, as a client would, for up to a minute.
  for (let i = 0; i < 60 && r.status === 429; i++) {
    await new Promise((res) => setTimeout(res, 1_000));
    r = await o.client.post('/weld-plan', body);
  }
  expect(r.status, r.text.slice(0, 400)).toBe(200);
  return { digest: r.json?.dense?.digest, blob: Buffer.from(r.json?.dense_blob_base64, 'base64'), samples: BigInt(r.json?.dense?.samples) };
}

/**
 * Select a cell and return a poster that carries the current fence: status.target, the fields part 2
 * names for the headers (select's own reply is not shown). A single target has no selection and no fence.
 */
async function selected(x: Exec, cell = x.cell): Promise<Post> {
  const o = x.o;
  if (!x.catalogue) return (route, body = {}) => o.client.post(`/dense-execution${route}`, body);
  const r = await o.client.post('/targets/select', { cell_id: cell, model_id: x.model });
  expect(r.status, r.text).toBe(200);
  const t = (await o.client.get('/dense-execution/status')).json?.target;
  expect(t.cell_id, 'status.target.cell_id after the selection').toBe(cell);
  return (route, body = {}) => o.client.post(`/dense-execution${route}`, body, fence(BigInt(t.selection_generation), cell));
}

/**
 * The program played by the OLP server has ended, as the cell itself reports (document 1 Status): its
 * execution generation moved past `before` and left executing. The server's own status fields are not shown.
 */
async function programEnded(o: Olp, client: ControlClient, before: bigint, ms = 20_000): Promise<Record<string, any>> {
  const s = await until('the program ends', () => cellStatus(client), (v) => BigInt(v.execution.generation) > before && v.execution.state !== 'executing', ms);
  // Only to go on once the server has seen it too (a move while it still plays would be refused): the
  // reference status's `playing`, where a server has it; not an assertion.
  await until('the server sees the end', () => o.client.get('/dense-execution/status'), (r) => r.json?.playing !== true, 5_000);
  return s;
}



/**
 * A route whose request body document 3 does not show (load, move, Cartesian: part 4 "not shown"): the
 * suite speaks the body of docs/profile.md. On the reference stack it must be taken; a server of someone
 * else's that answers it otherwise cannot be driven further by this test, which then skips and says so.
 */
function bodyTaken(x: { external: boolean }, skip: (c: boolean, n?: string) => void, r: { status: number; text: string }, what: string): void {
  if (x.external && r.status !== 200) skip(true, `the server does not take the ${what} body of docs/profile.md (${r.status} ${r.text.slice(0, 160)}): document 3 part 4 does not show it`);
  expect(r.status, r.text).toBe(200);
}

/**
 * Keep heartbeating while `f` runs (the UI is alive); whatever happens in it, the cell is stopped and
 * released afterwards (DESIGN.md rule 5) unless `keep` says the test stops it itself.
 */
async function alive<T>(o: Olp, f: () => Promise<T>, keep = false): Promise<T> {
  const beats: Beat[] = [];
  heartbeats.set(o, beats);
  const t = setInterval(() => {
    const sent = performance.now();
    void o.client.post('/dense-execution/heartbeat', {}).then(
      () => beats.push({ sent, answered: performance.now() }),
      () => undefined,
    );
  }, 1_000);
  let ok = false;
  try {
    const v = await f();
    ok = true;
    return v;
  } finally {
    clearInterval(t);
    if (!ok || !keep) await o.client.post('/dense-execution/stop', {}).catch(() => undefined);
  }
}

/** A heartbeat `alive` sent and had answered (performance.now() ms). */
interface Beat {
  sent: number;
  answered: number;
}
/** The heartbeats `alive` sent to each OLP server, for judging a lease the server gave up (lostLeaseJudged). */
const heartbeats = new WeakMap<Olp, Beat[]>();

/**
 * The server gave its lease up while the harness held the cell (since `since`, performance.now() ms, up to
 * `until`): its status says why (docs/profile.md "OLP server: dense execution", stopped_reason), and the
 * harness's own figures say whether a slow host explains it: `ui_heartbeat_lost` while the harness's
 * heartbeats (the arm, then one a second) left a span longer than the heartbeat interval between one sent
 * and the next answered, or while the host kept the OLP server's process waiting to run that long (its
 * expiry timer then runs before it reads the heartbeat that came in time), or `lease_lost` (from a server
 * that does not say why: the cell's own grant_expired since the arm, armMark) while the harness's event loop
 * stalled, or the host kept the server's or the stack's process waiting, past three quarters of the lease (a
 * server renewing every quarter lease or more often): HIL_ERR_HOST_TOO_SLOW with the figures. Otherwise
 * `fail` (the check that failed) stands, with the reason in its message.
 */
async function stopJudged(x: Exec, since: number, until: number, fail: (reason: string) => Promise<void>): Promise<void> {
  const st = (await x.o.client.get('/dense-execution/status').catch(() => undefined))?.json ?? {};
  let reason = String(st.stopped_reason ?? '');
  // A server that does not say why (stopped_reason is docs/profile.md's, not document 3's): the cell's own
  // record does, where the grant the server held ran out (document 1 part 6: grant_expired, "lease ran out").
  const cursor = armCursors.get(x);
  let leaseMs = LEASE_MS;
  if (reason === '' && cursor !== undefined) {
    const expired = (await eventsSince(x.client, cursor).catch(() => [])).find((e) => e.type === 'grant_expired');
    if (expired) {
      reason = 'lease_lost (the cell published grant_expired)';
      // The server's own lease (document 1 Grant lease_ms), where the event carries it.
      const l = Number((expired.grant as { lease_ms?: unknown } | undefined)?.lease_ms);
      if (Number.isInteger(l) && l > 0) leaseMs = l;
    }
  }
  if (reason === 'ui_heartbeat_lost' && Number(st.heartbeat_timeout_ms) > 0) {
    const beats = [{ sent: since, answered: since }, ...(heartbeats.get(x.o) ?? []).filter((b) => b.sent >= since).sort((a, b) => a.sent - b.sent)];
    let gap = until - beats[beats.length - 1]!.sent;
    for (let i = 1; i < beats.length; i++) gap = Math.max(gap, beats[i]!.answered - beats[i - 1]!.sent);
    await hostBound(
      { rule: 'docs/profile.md "OLP server: dense execution": a heartbeat within heartbeat_timeout_ms keeps the lease', marginMs: Number(st.heartbeat_timeout_ms), since, targetOnHost: true, measured: () => ({ ms: Math.round(gap), what: 'the longest span from a heartbeat sent to the next one answered' }) },
      () => fail(reason),
    );
  } else if (reason.startsWith('lease_lost') && (!EXTERNAL || lateness.targetOnHost())) {
    // The renewals are the OLP server's to send in time and the stack's to admit: both processes' waits count
    // (an external server's only where its processes on this host were named, --service-pid).
    await hostBound({ rule: 'document 1 part 3: a grant renewed within its lease stays owned (an OLP server renewing every quarter lease or more often)', marginMs: (leaseMs * 3) / 4, since, targetOnHost: true }, () => fail(reason));
  }
  await fail(reason);
}

/** The cell's event cursor taken just before the harness armed through the server (armMark), for stopJudged. */
const armCursors = new WeakMap<Exec, bigint>();

/** Just before an arm through the server: the time stopJudged judges from, and the cell's event cursor. */
async function armMark(x: Exec): Promise<number> {
  armCursors.set(x, await eventCursor(x.client));
  return performance.now();
}

/** A play refused after the arm was answered (not_armed, or a program the server unloaded): the server may have given its lease up meanwhile (stopJudged). */
async function lostLeaseJudged(x: Exec, since: number, play: { status: number; text: string }, playedAt: number): Promise<void> {
  await stopJudged(x, since, playedAt, async (reason) => expect(play.status, `${play.text}; the server's stopped_reason: ${reason || '(none)'}`).toBe(200));
}

/**
 * A played program must end completed, as the next execution generation. One that ended otherwise (the
 * server cancelled it) is judged as a lease the server gave up while the harness held the cell (stopJudged,
 * `since` the arm): a slow host that let the heartbeats or the renewals lapse is an ERROR with its figures.
 */
async function completedJudged(x: Exec, since: number, ended: { state: string; generation: unknown }, before: bigint, detail = ''): Promise<void> {
  const check = async (reason = '') => expect([ended.state, BigInt(ended.generation as bigint)], `${detail}${reason ? `; the server's stopped_reason: ${reason}` : ''}`).toEqual(['completed', before + 1n]);
  if (ended.state !== 'completed') await stopJudged(x, since, performance.now(), check);
  await check();
}

/** Bring the cell back to the planned program's start (every axis at 0, the planner stub's rest pose). */
async function toStart(post: (route: string, body?: unknown) => Promise<{ status: number; text: string }>, client: ControlClient): Promise<void> {
  const q = ((await cellStatus(client)).axes as any[]).map((a) => Number(a.position));
  if (q.every((x) => Math.abs(x) < 1e-4)) return;
  const m = await post('/move', { points: [q.map(() => 0)] });
  expect(m.status, m.text).toBe(200);
  await until('the cell is back at the start', () => cellStatus(client), (s) => s.execution.state !== 'executing' && (s.axes as any[]).every((a) => Math.abs(Number(a.position)) < 1e-3), 15_000);
}

/** Home the native-home axes through the OLP server unless the cell has them homed already. */
async function ensureHomed(post: (route: string, body?: unknown) => Promise<{ status: number; text: string }>, client: ControlClient, d: Description): Promise<void> {
  const mask = d.axes.reduce((m, a, i) => (a.native_home === true ? m | (1 << i) : m), 0);
  if ((Number((await cellStatus(client)).core.home_valid_mask) & mask) === mask) return;
  const h = await post('/home', {});
  expect(h.status, h.text).toBe(200);
}

/**
 * Load a planned trajectory, arm, home and bring the cell to the program's start, then play: the program
 * runs on the cell. Returns the cell's execution generation before the play (the play's is the next).
 */
async function loadAndPlay(x: Exec, skip: (c: boolean, n?: string) => void, post: Post, digest: string): Promise<{ before: bigint; since: number }> {
  const { client, description: d } = x;
  const loaded = await post('/load', { trajectory_digest: digest });
  bodyTaken(x, skip, loaded, 'load');
  const since = await armMark(x);
  const armed = await post('/arm', { armed: true });
  expect(armed.status, armed.text).toBe(200);
  await ensureHomed(post, client, d);
  await toStart(post, client);
  const before = BigInt((await cellStatus(client)).execution.generation);
  const play = await post('/play', {});
  if (play.status !== 200) await lostLeaseJudged(x, since, play, performance.now());
  expect(play.status, play.text).toBe(200);
  return { before, since };
}

/** Joint positions of the cell as its telemetry reports them (the newest capture record), by axis id. */
async function telemetryJoints(client: ControlClient, d: Description): Promise<Record<string, number>> {
  const last = await latestSequence(client);
  const b = await readBatch(client, last > 4n ? last - 4n : 0n);
  const rec = b.records.at(-1)!;
  const q: Record<string, number> = {};
  d.axes.forEach((a, i) => (q[a.id] = (Number(rec.ax[i]!.position) * Number(a.sign ?? 1)) / Number(a.counts_per_unit)));
  return q;
}

/**
 * Cartesian jog and moves on the armed cell (part 1: joint limits only): a move reaches the commanded tool
 * pose as the cell's telemetry shows it through the suite's own kinematics (tolerance 1 mm and 2 mrad);
 * a pose with J4 and J6 aligned is refused as a singularity before anything moves; a jog along +x moves
 * the tool along +x and stops.
 */
async function cartesianChecks(o: Olp, post: Post, client: ControlClient, description: Description): Promise<void> {
    // Away from the wrist singularity of the zero pose (J5 = 0 aligns J4 and J6).
    const q0 = ((await cellStatus(client)).axes as any[]).map((a) => Number(a.position));
    const start = description.axes.map((a, i) => ({ J2: 0, J3: 0.2, J4: 0, J5: 0.2, J6: 0 } as Record<string, number>)[a.id] ?? q0[i]!);
    expect((await post('/move', { points: [start] })).status).toBe(200);
    await until('the start pose', () => cellStatus(client), (st) => st.execution.state !== 'executing' && (st.axes as any[]).every((a, i) => Math.abs(Number(a.position) - start[i]!) < 1e-3), 15_000);
    const here = toolPose(URDF_TEXT, await telemetryJoints(client, description));
    const state = await o.client.get('/dense-execution/cartesian/state');
    expect(state.status, state.text).toBe(200);
    state.json?.tool_pose?.xyz_m?.forEach((v: unknown, k: number) => expect(Math.abs(Number(v) - here.xyz[k]!)).toBeLessThan(1e-3));
    // The move: 3 cm, -2 cm, 4 cm, the same orientation.
    const rpy = state.json?.tool_pose?.rpy_rad?.map(Number) as [number, number, number];
    const goal = [here.xyz[0]! + 0.03, here.xyz[1]! - 0.02, here.xyz[2]! + 0.04];
    const gen = BigInt((await cellStatus(client)).execution.generation);
    const m = await post('/cartesian/move', { pose: { xyz_m: goal, rpy_rad: rpy } });
    expect(m.status, m.text).toBe(200);
    await until('the Cartesian move ends', () => cellStatus(client), (st) => BigInt(st.execution.generation) > gen && st.execution.state !== 'executing', 15_000);
    await new Promise((r) => setTimeout(r, 100)); // settled
    const reached = toolPose(URDF_TEXT, await telemetryJoints(client, description));
    // Tolerance: 1 mm and 2 mrad (the simulated drives' completion tolerance is far below it).
    const posErr = Math.hypot(...reached.xyz.map((v, k) => v - goal[k]!));
    const rotErr = rotationAngle(reached.R, rpyRotation(...rpy));
    expect(posErr, `position error ${posErr} m`).toBeLessThan(1e-3);
    expect(rotErr, `rotation error ${rotErr} rad`).toBeLessThan(2e-3);
    // A pose only reachable with J4 and J6 aligned: refused, not driven through.
    const qs = await telemetryJoints(client, description);
    const singular = toolPose(URDF_TEXT, { ...qs, J5: 0 });
    const sr = singular.R;
    const srpy = [Math.atan2(sr[2]![1]!, sr[2]![2]!), Math.asin(-sr[2]![0]!), Math.atan2(sr[1]![0]!, sr[0]![0]!)];
    const g2 = BigInt((await cellStatus(client)).execution.generation);
    expectMachineError(await post('/cartesian/move', { pose: { xyz_m: singular.xyz, rpy_rad: srpy } }), 409, 'singularity');
    expect(BigInt((await cellStatus(client)).execution.generation)).toBe(g2);
    // Cartesian jog: +x in the world frame for about 0.6 s, intents every 50 ms.
    const before = toolPose(URDF_TEXT, await telemetryJoints(client, description));
    const st = await post('/cartesian/start', { session_id: 'cj-1', frame: 'world' });
    expect(st.status, st.text).toBe(200);
    for (let rev = 1; rev <= 12; rev++) {
      const i = await post('/cartesian/intent', { session_id: 'cj-1', revision: rev, linear: [1, 0, 0], angular: [0, 0, 0] });
      expect(i.status, i.text).toBe(200);
      await new Promise((r) => setTimeout(r, 50));
    }
    expectMachineError(await post('/cartesian/intent', { session_id: 'cj-1', revision: 12, linear: [1, 0, 0] }), 409, 'cartesian_revision_stale');
    expect((await post('/cartesian/stop', {})).status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    const after = toolPose(URDF_TEXT, await telemetryJoints(client, description));
    const d = after.xyz.map((v, k) => v - before.xyz[k]!);
    expect(d[0]!, JSON.stringify(d)).toBeGreaterThan(0.01); // about 0.05 m/s for about 0.6 s
    expect(Math.hypot(d[1]!, d[2]!), JSON.stringify(d)).toBeLessThan(0.2 * d[0]!);
    expect(rotationAngle(after.R, before.R)).toBeLessThan(0.01);
    await new Promise((r) => setTimeout(r, 200));
    const still = toolPose(URDF_TEXT, await telemetryJoints(client, description));
    expect(Math.hypot(...still.xyz.map((v, k) => v - after.xyz[k]!))).toBeLessThan(1e-3); // at rest after stop
    expect((await o.client.get('/dense-execution/cartesian/state')).json?.active).toBe(false);
}

describe('dense execution', () => {
  test(
    'end to end: program document -> /weld-plan -> load -> arm -> home -> play completes on the cell; the telemetry window shows the motion; stop leaves it stopped and released',
    covers(
      'olp:route.dense_execution_run', 'olp:route.dense_execution_home_arm', 'olp:route.dense_execution_observe', 'field:OlpArmRequest.armed',
      'olp:error.home_required', 'olp:error.cell_switch_while_playing', 'olp:stop.unfenced_releases', 'olp:error.dense_blob_not_found',
    ),
    async ({ olps, skip }) => {
      const x = await execCell(olps, skip);
      const { o, description, client } = x;
      const post = await selected(x);
      const { digest, samples } = await plan(x);
      // A trajectory the planner does not hold: refused in part 7's machine shape (its status is not shown),
      // while the planned one (the valid twin) is loaded.
      const gone = await post('/load', { trajectory_digest: 'sha256:' + '1'.repeat(64) });
      expectMachineError(gone, undefined, 'dense_blob_not_found');
      await inProfile('profile:olp.labels', () => expect(gone.status).toBe(409));
      const loaded = await post('/load', { trajectory_digest: digest });
      bodyTaken(x, skip, loaded, 'load');
      await inProfile('profile:olp.execution_bodies', () => expect([loaded.json?.loaded?.trajectory_digest, BigInt(loaded.json?.loaded?.samples ?? -1)]).toEqual([digest, samples]));
      await alive(o, async () => {
        const since = await armMark(x);
        const armed = await post('/arm', { armed: true });
        expect(armed.status, armed.text).toBe(200);
        await inProfile('profile:olp.execution_bodies', () => expect([armed.json?.armed, armed.json?.loaded?.prepared]).toEqual([true, true]));
        const g = await cellStatus(client);
        expect(g.grant.active).toBe(true);
        const homeMask = description.axes.reduce((m, a, i) => (a.native_home === true ? m | (1 << i) : m), 0);
        if ((Number(g.core.home_valid_mask) & homeMask) !== homeMask) {
          const refused = await post('/play', {});
          // Another refusal (program_not_loaded) after the server gave its lease up meanwhile is judged as such.
          if (refused.json?.error !== 'home_required') await stopJudged(x, since, performance.now(), async (reason) => expectMachineError({ ...refused, text: `${refused.text}; the server's stopped_reason: ${reason || '(none)'}` }, undefined, 'home_required'));
          expectMachineError(refused, undefined, 'home_required');
          await inProfile('profile:olp.labels', () => expect(refused.status).toBe(409));
          const h = await post('/home', {});
          if (h.status !== 200) await lostLeaseJudged(x, since, h, performance.now());
          expect(h.status, h.text).toBe(200);
        }
        // A cell another test (or another client) left elsewhere: back to the program's start first.
        await toStart(post, client);
        const before = BigInt((await cellStatus(client)).execution.generation);
        const play = await post('/play', {});
        if (play.status !== 200) await lostLeaseJudged(x, since, play, performance.now());
        expect(play.status, play.text).toBe(200);
        await inProfile('profile:olp.execution_bodies', () => expect(play.json?.playing).toBe(true));
        // Another cell while this one plays: refused, and nothing changes.
        if (x.cell2 !== undefined) {
          const sel = await o.client.post('/targets/select', { cell_id: x.cell2, model_id: x.model });
          expectMachineError(sel, 409, 'cell_switch_while_playing');
          expect((await o.client.get('/dense-execution/status')).json?.target?.cell_id).toBe(x.cell);
        }
        // The telemetry window while it plays (read now: on a loaded machine the end of the program may be
        // seen late, and the window after it then holds only the rest).
        await new Promise((r) => setTimeout(r, 500));
        const during = await o.client.get('/dense-execution/telemetry/window?window_ms=1000');
        expect(during.status, during.text.slice(0, 300)).toBe(200);
        const cell = (await programEnded(o, client, before)).execution;
        await completedJudged(x, since, cell, before);
        await inProfile('profile:olp.execution_bodies', async () => {
          const done = await until('the server reports the end', () => o.client.get('/dense-execution/status'), (r) => r.json?.playing === false, 5_000);
          expect([done.json?.execution?.state, BigInt(done.json?.execution?.generation ?? -1)]).toEqual(['completed', before + 1n]);
        });
        // The telemetry window: armed, trajectory mode, and J1 travelled.
        const w = await o.client.get('/dense-execution/telemetry/window?window_ms=10000');
        expect(w.status, w.text.slice(0, 300)).toBe(200);
        await inProfile('profile:olp.telemetry_window', () => {
          type Sample = { active_mode: bigint | number; armed: boolean; position: number[] };
          const mid = (during.json?.samples ?? []) as Sample[];
          expect(mid.some((v) => Number(v?.active_mode) === 2 && v?.armed), `${mid.length} samples while playing, none armed in trajectory mode`).toBe(true);
          const j1 = [...mid, ...((w.json?.samples ?? []) as Sample[])].map((v) => Number(v?.position?.[0]));
          expect(Math.max(...j1) - Math.min(...j1)).toBeGreaterThan(0.01);
        });
      }, true);
      // Stop: no fence needed; the cell is stopped and released.
      const stop = await o.client.post('/dense-execution/stop', {});
      expect(stop.status, stop.text).toBe(200);
      await inProfile('profile:olp.execution_bodies', () => expect([stop.json?.stopped, stop.json?.lease_held]).toEqual([true, false]));
      const after = await released(client);
      expect([after.grant.active, after.grant.controller ?? '']).toEqual([false, '']);
      expect(Number(after.core.armed)).toBe(0);
    },
  );

  test(
    'CAD to play: a STEP fixture -> topology -> joints -> seam frames -> plan request -> /weld-plan -> load -> play completes on the cell; then a Cartesian move reaches its pose as telemetry shows, a singular pose is refused, a Cartesian jog moves the tool along its direction and stops',
    covers('olp:route.cadquery_topology', 'olp:route.seam', 'olp:route.weld_plan', 'olp:route.dense_execution_run', 'olp:route.dense_execution_cartesian', 'olp:joint_limits_only', 'profile:olp.worker_operations', 'profile:olp.cartesian'),
    async ({ olps, skip }) => {
      const x = await execCell(olps, skip);
      const { o, description, client } = x;
      skip(x.model !== MODEL, `the cell's robot is ${x.model}: the test's kinematics are those of ${MODEL} (fixtures/robots/sim-nine-axis.urdf)`);
      const step = readFileSync(new URL('../../fixtures/step/butt-joint.step', import.meta.url));
      const step_base64 = step.toString('base64');
      const topo = await o.client.post('/cadquery/topology', { operation: 'extract_topology', step_base64 });
      skip(x.external && topo.status === 503, `the OLP server has no CAD worker (${topo.text.slice(0, 120)})`);
      // The operations' results are the reference STEP worker's (docs/profile.md "OLP server: worker
      // operations"): on someone else's server the test needs them to go on.
      skip(x.external && topo.status !== 200, `the server's CAD worker does not answer extract_topology as docs/profile.md says (${topo.status})`);
      expect(topo.status, topo.text.slice(0, 300)).toBe(200);
      expect(topo.json?.result?.solids?.length).toBe(2);
      const joints = await o.client.post('/seam', { operation: 'detect_joints', step_base64 });
      expect(joints.status, joints.text.slice(0, 300)).toBe(200);
      // The top seam of the butt joint (x 100 mm, z 10 mm, along y).
      const joint = joints.json?.result?.joints?.find((j: any) => j.kind === 'butt' && Number(j.start_mm[2]) === 10 && Number(j.length_mm) === 100);
      expect(joint, joints.text.slice(0, 400)).toBeDefined();
      // The program's seam: the joint, an 85 degree work angle and a 5 degree push.
      const orientation = { work_angle_deg: { kind: 'constant', value: 85 }, travel_angle_deg: { kind: 'constant', value: 5 } };
      const frames = await o.client.post('/seam', { operation: 'sample_seam_frames', step_base64, spacing_mm: 25, seam: { weld_joint_ref: joint.id, orientation } });
      expect(frames.status, frames.text.slice(0, 300)).toBe(200);
      expect(frames.json?.result?.frames?.length).toBe(5); // 100 mm every 25 mm
      expect(frames.json?.result?.frames?.every((f: any) => Number(f.work_angle_deg) === 85 && Number(f.travel_angle_deg) === 5)).toBe(true);
      const p = JSON.parse(stringifyExact(programFor(x))) as Record<string, any>;
      delete p.program_digest;
      // Placed where the fixture program's own weld is (x 0.5, y -0.05..0.05, z 0.3).
      p.placement.anchor_xyz_m = [0.4, -0.05, 0.29];
      const weld = p.nodes.find((n: any) => n.op === 'weld');
      weld.geometry = { kind: 'seam', id: 'seam-1', reference: 'butt-joint.step', orientation, weld_joint_ref: joint.id };
      weld.travel_speed_mm_s = 100; // 1 s of welding on the 100 mm seam
      const built = await o.client.post('/seam', { operation: 'build_plan_request', program: p, tooling: { tool_id: 'torch-olp' }, step_base64, step_filename: 'butt-joint.step', cell_id: x.cell });
      expect(built.status, built.text.slice(0, 400)).toBe(200);
      const request = built.json?.result?.request;
      expect(request.program.workpiece.weld_joints.map((j: any) => j.id)).toContain(joint.id);
      const planned = await o.client.post('/weld-plan', request);
      expect(planned.status, planned.text.slice(0, 400)).toBe(200);
      expect(planned.json?.program_digest).toBe(request.program_digest);
      const post = await selected(x);
      await alive(o, async () => {
        const { before, since } = await loadAndPlay(x, skip, post, planned.json?.dense?.digest);
        const done = await programEnded(o, client, before, 30_000);
        await completedJudged(x, since, done.execution, before, JSON.stringify(done.core) + JSON.stringify(done.axes));
        // A move refused because the server gave its lease up meanwhile (no_grant) is judged as such.
        await cartesianChecks(o, post, client, description).catch((e: unknown) =>
          stopJudged(x, since, performance.now(), async (reason) => {
            if (reason && e instanceof Error && !e.message.includes('stopped_reason')) e.message += `; the server's stopped_reason: ${reason}`;
            throw e;
          }),
        );
      });
    },
  );

  test('execution bodies and labels are as docs/profile.md says', profile('profile:olp.execution_bodies', 'profile:olp.telemetry_window'), async ({ olps, skip }) => {
    const x = await execCell(olps, skip);
    const { o, description } = x;
    const post = await selected(x);
    expectMachineError(await post('/play', {}), 409, 'not_armed');
    const st = await o.client.get('/dense-execution/status');
    for (const k of ['target', 'connected', 'armed', 'lease_held', 'lease_ms', 'playing', 'stopped_reason', 'heartbeat_timeout_ms', 'loaded', 'core', 'execution', 'grant', 'axes']) expect(st.json, k).toHaveProperty(k);
    const w = await o.client.get('/dense-execution/telemetry/window?window_ms=100');
    expect(Number(w.json?.period_ns)).toBe(Number(description.cycle_ns) * 10);
    expectMachineError(await o.client.get('/dense-execution/telemetry/window?window_ms=0'), 400, 'invalid_request');
  });

  test('pause halts the playing program and keeps the lease; stop releases it', covers('olp:route.dense_execution_run'), async ({ olps, skip }) => {
    const x = await execCell(olps, skip);
    const { o, client } = x;
    const post = await selected(x);
    const { digest } = await plan(x);
    await alive(o, async () => {
      const { before } = await loadAndPlay(x, skip, post, digest);
      const paused = await o.client.post('/dense-execution/pause', {});
      expect(paused.status, paused.text).toBe(200);
      await inProfile('profile:olp.execution_bodies', () => expect([paused.json?.playing, paused.json?.lease_held]).toEqual([false, true]));
      const ex = await until('the execution leaves executing', () => cellStatus(client), (s) => BigInt(s.execution.generation) === before + 1n && s.execution.state !== 'executing');
      expect(ex.execution.state).not.toBe('completed');
      expect(ex.grant.active).toBe(true);
    }, true);
    const stop = await o.client.post('/dense-execution/stop', {});
    expect(stop.status, stop.text).toBe(200);
    await inProfile('profile:olp.execution_bodies', () => expect(stop.json?.lease_held).toBe(false));
    expect((await released(client)).grant.active).toBe(false);
  });

  test(
    'joint jog: begin, updates about every 50 ms move the axis, a stale revision is refused, end stops it',
    covers('olp:route.dense_execution_jog', 'limit:olp_jog_update_interval_ms', 'profile:olp.labels', ...['target_id', 'session_id', 'revision', 'axis', 'direction', 'fraction'].map((f) => `field:OlpJogRequest.${f}`)),
    async ({ olps, skip }) => {
      const x = await execCell(olps, skip);
      const { o, description, client } = x;
      const post = await selected(x);
      await inProfile('profile:olp.execution_bodies', async () => expect(Number((await o.client.get('/capabilities')).json?.limits?.jog_update_interval_ms)).toBe(50));
      await alive(o, async () => {
        const armed = await post('/arm', { armed: true });
        expect(armed.status, armed.text).toBe(200);
        const axis = description.axes[0]!.id;
        const q0 = Number((await cellStatus(client)).axes[0].position);
        const jog = { target_id: x.catalogue ? x.cell : 'default', session_id: 'pendant-1', axis, direction: 1, fraction: 0.5 };
        const b = await post('/jog/begin', { ...jog, revision: 1 });
        expect(b.status, b.text).toBe(200);
        await inProfile('profile:olp.jog_move', async () => {
          const state = (await o.client.get('/dense-execution/jog/state')).json;
          expect([state?.active, state?.session_id, state?.axis, Number(state?.revision)]).toEqual([true, 'pendant-1', axis, 1]);
        });
        // Updates about every 50 ms (part 4), each revision above the last: every one is taken.
        for (let rev = 2; rev <= 12; rev++) {
          const u = await post('/jog/update', { ...jog, revision: rev });
          expect(u.status, u.text).toBe(200);
          await new Promise((r) => setTimeout(r, 50));
        }
        // The same update again (revision 12 not above 12): refused in part 7's machine shape, the valid
        // twin (13) taken; the label is the reference server's.
        const stale = await post('/jog/update', { ...jog, revision: 12 });
        expect(stale.status, stale.text).toBeGreaterThanOrEqual(400);
        expect([typeof stale.json?.error, typeof stale.json?.detail], stale.text).toEqual(['string', 'string']);
        await inProfile('profile:olp.labels', () => expectMachineError(stale, 409, 'jog_revision_stale'));
        expect((await post('/jog/update', { ...jog, revision: 13 })).status).toBe(200);
        expect((await o.client.post('/dense-execution/jog/end', { session_id: 'pendant-1' })).status).toBe(200);
        const q1 = Number((await cellStatus(client)).axes[0].position);
        expect(q1 - q0).toBeGreaterThan(0.02); // about 0.125 rad/s for about 0.6 s
        await new Promise((r) => setTimeout(r, 300));
        const q2 = Number((await cellStatus(client)).axes[0].position);
        await new Promise((r) => setTimeout(r, 200));
        expect(Math.abs(Number((await cellStatus(client)).axes[0].position) - q2)).toBeLessThan(1e-3); // at rest after end
        await inProfile('profile:olp.jog_move', async () => expect((await o.client.get('/dense-execution/jog/state')).json?.active).toBe(false));
      });
      await o.client.post('/dense-execution/stop', {});
    },
  );

  test(
    'joint move: a point list is executed; a point outside a joint limit is refused before anything moves',
    covers('olp:route.dense_execution_move', 'olp:joint_limits_only', 'field:OlpMachineError.limit_violation', 'profile:olp.labels', 'profile:olp.jog_move'),
    async ({ olps, skip }) => {
      const x = await execCell(olps, skip);
      const { o, description, client } = x;
      const post = await selected(x);
      await alive(o, async () => {
        expect((await post('/arm', { armed: true })).status).toBe(200);
        await ensureHomed(post, client, description);
        const q = ((await cellStatus(client)).axes as any[]).map((a) => Number(a.position));
        const ax = description.axes[1]!;
        const g0 = BigInt((await cellStatus(client)).execution.generation);
        // Just past the limit: refused (part 1: joint limits), and nothing reached the cell.
        const outside = q.map((v, i) => (i === 1 ? Number(ax.max_position) + 0.1 : v));
        const r = await post('/move', { points: [outside] });
        if (x.external && r.status === 400) bodyTaken(x, skip, r, 'move');
        expect(r.status, r.text).toBeGreaterThanOrEqual(400);
        expect([typeof r.json?.error, typeof r.json?.detail], r.text).toEqual(['string', 'string']);
        expect(BigInt((await cellStatus(client)).execution.generation)).toBe(g0);
        // limit_violation's fields are part 7's; that a joint limit gives one, and the label, are ours.
        await inProfile('profile:olp.labels', () => expectMachineError(r, 409, 'joint_limit'));
        await inProfile('profile:olp.jog_move', () => {
          expect(r.json?.limit_violation).toMatchObject({ kind: 'position', axis: ax.id, limit: Number(ax.max_position), unit: ax.position_unit });
          expect(Number(r.json?.limit_violation?.value)).toBeCloseTo(Number(ax.max_position) + 0.1, 9);
        });
        // The valid twin: a point inside every limit is executed.
        const goal = q.map((v, i) => (i === 0 ? v + 0.05 : v));
        const m = await post('/move', { points: [goal] });
        bodyTaken(x, skip, m, 'move');
        await until('J1 reaches the move target', () => cellStatus(client), (s) => Math.abs(Number(s.axes[0].position) - goal[0]!) < 2e-3, 10_000);
      });
      await o.client.post('/dense-execution/stop', {});
    },
  );

  test('jog and move details are as docs/profile.md says', profile('profile:olp.jog_move'), async ({ olps, skip }) => {
    const x = await execCell(olps, skip);
    const { description } = x;
    const post = await selected(x);
    const t = x.catalogue ? x.cell : 'default';
    expectMachineError(await post('/jog/begin', { target_id: t, session_id: 's', revision: 1, axis: description.axes[0]!.id, direction: 1, fraction: 0.5 }), 409, 'not_armed');
    expectMachineError(await post('/jog/begin', { target_id: t, session_id: 's', revision: 1, axis: 'no-such-axis', direction: 1, fraction: 0.5 }), 400, 'invalid_request');
    expectMachineError(await post('/jog/begin', { target_id: t, session_id: 's', revision: 1, axis: description.axes[0]!.id, direction: 2, fraction: 0.5 }), 400, 'invalid_request');
    expectMachineError(await post('/move', { points: [] }), 400, 'invalid_request');
  });
});

/**
 * The heartbeat tests' interval on the reference server (--heartbeat-ms): not the 5 s default, so a server
 * that ignores the option is seen, and short, so that staying silent past it costs little. The documented
 * 5 s itself is waited out once, in the test of the default.
 */
const HB_MS = 1_000;
/** Part 4 and part 8: a heartbeat at least every 5 s while the lease is held. */
const DEFAULT_HB_MS = 5_000;
/** How far either side of the interval the tests look: the server's stop takes a moment to reach the cell. */
const BEFORE_MS = 400;
const AFTER_MS = 600;

/**
 * The OLP server of the heartbeat tests with the file's cell as its single target, started with HB_MS (one
 * for the file); on someone else's server, the file's cell there and the interval its owner configured
 * (the facts file's heartbeat_ms, else the documented 5 s).
 */
async function hbOlp(olps: Pools, skip: (c: boolean, n?: string) => void): Promise<{ x: Exec; post: Post; interval: number }> {
  if (EXTERNAL) {
    const x = await execCell(olps, skip);
    return { x, post: await selected(x), interval: x.o.endpoint.facts?.heartbeat_ms ?? DEFAULT_HB_MS };
  }
  const { target, description, client } = await theCell(skip);
  needsMotion({ skip }, target);
  const o = useOlp({ skip }, await olps.open('hb', () => ({ single: { socket: target.address, model_id: MODEL, robot_description_sha256: URDF_SHA }, planner: 'none', heartbeatMs: HB_MS, leaseMs: LEASE_MS })));
  const x: Exec = { o, target, description, client, cell: 'default', cell2: undefined, model: MODEL, desc: URDF_SHA, catalogue: false, external: false };
  return { x, post: await selected(x), interval: HB_MS };
}

/**
 * A server of the file's cell at the documented default interval: the file's catalogue server (started
 * without --heartbeat-ms); on someone else's deployment its server unless the facts file says that one was
 * configured otherwise, then the deployment's bare server (bare_olp_url: configured with nothing, so at the
 * documented defaults), whose single target is the run's control service.
 */
async function defaultHbOlp(olps: Pools, skip: (c: boolean, n?: string) => void): Promise<{ x: Exec; post: Post }> {
  const x = await execCell(olps, skip);
  const configured = x.o.endpoint.facts?.heartbeat_ms;
  if (!x.external || configured === undefined || configured === DEFAULT_HB_MS) return { x, post: await selected(x) };
  const bare = useOlp({ skip }, await olps.open('bare', () => ({ planner: 'none' })));
  skip(!bare.endpoint.bare, `the facts file says the server was configured with a ${configured} ms heartbeat interval, not the 5 s default, and names no server of the deployment left at the default (bare_olp_url)`);
  const { target, description, client } = await theCell(skip);
  const b: Exec = { o: bare, target, description, client, cell: 'default', cell2: undefined, model: x.model, desc: x.desc, catalogue: false, external: true };
  return { x: b, post: await selected(b) };
}

/**
 * Stay silent after `from` (ms on this host's clock) and look at the cell itself (document 1 Status) at
 * `from + at`: whether the grant is still held. The look is timed: when the harness was late past `latest`
 * (its request left late, or its event loop stalled past that slack while it waited) the answer says
 * nothing about the server's interval: ERROR HIL_ERR_HOST_TOO_SLOW with the figures, never a FAIL. So
 * when the host kept the OLP server's or the stack's process waiting to run past that slack (targetOnHost,
 * processes this harness started): the server ends the lease on a timer of its own and renews the cell's
 * grant on another, and either fires late in a process the host does not run.
 */
async function heldAt(client: ControlClient, from: number, at: number, latest: number, expected: boolean, what: string): Promise<void> {
  let asked = 0;
  await hostBound({ rule: `document 3 parts 4 and 8: the heartbeat interval (${what})`, marginMs: latest - at, targetOnHost: true, measured: () => ({ ms: Math.max(0, asked - at), what: `the look due ${at} ms after the last heartbeat left at ${Math.round(asked)} ms` }) }, async () => {
    const wait = from + at - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    asked = performance.now() - from;
    const st = await cellStatus(client);
    const answered = performance.now() - from;
    if (asked > latest) throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `the heartbeat check was due ${at} ms after the last heartbeat and left at ${Math.round(asked)} ms (answered at ${Math.round(answered)} ms), past the ${latest} ms that tell the interval apart`);
    expect(st.grant.active === true && st.grant.stopping !== true, what).toBe(expected);
  });
}

describe('heartbeat (part 4, part 8)', () => {
  test(
    'the heartbeat is due from the moment the lease is taken: silent just short of the interval the lease holds, silent past it the machine stops; heartbeats keep it',
    covers('olp:heartbeat.required', 'olp:route.dense_execution_run', 'profile:olp.heartbeat_interval'),
    async ({ olps, skip }) => {
      const { x, post, interval } = await hbOlp(olps, skip);
      const { o, client } = x;
      try {
        // No heartbeat at all after the arm: the interval runs from the moment the lease is taken.
        const sent = performance.now();
        const armed = await post('/arm', { armed: true });
        expect(armed.status, armed.text).toBe(200);
        // Just short of the interval after the arm was sent (the server's clock starts no earlier): held.
        await heldAt(client, sent, interval - BEFORE_MS, interval - 50, true, 'the lease ended before the heartbeat interval');
        // Heartbeats every 250 ms for another interval: still held, past the interval after the arm. A
        // heartbeat the harness sent late by more than the interval's rest says nothing (ERROR).
        let lastHb = performance.now();
        let worstGap = 0;
        await hostBound({ rule: 'document 3 parts 4 and 8: heartbeats keep the lease', marginMs: interval - 250, measured: () => ({ ms: worstGap - 250, what: 'the widest gap between heartbeats past their 250 ms period' }) }, async () => {
          const end = performance.now() + interval;
          while (performance.now() < end) {
            const now = performance.now();
            worstGap = Math.max(worstGap, now - lastHb);
            lastHb = now;
            expect((await o.client.post('/dense-execution/heartbeat', {})).status).toBe(200);
            await new Promise((r) => setTimeout(r, 250));
          }
          expect((await cellStatus(client)).grant.active, 'the lease ended while heartbeats came').toBe(true);
        });
        // Then silence: just short of the interval held, shortly past it stopped and released, as the control
        // service itself reports (its grant stopping, then revoked by the OLP server's stop, document 1 part 3).
        const cursor = await eventCursor(client);
        const hbSent = performance.now();
        expect((await o.client.post('/dense-execution/heartbeat', {})).status).toBe(200);
        const hbDone = performance.now();
        await heldAt(client, hbSent, interval - BEFORE_MS, interval - 50, true, 'the lease ended before the heartbeat interval');
        // AFTER_MS past the interval: a server whose interval is longer (or that never stops) still holds it.
        await heldAt(client, hbDone, interval + AFTER_MS, interval + AFTER_MS + 300, false, `the lease was still held ${interval + AFTER_MS} ms after the last heartbeat`);
        const cell = await until('the grant ends on the cell', () => cellStatus(client), (s) => s.grant.active === false, 5_000);
        expect(cell.grant.active).toBe(false);
        const types = (await eventsSince(client, cursor)).map((e) => e.type);
        expect(types).toContain('grant_revoked');
        expect(types).not.toContain('grant_expired'); // stopped by the OLP server, not left to run out
        await inProfile('profile:olp.execution_bodies', async () => {
          const st = (await o.client.get('/dense-execution/status')).json;
          expect([st.stopped_reason, st.lease_held, st.armed]).toEqual(['ui_heartbeat_lost', false, false]);
        });
      } finally {
        await o.client.post('/dense-execution/stop', {});
      }
    },
  );

  test(
    'the interval is 5 s by default, measured: silent 4.6 s after the arm the lease holds, silent 5.6 s it is gone',
    covers('limit:olp_heartbeat_s', 'olp:heartbeat.required'),
    async ({ olps, skip }) => {
      // The one test that stays silent for the documented 5 s (the others use a short configured interval).
      const { x, post } = await defaultHbOlp(olps, skip);
      const { o, client } = x;
      try {
        const sent = performance.now();
        const a = await post('/arm', { armed: true });
        const taken = performance.now();
        expect(a.status, a.text).toBe(200);
        // Both sides of 5 s, with no heartbeat after the arm: a server with a shorter default has stopped
        // by 4.6 s, one with a longer default (or none) still holds at 5.6 s.
        await heldAt(client, sent, DEFAULT_HB_MS - BEFORE_MS, DEFAULT_HB_MS - 50, true, 'the lease ended before 5 s');
        await heldAt(client, taken, DEFAULT_HB_MS + AFTER_MS, DEFAULT_HB_MS + AFTER_MS + 300, false, 'the lease was still held 5.6 s after the arm without a heartbeat');
      } finally {
        await o.client.post('/dense-execution/stop', {});
      }
      await released(client);
    },
  );

  test('the interval flag is reported in /capabilities', profile('profile:olp.heartbeat_interval'), async ({ olps, skip }) => {
    const { x, interval } = await hbOlp(olps, skip);
    expect(Number((await x.o.client.get('/capabilities')).json?.limits?.heartbeat_timeout_ms)).toBe(interval);
  });
});

/** The header of a dense file rewritten (identity and robot_cell are outside the content digest). */
function withHeader(blob: Buffer, edit: (h: Record<string, any>) => void): Buffer {
  const n = blob.readUInt32BE(0);
  const h = JSON.parse(blob.subarray(4, 4 + n).toString('utf8'));
  edit(h);
  const text = Buffer.from(JSON.stringify(h));
  const len = Buffer.alloc(4);
  len.writeUInt32BE(text.length);
  return Buffer.concat([len, text, blob.subarray(4 + n)]);
}

describe('robot and cell identity check (document 2 part 2)', () => {
  test('load refuses a trajectory planned for another robot description, before anything reaches the cell', covers('rule:robot_cell_check.mismatch', 'profile:olp.labels'), async ({ olps, skip }) => {
    const x = await execCell(olps, skip);
    const { client } = x;
    const g0 = BigInt((await cellStatus(client)).grant.generation);
    // Planned for the same model without a pinned description (all zero, part 2): not this cell's robot. The valid twin is the
    // same plan for the cell's own description, loaded.
    // (Each loaded before the next plan: a planner may keep one file per trajectory digest, and the two
    // plans differ only outside the samples.)
    const other = await plan(x, 'sha256:' + '0'.repeat(64));
    const post = await selected(x);
    const r = await post('/load', { trajectory_digest: other.digest });
    if (x.external && r.status === 400) bodyTaken(x, skip, r, 'load');
    expect(r.status, r.text).toBeGreaterThanOrEqual(400);
    expect([typeof r.json?.error, typeof r.json?.detail], r.text).toEqual(['string', 'string']);
    await inProfile('profile:olp.labels', () => expectMachineError(r, 409, 'robot_cell_mismatch'));
    // Checked before acquiring: the refused load took no grant on the cell.
    expect(BigInt((await cellStatus(client)).grant.generation)).toBe(g0);
    const good = await plan(x);
    bodyTaken(x, skip, await post('/load', { trajectory_digest: good.digest }), 'load');
  });

  test(
    'load compares robot_cell with the selected cell: missing, unavailable; another configuration is only a note',
    covers('rule:robot_cell_check.missing', 'rule:robot_cell_check.unavailable', 'rule:robot_cell_check.configuration_note'),
    async ({ olps, skip }) => {
      const x = await execCell(olps, skip);
      const { target, client } = x;
      const at = ownPlannerAddress(skip);
      const g0 = BigInt((await cellStatus(client)).grant.generation);
      // A cell that cannot say which robot it is: the catalogue's cell-nodesc; on someone else's server the
      // run's control service registered for the test without a robot description (the registry body is
      // docs/profile.md's; a server that does not take it cannot have such a cell and the test skips).
      const good = await plan(x);
      let nodesc = 'cell-nodesc';
      if (x.external) {
        nodesc = `hil-nodesc-${process.pid}`;
        const d = x.description;
        const why = await registerCell(x.o, { cell_id: nodesc, model_id: x.model, control: { socket: target.address }, mode: String((d as Record<string, unknown>).backend ?? 'simulation'), backend: 'core', pair_id: d.binding.pair_id, configuration_sha256: d.binding.configuration_sha256 });
        skip(why !== undefined, `needs a cell without a robot description: ${why}`);
      }
      const post = await selected(x, nodesc);
      // The labels are document 2 part 2's; their status (409) is ours (docs/profile.md "OLP server").
      const refused = async (r: OlpReply, label: string) => {
        expectMachineError(r, undefined, label);
        await inProfile('profile:olp.labels', () => expect(r.status).toBe(409));
      };
      await refused(await post('/load', { trajectory_digest: good.digest }), 'robot_cell_unavailable');
      // Files without the block, and with another machine configuration, from a planner of the test's own
      // (on someone else's deployment the one its own_planner server calls, olp-facts.ts).
      const files = new Map<string, Buffer>([
        ['missing', withHeader(good.blob, (h) => delete h.robot_cell)],
        ['note', withHeader(good.blob, (h) => (h.robot_cell.machine_configuration_sha256 = 'sha256:' + 'c'.repeat(64)))],
      ]);
      const server: Server = createServer((req, res) => {
        const which = decodeURIComponent(req.url ?? '').includes('1'.repeat(64)) ? 'missing' : 'note';
        res.end(files.get(which));
      });
      await new Promise<void>((r, reject) => {
        server.once('error', (e) => reject(new HarnessError('HIL_ERR_TARGET_OPTION', `the test's own planner cannot listen on ${at.host}:${at.port}: ${e.message}`)));
        server.listen(at.port, at.host, () => r());
      });
      try {
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
        const f = useOlp({ skip }, await olps.open('fake-dense', () => ({ single: { socket: target.address, model_id: MODEL, robot_description_sha256: URDF_SHA }, planner: { url }, leaseMs: LEASE_MS })));
        await refused(await f.client.post('/dense-execution/load', { trajectory_digest: 'sha256:' + '1'.repeat(64) }), 'robot_cell_missing');
        const noted = await f.client.post('/dense-execution/load', { trajectory_digest: 'sha256:' + '2'.repeat(64) });
        bodyTaken(x, skip, noted, 'load');
        // How the load reply carries the note is ours (docs/profile.md "OLP server: dense execution").
        await inProfile('profile:olp.execution_bodies', () => {
          expect(noted.json?.notes?.length).toBe(1);
          expect(noted.json?.notes[0]).toMatch(/machine_configuration_sha256/);
        });
      } finally {
        await olps.drop('fake-dense');
        await new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r())));
      }
      // Checked before acquiring: none of the refused loads took a grant on the cell.
      expect(BigInt((await cellStatus(client)).grant.generation)).toBe(g0);
    },
  );
});

describe('a cell that dies mid-play', () => {
  test('the core restarts while a program plays: the OLP server loses the lease, stops playing and says why', covers('olp:route.dense_execution_run'), async ({ olps, skip }) => {
    const x = await execCell(olps, skip);
    const { o, target, client } = x;
    skip(!target.abilities.coreRestart, `needs the cell's core restarted while a program plays (a new daemon incarnation, document 1): no operation of document 1 restarts it, and target ${target.name} cannot restart its core`);
    const post = await selected(x);
    const { digest } = await plan(x);
    await alive(o, async () => {
      await loadAndPlay(x, skip, post, digest);
      await target.restartCore();
      const st = await until('the lease loss', () => o.client.get('/dense-execution/status'), (r) => r.json?.lease_held === false, 10_000);
      expect(st.json?.playing).toBe(false);
      expect(st.json?.stopped_reason).toMatch(/^lease_lost/);
    });
    await o.client.post('/dense-execution/stop', {});
    await released(client);
  });
});
