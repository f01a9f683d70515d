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
