// A service restart (document 1 part 4 envelope rules, part 6 events): a new adapter incarnation,
// sequences restarting, sessions of the previous incarnation unknown, the retry cache gone.

import { pollEvents } from '../../harness/clients/events.ts';
import { covers, cycleFree, describe, expect, test } from '../../harness/fixture.ts';

// No test here needs the file's cell to cycle on its own (harness/fixture.ts cycleFree).
cycleFree();

describe('service restart', () => {
  test(
    'a new adapter incarnation: event sequences restart with adapter_incarnation_changed, old sessions answer fence',
    covers('rule:events.restart', 'event:adapter_incarnation_changed', 'reason:fence', 'rule:events.sequence_increment'),
    async ({ target, client, cell, skip }) => {
      skip(!target.abilities.serviceRestart, `target ${target.name} cannot restart its service`);
      const before = (await client.describe()).reply.data as { adapter_incarnation: string };
      const s = await cell.grant();
      expect((await cell.fenced('mark_telemetry', s, { label: 'before', request_id: 'restart-1' })).status).toBe(200);

      await target.restartService();

      const after = (await client.describe()).reply.data as { adapter_incarnation: string };
      expect(after.adapter_incarnation).not.toBe(before.adapter_incarnation);
      const batch = await pollEvents(client, 0n);
      expect(batch.events[0]!.sequence).toBe(1n);
      batch.events.forEach((e, i) => expect(e.sequence).toBe(BigInt(i + 1)));
      const inc = batch.events.find((e) => e.type === 'adapter_incarnation_changed');
      expect((inc?.incarnation as { current: string }).current).toBe(after.adapter_incarnation);
      for (const e of batch.events) expect(e.adapter_incarnation).toBe(after.adapter_incarnation);

      const stale = await cell.fenced('renew', s);
      expect(stale.status).toBe(409);
      expect(stale.label).toBe('fence');

      // and the cell can be acquired again under the new incarnation
      const s2 = await cell.grant();
      const r = await cell.fenced('mark_telemetry', s2, { label: 'after, different payload', request_id: 'restart-1' });
      expect(r.status).toBe(200);
    },
  );
});
