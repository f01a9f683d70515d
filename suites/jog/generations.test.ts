// Which jog generation end_jog ends, and the order of the velocity checks of a jog frame (document 1 part
// 4 end_jog: "exact current nonzero independent jog generation"; part 3 "Jog session"; docs/profile.md
// "Jog": end_jog, legacy jog, the local_jog_update checks in order). A wrong implementation that accepts
// any generation it has issued, or a legacy session's generation, ends a pendant's jog it does not own.
//
// Portable: axes, velocities and limits from Describe; no Home needed (jog does not require it). One cell
// for the file, moved through its CellDriver (stepsItsCell): on the stepped clock where the target runs the
// file's stack so, in real time on any other (an external service, a rig), with --allow-motion.

import type { Session } from '../../harness/clients/cell.ts';
import { encodeJogFrame, hostNs, JogSender, readJog, readJogClock, readJogIngress, waitIngress } from '../../harness/clients/jog.ts';
import { readyDriven } from '../../harness/clients/stepped.ts';
import { covers, describe, expect, hostBound, needsMotion, stepsItsCell, test, type CellFixtures } from '../../harness/fixture.ts';

stepsItsCell();

interface AxisD {
  id: string;
  max_velocity: number;
}

/** The cell armed with every axis enabled, the jog clock's incarnation; skips where no jog lane is served or motion not allowed. */
interface Armed {
  x: CellFixtures;
  s: Session;
  incarnation: string;
  axes: AxisD[];
}

async function armed(x: CellFixtures): Promise<Armed> {
  const clock = await readJogClock(x.client);
  x.skip(clock.socket === '', 'the target serves no independent jog lane (GET /v1/jog/clock socket empty)');
  needsMotion({ skip: x.skip }, x.target);
  const { s } = await readyDriven(x.cell, x.drive, { axes: x.description.axes.length, homeMask: 0 });
  return { x, s, incarnation: clock.incarnation as string, axes: (x.description as unknown as { axes: AxisD[] }).axes };
}

const fenced = (g: Armed, op: string, fields: Record<string, unknown>) => g.x.op(op, g.s, fields);

async function begin(g: Armed, mask: number): Promise<bigint> {
  const origin = hostNs();
  const r = await fenced(g, 'begin_jog', { axis_mask: mask, source_origin_host_ns: origin, deadline_host_ns: origin + 5_000_000_000n, clock_incarnation: g.incarnation });
  expect(r.status, r.reply.error).toBe(200);
  return r.reply.handle!;
}

describe('end_jog takes only the exact current independent generation', () => {
  test(
    'an older nonzero generation while a newer one is open is jog_session_stale and the newer stays open; a legacy jog session’s generation is jog_session_stale and the legacy session stays open',
    covers('rule:op.end_jog.exact_generation', 'reason:jog_session_stale'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      const g = await armed({ cell, client, description, drive, op, target, skip });
      const older = await begin(g, 1);
      const newer = await begin(g, 1);
      expect(newer).toBeGreaterThan(older);
      const r = await fenced(g, 'end_jog', { jog_generation: older });
      expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'jog_session_stale' });
      // Not ended by it: the newer generation is still the lane's, and if it is closed by now, it closed
      // because its input deadline passed in host time (7, a loaded machine), never as ended (10).
      const after = (await readJog(client)) as Record<string, bigint>;
      expect({ gen: after.JogGeneration, mode: after.Mode }).toEqual({ gen: newer, mode: 1n });
      expect(after.SessionOpen === 1n || after.StateReason === 7n, `StateReason ${after.StateReason}`).toBe(true);
      if (after.SessionOpen === 1n) expect((await fenced(g, 'end_jog', { jog_generation: newer })).status).toBe(200);
      await drive.elapse(200); // the axes ramp to rest and go back to hold

      // A legacy jog (test_only) opens a generation of its own (Mode 2): not end_jog's to end.
      const caps = (await client.describe()).reply.data as unknown as { capabilities: Array<{ name: string; state: string }> };
      const legacyState = caps.capabilities.find((c) => c.name === 'jog')?.state;
      skip(legacyState !== 'implemented' && legacyState !== 'test_only', 'the legacy jog is not implemented on this target');
      const zero = g.axes.map(() => 0);
      const j = await fenced(g, 'jog', { axis_mask: 1, velocity: zero, timeout_ms: 250 });
      expect(j.status, j.reply.error).toBe(200);
      const legacy = (await readJog(client)) as Record<string, bigint>;
      expect({ Mode: legacy.Mode, SessionOpen: legacy.SessionOpen }).toEqual({ Mode: 2n, SessionOpen: 1n });
      expect(legacy.JogGeneration).toBeGreaterThan(newer);
      const e = await fenced(g, 'end_jog', { jog_generation: legacy.JogGeneration });
      expect({ status: e.status, label: e.label }).toEqual({ status: 409, label: 'jog_session_stale' });
      const still = (await readJog(client)) as Record<string, bigint>;
      expect({ gen: still.JogGeneration, mode: still.Mode }).toEqual({ gen: legacy.JogGeneration, mode: 2n });
      expect(still.SessionOpen === 1n || still.StateReason === 7n, `StateReason ${still.StateReason}`).toBe(true);
    },
  );
});

