// Jog (document 1 part 3 "Jog session"; part 4 begin_jog, end_jog, jog; PROFILE "Jog"): the jog
// generation, its input deadline, the legacy jog, and the local_jog_update frame checks.

import type { CheckedReply } from '../../oracle/reply.ts';
import type { Request, Spec } from '../spec.ts';
import { cloneState, reason, type ModelConfig, type ModelState, type Outcome, type Times } from '../state.ts';

// The rules this machine applies, each a documented (or PROFILE) rule; a wrong-model variant
// (harness/model/variants.ts) flips one, and the reference stack must then refute the model.
export interface JogRules {
  /** Part 2 Request: end_jog takes the "exact current nonzero independent jog generation" (not a legacy one). */
  endJogExactIndependent: boolean;
  /** Part 2 Request end_jog: "exact current" generation: an older nonzero generation is jog_session_stale. */
  endJogRefusesOlder: boolean;
  /** PROFILE "Jog" local_jog_update: jog_generation must be the open independent one (a legacy jog's is jog_session_stale). */
  updateJogIndependentOnly: boolean;
  /** PROFILE "Jog" local_jog_update: source_sequence strictly increasing per jog generation (jog_frame_out_of_order). */
  updateJogOrdered: boolean;
  /** PROFILE "Jog" local_jog_update: the session and grant generation must be the current grant's (control_session_stale). */
  updateJogFenced: boolean;
  /** Part 4 arm: "the motion start gate is checked at every Start and jog": begin_jog and jog need the axes armed and enabled. */
  jogGate: boolean;
}

export const JOG_RULES: Readonly<JogRules> = Object.freeze({
  endJogExactIndependent: true,
  endJogRefusesOlder: true,
  updateJogIndependentOnly: true,
  updateJogOrdered: true,
  updateJogFenced: true,
  jogGate: true,
});

/** PROFILE "Jog": the session's first input deadline is the producer's (origin + 200 ms here), shortened to origin + the input age. */
export const JOG_DEADLINE_MS = 200;

/** Whether the open jog's input surely holds, or may have expired (expiry is checked on core cycles, host time). */
export function jogAt(m: ModelState, t: Times): 'alive' | 'maybe' {
  if (!m.jog) return 'maybe';
  return t.recvMs < m.jog.until.lo - 2 ? 'alive' : 'maybe';
}

export function resolveJogGeneration(m: ModelState, jg: 'current' | 'older' | 'zero' | 'next' | 'legacy'): bigint {
  const cur = m.jog?.n ?? m.jogMax ?? 1n;
  return { current: cur, older: cur > 1n ? cur - 1n : cur, zero: 0n, next: (m.jogMax ?? 0n) + 1n, legacy: m.legacyJog ?? (m.jogMax ?? 0n) + 1n }[jg];
}

export function jogOutcomes(c: ModelConfig, m: ModelState, req: Request, t: Times): Outcome[] {
  const spec = req.spec as Extract<Spec, { op: 'begin_jog' | 'end_jog' | 'jog' }>;
  // An open jog whose input deadline may have passed: both worlds.
  if (m.jog && jogAt(m, t) === 'maybe') {
    const gone = cloneState(m);
    const n = m.jog.n;
    gone.jog = undefined;
    const expired = jogIn(c, gone, req, t).map((o) => ({
      ...o,
      rule: `${o.rule} (jog input expired first)`,
      next: (s: ModelState, r: CheckedReply) => {
        if (s.jog?.n === n) s.jog = undefined;
        s.owed.push({ type: 'jog_expired', where: { jogGeneration: n }, why: 'jog input expired', may: true });
        o.next?.(s, r);
      },
    }));
    return [...jogIn(c, m, req, t), ...expired];
  }
  void spec;
  return jogIn(c, m, req, t);
}

