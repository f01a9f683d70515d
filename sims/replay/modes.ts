// How a paced replay lets recorded time pass (docs/recording.md "Paced to the recorded time" and "The
// stepped clock"): one strategy per mode, chosen once from the recording and the replay's speed, so the
// scheduler (pacer.ts ReplayPacer) asks its mode instead of testing flags.
//
//   flat     cycles run back to back whenever no sync point holds the core (`--replay-speed max`, and the
//            run to a crash, where the recorded core ran to the end of its recording before it died);
//   wall     a cycle never runs before its recorded time, counted from the last point where the replay met
//            the live side, divided by the speed;
//   stepped  a recording made on the stepped clock with the test's steps among its requests: cycles run only
//            while a step the test asked for is under way, and each step is answered when its last cycle ran;
//   watched  (the default of a suite replay, `--replay-speed auto`) flat out, except while the recorded test
//            watched a stream (telemetry or events): there wall-paced as `wall`, since a stream is the one
//            observation over wall time that no request or read holds (docs/recording.md "Faster than
//            recorded").

/** What a mode needs of the core it paces. */
export interface ModeCore {
  readonly cycleCount: number;
  /** Answers (receipts, Home and stop outcomes) the core has sent so far. */
  readonly answers: number;
}

/** A step whose cycles have run: to be answered with the answers its cycles produced. */
export interface StepDone {
  id: number;
  answered: number;
}

export interface PaceMode {
  readonly kind: 'flat' | 'wall' | 'stepped' | 'watched';
  /** Whether the core may run its next cycle now, as far as time goes (stepped: only inside a step). */
  runs(): boolean;
  /**
   * Wall ms until frame `c + 1` is due (0: now). `ahead`: a live request is matched and waits for its cycle,
   * so the test already did what it did before it when recorded, and the core catches up flat out.
   */
  pause(c: number, ahead: boolean): number;
  /** The replay met the live side (a held request handed over, a read served): time lines up again from here. */
  met(): void;
  /** A live message the mode consumes itself (stepped: the test's step starts its cycles); false: the core's. */
  take(msg: { t?: string; id?: number; cycles?: unknown }, core: ModeCore): boolean;
  /** The step under way when its cycles have run by cycle `c` (answer it now), else null. */
  stepDone(c: number, core: ModeCore): StepDone | null;
  /** Whether sync points other than requests may hold the core now (not inside a step: see SteppedMode). */
  readonly holdsApply: boolean;
  /** Whether a held core publishes its unchanged status as a running core does (a stepped one never did). */
  readonly publishesWhileHeld: boolean;
  /** What the verdict says of the pace (PacedVerdict.pace, .steps, .flat_between_watches). */
  verdict(): { pace: number | null; steps?: number; flat_between_watches?: true };
}

/** Flat out: nothing but sync points holds the core. */
export class FlatMode implements PaceMode {
  readonly kind = 'flat';
  readonly holdsApply = true;
  readonly publishesWhileHeld = true;
  runs(): boolean {
    return true;
  }
  pause(): number {
    return 0;
  }
  met(): void {}
  take(): boolean {
    return false;
  }
  stepDone(): StepDone | null {
    return null;
  }
  verdict(): { pace: number | null } {
    return { pace: null };
  }
}

/** Paced to the recorded wall time at `speed` recorded ms per wall ms, from the last meeting point. */
export class WallMode implements PaceMode {
  readonly kind = 'wall';
  readonly holdsApply = true;
  readonly publishesWhileHeld = true;
  /** Where recorded time and wall time were last lined up: the recorded time (ns from t0) of the next frame then. */
  private anchor: { recordedNs: number; wallMs: number } | null = null;

  constructor(
    readonly speed: number,
    /** Recorded frame times, ns from the first frame. */
    private readonly times: Float64Array,
    private readonly wallMs: () => number,
  ) {
    if (!(Number.isFinite(speed) && speed > 0)) throw new RangeError(`replay speed must be a positive number, got ${speed}`);
  }
  runs(): boolean {
    return true;
  }
  pause(c: number, ahead: boolean): number {
    if (ahead || c >= this.times.length) return 0;
    const t = this.times[c]!;
    const now = this.wallMs();
    if (!this.anchor) {
      this.anchor = { recordedNs: t, wallMs: now };
      return 0;
    }
    const due = this.anchor.wallMs + (t - this.anchor.recordedNs) / 1e6 / this.speed;
    return due > now ? due - now : 0;
  }
  met(): void {
    this.anchor = null;
  }
  take(): boolean {
    return false;
  }
  stepDone(): StepDone | null {
    return null;
  }
  verdict(): { pace: number | null } {
    return { pace: this.speed };
  }
}

/** A span of recorded cycles [from, to) during which the recorded test had a stream open. */
export interface WatchWindow {
  from: number;
  to: number;
}

