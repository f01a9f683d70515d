// The service's timed waits on the core as recorded decisions (docs/recording.md "The service side",
// issue 24 "Deterministic replay"). The service waits a bounded wall time for the core: a native receipt,
// the next status publication, a fault injection's reply. On a recorded run each wait's outcome is noted
// ('ok' or 'timeout', per kind of wait, in order). On a paced replay the core is held at recorded sync
// points and runs in bursts, so a wait that was answered when recorded may find the core held: a wait the
// recording says was answered gets REPLAY_WAIT_MS instead of its own bound, and if it still runs out the
// replay could not hold the recorded order (a lost hold of kind 'core_wait', reported to the pacer). A
// wait that ran out when recorded keeps its own bound. Recordings without these notes: bounds unchanged.

/** How long a replayed wait the recording says was answered may take (wall ms): a held core, not a slow one. */
export const REPLAY_WAIT_MS = 10_000;

export type WaitOutcome = 'ok' | 'timeout';

export class CoreWaits {
  private recorded: Map<string, WaitOutcome[]> | null = null;

  /**
   * `note`: a recorded service notes each outcome; `lost`: a replaying service reports a wait that ran out
   * although the recorded one was answered.
   */
  constructor(
    private readonly note?: (data: { t: 'core_wait'; kind: string; outcome: WaitOutcome }) => void,
    private readonly lost?: (kind: string) => void,
  ) {}

  /** Replay: the recorded outcomes, in order (kind and outcome per wait). */
  load(waits: ReadonlyArray<{ kind: string; outcome: string }>): void {
    this.recorded = new Map();
    for (const w of waits) {
      const q = this.recorded.get(w.kind) ?? [];
      q.push(w.outcome === 'timeout' ? 'timeout' : 'ok');
      this.recorded.set(w.kind, q);
    }
  }

  /**
   * Start a wait of `kind` with its own bound `ms`: returns the bound to use and the function to call with
   * the outcome (exactly once).
   */
  begin(kind: string | null, ms: number): { ms: number; done: (outcome: WaitOutcome) => void } {
    // Waits a client makes on its own wall-clock timer (renewals, jog updates) and the service's own polls
    // come in another number on every run: neither noted nor held (as fence-order.ts UNORDERED).
    if (kind === null) return { ms, done: () => undefined };
    if (!this.recorded) return { ms, done: (outcome) => this.note?.({ t: 'core_wait', kind, outcome }) };
    const want = this.recorded.get(kind)?.shift();
    return {
      ms: want === 'ok' ? Math.max(ms, REPLAY_WAIT_MS) : ms,
      done: (outcome) => {
        if (want === 'ok' && outcome === 'timeout') this.lost?.(kind);
      },
    };
  }
}
