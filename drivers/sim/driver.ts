// Simulated CiA 402 drives and plant. Each drive enforces the drive state machine's transition
// prerequisites, follows cyclic synchronous position targets through a second-order plant (so following
// error is real), holds on its brake when not enabled, and runs native homing. Faults are injected out of
// band through `inject`, never through the process image (the KickCAT habit).

import { AL, ProcessImage, STANDARD_MAPPING, type BusDriver, type BusSetup, type BusStartup, type DriverOptions } from '../bus.ts';
import { FAULT_KINDS, FaultSpecError, type DrivePersistence, type FaultInjection, type FaultKind, type FaultSpec } from '../faults.ts';
import { CW, decodeControlword, Ds402State, MODE, STATE_BITS, SW } from '../ds402.ts';

/** The sim driver injects every fault of the shared vocabulary. */
export type SimFault = FaultSpec;

export interface SimOptions {
  /** Initial logical positions per axis (defaults to mid-range clipped to 0). */
  initialPositions?: number[];
  /**
   * Drive state kept across a core restart (real drives keep their counters when the master restarts):
   * incremental counts and the absolute encoder bias per axis.
   */
  persisted?: SimSnapshot;
  /** Faults present at bus start-up. */
  startFaults?: Array<{ kind: 'pdo_mapping_mismatch'; axis: number }>;
  /** Duration of a native homing run in ns (default 200 ms). */
  homingNs?: bigint;
}

/**
 * The longest step of the simulated drives' position loop, in ns: the shortest bus cycle document 3 allows
 * (cycle_ns 250000, "Compiled machine configuration"), so a cell at that cycle integrates once per cycle.
 */
export const PLANT_SUB_STEP_NS = 250_000;
/** The quick-stop ramp's decay rate, 1/s: the drive stops in 1/40 s worth of its speed at the stop. */
export const QUICK_STOP_RATE = 40;

/** Fault codes the simulated drives report in 0x603F (CiA 402 error code table). */
export const SIM_ERROR_CODES = {
  followingError: 0x8611,
  generic: 0x1000,
} as const;

class SimDrive {
  state = Ds402State.NotReadyToSwitchOn;
  prevCw = 0;
  /** Plant state in counts (float) and counts/s. */
  pos = 0;
  vel = 0;
  target = 0;
  brakeEngaged = true;
  faultCode = 0;
  faultLatched = false;
  // homing
  homing = false;
  homingDoneAt = 0n;
  homingAttained = false;
  homingError = false;
  homeOffset = 0;
  /** Raw absolute encoder = incremental counts + absoluteBias (+ injected error). Homing moves the bias. */
  absoluteBias = 0;
  absoluteError = 0;
  // injected conditions
  frozen = false;
  offline = false;
  followingErrorTrip = false;
  /** The loop's natural frequency is cut (sluggish_drive): the drive lags a moving target. */
  sluggish = false;
  homingFails = false;
  mappingMismatch = false;
  /** The inputs of the last fresh exchange (a frozen drive keeps reporting them); fields, not an object per cycle. */
  lastPos = 0;
  lastVel = 0;
  lastFe = 0;
  lastSw = 0;

  constructor(
    readonly countsPerUnit: number,
    readonly sign: 1 | -1,
    readonly maxVelCounts: number,
    readonly feLimitCounts: number,
  ) {
    this.torqueScale = Math.max(1, feLimitCounts);
  }
  /** Following error that gives full torque: max(1, feLimitCounts). */
  readonly torqueScale: number;
}

/** What the sim driver hands to its next incarnation (DrivePersistence snapshot). */
export interface SimSnapshot {
  counts: number[];
  absoluteBias: number[];
}

export class SimBusDriver implements BusDriver {
  readonly name = 'sim';
  readonly faults: FaultInjection = {
    kinds: Object.keys(FAULT_KINDS) as FaultKind[],
    inject: (f) => this.inject(f),
    clear: () => this.clearInjected(),
  };
  readonly persist: DrivePersistence = { snapshot: () => this.persistedState() };
  private drives: SimDrive[] = [];
  private setup?: BusSetup;
  private lastNs = 0n;
  private estopOpen = false;
  private wkcDrop = false;
  private ioReadbackDisagreeMask = 0;
  private fastInputUnsatisfiedMask = 0;
  private pendingMappingMismatch = 0;

