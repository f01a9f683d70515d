// Record and replay in the harness, as one component with three modes (docs/recording.md "Record
// and replay in the harness"), composed into the sim target (harness/targets/sim.ts SimTarget) rather than
// written as subclasses of it:
//
//   off     a plain run: one stack per file, nothing recorded;
//   record  `hil run --record DIR`: every stack a test starts (its own, its variants, its remote stacks)
//           records its whole session under DIR;
//   replay  `hil run --target replay --recordings DIR`: every such stack plays the recording of the same
//           stack of the same test, and its verdict goes with the test's.
//
// A Recorder decides, per stack, whether it is recorded or replayed and from which file (the names come from
// the RecordingStore); what it hands back is a StackSession, which the stack's target owns: the flags the
// stack starts with, the check before a core restart (a replay needs the next incarnation's recording),
// and what the stack leaves when it stops (a sidecar; the verdicts of each core incarnation). The test the
// stacks belong to is the current TestRun (harness/targets/pertest.ts).

import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseVerdictFile } from '../../fixtures/contract/replay-verdict.ts';
import { hilConfig, isRefused, outcomes, MACHINES } from '../clients/config.ts';
import { HarnessError } from '../errors.ts';
import { currentTest, type PerTestOutcome, type TestRun } from './pertest.ts';
import { RecordingStore } from './recording-store.ts';
import type { StackProcess, StackStart } from './types.ts';
import type { VariantOptions } from './variant.ts';

export type RecorderMode = 'off' | 'record' | 'replay';

/** What a recorder reads of its target's options (the sim target's record mode: record.ts; the replay target: replay.ts). */
export interface RecorderOptions {
  /** record: the directory recordings go under. */
  recordDir?: string;
  /** replay: the directory of recordings made with `hil run --record`. */
  recordings?: string;
  /** replay: how the recorded bus is replayed (strict only in a suite run). */
  replayMode?: string;
  /** replay: the replayed core's pace (auto, a number, or max). */
  replaySpeed?: string;
  /** The machine digest of the configuration under test (`hil run` computes it once). */
  machineSha256?: string;
  /** The machine configuration file under test (its digest is compiled when machineSha256 is not given). */
  machine?: string;
}

/** A replay told no recordings directory or machine digest (hil run gives both): it has no variant recordings to find. */
const NO_VARIANTS = 'the replay target plays recorded per-test stacks; variant stacks are not recorded';
/** A variant's own variant: a test's variants are numbered in the order the test opens them, from its fixtures. */
export const NESTED_VARIANT = 'a variant stack opens no variants of its own on a recorded or replayed run (a test\'s variants are recorded in the order the test opens them)';
/** A variant opened outside a test (a describe block's shared variant) has no per-test recording. */
export const SHARED_VARIANT = 'not recorded: a variant shared by a describe block is opened outside any test, and only per-test stacks are recorded';
/** Stepped-clock variants recorded before format 3 have no steps and no host times to replay them with. */
export const STEPPED_FORMAT_2 = 'a stepped-clock variant recorded in format 2 cannot be replayed (its recording has neither the test\'s steps nor the host time of each cycle): re-record it (hil run --record)';

/**
 * Hil serve flags of a stack the replay does not take: the sim driver's own (the replay driver's inputs come
 * from the recording) and the clock (a paced replay runs on the recorded one, which on a stepped recording
 * runs the test's steps).
 */
const NOT_REPLAYED_FLAGS = new Set(['--sim-fault', '--sim-homing-ms', '--clock']);

let digest: Promise<string> | undefined;

