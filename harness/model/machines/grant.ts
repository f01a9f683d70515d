// The grant (document 1 part 2 "Fence", "Grant"; part 3 "Grant lifecycle"; part 7 authority reasons):
// acquire, renew, release and stop, the fence check of every fenced operation (which label for which case
// is PROFILE "Fence checks"), lease expiry and the stop's drain.

import type { CheckedReply } from '../../oracle/reply.ts';
import { RID, type FencedSpec, type Request, type Resolved, type Spec } from '../spec.ts';
import { cloneState, findLast, hit, reason, U64_MAX, type EndHow, type EventExp, type GrantM, type ModelConfig, type ModelState, type Outcome } from '../state.ts';
import { retireHandles } from './handles.ts';

// The rules this machine applies, each a documented (or PROFILE) rule; a wrong-model variant
// (harness/model/variants.ts) flips one, and the reference stack must then refute the model.
export interface GrantRules {
  /** Part 2 Fence: "renew and stop also accept an older nonzero generation not above the current one for the same session". */
  olderGenerationRenewStop: boolean;
  /** Part 3 grant table: acquire makes the generation increase (PROFILE "Grant generation and stop": by exactly one). */
  acquireIncrementsGeneration: boolean;
  /** PROFILE "Grant generation and stop": an admitted stop takes the next generation too ("fenced by Stop and acquisition"). */
  stopIncrementsGeneration: boolean;
  /** Part 7 control_session_stale: "a Stop in flight" refuses other fenced calls while a stop drains. */
  stoppingRefusesMotion: boolean;
  /** Part 8 requested_lease_ms 1..10000; result min(request, ceiling). */
  leaseIsMinOfRequestAndCeiling: boolean;
  /** Part 3 grant table, renew: "owned, lease_ms preserved" (the requested lease, not the default). */
  renewPreservesLease: boolean;
}

export const GRANT_RULES: Readonly<GrantRules> = Object.freeze({
  olderGenerationRenewStop: true,
  acquireIncrementsGeneration: true,
  stopIncrementsGeneration: true,
  stoppingRefusesMotion: true,
  leaseIsMinOfRequestAndCeiling: true,
  renewPreservesLease: true,
});

/** Whether the current grant's lease surely holds, surely ran out, or may have, at local time `t`. */
export function leaseAt(g: GrantM, sendMs: number, recvMs: number): 'alive' | 'lapsed' | 'maybe' {
  const slackMs = 2;
  if (recvMs < g.lease.lo - slackMs) return 'alive';
  if (sendMs > g.lease.hi + slackMs) return 'lapsed';
  return 'maybe';
}

/** Grant end (part 3): the session ends, handles of the grant retire, the cell is left as a stop leaves it. */
export function endGrant(c: ModelConfig, m: ModelState, how: EndHow, events: EventExp[], why: string): void {
  const g = m.grant;
  if (!g) return;
  // PROFILE "Grant generation and stop": a revocation (a stop drain, a lost core) or a reset_fault retirement
  // keeps the session's retry cache; release and lease expiry drop it (part 4 Envelope rules).
  const keep = how === 'revoked' || how === 'retired' || how === 'restarted' || !c.rules.releaseDropsCache;
  m.ended.push({ session: g.session, generation: g.generation, how, ...(keep ? { cache: g.cache } : {}) });
  if (m.ended.length > 8) m.ended.shift();
  m.grant = undefined;
  m.jog = undefined;
  retireHandles(c, m, g.session, events, why);
  m.armed = false;
  m.enableMask = 0;
  m.ioArmed = false;
  // PROFILE "Trajectories" Output intents: stop and grant end turn every output OFF.
  m.outputs = 0;
}


type Group = 'renew_stop' | 'release' | 'native_fenced' | 'other';
const GROUP: Record<string, Group> = {
  renew: 'renew_stop',
  stop: 'renew_stop',
  release: 'release',
  halt: 'native_fenced',
  io_arm: 'native_fenced',
  io_disarm: 'native_fenced',
  prepare_trajectory: 'native_fenced',
};

