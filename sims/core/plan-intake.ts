// How the core takes a checked point list in (document 1 part 3 prepare). A plan of up to
// PLAN_SYNC_ELEMENTS element operations is built at once; a larger one over the following cycles, answered
// when done: a 250000-point plan built in one go stalled the cycle it arrived in by 50 to 500 ms
// (bench/upload-impact.bench.ts). How much a cycle takes:
// - real-time clock: PLAN_BUILD_SHARE of the cycle's period, by the work clock. A fixed count of 10000
//   element operations took 0.05 ms when compiled but 0.4 to 2 ms while V8 had not compiled the builder
//   yet (a stack's first large upload, its compiler thread starved by the upload): every cycle late;
// - a preparation handed over with the cycle to answer it in (PlanBeside `answerAtCycle`: a replay's edge,
//   sims/replay/pacer.ts or drivers/replay/session.ts, gives the recorded core's, since the count above was
//   the recorded wall clock's decision): all at once, in that cycle;
// - stepped and fast clocks: PLAN_SLICE_ELEMENTS a cycle, the same on every run.
// The core keeps the admission and the answer; this keeps the build in progress and its budget.

import type { Cmd } from './admission.ts';
import type { CoreStatus, PlanAttachment } from './protocol.ts';
import type { Plan, PlanBuilder, PlanRefusal } from './trajectory.ts';

/** A plan up to this many element operations (about 12000 points of nine axes) is built at once. */
export const PLAN_SYNC_ELEMENTS = 250_000;
/** Element operations of a larger plan per cycle on the stepped and fast clocks (no wall time to keep). */
export const PLAN_SLICE_ELEMENTS = 10_000;
/** On the real-time clock, the share of a cycle's period a larger plan is taken in for, each cycle. */
export const PLAN_BUILD_SHARE = 0.2;

/**
 * What comes beside a prepare at the core, never in the request: its attachment, and the cycle in which to
 * answer it when a replay's edge hands it over (the recorded core's answer cycle).
 */
export interface PlanBeside extends PlanAttachment {
  answerAtCycle?: number;
}

/** A plan being taken in, with the command that asked for it and the arena slot its arrays are in. */
export interface PlanBuild {
  builder: PlanBuilder;
  cmd: Cmd;
  answerAt?: number;
  slot?: number;
}

export class PlanIntake {
  private building: PlanBuild | null = null;
  /** Work-clock ns a cycle spends on a large plan on the real-time clock (PLAN_BUILD_SHARE of the period). */
  private readonly budgetNs: number;

  constructor(
    cycleNs: number,
    private readonly clockMode: CoreStatus['clock']['mode'],
    private readonly workClock: () => number,
  ) {
    this.budgetNs = PLAN_BUILD_SHARE * cycleNs;
  }

  /** The arena slot of the plan being built, if any. */
  get slot(): number | undefined {
    return this.building?.slot;
  }

  /**
   * Take `build` in: the finished plan when it is small enough to build at once, else null (it is built by
   * `advance`). `replaced`: the command of a build this one replaces (the service commits one at a time).
   */
  begin(build: PlanBuild, replaced: (cmd: Cmd) => void): Plan | PlanRefusal | null {
    if (this.building) replaced(this.building.cmd);
    this.building = null;
    if (build.builder.elements <= PLAN_SYNC_ELEMENTS) return build.builder.step(Infinity)!;
    this.building = build;
    return null;
  }

  /** One cycle's slice (`workStart`: the cycle's start on the work clock); the build once it is done. */
  advance(cycleCount: number, workStart: number): { build: PlanBuild; out: Plan | PlanRefusal } | null {
    const b = this.building;
    if (!b) return null;
    let out: Plan | PlanRefusal | null;
    if (b.answerAt !== undefined) {
      if (cycleCount < b.answerAt) return null;
      out = b.builder.step(Infinity);
    } else if (this.clockMode === 'realtime') {
      out = b.builder.step(Infinity, () => this.workClock() - workStart >= this.budgetNs);
    } else out = b.builder.step(PLAN_SLICE_ELEMENTS);
    if (out === null) return null;
    this.building = null;
    return { build: b, out };
  }
}
