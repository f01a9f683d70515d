// The recorder composed into the sim target (harness/targets/recorder.ts): what each mode makes of a test's
// stack and of its variants (the flags, the files under the RecordingStore, the sidecar, the verdicts of each
// core incarnation), and what a SimTarget carrying a session allows (no service restart, a core restart only
// when the next incarnation was recorded, no variants of a variant). The stacks here are stand-ins: nothing is
// started, the target's stack is a record with a ready line, and the verdict files are written by the test.

import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, expect, test } from 'vitest';
import type { ReplayVerdict } from '../../fixtures/contract/replay-verdict.ts';
import { enterTest, leaveTest } from './pertest.ts';
import { NESTED_VARIANT, Recorder } from './recorder.ts';
import { RecordingStore, variantOptionsJson } from './recording-store.ts';
import { clipJson, describeVerdict } from './replay.ts';
import { SimTarget } from './sim.ts';
import { erredCodes } from './test-stacks.ts';
import { recorderOf } from './record.ts';
import { TARGETS, targetFromEnv } from './index.ts';
import type { StackProcess } from './types.ts';

const DIR = mkdtempSync(join(tmpdir(), 'hil-recorder-'));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));
afterEach(() => leaveTest());
const A = 'a'.repeat(64);
const ID = 'suites/x.test.ts > a test';
const READY: StackProcess['ready'] = { control: '/nonexistent/control.sock', public: '/nonexistent/public.sock', test_channel: '/nonexistent/test.sock', pid: 1, machine_sha256: A, configuration_sha256: 'c'.repeat(64) };

const reads = { recorded: 0, served: 0, missed: 0 };
const BASE: ReplayVerdict = {
  file: 'f', mode: 'strict', run: null, recorded: { frames: 10, complete: true, requests: 3, outputs: 2 }, cycles: 10, requests_matched: 3, outputs_matched: 2, requests_unsent: 0, requests_extra: 0,
  first_unsent: null, renewals_replayed: 0, live_renewals: 0, service_clock: 'recorded', expiries_replayed: 0, outputs_missing: 0, pace: 1, status_reads: reads, telemetry_reads: reads, holds_lost: [],
  divergence: null, end: null, wall_ms: 1, recorded_ms: 10,
};

/** A stack record that was never started: enough for a target to be built, closed and asked what it allows. */
function standIn(): StackProcess & { stops: number } {
  const s = { dir: DIR, ready: READY, stderr: () => '', stops: 0, stop: async () => void s.stops++, beginStop: () => void s.stop() };
  return s;
}

function put(path: string, text = 'x'): void {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
}

/** The path after a flag in a stack's arguments. */
const flag = (args: readonly string[], name: string) => args[args.indexOf(name) + 1]!;

test('the mode follows the target: record on the sim target with a record directory, replay on the replay target, off otherwise', () => {
  expect(recorderOf({}).mode).toBe('off');
  expect(recorderOf({ recordDir: DIR }).mode).toBe('record');
  expect(Recorder.of('replay', { recordings: DIR }).mode).toBe('replay');
  expect(recorderOf({}).perTest).toBe(false);
  expect(recorderOf({ recordDir: DIR }).perTest).toBe(true);
  // The descriptors' recorders: the per-test fixture on a recorded sim run and on the replay target only.
  expect(TARGETS.sim.perTest!(TARGETS.sim.parse({}))).toBeUndefined();
  expect(TARGETS.sim.perTest!(TARGETS.sim.parse({ HIL_RECORD_DIR: DIR }))).toBeTypeOf('function');
  expect(TARGETS.replay.perTest!(TARGETS.replay.parse({ HIL_RECORDINGS: DIR }))).toBeTypeOf('function');
  expect(targetFromEnv({ HIL_TARGET: 'external', HIL_RECORD_DIR: DIR, HIL_SOCKET: '/s' }).perTest).toBeUndefined();
  expect(targetFromEnv({ HIL_TARGET: 'rig', HIL_RECORD_DIR: DIR }).perTest).toBeUndefined();
  // off: a variant is a plain stack, wherever it is opened
  enterTest(ID);
  expect(Recorder.off().variantSession('{}')).toBeNull();
});

