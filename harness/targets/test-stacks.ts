// The per-test part of a recorded or replayed run (docs/recording.md "Record and replay in the harness"):
// on `hil run --record` and on the replay target every test gets stacks of its own, started before the
// test's other fixtures and stopped after its cleanup (the stacks: recorder.ts; the test's state: pertest.ts
// TestRun). This is the skeleton both recorders share: enter the test, start and end its stacks, note each
// recording for the run record and Allure. What a recording leaves (record.ts) and what a replay's verdict
// makes of the test (replay.ts) are the hooks of the target that has the recorder; the suites' fixture
// (harness/fixture.ts) runs the chosen target's fixture first of all and knows nothing of what it does.

import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as allure from 'allure-js-commons';
import { enterTest, leaveTest, perTestTargets, type PerTestOutcome, type TestRun } from './pertest.ts';
import { refreshDescriptions } from './described.ts';
import { verdictOfError } from '../errors.ts';
import { testStateOf } from '../report/verdict.ts';
import type { PerTestFixture, TestContextLike } from './types.ts';

const RUN_DIR = process.env.HIL_RUN_DIR ?? join(process.cwd(), 'reports', '.run');

/** What a recorder adds to the skeleton (record.ts recordHooks, replay.ts replayHooks). */
export interface PerTestHooks {
  /** Before the test is entered: skip it with a reason, or go on (replay: with the recording it runs from). */
  before(id: string): Promise<{ skip: string } | { recording?: string }>;
  /** The test is entered, its stacks not started yet (replay: it draws the property cases it was recorded with). */
  entered?(test: TestRun, recording: string | undefined): void;
  /**
   * The test's own stacks have stopped (`stacks`: their outcomes, its variants' not yet): leave what the mode
   * keeps, and say the test's wall time (and, replayed, the recorded one).
   */
  after(test: TestRun, stacks: readonly PerTestOutcome[], wallMs: number, recording: string | undefined): { wallMs: number; recordedMs?: number };
  /** The test ended in ERROR (`codes`: why, erredCodes), told once every fixture has judged it (record: its sidecar says so). */
  erred?(testId: string, codes: readonly string[]): void;
  /** More fields of a recording's note in the run record (replay: its verdict). */
  note?(o: PerTestOutcome): Record<string, unknown>;
  /** Allure's "recording mode" parameter of a stack's recording. */
  modeName(o: PerTestOutcome): string;
  /** After the notes, for each stack's outcome: throw when the test must fail for it (replay: a verdict that disagrees). */
  judge?(o: PerTestOutcome, which: string, task: TestContextLike['task']): Promise<void>;
}

/**
 * The fixture body of a recorder with these hooks. Vitest reads the names of a fixture's first parameter's
 * destructuring: the caller keeps it destructured (index.ts perTestStacksFixture).
 */
export function perTestFixture(hooks: PerTestHooks): PerTestFixture {
  return async ({ task, skip, onTestFailed }, use) => {
    const id = task.fullName;
    // Registered before every other fixture's, so called after theirs (the runner calls them in reverse):
    // whether the harness's lateness made the failure an ERROR (the cell's and the trace's hostTooSlow) is known.
    if (hooks.erred) {
      onTestFailed?.(() => {
        const codes = erredCodes(task);
        if (codes.length) hooks.erred!(id, codes);
      });
    }
    const pre = await hooks.before(id);
    if ('skip' in pre) skip(pre.skip);
    const recording = 'recording' in pre ? pre.recording : undefined;
    const test = enterTest(id);
    const started = performance.now();
    hooks.entered?.(test, recording);
    const outcomes: PerTestOutcome[] = [];
    let testWall: { wallMs: number; recordedMs?: number } | undefined;
    // Where the test's wall time went (the run record's `phases_ms`): its stacks' start, its body, their stop.
    let bodyAt = started;
    let endAt = started;
    try {
      for (const t of perTestTargets()) await t.begin(test);
      // A fresh stack has fresh incarnations: the file's Describe must be this test's stack's.
      await refreshDescriptions(perTestTargets());
      bodyAt = performance.now();
      await use();
    } finally {
      endAt = performance.now();
      for (const t of perTestTargets()) outcomes.push(...(await t.end()));
      testWall = hooks.after(test, outcomes, Math.round(performance.now() - started), recording);
      // The variant fixture has closed the test's variants by now (it is torn down first).
      outcomes.push(...test.takeOutcomes());
      leaveTest();
    }
    for (const o of outcomes) {
      if (!o.recording) continue;
      noteRecording({
        test: id,
        recording: o.recording,
        ...(hooks.note?.(o) ?? {}),
        ...(!o.variant && !o.incarnation && testWall
          ? { wall_ms: testWall.wallMs, ...(testWall.recordedMs !== undefined ? { recorded_wall_ms: testWall.recordedMs } : {}), phases_ms: phases(started, bodyAt, endAt, testWall.wallMs) }
          : {}),
      });
      const which = [o.variant ? `variant ${o.variant}` : '', o.incarnation ? `core ${o.incarnation}` : ''].filter(Boolean).join(', ').replace(/^(.+)$/, ' ($1)');
      // The recording's path differs from run to run: kept out of Allure's history id, as a measured value is.
      await allure.parameter(`recording${which}`, o.recording, { excluded: true });
      await allure.parameter(`recording mode${which}`, hooks.modeName(o));
      await hooks.judge?.(o, which, task);
    }
  };
}

/**
 * Why a failed test ended in ERROR rather than FAIL (harness/report/verdict.ts testStateOf): the harness
 * lost a grant to its lateness (HIL_ERR_HOST_TOO_SLOW), or every error's code has the verdict ERROR
 * (harness/errors.ts), each code once. None when it failed (an assertion, a FAIL code among its errors).
 */
export function erredCodes(task: { meta: { hostTooSlow?: string; replayUnheld?: string; equipmentLoss?: string }; result?: { errors?: readonly unknown[] } }): string[] {
  const errors = task.result?.errors ?? [];
  if (testStateOf('failed', errors, task.meta) !== 'errored') return [];
  // An error without a code (a plain Error the harness threw) by its name.
  const named = errors.filter((e) => verdictOfError(e) === 'error').map((e) => {
    const x = e as { code?: unknown; name?: unknown };
    return typeof x.code === 'string' ? x.code : typeof x.name === 'string' ? x.name : 'unknown';
  });
  return [...new Set([...(task.meta.hostTooSlow !== undefined ? ['HIL_ERR_HOST_TOO_SLOW'] : []), ...(task.meta.equipmentLoss !== undefined ? ['HIL_ERR_BENCH_BOX'] : []), ...named])];
}

/** The test's wall time split into its stacks' start, its body (fixtures and test) and their stop, in ms. */
function phases(started: number, bodyAt: number, endAt: number, wallMs: number): { start: number; body: number; stop: number } {
  const start = Math.round(bodyAt - started);
  const body = Math.round(endAt - bodyAt);
  return { start, body, stop: Math.max(0, wallMs - start - body) };
}

/** Leave a note of which recording a test wrote or replayed, for run.json and the report. */
function noteRecording(u: { test: string; recording: string; wall_ms?: number; recorded_wall_ms?: number } & Record<string, unknown>): void {
  try {
    mkdirSync(RUN_DIR, { recursive: true });
    appendFileSync(join(RUN_DIR, `recordings-${process.pid}.jsonl`), JSON.stringify(u) + '\n');
  } catch {
    // An output sink never aborts a run.
  }
}