/**
 * The fence check of a fenced operation (part 2 Fence, part 7 authority reasons; which label for which
 * case is PROFILE "Fence checks", a table by operation group). `lapsed`: the lease ran out before the
 * request was checked. Returns the refusal label, or 'ok' / 'ok_stopping'.
 */
export function fenceCheck(c: ModelConfig, m: ModelState, op: string, f: Resolved, lapsed: boolean): string {
  const group = GROUP[op] ?? 'other';
  if (!/^[0-9a-f]{64}$/.test(f.session) || f.generation === 0n) return 'control_session_stale';
  const g = m.grant && m.grant.session === f.session ? m.grant : undefined;
  const e = g ? undefined : findLast(m.ended, (x) => x.session === f.session);
  if (!g && !e) return 'fence';
  const how: EndHow | undefined = g ? (lapsed ? 'expired' : undefined) : e!.how;
  if (how === 'restarted') return 'daemon_restarted';
  if (how === 'expired') return group === 'renew_stop' || group === 'release' ? 'expired' : group === 'native_fenced' ? 'no_grant' : 'control_session_stale';
  if (how) {
    if (group === 'native_fenced') return m.grant ? 'control_session_stale' : 'no_grant';
    return 'control_session_stale';
  }
  const cur = g!.generation;
  if (f.generation > cur) return group === 'native_fenced' ? 'wrong_generation' : 'control_session_stale';
  if (f.generation < cur) {
    if (group === 'renew_stop' && c.rules.olderGenerationRenewStop) return g!.stopping ? 'ok_stopping' : 'ok';
    return group === 'native_fenced' ? 'wrong_generation' : 'control_session_stale';
  }
  if (g!.stopping) {
    if (group === 'renew_stop' || group === 'release') return 'ok_stopping';
    if (!c.rules.stoppingRefusesMotion) return 'ok';
    return group === 'native_fenced' ? 'inhibited' : 'control_session_stale';
  }
  return 'ok';
}

/**
 * The refusal of a fenced operation whose fence did not pass (`fence` is fenceCheck's label): an ended
 * session that may have ended by expiry instead answers that fence label too.
 */
export function fenceRefusal(c: ModelConfig, m: ModelState, op: string, f: Resolved, fence: string, lapsed: boolean): Outcome[] {
  const ended = m.grant?.session === f.session ? undefined : findLast(m.ended, (x) => x.session === f.session);
  if (ended?.maybeExpired || ended?.alsoExpired) {
    const alt = cloneState(m);
    findLast(alt.ended, (x) => x.session === f.session)!.how = 'expired';
    const other = fenceCheck(c, alt, op, f, lapsed);
    if (other !== fence && !other.startsWith('ok')) return [reason(`fence:${op}:${fence}`, [fence, other])];
  }
  return [reason(`fence:${op}:${fence}`, fence)];
}

/** The grant payload of a grant event (part 6: grant has generation and stopping). */
export const grantEv = (type: string, generation: bigint, stopping: boolean, why: string, may = false): EventExp => ({ type, where: { generation, stopping }, why, ...(may ? { may } : {}) });

/** The state with the lease run out (a clone): the grant expired, its events owed as may-events. */
export function lapse(c: ModelConfig, m: ModelState): ModelState {
  const w = cloneState(m);
  applyLapse(c, w);
  return w;
}

export function applyLapse(c: ModelConfig, s: ModelState): void {
  if (!s.grant) return;
  hit(s, 'transition:grant:owned->no_grant:lease_expiry');
  const evs: EventExp[] = [];
  endGrant(c, s, 'expired', evs, 'lease expiry');
  s.owed.push(...evs.map((e) => ({ ...e, may: true })));
}

