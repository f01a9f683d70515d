// Recovery operations beyond the happy path (document 1 part 2 RecoveryStatus, part 3 "reset_fault
// submitted ... session retired", part 4 reset_fault / recovery_status / io_arm / home, "Envelope rules"
// retry cache). Each refusal and each cache rule in its own test.

import { eventCursor, eventsSince } from '../../harness/clients/events.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import type { BindingInput } from '../../harness/clients/control.ts';
import { covers, describe, expect, needsFaults, sharedVariant, test } from '../../harness/fixture.ts';

interface Recovery {
  home_valid_mask: bigint;
  faults: Array<{ bit: bigint; name: string }>;
  reset_sequence: bigint;
  reason: string;
  outcomes: Array<{ bit: bigint; outcome: string }>;
}


describe('reset_fault and recovery_status', () => {
  test('reset_fault with axis_mask outside the configured group is refused with invalid_axis_mask and keeps the session', covers('reason:invalid_axis_mask', 'rule:op.reset_fault.precondition'), async ({ cell, description }) => {
    const s = await cell.hold();
    const outside = 1 << description.axes.length;
    const r = await cell.fenced('reset_fault', s, { axis_mask: outside });
    expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'invalid_axis_mask' });
    // Nothing was submitted: the session is not retired.
    expect((await cell.fenced('renew', s)).status).toBe(200);
  });

  test('recovery_status while the E-stop chain is open lists the fault and reports reason fault_persists', covers('field:RecoveryStatus.reason', 'field:RecoveryStatus.faults', 'rule:op.recovery_status.keeps_session'), async ({ cell, client, target, skip }) => {
    needsFaults({ skip }, target);
    await target.inject({ kind: 'estop_open' });
    try {
      await waitStatus(client, (x) => x.core!.safety_fault_mask !== 0n && x.core!.execution_fault_reasons !== 0n);
      const s = await cell.hold();
      const r = await cell.fenced('recovery_status', s);
      expect(r.status, r.reply.error).toBe(200);
      const rec = r.reply.data as unknown as Recovery;
      expect(rec.faults.length).toBeGreaterThan(0);
      expect(rec.reason).toBe('fault_persists');
      expect((await cell.fenced('renew', s)).status).toBe(200);
      expect((await cell.fenced('release', s)).status).toBe(200);
    } finally {
      await target.inject({ kind: 'clear' });
    }
    // With nothing latched the reason is empty.
    const s2 = await cell.hold();
    const cleared = await cell.fenced('reset_fault', s2);
    expect(cleared.status, cleared.reply.error).toBe(200);
    const s3 = await cell.hold();
    const idle = (await cell.fenced('recovery_status', s3)).reply.data as unknown as Recovery;
    expect(idle.faults).toEqual([]);
    expect(idle.reason).toBe('');
  });

  test('a reset_fault whose reply was lost is replayed with the same request_id after it retired the session', covers('rule:idempotency.cache_dropped', 'rule:idempotency.join_or_replay', 'rule:op.reset_fault.retires_session'), async ({ cell }) => {
    const s = await cell.hold(); // renewed until the reset retires it (a loaded machine must not expire it first)
    const first = await cell.fenced('reset_fault', s, { request_id: 'reset-once' });
    expect(first.status, first.reply.error).toBe(200);
    expect((await cell.fenced('renew', s)).label).toBe('control_session_stale');
    const again = await cell.fenced('reset_fault', s, { request_id: 'reset-once' });
    expect(again.status).toBe(200);
    expect(again.reply).toEqual(first.reply);
    const conflict = await cell.fenced('reset_fault', s, { request_id: 'reset-once', axis_mask: 1 });
    expect(conflict.label).toBe('request_id_conflict');
  });

  test('a reset the core refuses (fault_persists) still retires the session, and its retry replays the refusal', covers('reason:fault_persists', 'transition:grant:owned->session_retired:reset_fault', 'rule:idempotency.join_or_replay'), async ({ cell, client, target, skip }) => {
    needsFaults({ skip }, target);
    await target.inject({ kind: 'estop_open' });
    try {
      await waitStatus(client, (x) => x.core!.execution_fault_reasons !== 0n);
      const s = await cell.hold();
      const r = await cell.fenced('reset_fault', s, { request_id: 'persisting' });
      expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'fault_persists' });
      expect(r.reply.native_result).toMatchObject({ Result: 1 });
      expect((r.reply.data as unknown as Recovery).reason).toBe('fault_persists');
      expect((await cell.fenced('renew', s)).label).toBe('control_session_stale');
      const again = await cell.fenced('reset_fault', s, { request_id: 'persisting' });
      expect(again.reply).toEqual(r.reply);
    } finally {
      await target.inject({ kind: 'clear' });
    }
  });

  test('reset_fault and release sent together: the fence holds at admission, never both admitted and nothing cleared after the release', covers('rule:common_sets.authority', 'reason:control_session_stale'), async ({ cell, client }) => {
    for (let round = 0; round < 5; round++) {
      const s = await cell.hold();
      const cursor = await eventCursor(client);
      const [reset, release] = await Promise.all([cell.fenced('reset_fault', s), cell.fenced('release', s)]);
      const admitted = [reset, release].filter((r) => r.status === 200);
      expect(admitted.length, `round ${round}: reset ${reset.status} ${reset.label}, release ${release.status} ${release.label}`).toBe(1);
      const refused = reset.status === 200 ? release : reset;
      expect(refused.label).toBe('control_session_stale');
      if (release.status === 200) {
        const events = await eventsSince(client, cursor);
        const released = events.findIndex((e) => e.type === 'grant_released');
        expect(events.slice(released).some((e) => e.type === 'fault_cleared')).toBe(false);
      }
    }
  });
});

