// The differential mode of the model run (docs/profile.md "Model-based runs", differential mode): one generated
// sequence runs on two targets, and the first reply that differs is reported. Each side keeps its own model (it
// resolves "the current session", "the prepared handle" ... against that side's state and decides which commands
// the sequence may send there); the replies compared are each judged command's status and leading label, which
// two conforming cells give alike whatever their session tokens, handle numbers or times. A side whose replies
// the model refutes stops there, and that is reported with the command it stopped at.
//
// The sequence comes from a seed (fast-check's commands arbitrary, the same one `hil fuzz` runs), so
// HIL_MODEL_SEED and HIL_MODEL_COMMANDS give it back; a fixed sequence (a witness, a pasted failure) can
// be given instead.

import fc from 'fast-check';
import type { Target } from '../targets/types.ts';
import { allowed, commandArbs, describedAbilities, type Abilities } from './commands.ts';
import { REFERENCE_RULES, type Rules, type Spec } from './model.ts';
import { closeRun, newStats, openRun, runSpec, ModelMismatch, type ModelStats } from './run.ts';

/** One command as one side ran it: the replies it got (a bring-up sends several), or why it was not sent. */
export interface SideStep {
  index: number;
  spec: Spec;
  replies: string[];
  /** The command was left out on this side (its model state did not allow it). */
  skipped?: boolean;
  /** The model refuted this side's reply here (the run stopped). */
  mismatch?: string;
}

export interface DifferentialResult {
  sequence: Spec[];
  a: SideStep[];
  b: SideStep[];
  /** The first command whose replies differ, or undefined when none does. */
  first?: { index: number; spec: Spec; a: string; b: string };
  /**
   * The sides' timing diverged first (a reply the model explains only by a lease, jog input or plan that
   * ran out): nothing after it is compared, and it is no difference of the implementations.
   */
  timing?: { index: number; spec: Spec; a: string; b: string };
  stats: { a: ModelStats; b: ModelStats };
}

/** The sequence a seed gives (the commands arbitrary over the abilities both sides share). */
export function sequenceOf(ab: Abilities, seed: number, maxCommands: number): Spec[] {
  const [cmds] = fc.sample(fc.commands(commandArbs(ab), { maxCommands, size: 'max' }), { seed, numRuns: 1 });
  // The iterable hands out fast-check's wrappers around the commands (the spec is on the wrapped one).
  return [...cmds!].map((c) => {
    const w = c as unknown as { cmd?: { spec: Spec }; spec?: Spec };
    return (w.cmd?.spec ?? w.spec)!;
  });
}

/** What both targets can do (a command one cannot take is left out of the sequence for both). */
export async function sharedAbilities(a: Target, b: Target, motion = true): Promise<Abilities> {
  const [x, y] = await Promise.all([describedAbilities(a), describedAbilities(b)]);
  return {
    stepped: x.stepped && y.stepped,
    faultInjection: x.faultInjection && y.faultInjection,
    coreRestart: x.coreRestart && y.coreRestart,
    motion: motion && x.motion && y.motion,
    programs: !!x.programs && !!y.programs,
    jogFrames: !!x.jogFrames && !!y.jogFrames,
  };
}

/** Run `sequence` on one side, recording each command's replies. */
export async function side(target: Target, ab: Abilities, sequence: readonly Spec[], rules: Rules, stats: ModelStats): Promise<SideStep[]> {
  const x = await openRun(target, rules, stats);
  x.replies = [];
  x.allow = (m, s) => allowed(m, ab, s);
  const out: SideStep[] = [];
  try {
    for (let index = 0; index < sequence.length; index++) {
      const spec = sequence[index]!;
      if (!allowed(x.m, ab, spec)) {
        out.push({ index, spec, replies: [], skipped: true });
        continue;
      }
      const from = x.replies.length;
      try {
        await runSpec(x, spec);
      } catch (e) {
        if (!(e instanceof ModelMismatch)) throw e;
        out.push({ index, spec, replies: x.replies.slice(from), mismatch: e.message.split('\n')[0]! });
        break;
      }
      out.push({ index, spec, replies: x.replies.slice(from) });
    }
  } finally {
    await closeRun(x);
  }
  return out;
}

/**
 * A step's replies as compared. A bring-up (ready) expands against its side's state (a Home only where the
 * axis is not homed yet, a renew instead of an acquire), so its commands may differ in number between two
 * conforming cells: it compares as its first refusal, if any, and the reply of its last command.
 */
const text = (s: SideStep | undefined): string => {
  if (!s) return '(not reached: the run stopped before)';
  if (s.skipped) return '(not sent: its model state did not allow it)';
  let r = s.replies.join(', ') || '(no reply)';
  // A burst begins with a bring-up as often as not, and skips a step its side's state leaves out: compared the same way.
  if ((s.spec.op === 'ready' || s.spec.op === 'replan' || s.spec.op === 'burst') && s.replies.length > 0) {
    const refused = s.replies.slice(0, -1).find((x) => x !== '200');
    r = `${refused ? `bring-up refused ${refused}` : 'bring-up admitted'}, then ${s.replies[s.replies.length - 1]}`;
  }
  return `${r}${s.mismatch ? ` [the model refuted it: ${s.mismatch}]` : ''}`;
};

