// "There is no software emergency stop. The hardware E-stop is the only emergency stop, and `stop` is not
// one" (document 1 part 1, safety statements). What a client can see of that statement:
// - nothing the service offers is an emergency stop: no capability in Describe, no operation name that
//   /v1/control dispatches (unknown_operation, part 4 "Envelope rules"), no path (unknown_endpoint, part 4
//   "Any other method and path"); trying them changes nothing on the cell;
// - stop is a controller's fenced command (part 4 stop: "Fence"), not a button anyone can press: an
//   observer without the grant's fence cannot stop the cell; and what it does is the documented stop
//   (revoke, inhibit), not a latched emergency state: no safety fault bit, the cell can be acquired,
//   enabled and armed again with no reset_fault.

import { catalogue, reason } from '../../harness/catalogue/index.ts';
import { REQUEST_SCHEMA } from '../../harness/clients/control.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import type { Cell, Session } from '../../harness/clients/cell.ts';
import type { ControlClient } from '../../harness/clients/control.ts';
import { checkGrant } from '../../harness/oracle/reply.ts';
import { covers, describe, expect, inProfile, needsMotion, test } from '../../harness/fixture.ts';

/** Names a software emergency stop would plausibly be offered under. */
const ESTOP_NAMES = ['estop', 'e_stop', 'e-stop', 'emergency_stop', 'emergency-stop', 'emergencyStop', 'EmergencyStop', 'emergency', 'software_estop', 'soft_estop', 'safety_stop', 'panic'];
const ESTOP_PATHS = ['/v1/estop', '/v1/e-stop', '/v1/emergency_stop', '/v1/emergency-stop', '/v1/emergency', '/v1/control/estop', '/v1/stop', '/estop'];
const LOOKS_LIKE_ESTOP = /e[-_ ]?stop|emergency|panic|safety/i;
const UNKNOWN_OP = reason('unknown_operation').label;
const UNKNOWN_PATH = reason('unknown_endpoint').label;
const NEVER_ISSUED = 'cd'.repeat(32);
const DOCUMENTED = catalogue.flatMap((e) => (e.family === 'capability' ? [e.name] : []));

/** Hold a grant and, where motion is allowed, enable every axis and arm, so a stop would be visible. */
async function energised(cell: Cell, client: ControlClient, axes: number, motion: boolean): Promise<Session> {
  const s = await cell.hold({ requested_lease_ms: 2_000 });
  if (!motion) return s;
  const all = (1 << axes) - 1;
  expect((await cell.fenced('enable', s, { axis_mask: all })).status).toBe(200);
  const a = await cell.fenced('arm', s);
  expect(a.status, a.reply.error).toBe(200);
  await waitStatus(client, (x) => Number(x.core!.axis_enable_mask) === all);
  return s;
}

/** The cell is exactly as `s` left it: the same session and generation own it, still armed when it was. */
async function untouched(cell: Cell, client: ControlClient, s: Session, armed: bigint): Promise<void> {
  const r = await cell.fenced('renew', s);
  expect(r.status, r.reply.error).toBe(200);
  const g = checkGrant(r.reply.data);
  expect({ session: g.session, generation: g.generation, stopping: g.stopping }).toEqual({ session: s.session, generation: s.generation, stopping: false });
  const st = await readStatus(client);
  expect(st.core!.armed).toBe(armed);
  expect(st.core!.safety_fault_mask).toBe(0n);
}

