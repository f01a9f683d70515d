// Units (document 1 part 1 Transports: "positions in each axis's position_unit (rad or m), velocities per
// second, times in ns. Host times use the cell's monotonic clock"; part 2 telemetry: t_ns "host monotonic
// ns", cycle_period_ns, "positions and targets are drive counts; convert with counts_per_unit and sign from
// Describe").
//
// Here what Describe says of units, and the host times of the cell's own real-time clock. A move commanded
// in documented units and read back in them is suites/observation/units-move.test.ts: its file moves its
// cell through a CellDriver (stepped where the target can, in real time elsewhere), while the host-time test
// below needs this file's cell on the real-time clock, where a record's t_ns is host monotonic time.

import { eventCursor, eventsSince } from '../../harness/clients/events.ts';
import { latestSequence, readBatch } from '../../harness/clients/telemetry.ts';
import { covers, describe, expect, inProfile, test } from '../../harness/fixture.ts';
import { unservedReason } from '../../harness/served.ts';
import type { AxisUnits as Axis } from './axis-units.ts';

type Data = Record<string, any>;

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
