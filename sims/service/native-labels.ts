// Native reasons as catalogue labels for the motion operations (trajectories, jog): the leading label a
// refusal carries when the core refused (docs/profile.md "Native commands"). Machine operations keep
// their own per-operation table in machine.ts (some reasons are labelled only for some operations there).

import { NATIVE_REASON } from '../core/protocol.ts';
import type { NativeReply } from './core-link.ts';
import { Refusal } from './envelope.ts';

const MOTION_LABELS: Readonly<Record<number, string>> = {
  [NATIVE_REASON.not_ready]: 'not_ready',
  [NATIVE_REASON.mode_conflict]: 'mode_conflict',
  [NATIVE_REASON.outside_limits_outward]: 'outside_limits_outward',
  [NATIVE_REASON.pdo_mapping_mismatch]: 'pdo_mapping_mismatch',
  [NATIVE_REASON.no_grant]: 'no_grant',
  [NATIVE_REASON.wrong_generation]: 'wrong_generation',
  [NATIVE_REASON.inhibited]: 'inhibited',
  [NATIVE_REASON.invalid_axis_mask]: 'invalid_axis_mask',
  [NATIVE_REASON.io_not_armed]: 'io_not_armed',
  [NATIVE_REASON.unknown_handle]: 'unknown_handle',
  [NATIVE_REASON.jog_session_stale]: 'jog_session_stale',
};

/** The leading label of a native motion refusal (native_rejected for a reason without its own label). */
export function motionLabel(reason: number): string {
  return MOTION_LABELS[reason] ?? 'native_rejected';
}

/** A native motion refusal with its receipt in native_result. */
export function motionRefusal(n: NativeReply): Refusal {
  return new Refusal(409, motionLabel(n.result.Reason), n.detail ?? `native reason ${n.result.Reason}`, undefined, { native_result: n.result });
}
