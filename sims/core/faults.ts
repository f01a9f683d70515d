// The execution fault bit table (document 1 part 7 documents bit 5 following_error, value 32, recovery
// reset_after_condition_clears, and bit 11 restart_required; every other row is a profile decision,
// docs/profile.md "Execution fault bits").

export type Recovery = 'reset_after_condition_clears' | 'rehome' | 'restart';

export interface FaultBitInfo {
  bit: number;
  name: string;
  recovery: Recovery;
}

export const FAULT_BITS: readonly FaultBitInfo[] = [
  { bit: 0, name: 'drive_fault', recovery: 'reset_after_condition_clears' },
  { bit: 1, name: 'safety_chain_open', recovery: 'reset_after_condition_clears' },
  { bit: 2, name: 'pdo_stale', recovery: 'reset_after_condition_clears' },
  { bit: 3, name: 'slave_offline', recovery: 'reset_after_condition_clears' },
  { bit: 4, name: 'working_counter', recovery: 'reset_after_condition_clears' },
  { bit: 5, name: 'following_error', recovery: 'reset_after_condition_clears' },
  { bit: 6, name: 'absolute_disagreement', recovery: 'rehome' },
  { bit: 7, name: 'io_readback_disagreement', recovery: 'reset_after_condition_clears' },
  { bit: 8, name: 'homing_failed', recovery: 'rehome' },
  { bit: 9, name: 'bus_submission', recovery: 'reset_after_condition_clears' },
  { bit: 10, name: 'io_marker_late', recovery: 'reset_after_condition_clears' },
  { bit: 11, name: 'restart_required', recovery: 'restart' },
];

export const FAULT = Object.fromEntries(FAULT_BITS.map((f) => [f.name, f.bit])) as Record<string, number>;
export const FAULT_INFO = new Map(FAULT_BITS.map((f) => [f.bit, f]));

/** Outcome of a bit in a correlated reset. */
export type FaultOutcome = 'cleared' | 'persists' | 'not_selected';

/** FaultRecovery entry (document 1 part 2 RecoveryStatus; field types are a profile decision). */
export interface FaultRecovery {
  /** The bit index (in a fault event the field `bit` carries the bit's value instead). */
  bit: number;
  name: string;
  axis_mask: number;
  recovery: Recovery;
  outcome?: FaultOutcome;
  rehome_axis_mask: number;
}

export function faultEntry(bit: number, axisMask: number, outcome?: FaultOutcome): FaultRecovery {
  const info = FAULT_INFO.get(bit)!;
  const e: FaultRecovery = {
    bit,
    name: info.name,
    axis_mask: axisMask,
    recovery: info.recovery,
    rehome_axis_mask: info.recovery === 'rehome' ? axisMask : 0,
  };
  if (outcome) e.outcome = outcome;
  return e;
}
