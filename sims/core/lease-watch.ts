// The core's own lease check, once a cycle (document 1 part 2: the core stops when a lease runs out
// without a renewal). With the default host clock, process.hrtime is read only when the deadline may be
// within a millisecond of performance.now() (both run on the same monotonic clock; the cycle's start
// reading serves), so an active grant costs no clock read and no bigint per cycle; the first cycle whose
// read sees the deadline passed still stops the cell.

/**
 * The core stops on its own this long after a lease deadline passes without a renewal reaching it. A
 * renewal the service admitted just before the deadline is still on its way to the core (docs/profile.md
 * "Native commands"); a stalled service extends a lease by at most this much.
 */
export const LEASE_GRACE_NS = 20_000_000n;

/** The grant as the check sees it. */
interface LeaseGrant {
  readonly deadlineNs: bigint;
}

export class LeaseWatch {
  /**
   * The grant (and its deadline) for which `safeUntilMs` was computed, and the performance.now() time
   * before which that deadline cannot have passed (the remaining time when last read, less a 1 ms margin
   * for rounding).
   */
  private grant: LeaseGrant | null = null;
  private deadline = 0n;
  private safeUntilMs = -Infinity;

  constructor(
    /** The host clock is the default (process.hrtime), on the same monotonic clock as performance.now(). */
    private readonly hostIsDefault: boolean,
    private readonly hostNow: () => bigint,
  ) {}

  /** Whether the active grant `g`'s lease ran out, grace included (`wallMs`: performance.now() at the cycle's start, or NaN). */
  expired(g: LeaseGrant, wallMs: number): boolean {
    const cached = this.hostIsDefault && g === this.grant && g.deadlineNs === this.deadline;
    // Read before the host clock below, so the margin computed from it errs early, never late.
    const wall = !this.hostIsDefault ? 0 : wallMs === wallMs ? wallMs : performance.now();
    if (cached && wall < this.safeUntilMs) return false;
    const host = this.hostNow();
    if (host > g.deadlineNs + LEASE_GRACE_NS) return true;
    if (this.hostIsDefault) {
      this.grant = g;
      this.deadline = g.deadlineNs;
      this.safeUntilMs = wall + Number(g.deadlineNs + LEASE_GRACE_NS - host) / 1e6 - 1;
    }
    return false;
  }
}
