// Capabilities (document 1 part 1 and part 4): Describe reports all 33; each one Describe reports served
// has its documented state and transport and answers there, each one it reports unimplemented answers
// capability_unimplemented (part 1: Describe returns the capability list at run time); the reserved
// operations answer capability_unimplemented with CapabilityInfo in data.

import { catalogue } from '../../harness/catalogue/index.ts';
import type { CapabilityEntry } from '../../harness/catalogue/types.ts';
import { REQUEST_SCHEMA } from '../../harness/clients/control.ts';
import { lstat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { request } from 'undici';
import { pending } from '../../harness/catalogue/pending.ts';
import type { Cell } from '../../harness/clients/cell.ts';
import type { ControlClient } from '../../harness/clients/control.ts';
import type { Target } from '../../harness/targets/types.ts';
import { covers, describe, expect, inProfile, test, type Description } from '../../harness/fixture.ts';

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

});

// Describe reports what is served, not a goal (document 1 part 1: "implemented: the interface exists";
// "unimplemented: returns capability_unimplemented"). Each capability Describe marks implemented, interim
// or test_only must answer on its documented transport with something other than "not there"
// (unknown_endpoint, unknown_operation, capability_unimplemented, or native_rejected without a native
// receipt). A capability id is claimed as covered only when the target serves it as documented; ids still
// pending are checked for an honest Describe (unimplemented, transport none, capability_unimplemented).
describe('Describe matches what is served', () => {
  for (const cap of CAPS) {
    // resource is served by the remote listener only (part 5); suites/remote claims it there. Here Describe
    // must be honest for the transport this target has.
    if (cap.name === 'resource') {
      test('resource: Describe reports it implemented only where a remote listener serves it', covers('rule:observation.resource_remote_only', 'profile:remote.resource_digest'), async ({ description, client }) => {
        const info = description.capabilities.find((c) => c.name === cap.name);
        expect([
          { name: cap.name, state: cap.state, transport: cap.transport }, // a remote listener serves it
          { name: cap.name, state: 'unimplemented', transport: 'none' },
        ]).toContainEqual(info);
        // Never on this (local) transport: GET /v1/resources needs the remote listener's mutual TLS. Which
        // refusal the local socket gives is ours to decide (unknown_endpoint); capability_unimplemented is
        // what part 1 gives a target that declares it unimplemented.
        const r = await client.raw('GET', `/v1/resources/${'0'.repeat(64)}`);
        const text = new TextDecoder().decode(r.body);
        expect(r.status).toBe(409);
        expect(text).toMatch(info?.state === 'unimplemented' ? /"error":"(unknown_endpoint|capability_unimplemented)/ : /"error":"unknown_endpoint/);
        await inProfile('profile:remote.resource_digest', () => expect(text).toMatch(/"error":"unknown_endpoint/));
      });
      continue;
    }
    const claimed = pending[cap.id] === undefined;
    const name = claimed
      ? `${cap.name}: Describe reports ${cap.state} on ${cap.transport}, and it answers there`
      : `${cap.name}: Describe reports only what this target serves (documented ${cap.state}; pending: ${pending[cap.id]})`;
    test(name, claimed ? covers(cap.id, 'rule:service.describe_lists_capabilities', 'rule:service.unimplemented_answers', 'profile:describe.served_states') : covers('rule:service.unimplemented_answers'), async ({ target, client, cell, description }) => {
      const info = description.capabilities.find((c) => c.name === cap.name);
      expect(info, `${cap.name} missing from Describe`).toBeDefined();
      if (claimed && info!.state === 'unimplemented' && cap.state !== 'unimplemented') {
        // The target declares it unimplemented: then it must say so honestly and answer
        // capability_unimplemented on the documented ingress (part 1). That this repository's stack serves
        // every capability is a decision of ours (docs/profile.md "Describe and Status fields").
        expect(info!.transport).toBe('none');
        for (const outcome of await probe(cap, { target, client, cell, description })) {
          if (cap.name === 'update_jog') continue; // a datagram socket has no refusal to give
          expect({ via: outcome.via, status: outcome.status, label: outcome.label }).toEqual({ via: outcome.via, status: 409, label: 'capability_unimplemented' });
        }
        await inProfile('profile:describe.served_states', () => expect(info).toEqual({ name: cap.name, state: cap.state, transport: cap.transport }));
        return;
      }
      if (claimed) {
        expect(info).toEqual({ name: cap.name, state: cap.state, transport: cap.transport });
      } else if (info!.state === 'unimplemented') {
        expect(info!.transport).toBe('none');
        if (cap.transport === 'POST /v1/control') {
          const r = await client.op(cap.name);
          expect(r.status).toBe(409);
          expect(r.label).toBe('capability_unimplemented');
          expect(r.reply.data).toEqual({ name: cap.name, state: 'unimplemented', transport: 'none' });
        }
        return;
      }
      // Served: probe every documented ingress of the capability.
      if (info!.state === 'unimplemented') return void expect(cap.state).toBe('unimplemented');
      for (const outcome of await probe(cap, { target, client, cell, description })) {
        expect(NOT_SERVED, `${cap.name} via ${outcome.via}: ${outcome.status} ${outcome.label}`).not.toContain(outcome.label);
        if (outcome.label === 'native_rejected') expect(outcome.nativeResult, `${cap.name}: native_rejected needs native_result`).toBeDefined();
        expect([200, 404, 409, 413, 101]).toContain(outcome.status);
      }
    });
  }
});

const NOT_SERVED = ['unknown_endpoint', 'unknown_operation', 'capability_unimplemented', 'internal_defect'];

interface Outcome {
  via: string;
  status: number;
  label?: string;
  nativeResult?: unknown;
}

async function probe(cap: CapabilityEntry, ctx: { target: Target; client: ControlClient; cell: Cell; description: Description }): Promise<Outcome[]> {
  const { client, cell, description } = ctx;
  const axes = description.axes.length;
  const out: Outcome[] = [];
  const get = async (path: string) => {
    const abort = new AbortController();
    const res = await request(`http://localhost${path}`, { method: 'GET', dispatcher: client.agent, signal: abort.signal });
    const type = String(res.headers['content-type'] ?? '');
    let label: string | undefined;
    if (type.startsWith('application/json')) {
      const body = JSON.parse(await res.body.text()) as { error?: string };
      label = body.error?.split(/[:\s]/)[0];
    } else abort.abort(); // a stream: the headers are the answer
    res.body.on('error', () => undefined);
    out.push({ via: `GET ${path}`, status: res.statusCode, label });
  };
  if (cap.transport === 'POST /v1/control') {
    if (cap.name === 'acquire') {
      const r = await cell.acquire();
      out.push({ via: 'acquire', status: r.status, label: r.label });
      return out;
    }
    const s = await cell.hold();
    const homeAxis = description.axes.findIndex((a) => a.native_home === true);
    const now = BigInt(process.hrtime.bigint());
    const fields: Record<string, Record<string, unknown>> = {
      mark_telemetry: { label: 'probe' },
      enable: { axis_mask: 0 },
      home: { axis_mask: 1 << Math.max(0, homeAxis) },
      restore_anchor: { axis_mask: 1 },
      jog: { axis_mask: 1, velocity: Array(axes).fill(0), timeout_ms: 100 },
      begin_jog: { axis_mask: 1, source_origin_host_ns: now, deadline_host_ns: now + 100_000_000n, clock_incarnation: 'x' },
      end_jog: { jog_generation: 1n },
      prepare_trajectory: { axis_mask: 1, points: [{ time_ns: 0n, position: Array(axes).fill(0) }, { time_ns: 1_000_000n, position: Array(axes).fill(0) }] },
      start_trajectory: { handle: 1n },
      discard_trajectory: { handle: 1n },
      start_program: { identity: { plan_id: 'p', program_id: 'p', program_digest: 'd', trajectory_digest: 't', source_digest: 's', normalised_digest: 'n', manifest_revision: 1n, plan_revision: 1n } },
    };
    const r = await cell.fenced(cap.name, s, fields[cap.name] ?? {});
    out.push({ via: cap.name, status: r.status, label: r.label, nativeResult: r.reply.native_result });
    return out;
  }
  for (const m of cap.transport.matchAll(/GET (\/v1\/[a-z/]+)(<sha256>)?/g)) {
    await get(m[2] ? `${m[1]}${'0'.repeat(64)}` : `${m[1]}${m[0].includes('after=') ? '?after=0' : ''}`);
  }
  if (cap.name === 'prepare_program') {
    const s = await cell.hold();
    const r = await client.raw('POST', '/v1/program', new Uint8Array(0), { 'content-type': 'application/octet-stream', 'x-control-session': s.session, 'x-control-generation': String(s.generation) });
    const text = new TextDecoder().decode(r.body);
    out.push({ via: 'POST /v1/program', status: r.status, label: /"error":"([a-z_0-9]+)/.exec(text)?.[1] });
  }
  if (cap.name === 'update_jog') {
    const st = await lstat(join(dirname(ctx.target.address), 'jog.sock')).catch(() => undefined);
    out.push({ via: 'jog.sock', status: st?.isSocket() ? 200 : 409, label: st?.isSocket() ? undefined : 'unknown_endpoint' });
  }
  expect(out.length, `no probe for ${cap.name} (${cap.transport})`).toBeGreaterThan(0);
  return out;
}

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
      const s = await cell.hold();
      const r = await client.control({ schema: REQUEST_SCHEMA, operation: cap.name, session: s.session, generation: s.generation, request_id: 'reserved-1' }, cap.name);
      expect(r.status).toBe(409);
      expect(r.label).toBe('capability_unimplemented');
      expect(r.reply.data).toEqual({ name: cap.name, state: 'unimplemented', transport: 'none' });
    });
  }
});
