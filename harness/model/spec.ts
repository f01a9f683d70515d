// The model's commands as data (harness/model/commands.ts draws them, a failing run prints them), and a
// request as the model sees it. Fence references ("current", "older") are resolved against the model when
// the command runs, so a shrunk sequence stays meaningful.

import { findLast, U64_MAX, type ModelState } from './state.ts';

export type SessRef = 'current' | 'ended' | 'never' | 'malformed';
export type GenRef = 'current' | 'older' | 'acquired' | 'newer' | 'zero' | 'one' | 'max';
export type HandleRef = 'prepared' | 'started' | 'last' | 'terminal' | 'other_core' | 'zero' | 'next' | 'max' | 'program';
/** The model's program files: two still programs of different identity, one with an ON marker on sample 0, one without a program_id. */
export type ProgRef = 'a' | 'b' | 'on' | 'no_id';
export type IdentRef = 'current' | 'other' | 'changed';
export type MaskRef = 'traj' | 'all' | 'others' | 'zero' | 'outside' | 'non_home';
export type RidRef = undefined | 'a' | 'b' | 'c' | 'long64' | 'empty' | 'long65' | 'control_char';

export type Spec =
  | { op: 'acquire'; lease?: number; binding: 'ok' | 'wrong'; controller: 'ok' | 'other' | 'empty' | 'max' | 'over'; rid?: RidRef }
  | { op: 'renew' | 'release' | 'arm' | 'halt' | 'io_arm' | 'io_disarm'; s: SessRef; g: GenRef; rid?: RidRef }
  | { op: 'stop'; s: SessRef; g: GenRef; rid?: RidRef; drain: boolean }
  | { op: 'enable' | 'home'; mask: MaskRef; s: SessRef; g: GenRef; rid?: RidRef }
  | { op: 'mark_telemetry'; label: 'ok' | 'other' | 'empty' | 'max' | 'over'; s: SessRef; g: GenRef; rid?: RidRef }
  /** `axis`: the plan moves the first native-home axis (the one a bring-up homes) or the last one (left unhomed by the generator). */
  | { op: 'prepare_trajectory'; io: 'none' | 'on' | 'on0' | 'off' | 'torch' | 'unconfigured'; axis?: 'first' | 'last'; s: SessRef; g: GenRef; rid?: RidRef }
  /** POST /v1/program (part 4 prepare_program): the fence in headers, no request_id (uploads have no deduplication). */
  | { op: 'prepare_program'; prog: ProgRef; s: SessRef; g: GenRef }
  /** start_program with the identity of the newest program prepared, of another program file, or one with a field changed. */
  | { op: 'start_program'; id: IdentRef; s: SessRef; g: GenRef; rid?: RidRef }
  /** An upload of `kind` sends its admitted prefix and holds the rest back (part 8 upload slots); finish_upload sends the rest, abandon_upload disconnects. */
  | { op: 'hold_upload'; kind: 'trajectory' | 'program' }
  | { op: 'finish_upload' }
  | { op: 'abandon_upload' }
  /**
   * One local_jog_update datagram with zero velocities (PROFILE "Jog" frame), judged from GET /v1/jog/ingress:
   * `jg` the open independent generation, an older one, the next, a legacy jog's; `seq` the next source
   * sequence or the last accepted again; `capture` now, older than the input age, or before the session's origin.
   */
  | { op: 'update_jog'; jg: 'current' | 'older' | 'next' | 'legacy'; seq: 'next' | 'same'; capture: 'now' | 'stale' | 'before_origin'; s: SessRef; g: GenRef }
  /**
   * `late` (start_trajectory, out of band through the test channel, stepped clock): the first cycle after
   * the Start wakes one cycle_ns late, or one nanosecond less (PROFILE "late_wake"; the one-cycle bound of
   * output intents).
   */
  | { op: 'start_trajectory' | 'discard_trajectory'; h: HandleRef; s: SessRef; g: GenRef; rid?: RidRef; late?: 'cycle' | 'under' }
  | { op: 'step'; cycles: number }
  | { op: 'drain' }
  | { op: 'wait_lease' }
  | { op: 'restart_core' }
  /** A controller's bring-up, expanded against the model into checked commands: acquire, Home the trajectory axis if needed, enable every axis, arm, prepare a plan. */
  /**
   * Variants leave one precondition of the start gate out, so each is tried on its own: `omit` arm, or
   * the plan's axis from the enable mask; `axis` last plans on an axis the generator never homes.
   */
  | { op: 'ready'; plan?: 'none' | 'on' | 'on0' | 'program' | 'program_on'; omit?: 'arm' | 'axis'; axis?: 'last' }
  /** While a plan executes: prepare another and start it (part 3: "a later execution replaces it"). */
  | { op: 'replan' }
  /**
   * Jog (part 3 "Jog session", part 4 begin_jog, end_jog, jog): zero velocities only, so a jog never moves
   * the held target. `deadline` ok (origin + 200 ms), before (not after the origin), stale (an origin a
   * second ago); `clock` the current incarnation, empty or another.
   */
  | { op: 'begin_jog'; mask: 'traj' | 'zero' | 'outside'; clock: 'ok' | 'empty' | 'other'; deadline: 'ok' | 'before' | 'stale'; s: SessRef; g: GenRef; rid?: RidRef }
  | { op: 'end_jog'; jg: 'current' | 'older' | 'zero' | 'next' | 'legacy'; s: SessRef; g: GenRef; rid?: RidRef }
  | { op: 'jog'; timeout: 0 | 1 | 100 | 250 | 251; s: SessRef; g: GenRef; rid?: RidRef }
  /** Out of band (the test channel): a following error on the plan's axis, latched, its condition then cleared. */
  | { op: 'fault' }
  /** Part 4 reset_fault (interim): needs an inhibited idle machine; a submitted reset retires the session. */
  | { op: 'reset_fault'; s: SessRef; g: GenRef; rid?: RidRef }
  /**
   * A controller's short exchange, sent back to back (harness/model/commands.ts "Command families"): a
   * bring-up followed at once by the Start, jog or discard it was for, or a jog session's frames and end.
   * Each step is checked like any other command; a step the generator's preconditions leave out in the
   * state the steps before made is skipped (and shown as skipped in the trace).
   */
  | { op: 'burst'; family: string; steps: Spec[] };

