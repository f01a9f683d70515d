// The EtherCAT bus driver, written only against the EthercatMaster adapter (master.ts), so the master
// binding underneath (node-ethercat, the fake master, another binding) can change without touching it.
//
// open: one CiA 402 CSP slave per axis at its slave_position and the cell I/O terminal (layout.ts) are added
// with node-ethercat's slave definitions; start() registers the pins (their offsets become known); the SDO
// start-up list runs slave by slave; the PDO mapping is read back and compared with the one configured; then
// activate(). A slave whose identity differs from its configuration, whose start-up SDO was refused, or
// whose mapping differs cannot be trusted until the bus is restarted: its axis goes into the mismatch mask
// (the core latches restart_required, fault bit 11, reported as pdo_mapping_mismatch).
//
// exchange, every cycle: outputs written and inputs read through pins; the master state, the working
// counter and each slave's AL state go into the image. A slave that does not answer, or answers outside OP,
// is offline (slave_offline); a link down takes every slave offline and the working counter to 0; a working
// counter below the expected one is working_counter; when the master's cycle counter has not moved for more
// than `staleAfterCycles` cycles (default 3) the inputs are stale and PDO freshness is cleared (pdo_stale). These are the
// condition names the sim driver reports (drivers/faults.ts), so the core reacts the same way.

import { AL, ProcessImage, type BusDriver, type BusSetup, type BusStartup } from '../bus.ts';
import type { DrivePersistence, FaultInjection } from '../faults.ts';
import { mappingWord, planBus, RX_PDO, slaveOptions, slaveWkc, TX_PDO, parseMappingLine, AXIS_MAPPING, type LayoutOptions, type PlannedSlave } from './layout.ts';
import { call, hex, type EthercatMaster } from './master.ts';

/** Stable codes of an EtherCAT bring-up that cannot continue (open rejects with them). */
export class EthercatError extends Error {
  constructor(
    readonly code: 'ETHERCAT_BAD_PARAM' | 'ETHERCAT_ADD_SLAVE' | 'ETHERCAT_START' | 'ETHERCAT_PIN_UNBOUND' | 'ETHERCAT_ACTIVATE' | 'ETHERCAT_MAPPING_UNSUPPORTED',
    message: string,
  ) {
    super(message);
    this.name = 'EthercatError';
  }
}

/** Negative bus submission codes of this driver (a core reports them as bus_submission_return_code). */
export const ETHERCAT_RC = {
  /** A registered pin could not be read or written (the binding lost its domain). */
  pin: -20,
} as const;

export interface EthercatParams extends LayoutOptions {
  /** Inputs are stale when the master's cycle counter has not moved for more than this many core cycles (default 3). */
  staleAfterCycles?: number;
  /** How long open waits for every slave to reach OP on a master with its own cycle (default 5000 ms). */
  opTimeoutMs?: number;
}

export type MasterFactory = (setup: BusSetup, plan: PlannedSlave[]) => Promise<EthercatMaster>;

export interface EthercatDriverOptions {
  name: string;
  master: MasterFactory;
  params?: EthercatParams;
  /** Optional facets, offered from construction (they reach the master once it is open). */
  faults?: FaultInjection;
  persist?: DrivePersistence;
}

/** Pin names of one axis slave, resolved once at open so the cycle only indexes arrays. */
interface AxisPins {
  controlword: string;
  mode: string;
  target: string;
  statusword: string;
  modeDisplay: string;
  position: string;
  velocity: string;
  followingError: string;
  torque: string;
  errorCode: string;
  digitalInputs: string;
  absolute: string;
  absoluteValid: string;
}

export class EthercatBusDriver implements BusDriver {
  readonly name: string;
  private master?: EthercatMaster;
  private plan: PlannedSlave[] = [];
  private axisSlaves: PlannedSlave[] = [];
  private ioSlave?: PlannedSlave;
  private pins: AxisPins[] = [];
  private ioPins = { outputs: '', inputs: '', safety: '' };
  private wkcExpected = 0;
  private cycleNs = 1_000_000n;
  private lastCounter = -1;
  private lastAdvanceNs = 0n;
  private sawCycle = false;
  private found: Record<string, unknown> = {};

