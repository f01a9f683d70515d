// Principals and session ownership (document 1 part 5 items 1, 3 and 7): a remote principal owns the
// sessions it acquires; other principals and local clients get session_principal_mismatch; sessions
// acquired on the Unix socket belong to the local transport, so a remote client using one gets it too.

import { Cell } from '../../harness/clients/cell.ts';
import { checkGrant } from '../../harness/oracle/reply.ts';
import { pollTelemetry } from '../../harness/clients/telemetry.ts';
import { served, servedOf } from '../../harness/served.ts';
import type { RemoteStack } from '../../harness/targets/remote.ts';
import { covers, describe, expect, inProfile, profile, sharedRemote, test } from '../../harness/fixture.ts';
import { withBinding } from '../../harness/targets/binding.ts';

let stack: RemoteStack;
let alice: Cell;
let bob: Cell;
let local: Cell;
/** Describe's capability list: the rules are reached through the operations the target serves (harness/served.ts). */
let described: { capabilities: Array<{ name: string; state: string }> };

// Sessions and their owners are the service's: nothing here arms or moves, so a stack the harness starts
// runs on the stepped clock and its core costs no CPU while the file runs.
sharedRemote(async (open) => {
  stack = await open({ cycleFree: true });
  const a = await stack.client('alice');
  // Describe's binding, or the run's where Describe reports none (harness/targets/binding.ts).
  const d = withBinding((await a.describe()).reply.data as Record<string, unknown>) as ReturnType<typeof withBinding> & { capabilities: Array<{ name: string; state: string }> };
  described = d;
  alice = new Cell(a, d.binding);
  bob = new Cell(await stack.client('bob'), d.binding);
  local = new Cell(stack.local(), d.binding);
  return async () => {
    for (const c of [alice, bob, local]) await c.cleanup();
  };
});

const FENCED = ['renew', 'mark_telemetry', 'release', 'stop'] as const;
const fields = (op: string) => (op === 'mark_telemetry' ? { label: 'principal probe' } : {});
/**
 * The fenced operations of FENCED the target serves: one it declares unimplemented answers
 * capability_unimplemented to anyone (document 1 part 1), which says nothing about whose session it is.
 */
const fencedServed = () => servedOf(described, FENCED);

describe('session ownership', () => {
  test('a remote principal owns its session: another principal and a local client get session_principal_mismatch', covers('reason:session_principal_mismatch', 'rule:auth.principal_owns_session', 'profile:remote.ownership_first'), async () => {
    const s = await alice.hold();
    for (const op of fencedServed()) {
      for (const [who, cell] of [['bob', bob], ['local', local]] as const) {
        const r = await cell.fenced(op, s, fields(op));
        expect(r.status, `${who} ${op}`).toBe(409);
        expect(r.label, `${who} ${op}`).toBe('session_principal_mismatch');
      }
    }
    // The owner is unaffected by the refusals.
    const renewed = await alice.fenced('renew', s);
    expect(renewed.status).toBe(200);
    expect(checkGrant(renewed.reply.data).session).toBe(s.session);
    const released = await alice.fenced('release', s);
    expect(released.status).toBe(200);
    // Ownership outlives the grant: another principal is told whose session it is, not its state.
    const after = { bob: await bob.fenced('renew', s), alice: await alice.fenced('renew', s) };
    await inProfile('profile:remote.ownership_first', () => {
      expect(after.bob.label).toBe('session_principal_mismatch');
      expect(after.alice.label).not.toBe('session_principal_mismatch');
    });
  });

  test('a session acquired on the Unix socket belongs to the local transport: a remote client gets session_principal_mismatch', covers('reason:session_principal_mismatch', 'rule:auth.local_permissions', 'rule:auth.principal_owns_session'), async () => {
    const s = await local.hold();
    for (const op of fencedServed()) {
      const r = await alice.fenced(op, s, fields(op));
      expect(r.status, op).toBe(409);
      expect(r.label, op).toBe('session_principal_mismatch');
    }
    expect((await local.fenced('renew', s)).status).toBe(200);
    expect((await local.fenced('release', s)).status).toBe(200);
  });

  test('the same principal on a second connection (same certificate) owns its session', covers('rule:auth.principal_owns_session'), async () => {
    // A new client and connection, same principal, connected before the grant: its TLS handshake then
    // does not eat into the 500 ms lease (on a loaded host it once took longer, and the renew met an
    // expired grant: a false FAIL).
    const again = await stack.client('alice');
    expect((await again.status()).status).toBe(200);
    const s = await alice.hold();
    const r = await again.control({ schema: 'svc.rt-control.request.v1', operation: 'renew', session: s.session, generation: s.generation }, 'renew');
    expect(r.status).toBe(200);
    expect((await alice.fenced('release', s)).status).toBe(200);
  });

  test('acquire while another principal holds the grant is control_already_owned; its acquire request_id is not replayed to others', profile('profile:remote.acquire_replay_owner'), async () => {
    const s = await alice.hold({ request_id: 'acquire-alice-1' });
    const other = await bob.acquire();
    expect(other.label).toBe('control_already_owned');
    // A retry under alice's request_id from bob would replay alice's grant and its session token.
    const replay = await bob.acquire({ request_id: 'acquire-alice-1' });
    expect(replay.status).toBe(409);
    expect(replay.label).toBe('session_principal_mismatch');
    expect(JSON.stringify(replay.reply, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))).not.toContain(s.session);
    expect((await alice.fenced('release', s)).status).toBe(200);
  });

  test('remote observation endpoints need a certificate but no session; fenced calls need the fence', covers('rule:auth.fence_after_acquire', 'profile:envelope.missing_field'), async () => {
    const c = alice.client;
    expect((await c.status()).status).toBe(200);
    const ev = await c.get('/v1/events?after=0', 'subscribe_events');
    expect(ev.status).toBe(200);
    // telemetry_busy, which a correct cell may answer any poll, is asked again (harness/clients/telemetry.ts).
    // Only where Describe serves telemetry: one declared unimplemented answers capability_unimplemented.
    if (served(described, 'telemetry')) {
      const { raw: tel } = await pollTelemetry(c, 0n);
      expect(tel.status).toBe(200);
      expect(tel.headers['content-type']).toBe('application/octet-stream');
    }
    // A fenced call without its fence is refused before anything runs. Which label a required field that
    // is absent gets is docs/profile.md's ("Envelope check order"): document 1 part 4 gives none.
    const r = await c.op('renew');
    expect(r.status).toBe(409);
    await inProfile('profile:envelope.missing_field', () => expect(r.label).toBe('invalid_request_envelope'));
  });
});
