// publisher_overflow (document 1 part 6: "native observations dropped before reaching the log"; "Events
// are observations, not a lossless trace ... After loss or incarnation change reconcile from status").
// The reference core's observation publisher is held full through the stack's private test channel
// (`hold_event_publisher`, docs/profile.md "Events"): what the core observes meanwhile is lost, the log
// says so with one publisher_overflow event once the publisher is free, and status still tells the truth.

import { eventCursor, eventsSince, waitForEvent } from '../../harness/clients/events.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { covers, describe, expect, inProfile, needsFaults, needsMotion, test } from '../../harness/fixture.ts';

const HOLD_MS = 1_500;

describe('observations lost before the log', () => {
  test(
    'enable changes observed while the publisher is full are missing from the log; a publisher_overflow event counts them; status has the truth; later observations flow again',
    covers('event:publisher_overflow', 'profile:events.publisher_overflow'),
    async ({ cell, client, target, description, skip }) => {
      needsFaults({ skip }, target);
      needsMotion({ skip }, target);
      const all = BigInt((1 << description.axes.length) - 1);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      const cursor = await eventCursor(client);
      await target.inject({ kind: 'hold_event_publisher', ms: HOLD_MS });
      expect((await cell.fenced('enable', s, { axis_mask: Number(all) })).status).toBe(200);
      const st = await waitStatus(client, (x) => x.core!.axis_enable_mask === all, 3_000);
      expect(st.core!.axis_enable_mask).toBe(all);
      const overflow = await waitForEvent(client, cursor, (e) => e.type === 'publisher_overflow', HOLD_MS + 5_000);
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
