// An arm waiting for its drives (document 1 part 2 arm, docs/profile.md "Native commands"): enable was
// admitted but the drives are still stepping through CiA 402 (a few cycles on the simulator, longer on real
// drives), so the arm waits a bounded time instead of racing the client. A newer arm supersedes it; a
// withdrawn enable, a latched fault or a stop ends it.

import type { Cmd } from './admission.ts';

/** Default bound an arm waits for the enabled axes to reach operation enabled (docs/profile.md). */
export const ARM_SETTLE_NS = 500_000_000n;

/** What became of a waiting arm this cycle. */
export type ArmEnd = { m: Cmd; end: 'settled' | 'withdrawn' | 'timed_out' };

export class ArmWait {
  private pending: { m: Cmd; deadlineNs: bigint } | null = null;

  constructor(readonly settleNs: bigint) {}

  /** An arm is waiting. */
  get waiting(): boolean {
    return this.pending !== null;
  }

  /** Wait from `nowNs`; returns the arm this one supersedes, if any. */
  begin(m: Cmd, nowNs: bigint): Cmd | undefined {
    const before = this.pending?.m;
    this.pending = { m, deadlineNs: nowNs + this.settleNs };
    return before;
  }

  /**
   * One cycle: `withdrawn` when enable is gone or a fault or stop stands in the way, `settled` when every
   * enabled axis is in operation enabled. Null while the arm still waits (or none does).
   */
  step(nowNs: bigint, withdrawn: boolean, settled: boolean): ArmEnd | null {
    const p = this.pending;
    if (!p) return null;
    const end = withdrawn ? 'withdrawn' : settled ? 'settled' : nowNs >= p.deadlineNs ? 'timed_out' : null;
    if (end === null) return null;
    this.pending = null;
    return { m: p.m, end };
  }
}
