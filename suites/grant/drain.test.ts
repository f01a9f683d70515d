// The fence while a Stop drains (document 1 part 2 Fence: "renew and stop also accept an older nonzero
// generation not above the current one for the same session"; part 3: a stopping grant "grants no movement
// permission"; acquire needs "no Stop draining"), and what a stop's request_id remembers once the drain
// has revoked the grant (part 4 envelope rules: idempotent retries).
//
// The probes during a drain need the drain held open: a reference stack on the stepped clock (a shared
// stepped variant) runs no cycle until the test steps, so the stop stays admitted-but-undrained for as long
// as the probes take (the service's 1 s native receipt bound is the only wall-time limit). They stay there,
// stepped-only, and skip on a target that cannot give a stepped stack (an external service, a rig), because
// in real time they cannot be judged as strictly:
// - a drain lasts only until the cell is at rest (a stop during a motion: while the axes ramp down), and the
//   documents give it no length ("stopping, then revoked", part 3): a cell at rest, or one that cuts its
//   drives at once, may drain within a cycle, before a single probe arrives;
// - most of the answers the rule asks for during the drain are the answers the revoked session gets after
//   it (control_session_stale for a newer generation, for enable, arm, home and restore_anchor; docs/profile.md
//   "Fence checks"), so a probe that arrived after the drain ended would pass without showing the rule. Only
//   an observation after each probe that the grant still drains (a renewal answering stopping true) could
//   say the probe was judged inside it, and whether it does depends on the host's timing against the
//   target's unknown drain: a probe found outside would have to be tried again in another drain, and a
//   target whose drain is short would never be judged;
// - worse, in real time the drain ends when the target decides, so a wrong target that ends the drain
//   because of the probe (revoking the stopping grant to admit an acquire, say) looks the same as a drain
//   that ended by itself just before it, and passes; on the stepped clock no cycle ends the drain, so the
//   probe meets it open whatever it does.
// The request_id test needs only a drain that ends: it runs on the file's cell through its CellDriver
// (stepsItsCell), stepped on the sim target, in real time on any other, where it waits for grant_revoked.

import { afterEach } from 'vitest';
import type { Session } from '../../harness/clients/cell.ts';
import type { BindingInput } from '../../harness/clients/control.ts';
import { eventCursor } from '../../harness/clients/events.ts';
import { checkGrant, type CheckedReply } from '../../harness/oracle/reply.ts';
import { covers, describe, expect, inProfile, sharedVariant, stepsItsCell, test } from '../../harness/fixture.ts';

stepsItsCell();