/** The machine digest of the configuration under test: given by `hil run`, else compiled once here (per worker). */
export function machineDigest(o: Pick<RecorderOptions, 'machine' | 'machineSha256'>): Promise<string> {
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

/** What a stack's recording is for: the test's own stack, or its n-th variant (a remote stack is one too). */
type StackRole = { kind: 'test' } | { kind: 'variant'; n: number; options: string; stepped: boolean; machineSha256: string };

/** One stack's session, recorded into a file or replayed from one; owned by the stack's target. */
export class StackSession {
  private incarnations = 1;

  constructor(
    readonly mode: 'record' | 'replay',
    /** The test the stack belongs to. */
    readonly test: TestRun,
    /** The recording of the stack's first core incarnation. */
    readonly recording: string,
    private readonly role: StackRole,
    /** Replay: the temporary directory the stack writes its verdicts to (removed when they are read), the replay mode and pace. */
    private readonly replay?: { verdicts: string; mode: string; speed: string },
  ) {}

  /** `hil serve` flags that make the stack record or replay (after the stack's own). */
  get args(): string[] {
    if (!this.replay) return ['--record', this.recording, '--record-run', RecordingStore.runName(this.test.id, this.variant)];
    return ['--driver', 'replay', '--replay-file', this.recording, '--replay-mode', this.replay.mode, '--replay-paced', this.verdictFile(), '--replay-speed', this.replay.speed];
  }

  private get variant(): number | undefined {
    return this.role.kind === 'variant' ? this.role.n : undefined;
  }

  private verdictFile(n = 1): string {
    return RecordingStore.incarnation(join(this.replay!.verdicts, 'verdict.json'), n);
  }

  /** The stack is up. A replayed variant must run the machine it was recorded on (compared by digest). */
  started(ready: StackProcess['ready']): void {
    if (this.mode !== 'replay' || this.role.kind !== 'variant') return;
    const then = RecordingStore.readSidecar(this.recording)?.stack_machine_sha256;
    if (typeof then === 'string' && ready.machine_sha256 && then !== ready.machine_sha256) {
      throw new HarnessError('HIL_ERR_REPLAY_STALE', `${this.test.id}: variant ${this.role.n} was recorded on machine ${then}, its stack now runs machine ${ready.machine_sha256}: re-record it (hil run --record)`, {
        detail: { recorded: then, current: ready.machine_sha256 },
      });
    }
  }

  /**
   * The test restarts the stack's core: a new incarnation, recorded into (replayed from) a file of its own
   * (the stack names it). A replay needs that recording, or the restart is refused before it happens.
   */
  coreRestart(): void {
    const n = this.incarnations + 1;
    const next = RecordingStore.incarnation(this.recording, n);
    if (this.mode === 'replay' && !existsSync(next)) {
      throw new HarnessError('HIL_ERR_REPLAY_MISSING', `${this.recording}: the test restarts its core, but core incarnation ${n} was not recorded (${next}): re-record it (hil run --record)`);
    }
    this.incarnations = n;
  }

  /** The stack did not start: nothing to leave. */
  abandon(): void {
    if (this.replay) rmSync(this.replay.verdicts, { recursive: true, force: true });
  }

  /**
   * The stack has stopped (its recording is closed, its verdicts written): record, write the sidecar;
   * replay, read the verdict of every core incarnation. What happened, for the test's outcome.
   */
  finish(ready: StackProcess['ready']): PerTestOutcome[] {
    const variant = this.variant !== undefined ? { variant: this.variant } : {};
    if (this.mode === 'record') {
      RecordingStore.writeSidecar(this.recording, this.sidecar(ready));
      return [{ recording: this.recording, mode: 'record', ...variant }];
    }
    const out: PerTestOutcome[] = [];
    for (let n = 1; n <= this.incarnations; n++) {
      out.push({ recording: RecordingStore.incarnation(this.recording, n), mode: 'replay', ...readVerdict(this.verdictFile(n)), ...(n > 1 ? { incarnation: n } : {}), ...variant });
    }
    this.abandon();
    return out;
  }

  private sidecar(ready: StackProcess['ready']): Record<string, unknown> {
    const r = this.role;
    if (r.kind === 'test') {
      const properties = this.test.drawnProperties();
      return {
        test: this.test.id,
        target: 'sim',
        machine_sha256: ready.machine_sha256,
        configuration_sha256: ready.configuration_sha256,
        recorded_at: new Date().toISOString(),
        // The property tests' seeds and volumes: the replay draws the same cases (harness/property.ts).
        ...(Object.keys(properties).length ? { properties } : {}),
      };
    }
    return {
      test: this.test.id,
      target: 'sim',
      variant: r.n,
      options: JSON.parse(r.options) as unknown,
      // The run's machine digest keys the directory; the variant's own stack may run another machine.
      machine_sha256: r.machineSha256,
      stack_machine_sha256: ready.machine_sha256,
      configuration_sha256: ready.configuration_sha256,
      // What lets the replay target replay a stepped-clock stack; recordings before format 3 lack it.
      ...(r.stepped ? { steps: true } : {}),
      recorded_at: new Date().toISOString(),
    };
  }
}

/**
 * A verdict file read back, checked against fixtures/contract/replay-verdict.schema.json: the verdict, none
 * (the stack did not start or was killed), or why what is there is not one (verdictProblem).
 */
export function readVerdict(file: string): { verdict: PerTestOutcome['verdict']; verdictProblem?: string } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return { verdict: null };
  }
  const r = parseVerdictFile(text);
  return 'verdict' in r ? { verdict: r.verdict } : { verdict: null, verdictProblem: `${file}: ${r.problem}` };
}

export class Recorder {
  private constructor(
    readonly mode: RecorderMode,
    private readonly o: RecorderOptions,
  ) {}