  constructor(private readonly options: SimOptions = {}) {
    for (const f of options.startFaults ?? []) this.pendingMappingMismatch |= 1 << f.axis;
  }

  async open(setup: BusSetup): Promise<BusStartup> {
    this.setup = setup;
    this.drives = setup.axes.map((a, i) => {
      const d = new SimDrive(
        a.countsPerUnit,
        a.sign,
        a.maxVelocity * a.countsPerUnit * 1.5,
        Math.max(1, a.followingError * a.countsPerUnit),
      );
      const initial = this.options.initialPositions?.[i] ?? Math.min(Math.max(0, a.minPosition), a.maxPosition);
      d.pos = a.sign * initial * a.countsPerUnit;
      // A fixed, axis-specific encoder bias so absolute and incremental counts differ, as on real drives.
      d.absoluteBias = (i + 1) * 7919;
      const kept = this.options.persisted;
      if (kept && kept.counts[i] !== undefined) {
        d.pos = kept.counts[i]!;
        d.absoluteBias = kept.absoluteBias[i] ?? d.absoluteBias;
      }
      d.target = d.pos;
      d.mappingMismatch = (this.pendingMappingMismatch & (1 << i)) !== 0;
      return d;
    });
    let mask = 0;
    this.drives.forEach((d, i) => {
      if (d.mappingMismatch) mask |= 1 << i;
    });
    return {
      mappingMismatchMask: mask,
      notes: [`sim: ${this.drives.length} drives, mapping ${STANDARD_MAPPING.length} entries`],
    };
  }

  /** Out-of-band fault injection (the private test channel reaches this). */
  inject(fault: SimFault): void {
    const d = 'axis' in fault ? this.drives[fault.axis] : undefined;
    if ('axis' in fault && !d && fault.kind !== 'pdo_mapping_mismatch') throw new FaultSpecError('FAULT_NO_SUCH_AXIS', `no axis ${fault.axis}`);
    switch (fault.kind) {
      case 'following_error':
        d!.followingErrorTrip = true;
        break;
      case 'drive_fault':
        d!.faultCode = fault.errorCode;
        d!.faultLatched = true;
        break;
      case 'frozen_feedback':
        d!.frozen = true;
        break;
      case 'slave_offline':
        d!.offline = true;
        break;
      case 'wkc_drop':
        this.wkcDrop = true;
        break;
      case 'estop_open':
        this.estopOpen = true;
        break;
      case 'absolute_disagree':
        d!.absoluteError += fault.counts;
        break;
      case 'io_readback_disagree':
        this.ioReadbackDisagreeMask |= 1 << fault.bit;
        break;
      case 'fast_input_unsatisfied':
        this.fastInputUnsatisfiedMask |= 1 << fault.bit;
        break;
      case 'pdo_mapping_mismatch':
        this.pendingMappingMismatch |= 1 << fault.axis;
        if (d) d.mappingMismatch = true;
        break;
      case 'homing_fails':
        d!.homingFails = true;
        break;
      case 'sluggish_drive':
        d!.sluggish = true;
        break;
    }
  }

  /** Remove every injected condition (latched drive faults stay latched until a fault reset). */
  clearInjected(): void {
    for (const d of this.drives) {
      d.frozen = false;
      d.offline = false;
      d.followingErrorTrip = false;
      d.sluggish = false;
      d.homingFails = false;
      d.absoluteError = 0;
    }
    this.estopOpen = false;
    this.wkcDrop = false;
    this.ioReadbackDisagreeMask = 0;
    this.fastInputUnsatisfiedMask = 0;
  }

  get estop(): boolean {
    return this.estopOpen;
  }

  /** What a restarted core's driver should start from (drives keep their state across a master restart). */
  persistedState(): SimSnapshot {
    return { counts: this.drives.map((d) => d.pos), absoluteBias: this.drives.map((d) => d.absoluteBias) };
  }

