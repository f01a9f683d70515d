// The trajectory lane: executes a prepared point list at cycle rate by cubic Hermite interpolation between
// points (document 1 part 2 Point; velocities given, or derived: docs/profile.md "Trajectories"). Targets
// are written in drive counts; output intents carried by points are applied when their point is reached.
// The lane owns the axes of the trajectory's axis_mask from Start until completion, halt, stop, a fault
// or lost authority (lanes.ts); whatever ends it is reported once through `onEnd`.

import type { ProcessImage } from '../../drivers/bus.ts';
import { MODE } from '../../drivers/ds402.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { LaneCycle, MotionLane } from './lanes.ts';
import type { PlanArrays } from './protocol.ts';

/** A trajectory as the core keeps it: logical units converted to drive counts once, at preparation. */
export interface Plan {
  handle: bigint;
  generation: bigint;
  axisMask: number;
  count: number;
  axes: number;
  /** ns from plan start, as doubles (exact below 2^53 ns = 104 days). */
  t: Float64Array;
  /** counts, row-major count x axes. */
  q: Float64Array;
  /** counts per second, row-major. */
  qd: Float64Array;
  ioMask: Uint32Array;
  ioValues: Uint32Array;
  /** Any point carries an ON intent (needs io_arm before Start). */
  onIntents: boolean;
}

export interface PlanInput extends PlanArrays {
  handle: bigint;
  generation: bigint;
  axisMask: number;
  /** Programs: each owned axis's limits widen to its first position (never further out than it starts). */
  recovery?: boolean;
}

export type PlanRefusal = { kind: 'outside_limits'; point: number; axis: number; value: number } | { kind: 'velocity'; point: number; axis: number; value: number; limit: number };

/**
 * Converts a checked point list to a Plan, deriving missing velocities (centred finite differences, zero
 * at both ends), and checks what the core checks natively: every position of an owned axis inside its
 * limits, and every given or derived velocity at most the axis's max_velocity. Returns the first refusal.
 */
export function buildPlan(machine: CompiledMachine, p: PlanInput): Plan | PlanRefusal {
  return new PlanBuilder(machine, p).step(Infinity)!;
}

/**
 * buildPlan in slices, so that a large plan is taken in over many core cycles instead of stalling one
 * (issue 21 item 11: a 250000-point plan took 50 to 500 ms in one cycle). The work and its order are
 * buildPlan's exactly (times; then per axis its positions, then its velocities), so the first refusal is
 * the same; `step(budget)` does at most `budget` element operations and answers the plan, the refusal,
 * or null while there is more to do.
 */
export class PlanBuilder {
  readonly elements: number;
  private readonly n: number;
  private readonly N: number;
  private readonly t: Float64Array;
  private readonly q: Float64Array;
  private readonly qd: Float64Array;
  /** -1: converting times; then axis i, in phase 0 (positions) or 1 (velocities). */
  private axis = -1;
  private phase = 0;
  private k = 0;

  constructor(
    private readonly machine: CompiledMachine,
    private readonly p: PlanInput,
  ) {
    this.n = p.timeNs.length;
    this.N = machine.axes.length;
    this.t = new Float64Array(this.n);
    this.q = new Float64Array(this.n * this.N);
    this.qd = new Float64Array(this.n * this.N);
    this.elements = this.n * (1 + 2 * this.N);
  }

