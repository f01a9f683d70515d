// The sim target: starts the reference stack (`hil serve` semantics) as a separate process in a fresh
// temporary directory, with the private test channel, and stops it afterwards. Starting a process is the
// only link between the harness and the implementation (DESIGN.md rule 1).

import { tracked } from './live.ts';
import { noteTestChannel } from '../evidence.ts';
import { writeFile } from 'node:fs/promises';
import { makeTempDir, removeTempDir } from './exit-cleanup.ts';
import { join } from 'node:path';
import { Agent } from 'undici';
import { exchange } from '../clients/exchange.ts';
import { ControlClient } from '../clients/control.ts';
import { HarnessError } from '../errors.ts';
import { stringifyExact } from '../oracle/json.ts';
import { ANCHOR_DIR_ENV } from './reference.ts';
import type { FileOptions, StackProcess, StackStart, StepReport, Target, TargetDescriptor, TargetOption, TestStack } from './types.ts';
import { envValues, MACHINE_SHA256_OPTION, str } from './options.ts';
import { RECORD_OPTION, recordFixture, recorderOf, recordPrepare } from './record.ts';

export type { StackProcess, StackStart } from './types.ts';
import { startReferenceOlp } from './olp.ts';
import { openStubPlanner, startServer } from './spawn.ts';
import { machineFile, parseVariant, type VariantOptions } from './variant.ts';
import { currentTest, registerPerTest, type PerTestHooks, type PerTestOutcome, type TestRun } from './pertest.ts';
import { NESTED_VARIANT, Recorder, type StackSession } from './recorder.ts';
import { variantOptionsJson } from './recording-store.ts';

/**
 * The sim target's stacks that are not recorded are sessions of the worker's stack hosts (program-host.ts)
 * unless a start says otherwise: a run starts about a hundred stacks, and a process of its own costs each one a Node start, the
 * bundle's compilation, the machine's loading and a new core thread (bench/stack-start.bench.ts). Each
 * session is still a whole fresh stack in a fresh directory; a host whose session left anything running is
 * not used again (program-host.ts).
 */
function hostedByDefault(start: StackStart): StackStart {
  return start.hosted === undefined ? { ...start, hosted: true } : start;
}

export async function startStack(o: StackStart): Promise<StackProcess> {
  // Generous: on a loaded two-core machine a stack has been seen to need more than 30 s to start.
  const timeoutMs = o.timeoutMs ?? 60_000;
  const dir = o.reuseDir ?? (await makeTempDir('hil-sim-'));
  const extra = (await o.env?.(dir)) ?? {};
  // Anchors live in the stack's own temporary directory unless a variant says otherwise.
  const own = { [ANCHOR_DIR_ENV]: join(dir, 'anchors'), ...extra };
  const started = startServer<StackProcess['ready']>('stack', 'stack', ['--socket-dir', dir, '--lifeline-stdin', ...o.args], { timeoutMs, own, hosted: o.hosted === true });
  const p = await started.catch(async (e: unknown) => {
    if (!o.reuseDir) await removeTempDir(dir);
    throw e;
  });
  return {
    dir,
    ready: p.ready,
    stderr: p.stderr,
    beginStop: p.beginStop,
    async stop(opts) {
      await p.stop();
      if (!opts?.keepDir) await removeTempDir(dir);
    },
  };
}

