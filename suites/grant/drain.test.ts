// The fence while a Stop drains (document 1 part 2 Fence: "renew and stop also accept an older nonzero
// generation not above the current one for the same session"; part 3: a stopping grant "grants no movement
// permission"; acquire needs "no Stop draining"). The drain is held open on a reference stack with the
// stepped clock: no cycle runs until the test steps, so the stop stays admitted-but-undrained for as long as
// the probes take (the service's 1 s native receipt bound is the only wall-time limit).

import { afterEach } from 'vitest';
import type { Session } from '../../harness/clients/cell.ts';
import type { BindingInput } from '../../harness/clients/control.ts';
import { checkGrant, type CheckedReply } from '../../harness/oracle/reply.ts';
import { covers, describe, expect, sharedVariant, test } from '../../harness/fixture.ts';

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

  test(
    'a stop retried with the same request_id after the drain revoked the grant replays its reply',
    covers('rule:idempotency.cache_dropped', 'rule:idempotency.join_or_replay'),
    async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot);
      const s = await v.cell.grant({ requested_lease_ms: 10_000n });
      const first = v.cell.fenced('stop', s, { request_id: 'stop-once' });
      await v.target.step!(20);
      const r1 = await first;
      expect(r1.status).toBe(200);
      // Revoked now: a new request on the session is stale, the retry is the remembered reply.
      expect((await v.cell.fenced('renew', { session: s.session, generation: s.generation + 1n })).label).toBe('control_session_stale');
      const r2 = await v.cell.fenced('stop', s, { request_id: 'stop-once' });
      expect(r2.status).toBe(200);
      expect(r2.reply).toEqual(r1.reply);
      const changed = await v.cell.fenced('stop', { session: s.session, generation: s.generation + 1n }, { request_id: 'stop-once' });
      expect(changed.label).toBe('request_id_conflict');
    },
  );

});
