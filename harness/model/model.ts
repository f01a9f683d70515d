// The documented state machines of document 1 as an executable model, one module per machine under
// harness/model/machines/: the grant (grant.ts: part 2 "Fence", "Grant"; part 3 "Grant lifecycle"), the
// request_id outcome cache (request-cache.ts: part 4 "Envelope rules"), trajectory and program handles
// (handles.ts: part 3 handle table), the start gate (start-gate.ts: part 4 start_trajectory), cell I/O
// (io.ts: part 4 io_arm, io_disarm), jog (jog.ts: part 3 "Jog session"), programs (programs.ts: part 4
// prepare_program, start_program) and the machine operations (operations.ts: part 4 enable, arm, home,
// halt, reset_fault). Each owns its rules (a wrong-model variant flips one) and its unit tests. Written
// from the documents only (never from sims/): where a document leaves a detail "not shown", the rule
// follows docs/profile.md and is marked PROFILE, with the section it fills.
//
// This module composes them: the rules, and for one request every outcome the documents allow. The model
// is non-deterministic where timing is: for each command it gives every outcome the documents allow
// (status, leading label, fields, events that must follow, the state after), and the runner keeps the one
// the target's reply matches (harness/model/run.ts). A lease that may or may not have run out gives both
// worlds; an execution that may or may not have finished is decided by the next observation.
//
// The model is pure data plus functions; harness/model/system.ts talks to the target.

import { acquire, applyLapse, endGrant, fenceCheck, fenceRefusal, grantEv, grantOperation, lapse, GRANT_RULES, type GrantRules } from './machines/grant.ts';
import { handleOperation, uploadBusy, HANDLE_RULES, type HandleRules } from './machines/handles.ts';
import { ioOperation, IO_RULES, type IoRules } from './machines/io.ts';
import { jogOutcomes, updateJog, JOG_RULES, type JogRules } from './machines/jog.ts';
import { machineOperation, OPERATION_RULES, type OperationRules } from './machines/operations.ts';
import { programOperation, PROGRAM_RULES, type ProgramRules } from './machines/programs.ts';
import { cachedOutcomes, remember, CACHE_RULES, type CacheRules } from './machines/request-cache.ts';
import { START_GATE_RULES, type StartGateRules } from './machines/start-gate.ts';
import { ridValid, type Request } from './spec.ts';
import { reason, type EventExp, type ModelConfig, type ModelState, type Outcome, type Times } from './state.ts';

export * from './state.ts';
export * from './spec.ts';
export * from './matching.ts';
export { controllerText, drained, endGrant, fenceCheck, leaseAt } from './machines/grant.ts';
export { HANDLES_KEPT, planBit, retireHandles, TERMINAL } from './machines/handles.ts';
export { JOG_DEADLINE_MS, jogAt, resolveJogGeneration } from './machines/jog.ts';
export { labelText } from './machines/operations.ts';
export { programExecuting, programRunning } from './machines/programs.ts';

/** Every rule the model applies: the union of each machine's own (a wrong-model variant flips one). */
export interface Rules extends GrantRules, CacheRules, HandleRules, StartGateRules, IoRules, JogRules, ProgramRules, OperationRules {}

export const REFERENCE_RULES: Readonly<Rules> = Object.freeze({
  ...GRANT_RULES,
  ...CACHE_RULES,
  ...HANDLE_RULES,
  ...START_GATE_RULES,
  ...IO_RULES,
  ...JOG_RULES,
  ...PROGRAM_RULES,
  ...OPERATION_RULES,
});

/**
 * Every outcome the documents allow for `req` on state `m`, with the lease possibly run out (`lease`).
 * The caller matches the reply against them in order and applies the first that fits.
 */
