// The rig target: this repository's stack on the rig's EtherCAT bus (`hil serve --driver ethercat`, or the
// fake master with HIL_RIG_DRIVER=ethercat-fake), with the bench box beside it (harness/benchbox). Safety
// gating (DESIGN.md rule 5):
// - motion only with --allow-motion AND an E-stop chain the bench box confirms closed and reachable; the
//   suites otherwise skip motion tests with the reason this target states;
// - a heartbeat to the bench box while the run is alive: a run that dies stops beating, and the box opens
//   the chain within its timeout. The client beats from a thread of its own (harness/benchbox/thread.ts),
//   so a test that holds its own thread does not make the box open the chain (docs/benchbox.md);
// - after every test the cell is settled: if anything is still armed, enabled or granted (an unknown
//   outcome: a timeout, a lost connection), the target waits for the lease to end the grant (document 1:
//   an unattended cell stops when its controller goes silent), checks from status that the cell is
//   stopped, and fails loudly otherwise;
// - at close the relay opens and drive power is cut.
// `--bench sim` puts a simulated box on a mock serial port whose chain and power drive the stack's safety
// input through its private test channel (with the fake master or the sim driver), so all of this is
// tested here; the simulated box runs in the bench box's thread, beside the client.

import { BenchBoxError } from '../benchbox/client.ts';
import { BenchBoxThread, type BenchThreadOptions, type SimBoxHandle } from '../benchbox/thread.ts';
import { Cell } from '../clients/cell.ts';
import { ControlClient } from '../clients/control.ts';
import { readStatus, waitStatus } from '../clients/status.ts';
import { HarnessError } from '../errors.ts';
import { startStack, type StackProcess } from './sim.ts';
import { absolute, envValues, str } from './options.ts';
import type { Target, TargetDescriptor, TargetOption, VariantOptions } from './types.ts';

/** The box's heartbeat timeout the rig sets, and how often the harness beats (a quarter of it). */
export const RIG_HEARTBEAT_TIMEOUT_MS = 500;
export const RIG_HEARTBEAT_EVERY_MS = 100;

export interface RigOptions {
  machine: string;
  /** A serial port path, or `sim` for the simulated box (with the fake master or the sim driver). */
  bench: string;
  allowMotion: boolean;
  /** The stack's driver: ethercat (default) or ethercat-fake. */
  driver: string;
  /** Simulated box only: E-stop buttons in the chain pressed (the chain stays open whatever the relay). */
  simButtonPressed?: boolean;
}

class RigTarget implements Target {
  readonly name = 'rig' as const;
  readonly abilities: Target['abilities'];
  readonly motionRefusal: string | undefined;
  private clients: ControlClient[] = [];
  private closed = false;
  /** When the harness last had the chain closed and the stack's safety latch reset (performance.now()), in order. */
  readonly armedAt: number[] = [];

  constructor(
    private readonly stack: StackProcess,
    readonly bench: BenchBoxThread,
    readonly driver: string,
    motionRefusal: string | undefined,
  ) {
    this.motionRefusal = motionRefusal;
    this.abilities = { faultInjection: false, coreRestart: false, serviceRestart: false, motion: motionRefusal === undefined, hostTimedRecords: true };
  }

  /** The simulated box (`--bench sim`), for the target's tests. */
  get simBox(): SimBoxHandle | undefined {
    return this.bench.sim;
  }