/** How the reference stack provides each variant option: `hil serve` flags and environment. */
export function variantStart(o: VariantOptions): Pick<StackStart, 'args' | 'env'> {
  const args: string[] = [];
  if (o.telemetry === 'off') args.push('--capture-retention-ms', '0');
  if (o.initialGeneration !== undefined) args.push('--initial-generation', String(o.initialGeneration));
  if (o.machine !== undefined) args.push('--machine', machineFile(o.machine));
  if (o.pairId !== undefined) args.push('--pair-id', o.pairId);
  if (o.pairRevision !== undefined) args.push('--pair-revision', String(o.pairRevision));
  if (o.controlSocket !== undefined) args.push('--socket', o.controlSocket);
  for (const f of o.bringUpFaults ?? []) args.push('--sim-fault', `${f.kind}:${f.axis}`);
  if (o.clock === 'stepped') args.push('--clock', 'stepped');
  if (o.armSettleMs !== undefined) args.push('--arm-settle-ms', String(o.armSettleMs));
  if (o.jogSocket === 'off') args.push('--jog-socket', 'off');
  if (o.homingMs !== undefined) args.push('--sim-homing-ms', String(o.homingMs));
  if (o.controlIdleTimeoutMs !== undefined) args.push('--control-idle-timeout-ms', String(o.controlIdleTimeoutMs));
  const store = o.anchorStore;
  if (!store) return { args };
  return {
    args,
    env: async (dir) => {
      if (store.kind === 'directory') return { [ANCHOR_DIR_ENV]: store.dir };
      // A path below a regular file can be neither created nor read, even by root.
      await writeFile(join(dir, 'not-a-directory'), 'x');
      return { [ANCHOR_DIR_ENV]: join(dir, 'not-a-directory', 'anchors') };
    },
  };
}

function baseStart(o: { machine?: string; serveArgs?: readonly string[] }): StackStart {
  return { args: ['--test-channel', ...(o.machine ? ['--machine', o.machine] : []), ...(o.serveArgs ?? [])] };
}

/**
 * Start a stack, recording or replaying it when `session` says so. A session whose stack did not start, or
 * started wrong (a replayed variant on another machine), is abandoned and the stack stopped.
 */
async function startWith(start: StackStart, session: StackSession | null): Promise<StackProcess> {
  if (!session) return startStack(hostedByDefault(start));
  try {
    // A replayed stack is one of a run's many short ones: a session of a stack host (program-host.ts). A
    // recording is made on a stack started as a process, as a deployed service starts (docs/recording.md).
    const stack = await startStack({ ...start, args: [...start.args, ...session.args], hosted: session.mode === 'replay' });
    try {
      session.started(stack.ready);
    } catch (e) {
      await stack.stop();
      throw e;
    }
    return stack;
  } catch (e) {
    session.abandon();
    throw e;
  }
}

/**
 * A variant stack (harness/targets/variant.ts) on top of `base` (the file target's own arguments first, so
 * that a variant's --machine is the one that counts); on a recorded or replayed run, inside a test, the
 * test's next variant (recorder.ts).
 */
export async function openVariant(recorder: Recorder, o: VariantOptions, base: StackStart): Promise<SimTarget> {
  const v = variantStart(o);
  const start = recorder.startOf({ args: [...base.args, ...v.args], env: v.env });
  const session = recorder.variantSession(variantOptionsJson(o), o);
  return new SimTarget(await startWith(start, session), start, { recorder, session, variant: true });
}

/**
 * A test's own stack (TargetDescriptor.startStack: a remote listener stack), self-contained; on a recorded or
 * replayed run it is the test's next variant, exactly as a variant stack is, and stopping it ends its session.
 */
export async function startTestStack(recorder: Recorder, s: TestStack): Promise<StackProcess> {
  const session = recorder.variantSession(s.options, s.variant);
  const stack = await startWith(recorder.startOf(s.start), session);
  if (!session) return stack;
  let stopped = false;
  return {
    ...stack,
    async stop(opts) {
      if (stopped) return;
      stopped = true;
      await stack.stop(opts);
      for (const o of session.finish(stack.ready)) session.test.noteOutcome(o);
    },
  };
}

/**
 * A file's target on a recorded or replayed run: a fresh stack per test (begin/end, from the per-test
 * fixture). A replay opens with the current test's stack; a recording first starts a stack that records
 * nothing and tells the machine digest the recordings are filed under, then the test's own.
 */
