// Trajectories (document 1 part 4 prepare_trajectory, start_trajectory, discard_trajectory; part 2 Point,
// HandleRecord, Execution, MotionState, PlanCursor; part 3 handle states; part 6 handle and execution
// events). A trajectory here moves J1 by a small step from where it is held and back; the other axes hold.
// Tests that energise drives need motion; fault tests need fault injection.
//
// The cell is moved through a CellDriver (harness/clients/stepped.ts driverOf; the file declares
// stepsItsCell, harness/fixture.ts): on the sim target the file's stack runs on the stepped clock and every
// wait is counted in the cell's own time (a wait of N ms is N ms of cycles at Describe cycle_ns), so a loaded
// host cannot make an execution, an event or a Home look late; against an external service or a rig the
// same tests wait in real time, as many milliseconds. What stays host time on either clock: a grant's lease
// (document 1 part 2 Grant deadline_host_ns, renewed by the keeper's thread in host time) and the service's
// 1 s wait for a native receipt (docs/profile.md "Trajectories": Uncertain Start), so the tests of a lease
// and of that bound keep their meaning on the stepped clock.

import { eventCursor, eventsSince, type CellEvent } from '../../harness/clients/events.ts';
import { readStatus, type StatusView } from '../../harness/clients/status.ts';
import { readyStepped, settle, type CellDriver } from '../../harness/clients/stepped.ts';
import { dueNs, latestSequence, readBatch, recordsSince } from '../../harness/clients/telemetry.ts';
import type { CycleCaptureRecordV2 } from '../../harness/oracle/telemetry.ts';
import { Cell, type Session } from '../../harness/clients/cell.ts';
import type { BindingInput, ControlClient } from '../../harness/clients/control.ts';
import { covers, describe, expect, hostBound, needsFaults, needsMotion, inProfile, profile, recoveringTest, stepsItsCell, type Op, type VariantOf } from '../../harness/fixture.ts';
import { problems } from '../../harness/problems.ts';
import { REQUEST_SCHEMA } from '../../harness/clients/control.ts';
import { stringifyExact } from '../../harness/oracle/json.ts';
import { HarnessError } from '../../harness/errors.ts';
import { createConnection } from 'node:net';
import { firstAxisUnfit, machineOf, needs } from '../../harness/machine.ts';
import type { Target } from '../../harness/targets/index.ts';

stepsItsCell();

/**
 * Every test leaves the cell released, injected faults removed and latched faults reset. The fixtures
 * `drive` (moves the file's cell on: stepped or waited for) and `op` (a fenced operation, stepped until
 * answered) are harness/fixture.ts's.
 */
const test = recoveringTest;

const J1 = 1; // axis mask of J1

/** Skip a test that moves the cell's first axis when this cell cannot (harness/machine.ts firstAxisUnfit). */
function needsJ1(d: object, skip: (note: string) => never): void {
  const why = firstAxisUnfit(machineOf(d));
  if (why) skip(why);
}

interface Handles {
  handles: Array<{ handle: bigint; state: string; generation: bigint; execution_generation: bigint; native_sequence: bigint; identity?: Record<string, unknown> }>;
  generation: bigint;
  state: string;
  identity?: Record<string, unknown>;
  segment: bigint;
  native_sequence: bigint;
  error?: string;
}
type Full = StatusView & { execution: Handles; motion: Record<string, bigint | boolean> | null; plan_cursor: Record<string, bigint> | null };

const num = (v: number | bigint) => Number(v);
async function status(client: ControlClient): Promise<Full> {
  return (await readStatus(client)) as unknown as Full;
}

/**
 * Hold a grant, Home J1 when it has no Home evidence, enable every axis and arm. A stepped stack publishes
 * its first status once stepped: the first read waits for it (at once on a real-time cell).
 */
async function ready(cell: Cell, drive: CellDriver, op: Op, axes: number): Promise<{ s: Session; hold: number[] }> {
  const s = await cell.hold({ requested_lease_ms: 2_000 });
  let st: StatusView = await drive.status((x) => x.core !== null, 1_000);
  if ((st.core!.home_valid_mask & 1n) === 0n) {
    // A native Home is answered when it ends (document 1 part 4 home: "waits up to 60 s"), long after its receipt.
    const h = await drive.answerWithin(cell.fenced('home', s, { axis_mask: J1 }), 60_000);
    expect(h.status, h.reply.error).toBe(200);
  }
  const all = (1 << axes) - 1;
  const en = await op('enable', s, { axis_mask: all });
  expect(en.status, en.reply.error).toBe(200);
  const a = await op('arm', s);
  expect(a.status, a.reply.error).toBe(200);
  st = await drive.status((x) => num(x.core!.axis_enable_mask) === all, 3_000);
  return { s, hold: st.axes.map((x) => num(x.position)) };
}

/** Points: every axis at `hold`, J1 through `j1` at `times` (s); optional per-point fields. */
function points(hold: number[], times: number[], j1: number[], extra: Array<Record<string, unknown>> = []) {
  return times.map((t, k) => ({
    time_ns: BigInt(Math.round(t * 1e9)),
    position: hold.map((q, i) => (i === 0 ? j1[k]! : q)),
    ...(extra[k] ?? {}),
  }));
}

/** A short move of J1 by +d and back in `secs`. */
const wiggle = (hold: number[], d = 0.02, secs = 0.3) => points(hold, [0, secs / 2, secs], [hold[0]!, hold[0]! + d, hold[0]!]);

/**
 * The earliest the plan can have started, core time: "ns from plan start" (document 1 part 2 Point time_ns)
 * lies between the last cycle before the execution and its first one. That cycle may have woken late: its
 * time due (t_ns less cycle_jitter_ns, "wake minus scheduled", document 1 part 2: dueNs) is as much a start
 * of the plan as its wake. A bound from its wake read a core counting plan time on its cycle grid, as the
 * reference does, as running ahead of the curve (16 counts, recorded at load 5).
 */
function planStartNs(recs: readonly CycleCaptureRecordV2[], exec: readonly CycleCaptureRecordV2[], cycleNs: bigint): bigint {
  const prior = recs.filter((r) => r.seq < exec[0]!.seq).at(-1);
  return prior ? dueNs(prior) : dueNs(exec[0]!) - cycleNs;
}

/**
 * A plan whose last point is at T seconds runs for T of the core's own time (document 1 part 2 Point
 * time_ns: "ns from plan start"; the records' t_ns), every cycle of the execution with its record. Plan
 * start lies between the last cycle before the execution (its time due: dueNs) and its first one. Counting records against
 * T / cycle_ns instead read a loaded host, where the reference stack's real-time core re-anchors after
 * falling far behind (its own cycle lateness on the harness's host, a host figure), as a plan cut short:
 * the cycles it skipped have no records, while the plan's time still ran.
 */
