// What a model run carries from command to command (the model, the target's cell, the trace a failure
// prints, the run's figures), and how a run fails: a ModelMismatch naming the command, what the model
// allowed and what came.

import type { ModelConfig, ModelState, Outcome, Spec } from './model.ts';
import type { HeldUpload, RealCell } from './system.ts';

export class ModelMismatch extends Error {
  override name = 'ModelMismatch';
}

/** Figures of a run: sequences, commands, and how often each rule or transition was reached. */
export interface ModelStats {
  sequences: number;
  commands: number;
  hits: Record<string, number>;
}

export function newStats(): ModelStats {
  return { sequences: 0, commands: 0, hits: {} };
}

export interface RunContext {
  c: ModelConfig;
  m: ModelState;
  real: RealCell;
  binding: Record<string, unknown>;
  /** What happened so far, one line per command (the failure text). */
  trace: string[];
  stats: ModelStats;
  pendingStop?: Outcome;
  lastSendMs: number;
  /** The jog clock's incarnation (GET /v1/jog/clock), for begin_jog. */
  jogClock: string;
  /** When set, each judged reply's status and leading label, in order (the differential mode compares them). */
  replies?: string[];
  /** The upload held open (hold_upload), if any. */
  held?: HeldUpload;
  /** Describe binding.revision (a program file's manifest_revision) and the number of axes in rad (mapped dense columns). */
  revision: bigint;
  rad: number;
  /**
   * The generator's preconditions (harness/model/commands.ts `allowed`) for the run's abilities, set by
   * whoever runs the sequence: a burst's steps after its first are checked against it as they come.
   */
  allow?: (m: ModelState, spec: Spec) => boolean;
}

export function fail(x: RunContext, what: string): never {
  // HIL_MODEL_TRACE=all: the whole sequence's trace, not its last twelve lines.
  throw new ModelMismatch(`${what}\n  after:\n    ${x.trace.slice(process.env.HIL_MODEL_TRACE === 'all' ? 0 : -12).join('\n    ')}`);
}

export function hit(x: RunContext, rule: string): void {
  x.stats.hits[rule] = (x.stats.hits[rule] ?? 0) + 1;
}

export const specText = (s: Spec) => JSON.stringify(s);