export async function openPerTest(recorder: Recorder, start: StackStart): Promise<SimTarget> {
  const test = currentTest();
  if (recorder.mode === 'replay' && test) {
    const session = await recorder.testSession(test);
    return new SimTarget(await startWith(start, session), start, { recorder, session, perTest: true });
  }
  // A replay's file target opened outside a test: the runner asks a test's fixtures again for its hooks
  // after the per-test fixture skipped it (not recorded, recorded in ERROR), and takes an earlier failed
  // fixture for set up. A plain stack stands in until the next test's begin replaces it: a refusal here
  // was kept as the file's target and errored every later test of the file (HIL_ERR_TARGET_START).
  const t = new SimTarget(await startStack(recorder.mode === 'replay' ? hostedByDefault(start) : start), start, { recorder, perTest: true });
  if (test) await t.begin(test);
  return t;
}

/**
 * The reference stack as a target. What it does with its session is composed in (harness/targets/recorder.ts):
 * a Recorder (off, record, replay) for the stacks it opens, and the StackSession of its own stack when that
 * stack is recorded or replayed. A per-test target (a file's target on a recorded or replayed run) replaces
 * its stack for every test (begin, end).
 */
export class SimTarget implements Target, PerTestHooks {
  readonly name: 'sim' | 'replay';
  /** The bus driver the stack reports it attached (its ready line), not what was asked for. */
  get driver(): string {
    return this.stack.ready.driver ?? 'unknown';
  }
  private clients: ControlClient[] = [];
  private testAgent: Agent;
  private readonly recorder: Recorder;
  /** The running stack's session (recorded or replayed), null when it is neither. */
  private session: StackSession | null;
  /** A variant's stack: on a recorded or replayed run it opens no variants of its own (NESTED_VARIANT). */
  private readonly isVariant: boolean;
  private readonly unregister: (() => void) | undefined;
  private closed = false;
  /** How this target's own stack starts (a service restart starts it so again); variants build on `start`. */
  private readonly own: StackStart;

  constructor(
    private stack: StackProcess,
    private readonly start: StackStart,
    o: { recorder?: Recorder; session?: StackSession | null; variant?: boolean; perTest?: boolean; own?: StackStart } = {},
  ) {
    this.own = o.own ?? start;
    this.testAgent = new Agent({ connect: { socketPath: stack.ready.test_channel } });
    this.recorder = o.recorder ?? Recorder.off();
    this.name = this.recorder.mode === 'replay' ? 'replay' : 'sim';
    this.session = o.session ?? null;
    this.isVariant = o.variant ?? false;
    this.unregister = o.perTest ? registerPerTest(this) : undefined;
  }

  /**
   * A recorded or replayed stack, or a per-test target, restarts no service: a recording is one service
   * session. A core restart is a new incarnation, recorded into (replayed from) a file of its own.
   */
  get abilities() {
    return { faultInjection: true, coreRestart: true, serviceRestart: this.session === null && this.unregister === undefined, motion: true, hostTimedRecords: this.recorder.mode !== 'replay' };
  }

  /** Per-test runs: start this test's stack, recording or replaying it (the one running is stopped first). */
  async begin(test: TestRun): Promise<void> {
    if (this.session?.test === test) return; // opened for this very test
    const session = await this.recorder.testSession(test, this.stack.ready);
    await this.stopStack();
    this.stack = await startWith(this.start, session);
    this.testAgent = new Agent({ connect: { socketPath: this.stack.ready.test_channel } });
    this.session = session;
  }

  /** Per-test runs: stop the test's stack; what became of its recording (and of its later core incarnations'). */
  async end(): Promise<PerTestOutcome[]> {
    const s = this.session;
    this.session = null;
    await this.stopStack();
    return s ? s.finish(this.stack.ready) : [];
  }

  /** Stop the current stack and the clients bound to it (idempotent). */
  private async stopStack(): Promise<void> {
    const clients = this.clients.splice(0);
    await Promise.all(clients.map((c) => c.close()));
    await this.testAgent.close().catch(() => undefined);
    await this.stack.stop();
  }

