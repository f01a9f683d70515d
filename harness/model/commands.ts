// fast-check model-based commands over the model (harness/model/model.ts) and a target: every control
// operation the model knows, observations after each step, and the out-of-band actions the target offers
// (stepped-clock steps, a held stop drain, lease expiry by waiting, core restart). Jog is begun, ended and
// renewed (legacy) with zero velocities; update_jog datagrams are not sent (the model does not follow
// frame-by-frame input yet). Arguments are drawn
// near the documented edges: generations 0, 1, current, current±1, 2^64-1; leases 0, 1, the ceiling and
// one over, 10000 and 10001; controller and label lengths at their bounds and one over; request ids at 64
// and 65 bytes; handles of other incarnations, terminal handles, 0 and 2^64-1.
//
// A failure is shrunk by fast-check to a minimal sequence and printed as a replayable path
// (HIL_MODEL_SEED, HIL_MODEL_PATH) and as a vitest example that replays the sequence's commands.

import fc from 'fast-check';
import type { Target } from '../targets/types.ts';
import { REFERENCE_RULES, type HandleRef, type IdentRef, type ModelState, type ProgRef, type RidRef, type Rules, type Spec } from './model.ts';
import { closeRun, newStats, openRun, programUnfit, runSpec, type Description, type ModelStats, type RunContext } from './run.ts';

/**
 * The stack a model run asks for: the stepped clock (no sleeping through real time) and a short simulated
 * Home (20 ms of the cell's clock), so a Home fits well inside a 500 ms lease even when the host is loaded.
 */
export const MODEL_VARIANT = { clock: 'stepped', homingMs: 20 } as const;

/** What the run may do besides the documented interface (Target abilities). */
export interface Abilities {
  stepped: boolean;
  faultInjection: boolean;
  coreRestart: boolean;
  motion: boolean;
  /** The model's program files fit the cell (harness/model/cell.ts programUnfit). */
  programs?: boolean;
  /** Describe lists update_jog implemented (jog.sock served: local_jog_update frames). */
  jogFrames?: boolean;
}

export function abilitiesOf(t: Target): Abilities {
  return { stepped: typeof t.stepReport === 'function', faultInjection: t.abilities.faultInjection, coreRestart: t.abilities.coreRestart, motion: t.abilities.motion };
}

/** The abilities, with what Describe says about programs and jog frames. */
export async function describedAbilities(t: Target): Promise<Abilities> {
  const ab = abilitiesOf(t);
  const client = t.client();
  const r = await client.describe();
  if (r.status !== 200) return ab;
  const d = r.reply.data as unknown as Description & { capabilities?: Array<{ name: string; state: string }> };
  const trajAxis = Math.max(0, d.axes.findIndex((a) => a.native_home));
  return { ...ab, programs: programUnfit(d, trajAxis) === undefined, jogFrames: (d.capabilities ?? []).some((x) => x.name === 'update_jog' && x.state === 'implemented') };
}

/** The model plus the abilities, as fast-check's model object. */
export interface FcModel {
  m: ModelState;
  ab: Abilities;
}

class SpecCommand implements fc.AsyncCommand<FcModel, RunContext, false> {
  constructor(readonly spec: Spec) {}
  check(fm: Readonly<FcModel>): boolean {
    return allowed(fm.m, fm.ab, this.spec);
  }
  async run(fm: FcModel, x: RunContext): Promise<void> {
    x.allow ??= (m, s) => allowed(m, fm.ab, s);
    await runSpec(x, this.spec);
    fm.m = x.m;
  }
  toString(): string {
    return JSON.stringify(this.spec);
  }
}

const MOTION = new Set(['enable', 'arm', 'home', 'halt', 'start_trajectory', 'start_program', 'ready', 'replan', 'begin_jog', 'jog', 'update_jog']);
const PROGRAM = new Set(['prepare_program', 'start_program']);