/** acquire (part 4; part 3 "no_grant -> owned"): checked before any fence. */
export function acquire(c: ModelConfig, m: ModelState, req: Request): Outcome[] {
  const spec = req.spec as Extract<Spec, { op: 'acquire' }>;
  const rid = spec.rid;
  // PROFILE idempotent acquire: the id of the acquire that created the current grant.
  // PROFILE "Envelope check order": the controller, requested_lease_ms and binding come first.
  const ctl = controllerText(spec.controller);
  if (Buffer.byteLength(ctl) < 1 || Buffer.byteLength(ctl) > 63) return [reason('limit:controller_bytes', 'invalid_request_envelope')];
  if (spec.lease !== undefined && (spec.lease < 0 || spec.lease > 10_000)) return [reason('limit:requested_lease_ms', 'invalid_requested_lease')];
  if (spec.binding === 'wrong') return [reason('op.acquire.binding', 'authority_binding_mismatch')];
  const a = m.grant?.acquireRid;
  if (rid !== undefined && a && a.rid === RID[rid]) {
    if (a.payload === req.payload) return [{ rule: 'idempotency.join_or_replay:acquire', status: 200, replay: a.reply }];
    return [reason('idempotency.conflict:acquire', 'request_id_conflict')];
  }
  if (m.grant?.stopping || m.draining) return [reason('rule:grant.stopping_no_movement:acquire', 'control_session_stale')];
  if (m.grant) return [reason('transition:grant:owned:acquire_refused', 'control_already_owned')];
  const want = spec.lease === undefined || spec.lease === 0 ? c.defaultLeaseMs : spec.lease;
  const leaseMs = c.rules.leaseIsMinOfRequestAndCeiling ? Math.min(want, c.leaseCeilingMs) : want;
  const expectGen = m.lastGeneration === undefined ? undefined : m.lastGeneration + (c.rules.acquireIncrementsGeneration ? 1n : 0n);
  if (expectGen !== undefined && expectGen > U64_MAX) return [reason('reason:application_generation_exhausted', 'application_generation_exhausted')];
  return [
    {
      rule: 'transition:grant:no_grant->owned:acquire',
      status: 200,
      check: (r) => {
        const d = r.reply.data as Record<string, unknown> | undefined;
        if (!d) return 'acquire answered 200 without data';
        if (d.stopping !== false) return `Grant.stopping ${String(d.stopping)}, expected false`;
        if (d.lease_ms !== BigInt(leaseMs) && d.lease_ms !== leaseMs) return `Grant.lease_ms ${String(d.lease_ms)}, expected min(${want}, ceiling ${c.leaseCeilingMs}) = ${leaseMs}`;
        if (d.controller !== ctl) return `Grant.controller ${JSON.stringify(d.controller)}, expected ${JSON.stringify(ctl)}`;
        if (typeof d.session !== 'string' || !/^[0-9a-f]{64}$/.test(d.session)) return `Grant.session ${JSON.stringify(d.session)} is not 64 lowercase hex`;
        if (m.ended.some((e) => e.session === d.session)) return `Grant.session ${d.session} was issued before`;
        const gen = d.generation as bigint;
        if (expectGen !== undefined && gen !== expectGen) return `Grant.generation ${gen}, expected ${expectGen} (PROFILE: each acquire takes the next generation)`;
        if (m.lastGeneration !== undefined && gen <= m.lastGeneration && c.rules.acquireIncrementsGeneration) return `Grant.generation ${gen} did not increase past ${m.lastGeneration}`;
        return undefined;
      },
      next: (s, r) => {
        const d = r.reply.data as Record<string, unknown>;
        const gen = d.generation as bigint;
        s.lastGeneration = gen;
        s.grant = {
          session: d.session as string,
          generation: gen,
          acquired: gen,
          stopping: false,
          leaseMs,
          controller: ctl,
          lease: { lo: 0, hi: 0 }, // set by the runner from the exchange's times
          cache: new Map(),
          ...(rid !== undefined ? { acquireRid: { rid: RID[rid], payload: req.payload, reply: r } } : {}),
        };
      },
      events: [{ type: 'grant_acquired', why: 'acquire succeeded' }],
    },
  ];
}

export function controllerText(k: 'ok' | 'other' | 'empty' | 'max' | 'over'): string {
  return { ok: 'model-controller', other: 'model-other', empty: '', max: 'c'.repeat(63), over: 'c'.repeat(64) }[k];
}