/** Run one sequence on both targets (one after the other) and find the first command whose replies differ. */
export async function differential(a: Target, b: Target, sequence: readonly Spec[], o: { ab: Abilities; rules?: Rules }): Promise<DifferentialResult> {
  const rules = o.rules ?? REFERENCE_RULES;
  const stats = { a: newStats(), b: newStats() };
  const sa = await side(a, o.ab, sequence, rules, stats.a);
  const sb = await side(b, o.ab, sequence, rules, stats.b);
  return compareSides(sequence, sa, sb, stats);
}

/**
 * The differential mode against a replay of the same sequence (docs/profile.md "Model-based
 * runs"): side a runs on a stack that records its session (`hil serve --record`, docs/recording.md),
 * side b on a stack started with the replay driver on that recording (`--driver replay --replay-paced`),
 * the same sequence sent live. The recording is the core's session, so side b's service runs live and its
 * core follows the recording; the replay's own verdict (its first divergence: a request, reply, event or
 * output of the core that differs from the recorded one) comes with the first reply that differs. `open`
 * starts side a's recording stack, `replay` side b's stack on the closed recording and returns how to read
 * its verdict once it stopped; both are the caller's (the harness starts stacks as processes only).
 */
export async function differentialReplay(
  sequence: readonly Spec[],
  o: { ab: Abilities; rules?: Rules; record: () => Promise<Target>; replay: () => Promise<{ target: Target; verdict: () => unknown }> },
): Promise<DifferentialResult & { verdict: unknown }> {
  const rules = o.rules ?? REFERENCE_RULES;
  const stats = { a: newStats(), b: newStats() };
  const a = await o.record();
  let sa: SideStep[];
  try {
    sa = await side(a, o.ab, sequence, rules, stats.a);
  } finally {
    // Stopping the stack closes its recording.
    await a.close();
  }
  const b = await o.replay();
  let sb: SideStep[];
  try {
    sb = await side(b.target, o.ab, sequence, rules, stats.b);
  } finally {
    await b.target.close();
  }
  return { ...compareSides(sequence, sa, sb, stats), verdict: b.verdict() };
}

/** The first command whose replies differ between two sides' runs of one sequence. */
export function compareSides(sequence: readonly Spec[], sa: SideStep[], sb: SideStep[], stats: { a: ModelStats; b: ModelStats }): DifferentialResult {
  const r: DifferentialResult = { sequence: [...sequence], a: sa, b: sb, stats };
  for (let i = 0; i < sequence.length; i++) {
    const x = sa.find((s) => s.index === i);
    const y = sb.find((s) => s.index === i);
    if (!x && !y) break;
    const tx = text(x);
    const ty = text(y);
    if (tx !== ty) {
      const d = { index: i, spec: sequence[i]!, a: tx, b: ty };
      if (/\(timing: /.test(tx) || /\(timing: /.test(ty)) r.timing = d;
      else r.first = d;
      break;
    }
  }
  return r;
}

/** The report of a differential run: the first difference (or none), the sequence up to it, and how to get it again. */
export function differentialReport(r: DifferentialResult, o: { names: [string, string]; seed?: number; maxCommands?: number }): string {
  const [na, nb] = o.names;
  const lines: string[] = [];
  if (r.timing) {
    lines.push(`differential: ${na} and ${nb} answered alike until command ${r.timing.index + 1} of ${r.sequence.length}, where their timing diverged (not compared further): ${JSON.stringify(r.timing.spec)}`, `  ${na}: ${r.timing.a}`, `  ${nb}: ${r.timing.b}`);
  } else if (!r.first) {
    lines.push(`differential: ${na} and ${nb} answered the ${r.sequence.length}-command sequence alike`);
  } else {
    lines.push(`differential: the first reply that differs is command ${r.first.index + 1} of ${r.sequence.length}: ${JSON.stringify(r.first.spec)}`, `  ${na}: ${r.first.a}`, `  ${nb}: ${r.first.b}`);
    lines.push('the sequence up to it:');
    for (const s of r.sequence.slice(0, r.first.index + 1)) lines.push(`  ${JSON.stringify(s)},`);
  }
  if (o.seed !== undefined) lines.push(`replay: HIL_MODEL_SEED=${o.seed} HIL_MODEL_COMMANDS=${o.maxCommands ?? r.sequence.length} (hil fuzz --differential ${na},${nb} --seed ${o.seed} --commands ${o.maxCommands ?? r.sequence.length})`);
  return lines.join('\n');
}