/** Preconditions: what the generator may send in a state (never a rule of the target). */
export function allowed(m: ModelState, ab: Abilities, spec: Spec): boolean {
  if (!ableTo(ab, spec)) return false;
  // A burst is sent when its first step may be; each later step is checked as it comes (harness/model/run.ts).
  if (spec.op === 'burst') {
    // A burst that runs a plan to completion only under a lease the run keeps alive (400 ms or more): under
    // a short lease left to run out, whether the plan completed or the grant end retired it first is decided
    // inside one step, and the model does not follow that order (hil fuzz seed 268772340).
    if (m.grant && m.grant.leaseMs < 400 && spec.steps.some((x) => x.op === 'step' && x.cycles >= 400)) return false;
    return spec.steps.length > 0 && allowed(m, ab, spec.steps[0]!);
  }
  const started = [...m.handles.values()].some((h) => h.state === 'started' && h.core === m.core);
  // While an upload is held, nothing that ends the core or waits long (the held connection is kept short).
  if (m.upload && (spec.op === 'restart_core' || spec.op === 'wait_lease' || spec.op === 'fault' || spec.op === 'hold_upload')) return false;
  switch (spec.op) {
    case 'hold_upload':
      // A program upload while a program executes is refused before it holds anything (PROFILE "Program admission").
      // Under a grant the run keeps alive (a lease of 400 ms or more), so the held upload's fence holds.
      return !!m.grant && !m.grant.stopping && m.grant.leaseMs >= 400 && !(spec.kind === 'program' && started);
    case 'finish_upload':
      // Only under the fence it was admitted with (what a later fence change does to it is not shown).
      return !!m.upload && !!m.grant && !m.grant.stopping && m.grant.session === m.upload.session && m.grant.generation === m.upload.generation;
    case 'abandon_upload':
      // Under a grant of the run's (not stopping), so that the run can see the slot freed (harness/model/channels.ts abandonUpload).
      return !!m.upload && !!m.grant && !m.grant.stopping;
    case 'fault':
      return ab.faultInjection && !m.grant?.stopping && !m.faultLatched;
    case 'restart_core':
      // Rarer than the rest: only once the run has a grant and a handle to lose.
      return ab.coreRestart && !!m.grant && !m.grant.stopping && m.handles.size > 0;
    case 'ready':
      return !started && !m.jog && !m.faultLatched;
    case 'replan':
      return started && !!m.grant && !m.grant.stopping;
    case 'drain':
      return !!m.grant?.stopping;
    case 'stop':
      return spec.drain || (ab.stepped && !!m.grant && !m.grant.stopping);
    case 'wait_lease':
      return !!m.grant && m.grant.leaseMs <= 60 && !m.grant.stopping;
    // Enable and Home while a plan executes: how the documents' gate treats a changed enable mask or a
    // Home under a running trajectory is not shown; the generator leaves those combinations out.
    case 'enable':
      return !started && !m.jog;
    case 'home':
      return !started && !m.jog && !m.faultLatched;
    default:
      return true;
  }
}

/** What the target can take at all, whatever the state (motion, programs, jog frames). */
function ableTo(ab: Abilities, spec: Spec): boolean {
  if (spec.op === 'burst') return spec.steps.every((x) => ableTo(ab, x));
  if (MOTION.has(spec.op) && !ab.motion) return false;
  if ((PROGRAM.has(spec.op) || (spec.op === 'ready' && spec.plan?.startsWith('program')) || (spec.op === 'hold_upload' && spec.kind === 'program')) && !ab.programs) return false;
  if (spec.op === 'update_jog' && !ab.jogFrames) return false;
  if (spec.op === 'restart_core' && !ab.coreRestart) return false;
  // A late first cycle is shown through the test channel on the stepped clock only (PROFILE "late_wake").
  if (spec.op === 'start_trajectory' && spec.late && !(ab.faultInjection && ab.stepped)) return false;
  return true;
}

