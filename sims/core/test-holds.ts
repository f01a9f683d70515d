// The private test channel's holds on a running core (docs/profile.md "Test channel"): a late wake, a held
// observation publisher and a capture write held in progress. Each is a state of its own, judged on the
// core's host clock; the cycle asks these few questions and otherwise knows nothing of them.

import type { FromCore } from './protocol.ts';
import type { CaptureRing } from './capture/ring.ts';

/** What the holds read of the core they hold. */
export interface HeldCore {
  /** The core's time of the current cycle. */
  readonly now: bigint;
  readonly machine: { readonly cycle_ns: bigint | number };
  hostNow(): bigint;
  /** A publication is due (a publisher_overflow notice changes what an observer sees). */
  markDirty(): void;
}

export class TestHolds {
  private lateWakeNs = 0n;
  private publisherHeldUntilNs = 0n;
  /** Observations dropped while the publisher was held (document 1 part 6 publisher_overflow). */
  private readonly lost = { count: 0, first: 0n, last: 0n };
  private captureHeldUntilNs = 0n;
  private captureHeld = false;

  constructor(
    private readonly core: HeldCore,
    private readonly capture: CaptureRing | null,
  ) {}

  /**
   * The next cycle wakes `ns` late: it and every cycle scheduled before the wake run at the wake time, as a
   * real-time core catches up after a stall.
   */
  lateWake(ns: number): void {
    this.lateWakeNs = this.core.now + BigInt(this.core.machine.cycle_ns) + BigInt(ns);
  }

  /** The time a cycle due at `nowNs` runs at: the wake time while a late wake is pending. */
  wakeTime(nowNs: bigint): bigint {
    if (this.lateWakeNs === 0n) return nowNs;
    if (nowNs < this.lateWakeNs) return this.lateWakeNs;
    this.lateWakeNs = 0n;
    return nowNs;
  }

  /**
   * Hold the observation publisher for `ms` of host time: it behaves as a full publication queue, so
   * observations raised meanwhile are dropped and counted; the first publication after the hold is a
   * publisher_overflow notice (docs/profile.md "Events").
   */
  holdEventPublisher(ms: number): void {
    this.publisherHeldUntilNs = this.core.hostNow() + BigInt(ms) * 1_000_000n;
  }

  private publisherHeld(): boolean {
    return this.publisherHeldUntilNs !== 0n && this.publisherHeldUntilNs > this.core.hostNow();
  }

  /** An observation event is to be sent: false when the held publisher drops it (counted). */
  admitEvent(): boolean {
    if (!this.publisherHeld()) return true;
    const now = this.core.now;
    this.lost.count++;
    this.lost.last = now;
    if (this.lost.count === 1) this.lost.first = now;
    return false;
  }

  /** Publish the count of dropped observations once the publisher is free again. */
  reportLost(send: (m: FromCore) => void): void {
    if (this.lost.count === 0 || this.publisherHeld()) return;
    const payload = { dropped: BigInt(this.lost.count), first_dropped_ns: this.lost.first, last_dropped_ns: this.lost.last };
    this.lost.count = 0;
    this.core.markDirty();
    send({ t: 'event', type: 'publisher_overflow', payload, time_ns: this.core.now });
  }

  /** Dropped observations wait to be reported. */
  get anyLost(): boolean {
    return this.lost.count !== 0;
  }

  /** Hold the next capture write in progress for `ms` of host time. */
  holdCaptureWrite(ms: number): void {
    this.captureHeldUntilNs = this.core.hostNow() + BigInt(ms) * 1_000_000n;
    // Torn from the moment the test channel answers, not from the next cycle: on a loaded host that cycle
    // may come after the reader the test sends next.
    if (this.capture && !this.captureHeld) {
      this.capture.beginRecord();
      this.captureHeld = true;
    }
  }

  /**
   * Whether this cycle's capture record is written: a held write leaves the ring's seqlock odd, so readers
   * see a torn header (telemetry_busy); the held record is restarted and committed after.
   */
  captureWritable(): boolean {
    if (!this.capture) return false;
    if (this.captureHeldUntilNs > this.core.hostNow()) {
      if (!this.captureHeld) this.capture.beginRecord();
      this.captureHeld = true;
      return false;
    }
    this.captureHeld = false;
    return true;
  }
}