function expectPlanSpan(recs: readonly CycleCaptureRecordV2[], exec: readonly CycleCaptureRecordV2[], T: number, cycleNs: bigint): void {
  expect(exec.length, 'records of the execution').toBeGreaterThan(0);
  const first = exec[0]!;
  const last = exec.at(-1)!;
  // no cycle inside the execution without its record, and no other plan's cycle among them
  expect(Number(last.seq - first.seq) + 1, 'records from the first to the last cycle of the execution').toBe(exec.length);
  const tPrev = planStartNs(recs, exec, cycleNs);
  const next = recs.find((r) => r.seq > last.seq);
  expect(next, 'a record after the execution').toBeDefined();
  const span = T * 1e9;
  // ran to the end of its time: the first cycle without it is T (less a cycle) or more after plan start
  expect(Number(next!.t_ns - tPrev), 'core time from plan start to the first cycle after the execution, ns').toBeGreaterThanOrEqual(span - Number(cycleNs));
  // and not past it: its last cycle is less than T (and a cycle) after plan start
  expect(Number(last.t_ns - first.t_ns), 'core time from the first to the last cycle of the execution, ns').toBeLessThan(span + Number(cycleNs));
}

async function prepare(op: Op, s: Session, pts: unknown[], fields: Record<string, unknown> = {}) {
  return op('prepare_trajectory', s, { axis_mask: J1, points: pts, ...fields });
}

const transitions = (evs: CellEvent[], h: bigint) =>
  evs.filter((e) => e.type === 'handle_transition' && (e.handle as Record<string, unknown>).handle === h).map((e) => `${(e.handle as Record<string, string>).from}->${(e.handle as Record<string, string>).to}`);

describe('prepare, start, complete', () => {
  test(
    'prepare answers a handle, the handle is prepared in status with its record, and a handle_transition event says so',
    covers(
      'transition:handle:none->prepared:prepare',
      'event:handle_transition',
      'field:Event.handle.from',
      'field:Event.handle.to',
      'field:HandleRecord.handle',
      'field:HandleRecord.state',
      'field:HandleRecord.generation',
      'field:HandleRecord.execution_generation',
      'field:HandleRecord.native_sequence',
      'field:Point.time_ns',
      'field:Point.position',
      'field:Execution.handles',
      'field:Execution.identity',
      'field:Request.points',
      'field:Response.handle',
    ),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const cursor = await eventCursor(client);
      const r = await prepare(op, s, wiggle(hold));
      expect(r.status, r.reply.error).toBe(200);
      const h = r.reply.handle!;
      expect(h).toBeGreaterThan(0n);
      const st = await status(client);
      const rec = st.execution.handles.find((x) => x.handle === h);
      expect(rec).toEqual({ handle: h, state: 'prepared', generation: s.generation, execution_generation: 0n, native_sequence: 0n });
      // no identity given at prepare: Execution.identity is present, every field empty or zero
      expect(st.execution.identity).toEqual({ plan_id: '', program_id: '', program_digest: '', trajectory_digest: '', source_digest: '', normalised_digest: '', manifest_revision: 0n, plan_revision: 0n });
      expect(transitions(await eventsSince(client, cursor), h)).toEqual(['->prepared']);
    },
  );

  test(
    'start moves J1 along the trajectory to the end: started, execution events, consumed, Execution and MotionState followed',
    covers(
      'transition:handle:prepared->started:start',
      'transition:handle:started->consumed:completion',
      'event:execution_started',
      'event:execution_completed',
      'field:Execution.generation',
      'field:Execution.state',
      'field:Execution.native_sequence',
      'field:Execution.segment',
      'field:MotionState.mode',
      'field:MotionState.state',
      'field:MotionState.trajectory_id',
      'field:MotionState.point_index',
      'field:MotionState.done',
      'field:MotionState.command_sequence',
      'field:MotionState.time_ns',
      'field:MotionState.queue_depth',
      'field:MotionState.last_event',
      'field:PlanCursor.active_handle',
      'field:PlanCursor.time_ns',
      'field:PlanCursor.sample_index',
      'field:PlanCursor.native_clock_ns',
    ),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const before = (await status(client)).execution.generation;
      const target_ = hold[0]! + 0.03;
      const pts = points(hold, [0, 0.4], [hold[0]!, target_]);
      const h = (await prepare(op, s, pts)).reply.handle!;
      expect((await status(client)).motion).toMatchObject({ queue_depth: 1n });
      const cursor = await eventCursor(client);
      const startSent = performance.now();
      const r = await op('start_trajectory', s, { handle: h });
      expect(r.status, r.reply.error).toBe(200);
      const seq = r.reply.sequence!;
      expect(seq).toBeGreaterThan(0n);
      const during = await status(client);
      const duringAt = performance.now();
      // The plan runs 0.4 s from a cycle after the Start was admitted: a status answered sooner than that
      // after the Start was sent must show it executing; answered later, the plan may have ended.
      await hostBound(
        { rule: 'document 1 part 2 Execution.state: executing while the started plan runs', marginMs: 400, since: startSent, measured: () => ({ ms: duringAt - startSent, what: 'from sending the Start to the status read after it answering' }) },
        async () => {
          expect(during.execution).toMatchObject({ generation: before + 1n, state: 'executing', native_sequence: seq });
          expect(during.motion).toMatchObject({ mode: 2n, state: 3n, trajectory_id: h, done: false, command_sequence: seq, queue_depth: 0n });
          expect(during.plan_cursor!.active_handle).toBe(h);
        },
      );
      expect(during.plan_cursor!.native_clock_ns).toBeGreaterThan(0n);
      const started = await drive.event(cursor, (e) => e.type === 'execution_started', 3_000);
      expect(started, 'an execution_started event within 3 s').not.toBeUndefined();
      expect(started!.execution).toMatchObject({ handle: h, generation: before + 1n, native_sequence: seq });
      const done = await drive.event(cursor, (e) => e.type === 'execution_completed', 5_000);
      expect(done, 'an execution_completed event within 5 s').not.toBeUndefined();
      expect(done!.execution).toMatchObject({ handle: h, generation: before + 1n });
      const st = await status(client);
      expect(st.execution.handles.find((x) => x.handle === h)).toMatchObject({ state: 'consumed', execution_generation: before + 1n, native_sequence: seq });
      expect(st.execution).toMatchObject({ state: 'completed', generation: before + 1n, segment: 0n });
      expect(st.motion).toMatchObject({ mode: 0n, state: 4n, done: true, last_event: 2n, trajectory_id: h });
      expect(st.plan_cursor!.active_handle).toBe(0n);
      expect(transitions(await eventsSince(client, cursor), h)).toEqual(['prepared->started', 'started->consumed']);
      // the axis really went there and holds it: completed means within the axis's completion tolerance
      // (document 3 limits.completion_tolerance), as the cell was configured
      const tol = needs(skip, machineOf(description).axes[0]!.config?.completionTolerance, 'the run has no machine configuration of this cell: its completion tolerance is not known');
      const settled = await drive.status((x) => Math.abs(num(x.axes[0]!.position) - target_) <= tol, 3_000);
      expect(Math.abs(num(settled.axes[0]!.position) - target_)).toBeLessThanOrEqual(tol);
    },
  );

  test(
    'a point list with velocities is accepted; a second Start of a consumed handle answers handle_consumed',
    covers('field:Point.velocity', 'reason:handle_consumed'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const zero = hold.map(() => 0);
      const pts = points(hold, [0, 0.15, 0.3], [hold[0]!, hold[0]! + 0.01, hold[0]!], [{ velocity: zero }, { velocity: zero.map((_, i) => (i === 0 ? 0.05 : 0)) }, { velocity: zero }]);
      const h = (await prepare(op, s, pts)).reply.handle!;
      const cursor = await eventCursor(client);
      expect((await op('start_trajectory', s, { handle: h })).status).toBe(200);
      const done = await drive.event(cursor, (e) => e.type === 'execution_completed', 5_000);
      expect(done?.execution, 'execution_completed of this handle').toMatchObject({ handle: h });
      const again = await op('start_trajectory', s, { handle: h });
      expect(again.status).toBe(409);
      expect(again.label).toBe('handle_consumed');
    },
  );
});

