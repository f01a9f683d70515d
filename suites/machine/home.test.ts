// Home and its lifetime (document 1 part 4 home): losing the HTTP reply does not cancel Home; lease
// expiry does.

import { request } from 'undici';
import { stringifyExact } from '../../harness/oracle/json.ts';
import { REQUEST_SCHEMA } from '../../harness/clients/control.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { covers, describe, expect, hostBound, inProfile, needsMotion, sharedVariant, test, type Description } from '../../harness/fixture.ts';
import { HarnessError } from '../../harness/errors.ts';
import { latestSequence, recordsSince } from '../../harness/clients/telemetry.ts';
import { machineOf, needs } from '../../harness/machine.ts';

/**
 * The natively homeable axes of the cell (Describe native_home): the reply-loss test homes the fifth (J5
 * on the default cell, else the last), the lease-expiry test the sixth (J6), or on a smaller cell the
 * last one the other test does not home, so that it finds an axis never homed in this incarnation.
 */
const homeable = (d: object, from: number) => {
  const h = machineOf(d).homeable;
  if (from <= 4) return h[Math.min(from, h.length - 1)]?.index;
  const other = h[Math.min(4, h.length - 1)];
  return (h[from] ?? h.filter((a) => a !== other).at(-1) ?? other)?.index;
};
const NO_HOME = 'the cell has no axis with native Home (Describe native_home)';
/** How long Home may take (document 1 part 4 home: "waits up to 60 s"), ms. */
const HOME_WAIT_MS = 60_000;

describe('Home lifetime', () => {
  test('a Home whose HTTP reply is lost (client gone) still completes', { ...covers('rule:op.home.reply_loss'), timeout: 2 * HOME_WAIT_MS + 30_000 }, async ({ target, client, cell, description, skip }) => {
    needsMotion({ skip }, target);
    const J5 = needs(skip, homeable(description, 4), NO_HOME);
    const before = await readStatus(client);
    const s = await cell.hold();
    const abort = new AbortController();
    const pending = request('http://localhost/v1/control', {
      method: 'POST',
      dispatcher: client.agent,
      signal: abort.signal,
      headers: { 'content-type': 'application/json' },
      body: stringifyExact({ schema: REQUEST_SCHEMA, operation: 'home', session: s.session, generation: s.generation, axis_mask: 1 << J5 }),
    }).catch((e: unknown) => e);
    // The reply is cut once Home runs (phase homing), however long the request takes to get there on a
    // loaded host; a request answered before that was not lost, and what it said fails the test below.
    let settled = false;
    void pending.then(() => (settled = true));
    await waitStatus(client, (x) => settled || x.commissioning.phase === 'homing', HOME_WAIT_MS);
    abort.abort();
    await pending;
    // Home runs to its end without its client; it may take up to the documented 60 s (document 1 part 4 home).
    const st = await waitStatus(client, (x) => x.core!.home_epoch > before.core!.home_epoch, HOME_WAIT_MS);
    expect(st.core!.home_epoch).toBeGreaterThan(before.core!.home_epoch);
    expect(Number(st.core!.home_valid_mask) & (1 << J5)).toBe(1 << J5);
  });

  // On the reference stack a slowed homing run (5 s) under the lan lease ceiling (500 ms): Home surely
  // reaches the drives before the lease runs out, and cannot finish before it, even on a loaded host. On a
  // target without the variant, its own Home (seconds on real drives) under a 60 ms lease.
  const slow = sharedVariant<Description>({ homingMs: 5_000 });

  test('lease expiry during Home cancels it: Home began (homing mode on the drive), was answered cancelled, left no new Home evidence and the axis disabled', covers('rule:op.home.reply_loss', 'profile:machine.home_failure'), async ({ target: fileTarget, client: fileClient, cell: fileCell, description: fileDescription, skip }) => {
    const useSlow = slow.cannot === undefined;
    const target = useSlow ? slow.target : fileTarget;
    const client = useSlow ? slow.target.client() : fileClient;
    const cell = useSlow ? slow.cell : fileCell;
    const description = useSlow ? slow.description : fileDescription;
    const leaseMs = useSlow ? 500n : 60n;
    needsMotion({ skip }, target);
    // An axis other than the one the reply-loss test homes, when the cell has two.
    const J6 = needs(skip, homeable(description, 5), NO_HOME);
    const before = await readStatus(client);
    skip((Number(before.core!.home_valid_mask) & (1 << J6)) !== 0, `axis ${machineOf(description).axes[J6]!.id} already homed in this incarnation`);
    const from = await latestSequence(client);
    const t0 = performance.now();
    const s = await cell.grant({ requested_lease_ms: leaseMs });
    const sentMs = performance.now() - t0;
    const homeSent = performance.now();
    const r = await cell.fenced('home', s, { axis_mask: 1 << J6 });
    expect(r.status).toBe(409);
    // A lease refusal means the lease ran out before the Home request was admitted: the harness was too slow.
    if (['fence', 'no_grant', 'expired', 'control_session_stale'].includes(r.label ?? '')) {
      throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `home was refused ${r.label}: the ${leaseMs} ms lease ran out before the request was admitted (acquire answered after ${sentMs.toFixed(1)} ms)`);
    }
    // Home began: the drive was switched to homing mode (CiA 402 modes of operation display 6 in the
    // capture records) before the lease ran out, so this is Home cancelled, not a refusal at admission.
    const recs = await recordsSince(client, from);
    // The premise is that Home reaches the drives inside the lease. When it did not, the harness sending
    // the Home late, or the core not cycling (the reference stack's core on the harness's own host: its
    // longest gap between cycles up to the lease's deadline, from its records), for more than half the
    // lease says nothing about the target: HIL_ERR_HOST_TOO_SLOW with the figures.
    const deadline = s.grant.deadline_host_ns;
    let coreGapMs = 0;
    for (let k = 1; k < recs.length && recs[k - 1]!.t_ns <= deadline; k++) coreGapMs = Math.max(coreGapMs, Number(recs[k]!.t_ns - recs[k - 1]!.t_ns) / 1e6);
    const homeLate = homeSent - t0;
    await hostBound(
      {
        rule: 'document 1 part 4 home under a lease that runs out: Home reaches the drives inside the lease',
        marginMs: Number(leaseMs) / 2,
        measured: () => (homeLate >= coreGapMs ? { ms: homeLate, what: 'from the acquire sent to the Home sent' } : { ms: coreGapMs, what: "the core's longest gap between cycles before the deadline" }),
      },
      async () => expect(recs.some((x) => x.ax[J6]!.mode_display === 6), 'the axis never entered homing mode: Home did not begin').toBe(true),
    );
    // ... and ended by the lease, not by its own outcome: no record of homing attained.
    expect(recs.some((x) => x.ax[J6]!.mode_display === 6 && (x.ax[J6]!.statusword & 0x1000) !== 0), 'homing attained: Home ran to its end').toBe(false);
    // The refusal is Home's own failure answer (cancelled).
    await inProfile('profile:machine.home_failure', () => {
      expect(r.label).toBe('native_rejected');
      expect(r.reply.native_result).toMatchObject({ Result: 1, Reason: 17 });
    });
    const st = await waitStatus(client, (x) => x.commissioning.phase === 'idle' && x.core!.axis_enable_mask === 0n);
    expect(Number(st.core!.home_valid_mask) & (1 << J6)).toBe(0);
    expect(st.core!.home_epoch).toBe(before.core!.home_epoch);
    expect(st.axes[J6]!.enabled).toBe(false);
  });
});