  /** Simulated box: resolves when its chain and power changes have reached the stack. */
  private async drainInjects(): Promise<void> {
    const failed = await this.bench.sim?.drain();
    if (failed !== undefined) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `the simulated bench box could not reach the stack's safety input: ${failed}`);
  }

  get address(): string {
    return this.stack.ready.control;
  }
  /** The stack's process, which the harness started on this host (the run-queue waits a timing judgment counts). */
  get pid(): number {
    return this.stack.ready.pid;
  }
  get publicAddress(): string {
    return this.stack.ready.public;
  }

  client(): ControlClient {
    const c = new ControlClient(this.address);
    this.clients.push(c);
    return c;
  }

  /** On a rig the E-stop faults come from the bench box: estop_open opens its relay; clear closes it again (with motion allowed). */
  readonly injections: { kind: string; at_ns: bigint }[] = [];

  async inject(fault: Record<string, unknown>): Promise<void> {
    this.injections.push({ kind: String(fault.kind), at_ns: process.hrtime.bigint() });
    if (fault.kind === 'estop_open') {
      await this.bench.relay('OPEN');
      return;
    }
    if (fault.kind === 'clear' && this.abilities.motion) {
      await this.bench.heartbeat();
      await this.bench.relay('CLOSE');
      await this.bench.power('RESTORE');
      return;
    }
    throw new HarnessError('HIL_ERR_TARGET_NO_ABILITY', `target rig cannot inject ${String(fault.kind)}: on a rig faults come from the bench box (E-stop relay, drive power)`);
  }

  async restartCore(): Promise<void> {
    throw new HarnessError('HIL_ERR_TARGET_NO_ABILITY', 'target rig does not restart its core');
  }
  async restartService(): Promise<void> {
    throw new HarnessError('HIL_ERR_TARGET_NO_ABILITY', 'target rig does not restart its service');
  }
  cannotProvide(): string | undefined {
    return 'target rig runs one stack on one bus; it cannot start a separate variant';
  }
  async variant(_o: VariantOptions): Promise<Target> {
    throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', this.cannotProvide()!);
  }
  diagnostics(): string {
    return this.stack.stderr();
  }

  /**
   * After a test: the cell must be stopped and released. When it is not (an unknown outcome left a grant,
   * an arm or an enable behind), wait for the lease to end the grant and check again; a cell that will not
   * settle is an error of the run, never ignored.
   */
  async settle(timeoutMs = 5_000): Promise<void> {
    const c = this.client();
    const stopped = (s: Awaited<ReturnType<typeof readStatus>>) => s.core !== null && s.core.armed === 0n && s.core.axis_enable_mask === 0n && s.core.io_armed === 0n;
    const st = await waitStatus(c, stopped, timeoutMs);
    if (!stopped(st)) throw new HarnessError('HIL_ERR_TARGET_START', `the rig did not settle within ${timeoutMs} ms: armed ${st.core?.armed}, enabled 0x${st.core?.axis_enable_mask.toString(16)}, io armed ${st.core?.io_armed}`);
    await this.drainInjects();
    // What the box's thread reported before now (its events, a failed beat) has been taken in.
    await this.bench.sync().catch(() => undefined);
    if (this.bench.heartbeatError) throw new HarnessError('HIL_ERR_TARGET_START', `the bench box heartbeat failed: ${this.bench.heartbeatError.code}: ${this.bench.heartbeatError.message}`);
    // The box's watchdog opened the chain since the harness last closed it: the harness's side lapsed (its
    // beats came too late, or the box or its link failed), not the cell. Close it again as the run's start
    // did, so the next test meets the cell the run set up; the test it happened in is judged by benchLoss.
    const last = this.armedAt[this.armedAt.length - 1];
    const opened = last === undefined ? undefined : this.watchdogOpenings().find((e) => e.atMs > last);
    if (this.abilities.motion && opened) {
      const loss = this.benchLoss(opened.atMs);
      process.stderr.write(`rig: ${loss?.hostTooSlow ?? loss?.equipment}; closing it again\n`);
      await this.bench.heartbeat();
      this.bench.startHeartbeat(RIG_HEARTBEAT_EVERY_MS);
      const refusal = await closeChain(this.bench);
      if (refusal) throw new HarnessError('HIL_ERR_TARGET_START', `the bench box's watchdog opened the E-stop chain and it could not be closed again: ${refusal}`);
      await this.drainInjects();
      await resetSafetyLatch(this);
    }
  }

  /** The box's heartbeat watchdog openings of the chain (its ESTOP events), in arrival order. */
  private watchdogOpenings() {
    return this.bench.events.filter((e) => e.event === 'ESTOP' && e.fields.reason === 'heartbeat_timeout');
  }

  /**
   * Whether a test that began at `sinceMs` (performance.now()) met the chain opened by the box's heartbeat
   * watchdog: an opening while it ran (its teardown included), or one before it that the harness had not
   * closed again when it began. What failed after it says nothing about the target (DESIGN.md rule 6):
   * `hostTooSlow` when the harness had been silent toward the box for most of its timeout (the beats are
   * the harness's own sends: only its host or its process could hold them back), `equipment` when it had
   * beaten in time and the box opened the chain anyway (the box or its serial link failed).
   */
  benchLoss(sinceMs: number): { hostTooSlow?: string; equipment?: string } | undefined {
    const hit = this.watchdogOpenings().find((e) => e.atMs >= sinceMs || !this.armedAt.some((a) => a > e.atMs && a <= sinceMs));
    if (!hit) return undefined;
    const timeout = RIG_HEARTBEAT_TIMEOUT_MS;
    const silence = this.bench.silenceBefore(hit.atMs, timeout + 1_000);
    const what = `the bench box's heartbeat watchdog (timeout ${timeout} ms) opened the E-stop chain`;
    if (silence !== undefined && silence >= timeout - RIG_HEARTBEAT_EVERY_MS) {
      return { hostTooSlow: `${what}: the harness had written it no heartbeat for ${Math.round(silence)} ms (it beats every ${RIG_HEARTBEAT_EVERY_MS} ms); the cell's safety faults after it are the harness's lateness` };
    }
    return { equipment: `${what} although the harness had written it a heartbeat ${silence === undefined ? 'never' : `${Math.round(silence)} ms`} before: the bench box or its serial link failed, not the cell` };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Leave the cell safe: relay open, drive power cut, then stop beating.
    try {
      await this.bench.power('CUT');
      await this.bench.relay('OPEN');
    } catch {
      // The box's own watchdog opens the chain once the heartbeat stops.
    }
    // The simulated box stops with it, its deliveries to the stack drained.
    await this.bench.close();
    await Promise.all(this.clients.map((c) => c.close()));
    await this.stack.stop();
  }
}