describe('execution in telemetry', () => {
  test(
    'every cycle of the execution: the record names the trajectory, the target follows the Hermite curve of the points, the position stays within the following error bound',
    covers('rule:telemetry.drive_counts'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const ax = description.axes[0] as unknown as { counts_per_unit: number | bigint; sign: number | bigint; following_error?: number };
      const cpu = num(ax.counts_per_unit) * num(ax.sign);
      // limits.following_error of the first axis, as the cell was configured (document 3 part 2)
      const followingError = needs(skip, machineOf(description).axes[0]!.config?.followingError, 'the run has no machine configuration of this cell: its following error is not known');
      // max_cycle_lateness_ns is required where limits.following_error is known (document 3 part 2 machine
      // top level): the margin a late core of this host is allowed before a following error is blamed on it
      const latenessNs = Number(needs(skip, machineOf(description).config?.max_cycle_lateness_ns, 'the run has no machine configuration of this cell: its cycle lateness bound is not known'));
      const cycleNs = machineOf(description).cycleNs;
      const q0 = hold[0]!;
      const q1 = q0 + 0.04;
      const T = 0.4;
      const h = (await prepare(op, s, points(hold, [0, T], [q0, q1]))).reply.handle!;
      const from = await latestSequence(client);
      const cursor = await eventCursor(client);
      const st = await op('start_trajectory', s, { handle: h });
      expect(st.status).toBe(200);
      const done = await drive.event(cursor, (e) => e.type === 'execution_completed', 5_000);
      expect(done?.execution, 'execution_completed of this handle').toMatchObject({ handle: h, native_sequence: st.reply.sequence });
      const recs: CycleCaptureRecordV2[] = [];
      for (let after = from; ; ) {
        const b = await readBatch(client, after);
        recs.push(...b.records);
        if (b.records.length === 0 || b.header.last_sequence === after) break;
        after = b.header.last_sequence;
        if (b.records.length < 4096) break;
      }
      const exec = recs.filter((r) => r.active_traj_id === h);
      // 0.4 s of the core's own time at the cell's cycle (records stamped t_ns, document 1 part 2 Point time_ns)
      expectPlanSpan(recs, exec, T, cycleNs);
      // Plan start lies between the last cycle before the execution (planStartNs) and its first cycle.
      // Taking the first record's time as the origin made a late first cycle (a loaded machine: 10 ms) read
      // as the target running ahead of the curve.
      const t0 = exec[0]!.t_ns;
      const tPrev = planStartNs(recs, exec, cycleNs);
      let lastIndex = 0;
      // The worst following error of the execution, judged after the loop: a real-time core the host kept
      // from its cycles (a 31 ms stall on a loaded machine) moves the target a stall's worth in one cycle,
      // and the drive lags it; on this host that is the host's doing, not the target's (harness/lateness.ts
      // hostBound coreLate).
      let worst = { err: 0, seq: 0n };
      // Every record's checks, reported with one expect: nine expects a cycle held the harness's thread for
      // a quarter of a second (and a rig's bench box heartbeat with it, docs/benchbox.md).
      const { list: bad, add: want } = problems();
      for (const r of exec) {
        const rec = `record ${r.seq}`;
        want(r.active_mode === 2, `${rec}: active_mode ${r.active_mode}, not 2 (trajectory)`);
        want(r.active_command_seq === st.reply.sequence, `${rec}: active_command_seq ${r.active_command_seq}, not the Start's ${st.reply.sequence}`);
        want(r.current_point_index >= lastIndex, `${rec}: current_point_index ${r.current_point_index} went back from ${lastIndex}`);
        lastIndex = r.current_point_index;
        const a = r.ax[0]!;
        want(a.target_velocity_valid === 1, `${rec}: J1 target_velocity_valid ${a.target_velocity_valid}`);
        // Hermite between two points at rest: q0 + (q1 - q0) (3 s^2 - 2 s^3), s = tau / T, with tau between
        // this cycle's time since the first execution cycle and since the cycle before it (0.1 ms of slack)
        const tauMin = Number(r.t_ns - t0) / 1e9 - 0.0001;
        const tauMax = Number(r.t_ns - tPrev) / 1e9 + 0.0001;
        const at = (x: number) => { const u = Math.min(1, Math.max(0, x / T)); return q0 + (q1 - q0) * (3 * u * u - 2 * u * u * u); };
        // In counts (a negative sign turns the bounds round).
        const [c1, c2] = [at(tauMin) * cpu, at(tauMax) * cpu];
        const lo = Math.floor(Math.min(c1, c2)) - 1;
        const hi = Math.ceil(Math.max(c1, c2)) + 1;
        want(a.target >= lo && a.target <= hi, `${rec}: J1 target ${a.target} counts outside the curve's ${lo}..${hi}`);
        if (Math.abs(a.position - a.target) > worst.err) worst = { err: Math.abs(a.position - a.target), seq: r.seq };
        want(r.motion_done === 0, `${rec}: motion_done ${r.motion_done} during the execution`);
      }
      expect(bad).toEqual([]);
      // the drive follows within the configured following error (limits.following_error, logical units)
      await hostBound(
        {
          rule: 'document 3 part 2 limits.following_error: the drive follows the target within it',
          marginMs: latenessNs / 1e6,
          stalls: 'none',
          // The cycles that lead up to the worst record: a late one there made the target jump ahead.
          coreLate: () => ({ ms: Math.max(...recs.filter((r) => r.seq <= worst.seq && r.seq > worst.seq - 20n).map((r) => Number(r.cycle_jitter_ns))) / 1e6, what: `the latest-running of the 20 cycles up to record ${worst.seq}` }),
        },
        async () => expect(worst.err, `|position - target| of axis 0 at record ${worst.seq}`).toBeLessThanOrEqual(Math.abs(followingError * cpu)),
      );
      const after = recs.filter((r) => r.seq > exec.at(-1)!.seq);
      expect(after.length).toBeGreaterThan(0);
      expect(after[0]!.motion_done).toBe(1);
      expect(after[0]!.active_traj_id).toBe(0n);
      expect(after[0]!.ax[0]!.target).toBe(Math.round(q1 * cpu)); // held at the last point
    },
  );
});

