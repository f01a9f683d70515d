// Observation endpoints (document 1 part 2 "Observation types", part 4 "Observation endpoints",
// part 1 "Transports"): Describe and Status need no session and carry the documented fields.

import { lstat, readlink, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { covers, describe, expect, inProfile, profile, test } from '../../harness/fixture.ts';
import { readStatus } from '../../harness/clients/status.ts';
import { describedBinding } from '../../harness/targets/binding.ts';

const HEX64 = /^[0-9a-f]{64}$/;

describe('Describe', () => {
  test('answers without a session in the Response envelope', covers('rule:observation.no_fence', 'endpoint:GET /v1/describe'), async ({ client }) => {
    const r = await client.describe();
    expect(r.status).toBe(200);
    expect(r.reply.operation).toBe('describe');
  });

  test('carries backend, the three digests, cycle_ns and control_idle_timeout_ns of 90 s', covers('field:Description.backend', 'field:Description.machine_sha256', 'field:Description.configuration_sha256', 'rule:describe.deployment_digest', 'field:Description.cycle_ns', 'field:Description.control_idle_timeout_ns', 'limit:control_idle_timeout_ns', 'profile:describe.fields'), async ({ description }) => {
    expect(typeof description.backend).toBe('string');
    expect(description.backend).not.toBe('');
    // Its values are ours (docs/profile.md "Describe and Status fields").
    await inProfile('profile:describe.fields', () => expect(['simulation', 'live']).toContain(description.backend));
    expect(description.machine_sha256).toMatch(HEX64);
    expect(description.configuration_sha256).toMatch(HEX64);
    expect(description.deployment_sha256).toMatch(HEX64);
    expect(description.cycle_ns).toBeTypeOf('bigint');
    expect(description.cycle_ns as bigint).toBeGreaterThanOrEqual(250_000n);
    expect(description.control_idle_timeout_ns).toBe(90_000_000_000n);
  });

  test('the binding digests are the described ones', covers('field:Binding.configuration_sha256'), async ({ description, skip }) => {
    skip(!describedBinding(description), 'Describe reports no binding: the run named its pair id and revision (--pair-id, --pair-revision), and the acquire tests judge the binding');
    expect(description.binding.configuration_sha256).toBe(description.configuration_sha256);
    expect(description.binding.machine_sha256).toBe(description.machine_sha256);
  });

  test('every axis has id, position_unit, min and max position, native_home, counts_per_unit and sign', covers('field:Description.axes[]', 'field:Description.axes[].id', 'field:Description.axes[].position_unit', 'field:Description.axes[].min_position', 'field:Description.axes[].max_position', 'field:Description.axes[].native_home', 'field:Description.axes[].counts_per_unit', 'field:Description.axes[].sign', 'limit:telemetry_axis_count'), async ({ description }) => {
    expect(description.axes.length).toBeGreaterThanOrEqual(1);
    expect(description.axes.length).toBeLessThanOrEqual(16);
    const ids = new Set<string>();
    for (const a of description.axes) {
      expect(typeof a.id).toBe('string');
      ids.add(a.id);
      expect(['rad', 'm']).toContain(a.position_unit);
      expect(Number(a.min_position)).toBeLessThan(Number(a.max_position));
      expect(typeof a.native_home).toBe('boolean');
      expect(Number(a.counts_per_unit)).toBeGreaterThan(0);
      expect([1n, -1n]).toContain(a.sign as bigint);
    }
    expect(ids.size).toBe(description.axes.length);
  });
});

describe('Status', () => {
  test('answers without a session with core, commissioning, axes and execution', covers('endpoint:GET /v1/status', 'field:ProcessStatus.core.armed', 'field:ProcessStatus.core.home_valid_mask', 'field:ProcessStatus.core.safety_fault_mask', 'field:ProcessStatus.core.home_epoch', 'field:ProcessStatus.execution', 'rule:status.commissioning_phase', 'profile:status.fields'), async ({ client, description }) => {
    const s = await readStatus(client);
    expect(s.core).not.toBeNull();
    for (const f of ['armed', 'home_valid_mask', 'safety_fault_mask', 'home_epoch'] as const) expect(s.core![f]).toBeTypeOf('bigint');
    // "a commissioning phase" (part 2): the field's name and place are ours.
    await inProfile('profile:status.fields', () => expect(typeof s.commissioning?.phase).toBe('string'));
    expect(s.axes.map((a) => a.id)).toEqual(description.axes.map((a) => a.id));
    for (const a of s.axes) expect(typeof a.ready).toBe('boolean');
    const ex = (s as unknown as { execution: Record<string, unknown> }).execution;
    for (const f of ['handles', 'generation', 'state', 'segment', 'native_sequence']) expect(ex).toHaveProperty(f);
  });

  test('never carries a session token', covers('rule:events.no_session_token'), async ({ client, cell }) => {
    const s = await cell.hold();
    const r = await client.raw('GET', '/v1/status');
    expect(Buffer.from(r.body).toString('utf8')).not.toContain(s.session);
  });
});

describe('profile fields', () => {
  test('Describe carries the profile fields', profile('profile:describe.fields', 'limit:contract_version'), ({ description }) => {
    for (const f of ['contract_version', 'simulated', 'binding', 'adapter_incarnation', 'daemon_incarnation', 'link_profile', 'max_grant_lease_ms', 'max_jog_input_age_ns', 'capabilities', 'axes']) {
      expect(description).toHaveProperty(f);
    }
    expect(description.contract_version).toBe(2n);
    for (const a of description.axes) expect(a).toHaveProperty('max_velocity');
  });

  test('Status carries the profile fields and never the grant session', profile('profile:status.fields'), async ({ client }) => {
    const s = (await client.status()).reply.data as Record<string, Record<string, unknown>>;
    for (const f of ['now_host_ns', 'adapter_incarnation', 'daemon_incarnation', 'core', 'commissioning', 'grant', 'axes', 'execution']) expect(s).toHaveProperty(f);
    for (const f of ['armed', 'home_valid_mask', 'safety_fault_mask', 'home_epoch', 'axis_enable_mask', 'execution_fault_reasons', 'io_armed', 'io_output_word']) expect(s.core).toHaveProperty(f);
    for (const f of ['active', 'stopping', 'generation', 'controller', 'lease_ms', 'deadline_host_ns']) expect(s.grant).toHaveProperty(f);
    expect(s.grant).not.toHaveProperty('session');
  });

  test('an EventBatch names its array events', profile('profile:events.array_field'), async ({ client }) => {
    const r = await client.get('/v1/events?after=0', 'subscribe_events');
    expect(r.status).toBe(200);
    expect(Array.isArray((r.reply.data as { events: unknown }).events)).toBe(true);
  });
});

describe('grant observation', () => {
  const U64 = ['Ticket', 'ConnectionId', 'NativeGeneration', 'AppGrantGeneration', 'DeadlineHostNs', 'NowHostNs', 'ConfigurationEpoch', 'HomeEpoch', 'StopAckId', 'Reserved1', 'Reserved2', 'Reserved3'];
  const U32 = ['GrantReason', 'GrantActive', 'AxisMask', 'Reserved'];
  const ids = [...U64, ...U32, 'CapabilityId'].map((f) => `field:GrantObservation.${f}`);

  test('Status carries the core grant receipt with the documented case-sensitive fields, following the grant', profile('profile:status.grant_observation', ...ids), async ({ client, cell, description }) => {
    const obs = async () => ((await client.status()).reply.data as { core: { grant_observation: Record<string, unknown> } }).core.grant_observation;
    // The core's receipt follows the service's grant from its next cycle: after the file's previous test
    // released its grant, a cell of a long cycle (10 ms) may not have published the release yet. Polled
    // until it has (a safety net of 10 s; no timing is asserted).
    let idle = await obs();
    for (const until = Date.now() + 10_000; idle?.GrantActive !== 0n && Date.now() < until; ) {
      await new Promise((r) => setTimeout(r, 10));
      idle = await obs();
    }
    expect(idle, 'Status core.grant_observation').toBeTypeOf('object');
    expect(Object.keys(idle).sort()).toEqual([...U64, ...U32, 'CapabilityId'].sort());
    for (const f of U64) expect(idle[f], f).toBeTypeOf('bigint');
    for (const f of U32) expect(Number(idle[f]), f).toBeLessThanOrEqual(0xffffffff);
    const cap = idle.CapabilityId as bigint[];
    expect(cap).toHaveLength(16);
    for (const b of cap) expect(Number(b)).toBeLessThanOrEqual(255);
    expect(idle.GrantActive).toBe(0n);

    // Held (renewed), and Status polled until the core's receipt has caught up with the service's grant: the
    // core publishes it from its next cycle, which a loaded machine may run well after 30 ms. The bound is a
    // safety net, no timing is asserted.
    const s = await cell.hold();
    type St = { core: { grant_observation: Record<string, bigint> }; grant: { deadline_host_ns: bigint } };
    const until = Date.now() + 10_000;
    let st = (await client.status()).reply.data as St;
    while (!(st.core.grant_observation.GrantActive === 1n && st.core.grant_observation.DeadlineHostNs === st.grant.deadline_host_ns) && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 10));
      st = (await client.status()).reply.data as St;
    }
    const held = st.core.grant_observation;
    expect(held.GrantActive).toBe(1n);
    expect(held.AppGrantGeneration).toBe(s.generation);
    expect(held.DeadlineHostNs).toBe(st.grant.deadline_host_ns);
    expect(held.AxisMask).toBe(BigInt((1 << description.axes.length) - 1));
    expect(held.Ticket).toBeGreaterThan(idle.Ticket as bigint);
    await cell.cleanup();
    let after = await obs();
    for (const stop = Date.now() + 10_000; after.GrantActive !== 0n && Date.now() < stop; after = await obs()) await new Promise((r) => setTimeout(r, 10));
    expect(after.GrantActive).toBe(0n);
  });
});