  exchange(img: ProcessImage, nowNs: bigint): number {
    const dtNs = this.lastNs === 0n ? Number(this.setup?.cycleNs ?? 1_000_000n) : Number(nowNs - this.lastNs);
    this.lastNs = nowNs;
    let wkc = 0;
    // The step goes to stepDrive through fields: a double argument to a call that is not inlined is
    // boxed, one heap number per drive per cycle.
    const stepNs = Math.min(Math.max(dtNs, 0), 50_000_000);
    this.stepDt = stepNs / 1e9;
    // The position loop's own clock: whole sub-steps of at most PLANT_SUB_STEP_NS, so the plant is the
    // same on any bus cycle document 3 allows (cycle_ns 250000..10000000, "Compiled machine configuration").
    this.subSteps = Math.max(1, Math.ceil(stepNs / PLANT_SUB_STEP_NS));
    this.subDt = this.stepDt / this.subSteps;
    for (let i = 0; i < this.drives.length; i++) {
      const d = this.drives[i]!;
      if (d.offline) {
        img.online[i] = 0;
        img.alState[i] = AL.init;
        img.pdoFresh[i] = 0;
        continue;
      }
      wkc += 3; // one read, one write, one read-write datagram per slave in this profile
      img.online[i] = 1;
      img.alState[i] = AL.op;
      this.stepDrive(d, img, i, nowNs);
    }
    img.ioInputWord = (img.ioOutputWord ^ this.ioReadbackDisagreeMask) & 0xffff;
    // Fast inputs live in the high half word; all satisfied unless injected otherwise.
    img.ioInputWord |= (0xffff & ~this.fastInputUnsatisfiedMask) << 16;
    img.ioInputValid = 1;
    img.safetyChainClosed = this.estopOpen ? 0 : 1;
    img.wkcExpected = this.drives.length * 3;
    img.wkcActual = this.wkcDrop ? Math.max(0, wkc - 1) : wkc;
    return 0;
  }

  /** This exchange's step in seconds (see exchange). */
  private stepDt = 0.001;
  /** The closed loop's sub-steps in this exchange, and each one's length in seconds. */
  private subSteps = 4;
  private subDt = 0.00025;

