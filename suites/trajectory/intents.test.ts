// Output intents on the first point of a trajectory and on the first sample of a program (document 1
// part 2 Point io_mask/io_values, ProcessMarker; part 7 Cell I/O io_not_armed; docs/profile.md "Output
// intents"). The intent of point 0 is due when the execution begins, like any other: the first cycle that
// runs the plan drives it. An implementation that applies intents only when a cycle lands exactly on a
// point's time after the start, or only once the plan has moved past its first interval, drops it
// silently. Everything runs on the stepped clock, so "from the first cycle of the execution" is exact.
//
// Portable: the output is the first configured non-torch output of the target's Describe (io.outputs);
// the trajectory owns J1 (axis 0) and holds every axis where it stands, so nothing moves.

import { afterEach, beforeEach } from 'vitest';
import type { Session } from '../../harness/clients/cell.ts';
import { readyStepped, settle } from '../../harness/clients/stepped.ts';
import { machineOf } from '../../harness/machine.ts';
import { readStatus } from '../../harness/clients/status.ts';
import { latestSequence, recordsSince } from '../../harness/clients/telemetry.ts';
import { covers, describe, expect, sharedVariant, test } from '../../harness/fixture.ts';
import { COLS, DT, dwell, encodeProgram, executedPoints, type ProgramFile } from '../program/files.ts';
import { postProgram } from '../program/upload.ts';

type Data = Record<string, any>;
interface Output {
  name: string;
  torch: boolean;
}

const v = sharedVariant<{ binding: { pair_id: string; revision: bigint; configuration_sha256: string }; axes: unknown[]; io: { outputs: Output[] } | null; clock: string; cycle_ns: bigint }>({ clock: 'stepped' });

/** The target's configured outputs and the bit of the first non-torch one, or why there is none. */
function output(): { outputs: string[]; bit: number } | string {
  const outs = v.description.io?.outputs ?? [];
  const k = outs.findIndex((o) => !o.torch);
  if (k < 0) return 'the target configures no non-torch output (Describe io.outputs)';
  return { outputs: outs.map((o) => o.name), bit: 1 << k };
}

let ctx: { s: Session; hold: number[]; outputs: string[]; bit: number } | undefined;
let why: string | undefined;

beforeEach(async () => {
  ctx = undefined;
  why = v.cannot;
  if (why !== undefined) return;
  const o = output();
  if (typeof o === 'string') {
    why = o;
    return;
  }
  const client = v.target.client();
  // The trajectories and programs here own the first axis: it must be one a Start can use.
  const m = machineOf(v.description);
  await v.target.step!(20);
  if (!m.canReady(m.axes[0]!, (await readStatus(client)).core!.home_valid_mask)) {
    why = `the first axis ${m.axes[0]!.id} requires Home and has no native Home to get it (${m})`;
    return;
  }
  const { s, hold } = await readyStepped(v.target, v.cell, client, { axes: v.description.axes.length });
  ctx = { s, hold, ...o };
});

// A failed test leaves its grant held: release it (the core answers on the stepped clock).
afterEach(async () => {
  if (ctx) await settle(v.target, v.cell.cleanup(), 5);
});

const step = (n: number) => v.target.step!(n);
const stepped = <T>(p: Promise<T>): Promise<T> => settle(v.target, p, 5);
const handleState = async (h: bigint) => ((await readStatus(v.target.client())) as unknown as Data).execution.handles.find((x: Data) => x.handle === h)?.state;

