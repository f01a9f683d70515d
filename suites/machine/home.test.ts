// Home and its lifetime (document 1 part 4 home): losing the HTTP reply does not cancel Home; lease
// expiry does.

import { request } from 'undici';
import { stringifyExact } from '../../harness/oracle/json.ts';
import { REQUEST_SCHEMA } from '../../harness/clients/control.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { covers, describe, expect, needsMotion, test } from '../../harness/fixture.ts';

describe('Home lifetime', () => {
  test('a Home whose HTTP reply is lost (client gone) still completes', covers('rule:op.home.reply_loss'), async ({ target, client, cell, skip }) => {
    needsMotion({ skip }, target);
    const before = await readStatus(client);
    const s = await cell.hold();
    const abort = new AbortController();
    const pending = request('http://localhost/v1/control', {
      method: 'POST',
      dispatcher: client.agent,
      signal: abort.signal,
      headers: { 'content-type': 'application/json' },
      body: stringifyExact({ schema: REQUEST_SCHEMA, operation: 'home', session: s.session, generation: s.generation, axis_mask: 1 << 4 }),
    }).catch((e: unknown) => e);
    await waitStatus(client, (x) => x.commissioning.phase === 'homing', 2_000);
    abort.abort();
    await pending;
    const st = await waitStatus(client, (x) => x.core!.home_epoch > before.core!.home_epoch, 5_000);
    expect(st.core!.home_epoch).toBeGreaterThan(before.core!.home_epoch);
    expect(Number(st.core!.home_valid_mask) & (1 << 4)).toBe(1 << 4);
  });

  test('lease expiry during Home cancels it: no new Home evidence, the axis left disabled', covers('rule:op.home.reply_loss'), async ({ target, client, cell, skip }) => {
    needsMotion({ skip }, target);
    const before = await readStatus(client);
    skip((Number(before.core!.home_valid_mask) & (1 << 5)) !== 0, 'axis J6 already homed in this incarnation');
    const s = await cell.grant({ requested_lease_ms: 60n });
    const r = await cell.fenced('home', s, { axis_mask: 1 << 5 });
    expect(r.status).toBe(409);
    const st = await waitStatus(client, (x) => x.commissioning.phase === 'idle' && x.core!.axis_enable_mask === 0n);
    expect(Number(st.core!.home_valid_mask) & (1 << 5)).toBe(0);
    expect(st.core!.home_epoch).toBe(before.core!.home_epoch);
    expect(st.axes[5]!.enabled).toBe(false);
  });
});