  private stepDrive(d: SimDrive, img: ProcessImage, i: number, nowNs: bigint): void {
    const dt = this.stepDt;
    const cw = img.controlword[i]!;
    const cmd = decodeControlword(cw, d.prevCw);
    const mode = img.modeOfOperation[i]!;

    // Fault conditions first: any latched condition moves the drive to Fault.
    if (d.followingErrorTrip && d.state === Ds402State.OperationEnabled) {
      d.faultLatched = true;
      d.faultCode = SIM_ERROR_CODES.followingError;
    }
    if (this.estopOpen && (d.state === Ds402State.OperationEnabled || d.state === Ds402State.SwitchedOn)) {
      // The safety chain removes drive power: the drive drops to switch on disabled with the brake applied.
      d.state = Ds402State.SwitchOnDisabled;
    }
    if (d.faultLatched && d.state !== Ds402State.Fault) {
      d.state = Ds402State.Fault;
    }

    switch (d.state) {
      case Ds402State.NotReadyToSwitchOn:
        d.state = Ds402State.SwitchOnDisabled;
        break;
      case Ds402State.SwitchOnDisabled:
        if (cmd === 'shutdown' && !this.estopOpen) d.state = Ds402State.ReadyToSwitchOn;
        break;
      case Ds402State.ReadyToSwitchOn:
        if (cmd === 'switch_on') d.state = Ds402State.SwitchedOn;
        else if (cmd === 'disable_voltage' || cmd === 'quick_stop') d.state = Ds402State.SwitchOnDisabled;
        break;
      case Ds402State.SwitchedOn:
        if (cmd === 'enable_operation') {
          d.state = Ds402State.OperationEnabled;
          d.target = d.pos; // bumpless: hold where the brake held
        } else if (cmd === 'shutdown') d.state = Ds402State.ReadyToSwitchOn;
        else if (cmd === 'disable_voltage' || cmd === 'quick_stop') d.state = Ds402State.SwitchOnDisabled;
        break;
      case Ds402State.OperationEnabled:
        if (cmd === 'switch_on') d.state = Ds402State.SwitchedOn;
        else if (cmd === 'shutdown') d.state = Ds402State.ReadyToSwitchOn;
        else if (cmd === 'disable_voltage') d.state = Ds402State.SwitchOnDisabled;
        else if (cmd === 'quick_stop') d.state = Ds402State.QuickStopActive;
        break;
      case Ds402State.QuickStopActive:
        if (cmd === 'disable_voltage') d.state = Ds402State.SwitchOnDisabled;
        else if (Math.abs(d.vel) < 1) d.state = Ds402State.SwitchOnDisabled;
        break;
      case Ds402State.FaultReactionActive:
        d.state = Ds402State.Fault;
        break;
      case Ds402State.Fault:
        if (cmd === 'fault_reset' && !d.followingErrorTrip) {
          d.faultLatched = false;
          d.faultCode = 0;
          d.state = Ds402State.SwitchOnDisabled;
        }
        break;
    }
    d.prevCw = cw;

    const enabled = d.state === Ds402State.OperationEnabled;
    d.brakeEngaged = !(enabled || d.state === Ds402State.QuickStopActive);

    // Homing (mode 6): a rising edge of bit 4 starts a run that completes after homingNs.
    if (!(enabled && mode === MODE.homing)) {
      d.homing = false;
      d.homingAttained = false;
      d.homingError = false;
    } else {
      const start = (cw & CW.homingStart) !== 0;
      if (start && !d.homing && !d.homingAttained && !d.homingError) {
        d.homing = true;
        d.homingDoneAt = nowNs + (this.options.homingNs ?? 200_000_000n);
      }
      if (!start) {
        d.homing = false;
        d.homingAttained = false;
        d.homingError = false;
      }
      if (d.homing && nowNs >= d.homingDoneAt) {
        d.homing = false;
        if (d.homingFails) d.homingError = true;
        else {
          d.homingAttained = true;
          d.homeOffset = d.pos; // the current position becomes home (0 counts)
          d.absoluteBias += d.pos; // the absolute encoder does not move
          d.pos = 0;
          d.target = 0;
        }
      }
    }

    // Plant: second-order follower of the CSP target while enabled; brake hold otherwise.
    // The loop runs on the drive's own clock, not the bus's: sub-steps of at most PLANT_SUB_STEP_NS
    // (semi-implicit Euler), with its reference moved linearly from the previous cycle's target to this
    // one's across them, as a CSP drive's interpolator does, reaching the new target at the cycle's end.
    // Integrated once per bus cycle with the target held as a step, the lag depended on the cycle: a 10 ms
    // cell showed a third less following error than a 250 us one for the same move.
    if (enabled && mode === MODE.cyclicSyncPosition) {
      // The previous commanded target; the held position on the cycle the drive was enabled or homed.
      const from = d.target;
      const to = img.targetPosition[i]!;
      d.target = to;
      const n = this.subSteps;
      const h = this.subDt;
      const wn = d.sluggish ? 3 : 60; // rad/s natural frequency of the closed loop
      const kp = wn * wn;
      const kv = 2 * 0.9 * wn;
      const rise = (to - from) / n;
      const vmax = d.maxVelCounts;
      let pos = d.pos;
      let vel = d.vel;
      for (let s = 1; s <= n; s++) {
        const ref = to - rise * (n - s); // exactly the new target on the last sub-step
        vel += (kp * (ref - pos) - kv * vel) * h;
        vel = Math.max(-vmax, Math.min(vmax, vel));
        pos += vel * h;
      }
      d.pos = pos;
      d.vel = vel;
    } else if (d.state === Ds402State.QuickStopActive) {
      // The quick-stop ramp: the speed decays as exp(-rate t), integrated exactly over the cycle, so the
      // stopping distance (the speed at the stop over the rate) is the same on every bus cycle. A per-cycle
      // factor 1 - rate dt stopped a 10 ms cell in 60 % of the distance a 250 us one took.
      const f = Math.exp(-QUICK_STOP_RATE * dt);
      d.pos += (d.vel * (1 - f)) / QUICK_STOP_RATE;
      d.vel *= f;
    } else {
      d.vel = 0;
    }

    const fe = enabled && mode === MODE.cyclicSyncPosition ? d.target - d.pos : 0;
    let sw = STATE_BITS[d.state] | SW.remote;
    if (!this.estopOpen && d.state >= Ds402State.ReadyToSwitchOn) {
      sw |= SW.voltageEnabled;
    }
    if (enabled && Math.abs(fe) < 2) sw |= SW.targetReached;
    if (mode === MODE.homing && d.homingAttained) sw |= SW.opMode12;
    if (mode === MODE.homing && d.homingError) sw |= SW.opMode13;
    if (mode === MODE.cyclicSyncPosition && enabled) sw |= SW.opMode12;

    if (d.frozen) {
      // Stale PDO: the drive stops refreshing its inputs; the image keeps the last values.
      img.pdoFresh[i] = 0;
      img.positionActual[i] = d.lastPos;
      img.velocityActual[i] = d.lastVel;
      img.followingError[i] = d.lastFe;
      img.statusword[i] = d.lastSw;
      return;
    }
    img.pdoFresh[i] = 1;
    img.statusword[i] = sw;
    img.modeDisplay[i] = enabled ? mode : 0;
    img.positionActual[i] = clampI32(Math.round(d.pos));
    img.velocityActual[i] = clampI32(Math.round(d.vel));
    img.followingError[i] = clampI32(Math.round(fe));
    img.torqueActual[i] = enabled ? Math.max(-3000, Math.min(3000, Math.round((fe / d.torqueScale) * 1000))) : 0;
    img.errorCode[i] = d.faultCode;
    img.digitalInputs[i] = d.brakeEngaged ? 0 : 1;
    img.absolutePosition[i] = clampI32(Math.round(d.pos + d.absoluteBias + d.absoluteError));
    img.absoluteValid[i] = 1;
    d.lastPos = img.positionActual[i]!;
    d.lastVel = img.velocityActual[i]!;
    d.lastFe = img.followingError[i]!;
    d.lastSw = sw;
  }

