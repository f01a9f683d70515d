// start_program and program execution (document 1 part 4 start_program, part 2 Execution, part 3 handle
// states, part 6 execution events; document 2 "Admission": the executed points). Everything time-dependent
// runs on a stack with the stepped clock: the core runs a cycle only when the test steps it, so "the
// execution is in segment 1 now" and "the marker's output turned on at its point" are exact and nothing
// depends on how loaded the machine is. Commands are still answered as they arrive.
//
// The program moves J1 (file axis_mask 0x1) from where it is held by 0.02 rad and back, with a dwell
// between: 21 + 3 + 21 samples at 10 ms, 43 executed points, 0.42 s of plan time.

import { beforeEach } from 'vitest';
import { Cell, type Session } from '../../harness/clients/cell.ts';
import type { BindingInput, ControlClient } from '../../harness/clients/control.ts';
import { eventCursor, eventsSince, type CellEvent } from '../../harness/clients/events.ts';
import { readStatus } from '../../harness/clients/status.ts';
import { latestSequence, readBatch } from '../../harness/clients/telemetry.ts';
import type { CycleCaptureRecordV2 } from '../../harness/oracle/telemetry.ts';
import { settle as settleStepped } from '../../harness/clients/stepped.ts';
import type { Target } from '../../harness/targets/index.ts';
import { firstAxisUnfit, machineOf, needs } from '../../harness/machine.ts';
import { covers, describe, expect, sharedVariant, test } from '../../harness/fixture.ts';
import { postProgram } from './upload.ts';
import { DT, IDENTITY_FIELDS, dwell, encodeProgram, executedPoints, move, withCol, type Marker, type ProgramFile } from './files.ts';

/**
 * Why this cell cannot run the program here, or undefined: it moves dense column 1 (axis_mask 0x1) and
 * holds the other columns at the held positions of the axes, so the columns must map to the cell's first
 * axes (document 2 part 7: columns map in order to the axes in rad; here those are the first one to nine
 * axes) and the first axis must be one the suite can make ready (harness/machine.ts firstAxisUnfit).
 */
function unfit(d: object): string | undefined {
  const m = machineOf(d);
  const rad = m.rotaryAxes;
  if (rad.length === 0 || rad.length > 9 || !rad.every((a, i) => a.index === i)) {
    return `the program's dense columns map to the axes in rad; this cell's (${m}) are not its first one to nine axes`;
  }
  return firstAxisUnfit(m);
}

type Data = Record<string, any>;
interface Stack {
  target: Target;
  client: ControlClient;
  cell: Cell;
  axes: number;
  revision: bigint;
}

// Shared by the file's tests (opened per test on recorded and replayed runs, so each is recorded with its test).
const v = sharedVariant<{ binding: BindingInput & { revision: bigint }; axes: unknown[]; clock: string; cycle_ns: bigint }>({ clock: 'stepped' });
/** Targets whose first status publication has been stepped for. */
const started = new WeakSet<Target>();
let stack: Stack | undefined;

beforeEach(async () => {
  stack = undefined;
  if (v.cannot !== undefined) return;
  expect(v.description.clock).toBe('stepped');
  const client = v.target.client();
  stack = { target: v.target, client, cell: v.cell, axes: v.description.axes.length, revision: v.description.binding.revision };
  if (started.has(v.target)) return;
  started.add(v.target);
  await v.target.step!(5); // the core publishes its first status
});

/** Step the core in chunks until `p` has settled (a Home, an arm, a stop drain), then return it. */
function settle<T>(st: Stack, p: Promise<T>, chunk = 10): Promise<T> {
  return settleStepped(st.target, p, chunk);
}

/** Step the core through `ms` milliseconds of core time at the cell's cycle (Describe cycle_ns; 1 ms on the default cell). */
const stepMs = (st: Stack, ms: number) => st.target.step!(Math.max(1, Math.round((ms * 1e6) / Number(v.description.cycle_ns))));

const status = async (st: Stack) => (await readStatus(st.client)) as unknown as Data;

/** A renewed grant, J1 homed, every axis enabled, armed; returns the held positions. */
async function ready(st: Stack, skip: (note: string) => never): Promise<{ s: Session; hold: number[] }> {
  const why = unfit(v.description);
  if (why) skip(why);
  const s = await st.cell.hold({ requested_lease_ms: 2_000 });
  if (((await status(st)).core.home_valid_mask & 1n) === 0n) {
    const h = await settle(st, st.cell.fenced('home', s, { axis_mask: 1 }), 20);
    expect(h.status, h.reply.error).toBe(200);
  }
  const all = (1 << st.axes) - 1;
  expect((await st.cell.fenced('enable', s, { axis_mask: all })).status).toBe(200);
  const a = await settle(st, st.cell.fenced('arm', s), 5);
  expect(a.status, a.reply.error).toBe(200);
  await st.target.step!(5);
  const x = await status(st);
  expect(Number(x.core.axis_enable_mask)).toBe(all);
  return { s, hold: (x.axes as Data[]).map((ax) => Number(ax.position)) };
}

