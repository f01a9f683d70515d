// The replay target (`hil run --target replay --recordings DIR`, issue 9): every test runs against a fresh
// reference stack on the replay driver, playing the recording `hil run --record DIR` made of that very test.
// The stack follows the recording (`hil serve --replay-paced`): its core runs on the recorded frame times up
// to each recorded request, waits there for the live one, matches it (same operation and fields, fences
// rewritten consistently) and compares the replies and events it sends with the recorded ones. The suites
// run unchanged; at the end of each test the stack's verdict decides, besides the test's own assertions,
// whether the replay agreed with the recording.
//
// A test without a recording is skipped with "not recorded"; a recording made for another machine digest is
// refused as stale with both digests; a missing recordings directory is a usage error in `hil run`.

import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hilConfig, isRefused, outcomes, MACHINES } from '../clients/config.ts';
import { HarnessError } from '../errors.ts';
import { currentTest, findRecording, noteVariantOutcome, peekVariantIndex, readSidecar, registerPerTest, takeVariantIndex, variantOptionsJson, variantRecordingPath, type PerTestHooks, type PerTestOutcome, type ReplayVerdict } from './pertest.ts';
import { SimTarget, startStack, variantStart, type StackProcess, type StackStart } from './sim.ts';
import { openStubPlanner } from './spawn.ts';
import { parseVariant, type VariantOptions } from './variant.ts';
import type { Target, TargetDescriptor, TargetOptions, TestStack } from './types.ts';

/** Replay modes a suite run offers (closed-loop and open-loop are for `hil replay FILE`: see docs/recording.md). */
export const SUITE_REPLAY_MODES = ['strict'] as const;

const NO_VARIANTS = 'the replay target plays recorded per-test stacks; variant stacks are not recorded';
/** A variant opened outside a test (a describe block's shared variant) has no per-test recording. */
const SHARED_VARIANT = 'not recorded: a variant shared by a describe block is opened outside any test, and only per-test stacks are recorded';
/** Stepped-clock variants recorded before format 3 have no steps and no host times to replay them with. */
export const STEPPED_FORMAT_2 = 'a stepped-clock variant recorded in format 2 cannot be replayed (its recording has neither the test\'s steps nor the host time of each cycle): re-record it (hil run --record)';

/**
 * Hil serve flags of a variant the replay stack does not take: the sim driver's own (the replay driver's
 * inputs come from the recording) and the clock (a paced replay runs on the recorded one, which on a stepped
 * recording runs the test's steps).
 */
const NOT_REPLAYED_FLAGS = new Set(['--sim-fault', '--sim-homing-ms', '--clock']);

let digest: Promise<string> | undefined;