  async close(): Promise<void> {
    this.drives = [];
  }
}

function clampI32(v: number): number {
  return Math.max(-2147483648, Math.min(2147483647, v));
}

/** Registry factory: validates the sim driver's own params (drivers/index.ts). */
export function createSimDriver(o: DriverOptions): SimBusDriver {
  const p = o.params ?? {};
  for (const k of Object.keys(p)) {
    if (!['initialPositions', 'homingNs', 'startFaults'].includes(k)) throw new TypeError(`sim driver: unknown parameter ${k}`);
  }
  const initialPositions = p.initialPositions as number[] | undefined;
  if (initialPositions !== undefined && (!Array.isArray(initialPositions) || !initialPositions.every(Number.isFinite))) {
    throw new TypeError('sim driver: initialPositions must be finite numbers');
  }
  const homingNs = p.homingNs;
  if (homingNs !== undefined && (typeof homingNs !== 'bigint' || homingNs <= 0n)) throw new TypeError('sim driver: homingNs must be a positive bigint');
  const startFaults = (p.startFaults ?? []) as SimOptions['startFaults'];
  if (!Array.isArray(startFaults) || !startFaults.every((f) => f?.kind === 'pdo_mapping_mismatch' && Number.isSafeInteger(f.axis) && f.axis >= 0)) {
    throw new TypeError('sim driver: startFaults may only hold pdo_mapping_mismatch with an axis index');
  }
  const persisted = o.persisted as SimSnapshot | undefined;
  if (persisted !== undefined && !(Array.isArray(persisted?.counts) && Array.isArray(persisted?.absoluteBias))) {
    throw new TypeError('sim driver: the persisted snapshot is not one the sim driver made');
  }
  return new SimBusDriver({ initialPositions, homingNs: homingNs as bigint | undefined, startFaults, persisted });
}
