// The documented state machines of document 1 as an executable model: the grant (part 2 "Fence",
// "Grant"; part 3 "Grant lifecycle"), trajectory handles (part 3 handle table), the machine operations and
// their start gate (part 4 enable, arm, home, halt, start_trajectory), cell I/O arming (part 4 io_arm,
// io_disarm) and the request_id outcome cache (part 4 "Envelope rules"). Written from the documents only
// (never from sims/): where a document leaves a detail "not shown", the rule follows docs/profile.md and
// is marked PROFILE here, with the section it fills.
//
// The model is non-deterministic where timing is: for each command it gives every outcome the documents
// allow (status, leading label, fields, events that must follow, the state after), and the runner keeps
// the one the target's reply matches (harness/model/run.ts). A lease that may or may not have run out
// gives both worlds; an execution that may or may not have finished is decided by the next observation.
//
// The model is pure data plus functions; harness/model/system.ts talks to the target.

import type { CheckedReply } from '../oracle/reply.ts';

export const U64_MAX = (1n << 64n) - 1n;

/** The last element matching `pred` (Array.prototype.findLast is ES2023, beyond the project's lib). */
export function findLast<T>(a: readonly T[], pred: (t: T) => boolean): T | undefined {
  for (let i = a.length - 1; i >= 0; i--) if (pred(a[i]!)) return a[i];
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Rules: each is a documented (or PROFILE) rule the model applies. A wrong-model variant
// (harness/model/variants.ts) flips one of them; the reference stack must then refute the model.

export interface Rules {
  /** Part 2 Fence: "renew and stop also accept an older nonzero generation not above the current one for the same session". */
  olderGenerationRenewStop: boolean;
  /** Part 3 grant table: acquire makes the generation increase (PROFILE "Grant generation and stop": by exactly one). */
  acquireIncrementsGeneration: boolean;
  /** PROFILE "Grant generation and stop": an admitted stop takes the next generation too ("fenced by Stop and acquisition"). */
  stopIncrementsGeneration: boolean;
  /** Part 4 start gate: Start needs the core armed (part 4 arm: "the motion start gate is checked at every Start"). */
  startGateArmed: boolean;
  /** PROFILE start gate: the trajectory's axes enabled. */
  startGateEnabled: boolean;
  /** PROFILE start gate: axes that require Home homed. */
  startGateHomed: boolean;
  /** Part 3: "started | discard_trajectory | (refused) | reason handle_active". */
  discardStartedRefused: boolean;
  /** Part 3: "prepared | newer preparation committed | superseded". */
  newerPreparationSupersedes: boolean;
  /** Part 3: "prepared | Stop, grant loss or uncertain outcome | retired". */
  grantEndRetiresPrepared: boolean;
  /** Part 4 Envelope rules: "Release, lease expiry and a service restart drop the cache". */
  releaseDropsCache: boolean;
  /** Part 4 Envelope rules: "Changed payload under the same id: request_id_conflict". */
  conflictOnChangedPayload: boolean;
  /** Part 3: "started | completion, or a later execution replaces it | consumed". */
  laterStartConsumes: boolean;
  /** Part 3 grant table, halt: "active trajectory handle and jog generation retired" (and Enable and Arm kept). */
  haltRetiresActive: boolean;
  /** Part 2 Request handle: "owned by the current core incarnation" (PROFILE: another incarnation's handle is unknown_handle). */
  handlesPerIncarnation: boolean;
  /** Part 3 handle table: terminal states "never regain permission": start of a terminal handle answers its state's reason. */
  terminalReasons: boolean;
  /** Part 4 io_arm: "an ON intent needs io_arm first" (io_not_armed at Start, handle kept). */
  startNeedsIoArmForOnIntent: boolean;
  /** Part 7 control_session_stale: "a Stop in flight" refuses other fenced calls while a stop drains. */
  stoppingRefusesMotion: boolean;
  /** Part 8 requested_lease_ms 1..10000; result min(request, ceiling). */
  leaseIsMinOfRequestAndCeiling: boolean;
  /** Part 2 Request: end_jog takes the "exact current nonzero independent jog generation" (not a legacy one). */
  endJogExactIndependent: boolean;
  /** PROFILE start gate: no other lane (an open jog) on the plan's axes (mode_conflict, handle kept). */
  startGateOtherLane: boolean;
  /** Part 3 grant table / part 4 reset_fault: "a submitted reset retires the session". */
  resetRetiresSession: boolean;
  /** Part 3 handle table ("trajectory and program handles"); PROFILE "Programs" Handles: one numbering and one plan slot, so a program preparation supersedes a prepared trajectory handle and the reverse. */
  oneSlotForBothKinds: boolean;
  /** PROFILE "Programs" start_program order: another program executing is program_already_executing (not replaced). */
  programAlreadyExecuting: boolean;
  /** Part 2 Request handle ("nonzero handle for start/discard"); PROFILE "Programs": start_trajectory of a program handle is unknown_handle, the handle kept. */
  startTrajectoryRefusesProgram: boolean;
  /** Part 3 handle table: discard_trajectory acts on program handles too (prepared discarded, started handle_active). */
  discardTakesProgramHandles: boolean;
  /** Part 4 start_program: "Same start gate as start_trajectory" (armed, enabled, homed, io_arm for ON markers). */
  programStartGate: boolean;
  /** Part 8 "Upload slots: one upload of the same kind at a time (busy)": a second upload of the same kind is busy. */
  uploadBusySameKind: boolean;
  /** Part 8 upload slots are per kind: an upload of the other kind is admitted while one is in progress. */
  uploadSlotPerKind: boolean;
  /** Part 2 Request end_jog: "exact current" generation: an older nonzero generation is jog_session_stale. */
  endJogRefusesOlder: boolean;
  /** PROFILE "Jog" local_jog_update: jog_generation must be the open independent one (a legacy jog's is jog_session_stale). */
  updateJogIndependentOnly: boolean;
  /** PROFILE "Jog" local_jog_update: source_sequence strictly increasing per jog generation (jog_frame_out_of_order). */
  updateJogOrdered: boolean;
  /** PROFILE "Jog" local_jog_update: the session and grant generation must be the current grant's (control_session_stale). */
  updateJogFenced: boolean;
  /** PROFILE "Trajectories" Output intents / "Programs": an intent on the first point (sample 0) is applied like any other. */
  firstPointIntentApplied: boolean;
  /** Part 4 arm: "the motion start gate is checked at every Start and jog": begin_jog and jog need the axes armed and enabled. */
  jogGate: boolean;
  /** Part 3 grant table, renew: "owned, lease_ms preserved" (the requested lease, not the default). */
  renewPreservesLease: boolean;
  /**
   * PROFILE "Programs" Output intents (one-cycle bound; fault bit 10, docs/profile.md fault bit table): an
   * intent reached one cycle or more after its due cycle is not applied; the core latches io_marker_late
   * (every output OFF, the execution faulted, io_arm answers io_marker_late until reset_fault).
   */
  markerLateNotApplied: boolean;
  /** The same bound: late is one whole cycle_ns or more; one nanosecond less is on time (applied). */
  markerLateBoundOneCycle: boolean;
}

export const REFERENCE_RULES: Readonly<Rules> = Object.freeze({
  olderGenerationRenewStop: true,
  acquireIncrementsGeneration: true,
  stopIncrementsGeneration: true,
  startGateArmed: true,
  startGateEnabled: true,
  startGateHomed: true,
  discardStartedRefused: true,
  newerPreparationSupersedes: true,
  grantEndRetiresPrepared: true,
  releaseDropsCache: true,
  conflictOnChangedPayload: true,
  laterStartConsumes: true,
  haltRetiresActive: true,
  handlesPerIncarnation: true,
  terminalReasons: true,
  startNeedsIoArmForOnIntent: true,
  stoppingRefusesMotion: true,
  leaseIsMinOfRequestAndCeiling: true,
  endJogExactIndependent: true,
  startGateOtherLane: true,
  resetRetiresSession: true,
  oneSlotForBothKinds: true,
  programAlreadyExecuting: true,
  startTrajectoryRefusesProgram: true,
  discardTakesProgramHandles: true,
  programStartGate: true,
  uploadBusySameKind: true,
  uploadSlotPerKind: true,
  endJogRefusesOlder: true,
  updateJogIndependentOnly: true,
  updateJogOrdered: true,
  updateJogFenced: true,
  firstPointIntentApplied: true,
  jogGate: true,
  renewPreservesLease: true,
  markerLateNotApplied: true,
  markerLateBoundOneCycle: true,
});

// ---------------------------------------------------------------------------------------------
// What the model knows about the cell (from Describe, never from the implementation).

export interface ModelConfig {
  axisCount: number;
  /** Axes whose Describe entry has native_home true (part 4 home). */
  nativeHomeMask: number;
  /** The trajectory axis (one bit): the first axis with native_home (it can be homed, so the gate can pass). */
  trajAxis: number;
  /** Describe max_grant_lease_ms (the cell ceiling, part 8). */
  leaseCeilingMs: number;
  /** Default lease when requested_lease_ms is omitted or 0 (part 8: 500 ms on the LAN profile). */
  defaultLeaseMs: number;
  cycleNs: bigint;
  /** Describe max_jog_input_age_ns, in ms (PROFILE "Jog": an accepted frame's input deadline is capture + this). */
  jogInputAgeMs: number;
  /** Index of the first configured non-torch output, or -1 (part 4 io_arm; Describe io). */
  plainOutput: number;
  /** Index of a torch-class output, or -1. */
  torchOutput: number;
  /** Number of configured outputs (bits at and above are unconfigured). */
  outputCount: number;
  /** Plan length of the model's trajectories, in cycles. */
  planCycles: number;
  /** Why the model's program files do not fit this cell (undefined: they do); see programFit in run.ts. */
  programUnfit?: string;
  /** Name of the output the model's ON marker drives (the first configured non-torch output). */
  plainOutputName?: string;
  rules: Rules;
}

// ---------------------------------------------------------------------------------------------
// State.

export type HandleState = 'prepared' | 'started' | 'consumed' | 'discarded' | 'superseded' | 'retired';
export const TERMINAL: ReadonlySet<HandleState> = new Set(['consumed', 'discarded', 'superseded', 'retired']);
const STATE_REASON: Record<HandleState, string> = {
  prepared: '',
  started: 'handle_started',
  consumed: 'handle_consumed',
  discarded: 'handle_discarded',
  superseded: 'handle_superseded',
  retired: 'handle_retired',
};

export interface HandleM {
  n: bigint;
  state: HandleState;
  /** Core incarnation index (0 the first the model saw). */
  core: number;
  session: string;
  /** The plan carries an ON output intent. */
  ioOn: boolean;
  /** The plan's axis mask (one bit). */
  bit: number;
  /** Position epoch when prepared (a Home or core restart may move the held target). */
  epoch: number;
  /** Core cycle count when started (StepReport cycles), and whether that is exact. */
  startCycle?: bigint;
  /** A program handle (prepare_program); absent for a trajectory. */
  kind?: 'program';
  /** A program's identity, as exact JSON text (start_program finds the newest handle with an equal one). */
  ident?: string;
  /** Plan length in core cycles, when not ModelConfig.planCycles. */
  cycles?: number;
  /** The ON intent is on the first point (sample 0), not a later one. */
  ioAt0?: boolean;
  /** The plan carries an OFF intent (on a later point). */
  ioOff?: boolean;
}

export interface CacheEntry {
  payload: string;
  reply: CheckedReply;
}

export interface LeaseWindow {
  /** Local monotonic ms bounds of the lease deadline (the service's now lies between send and receive). */
  lo: number;
  hi: number;
}

export interface GrantM {
  session: string;
  generation: bigint;
  /** The generation acquire gave (older than `generation` after a stop). */
  acquired: bigint;
  stopping: boolean;
  leaseMs: number;
  controller: string;
  lease: LeaseWindow;
  cache: Map<string, CacheEntry>;
  /** request_id and payload of the acquire that created it (PROFILE idempotent acquire). */
  acquireRid?: { rid: string; payload: string; reply: CheckedReply };
}

export type EndHow = 'released' | 'expired' | 'revoked' | 'retired' | 'restarted';

export interface EndedM {
  session: string;
  generation: bigint;
  how: EndHow;
  /** Kept for a stop drain or revocation (PROFILE "Grant generation and stop"); dropped otherwise. */
  cache?: Map<string, CacheEntry>;
  /** A drain's end seen while the lease may have run out: revoked, or expired (the events tell later). */
  maybeExpired?: boolean;
  /** A core restart while the lease may have run out: its fence may answer as for an expired session too. */
  alsoExpired?: boolean;
}

export interface ModelState {
  grant?: GrantM;
  ended: EndedM[];
  /** Last application generation issued; undefined until the model sees one. */
  lastGeneration?: bigint;
  /** Highest handle number issued before the run started (status at setup). */
  baseHandle: bigint;
  /** Highest handle number issued (model or baseline). */
  maxHandle: bigint;
  handles: Map<string, HandleM>;
  core: number;
  epoch: number;
  enableMask: number;
  armed: boolean;
  homeMask: number;
  ioArmed: boolean;
  faultLatched: boolean;
  /** Fault bit 10 io_marker_late is latched (a late first cycle reached an intent; cleared by reset_fault or a core restart). */
  markerLate?: boolean;
  /** The open jog generation (PROFILE "Jog": numbers 1, 2, 3 ... per core incarnation), with its input deadline as a local time window. */
  jog?: { n: bigint; mode: 'independent' | 'legacy'; bit: number; until: LeaseWindow; originNs?: bigint };
  /** Highest jog generation seen in this core incarnation, and the last legacy one. */
  jogMax?: bigint;
  legacyJog?: bigint;
  /** A stop drains (status grant.draining, PROFILE "Describe and Status fields"): acquire is refused until it ends, even after a release. */
  draining?: boolean;
  /** The machine fields (armed, enable mask, io armed) are not predicted after the last command: the next status read sets them. */
  adopt?: boolean;
  /** Generations whose end (grant_revoked, grant_expired, grant_released) the log has shown. */
  endsSeen?: string[];
  /** Events the target still owes (carried across steps until seen). */
  owed: EventExp[];
  /** An upload held open mid-body (part 8 upload slots), admitted under this fence. */
  upload?: { kind: 'trajectory' | 'program'; session: string; generation: bigint };
  /** The program identities the target gave (newest last), by the model's program file key. */
  identities: Array<{ key: string; text: string; identity: Record<string, unknown> }>;
  /** core.io_output_word as the model predicts it, or 'unknown' (the next status read sets it). */
  outputs: number | 'unknown';
  /** Last source_sequence the ingress accepted for the open jog generation (local_jog_update). */
  jogSeq?: bigint;
  /** Coverage: rule and transition names this run exercised. */
  hits: Map<string, number>;
}

export function initialState(o: { baseHandle: bigint; homeMask: number; lastGeneration?: bigint }): ModelState {
  return {
    ended: [],
    lastGeneration: o.lastGeneration,
    baseHandle: o.baseHandle,
    maxHandle: o.baseHandle,
    handles: new Map(),
    core: 0,
    epoch: 0,
    enableMask: 0,
    armed: false,
    homeMask: o.homeMask,
    ioArmed: false,
    faultLatched: false,
    owed: [],
    identities: [],
    outputs: 'unknown',
    hits: new Map(),
  };
}

export function cloneState(s: ModelState): ModelState {
  return structuredClone(s);
}

// ---------------------------------------------------------------------------------------------
// Commands as data: what the generator draws and a failing run prints. References ("current", "older")
// are resolved against the model when the command runs, so a shrunk sequence stays meaningful.

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

// ---------------------------------------------------------------------------------------------
// Outcomes.

/** An event the target must publish (or may, when `may`). */
export interface EventExp {
  type: string;
  /** Fields the event's payload must carry. */
  where?: { generation?: bigint; stopping?: boolean; handle?: bigint; from?: string; to?: string; label?: string; jogGeneration?: bigint; why?: string };
  may?: boolean;
  /** Other event types that settle it (a drain's end may be told as a revocation or an expiry). */
  alt?: readonly string[];
  /** Commands left before a missing must-event is a failure. */
  ttl?: number;
  why: string;
}

export interface Outcome {
  /** Rule or transition names this outcome exercises (coverage and the failure text). */
  rule: string;
  status: 200 | 409;
  /** Allowed leading labels (409). */
  labels?: readonly string[];
  /** A remembered reply that must come back byte for byte (request_id replay). */
  replay?: CheckedReply;
  /** Further checks of the reply; a string is the mismatch. */
  check?: (r: CheckedReply) => string | undefined;
  /** The state after, given the reply (mutates the clone it is given). */
  next?: (m: ModelState, r: CheckedReply) => void;
  events?: EventExp[];
}

/** Local monotonic ms when the request was sent and its reply came. */
export interface Times {
  sendMs: number;
  recvMs: number;
}

/** Whether the current grant's lease surely holds, surely ran out, or may have, at local time `t`. */
export function leaseAt(g: GrantM, sendMs: number, recvMs: number): 'alive' | 'lapsed' | 'maybe' {
  const slackMs = 2;
  if (recvMs < g.lease.lo - slackMs) return 'alive';
  if (sendMs > g.lease.hi + slackMs) return 'lapsed';
  return 'maybe';
}

function hit(m: ModelState, name: string): void {
  m.hits.set(name, (m.hits.get(name) ?? 0) + 1);
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

/** Part 3: a Stop or grant loss retires the grant's prepared handle and its started one. */
export function retireHandles(c: ModelConfig, m: ModelState, session: string, events: EventExp[], why: string): void {
  for (const h of m.handles.values()) {
    if (h.session !== session || h.core !== m.core) continue;
    if (h.state === 'prepared' && c.rules.grantEndRetiresPrepared) {
      h.state = 'retired';
      events.push({ type: 'handle_transition', where: { handle: h.n, from: 'prepared', to: 'retired' }, why: `${why}: prepared handle ${h.n} retired` });
      hit(m, 'transition:handle:prepared->retired:stop_or_grant_loss');
    }
    if (h.state === 'started') {
      // Started at grant end: retired with execution_aborted, unless it finished first (timing).
      h.state = 'retired';
      events.push({ type: 'handle_transition', where: { handle: h.n, from: 'started', to: 'retired' }, why: `${why}: started handle ${h.n} retired`, may: true });
      events.push({ type: 'execution_aborted', where: { handle: h.n }, why: `${why}: execution of ${h.n} aborted`, may: true });
      hit(m, 'transition:handle:started->retired:stop');
    }
  }
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

const reason = (rule: string, label: string | readonly string[], extra: Partial<Outcome> = {}): Outcome => ({
  rule,
  status: 409,
  labels: typeof label === 'string' ? [label] : label,
  ...extra,
});

/** The grant payload of a grant event (part 6: grant has generation and stopping). */
const grantEv = (type: string, generation: bigint, stopping: boolean, why: string, may = false): EventExp => ({ type, where: { generation, stopping }, why, ...(may ? { may } : {}) });

export interface Request {
  spec: Spec;
  /** The body sent (its exact JSON text, the payload the request_id cache compares). */
  payload: string;
  resolved?: Resolved;
  /** A body that is not JSON: the program file (POST /v1/program) or the jog datagram. */
  bytes?: Uint8Array;
}

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

function lapse(c: ModelConfig, m: ModelState): ModelState {
  const w = cloneState(m);
  applyLapse(c, w);
  return w;
}

function applyLapse(c: ModelConfig, s: ModelState): void {
  if (!s.grant) return;
  hit(s, 'transition:grant:owned->no_grant:lease_expiry');
  const evs: EventExp[] = [];
  endGrant(c, s, 'expired', evs, 'lease expiry');
  s.owed.push(...evs.map((e) => ({ ...e, may: true })));
}

function cacheOf(m: ModelState, session: string): Map<string, CacheEntry> | undefined {
  if (m.grant?.session === session) return m.grant.cache;
  return findLast(m.ended, (x) => x.session === session)?.cache;
}

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
  // The retry cache (part 4 Envelope rules): same id and payload replays the remembered reply; a changed
  // payload is request_id_conflict. PROFILE "Grant generation and stop": for the current session the
  // fence is checked first; an ended session whose cache is kept answers from it.
  // PROFILE "prepare_trajectory uploads": the upload slot is reserved at admission, with the fence and
  // before the whole payload is read, so busy comes before the retry cache (and is not remembered).
  if (spec.op === 'prepare_trajectory' && fence.startsWith('ok') && !fence.endsWith('stopping')) {
    if (m.upload?.kind === 'trajectory' && c.rules.uploadBusySameKind) return [reason('limit:upload_slots_per_kind:busy', 'busy')];
    if (m.upload?.kind === 'program' && !c.rules.uploadSlotPerKind) return [reason('limit:upload_slots_per_kind:global', 'busy')];
  }
  const cache = rid !== undefined ? cacheOf(m, f.session) : undefined;
  const entry = rid !== undefined ? cache?.get(RID[rid]) : undefined;
  const current = m.grant?.session === f.session && !lapsed;
  // PROFILE "prepare_trajectory uploads": an upload is admitted on its prefix (the fence) before the rest
  // is read, so the retry cache, which compares whole payloads, comes after the fence for it.
  const fenceFirst = current || spec.op === 'prepare_trajectory';
  if (entry && (fenceFirst ? fence.startsWith('ok') : true)) {
    if (entry.payload === req.payload) {
      const alts: Outcome[] = [{ rule: 'idempotency.join_or_replay', status: entry.reply.status as 200 | 409, replay: entry.reply }];
      return alts;
    }
    if (c.rules.conflictOnChangedPayload) return [reason('idempotency.conflict', 'request_id_conflict')];
  }
  if (entry && current && spec.op !== 'prepare_trajectory' && !fence.startsWith('ok') && entry.payload === req.payload) {
    // A retry whose fence no longer holds (the session is stopping now): the fence refusal or the replay.
    return [reason(`fence:${spec.op}`, fence), { rule: 'idempotency.join_or_replay', status: entry.reply.status as 200 | 409, replay: entry.reply }];
  }
  if (!fence.startsWith('ok')) {
    // An ended session that may have ended by expiry instead: that fence label too.
    const ended = m.grant?.session === f.session ? undefined : findLast(m.ended, (x) => x.session === f.session);
    if (ended?.maybeExpired || ended?.alsoExpired) {
      const alt = cloneState(m);
      findLast(alt.ended, (x) => x.session === f.session)!.how = 'expired';
      const other = fenceCheck(c, alt, spec.op, f, lapsed);
      if (other !== fence && !other.startsWith('ok')) return [reason(`fence:${spec.op}:${fence}`, [fence, other])];
    }
    return [reason(`fence:${spec.op}:${fence}`, fence)];
  }
  const remember = (o: Outcome): Outcome => {
    if (rid === undefined) return o;
    const base = o.next;
    return {
      ...o,
      next: (s, r) => {
        // Remember on the session the request was made on (a stop keeps its session while it drains).
        const cc = cacheOf(s, f.session) ?? (s.grant?.session === f.session ? s.grant.cache : undefined);
        base?.(s, r);
        const after = cacheOf(s, f.session) ?? cc;
        after?.set(RID[rid], { payload: req.payload, reply: r });
      },
    };
  };
  return operation(c, m, req, fence === 'ok_stopping', cycles, t).map(remember);
}

function acquire(c: ModelConfig, m: ModelState, req: Request): Outcome[] {
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

export function labelText(k: 'ok' | 'other' | 'empty' | 'max' | 'over'): string {
  return { ok: 'model-mark', other: 'model-mark-2', empty: '', max: 'é'.repeat(64), over: 'é'.repeat(64) + 'x' }[k];
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

function handleOf(m: ModelState, n: bigint | undefined): HandleM | undefined {
  return n === undefined ? undefined : m.handles.get(String(n));
}

/** PROFILE "Trajectories" Handles: the last 64 handles are kept; an older one may be forgotten (unknown_handle). */
export const HANDLES_KEPT = 64n;
const forgotten = (m: ModelState, h: HandleM) => h.n + HANDLES_KEPT <= m.maxHandle;

/** The operation itself, once the fence passed (and no cached reply answered). */
function operation(c: ModelConfig, m: ModelState, req: Request, stopping: boolean, cycles: bigint, t: Times): Outcome[] {
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
    case 'enable': {
      if (f.mask! >>> c.axisCount !== 0) return [reason('op.enable:outside', 'native_rejected')]; // PROFILE enable
      // A latched fault on a selected axis (the run's faults are on the plan's axis) refuses the enable.
      if (m.faultLatched && (f.mask! & (1 << c.trajAxis)) !== 0) return [reason('op.enable:fault', 'not_ready')];
      return [
        {
          rule: f.mask === 0 ? 'op.enable:zero' : 'op.enable',
          status: 200,
          next: (s) => {
            s.enableMask = f.mask!;
            if (f.mask === 0) s.armed = false; // PROFILE enable: 0 disables every axis and disarms
          },
        },
      ];
    }
    case 'arm': {
      if (m.enableMask === 0) return [reason('op.arm:no_enabled_axes', ['not_ready', 'native_rejected'])]; // PROFILE arm
      if (m.faultLatched) return [reason('op.arm:fault', 'not_ready')];
      return [{ rule: 'rule:op.arm.core_armed', status: 200, next: (s) => void (s.armed = true) }];
    }
    case 'home': {
      const mask = f.mask!;
      if (mask === 0 || mask >>> c.axisCount !== 0 || (mask & ~c.nativeHomeMask) !== 0) return [reason('rule:op.home.axis_mask', 'invalid_axis_mask')];
      // Part 4 home: with an anchor directory configured (not visible in Describe), success also captures
      // anchors, refused anchor_source_invalid when it finds the machine armed or enabled.
      const capture: Outcome[] =
        m.armed || (m.enableMask & ~mask) !== 0
          ? [reason('op.home:anchor_source_invalid', 'anchor_source_invalid', { next: (s) => void (s.adopt = true) })]
          : [];
      return [
        ...capture,
        {
          rule: 'rule:machine_effect.home_leaves_axes_disabled',
          status: 200,
          next: (s) => {
            s.homeMask |= mask;
            s.enableMask &= ~mask;
            s.armed = false; // PROFILE home: the cell is left disarmed
            s.epoch++;
          },
        },
      ];
    }
    case 'halt': {
      if (!m.armed || m.enableMask === 0 || m.faultLatched) return [reason('op.halt:inhibited', 'inhibited')];
      return [
        {
          rule: 'transition:grant:owned->owned:halt',
          status: 200,
          next: (s) => {
            if (s.jog) {
              s.owed.push({ type: 'jog_end', where: { jogGeneration: s.jog.n }, why: 'halt closes the jog generation', may: true });
              s.jog = undefined;
            }
            // A halted plan's intents may or may not have been reached: read the outputs from status.
            if ([...s.handles.values()].some((h) => h.state === 'started' && (h.ioOn || h.ioOff))) s.outputs = 'unknown';
            if (!c.rules.haltRetiresActive) return;
            for (const h of s.handles.values()) {
              if (h.state === 'started') {
                h.state = 'retired';
                s.owed.push({ type: 'handle_transition', where: { handle: h.n, from: 'started', to: 'retired' }, why: `halt retired ${h.n}`, may: true });
                s.owed.push({ type: 'execution_aborted', where: { handle: h.n }, why: `halt aborted ${h.n}`, may: true });
              }
            }
          },
        },
      ];
    }
    case 'begin_jog':
    case 'jog':
    case 'end_jog':
      return jogOutcomes(c, m, req, t);
    case 'reset_fault':
      // PROFILE "Programs" Machine operations: while a program executes, program_already_executing first.
      return unlessProgram(c, m, cycles, 'reason:program_already_executing:reset_fault', 'program_already_executing', (w) => resetFault(c, w));
  }
  return operationRest(c, m, req, stopping, cycles, t);
}

function resetFault(c: ModelConfig, m: ModelState): Outcome[] {
  {
      // PROFILE "Machine operations": inhibited idle is not armed, no jog, no Home or commissioning.
      if (m.armed || m.jog) return [reason('reason:reset_requires_inhibited', 'reset_requires_inhibited')];
      return [
        {
          rule: 'transition:grant:owned->session_retired:reset_fault',
          status: 200,
          check: (r) => {
            const d = r.reply.data as { reset_sequence?: bigint; reason?: string } | undefined;
            if (!d) return 'reset_fault answered without RecoveryStatus';
            if (r.reply.sequence === undefined || d.reset_sequence !== r.reply.sequence) return `RecoveryStatus.reset_sequence ${String(d.reset_sequence)} differs from the reply's sequence ${String(r.reply.sequence)}`;
            if (d.reason !== '') return `RecoveryStatus.reason ${JSON.stringify(d.reason)}: the injected condition was cleared, nothing persists`;
            return undefined;
          },
          next: (s) => {
            const evs: EventExp[] = [];
            if (c.rules.resetRetiresSession) endGrant(c, s, 'retired', evs, 'reset_fault retired the session');
            s.owed.push(...evs, { type: 'grant_revoked', why: 'the retired session', may: true });
            s.faultLatched = false;
            s.markerLate = false;
            s.adopt = true;
          },
        },
      ];
  }
}

/** The operations after the machine operations (cell I/O, telemetry marks, handles). */
function operationRest(c: ModelConfig, m: ModelState, req: Request, stopping: boolean, cycles: bigint, t: Times): Outcome[] {
  const spec = req.spec as FencedSpec;
  const g = m.grant!;
  const f = req.resolved!;
  void stopping;
  switch (spec.op) {
    case 'io_arm':
      if (c.plainOutput < 0) return [reason('reason:io_not_configured', 'io_not_configured')];
      if (m.markerLate) return [reason('reason:io_marker_late', 'io_marker_late')];
      return [{ rule: 'rule:op.io_arm.drive_conditions', status: 200, next: (s) => {
        s.ioArmed = true;
        // While a plan with intents runs, what re-arming does to an intent already passed is not shown: the
        // outputs are read from status until the plan ends (docs/profile.md "Model-based runs" Outputs; hil fuzz seed 683671540).
        if ([...s.handles.values()].some((h) => h.state === 'started' && h.core === s.core && (h.ioOn || h.ioOff))) s.outputs = 'unknown';
      } }];
    case 'io_disarm':
      if (c.plainOutput < 0) return [reason('reason:io_not_configured', 'io_not_configured')];
      return [{ rule: 'rule:op.io_disarm.clears', status: 200, next: (s) => {
        s.ioArmed = false;
        s.outputs = 0; // PROFILE "Trajectories" Output intents: io_disarm turns every output OFF
      } }];
    case 'mark_telemetry': {
      const text = labelText(spec.label);
      const n = Buffer.byteLength(text);
      if (n < 1 || n > 128) return [reason('limit:label_bytes', 'telemetry_label_invalid')];
      return [{ rule: 'rule:op.mark_telemetry.event', status: 200, check: (r) => (r.reply.sequence === undefined ? 'mark_telemetry answered without sequence' : undefined), events: [{ type: 'telemetry_mark', where: { label: text }, why: 'mark_telemetry accepted' }] }];
    }
    case 'prepare_trajectory': {
      // PROFILE "prepare_trajectory uploads": admission (fence, then the upload slot) comes before the points are read.
      if (m.upload?.kind === 'trajectory' && c.rules.uploadBusySameKind) return [reason('limit:upload_slots_per_kind:busy', 'busy')];
      if (m.upload?.kind === 'program' && !c.rules.uploadSlotPerKind) return [reason('limit:upload_slots_per_kind:global', 'busy')];
      // PROFILE "Trajectories" point rules: an io bit naming an unconfigured output, or a torch output.
      if (spec.io === 'unconfigured') return [reason('prepare:io_unconfigured', 'io_not_configured')];
      if (spec.io === 'torch') return [reason('prepare:io_torch', 'io_torch_unqualified')];
      if ((spec.io === 'on' || spec.io === 'on0' || spec.io === 'off') && c.plainOutput < 0) return [reason('prepare:io_unconfigured', 'io_not_configured')];
      return [prepared(c, m, 'trajectory', { ioOn: spec.io === 'on' || spec.io === 'on0', ioAt0: spec.io === 'on0', ioOff: spec.io === 'off', bit: planBit(c, spec.axis) }, g.session)];
    }
    case 'prepare_program': {
      // PROFILE "Program admission" route order after the fence: busy, program_already_executing, then the file.
      if (m.upload?.kind === 'program' && c.rules.uploadBusySameKind) return [reason('limit:upload_slots_per_kind:busy', 'busy')];
      if (m.upload?.kind === 'trajectory' && !c.rules.uploadSlotPerKind) return [reason('limit:upload_slots_per_kind:global', 'busy')];
      return unlessProgram(c, m, cycles, 'reason:program_already_executing:prepare', 'program_already_executing', (w) => {
        if (spec.prog === 'no_id') return [reason('reason:program_identity_missing', 'program_identity_missing')];
        return [prepared(c, w, 'program', { ioOn: spec.prog === 'on', ioAt0: spec.prog === 'on', ioOff: false, bit: planBit(c, undefined), prog: spec.prog }, g.session)];
      });
    }
    case 'start_program':
      return startProgram(c, m, f, cycles, t);
    case 'start_trajectory':
    case 'discard_trajectory': {
      const start = spec.op === 'start_trajectory';
      const h = handleOf(m, f.handle);
      if (!h || (h.core !== m.core && c.rules.handlesPerIncarnation)) return [reason('reason:unknown_handle', 'unknown_handle')];
      // A handle out of the kept window (only a terminal one can be that old): its reason, or forgotten.
      if (forgotten(m, h) && TERMINAL.has(h.state)) return [reason(`rule:handle.terminal_never_regain:${h.state}`, [c.rules.terminalReasons ? STATE_REASON[h.state] : 'unknown_handle', 'unknown_handle'])];
      // A program handle is started by identity (start_program); start_trajectory does not know it, and
      // keeps it prepared (PROFILE "Programs"). discard_trajectory acts on both kinds (part 3 handle table).
      if (h.kind === 'program' && start && c.rules.startTrajectoryRefusesProgram) return [reason('reason:unknown_handle:program_handle', 'unknown_handle', { next: () => undefined })];
      if (h.kind === 'program' && !start && !c.rules.discardTakesProgramHandles) return [reason('reason:unknown_handle:program_handle', 'unknown_handle')];
      if (h.state === 'started') {
        if (start) return [reason('reason:handle_started', 'handle_started')];
        if (c.rules.discardStartedRefused) return [reason(`transition:handle:started->refused:discard${h.kind ? ' (program)' : ''}`, 'handle_active')];
      }
      if (TERMINAL.has(h.state)) {
        const label = STATE_REASON[h.state];
        if (c.rules.terminalReasons) return [reason(`rule:handle.terminal_never_regain:${h.state}`, label)];
        return [reason(`rule:handle.terminal_never_regain:${h.state}`, 'unknown_handle')];
      }
      if (!start) {
        if (h.state === 'started') {
          // Only reached by the wrong-model variant that accepts discard of a started handle.
          return [{ rule: 'discard:started', status: 200, next: (s) => void (handleOf(s, h.n)!.state = 'discarded') }];
        }
        return [
          {
            rule: `transition:handle:prepared->discarded:discard${h.kind ? ' (program)' : ''}`,
            status: 200,
            next: (s) => void (handleOf(s, h.n)!.state = 'discarded'),
            events: [{ type: 'handle_transition', where: { handle: h.n, from: 'prepared', to: 'discarded' }, why: 'discard of a prepared handle' }],
          },
        ];
      }
      return startGate(c, m, h, h.bit, cycles, t, spec.late);
    }
  }
  throw new Error(`no model for ${(spec as Spec).op}`);
}

/** The axis bit of a plan: the first native-home axis, or the last one. */
export function planBit(c: ModelConfig, axis: 'first' | 'last' | undefined): number {
  if (axis === 'last') {
    for (let i = c.axisCount - 1; i >= 0; i--) if (c.nativeHomeMask & (1 << i)) return 1 << i;
  }
  return 1 << c.trajAxis;
}

/** A program executes in this core incarnation (a started program handle). */
export function programExecuting(m: ModelState): HandleM | undefined {
  return [...m.handles.values()].find((h) => h.kind === 'program' && h.state === 'started' && h.core === m.core);
}

/**
 * Whether a started program surely still executes at core cycle `cycles`, or may have completed (its end
 * is observed in status later): 'maybe' once the plan's cycles may have run (same bound as run.ts checkHandles).
 */
export function programRunning(c: ModelConfig, m: ModelState, cycles: bigint): 'no' | 'yes' | 'maybe' {
  const h = programExecuting(m);
  if (!h) return 'no';
  const ran = cycles - (h.startCycle ?? cycles);
  return ran < BigInt(h.cycles ?? c.planCycles) - 25n ? 'yes' : 'maybe';
}

/**
 * The outcomes in the world where a started program still executes and, when it may have ended by now,
 * also in the world where it completed (consumed, its events owed; the next status read confirms which).
 */
function programWorlds(c: ModelConfig, m: ModelState, cycles: bigint, f: (w: ModelState) => Outcome[]): Outcome[] {
  if (programRunning(c, m, cycles) !== 'maybe') return f(m);
  const done = cloneState(m);
  programExecuting(done)!.state = 'consumed';
  const complete = (s: ModelState) => {
    const x = programExecuting(s);
    if (!x) return;
    x.state = 'consumed';
    s.owed.push({ type: 'handle_transition', where: { handle: x.n, from: 'started', to: 'consumed' }, why: `${x.n} completed` }, { type: 'execution_completed', where: { handle: x.n }, why: `${x.n} completed` });
  };
  return [...f(m), ...f(done).map((o) => ({ ...o, rule: `${o.rule} (program completed first)`, next: (s: ModelState, r: CheckedReply) => { complete(s); o.next?.(s, r); } }))];
}

/** `label` while a program executes (PROFILE "Programs"), otherwise `rest`. */
function unlessProgram(c: ModelConfig, m: ModelState, cycles: bigint, rule: string, label: string, rest: (w: ModelState) => Outcome[]): Outcome[] {
  return programWorlds(c, m, cycles, (w) => (programExecuting(w) && c.rules.programAlreadyExecuting ? [reason(rule, label)] : rest(w)));
}

/**
 * An accepted preparation (part 3 "(none) -> prepared"): the next number of the shared numbering (PROFILE
 * "Trajectories" Handles), superseding the prepared handle (of either kind: one plan slot, PROFILE
 * "Programs" Handles). A trajectory's reply carries the handle; a program's does not ("response carries
 * handle for trajectories"), so its number is checked in the handle_transition event and in status.
 */
function prepared(c: ModelConfig, m: ModelState, kind: 'trajectory' | 'program', plan: { ioOn: boolean; ioAt0: boolean; ioOff: boolean; bit: number; prog?: ProgRef }, session: string): Outcome {
  const program = kind === 'program';
  const expected = m.maxHandle + 1n;
  return {
    rule: program ? 'transition:handle:none->prepared:prepare_program' : 'transition:handle:none->prepared:prepare',
    status: 200,
    check: (r) => {
      if (program) {
        const d = r.reply.data as Record<string, unknown> | undefined;
        if (!d || typeof d.identity !== 'object' || d.identity === null) return 'prepare_program answered without data.identity';
        if (r.reply.handle !== undefined) return `prepare_program answered handle ${r.reply.handle} (part 3: the reply carries a handle for trajectories)`;
        if (d.requires_process_io !== plan.ioOn) return `Program.requires_process_io ${String(d.requires_process_io)}, expected ${plan.ioOn}`;
        if (BigInt(d.axis_mask as bigint) !== BigInt(plan.bit)) return `Program.axis_mask ${String(d.axis_mask)}, expected ${plan.bit}`;
        return undefined;
      }
      const h = r.reply.handle;
      if (h === undefined || h === 0n) return 'prepare_trajectory answered without a handle';
      if (h <= m.maxHandle) return `handle ${h} is not above every handle issued before (${m.maxHandle}); PROFILE: numbers 1, 2, 3 ... per adapter incarnation`;
      if (m.maxHandle > m.baseHandle && h !== expected) return `handle ${h}, expected ${expected} (PROFILE: numbers 1, 2, 3 ... shared)`;
      return undefined;
    },
    next: (s, r) => {
      const n = program ? s.maxHandle + 1n : r.reply.handle!;
      if (c.rules.newerPreparationSupersedes) {
        for (const h of s.handles.values()) {
          if (h.state !== 'prepared') continue;
          if (!c.rules.oneSlotForBothKinds && (h.kind === 'program') !== program) continue;
          h.state = 'superseded';
          s.owed.push({ type: 'handle_transition', where: { handle: h.n, from: 'prepared', to: 'superseded' }, why: `newer preparation superseded ${h.n}` });
          hit(s, `transition:handle:prepared->superseded:newer_preparation${(h.kind === 'program') !== program ? ' (other kind)' : ''}`);
        }
      }
      const rec: HandleM = { n, state: 'prepared', core: s.core, session, ioOn: plan.ioOn, epoch: s.epoch, bit: plan.bit, ...(plan.ioAt0 ? { ioAt0: true } : {}), ...(plan.ioOff ? { ioOff: true } : {}) };
      if (program) {
        const identity = (r.reply.data as { identity: Record<string, unknown> }).identity;
        const text = JSON.stringify(identity, big);
        rec.kind = 'program';
        rec.ident = text;
        s.identities = [...s.identities.filter((x) => x.key !== plan.prog), { key: plan.prog!, text, identity }];
      }
      s.handles.set(String(n), rec);
      s.maxHandle = n;
    },
    events: [{ type: 'handle_transition', where: { from: '', to: 'prepared', ...(program ? { handle: expected } : {}) }, why: `${kind} prepared` }],
  };
}

/** start_program (part 4; PROFILE "Programs" start_program lookup and order). */
function startProgram(c: ModelConfig, m: ModelState, f: Resolved, cycles: bigint, t: Times): Outcome[] {
  return programWorlds(c, m, cycles, (w) => startProgramIn(c, w, f, cycles, t));
}

function startProgramIn(c: ModelConfig, m: ModelState, f: Resolved, cycles: bigint, t: Times): Outcome[] {
  const g = m.grant!;
  // The newest program handle with an equal identity among the handles the adapter keeps (the last 64).
  const h = findLast([...m.handles.values()], (x) => x.kind === 'program' && x.ident === f.ident && !forgotten(m, x));
  if (h?.state === 'started') return [reason('reason:handle_started:program', 'handle_started')];
  const running = programExecuting(m);
  if (running && c.rules.programAlreadyExecuting) return [reason('reason:program_already_executing', 'program_already_executing')];
  if (!h) return [reason('reason:program_identity_mismatch', 'program_identity_mismatch')];
  if (h.core !== m.core) return [reason('reason:unknown_handle:program', 'unknown_handle')];
  // An earlier grant's handle is terminal (grant end retires it) and answers its state's reason, as for
  // trajectories (PROFILE "Trajectories" Handles; the "Programs" order names unknown_handle for another
  // grant first, which only a non-terminal handle of another grant could reach).
  if (TERMINAL.has(h.state)) return [reason(`rule:handle.terminal_never_regain:${h.state} (program)`, c.rules.terminalReasons ? STATE_REASON[h.state] : 'unknown_handle')];
  if (h.session !== g.session) return [reason('reason:unknown_handle:program', 'unknown_handle')];
  return startGate(c, m, h, h.bit, cycles, t);
}

/** Part 4 start gate (PROFILE "Trajectories": its preconditions and their order). */
function startGate(c: ModelConfig, m: ModelState, h: HandleM, bit: number, cycles: bigint, t: Times, late?: 'cycle' | 'under'): Outcome[] {
  const kept = (rule: string, label: string): Outcome => reason(rule, label, { next: () => undefined });
  // Another lane on the plan's axes (an open jog) is mode_conflict, handle kept (PROFILE start gate); a jog
  // whose input may have expired may be gone.
  const jog = m.jog && (m.jog.bit & bit) !== 0 && c.rules.startGateOtherLane ? jogAt(m, t) : 'none';
  if (jog === 'alive') return [kept('transition:handle:prepared->prepared:start_refused:jog', 'mode_conflict')];
  if (jog === 'maybe') {
    const gone = cloneState(m);
    gone.jog = undefined;
    return [kept('transition:handle:prepared->prepared:start_refused:jog', 'mode_conflict'), ...startGate(c, gone, h, bit, cycles, t, late).map((o) => ({ ...o, next: (s: ModelState, r: CheckedReply) => { s.jog = undefined; o.next?.(s, r); } }))];
  }
  const prog = h.kind === 'program' ? ' (program)' : '';
  const gate = h.kind !== 'program' || c.rules.programStartGate;
  if (m.faultLatched) return [kept(`transition:handle:prepared->prepared:start_refused:fault${prog}`, 'not_ready')];
  if (gate && c.rules.startGateArmed && !m.armed) return [kept(`transition:handle:prepared->prepared:start_refused:not_armed${prog}`, 'not_ready')];
  if (gate && c.rules.startGateEnabled && (m.enableMask & bit) === 0) return [kept(`transition:handle:prepared->prepared:start_refused:not_enabled${prog}`, 'not_ready')];
  if (gate && c.rules.startGateHomed && (m.homeMask & bit) === 0) return [kept(`transition:handle:prepared->prepared:start_refused:not_homed${prog}`, 'not_ready')];
  const started: Outcome = {
    rule: `transition:handle:prepared->started:start${prog}`,
    status: 200,
    check: (r) => (r.reply.sequence === undefined ? 'start_trajectory answered without sequence' : undefined),
    next: (s) => {
      for (const o of s.handles.values()) {
        if (o.state === 'started' && o.n !== h.n && c.rules.laterStartConsumes) {
          o.state = 'consumed';
          s.owed.push({ type: 'handle_transition', where: { handle: o.n, from: 'started', to: 'consumed' }, why: `a later start replaced ${o.n}` });
          s.owed.push({ type: 'execution_completed', where: { handle: o.n }, why: `a later start replaced ${o.n}` });
          hit(s, 'transition:handle:started->consumed:completion (replaced)');
          // The replaced plan's intents may or may not have been reached.
          if (o.ioOn || o.ioOff) s.outputs = 'unknown';
        }
      }
      const x = handleOf(s, h.n)!;
      x.state = 'started';
      x.startCycle = cycles;
      // Its intents act while it runs: the outputs are known again at completion (run.ts checkHandles).
      if (x.ioOn || x.ioOff) s.outputs = 'unknown';
    },
    events: [
      { type: 'handle_transition', where: { handle: h.n, from: 'prepared', to: 'started' }, why: 'start accepted' },
      { type: 'execution_started', where: { handle: h.n }, why: 'start accepted' },
    ],
  };
  // The first cycle woken late (out of band) reaches an intent on point 0 one cycle or more after it was
  // due: not applied, fault bit 10 io_marker_late latched in that cycle (PROFILE "Programs" Output intents).
  const lateBy = late === 'cycle' ? 1 : late === 'under' ? 0 : -1;
  const isLate = lateBy === 1 || (lateBy === 0 && !c.rules.markerLateBoundOneCycle);
  if (isLate && h.ioOn && h.ioAt0 && m.ioArmed && c.rules.markerLateNotApplied) {
    const next = started.next!;
    started.rule = `${started.rule} (first cycle late: io_marker_late)`;
    started.next = (s, r) => {
      next(s, r);
      const x = handleOf(s, h.n)!;
      x.state = 'retired';
      s.outputs = 0;
      s.markerLate = true;
      s.faultLatched = true;
      // The fault reaction's effect on arm and enable is read from status (as after an injected fault).
      s.adopt = true;
      hit(s, 'profile:io.marker_late');
      s.owed.push({ type: 'handle_transition', where: { handle: h.n, from: 'started', to: 'retired' }, why: `io_marker_late retired ${h.n}` }, { type: 'execution_faulted', where: { handle: h.n }, why: `io_marker_late faulted ${h.n}` });
    };
  } else if (late !== undefined && h.ioOn && h.ioAt0 && m.ioArmed) {
    hit(m, `profile:io.marker_late (${late === 'under' ? 'one ns under the bound: applied' : 'not reached'})`);
  }
  const out: Outcome[] = [];
  // The held target may have moved since the plan was made (Home, core restart): the gate's "first point
  // at the held target" may refuse (PROFILE), handle kept.
  if (h.epoch !== m.epoch) out.push(kept('transition:handle:prepared->prepared:start_refused:held_target', 'not_ready'));
  if (h.ioOn && c.rules.startNeedsIoArmForOnIntent && gate && !m.ioArmed) return [...out, kept(`transition:handle:prepared->prepared:start_refused:io_not_armed${prog}`, 'io_not_armed')];
  return [...out, started];
}

/** A stop drained: the grant is revoked (part 3 "stopping, then revoked"). */
export function drained(c: ModelConfig, s: ModelState): void {
  if (!s.grant?.stopping) return;
  hit(s, 'transition:grant:stopping->revoked:drain');
  const evs: EventExp[] = [];
  endGrant(c, s, 'revoked', evs, 'stop drained');
  s.owed.push(...evs);
}

// ---------------------------------------------------------------------------------------------
// Jog (part 3 "Jog session"; part 4 begin_jog, end_jog, jog; PROFILE "Jog").

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

function jogOutcomes(c: ModelConfig, m: ModelState, req: Request, t: Times): Outcome[] {
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
function updateJog(c: ModelConfig, m: ModelState, req: Request, lapsed: boolean, t: Times): Outcome[] {
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

// ---------------------------------------------------------------------------------------------
// Matching a reply against the outcomes.

export function matches(o: Outcome, r: CheckedReply): string | undefined {
  if (o.replay) {
    const a = JSON.stringify(o.replay.reply, big);
    const b = JSON.stringify(r.reply, big);
    if (r.status !== o.replay.status || a !== b) return `expected the remembered reply ${o.replay.status} ${a}, got ${r.status} ${b}`;
    return undefined;
  }
  if (r.status !== o.status) return `status ${r.status} ${r.label ?? ''}, expected ${o.status}${o.labels ? ` ${o.labels.join('|')}` : ''}`;
  if (o.status === 409 && o.labels && !o.labels.includes(r.label ?? '')) return `label ${r.label}, expected ${o.labels.join('|')}`;
  return o.check?.(r);
}

export const big = (_k: string, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v);

export function describeOutcome(o: Outcome): string {
  if (o.replay) return `replay of ${o.replay.status} ${o.replay.label ?? ''} (${o.rule})`;
  return `${o.status}${o.labels ? ` ${o.labels.join('|')}` : ''} (${o.rule})`;
}
