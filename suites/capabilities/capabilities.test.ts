// Capabilities (document 1 part 1 and part 4): Describe reports all 33 with their documented state and
// transport; the reserved operations answer capability_unimplemented with CapabilityInfo in data.

import { catalogue } from '../../harness/catalogue/index.ts';
import type { CapabilityEntry } from '../../harness/catalogue/types.ts';
import { REQUEST_SCHEMA } from '../../harness/clients/control.ts';
import { covers, describe, expect, test } from '../../harness/fixture.ts';

const CAPS = catalogue.filter((e): e is CapabilityEntry => e.family === 'capability');

describe('Describe capability list', () => {
  test('lists exactly the 33 documented capabilities, once each', covers('rule:service.describe_lists_capabilities', 'rule:describe.capability_list', 'field:CapabilityInfo.name', 'endpoint:GET /v1/describe'), ({ description }) => {
    const names = description.capabilities.map((c) => c.name);
    expect(new Set(names).size).toBe(names.length);
    expect([...names].sort()).toEqual(CAPS.map((c) => c.name).sort());
    expect(names).toHaveLength(33);
  });

  test('every CapabilityInfo has exactly name, state and transport as strings', covers('field:CapabilityInfo.state', 'field:CapabilityInfo.transport'), ({ description }) => {
    for (const c of description.capabilities) {
      expect(Object.keys(c).sort()).toEqual(['name', 'state', 'transport']);
      for (const v of Object.values(c)) expect(typeof v).toBe('string');
      expect(['implemented', 'interim', 'test_only', 'unimplemented']).toContain(c.state);
    }
  });

  for (const cap of CAPS) {
    test(`${cap.name}: state ${cap.state}, transport as documented`, covers(cap.id), ({ description }) => {
      const info = description.capabilities.find((c) => c.name === cap.name);
      expect(info, `${cap.name} missing from Describe`).toBeDefined();
      expect(info!.state).toBe(cap.state);
      expect(info!.transport).toBe(cap.transport);
    });
  }
});

describe('reserved operations', () => {
  const reserved = CAPS.filter((c) => c.state === 'unimplemented');

  for (const cap of reserved) {
    test(`${cap.name} answers 409 capability_unimplemented with CapabilityInfo in data`, covers('reason:capability_unimplemented', 'rule:op.abort_readiness.capability_info', 'rule:service.unimplemented_answers'), async ({ client }) => {
      const r = await client.op(cap.name);
      expect(r.status).toBe(409);
      expect(r.label).toBe('capability_unimplemented');
      expect(r.reply.data).toEqual({ name: cap.name, state: 'unimplemented', transport: 'none' });
    });

    test(`${cap.name} is refused the same way whatever else the request carries`, covers('reason:capability_unimplemented'), async ({ client, cell }) => {
      const s = await cell.grant();
      const r = await client.control({ schema: REQUEST_SCHEMA, operation: cap.name, session: s.session, generation: s.generation, request_id: 'reserved-1' }, cap.name);
      expect(r.status).toBe(409);
      expect(r.label).toBe('capability_unimplemented');
      expect(r.reply.data).toEqual({ name: cap.name, state: 'unimplemented', transport: 'none' });
    });
  }
});
