// The order of the service's fence decisions, recorded and replayed (format 2, docs/recording.md "The
// service side"). A race between two requests of one controller (reset_fault and release sent together) is
// decided by which of them passes its fence first; that can turn on a status publication arriving a
// millisecond earlier. A recorded service notes every fence decision in order; a replaying service holds a
// request at its fence until the decisions recorded before it have been taken, so the race ends as recorded.
//
// Renewals are left out: a controller renews on its own wall-clock timer, so a replay sees another number
// of them (the replay target replays the recorded renewals to the core itself).

/** Operations a controller sends on its own wall-clock timer: their fence decisions are neither recorded nor held (see above), nor their answers compared. */
export const UNORDERED: ReadonlySet<string> = new Set(['renew', 'update_jog']);
/** How far ahead of the next recorded decision a live one is looked for. */
const LOOKAHEAD = 8;
/** A live decision is held at most this long for the recorded ones before it (then those are skipped). */
export const FENCE_HOLD_MS = 2000;

export class FenceOrder {
  private log: string[] | null = null;
  /** The recorded outcome of each decision in `log` ('ok' or the refusal label), when the recording has them. */
  private outcomes: string[] = [];
  private taken: boolean[] = [];
  private cursor = 0;
  private waiters: Array<{ at: number; go: () => void }> = [];
  /** Fence decisions held (replay) and held until the timeout (a live run that differs from the recording). */
  held = 0;
  timedOut = 0;

  /**
   * `note`: a recorded service notes each decision; `lost`: a replaying service reports a decision it held
   * in vain (FENCE_HOLD_MS passed), a lost hold of kind 'fence' (sims/replay/sync-points.ts).
   */
  constructor(
    private readonly note?: (data: { t: 'fence'; op: string; outcome: string }) => void,
    private readonly lost?: (op: string) => void,
  ) {}

  /** Replay: the recorded fence decisions, in order, with their outcomes when given (same length). */
  load(ops: readonly string[], outcomes?: readonly string[]): void {
    const keep = ops.map((op) => !UNORDERED.has(op));
    this.log = ops.filter((_, i) => keep[i]);
    this.outcomes = outcomes && outcomes.length === ops.length ? outcomes.filter((_, i) => keep[i]) : [];
    this.taken = this.log.map(() => false);
    this.cursor = 0;
  }

  /** Replay: how the recorded service decided the next decision of `op` (undefined: not recorded). */
  recordedOutcome(op: string): string | undefined {
    if (!this.log || UNORDERED.has(op)) return undefined;
    const k = this.find(op);
    return k < 0 ? undefined : this.outcomes[k];
  }

  get replaying(): boolean {
    return this.log !== null;
  }

  private find(op: string): number {
    const log = this.log!;
    for (let k = this.cursor, seen = 0; k < log.length && seen < LOOKAHEAD; k++) {
      if (this.taken[k]) continue;
      seen++;
      if (log[k] === op) return k;
    }
    return -1;
  }

  /**
   * Before a fence check of `op`: null to go on now, or a promise that resolves when the recorded decisions
   * before this one have been taken (or after FENCE_HOLD_MS). Null outside a replay, so a live run never
   * yields here.
   */
  gate(op: string): Promise<void> | null {
    if (!this.log || UNORDERED.has(op)) return null;
    const k = this.find(op);
    if (k <= this.cursor) return null;
    this.held++;
    return new Promise<void>((resolve) => {
      const w = {
        at: k,
        go: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.timedOut++;
        this.lost?.(op);
        this.waiters = this.waiters.filter((x) => x !== w);
        for (let i = this.cursor; i < k; i++) this.taken[i] = true;
        this.advance();
        resolve();
      }, FENCE_HOLD_MS);
      timer.unref();
      this.waiters.push(w);
    });
  }

  /** After a fence check of `op` (outcome 'ok' or the refusal label): recorded, or taken off the replayed log. */
  passed(op: string, outcome: string): void {
    if (UNORDERED.has(op)) return;
    if (!this.log) {
      this.note?.({ t: 'fence', op, outcome });
      return;
    }
    const k = this.find(op);
    if (k < 0) return;
    this.taken[k] = true;
    this.advance();
  }

  private advance(): void {
    while (this.cursor < this.taken.length && this.taken[this.cursor]) this.cursor++;
    const ready = this.waiters.filter((w) => w.at <= this.cursor);
    this.waiters = this.waiters.filter((w) => w.at > this.cursor);
    for (const w of ready) w.go();
  }
}
