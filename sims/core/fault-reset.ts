// A reset_fault in progress (document 1 part 2 reset_fault, docs/profile.md "Recovery"): the fault reset
// bit is pulsed on the selected drives for RESET_PULSE_CYCLES, then the core waits up to
// RESET_SETTLE_CYCLES for them to leave Fault; then every latched fault is judged per axis (cleared,
// persists, not selected). Nothing is cleared while any selected condition persists.

import { FAULT, faultEntry, type FaultRecovery } from './faults.ts';
import { FaultMonitor } from './fault-monitor.ts';

/** Cycles a fault reset pulse is held, and cycles the core waits for drives to leave Fault after it. */
export const RESET_PULSE_CYCLES = 3;
export const RESET_SETTLE_CYCLES = 30;

/** The reset being carried out: the command it answers and how many cycles it has run. */
export interface Reset {
  id: number;
  sequence: bigint;
  generation: bigint;
  mask: number;
  cycle: number;
}

/** A finished reset: what each latched fault came to, and whether any selected one persists. */
export interface ResetOutcome {
  reset: Reset;
  outcomes: FaultRecovery[];
  persistent: boolean;
}

export class FaultReset {
  private current: Reset | null = null;

  constructor(private readonly faults: FaultMonitor) {}

  begin(r: Omit<Reset, 'cycle'>): void {
    this.current = { ...r, cycle: 0 };
  }

  /** The axes whose drives get the fault reset bit this cycle (0 outside the pulse). */
  get pulseMask(): number {
    const r = this.current;
    return r !== null && r.cycle < RESET_PULSE_CYCLES ? r.mask : 0;
  }

  /**
   * One cycle of the reset: null while it pulses or waits for the drives, else its outcome, with the faults
   * it cleared already cleared (`cleared` is told each one, for its event).
   */
  step(cleared: (o: FaultRecovery) => void): ResetOutcome | null {
    const r = this.current;
    if (!r) return null;
    r.cycle++;
    const latched = this.faults.latched;
    if (r.cycle <= RESET_PULSE_CYCLES + RESET_SETTLE_CYCLES) {
      // keep pulsing/settling until every selected drive left Fault, or the settle time ran out
      const stillFault = [...latched.keys()].some((b) => (b === FAULT.drive_fault || b === FAULT.following_error) && this.faults.persists(b, r.mask & latched.get(b)!));
      if (stillFault || r.cycle <= RESET_PULSE_CYCLES) return null;
    }
    this.current = null;
    const outcomes: FaultRecovery[] = [];
    let persistent = false;
    for (const [bit, axes] of latched) {
      const sel = axes & r.mask;
      if (!sel) {
        outcomes.push(faultEntry(bit, axes, 'not_selected'));
        continue;
      }
      const p = this.faults.persists(bit, sel);
      persistent ||= p;
      outcomes.push(faultEntry(bit, sel, p ? 'persists' : 'cleared'));
    }
    if (!persistent) {
      for (const o of outcomes) {
        if (o.outcome !== 'cleared') continue;
        this.faults.clear(o.bit, o.axis_mask);
        cleared(o);
      }
    }
    return { reset: r, outcomes, persistent };
  }
}
