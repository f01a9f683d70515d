// The motion start gate (document 1 part 4 start_trajectory, start_program "Same start gate", arm "the
// motion start gate is checked at every Start"; its preconditions and their order are PROFILE
// "Trajectories"): another lane, a latched fault, armed, enabled, homed, the held target, io_arm for an ON
// intent, and what a late first cycle does to an intent on the first point (PROFILE "Programs" Output intents).

import type { CheckedReply } from '../../oracle/reply.ts';
import { cloneState, handleOf, hit, reason, type HandleM, type ModelConfig, type ModelState, type Outcome, type Times } from '../state.ts';
import { jogAt } from './jog.ts';

// The rules this machine applies, each a documented (or PROFILE) rule; a wrong-model variant
// (harness/model/variants.ts) flips one, and the reference stack must then refute the model.
export interface StartGateRules {
  /** Part 4 start gate: Start needs the core armed (part 4 arm: "the motion start gate is checked at every Start"). */
  startGateArmed: boolean;
  /** PROFILE start gate: the trajectory's axes enabled. */
  startGateEnabled: boolean;
  /** PROFILE start gate: axes that require Home homed. */
  startGateHomed: boolean;
  /** PROFILE start gate: no other lane (an open jog) on the plan's axes (mode_conflict, handle kept). */
  startGateOtherLane: boolean;
}

export const START_GATE_RULES: Readonly<StartGateRules> = Object.freeze({
  startGateArmed: true,
  startGateEnabled: true,
  startGateHomed: true,
  startGateOtherLane: true,
});

/** Part 4 start gate (PROFILE "Trajectories": its preconditions and their order). */
export function startGate(c: ModelConfig, m: ModelState, h: HandleM, bit: number, cycles: bigint, t: Times, late?: 'cycle' | 'under'): Outcome[] {
  const kept = (rule: string, label: string): Outcome => reason(rule, label, { next: () => undefined });
  // Another lane on the plan's axes (an open jog) is mode_conflict, handle kept (PROFILE start gate); a jog
  // whose input may have expired may be gone.
  const jog = m.jog && (m.jog.bit & bit) !== 0 && c.rules.startGateOtherLane ? jogAt(m, t) : 'none';
  if (jog === 'alive') return [kept('transition:handle:prepared->prepared:start_refused:jog', 'mode_conflict')];
  if (jog === 'maybe') {
    const gone = cloneState(m);
    gone.jog = undefined;
    return [kept('transition:handle:prepared->prepared:start_refused:jog', 'mode_conflict'), ...startGate(c, gone, h, bit, cycles, t, late).map((o) => ({ ...o, next: (s: ModelState, r: CheckedReply) => { s.jog = undefined; o.next?.(s, r); } }))];
  }
  const prog = h.kind === 'program' ? ' (program)' : '';
  const gate = h.kind !== 'program' || c.rules.programStartGate;
  if (m.faultLatched) return [kept(`transition:handle:prepared->prepared:start_refused:fault${prog}`, 'not_ready')];
  if (gate && c.rules.startGateArmed && !m.armed) return [kept(`transition:handle:prepared->prepared:start_refused:not_armed${prog}`, 'not_ready')];
  if (gate && c.rules.startGateEnabled && (m.enableMask & bit) === 0) return [kept(`transition:handle:prepared->prepared:start_refused:not_enabled${prog}`, 'not_ready')];
  if (gate && c.rules.startGateHomed && (m.homeMask & bit) === 0) return [kept(`transition:handle:prepared->prepared:start_refused:not_homed${prog}`, 'not_ready')];
  const started: Outcome = {
    rule: `transition:handle:prepared->started:start${prog}`,
    status: 200,
    check: (r) => (r.reply.sequence === undefined ? 'start_trajectory answered without sequence' : undefined),
    next: (s) => {
      for (const o of s.handles.values()) {
        if (o.state === 'started' && o.n !== h.n && c.rules.laterStartConsumes) {
          o.state = 'consumed';
          s.owed.push({ type: 'handle_transition', where: { handle: o.n, from: 'started', to: 'consumed' }, why: `a later start replaced ${o.n}` });
          s.owed.push({ type: 'execution_completed', where: { handle: o.n }, why: `a later start replaced ${o.n}` });
          hit(s, 'transition:handle:started->consumed:completion (replaced)');
          // The replaced plan's intents may or may not have been reached.
          if (o.ioOn || o.ioOff) s.outputs = 'unknown';
        }
      }
      const x = handleOf(s, h.n)!;
      x.state = 'started';
      x.startCycle = cycles;
      // Its intents act while it runs: the outputs are known again at completion (run.ts checkHandles).
      if (x.ioOn || x.ioOff) s.outputs = 'unknown';
    },
    events: [
      { type: 'handle_transition', where: { handle: h.n, from: 'prepared', to: 'started' }, why: 'start accepted' },
      { type: 'execution_started', where: { handle: h.n }, why: 'start accepted' },
    ],
  };
  // The first cycle woken late (out of band) reaches an intent on point 0 one cycle or more after it was
  // due: not applied, fault bit 10 io_marker_late latched in that cycle (PROFILE "Programs" Output intents).
  const lateBy = late === 'cycle' ? 1 : late === 'under' ? 0 : -1;
  const isLate = lateBy === 1 || (lateBy === 0 && !c.rules.markerLateBoundOneCycle);
  if (isLate && h.ioOn && h.ioAt0 && m.ioArmed && c.rules.markerLateNotApplied) {
    const next = started.next!;
    started.rule = `${started.rule} (first cycle late: io_marker_late)`;
    started.next = (s, r) => {
      next(s, r);
      const x = handleOf(s, h.n)!;
      x.state = 'retired';
      s.outputs = 0;
      s.markerLate = true;
      s.faultLatched = true;
      // The fault reaction's effect on arm and enable is read from status (as after an injected fault).
      s.adopt = true;
      hit(s, 'profile:io.marker_late');
      s.owed.push({ type: 'handle_transition', where: { handle: h.n, from: 'started', to: 'retired' }, why: `io_marker_late retired ${h.n}` }, { type: 'execution_faulted', where: { handle: h.n }, why: `io_marker_late faulted ${h.n}` });
    };
  } else if (late !== undefined && h.ioOn && h.ioAt0 && m.ioArmed) {
    hit(m, `profile:io.marker_late (${late === 'under' ? 'one ns under the bound: applied' : 'not reached'})`);
  }
  const out: Outcome[] = [];
  // The held target may have moved since the plan was made (Home, core restart): the gate's "first point
  // at the held target" may refuse (PROFILE), handle kept.
  if (h.epoch !== m.epoch) out.push(kept('transition:handle:prepared->prepared:start_refused:held_target', 'not_ready'));
  if (h.ioOn && c.rules.startNeedsIoArmForOnIntent && gate && !m.ioArmed) return [...out, kept(`transition:handle:prepared->prepared:start_refused:io_not_armed${prog}`, 'io_not_armed')];
  return [...out, started];
}
