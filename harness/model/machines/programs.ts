// Programs (document 1 part 4 prepare_program, start_program; PROFILE "Programs"): one program executing
// at a time, start by identity, and the worlds where a started program may have completed by now.

import type { CheckedReply } from '../../oracle/reply.ts';
import { cloneState, findLast, reason, type HandleM, type ModelConfig, type ModelState, type Outcome, type Times } from '../state.ts';
import type { FencedSpec, Request, Resolved, Spec } from '../spec.ts';
import { forgotten, planBit, prepared, STATE_REASON, TERMINAL, uploadBusy } from './handles.ts';
import { startGate } from './start-gate.ts';

// The rules this machine applies, each a documented (or PROFILE) rule; a wrong-model variant
// (harness/model/variants.ts) flips one, and the reference stack must then refute the model.
export interface ProgramRules {
  /** PROFILE "Programs" start_program order: another program executing is program_already_executing (not replaced). */
  programAlreadyExecuting: boolean;
  /** Part 2 Request handle ("nonzero handle for start/discard"); PROFILE "Programs": start_trajectory of a program handle is unknown_handle, the handle kept. */
  startTrajectoryRefusesProgram: boolean;
  /** Part 3 handle table: discard_trajectory acts on program handles too (prepared discarded, started handle_active). */
  discardTakesProgramHandles: boolean;
  /** Part 4 start_program: "Same start gate as start_trajectory" (armed, enabled, homed, io_arm for ON markers). */
  programStartGate: boolean;
}

export const PROGRAM_RULES: Readonly<ProgramRules> = Object.freeze({
  programAlreadyExecuting: true,
  startTrajectoryRefusesProgram: true,
  discardTakesProgramHandles: true,
  programStartGate: true,
});

/** prepare_program and start_program once the fence passed. */
export function programOperation(c: ModelConfig, m: ModelState, req: Request, cycles: bigint, t: Times): Outcome[] {
  const spec = req.spec as FencedSpec;
  const g = m.grant!;
  const f = req.resolved!;
  switch (spec.op) {
    case 'prepare_program': {
      // PROFILE "Program admission" route order after the fence: busy, program_already_executing, then the file.
      const busy = uploadBusy(c, m, 'program');
      if (busy) return busy;
      return unlessProgram(c, m, cycles, 'reason:program_already_executing:prepare', 'program_already_executing', (w) => {
        if (spec.prog === 'no_id') return [reason('reason:program_identity_missing', 'program_identity_missing')];
        return [prepared(c, w, 'program', { ioOn: spec.prog === 'on', ioAt0: spec.prog === 'on', ioOff: false, bit: planBit(c, undefined), prog: spec.prog }, g.session)];
      });
    }
    case 'start_program':
      return startProgram(c, m, f, cycles, t);
  }
  throw new Error(`not a program operation: ${(spec as Spec).op}`);
}

/** A program executes in this core incarnation (a started program handle). */
export function programExecuting(m: ModelState): HandleM | undefined {
  return [...m.handles.values()].find((h) => h.kind === 'program' && h.state === 'started' && h.core === m.core);
}

/**
 * Whether a started program surely still executes at core cycle `cycles`, or may have completed (its end
 * is observed in status later): 'maybe' once the plan's cycles may have run (same bound as run.ts checkHandles).
 */
export function programRunning(c: ModelConfig, m: ModelState, cycles: bigint): 'no' | 'yes' | 'maybe' {
  const h = programExecuting(m);
  if (!h) return 'no';
  const ran = cycles - (h.startCycle ?? cycles);
  return ran < BigInt(h.cycles ?? c.planCycles) - 25n ? 'yes' : 'maybe';
}

/**
 * The outcomes in the world where a started program still executes and, when it may have ended by now,
 * also in the world where it completed (consumed, its events owed; the next status read confirms which).
 */
function programWorlds(c: ModelConfig, m: ModelState, cycles: bigint, f: (w: ModelState) => Outcome[]): Outcome[] {
  if (programRunning(c, m, cycles) !== 'maybe') return f(m);
  const done = cloneState(m);
  programExecuting(done)!.state = 'consumed';
  const complete = (s: ModelState) => {
    const x = programExecuting(s);
    if (!x) return;
    x.state = 'consumed';
    s.owed.push({ type: 'handle_transition', where: { handle: x.n, from: 'started', to: 'consumed' }, why: `${x.n} completed` }, { type: 'execution_completed', where: { handle: x.n }, why: `${x.n} completed` });
  };
  return [...f(m), ...f(done).map((o) => ({ ...o, rule: `${o.rule} (program completed first)`, next: (s: ModelState, r: CheckedReply) => { complete(s); o.next?.(s, r); } }))];
}

/** `label` while a program executes (PROFILE "Programs"), otherwise `rest`. */
export function unlessProgram(c: ModelConfig, m: ModelState, cycles: bigint, rule: string, label: string, rest: (w: ModelState) => Outcome[]): Outcome[] {
  return programWorlds(c, m, cycles, (w) => (programExecuting(w) && c.rules.programAlreadyExecuting ? [reason(rule, label)] : rest(w)));
}

/** start_program (part 4; PROFILE "Programs" start_program lookup and order). */
function startProgram(c: ModelConfig, m: ModelState, f: Resolved, cycles: bigint, t: Times): Outcome[] {
  return programWorlds(c, m, cycles, (w) => startProgramIn(c, w, f, cycles, t));
}

function startProgramIn(c: ModelConfig, m: ModelState, f: Resolved, cycles: bigint, t: Times): Outcome[] {
  const g = m.grant!;
  // The newest program handle with an equal identity among the handles the adapter keeps (the last 64).
  const h = findLast([...m.handles.values()], (x) => x.kind === 'program' && x.ident === f.ident && !forgotten(m, x));
  if (h?.state === 'started') return [reason('reason:handle_started:program', 'handle_started')];
  const running = programExecuting(m);
  if (running && c.rules.programAlreadyExecuting) return [reason('reason:program_already_executing', 'program_already_executing')];
  if (!h) return [reason('reason:program_identity_mismatch', 'program_identity_mismatch')];
  if (h.core !== m.core) return [reason('reason:unknown_handle:program', 'unknown_handle')];
  // An earlier grant's handle is terminal (grant end retires it) and answers its state's reason, as for
  // trajectories (PROFILE "Trajectories" Handles; the "Programs" order names unknown_handle for another
  // grant first, which only a non-terminal handle of another grant could reach).
  if (TERMINAL.has(h.state)) return [reason(`rule:handle.terminal_never_regain:${h.state} (program)`, c.rules.terminalReasons ? STATE_REASON[h.state] : 'unknown_handle')];
  if (h.session !== g.session) return [reason('reason:unknown_handle:program', 'unknown_handle')];
  return startGate(c, m, h, h.bit, cycles, t);
}
