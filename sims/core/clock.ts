// How the core's cycles are timed. Three clocks behind one interface (DESIGN.md "Time"):
//
// - realtime: the core's time is the host monotonic clock. Sleep with Atomics.wait until shortly before
//   each deadline, optionally spin the rest; lateness is wake minus scheduled, measured, never assumed.
// - fast: simulated time advances exactly one cycle per cycle while the wall sleeps cycle / speed.
// - stepped: no sleeping at all; a cycle runs only when the host asks for it (replay, long Home tests).
//   Simulated time advances one cycle per step from the origin.
//
// A clock never runs a cycle itself: `next()` blocks (or not) until the next cycle is due and returns its
// times; the host runs the cycle. Speed <= 0 is refused, never silently 1: stepped is its own mode.

import { hrtime } from 'node:process';
import type { ClockSpec } from './protocol.ts';

export interface Tick {
  /** The core's time for this cycle (host monotonic ns in real time; simulated otherwise). */
  nowNs: bigint;
  /** When the cycle was due on the same time base (lateness = nowNs - scheduledNs). */
  scheduledNs: bigint;
}

export interface CycleClock {
  readonly mode: ClockSpec['mode'];
  /** Wait until the next cycle is due (stepped: no wait) and return its times. */
  next(): Tick;
  /** Cycles the clock skipped by re-anchoring after falling far behind (real time and fast only). */
  readonly skipped: number;
  /** The core's time before its first cycle (on the clock's own time base). */
  readonly originNs: bigint;
  /**
   * Freeze the cycling thread for `ms` of host time (a core that goes silent: the fault injection
   * stall_next_command). A paced replay does not freeze: it judges the stalled command at its recorded
   * host time (RecordedClock.at) and the service retakes the waits that ran out meanwhile (sims/service/timing.ts
   * CoreWait.timedOut).
   */
  stall(ms: number): void;
}