describe('an output intent on the first point', () => {
  test(
    'trajectory: an ON intent only on point 0 is io_not_armed before io_arm (handle kept); once armed, the first cycle of the execution drives the output and it stays ON until the OFF intent of the last point',
    covers('reason:io_not_armed', 'field:Point.io_mask', 'field:Point.io_values', 'profile:io.marker_late'),
    async ({ skip }) => {
      skip(why !== undefined, why ?? '');
      const { s, hold, bit } = ctx!;
      const client = v.target.client();
      const at = (ms: number, extra: Record<string, unknown> = {}) => ({ time_ns: BigInt(ms) * 1_000_000n, position: hold, ...extra });
      const pts = [at(0, { io_mask: bit, io_values: bit }), at(30), at(60, { io_mask: bit, io_values: 0 })];
      const p = await stepped(v.cell.fenced('prepare_trajectory', s, { axis_mask: 1, points: pts }));
      expect(p.status, p.reply.error).toBe(200);
      const h = p.reply.handle!;
      // The only ON intent is on point 0: a Start before io_arm is refused, the handle stays prepared.
      const refused = await stepped(v.cell.fenced('start_trajectory', s, { handle: h }));
      expect({ status: refused.status, label: refused.label }).toEqual({ status: 409, label: 'io_not_armed' });
      expect(await handleState(h)).toBe('prepared');
      expect((await stepped(v.cell.fenced('io_arm', s))).status).toBe(200);
      const from = await latestSequence(client);
      const r = await stepped(v.cell.fenced('start_trajectory', s, { handle: h }));
      expect(r.status, r.reply.error).toBe(200);
      // 90 ms of the cell's cycles: the 60 ms trajectory and some after it.
      await step(Math.ceil(90_000_000 / Number(v.description.cycle_ns)));
      const recs = await recordsSince(client, from);
      const first = recs.findIndex((x) => x.active_traj_id === h);
      expect(first).toBeGreaterThanOrEqual(0);
      const run = recs.slice(first);
      // Plan time 0 is the Start (between cycles); the records from the first cycle that runs the plan are
      // at 1, 2, ... cycles of plan time. ON from the first one; OFF from the cycle reaching the last point.
      const cycle = Number(v.description.cycle_ns);
      const offAt = Math.ceil(60_000_000 / cycle) - 1;
      expect(run.length).toBeGreaterThan(offAt + 5);
      expect(run[0]!.io_output_word & bit).toBe(bit);
      expect(run.findIndex((x) => (x.io_output_word & bit) === 0)).toBe(offAt);
      expect(run.slice(offAt).every((x) => (x.io_output_word & bit) === 0)).toBe(true);
      expect(recs.filter((x) => x.execution_fault_reasons !== 0)).toEqual([]);
      expect(((await readStatus(client)).core!.io_output_word as bigint) & BigInt(bit)).toBe(0n);
    },
  );

  test(
    'program: a process marker on sample 0 of segment 0 is applied from the first cycle of the execution (and an ON marker there alone needs io_arm)',
    covers('reason:io_not_armed', 'profile:program.output_intents', 'profile:program.process_markers'),
    async ({ skip }) => {
      skip(why !== undefined, why ?? '');
      skip(v.description.axes.length !== COLS, `a dense program maps nine axis ids; the target has ${v.description.axes.length} axes`);
      const { s, hold, outputs, bit } = ctx!;
      const client = v.target.client();
      const name = outputs[Math.log2(bit)]!;
      const f: ProgramFile = {
        segments: [dwell('still', hold, 8)],
        manifestRevision: v.description.binding.revision,
        axisMask: 0x1,
        markers: [
          { segment: 0, sample: 0, action: name, value: true },
          { segment: 0, sample: 7, action: name, value: false },
        ],
      };
      expect(executedPoints(f, outputs).pointOf(0, 0)).toBe(0);
      const up = await postProgram(client, s, encodeProgram(f));
      expect({ status: up.status, error: up.reply.error }).toEqual({ status: 200, error: undefined });
      const identity = (up.reply.data as Data).identity;
      const handle = (((await readStatus(client)) as unknown as Data).execution.handles as Data[]).at(-1)!.handle as bigint;
      const refused = await stepped(v.cell.fenced('start_program', s, { identity }));
      expect({ status: refused.status, label: refused.label }).toEqual({ status: 409, label: 'io_not_armed' });
      expect(await handleState(handle)).toBe('prepared');
      expect((await stepped(v.cell.fenced('io_arm', s))).status).toBe(200);
      const from = await latestSequence(client);
      const r = await stepped(v.cell.fenced('start_program', s, { identity }));
      expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
      await step(Math.ceil(120_000_000 / Number(v.description.cycle_ns))); // 120 ms of the cell's cycles
      const recs = await recordsSince(client, from);
      const run = recs.filter((x) => x.active_traj_id === handle);
      // The execution ran its length: at least six of its seven 10 ms intervals, in the cell's cycles.
      expect(run.length).toBeGreaterThanOrEqual((6 * DT * 1e9) / Number(v.description.cycle_ns));
      // The first cycle of the execution runs at one cycle of plan time: in the interval of point 0 on a cell
      // whose cycle is shorter than the samples' 10 ms, at a later point on one whose cycle is not (the last
      // interval at most: the one that begins at the next-to-last point).
      const lastInterval = f.segments[0]!.samples.length - 2;
      const firstPoint = Math.min(lastInterval, Math.floor(Number(v.description.cycle_ns) / (DT * 1e9)));
      expect({ point: run[0]!.current_point_index, on: run[0]!.io_output_word & bit }).toEqual({ point: firstPoint, on: bit });
      for (const x of run) expect({ point: x.current_point_index, on: x.io_output_word & bit }).toEqual({ point: x.current_point_index, on: x.current_point_index < 7 ? bit : 0 });
      expect(recs.filter((x) => x.execution_fault_reasons !== 0)).toEqual([]);
      // The OFF marker on the last sample was applied too: the output is OFF after the execution.
      expect(recs.at(-1)!.io_output_word & bit).toBe(0);
      expect(((await readStatus(client)).core!.io_output_word as bigint) & BigInt(bit)).toBe(0n);
    },
  );
});