function programFile(st: Stack, hold: number[], markers?: Marker[]): ProgramFile {
  const q1 = withCol(hold, 0, hold[0]! + 0.02);
  return { segments: [move('out', hold, q1, 21), dwell('hold', q1, 3), move('back', q1, hold, 21)], manifestRevision: st.revision, axisMask: 0x1, ...(markers ? { markers } : {}) };
}

async function prepare(st: Stack, s: Session, f: ProgramFile): Promise<{ identity: Data; handle: bigint }> {
  const r = await postProgram(st.client, s, encodeProgram(f));
  expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
  const handles = (await status(st)).execution.handles as Data[];
  return { identity: (r.reply.data as Data).identity, handle: handles.at(-1)!.handle };
}

const handleOf = async (st: Stack, h: bigint) => ((await status(st)).execution.handles as Data[]).find((x) => x.handle === h)!;
const transitions = (evs: CellEvent[], h: bigint) =>
  evs.filter((e) => e.type === 'handle_transition' && (e.handle as Data).handle === h).map((e) => `${(e.handle as Data).from}->${(e.handle as Data).to}`);

describe('start_program (stepped clock)', () => {
  test(
    'the complete identity starts the program: every field must be equal, a retry with the same request_id replays, segments are followed, completion shows for the started generation',
    covers(
      'reason:program_identity_mismatch', 'reason:program_already_executing', 'reason:handle_started', 'reason:handle_consumed',
      'field:Request.identity', 'endpoint:POST /v1/control',
      'rule:op.start_program.identity_equal', 'rule:op.start_program.retry', 'rule:op.start_program.completion', 'rule:handle.terminal_never_regain', 'rule:op.reset_fault.precondition',
      'transition:handle:prepared->started:start', 'transition:handle:started->consumed:completion', 'event:execution_started', 'event:execution_completed',
      'field:Execution.segment', 'field:Execution.state', 'field:Execution.generation', 'field:Execution.identity',
      'profile:program.start_lookup',
    ),
    async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot ?? '');
      const st = stack!;
      const { s, hold } = await ready(st, skip);
      const f = programFile(st, hold);
      // nothing prepared yet under this grant: no program has this identity
      const none = await st.cell.fenced('start_program', s, { identity: { plan_id: 'p', program_id: 'p', program_digest: 'd', trajectory_digest: 't', source_digest: 's', normalised_digest: 'n', manifest_revision: st.revision, plan_revision: 1n } });
      expect({ status: none.status, label: none.label }).toEqual({ status: 409, label: 'program_identity_mismatch' });
      const { identity, handle } = await prepare(st, s, f);
      for (const field of IDENTITY_FIELDS) {
        const other = { ...identity, [field]: typeof identity[field] === 'bigint' ? identity[field] + 1n : `${identity[field]}x` };
        const r = await st.cell.fenced('start_program', s, { identity: other });
        expect({ field, status: r.status, label: r.label }).toEqual({ field, status: 409, label: 'program_identity_mismatch' });
      }
      expect((await handleOf(st, handle)).state).toBe('prepared');
      const before = (await status(st)).execution.generation as bigint;
      const cursor = await eventCursor(st.client);
      const r = await st.cell.fenced('start_program', s, { identity, request_id: 'program-run-1' });
      expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
      const seq = r.reply.sequence!;
      expect(seq).toBeGreaterThan(0n);
      // a lost receipt is retried with the same request_id: the same reply, no second Start
      const retry = await st.cell.fenced('start_program', s, { identity, request_id: 'program-run-1' });
      expect({ status: retry.status, sequence: retry.reply.sequence }).toEqual({ status: 200, sequence: seq });
      let x = await status(st);
      expect(x.execution).toMatchObject({ generation: before + 1n, state: 'executing', native_sequence: seq, identity, segment: 0n });
      expect(await handleOf(st, handle)).toMatchObject({ state: 'started', execution_generation: before + 1n, native_sequence: seq });
      // a new request while it runs: handle_started for the same identity; another upload is refused
      const again = await st.cell.fenced('start_program', s, { identity });
      expect({ status: again.status, label: again.label }).toEqual({ status: 409, label: 'handle_started' });
      const upload = await postProgram(st.client, s, encodeProgram(programFile(st, hold.map((q) => q))));
      expect({ status: upload.status, label: upload.label }).toEqual({ status: 409, label: 'program_already_executing' });
      for (const op of ['recovery_status', 'reset_fault']) {
        const busy = await st.cell.fenced(op, s);
        expect({ op, status: busy.status, label: busy.label }).toEqual({ op, status: 409, label: 'program_already_executing' });
      }
      expect((await st.cell.fenced('renew', s)).status).toBe(200); // refused before anything was submitted: the session stays
      // the segments in order: 0..200 ms out, 200..220 ms the dwell, then back
      await stepMs(st, 100);
      expect((await status(st)).execution.segment).toBe(0n);
      await stepMs(st, 110); // 210 ms
      expect((await status(st)).execution.segment).toBe(1n);
      await stepMs(st, 110); // 320 ms
      expect((await status(st)).execution.segment).toBe(2n);
      expect((await status(st)).execution.state).toBe('executing');
      await stepMs(st, 150); // past 420 ms
      x = await status(st);
      expect(x.execution).toMatchObject({ generation: before + 1n, state: 'completed', segment: 2n, native_sequence: seq, identity });
      expect(await handleOf(st, handle)).toMatchObject({ state: 'consumed', execution_generation: before + 1n });
      const evs = await eventsSince(st.client, cursor);
      expect(transitions(evs, handle)).toEqual(['prepared->started', 'started->consumed']);
      const started = evs.filter((e) => e.type === 'execution_started');
      expect(started.map((e) => e.execution)).toEqual([expect.objectContaining({ handle, generation: before + 1n, native_sequence: seq, kind: 'program', identity })]);
      expect(evs.filter((e) => e.type === 'execution_completed').map((e) => e.execution)).toEqual([expect.objectContaining({ handle, generation: before + 1n, kind: 'program' })]);
      // J1 came back to where it was held; a terminal handle never starts again
      await stepMs(st, 100);
      expect(Math.abs(Number(((await status(st)).axes as Data[])[0]!.position) - hold[0]!)).toBeLessThan(1e-4);
      const done = await st.cell.fenced('start_program', s, { identity });
      expect({ status: done.status, label: done.label }).toEqual({ status: 409, label: 'handle_consumed' });
      await st.cell.cleanup();
    },
  );

  test(
    'process markers drive their output from the cycle their point is reached, only after io_arm; an ON marker without io_arm is io_not_armed and keeps the handle',
    covers('reason:io_not_armed', 'transition:handle:prepared->prepared:start_refused', 'profile:program.output_intents', 'profile:program.process_markers'),
    async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot ?? '');
      const st = stack!;
      // The cell's first output that is not the torch (the clamp on the default cell).
      const m = machineOf(v.description);
      const out = needs(skip, m.plainOutputs[0], `the markers need a configured output that is not the torch; this cell's outputs: ${m.outputs.map((o) => o.name).join(', ') || 'none'}`);
      const CLAMP = 2 ** out.index;
      const { s, hold } = await ready(st, skip);
      const markers: Marker[] = [
        { segment: 0, sample: 5, action: out.name, value: true },
        { segment: 2, sample: 10, action: out.name, value: false },
      ];
      const f = programFile(st, hold, markers);
      const { points, pointOf } = executedPoints(f, m.outputs.map((o) => o.name));
      const on = pointOf(0, 5);
      const off = pointOf(2, 10);
      const { identity, handle } = await prepare(st, s, f);
      const refused = await st.cell.fenced('start_program', s, { identity });
      expect({ status: refused.status, label: refused.label }).toEqual({ status: 409, label: 'io_not_armed' });
      expect((await handleOf(st, handle)).state).toBe('prepared');
      expect((await st.cell.fenced('io_arm', s)).status).toBe(200);
      const from = await latestSequence(st.client);
      const r = await st.cell.fenced('start_program', s, { identity });
      expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
      await stepMs(st, 500);
      expect((await status(st)).execution.state).toBe('completed');
      const recs: CycleCaptureRecordV2[] = [];
      for (let after = from; ; ) {
        const b = await readBatch(st.client, after);
        recs.push(...b.records);
        if (b.records.length === 0 || b.header.last_sequence === after) break;
        after = b.header.last_sequence;
      }
      const exec = recs.filter((x) => x.active_traj_id === handle);
      // Counted in the cell's cycles (Describe cycle_ns): the plan's time, and the time from the ON marker's
      // point to the OFF one's, each less two samples for the cycles where the execution or output begins.
      const cyclesIn = (ns: bigint) => Number(ns / v.description.cycle_ns);
      const margin = 2n * BigInt(Math.round(DT * 1e9));
      expect(exec.length).toBeGreaterThan(cyclesIn(points.at(-1)!.tNs - margin));
      let sawOn = 0;
      for (const x of exec) {
        const want = x.current_point_index >= on && x.current_point_index < off;
        expect({ point: x.current_point_index, clamp: (x.io_output_word & CLAMP) !== 0 }).toEqual({ point: x.current_point_index, clamp: want });
        if (want) sawOn++;
      }
      expect(sawOn).toBeGreaterThan(cyclesIn(points[off]!.tNs - points[on]!.tNs - margin));
      expect((await status(st)).core.io_output_word).toBe(0n); // the OFF marker left it off
      await st.cell.cleanup();
    },
  );

  test(
    'stop while a program runs retires it (execution_aborted, cancelled); a prepared program is retired by a stop, superseded by a newer preparation',
    covers('transition:handle:started->retired:stop', 'transition:handle:prepared->retired:stop_or_grant_loss', 'transition:handle:prepared->superseded:newer_preparation', 'reason:handle_retired', 'reason:handle_superseded', 'event:execution_aborted'),
    async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot ?? '');
      const st = stack!;
      let { s, hold } = await ready(st, skip);
      const run = await prepare(st, s, programFile(st, hold));
      const cursor = await eventCursor(st.client);
      expect((await st.cell.fenced('start_program', s, { identity: run.identity })).status).toBe(200);
      await stepMs(st, 50);
      const stop = await settle(st, st.cell.fenced('stop', s), 10);
      expect(stop.status).toBe(200);
      await stepMs(st, 20);
      const evs = await eventsSince(st.client, cursor);
      expect(evs.filter((e) => e.type === 'execution_aborted').map((e) => e.execution)).toEqual([expect.objectContaining({ handle: run.handle, kind: 'program' })]);
      expect((await status(st)).execution.state).toBe('cancelled');
      expect((await handleOf(st, run.handle)).state).toBe('retired');
      // a prepared program: retired by a stop
      ({ s, hold } = await ready(st, skip));
      const prepared = await prepare(st, s, programFile(st, hold));
      await settle(st, st.cell.fenced('stop', s), 10);
      ({ s, hold } = await ready(st, skip));
      const r1 = await st.cell.fenced('start_program', s, { identity: prepared.identity });
      expect({ status: r1.status, label: r1.label }).toEqual({ status: 409, label: 'handle_retired' });
      // a prepared program superseded by a newer preparation of either kind
      const older = await prepare(st, s, programFile(st, hold));
      const tr = await st.cell.fenced('prepare_trajectory', s, { axis_mask: 1, points: [{ time_ns: 0n, position: hold }, { time_ns: 100_000_000n, position: hold }] });
      expect(tr.status, tr.reply.error).toBe(200);
      expect((await handleOf(st, older.handle)).state).toBe('superseded');
      const r2 = await st.cell.fenced('start_program', s, { identity: older.identity });
      expect({ status: r2.status, label: r2.label }).toEqual({ status: 409, label: 'handle_superseded' });
      await st.cell.cleanup();
    },
  );

  // Last in the file: it leaves a latched fault on the shared stack.
  test(
    'a fault while the program runs: execution_faulted, Execution.state faulted with native_execution_failed, the handle retired',
    covers('rule:op.start_program.completion', 'transition:handle:started->retired:fault', 'event:execution_faulted', 'reason:native_execution_failed', 'field:Execution.error'),
    async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot ?? '');
      const st = stack!;
      skip(!st.target.abilities.faultInjection, `target ${st.target.name} cannot inject faults`);
      const { s, hold } = await ready(st, skip);
      const run = await prepare(st, s, programFile(st, hold));
      const cursor = await eventCursor(st.client);
      const r = await st.cell.fenced('start_program', s, { identity: run.identity });
      expect(r.status, r.reply.error).toBe(200);
      const generation = (await status(st)).execution.generation as bigint;
      await stepMs(st, 50);
      await st.target.inject({ kind: 'following_error', axis: 0 });
      await stepMs(st, 100);
      const x = await status(st);
      expect(x.execution).toMatchObject({ state: 'faulted', error: 'native_execution_failed', generation, identity: run.identity });
      expect((await handleOf(st, run.handle)).state).toBe('retired');
      const f = (await eventsSince(st.client, cursor)).filter((e) => e.type === 'execution_faulted');
      expect(f.map((e) => e.execution)).toEqual([expect.objectContaining({ handle: run.handle, kind: 'program', fault_bits: 32n })]);
      await st.cell.cleanup();
    },
  );
});