  step(budget: number): Plan | PlanRefusal | null {
    const { p, n, N, t, q, qd } = this;
    let left = budget;
    while (left > 0) {
      if (this.axis === -1) {
        const end = Math.min(n, this.k + left);
        for (let k = this.k; k < end; k++) t[k] = Number(p.timeNs[k]!);
        left -= end - this.k;
        this.k = end;
        if (end < n) continue;
        this.axis = 0;
        this.phase = 0;
        this.k = 0;
        continue;
      }
      if (this.axis >= N) return this.finish();
      const i = this.axis;
      const a = this.machine.axes[i]!;
      const owned = ((p.axisMask >>> i) & 1) === 1;
      const end = Math.min(n, this.k + left);
      if (this.phase === 0) {
        const first = p.position[i]!;
        const lo = p.recovery ? Math.min(a.min_position, first) : a.min_position;
        const hi = p.recovery ? Math.max(a.max_position, first) : a.max_position;
        for (let k = this.k; k < end; k++) {
          const x = p.position[k * N + i]!;
          if (owned && (x < lo || x > hi)) return { kind: 'outside_limits', point: k, axis: i, value: x };
        }
      } else {
        const c = a.sign * a.counts_per_unit;
        for (let k = this.k; k < end; k++) {
          let v: number;
          if (p.hasVelocity[k]) v = p.velocity[k * N + i]!;
          else if (k === 0 || k === n - 1) v = 0;
          else v = ((p.position[(k + 1) * N + i]! - p.position[(k - 1) * N + i]!) / (t[k + 1]! - t[k - 1]!)) * 1e9;
          if (owned && Math.abs(v) > a.max_velocity) return { kind: 'velocity', point: k, axis: i, value: v, limit: a.max_velocity };
          q[k * N + i] = p.position[k * N + i]! * c;
          qd[k * N + i] = v * c;
        }
      }
      left -= end - this.k;
      this.k = end;
      if (end < n) continue;
      this.k = 0;
      if (this.phase === 0) this.phase = 1;
      else {
        this.phase = 0;
        this.axis++;
      }
    }
    return this.axis >= N ? this.finish() : null;
  }

  private finish(): Plan {
    const { p, n, N, t, q, qd } = this;
    let onIntents = false;
    for (let k = 0; k < n; k++) if (p.ioValues[k]! & p.ioMask[k]!) onIntents = true;
    return { handle: p.handle, generation: p.generation, axisMask: p.axisMask, count: n, axes: N, t, q, qd, ioMask: p.ioMask, ioValues: p.ioValues, onIntents };
  }
}

export interface TrajectoryEnd {
  plan: Plan;
  /** completed: the last point's time was reached; otherwise why it ended early. */
  completed: boolean;
  why: string;
  pointIndex: number;
}

export class TrajectoryLane implements MotionLane {
  readonly name = 'trajectory';
  plan: Plan | null = null;
  startNs = 0n;
  /** Index k of the interval [t_k, t_k+1] the last cycle was in. */
  index = 0;
  /** The sequence of the Start that began it. */
  commandSequence = 0n;
  /** Target velocity per axis of the last cycle (counts/s). */
  readonly targetVelocity: Float64Array;
  /** Output word the points' intents asked for (applied by the core while io is armed). */
  outputs = 0;
  private finished = false;
  /**
   * Set when this cycle reached a point carrying an output intent one cycle or more after the cycle it
   * was due in (a late wake or skipped cycles): the intent missed its one-cycle bound and was not applied;
   * the core latches io_marker_late (docs/profile.md "Output intents").
   */
  lateMarker = false;
  private tau = 0;
  /** Point 0's intent has been applied (or found late): it is due in the first cycle that runs the plan. */
  private firstDone = false;

  constructor(
    n: number,
    private readonly onEnd: (e: TrajectoryEnd) => void,
    /** The cycle period in ns: an intent applied this long after its point is late. */
    private readonly cycleNs = 1_000_000,
  ) {
    this.targetVelocity = new Float64Array(n);
  }

  begin(plan: Plan, nowNs: bigint, sequence: bigint, outputs: number): void {
    this.plan = plan;
    this.startNs = nowNs;
    this.index = 0;
    this.commandSequence = sequence;
    this.finished = false;
    this.firstDone = false;
    this.outputs = outputs;
    this.targetVelocity.fill(0);
  }

  get active(): boolean {
    return this.plan !== null && !this.finished;
  }

  /** Plan time of this cycle in ns. */
  elapsed(nowNs: bigint): number {
    return Number(nowNs - this.startNs);
  }