describe('point velocities', () => {
  test(
    'the point velocities shape the curve: two points at the same position with velocities +v and -v bulge out by T v / 4 at mid-interval, every cycle on the Hermite curve of positions and velocities',
    covers('field:Point.velocity', 'profile:trajectory.hermite_velocities'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const ax = description.axes[0] as unknown as { counts_per_unit: number | bigint; sign: number | bigint };
      const cpu = num(ax.counts_per_unit) * num(ax.sign);
      const cycleNs = machineOf(description).cycleNs;
      const q0 = hold[0]!;
      const T = 0.4;
      const v = 0.2; // rad/s, below every fixture axis's max_velocity; the bulge is T v / 4 = 0.02 rad
      const zero = hold.map(() => 0);
      const vel = (x: number) => zero.map((_, i) => (i === 0 ? x : 0));
      // Same position at both ends: a decoder that drops the velocities (or derives them from the positions)
      // interpolates a flat line and never leaves q0.
      const h = (await prepare(op, s, points(hold, [0, T], [q0, q0], [{ velocity: vel(v) }, { velocity: vel(-v) }]))).reply.handle!;
      expect(h, 'prepared').toBeGreaterThan(0n);
      const from = await latestSequence(client);
      const cursor = await eventCursor(client);
      const st = await op('start_trajectory', s, { handle: h });
      expect(st.status, st.reply.error).toBe(200);
      const done = await drive.event(cursor, (e) => e.type === 'execution_completed', 5_000);
      expect(done, 'execution_completed within 5 s').not.toBeUndefined();
      expect(done!.execution).toMatchObject({ handle: h });
      const recs = await recordsSince(client, from);
      const exec = recs.filter((r) => r.active_traj_id === h);
      expectPlanSpan(recs, exec, T, cycleNs);
      const t0 = exec[0]!.t_ns;
      const tPrev = planStartNs(recs, exec, cycleNs);
      // Hermite with p0 = p1 = q0, v0 = v, v1 = -v: q0 + T v (s - s^2), s = tau / T.
      const at = (x: number) => {
        const u = Math.min(1, Math.max(0, x / T));
        return q0 + T * v * (u - u * u);
      };
      let peak = 0;
      for (const r of exec) {
        const tauMin = Number(r.t_ns - t0) / 1e9 - 0.0001;
        const tauMax = Number(r.t_ns - tPrev) / 1e9 + 0.0001;
        // The curve's range over [tauMin, tauMax]: its ends, and its peak at T / 2 when the span holds it
        // (the curve is not monotonic there, so the ends alone understate the range).
        const values = [at(tauMin), at(tauMax), ...(tauMin <= T / 2 && T / 2 <= tauMax ? [at(T / 2)] : [])].map((x) => x * cpu);
        const lo = Math.min(...values);
        const hi = Math.max(...values);
        const tgt = r.ax[0]!.target;
        expect(tgt, `cycle ${r.seq}: target on the Hermite curve of the given velocities`).toBeGreaterThanOrEqual(Math.floor(Math.min(lo, hi)) - 1);
        expect(tgt, `cycle ${r.seq}: target on the Hermite curve of the given velocities`).toBeLessThanOrEqual(Math.ceil(Math.max(lo, hi)) + 1);
        peak = Math.max(peak, Math.abs(tgt / cpu - q0));
      }
      expect(peak).toBeGreaterThan(0.9 * (T * v) / 4);
      expect(peak).toBeLessThanOrEqual((T * v) / 4 + 2 / Math.abs(cpu));
    },
  );
});

