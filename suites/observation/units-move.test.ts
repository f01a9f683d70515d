// Units of a move (document 1 part 1 Transports: "positions in each axis's position_unit (rad or m),
// velocities per second, times in ns"; part 2 Point: time_ns "ns from plan start", position "logical rad
// or m", velocity "rad/s or m/s"; part 2 telemetry: t_ns "host monotonic ns", cycle_period_ns, "positions
// and targets are drive counts; convert with counts_per_unit and sign from Describe",
// velocity_actual_counts_per_s). Describe's units and the host times of a real-time cell are judged in
// suites/observation/units.test.ts.
//
// One move is commanded in documented units and read back through what any client sees: Describe, the
// Grant, the events and the telemetry records. J1 moves D rad in T ns at a constant D/T rad/s (two points,
// the second with its velocity). A service that read time_ns as microseconds, positions as counts,
// velocities per millisecond, or stamped records in another unit would be off by a factor of at least 1000
// somewhere below.
//
// One cell for the file, moved through its CellDriver (stepsItsCell): where the target runs the file's
// stack on the stepped clock (or gives a stepped variant: a recorded run) each cycle is exactly cycle_ns of the cell's time, so the record count, the
// record times and the drive counts must agree with the command cycle by cycle. On any other target (an
// external service, a rig: with --allow-motion) the same move runs in real time, where a cycle may start
// late: there every figure is judged on the records' own times (t_ns), which a late cycle does not bend,
// and what only the stepped clock makes exact (records exactly cycle_ns apart, the cycle count, the events'
// stamps a plan's time apart, each record's measured velocity) is judged as each check below says.

import { eventCursor, eventsSince } from '../../harness/clients/events.ts';
import { readyDriven } from '../../harness/clients/stepped.ts';
import { dueNs, latestSequence, readBatch } from '../../harness/clients/telemetry.ts';
import type { CycleCaptureRecordV2 } from '../../harness/oracle/telemetry.ts';
import type { ControlClient } from '../../harness/clients/control.ts';
import { firstAxisUnfit, machineOf } from '../../harness/machine.ts';
import { covers, describe, expect, needsMotion, steppedCell, stepsItsCell, test } from '../../harness/fixture.ts';
import type { AxisUnits as Axis } from './axis-units.ts';

stepsItsCell();

type Data = Record<string, any>;

const J1 = 1;
const D = 0.04; // rad
const T_NS = 400_000_000n; // 0.4 s
const RAD_PER_S = D / (Number(T_NS) / 1e9); // 0.1 rad/s

