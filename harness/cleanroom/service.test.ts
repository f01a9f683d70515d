// The clean-room service is test equipment: it must follow what document 1 states (or the suites' verdicts
// against it say nothing), and answer the details the document leaves open the way its header table says.
// The suites themselves run against it in `hil cleanroom check`; these are its own quick checks, and the
// check's comparison of profile differences.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ControlClient, REQUEST_SCHEMA } from '../clients/control.ts';
import { checkGrant } from '../oracle/reply.ts';
import { compareDifferences, differencesOf } from './check.ts';
import { CleanroomService } from './service.ts';

let dir: string;
let service: CleanroomService;
let client: ControlClient;
let binding: Record<string, unknown>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hil-cleanroom-test-'));
  service = new CleanroomService({ socketDir: dir, leaseCeilingMs: 5000, stopDrainMs: 2000 });
  await service.listen();
  client = new ControlClient(service.socketPath);
  binding = ((await client.describe()).reply.data as { binding: Record<string, unknown> }).binding;
});

afterAll(async () => {
  await client?.close();
  await service?.close();
  rmSync(dir, { recursive: true, force: true });
});

const acquire = (fields: Record<string, unknown> = {}) => client.op('acquire', { controller: 'unit', binding, ...fields });
const fenced = (op: string, s: { session: string; generation: bigint }, fields: Record<string, unknown> = {}) => client.op(op, { session: s.session, generation: s.generation, ...fields });

test('Describe lists the 33 capabilities: the grant operations, describe, status, subscribe_events and resource served, the rest unimplemented with transport none', async () => {
  const caps = ((await client.describe()).reply.data as { capabilities: Array<{ name: string; state: string; transport: string }> }).capabilities;
  expect(caps).toHaveLength(33);
  expect(caps.filter((c) => c.state !== 'unimplemented').map((c) => c.name).sort()).toEqual(['acquire', 'describe', 'release', 'renew', 'resource', 'status', 'stop', 'subscribe_events']);
  for (const c of caps) if (c.state === 'unimplemented') expect(c.transport).toBe('none');
  const r = await client.op('home', { session: 'a'.repeat(64), generation: 1n, axis_mask: 1n });
  expect([r.status, r.label, r.reply.data]).toEqual([409, 'capability_unimplemented', { name: 'home', state: 'unimplemented', transport: 'none' }]);
  expect((await client.get('/v1/telemetry?after=0')).label).toBe('capability_unimplemented');
});

test('grant lifecycle: lease min(request, ceiling), renew keeps it, older generation for renew and stop, exact for release, stop fences a new generation', async () => {
  const g = checkGrant((await acquire({ requested_lease_ms: 10000n })).reply.data);
  expect(g.lease_ms).toBe(5000);
  expect((await acquire()).label).toBe('control_already_owned');
  const renewed = checkGrant((await fenced('renew', g)).reply.data);
  expect([renewed.lease_ms, renewed.deadline_host_ns > g.deadline_host_ns]).toEqual([5000, true]);
  expect((await fenced('renew', { ...g, generation: g.generation + 1n })).label).toBe('control_session_stale');
  const stopped = checkGrant((await fenced('stop', g)).reply.data);
  expect([stopped.stopping, stopped.generation]).toEqual([true, g.generation + 1n]);
  expect(checkGrant((await fenced('renew', g)).reply.data).stopping).toBe(true); // older generation, same session
  expect((await acquire()).label).toBe('control_session_stale'); // a Stop in flight
  expect((await fenced('release', g)).label).toBe('control_session_stale'); // release needs the exact generation
  const released = await fenced('release', stopped);
  expect(released.status).toBe(200);
  expect(checkGrant(released.reply.data).session).toBe('');
  expect((await fenced('renew', g)).label).toBe('control_session_stale');
  expect((await fenced('renew', { session: 'ab'.repeat(32), generation: 1n })).label).toBe('fence');
});

test('a stop drains, then revokes the grant: grant_revoked, and the session is stale', async () => {
  const from = ((await client.get('/v1/events', 'subscribe_events')).reply.data as { latest_sequence: bigint }).latest_sequence;
  // A lease longer than the drain: a stopping grant left unrenewed would expire first (part 2 Grant.stopping).
  const g = checkGrant((await acquire({ requested_lease_ms: 5000n })).reply.data);
  const stopped = checkGrant((await fenced('stop', g)).reply.data);
  let revoked = false;
  for (let i = 0; i < 100 && !revoked; i++) {
    await new Promise((r) => setTimeout(r, 50));
    const events = ((await client.get(`/v1/events?after=${from}`, 'subscribe_events')).reply.data as { records: Array<{ type: string; grant?: { generation: bigint } }> }).records;
    revoked = events.some((e) => e.type === 'grant_revoked' && e.grant?.generation === stopped.generation);
  }
  expect(revoked).toBe(true);
  expect((await fenced('renew', stopped)).label).toBe('control_session_stale');
  const again = checkGrant((await acquire()).reply.data);
  expect((await fenced('release', again)).status).toBe(200);
});

