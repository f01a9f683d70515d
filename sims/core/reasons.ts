// The one reason registry of the reference system: every numeric reason the core and the service
// exchange, with its name, the catalogue label a refusal carries (document 1 part 7), and the modules
// that decide it. From a label, find its row here; `decidedBy` names the files whose checks return it.
//
//   native reasons  CommandResult.Reason (document 1 part 2; 2, 5, 7, 8 documented, the rest
//                   docs/profile.md "Native commands")
//   jog reasons     JogObservation StateReason / ControlReason / UpdateReason and the jog ingress counts
//                   (15 documented, the rest docs/profile.md "Jog")
//
// Which native reasons an operation answers under their own label is the operation's business (its
// reason list in document 1 part 4): sims/service/machine.ts for machine operations, native-labels.ts
// for the motion operations; every other reason is `native_rejected` with the receipt in native_result.
// sims/core/reasons.test.ts holds each `label` to the catalogue.

/** One reason: its code, its catalogue label (null: none, the reason is profile only), and who decides it. */
type NativeRow = readonly [code: number, label: string | null, decidedBy: readonly string[]];
/**
 * One jog reason: its code, the name observations and ingress counts use, whether that name is a
 * catalogue reason label, and who decides it.
 */
type JogRow = readonly [code: number, name: string, catalogued: boolean, decidedBy: readonly string[]];

const ADMISSION = 'sims/core/admission.ts';
const CORE = 'sims/core/core.ts';
const CORE_JOG = 'sims/core/jog.ts';
const SERVICE_JOG = 'sims/service/jog.ts';
const REMOTE_JOG = 'sims/service/remote-jog.ts';

const NATIVE = {
  none: [0, null, []],
  inhibited: [1, 'inhibited', [ADMISSION, CORE]],
  not_ready: [2, 'not_ready', [ADMISSION, CORE]],
  mode_conflict: [3, 'mode_conflict', [ADMISSION]],
  no_grant: [4, 'no_grant', [ADMISSION]],
  /** Documented (5) and reserved: the reference core has no capacity to run out of. */
  capacity: [5, null, []],
  wrong_generation: [6, 'wrong_generation', [ADMISSION]],
  pdo_mapping_mismatch: [7, 'pdo_mapping_mismatch', [ADMISSION]],
  outside_limits_outward: [8, 'outside_limits_outward', [CORE]],
  unsupported: [9, null, [ADMISSION, CORE]],
  invalid_axis_mask: [10, 'invalid_axis_mask', [ADMISSION, CORE]],
  fault_persists: [11, 'fault_persists', [CORE]],
  io_not_configured: [12, 'io_not_configured', [ADMISSION]],
  io_readback_disagreement: [13, 'io_readback_disagreement', [ADMISSION]],
  io_fast_input_unsatisfied: [14, 'io_fast_input_unsatisfied', [ADMISSION]],
  io_exchange_lost: [15, 'io_exchange_lost', [ADMISSION]],
  homing_failed: [16, null, [CORE]],
  cancelled: [17, null, [CORE]],
  velocity_limit: [18, null, [CORE]],
  unknown_handle: [19, 'unknown_handle', [ADMISSION, CORE]],
  io_not_armed: [20, 'io_not_armed', [ADMISSION]],
  /** end_jog for a jog generation that is not the open independent one (jogSessionStale below). */
  jog_session_stale: [21, 'jog_session_stale', [ADMISSION]],
  /** io_arm while an output marker's late application is latched (fault bit 10; docs/profile.md "Output intents"). */
  io_marker_late: [22, 'io_marker_late', [ADMISSION]],
} as const satisfies Record<string, NativeRow>;

