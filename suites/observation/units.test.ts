// Units (document 1 part 1 Transports: "positions in each axis's position_unit (rad or m), velocities per
// second, times in ns. Host times use the cell's monotonic clock"; part 2 Point: time_ns "ns from plan
// start", position "logical rad or m", velocity "rad/s or m/s"; part 2 telemetry: t_ns "host monotonic ns",
// cycle_period_ns, "positions and targets are drive counts; convert with counts_per_unit and sign from
// Describe", velocity_actual_counts_per_s).
//
// One move is commanded in documented units and read back through what any client sees: Describe, the
// Grant and the telemetry records. J1 moves D rad in T ns at a constant D/T rad/s (two points, the second
// with its velocity). On the stepped clock each cycle is exactly cycle_ns of the cell's time, so the record
// count, the record times and the drive counts must all agree with the command in these units: a service
// that read time_ns as microseconds, positions as counts, velocities per millisecond, or stamped records
// in another unit would be off by a factor of at least 1000 somewhere below.

import { readyStepped } from '../../harness/clients/stepped.ts';
import type { Session } from '../../harness/clients/cell.ts';
import type { BindingInput } from '../../harness/clients/control.ts';
import { eventCursor, eventsSince } from '../../harness/clients/events.ts';
import { latestSequence, readBatch } from '../../harness/clients/telemetry.ts';
import type { CycleCaptureRecordV2 } from '../../harness/oracle/telemetry.ts';
import { firstAxisUnfit, machineOf } from '../../harness/machine.ts';
import { covers, describe, expect, inProfile, needsMotion, sharedVariant, test } from '../../harness/fixture.ts';
import { unservedReason } from '../../harness/served.ts';

type Data = Record<string, any>;
interface Axis {
  id: string;
  position_unit: string;
  counts_per_unit: number;
  sign: number | bigint;
  min_position: number;
  max_position: number;
}

const J1 = 1;
const D = 0.04; // rad
const T_NS = 400_000_000n; // 0.4 s
const RAD_PER_S = D / (Number(T_NS) / 1e9); // 0.1 rad/s

// Describe alone: any target, whatever its clock.
test('Describe gives every axis a position unit of rad or m with its drive-count scale', covers('rule:transport.units'), ({ description }) => {
  const d = description as unknown as { axes: Axis[]; cycle_ns: bigint };
  for (const a of d.axes) {
    expect(['rad', 'm'], a.id).toContain(a.position_unit);
    expect(a.counts_per_unit, a.id).toBeGreaterThan(0);
    expect([1, -1], a.id).toContain(Number(a.sign));
  }
  expect(BigInt(d.cycle_ns)).toBeGreaterThan(0n);
});