  /** Stop the service process and start a new one on the same socket directory (new adapter incarnation). */
  async restartService(): Promise<void> {
    if (!this.abilities.serviceRestart) {
      // A test that did not look at `abilities`: refused, not half recorded.
      throw new HarnessError('HIL_ERR_TARGET_UNSUPPORTED', `a ${this.recorder.mode === 'replay' ? 'replayed' : 'recorded'} stack cannot restart its service (a recording is one service session)`);
    }
    await this.stack.stop({ keepDir: true });
    this.stack = await startStack(hostedByDefault({ ...this.own, reuseDir: this.stack.dir }));
  }

  get address(): string {
    return this.stack.ready.control;
  }

  get publicAddress(): string {
    return this.stack.ready.public;
  }

  cannotProvide(options?: VariantOptions): string | undefined {
    if (this.isVariant && this.recorder.perTest) return NESTED_VARIANT;
    return this.recorder.cannotProvide(options); // the reference stack provides every variant option
  }

  async variant(options: VariantOptions): Promise<Target> {
    if (this.isVariant && this.recorder.perTest) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', NESTED_VARIANT);
    return tracked(await openVariant(this.recorder, parseVariant(options), this.start));
  }

  client(): ControlClient {
    const c = new ControlClient(this.address);
    this.clients.push(c);
    return c;
  }

  private async test(path: string, body: unknown): Promise<string> {
    noteTestChannel(path);
    const res = await exchange(this.testAgent, `http://localhost${path}`, { method: 'POST', body: stringifyExact(body), headers: { 'content-type': 'application/json' } });
    const text = Buffer.from(res.body.buffer, res.body.byteOffset, res.body.length).toString('utf8');
    if (res.status !== 200) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `test channel ${path}: ${res.status} ${text}`, { detail: { status: res.status } });
    return text;
  }

  async step(cycles: number): Promise<bigint> {
    return (await this.stepReport(cycles)).nowNs;
  }

  async stepReport(cycles: number): Promise<StepReport> {
    const text = await this.test('/step', { cycles });
    const m = /"now_ns":(\d+),"cycles":(\d+),"answered":(\d+)(?:,"waiting":(\d+))?/.exec(text);
    if (!m) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `test channel /step: no now_ns, cycles and answered in ${text}`);
    return { nowNs: BigInt(m[1]!), cycles: BigInt(m[2]!), answered: Number(m[3]), ...(m[4] !== undefined ? { waiting: Number(m[4]) } : {}) };
  }

  async coreWaits(): Promise<number> {
    const text = await this.test('/core-waits', {});
    const m = /"waiting":(\d+)/.exec(text);
    if (!m) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `test channel /core-waits: no waiting in ${text}`);
    return Number(m[1]);
  }

  readonly injections: { kind: string; at_ns: bigint }[] = [];

  async inject(fault: Record<string, unknown>): Promise<void> {
    this.injections.push({ kind: String(fault.kind), at_ns: process.hrtime.bigint() });
    await this.test('/inject', fault);
  }

  async restartCore(): Promise<void> {
    this.session?.coreRestart();
    await this.test('/restart-core', {});
  }

  diagnostics(): string {
    return this.stack.stderr();
  }

  get pid(): number {
    return this.stack.ready.pid;
  }

  /** Stop the stack; a variant's session ends with it (its outcome goes with the test's). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.unregister?.();
    const s = this.session;
    this.session = null;
    await this.stopStack();
    if (s) for (const o of s.finish(this.stack.ready)) s.test.noteOutcome(o);
  }
}

/** The sim target's own options (its schema below; HIL_DRIVER and HIL_SERVE_ARGS become `hil serve` arguments). */
export interface SimOptions {
  /** Machine configuration file. */
  machine?: string;
  /** Extra arguments for `hil serve` (--driver NAME first, when one was chosen). */
  serveArgs?: string[];
  /** The record mode (harness/targets/record.ts): every test recorded into its own recording under this directory. */
  recordDir?: string;
  /** The record mode: the machine digest of the configuration under test (computed once per run by `hil run`). */
  machineSha256?: string;
}

