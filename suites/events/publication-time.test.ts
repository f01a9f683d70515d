// Event time is the core's publication time (document 1 part 6: "time_ns is the core's publication
// time"), not the service's clock when it relays the event. On a stack with the stepped clock the core's
// time advances only when the test steps, while the host clock runs on: an event the core raised carries
// the time of one of the stepped cycles exactly, and a service that stamped relayed events with its own
// clock would be seconds off.

import type { BindingInput } from '../../harness/clients/control.ts';
import { eventCursor, eventsSince } from '../../harness/clients/events.ts';
import { covers, describe, expect, inProfile, sharedVariant, test } from '../../harness/fixture.ts';

describe('event time_ns (stepped clock)', () => {
  const v = sharedVariant<{ binding: BindingInput }>({ clock: 'stepped' });

  test('an event the core raises carries the time of the cycle that raised it; the log never goes back in time', covers('rule:events.core_publication_time', 'field:Event.time_ns'), async ({ skip }) => {
    skip(v.cannot !== undefined, v.cannot);
    const client = v.target.client();
    const s = await v.cell.hold({ requested_lease_ms: 10_000n });
    const cursor = await eventCursor(client);
    const before = await v.target.step!(1);
    // Enable J1 and step one cycle at a time until the core reports it enabled; note every cycle's time.
    const enable = v.cell.fenced('enable', s, { axis_mask: 1 });
    const cycles: bigint[] = [];
    let changed: Record<string, unknown> | undefined;
    for (let i = 0; i < 200 && !changed; i++) {
      cycles.push(await v.target.step!(1));
      changed = (await eventsSince(client, cursor)).find((e) => e.type === 'enable_changed');
    }
    expect((await enable).status).toBe(200);
    expect(changed, 'no enable_changed within 200 cycles').not.toBeUndefined();
    await inProfile('profile:events.payloads', () => expect(changed!.enable, 'the enable the test sent').toEqual({ axis_enable_mask: 1n, armed: false }));
    const t = changed!.time_ns as bigint;
    expect(t).toBeGreaterThan(before);
    expect(cycles, `enable_changed at ${t} ns is not one of the stepped cycles' times`).toContain(t);
    // The host clock ran on for seconds since the stack started; the core's only by the cycles stepped.
    const all = await eventsSince(client, cursor);
    for (let i = 1; i < all.length; i++) expect(all[i]!.time_ns as bigint).toBeGreaterThanOrEqual(all[i - 1]!.time_ns as bigint);
    expect(all.every((e) => (e.time_ns as bigint) <= cycles.at(-1)!), 'an event is stamped later than the core\'s latest cycle').toBe(true);
  });
});