describe('handle states', () => {
  test(
    'discard retires a prepared handle as discarded; starting or discarding it again answers handle_discarded',
    covers('transition:handle:prepared->discarded:discard', 'reason:handle_discarded'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const h = (await prepare(op, s, wiggle(hold))).reply.handle!;
      const cursor = await eventCursor(client);
      const d = await op('discard_trajectory', s, { handle: h });
      expect(d.status, d.reply.error).toBe(200);
      expect(d.reply.sequence).toBeGreaterThan(0n);
      expect(transitions(await eventsSince(client, cursor), h)).toEqual(['prepared->discarded']);
      for (const name of ['start_trajectory', 'discard_trajectory']) {
        const r = await op(name, s, { handle: h });
        expect(r.status).toBe(409);
        expect(r.label).toBe('handle_discarded');
      }
    },
  );

  test(
    'a newer preparation supersedes the prepared handle; starting the older one answers handle_superseded',
    covers('transition:handle:prepared->superseded:newer_preparation', 'reason:handle_superseded'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const h1 = (await prepare(op, s, wiggle(hold))).reply.handle!;
      const cursor = await eventCursor(client);
      const h2 = (await prepare(op, s, wiggle(hold, 0.01))).reply.handle!;
      expect(h2).toBeGreaterThan(h1);
      expect(transitions(await eventsSince(client, cursor), h1)).toEqual(['prepared->superseded']);
      const r = await op('start_trajectory', s, { handle: h1 });
      expect(r.status).toBe(409);
      expect(r.label).toBe('handle_superseded');
    },
  );

  test(
    'a stop retires the prepared handle; with the next grant, starting it answers handle_retired',
    covers('transition:handle:prepared->retired:stop_or_grant_loss', 'reason:handle_retired'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const h = (await prepare(op, s, wiggle(hold))).reply.handle!;
      const cursor = await eventCursor(client);
      const stop = await op('stop', s);
      expect(stop.status).toBe(200);
      const revoked = await drive.event(cursor, (e) => e.type === 'grant_revoked', 3_000);
      // The stopped grant, its stopping generation (document 1 part 6: grant has generation and stopping).
      expect(revoked?.grant, 'grant_revoked of the stopped grant').toMatchObject({ generation: (stop.reply.data as { generation: bigint }).generation, stopping: false });
      expect(transitions(await eventsSince(client, cursor), h)).toEqual(['prepared->retired']);
      const s2 = await cell.grant();
      const r = await op('start_trajectory', s2, { handle: h });
      expect(r.status).toBe(409);
      expect(r.label).toBe('handle_retired');
    },
  );

  test(
    'a Start refused for readiness keeps the handle prepared; it starts once the cell is armed',
    covers('transition:handle:prepared->prepared:start_refused', 'rule:op.start.handle_kept', 'reason:not_ready'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      expect((await op('enable', s, { axis_mask: 0 })).status).toBe(200); // disarms
      const h = (await prepare(op, s, wiggle(hold))).reply.handle!;
      const r = await op('start_trajectory', s, { handle: h });
      expect(r.status).toBe(409);
      expect(r.label).toBe('not_ready');
      expect(r.reply.native_result).toMatchObject({ Result: 1, Reason: 2 });
      expect((await status(client)).execution.handles.find((x) => x.handle === h)!.state).toBe('prepared');
      const all = (1 << description.axes.length) - 1;
      expect((await op('enable', s, { axis_mask: all })).status).toBe(200);
      expect((await op('arm', s)).status).toBe(200);
      const ok = await op('start_trajectory', s, { handle: h });
      expect(ok.status, ok.reply.error).toBe(200);
    },
  );

  test(
    'while it executes: start again answers handle_started, discard answers handle_active; a stop retires it with execution_aborted',
    covers('reason:handle_started', 'reason:handle_active', 'transition:handle:started->refused:discard', 'transition:handle:started->retired:stop', 'event:execution_aborted', 'profile:events.end_reason'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const h = (await prepare(op, s, points(hold, [0, 3], [hold[0]!, hold[0]! + 0.05]))).reply.handle!;
      const cursor = await eventCursor(client);
      expect((await op('start_trajectory', s, { handle: h })).status).toBe(200);
      const again = await op('start_trajectory', s, { handle: h });
      expect(again.status).toBe(409);
      expect(again.label).toBe('handle_started');
      const d = await op('discard_trajectory', s, { handle: h });
      expect(d.status).toBe(409);
      expect(d.label).toBe('handle_active');
      expect((await status(client)).execution.handles.find((x) => x.handle === h)!.state).toBe('started');
      expect((await op('stop', s)).status).toBe(200);
      const ab = await drive.event(cursor, (e) => e.type === 'execution_aborted', 3_000);
      expect(ab!.execution).toMatchObject({ handle: h });
      // The reason names the stop, not a Home that never ran (docs/profile.md "Events").
      await inProfile('profile:events.end_reason', () => expect((ab!.execution as { reason?: string }).reason).toBe('stop'));
      expect(transitions(await eventsSince(client, cursor), h)).toEqual(['prepared->started', 'started->retired']);
      expect((await status(client)).execution.state).toBe('cancelled');
    },
  );

  test(
    'a fault while it executes retires it with execution_faulted carrying the fault bits and recovery; Execution.error says native_execution_failed',
    covers('transition:handle:started->retired:fault', 'event:execution_faulted', 'field:Event.execution.fault_bits', 'field:Event.execution.recovery', 'reason:native_execution_failed', 'field:Execution.error'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsFaults({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const h = (await prepare(op, s, points(hold, [0, 3], [hold[0]!, hold[0]! + 0.05]))).reply.handle!;
      const cursor = await eventCursor(client);
      expect((await op('start_trajectory', s, { handle: h })).status).toBe(200);
      await target.inject({ kind: 'following_error', axis: 0 });
      const f = await drive.event(cursor, (e) => e.type === 'execution_faulted', 3_000);
      expect(f!.execution).toMatchObject({ handle: h, fault_bits: 32n, recovery: ['reset_after_condition_clears'] });
      const st = await status(client);
      expect(st.execution).toMatchObject({ state: 'faulted', error: 'native_execution_failed' });
      expect(st.execution.handles.find((x) => x.handle === h)!.state).toBe('retired');
    },
  );
});

describe('refusals', () => {
  test(
    'a Start whose native receipt never comes: fence, the handle retired, and the service stops the grant so the late Start moves nothing',
    covers('reason:fence', 'transition:handle:prepared->retired:stop_or_grant_loss', 'profile:trajectory.uncertain_start'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      needsFaults({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const h = (await prepare(op, s, points(hold, [0, 3], [hold[0]!, hold[0]! + 0.05]))).reply.handle!;
      const cursor = await eventCursor(client);
      await target.inject({ kind: 'stall_next_command', ms: 1500 }); // past the service's 1 s receipt bound
      const r = await op('start_trajectory', s, { handle: h });
      expect({ status: r.status, label: r.label, native: r.reply.native_result }).toEqual({ status: 409, label: 'fence', native: undefined });
      expect((await status(client)).execution.handles.find((x) => x.handle === h)!.state).toBe('retired');
      const revoked = await drive.event(cursor, (e) => e.type === 'grant_revoked', 5_000);
      // The service's stop after the uncertain Start advanced the generation past the grant's.
      expect(revoked?.grant, 'grant_revoked').toMatchObject({ stopping: false });
      expect((revoked!.grant as { generation: bigint }).generation).toBeGreaterThan(s.generation);
      // the core took the Start after its stall, then the stop: nothing is left moving or armed
      const st = await drive.status((x) => x.core!.armed === 0n && (x as unknown as Full).motion?.mode === 0n, 5_000);
      expect({ armed: st.core!.armed, mode: (st as unknown as Full).motion!.mode }).toEqual({ armed: 0n, mode: 0n });
    },
  );

  test(
    'authority lost while the Start waits in the core: the handle is retired and the Start answers fence',
    covers('transition:handle:prepared->retired:fence_failure', 'reason:fence'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      needsFaults({ skip }, target);
      // A grant kept alive while the cell is made ready, then left to run out: the Start is sent right
      // after a last renewal and held in the core (stall_next_command) past the lease deadline, so the
      // core's own fence refuses it (native no_grant) after the service admitted it. The default lease
      // (500 ms, document 1 part 2) keeps the stall short; its renewals during the set-up go from the
      // keeper's thread (harness/clients/keeper.ts), so a stall of this loop cannot end the grant early
      // (a lapse that is the host's doing is judged so).
      const s = await cell.hold({ requested_lease_ms: 500n });
      const renew = async () => {
        const r = await op('renew', s);
        expect(r.status, r.reply.error).toBe(200);
        return r.reply.data as Record<string, bigint>;
      };
      let h: bigint;
      let hold: number[];
      try {
        // A stepped stack publishes its first status once stepped; a native Home is answered when it ends.
        const st0 = await drive.status((x) => x.core !== null, 1_000);
        if ((st0.core!.home_valid_mask & 1n) === 0n) expect((await drive.answerWithin(cell.fenced('home', s, { axis_mask: J1 }), 60_000)).status).toBe(200);
        const all = (1 << description.axes.length) - 1;
        expect((await op('enable', s, { axis_mask: all })).status).toBe(200);
        expect((await op('arm', s)).status).toBe(200);
        hold = (await drive.status((x) => num(x.core!.axis_enable_mask) === all, 3_000)).axes.map((x) => num(x.position));
        const p = await prepare(op, s, wiggle(hold));
        expect(p.status, p.reply.error).toBe(200);
        h = p.reply.handle!;
      } finally {
        cell.pauseKeeping(s);
      }
      const renewSent = performance.now();
      const g = await renew();
      const lease = Number(g.lease_ms);
      const cursor = await eventCursor(client);
      await target.inject({ kind: 'stall_next_command', ms: lease + 300 });
      const startSent = performance.now();
      const r = await op('start_trajectory', s, { handle: h });
      // The Start must reach the service while the last renewal's lease runs (its deadline is no earlier
      // than the renewal's send plus lease_ms, document 1 part 3), so that the service admits it and the
      // core refuses it. It is judged by when it was sent, not answered (the stall holds the answer past
      // the lease on every target): refused otherwise although sent well within the lease, the target's
      // failure; sent past it, or a service the host kept from running that long, the host's ERROR.
      await hostBound(
        { rule: 'document 1 part 3 (renew): a Start sent within the lease is admitted', marginMs: lease, since: renewSent, targetOnHost: true, measured: () => ({ ms: startSent - renewSent, what: 'from sending the last renewal to sending the Start' }) },
        async () => expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'fence' }),
      );
      expect(r.reply.native_result).toMatchObject({ Result: 1 });
      const st = await status(client);
      expect(st.execution.handles.find((x) => x.handle === h)!.state).toBe('retired');
      expect(transitions(await eventsSince(client, cursor), h)).toEqual(['prepared->retired']);
      void hold;
    },
  );

  test('an unknown handle answers unknown_handle', covers('reason:unknown_handle'), async ({ cell, client, target, description, skip, drive, op }) => {
    needsMotion({ skip }, target);
    needsJ1(description, skip);
    const { s } = await ready(cell, drive, op, description.axes.length);
    for (const name of ['start_trajectory', 'discard_trajectory']) {
      const r = await op(name, s, { handle: 987_654_321n });
      expect(r.status).toBe(409);
      expect(r.label).toBe('unknown_handle');
    }
  });

  test(
    'an identity given at prepare is checked at Start: a different one answers trajectory_identity_mismatch and keeps the handle',
    covers('reason:trajectory_identity_mismatch', 'field:HandleRecord.identity', 'profile:trajectory.identity'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const identity = { plan_id: 'p1', program_id: 'g1', program_digest: 'd1', trajectory_digest: 't1', source_digest: 's1', normalised_digest: 'n1', manifest_revision: 1n, plan_revision: 3n };
      const h = (await prepare(op, s, wiggle(hold), { identity })).reply.handle!;
      const st = await status(client);
      expect(st.execution.handles.find((x) => x.handle === h)!.identity).toEqual(identity);
      expect(st.execution.identity).toEqual(identity); // the prepared execution carries it
      for (const other of [{ ...identity, plan_revision: 4n }, { ...identity, source_digest: 's2' }]) {
        const r = await op('start_trajectory', s, { handle: h, identity: other });
        expect(r.status).toBe(409);
        expect(r.label).toBe('trajectory_identity_mismatch');
      }
      const ok = await op('start_trajectory', s, { handle: h, identity });
      expect(ok.status, ok.reply.error).toBe(200);
    },
  );

  test(
    'a point outside the axis limits answers outside_limits_outward with the native receipt; nothing is prepared',
    covers('reason:outside_limits_outward', 'rule:common_sets.native'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const max = num(description.axes[0]!.max_position as number | bigint);
      const r = await prepare(op, s, points(hold, [0, 1], [hold[0]!, max + 1e-3]));
      expect(r.status).toBe(409);
      expect(r.label).toBe('outside_limits_outward');
      expect(r.reply.native_result).toMatchObject({ Result: 1, Reason: 8, AxisMask: 1 });
      expect((await status(client)).execution.handles.filter((x) => x.state === 'prepared')).toEqual([]);
      const atLimit = await prepare(op, s, points(hold, [0, 30], [hold[0]!, max])); // exactly at the limit is inside
      expect(atLimit.status, atLimit.reply.error).toBe(200);
    },
  );

  const CASES: Array<[string, (h: number[]) => unknown[]]> = [
    ['one point', (h) => points(h, [0], [h[0]!])],
    ['a first time other than 0', (h) => points(h, [0.1, 0.2], [h[0]!, h[0]!])],
    ['times not strictly increasing', (h) => points(h, [0, 0.2, 0.2], [h[0]!, h[0]!, h[0]!])],
    ['a position array of the wrong length', (h) => [{ time_ns: 0n, position: h }, { time_ns: 1n, position: h.slice(1) }]],
    ['io_values outside io_mask', (h) => points(h, [0, 0.2], [h[0]!, h[0]!], [{}, { io_mask: 2, io_values: 6 }])],
    ['an io_mask wider than eight bits', (h) => points(h, [0, 0.2], [h[0]!, h[0]!], [{}, { io_mask: 0x100 }])],
  ];
  for (const [name, make] of CASES) {
    const opts = name.startsWith('times')
      ? covers('rule:point.time_monotonic', 'profile:trajectory.point_rules')
      : name.startsWith('io_values')
        ? covers('rule:point.io_values_within_mask', 'profile:trajectory.point_rules')
        : name.startsWith('an io_mask wider')
          ? covers('limit:point_io_bits', 'profile:trajectory.point_rules')
          : profile('profile:trajectory.point_rules');
    test(`${name} is refused with invalid_request_envelope`, opts, async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const r = await prepare(op, s, make(hold));
      expect(r.status).toBe(409);
      expect(r.label).toBe('invalid_request_envelope');
    });
  }

  test(
    'an intent on a torch-class output answers io_torch_unqualified; on an output that is not configured io_not_configured',
    covers('reason:io_torch_unqualified', 'field:Point.io_mask', 'field:Point.io_values', 'rule:common_sets.io'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const m = machineOf(description);
      const torchOut = m.torch;
      skip(torchOut === undefined || torchOut.index > 7 || m.outputs.length > 7, `the test needs a torch output among the first eight outputs and a bit past the configured ones; this cell has ${m.outputs.length} outputs${torchOut ? '' : ', no torch'}`);
      const TORCH = 2 ** torchOut!.index;
      const NONE = 2 ** m.outputs.length; // the first bit past the configured outputs
      const torch = await prepare(op, s, points(hold, [0, 0.2], [hold[0]!, hold[0]!], [{}, { io_mask: TORCH, io_values: TORCH }]));
      expect(torch.status).toBe(409);
      expect(torch.label).toBe('io_torch_unqualified');
      const unconfigured = await prepare(op, s, points(hold, [0, 0.2], [hold[0]!, hold[0]!], [{}, { io_mask: NONE, io_values: NONE }]));
      expect(unconfigured.status).toBe(409);
      expect(unconfigured.label).toBe('io_not_configured');
    },
  );
});

/**
 * A stack on the stepped clock, J1 homed, every axis enabled and armed: output intents are checked cycle by
 * cycle, so they run where no late wake of a loaded host can move a point past its bound. The file's own
 * stack where it runs on that clock (stepsItsCell: the sim target), its fixture cell left released after the
 * test; elsewhere a variant on it, which a target that cannot step its cell (an external service, a rig, a
 * recorded run) cannot give: the test skips with the target's reason.
 */
async function steppedCell(ctx: { variant: VariantOf; target: Target; cell: Cell; drive: CellDriver; skip: (c: boolean, note?: string) => void }) {
  const own = ctx.drive.stepped;
  const t = own ? ctx.target : await ctx.variant({ clock: 'stepped' });
  needsFaults(ctx, t);
  needsMotion(ctx, t);
  const client = t.client();
  const d = (await client.describe()).reply.data as unknown as { binding: BindingInput; axes: unknown[]; cycle_ns: bigint };
  const m = machineOf(d);
  const why = firstAxisUnfit(m);
  ctx.skip(why !== undefined, why);
  // Output intents drive the cell's first output that is not the torch (document 1: torch output is refused everywhere).
  const plain = m.plainOutputs[0];
  ctx.skip(plain === undefined || plain.index > 7, `the output intent tests need a configured non-torch output among the first eight; this cell (${m}) has none`);
  const cell = own ? ctx.cell : new Cell(client, d.binding);
  const step = (n: number) => t.step!(n);
  /** Send an operation and step the clock until its reply comes (the core answers in a cycle). */
  const stepped = <T>(p: Promise<T>): Promise<T> => settle(t, p, 5);
  const op: Op = (name, s, fields) => stepped(cell.fenced(name, s, fields));
  const { s, hold } = await readyStepped(t, cell, client, { axes: d.axes.length });
  const records = (from: bigint) => recordsSince(client, from);

  return { t, client, cell, s, hold, cycleNs: d.cycle_ns, step, stepped, op, records, CLAMP: 2 ** plain!.index };
}

describe('output intents (stepped clock)', () => {
  test(
    'an ON intent needs io_arm first (io_not_armed, handle kept); once armed it drives the output from its point, and a stop turns it OFF in the next cycle',
    covers('reason:io_not_armed', 'rule:op.stop.outputs_off'),
    async ({ variant, target, cell: fileCell, drive, skip }) => {
      const { client, cell, s, hold, step, stepped, op, records, CLAMP, cycleNs } = await steppedCell({ variant, target, cell: fileCell, drive, skip });
      const C = Number(cycleNs);
      const pts = points(hold, [0, 0.05, 5], [hold[0]!, hold[0]!, hold[0]! + 0.02], [{}, { io_mask: CLAMP, io_values: CLAMP }, {}]);
      const h = (await prepare(op, s, pts)).reply.handle!;
      const refused = await stepped(cell.fenced('start_trajectory', s, { handle: h }));
      expect(refused.status).toBe(409);
      expect(refused.label).toBe('io_not_armed');
      expect((await status(client)).execution.handles.find((x) => x.handle === h)!.state).toBe('prepared');
      expect((await stepped(cell.fenced('io_arm', s))).status).toBe(200);
      const from = await latestSequence(client);
      expect((await stepped(cell.fenced('start_trajectory', s, { handle: h }))).status).toBe(200);
      await step(Math.ceil(80e6 / C)); // 80 ms of core time
      const run = await records(from);
      const started = run.findIndex((r) => r.active_traj_id === h);
      const on = run.findIndex((r) => r.io_output_word === CLAMP);
      expect(started).toBeGreaterThanOrEqual(0);
      // ON from the cycle that reaches 50 ms of plan time, not before: the Start is admitted between
      // cycles (plan time 0 is the cycle before), so the first record of the trajectory is one cycle in
      // (49 records on at the default cell's 1 ms cycle).
      expect(on - started).toBe(Math.ceil(50e6 / C) - 1);
      expect(run.slice(0, on).every((r) => r.io_output_word === 0)).toBe(true);
      const beforeStop = await latestSequence(client);
      expect((await stepped(cell.fenced('stop', s))).status).toBe(200);
      await step(2);
      const after = await records(beforeStop);
      const firstOff = after.findIndex((r) => r.io_output_word === 0);
      expect(firstOff).toBeGreaterThanOrEqual(0);
      expect(after.slice(firstOff).every((r) => r.io_output_word === 0)).toBe(true);
      expect((await status(client)).core!.io_output_word).toBe(0n);
    },
  );
});

describe('output markers and their one-cycle bound', () => {
  test(
    'an intent reached a cycle or more after its point is io_marker_late: not applied, fault bit 10, outputs OFF, execution faulted, io_arm refused until reset; one nanosecond less and it is applied',
    covers('reason:io_marker_late', 'profile:io.marker_late'),
    async ({ variant, target, cell: fileCell, drive, skip }) => {
      const { t, client, cell, s, hold, cycleNs: CYCLE, step, stepped, op, records, CLAMP } = await steppedCell({ variant, target, cell: fileCell, drive, skip });
      const ms = 1_000_000n;
      expect((await stepped(cell.fenced('io_arm', s))).status).toBe(200);
      // J1 holds still; the clamp goes ON at P and OFF again at the end (4 P). P is 50 ms, or 50 cycles on a
      // cell whose cycle is longer than 1 ms (the commands before it take some of the cell's cycles).
      const P = 50n * (CYCLE > ms ? CYCLE : ms);
      const pts = points(hold, [0, Number(P) / 1e9, Number(4n * P) / 1e9], [hold[0]!, hold[0]!, hold[0]!], [{}, { io_mask: CLAMP, io_values: CLAMP }, { io_mask: CLAMP, io_values: 0 }]);

      // The last cycle run before the late one: the last whole cycle at or before 0.9 P of plan time (45 ms
      // on the default cell); the next is due one cycle later, short of the point.
      const L = ((9n * P) / 10n / CYCLE) * CYCLE;
      /** Run the trajectory with the cycle due after L waking `late` ns late; what the cell shows. */
      const run = async (late: bigint) => {
        const cursor = await eventCursor(client);
        const h = (await prepare(op, s, pts)).reply.handle!;
        expect((await stepped(cell.fenced('start_trajectory', s, { handle: h }))).status).toBe(200);
        const now = await step(Math.ceil(12e6 / Number(CYCLE))); // a status publication (every 10 ms of core time) with the plan cursor
        const st = await status(client);
        expect(st.plan_cursor!.active_handle).toBe(h);
        const startNs = st.plan_cursor!.native_clock_ns - st.plan_cursor!.time_ns;
        // Step so that the last cycle run is at L of plan time.
        expect((await step(Number((startNs + L - now) / CYCLE))) - startNs).toBe(L);
        const from = await latestSequence(client);
        await t.inject({ kind: 'late_wake', ns: Number(late) });
        await step(Number((4n * P) / CYCLE));
        return { h, records: await records(from), events: await eventsSince(client, cursor) };
      };

      // The intent is due in the first cycle at or after its point on the cycle grid counted from the Start
      // (docs/profile.md "Output intents"): P itself where the cycle divides it (every cycle of 1 ms or
      // more, and 250 us), the next cycle after P otherwise (300 us, say).
      const due = ((P + CYCLE - 1n) / CYCLE) * CYCLE;
      // Woken so that the cycle runs one cycle less 1 ns after that due time (5 ms - 1 ns late on the
      // default cell: 999999 ns after it): applied.
      const lateBy = due - L;
      const onTime = await run(lateBy - 1n);
      expect(onTime.records[0]!.cycle_jitter_ns).toBe(lateBy - 1n);
      expect(onTime.records.some((r) => r.io_output_word === CLAMP)).toBe(true);
      expect(onTime.events.filter((e) => e.type === 'fault_latched')).toEqual([]);
      expect(onTime.events.some((e) => e.type === 'execution_completed')).toBe(true);

      // Woken 1 ns later: one cycle after the due time: not applied, io_marker_late latched.
      const late = await run(lateBy);
      expect(late.records[0]!.cycle_jitter_ns).toBe(lateBy);
      expect(late.records.every((r) => r.io_output_word === 0)).toBe(true);
      expect(late.records.at(-1)!.execution_fault_reasons).toBe(1024);
      const latched = late.events.filter((e) => e.type === 'fault_latched').map((e) => e.fault as Record<string, unknown>);
      expect(latched).toMatchObject([{ bit: 1024n, name: 'io_marker_late', recovery: 'reset_after_condition_clears' }]);
      const faulted = late.events.find((e) => e.type === 'execution_faulted');
      expect((faulted!.execution as Record<string, unknown>).handle).toBe(late.h);
      expect((faulted!.execution as Record<string, unknown>).fault_bits).toBe(1024n);
      // The fault keeps the session; io_arm is refused while the bit is latched, a reset clears it (and
      // retires the session).
      const refused = await stepped(cell.fenced('io_arm', s));
      expect([refused.status, refused.label]).toEqual([409, 'io_marker_late']);
      expect((await stepped(cell.fenced('reset_fault', s, { axis_mask: 0 }))).status).toBe(200);
      const s3 = await cell.hold({ requested_lease_ms: 10_000 });
      expect((await stepped(cell.fenced('io_arm', s3))).status).toBe(200);
      await cell.cleanup();
    },
  );
});

describe('after halt', () => {
  test(
    'a Start must begin at the held target: a trajectory from where J1 was before is refused not_ready and stays prepared; one from the hold runs',
    covers('rule:op.halt.restart_at_hold', 'reason:not_ready'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const a = (await prepare(op, s, points(hold, [0, 4], [hold[0]!, hold[0]! + 0.3]))).reply.handle!;
      expect((await op('start_trajectory', s, { handle: a })).status).toBe(200);
      // Past hold + 0.03 by its commanded position, not only its actual one: the commanded position is
      // within |following error| of the actual, and a host stall of the simulated drive throws the actual
      // ahead of its target for a moment (seen: 0.028 rad ahead after a 63 ms late cycle), which would halt J1
      // before it got there. The halt then holds J1 at or past that commanded position.
      await drive.status((x) => num(x.axes[0]!.position) - Math.abs(num((x.axes[0] as { following_error?: number }).following_error ?? 0)) > hold[0]! + 0.03, 5_000);
      const h = await op('halt', s);
      expect(h.status, h.reply.error).toBe(200);
      // Held: the trajectory retired, the lane idle, J1 at rest somewhere along the way (short of the end).
      const st = await drive.status((x) => (x as unknown as Full).execution.handles.find((r) => r.handle === a)?.state === 'retired' && (x as unknown as Full).motion?.mode === 0n, 5_000);
      expect((st as unknown as Full).motion?.mode).toBe(0n);
      // At rest: the same position 50 ms later (of the cell's time: stepped, or waited for in real time).
      const settled = async () => {
        let last = num((await status(client)).axes[0]!.position);
        for (let k = 0; k < 100; k++) {
          await drive.elapse(50);
          const now = num((await status(client)).axes[0]!.position);
          if (Math.abs(now - last) < 1e-6) return now;
          last = now;
        }
        throw new Error('J1 did not come to rest within 5 s of the halt');
      };
      const held = await settled();
      expect(held).toBeGreaterThan(hold[0]! + 0.03);
      expect(held).toBeLessThan(hold[0]! + 0.25);
      const at = (await status(client)).axes.map((x) => num(x.position));
      // From farther from the held target than J1's following error (docs/profile.md: the first point within
      // the axis's following error of the held target), at least where J1 was before the halted trajectory:
      // refused for readiness, J1 named, the handle kept.
      const fe = machineOf(description).axes[0]!.config?.followingError ?? 0.01;
      const before = Math.min(hold[0]!, held - 2 * fe);
      const b = (await prepare(op, s, points(at, [0, 0.3], [before, before + 0.01]))).reply.handle!;
      const r = await op('start_trajectory', s, { handle: b });
      expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'not_ready' });
      expect(r.reply.native_result).toMatchObject({ Result: 1, Reason: 2, AxisMask: J1 });
      expect((await status(client)).execution.handles.find((x) => x.handle === b)!.state).toBe('prepared');
      // From the held target: it starts and completes.
      const c = (await prepare(op, s, points(at, [0, 0.3], [held, held - 0.01]))).reply.handle!;
      const ok = await op('start_trajectory', s, { handle: c });
      expect(ok.status, ok.reply.error).toBe(200);
      const done = await drive.status((x) => (x as unknown as Full).execution.handles.find((r) => r.handle === c)?.state === 'consumed', 5_000);
      expect((done as unknown as Full).execution.handles.find((r) => r.handle === c)!.state).toBe('consumed');
    },
  );
});