// Targets that run the reference stack (the replay target plays a recording on one): its socket layout is ours.
const REFERENCE_STACK = new Set(['sim', 'replay']);

describe('sockets', () => {
  test('the control socket is reachable through public/control.sock beside it', covers('rule:transport.control_socket'), async ({ target, skip }) => {
    skip(!REFERENCE_STACK.has(target.name), 'the layout of an external socket directory is not ours to inspect');
    const link = join(dirname(target.address), 'public', 'control.sock');
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect(resolve(dirname(link), await readlink(link))).toBe(target.address);
  });

  test('the control socket has mode 0660, jog.sock too, the socket directory and public/ 0750 (the socket group is the authentication)', profile('profile:service.socket_mode'), async ({ target, skip }) => {
    skip(!REFERENCE_STACK.has(target.name), 'an external service chooses its own socket permissions');
    expect((await stat(target.address)).mode & 0o777).toBe(0o660);
    // The rest of the layout is the service's too, not the umask's (docs/profile.md "Sockets").
    const dir = dirname(target.address);
    expect((await stat(dir)).mode & 0o1777).toBe(0o750);
    expect((await stat(join(dir, 'public'))).mode & 0o1777).toBe(0o750);
    const jog = await stat(join(dir, 'jog.sock')).catch(() => undefined);
    if (jog) expect(jog.mode & 0o777).toBe(0o660);
  });
});