test('record: the test\'s stack records into the store\'s file for the digest its stack reported, and leaves a sidecar with the seeds it drew', async () => {
  const rec = Recorder.of('record', { recordDir: DIR, machineSha256: A });
  const run = enterTest(ID);
  await expect(rec.testSession(run, { ...READY, machine_sha256: undefined })).rejects.toMatchObject({ code: 'HIL_ERR_TARGET_START' });
  const s = await rec.testSession(run, READY);
  const path = new RecordingStore(DIR).testRecording(A, ID);
  expect(s.args).toEqual(['--record', path, '--record-run', ID]);
  run.noteProperty('p', { seed: 3, numRuns: 9 });
  expect(s.finish(READY)).toEqual([{ recording: path, mode: 'record' }]);
  expect(RecordingStore.readSidecar(path)).toMatchObject({ test: ID, target: 'sim', machine_sha256: A, configuration_sha256: READY.configuration_sha256, properties: { p: { seed: 3, numRuns: 9 } } });
});

test('record: variants are numbered in the order the test opens them, each with its options and both digests; outside a test none is recorded', () => {
  const rec = Recorder.of('record', { recordDir: DIR, machineSha256: A });
  expect(rec.variantSession('{}')).toBeNull(); // no test: a describe block's variant on a plain schedule
  const run = enterTest(`${ID} (variants)`);
  const one = rec.variantSession(variantOptionsJson({ telemetry: 'off' }))!;
  const two = rec.variantSession(variantOptionsJson({ clock: 'stepped' }), { clock: 'stepped' })!;
  const store = new RecordingStore(DIR);
  expect(flag(one.args, '--record')).toBe(store.variantRecording(A, run.id, 1));
  expect(flag(two.args, '--record-run')).toBe(`${run.id} (variant 2)`);
  expect(two.finish({ ...READY, machine_sha256: 'e'.repeat(64) })).toEqual([{ recording: store.variantRecording(A, run.id, 2), mode: 'record', variant: 2 }]);
  expect(RecordingStore.readSidecar(store.variantRecording(A, run.id, 2))).toMatchObject({ test: run.id, variant: 2, options: { clock: 'stepped' }, machine_sha256: A, stack_machine_sha256: 'e'.repeat(64), steps: true });
});

test('replay: the test\'s stack plays its recording and writes its verdicts to a directory of its own; every core incarnation\'s verdict is read, checked against the schema, and the directory removed', async () => {
  const rec = Recorder.of('replay', { recordings: DIR, machineSha256: A, replaySpeed: 'max' });
  const id = `${ID} (replayed)`;
  const recording = new RecordingStore(DIR).testRecording(A, id);
  put(recording);
  const run = enterTest(id);
  const s = await rec.testSession(run);
  expect(s.args.slice(0, 6)).toEqual(['--driver', 'replay', '--replay-file', recording, '--replay-mode', 'strict']);
  expect(flag(s.args, '--replay-speed')).toBe('max');
  const verdict = flag(s.args, '--replay-paced');
  // a restart the recording does not have is refused before it happens; one it has is counted
  expect(() => s.coreRestart()).toThrow(expect.objectContaining({ code: 'HIL_ERR_REPLAY_MISSING', message: expect.stringContaining('core incarnation 2 was not recorded') }));
  put(RecordingStore.incarnation(recording, 2));
  s.coreRestart();
  writeFileSync(verdict, JSON.stringify(BASE));
  writeFileSync(RecordingStore.incarnation(verdict, 2), JSON.stringify({ ...BASE, cycles: 'ten' }));
  const out = s.finish(READY);
  expect(out[0]).toEqual({ recording, mode: 'replay', verdict: BASE });
  expect(out[1]).toMatchObject({ recording: RecordingStore.incarnation(recording, 2), mode: 'replay', incarnation: 2, verdict: null, verdictProblem: expect.stringMatching(/verdict\.core-2\.json: it does not match fixtures\/contract\/replay-verdict\.schema\.json: \/cycles: must be integer/) });
  expect(existsSync(verdict)).toBe(false);
  // a test recorded without a stack that asks for one now, and one not recorded at all
  new RecordingStore(DIR).writeStackless(A, `${id} (stackless)`, {});
  await expect(rec.testSession(enterTest(`${id} (stackless)`))).rejects.toMatchObject({ code: 'HIL_ERR_REPLAY_MISSING', message: expect.stringContaining('recorded without a stack') });
  await expect(rec.testSession(enterTest(`${id} (never)`))).rejects.toMatchObject({ code: 'HIL_ERR_REPLAY_MISSING', message: expect.stringContaining('not recorded') });
});