const JOG = {
  none: [0, 'none', false, []],
  not_ready: [1, 'not_ready', true, [ADMISSION]],
  mode_conflict: [2, 'mode_conflict', true, [ADMISSION]],
  independent_jog_unavailable: [3, 'independent_jog_unavailable', true, [SERVICE_JOG]],
  jog_clock_incarnation_mismatch: [4, 'jog_clock_incarnation_mismatch', true, [SERVICE_JOG]],
  control_session_stale: [5, 'control_session_stale', true, [SERVICE_JOG, CORE_JOG]],
  /** A frame or update for a jog generation that is not the open independent one (jogSessionStale below). */
  jog_session_stale: [6, 'jog_session_stale', true, [SERVICE_JOG, CORE_JOG, REMOTE_JOG]],
  expired: [7, 'jog_expired', false, [CORE_JOG]],
  ramping: [8, 'jog_ramping', false, [CORE_JOG]],
  limited: [9, 'jog_limited', false, [CORE_JOG]],
  ended: [10, 'jog_ended', false, [CORE]],
  halted: [11, 'jog_halted', false, [CORE]],
  stopped: [12, 'jog_stopped', false, [CORE_JOG]],
  jog_clock_deadline_invalid: [13, 'jog_clock_deadline_invalid', false, [SERVICE_JOG]],
  jog_clock_input_stale: [14, 'jog_clock_input_stale', false, [SERVICE_JOG]],
  outside_limits_outward: [15, 'outside_limits_outward', true, [CORE_JOG, CORE]],
  out_of_order: [16, 'jog_frame_out_of_order', false, [SERVICE_JOG, CORE_JOG]],
  frame_malformed: [17, 'jog_frame_malformed', false, [SERVICE_JOG]],
  frame_oversize: [18, 'jog_frame_oversize', false, [SERVICE_JOG]],
  frame_version: [19, 'jog_frame_version', false, [SERVICE_JOG]],
  velocity_invalid: [20, 'jog_velocity_invalid', false, [SERVICE_JOG]],
  axis_outside_session: [21, 'jog_axis_outside_session', false, [SERVICE_JOG, CORE_JOG]],
  /** Reserved: a superseded generation ends with jog_end `reason: "superseded"` (core/jog.ts), not with this number. */
  superseded: [22, 'jog_superseded', false, []],
  capture_before_origin: [23, 'jog_capture_before_origin', false, [SERVICE_JOG, CORE_JOG]],
  active: [24, 'jog_active', false, [CORE_JOG]],
  jog_clock_input_future: [25, 'jog_clock_input_future', false, [SERVICE_JOG]],
  // Service-side refusals of the remote WebSocket lane (document 1 part 5; docs/profile.md "Remote jog").
  jog_clock_unqualified: [26, 'jog_clock_unqualified', true, [SERVICE_JOG]],
  jog_stream_idle: [27, 'jog_stream_idle', true, [REMOTE_JOG]],
  jog_clock_uncertain: [28, 'jog_clock_uncertain', false, [REMOTE_JOG]],
  jog_clock_calibration_expired: [29, 'jog_clock_calibration_expired', false, [REMOTE_JOG]],
  jog_clock_sample_invalid: [30, 'jog_clock_sample_invalid', false, [REMOTE_JOG]],
} as const satisfies Record<string, JogRow>;

type Codes<T extends Record<string, readonly [number, ...unknown[]]>> = { readonly [K in keyof T]: T[K][0] };
const codesOf = <T extends Record<string, readonly [number, ...unknown[]]>>(t: T): Codes<T> =>
  Object.freeze(Object.fromEntries(Object.entries(t).map(([k, row]) => [k, row[0]]))) as Codes<T>;

/** Native command reasons by name (CommandResult.Reason). */
export const NATIVE_REASON = codesOf(NATIVE);
export type NativeReasonName = keyof typeof NATIVE;

/** Jog reasons by name (JogObservation StateReason, ControlReason, UpdateReason; ingress refusals). */
export const JOG_REASON = codesOf(JOG);
export type JogReasonName = keyof typeof JOG;

/** A reason row as the registry lists it (the catalogue test and the docs read this). */
export interface ReasonRow {
  kind: 'native' | 'jog';
  name: string;
  code: number;
  /** The catalogue reason label a refusal with this reason leads with; undefined when there is none. */
  label?: string;
  /** The name observations use (jog ingress counts); the label when there is one. */
  observed: string;
  decidedBy: readonly string[];
}

export const REASONS: readonly ReasonRow[] = Object.freeze([
  ...Object.entries(NATIVE).map(([name, [code, label, decidedBy]]): ReasonRow => ({ kind: 'native', name, code, ...(label ? { label } : {}), observed: label ?? name, decidedBy })),
  ...Object.entries(JOG).map(([name, [code, observed, catalogued, decidedBy]]): ReasonRow => ({ kind: 'jog', name, code, ...(catalogued ? { label: observed } : {}), observed, decidedBy })),
]);

const NATIVE_BY_CODE: ReadonlyMap<number, ReasonRow> = new Map(REASONS.filter((r) => r.kind === 'native').map((r) => [r.code, r]));
const JOG_BY_CODE: ReadonlyMap<number, ReasonRow> = new Map(REASONS.filter((r) => r.kind === 'jog').map((r) => [r.code, r]));
const JOG_BY_OBSERVED: ReadonlyMap<string, number> = new Map(REASONS.filter((r) => r.kind === 'jog').map((r) => [r.observed, r.code]));

/** The catalogue label of a native reason (undefined: none, or an unknown code). */
export function nativeLabel(reason: number): string | undefined {
  return NATIVE_BY_CODE.get(reason)?.label;
}

/** The name observations and ingress counts give a jog reason (`jog_reason_<n>` for an unknown code). */
export function jogReasonName(reason: number): string {
  return JOG_BY_CODE.get(reason)?.observed ?? `jog_reason_${reason}`;
}

/** The jog reason whose observed name (or label) is `name`; undefined when none is. */
export function jogReasonOf(name: string): number | undefined {
  return JOG_BY_OBSERVED.get(name);
}

/**
 * The one jog_session_stale rule (document 1 part 4 end_jog: "the exact current nonzero independent jog
 * generation"): `jogGeneration` is not the open independent jog generation. Every place that answers
 * jog_session_stale asks it: end_jog (admission.ts, native reason 21), jog updates in the core and
 * jog.sock frames in the service (jog reason 6), and the remote lane's upgrade (remote-jog.ts).
 */
export function jogSessionStale(jog: { open: boolean; independent: boolean; generation: bigint }, jogGeneration: bigint): boolean {
  return !jog.open || !jog.independent || jogGeneration !== jog.generation || jogGeneration === 0n;
}