/** The machine digest of the configuration under test: given by `hil run`, else compiled once here. */
export function machineDigest(o: TargetOptions): Promise<string> {
  if (o.machineSha256) return Promise.resolve(o.machineSha256);
  digest ??= (async () => {
    const out = mkdtempSync(join(tmpdir(), 'hil-replay-config-'));
    try {
      const r = await hilConfig(['compile', o.machine ?? join(MACHINES, 'nine-axis.json'), '--out', out], 180_000);
      const [first] = outcomes(r.stdout);
      if (r.code !== 0 || !first || isRefused(first)) throw new HarnessError('HIL_ERR_TARGET_START', `cannot compile the machine configuration under test (exit ${r.code}): ${r.stderr || r.stdout}`);
      return first.machine_sha256;
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  })();
  // A failure is not remembered: the next test tries again.
  digest.catch(() => (digest = undefined));
  return digest;
}

function recordingsDir(o: TargetOptions): string {
  if (!o.recordings) throw new HarnessError('HIL_ERR_REPLAY_MISSING', 'the replay target needs --recordings DIR (HIL_RECORDINGS)');
  if (!existsSync(o.recordings)) throw new HarnessError('HIL_ERR_REPLAY_MISSING', `no recordings directory at ${o.recordings} (make one with hil run --record DIR)`);
  return o.recordings;
}

/**
 * Before a test on the replay target: its recording, or why it cannot run. Not recorded: a skip reason.
 * Stale (the same test recorded for another machine digest): HIL_ERR_REPLAY_STALE naming both digests.
 */
export async function replayPrecheck(testId: string, o: TargetOptions): Promise<{ path: string } | { skip: string } | { stackless: string }> {
  const dir = recordingsDir(o);
  const sha = await machineDigest(o);
  const found = findRecording(dir, 'sim', sha, testId);
  if (found.kind === 'not_recorded') return { skip: `not recorded (no recording of this test for machine ${sha} under ${dir})` };
  if (found.kind === 'stackless') return { stackless: found.sidecar };
  if (found.kind === 'stale') {
    throw new HarnessError('HIL_ERR_REPLAY_STALE', `recording ${found.path} was made for machine ${found.recordedMachine}, the configuration under test is machine ${sha}: re-record it (hil run --record)`, {
      detail: { recorded: found.recordedMachine, current: sha },
    });
  }
  return { path: found.path };
}

class ReplayTarget extends SimTarget implements PerTestHooks {
  override readonly name = 'replay' as const;
  override readonly abilities = { faultInjection: true, coreRestart: true, serviceRestart: false, motion: true };
  /** Core incarnations of this test's stack so far (a restart plays the recording of the next). */
  private incarnations = 1;
  private readonly unregister: () => void;
  private recording: string | null = null;

  constructor(
    stack: Awaited<ReturnType<typeof startStack>>,
    start: StackStart,
    private readonly o: TargetOptions,
    private readonly verdicts: string,
    first: string,
  ) {
    super(stack, start);
    this.recording = first;
    this.unregister = registerPerTest(this);
  }

  private verdictFile(): string {
    return join(this.verdicts, 'verdict.json');
  }

  async begin(testId: string): Promise<void> {
    const pre = await replayPrecheck(testId, this.o);
    if ('skip' in pre) throw new HarnessError('HIL_ERR_REPLAY_MISSING', `${testId}: ${pre.skip}`);
    if ('stackless' in pre) throw stacklessError(testId, pre.stackless);
    if (this.recording === pre.path) return; // opened for this very test
    rmSync(this.verdictFile(), { force: true });
    await this.restack(replayArgs(pre.path, this.verdictFile(), this.o));
    this.recording = pre.path;
    this.incarnations = 1;
  }

  async end(): Promise<PerTestOutcome> {
    const recording = this.recording ?? '';
    await this.stopStack();
    this.recording = null;
    const verdict = readVerdict(this.verdictFile());
    noteLaterIncarnations(recording, this.verdictFile(), this.incarnations);
    rmSync(this.verdictFile(), { force: true });
    return { recording, mode: 'replay', verdict };
  }

  override cannotProvide(options: VariantOptions): string | undefined {
    return cannotReplayVariant(options, this.o);
  }
  override variant(options: VariantOptions): Promise<Target> {
    return openReplayVariant(parseVariant(options), this.o);
  }
  override restartService(): Promise<void> {
    return Promise.reject(new HarnessError('HIL_ERR_TARGET_UNSUPPORTED', 'the replay target cannot restart its service (a recording is one service session)'));
  }
  override async restartCore(): Promise<void> {
    nextIncarnationRecorded(this.recording ?? '', this.incarnations + 1);
    this.incarnations++;
    await super.restartCore();
  }

  override async close(): Promise<void> {
    this.unregister();
    await this.stopStack();
    rmSync(this.verdicts, { recursive: true, force: true });
  }
}

/**
 * Why the current test's next variant cannot be replayed, or undefined when its recording is there. A
 * test's own stack (a remote listener stack) is one of its variants too: `v` is then the variant options
 * among its flags, if any.
 */
function cannotReplayVariant(v: VariantOptions | undefined, o: TargetOptions): string | undefined {
  const id = currentTest();
  if (id === undefined) return SHARED_VARIANT;
  const sha = o.machineSha256;
  if (!sha || !o.recordings) return NO_VARIANTS;
  const n = peekVariantIndex();
  const path = variantRecordingPath(o.recordings, 'sim', sha, id, n);
  if (!existsSync(path)) return `not recorded (no recording of variant ${n} of this test for machine ${sha}: ${path})`;
  if (v?.clock === 'stepped' && readSidecar(path)?.steps !== true) return STEPPED_FORMAT_2;
  return undefined;
}

/** A variant stack of the current test following its recording (not yet stopped). */
interface ReplayedStart {
  stack: StackProcess;
  /** How it was started, without the replay driver's flags. */
  start: StackStart;
  recording: string;
  n: number;
  /** The temporary directory its verdict is written to. */
  verdicts: string;
}

/**
 * Start the current test's next variant on the replay driver: `live` is what the test asks for now
 * (variantOptionsJson or stackOptionsJson), refused as stale unless it is what was recorded; `start` the
 * stack's flags, less the sim driver's own (their effects are in the recorded inputs).
 */
async function startReplayedVariant(v: VariantOptions | undefined, live: string, start: StackStart, o: TargetOptions): Promise<ReplayedStart> {
  const why = cannotReplayVariant(v, o);
  if (why) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', why);
  const id = currentTest()!;
  const n = takeVariantIndex();
  const path = variantRecordingPath(o.recordings!, 'sim', o.machineSha256!, id, n);
  const recorded = readSidecar(path)?.options;
  if (JSON.stringify(recorded) !== live) {
    throw new HarnessError('HIL_ERR_REPLAY_STALE', `${id}: variant ${n} was recorded with options ${JSON.stringify(recorded)}, the test now asks for ${live}: re-record it (hil run --record)`, {
      detail: { recorded: JSON.stringify(recorded), current: live },
    });
  }
  const args: string[] = [];
  for (let k = 0; k < start.args.length; k++) {
    if (NOT_REPLAYED_FLAGS.has(start.args[k]!)) k++;
    else args.push(start.args[k]!);
  }
  const replayed: StackStart = { ...start, args };
  const verdicts = mkdtempSync(join(tmpdir(), 'hil-replay-verdict-'));
  try {
    const stack = await startStack({ ...replayed, args: [...args, ...replayArgs(path, join(verdicts, 'verdict.json'), o)] });
    // The variant's machine file is compared by what it holds: the digest its stack reported then and now.
    const then = readSidecar(path)?.stack_machine_sha256;
    if (typeof then === 'string' && stack.ready.machine_sha256 && then !== stack.ready.machine_sha256) {
      await stack.stop();
      throw new HarnessError('HIL_ERR_REPLAY_STALE', `${id}: variant ${n} was recorded on machine ${then}, its stack now runs machine ${stack.ready.machine_sha256}: re-record it (hil run --record)`, {
        detail: { recorded: then, current: stack.ready.machine_sha256 },
      });
    }
    return { stack, start: replayed, recording: path, n, verdicts };
  } catch (e) {
    rmSync(verdicts, { recursive: true, force: true });
    throw e;
  }
}

/** A replayed variant stack has stopped: its verdict goes with the test's (harness/fixture.ts). */
function finishReplayedVariant(r: Pick<ReplayedStart, 'recording' | 'n' | 'verdicts'>): void {
  const verdict = readVerdict(join(r.verdicts, 'verdict.json'));
  rmSync(r.verdicts, { recursive: true, force: true });
  noteVariantOutcome({ recording: r.recording, mode: 'replay', verdict, variant: r.n });
}

/** A variant of the current test replayed from its recording, with the options it was recorded with. */
async function openReplayVariant(v: VariantOptions, o: TargetOptions): Promise<Target> {
  const vs = variantStart(v);
  const r = await startReplayedVariant(v, variantOptionsJson(v), { args: [...baseStart(o).args, ...vs.args], env: vs.env }, o);
  return new ReplayedVariant(r);
}

/**
 * A test's own stack (a remote listener stack) replayed from its recording as the test's next variant,
 * started with the flags it was recorded with; stopping it collects its verdict for the test.
 */
async function replayTestStack(s: TestStack, o: TargetOptions): Promise<StackProcess> {
  const r = await startReplayedVariant(s.variant, s.options, s.start, o);
  let stopped = false;
  return {
    ...r.stack,
    async stop(opts) {
      if (stopped) return;
      stopped = true;
      await r.stack.stop(opts);
      finishReplayedVariant(r);
    },
  };
}

/** A variant stack following its recording; its verdict goes with the test's (harness/fixture.ts). */
class ReplayedVariant extends SimTarget {
  override readonly name = 'replay' as const;
  override readonly abilities = { faultInjection: true, coreRestart: true, serviceRestart: false, motion: true };
  private closed = false;
  private incarnations = 1;

  constructor(private readonly r: ReplayedStart) {
    super(r.stack, r.start);
  }

  override cannotProvide(): string | undefined {
    return NO_VARIANTS;
  }
  override variant(): Promise<Target> {
    return Promise.reject(new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', NO_VARIANTS));
  }
  override restartService(): Promise<void> {
    return Promise.reject(new HarnessError('HIL_ERR_TARGET_UNSUPPORTED', 'a replayed variant cannot restart its service (a recording is one service session)'));
  }
  override async restartCore(): Promise<void> {
    nextIncarnationRecorded(this.r.recording, this.incarnations + 1);
    this.incarnations++;
    await super.restartCore();
  }

  override async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await super.close();
    noteLaterIncarnations(this.r.recording, join(this.r.verdicts, 'verdict.json'), this.incarnations, this.r.n);
    finishReplayedVariant(this.r);
  }
}

/** The file a core's n-th incarnation records into or replays (sims/service/core-link.ts incarnationFiles). */
const nthIncarnation = (path: string, n: number, ext: 'hilrec' | 'json') => (n <= 1 ? path : path.replace(new RegExp(`\\.${ext}$`), '') + `.core-${n}.${ext}`);

/** Before a replayed core restart: the recording of the incarnation it starts must be there. */
function nextIncarnationRecorded(recording: string, n: number): void {
  const next = nthIncarnation(recording, n, 'hilrec');
  if (!existsSync(next)) throw new HarnessError('HIL_ERR_REPLAY_MISSING', `${recording}: the test restarts its core, but core incarnation ${n} was not recorded (${next}): re-record it (hil run --record)`);
}

/**
 * The verdicts of a replayed stack's later core incarnations (its core restarted): each goes with the
 * test's as an outcome of its own (harness/fixture.ts), so a divergence in any of them fails the test.
 */
function noteLaterIncarnations(recording: string, verdictFile: string, incarnations: number, variant?: number): void {
  for (let n = 2; n <= incarnations; n++) {
    const file = nthIncarnation(verdictFile, n, 'json');
    noteVariantOutcome({ recording: nthIncarnation(recording, n, 'hilrec'), mode: 'replay', verdict: readVerdict(file), incarnation: n, ...(variant !== undefined ? { variant } : {}) });
    rmSync(file, { force: true });
  }
}

/** The verdict a paced replay stack wrote, or null when it wrote none (it did not start, or was killed). */
function readVerdict(file: string): ReplayVerdict | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as ReplayVerdict;
  } catch {
    return null;
  }
}