describe('units seen by a client (stepped clock)', () => {
  const v = sharedVariant<{ binding: BindingInput; axes: Axis[]; cycle_ns: bigint; clock: string }>({ clock: 'stepped' });
  /** A held grant, J1 homed, every axis enabled and armed; the held positions. */
  const ready = (skip: (note: string) => never): Promise<{ s: Session; hold: number[] }> => {
    // The test moves the cell's first axis: skip with the reason where this cell cannot (harness/machine.ts).
    const why = firstAxisUnfit(machineOf(v.description));
    if (why) skip(why);
    return readyStepped(v.target, v.cell, v.target.client(), { axes: v.description.axes.length, leaseMs: 5_000 });
  };

  async function records(after: bigint): Promise<CycleCaptureRecordV2[]> {
    const out: CycleCaptureRecordV2[] = [];
    for (let cur = after; ; ) {
      const b = await readBatch(v.target.client(), cur);
      expect(b.header.cycle_period_ns).toBe(BigInt(v.description.cycle_ns));
      out.push(...b.records);
      if (b.records.length === 0 || b.header.last_sequence === cur) return out;
      cur = b.header.last_sequence;
    }
  }

  test(
    'a move commanded in ns, rad and rad/s is executed and reported in ns, drive counts per position unit and counts per second',
    covers('rule:transport.units', 'rule:telemetry.drive_counts', 'field:Point.time_ns', 'field:Point.velocity'),
    async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot);
      needsMotion({ skip }, v.target);
      // ready() skips with the reason when the first axis is not one this test can move in rad
      const { s, hold } = await ready(skip);
      const axis = v.description.axes[0]!;
      expect(axis.position_unit).toBe('rad');
      const cycle = BigInt(v.description.cycle_ns);
      const at = (q1: number) => hold.map((q, i) => (i === 0 ? q1 : q));
      const moving = hold.map((_q, i) => (i === 0 ? RAD_PER_S : 0));
      const p = await v.cell.fenced('prepare_trajectory', s, {
        axis_mask: J1,
        points: [
          { time_ns: 0n, position: at(hold[0]!), velocity: moving },
          { time_ns: T_NS, position: at(hold[0]! + D), velocity: moving },
        ],
      });
      expect(p.status, p.reply.error).toBe(200);
      const h = p.reply.handle!;
      const from = await latestSequence(v.target.client());
      const cursor = await eventCursor(v.target.client());
      const st = await v.cell.fenced('start_trajectory', s, { handle: h });
      expect(st.status, st.reply.error).toBe(200);
      const planCycles = Number(T_NS / cycle);
      await v.target.step!(planCycles + 100);
      const recs = await records(from);
      // Record times: the cell's ns, exactly one cycle_ns apart on the stepped clock.
      for (let k = 1; k < recs.length; k++) expect(recs[k]!.t_ns - recs[k - 1]!.t_ns).toBe(cycle);
      const active = recs.filter((r) => r.active_traj_id === h);
      // Point times are ns: the plan runs for T_NS / cycle_ns cycles (a cycle either way for the handover).
      expect(Math.abs(active.length - planCycles), `${active.length} cycles for a ${T_NS} ns plan`).toBeLessThanOrEqual(2);
      // ... and the events of the execution are stamped on the same ns clock as the records.
      const evs = (await eventsSince(v.target.client(), cursor)).filter((e) => (e.execution as Data | undefined)?.handle === h);
      const started = evs.find((e) => e.type === 'execution_started')!;
      const completed = evs.find((e) => e.type === 'execution_completed')!;
      expect(started && completed, 'execution_started and execution_completed').toBeTruthy();
      const elapsed = completed.time_ns - started.time_ns;
      expect(elapsed >= T_NS - 2n * cycle && elapsed <= T_NS + 2n * cycle, `execution took ${elapsed} ns for a ${T_NS} ns plan`).toBe(true);
      expect(started.time_ns >= recs[0]!.t_ns - 2n * cycle && completed.time_ns <= recs.at(-1)!.t_ns).toBe(true);
      // Positions are rad on the wire and drive counts in telemetry: counts = rad x counts_per_unit x sign.
      const scale = axis.counts_per_unit * Number(axis.sign);
      const first = active[0]!.ax[0]!;
      const done = recs.at(-1)!.ax[0]!;
      expect(Math.abs((done.target - first.target) / scale + RAD_PER_S * Number(cycle) / 1e9 - D)).toBeLessThan(D * 0.01);
      expect(Math.abs((done.position - first.position) / scale - D)).toBeLessThan(D * 0.05);
      // Velocities are per second: D/T rad/s is D/T x counts_per_unit counts per second, commanded and actual.
      const middle = active.slice(Math.floor(active.length / 4), Math.floor((3 * active.length) / 4));
      // The middle half of the plan's cycles (within the handover's cycle either way).
      expect(middle.length).toBeGreaterThanOrEqual(Math.floor(planCycles / 2) - 2);
      for (const r of middle) {
        const a = r.ax[0]!;
        expect(a.target_velocity_valid).toBe(1);
        expect(Math.abs(a.target_velocity_counts_per_s / scale - RAD_PER_S)).toBeLessThan(RAD_PER_S * 0.01);
        expect(a.velocity_actual_valid).toBe(1);
        expect(Math.abs(a.velocity_actual_counts_per_s / scale - RAD_PER_S)).toBeLessThan(RAD_PER_S * 0.05);
      }
      // Over the middle the target advanced by velocity x time, with time in s from ns.
      const m0 = middle[0]!;
      const m1 = middle.at(-1)!;
      const secs = Number(m1.t_ns - m0.t_ns) / 1e9;
      expect(Math.abs((m1.ax[0]!.target - m0.ax[0]!.target) / scale - RAD_PER_S * secs)).toBeLessThan(RAD_PER_S * secs * 0.01);
      await v.cell.cleanup();
    },
  );
});