async function openSim(o: SimOptions & FileOptions): Promise<Target> {
  const recorder = recorderOf(o);
  const start = baseStart(o);
  if (!recorder.perTest) {
    const own = fileStart(start, o);
    return new SimTarget(await startStack(hostedByDefault(own)), start, { own });
  }
  // A recorded run keeps the real-time clock its recordings are made on (docs/recording.md).
  return openPerTest(recorder, start);
}

/**
 * The file's own stack: on the stepped clock when the file's tests need no cycle of it (fixture.ts
 * cycleFree) and HIL_SERVE_ARGS chose no clock. An idle real-time core wakes 1000 times a second for the
 * whole file, a few per cent of a core per stack, and a run keeps several stacks alive at once; a stepped
 * core runs nothing between requests. A service restart keeps the clock; variants build on the base
 * arguments and ask for their own clocks.
 */
export function fileStart(start: StackStart, o: FileOptions & { serveArgs?: readonly string[] }): StackStart {
  if (o.fileClock !== 'stepped' || (o.serveArgs ?? []).some((a) => a === '--clock' || a.startsWith('--clock='))) return start;
  return { ...start, args: [...start.args, '--clock', 'stepped'] };
}

const SIM_OPTIONS: readonly TargetOption[] = [
  { key: 'driver', flag: 'driver', value: 'NAME', env: 'HIL_DRIVER', help: "the stack's bus driver (hil serve --driver; default sim; ethercat-fake runs the EtherCAT driver over a fake master); expected failures then come from fixtures/expectations/<target>+<driver>.json" },
  { key: 'machine', flag: 'machine', value: 'FILE', env: 'HIL_MACHINE', help: 'machine configuration (default fixtures/machines/nine-axis.json)', path: true },
  RECORD_OPTION,
  { key: 'serveArgs', env: 'HIL_SERVE_ARGS', value: 'ARGS', help: 'extra hil serve arguments (environment only)' },
  MACHINE_SHA256_OPTION,
];

export const simTarget: TargetDescriptor<SimOptions> = {
  name: 'sim',
  summary: 'the reference stack on the simulator driver, started per test file in a temporary directory',
  abilities: { variants: true, testStacks: true, testChannel: true, plant: true, watch: true, sharedService: false, motion: 'always' },
  options: SIM_OPTIONS,
  parse(env) {
    const v = envValues(SIM_OPTIONS, env);
    const driver = str(v.driver);
    const extra = str(v.serveArgs)?.split(/\s+/).filter(Boolean) ?? [];
    return {
      ...(str(v.machine) ? { machine: str(v.machine) } : {}),
      serveArgs: [...(driver ? ['--driver', driver] : []), ...extra],
      ...(str(v.recordDir) ? { recordDir: str(v.recordDir) } : {}),
      ...(str(v.machineSha256) ? { machineSha256: str(v.machineSha256) } : {}),
    };
  },
  check(o) {
    const i = o.serveArgs?.indexOf('--driver') ?? -1;
    const driver = i >= 0 ? o.serveArgs![i + 1]! : undefined;
    if (driver !== undefined && !/^[a-z][a-z0-9-]{0,31}$/.test(driver)) return `--driver ${driver}: not a driver name`;
    return undefined;
  },
  prepare: (o) => recordPrepare(o),
  open: openSim,
  cannotProvide: () => undefined,
  openVariant: (variant, o) => openVariant(recorderOf(o), variant, baseStart(o)),
  openPlanner: () => openStubPlanner(),
  openOlp: (spec) => startReferenceOlp(spec),
  cannotStartStack: () => undefined,
  startStack: (s, o) => startTestStack(recorderOf(o), s),
  perTest: (o) => recordFixture(o),
};