describe('no software emergency stop', () => {
  test('Describe offers no emergency stop: every capability is a documented one and none is named or routed like one', covers('rule:service.no_software_estop'), ({ description }) => {
    for (const c of description.capabilities) {
      // each one is a documented capability (nothing extra hides beside them)
      expect(DOCUMENTED).toContain(c.name);
      expect(`${c.name} ${c.transport}`).not.toMatch(LOOKS_LIKE_ESTOP);
    }
  });

  test(
    `operation names of an emergency stop are ${UNKNOWN_OP} with or without a fence, paths of one are ${UNKNOWN_PATH}, and the energised cell is untouched`,
    covers('rule:service.no_software_estop', 'reason:unknown_operation', 'reason:unknown_endpoint', 'profile:envelope.refusal_operation'),
    async ({ cell, client, target, description }) => {
      const motion = target.abilities.motion;
      const s = await energised(cell, client, description.axes.length, motion);
      const answered: string[] = [];
      for (const op of ESTOP_NAMES) {
        const fenced = await client.control({ schema: REQUEST_SCHEMA, operation: op, session: s.session, generation: s.generation });
        expect({ op, status: fenced.status, label: fenced.label }).toEqual({ op, status: 409, label: UNKNOWN_OP });
        const bare = await client.control({ schema: REQUEST_SCHEMA, operation: op });
        expect({ op, status: bare.status, label: bare.label }).toEqual({ op, status: 409, label: UNKNOWN_OP });
        answered.push(fenced.reply.operation, bare.reply.operation);
      }
      // The operation a refusal of an unknown name answers is ours to decide (docs/profile.md "Reply envelope").
      await inProfile('profile:envelope.refusal_operation', () => expect(new Set(answered)).toEqual(new Set(['unknown'])));
      for (const path of ESTOP_PATHS) {
        for (const method of ['GET', 'POST'] as const) {
          const raw = await client.raw(method, path, method === 'POST' ? '{}' : undefined);
          const body = JSON.parse(new TextDecoder().decode(raw.body)) as { error?: string };
          expect({ method, path, status: raw.status, label: body.error?.split(/[:\s]/)[0] }).toEqual({ method, path, status: 409, label: UNKNOWN_PATH });
        }
      }
      await untouched(cell, client, s, motion ? 1n : 0n);
    },
  );

  test(
    'stop is not an emergency stop: an observer without the fence cannot stop the cell; the holder\'s stop latches no safety fault and the cell is acquired, enabled and armed again without reset_fault',
    covers('rule:service.no_software_estop'),
    async ({ cell, client, target, description, skip }) => {
      needsMotion({ skip }, target);
      const axes = description.axes.length;
      const s = await energised(cell, client, axes, true);
      // Observers: no fence at all, a token never issued, the right token with a generation from the future.
      const bare = await client.control({ schema: REQUEST_SCHEMA, operation: 'stop' }, 'stop');
      expect(bare.status).toBe(409);
      expect(reason(bare.label!).group).toBe('envelope');
      const foreign = await cell.fenced('stop', { session: NEVER_ISSUED, generation: s.generation });
      expect({ status: foreign.status, label: foreign.label }).toEqual({ status: 409, label: 'fence' });
      const ahead = await cell.fenced('stop', { session: s.session, generation: s.generation + 1n });
      expect({ status: ahead.status, label: ahead.label }).toEqual({ status: 409, label: 'control_session_stale' });
      await untouched(cell, client, s, 1n);

      // The holder's stop: documented effect (revoked, disarmed) and nothing latched.
      const stop = await cell.fenced('stop', s);
      expect(stop.status, stop.reply.error).toBe(200);
      const after = await waitStatus(client, (x) => x.core!.armed === 0n);
      expect(after.core!.armed).toBe(0n);
      expect(after.core!.safety_fault_mask).toBe(0n);
      expect(after.core!.execution_fault_reasons).toBe(0n);
      // A new controller carries on without any reset: acquire, enable, arm.
      let again = await cell.acquire();
      for (let k = 0; k < 250 && again.label === 'control_session_stale'; k++) {
        await new Promise((r) => setTimeout(r, 20)); // the stop may still be draining
        again = await cell.acquire();
      }
      expect(again.status, again.reply.error).toBe(200);
      const g = checkGrant(again.reply.data);
      const all = (1 << axes) - 1;
      expect((await cell.fenced('enable', g, { axis_mask: all })).status).toBe(200);
      const arm = await cell.fenced('arm', g);
      expect(arm.status, arm.reply.error).toBe(200);
      expect((await readStatus(client)).core!.armed).toBe(1n);
    },
  );
});