describe('the one-cycle bound on the first point', () => {
  test(
    'point 0 is due in the first cycle that runs the plan: that cycle woken one cycle late is io_marker_late (not applied, fault bit 1024); one nanosecond less and it is applied',
    covers('reason:io_marker_late', 'profile:io.marker_late'),
    async ({ skip }) => {
      skip(why !== undefined, why ?? '');
      const { s, bit } = ctx!;
      const client = v.target.client();
      const cycle = v.description.cycle_ns;
      expect((await stepped(v.cell.fenced('io_arm', s))).status).toBe(200);
      /** Start a still trajectory with its only ON intent on point 0, the first cycle after the Start woken `late` ns late. */
      const run = async (late: bigint) => {
        const hold = ((await readStatus(client)).axes as Array<{ position: number | bigint }>).map((a) => Number(a.position));
        const at = (ms: number, extra: Record<string, unknown> = {}) => ({ time_ns: BigInt(ms) * 1_000_000n, position: hold, ...extra });
        const p = await stepped(v.cell.fenced('prepare_trajectory', s, { axis_mask: 1, points: [at(0, { io_mask: bit, io_values: bit }), at(30)] }));
        expect(p.status, p.reply.error).toBe(200);
        const from = await latestSequence(client);
        await v.target.inject({ kind: 'late_wake', ns: Number(late) });
        const r = await stepped(v.cell.fenced('start_trajectory', s, { handle: p.reply.handle! }));
        expect(r.status, r.reply.error).toBe(200);
        await step(40);
        // From the first cycle after the Start (a late intent faults the execution in that very cycle).
        const all = await recordsSince(client, from);
        return { first: all[0]!, on: all.some((x) => (x.io_output_word & bit) === bit), faults: all.at(-1)!.execution_fault_reasons };
      };
      const onTime = await run(cycle - 1n);
      expect({ jitter: onTime.first.cycle_jitter_ns, on: onTime.on, faults: onTime.faults }).toEqual({ jitter: cycle - 1n, on: true, faults: 0 });
      const late = await run(cycle);
      expect({ jitter: late.first.cycle_jitter_ns, on: late.on, faults: late.faults }).toEqual({ jitter: cycle, on: false, faults: 1024 });
      // The latched bit is cleared by reset_fault (which retires the session); the next test readies anew.
      expect((await stepped(v.cell.fenced('reset_fault', s, { axis_mask: 0 }))).status).toBe(200);
    },
  );
});
