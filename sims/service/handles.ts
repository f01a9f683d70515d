// Trajectory and program handles as the adapter knows them (document 1 part 2 HandleRecord, part 3 handle
// states and transitions): prepared, started, consumed, discarded, superseded, retired. Terminal states
// never regain permission. Every change is published as handle_transition {handle, from, to}; execution
// changes as execution_started / completed / aborted / faulted with an Execution payload.

import type { Identity } from './envelope.ts';
import type { DecisionLog } from './timing.ts';

export type HandleState = 'prepared' | 'started' | 'consumed' | 'discarded' | 'superseded' | 'retired';
export type HandleKind = 'trajectory' | 'program';

export interface HandleRecord {
  handle: bigint;
  kind: HandleKind;
  state: HandleState;
  /** Application grant generation that prepared it. */
  generation: bigint;
  /** Count of acknowledged native Starts when it started (0 before Start). */
  execution_generation: bigint;
  /** Correlated Start sequence (0 before Start). */
  native_sequence: bigint;
  identity?: Identity;
  /** The core incarnation that holds its plan. */
  incarnation: string;
  /** Programs: the segment of each executed point (Execution.segment while it runs). Not published. */
  segmentOf?: Uint32Array;
}

/** The refusal label for using a handle in each terminal or active state (document 1 part 7 Handles). */
export const STATE_REASON: Record<HandleState, string> = {
  prepared: '',
  started: 'handle_started',
  consumed: 'handle_consumed',
  discarded: 'handle_discarded',
  superseded: 'handle_superseded',
  retired: 'handle_retired',
};

export interface ExecutionView {
  generation: bigint;
  state: string;
  identity?: Identity;
  segment: number;
  native_sequence: bigint;
  error?: string;
  handle: bigint;
}

/** Handles are kept for observation; the oldest terminal ones are forgotten past this many. */
const KEEP = 64;

export class HandleTable {
  private readonly records = new Map<bigint, HandleRecord>();
  private next = 1n;
  /** Count of acknowledged native Starts (Execution.generation). */
  executions = 0n;
  execution: ExecutionView = { generation: 0n, state: '', segment: 0, native_sequence: 0n, handle: 0n };

  constructor(
    private readonly publish: (type: string, payload: Record<string, unknown>) => void,
    /** The order of places in the commit queue as a recorded decision (timing.ts DecisionLog 'commit'); none: arrival order. */
    private readonly order?: Pick<DecisionLog, 'turn' | 'took'>,
  ) {}

  get(h: bigint): HandleRecord | undefined {
    return this.records.get(h);
  }

  all(): HandleRecord[] {
    return [...this.records.values()];
  }

  /** The handle waiting to start, if any. */
  prepared(): HandleRecord | undefined {
    for (const r of this.records.values()) if (r.state === 'prepared') return r;
    return undefined;
  }

  started(): HandleRecord | undefined {
    for (const r of this.records.values()) if (r.state === 'started') return r;
    return undefined;
  }

  /** A new preparation is committed: the previous prepared handle is superseded. */
  create(kind: HandleKind, generation: bigint, incarnation: string, identity?: Identity): HandleRecord {
    const old = this.prepared();
    if (old) this.move(old, 'superseded');
    const r: HandleRecord = { handle: this.next++, kind, state: 'prepared', generation, execution_generation: 0n, native_sequence: 0n, incarnation, ...(identity ? { identity } : {}) };
    this.records.set(r.handle, r);
    this.publish('handle_transition', { handle: r.handle, from: '', to: 'prepared' });
    this.execution = { generation: this.executions, state: 'prepared', segment: 0, native_sequence: 0n, handle: r.handle, ...(identity ? { identity } : {}) };
    this.forgetOld();
    return r;
  }

  /** Allocate the next handle number without committing (the core prepares under it first). */
  peekNext(): bigint {
    return this.next;
  }

  private committing: Promise<unknown> = Promise.resolve();