function jogIn(c: ModelConfig, m: ModelState, req: Request, t: Times): Outcome[] {
  const spec = req.spec as Extract<Spec, { op: 'begin_jog' | 'end_jog' | 'jog' }>;
  const bit = 1 << c.trajAxis;
  if (spec.op === 'end_jog') {
    const jg = req.resolved!.jogGeneration!;
    // The wrong-model variant end-jog-accepts-older takes an older nonzero generation of the open session too.
    const older = !c.rules.endJogRefusesOlder && m.jog?.mode === 'independent' && jg !== 0n && jg < m.jog.n;
    if (m.jog && (m.jog.mode === 'independent' || !c.rules.endJogExactIndependent) && (m.jog.n === jg || older) && jg !== 0n) {
      return [
        {
          rule: 'rule:jog_session.end_closes',
          status: 200,
          check: (r) => (r.reply.handle !== m.jog!.n ? `end_jog answered handle ${r.reply.handle}, expected the ended generation ${m.jog!.n}` : undefined),
          next: (s) => void (s.jog = undefined),
          events: [{ type: 'jog_end', where: { jogGeneration: jg }, why: 'end_jog' }],
        },
      ];
    }
    return [reason('rule:op.end_jog.exact_generation', 'jog_session_stale')];
  }
  if (spec.op === 'begin_jog') {
    // PROFILE "Jog" begin_jog check order.
    if (spec.clock !== 'ok') return [reason('reason:jog_clock_incarnation_mismatch', 'jog_clock_incarnation_mismatch')];
    if (spec.mask !== 'traj') return [reason('begin_jog:invalid_axis_mask', 'invalid_axis_mask')];
    if (spec.deadline === 'before') return [reason('begin_jog:deadline_invalid', 'jog_clock_deadline_invalid')];
    if (spec.deadline === 'stale') return [reason('begin_jog:input_stale', 'jog_clock_input_stale')];
  } else if (spec.timeout === 0 || spec.timeout === 251) return [reason('limit:legacy_jog_timeout_ms', 'invalid_request_envelope')];
  // The core's admission (PROFILE "Jog" readiness): fault, another lane, armed with the axes enabled.
  if (m.faultLatched) return [reason('jog:fault', 'not_ready')];
  const running = [...m.handles.values()].some((h) => h.state === 'started' && h.core === m.core && (h.bit & bit) !== 0);
  if (running) return [reason('jog:trajectory_lane', 'mode_conflict')];
  if (spec.op === 'jog' && m.jog?.mode === 'independent') return [reason('jog:legacy_never_takes_over', 'mode_conflict')];
  // Part 4 arm: "the motion start gate is checked at every Start and jog" (PROFILE "Jog" readiness).
  if (c.rules.jogGate && (!m.armed || (m.enableMask & bit) === 0)) return [reason('jog:not_ready', 'not_ready')];
  const open = m.jog;
  const renew = spec.op === 'jog' && open?.mode === 'legacy';
  const ms = spec.op === 'jog' ? spec.timeout : JOG_DEADLINE_MS;
  return [
    {
      rule: spec.op === 'jog' ? (renew ? 'jog:legacy_renewed' : 'jog:legacy_opened') : open ? 'rule:jog_session.begin_opens_generation (superseding)' : 'rule:jog_session.begin_opens_generation',
      status: 200,
      check: (r) => {
        const h = r.reply.handle;
        if (h === undefined || h === 0n) return `${spec.op} answered without a jog generation in handle`;
        if (renew && h !== open!.n) return `a legacy jog renewing generation ${open!.n} answered ${h}`;
        if (!renew && m.jogMax !== undefined && h !== m.jogMax + 1n) return `jog generation ${h}, expected ${m.jogMax + 1n} (PROFILE: 1, 2, 3 ... per core incarnation, never reused)`;
        if (spec.op === 'jog' && r.reply.sequence === undefined) return 'jog answered without sequence';
        return undefined;
      },
      next: (s, r) => {
        const n = r.reply.handle!;
        if (open && !renew) s.owed.push({ type: 'jog_end', where: { jogGeneration: open.n }, why: 'superseded by a new jog generation', may: spec.op === 'jog' });
        s.jog = { n, mode: spec.op === 'jog' ? 'legacy' : 'independent', bit, until: { lo: t.sendMs - 5 + ms, hi: t.recvMs + ms }, ...(req.resolved?.originNs !== undefined && spec.op === 'begin_jog' ? { originNs: req.resolved.originNs } : {}) };
        if (!renew) s.jogSeq = undefined;
        if (spec.op === 'jog') s.legacyJog = n;
        s.jogMax = n > (s.jogMax ?? 0n) ? n : s.jogMax;
      },
      events: renew ? [] : [{ type: 'jog_begin', why: `${spec.op} opened a jog generation`, ...(spec.op === 'jog' ? { may: true } : {}) }],
    },
  ];
}

/**
 * A local_jog_update frame (PROFILE "Jog" frame checks, in order): the grant's session and generation,
 * the open independent jog generation, a source sequence above the last accepted, a capture time neither
 * older than the input age nor before the session's origin. The "reply" is what GET /v1/jog/ingress
 * counted for the frame: 200 accepted, or 409 with the refusal's label (harness/model/run.ts).
 */
export function updateJog(c: ModelConfig, m: ModelState, req: Request, lapsed: boolean, t: Times): Outcome[] {
  const spec = req.spec as Extract<Spec, { op: 'update_jog' }>;
  const f = req.resolved!;
  const g = m.grant;
  const fenced = !!g && !lapsed && !g.stopping && f.session === g.session && f.generation === g.generation;
  if (!fenced && c.rules.updateJogFenced) return [reason('update_jog:fence', 'control_session_stale')];
  const judge = (w: ModelState): Outcome[] => {
    const open = w.jog;
    const legacy = open?.mode === 'legacy' && c.rules.updateJogIndependentOnly;
    if (!open || open.n !== f.jogGeneration || legacy) return [reason(`update_jog:jog_session_stale${open?.mode === 'legacy' && open.n === f.jogGeneration ? ' (legacy generation)' : ''}`, 'jog_session_stale')];
    if (c.rules.updateJogOrdered && w.jogSeq !== undefined && f.sourceSequence! <= w.jogSeq) return [reason('update_jog:out_of_order', 'jog_frame_out_of_order')];
    if (spec.capture === 'stale') return [reason('update_jog:input_stale', 'jog_clock_input_stale')];
    // A capture before the origin may also be older than the input age when the session began long ago.
    if (spec.capture === 'before_origin') return [reason('update_jog:capture_before_origin', ['jog_capture_before_origin', 'jog_clock_input_stale'])];
    return [
      {
        rule: 'rule:update_jog.accepted',
        status: 200,
        next: (s) => {
          s.jogSeq = f.sourceSequence;
          // Zero velocities: nothing moves; the input deadline moves on to capture + the input age.
          if (s.jog) s.jog.until = { lo: t.sendMs - 5 + c.jogInputAgeMs, hi: t.recvMs + c.jogInputAgeMs };
        },
      },
    ];
  };
  if (m.jog && jogAt(m, t) === 'maybe') {
    const gone = cloneState(m);
    const n = m.jog.n;
    gone.jog = undefined;
    return [
      ...judge(m),
      ...judge(gone).map((o) => ({
        ...o,
        rule: `${o.rule} (jog input expired first)`,
        next: (s: ModelState, r: CheckedReply) => {
          if (s.jog?.n === n) s.jog = undefined;
          o.next?.(s, r);
        },
      })),
    ];
  }
  return judge(m);
}
