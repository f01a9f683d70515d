// The rig target: this repository's stack on the rig's EtherCAT bus (`hil serve --driver ethercat`, or the
// fake master with HIL_RIG_DRIVER=ethercat-fake), with the bench box beside it (harness/benchbox). Safety
// gating (DESIGN.md rule 5):
// - motion only with --allow-motion AND an E-stop chain the bench box confirms closed and reachable; the
//   suites otherwise skip motion tests with the reason this target states;
// - a heartbeat to the bench box while the run is alive: a run that dies stops beating, and the box opens
//   the chain within its timeout;
// - after every test the cell is settled: if anything is still armed, enabled or granted (an unknown
//   outcome: a timeout, a lost connection), the target waits for the lease to end the grant (document 1:
//   an unattended cell stops when its controller goes silent), checks from status that the cell is
//   stopped, and fails loudly otherwise;
// - at close the relay opens and drive power is cut.
// `--bench sim` puts a simulated box on a mock serial port whose chain and power drive the stack's safety
// input through its private test channel (with the fake master or the sim driver), so all of this is
// tested here.

import { Agent, request } from 'undici';
import { BenchBoxClient, BenchBoxError, mockBinding, type MockPortBinding } from '../benchbox/client.ts';
import { BenchBoxModel, serveOnMockPort, type ServedBox } from '../benchbox/simbox.ts';
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

  constructor(
    private readonly stack: StackProcess,
    readonly bench: BenchBoxClient,
    readonly simBox: ServedBox | undefined,
    private readonly testAgent: Agent | undefined,
    readonly driver: string,
    motionRefusal: string | undefined,
    /** Simulated box: resolves when its chain and power changes have reached the stack. */
    private readonly drainInjects: () => Promise<void>,
  ) {
    this.motionRefusal = motionRefusal;
    this.abilities = { faultInjection: false, coreRestart: false, serviceRestart: false, motion: motionRefusal === undefined };
  }

  get address(): string {
    return this.stack.ready.control;
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
    if (this.bench.heartbeatError) throw new HarnessError('HIL_ERR_TARGET_START', `the bench box heartbeat failed: ${this.bench.heartbeatError.code}: ${this.bench.heartbeatError.message}`);
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
    await this.bench.close();
    this.simBox?.stop();
    await this.drainInjects().catch(() => undefined);
    await Promise.all(this.clients.map((c) => c.close()));
    await this.testAgent?.close();
    await this.stack.stop();
  }
}

/** Opens the rig: stack, bench box, heartbeat, and the motion decision. */
export async function openRig(o: RigOptions): Promise<RigTarget> {
  if (o.bench === 'sim' && o.driver !== 'ethercat-fake' && o.driver !== 'sim') {
    throw new HarnessError('HIL_ERR_TARGET_OPTION', '--bench sim drives the stack\'s safety input through its test channel: it needs a simulated bus (HIL_RIG_DRIVER=ethercat-fake or sim)');
  }
  const sim = o.bench === 'sim';
  const stack = await startStack({ args: ['--driver', o.driver, '--machine', o.machine, ...(sim ? ['--test-channel'] : [])] });
  let agent: Agent | undefined;
  let simBox: ServedBox | undefined;
  let bench: BenchBoxClient;
  let simInjectError: Error | undefined;
  let drainInjects: () => Promise<void> = async () => undefined;
  try {
    let benchOpts: Parameters<typeof BenchBoxClient.open>[0];
    if (sim) {
      agent = new Agent({ connect: { socketPath: stack.ready.test_channel } });
      const a = agent;
      // Chain and power changes reach the stack in order: the cell is live only with the chain closed and power on.
      let chain = Promise.resolve();
      const inject = (body: unknown) => {
        const next = chain.then(async () => {
          const r = await request('http://localhost/inject', { method: 'POST', dispatcher: a, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
          await r.body.text();
        });
        // A failed delivery is kept for settle(); the chain goes on.
        chain = next.catch((e: Error) => {
          simInjectError ??= e;
        });
        return next;
      };
      drainInjects = async () => {
        await chain;
        if (simInjectError) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `the simulated bench box could not reach the stack's safety input: ${simInjectError.message}`);
      };
      const model = new BenchBoxModel(performance.now(), { cell: (s) => inject(s.chainClosed && s.powerOn ? { kind: 'clear' } : { kind: 'estop_open' }) });
      model.buttonsClosed = !o.simButtonPressed;
      const path = `/dev/ttyHILSIM${process.pid}`;
      const binding = await mockBinding();
      binding.createPort(path, { echo: false, record: false });
      await model.boot(performance.now()); // the box has just powered up: chain open, power off
      await inject({ kind: 'estop_open' });
      benchOpts = { path, mock: true, attach: (p) => (simBox = serveOnMockPort(p as MockPortBinding, model)) };
    } else benchOpts = { path: o.bench };
    bench = await BenchBoxClient.open(benchOpts);
  } catch (e) {
    await agent?.close();
    await stack.stop();
    throw e instanceof BenchBoxError ? new HarnessError('HIL_ERR_TARGET_START', `bench box: ${e.code}: ${e.message}`) : e;
  }
  let refusal: string | undefined;
  try {
    await bench.setTimeoutMs(RIG_HEARTBEAT_TIMEOUT_MS);
    await bench.heartbeat();
    bench.startHeartbeat(RIG_HEARTBEAT_EVERY_MS);
    if (!o.allowMotion) {
      refusal = 'motion is not allowed on target rig: run with --allow-motion (the bench box keeps the E-stop chain open)';
    } else {
      await bench.relay('CLOSE');
      const st = await bench.status();
      if (st.chain !== 'closed') refusal = `motion is not allowed on target rig: the bench box reads the E-stop chain ${st.chain} with its relay ${st.relay} (an E-stop button is pressed or the chain is broken)`;
      else {
        await bench.power('RESTORE');
        const st2 = await bench.status();
        if (st2.power !== 'on') refusal = 'motion is not allowed on target rig: the bench box could not restore drive power';
      }
    }
  } catch (e) {
    refusal = `motion is not allowed on target rig: the bench box did not confirm the E-stop chain (${(e as BenchBoxError).code ?? ''} ${(e as Error).message})`;
  }
  const rig = new RigTarget(stack, bench, simBox, agent, o.driver, refusal, () => drainInjects());
  if (refusal === undefined) {
    // The chain was open since power-up: wait until the stack reads it closed, then reset what it latched.
    const c = rig.client();
    const st = await waitStatus(c, (s) => s.core !== null && s.core.safety_fault_mask === 0n, 5_000);
    if (st.core?.safety_fault_mask !== 0n) {
      await rig.close();
      throw new HarnessError('HIL_ERR_TARGET_START', 'the bench box closed the E-stop chain but the stack still reads it open');
    }
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
  }
  return rig;
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
