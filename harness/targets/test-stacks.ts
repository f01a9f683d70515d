// The per-test part of a recorded or replayed run (docs/recording.md "Record and replay in the harness"):
// on `hil run --record` and on the replay target every test gets stacks of its own, started before the
// test's other fixtures and stopped after its cleanup (the stacks: recorder.ts; the test's state: pertest.ts
// TestRun). This fixture body enters the test, starts and ends its stacks, files the recordings, and on a
// replay turns each stack's verdict into the test's outcome (HIL_ERR_REPLAY_*). The suites' fixture
// (harness/fixture.ts) runs it first of all and knows nothing of what it does; on a plain run it does
// nothing.

import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as allure from 'allure-js-commons';
import { HarnessError } from '../errors.ts';
import { targetFromEnv } from './index.ts';
import { enterTest, leaveTest, perTestTargets, type PerTestOutcome } from './pertest.ts';
import { Recorder } from './recorder.ts';
import { RecordingStore } from './recording-store.ts';
import { refreshDescriptions } from './described.ts';
import { clipJson, describeVerdict } from './replay.ts';

const RUN_DIR = process.env.HIL_RUN_DIR ?? join(process.cwd(), 'reports', '.run');

/** What the fixture reads of vitest's test context. */
export interface TestContextLike {
  task: { fullName: string; meta: { replayUnheld?: string } };
  skip: (note?: string) => void;
}

/** A recorded run (`hil run --record`) or the replay target: every test gets stacks of its own (recorder.ts). */
export function perTestStacks(env: NodeJS.ProcessEnv = process.env): boolean {
  const { name, options } = targetFromEnv(env);
  return Recorder.of(name, options).perTest;
}

/**
 * The fixture body (vitest reads the names of its first parameter's destructuring: keep it destructured).
 * Runs the test through `use` between its stacks' begin and end.
 */
