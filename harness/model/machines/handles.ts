// Trajectory and program handles (document 1 part 3 handle table; PROFILE "Trajectories" Handles,
// "Programs" Handles): preparation, supersession, discard, the terminal states and their reasons, grant end
// retiring a grant's handles, and the upload slots a preparation takes (part 8 "Upload slots").

import { big, hit, reason, handleOf, type EventExp, type HandleM, type HandleState, type ModelConfig, type ModelState, type Outcome, type Times } from '../state.ts';
import type { FencedSpec, ProgRef, Request, Spec } from '../spec.ts';
import { startGate } from './start-gate.ts';

// The rules this machine applies, each a documented (or PROFILE) rule; a wrong-model variant
// (harness/model/variants.ts) flips one, and the reference stack must then refute the model.
export interface HandleRules {
  /** Part 3: "started | discard_trajectory | (refused) | reason handle_active". */
  discardStartedRefused: boolean;
  /** Part 3: "prepared | newer preparation committed | superseded". */
  newerPreparationSupersedes: boolean;
  /** Part 3: "prepared | Stop, grant loss or uncertain outcome | retired". */
  grantEndRetiresPrepared: boolean;
  /** Part 3: "started | completion, or a later execution replaces it | consumed". */
  laterStartConsumes: boolean;
  /** Part 2 Request handle: "owned by the current core incarnation" (PROFILE: another incarnation's handle is unknown_handle). */
  handlesPerIncarnation: boolean;
  /** Part 3 handle table: terminal states "never regain permission": start of a terminal handle answers its state's reason. */
  terminalReasons: boolean;
  /** Part 3 handle table ("trajectory and program handles"); PROFILE "Programs" Handles: one numbering and one plan slot, so a program preparation supersedes a prepared trajectory handle and the reverse. */
  oneSlotForBothKinds: boolean;
  /** Part 8 "Upload slots: one upload of the same kind at a time (busy)": a second upload of the same kind is busy. */
  uploadBusySameKind: boolean;
  /** Part 8 upload slots are per kind: an upload of the other kind is admitted while one is in progress. */
  uploadSlotPerKind: boolean;
}

export const HANDLE_RULES: Readonly<HandleRules> = Object.freeze({
  discardStartedRefused: true,
  newerPreparationSupersedes: true,
  grantEndRetiresPrepared: true,
  laterStartConsumes: true,
  handlesPerIncarnation: true,
  terminalReasons: true,
  oneSlotForBothKinds: true,
  uploadBusySameKind: true,
  uploadSlotPerKind: true,
});

export const TERMINAL: ReadonlySet<HandleState> = new Set(['consumed', 'discarded', 'superseded', 'retired']);
export const STATE_REASON: Record<HandleState, string> = {
  prepared: '',
  started: 'handle_started',
  consumed: 'handle_consumed',
  discarded: 'handle_discarded',
  superseded: 'handle_superseded',
  retired: 'handle_retired',
};

/** PROFILE "Trajectories" Handles: the last 64 handles are kept; an older one may be forgotten (unknown_handle). */
export const HANDLES_KEPT = 64n;
export const forgotten = (m: ModelState, h: HandleM) => h.n + HANDLES_KEPT <= m.maxHandle;

/** Part 3: a Stop or grant loss retires the grant's prepared handle and its started one. */
export function retireHandles(c: ModelConfig, m: ModelState, session: string, events: EventExp[], why: string): void {
  for (const h of m.handles.values()) {
    if (h.session !== session || h.core !== m.core) continue;
    if (h.state === 'prepared' && c.rules.grantEndRetiresPrepared) {
      h.state = 'retired';
      events.push({ type: 'handle_transition', where: { handle: h.n, from: 'prepared', to: 'retired' }, why: `${why}: prepared handle ${h.n} retired` });
      hit(m, 'transition:handle:prepared->retired:stop_or_grant_loss');
    }
    if (h.state === 'started') {
      // Started at grant end: retired with execution_aborted, unless it finished first (timing).
      h.state = 'retired';
      events.push({ type: 'handle_transition', where: { handle: h.n, from: 'started', to: 'retired' }, why: `${why}: started handle ${h.n} retired`, may: true });
      events.push({ type: 'execution_aborted', where: { handle: h.n }, why: `${why}: execution of ${h.n} aborted`, may: true });
      hit(m, 'transition:handle:started->retired:stop');
    }
  }
}

