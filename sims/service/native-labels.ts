// Native receipts as refusals (docs/profile.md "Native commands"): the leading label of a refusal when the
// core refused. The label of each native reason is the reason registry's (sims/core/reasons.ts); which
// reasons an operation answers under their own label is its reason list in document 1 part 4, kept here
// for every operation that reaches the core; any other reason is `native_rejected`, the receipt in
// native_result either way.

import { NATIVE_REASON, nativeLabel, type NativeReasonName } from '../core/reasons.ts';
import type { NativeReply } from './core-link.ts';
import { Refusal } from './envelope.ts';

/** Every operation that reaches the core answers these (the core holds the fence too: no_grant, wrong_generation). */
const COMMON: readonly NativeReasonName[] = ['not_ready', 'mode_conflict', 'pdo_mapping_mismatch', 'outside_limits_outward', 'no_grant', 'wrong_generation'];
const IO: readonly NativeReasonName[] = ['inhibited', 'io_not_configured', 'io_readback_disagreement', 'io_fast_input_unsatisfied', 'io_exchange_lost', 'io_marker_late'];

/** The family of an operation's reason list: 'motion' for trajectories, programs and jog; else the machine operation. */
export type NativeFamily = 'motion' | 'enable' | 'arm' | 'home' | 'halt' | 'reset_fault' | 'recovery_status' | 'restore_anchor' | 'io_arm' | 'io_disarm';

const ANSWERS: Readonly<Record<NativeFamily, ReadonlySet<number>>> = Object.fromEntries(
  Object.entries({
    motion: [...COMMON, 'inhibited', 'invalid_axis_mask', 'io_not_armed', 'unknown_handle', 'jog_session_stale'],
    enable: COMMON,
    arm: COMMON,
    home: [...COMMON, 'invalid_axis_mask'],
    halt: [...COMMON, 'inhibited'],
    reset_fault: COMMON,
    recovery_status: COMMON,
    restore_anchor: [...COMMON, 'invalid_axis_mask'],
    io_arm: [...COMMON, ...IO],
    io_disarm: [...COMMON, ...IO],
  } satisfies Record<NativeFamily, readonly NativeReasonName[]>).map(([op, names]) => [op, new Set<number>(names.map((n) => NATIVE_REASON[n]))]),
) as unknown as Record<NativeFamily, ReadonlySet<number>>;

/**
 * Labels an operation gives a reason instead of the registry's: restore_anchor refused not_ready by the
 * core (armed or enabled at capture) is anchor_source_invalid (document 1 part 4 restore_anchor).
 */
const RENAMED: Partial<Record<NativeFamily, Readonly<Record<number, string>>>> = {
  restore_anchor: { [NATIVE_REASON.not_ready]: 'anchor_source_invalid' },
};

/** The leading label of a native refusal of an operation of `family`. */
export function nativeRefusalLabel(family: NativeFamily, reason: number): string {
  if (!ANSWERS[family].has(reason)) return 'native_rejected';
  return RENAMED[family]?.[reason] ?? nativeLabel(reason) ?? 'native_rejected';
}

/** The leading label of a native motion refusal (native_rejected for a reason without its own label). */
export function motionLabel(reason: number): string {
  return nativeRefusalLabel('motion', reason);
}

/** A native refusal with its receipt in native_result. */
export function nativeRefusal(family: NativeFamily, n: NativeReply, data?: unknown): Refusal {
  return new Refusal(409, nativeRefusalLabel(family, n.result.Reason), n.detail ?? `native reason ${n.result.Reason}`, data, { native_result: n.result });
}

/** A native motion refusal with its receipt in native_result. */
export function motionRefusal(n: NativeReply): Refusal {
  return nativeRefusal('motion', n);
}
