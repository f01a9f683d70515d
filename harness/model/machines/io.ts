// Cell I/O (document 1 part 4 io_arm, io_disarm; PROFILE "Trajectories" Output intents): arming the
// outputs, the outputs a stop, a grant end or io_disarm turns OFF, and the output intent rules the start
// gate and completion apply (an ON intent needs io_arm; the one-cycle bound of a late intent).

import { reason, type ModelConfig, type ModelState, type Outcome } from '../state.ts';
import type { FencedSpec, Request, Spec } from '../spec.ts';

// The rules this machine applies, each a documented (or PROFILE) rule; a wrong-model variant
// (harness/model/variants.ts) flips one, and the reference stack must then refute the model.
export interface IoRules {
  /** Part 4 io_arm: "an ON intent needs io_arm first" (io_not_armed at Start, handle kept). */
  startNeedsIoArmForOnIntent: boolean;
  /** PROFILE "Trajectories" Output intents / "Programs": an intent on the first point (sample 0) is applied like any other. */
  firstPointIntentApplied: boolean;
  /**
   * PROFILE "Programs" Output intents (one-cycle bound; fault bit 10, docs/profile.md fault bit table): an
   * intent reached one cycle or more after its due cycle is not applied; the core latches io_marker_late
   * (every output OFF, the execution faulted, io_arm answers io_marker_late until reset_fault).
   */
  markerLateNotApplied: boolean;
  /** The same bound: late is one whole cycle_ns or more; one nanosecond less is on time (applied). */
  markerLateBoundOneCycle: boolean;
}

export const IO_RULES: Readonly<IoRules> = Object.freeze({
  startNeedsIoArmForOnIntent: true,
  firstPointIntentApplied: true,
  markerLateNotApplied: true,
  markerLateBoundOneCycle: true,
});

/** io_arm and io_disarm once the fence passed. */
export function ioOperation(c: ModelConfig, m: ModelState, req: Request): Outcome[] {
  const spec = req.spec as FencedSpec;
  switch (spec.op) {
    case 'io_arm':
      if (c.plainOutput < 0) return [reason('reason:io_not_configured', 'io_not_configured')];
      if (m.markerLate) return [reason('reason:io_marker_late', 'io_marker_late')];
      return [{ rule: 'rule:op.io_arm.drive_conditions', status: 200, next: (s) => {
        s.ioArmed = true;
        // While a plan with intents runs, what re-arming does to an intent already passed is not shown: the
        // outputs are read from status until the plan ends (docs/profile.md "Model-based runs" Outputs; hil fuzz seed 683671540).
        if ([...s.handles.values()].some((h) => h.state === 'started' && h.core === s.core && (h.ioOn || h.ioOff))) s.outputs = 'unknown';
      } }];
    case 'io_disarm':
      if (c.plainOutput < 0) return [reason('reason:io_not_configured', 'io_not_configured')];
      return [{ rule: 'rule:op.io_disarm.clears', status: 200, next: (s) => {
        s.ioArmed = false;
        s.outputs = 0; // PROFILE "Trajectories" Output intents: io_disarm turns every output OFF
      } }];
  }
  throw new Error(`not an I/O operation: ${(spec as Spec).op}`);
}