  /**
   * A recorder in `mode`: the target chooses it (the sim target records with a record directory, record.ts;
   * the replay target replays, replay.ts; every other stack is off).
   */
  static of(mode: RecorderMode, o: RecorderOptions): Recorder {
    return new Recorder(mode, o);
  }

  /** Neither recording nor replaying: a plain run's stacks. */
  static off(): Recorder {
    return new Recorder('off', {});
  }

  /** Every test gets stacks of its own (record and replay: docs/recording.md says why). */
  get perTest(): boolean {
    return this.mode !== 'off';
  }

  private get store(): RecordingStore {
    const dir = this.mode === 'record' ? this.o.recordDir : this.o.recordings;
    if (!dir) throw new HarnessError('HIL_ERR_REPLAY_MISSING', 'the replay target needs --recordings DIR (HIL_RECORDINGS)');
    return new RecordingStore(dir);
  }

  /** A stack's flags as this mode starts it: a replayed stack without the sim driver's own flags and the clock. */
  startOf(start: StackStart): StackStart {
    if (this.mode !== 'replay') return start;
    const args: string[] = [];
    for (let k = 0; k < start.args.length; k++) {
      if (NOT_REPLAYED_FLAGS.has(start.args[k]!)) k++;
      else args.push(start.args[k]!);
    }
    return { ...start, args };
  }

  /**
   * Replay, before a test: its recording, or why it cannot run. Not recorded: a skip reason. Stale (the same
   * test recorded for another machine digest): HIL_ERR_REPLAY_STALE naming both digests. Recorded without a
   * stack: the sidecar, and the test runs without one.
   */
  async precheck(testId: string): Promise<{ path: string } | { skip: string } | { stackless: string }> {
    const store = this.store;
    if (!existsSync(store.dir)) throw new HarnessError('HIL_ERR_REPLAY_MISSING', `no recordings directory at ${store.dir} (make one with hil run --record DIR)`);
    const sha = await machineDigest(this.o);
    const found = store.find(sha, testId);
    if (found.kind === 'not_recorded') return { skip: `not recorded (no recording of this test for machine ${sha} under ${store.dir})` };
    // A test that ended in ERROR when recorded (the host too slow, the harness broken): its recording keeps
    // what broke then (a lease run out under a late keeper), which the live test does not repeat, so its
    // replay would judge the target on the recorded harness's trouble (a live keeper renewing in time, a
    // recorded expiry replayed: FAIL; a fault injection held behind that expiry: ERROR). A test whose stacks
    // are all variants has a stackless sidecar that says so.
    if (found.kind !== 'stale') {
      const erred = recordedErrors(RecordingStore.readSidecar(store.testRecording(sha, testId)));
      if (erred.length) return { skip: `recorded in ERROR (${erred.join(', ')}): the recording keeps what broke the harness then, no reference of the target; re-record it (hil run --record)` };
      // A test that took an exchange again on a fresh grant because the host was too slow when recorded
      // (suites/grant/grant.test.ts "renew keeps lease_ms ..."): its recording holds the thrown-away tries,
      // which a replay on other timing does not make (requests never sent: a FAIL that is the recorded host's).
      const retried = RecordingStore.readSidecar(store.testRecording(sha, testId))?.host_retries;
      if (typeof retried === 'number' && retried > 0) return { skip: `recorded while the host was too slow: the test took an exchange again ${retried} time${retried === 1 ? '' : 's'}, which its replay does not repeat; re-record it (hil run --record)` };
    }
    if (found.kind === 'stackless') return { stackless: found.sidecar };
    if (found.kind === 'stale') {
      throw new HarnessError('HIL_ERR_REPLAY_STALE', `recording ${found.path} was made for machine ${found.recordedMachine}, the configuration under test is machine ${sha}: re-record it (hil run --record)`, {
        detail: { recorded: found.recordedMachine, current: sha },
      });
    }
    return { path: found.path };
  }

  /**
   * The session of a test's own stack. Record: `running` is a stack of the machine under test, whose digest
   * files the recording. Replay: the test's recording, which must be there (the per-test fixture skipped the
   * test otherwise).
   */
  async testSession(test: TestRun, running?: StackProcess['ready']): Promise<StackSession> {
    if (this.mode === 'record') {
      const sha = running?.machine_sha256;
      if (!sha) throw new HarnessError('HIL_ERR_TARGET_START', 'the stack did not report its machine digest; recordings are keyed by it');
      const path = this.store.testRecording(sha, test.id);
      mkdirSync(dirname(path), { recursive: true });
      return new StackSession('record', test, path, { kind: 'test' });
    }
    const pre = await this.precheck(test.id);
    if ('skip' in pre) throw new HarnessError('HIL_ERR_REPLAY_MISSING', `${test.id}: ${pre.skip}`);
    if ('stackless' in pre) throw new HarnessError('HIL_ERR_REPLAY_MISSING', `${test.id}: recorded without a stack (${pre.stackless}), but it asks for one now: re-record it (hil run --record)`);
    return new StackSession('replay', test, pre.path, { kind: 'test' }, this.replaying());
  }