/** Mostly the current fence (so sequences get somewhere), now and then each edge. */
const weighted = <T>(...xs: Array<[number, T]>) => fc.oneof(...xs.map(([weight, v]) => ({ weight, arbitrary: fc.constant(v) })));
const sess = weighted<'current' | 'ended' | 'never' | 'malformed'>([30, 'current'], [2, 'ended'], [1, 'never'], [1, 'malformed']);
const gen = weighted<'current' | 'older' | 'acquired' | 'newer' | 'zero' | 'one' | 'max'>([24, 'current'], [2, 'older'], [1, 'acquired'], [2, 'newer'], [1, 'zero'], [1, 'one'], [1, 'max']);
const rid = weighted<RidRef>([24, undefined], [3, 'a'], [2, 'b'], [1, 'c'], [1, 'long64'], [1, 'empty'], [1, 'long65'], [1, 'control_char']);
const fence = fc.record({ s: sess, g: gen, rid });
const lease = weighted<number | undefined>([4, undefined], [1, 0], [1, 1], [1, 20], [1, 499], [2, 500], [1, 501], [4, 10_000], [1, 10_001]);

/** The command arbitraries, weighted toward the operations that keep a sequence interesting. */
export function commandArbs(ab: Abilities): Array<fc.Arbitrary<fc.AsyncCommand<FcModel, RunContext, false>>> {
  const cmd = (a: fc.Arbitrary<Spec>) => a.map((s) => new SpecCommand(s));
  const w = <T>(n: number, a: fc.Arbitrary<T>) => Array.from({ length: n }, () => a);
  const arbs: Array<fc.Arbitrary<Spec>> = [
    ...w(3, fc.record({ op: fc.constant('acquire' as const), lease, binding: weighted<'ok' | 'wrong'>([12, 'ok'], [1, 'wrong']), controller: weighted<'ok' | 'other' | 'empty' | 'max' | 'over'>([10, 'ok'], [2, 'other'], [1, 'max'], [1, 'empty'], [1, 'over']), rid })),
    ...w(10, fence.map((f) => ({ op: 'renew' as const, ...f }))),
    ...w(1, fence.map((f) => ({ op: 'release' as const, ...f }))),
    ...w(2, fc.tuple(fence, fc.boolean()).map(([f, drain]) => ({ op: 'stop' as const, ...f, drain }))),
    ...w(1, fc.tuple(fence, fc.constantFrom<'ok' | 'other' | 'empty' | 'max' | 'over'>('ok', 'other', 'max', 'empty', 'over')).map(([f, label]) => ({ op: 'mark_telemetry' as const, ...f, label }))),
    ...w(1, fence.map((f) => ({ op: 'io_arm' as const, ...f }))),
    ...w(1, fence.map((f) => ({ op: 'io_disarm' as const, ...f }))),
    ...w(3, fc.tuple(fence, fc.constantFrom<'none' | 'on' | 'on0' | 'off' | 'torch' | 'unconfigured'>('none', 'none', 'none', 'on', 'on0', 'off', 'torch', 'unconfigured'), weighted<'first' | 'last'>([4, 'first'], [1, 'last'])).map(([f, io, axis]) => ({ op: 'prepare_trajectory' as const, ...f, io, ...(axis === 'last' ? { axis } : {}) }))),
    ...w(2, fc.tuple(fence, fc.constantFrom<'prepared' | 'started' | 'last' | 'terminal' | 'other_core' | 'zero' | 'next' | 'max'>('prepared', 'started', 'started', 'last', 'terminal', 'other_core', 'zero', 'next', 'max')).map(([f, h]) => ({ op: 'discard_trajectory' as const, ...f, h }))),
    fc.constant({ op: 'drain' as const }),
    fc.constantFrom(1, 10, 60, 200, 400).map((cycles) => ({ op: 'step' as const, cycles })),
    fc.constant({ op: 'wait_lease' as const }),
  ];
  if (ab.motion) {
    arbs.push(
      ...w(4, fc.tuple(fence, weighted<'prepared' | 'started' | 'last' | 'terminal' | 'other_core' | 'zero' | 'next' | 'max'>([8, 'prepared'], [1, 'started'], [1, 'last'], [1, 'terminal'], [1, 'other_core'], [1, 'zero'], [1, 'next'], [1, 'max'])).map(([f, h]) => ({ op: 'start_trajectory' as const, ...f, h }))),
      ...w(2, fc.tuple(fence, fc.constantFrom<'traj' | 'all' | 'others' | 'zero' | 'outside'>('traj', 'all', 'all', 'others', 'zero', 'outside')).map(([f, mask]) => ({ op: 'enable' as const, ...f, mask }))),
      ...w(2, fence.map((f) => ({ op: 'arm' as const, ...f }))),
      ...w(1, fc.tuple(fence, fc.constantFrom<'traj' | 'zero' | 'outside' | 'non_home'>('traj', 'traj', 'zero', 'outside', 'non_home')).map(([f, mask]) => ({ op: 'home' as const, ...f, mask }))),
      ...w(1, fence.map((f) => ({ op: 'halt' as const, ...f }))),
      ...w(3, fc.constant({ op: 'replan' as const })),
      ...w(
        2,
        fc
          .tuple(fence, weighted<'traj' | 'zero' | 'outside'>([8, 'traj'], [1, 'zero'], [1, 'outside']), weighted<'ok' | 'empty' | 'other'>([8, 'ok'], [1, 'empty'], [1, 'other']), weighted<'ok' | 'before' | 'stale'>([8, 'ok'], [1, 'before'], [1, 'stale']))
          .map(([f, mask, clock, deadline]) => ({ op: 'begin_jog' as const, ...f, mask, clock, deadline })),
      ),
      ...w(2, fc.tuple(fence, weighted<'current' | 'older' | 'zero' | 'next' | 'legacy'>([4, 'current'], [1, 'older'], [1, 'zero'], [1, 'next'], [4, 'legacy'])).map(([f, jg]) => ({ op: 'end_jog' as const, ...f, jg }))),
      ...w(2, fc.tuple(fence, fc.constantFrom<0 | 1 | 100 | 250 | 251>(0, 1, 100, 250, 250, 250, 251)).map(([f, timeout]) => ({ op: 'jog' as const, ...f, timeout }))),
      ...w(
        4,
        fc
          .tuple(weighted<'none' | 'on' | 'on0'>([6, 'none'], [1, 'on'], [1, 'on0']), weighted<'' | 'arm' | 'axis'>([6, ''], [1, 'arm'], [1, 'axis']), weighted<'' | 'last'>([6, ''], [1, 'last']))
          .map(([plan, omit, axis]) => ({ op: 'ready' as const, ...(plan !== 'none' ? { plan } : {}), ...(omit ? { omit } : {}), ...(axis ? { axis } : {}) })),
      ),
    );
  }
  const hRefs = fc.constantFrom<HandleRef>('prepared', 'started', 'last', 'terminal', 'program', 'zero', 'next');
  // Uploads held open: one kind, then the other (part 8 upload slots), finished or abandoned.
  arbs.push(...w(2, weighted<'trajectory' | 'program'>([1, 'trajectory'], [1, 'program']).map((kind) => ({ op: 'hold_upload' as const, kind }))), ...w(2, fc.constant({ op: 'finish_upload' as const })), fc.constant({ op: 'abandon_upload' as const }));
  if (ab.programs) {
    arbs.push(...w(3, fc.tuple(fc.record({ s: sess, g: gen }), weighted<ProgRef>([6, 'a'], [3, 'b'], [2, 'on'], [1, 'no_id'])).map(([f, prog]) => ({ op: 'prepare_program' as const, ...f, prog }))));
    arbs.push(...w(1, fc.tuple(fence, hRefs).map(([f, h]) => ({ op: 'discard_trajectory' as const, ...f, h }))));
    if (ab.motion) {
      arbs.push(
        ...w(3, fc.tuple(fence, weighted<IdentRef>([8, 'current'], [2, 'other'], [1, 'changed'])).map(([f, id]) => ({ op: 'start_program' as const, ...f, id }))),
        ...w(2, weighted<'program' | 'program_on'>([3, 'program'], [1, 'program_on']).map((plan) => ({ op: 'ready' as const, plan }))),
        fc.tuple(fence, hRefs).map(([f, h]) => ({ op: 'start_trajectory' as const, ...f, h })),
      );
    }
  }
  if (ab.jogFrames && ab.motion) {
    arbs.push(
      ...w(
        4,
        fc
          .tuple(fc.record({ s: sess, g: gen }), weighted<'current' | 'older' | 'next' | 'legacy'>([8, 'current'], [1, 'older'], [1, 'next'], [2, 'legacy']), weighted<'next' | 'same'>([6, 'next'], [1, 'same']), weighted<'now' | 'stale' | 'before_origin'>([8, 'now'], [1, 'stale'], [1, 'before_origin']))
          .map(([f, jg, seq, capture]) => ({ op: 'update_jog' as const, ...f, jg, seq, capture })),
      ),
    );
  }
  if (ab.motion) arbs.push(...familyArbs(ab).flatMap((a) => w(2, a)));
  if (ab.coreRestart) arbs.push(fc.constant({ op: 'restart_core' as const }));
  if (ab.faultInjection && ab.motion) arbs.push(fc.constant({ op: 'fault' as const }), ...w(2, fence.map((f) => ({ op: 'reset_fault' as const, ...f }))));
  return arbs.map(cmd);
}

