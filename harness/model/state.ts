// The model's state and the shapes every state machine shares (harness/model/machines/): what the model
// knows of the cell (ModelConfig, from Describe), what it remembers (ModelState), and an outcome (one
// answer the documents allow, with the state after it and the events the target then owes). Written from
// the documents only (never from sims/).

import type { CheckedReply } from '../oracle/reply.ts';
import type { Rules } from './model.ts';

export const U64_MAX = (1n << 64n) - 1n;

/** The last element matching `pred` (Array.prototype.findLast is ES2023, beyond the project's lib). */
export function findLast<T>(a: readonly T[], pred: (t: T) => boolean): T | undefined {
  for (let i = a.length - 1; i >= 0; i--) if (pred(a[i]!)) return a[i];
  return undefined;
}

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

/** Coverage: count a rule or transition the run reached. */
export function hit(m: ModelState, name: string): void {
  m.hits.set(name, (m.hits.get(name) ?? 0) + 1);
}

/** A refusal: status 409 with one of the allowed leading labels. */
export const reason = (rule: string, label: string | readonly string[], extra: Partial<Outcome> = {}): Outcome => ({
  rule,
  status: 409,
  labels: typeof label === 'string' ? [label] : label,
  ...extra,
});

export function handleOf(m: ModelState, n: bigint | undefined): HandleM | undefined {
  return n === undefined ? undefined : m.handles.get(String(n));
}

/** JSON.stringify replacer for bigints (exact: `5n`). */
export const big = (_k: string, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v);
