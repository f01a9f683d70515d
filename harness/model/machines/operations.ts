// The machine operations (document 1 part 4 enable, arm, home, halt, reset_fault, mark_telemetry; PROFILE
// "Machine operations"): the enable mask, armed, the homed axes, halt, and the interim reset_fault that
// retires the session.

import { reason, type EventExp, type ModelConfig, type ModelState, type Outcome } from '../state.ts';
import type { FencedSpec, Request, Spec } from '../spec.ts';
import { endGrant } from './grant.ts';
import { unlessProgram } from './programs.ts';

// The rules this machine applies, each a documented (or PROFILE) rule; a wrong-model variant
// (harness/model/variants.ts) flips one, and the reference stack must then refute the model.
export interface OperationRules {
  /** Part 3 grant table, halt: "active trajectory handle and jog generation retired" (and Enable and Arm kept). */
  haltRetiresActive: boolean;
  /** Part 3 grant table / part 4 reset_fault: "a submitted reset retires the session". */
  resetRetiresSession: boolean;
}

export const OPERATION_RULES: Readonly<OperationRules> = Object.freeze({
  haltRetiresActive: true,
  resetRetiresSession: true,
});

export function labelText(k: 'ok' | 'other' | 'empty' | 'max' | 'over'): string {
  return { ok: 'model-mark', other: 'model-mark-2', empty: '', max: 'é'.repeat(64), over: 'é'.repeat(64) + 'x' }[k];
}

/** enable, arm, home, halt, reset_fault and mark_telemetry once the fence passed. */
export function machineOperation(c: ModelConfig, m: ModelState, req: Request, cycles: bigint): Outcome[] {
  const spec = req.spec as FencedSpec;
  const f = req.resolved!;
  switch (spec.op) {
    case 'enable': {
      if (f.mask! >>> c.axisCount !== 0) return [reason('op.enable:outside', 'native_rejected')]; // PROFILE enable
      // A latched fault on a selected axis (the run's faults are on the plan's axis) refuses the enable.
      if (m.faultLatched && (f.mask! & (1 << c.trajAxis)) !== 0) return [reason('op.enable:fault', 'not_ready')];
      return [
        {
          rule: f.mask === 0 ? 'op.enable:zero' : 'op.enable',
          status: 200,
          next: (s) => {
            s.enableMask = f.mask!;
            if (f.mask === 0) s.armed = false; // PROFILE enable: 0 disables every axis and disarms
          },
        },
      ];
    }
    case 'arm': {
      if (m.enableMask === 0) return [reason('op.arm:no_enabled_axes', ['not_ready', 'native_rejected'])]; // PROFILE arm
      if (m.faultLatched) return [reason('op.arm:fault', 'not_ready')];
      return [{ rule: 'rule:op.arm.core_armed', status: 200, next: (s) => void (s.armed = true) }];
    }
    case 'home': {
      const mask = f.mask!;
      if (mask === 0 || mask >>> c.axisCount !== 0 || (mask & ~c.nativeHomeMask) !== 0) return [reason('rule:op.home.axis_mask', 'invalid_axis_mask')];
      // Part 4 home: with an anchor directory configured (not visible in Describe), success also captures
      // anchors, refused anchor_source_invalid when it finds the machine armed or enabled.
      const capture: Outcome[] =
        m.armed || (m.enableMask & ~mask) !== 0
          ? [reason('op.home:anchor_source_invalid', 'anchor_source_invalid', { next: (s) => void (s.adopt = true) })]
          : [];
      return [
        ...capture,
        {
          rule: 'rule:machine_effect.home_leaves_axes_disabled',
          status: 200,
          next: (s) => {
            s.homeMask |= mask;
            s.enableMask &= ~mask;
            s.armed = false; // PROFILE home: the cell is left disarmed
            s.epoch++;
          },
        },
      ];
    }
    case 'halt': {
      if (!m.armed || m.enableMask === 0 || m.faultLatched) return [reason('op.halt:inhibited', 'inhibited')];
      return [
        {
          rule: 'transition:grant:owned->owned:halt',
          status: 200,
          next: (s) => {
            if (s.jog) {
              s.owed.push({ type: 'jog_end', where: { jogGeneration: s.jog.n }, why: 'halt closes the jog generation', may: true });
              s.jog = undefined;
            }
            // A halted plan's intents may or may not have been reached: read the outputs from status.
            if ([...s.handles.values()].some((h) => h.state === 'started' && (h.ioOn || h.ioOff))) s.outputs = 'unknown';
            if (!c.rules.haltRetiresActive) return;
            for (const h of s.handles.values()) {
              if (h.state === 'started') {
                h.state = 'retired';
                s.owed.push({ type: 'handle_transition', where: { handle: h.n, from: 'started', to: 'retired' }, why: `halt retired ${h.n}`, may: true });
                s.owed.push({ type: 'execution_aborted', where: { handle: h.n }, why: `halt aborted ${h.n}`, may: true });
              }
            }
          },
        },
      ];
    }
    case 'reset_fault':
      // PROFILE "Programs" Machine operations: while a program executes, program_already_executing first.
      return unlessProgram(c, m, cycles, 'reason:program_already_executing:reset_fault', 'program_already_executing', (w) => resetFault(c, w));
    case 'mark_telemetry': {
      const text = labelText(spec.label);
      const n = Buffer.byteLength(text);
      if (n < 1 || n > 128) return [reason('limit:label_bytes', 'telemetry_label_invalid')];
      return [{ rule: 'rule:op.mark_telemetry.event', status: 200, check: (r) => (r.reply.sequence === undefined ? 'mark_telemetry answered without sequence' : undefined), events: [{ type: 'telemetry_mark', where: { label: text }, why: 'mark_telemetry accepted' }] }];
    }
  }
  throw new Error(`not a machine operation: ${(spec as Spec).op}`);
}

function resetFault(c: ModelConfig, m: ModelState): Outcome[] {
  {
      // PROFILE "Machine operations": inhibited idle is not armed, no jog, no Home or commissioning.
      if (m.armed || m.jog) return [reason('reason:reset_requires_inhibited', 'reset_requires_inhibited')];
      return [
        {
          rule: 'transition:grant:owned->session_retired:reset_fault',
          status: 200,
          check: (r) => {
            const d = r.reply.data as { reset_sequence?: bigint; reason?: string } | undefined;
            if (!d) return 'reset_fault answered without RecoveryStatus';
            if (r.reply.sequence === undefined || d.reset_sequence !== r.reply.sequence) return `RecoveryStatus.reset_sequence ${String(d.reset_sequence)} differs from the reply's sequence ${String(r.reply.sequence)}`;
            if (d.reason !== '') return `RecoveryStatus.reason ${JSON.stringify(d.reason)}: the injected condition was cleared, nothing persists`;
            return undefined;
          },
          next: (s) => {
            const evs: EventExp[] = [];
            if (c.rules.resetRetiresSession) endGrant(c, s, 'retired', evs, 'reset_fault retired the session');
            s.owed.push(...evs, { type: 'grant_revoked', why: 'the retired session', may: true });
            s.faultLatched = false;
            s.markerLate = false;
            s.adopt = true;
          },
        },
      ];
  }
}