describe('local_jog_update velocity checks in the profile’s order', () => {
  test(
    'a frame with a nonzero velocity outside the session on one axis and a non-finite velocity on another is jog_velocity_invalid, whichever axis comes first',
    covers('profile:jog.frame_refusals'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      skip(description.axes.length < 2, 'the check order needs two axes');
      const g = await armed({ cell, client, description, drive, op, target, skip });
      const n = g.axes.length;
      const sender = new JogSender(target.address);
      try {
        // Session on the last axis; every other axis is outside it.
        const inside = n - 1;
        const jg = await begin(g, 1 << inside);
        // The ingress counts every frame the service took (the file's and the run's other tests' too, on a
        // cell they share): this test counts its own from here.
        const was = ((await readJogIngress(client)).refused_by_reason ?? {}) as Record<string, bigint>;
        let seq = 0n;
        const send = async (velocity: number[]) => {
          const before = (await readJogIngress(client)).received as bigint;
          await sender.send(encodeJogFrame({ session: g.s.session, generation: g.s.generation, jogGeneration: jg, sourceSequence: ++seq, captureHostNs: hostNs(), velocity }));
          return waitIngress(client, before + 1n);
        };
        // Number(): an integral max_velocity arrives as a bigint (harness/bigint-json.ts).
        const slow = (i: number) => Number(g.axes[i]!.max_velocity) / 10;
        // axis 0 outside the session (nonzero) before the session's axis (NaN)
        const a = g.axes.map((_, i) => (i === 0 ? slow(0) : i === inside ? Number.NaN : 0));
        expect((await send(a)).last_reason).toBe(20n);
        // the same, the non-finite velocity on an axis outside the session after the outside one
        if (n >= 3) {
          const b = g.axes.map((_, i) => (i === 0 ? slow(0) : i === 1 ? Number.POSITIVE_INFINITY : 0));
          expect((await send(b)).last_reason).toBe(20n);
        }
        // each on its own still answers its own reason
        expect((await send(g.axes.map((_, i) => (i === 0 ? slow(0) : 0)))).last_reason).toBe(21n);
        expect((await send(g.axes.map((_, i) => (i === inside ? Number.NaN : 0)))).last_reason).toBe(20n);
        const by = ((await readJogIngress(client)).refused_by_reason ?? {}) as Record<string, bigint>;
        const own = (k: string) => (by[k] ?? 0n) - (was[k] ?? 0n);
        expect({ jog_velocity_invalid: own('jog_velocity_invalid'), jog_axis_outside_session: own('jog_axis_outside_session') }).toEqual({ jog_velocity_invalid: n >= 3 ? 3n : 2n, jog_axis_outside_session: 1n });
        expect((await fenced(g, 'end_jog', { jog_generation: jg })).status).toBe(200);
      } finally {
        await sender.close();
      }
    },
  );
});

describe('the producer deadline of begin_jog', () => {
  test(
    'a deadline shorter than the input age stands as the first input deadline (never extended to the age); a longer one is shortened to origin + max_jog_input_age_ns',
    covers('profile:jog.observations', 'field:Request.deadline_host_ns'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      const g = await armed({ cell, client, description, drive, op, target, skip });
      const age = ((await readJogClock(client)).max_input_age_ns as bigint) ?? 0n;
      skip(age < 4n, 'the input age is too short to halve');
      for (const [after, want] of [
        [age / 2n, age / 2n],
        [age * 2n, age],
      ] as const) {
        const origin = hostNs();
        // The begin must reach the service before its deadline (half the input age, 125 ms on the LAN
        // profile): one sent or answered later than that may rightly be jog_clock_input_stale.
        // begin_jog, the read and end_jog inside the session's input deadline (want: half the input age,
        // 125 ms on the LAN profile, or the age): a begin refused stale or a session expired before its end
        // after that deadline says nothing.
        await hostBound(
          { rule: 'document 1 part 4 begin_jog: a deadline not yet passed', marginMs: Number(want) / 1e6, measured: () => ({ ms: Number(hostNs() - origin) / 1e6, what: 'from the origin to the check' }) },
          async () => {
            const r = await fenced(g, 'begin_jog', { axis_mask: 1, source_origin_host_ns: origin, deadline_host_ns: origin + after, clock_incarnation: g.incarnation });
            expect(r.status, r.reply.error).toBe(200);
            const j = (await readJog(client)) as Record<string, bigint>;
            expect({ after, input: j.InputDeadlineHostNs }).toEqual({ after, input: origin + want });
            expect((await fenced(g, 'end_jog', { jog_generation: r.reply.handle! })).status).toBe(200);
          },
        );
        await drive.elapse(50);
      }
    },
  );
});
