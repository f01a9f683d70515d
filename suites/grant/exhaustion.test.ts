// application_generation_exhausted (document 1 part 4 acquire, part 7): the generation is a uint64 that
// only increases, so an acquisition that would pass 2^64-1 is refused. Reaching the top needs a cell whose
// counter starts near it: the reference stack has a start-up flag for that, other targets skip.

import { afterAll, beforeAll } from 'vitest';
import { ControlClient, REQUEST_SCHEMA } from '../../harness/clients/control.ts';
import { checkGrant } from '../../harness/oracle/reply.ts';
import { startStack, type StackProcess } from '../../harness/targets/sim.ts';
import { covers, describe, expect, test } from '../../harness/fixture.ts';

const MAX = (1n << 64n) - 1n;
const onSim = (process.env.HIL_TARGET ?? 'sim') === 'sim';

describe('generation exhaustion', () => {
  let stack: StackProcess;
  let client: ControlClient;
  let binding: Record<string, unknown>;

  beforeAll(async () => {
    if (!onSim) return;
    stack = await startStack(['--initial-generation', String(MAX - 1n)]);
    client = new ControlClient(stack.ready.control);
    binding = ((await client.describe()).reply.data as { binding: Record<string, unknown> }).binding;
  });
  afterAll(async () => {
    await client?.close();
    await stack?.stop();
  });

  test(
    'the last generation 2^64-1 is granted exactly; the next acquire is refused with application_generation_exhausted',
    covers('reason:application_generation_exhausted', 'field:Grant.generation', 'rule:transport.exact_uint64'),
    async ({ skip }) => {
      skip(!onSim, 'needs the sim target: only it can start its generation counter near 2^64');
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
