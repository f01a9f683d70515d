// Native Home as a motion lane: the drives run their own homing method (mode 6); the lane switches the
// selected axes to homing mode, raises the start bit once each drive is enabled in that mode, and watches
// homing attained / homing error in the statusword (CiA 402 object 0x6041 bits 12 and 13 in mode 6).
// Document 1 part 4 home: waits up to 60 s; the core ends it early on failure, stop, or lost authority.

import { Ds402State, MODE, SW, CW } from '../../drivers/ds402.ts';
import { stateOf } from './ds402-state.ts';
import type { LaneCycle, MotionLane } from './lanes.ts';

/** Home wait bound (document 1 part 8 "Home wait: up to 60 s"). */
export const HOME_WAIT_NS = 60_000_000_000n;

export interface HomeRun {
  mask: number;
  sequence: bigint;
  deadlineNs: bigint;
  /** Axes whose homing start bit has been raised. */
  started: number;
}

export type HomingStep =
  | { kind: 'running' }
  | { kind: 'attained' }
  | { kind: 'error'; axes: number }
  | { kind: 'timeout' };

export class HomingLane implements MotionLane {
  readonly name = 'homing';
  run: HomeRun | null = null;

  begin(mask: number, sequence: bigint, nowNs: bigint, waitNs = HOME_WAIT_NS): void {
    this.run = { mask, sequence, deadlineNs: nowNs + waitNs, started: 0 };
  }

  produce(c: LaneCycle, axes: number): void {
    const img = c.image;
    for (let i = 0; axes >>> i; i++) {
      if (!((axes >>> i) & 1)) continue;
      img.modeOfOperation[i] = MODE.homing;
      img.targetPosition[i] = img.positionActual[i]!;
      if (stateOf(img.statusword[i]!) === Ds402State.OperationEnabled && img.modeDisplay[i] === MODE.homing) c.cwExtra[i]! |= CW.homingStart;
    }
  }

  /** Evaluate the drives' homing status after the exchange. */
  step(c: { image: LaneCycle['image']; nowNs: bigint }): HomingStep {
    const h = this.run;
    if (!h) return { kind: 'running' };
    if (c.nowNs > h.deadlineNs) return { kind: 'timeout' };
    let attained = 0;
    for (let i = 0; h.mask >>> i; i++) {
      if (!((h.mask >>> i) & 1)) continue;
      const sw = c.image.statusword[i]!;
      if (stateOf(sw) === Ds402State.OperationEnabled && c.image.modeDisplay[i] === MODE.homing) h.started |= 1 << i;
      if (h.started & (1 << i)) {
        if (sw & SW.opMode13) return { kind: 'error', axes: 1 << i };
        if (sw & SW.opMode12) attained |= 1 << i;
      }
    }
    return attained === h.mask ? { kind: 'attained' } : { kind: 'running' };
  }

  /** Forget the run; the caller releases the lane's axes. */
  end(): HomeRun | null {
    const h = this.run;
    this.run = null;
    return h;
  }
}