export function outcomes(c: ModelConfig, m: ModelState, req: Request, lease: 'alive' | 'lapsed' | 'maybe', cycles: bigint, t: Times = { sendMs: 0, recvMs: 0 }): Outcome[] {
  const worlds: Array<[ModelState, boolean]> =
    lease === 'maybe' && m.grant ? [[m, false], [lapse(c, m), true]] : lease === 'lapsed' && m.grant ? [[lapse(c, m), true]] : [[m, false]];
  const out: Outcome[] = [];
  for (const [w, lapsed] of worlds) {
    for (const o of outcomesIn(c, w, req, lapsed, cycles, t)) {
      const base = o.next;
      // An outcome in the lapsed world starts from the lapsed state (grant expired, grant_expired owed).
      out.push(
        w === m
          ? o
          : {
              ...o,
              rule: `${o.rule} (lease ran out first)`,
              next: (s, r) => {
                applyLapse(c, s);
                base?.(s, r);
              },
              events: [grantEv('grant_expired', m.grant!.generation, false, 'the lease ran out'), ...(o.events ?? [])],
            },
      );
    }
  }
  // Last (the reply decides only when nothing above fits): the lease may run out while the core works on an admitted command (Home waits many cycles): the core's
  // own fence refuses it then (PROFILE "Native commands": no_grant), or a Home is cancelled (native_rejected).
  if (lease !== 'alive' && m.grant && !m.grant.stopping && CORE_OPS.has(req.spec.op)) {
    out.push(
      // A Start whose grant ended under it answers fence (PROFILE start gate), its handle retired.
      reason('lease ran out while the core worked', ['no_grant', 'native_rejected', 'wrong_generation', 'control_session_stale', ...(req.spec.op === 'start_trajectory' ? ['fence'] : [])], {
        next: (s, r) => {
          // A reset_fault the service submitted retires the session even when the core refuses it (part 4
          // reset_fault): the core's refusal (no_grant, native_rejected) says it was submitted, and a later
          // fence answers for a retired session, not an expired one.
          if (req.spec.op === 'reset_fault' && s.grant && (r.label === 'no_grant' || r.label === 'native_rejected')) {
            const evs: EventExp[] = [];
            endGrant(c, s, 'retired', evs, 'reset_fault submitted as the lease ran out');
            s.owed.push(...evs.map((e) => ({ ...e, may: true })));
          } else applyLapse(c, s);
          s.adopt = true;
        },
        events: [{ type: 'grant_expired', why: 'the lease ran out', may: true }, { type: 'grant_revoked', why: 'the service stopped after a failed Home', may: true }],
      }),
    );
  }
  return out;
}

/** Operations the core admits (a native command after the service's fence). */
const CORE_OPS = new Set(['start_program', 'prepare_program', 'reset_fault', 'enable', 'arm', 'home', 'halt', 'io_arm', 'io_disarm', 'prepare_trajectory', 'start_trajectory', 'discard_trajectory', 'mark_telemetry', 'begin_jog', 'end_jog', 'jog']);

function outcomesIn(c: ModelConfig, m: ModelState, req: Request, lapsed: boolean, cycles: bigint, t: Times): Outcome[] {
  const spec = req.spec;
  const rid = 'rid' in spec ? spec.rid : undefined;
  if (!ridValid(rid)) return [reason('idempotency.invalid_id', 'invalid_request_id')];
  if (spec.op === 'acquire') return acquire(c, m, req);
  if (!('s' in spec)) throw new Error(`not a control operation: ${spec.op}`);
  const f = req.resolved!;
  // POST /v1/program takes the generation from a header: 0 is invalid_control_generation before the fence
  // (PROFILE "Program admission" route order).
  if (spec.op === 'prepare_program' && f.generation === 0n) return [reason('reason:invalid_control_generation', 'invalid_control_generation')];
  // A local_jog_update datagram is judged by its own checks (PROFILE "Jog" frame checks), not the fence table.
  if (spec.op === 'update_jog') return updateJog(c, m, req, lapsed, t);
  const fence = fenceCheck(c, m, spec.op, f, lapsed);
  // The retry cache (part 4 Envelope rules, machines/request-cache.ts) comes after the fence for the
  // current session, and answers for an ended session whose cache is kept.
  // PROFILE "prepare_trajectory uploads": the upload slot is reserved at admission, with the fence and
  // before the whole payload is read, so busy comes before the retry cache (and is not remembered).
  if (spec.op === 'prepare_trajectory' && fence.startsWith('ok') && !fence.endsWith('stopping')) {
    const busy = uploadBusy(c, m, 'trajectory');
    if (busy) return busy;
  }
  const cached = cachedOutcomes(c, m, req, fence, lapsed);
  if (cached) return cached;
  if (!fence.startsWith('ok')) return fenceRefusal(c, m, spec.op, f, fence, lapsed);
  return operation(c, m, req, fence === 'ok_stopping', cycles, t).map((o) => remember(req, o));
}

/** The operation itself, once the fence passed (and no cached reply answered): the machine that owns it. */
function operation(c: ModelConfig, m: ModelState, req: Request, stopping: boolean, cycles: bigint, t: Times): Outcome[] {
  switch (req.spec.op) {
    case 'renew':
    case 'release':
    case 'stop':
      return grantOperation(c, m, req, stopping);
    case 'enable':
    case 'arm':
    case 'home':
    case 'halt':
    case 'reset_fault':
    case 'mark_telemetry':
      return machineOperation(c, m, req, cycles);
    case 'begin_jog':
    case 'jog':
    case 'end_jog':
      return jogOutcomes(c, m, req, t);
    case 'io_arm':
    case 'io_disarm':
      return ioOperation(c, m, req);
    case 'prepare_trajectory':
    case 'start_trajectory':
    case 'discard_trajectory':
      return handleOperation(c, m, req, cycles, t);
    case 'prepare_program':
    case 'start_program':
      return programOperation(c, m, req, cycles, t);
  }
  throw new Error(`no model for ${req.spec.op}`);
}