test('a target carrying a session: no service restart, a core restart refused when its incarnation was not recorded, no variants of its own; closing it hands its outcome to the test once', async () => {
  const rec = Recorder.of('replay', { recordings: DIR, machineSha256: A });
  const id = `${ID} (target)`;
  const store = new RecordingStore(DIR);
  put(store.variantRecording(A, id, 1));
  put(RecordingStore.sidecar(store.variantRecording(A, id, 1)), JSON.stringify({ options: { telemetry: 'off' } }));
  const run = enterTest(id);
  // asked with other options than recorded: stale, both named
  expect(() => rec.variantSession(variantOptionsJson({ telemetry: 'off', pairId: 'x' }))).toThrow(expect.objectContaining({ code: 'HIL_ERR_REPLAY_STALE' }));
  expect(rec.cannotProvide()).toMatch(/^not recorded \(no recording of variant 2/); // the refused one took variant 1
  const fresh = enterTest(`${id} again`);
  put(store.variantRecording(A, fresh.id, 1));
  put(RecordingStore.sidecar(store.variantRecording(A, fresh.id, 1)), JSON.stringify({ options: { telemetry: 'off' } }));
  const session = rec.variantSession(variantOptionsJson({ telemetry: 'off' }))!;
  const stack = standIn();
  const t = new SimTarget(stack, { args: [] }, { recorder: rec, session, variant: true });
  expect(t.name).toBe('replay');
  expect(t.abilities.serviceRestart).toBe(false);
  await expect(t.restartService()).rejects.toMatchObject({ code: 'HIL_ERR_TARGET_UNSUPPORTED', message: expect.stringContaining('a replayed stack cannot restart its service') });
  await expect(t.restartCore()).rejects.toMatchObject({ code: 'HIL_ERR_REPLAY_MISSING' }); // before any test channel call
  expect(t.cannotProvide({ telemetry: 'off' })).toBe(NESTED_VARIANT);
  await expect(t.variant({ telemetry: 'off' })).rejects.toMatchObject({ code: 'HIL_ERR_VARIANT_UNSUPPORTED' });
  await t.close();
  await t.close();
  expect(stack.stops).toBe(1);
  expect(fresh.takeOutcomes()).toEqual([{ recording: store.variantRecording(A, fresh.id, 1), mode: 'replay', variant: 1, verdict: null }]);
  expect(run.takeOutcomes()).toEqual([]);
  // a plain target (no recorder) restarts its service and offers variants
  const plain = new SimTarget(standIn(), { args: [] });
  expect(plain.name).toBe('sim');
  expect(plain.abilities.serviceRestart).toBe(true);
  expect(plain.cannotProvide({ telemetry: 'off' })).toBeUndefined();
  await plain.close();
});

test('a divergence carrying a huge request is cut in the message, saying how long it was', () => {
  const big = { t: 'prepare', position: 'x'.repeat(50_000) };
  const line = describeVerdict({ ...BASE, divergence: { kind: 'request', cycle: 7, path: 'position', expected: big, actual: big } });
  expect(line.length).toBeLessThan(3_000);
  expect(line).toContain('... (50029 characters)');
  expect(clipJson({ a: 1 })).toBe('{"a":1}');
});

test('a verdict reads as one line naming what was matched and where it diverged', () => {
  expect(describeVerdict(BASE)).toBe('replayed 10 of 10 recorded cycles (strict), 3/3 requests and 2/2 replies and events matched');
  expect(describeVerdict({ ...BASE, flat_between_watches: true, watches: { recorded: 2, served: 1, missed: 1 } })).toBe('replayed 10 of 10 recorded cycles (strict), 3/3 requests and 2/2 replies and events matched; flat out but while a stream was open (1/2 recorded streams opened)');
  expect(describeVerdict({ ...BASE, flat_between_watches: true, watches: { recorded: 0, served: 0, missed: 0 } })).toMatch(/matched; flat out \(no stream was open\)$/);
  expect(describeVerdict({ ...BASE, divergence: { kind: 'request', cycle: 7, path: 'axisMask', expected: { op: 'arm' }, actual: { op: 'arm', axisMask: 2 } } })).toMatch(/diverged at cycle 7: request field axisMask expected \{"op":"arm"\}/);
  const bus = { kind: 'diverged' as const, file: 'f', mode: 'strict', time_ns: 4e6, recent: [], cycle: 4, axis: 1, axis_id: 'J2', field: 'controlword', expected: 15, actual: 7 };
  expect(describeVerdict({ ...BASE, divergence: { kind: 'bus', cycle: 4, bus } })).toMatch(/diverged on the bus at cycle 4, axis J2, field controlword: expected 15, actual 7$/);
});

test('replay: a test that ended in ERROR when recorded is skipped, naming the codes (its recording keeps the harness\'s trouble then, not the target\'s behaviour); one that passed or failed is replayed', async () => {
  const rec = Recorder.of('replay', { recordings: DIR, machineSha256: A });
  const store = new RecordingStore(DIR);
  const erred = `${ID} (recorded in error)`;
  const failed = `${ID} (recorded failing)`;
  for (const id of [erred, failed]) {
    put(store.testRecording(A, id));
    RecordingStore.writeSidecar(store.testRecording(A, id), { test: id, machine_sha256: A });
  }
  RecordingStore.noteSidecar(store.testRecording(A, erred), { recorded_errors: ['HIL_ERR_HOST_TOO_SLOW', 'HIL_ERR_TEST_CHANNEL'] });
  expect(await rec.precheck(erred)).toEqual({ skip: expect.stringMatching(/^recorded in ERROR \(HIL_ERR_HOST_TOO_SLOW, HIL_ERR_TEST_CHANNEL\): .*re-record it/) });
  await expect(rec.testSession(enterTest(erred))).rejects.toMatchObject({ code: 'HIL_ERR_REPLAY_MISSING', message: expect.stringContaining('recorded in ERROR') });
  leaveTest();
  expect(await rec.precheck(failed)).toEqual({ path: store.testRecording(A, failed) });
});

test('record: a failed test is said to have ended in ERROR, with its codes each once, when the harness lost a grant to its lateness or every error is a harness one; an assertion or a FAIL code among its errors keeps it a FAIL', () => {
  const assertion = { name: 'AssertionError', message: 'x', showDiff: true, actual: 1, expected: 2 };
  const channel = { name: 'HarnessError', message: 'refused', code: 'HIL_ERR_TEST_CHANNEL', verdict: 'error' };
  const diverged = { name: 'HarnessError', message: 'differs', code: 'HIL_ERR_REPLAY_DIVERGED', verdict: 'fail' };
  const failed = (errors: unknown[], meta: { hostTooSlow?: string; equipmentLoss?: string } = {}) => erredCodes({ meta, result: { errors } });
  expect(failed([assertion])).toEqual([]);
  expect(failed([diverged, channel])).toEqual([]);
  expect(failed([assertion, channel])).toEqual([]);
  expect(failed([channel, channel, { code: 'HIL_ERR_TARGET_START' }, { name: 'Error', message: 'planted' }])).toEqual(['HIL_ERR_TEST_CHANNEL', 'HIL_ERR_TARGET_START', 'Error']);
  // A lease lost to the host's lateness (the cell's or the trace's judgement): the assertion after it says nothing.
  expect(failed([assertion], { hostTooSlow: 'renewal sent 483.6 ms after the last accepted one' })).toEqual(['HIL_ERR_HOST_TOO_SLOW']);
  // A rig's bench box that opened its chain on its own: neither the target's nor the host's.
  expect(failed([assertion], { equipmentLoss: "the bench box's heartbeat watchdog opened the E-stop chain" })).toEqual(['HIL_ERR_BENCH_BOX']);
  expect(erredCodes({ meta: {} })).toEqual([]);
});

test('replay: a test whose stacks were all variants and that ended in ERROR when recorded is skipped too (its stackless sidecar says so); the record mode writes the codes into the test\'s own sidecar', async () => {
  const store = new RecordingStore(DIR);
  const id = `${ID} (variants only, erred)`;
  store.writeStackless(A, id, {});
  const recording = Recorder.of('record', { recordDir: DIR, machineSha256: A });
  recording.noteErred(id, ['HIL_ERR_HOST_TOO_SLOW']);
  expect(RecordingStore.readSidecar(store.testRecording(A, id))).toMatchObject({ stack: false, recorded_errors: ['HIL_ERR_HOST_TOO_SLOW'] });
  expect(await Recorder.of('replay', { recordings: DIR, machineSha256: A }).precheck(id)).toEqual({ skip: expect.stringMatching(/^recorded in ERROR \(HIL_ERR_HOST_TOO_SLOW\)/) });
  // nothing recorded: nothing noted
  recording.noteErred(`${ID} (never recorded)`, ['HIL_ERR_HOST_TOO_SLOW']);
  expect(RecordingStore.readSidecar(store.testRecording(A, `${ID} (never recorded)`))).toBeNull();
});

test('a try the test throws away (the host made it say nothing) is counted on the test; recorded, its sidecar says so and its replay is skipped with the reason; a test that took no try again replays', async () => {
  const { Cell } = await import('../clients/cell.ts');
  const store = new RecordingStore(DIR);
  const retried = `${ID} (a try taken again)`;
  const plain = `${ID} (no try taken again)`;
  for (const id of [retried, plain]) {
    put(store.testRecording(A, id));
    RecordingStore.writeSidecar(store.testRecording(A, id), { test: id, machine_sha256: A });
  }
  const cell = new Cell({} as never, { pair_id: 'p', pair_revision: 1n } as never);
  const test = enterTest(retried);
  cell.attempt(); // a try that counted: not dropped
  cell.attempt().drop();
  cell.attempt().drop();
  expect(test.droppedTries).toBe(2);
  leaveTest();
  // Outside a test (a plain run's hooks) nothing is counted, and nothing breaks.
  cell.attempt().drop();
  const recording = Recorder.of('record', { recordDir: DIR, machineSha256: A });
  recording.noteRetried(retried, test.droppedTries);
  expect(RecordingStore.readSidecar(store.testRecording(A, retried))).toMatchObject({ host_retries: 2 });
  const replay = Recorder.of('replay', { recordings: DIR, machineSha256: A });
  expect(await replay.precheck(retried)).toEqual({ skip: expect.stringMatching(/^recorded while the host was too slow: the test took an exchange again 2 times, .*re-record it/) });
  expect(await replay.precheck(plain)).toEqual({ path: store.testRecording(A, plain) });
});