/**
 * Flat out between the recorded test's stream watches, paced as WallMode at `speed` inside them. Entering
 * a window lines recorded and wall time up afresh (the core arrives there flat out), so the stream's
 * batches come at the recorded spacing from the first one on.
 */
export class WatchedMode implements PaceMode {
  readonly kind = 'watched';
  readonly holdsApply = true;
  readonly publishesWhileHeld = true;
  private readonly wall: WallMode;
  private k = 0;
  private inside = false;

  constructor(
    readonly speed: number,
    /** Ascending, disjoint (watchWindows). */
    private readonly windows: readonly WatchWindow[],
    times: Float64Array,
    wallMs: () => number,
  ) {
    this.wall = new WallMode(speed, times, wallMs);
  }
  /** Whether frame `c + 1` falls inside a window (cycles only grow: the cursor never goes back). */
  private within(c: number): boolean {
    while (this.k < this.windows.length && this.windows[this.k]!.to <= c) this.k++;
    const w = this.windows[this.k];
    return w !== undefined && w.from <= c;
  }
  runs(): boolean {
    return true;
  }
  pause(c: number, ahead: boolean): number {
    const inside = this.within(c);
    if (inside && !this.inside) this.wall.met();
    this.inside = inside;
    return inside ? this.wall.pause(c, ahead) : 0;
  }
  met(): void {
    this.wall.met();
  }
  take(): boolean {
    return false;
  }
  stepDone(): StepDone | null {
    return null;
  }
  verdict(): { pace: number | null; flat_between_watches: true } {
    return { pace: this.speed, flat_between_watches: true };
  }
}

/** The stepped clock: the core runs only the cycles of the test's steps, flat out, and answers each step. */
export class SteppedMode implements PaceMode {
  readonly kind = 'stepped';
  readonly publishesWhileHeld = false;
  private stepping: { id: number; target: number; answers: number } | null = null;
  private done = 0;

  constructor(private readonly speed: number | null) {}

  /**
   * A read noted during a step's cycles raced the step (the stepped clock drains messages between its cycles
   * and never waits for them): it is held for at the step's end instead.
   */
  get holdsApply(): boolean {
    return this.stepping === null;
  }
  runs(): boolean {
    return this.stepping !== null;
  }
  pause(): number {
    return 0;
  }
  met(): void {}
  take(msg: { t?: string; id?: number; cycles?: unknown }, core: ModeCore): boolean {
    if (msg.t !== 'step') return false;
    this.stepping = { id: msg.id!, target: core.cycleCount + Math.max(0, Math.trunc(Number(msg.cycles) || 0)), answers: core.answers };
    return true;
  }
  stepDone(c: number, core: ModeCore): StepDone | null {
    const s = this.stepping;
    if (!s || c < s.target) return null;
    this.stepping = null;
    this.done++;
    return { id: s.id, answered: core.answers - s.answers };
  }
  verdict(): { pace: number | null; steps: number } {
    return { pace: this.speed, steps: this.done };
  }
}

/**
 * Before a simulated crash (the live side is about to kill this core; the next incarnation has a recording of
 * its own): the recorded core ran to the end of its recording, so the replayed one runs there flat out,
 * holding for nothing but live requests (and, on the stepped clock, the test's steps).
 */
export class RunToCrash implements PaceMode {
  readonly holdsApply = false;
  constructor(private readonly inner: PaceMode) {}
  get kind(): PaceMode['kind'] {
    return this.inner.kind;
  }
  get publishesWhileHeld(): boolean {
    return this.inner.publishesWhileHeld;
  }
  runs(): boolean {
    return this.inner.runs();
  }
  pause(): number {
    return 0;
  }
  met(): void {}
  take(msg: { t?: string; id?: number; cycles?: unknown }, core: ModeCore): boolean {
    return this.inner.take(msg, core);
  }
  stepDone(c: number, core: ModeCore): StepDone | null {
    return this.inner.stepDone(c, core);
  }
  verdict(): { pace: number | null; steps?: number; flat_between_watches?: true } {
    return this.inner.verdict();
  }
}

/**
 * The mode of a replay: stepped when the recording has the test's steps; else flat (`speed` null), or
 * wall-paced at `speed`, only inside the recorded watches when `watched` (a recording that notes them,
 * `watches` non-null), throughout otherwise.
 */
export function paceMode(o: { steps: boolean; speed: number | null; watched?: boolean; watches?: readonly WatchWindow[] | null; times: Float64Array; wallMs: () => number }): PaceMode {
  if (o.steps) return new SteppedMode(o.speed);
  if (o.speed === null) return new FlatMode();
  if (o.watched && o.watches) return new WatchedMode(o.speed, o.watches, o.times, o.wallMs);
  return new WallMode(o.speed, o.times, o.wallMs);
}