  /**
   * Run one preparation's commit (peek the number, hand the plan to the core under it, create the record)
   * with no other commit in between. prepare_trajectory and prepare_program have independent upload slots
   * (document 1 part 8) but share the numbering and the core's one plan slot: two commits interleaved
   * around the core's await would both peek the same number, and the record created second would name a
   * number the core never held.
   */
  serialise<T>(kind: HandleKind, commit: () => Promise<T>): Promise<T> {
    // Which of two preparations racing to commit takes its place first decides their handle numbers: a
    // recorded decision, held to the recorded order on a replay (timing.ts DecisionLog 'commit'; docs/recording.md
    // "The service side"). Null on a live run: no yield here.
    const turn = this.order?.turn('commit', kind);
    return turn ? turn.then(() => this.enqueue(kind, commit)) : this.enqueue(kind, commit);
  }

  private enqueue<T>(kind: HandleKind, commit: () => Promise<T>): Promise<T> {
    this.order?.took('commit', kind);
    const run = this.committing.then(commit, commit);
    this.committing = run.catch(() => undefined);
    return run;
  }

  move(r: HandleRecord, to: HandleState): void {
    const from = r.state;
    if (from === to) return;
    r.state = to;
    this.publish('handle_transition', { handle: r.handle, from, to });
    if (to === 'discarded' && this.execution.handle === r.handle) this.execution = { ...this.execution, state: 'discarded' };
  }

  /** Start acknowledged by the core. */
  started_(r: HandleRecord, sequence: bigint): void {
    // A later execution replaces an earlier one still marked started (document 1 part 3).
    const prev = this.started();
    if (prev && prev !== r) this.move(prev, 'consumed');
    this.executions++;
    r.execution_generation = this.executions;
    r.native_sequence = sequence;
    this.move(r, 'started');
    this.execution = { generation: this.executions, state: 'executing', segment: 0, native_sequence: sequence, handle: r.handle, ...(r.identity ? { identity: r.identity } : {}) };
    this.publish('execution_started', this.executionPayload(r));
  }

  /** The core reported the end of a started handle's execution. */
  ended(h: bigint, outcome: 'completed' | 'aborted' | 'faulted', faultBits: number, recovery: string[], why: string): void {
    const r = this.records.get(h);
    if (!r || r.state !== 'started') return;
    if (outcome === 'completed') {
      this.move(r, 'consumed');
      this.execution = { ...this.execution, state: 'completed' };
      this.publish('execution_completed', this.executionPayload(r));
      return;
    }
    this.move(r, 'retired');
    if (outcome === 'faulted') {
      this.execution = { ...this.execution, state: 'faulted', error: 'native_execution_failed' };
      this.publish('execution_faulted', { ...this.executionPayload(r), fault_bits: faultBits, recovery, reason: why });
    } else {
      this.execution = { ...this.execution, state: 'cancelled' };
      this.publish('execution_aborted', { ...this.executionPayload(r), reason: why });
    }
  }

  /** Stop, grant loss or an uncertain outcome: prepared handles are retired (prepare again). */
  retirePrepared(): void {
    for (const r of this.records.values()) if (r.state === 'prepared') this.move(r, 'retired');
    if (this.execution.state === 'prepared') this.execution = { ...this.execution, state: 'released' };
  }

  /** The core that held the plans is gone: nothing it held can be trusted. */
  coreLost(): void {
    for (const r of this.records.values()) {
      if (r.state === 'prepared') this.move(r, 'retired');
      else if (r.state === 'started') this.ended(r.handle, 'aborted', 0, [], 'core lost');
    }
  }

  private executionPayload(r: HandleRecord): Record<string, unknown> {
    return {
      handle: r.handle,
      generation: r.execution_generation,
      native_sequence: r.native_sequence,
      kind: r.kind,
      ...(r.identity ? { identity: r.identity } : {}),
    };
  }

  private forgetOld(): void {
    if (this.records.size <= KEEP) return;
    for (const [h, r] of this.records) {
      if (this.records.size <= KEEP) break;
      if (r.state !== 'prepared' && r.state !== 'started') this.records.delete(h);
    }
  }
}