  produce(c: LaneCycle, axes: number): void {
    const p = this.plan;
    if (!p) return;
    const img = c.image;
    const tau = Math.max(0, this.elapsed(c.nowNs));
    this.tau = tau;
    const last = p.count - 1;
    let k = this.index;
    // The Start is admitted between cycles: plan time 0 is the cycle before, so the first cycle that runs
    // the plan is at tau = one cycle. Point 0's intent is due there (document 1 part 2 Point io_mask), in
    // point order before any later point this cycle reaches.
    if (!this.firstDone) {
      this.firstDone = true;
      this.applyIntent(0);
    }
    while (k < last - 1 && tau >= p.t[k + 1]!) {
      k++;
      this.applyIntent(k);
    }
    this.index = k;
    const end = tau >= p.t[last]!;
    if (end && !this.finished) this.applyIntent(last);
    const t0 = p.t[k]!;
    const t1 = p.t[k + 1]!;
    const h = (t1 - t0) / 1e9;
    const s = end ? 1 : Math.min(1, Math.max(0, (tau - t0) / (t1 - t0)));
    const s2 = s * s;
    const s3 = s2 * s;
    const h00 = 2 * s3 - 3 * s2 + 1;
    const h10 = s3 - 2 * s2 + s;
    const h01 = -2 * s3 + 3 * s2;
    const h11 = s3 - s2;
    // derivatives with respect to s (divide by h for per second)
    const d00 = 6 * s2 - 6 * s;
    const d10 = 3 * s2 - 4 * s + 1;
    const d01 = -6 * s2 + 6 * s;
    const d11 = 3 * s2 - 2 * s;
    const N = p.axes;
    for (let i = 0; axes >>> i; i++) {
      if (!((axes >>> i) & 1)) continue;
      const a0 = k * N + i;
      const a1 = a0 + N;
      const q0 = p.q[a0]!;
      const q1 = p.q[a1]!;
      const v0 = p.qd[a0]!;
      const v1 = p.qd[a1]!;
      const x = h00 * q0 + h10 * h * v0 + h01 * q1 + h11 * h * v1;
      img.modeOfOperation[i] = MODE.cyclicSyncPosition;
      img.targetPosition[i] = clampI32(Math.round(x));
      this.targetVelocity[i] = end ? 0 : (d00 * q0 + d10 * h * v0 + d01 * q1 + d11 * h * v1) / h;
    }
    if (end && !this.finished) {
      this.finished = true;
      this.index = last;
    }
  }

  /** Called by the core after the exchange: a trajectory whose last point time passed has completed. */
  settle(): void {
    if (this.plan && this.finished) this.onEnd({ plan: this.plan, completed: true, why: 'completed', pointIndex: this.plan.count - 1 });
  }

  private applyIntent(k: number): void {
    const p = this.plan!;
    const m = p.ioMask[k]!;
    if (!m) return;
    // Due in the first cycle at or after the point on the cycle grid counted from the Start, and never
    // before the first cycle that runs the plan (one cycle after the Start); late when the cycle applying
    // it runs one cycle or more after that cycle's time.
    const c = this.cycleNs;
    if (this.tau - Math.max(c, Math.ceil(p.t[k]! / c) * c) >= c) {
      this.lateMarker = true;
      return;
    }
    this.outputs = (this.outputs & ~m) | (p.ioValues[k]! & m);
  }

  ended(_axes: number, why: string): void {
    const p = this.plan;
    if (!p) return;
    this.plan = null;
    this.targetVelocity.fill(0);
    if (why !== 'completed') this.onEnd({ plan: p, completed: false, why, pointIndex: this.index });
  }

  /** Forget the plan after a completion has been reported (the core releases the axes). */
  clear(img: ProcessImage): void {
    void img;
    this.plan = null;
    this.finished = false;
  }
}

function clampI32(v: number): number {
  return Math.max(-2147483648, Math.min(2147483647, v));
}
