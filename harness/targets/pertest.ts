// The state of the test a worker runs now, in one object: on a recorded or replayed run every
// test has stacks of its own (docs/recording.md "Recording a suite run" says why), and what those stacks need
// to know about the test lives in its TestRun: its id, how many variant stacks it opened (the n-th is recorded
// and replayed as variant n), what became of their recordings, and the property seeds it drew or must draw.
//
// The per-test fixture (harness/targets/test-stacks.ts, run by the record and replay targets' recorders as the
// first fixture of harness/fixture.ts) enters the
// test before any other fixture and leaves it after the last; a beforeEach hook that opens stacks for the
// test (sharedVariant, sharedRemote) enters it first. Code that a suite reaches without a fixture (harness/property.ts, a remote stack started by a suite)
// finds the test with currentTest(). One test runs at a time in a worker, so one slot holds it.

import type { PropertyParams } from './recording-store.ts';
import type { ReplayVerdict } from '../../fixtures/contract/replay-verdict.ts';

export type { PropertyParams } from './recording-store.ts';
export type { ReplayVerdict } from '../../fixtures/contract/replay-verdict.ts';

/** What happened to one stack's recording when it stopped (a test's own, a variant's, a later core incarnation's). */
export interface PerTestOutcome {
  recording: string;
  /** A variant stack's outcome: which of the test's variants (1, 2, ...). */
  variant?: number;
  /** A later core incarnation of the stack (its core restarted): 2, 3, ... */
  incarnation?: number;
  mode: 'record' | 'replay';
  /** Replay: the stack's verdict (fixtures/contract/replay-verdict.schema.json), or null when there is none to read. */
  verdict?: ReplayVerdict | null;
  /** Replay: why the verdict file the stack wrote is not a verdict (HIL_ERR_REPLAY_VERDICT_INVALID). */
  verdictProblem?: string;
}

export class TestRun {
  private variantsOpened = 0;
  private readonly outcomes: PerTestOutcome[] = [];
  /** The properties the test ran (name -> parameters), for its recording's sidecar. */
  private readonly drawn: Record<string, PropertyParams> = {};
  /** Replay: the properties the test's recording ran with. */
  private readonly recorded: Record<string, PropertyParams> = {};
  /** Tries the test threw away because the host made them say nothing (harness/clients/cell.ts attempt). */
  private dropped = 0;

  constructor(readonly id: string) {}

  /** The index the next variant the test opens gets (1, 2, ...), without taking it. */
  peekVariant(): number {
    return this.variantsOpened + 1;
  }
  /** Take the test's next variant index. */
  takeVariant(): number {
    return ++this.variantsOpened;
  }

  /** A recorded or replayed stack of the test has stopped: what happened to its recording. */
  noteOutcome(o: PerTestOutcome): void {
    this.outcomes.push(o);
  }
  /** The outcomes noted so far (and forget them). */
  takeOutcomes(): PerTestOutcome[] {
    return this.outcomes.splice(0);
  }

  /** harness/property.ts: the test runs property `name` with these parameters. */
  noteProperty(name: string, p: PropertyParams): void {
    this.drawn[name] = p;
  }
  /** What the test drew (written beside its recording as `properties`). */
  drawnProperties(): Record<string, PropertyParams> {
    return { ...this.drawn };
  }
  /** The test threw a try away and takes the exchange again (the host was too slow for it to say anything). */
  noteDroppedTry(): void {
    this.dropped++;
  }
  /** How many tries the test threw away (record: said in its sidecar, so that its replay is skipped). */
  get droppedTries(): number {
    return this.dropped;
  }
  /** Replay: the parameters property `name` ran with when this test was recorded, if it was. */
  recordedProperty(name: string): PropertyParams | undefined {
    return this.recorded[name];
  }
  /** Replay: take the `properties` of the test's sidecar (malformed entries are ignored). */
  useRecordedProperties(sidecar: Record<string, unknown> | null): void {
    const p = sidecar?.properties;
    if (!p || typeof p !== 'object') return;
    for (const [name, v] of Object.entries(p as Record<string, unknown>)) {
      const { seed, numRuns } = (v ?? {}) as { seed?: unknown; numRuns?: unknown };
      if (Number.isInteger(seed) && Number.isInteger(numRuns) && (numRuns as number) > 0) this.recorded[name] = { seed: seed as number, numRuns: numRuns as number };
    }
  }
}

let current: TestRun | undefined;

/**
 * Enter the test `id` (a fresh TestRun), or keep the one entered: a beforeEach hook that opened a shared
 * variant for this test entered it already, and its variant is the test's first.
 */
export function enterTest(id: string): TestRun {
  if (current?.id !== id) current = new TestRun(id);
  return current;
}
/** The test is over (the per-test fixture's last step). */
export function leaveTest(): void {
  current = undefined;
}
/** The test running now, if any (none outside a test: a describe block's beforeAll, a plain run's file fixtures too). */
export function currentTest(): TestRun | undefined {
  return current;
}

/** A target that starts a stack per test: begin before the test's fixtures, end after its cleanup. */
export interface PerTestHooks {
  /** Start the stack for this test (recording or replaying it). */
  begin(test: TestRun): Promise<void>;
  /** Stop the test's stack and say what happened to its recording (and its later core incarnations'). */
  end(): Promise<PerTestOutcome[]>;
}

/** The open per-test targets of this worker (the file's target registers itself: per file, not per test). */
const open = new Set<PerTestHooks>();
export function registerPerTest(t: PerTestHooks): () => void {
  open.add(t);
  return () => open.delete(t);
}
export function perTestTargets(): PerTestHooks[] {
  return [...open];
}
