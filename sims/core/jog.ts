// The jog lane (document 1 part 3 "Jog session", part 4 begin_jog / end_jog / jog / update_jog): per-axis
// commanded velocity in logical units per second, converted to drive counts per second, ramped with the
// axis's jog_acceleration, brought to rest within jog.arrest_ns when the input stops, expires or the
// session closes, and never past a position limit (the lane brakes so as to stop exactly at the limit:
// jog_limited, an accepted state). Decisions are in docs/profile.md "Jog".
//
// The lane owns the axes of the session's axis_mask from begin until the axes are at rest after the session
// closed (then the core gives them back to hold, which keeps the reached target), or until stop, a fault or
// lost authority end every lane (`ended`: the drives are then disabled by the core and stop on their own
// quick stop).

import { MODE } from '../../drivers/ds402.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { LaneCycle, MotionLane } from './lanes.ts';

import { JOG_MODE, type JogStatus } from './protocol.ts';
import { JOG_REASON, jogSessionStale } from './reasons.ts';

/** Fraction of an axis's completion_tolerance the jog target keeps inside each position limit. */
export const JOG_LIMIT_GUARD = 0.1;


export interface JogEvent {
  type: 'jog_begin' | 'jog_end' | 'jog_expired' | 'jog_ramping' | 'jog_limited';
  payload: Record<string, unknown>;
}

export class JogLane implements MotionLane {
  readonly name = 'jog';
  /** Current jog generation (0 before the first begin of this core incarnation). */
  generation = 0n;
  private nextGeneration = 1n;
  mode: number = JOG_MODE.none;
  /** Input is accepted (the session is open). */
  open = false;
  /** The session's axes (kept while ramping to rest after it closed). */
  axisMask = 0;
  /** A current input applies (accepted and not expired). */
  hasInput = false;
  /** Host monotonic ns after which the current input has expired. */
  inputDeadlineNs = 0n;
  sourceSequence = 0n;
  originNs = 0n;
  deadlineNs = 0n;
  /** Decelerating to rest (input stopped or expired, or the session closed). */
  ramping = false;
  /** Axes being slowed at a position limit this cycle. */
  limitedMask = 0;
  stateReason: number = JOG_REASON.none;
  controlReason: number = JOG_REASON.none;
  updateReason: number = JOG_REASON.none;
  /** Commanded velocity per axis, counts/s (the input). */
  readonly command: Float64Array;
  /** Velocity of the lane's target this cycle, counts/s. */
  readonly velocity: Float64Array;
  /** Target position per axis, counts (double; written rounded). */
  private readonly position: Float64Array;
  /** Deceleration used while ramping to rest, counts/s^2 (chosen when the ramp starts). */
  private readonly arrestDecel: Float64Array;
  private readonly accel: Float64Array;
  private readonly lo: Float64Array;
  private readonly hi: Float64Array;
  private readonly arrestS: Float64Array;
  private readonly dt: number;
  private readonly n: number;
  private started = false;
  private wasLimited = 0;

  constructor(
    readonly machine: CompiledMachine,
    private readonly emit: (e: JogEvent) => void,
  ) {
    const n = machine.axes.length;
    this.n = n;
    this.command = new Float64Array(n);
    this.velocity = new Float64Array(n);
    this.position = new Float64Array(n);
    this.arrestDecel = new Float64Array(n);
    this.accel = new Float64Array(n);
    this.lo = new Float64Array(n);
    this.hi = new Float64Array(n);
    this.arrestS = new Float64Array(n);
    this.dt = Number(machine.cycle_ns) / 1e9;
    machine.axes.forEach((a, i) => {
      this.accel[i] = a.jog_acceleration * a.counts_per_unit;
      const x = a.sign * a.min_position * a.counts_per_unit;
      const y = a.sign * a.max_position * a.counts_per_unit;
      // The target stops a guard band inside each limit (a tenth of the completion tolerance), so the drive
      // settling after the stop stays inside the limit too (docs/profile.md "Jog").
      const guard = JOG_LIMIT_GUARD * a.completion_tolerance * a.counts_per_unit;
      this.lo[i] = Math.min(x, y) + guard;
      this.hi[i] = Math.max(x, y) - guard;
      this.arrestS[i] = Number(a.jog_arrest_ns) / 1e9;
    });
  }

  /** The lane is producing (a session is open, or its axes are still ramping to rest). */
  get active(): boolean {
    return this.started;
  }

  /** Counts per second of a logical velocity on axis i. */
  toCounts(i: number, v: number): number {
    const a = this.machine.axes[i]!;
    return v * a.sign * a.counts_per_unit;
  }