  constructor(private readonly o: EthercatDriverOptions) {
    this.name = o.name;
    const p = o.params ?? {};
    if (p.staleAfterCycles !== undefined && !(Number.isSafeInteger(p.staleAfterCycles) && p.staleAfterCycles >= 1)) throw new EthercatError('ETHERCAT_BAD_PARAM', 'staleAfterCycles must be an integer >= 1');
    if (p.opTimeoutMs !== undefined && !(Number.isSafeInteger(p.opTimeoutMs) && p.opTimeoutMs >= 0)) throw new EthercatError('ETHERCAT_BAD_PARAM', 'opTimeoutMs must be an integer >= 0');
    if (p.ioSlavePosition !== undefined && !(Number.isSafeInteger(p.ioSlavePosition) && p.ioSlavePosition >= 0 && p.ioSlavePosition <= 65535)) {
      throw new EthercatError('ETHERCAT_BAD_PARAM', 'ioSlavePosition must be a slave position 0..65535');
    }
  }

  get faults(): FaultInjection | undefined {
    return this.o.faults;
  }
  get persist(): DrivePersistence | undefined {
    return this.o.persist;
  }

  async open(setup: BusSetup): Promise<BusStartup> {
    const p = this.o.params ?? {};
    this.cycleNs = setup.cycleNs;
    // The core's expected mapping must be part of what this driver maps on every axis slave.
    const mapped = new Set(AXIS_MAPPING.map((e) => `${e.dir}:${e.index}:${e.subindex}:${e.type}`));
    for (const line of setup.expectedMapping) {
      const e = parseMappingLine(line);
      if (!mapped.has(`${e.dir}:${e.index}:${e.subindex}:${e.type}`)) throw new EthercatError('ETHERCAT_MAPPING_UNSUPPORTED', `the core expects ${line}, which the EtherCAT axis mapping does not carry`);
    }
    // The configuration's bring-up choices, unless the driver's params say otherwise.
    const layout: LayoutOptions = {
      ...p,
      outputWatchdog: p.outputWatchdog ?? !(setup.bringup?.disableOutputWatchdog ?? false),
      explicitPdoConfig: p.explicitPdoConfig ?? setup.bringup?.explicitPdoConfig ?? false,
    };
    const opTimeoutMs = p.opTimeoutMs ?? setup.bringup?.safeopOpTimeoutMs ?? 5000;
    let plan: PlannedSlave[];
    try {
      plan = planBus(setup, layout);
    } catch (e) {
      throw new EthercatError('ETHERCAT_BAD_PARAM', (e as Error).message);
    }
    this.plan = plan;
    this.axisSlaves = plan.filter((s) => s.kind === 'axis').sort((a, b) => a.axis - b.axis);
    this.ioSlave = plan.find((s) => s.kind === 'io');
    const m = (this.master = await this.o.master(setup, plan));
    const notes: string[] = [`ethercat: master ${m.label}; ${this.axisSlaves.length} axis slaves, I/O terminal at position ${this.ioSlave!.position}`];
    let mask = 0;
    /** Slaves not to configure further: nothing answers there, or a slave of another make does. */
    const skip = new Set<number>();
    const distrust = (s: PlannedSlave, why: string) => {
      notes.push(`ethercat: slave ${s.position} (${s.kind === 'axis' ? `axis ${s.axis}` : 'I/O terminal'}): ${why}`);
      if (s.kind === 'axis') mask |= 1 << s.axis;
      else this.ioDistrusted = true;
    };

    for (const s of plan) {
      const r = await call<{ index: number }>((cb) => m.addSlave(slaveOptions(s, layout), cb));
      if (r.result === 'error') throw new EthercatError('ETHERCAT_ADD_SLAVE', `addSlave ${s.id} at position ${s.position}: ${r.error}`);
    }
    const started = await call((cb) => m.start({}, cb));
    if (started.result === 'error') throw new EthercatError('ETHERCAT_START', `start: ${started.error}`);
    const all = m.getPins();
    for (const s of plan) {
      for (const e of s.mapping) {
        const pin = all[`${s.id}.${e.name}`];
        if (!pin || pin.offset < 0) throw new EthercatError('ETHERCAT_PIN_UNBOUND', `pin ${s.id}.${e.name} has no domain offset after start`);
      }
    }
    this.pins = this.axisSlaves.map((s) => {
      const n = (x: string) => `${s.id}.${x}`;
      return {
        controlword: n('controlword'),
        mode: n('modes_of_operation'),
        target: n('target_position'),
        statusword: n('statusword'),
        modeDisplay: n('modes_of_operation_display'),
        position: n('position_actual'),
        velocity: n('velocity_actual'),
        followingError: n('following_error_actual'),
        torque: n('torque_actual'),
        errorCode: n('error_code'),
        digitalInputs: n('digital_inputs'),
        absolute: n('absolute_position'),
        absoluteValid: n('absolute_valid'),
      };
    });
    const io = this.ioSlave!;
    this.ioPins = { outputs: `${io.id}.outputs`, inputs: `${io.id}.inputs`, safety: `${io.id}.safety_chain` };

    // Identity by position, where the master can list the bus.
    if (m.scanSlaves) {
      const found = m.scanSlaves();
      this.found = { found_slaves: found };
      for (const s of plan) {
        const f = found.find((x) => x.position === s.position);
        if (!f || !f.online) {
          distrust(s, 'no slave answers at this position');
          skip.add(s.position);
        } else if (f.vendor !== s.vendor || f.product !== s.product) {
          skip.add(s.position);
          distrust(s, `found vendor ${hex(f.vendor, 8)} product ${hex(f.product, 8)}, configured vendor ${hex(s.vendor, 8)} product ${hex(s.product, 8)}`);
        }
      }
    } else notes.push(`ethercat: ${m.label} cannot list the slaves on the bus; identities were not checked before start`);

    // The SDO start-up list, slave by slave; a refusal ends that slave's list.
    for (const s of plan) {
      if (skip.has(s.position)) continue;
      for (const sdo of s.sdos) {
        const r = await call((cb) => m.configSdo({ slaveId: s.id, ...sdo }, cb));
        if (r.result === 'error') {
          distrust(s, `start-up SDO ${hex(sdo.index)}:${sdo.subindex.toString(16).padStart(2, '0')} = ${sdo.value} refused: ${r.error}`);
          break;
        }
      }
    }

    // The PDO mapping read back (0x1C12/0x1C13 assignment, 0x1600/0x1A00 entries) and compared.
    if (m.uploadSdo) {
      const upload = (s: PlannedSlave, index: number, subindex: number) => call<{ value: number }>((cb) => m.uploadSdo!({ slaveId: s.id, index, subindex }, cb));
      for (const s of plan) {
        if (skip.has(s.position)) continue;
        const diff = await this.compareMapping(s, upload);
        if (diff) distrust(s, `PDO mapping differs: ${diff}`);
      }
    } else notes.push(`ethercat: ${m.label} cannot upload SDOs; the PDO mapping was configured but not read back`);

    const act = await call((cb) => m.activate({}, cb));
    if (act.result === 'error') throw new EthercatError('ETHERCAT_ACTIVATE', `activate: ${act.error}`);
    if (!m.sync) {
      // A master with its own cycle reaches OP on its own time; wait for it, bounded.
      const until = Date.now() + opTimeoutMs;
      while (Date.now() < until && m.getMasterState().al_states !== AL.op) await new Promise((r) => setTimeout(r, 10));
      const st = m.getMasterState();
      if (st.al_states !== AL.op) notes.push(`ethercat: not every slave reached OP within ${opTimeoutMs} ms (AL states ${hex(st.al_states, 2)}, ${st.slaves_responding} responding, link ${st.link_up ? 'up' : 'down'})`);
    }
    this.wkcExpected = plan.reduce((n, s) => n + slaveWkc(s), 0);
    this.lastCounter = m.cycleCounter?.() ?? -1;
    this.lastAdvanceNs = 0n;
    this.sawCycle = false;
    return { mappingMismatchMask: mask, notes };
  }