// Command families: short exchanges a controller sends back to back, drawn as one command (a burst). Drawn
// one command at a time, the sequences a documented edge needs (a bring-up with one gate precondition left
// out and then its Start; a plan with an intent on point 0, io armed, started and run to completion; a jog
// and at once its end or a frame) are rare among 80 operations, and the edges with host-time deadlines (a
// legacy jog's 250 ms timeout) pass before the next draw reaches them. Each family draws its arguments
// toward the edges of the rules it exercises; the mutation check (harness/model/variants.ts, `search`)
// shows what each reaches. Every step is a documented command with the current fence; what a step's reply
// must be is the model's, as for any command.
const F = { s: 'current' as const, g: 'current' as const };
const JOG_OPEN: Spec = { op: 'begin_jog', ...F, mask: 'traj', clock: 'ok', deadline: 'ok' };

/** The families the abilities allow (motion is required: each one moves through the start gate or a jog). */
export function familyArbs(ab: Abilities): Array<fc.Arbitrary<Spec>> {
  const burst = (family: string) => (steps: Array<Spec | undefined>): Spec => ({ op: 'burst', family, steps: steps.filter((x): x is Spec => x !== undefined) });
  const out: Array<fc.Arbitrary<Spec>> = [];
  const plans = ab.programs ? weighted<'none' | 'program'>([2, 'none'], [1, 'program']) : fc.constant<'none' | 'program'>('none');
  const startOf = (plan: 'none' | 'program'): Spec => (plan === 'program' ? { op: 'start_program', ...F, id: 'current' } : { op: 'start_trajectory', ...F, h: 'prepared' });

  // Gate: a bring-up with one precondition of the start gate left out (arm, the plan's axis from the
  // enable mask, Home of the plan's axis), then what the gate is checked at: a Start or a jog (part 4 arm:
  // "checked at every Start and jog").
  out.push(
    fc
      .tuple(plans, fc.constantFrom<'arm' | 'axis' | 'home'>('arm', 'axis', 'home'), weighted<'start' | 'begin_jog' | 'jog'>([4, 'start'], [1, 'begin_jog'], [1, 'jog']))
      .map(([plan, missing, act]) =>
        burst('gate')([
          { op: 'ready', ...(plan === 'program' && missing !== 'home' ? { plan } : {}), ...(missing === 'home' ? { axis: 'last' } : { omit: missing }) },
          act === 'start' ? startOf(missing === 'home' ? 'none' : plan) : act === 'begin_jog' ? JOG_OPEN : { op: 'jog', ...F, timeout: 250 },
        ]),
      ),
  );

  // Intents: a plan with an output intent (ON on point 0 or 1, a program's ON marker on sample 0), io armed,
  // disarmed or as it was, started, and most often run to completion (the outputs are predicted there).
  const intentPlans = ab.programs ? fc.constantFrom<'on' | 'on0' | 'program_on'>('on', 'on0', 'program_on') : fc.constantFrom<'on' | 'on0'>('on', 'on0');
  out.push(
    fc
      .tuple(intentPlans, weighted<'io_arm' | 'io_disarm' | ''>([3, 'io_arm'], [1, 'io_disarm'], [1, '']), fc.boolean(), weighted<boolean>([2, true], [1, false]))
      .map(([plan, io, idle, complete]) =>
        burst('intents')([
          { op: 'ready', plan },
          io ? { op: io, ...F } : undefined,
          idle ? { op: 'step', cycles: 10 } : undefined,
          plan === 'program_on' ? startOf('program') : startOf('none'),
          ...(complete ? [{ op: 'step', cycles: 400 } as Spec, { op: 'step', cycles: 60 } as Spec] : []),
        ]),
      ),
  );

  // The one-cycle bound of output intents (PROFILE "Programs" Output intents): a plan with its ON intent
  // on point 0, io armed, started with its first cycle woken one cycle_ns late or one nanosecond less,
  // run to completion; then io_arm (refused io_marker_late while bit 10 is latched) and now and then a reset.
  if (ab.faultInjection && ab.stepped) {
    out.push(
      fc.tuple(weighted<'cycle' | 'under'>([1, 'cycle'], [1, 'under']), fc.boolean()).map(([late, reset]) =>
        burst('late')([
          { op: 'ready', plan: 'on0' },
          { op: 'io_arm', ...F },
          { op: 'start_trajectory', ...F, h: 'prepared', late },
          { op: 'step', cycles: 400 },
          { op: 'step', cycles: 60 },
          { op: 'io_arm', ...F },
          reset ? { op: 'enable', ...F, mask: 'zero' } : undefined,
          reset ? { op: 'reset_fault', ...F } : undefined,
        ]),
      ),
    );
  }

  // Handles: what ends a handle (a core restart, a release and a new grant, a discard, a later Start),
  // then a Start or discard of a handle at an edge: another incarnation's, a terminal one, a program handle
  // where a trajectory handle is expected, the one just started (part 2 Request handle; part 3 handle table).
  const ends = weighted<'restart_core' | 'release' | 'discard' | 'start' | ''>([ab.coreRestart ? 2 : 0, 'restart_core'], [2, 'release'], [1, 'discard'], [2, 'start'], [1, '']);
  const refs = weighted<HandleRef>([3, 'other_core'], [3, 'terminal'], [2, 'program'], [2, 'last'], [2, 'started'], [1, 'prepared']);
  out.push(
    fc.tuple(plans, ends, refs, weighted<'start_trajectory' | 'discard_trajectory'>([2, 'start_trajectory'], [1, 'discard_trajectory'])).map(([plan, end, h, op]) =>
      burst('handles')([
        { op: 'ready', ...(plan === 'program' ? { plan } : {}) },
        end === 'restart_core' ? { op: 'restart_core' } : end === 'release' ? { op: 'release', ...F } : end === 'discard' ? { op: 'discard_trajectory', ...F, h: 'prepared' } : end === 'start' ? startOf(plan) : undefined,
        // After a restart or release the cell is brought up again (a new grant, a new plan).
        end === 'restart_core' || end === 'release' ? { op: 'ready' } : undefined,
        { op, ...F, h },
      ]),
    ),
  );

  // Jog sessions: opened by begin_jog (once or twice: an older generation exists) or a legacy jog, then at
  // once one to three of: a frame (the open generation, an older, a legacy one; the next or the same
  // source sequence), end_jog (the current, an older, a legacy generation), another begin_jog.
  const frame = fc
    .tuple(weighted<'current' | 'older' | 'next' | 'legacy'>([3, 'current'], [1, 'older'], [1, 'next'], [3, 'legacy']), weighted<'next' | 'same'>([3, 'next'], [2, 'same']))
    .map(([jg, seq]): Spec => ({ op: 'update_jog', ...F, jg, seq, capture: 'now' }));
  const end = weighted<'current' | 'older' | 'legacy' | 'zero'>([3, 'current'], [2, 'older'], [2, 'legacy'], [1, 'zero']).map((jg): Spec => ({ op: 'end_jog', ...F, jg }));
  const follow = fc.oneof({ weight: ab.jogFrames ? 3 : 0, arbitrary: frame }, { weight: 2, arbitrary: end }, { weight: 1, arbitrary: fc.constant(JOG_OPEN) });
  out.push(
    fc
      .tuple(weighted<boolean>([1, true], [1, false]), weighted<'begin' | 'begin_twice' | 'legacy'>([2, 'begin'], [1, 'begin_twice'], [2, 'legacy']), fc.array(follow, { minLength: 1, maxLength: 3 }))
      .map(([bringUp, open, rest]) =>
        burst('jog')([bringUp ? { op: 'ready' } : undefined, ...(open === 'legacy' ? [{ op: 'jog', ...F, timeout: 250 } as Spec] : open === 'begin_twice' ? [JOG_OPEN, JOG_OPEN] : [JOG_OPEN]), ...rest]),
      ),
  );
  return out;
}

