// The replay target (`hil run --target replay --recordings DIR`; docs/recording.md "The replay target"): every
// test runs against a fresh reference stack on the replay driver, playing the recording `hil run --record DIR`
// made of that very test. The stack follows the recording (`hil serve --replay-paced`): its core runs on the
// recorded frame times up to each recorded request, waits there for the live one, matches it (same operation
// and fields, fences rewritten consistently) and compares the replies and events it sends with the recorded
// ones. The suites run unchanged; at the end of each test the stack's verdict decides, besides the test's own
// assertions, whether the replay agreed with the recording.
//
// A test without a recording is skipped with "not recorded"; a recording made for another machine digest is
// refused as stale with both digests; a missing recordings directory is a usage error in `hil run`.

// The target is the sim target's SimTarget with a Recorder in replay mode (harness/targets/recorder.ts): the
// recorder finds each stack's recording (RecordingStore), starts the stack on the replay driver and reads its
// verdict when it stops. This module holds the rest: the target's options, and its per-test fixture's
// hooks, which skip a test not recorded and turn each stack's verdict into the test's outcome
// (HIL_ERR_REPLAY_*).

import { existsSync } from 'node:fs';
import * as allure from 'allure-js-commons';
import { HarnessError } from '../errors.ts';
import type { PerTestOutcome, ReplayVerdict } from './pertest.ts';
import { envValues, MACHINE_SHA256_OPTION, str } from './options.ts';
import { machineDigest, Recorder, type RecorderOptions } from './recorder.ts';
import { RecordingStore } from './recording-store.ts';
import { openPerTest, openVariant, startTestStack, type StackStart } from './sim.ts';
import { openStubPlanner } from './spawn.ts';
import { warmHosts } from './program-host.ts';
import { perTestFixture } from './test-stacks.ts';
import type { PerTestFixture, Target, TargetDescriptor, TargetOption } from './types.ts';

/** The replay target's options (its schema below). */
export type ReplayOptions = Pick<RecorderOptions, 'recordings' | 'replayMode' | 'replaySpeed' | 'machineSha256' | 'machine'>;

export { STEPPED_FORMAT_2 } from './recorder.ts';

/** Replay modes a suite run offers (closed-loop and open-loop are for `hil replay FILE`: see docs/recording.md). */
export const SUITE_REPLAY_MODES = ['strict'] as const;

/**
 * Before a test on the replay target: its recording, or why it cannot run (Recorder.precheck). Not recorded:
 * a skip reason. Stale (the same test recorded for another machine digest): HIL_ERR_REPLAY_STALE naming both
 * digests.
 */
export function replayPrecheck(testId: string, o: ReplayOptions): Promise<{ path: string } | { skip: string } | { stackless: string }> {
  return Recorder.of('replay', o).precheck(testId);
}

/** The replay stack's own flags come from the recorder; the file target's are the machine and the test channel. */
function baseStart(o: ReplayOptions): StackStart {
  return { args: ['--test-channel', ...(o.machine ? ['--machine', o.machine] : [])] };
}

/** A value as JSON for a message, cut at `max` characters (a recorded prepare can carry megabytes of points). */
export function clipJson(v: unknown, max = 1_000): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length <= max ? s : `${s.slice(0, max)}... (${s.length} characters)`;
}

/** One line saying what a replay verdict found (for a failing test's message and the report). */
export function describeVerdict(v: ReplayVerdict): string {
  const d = v.divergence;
  const service = v.service_replies ? `, ${v.service_replies.matched}/${v.service_replies.recorded} service replies` : '';
  const streams = v.watches?.recorded ?? 0;
  const watched = !v.flat_between_watches ? '' : streams ? `; flat out but while a stream was open (${v.watches?.served ?? 0}/${streams} recorded streams opened)` : '; flat out (no stream was open)';
  const head = `replayed ${v.cycles} of ${v.recorded.frames} recorded cycles (${v.mode}), ${v.requests_matched}/${v.recorded.requests} requests and ${v.outputs_matched}/${v.recorded.outputs} replies and events${service} matched${watched}`;
  if (!d) return head;
  if (d.kind === 'bus' && d.bus) {
    const b = d.bus;
    return `${head}; diverged on the bus at cycle ${String(b.cycle)}, axis ${String(b.axis_id ?? b.axis)}, field ${String(b.field)}: expected ${String(b.expected)}, actual ${String(b.actual)}`;
  }
  return `${head}; diverged at cycle ${d.cycle}: ${d.kind} ${d.path ? `field ${d.path} ` : ''}expected ${clipJson(d.expected)}, actual ${clipJson(d.actual)}`;
}

/**
 * The replay target's per-test fixture: before a test, its recording or the reason it cannot run; after it,
 * each stack's verdict, which fails the test when the replay did not agree with the recording.
 */