// Bound once: the global `process` is an accessor property, read through a getter every time.
const hrtimeBigint = hrtime.bigint;
const hostNow = (): bigint => hrtimeBigint();
const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Freeze the calling thread for `ms` of host time (CycleClock.stall of the live clocks). */
function freeze(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

/** Sleep until `deadline - spin` host ns, then spin to the deadline. */
function waitUntil(deadline: bigint, spinNs: bigint): void {
  const ahead = deadline - hostNow() - spinNs;
  if (ahead > 0n) Atomics.wait(sleeper, 0, 0, Number(ahead) / 1e6);
  while (spinNs > 0n && hostNow() < deadline) {
    /* spin to the deadline */
  }
}

/** A schedule that fell this many cycles behind (the machine was suspended, say) re-anchors once. */
const REANCHOR_CYCLES = 10n;

export class RealTimeClock implements CycleClock {
  readonly mode = 'realtime' as const;
  readonly stall = freeze;
  private deadline: bigint;
  skipped = 0;
  readonly originNs: bigint;
  constructor(
    private readonly cycleNs: bigint,
    private readonly spinNs: bigint = 0n,
    start: bigint = hostNow(),
  ) {
    if (cycleNs <= 0n) throw new RangeError('cycle_ns must be positive');
    if (spinNs < 0n) throw new RangeError('spin must not be negative');
    this.originNs = start;
    this.deadline = start + cycleNs;
  }
  next(): Tick {
    const scheduledNs = this.deadline;
    waitUntil(scheduledNs, this.spinNs);
    const nowNs = hostNow();
    const next = scheduledNs + this.cycleNs;
    this.deadline = rescheduled(scheduledNs, nowNs, this.cycleNs);
    if (this.deadline !== next) this.skipped += Number((nowNs - next) / this.cycleNs);
    return { nowNs, scheduledNs };
  }
}

/**
 * The real-time schedule's next deadline after a cycle due at `deadline` woke at `nowNs`: one cycle on,
 * unless that fell more than REANCHOR_CYCLES behind, then one cycle after the wake. A paced replay keeps
 * the same schedule from the recorded wake times (RecordedClock).
 */
export function rescheduled(deadline: bigint, nowNs: bigint, cycleNs: bigint): bigint {
  const next = deadline + cycleNs;
  return nowNs - next > REANCHOR_CYCLES * cycleNs ? nowNs + cycleNs : next;
}

export class FastClock implements CycleClock {
  readonly mode = 'fast' as const;
  readonly stall = freeze;
  private readonly wallCycle: bigint;
  private wallDeadline: bigint;
  private cycles = 0n;
  skipped = 0;
  constructor(
    private readonly cycleNs: bigint,
    readonly speed: number,
    readonly originNs: bigint = hostNow(),
  ) {
    if (!(speed > 0) || !Number.isFinite(speed)) throw new RangeError(`speed must be a finite number > 0 (got ${speed}); stepped is its own mode`);
    this.wallCycle = BigInt(Math.max(1, Math.round(Number(cycleNs) / speed)));
    this.wallDeadline = hostNow() + this.wallCycle;
  }
  next(): Tick {
    waitUntil(this.wallDeadline, 0n);
    this.wallDeadline += this.wallCycle;
    const behind = hostNow() - this.wallDeadline;
    if (behind > REANCHOR_CYCLES * this.wallCycle) this.wallDeadline = hostNow() + this.wallCycle;
    this.cycles++;
    // Simulated time never skips: the plant integrates every cycle whatever the wall did.
    const t = this.originNs + this.cycles * this.cycleNs;
    return { nowNs: t, scheduledNs: t };
  }
}

export class SteppedClock implements CycleClock {
  readonly mode = 'stepped' as const;
  readonly stall = freeze;
  /** originNs + cycles * cycleNs, kept by addition (one bigint per cycle instead of three). */
  private t: bigint;
  readonly skipped = 0;
  constructor(
    private readonly cycleNs: bigint,
    readonly originNs: bigint = hostNow(),
  ) {
    if (cycleNs <= 0n) throw new RangeError('cycle_ns must be positive');
    this.t = originNs;
  }
  next(): Tick {
    const t = (this.t += this.cycleNs);
    return { nowNs: t, scheduledNs: t };
  }
  /** The time of the last cycle run (the origin before the first). */
  get nowNs(): bigint {
    return this.t;
  }
}

/**
 * Paced replay: cycle k runs at the recorded time of frame k (t0 + the recorded offset), so every decision
 * the core takes from its own time (arm settling, trajectory sampling) is the recorded one. No sleeping.
 * Past the recorded frames time goes on one cycle at a time.
 */
/** A recording's frame times (and, format 3 on a stepped or fast clock, its host times), ns from t0. */
export interface RecordedTimes {
  t0Ns: bigint;
  timesNs: Float64Array;
  hostTimesNs?: Float64Array;
  /** A recording on the real-time clock: that clock's origin (header clock_origin_ns), to rebuild its schedule. */
  scheduleOriginNs?: bigint;
}

export class RecordedClock implements CycleClock {
  readonly mode = 'recorded' as const;
  /** A paced replay never freezes its thread (CycleClock.stall). */
  stall(): void {}
  readonly skipped = 0;
  readonly originNs: bigint;
  private k = 0;
  private last: bigint;
  private lastHost: bigint;
  /** On a real-time recording with its clock's origin: the next cycle's deadline, as that clock kept it. */
  private deadline: bigint | undefined;
  constructor(
    private readonly cycleNs: bigint,
    private readonly t0Ns: bigint,
    private readonly timesNs: Float64Array,
    /** Format 3, a stepped or fast recording: the host time the core read in each frame's cycle (ns from t0). */
    private readonly hostTimesNs?: Float64Array,
    /** A real-time recording's clock origin (RecordedTimes.scheduleOriginNs). */
    scheduleOriginNs?: bigint,
  ) {
    this.originNs = t0Ns - cycleNs;
    this.last = this.originNs;
    this.lastHost = this.originNs;
    if (scheduleOriginNs !== undefined && !hostTimesNs) this.deadline = scheduleOriginNs + cycleNs;
  }
  /** The time of the last cycle run (the origin before the first). */
  get nowNs(): bigint {
    return this.last;
  }
  /**
   * The host time the core reads between cycles: the recorded host time of the request being handed over
   * when the recording has it (format 2, `host_ns`: a command handled late, after a stall, was judged on
   * that later time), else the host time of the last cycle: its frame time on a recording made on the host
   * clock, the recorded host time of the frame on one made on a stepped or fast clock (format 3).
   */
  at: bigint | null = null;
  get hostNs(): bigint {
    return this.at !== null && this.at > this.lastHost ? this.at : this.lastHost;
  }
  next(): Tick {
    const k = this.k++;
    const t = k < this.timesNs.length ? this.t0Ns + BigInt(this.timesNs[k]!) : this.last + this.cycleNs;
    const h = this.hostTimesNs;
    this.lastHost = h ? (k < h.length ? this.t0Ns + BigInt(h[k]!) : this.lastHost + (t - this.last)) : t;
    this.last = t;
    // A stepped or fast recording (it has host times) was scheduled one cycle_ns after another from its
    // first frame, so a cycle woken late (an injected late wake) is late by as much again.
    if (h) return { nowNs: t, scheduledNs: this.t0Ns + BigInt(k) * this.cycleNs };
    // On the host clock the schedule is the real-time clock's own, rebuilt from its origin and the wake
    // times as it kept it (RealTimeClock.next); a recording without the origin counts every cycle on time.
    // Past the recorded frames every cycle is on time.
    const d = this.deadline;
    if (d === undefined || k >= this.timesNs.length) return { nowNs: t, scheduledNs: t };
    this.deadline = rescheduled(d, t, this.cycleNs);
    return { nowNs: t, scheduledNs: d };
  }
}

export function makeClock(spec: ClockSpec, cycleNs: bigint, recorded?: RecordedTimes): CycleClock {
  switch (spec.mode) {
    case 'recorded':
      if (!recorded) throw new RangeError('the recorded clock needs the recording\'s frame times');
      return new RecordedClock(cycleNs, recorded.t0Ns, recorded.timesNs, recorded.hostTimesNs, recorded.scheduleOriginNs);
    case 'realtime':
      return new RealTimeClock(cycleNs, BigInt(spec.spinNs));
    case 'fast':
      return new FastClock(cycleNs, spec.speed);
    case 'stepped':
      return new SteppedClock(cycleNs);
  }
}