describe('an ambiguous Start', () => {
  test(
    'the client went away before the reply: handle state, execution generation and incarnations say it started once; the same request_id replays it, a new Start is handle_started',
    covers('rule:client.ambiguous_start', 'rule:idempotency.join_or_replay'),
    async ({ cell, client, target, description, skip, drive, op }) => {
      needsMotion({ skip }, target);
      needsJ1(description, skip);
      const { s, hold } = await ready(cell, drive, op, description.axes.length);
      const h = (await prepare(op, s, points(hold, [0, 3], [hold[0]!, hold[0]! + 0.05]))).reply.handle!;
      const before = await status(client);
      const d0 = await client.describe();
      // The Start written in full on its own connection, which is closed before any reply can be read.
      const body = stringifyExact({ schema: REQUEST_SCHEMA, operation: 'start_trajectory', session: s.session, generation: s.generation, handle: h, request_id: 'ambiguous-start' });
      const sock = createConnection(target.address);
      await new Promise<void>((r) => sock.once('connect', () => r()));
      await new Promise<void>((r) => sock.end(`POST /v1/control HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, () => r()));
      sock.destroy();
      // Reconcile from status (document 1 part 4 "Envelope rules"): the handle's state and the incarnations.
      const st = (await drive.status((x) => (x as unknown as Full).execution.handles.find((r) => r.handle === h)?.state !== 'prepared', 3_000)) as unknown as Full;
      const rec = st.execution.handles.find((r) => r.handle === h)!;
      expect(rec.state).toBe('started');
      expect(st.daemon_incarnation).toBe(before.daemon_incarnation);
      const inc = (r: Awaited<ReturnType<typeof client.describe>>) => {
        const d = r.reply.data as Record<string, unknown>;
        return { adapter: d.adapter_incarnation, daemon: d.daemon_incarnation };
      };
      expect(inc(await client.describe())).toEqual(inc(d0));
      expect(rec.execution_generation).toBe(before.execution.generation + 1n);
      expect(rec.native_sequence).toBeGreaterThan(0n);
      // The same request again with its request_id replays the outcome; nothing starts twice.
      const again = await op('start_trajectory', s, { handle: h, request_id: 'ambiguous-start' });
      expect({ status: again.status, sequence: again.reply.sequence }).toEqual({ status: 200, sequence: rec.native_sequence });
      const fresh = await op('start_trajectory', s, { handle: h });
      expect(fresh.label).toBe('handle_started');
      const after = await status(client);
      expect(after.execution.generation).toBe(before.execution.generation + 1n);
      expect(after.execution.handles.find((r) => r.handle === h)!.execution_generation).toBe(rec.execution_generation);
    },
  );
});