/** Part 8 "Upload slots": a preparation of `kind` while an upload holds a slot (busy), or undefined. */
export function uploadBusy(c: ModelConfig, m: ModelState, kind: 'trajectory' | 'program'): Outcome[] | undefined {
  const other = kind === 'trajectory' ? 'program' : 'trajectory';
  if (m.upload?.kind === kind && c.rules.uploadBusySameKind) return [reason('limit:upload_slots_per_kind:busy', 'busy')];
  if (m.upload?.kind === other && !c.rules.uploadSlotPerKind) return [reason('limit:upload_slots_per_kind:global', 'busy')];
  return undefined;
}

/** prepare_trajectory, start_trajectory and discard_trajectory once the fence passed. */
export function handleOperation(c: ModelConfig, m: ModelState, req: Request, cycles: bigint, t: Times): Outcome[] {
  const spec = req.spec as FencedSpec;
  const g = m.grant!;
  const f = req.resolved!;
  switch (spec.op) {
    case 'prepare_trajectory': {
      // PROFILE "prepare_trajectory uploads": admission (fence, then the upload slot) comes before the points are read.
      const busy = uploadBusy(c, m, 'trajectory');
      if (busy) return busy;
      // PROFILE "Trajectories" point rules: an io bit naming an unconfigured output, or a torch output.
      if (spec.io === 'unconfigured') return [reason('prepare:io_unconfigured', 'io_not_configured')];
      if (spec.io === 'torch') return [reason('prepare:io_torch', 'io_torch_unqualified')];
      if ((spec.io === 'on' || spec.io === 'on0' || spec.io === 'off') && c.plainOutput < 0) return [reason('prepare:io_unconfigured', 'io_not_configured')];
      return [prepared(c, m, 'trajectory', { ioOn: spec.io === 'on' || spec.io === 'on0', ioAt0: spec.io === 'on0', ioOff: spec.io === 'off', bit: planBit(c, spec.axis) }, g.session)];
    }
    case 'start_trajectory':
    case 'discard_trajectory': {
      const start = spec.op === 'start_trajectory';
      const h = handleOf(m, f.handle);
      if (!h || (h.core !== m.core && c.rules.handlesPerIncarnation)) return [reason('reason:unknown_handle', 'unknown_handle')];
      // A handle out of the kept window (only a terminal one can be that old): its reason, or forgotten.
      if (forgotten(m, h) && TERMINAL.has(h.state)) return [reason(`rule:handle.terminal_never_regain:${h.state}`, [c.rules.terminalReasons ? STATE_REASON[h.state] : 'unknown_handle', 'unknown_handle'])];
      // A program handle is started by identity (start_program); start_trajectory does not know it, and
      // keeps it prepared (PROFILE "Programs"). discard_trajectory acts on both kinds (part 3 handle table).
      if (h.kind === 'program' && start && c.rules.startTrajectoryRefusesProgram) return [reason('reason:unknown_handle:program_handle', 'unknown_handle', { next: () => undefined })];
      if (h.kind === 'program' && !start && !c.rules.discardTakesProgramHandles) return [reason('reason:unknown_handle:program_handle', 'unknown_handle')];
      if (h.state === 'started') {
        if (start) return [reason('reason:handle_started', 'handle_started')];
        if (c.rules.discardStartedRefused) return [reason(`transition:handle:started->refused:discard${h.kind ? ' (program)' : ''}`, 'handle_active')];
      }
      if (TERMINAL.has(h.state)) {
        const label = STATE_REASON[h.state];
        if (c.rules.terminalReasons) return [reason(`rule:handle.terminal_never_regain:${h.state}`, label)];
        return [reason(`rule:handle.terminal_never_regain:${h.state}`, 'unknown_handle')];
      }
      if (!start) {
        if (h.state === 'started') {
          // Only reached by the wrong-model variant that accepts discard of a started handle.
          return [{ rule: 'discard:started', status: 200, next: (s) => void (handleOf(s, h.n)!.state = 'discarded') }];
        }
        return [
          {
            rule: `transition:handle:prepared->discarded:discard${h.kind ? ' (program)' : ''}`,
            status: 200,
            next: (s) => void (handleOf(s, h.n)!.state = 'discarded'),
            events: [{ type: 'handle_transition', where: { handle: h.n, from: 'prepared', to: 'discarded' }, why: 'discard of a prepared handle' }],
          },
        ];
      }
      return startGate(c, m, h, h.bit, cycles, t, spec.late);
    }
  }
  throw new Error(`not a handle operation: ${(spec as Spec).op}`);
}

