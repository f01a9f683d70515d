// The sim target: starts the reference stack (`hil serve` semantics) as a separate process in a fresh
// temporary directory, with the private test channel, and stops it afterwards. Starting a process is the
// only link between the harness and the implementation (DESIGN.md rule 1).

import { noteTestChannel } from '../evidence.ts';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Agent, request } from 'undici';
import { ControlClient } from '../clients/control.ts';
import { HarnessError } from '../errors.ts';
import { stringifyExact } from '../oracle/json.ts';
import { ANCHOR_DIR_ENV, referenceCommand } from './reference.ts';
import type { StackProcess, StackStart, StepReport, Target, TargetDescriptor, TargetOptions, TestStack } from './types.ts';

export type { StackProcess, StackStart } from './types.ts';
import { startReferenceOlp } from './olp.ts';
import { openStubPlanner, spawnReady } from './spawn.ts';
import { machineFile, parseVariant, type VariantOptions } from './variant.ts';
import { currentTest, drawnProperties, noteVariantOutcome, recordingPath, registerPerTest, takeVariantIndex, variantOptionsJson, variantRecordingPath, type PerTestHooks, type PerTestOutcome } from './pertest.ts';

export async function startStack(o: StackStart): Promise<StackProcess> {
  // Generous: on a loaded two-core machine a stack has been seen to need more than 30 s to start.
  const timeoutMs = o.timeoutMs ?? 60_000;
  const dir = o.reuseDir ?? (await mkdtemp(join(tmpdir(), 'hil-sim-')));
  const extra = (await o.env?.(dir)) ?? {};
  // Anchors live in the stack's own temporary directory unless a variant says otherwise.
  const env = { ...process.env, [ANCHOR_DIR_ENV]: join(dir, 'anchors'), ...extra };
  const p = await spawnReady<StackProcess['ready']>('stack', [...referenceCommand('stack'), '--socket-dir', dir, '--lifeline-stdin', ...o.args], env, timeoutMs).catch(async (e: unknown) => {
    if (!o.reuseDir) await rm(dir, { recursive: true, force: true });
    throw e;
  });
  return {
    child: p.child,
    dir,
    ready: p.ready,
    stderr: p.stderr,
    async stop(opts) {
      await p.stop();
      if (!opts?.keepDir) await rm(dir, { recursive: true, force: true });
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

function baseStart(o: TargetOptions): StackStart {
  return { args: ['--test-channel', ...(o.machine ? ['--machine', o.machine] : []), ...(o.serveArgs ?? [])] };
}

async function startVariant(o: VariantOptions, base: StackStart, record?: RecordTo): Promise<Target> {
  const v = variantStart(o);
  // The file target's own arguments first, so that a variant's --machine is the one that counts.
  const start: StackStart = { args: [...base.args, ...v.args], env: v.env };
  // A recorded run: a variant opened by a test is recorded beside the test's own recording (one opened for
  // a describe block, outside any test, is not: its replay skips).
  const r = await nextVariantRecording(record, variantOptionsJson(o), o.clock === 'stepped');
  if (!r) return new SimTarget(await startStack(start), start);
  return new RecordedVariant(await startStack({ ...start, args: [...start.args, ...recordArgs(r)] }), start, r);
}

/**
 * A test's own stack (TargetDescriptor.startStack: a remote listener stack), self-contained; on a recorded
 * run it is recorded as the test's next variant, exactly as a variant stack is.
 */
async function startTestStack(s: TestStack, record?: RecordTo): Promise<StackProcess> {
  const r = await nextVariantRecording(record, s.options, s.variant?.clock === 'stepped');
  if (!r) return startStack(s.start);
  const stack = await startStack({ ...s.start, args: [...s.start.args, ...recordArgs(r)] });
  let stopped = false;
  return {
    ...stack,
    async stop(opts) {
      if (stopped) return;
      stopped = true;
      await stack.stop(opts);
      await finishVariantRecording(r, stack.ready);
    },
  };
}

/** Where a recorded run records (`hil run --record DIR`): the directory and the run's machine digest. */
type RecordTo = { dir: string; machineSha256: string };
const recordTo = (o: TargetOptions): RecordTo | undefined => (o.recordDir && o.machineSha256 ? { dir: o.recordDir, machineSha256: o.machineSha256 } : undefined);

/** A variant stack of the current test being recorded: its file, its index, and its options as the sidecar keeps them. */
interface VariantRecording {
  path: string;
  n: number;
  testId: string;
  /** variantOptionsJson or stackOptionsJson of what was started. */
  options: string;
  machineSha256: string;
  /** On the stepped clock: the recording holds the test's steps and each cycle's host time (format 3). */
  stepped: boolean;
}

/** On a recorded run, inside a test: take the test's next variant index and say where that variant is recorded. */
async function nextVariantRecording(record: RecordTo | undefined, options: string, stepped: boolean): Promise<VariantRecording | undefined> {
  const id = currentTest();
  if (!record || id === undefined) return undefined;
  const n = takeVariantIndex();
  const path = variantRecordingPath(record.dir, 'sim', record.machineSha256, id, n);
  await mkdir(dirname(path), { recursive: true });
  return { path, n, testId: id, options, machineSha256: record.machineSha256, stepped };
}

const recordArgs = (r: VariantRecording) => ['--record', r.path, '--record-run', `${r.testId} (variant ${r.n})`];

/** A recorded variant stack has stopped (its recording is closed): write its sidecar and tell the test. */
async function finishVariantRecording(r: VariantRecording, ready: StackProcess['ready']): Promise<void> {
  await writeFile(
    r.path.replace(/\.hilrec$/, '.json'),
    JSON.stringify(
      {
        test: r.testId,
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
      },
      null,
      2,
    ) + '\n',
  );
  noteVariantOutcome({ recording: r.path, mode: 'record', variant: r.n });
}

export class SimTarget implements Target {
  readonly name: 'sim' | 'replay' = 'sim';
  /** The bus driver the stack reports it attached (its ready line), not what was asked for. */
  get driver(): string {
    return this.stack.ready.driver ?? 'unknown';
  }
  readonly abilities = { faultInjection: true, coreRestart: true, serviceRestart: true, motion: true };
  private clients: ControlClient[] = [];
  protected testAgent: Agent;

  constructor(
    protected stack: StackProcess,
    protected readonly start: StackStart,
  ) {
    this.testAgent = new Agent({ connect: { socketPath: stack.ready.test_channel } });
  }

  /** Replace the running stack with a fresh one started with these extra arguments (per-test stacks). */
  protected async restack(extraArgs: readonly string[]): Promise<void> {
    await this.stopStack();
    this.stack = await startStack({ ...this.start, args: [...this.start.args, ...extraArgs] });
    this.testAgent = new Agent({ connect: { socketPath: this.stack.ready.test_channel } });
  }

  /** Stop the current stack and the clients bound to it (idempotent). */
  protected async stopStack(): Promise<void> {
    const clients = this.clients.splice(0);
    await Promise.all(clients.map((c) => c.close()));
    await this.testAgent.close().catch(() => undefined);
    await this.stack.stop();
  }

  /** Stop the service process and start a new one on the same socket directory (new adapter incarnation). */
  async restartService(): Promise<void> {
    await this.stack.stop({ keepDir: true });
    this.stack = await startStack({ ...this.start, reuseDir: this.stack.dir });
  }

  get address(): string {
    return this.stack.ready.control;
  }

  get publicAddress(): string {
    return this.stack.ready.public;
  }

  cannotProvide(_options?: VariantOptions): string | undefined {
    return undefined; // the reference stack provides every variant option
  }

  variant(options: VariantOptions): Promise<Target> {
    return startVariant(parseVariant(options), this.start);
  }

  client(): ControlClient {
    const c = new ControlClient(this.address);
    this.clients.push(c);
    return c;
  }

  private async test(path: string, body: unknown): Promise<string> {
    noteTestChannel(path);
    const res = await request(`http://localhost${path}`, {
      method: 'POST',
      dispatcher: this.testAgent,
      body: stringifyExact(body),
      headers: { 'content-type': 'application/json' },
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `test channel ${path}: ${res.statusCode} ${text}`, { detail: { status: res.statusCode } });
    return text;
  }

  async step(cycles: number): Promise<bigint> {
    return (await this.stepReport(cycles)).nowNs;
  }

  async stepReport(cycles: number): Promise<StepReport> {
    const text = await this.test('/step', { cycles });
    const m = /"now_ns":(\d+),"cycles":(\d+),"answered":(\d+)/.exec(text);
    if (!m) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `test channel /step: no now_ns, cycles and answered in ${text}`);
    return { nowNs: BigInt(m[1]!), cycles: BigInt(m[2]!), answered: Number(m[3]) };
  }

  async inject(fault: Record<string, unknown>): Promise<void> {
    await this.test('/inject', fault);
  }

  async restartCore(): Promise<void> {
    await this.test('/restart-core', {});
  }

  diagnostics(): string {
    return this.stack.stderr();
  }

  get pid(): number {
    return this.stack.ready.pid;
  }

  async close(): Promise<void> {
    await this.stopStack();
  }
}

/** A recorded stack asked to restart its service (a test that did not look at `abilities`): refused, not half recorded. */
function refuseRestart(what: 'service'): Promise<void> {
  return Promise.reject(new HarnessError('HIL_ERR_TARGET_UNSUPPORTED', `a recorded stack cannot restart its ${what} (a recording is one service session)`));
}

/**
 * `hil run --record DIR`: the sim target with a fresh stack per test, each recording its whole session
 * into the test's file under DIR (harness/targets/pertest.ts says why one stack per test).
 */
class RecordingSimTarget extends SimTarget implements PerTestHooks {
  // A core restart records the next incarnation into a file of its own (sims/service/core-link.ts
  // incarnationFiles); a service restart would start a second session in the same recording: not recorded.
  override readonly abilities = { faultInjection: true, coreRestart: true, serviceRestart: false, motion: true };
  override restartService(): Promise<void> {
    return refuseRestart('service');
  }
  private recording: string | null = null;
  private readonly unregister: () => void;

  constructor(
    stack: StackProcess,
    start: StackStart,
    private readonly dir: string,
    first: string | null,
  ) {
    super(stack, start);
    this.recording = first;
    this.unregister = registerPerTest(this);
  }

  /** Start a stack recording this test (the one running, if any, is stopped first). */
  async begin(testId: string): Promise<void> {
    if (this.recording && this.currentId === testId) return; // opened for this very test
    const path = recordingFor(this.dir, this.stack, testId);
    await mkdir(join(path, '..'), { recursive: true });
    await this.restack(['--record', path, '--record-run', testId]);
    this.recording = path;
    this.currentId = testId;
  }
  currentId: string | undefined;

  async end(): Promise<PerTestOutcome> {
    const path = this.recording;
    await this.stopStack();
    this.recording = null;
    if (!path) return { recording: '', mode: 'record' };
    const properties = drawnProperties();
    await writeFile(
      path.replace(/\.hilrec$/, '.json'),
      JSON.stringify(
        {
          test: this.currentId,
          target: 'sim',
          machine_sha256: this.stack.ready.machine_sha256,
          configuration_sha256: this.stack.ready.configuration_sha256,
          recorded_at: new Date().toISOString(),
          // The property tests' seeds and volumes: the replay draws the same cases (harness/property.ts).
          ...(Object.keys(properties).length ? { properties } : {}),
        },
        null,
        2,
      ) + '\n',
    );
    return { recording: path, mode: 'record' };
  }

  override async close(): Promise<void> {
    this.unregister();
    await this.stopStack();
  }
}

/** A variant stack recording its whole session (`hil run --record`); its sidecar keeps the options. */
class RecordedVariant extends SimTarget {
  // As the recording target: a core restart records its next incarnation beside, a service restart is not recorded.
  override readonly abilities = { faultInjection: true, coreRestart: true, serviceRestart: false, motion: true };
  override restartService(): Promise<void> {
    return refuseRestart('service');
  }
  private closed = false;

  constructor(
    stack: StackProcess,
    start: StackStart,
    private readonly r: VariantRecording,
  ) {
    super(stack, start);
  }

  override async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const ready = this.stack.ready;
    await super.close();
    await finishVariantRecording(this.r, ready);
  }
}

function recordingFor(dir: string, stack: StackProcess, testId: string): string {
  const sha = stack.ready.machine_sha256;
  if (!sha) throw new HarnessError('HIL_ERR_TARGET_START', 'the stack did not report its machine digest; recordings are keyed by it');
  return recordingPath(dir, 'sim', sha, testId);
}

async function openSim(o: TargetOptions): Promise<Target> {
  const start = baseStart(o);
  if (!o.recordDir) return new SimTarget(await startStack(start), start);
  // The first stack tells the machine digest the recordings are keyed by; a test already running gets
  // its recording from the next stack (begin), so this one records nothing.
  const probe = await startStack(start);
  const t = new RecordingSimTarget(probe, start, o.recordDir, null);
  const id = currentTest();
  if (id) await t.begin(id);
  return t;
}

export const simTarget: TargetDescriptor = {
  name: 'sim',
  summary: 'the reference stack on the simulator driver, started per test file in a temporary directory',
  options: {
    HIL_MACHINE: 'machine configuration file (default fixtures/machines/nine-axis.json)',
    HIL_DRIVER: 'the stack\'s bus driver (hil serve --driver; default sim, e.g. ethercat-fake)',
    HIL_SERVE_ARGS: 'extra hil serve arguments',
    HIL_RECORD_DIR: 'record every test into its own recording under this directory (a stack per test)',
  },
  open: openSim,
  cannotProvide: () => undefined,
  openVariant: (variant, o) => startVariant(variant, baseStart(o), recordTo(o)),
  openPlanner: () => openStubPlanner(),
  openOlp: (spec) => startReferenceOlp(spec),
  cannotStartStack: () => undefined,
  startStack: (s, o) => startTestStack(s, recordTo(o)),
};