// A cell whose only output is a torch and whose first axis has no native Home (fixtures/machines/torch-only.json).
describe('torch-only cell without native Home on R1', () => {
  const v = sharedVariant<{ axes: Array<{ id: string; native_home: boolean }>; io: { outputs: Array<{ name: string; torch: boolean }> } | null } & { binding: BindingInput }>({ machine: 'torch-only' });

  test('io_arm with torch outputs only is refused with io_not_configured (torch outputs are never armed)', covers('reason:io_not_configured', 'rule:op.io_arm.drive_conditions'), async ({ skip }) => {
    skip(v.cannot !== undefined, v.cannot);
    expect(v.description.io!.outputs).toEqual([{ name: 'torch', torch: true }]);
    const s = await v.cell.hold();
    for (const op of ['io_arm', 'io_disarm']) {
      const r = await v.cell.fenced(op, s);
      expect({ op, status: r.status, label: r.label }).toEqual({ op, status: 409, label: 'io_not_configured' });
    }
    const st = await readStatus(v.cell.client);
    expect(st.core!.io_armed).toBe(0n);
    await v.cell.cleanup();
  });

  test('home naming an axis whose Describe entry has native_home false is refused with invalid_axis_mask; the other axis homes', covers('field:Description.axes[].native_home', 'rule:op.home.axis_mask', 'reason:invalid_axis_mask'), async ({ skip }) => {
    skip(v.cannot !== undefined, v.cannot);
    expect(v.description.axes.map((a) => a.native_home)).toEqual([false, true]);
    const s = await v.cell.hold({ requested_lease_ms: 500n });
    for (const m of [1, 3]) {
      const r = await v.cell.fenced('home', s, { axis_mask: m });
      expect({ m, status: r.status, label: r.label }).toEqual({ m, status: 409, label: 'invalid_axis_mask' });
    }
    const before = await readStatus(v.cell.client);
    expect(before.commissioning.phase).toBe('idle');
    const ok = await v.cell.fenced('home', s, { axis_mask: 2 });
    expect(ok.status, ok.reply.error).toBe(200);
    const after = await readStatus(v.cell.client);
    expect(Number(after.core!.home_valid_mask) & 2).toBe(2);
    expect(Number(after.core!.home_valid_mask) & 1).toBe(0);
    await v.cell.cleanup();
  });
});