  /**
   * Open a new generation on `mask` starting from the targets in `targets` (counts). A session still
   * open is superseded (closed without a ramp: the new one takes over its velocities).
   */
  begin(mode: number, mask: number, targets: Int32Array, originNs: bigint, deadlineNs: bigint): bigint {
    if (this.open) this.emit({ type: 'jog_end', payload: this.payload('superseded') });
    const keep = this.started ? this.axisMask : 0;
    this.generation = this.nextGeneration++;
    this.mode = mode;
    this.open = true;
    this.ramping = false;
    this.originNs = originNs;
    this.deadlineNs = deadlineNs;
    this.inputDeadlineNs = deadlineNs;
    this.hasInput = false;
    this.sourceSequence = 0n;
    this.limitedMask = 0;
    this.wasLimited = 0;
    for (let i = 0; i < this.n; i++) {
      if (!((mask >>> i) & 1)) continue;
      this.command[i] = 0;
      if (!((keep >>> i) & 1)) {
        this.velocity[i] = 0;
        this.position[i] = targets[i]!;
      }
    }
    this.axisMask = mask;
    this.started = true;
    this.stateReason = JOG_REASON.active;
    this.controlReason = JOG_REASON.none;
    this.updateReason = JOG_REASON.none;
    this.emit({ type: 'jog_begin', payload: this.payload('begin') });
    return this.generation;
  }

  /**
   * A new input (velocities in counts/s for the session's axes). Returns a refusal reason, or none. An
   * axis outside its limits may only be commanded back toward them (outside_limits_outward otherwise).
   */
  input(velocity: Float64Array, sequence: bigint, inputDeadlineNs: bigint): number {
    for (let i = 0; i < this.n; i++) {
      const v = velocity[i]!;
      if (v === 0) continue;
      if (!((this.axisMask >>> i) & 1)) return (this.updateReason = JOG_REASON.axis_outside_session);
      const p = this.position[i]!;
      if ((p > this.hi[i]! && v > 0) || (p < this.lo[i]! && v < 0)) return (this.updateReason = JOG_REASON.outside_limits_outward);
    }
    let moving = false;
    for (let i = 0; i < this.n; i++) {
      if (!((this.axisMask >>> i) & 1)) continue;
      this.command[i] = velocity[i]!;
      if (velocity[i] !== 0) moving = true;
    }
    this.sourceSequence = sequence;
    this.inputDeadlineNs = inputDeadlineNs;
    this.hasInput = true;
    this.updateReason = JOG_REASON.none;
    // Input that stops (all zero) ramps to rest within the arrest time, like an expiry.
    if (!moving) this.startRamp(JOG_REASON.ramping);
    else {
      this.arrestDecel.fill(0);
      this.ramping = false;
      this.stateReason = JOG_REASON.active;
    }
    return JOG_REASON.none;
  }

  /**
   * A jog.sock input (the service checked the frame): the reason it is refused, or none once it is
   * taken. `fenced`: the grant it names is the core's current one, within its lease.
   */
  update(m: { jogGeneration: bigint; sequence: bigint; captureNs: bigint; inputDeadlineNs: bigint; velocity: readonly number[] }, fenced: boolean): number {
    if (!fenced) return JOG_REASON.control_session_stale;
    if (jogSessionStale({ open: this.open, independent: this.mode === JOG_MODE.independent, generation: this.generation }, m.jogGeneration)) return JOG_REASON.jog_session_stale;
    if (m.sequence <= this.sourceSequence) return JOG_REASON.out_of_order;
    if (m.captureNs < this.originNs) return JOG_REASON.capture_before_origin;
    const v = new Float64Array(this.n);
    for (let i = 0; i < this.n; i++) v[i] = this.toCounts(i, m.velocity[i] ?? 0);
    // The input deadline never extends past the begin_jog deadline's age bound (docs/profile.md "Jog").
    return this.input(v, m.sequence, m.inputDeadlineNs);
  }

  /** JogObservation (document 1 part 4 jog observations; field meanings docs/profile.md "Jog"). */
  status(): JogStatus {
    return {
      JogGeneration: this.generation,
      Mode: this.mode,
      SessionOpen: this.open ? 1 : 0,
      HasInput: this.hasInput ? 1 : 0,
      Ramping: this.ramping ? 1 : 0,
      Active: this.active ? 1 : 0,
      AxisMask: this.axisMask,
      LimitedAxisMask: this.limitedMask,
      SourceSequence: this.sourceSequence,
      SourceOriginHostNs: this.originNs,
      DeadlineHostNs: this.deadlineNs,
      InputDeadlineHostNs: this.inputDeadlineNs,
      StateReason: this.stateReason,
      ControlReason: this.controlReason,
      UpdateReason: this.updateReason,
      CommandedVelocity: this.logical(this.command),
      TargetVelocity: this.logical(this.velocity),
    };
  }

  /** Close the session (end_jog, halt, a newer begin): input stops, the axes ramp to rest. */
  close(reason: number, why: string): void {
    if (!this.open) return;
    this.open = false;
    this.hasInput = false;
    this.command.fill(0);
    this.emit({ type: 'jog_end', payload: this.payload(why) });
    this.startRamp(reason);
  }