export const perTestStacksFixture = async ({ task, skip }: TestContextLike, use: () => Promise<void>): Promise<void> => {
  const { name, options } = targetFromEnv();
  const recorder = Recorder.of(name, options);
  if (!recorder.perTest) return use();
  const replay = recorder.mode === 'replay';
  const id = task.fullName;
  let recording: string | undefined;
  if (replay) {
    const pre = await recorder.precheck(id);
    if ('skip' in pre) skip(pre.skip);
    else recording = 'path' in pre ? pre.path : pre.stackless; // stackless: recorded without a stack, runs without one
  }
  const test = enterTest(id);
  const started = performance.now();
  // A replayed property test draws the cases it was recorded with (their seeds are beside the recording).
  if (recording) test.useRecordedProperties(RecordingStore.readSidecar(recording));
  const outcomes: PerTestOutcome[] = [];
  let testWall: { wallMs: number; recordedMs: number | undefined } | undefined;
  try {
    for (const t of perTestTargets()) await t.begin(test);
    // A fresh stack has fresh incarnations: the file's Describe must be this test's stack's.
    await refreshDescriptions(perTestTargets());
    await use();
  } finally {
    for (const t of perTestTargets()) outcomes.push(...(await t.end()));
    const wallMs = Math.round(performance.now() - started);
    // Recorded, but the test never opened the target: say so beside where its recording would be, so
    // its replay runs it (without a stack) rather than skipping it as not recorded. Its variants, if it
    // opened any, have recordings of their own beside that.
    if (!outcomes.some((o) => o.recording)) recorder.noteStackless(test, wallMs);
    // The test's wall time beside its recording: a replay says how much faster (or slower) it ran.
    if (!replay) for (const o of outcomes) if (o.recording && !o.variant) RecordingStore.noteSidecar(o.recording, { test_wall_ms: wallMs });
    testWall = { wallMs, recordedMs: replay && recording ? numberOr(RecordingStore.readSidecar(recording)?.test_wall_ms) : undefined };
    // The variant fixture has closed the test's variants by now (it is torn down first).
    outcomes.push(...test.takeOutcomes());
    leaveTest();
  }
  for (const o of outcomes) {
    if (!o.recording) continue;
    noteRecording({
      test: id,
      recording: o.recording,
      ...(o.verdict ? { verdict: describeVerdict(o.verdict), diverged: o.verdict.divergence !== null } : {}),
      ...(!o.variant && !o.incarnation && testWall ? { wall_ms: testWall.wallMs, ...(testWall.recordedMs !== undefined ? { recorded_wall_ms: testWall.recordedMs } : {}) } : {}),
    });
    const which = [o.variant ? `variant ${o.variant}` : '', o.incarnation ? `core ${o.incarnation}` : ''].filter(Boolean).join(', ').replace(/^(.+)$/, ' ($1)');
    // The recording's path differs from run to run: kept out of Allure's history id, as a measured value is.
    await allure.parameter(`recording${which}`, o.recording, { excluded: true });
    await allure.parameter(`recording mode${which}`, o.mode === 'replay' ? `replay ${options.replayMode ?? 'strict'}` : 'record');
    if (o.mode !== 'replay') continue;
    const v = o.verdict;
    if (o.verdictProblem) throw new HarnessError('HIL_ERR_REPLAY_VERDICT_INVALID', `the replay stack of ${o.recording} wrote a verdict the harness cannot read: ${o.verdictProblem}`);
    if (!v) throw new HarnessError('HIL_ERR_REPLAY_NO_VERDICT', `the replay stack of ${o.recording} wrote no verdict (it did not start or was killed)`);
    await allure.parameter(`replay${which}`, describeVerdict(v), { excluded: true });
    // A hold the replay could not keep comes first: from there on the recorded order was not kept, so
    // a divergence or a failed assertion after it is the harness's, not the target's (docs/recording.md
    // "One component on sync points").
    // A divergence before the first lost hold is still the target's (it came while the order held).
    const firstLost = Math.min(...(v.holds_lost ?? []).map((h) => h.cycle));
    if (v.holds_lost?.length && !(v.divergence && v.divergence.cycle < firstLost)) {
      const lost = v.holds_lost.map((h) => `${h.kind} at cycle ${h.cycle}${h.detail ? ` (${h.detail})` : ''}`);
      const message = `${o.recording}: the replay could not hold ${lost.length} recorded sync point${lost.length === 1 ? '' : 's'} (${clipJson(lost.slice(0, 5))}); ${describeVerdict(v)}`;
      task.meta.replayUnheld = message;
      throw new HarnessError('HIL_ERR_REPLAY_UNHELD', message, { detail: { holds_lost: clipJson(v.holds_lost, 4_000) } });
    }
    if (v.divergence) throw new HarnessError('HIL_ERR_REPLAY_DIVERGED', `${o.recording}: ${describeVerdict(v)}`, { detail: { divergence: clipJson(v.divergence, 4_000) } });
    if (v.requests_unsent > 0) throw new HarnessError('HIL_ERR_REPLAY_DIVERGED', `${o.recording}: the test never sent ${v.requests_unsent} of the recorded requests (the first: ${clipJson(v.first_unsent)}); ${describeVerdict(v)}`);
    const sr = v.service_replies;
    if (sr && sr.matched < sr.recorded) throw new HarnessError('HIL_ERR_REPLAY_DIVERGED', `${o.recording}: the service answered ${sr.recorded - sr.matched} fewer control and program requests than when recorded (the first not answered: ${clipJson(sr.first_missing)}); ${describeVerdict(v)}`);
  }
};

const numberOr = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** Leave a note of which recording a test wrote or replayed, for run.json and the report. */
function noteRecording(u: { test: string; recording: string; verdict?: string; diverged?: boolean; wall_ms?: number; recorded_wall_ms?: number }): void {
  try {
    mkdirSync(RUN_DIR, { recursive: true });
    appendFileSync(join(RUN_DIR, `recordings-${process.pid}.jsonl`), JSON.stringify(u) + '\n');
  } catch {
    // An output sink never aborts a run.
  }
}
