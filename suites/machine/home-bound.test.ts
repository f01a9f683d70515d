// Home's bound and its cancellation (document 1 part 4 home: "waits up to 60 s"; "Losing the HTTP reply
// does not cancel Home; stop, lease expiry or transport loss do"; part 3: "home leaves the selected axes
// disabled, after which enable and arm are needed again"). On a reference stack with the stepped clock and
// a slowed homing run (variant homingMs), a Home stays in progress until the test steps the core, so
// cancellation and the 60 s bound are observed without waiting 60 s of wall time.

import type { Session } from '../../harness/clients/cell.ts';
import type { BindingInput } from '../../harness/clients/control.ts';
import type { CheckedReply } from '../../harness/oracle/reply.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { stepUntilSettled } from '../../harness/clients/stepped.ts';
import { covers, describe, expect, sharedVariant, test } from '../../harness/fixture.ts';
import { machineOf } from '../../harness/machine.ts';

describe('Home bound and cancellation (stepped clock, slowed homing)', () => {
  // Homing takes 10 minutes of simulated time: it never completes within the 60 s bound.
  const v = sharedVariant<{ binding: BindingInput; cycle_ns: bigint }>({ clock: 'stepped', homingMs: 600_000 });
  /** The axis homed here: the fifth natively homeable axis of the cell, or its last (harness/machine.ts). */
  let J5 = 0;
  /** Core cycles in one second of core time (cycle_ns of the cell). */
  let perSecond = 1_000;
  function needsHome(skip: (c: boolean, note?: string) => void): void {
    skip(v.cannot !== undefined, v.cannot);
    const h = machineOf(v.description).homeable;
    skip(h.length === 0, 'the cell has no axis with native Home (Describe native_home)');
    J5 = 2 ** h[Math.min(4, h.length - 1)]!.index;
    perSecond = Number(1_000_000_000n / BigInt(v.description.cycle_ns));
  }

  /** Start a Home of J5 and step until the core reports it homing. */
  async function homing(): Promise<{ s: Session; home: Promise<CheckedReply> }> {
    // The lease runs on the host's clock whatever the core's clock does: keep it alive by renewals.
    const s = await v.cell.hold({ requested_lease_ms: 10_000n });
    const home = v.cell.fenced('home', s, { axis_mask: J5 });
    for (let i = 0; i < 50; i++) {
      await v.target.step!(2);
      if ((await readStatus(v.cell.client)).commissioning.phase === 'homing') return { s, home };
    }
    throw new Error('Home never started');
  }

  function expectCancelled(r: CheckedReply, reason: number): void {
    expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'native_rejected' });
    expect(r.reply.native_result).toMatchObject({ Result: 1, Reason: reason });
  }

  test('transport loss (the core dies) cancels a Home in flight at once with the cancelled reason', covers('rule:op.home.reply_loss', 'transition:grant:owned->revoked:native_failure'), async ({ skip }) => {
    needsHome(skip);
    skip(!v.target.abilities.coreRestart, `target ${v.target.name} cannot restart its core`);
    const { home } = await homing();
    await v.target.restartCore();
    // No cycle runs on the stepped clock: only the service can answer, and it must not wait out 60 s.
    const r = await home;
    expectCancelled(r, 17);
    await v.cell.cleanup();
  });

  test('stop cancels a Home in flight with the cancelled reason; the axis is left disabled without new evidence', covers('rule:op.home.reply_loss', 'rule:machine_effect.home_leaves_axes_disabled'), async ({ skip }) => {
    needsHome(skip);
    await v.target.step!(2);
    const before = await waitStatus(v.cell.client, (x) => x.core !== null);
    const { s, home } = await homing();
    // The stop's receipt needs no cycle; the cancelled Home is answered once its axis has left operation
    // enabled, which takes cycles after the stop reached the core (stepping before that would be lost).
    expect((await v.cell.fenced('stop', s)).status).toBe(200);
    expect(await stepUntilSettled(v.target, home, 5, 100), 'Home answered after the stop').toBe(true);
    expectCancelled(await home, 17);
    const st = await readStatus(v.cell.client);
    expect(st.commissioning.phase).toBe('idle');
    expect(Number(st.core!.axis_enable_mask) & J5).toBe(0);
    expect(st.core!.home_epoch).toBe(before.core!.home_epoch);
    // Let the stop drain finish (it needs cycles too) so the next test can acquire.
    for (let i = 0; i < 100 && ((await readStatus(v.cell.client)) as unknown as { grant: { draining: boolean } }).grant.draining; i++) await v.target.step!(5);
    await v.cell.cleanup();
  });

  test('a Home that does not finish is failed at 60 s of core time (not before), answered homing_failed, and the service stops the grant', covers('limit:home_wait_s', 'rule:op.home.stop_on_failure'), async ({ skip }) => {
    needsHome(skip);
    const { s, home } = await homing();
    let settled = false;
    void home.then(() => (settled = true));
    // Just short of 60 s after admission: still homing.
    for (let k = 0; k < 59; k++) await v.target.step!(perSecond);
    await new Promise((r) => setTimeout(r, 50));
    if (settled) throw new Error(`Home answered early: ${JSON.stringify((await home).reply, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
    expect(settled).toBe(false);
    expect((await readStatus(v.cell.client)).commissioning.phase).toBe('homing');
    // Past 60 s: the core ends it; the service answers and stops.
    expect(await stepUntilSettled(v.target, home, 100, 40), 'Home answered after 60 s of core time').toBe(true);
    expectCancelled(await home, 16);
    // The service stopped the grant: once the stop has drained (cycles after it reached the core) the
    // session is over.
    let renew = await v.cell.fenced('renew', s);
    for (let i = 0; i < 100 && renew.status === 200; i++) {
      await v.target.step!(5);
      renew = await v.cell.fenced('renew', s);
    }
    expect(renew.label).toBe('control_session_stale');
    const st = await waitStatus(v.cell.client, (x) => x.commissioning.phase === 'idle', 2_000);
    expect(st.commissioning.phase).toBe('idle');
    await v.cell.cleanup();
  });

});