  /** Whether the I/O terminal could not be trusted at start-up (its inputs are then never valid). */
  private ioDistrusted = false;

  private async compareMapping(s: PlannedSlave, upload: (s: PlannedSlave, index: number, subindex: number) => Promise<{ result: 'ok'; data: { value: number } } | { result: 'error'; error: string }>): Promise<string | undefined> {
    for (const [assign, pdo, dir] of [[0x1c12, RX_PDO, 'rx'], [0x1c13, TX_PDO, 'tx']] as const) {
      const want = s.mapping.filter((e) => e.dir === dir).map(mappingWord);
      const n = await upload(s, assign, 0);
      if (n.result === 'error') return `${hex(assign)}:00 not readable (${n.error})`;
      const a = await upload(s, assign, 1);
      if (a.result === 'error') return `${hex(assign)}:01 not readable (${a.error})`;
      if (n.data.value !== 1 || a.data.value !== pdo) return `${hex(assign)} assigns ${n.data.value} PDO(s) starting ${hex(a.data.value)}, expected ${hex(pdo)} alone`;
      const count = await upload(s, pdo, 0);
      if (count.result === 'error') return `${hex(pdo)}:00 not readable (${count.error})`;
      const got: number[] = [];
      for (let k = 1; k <= count.data.value; k++) {
        const e = await upload(s, pdo, k);
        if (e.result === 'error') return `${hex(pdo)}:${k.toString(16).padStart(2, '0')} not readable (${e.error})`;
        got.push(e.data.value >>> 0);
      }
      for (let k = 0; k < Math.max(got.length, want.length); k++) {
        if (got[k] !== want[k]) return `${hex(pdo)} entry ${k + 1} is ${got[k] === undefined ? 'missing' : hex(got[k]!, 8)}, expected ${want[k] === undefined ? 'none' : hex(want[k]!, 8)}`;
      }
    }
    return undefined;
  }