export function replayFixture(o: ReplayOptions): PerTestFixture {
  const recorder = Recorder.of('replay', o);
  return perTestFixture({
    async before(id) {
      const pre = await recorder.precheck(id);
      if ('skip' in pre) return pre;
      return { recording: 'path' in pre ? pre.path : pre.stackless }; // stackless: recorded without a stack, runs without one
    },
    // A replayed property test draws the cases it was recorded with (their seeds are beside the recording).
    entered: (test, recording) => void (recording && test.useRecordedProperties(RecordingStore.readSidecar(recording))),
    after: (_test, _stacks, wallMs, recording) => ({ wallMs, recordedMs: recording ? numberOr(RecordingStore.readSidecar(recording)?.test_wall_ms) : undefined }),
    note: (s) => (s.verdict ? { verdict: describeVerdict(s.verdict), diverged: s.verdict.divergence !== null } : {}),
    modeName: (s) => (s.mode === 'replay' ? `replay ${o.replayMode ?? 'strict'}` : 'record'),
    judge: (s, which, task) => judgeVerdict(s, which, task),
  });
}

const numberOr = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** A replayed stack's verdict as the test's outcome: nothing when the replay agreed, else the HIL_ERR_REPLAY_* error. */
async function judgeVerdict(o: PerTestOutcome, which: string, task: { meta: { replayUnheld?: string } }): Promise<void> {
  if (o.mode !== 'replay') return;
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

const REPLAY_OPTIONS: readonly TargetOption[] = [
  { key: 'recordings', flag: 'recordings', value: 'DIR', env: 'HIL_RECORDINGS', required: true, path: true, help: 'the recordings of an earlier --record run (made with hil run --record DIR); each test replays its own recording (strict), a test without one is skipped as not recorded; without file filters only the suite files the recordings hold run' },
  { key: 'machine', flag: 'machine', value: 'FILE', env: 'HIL_MACHINE', path: true, help: 'machine configuration (default fixtures/machines/nine-axis.json)' },
  { key: 'replayMode', env: 'HIL_REPLAY_MODE', value: 'MODE', help: 'strict (the only mode a suite run offers; hil run sets it)' },
  {
    key: 'replaySpeed',
    env: 'HIL_REPLAY_SPEED',
    value: 'PACE',
    help: "the replayed core's pace: auto (default; flat out to the next sync point, but each cycle at its recorded wall time since the replay last met the test while the recorded test had a telemetry or event stream open), a number (so paced throughout; 1: what a test measures over wall time is as recorded), or max (flat out throughout)",
  },
  MACHINE_SHA256_OPTION,
];

export const replayTarget: TargetDescriptor<ReplayOptions> = {
  name: 'replay',
  summary: 'each test replayed from its recording (hil run --record) on a fresh reference stack on the replay driver, requests matched, replies and events compared',
  abilities: { variants: true, testStacks: true, testChannel: true, plant: false, watch: false, sharedService: false, motion: 'always' },
  options: REPLAY_OPTIONS,
  parse(env) {
    const v = envValues(REPLAY_OPTIONS, env);
    const out: ReplayOptions = {};
    for (const k of ['recordings', 'machine', 'replayMode', 'replaySpeed', 'machineSha256'] as const) if (str(v[k])) out[k] = str(v[k]);
    return out;
  },
  check: (o) => (o.recordings && !existsSync(o.recordings) ? `--recordings ${o.recordings}: no such directory (HIL_ERR_REPLAY_MISSING; make one with hil run --record DIR)` : undefined),
  // The recordings are keyed by the machine digest of the configuration under test: compiled once by hil run.
  prepare: async (o) => ({ HIL_REPLAY_MODE: 'strict', HIL_MACHINE_SHA256: await machineDigest({ ...(o.machine ? { machine: o.machine } : {}) }) }),
  async open(o) {
    if (o.replayMode !== undefined && !(SUITE_REPLAY_MODES as readonly string[]).includes(o.replayMode)) {
      throw new HarnessError('HIL_ERR_TARGET_START', `replay mode ${o.replayMode}: a suite run replays ${SUITE_REPLAY_MODES.join(', ')}`);
    }
    return openPerTest(Recorder.of('replay', o), baseStart(o));
  },
  cannotProvide: (v, o) => Recorder.of('replay', o).cannotProvide(v),
  openVariant: (v, o) => openVariant(Recorder.of('replay', o), v, baseStart(o)),
  // The planner is not replayed: the stub runs live beside the replayed stacks.
  openPlanner: () => openStubPlanner(),
  cannotStartStack: (s, o) => Recorder.of('replay', o).cannotProvide(s.variant),
  startStack: (s, o) => startTestStack(Recorder.of('replay', o), s),
  perTest: (o) => replayFixture(o),
  // Every test's stack is a session of a stack host: a worker with fewer than two idle ones starts them while
  // vitest collects the file, each making its paced replay core's thread as it starts (sims/sessions.ts),
  // instead of inside the first test that opens a stack or a variant beside its own.
  warmWorker: (_o, env) => warmHosts(2, 'recorded', env),
  // Only the files the recordings hold: every test of another file would skip as not recorded, after its
  // file's set-up (a stack, an OLP server, a configuration compiled by the hundred) ran for nothing beside
  // the replayed tests. None held at all: every file, each test skipping with its reason.
  files(o, all) {
    if (!o.recordings) return undefined;
    const held = new RecordingStore(o.recordings).recordedFiles(all);
    return held.length && held.length < all.length ? held : undefined;
  },
};