/** A test recorded without a stack asked for one on replay: it no longer runs as it was recorded. */
function stacklessError(testId: string, sidecar: string): HarnessError {
  return new HarnessError('HIL_ERR_REPLAY_MISSING', `${testId}: recorded without a stack (${sidecar}), but it asks for one now: re-record it (hil run --record)`);
}

function replayArgs(recording: string, verdict: string, o: TargetOptions): string[] {
  return ['--driver', 'replay', '--replay-file', recording, '--replay-mode', o.replayMode ?? 'strict', '--replay-paced', verdict, '--replay-speed', o.replaySpeed ?? '1'];
}

function baseStart(o: TargetOptions): StackStart {
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
  const head = `replayed ${v.cycles} of ${v.recorded.frames} recorded cycles (${v.mode}), ${v.requests_matched}/${v.recorded.requests} requests and ${v.outputs_matched}/${v.recorded.outputs} replies and events${service} matched`;
  if (!d) return head;
  if (d.kind === 'bus' && d.bus) {
    const b = d.bus;
    return `${head}; diverged on the bus at cycle ${String(b.cycle)}, axis ${String(b.axis_id ?? b.axis)}, field ${String(b.field)}: expected ${String(b.expected)}, actual ${String(b.actual)}`;
  }
  return `${head}; diverged at cycle ${d.cycle}: ${d.kind} ${d.path ? `field ${d.path} ` : ''}expected ${clipJson(d.expected)}, actual ${clipJson(d.actual)}`;
}

