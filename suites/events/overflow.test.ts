// publisher_overflow (document 1 part 6: "native observations dropped before reaching the log"; "Events
// are observations, not a lossless trace ... After loss or incarnation change reconcile from status").
// The reference core's observation publisher is held full through the stack's private test channel
// (`hold_event_publisher`, docs/profile.md "Events"): what the core observes meanwhile is lost, the log
// says so with one publisher_overflow event once the publisher is free, and status still tells the truth.

import { setTimeout as delay } from 'node:timers/promises';
import { eventCursor, eventsSince, waitForEvent } from '../../harness/clients/events.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { HarnessError } from '../../harness/errors.ts';
import { covers, describe, expect, inProfile, needsFaults, needsMotion, test } from '../../harness/fixture.ts';

/** The first hold, ms; each further attempt holds twice as long. */
const HOLD_MS = 1_500;
const ATTEMPTS = 3;

describe('observations lost before the log', () => {
  test(
    'enable changes observed while the publisher is full are missing from the log; a publisher_overflow event counts them; status has the truth; later observations flow again',
    covers('event:publisher_overflow', 'profile:events.publisher_overflow'),
    async ({ cell, client, target, description, skip }) => {
      needsFaults({ skip }, target);
      needsMotion({ skip }, target);
      const all = BigInt((1 << description.axes.length) - 1);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      // The check needs every enable observation raised inside the hold. The hold runs on the core's host
      // clock from when the test channel takes it, so status showing the whole mask sooner than the hold's
      // length after the request was sent proves it; a later sight proves nothing either way (a loaded host,
      // a drive slow to enable), and the attempt is made again with a longer hold after the cell is quiet.
      let cursor = 0n;
      let holdMs = HOLD_MS;
      const missed: string[] = [];
      for (let attempt = 1; ; attempt++) {
        cursor = await eventCursor(client);
        const sent = performance.now();
        await target.inject({ kind: 'hold_event_publisher', ms: holdMs });
        const taken = performance.now();
        expect((await cell.fenced('enable', s, { axis_mask: Number(all) })).status).toBe(200);
        const st = await waitStatus(client, (x) => x.core!.axis_enable_mask === all, 3_000);
        expect(st.core!.axis_enable_mask).toBe(all);
        const seenMs = performance.now() - sent;
        if (seenMs < holdMs) break;
        missed.push(`status showed the whole enable mask ${seenMs.toFixed(0)} ms after a ${holdMs} ms hold was asked for`);
        if (attempt === ATTEMPTS) throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `the enable could not be raised inside the publisher's hold in ${ATTEMPTS} attempts: ${missed.join('; ')}`);
        // Quiet again before the next hold: this one over (it was taken before the test channel answered),
        // then disabled, the disable's observation in the log after any overflow of this attempt.
        await delay(Math.max(0, taken + holdMs - performance.now()));
        expect((await cell.fenced('enable', s, { axis_mask: 0 })).status).toBe(200);
        await waitStatus(client, (x) => x.core!.axis_enable_mask === 0n, 3_000);
        await waitForEvent(client, cursor, (e) => e.type === 'enable_changed' && (e.enable as { axis_enable_mask?: bigint } | undefined)?.axis_enable_mask === 0n, 5_000);
        holdMs *= 2;
      }
      const overflow = await waitForEvent(client, cursor, (e) => e.type === 'publisher_overflow', holdMs + 5_000);
      expect(overflow, 'no publisher_overflow after the hold').not.toBeUndefined();
      const evs = await eventsSince(client, cursor);
      const at = evs.findIndex((e) => e.sequence === overflow!.sequence);
      // The core's enable observations of the hold never reached the log; the overflow counts them.
      expect(evs.slice(0, at).filter((e) => e.type === 'enable_changed')).toEqual([]);
      const o = overflow!.overflow as { dropped: bigint; first_dropped_ns: bigint; last_dropped_ns: bigint };
      expect(o.dropped).toBeGreaterThanOrEqual(1n);
      expect(o.first_dropped_ns).toBeLessThanOrEqual(o.last_dropped_ns);
      expect(overflow!.daemon_incarnation).toBe((await readStatus(client)).daemon_incarnation);
      // Free again: the next observation reaches the log after the overflow.
      expect((await cell.fenced('enable', s, { axis_mask: 0 })).status).toBe(200);
      const changed = await waitForEvent(client, overflow!.sequence, (e) => e.type === 'enable_changed', 3_000);
      // The observation after the overflow is the disable just sent (enable payload, docs/profile.md "Events").
      expect(changed, 'no enable_changed after the publisher was free').not.toBeUndefined();
      await inProfile('profile:events.payloads', () => expect(changed!.enable).toEqual({ axis_enable_mask: 0n, armed: false }));
      expect((await eventsSince(client, overflow!.sequence)).filter((e) => e.type === 'publisher_overflow')).toEqual([]);
    },
  );
});