const grantData = (expect: { generation: bigint; stopping?: boolean; leaseMs: number; session: string | '' }) => (r: CheckedReply) => {
  const d = r.reply.data as Record<string, unknown> | undefined;
  if (!d) return 'a Grant reply without data';
  if (d.generation !== expect.generation) return `Grant.generation ${String(d.generation)}, expected ${expect.generation}`;
  if (expect.stopping !== undefined && d.stopping !== expect.stopping) return `Grant.stopping ${String(d.stopping)}, expected ${expect.stopping}`;
  if (BigInt(d.lease_ms as bigint) !== BigInt(expect.leaseMs)) return `Grant.lease_ms ${String(d.lease_ms)}, expected ${expect.leaseMs} (renew preserves it)`;
  if (d.session !== expect.session) return `Grant.session ${JSON.stringify(d.session)}, expected ${expect.session ? 'the session' : 'empty'}`;
  return undefined;
};

/** renew, release and stop once the fence passed (part 3 grant table). */
export function grantOperation(c: ModelConfig, m: ModelState, req: Request, stopping: boolean): Outcome[] {
  const spec = req.spec as FencedSpec;
  const g = m.grant!;
  const f = req.resolved!;
  switch (spec.op) {
    case 'renew':
      return [
        {
          rule: stopping ? 'transition:grant:owned->owned:renew (stopping)' : f.generation < g.generation ? 'rule:fence.older_generation_renew_stop' : 'transition:grant:owned->owned:renew',
          status: 200,
          check: grantData({ generation: g.generation, stopping, leaseMs: c.rules.renewPreservesLease ? g.leaseMs : c.defaultLeaseMs, session: g.session }),
          next: () => undefined, // the runner moves the lease window on
          events: [grantEv('grant_renewed', g.generation, stopping, 'renew succeeded')],
        },
      ];
    case 'release':
      return [
        {
          rule: 'transition:grant:owned->no_grant:release',
          status: 200,
          // Whether a released grant still says stopping is not shown: not checked.
          check: grantData({ generation: g.generation, leaseMs: g.leaseMs, session: '' }),
          next: (s) => {
            const evs: EventExp[] = [];
            endGrant(c, s, 'released', evs, 'release');
            s.owed.push(...evs);
          },
          events: [{ type: 'grant_released', where: { generation: g.generation }, why: 'release' }],
        },
      ];
    case 'stop': {
      // PROFILE: an admitted stop takes the next generation (not past 2^64-1); a stop while one drains keeps it.
      const gen = g.stopping || !c.rules.stopIncrementsGeneration || g.generation === U64_MAX ? g.generation : g.generation + 1n;
      const o: Outcome = {
        rule: stopping ? 'rule:fence.older_generation_renew_stop (stop while stopping)' : 'transition:grant:owned->stopping:stop',
        status: 200,
        check: grantData({ generation: gen, stopping: true, leaseMs: g.leaseMs, session: g.session }),
        next: (s) => {
          if (!s.grant) return;
          s.grant.generation = gen;
          s.grant.stopping = true;
          s.draining = true;
          s.lastGeneration = gen > (s.lastGeneration ?? 0n) ? gen : s.lastGeneration;
          // Outputs inhibit immediately (part 3); the grant's handles retire at the Stop (part 3 handle table).
          s.ioArmed = false;
          s.outputs = 0;
          const evs: EventExp[] = [];
          retireHandles(c, s, s.grant.session, evs, 'stop');
          s.owed.push(...evs);
        },
        // The revocation follows the drain; the runner observes it (status) and owes grant_revoked then.
        events: [],
      };
      return [o];
    }
  }
  throw new Error(`not a grant operation: ${(spec as Spec).op}`);
}

/** A stop drained: the grant is revoked (part 3 "stopping, then revoked"). */
export function drained(c: ModelConfig, s: ModelState): void {
  if (!s.grant?.stopping) return;
  hit(s, 'transition:grant:stopping->revoked:drain');
  const evs: EventExp[] = [];
  endGrant(c, s, 'revoked', evs, 'stop drained');
  s.owed.push(...evs);
}
