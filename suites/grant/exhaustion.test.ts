// application_generation_exhausted (document 1 part 4 acquire, part 7): the generation is a uint64 that
// only increases, so an acquisition that would pass 2^64-1 is refused. Reaching the top needs a cell whose
// counter starts near it: a variant of the target; a target that cannot start one skips with its reason.

import { REQUEST_SCHEMA } from '../../harness/clients/control.ts';
import { checkGrant } from '../../harness/oracle/reply.ts';
import { covers, describe, expect, test } from '../../harness/fixture.ts';

const MAX = (1n << 64n) - 1n;

describe('generation exhaustion', () => {
  test(
    'the last generation 2^64-1 is granted exactly; the next acquire is refused with application_generation_exhausted',
    covers('reason:application_generation_exhausted', 'field:Grant.generation', 'rule:transport.exact_uint64'),
    async ({ variant }) => {
      const client = (await variant({ initialGeneration: MAX - 1n })).client();
      const binding = ((await client.describe()).reply.data as { binding: Record<string, unknown> }).binding;
      const acquire = () => client.control({ schema: REQUEST_SCHEMA, operation: 'acquire', controller: 'exhaust', binding }, 'acquire');
      const r = await acquire();
      expect(r.status).toBe(200);
      const g = checkGrant(r.reply.data);
      expect(g.generation).toBe(MAX);
      expect((await client.control({ schema: REQUEST_SCHEMA, operation: 'release', session: g.session, generation: g.generation }, 'release')).status).toBe(200);
      const refused = await acquire();
      expect(refused.status).toBe(409);
      expect(refused.label).toBe('application_generation_exhausted');
    },
  );
});

// Stop must always be able to inhibit (document 1 part 4 stop: only the fence reasons and expired). At the
// last generation the counter cannot advance: the stopping grant keeps 2^64-1 (docs/profile.md "Grant
// generation and stop"), the stop drains and authority is revoked.
describe('stop at the last generation', () => {
  test(
    'stop of the grant holding generation 2^64-1 answers 200 stopping, inhibits (enable refused) and revokes',
    covers('transition:grant:owned->stopping:stop', 'profile:grant.stop_generation'),
    async ({ variant }) => {
      const client = (await variant({ initialGeneration: MAX - 1n })).client();
      const binding = ((await client.describe()).reply.data as { binding: Record<string, unknown> }).binding;
      const r = await client.control({ schema: REQUEST_SCHEMA, operation: 'acquire', controller: 'last', binding, requested_lease_ms: 10_000n }, 'acquire');
      const g = checkGrant(r.reply.data);
      expect(g.generation).toBe(MAX);
      const fence = { schema: REQUEST_SCHEMA, session: g.session, generation: MAX };
      const stop = await client.control({ ...fence, operation: 'stop' }, 'stop');
      expect(stop.status, stop.reply.error).toBe(200);
      const sg = checkGrant(stop.reply.data);
      expect(sg.stopping).toBe(true);
      expect(sg.generation).toBe(MAX);
      const enable = await client.control({ ...fence, operation: 'enable', axis_mask: 1 }, 'enable');
      expect(enable.status).toBe(409);
      expect(enable.label).toBe('control_session_stale');
      // Revoked after the drain: the status shows no grant.
      let active = true;
      for (let i = 0; i < 200 && active; i++) {
        const st = (await client.status()).reply.data as { grant: { active: boolean } };
        active = st.grant.active;
        if (active) await new Promise((res) => setTimeout(res, 10));
      }
      expect(active).toBe(false);
      expect((await client.control({ ...fence, operation: 'renew' }, 'renew')).label).toBe('control_session_stale');
    },
  );
});