test('a lease left to run out expires: expired for renew, release and stop, and the cell is free', async () => {
  const g = checkGrant((await acquire({ requested_lease_ms: 30n })).reply.data);
  await new Promise((r) => setTimeout(r, 80));
  for (const op of ['renew', 'release', 'stop']) expect((await fenced(op, g)).label, op).toBe('expired');
  const again = checkGrant((await acquire()).reply.data);
  expect((await fenced('release', again)).status).toBe(200);
});

test('request_id: the session replays the same payload, refuses a changed one, forgets after 256 others and at release', async () => {
  const g = checkGrant((await acquire()).reply.data);
  const first = await fenced('renew', g, { request_id: 'r-1', source_sequence: 1n });
  expect(first.status).toBe(200);
  expect((await fenced('renew', g, { source_sequence: 1n, request_id: 'r-1' })).reply).toEqual(first.reply); // key order is not payload
  expect((await fenced('renew', g, { request_id: 'r-1', source_sequence: 2n })).label).toBe('request_id_conflict');
  for (let i = 0; i < 256; i++) expect((await fenced('renew', g, { request_id: `w-${i}` })).status).toBe(200);
  expect((await fenced('renew', g, { request_id: 'r-1', source_sequence: 2n })).status).toBe(200); // forgotten
  expect((await fenced('release', g, { request_id: 'rel' })).status).toBe(200);
  // Release dropped the cache: the retry meets the fence.
  expect((await fenced('release', g, { request_id: 'rel' })).label).toBe('control_session_stale');
});

test('the choices of the header table: echoed operation, invalid_control_generation, after=01, null as absent', async () => {
  const unknown = await client.control({ schema: REQUEST_SCHEMA, operation: 'frobnicate' });
  expect([unknown.label, unknown.reply.operation]).toEqual(['unknown_operation', 'frobnicate']);
  const zero = await client.op('renew', { session: 'a'.repeat(64), generation: 0n });
  expect(zero.label).toBe('invalid_control_generation');
  const lease = await client.op('acquire', { controller: 'x', binding, requested_lease_ms: '500' });
  expect(lease.label).toBe('invalid_requested_lease');
  expect((await client.get('/v1/events?after=01', 'subscribe_events')).status).toBe(200);
  expect((await client.get('/v1/events?after=', 'subscribe_events')).label).toBe('invalid_event_cursor');
  expect((await client.get('/v1/events?after=1&after=1', 'subscribe_events')).label).toBe('invalid_event_cursor');
  // request_id must be non-null (part 2); any other null is the field absent.
  expect((await client.op('renew', { session: 'a'.repeat(64), generation: 1n, request_id: null })).label).toBe('invalid_request_id');
  expect((await client.op('renew', { session: 'a'.repeat(64), generation: 1n, label: null })).label).toBe('fence');
  // Bytes that are not UTF-8 after a complete object are trailing data; inside it, the envelope is invalid.
  const body = Buffer.concat([Buffer.from(JSON.stringify({ schema: REQUEST_SCHEMA, operation: 'renew' })), Buffer.from([0xff])]);
  expect((await client.control(new Uint8Array(body))).label).toBe('trailing_request_data');
  expect((await client.control(new Uint8Array(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])))).label).toBe('invalid_request_envelope');
  expect((await client.control(`{"schema":"${REQUEST_SCHEMA}","__proto__":1}`)).label).toBe('invalid_request_envelope');
});

test('the check compares profile differences by test and decision, whatever the messages', () => {
  const run = {
    tests: [
      { file: 'suites/a.test.ts', fullName: 'x > one', covers: ['profile:p1', 'rule:r'], informative: 'differs from profile:p1: ...', profile_differences: undefined },
      { file: 'suites/a.test.ts', fullName: 'x > two', covers: ['rule:r'], profile_differences: [{ profile: 'profile:p2', message: 'm1' }, { profile: 'profile:p2', message: 'm2' }] },
      { file: 'suites/a.test.ts', fullName: 'x > three', covers: ['profile:p3'] },
    ],
  } as never;
  const found = differencesOf(run);
  expect(found).toEqual({ 'suites/a.test.ts > x > one': ['profile:p1'], 'suites/a.test.ts > x > two': ['profile:p2'] });
  expect(compareDifferences(found, found)).toEqual([]);
  const hidden = compareDifferences(found, { 'suites/a.test.ts > x > one': ['profile:p1'] });
  expect(hidden).toHaveLength(1);
  expect(hidden[0]).toMatch(/^no longer a profile difference/);
  expect(compareDifferences({}, found).map((p) => p.split(':')[0])).toEqual(['a new profile difference', 'a new profile difference']);
});