/** The axis bit of a plan: the first native-home axis, or the last one. */
export function planBit(c: ModelConfig, axis: 'first' | 'last' | undefined): number {
  if (axis === 'last') {
    for (let i = c.axisCount - 1; i >= 0; i--) if (c.nativeHomeMask & (1 << i)) return 1 << i;
  }
  return 1 << c.trajAxis;
}

/**
 * An accepted preparation (part 3 "(none) -> prepared"): the next number of the shared numbering (PROFILE
 * "Trajectories" Handles), superseding the prepared handle (of either kind: one plan slot, PROFILE
 * "Programs" Handles). A trajectory's reply carries the handle; a program's does not ("response carries
 * handle for trajectories"), so its number is checked in the handle_transition event and in status.
 */
export function prepared(c: ModelConfig, m: ModelState, kind: 'trajectory' | 'program', plan: { ioOn: boolean; ioAt0: boolean; ioOff: boolean; bit: number; prog?: ProgRef }, session: string): Outcome {
  const program = kind === 'program';
  const expected = m.maxHandle + 1n;
  return {
    rule: program ? 'transition:handle:none->prepared:prepare_program' : 'transition:handle:none->prepared:prepare',
    status: 200,
    check: (r) => {
      if (program) {
        const d = r.reply.data as Record<string, unknown> | undefined;
        if (!d || typeof d.identity !== 'object' || d.identity === null) return 'prepare_program answered without data.identity';
        if (r.reply.handle !== undefined) return `prepare_program answered handle ${r.reply.handle} (part 3: the reply carries a handle for trajectories)`;
        if (d.requires_process_io !== plan.ioOn) return `Program.requires_process_io ${String(d.requires_process_io)}, expected ${plan.ioOn}`;
        if (BigInt(d.axis_mask as bigint) !== BigInt(plan.bit)) return `Program.axis_mask ${String(d.axis_mask)}, expected ${plan.bit}`;
        return undefined;
      }
      const h = r.reply.handle;
      if (h === undefined || h === 0n) return 'prepare_trajectory answered without a handle';
      if (h <= m.maxHandle) return `handle ${h} is not above every handle issued before (${m.maxHandle}); PROFILE: numbers 1, 2, 3 ... per adapter incarnation`;
      if (m.maxHandle > m.baseHandle && h !== expected) return `handle ${h}, expected ${expected} (PROFILE: numbers 1, 2, 3 ... shared)`;
      return undefined;
    },
    next: (s, r) => {
      const n = program ? s.maxHandle + 1n : r.reply.handle!;
      if (c.rules.newerPreparationSupersedes) {
        for (const h of s.handles.values()) {
          if (h.state !== 'prepared') continue;
          if (!c.rules.oneSlotForBothKinds && (h.kind === 'program') !== program) continue;
          h.state = 'superseded';
          s.owed.push({ type: 'handle_transition', where: { handle: h.n, from: 'prepared', to: 'superseded' }, why: `newer preparation superseded ${h.n}` });
          hit(s, `transition:handle:prepared->superseded:newer_preparation${(h.kind === 'program') !== program ? ' (other kind)' : ''}`);
        }
      }
      const rec: HandleM = { n, state: 'prepared', core: s.core, session, ioOn: plan.ioOn, epoch: s.epoch, bit: plan.bit, ...(plan.ioAt0 ? { ioAt0: true } : {}), ...(plan.ioOff ? { ioOff: true } : {}) };
      if (program) {
        const identity = (r.reply.data as { identity: Record<string, unknown> }).identity;
        const text = JSON.stringify(identity, big);
        rec.kind = 'program';
        rec.ident = text;
        s.identities = [...s.identities.filter((x) => x.key !== plan.prog), { key: plan.prog!, text, identity }];
      }
      s.handles.set(String(n), rec);
      s.maxHandle = n;
    },
    events: [{ type: 'handle_transition', where: { from: '', to: 'prepared', ...(program ? { handle: expected } : {}) }, why: `${kind} prepared` }],
  };
}