export const replayTarget: TargetDescriptor = {
  name: 'replay',
  summary: 'each test replayed from its recording (hil run --record) on a fresh reference stack on the replay driver, requests matched, replies and events compared',
  options: {
    HIL_RECORDINGS: 'directory of recordings made with hil run --record DIR',
    HIL_REPLAY_MODE: 'strict (the only mode a suite run offers)',
    HIL_REPLAY_SPEED: 'the replayed core\'s pace: 1 (default; each cycle at its recorded wall time since the replay last met the test, so what a test measures over wall time is as recorded), a factor, or max (flat out to the next recorded request)',
    HIL_MACHINE: 'machine configuration file (default fixtures/machines/nine-axis.json)',
  },
  async open(o: TargetOptions): Promise<Target> {
    const id = currentTest();
    if (!id) throw new HarnessError('HIL_ERR_TARGET_START', 'the replay target starts a stack per test: open it from a test');
    if (o.replayMode !== undefined && !(SUITE_REPLAY_MODES as readonly string[]).includes(o.replayMode)) {
      throw new HarnessError('HIL_ERR_TARGET_START', `replay mode ${o.replayMode}: a suite run replays ${SUITE_REPLAY_MODES.join(', ')}`);
    }
    const pre = await replayPrecheck(id, o);
    if ('skip' in pre) throw new HarnessError('HIL_ERR_REPLAY_MISSING', `${id}: ${pre.skip}`);
    if ('stackless' in pre) throw stacklessError(id, pre.stackless);
    const verdicts = mkdtempSync(join(tmpdir(), 'hil-replay-verdict-'));
    const start = baseStart(o);
    try {
      const stack = await startStack({ ...start, args: [...start.args, ...replayArgs(pre.path, join(verdicts, 'verdict.json'), o)] });
      return new ReplayTarget(stack, start, o, verdicts, pre.path);
    } catch (e) {
      rmSync(verdicts, { recursive: true, force: true });
      throw e;
    }
  },
  cannotProvide: (v, o) => cannotReplayVariant(v, o),
  openVariant: (v, o) => openReplayVariant(v, o),
  // The planner is not replayed: the stub runs live beside the replayed stacks.
  openPlanner: () => openStubPlanner(),
  cannotStartStack: (s, o) => cannotReplayVariant(s.variant, o),
  startStack: (s, o) => replayTestStack(s, o),
};