  /** Input expiry, checked each cycle against host monotonic time. */
  checkExpiry(hostNowNs: bigint): void {
    if (!this.open || hostNowNs <= this.inputDeadlineNs) return;
    this.open = false;
    this.hasInput = false;
    this.command.fill(0);
    this.emit({ type: 'jog_expired', payload: { ...this.payload('expired'), input_deadline_host_ns: this.inputDeadlineNs, host_ns: hostNowNs } });
    this.startRamp(JOG_REASON.expired);
  }

  private startRamp(reason: number): void {
    let moving = false;
    for (let i = 0; i < this.n; i++) {
      if (!((this.axisMask >>> i) & 1)) continue;
      this.command[i] = 0;
      const v = Math.abs(this.velocity[i]!);
      // Decelerate with the jog acceleration, or faster when that would not reach rest within arrest_ns.
      this.arrestDecel[i] = Math.max(this.accel[i]!, v / this.arrestS[i]!);
      if (v > 0) moving = true;
    }
    this.stateReason = reason;
    if (moving && !this.ramping) {
      this.ramping = true;
      this.emit({ type: 'jog_ramping', payload: { ...this.payload('ramping'), reason } });
    }
  }

  produce(c: LaneCycle, axes: number): void {
    const img = c.image;
    const dt = this.dt;
    let limited = 0;
    for (let i = 0; axes >>> i; i++) {
      if (!((axes >>> i) & 1)) continue;
      img.modeOfOperation[i] = MODE.cyclicSyncPosition;
      let v = this.velocity[i]!;
      const want = this.command[i]!;
      const decel = want === 0 ? this.arrestDecel[i]! || this.accel[i]! : this.accel[i]!;
      // Braking distance at the deceleration this axis would use to stop: slow so as to stop at the limit.
      const brake = Math.max(this.accel[i]!, this.arrestDecel[i]!);
      let goal = want;
      const p = this.position[i]!;
      if (goal > 0) {
        const room = this.hi[i]! - p;
        const vmax = room > 0 ? Math.sqrt(2 * brake * room) : 0;
        if (goal > vmax) {
          goal = vmax;
          limited |= 1 << i;
        }
      } else if (goal < 0) {
        const room = p - this.lo[i]!;
        const vmax = room > 0 ? Math.sqrt(2 * brake * room) : 0;
        if (-goal > vmax) {
          goal = -vmax;
          limited |= 1 << i;
        }
      }
      const slowing = goal === 0 ? v !== 0 : Math.sign(goal) !== Math.sign(v) || Math.abs(goal) < Math.abs(v);
      const rate = !slowing ? this.accel[i]! : (limited >>> i) & 1 ? brake : decel;
      const step = rate * dt;
      // (a step within a rounding error of the goal lands on it: the ramp takes exactly ceil(dv / step) cycles)
      if (Math.abs(goal - v) <= step * (1 + 1e-9)) v = goal;
      else if (v < goal) v += step;
      else v -= step;
      let x = p + v * dt;
      // Never past a limit in the direction of motion (no overshoot), whatever the discretisation.
      if (v > 0 && p <= this.hi[i]! && x > this.hi[i]!) {
        x = this.hi[i]!;
        v = 0;
      } else if (v < 0 && p >= this.lo[i]! && x < this.lo[i]!) {
        x = this.lo[i]!;
        v = 0;
      }
      this.velocity[i] = v;
      this.position[i] = x;
      img.targetPosition[i] = Math.max(-2147483648, Math.min(2147483647, Math.round(x)));
    }
    const newly = limited & ~this.wasLimited;
    this.wasLimited = limited;
    this.limitedMask = limited;
    if (this.open) this.stateReason = limited ? JOG_REASON.limited : this.ramping ? JOG_REASON.ramping : JOG_REASON.active;
    if (newly) {
      this.emit({ type: 'jog_limited', payload: { ...this.payload('limited'), limited_axis_mask: newly } });
    }
  }

  /** After a cycle: every axis at rest with the session closed means the lane is done with its axes. */
  get finished(): boolean {
    if (!this.started || this.open) return false;
    for (let i = 0; i < this.n; i++) if (this.velocity[i] !== 0) return false;
    return true;
  }

  /** The core gave the axes back (finished ramp, or stop / fault / authority lost through releaseAll). */
  ended(_axes: number, why: string): void {
    if (this.open) {
      this.open = false;
      this.hasInput = false;
      this.stateReason = JOG_REASON.stopped;
      this.emit({ type: 'jog_end', payload: this.payload(why) });
    }
    else if (why !== 'jog_at_rest') this.stateReason = JOG_REASON.stopped;
    this.started = false;
    this.ramping = false;
    this.hasInput = false;
    this.limitedMask = 0;
    this.wasLimited = 0;
    this.command.fill(0);
    this.velocity.fill(0);
  }

  payload(why: string): Record<string, unknown> {
    return { jog_generation: this.generation, axis_mask: this.axisMask, mode: this.mode, why };
  }

  /** Commanded and target velocities in logical units per second (for JogObservation). */
  logical(src: Float64Array): number[] {
    return this.machine.axes.map((a, i) => (src[i]! * a.sign) / a.counts_per_unit);
  }
}