describe('fence during a stop drain (stepped clock)', () => {
  const v = sharedVariant<{ binding: BindingInput; axes: unknown[] }>({ clock: 'stepped' });
  /** The stop a test admitted and has not drained yet (it ended early: an error, a failed check). */
  let undrained: Promise<CheckedReply> | undefined;
  // A stop left draining would refuse the next test's acquire ("no Stop draining", document 1 part 3) and
  // turn one test's outcome into another's FAIL: whatever a test ended with, its stop drains after it.
  afterEach(async () => {
    const stop = undrained;
    undrained = undefined;
    if (!stop || v.cannot !== undefined) return;
    await v.target.step!(20);
    await stop.catch(() => undefined);
  });

  /** Acquire, then admit a stop without letting the core run: returns the session and the pending stop. */
  async function stopping(): Promise<{ s: Session; stop: Promise<CheckedReply> }> {
    // Held: the probes below are about the fence, not the lease; the keeper's renewals (with the session's
    // first generation, which a stopping grant accepts) keep a slow host from expiring it (README "Verdicts").
    const s = await v.cell.hold({ requested_lease_ms: 10_000n });
    const stop = v.cell.fenced('stop', s);
    undrained = stop;
    // The service turns the grant stopping before it hands the stop to the core: renew shows it.
    let last: CheckedReply | undefined;
    for (let i = 0; i < 50; i++) {
      last = await v.cell.fenced('renew', s);
      if (last.status === 200 && checkGrant(last.reply.data).stopping) return { s, stop };
    }
    // The drain is held (no cycle runs): a grant that never shows stopping was revoked without its drain,
    // or never turned stopping. The target's doing (document 1 part 4 stop: revocation follows the drain).
    expect({ status: last!.status, stopping: last!.status === 200 ? checkGrant(last!.reply.data).stopping : undefined, error: last!.reply.error }, 'the grant while its stop drains').toEqual({ status: 200, stopping: true, error: undefined });
    throw new Error('unreachable');
  }

  async function drain(stop: Promise<CheckedReply>): Promise<void> {
    await v.target.step!(20);
    if (undrained === stop) undrained = undefined;
    expect((await stop).status).toBe(200);
  }

  test(
    'while a stop drains, renew and stop with the older generation are accepted (stopping true, current generation); a newer one is refused',
    covers('rule:fence.older_generation_renew_stop', 'rule:op.renew.lease_unchanged'),
    async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot);
      const { s, stop } = await stopping();
      const older = { session: s.session, generation: s.generation };
      const renew = await v.cell.fenced('renew', older);
      expect(renew.status, renew.reply.error).toBe(200);
      const g = checkGrant(renew.reply.data);
      expect(g.stopping).toBe(true);
      expect(g.generation).toBe(s.generation + 1n);
      expect(g.lease_ms).toBe(s.grant.lease_ms);
      const again = await v.cell.fenced('stop', older);
      expect(again.status, again.reply.error).toBe(200);
      expect(checkGrant(again.reply.data)).toMatchObject({ stopping: true, generation: g.generation });
      // The current stopping generation is fine too; one above it is not.
      expect((await v.cell.fenced('renew', { session: s.session, generation: g.generation })).status).toBe(200);
      for (const op of ['renew', 'stop']) {
        const r = await v.cell.fenced(op, { session: s.session, generation: g.generation + 1n });
        expect({ op, status: r.status, label: r.label }).toEqual({ op, status: 409, label: 'control_session_stale' });
      }
      await drain(stop);
    },
  );

  test(
    'while a stop drains nothing that moves or drives outputs is admitted, and acquire is refused',
    covers('rule:grant.stopping_no_movement'),
    async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot);
      const { s, stop } = await stopping();
      const cur = { session: s.session, generation: s.generation + 1n };
      const all = (1 << v.description.axes.length) - 1;
      // docs/profile.md "Fence checks": a stop in flight is control_session_stale, inhibited for the
      // operations whose reason lists name it.
      const cases: Array<[string, Record<string, unknown>, string]> = [
        ['enable', { axis_mask: all }, 'control_session_stale'],
        ['arm', {}, 'control_session_stale'],
        ['home', { axis_mask: 1 }, 'control_session_stale'],
        ['restore_anchor', { axis_mask: 1 }, 'control_session_stale'],
        ['halt', {}, 'inhibited'],
        ['io_arm', {}, 'inhibited'],
        ['io_disarm', {}, 'inhibited'],
      ];
      for (const [op, fields, label] of cases) {
        const r = await v.cell.fenced(op, cur, fields);
        expect({ op, status: r.status, label: r.label }).toEqual({ op, status: 409, label });
      }
      const acq = await v.cell.acquire();
      expect({ status: acq.status, label: acq.label }).toEqual({ status: 409, label: 'control_session_stale' });
      await drain(stop);
      // After the drain: revoked, and the cell can be acquired again.
      expect((await v.cell.fenced('renew', cur)).label).toBe('control_session_stale');
      expect((await v.cell.acquire()).status).toBe(200);
      await v.cell.cleanup();
    },
  );
});

describe('the reply a stop remembers after its drain', () => {
  test(
    'a stop retried with the same request_id after the drain revoked the grant replays its reply',
    covers('rule:idempotency.cache_dropped', 'rule:idempotency.join_or_replay', 'profile:grant.retry_cache_ended'),
    async ({ cell, client, drive }) => {
      const s = await cell.grant({ requested_lease_ms: 10_000n });
      const cursor = await eventCursor(client);
      // Stepped: 20 cycles of the cell's time, by which the stop of an idle cell has drained; in real time
      // the drain's end is waited for (grant_revoked, document 1 part 6), however long the cell takes to rest.
      const r1 = await drive.answer(cell.fenced('stop', s, { request_id: 'stop-once' }), 20);
      expect(r1.status).toBe(200);
      if (!drive.stepped) expect(await drive.event(cursor, (e) => e.type === 'grant_revoked', 5_000), 'grant_revoked after the stop').toBeDefined();
      // Revoked now: a new request on the session is stale (while it drained, the stopping generation was
      // still accepted).
      expect((await cell.fenced('renew', { session: s.session, generation: s.generation + 1n })).label).toBe('control_session_stale');
      // Whether the ended session still remembers its stop is ours: document 1 part 4 has "the current
      // session" remember its outcomes and names release, lease expiry and a restart as what drops them, not
      // a stop's drain (docs/profile.md "Grant generation and stop": kept for the 8 most recently ended
      // sessions). Another reading (gone with the grant) is a profile difference, not a failure.
      const r2 = await cell.fenced('stop', s, { request_id: 'stop-once' });
      const changed = await cell.fenced('stop', { session: s.session, generation: s.generation + 1n }, { request_id: 'stop-once' });
      await inProfile('profile:grant.retry_cache_ended', () => {
        expect(r2.status).toBe(200);
        expect(r2.reply).toEqual(r1.reply);
        expect(changed.label).toBe('request_id_conflict');
      });
    },
  );
});