export type FencedSpec = Extract<Spec, { s: SessRef }>;

export const RID: Record<Exclude<RidRef, undefined>, string> = {
  a: 'model-a',
  b: 'model-b',
  c: 'model-c',
  long64: 'L'.repeat(64),
  empty: '',
  long65: 'L'.repeat(65),
  control_char: 'bad\u007fid',
};
export const ridValid = (r: RidRef) => r === undefined || (r !== 'empty' && r !== 'long65' && r !== 'control_char');

/** A fenced command's arguments, resolved against the model (the same values go to the target). */
export interface Resolved {
  session: string;
  generation: bigint;
  handle?: bigint;
  mask?: number;
  jogGeneration?: bigint;
  /** start_program: the identity sent, as exact JSON text. */
  ident?: string;
  /** update_jog: the frame's source sequence. */
  sourceSequence?: bigint;
  /** begin_jog: source_origin_host_ns sent. */
  originNs?: bigint;
}

export const NEVER_SESSION = 'ab'.repeat(32);
export const MALFORMED_SESSION = 'AB'.repeat(32);

export function resolveFence(m: ModelState, spec: FencedSpec): Resolved {
  const last = m.ended[m.ended.length - 1];
  let session: string;
  let base: bigint;
  let acquired: bigint;
  if (spec.s === 'never') session = NEVER_SESSION;
  else if (spec.s === 'malformed') session = MALFORMED_SESSION;
  else if (spec.s === 'current' && m.grant) session = m.grant.session;
  else session = last?.session ?? m.grant?.session ?? NEVER_SESSION;
  const g = m.grant && m.grant.session === session ? m.grant : undefined;
  const e = findLast(m.ended, (x) => x.session === session);
  base = g?.generation ?? e?.generation ?? m.lastGeneration ?? 1n;
  acquired = g?.acquired ?? base;
  if (base === 0n) base = 1n;
  const gen: Record<GenRef, bigint> = {
    current: base,
    older: base > 1n ? base - 1n : base,
    acquired,
    newer: base < U64_MAX ? base + 1n : base,
    zero: 0n,
    one: 1n,
    max: U64_MAX,
  };
  return { session, generation: gen[spec.g] };
}

export interface Request {
  spec: Spec;
  /** The body sent (its exact JSON text, the payload the request_id cache compares). */
  payload: string;
  resolved?: Resolved;
  /** A body that is not JSON: the program file (POST /v1/program) or the jog datagram. */
  bytes?: Uint8Array;
}
