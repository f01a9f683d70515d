// Motion lanes: the seam where whatever moves the cell plugs into the cycle. A lane produces the cycle's
// targets and mode of operation (and any extra controlword bits) for the axes it owns. Today's lanes are
// hold and homing; the trajectory lane (trajectory.ts) and the jog lane (jog.ts) plug in the same way.
//
// One arbitration rule: an axis has at most one owner besides hold. A lane acquires axes before it starts
// (the core's admission refuses with mode_conflict when another lane owns any of them) and gives them
// back when it ends; hold owns every axis nobody else owns. There is no pre-emption by priority: stop,
// faults and lost authority end every lane through `releaseAll`, which is the only way to take axes
// from a lane that holds them.

import type { ProcessImage } from '../../drivers/bus.ts';
import { MODE } from '../../drivers/ds402.ts';

export interface LaneCycle {
  readonly image: ProcessImage;
  readonly nowNs: bigint;
  /** Axes whose drive reports operation enabled this cycle (before the exchange). */
  readonly enabledMask: number;
  /** Extra controlword bits per axis a lane may set (for example the homing start bit). */
  readonly cwExtra: Uint16Array;
}

export interface MotionLane {
  readonly name: string;
  /** Write targetPosition / modeOfOperation (and cwExtra) for `axes`, the axes this lane owns. */
  produce(c: LaneCycle, axes: number): void;
  /** The lane lost `axes` (stop, fault, authority lost, or it released them itself). */
  ended?(axes: number, why: string): void;
}

/**
 * Hold: an axis that is not enabled follows its actual position (so enabling is bumpless); an enabled
 * axis holds the target it had when it came to hold (its own latched position, or the last target the
 * lane before it commanded, which is where a halt leaves it).
 */
export class HoldLane implements MotionLane {
  readonly name = 'hold';
  private readonly target: Int32Array;
  private readonly latched: Uint8Array;
  constructor(n: number) {
    this.target = new Int32Array(n);
    this.latched = new Uint8Array(n);
  }
  produce(c: LaneCycle, axes: number): void {
    const img = c.image;
    for (let i = 0; axes >>> i; i++) {
      if (!((axes >>> i) & 1)) continue;
      img.modeOfOperation[i] = MODE.cyclicSyncPosition;
      if (!((c.enabledMask >>> i) & 1)) {
        this.latched[i] = 0;
        img.targetPosition[i] = img.positionActual[i]!;
        continue;
      }
      if (!this.latched[i]) {
        this.latched[i] = 1;
        this.target[i] = img.positionActual[i]!;
      }
      img.targetPosition[i] = this.target[i]!;
    }
  }
  /** Take over `axes` holding the targets last commanded (called when another lane gives them back). */
  adopt(img: ProcessImage, axes: number): void {
    for (let i = 0; axes >>> i; i++) {
      if (!((axes >>> i) & 1)) continue;
      this.latched[i] = 1;
      this.target[i] = img.targetPosition[i]!;
    }
  }
  /** Forget latched targets (the next enabled cycle latches the actual position again). */
  unlatch(axes: number): void {
    for (let i = 0; axes >>> i; i++) if ((axes >>> i) & 1) this.latched[i] = 0;
  }
}

export class LaneArbiter {
  /** Owner lane per axis; null means hold. */
  private readonly owner: Array<MotionLane | null>;
  readonly hold: HoldLane;
  private readonly lanes: MotionLane[] = [];
  readonly cwExtra: Uint16Array;

  constructor(private readonly n: number) {
    this.owner = new Array<MotionLane | null>(n).fill(null);
    this.hold = new HoldLane(n);
    this.cwExtra = new Uint16Array(n);
  }

  /** Axes in `mask` owned by a lane other than hold (and other than `except`). */
  conflicts(mask: number, except?: MotionLane): number {
    let m = 0;
    for (let i = 0; i < this.n; i++) if ((mask >>> i) & 1 && this.owner[i] !== null && this.owner[i] !== except) m |= 1 << i;
    return m;
  }

  /** Axes owned by `lane`. */
  axesOf(lane: MotionLane): number {
    let m = 0;
    for (let i = 0; i < this.n; i++) if (this.owner[i] === lane) m |= 1 << i;
    return m;
  }

  /** Give `mask` to `lane`; returns the conflicting axes (and acquires nothing) when any is owned. */
  acquire(lane: MotionLane, mask: number): number {
    const c = this.conflicts(mask, lane);
    if (c) return c;
    for (let i = 0; i < this.n; i++) if ((mask >>> i) & 1) this.owner[i] = lane;
    if (!this.lanes.includes(lane)) this.lanes.push(lane);
    return 0;
  }

  /** `lane` gives `mask` back to hold, which keeps the last commanded targets. */
  release(lane: MotionLane, mask: number, img: ProcessImage, why: string): void {
    let m = 0;
    for (let i = 0; i < this.n; i++) {
      if ((mask >>> i) & 1 && this.owner[i] === lane) {
        this.owner[i] = null;
        m |= 1 << i;
      }
    }
    if (!m) return;
    this.hold.adopt(img, m);
    lane.ended?.(m, why);
  }

  /** End every lane (stop, fault reaction, authority lost); halt keeps the jog lane, which ramps to rest itself. */
  releaseAll(img: ProcessImage, why: string, except?: MotionLane): void {
    for (const lane of this.lanes) if (lane !== except) this.release(lane, this.axesOf(lane), img, why);
  }

  /** Let every owner write its axes' targets and modes for this cycle. */
  produce(c: LaneCycle): void {
    const cwExtra = this.cwExtra;
    let held = 0;
    for (let i = 0; i < this.n; i++) {
      cwExtra[i] = 0;
      if (this.owner[i] === null) held |= 1 << i;
    }
    if (held) this.hold.produce(c, held);
    for (const lane of this.lanes) {
      const axes = this.axesOf(lane);
      if (axes) lane.produce(c, axes);
    }
  }
}