  /**
   * Why the current test's next variant (or own stack: `v` is then the variant options among its flags)
   * cannot be had, or undefined. Only a replay refuses: a variant it has no recording of.
   */
  cannotProvide(v?: VariantOptions): string | undefined {
    if (this.mode !== 'replay') return undefined;
    const test = currentTest();
    if (test === undefined) return SHARED_VARIANT;
    const sha = this.o.machineSha256;
    if (!sha || !this.o.recordings) return NO_VARIANTS;
    const n = test.peekVariant();
    const path = this.store.variantRecording(sha, test.id, n);
    if (!existsSync(path)) return `not recorded (no recording of variant ${n} of this test for machine ${sha}: ${path})`;
    if (v?.clock === 'stepped' && RecordingStore.readSidecar(path)?.steps !== true) return STEPPED_FORMAT_2;
    return undefined;
  }

  /**
   * The session of the current test's next variant stack (`live`: its options as a sidecar keeps them,
   * variantOptionsJson or stackOptionsJson), or null when it is not recorded: a plain run, or a variant opened
   * outside any test. A replay refuses a variant it cannot provide (HIL_ERR_VARIANT_UNSUPPORTED) and one asked
   * with other options than recorded (HIL_ERR_REPLAY_STALE, both named).
   */
  variantSession(live: string, v?: VariantOptions): StackSession | null {
    if (this.mode === 'off') return null;
    const why = this.cannotProvide(v);
    if (why) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', why);
    const test = currentTest();
    const sha = this.o.machineSha256;
    if (!test || !sha) return null; // record only: replay said why above
    const n = test.takeVariant();
    const path = this.store.variantRecording(sha, test.id, n);
    const role: StackRole = { kind: 'variant', n, options: live, stepped: v?.clock === 'stepped', machineSha256: sha };
    if (this.mode === 'record') {
      mkdirSync(dirname(path), { recursive: true });
      return new StackSession('record', test, path, role);
    }
    const recorded = RecordingStore.readSidecar(path)?.options;
    if (JSON.stringify(recorded) !== live) {
      throw new HarnessError('HIL_ERR_REPLAY_STALE', `${test.id}: variant ${n} was recorded with options ${JSON.stringify(recorded)}, the test now asks for ${live}: re-record it (hil run --record)`, {
        detail: { recorded: JSON.stringify(recorded), current: live },
      });
    }
    return new StackSession('replay', test, path, role, this.replaying());
  }

  /** A replayed stack's verdict directory (fresh), mode and pace. */
  private replaying(): { verdicts: string; mode: string; speed: string } {
    return { verdicts: mkdtempSync(join(tmpdir(), 'hil-replay-verdict-')), mode: this.o.replayMode ?? 'strict', speed: this.o.replaySpeed ?? 'auto' };
  }

  /** A recorded test that never opened the target: its sidecar says so (RecordingStore.writeStackless). */
  noteStackless(test: TestRun, wallMs: number): void {
    if (this.mode === 'record' && this.o.machineSha256) this.store.writeStackless(this.o.machineSha256, test.id, test.drawnProperties(), wallMs);
  }

  /** Record: the test threw `tries` tries away because the host made them say nothing (cell.ts attempt), said in its own sidecar. */
  noteRetried(testId: string, tries: number): void {
    if (this.mode === 'record' && this.o.machineSha256) RecordingStore.noteSidecar(this.store.testRecording(this.o.machineSha256, testId), { host_retries: tries });
  }

  /** Record: the test ended in ERROR with `codes`, said in its own sidecar (a recording's or a stackless one: precheck). */
  noteErred(testId: string, codes: readonly string[]): void {
    if (this.mode === 'record' && this.o.machineSha256) RecordingStore.noteSidecar(this.store.testRecording(this.o.machineSha256, testId), { recorded_errors: codes });
  }
}

/** The error codes a recorded test ended with (a sidecar's `recorded_errors`, record.ts), none when it passed or failed. */
export function recordedErrors(sidecar: Record<string, unknown> | null): string[] {
  const e = sidecar?.recorded_errors;
  return Array.isArray(e) ? e.filter((c): c is string => typeof c === 'string') : [];
}
