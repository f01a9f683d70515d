// The trajectory lane: executes a prepared point list at cycle rate by cubic Hermite interpolation between
// points (document 1 part 2 Point; velocities given, or derived: docs/profile.md "Trajectories"). Targets
// are written in drive counts; output intents carried by points are applied when their point is reached.
// The lane owns the axes of the trajectory's axis_mask from Start until completion, halt, stop, a fault
// or lost authority (lanes.ts); whatever ends it is reported once through `onEnd`.

import type { ProcessImage } from '../../drivers/bus.ts';
import { MODE } from '../../drivers/ds402.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { LaneCycle, MotionLane } from './lanes.ts';
import type { PlanArrays, PlanWorkspace } from './protocol.ts';
import { LITTLE_ENDIAN } from '../primitives.ts';

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
  /** The plan arena slot its arrays live in (sims/core/plan-arena.ts), given back when the plan is gone. */
  slot?: number;
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
 * buildPlan in slices, so that a large plan is taken in over many core cycles instead of stalling one (a
 * 250000-point plan took 50 to 500 ms in one cycle, bench/upload-impact.bench.ts). `step(budget)` reads whole
 * points, as many as `budget` element operations allow (1 + 2 x axes a point: its time, then per axis its
 * position and velocity), at least one, and answers the plan, the refusal, or null while there is more to read.
 *
 * Points are read in order, each row at once: a row of nine positions is one or two cache lines, while a
 * pass per axis over a 250000-point plan read every line of its 18 MB nineteen times (about 1 GB moved
 * for a maximum upload, 0.2 to 0.4 ms of each cycle's slice). The refusal answered is still the first in
 * the profile's order, which is per axis (its positions, then its velocities: docs/profile.md "Native
 * checks at prepare"): each axis's first position and first velocity refusal are kept, and the lowest
 * axis's is answered when the last point has been read.
 */
/** Points read between two questions to a step's `over` (a few microseconds of work when compiled). */
export const POINTS_PER_CHECK = 32;

export class PlanBuilder {
  readonly elements: number;
  private readonly n: number;
  private readonly N: number;
  private readonly t: Float64Array;
  private readonly q: Float64Array;
  private readonly qd: Float64Array;
  /** Per axis: checked (owned by the plan), position limits, counts per unit (with sign), velocity limit. */
  private readonly owned: Uint8Array;
  private readonly lo: Float64Array;
  private readonly hi: Float64Array;
  private readonly scale: Float64Array;
  private readonly vmax: Float64Array;
  /** Per axis: the first point whose position (velocity) is refused, -1 while none; and its value. */
  private readonly posAt: Int32Array;
  private readonly posValue: Float64Array;
  private readonly velAt: Int32Array;
  private readonly velValue: Float64Array;
  /** The times as signed 32-bit halves (little-endian hosts): read without a BigInt per element. */
  private readonly halves: Int32Array | null;
  /** Next point to read, and the number of times converted so far (one ahead: a velocity needs the next). */
  private k = 0;
  private timed = 0;
  private onIntents = false;

  constructor(
    private readonly machine: CompiledMachine,
    private readonly p: PlanInput,
    /** Already faulted-in output memory (protocol.ts PlanWorkspace); the same plan and slices without it. */
    workspace?: PlanWorkspace,
  ) {
    const n = (this.n = p.timeNs.length);
    const N = (this.N = machine.axes.length);
    const size = n * N;
    this.t = workspace?.t.length === n ? workspace.t : new Float64Array(n);
    this.q = workspace?.q.length === size ? workspace.q : new Float64Array(size);
    this.qd = workspace?.qd.length === size && workspace.qd !== this.q ? workspace.qd : new Float64Array(size);
    this.elements = n * (1 + 2 * N);
    this.halves = LITTLE_ENDIAN ? new Int32Array(p.timeNs.buffer, p.timeNs.byteOffset, n * 2) : null;
    this.owned = new Uint8Array(N);
    this.lo = new Float64Array(N);
    this.hi = new Float64Array(N);
    this.scale = new Float64Array(N);
    this.vmax = new Float64Array(N);
    this.posAt = new Int32Array(N).fill(-1);
    this.velAt = new Int32Array(N).fill(-1);
    this.posValue = new Float64Array(N);
    this.velValue = new Float64Array(N);
    for (let i = 0; i < N; i++) {
      const a = machine.axes[i]!;
      const first = n ? p.position[i]! : 0;
      this.owned[i] = (p.axisMask >>> i) & 1;
      this.lo[i] = p.recovery ? Math.min(a.min_position, first) : a.min_position;
      this.hi[i] = p.recovery ? Math.max(a.max_position, first) : a.max_position;
      this.scale[i] = a.sign * a.counts_per_unit;
      this.vmax[i] = a.max_velocity;
    }
  }

  /**
   * Read up to `budget` element operations' worth of points (whole points, at least one). With `over`,
   * stop early once it says so: it is asked after every POINTS_PER_CHECK points (the real-time core's
   * share of a cycle, sims/core/plan-intake.ts PlanIntake.advance).
   */
  step(budget: number, over?: () => boolean): Plan | PlanRefusal | null {
    const limit = Math.min(this.n, this.k + Math.max(1, Math.floor(budget / (1 + 2 * this.N))));
    while (this.k < limit) {
      const to = over ? Math.min(limit, this.k + POINTS_PER_CHECK) : limit;
      this.read(to);
      if (over?.()) break;
    }
    return this.k < this.n ? null : this.finish();
  }

  /** Read points this.k .. end-1. */
  private read(end: number): void {
    const { p, n, N, t, q, qd, owned, lo, hi, scale, vmax, posAt, velAt } = this;
    const pos = p.position;
    // hi * 2^32 + lo is exact and then rounded once, so it equals Number(bigint) for every int64; reading
    // the BigInt64Array allocates a BigInt per element.
    const h = this.halves;
    const timedTo = Math.min(n, end + 1);
    if (h) for (let k = this.timed; k < timedTo; k++) t[k] = h[2 * k + 1]! * 4294967296 + (h[2 * k]! >>> 0);
    else for (let k = this.timed; k < timedTo; k++) t[k] = Number(p.timeNs[k]!);
    if (timedTo > this.timed) this.timed = timedTo;
    for (let k = this.k; k < end; k++) {
      if (p.ioValues[k]! & p.ioMask[k]!) this.onIntents = true;
      const row = k * N;
      const given = p.hasVelocity[k] !== 0;
      const edge = k === 0 || k === n - 1;
      const span = edge ? 0 : t[k + 1]! - t[k - 1]!;
      for (let i = 0; i < N; i++) {
        const x = pos[row + i]!;
        if (owned[i] && (x < lo[i]! || x > hi[i]!) && posAt[i]! < 0) {
          posAt[i] = k;
          this.posValue[i] = x;
        }
        const v = given ? p.velocity[row + i]! : edge ? 0 : ((pos[row + N + i]! - pos[row - N + i]!) / span) * 1e9;
        if (owned[i] && Math.abs(v) > vmax[i]! && velAt[i]! < 0) {
          velAt[i] = k;
          this.velValue[i] = v;
        }
        q[row + i] = x * scale[i]!;
        qd[row + i] = v * scale[i]!;
      }
    }
    this.k = end;
  }

  private finish(): Plan | PlanRefusal {
    const { p, n, N, t, q, qd, posAt, velAt } = this;
    for (let i = 0; i < N; i++) {
      if (posAt[i]! >= 0) return { kind: 'outside_limits', point: posAt[i]!, axis: i, value: this.posValue[i]! };
      if (velAt[i]! >= 0) return { kind: 'velocity', point: velAt[i]!, axis: i, value: this.velValue[i]!, limit: this.vmax[i]! };
    }
    return { handle: p.handle, generation: p.generation, axisMask: p.axisMask, count: n, axes: N, t, q, qd, ioMask: p.ioMask, ioValues: p.ioValues, onIntents: this.onIntents };
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