// On the cell's own clock (the file's target, real time): the Grant's deadline, an event's time and the
// telemetry records' times are all host monotonic ns on one time base, so each falls between the others
// exactly where the exchange put it.
describe('host times on one monotonic ns clock (real time)', () => {
  test(
    'Grant.deadline_host_ns minus lease_ms, a telemetry_mark event time and telemetry t_ns are ordered as the requests were',
    covers('rule:transport.units', 'field:Grant.deadline_host_ns', 'field:Event.time_ns'),
    async ({ cell, client, description, skip }) => {
      const unserved = unservedReason(description, 'mark_telemetry', 'telemetry');
      if (unserved) skip(unserved);
      const cycle = BigInt(description.cycle_ns as bigint);
      const latest = async () => {
        const from = await latestSequence(client);
        const b = await readBatch(client, from - 1n);
        return b.records.at(-1)!;
      };
      const before = await latest();
      // Held (renewed from the grant keeper's thread): the test is about the clock, not the lease, and the
      // cell's ceiling (500 ms on a LAN cell) is shorter than what a loaded host may take to reach the mark.
      // A renewal moves the deadline the records carry by when it was sent, which lies inside the window too.
      const s = await cell.hold();
      const cursor = await eventCursor(client);
      const m = await cell.fenced('mark_telemetry', s, { label: 'units' });
      expect(m.status, m.reply.error).toBe(200);
      let mark: Data | undefined;
      for (let k = 0; k < 100 && !mark; k++) mark = (await eventsSince(client, cursor)).find((e) => e.type === 'telemetry_mark');
      expect(mark, 'telemetry_mark event').not.toBeUndefined();
      // The mark names this request: its label and sequence (docs/profile.md "Events", mark payload).
      await inProfile('profile:events.payloads', () => expect(mark!.mark).toEqual({ label: 'units', sequence: m.reply.sequence, generation: s.generation }));
      // The records are the core's, written as its cycles run; on a loaded machine the ring may not yet hold
      // a cycle at or after the mark: read until it does (bounded; a mark stamped on another clock never gets
      // there). A record of the cycle before the mark's is not enough: on a cell of a long cycle the acquire
      // and the mark can fall in one cycle, and that record may still show no grant.
      let after = await latest();
      for (let k = 0; k < 200 && after.t_ns < (mark!.time_ns as bigint); k++) {
        await new Promise((r) => setTimeout(r, 5));
        after = await latest();
      }
      const acquiredAt = s.grant.deadline_host_ns - BigInt(s.grant.lease_ms) * 1_000_000n;
      const order = { before: before.t_ns, acquiredAt, mark: mark!.time_ns as bigint, after: after.t_ns + cycle };
      expect(order.before <= order.acquiredAt && order.acquiredAt <= order.mark && order.mark <= order.after, `not in order: ${JSON.stringify(order, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x))}`).toBe(true);
      // The core's copy of the lease deadline in the records is on the same clock: set within the same window.
      expect(after.grant_active).toBe(1);
      const skew = after.grant_deadline_host_ns - s.grant.deadline_host_ns;
      expect(skew < 0n ? -skew : skew).toBeLessThanOrEqual(after.t_ns - before.t_ns);
    },
  );
});