/** Opens the rig: stack, bench box (in its thread, with the simulated box for `sim`), heartbeat, and the motion decision. */
export async function openRig(o: RigOptions): Promise<RigTarget> {
  if (o.bench === 'sim' && o.driver !== 'ethercat-fake' && o.driver !== 'sim') {
    throw new HarnessError('HIL_ERR_TARGET_OPTION', '--bench sim drives the stack\'s safety input through its test channel: it needs a simulated bus (HIL_RIG_DRIVER=ethercat-fake or sim)');
  }
  const sim = o.bench === 'sim';
  // The bench box's thread comes up while the stack starts (its loader and modules take a second on a loaded host).
  const thread = BenchBoxThread.start();
  let stack: StackProcess;
  try {
    stack = await startStack({ args: ['--driver', o.driver, '--machine', o.machine, ...(sim ? ['--test-channel'] : [])] });
  } catch (e) {
    await thread.stop();
    throw e;
  }
  let bench: BenchBoxThread;
  try {
    // The simulated box powers up with the chain open and power off, and says so to the stack before the
    // client greets it; its chain and power changes then reach the stack in order.
    const benchOpts: BenchThreadOptions = sim ? { path: `/dev/ttyHILSIM${process.pid}`, mock: true, sim: { testChannel: stack.ready.test_channel, buttonPressed: o.simButtonPressed === true } } : { path: o.bench };
    bench = await thread.openPort(benchOpts);
  } catch (e) {
    await stack.stop();
    throw e instanceof BenchBoxError ? new HarnessError('HIL_ERR_TARGET_START', `bench box: ${e.code}: ${e.message}`) : e;
  }
  let refusal: string | undefined;
  try {
    await bench.setTimeoutMs(RIG_HEARTBEAT_TIMEOUT_MS);
    await bench.heartbeat();
    bench.startHeartbeat(RIG_HEARTBEAT_EVERY_MS);
    refusal = o.allowMotion ? await closeChain(bench) : 'motion is not allowed on target rig: run with --allow-motion (the bench box keeps the E-stop chain open)';
  } catch (e) {
    refusal = `motion is not allowed on target rig: the bench box did not confirm the E-stop chain (${(e as BenchBoxError).code ?? ''} ${(e as Error).message})`;
  }
  const rig = new RigTarget(stack, bench, o.driver, refusal);
  if (refusal === undefined) {
    try {
      // The chain was open since power-up.
      await resetSafetyLatch(rig);
    } catch (e) {
      await rig.close();
      throw e;
    }
  }
  return rig;
}