  exchange(img: ProcessImage, nowNs: bigint): number {
    const m = this.master!;
    m.sync?.(nowNs);
    const ms = m.getMasterState();
    const link = ms.link_up === true || ms.link_up === 1;
    // Freshness: the master's cycle counter must have moved recently (on core time).
    let cycling = true;
    const counter = m.cycleCounter?.();
    if (counter !== undefined) {
      // Inputs count only once the master has cycled since open: before that the domain holds zeros.
      if (counter !== this.lastCounter) {
        this.lastCounter = counter;
        this.lastAdvanceNs = nowNs;
        this.sawCycle = true;
      }
      const limit = BigInt(this.o.params?.staleAfterCycles ?? 3) * this.cycleNs;
      cycling = this.sawCycle && nowNs - this.lastAdvanceNs <= limit;
    }
    // Per-slave AL state: exact where the master reports it; else from the OR of all states (node-ethercat):
    // all in OP only when the OR is OP alone and every slave answers.
    const allOp = ms.al_states === AL.op && ms.slaves_responding >= this.plan.length;
    const alOf = (pos: number) => (!link ? 0 : m.slaveAlState ? m.slaveAlState(pos) : allOp ? AL.op : ms.al_states & ~AL.op);
    let rc = 0;
    for (let i = 0; i < this.pins.length; i++) {
      const s = this.axisSlaves[i]!;
      const pin = this.pins[i]!;
      const al = alOf(s.position);
      img.alState[i] = al;
      const op = al === AL.op;
      img.online[i] = op ? 1 : 0;
      m.writePin(pin.controlword, img.controlword[i]! & 0xffff);
      m.writePin(pin.mode, img.modeOfOperation[i]!);
      m.writePin(pin.target, img.targetPosition[i]!);
      if (!(op && cycling)) {
        img.pdoFresh[i] = 0;
        continue;
      }
      const sw = m.readPin(pin.statusword);
      const md = m.readPin(pin.modeDisplay);
      const pos = m.readPin(pin.position);
      const vel = m.readPin(pin.velocity);
      const fe = m.readPin(pin.followingError);
      const tq = m.readPin(pin.torque);
      const ec = m.readPin(pin.errorCode);
      const di = m.readPin(pin.digitalInputs);
      const abs = m.readPin(pin.absolute);
      const absOk = m.readPin(pin.absoluteValid);
      if (sw === undefined || md === undefined || pos === undefined || vel === undefined || fe === undefined || tq === undefined || ec === undefined || di === undefined || abs === undefined || absOk === undefined) {
        img.pdoFresh[i] = 0;
        rc = ETHERCAT_RC.pin;
        continue;
      }
      img.statusword[i] = sw;
      img.modeDisplay[i] = md;
      img.positionActual[i] = pos;
      img.velocityActual[i] = vel;
      img.followingError[i] = fe;
      img.torqueActual[i] = tq;
      img.errorCode[i] = ec;
      img.digitalInputs[i] = di;
      img.absolutePosition[i] = abs;
      img.absoluteValid[i] = absOk ? 1 : 0;
      img.pdoFresh[i] = 1;
    }
    // The cell I/O terminal: outputs every cycle; inputs only when current. An E-stop chain that cannot be
    // read (terminal offline, link down, terminal not trusted) is taken as open, the safe reading; while the
    // master's cycle is merely late the last reading stands, as the drives' last inputs do (pdo_stale
    // latches if it stays late).
    const io = this.ioSlave!;
    const ioAl = alOf(io.position);
    m.writePin(this.ioPins.outputs, img.ioOutputWord & 0xffff);
    const ioReachable = ioAl === AL.op && !this.ioDistrusted;
    if (!ioReachable) {
      img.ioInputValid = 0;
      img.safetyChainClosed = 0;
    } else if (!cycling) {
      img.ioInputValid = 0;
    } else {
      const inputs = m.readPin(this.ioPins.inputs);
      const chain = m.readPin(this.ioPins.safety);
      if (inputs === undefined || chain === undefined) {
        img.ioInputValid = 0;
        img.safetyChainClosed = 0;
        rc = ETHERCAT_RC.pin;
      } else {
        img.ioInputWord = inputs >>> 0;
        img.ioInputValid = 1;
        img.safetyChainClosed = chain ? 1 : 0;
      }
    }
    // Working counter: the domain's where the master reports it; else each slave that does not answer in OP
    // counts as missing from the expected one (node-ethercat exports no domain state).
    img.wkcExpected = this.wkcExpected;
    const dom = m.domainState?.();
    if (!link) img.wkcActual = 0;
    else if (dom) img.wkcActual = dom.workingCounter;
    else img.wkcActual = allOp ? this.wkcExpected : Math.max(0, this.wkcExpected - 3 * Math.max(1, this.plan.length - ms.slaves_responding));
    return rc;
  }

  /** The master adapter while the bus is open (tests and `hil doctor` reach the fake's out-of-band conditions through it). */
  get masterAdapter(): EthercatMaster | undefined {
    return this.master;
  }

  identity(): Record<string, unknown> {
    return { master: this.master?.label ?? null, slaves: this.plan.map((s) => ({ position: s.position, kind: s.kind, axis: s.axis, vendor: s.vendor, product: s.product })), ...this.found };
  }

  async close(): Promise<void> {
    await this.master?.close?.();
    this.master = undefined;
  }
}