export interface PropertyOptions {
  target: Target;
  rules?: Rules;
  seed: number;
  numRuns: number;
  maxCommands: number;
  /** fast-check replay path of a failing run (HIL_MODEL_PATH). */
  path?: string;
  /** Stop at the first failure without shrinking (the mutation check only needs to see the rejection). */
  endOnFailure?: boolean;
  /** Motion commands are left out unless the target allows motion. */
  motion?: boolean;
  /** Wall-clock budget; fast-check stops generating new sequences after it. */
  timeLimitMs?: number;
  stats?: ModelStats;
}

export interface PropertyResult {
  failed: boolean;
  seed: number;
  path?: string;
  /** The failing (shrunk) sequence, as specs. */
  sequence?: Spec[];
  /** How many commands the first failing sequence had run when it failed (before shrinking). */
  firstFailureLength?: number;
  error?: string;
  numRuns: number;
  stats: ModelStats;
}

/** Run the model property: numRuns sequences of up to maxCommands commands. */
export async function checkModel(o: PropertyOptions): Promise<PropertyResult> {
  const ab = { ...(await describedAbilities(o.target)), ...(o.motion === false ? { motion: false } : {}) };
  const stats = o.stats ?? newStats();
  const rules = o.rules ?? REFERENCE_RULES;
  let firstFailureLength: number | undefined;
  let ranInSequence = 0;
  const prop = fc.asyncProperty(fc.commands(commandArbs(ab), { maxCommands: o.maxCommands, size: 'max', ...(o.path ? { replayPath: replayPathOf(o.path) } : {}) }), async (cmds) => {
    const x = await openRun(o.target, rules, stats);
    ranInSequence = 0;
    try {
      await fc.asyncModelRun(
        () => ({ model: { m: x.m, ab }, real: x }),
        // A burst counts its steps (the commands it sends besides a bring-up's own), so lengths compare with single draws.
        [...cmds].map((c) => counting(c, (n) => (ranInSequence += n))),
      );
    } catch (e) {
      if (firstFailureLength === undefined) firstFailureLength = ranInSequence;
      throw e;
    } finally {
      await closeRun(x);
    }
  });
  const details = await fc.check(prop, {
    seed: o.seed,
    numRuns: o.numRuns,
    ...(o.path ? { path: pathOf(o.path) } : {}),
    endOnFailure: o.endOnFailure ?? false,
    ...(o.timeLimitMs ? { interruptAfterTimeLimit: o.timeLimitMs, markInterruptAsFailure: false } : {}),
  });
  if (!details.failed) return { failed: false, seed: o.seed, numRuns: details.numRuns, stats };
  const value = details.counterexample?.[0] as unknown as { commands?: Array<{ hasRan: boolean; cmd: SpecCommand }> } | undefined;
  const sequence = value?.commands?.filter((w) => w.hasRan).map((w) => w.cmd.spec);
  const replay = (value as unknown as { metadataForReplay?: () => string } | undefined)?.metadataForReplay?.();
  const path = details.counterexamplePath ? `${details.counterexamplePath}${replay ? `#${replay}` : ''}` : undefined;
  const err = details.errorInstance instanceof Error ? details.errorInstance.message : String((details as { error?: unknown }).error ?? '');
  return { failed: true, seed: o.seed, ...(path ? { path } : {}), ...(sequence ? { sequence } : {}), ...(firstFailureLength !== undefined ? { firstFailureLength } : {}), error: err, numRuns: details.numRuns, stats };
}