/** Close the chain through the box's relay and restore drive power; why motion is not allowed when it cannot. */
async function closeChain(bench: BenchBoxThread): Promise<string | undefined> {
  try {
    await bench.relay('CLOSE');
    const st = await bench.status();
    if (st.chain !== 'closed') return `motion is not allowed on target rig: the bench box reads the E-stop chain ${st.chain} with its relay ${st.relay} (an E-stop button is pressed or the chain is broken)`;
    await bench.power('RESTORE');
    const st2 = await bench.status();
    if (st2.power !== 'on') return 'motion is not allowed on target rig: the bench box could not restore drive power';
    return undefined;
  } catch (e) {
    return `motion is not allowed on target rig: the bench box did not confirm the E-stop chain (${(e as BenchBoxError).code ?? ''} ${(e as Error).message})`;
  }
}

/** With the chain closed again: wait until the stack reads it closed, then reset what it latched while it was open. */
async function resetSafetyLatch(rig: RigTarget): Promise<void> {
  const c = rig.client();
  const st = await waitStatus(c, (s) => s.core !== null && s.core.safety_fault_mask === 0n, 5_000);
  if (st.core?.safety_fault_mask !== 0n) throw new HarnessError('HIL_ERR_TARGET_START', 'the bench box closed the E-stop chain but the stack still reads it open');
  if (st.core.execution_fault_reasons !== 0n) {
    const d = await c.describe();
    const cell = new Cell(c, (d.reply.data as { binding: never }).binding);
    try {
      const s = await cell.grant();
      await cell.fenced('reset_fault', s, { axis_mask: 0 });
    } finally {
      await cell.cleanup();
    }
  }
  rig.armedAt.push(performance.now());
}

/** The rig target's options as the run gives them (its schema below); openRig's RigOptions once checked. */
export interface RigTargetOptions {
  machine?: string;
  bench?: string;
  allowMotion?: boolean;
  rigDriver?: string;
}

const RIG_OPTIONS: readonly TargetOption[] = [
  { key: 'machine', flag: 'machine', value: 'FILE', env: 'HIL_MACHINE', required: true, path: true, help: "the rig's machine configuration" },
  { key: 'bench', flag: 'bench', value: 'PORT', env: 'HIL_BENCH', required: true, help: "the bench box's serial port (sim: the simulated box, with HIL_RIG_DRIVER=ethercat-fake)", resolve: (v) => (v === 'sim' ? 'sim' : absolute(v)) },
  { key: 'allowMotion', flag: 'allow-motion', env: 'HIL_ALLOW_MOTION', help: 'allow tests that energise drives (only with the E-stop chain closed through the bench box)' },
  { key: 'rigDriver', env: 'HIL_RIG_DRIVER', value: 'DRIVER', help: "the stack's driver: ethercat (default) or ethercat-fake (environment only)" },
];

const NO_VARIANT = 'target rig runs one stack on one bus; it cannot start a separate variant';

export const rigTarget: TargetDescriptor<RigTargetOptions> = {
  name: 'rig',
  summary: "the stack on the rig's EtherCAT bus with the bench box beside it; motion only with --allow-motion and a closed E-stop chain",
  abilities: { variants: false, testStacks: false, testChannel: false, plant: false, watch: false, sharedService: true, motion: 'allow-motion' },
  options: RIG_OPTIONS,
  parse(env) {
    const v = envValues(RIG_OPTIONS, env);
    return {
      ...(str(v.machine) ? { machine: str(v.machine) } : {}),
      ...(str(v.bench) ? { bench: str(v.bench) } : {}),
      allowMotion: v.allowMotion === true,
      ...(str(v.rigDriver) ? { rigDriver: str(v.rigDriver) } : {}),
    };
  },
  async open(o) {
    if (!o.machine) throw new HarnessError('HIL_ERR_TARGET_OPTION', 'target rig needs --machine CONFIG (the rig\'s machine configuration)');
    if (!o.bench) throw new HarnessError('HIL_ERR_TARGET_OPTION', 'target rig needs --bench PORT (the bench box\'s serial port)');
    return openRig({ machine: o.machine, bench: o.bench, allowMotion: o.allowMotion === true, driver: o.rigDriver ?? 'ethercat' });
  },
  cannotProvide: () => NO_VARIANT,
  openVariant: async () => {
    throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', NO_VARIANT);
  },
};