async function records(client: ControlClient, after: bigint, cycleNs: bigint): Promise<CycleCaptureRecordV2[]> {
  const out: CycleCaptureRecordV2[] = [];
  for (let cur = after; ; ) {
    const b = await readBatch(client, cur);
    expect(b.header.cycle_period_ns).toBe(cycleNs);
    out.push(...b.records);
    if (b.records.length === 0 || b.header.last_sequence === cur) return out;
    cur = b.header.last_sequence;
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

describe('units seen by a client', () => {
  test(
    'a move commanded in ns, rad and rad/s is executed and reported in ns, drive counts per position unit and counts per second',
    covers('rule:transport.units', 'rule:telemetry.drive_counts', 'field:Point.time_ns', 'field:Point.velocity'),
    async ({ cell: fileCell, client: fileClient, description: fileDescription, drive: fileDrive, op, target: fileTarget, skip, variant }) => {
      // On the stepped clock where the target can give it (a recorded run too: a stepped variant, which
      // replays step by step), in real time on the file's own cell where it cannot.
      const own = { cell: fileCell, client: fileClient, description: fileDescription, drive: fileDrive, op, target: fileTarget, skip };
      const stack = await steppedCell(own, variant);
      const { cell, client, description, drive, target } = 'x' in stack ? stack.x : own;
      needsMotion({ skip }, target);
      // The test moves the cell's first axis: skip with the reason where this cell cannot (harness/machine.ts).
      const why = firstAxisUnfit(machineOf(description));
      if (why) skip(why);
      const { s, hold } = await readyDriven(cell, drive, { axes: description.axes.length, leaseMs: 5_000 });
      const axis = description.axes[0] as unknown as Axis;
      expect(axis.position_unit).toBe('rad');
      const cycle = BigInt(description.cycle_ns as bigint);
      const at = (q1: number) => hold.map((q, i) => (i === 0 ? q1 : q));
      const moving = hold.map((_q, i) => (i === 0 ? RAD_PER_S : 0));
      const p = await cell.fenced('prepare_trajectory', s, {
        axis_mask: J1,
        points: [
          { time_ns: 0n, position: at(hold[0]!), velocity: moving },
          { time_ns: T_NS, position: at(hold[0]! + D), velocity: moving },
        ],
      });
      expect(p.status, p.reply.error).toBe(200);
      const h = p.reply.handle!;
      const from = await latestSequence(client);
      const cursor = await eventCursor(client);
      const st = await cell.fenced('start_trajectory', s, { handle: h });
      expect(st.status, st.reply.error).toBe(200);
      const planCycles = Number(T_NS / cycle);
      // The plan and 100 cycles after it: stepped exactly so; in real time, its completion and as long again.
      if (!drive.stepped) await drive.event(cursor, (e) => e.type === 'execution_completed' && (e.execution as Data | undefined)?.handle === h, 3_000);
      await drive.elapse(Number((drive.stepped ? T_NS : 0n) + 100n * cycle) / 1e6);
      // From the last cycle before the Start (the stepped clock runs none between it and the first of the plan).
      const recs = await records(client, from - 1n, cycle);
      const active = recs.filter((r) => r.active_traj_id === h);
      expect(active.length, 'records of the execution').toBeGreaterThan(0);
      const prior = recs.filter((r) => r.seq < active[0]!.seq).at(-1);
      const next = recs.find((r) => r.seq > active.at(-1)!.seq);
      expect(prior && next, 'records before and after the execution').toBeTruthy();
      if (drive.stepped) {
        // Record times: the cell's ns, exactly one cycle_ns apart on the stepped clock (a real-time cycle
        // starts when the host lets it: its spacing is judged by the plan's span below).
        for (let k = 1; k < recs.length; k++) expect(recs[k]!.t_ns - recs[k - 1]!.t_ns).toBe(cycle);
        // Point times are ns: the plan runs for T_NS / cycle_ns cycles (a cycle either way for the handover).
        expect(Math.abs(active.length - planCycles), `${active.length} cycles for a ${T_NS} ns plan`).toBeLessThanOrEqual(2);
      }
      // Point times are ns, on the records' own times: the first cycle without the plan is T_NS (less a
      // cycle) or more after the last cycle before it, and its last cycle less than T_NS (and a cycle) after
      // its first. A late cycle delays the first record after the plan, never the plan's own span.
      // Plan start at the time due of the cycle before it (dueNs: a late wake of it is no later start).
      expect(next!.t_ns - dueNs(prior!), 'cell time from plan start to the first cycle after it, ns').toBeGreaterThanOrEqual(T_NS - cycle);
      expect(active.at(-1)!.t_ns - active[0]!.t_ns, 'cell time from the first to the last cycle of the plan, ns').toBeLessThan(T_NS + cycle);
      // ... and the events of the execution are stamped on the same ns clock as the records.
      const evs = (await eventsSince(client, cursor)).filter((e) => (e.execution as Data | undefined)?.handle === h);
      const started = evs.find((e) => e.type === 'execution_started')!;
      const completed = evs.find((e) => e.type === 'execution_completed')!;
      expect(started && completed, 'execution_started and execution_completed').toBeTruthy();
      const elapsed = completed.time_ns - started.time_ns;
      // Stepped: the plan's time within the handover's cycle either way, each event stamped at its cycle. In
      // real time an event may be stamped when the service learns of it, some time after its cycle, and the
      // documents do not bound that delay: there the completion is stamped no earlier than the plan's end by
      // the records (the cycle before the plan and T_NS less a cycle), which an event stamped in any other
      // unit, or at the Start, is not.
      if (drive.stepped) expect(elapsed >= T_NS - 2n * cycle && elapsed <= T_NS + 2n * cycle, `execution took ${elapsed} ns for a ${T_NS} ns plan`).toBe(true);
      else expect(completed.time_ns >= prior!.t_ns + T_NS - cycle && elapsed > 0n, `execution_completed at ${completed.time_ns}, started at ${started.time_ns}: the plan began after ${prior!.t_ns} and lasts ${T_NS} ns`).toBe(true);
      expect(started.time_ns >= recs[0]!.t_ns - 2n * cycle && completed.time_ns <= recs.at(-1)!.t_ns).toBe(true);
      // Positions are rad on the wire and drive counts in telemetry: counts = rad x counts_per_unit x sign.
      // From the held target before the plan to the target held after it (and the first cycle's target,
      // a cycle into the plan, on the stepped clock, where that cycle is exactly one cycle_ns in).
      const scale = axis.counts_per_unit * Number(axis.sign);
      const done = recs.at(-1)!.ax[0]!;
      if (drive.stepped) expect(Math.abs((done.target - active[0]!.ax[0]!.target) / scale + (RAD_PER_S * Number(cycle)) / 1e9 - D)).toBeLessThan(D * 0.01);
      expect(Math.abs((done.target - prior!.ax[0]!.target) / scale - D)).toBeLessThan(D * 0.01);
      expect(Math.abs((done.position - (drive.stepped ? active[0]! : prior!).ax[0]!.position) / scale - D)).toBeLessThan(D * 0.05);
      // Velocities are per second: D/T rad/s is D/T x counts_per_unit counts per second, commanded and actual.
      const middle = active.slice(Math.floor(active.length / 4), Math.floor((3 * active.length) / 4));
      // The middle half of the plan's cycles (within the handover's cycle either way), by count on the stepped
      // clock. In real time the cycles a late one left out are missing from the count: there the middle must
      // still span a quarter of the plan's time, so that the checks below judge a stretch of the move.
      if (drive.stepped) expect(middle.length).toBeGreaterThanOrEqual(Math.floor(planCycles / 2) - 2);
      else expect(middle.length > 0 && middle.at(-1)!.t_ns - middle[0]!.t_ns >= T_NS / 4n, `the middle half's records span ${middle.length ? middle.at(-1)!.t_ns - middle[0]!.t_ns : 0n} ns`).toBe(true);
      for (const r of middle) {
        const a = r.ax[0]!;
        // The commanded velocity is the plan's constant D/T whenever a cycle comes: strict on either clock.
        expect(a.target_velocity_valid).toBe(1);
        expect(Math.abs(a.target_velocity_counts_per_s / scale - RAD_PER_S)).toBeLessThan(RAD_PER_S * 0.01);
        expect(a.velocity_actual_valid).toBe(1);
        // The drive's measured velocity follows how the cycles came: within 5 % in every cycle only where
        // each is exactly cycle_ns (the stepped clock); a late real-time cycle moves the target a late
        // cycle's worth at once and the drive catches up faster for a few cycles.
        if (drive.stepped) expect(Math.abs(a.velocity_actual_counts_per_s / scale - RAD_PER_S)).toBeLessThan(RAD_PER_S * 0.05);
      }
      // In real time the measured velocity's unit is judged on the middle half's median cycle, which a few
      // late cycles cannot move: per millisecond, or in units instead of counts, is off by a factor of 1000.
      if (!drive.stepped) expect(Math.abs(median(middle.map((r) => r.ax[0]!.velocity_actual_counts_per_s)) / scale - RAD_PER_S)).toBeLessThan(RAD_PER_S * 0.05);
      // Over the middle the target advanced by velocity x time, with time in s from ns.
      const m0 = middle[0]!;
      const m1 = middle.at(-1)!;
      const secs = Number(m1.t_ns - m0.t_ns) / 1e9;
      expect(Math.abs((m1.ax[0]!.target - m0.ax[0]!.target) / scale - RAD_PER_S * secs)).toBeLessThan(RAD_PER_S * secs * 0.01);
      await cell.cleanup();
    },
  );
});