/** A command whose run also counts (how long the first failing sequence was). */
function counting(c: fc.AsyncCommand<FcModel, RunContext, false>, tick: (n: number) => void): fc.AsyncCommand<FcModel, RunContext, false> {
  const w = c as unknown as { cmd?: { spec?: Spec }; spec?: Spec };
  const spec = w.cmd?.spec ?? w.spec;
  return {
    check: (m) => c.check(m),
    run: async (m, r) => {
      tick(spec?.op === 'burst' ? spec.steps.length : 1);
      await c.run(m, r);
    },
    toString: () => c.toString(),
  };
}

// HIL_MODEL_PATH is fast-check's counterexample path, with the commands' replay hint after a '#'.
const pathOf = (p: string) => p.split('#')[0]!;
const replayPathOf = (p: string) => p.split('#')[1] ?? '';

/** Run a fixed sequence of specs (a printed failing sequence) against a target; throws on a mismatch. */
export async function replaySequence(target: Target, specs: readonly Spec[], rules: Rules = REFERENCE_RULES): Promise<void> {
  const x = await openRun(target, rules, newStats());
  const ab = await describedAbilities(target);
  x.allow = (m, s) => allowed(m, ab, s);
  try {
    // A command the generator's preconditions leave out in the state reached (a replayed random sequence
    // whose timing went otherwise: a lease that ran out earlier) is skipped, as fast-check skips it.
    for (const s of specs) {
      if (!allowed(x.m, ab, s)) {
        x.trace.push(`(skipped: not allowed now) ${JSON.stringify(s)}`);
        continue;
      }
      await runSpec(x, s);
    }
  } finally {
    await closeRun(x);
  }
}

/** The failure as a maintainer wants it: how to replay it, and a vitest example to paste. */
export function failureReport(r: PropertyResult, o: { maxCommands: number; variant?: string }): string {
  const lines = [
    `model run failed${o.variant ? ` (wrong-model variant ${o.variant})` : ''}: ${r.error?.split('\n')[0] ?? ''}`,
    r.error ?? '',
    // The path's first index is the failing run's: a replay needs at least that many runs.
    `replay: HIL_MODEL_SEED=${r.seed}${r.path ? ` HIL_MODEL_PATH='${r.path}' HIL_MODEL_RUNS=${Number(r.path.split('#')[0]!.split(':')[0]) + 1}` : ''} HIL_MODEL_COMMANDS=${o.maxCommands}`,
  ];
  if (r.sequence) {
    lines.push(
      `minimal sequence (${r.sequence.length} commands), as a vitest example:`,
      '',
      `import { MODEL_VARIANT, replaySequence } from '../../harness/model/commands.ts';`,
      `import { describe, sharedVariant, test } from '../../harness/fixture.ts';`,
      `describe('model sequence (seed ${r.seed})', () => {`,
      `  const v = sharedVariant(MODEL_VARIANT);`,
      `  // add covers(...) naming the rule the sequence shows`,
      `  test('replays', async ({ skip }) => {`,
      `    skip(v.cannot !== undefined, v.cannot);`,
      `    await replaySequence(v.target, [`,
      ...r.sequence.map((s) => `      ${JSON.stringify(s)},`),
      `    ]);`,
      `  });`,
      `});`,
    );
  }
  return lines.join('\n');
}
