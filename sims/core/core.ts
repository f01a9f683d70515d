// The real-time core's cycle logic, independent of how it is scheduled (clock.ts: real time, faster than
// real time, stepped) and of which bus is under it (a DriverHost around any registered driver). One
// clock: the times passed into `cycle`. The CiA 402 drive handling is written once here, above the bus
// driver interface. Responsibilities live in their own modules:
//
//   admission.ts     operation -> checks -> native reason (what the core refuses and why)
//   lanes.ts         who produces each axis's target and mode this cycle (hold, homing; later trajectory, jog)
//   homing.ts        native Home as a lane
//   fault-monitor.ts which execution fault bits latch, and whether their conditions persist
//   status-view.ts   the status snapshot the service publishes
//   record.ts        the telemetry capture record written each cycle
//
// This file keeps the state they share, carries out admitted commands, and runs the cycle.

import { ProcessImage, STANDARD_MAPPING, type BusDriver, type BusSetup } from '../../drivers/bus.ts';
import { controlwordFor, CW, Ds402State } from '../../drivers/ds402.ts';
import { stateOf } from './ds402-state.ts';
import { DriverHost } from '../../drivers/host.ts';
import type { CompiledMachine } from '../config/types.ts';
import { admit, type AdmissionView, type Cmd } from './admission.ts';
import type { CaptureRing } from './capture/ring.ts';
import { FaultMonitor } from './fault-monitor.ts';
import { FAULT, faultEntry, type FaultRecovery } from './faults.ts';
import { CycleHistogram } from './histogram.ts';
import { HomingLane } from './homing.ts';
import { JogLane } from './jog.ts';
import { LaneArbiter } from './lanes.ts';
import type { PlanArena } from './plan-arena.ts';
import { PlanBuilder, TrajectoryLane, type Plan, type PlanRefusal, type TrajectoryEnd } from './trajectory.ts';
import { JOG_REASON, NATIVE_REASON } from './reasons.ts';
import { JOG_MODE, NATIVE_OP, type CommandResult, type JogStatus, type CoreStatus, type CoreTiming, type FromCore, type PlanWorkspace, type ToCore } from './protocol.ts';
import { captureCycle } from './record.ts';
import { buildStatus, type StatusView } from './status-view.ts';

export { CycleHistogram } from './histogram.ts';

/** Cycles a fault reset pulse is held, and cycles the core waits for drives to leave Fault after it. */
const RESET_PULSE_CYCLES = 3;
const RESET_SETTLE_CYCLES = 30;
/** Default bound an arm waits for the enabled axes to reach operation enabled (docs/profile.md). */
export const ARM_SETTLE_NS = 500_000_000n;
/**
 * The core stops on its own this long after a lease deadline passes without a renewal reaching it. A
 * renewal the service admitted just before the deadline is still on its way to the core (docs/profile.md
 * "Native commands"); a stalled service extends a lease by at most this much.
 */
export const LEASE_GRACE_NS = 20_000_000n;
/** Status is published on change and at least this often (core time in real time; wall otherwise). */
const PUBLISH_EVERY_NS = 10_000_000n;
/**
 * ... and this often on the real-time clock while the cell sits untouched: disarmed, every drive disabled
 * and still, no native Home, and no message from the service or the test channel for QUIET_AFTER_NS.
 * Each publication wakes the service; at 100 Hz that is half of an idle stack's processor time.
 */
const QUIET_PUBLISH_EVERY_NS = 50_000_000n;
const QUIET_AFTER_NS = 500_000_000n;

export interface CoreOptions {
  /** Telemetry capture ring: one CycleCaptureRecordV2 per cycle (none: no capture). */
  capture?: CaptureRing;
  /**
   * Clock measuring the time spent inside a cycle (work_ns), in ns as a double. Default
   * performance.now() * 1e6; a stepped test may pass its own.
   */
  workClock?: () => number;
  /** Host monotonic clock for lease deadlines (default process.hrtime.bigint). */
  hostClock?: () => bigint;
  armSettleNs?: bigint;
  /** How cycles are timed, for status (the core itself only sees the times it is given). */
  clockMode?: CoreStatus['clock']['mode'];
  scheduling?: string;
  /**
   * Publish status by wall time instead of core time (fast and stepped clocks, where core time runs
   * ahead of the wall and a publication every 10 ms of core time would cost more than the cycle).
   */
  publishByWall?: boolean;
  /** Plan memory shared with the service (plan-arena.ts), announced in 'ready'; none: every plan comes as arrays. */
  planArena?: PlanArena;
}

const defaultWorkClock = (): number => performance.now() * 1e6;
const defaultHostClock = (): bigint => process.hrtime.bigint();

interface Reset {
  id: number;
  sequence: bigint;
  generation: bigint;
  mask: number;
  cycle: number;
}

interface PendingArm {
  m: Cmd;
  deadlineNs: bigint;
}

/** What the bus driver is told about the cell (document 3: axes, slave positions, drives, I/O, bring-up). */
export function busSetupFor(machine: CompiledMachine): BusSetup {
  return {
    cycleNs: machine.cycle_ns,
    axes: machine.axes.map((a) => ({
      index: a.index,
      id: a.id,
      slavePosition: a.slave_position,
      countsPerUnit: a.counts_per_unit,
      sign: a.sign,
      minPosition: a.min_position,
      maxPosition: a.max_position,
      maxVelocity: a.max_velocity,
      followingError: a.following_error,
      ...(a.drive ? { vendorId: a.drive.vendor_id, productCode: a.drive.product_code } : {}),
    })),
    expectedMapping: STANDARD_MAPPING,
    ioOutputs: machine.io?.outputs.length ?? 0,
    ioInputs: machine.io?.inputs.length ?? 0,
    ...(machine.bus?.io_slave_position != null ? { ioSlavePosition: machine.bus.io_slave_position } : {}),
    ...(machine.bus
      ? {
          bringup: {
            explicitPdoConfig: machine.bus.bringup.explicit_pdo_config,
            disableOutputWatchdog: machine.bus.bringup.disable_output_watchdog,
            safeopOpTimeoutMs: machine.bus.bringup.safeop_op_timeout_ms,
          },
        }
      : {}),
  };
}

/** A plan up to this many element operations (about 12000 points of nine axes) is built at once. */
const PLAN_SYNC_ELEMENTS = 250_000;
/** Element operations of a larger plan per cycle on the stepped and fast clocks (no wall time to keep). */
const PLAN_SLICE_ELEMENTS = 10_000;
/** On the real-time clock, the share of a cycle's period a larger plan is taken in for, each cycle. */
export const PLAN_BUILD_SHARE = 0.2;

export class Core implements AdmissionView, StatusView {
  readonly image: ProcessImage;
  readonly host: DriverHost;
  readonly n: number;
  readonly all: number;
  private sequence = 0n;
  /** Cycles run by this incarnation (a number: exact to 2^53, and no bigint allocation per cycle). */
  cycleCount = 0;
  private lastPublishNs = 0n;
  private lastPublishWall = 0;
  now = 0n;
  /** Axes the core wants enabled. */
  enableMask = 0;
  armed = false;
  halted = false;
  homeValidMask = 0;
  homeEpoch = 0n;
  ioArmed = false;
  private stopDrainingSeq: bigint | null = null;
  readonly lanes: LaneArbiter;
  readonly homing = new HomingLane();
  readonly trajectory: TrajectoryLane;
  /** The jog lane (jog.ts): begin_jog / update_jog / end_jog and the legacy jog. */
  readonly jog: JogLane;
  /** The plan slot: one prepared trajectory waiting for Start (a newer preparation replaces it). */
  preparedPlan: Plan | null = null;
  /** A large plan being taken in, a slice per cycle (see prepare), with the command that asked for it. */
  private building: { builder: PlanBuilder; cmd: Cmd; answerAt?: number; slot?: number } | null = null;
  /** Plan memory shared with the service (plan-arena.ts): a slot is given back when its plan is gone (keepSlots). */
  readonly planArena: PlanArena | null;
  /** Work-clock ns a cycle spends taking a large plan in on the real-time clock (PLAN_BUILD_SHARE of the period). */
  private readonly buildBudgetNs: number;
  /** MotionState bookkeeping (document 1 part 2): state and last event of the latest execution. */
  motionState = 0;
  lastEvent = 0;
  lastTrajectoryId = 0n;
  /** Outputs configured and not torch-class: the only ones an intent may drive (document 1 part 4 io_arm). */
  private readonly drivableOutputs: number;
  /** A finished Home is reported once its axes have really left operation enabled. */
  private homeDone: { sequence: bigint; ok: boolean; detail: string; reason: number; mask: number } | null = null;
  private reset: Reset | null = null;
  private pendingArm: PendingArm | null = null;
  lastResetSequence = 0n;
  readonly faults: FaultMonitor;
  grant = { generation: 0n, deadlineNs: 0n, active: false, axisMask: 0 };
  /** Native grant receipt bookkeeping (GrantObservation, docs/profile.md "Grant observation"). */
  grantTicket = 0n;
  nativeGeneration = 0n;
  stopAckId = 0n;
  overruns = 0;
  /** Cycle lateness (wake minus scheduled) and work time (inside cycle()) since this incarnation started. */
  readonly lateness = new CycleHistogram();
  readonly work = new CycleHistogram();
  private readonly maxLatenessNs: number;
  /** Return of the last exchange (bus_submission_return_code). */
  busReturn = 0;
  /** Host time of each axis's last fresh feedback (pdo_observed_time_ns). */
  readonly observedNs: BigInt64Array;
  /** observedNs as little-endian-host 32-bit words (telemetry copies them without making bigints). */
  readonly observedWords: Uint32Array;
  readonly ioConfigured: boolean;
  readonly capture: CaptureRing | null;
  private readonly workClock: () => number;
  /** The work clock is the default (performance.now() in ns): its cycle-start reading is also the wall time. */
  private readonly workIsWall: boolean;
  readonly hostNow: () => bigint;
  /** The host clock is the default (process.hrtime), which runs on the same monotonic clock as performance.now(). */
  private readonly hostIsDefault: boolean;
  /**
   * Lease check without a host clock read every cycle: the grant (and its deadline) for which
   * `leaseSafeUntilMs` was computed, and the performance.now() time before which that deadline cannot
   * have passed (the remaining time when last read, less a 1 ms margin for rounding).
   */
  private leaseGrant: Core['grant'] | null = null;
  private leaseDeadline = 0n;
  private leaseSafeUntilMs = -Infinity;
  private readonly armSettleNs: bigint;
  readonly clockMode: CoreStatus['clock']['mode'];
  readonly scheduling: string;
  private readonly publishByWall: boolean;
  private dirty = true;
  private lastEnabledMask = 0;
  private lastArmed = false;
  /** Enabled mask as of the last exchange (before this cycle's lanes ran). */
  private enabledCache = 0;
  private readonly nowScratch = new BigInt64Array(1);
  private readonly nowScratchWords = new Uint32Array(this.nowScratch.buffer);
  /** The lanes' view of the cycle, reused (its time and enabled mask are set each cycle). */
  private readonly laneCycle: { image: ProcessImage; nowNs: bigint; enabledMask: number; cwExtra: Uint16Array };

  private readonly send: (m: FromCore) => void;
  private readonly sendRaw: (m: FromCore) => void;
  /** Observations dropped while the publisher was held (document 1 part 6 publisher_overflow). */
  private readonly lost = { count: 0, first: 0n, last: 0n };
  private publisherHeldUntilNs = 0n;

  constructor(
    readonly machine: CompiledMachine,
    driver: BusDriver | DriverHost,
    readonly incarnation: string,
    send: (m: FromCore) => void,
    opts: CoreOptions = {},
  ) {
    // Events carry their publication time on the core's clock (document 1 part 6: time_ns is the core's
    // publication time), whichever call site raised them.
    this.send = (m) => {
      if (m.t !== 'event') return send(m);
      // The private native_ notices are replies the service acts on, not observations for the log.
      if (!m.type.startsWith('native_') && this.publisherHeld()) {
        this.lost.count++;
        this.lost.last = this.now;
        if (this.lost.count === 1) this.lost.first = this.now;
        return;
      }
      this.reportLost(send);
      send({ ...m, time_ns: this.now });
    };
    this.sendRaw = send;
    this.n = machine.axes.length;
    this.all = this.n >= 32 ? 0xffffffff : (1 << this.n) - 1;
    this.image = new ProcessImage(this.n);
    this.host = driver instanceof DriverHost ? driver : new DriverHost(driver);
    this.lanes = new LaneArbiter(this.n);
    this.laneCycle = { image: this.image, nowNs: 0n, enabledMask: 0, cwExtra: this.lanes.cwExtra };
    this.observedNs = new BigInt64Array(this.n);
    this.observedWords = new Uint32Array(this.observedNs.buffer, this.observedNs.byteOffset, this.n * 2);
    this.maxLatenessNs = Number(machine.max_cycle_lateness_ns);
    this.buildBudgetNs = PLAN_BUILD_SHARE * Number(machine.cycle_ns);
    this.ioConfigured = (machine.io?.outputs.length ?? 0) > 0;
    this.capture = opts.capture ?? null;
    this.planArena = opts.planArena ?? null;
    if (this.capture && this.capture.axisCount !== this.n) throw new RangeError(`capture ring has ${this.capture.axisCount} axes, the machine ${this.n}`);
    this.workClock = opts.workClock ?? defaultWorkClock;
    this.workIsWall = this.workClock === defaultWorkClock;
    const hostClock = opts.hostClock ?? defaultHostClock;
    this.hostIsDefault = hostClock === defaultHostClock;
    this.hostNow = () => this.messageHostNs ?? hostClock();
    this.armSettleNs = opts.armSettleNs ?? ARM_SETTLE_NS;
    this.clockMode = opts.clockMode ?? 'realtime';
    this.scheduling = opts.scheduling ?? 'default';
    this.publishByWall = opts.publishByWall ?? false;
    this.faults = new FaultMonitor(machine, this.image, this.all, (bit, axes) => this.onFaultLatched(bit, axes));
    this.trajectory = new TrajectoryLane(this.n, (e) => this.onTrajectoryEnd(e), Number(machine.cycle_ns));
    this.jog = new JogLane(machine, (e) => {
      this.dirty = true;
      this.send({ t: 'event', type: e.type, payload: e.payload });
    });
    let drivable = 0;
    machine.io?.outputs.forEach((o, i) => {
      if (!o.torch) drivable |= 1 << i;
    });
    this.drivableOutputs = drivable;
  }

  /** The driver under this core (through its host). */
  get driver(): BusDriver {
    return this.host.driver;
  }
  get stopDraining(): boolean {
    return this.stopDrainingSeq !== null;
  }
  get homingMask(): number {
    return this.homing.run?.mask ?? 0;
  }
  laneConflicts(mask: number, except?: string): number {
    return this.lanes.conflicts(mask, except === 'trajectory' ? this.trajectory : except === 'jog' ? this.jog : undefined);
  }

  busSetup(): BusSetup {
    return busSetupFor(this.machine);
  }

  async start(nowNs: bigint): Promise<void> {
    const startup = await this.host.open(this.busSetup());
    this.host.activate();
    this.now = nowNs;
    // A drive whose PDO mapping differs cannot be trusted until the bus is restarted (fault bit 11).
    if (startup.mappingMismatchMask) this.faults.latch(FAULT.restart_required!, startup.mappingMismatchMask);
    this.send({
      t: 'ready',
      incarnation: this.incarnation,
      nowNs,
      startupNotes: startup.notes,
      mappingMismatchMask: startup.mappingMismatchMask,
      ...(this.capture ? { capture: this.capture.buffer } : {}),
      ...(this.planArena ? { planArena: this.planArena.buffer } : {}),
    });
  }

  /**
   * Handle one message from the service (a prepare's workspace and arena slot come beside it: protocol.ts
   * PostStamp).
   */
  handle(m: ToCore, workspace?: PlanWorkspace, slot?: number): void {
    this.handleMessage(m, workspace, slot);
    // A discard, a Start (the plan it replaces), a refused or superseded prepare: their slots go back now.
    this.keepSlots();
  }

  /**
   * Give back every arena slot whose plan the core no longer keeps (plan-arena.ts): the plan being built,
   * the prepared one and the executing one are all it keeps. Called after each message and each cycle.
   */
  private keepSlots(): void {
    this.planArena?.keep(this.building?.slot, this.preparedPlan?.slot, this.trajectory.plan?.slot);
  }

  private handleMessage(m: ToCore, workspace?: PlanWorkspace, slot?: number): void {
    switch (m.t) {
      case 'grant': {
        const wasActive = this.grant.active;
        const generationChanged = m.generation !== this.grant.generation;
        const axisMaskBefore = this.grant.axisMask;
        this.grantTicket++;
        if (wasActive !== m.active || generationChanged) this.nativeGeneration++;
        this.grant = { generation: m.generation, deadlineNs: m.deadlineNs, active: m.active, axisMask: m.axisMask };
        // Authority ended (release, expiry, revocation, retirement): nobody controls the cell, so it is
        // brought to the safe state a stop leaves (docs/profile.md "Grant end").
        // A stop the service admitted withdraws the grant before the stop command itself arrives: the
        // lanes end for the stop, not for a lost authority.
        if (wasActive && !m.active && !this.stopDraining) {
          if (m.stopping) this.safeState('stop', 'home cancelled by stop');
          else this.safeState('authority ended');
        }
        // A renewal (the same active grant, a later deadline) waits for the next regular publication, at most
        // 10 ms away while the cell is in use: publishing each one on the next cycle made every renewal cost a
        // status snapshot on both threads (bench/control-roundtrip.bench.ts). Any other change is news.
        if (!(wasActive && m.active && !generationChanged && m.axisMask === axisMaskBefore)) this.dirty = true;
        return;
      }
      case 'cmd':
        this.command(m);
        return;
      case 'prepare':
        this.prepare(m, workspace, slot);
        return;
      case 'jog_update':
        this.jogUpdate(m);
        return;
      case 'cancel_home':
        this.endHome(false, 'home cancelled: authority lost', NATIVE_REASON.cancelled);
        return;
      case 'inject':
      case 'step':
      case 'shutdown':
        return; // handled by the host, which owns the driver's facets and the clock
    }
  }

  private result(op: number, reason: number, axisMask: number, generation: bigint): CommandResult {
    return { Sequence: ++this.sequence, Handle: 0n, Generation: generation, Operation: op, Result: reason === NATIVE_REASON.none ? 0 : 1, Reason: reason, AxisMask: axisMask };
  }

  private reply(m: Cmd, reason: number, axisMask: number, detail?: string, extra?: Record<string, unknown>): CommandResult {
    return this.answer(m, this.result(NATIVE_OP[m.op], reason, axisMask, m.generation), detail, extra);
  }

  private answer(m: Cmd, r: CommandResult, detail?: string, extra?: Record<string, unknown>): CommandResult {
    // Publish the state the command produced before its receipt, so a client reading status after the
    // reply sees it (arm: "afterwards status core.armed equals 1").
    this.publish(this.now);
    this.send({ t: 'reply', id: m.id, result: r, detail, extra });
    return r;
  }

  /**
   * Axes whose drive reports operation enabled. An offline slave's inputs are not refreshed (its image
   * keeps the last statusword), so it is never counted as enabled.
   */
  enabledMask(): number {
    const img = this.image;
    let m = 0;
    for (let i = 0; i < this.n; i++) if (img.online[i] === 1 && stateOf(img.statusword[i]!) === Ds402State.OperationEnabled) m |= 1 << i;
    return m;
  }

  private command(m: Cmd): void {
    const refusal = admit(this, m);
    if (refusal) return void this.reply(m, refusal.reason, refusal.mask, refusal.detail);
    const mask = m.axisMask >>> 0;
    switch (m.op) {
      case 'stop': {
        // The reason every lane ends with is the stop itself: a jog or a weld stopped mid-motion was not a
        // Home, so only a Home in progress reports "home cancelled by stop" (docs/profile.md "Events").
        this.safeState('stop', 'home cancelled by stop');
        this.stopDrainingSeq = this.reply(m, NATIVE_REASON.none, this.all).Sequence;
        return;
      }
      case 'mark':
        this.reply(m, NATIVE_REASON.none, 0);
        return;
      case 'enable':
        this.enableMask = mask;
        if (mask === 0) this.armed = false;
        this.halted = false;
        this.dirty = true;
        this.reply(m, NATIVE_REASON.none, mask);
        return;
      case 'arm': {
        if ((this.enabledMask() & this.enableMask) === this.enableMask) return this.completeArm(m);
        // Enable was admitted but the drives are still stepping through CiA 402 (a few cycles on the
        // simulator, longer on real drives): wait a bounded time instead of racing the client.
        this.pendingArm?.m && this.reply(this.pendingArm.m, NATIVE_REASON.not_ready, this.enableMask, 'superseded by a newer arm');
        this.pendingArm = { m, deadlineNs: this.now + this.armSettleNs };
        return;
      }
      case 'halt':
        // Controlled deceleration to an enabled hold: every lane gives its axes back to hold, which keeps
        // the last commanded targets; the active trajectory handle and jog generation are retired. The jog
        // lane decelerates its axes to rest with the jog acceleration first (document 1 part 4 halt).
        this.jog.close(JOG_REASON.halted, 'halt');
        this.lanes.releaseAll(this.image, 'halt', this.jog);
        this.halted = true;
        this.dirty = true;
        this.reply(m, NATIVE_REASON.none, this.enableMask);
        return;
      case 'home': {
        const r = this.reply(m, NATIVE_REASON.none, mask);
        this.lanes.acquire(this.homing, mask);
        this.homing.begin(mask, r.Sequence, this.now);
        this.homeValidMask &= ~mask; // Home evidence for these axes is re-established by this run
        this.dirty = true;
        return;
      }
      case 'reset_fault': {
        const sel = mask === 0 ? this.all : mask;
        const r = this.result(NATIVE_OP.reset_fault, NATIVE_REASON.none, sel, m.generation);
        this.reset = { id: m.id, sequence: r.Sequence, generation: m.generation, mask: sel, cycle: 0 };
        return; // answered when the reset has been observed (see stepReset)
      }
      case 'recovery_status':
        this.reply(m, NATIVE_REASON.none, 0, undefined, { recovery: this.recovery([], this.lastResetSequence, this.faults.size ? 'fault_persists' : '') });
        return;
      case 'restore_anchor':
        this.homeValidMask |= mask;
        this.homeEpoch++;
        this.send({ t: 'event', type: 'home_epoch_changed', payload: { previous: this.homeEpoch - 1n, current: this.homeEpoch, home_valid_mask: this.homeValidMask, source: 'anchor' } });
        this.dirty = true;
        this.reply(m, NATIVE_REASON.none, mask, undefined, { recovery: this.recovery([], this.lastResetSequence, '') });
        return;
      case 'io_arm':
        this.ioArmed = true;
        this.dirty = true;
        this.reply(m, NATIVE_REASON.none, 0);
        return;
      case 'io_disarm':
        this.ioArmed = false;
        this.image.ioOutputWord = 0;
        this.dirty = true;
        this.reply(m, NATIVE_REASON.none, 0);
        return;
      case 'start': {
        const plan = this.preparedPlan!;
        this.preparedPlan = null;
        // A later execution replaces a running one (document 1 part 3: started -> consumed).
        if (this.trajectory.active) this.lanes.release(this.trajectory, this.lanes.axesOf(this.trajectory), this.image, 'replaced');
        this.lanes.acquire(this.trajectory, plan.axisMask);
        const r = this.result(NATIVE_OP.start, NATIVE_REASON.none, plan.axisMask, m.generation);
        r.Handle = plan.handle;
        this.trajectory.begin(plan, this.now, r.Sequence, this.image.ioOutputWord);
        this.halted = false;
        this.motionState = 3;
        this.lastEvent = 1;
        this.lastTrajectoryId = plan.handle;
        this.dirty = true;
        this.answer(m, r);
        return;
      }
      case 'discard': {
        const had = this.preparedPlan?.handle === m.handle;
        if (had) this.preparedPlan = null;
        const r = this.result(NATIVE_OP.discard, had ? NATIVE_REASON.none : NATIVE_REASON.unknown_handle, 0, m.generation);
        r.Handle = m.handle ?? 0n;
        this.dirty = true;
        this.answer(m, r, had ? undefined : 'no such plan in the core');
        return;
      }
      case 'begin_jog':
      case 'jog':
      case 'end_jog':
        this.jogCommand(m, mask);
        return;
      default:
        this.reply(m, NATIVE_REASON.unsupported, mask, `native ${m.op} is not available in this core build`);
    }
  }

  // ---- jog (jog.ts; document 1 part 4 begin_jog, end_jog, jog, update_jog) ----

  private jogCommand(m: Cmd, mask: number): void {
    const jog = this.jog;
    if (m.op === 'end_jog') {
      jog.close(JOG_REASON.ended, 'end_jog');
      jog.controlReason = JOG_REASON.ended;
      const r = this.result(NATIVE_OP.end_jog, NATIVE_REASON.none, jog.axisMask, m.generation);
      r.Handle = jog.generation;
      this.dirty = true;
      this.answer(m, r);
      return;
    }
    const j = m.jog ?? {};
    // Axes of an earlier generation still ramping to rest stay with the lane until they are at rest.
    const acquireMask = jog.active ? mask | this.lanes.axesOf(jog) : mask;
    if (m.op === 'begin_jog' || !(jog.open && jog.mode === JOG_MODE.legacy)) {
      this.lanes.acquire(jog, acquireMask);
      const deadline = m.op === 'begin_jog' ? j.deadlineNs! : this.hostNow() + (j.timeoutNs ?? 0n);
      jog.begin(m.op === 'begin_jog' ? JOG_MODE.independent : JOG_MODE.legacy, mask, this.image.targetPosition, j.originNs ?? this.hostNow(), deadline);
    }
    if (m.op === 'jog') {
      const v = new Float64Array(this.n);
      for (let i = 0; i < this.n; i++) v[i] = jog.toCounts(i, j.velocity?.[i] ?? 0);
      const reason = jog.input(v, 0n, this.hostNow() + (j.timeoutNs ?? 0n));
      if (reason !== JOG_REASON.none) {
        // The input is refused (outward past a limit, or an axis outside the mask); the session stays open.
        const r = this.result(NATIVE_OP.jog, reason === JOG_REASON.outside_limits_outward ? NATIVE_REASON.outside_limits_outward : NATIVE_REASON.invalid_axis_mask, mask, m.generation);
        r.Handle = jog.generation;
        this.answer(m, r, reason === JOG_REASON.outside_limits_outward ? 'jog would move further outside the limits' : 'velocity on an axis outside axis_mask');
        return;
      }
    }
    this.halted = false;
    jog.controlReason = JOG_REASON.none;
    const r = this.result(NATIVE_OP[m.op], NATIVE_REASON.none, mask, m.generation);
    r.Handle = jog.generation;
    this.dirty = true;
    this.answer(m, r);
  }

  /** A jog input from jog.sock (the service checked the frame; the core checks what it owns: JogLane.update). */
  private jogUpdate(m: Extract<ToCore, { t: 'jog_update' }>): void {
    const fenced = this.grant.active && m.generation === this.grant.generation && this.hostNow() <= this.grant.deadlineNs;
    const reason = this.jog.update(m, fenced);
    if (reason !== JOG_REASON.none) {
      this.jog.updateReason = reason;
      this.send({ t: 'event', type: 'native_jog_update', payload: { reason, sequence: m.sequence, jog_generation: m.jogGeneration } });
    }
    this.dirty = true;
  }

  /** After the exchange: a closed session whose axes are at rest gives them back to hold. */
  private stepJog(): void {
    if (this.jog.finished) {
      this.lanes.release(this.jog, this.lanes.axesOf(this.jog), this.image, 'jog_at_rest');
      this.dirty = true;
    }
  }

  jogStatus(): JogStatus {
    return this.jog.status();
  }


  /**
   * prepare: convert and check a point list, keep it in the plan slot (replacing an older one). A plan of more
   * than PLAN_SYNC_ELEMENTS element operations is taken in over the following cycles and answered when done: a
   * 250000-point plan built in one go stalled the cycle it arrived in by 50 to 500 ms
   * (bench/upload-impact.bench.ts). The older plan stays in the slot until then. How much a cycle takes
   * (advanceBuild):
   * - real-time clock: PLAN_BUILD_SHARE of the cycle's period, by the work clock. A fixed count of 10000
   *   element operations took 0.05 ms when compiled but 0.4 to 2 ms while V8 had not compiled the builder
   *   yet (a stack's first large upload, its compiler thread starved by the upload): every cycle late;
   * - a replay: all at once, answered in the cycle the recorded core answered (answerAtCycle), since the
   *   count above was the recorded wall clock's decision;
   * - stepped and fast clocks: PLAN_SLICE_ELEMENTS a cycle, the same on every run.
   */
  private prepare(m: Extract<ToCore, { t: 'prepare' }>, workspace?: PlanWorkspace, slot?: number): void {
    const asCmd: Cmd = { t: 'cmd', id: m.id, op: 'prepare', generation: m.generation, axisMask: m.axisMask, handle: m.handle };
    // The slot is the core's from here, whatever the answer (a refused plan's slot goes back at once: keepSlots).
    if (slot !== undefined) this.planArena?.adopt(slot);
    const refusal = admit(this, asCmd);
    if (refusal) return void this.reply(asCmd, refusal.reason, refusal.mask, refusal.detail);
    // The service commits one preparation at a time; one arriving during a build replaces it.
    if (this.building) this.reply(this.building.cmd, NATIVE_REASON.cancelled, 0, 'replaced by a newer preparation');
    const builder = new PlanBuilder(this.machine, m, workspace);
    if (builder.elements <= PLAN_SYNC_ELEMENTS) return void this.prepared(asCmd, builder.step(Infinity)!, slot);
    this.building = { builder, cmd: asCmd, ...(m.answerAtCycle !== undefined ? { answerAt: m.answerAtCycle } : {}), ...(slot !== undefined ? { slot } : {}) };
  }

  /** One slice of the plan being built (each cycle, `workStart` its start on the work clock); answers the prepare when it is done. */
  private advanceBuild(workStart: number): void {
    const b = this.building;
    if (!b) return;
    let out: Plan | PlanRefusal | null;
    if (b.answerAt !== undefined) {
      if (this.cycleCount < b.answerAt) return;
      out = b.builder.step(Infinity);
    } else if (this.clockMode === 'realtime') {
      out = b.builder.step(Infinity, () => this.workClock() - workStart >= this.buildBudgetNs);
    } else out = b.builder.step(PLAN_SLICE_ELEMENTS);
    if (out === null) return;
    this.building = null;
    // The fence must still hold after the cycles the build took (a stop or lost lease meanwhile).
    const refusal = admit(this, b.cmd);
    if (refusal) return void this.reply(b.cmd, refusal.reason, refusal.mask, refusal.detail);
    this.prepared(b.cmd, out, b.slot);
  }

  private prepared(asCmd: Cmd, plan: Plan | PlanRefusal, slot?: number): void {
    if ('kind' in plan) {
      const a = this.machine.axes[plan.axis]!;
      if (plan.kind === 'outside_limits') {
        return void this.reply(asCmd, NATIVE_REASON.outside_limits_outward, 1 << plan.axis, `point ${plan.point} axis ${a.id} position ${plan.value} outside ${a.min_position}..${a.max_position}`, { point: plan.point, axis: a.id });
      }
      return void this.reply(asCmd, NATIVE_REASON.velocity_limit, 1 << plan.axis, `point ${plan.point} axis ${a.id} velocity ${plan.value} above ${plan.limit}`, { point: plan.point, axis: a.id });
    }
    if (slot !== undefined) plan.slot = slot;
    this.preparedPlan = plan;
    const r = this.result(NATIVE_OP.prepare, NATIVE_REASON.none, plan.axisMask, asCmd.generation);
    r.Result = 2; // prepared
    r.Handle = plan.handle;
    this.dirty = true;
    this.answer(asCmd, r);
  }

  /** Axes of the plan whose first point is farther than the following error limit from the held target. */
  startMismatch(plan: Plan): number {
    let off = 0;
    for (let i = 0; i < this.n; i++) {
      if (!((plan.axisMask >>> i) & 1)) continue;
      const a = this.machine.axes[i]!;
      if (Math.abs(plan.q[i]! - this.image.targetPosition[i]!) > a.following_error * a.counts_per_unit) off |= 1 << i;
    }
    return off;
  }

  /** A started trajectory ended: completed, or retired by halt, stop, a fault or lost authority. */
  private onTrajectoryEnd(e: TrajectoryEnd): void {
    const faultBits = this.faults.bits;
    const consumed = e.completed || e.why === 'replaced';
    const outcome = consumed ? 'completed' : faultBits ? 'faulted' : 'aborted';
    this.motionState = e.completed ? 4 : faultBits ? 6 : 5;
    this.lastEvent = e.completed ? 2 : faultBits ? 4 : 3;
    if (e.completed) this.lanes.release(this.trajectory, this.lanes.axesOf(this.trajectory), this.image, 'completed');
    this.dirty = true;
    this.send({
      t: 'event',
      type: 'native_execution',
      payload: {
        handle: e.plan.handle,
        outcome,
        why: e.why,
        fault_bits: faultBits,
        recovery: [...new Set(this.faults.entries().map((f) => f.recovery))],
        point_index: e.pointIndex,
        command_sequence: this.trajectory.commandSequence,
      },
    });
  }

  private completeArm(m: Cmd): void {
    this.armed = true;
    this.dirty = true;
    this.reply(m, NATIVE_REASON.none, this.enableMask);
  }

  /** A pending arm completes when the enabled axes reach operation enabled, or is refused at its bound. */
  private stepArm(): void {
    const p = this.pendingArm;
    if (!p) return;
    if (this.enableMask === 0 || this.faults.size || this.stopDraining || this.faults.safetyFaultMask) {
      this.pendingArm = null;
      this.reply(p.m, this.faults.safetyFaultMask || this.stopDraining ? NATIVE_REASON.inhibited : NATIVE_REASON.not_ready, this.enableMask, 'enable was withdrawn or a fault latched while arm waited');
      return;
    }
    if ((this.enabledMask() & this.enableMask) === this.enableMask) {
      this.pendingArm = null;
      this.completeArm(p.m);
    } else if (this.now >= p.deadlineNs) {
      this.pendingArm = null;
      this.reply(p.m, NATIVE_REASON.not_ready, this.enableMask, `enabled axes did not reach operation enabled within ${this.armSettleNs / 1_000_000n} ms`);
    }
  }

  /**
   * Disarm, disable, every output OFF with permission withdrawn, every lane ended, Home cancelled. `why`
   * is what the lanes report (jog_end's why, execution_aborted's reason); `homeWhy` what a Home in
   * progress reports.
   */
  private safeState(why: string, homeWhy: string = why): void {
    this.preparedPlan = null; // a stop or lost authority retires what was prepared
    this.armed = false;
    this.halted = false;
    this.enableMask = 0;
    this.ioArmed = false;
    this.image.ioOutputWord = 0; // every cell output commanded OFF, immediately
    this.endHome(false, homeWhy, NATIVE_REASON.cancelled);
    this.lanes.releaseAll(this.image, why);
    this.dirty = true;
  }

  /** Fault reaction: disarm and disable; motion needs a reset and a new enable and arm. */
  private onFaultLatched(bit: number, axes: number): void {
    const info = FaultMonitor.info(bit);
    this.send({ t: 'event', type: 'fault_latched', payload: { bit: 1 << bit, name: info.name, axis_mask: axes, recovery: info.recovery } });
    this.armed = false;
    this.halted = false;
    this.enableMask = 0;
    this.ioArmed = false;
    this.image.ioOutputWord = 0;
    if (this.homing.run) this.endHome(false, `home aborted: ${info.name}`, NATIVE_REASON.homing_failed);
    this.lanes.releaseAll(this.image, `fault ${info.name}`);
    this.dirty = true;
  }

  private endHome(ok: boolean, detail: string, reason: number): void {
    const h = this.homing.end();
    if (!h) return;
    this.lanes.release(this.homing, h.mask, this.image, detail);
    // Home leaves the selected axes disabled, after which enable and arm are needed again (document 1
    // part 3 machine effects): the cell is disarmed too (docs/profile.md "Machine operations", home).
    this.enableMask &= ~h.mask;
    this.armed = false;
    this.lanes.hold.unlatch(h.mask);
    if (ok) {
      this.homeValidMask |= h.mask;
      this.homeEpoch++;
      this.send({ t: 'event', type: 'home_epoch_changed', payload: { previous: this.homeEpoch - 1n, current: this.homeEpoch, home_valid_mask: this.homeValidMask, source: 'home' } });
    }
    this.dirty = true;
    this.homeDone = { sequence: h.sequence, ok, detail, reason, mask: h.mask };
  }

  private stepHoming(): void {
    if (!this.homing.run) return;
    const s = this.homing.step({ image: this.image, nowNs: this.now });
    switch (s.kind) {
      case 'timeout':
        return this.endHome(false, 'Home did not complete within 60 s', NATIVE_REASON.homing_failed);
      case 'error':
        this.faults.latch(FAULT.homing_failed!, s.axes);
        return;
      case 'attained':
        return this.endHome(true, 'Home complete', NATIVE_REASON.none);
      case 'running':
        return;
    }
  }

  private stepReset(): void {
    const r = this.reset;
    if (!r) return;
    r.cycle++;
    const latched = this.faults.latched;
    if (r.cycle <= RESET_PULSE_CYCLES + RESET_SETTLE_CYCLES) {
      // keep pulsing/settling until every selected drive left Fault, or the settle time ran out
      const stillFault = [...latched.keys()].some((b) => (b === FAULT.drive_fault || b === FAULT.following_error) && this.faults.persists(b, r.mask & latched.get(b)!));
      if (stillFault || r.cycle <= RESET_PULSE_CYCLES) return;
    }
    this.reset = null;
    this.lastResetSequence = r.sequence;
    const outcomes: FaultRecovery[] = [];
    let persistent = false;
    for (const [bit, axes] of latched) {
      const sel = axes & r.mask;
      if (!sel) {
        outcomes.push(faultEntry(bit, axes, 'not_selected'));
        continue;
      }
      const p = this.faults.persists(bit, sel);
      persistent ||= p;
      outcomes.push(faultEntry(bit, sel, p ? 'persists' : 'cleared'));
    }
    if (!persistent) {
      for (const o of outcomes) {
        if (o.outcome !== 'cleared') continue;
        this.faults.clear(o.bit, o.axis_mask);
        const info = FaultMonitor.info(o.bit);
        this.send({ t: 'event', type: 'fault_cleared', payload: { bit: 1 << o.bit, name: info.name, axis_mask: o.axis_mask, recovery: info.recovery } });
        if (info.recovery === 'rehome') this.homeValidMask &= ~o.axis_mask;
      }
    }
    const result: CommandResult = {
      Sequence: r.sequence,
      Handle: 0n,
      Generation: r.generation,
      Operation: NATIVE_OP.reset_fault,
      Result: persistent ? 1 : 0,
      Reason: persistent ? NATIVE_REASON.fault_persists : NATIVE_REASON.none,
      AxisMask: r.mask,
    };
    this.dirty = true;
    this.publish(this.now);
    this.send({
      t: 'reply',
      id: r.id,
      result,
      detail: persistent ? 'a fault condition persists; nothing was cleared' : undefined,
      extra: { recovery: this.recovery(outcomes, r.sequence, persistent ? 'fault_persists' : '') },
    });
  }

  recovery(outcomes: FaultRecovery[], resetSequence: bigint, reason: string): Record<string, unknown> {
    return {
      home_valid_mask: this.homeValidMask,
      faults: this.faults.entries(),
      reset_sequence: resetSequence,
      reason,
      outcomes,
    };
  }

  /**
   * The lease ran out in host time without a renewal reaching the core: it stops on its own. With the
   * default host clock, process.hrtime is read only when the deadline may be within a millisecond of
   * performance.now() (both run on the same monotonic clock; the cycle's start reading serves), so an
   * active grant costs no clock read and no bigint per cycle; the first cycle whose read sees the deadline passed still stops the cell.
   */
  private stepLease(wallMs: number): void {
    const g = this.grant;
    if (!g.active) return;
    const cached = this.hostIsDefault && g === this.leaseGrant && g.deadlineNs === this.leaseDeadline;
    // Read before the host clock below, so the margin computed from it errs early, never late.
    const wall = !this.hostIsDefault ? 0 : wallMs === wallMs ? wallMs : performance.now();
    if (cached && wall < this.leaseSafeUntilMs) return;
    const host = this.hostNow();
    if (host <= g.deadlineNs + LEASE_GRACE_NS) {
      if (this.hostIsDefault) {
        const w = wall;
        this.leaseGrant = g;
        this.leaseDeadline = g.deadlineNs;
        this.leaseSafeUntilMs = w + Number(g.deadlineNs + LEASE_GRACE_NS - host) / 1e6 - 1;
      }
      return;
    }
    this.grant = { ...this.grant, active: false };
    this.nativeGeneration++;
    this.safeState('lease expired');
    this.send({ t: 'event', type: 'native_lease_expired', payload: { generation: this.grant.generation } });
  }

  /** One cycle at core time `nowNs`, scheduled for `scheduledNs`. */
  cycle(nowNs: bigint, scheduledNs: bigint): void {
    const workStart = this.workClock();
    /** performance.now() at the start of this cycle, or NaN when the work clock is a test's own. */
    const wallMs = this.workIsWall ? workStart / 1e6 : NaN;
    // An injected late wake (test channel): every cycle scheduled before the wake runs at the wake time.
    if (this.lateWakeNs !== 0n) {
      if (nowNs < this.lateWakeNs) nowNs = this.lateWakeNs;
      else this.lateWakeNs = 0n;
    }
    this.now = nowNs;
    this.cycleCount++;
    const lateness = nowNs === scheduledNs ? 0 : Number(nowNs - scheduledNs); // stepped: no bigint per cycle
    this.lateness.record(lateness);
    if (lateness > this.maxLatenessNs) this.overruns++;

    const img = this.image;
    const enabledBefore = this.enabledCache;
    if (this.jog.open) this.jog.checkExpiry(this.hostNow());
    // Targets and modes from whichever lane owns each axis.
    const lc = this.laneCycle;
    lc.nowNs = nowNs;
    lc.enabledMask = enabledBefore;
    this.lanes.produce(lc);
    if (this.trajectory.lateMarker) {
      this.trajectory.lateMarker = false;
      this.faults.latch(FAULT.io_marker_late!, this.lanes.axesOf(this.trajectory));
    }
    // Output intents of the running trajectory drive configured non-torch outputs, only while io is armed;
    // in the cycle that reaches the last point too (its intent is applied there, the plan is let go after).
    if (this.trajectory.plan !== null && this.ioArmed) img.ioOutputWord = this.trajectory.outputs & this.drivableOutputs;
    // CiA 402 stepping: each axis's controlword moves its drive one step toward the wanted state.
    const homingMask = this.homingMask;
    const resetting = this.reset !== null && this.reset.cycle < RESET_PULSE_CYCLES ? this.reset.mask : 0;
    const want = this.stopDraining ? 0 : this.enableMask | homingMask;
    for (let i = 0; i < this.n; i++) {
      const state = stateOf(img.statusword[i]!);
      let cw = controlwordFor(state, ((want >>> i) & 1) === 1);
      if (state === Ds402State.Fault && (resetting >>> i) & 1) cw = CW.faultReset;
      img.controlword[i] = cw | this.lanes.cwExtra[i]!;
    }
    this.busReturn = this.host.exchange(img, nowNs);
    // observedNs[i] = nowNs for each fresh axis, as two 32-bit word copies (one bigint conversion a cycle).
    const now64 = this.nowScratch;
    now64[0] = nowNs;
    const now32 = this.nowScratchWords;
    const ow = this.observedWords;
    for (let i = 0; i < this.n; i++) {
      if (img.pdoFresh[i] === 1) {
        ow[2 * i] = now32[0]!;
        ow[2 * i + 1] = now32[1]!;
      }
    }
    const en = this.enabledMask();
    this.enabledCache = en;

    this.faults.detect(nowNs, this.busReturn);
    this.trajectory.settle();
    this.stepJog();
    this.stepHoming();
    this.stepReset();
    this.stepArm();
    this.stepLease(wallMs);
    if (this.homeDone && (en & this.homeDone.mask) === 0) {
      const { mask: _m, ...d } = this.homeDone;
      this.homeDone = null;
      this.publish(nowNs);
      this.send({ t: 'home_done', ...d });
    }
    if (this.stopDrainingSeq !== null && this.allStill()) {
      const seq = this.stopDrainingSeq;
      this.stopDrainingSeq = null;
      this.dirty = true;
      this.stopAckId = seq;
      this.send({ t: 'stop_drained', sequence: seq });
    }
    if (this.lost.count !== 0) this.reportLost(this.sendRaw);
    if (en !== this.lastEnabledMask || this.armed !== this.lastArmed) {
      if (en !== this.lastEnabledMask) this.send({ t: 'event', type: 'enable_changed', payload: { axis_enable_mask: en, armed: this.armed } });
      if (this.armed !== this.lastArmed) this.send({ t: 'event', type: 'arm_changed', payload: { axis_enable_mask: en, armed: this.armed } });
      this.lastEnabledMask = en;
      this.lastArmed = this.armed;
      this.dirty = true;
    }
    if (this.dirty) this.publish(nowNs);
    else if (this.publishByWall) {
      const w = wallMs === wallMs ? wallMs : performance.now();
      if (w - this.lastPublishWall >= 10) this.publish(nowNs);
    } else if (nowNs - this.lastPublishNs >= PUBLISH_EVERY_NS) {
      const quiet = !this.armed && en === 0 && this.homingMask === 0 && nowNs - this.lastActivityNs >= QUIET_AFTER_NS && this.allStill();
      if (!quiet || nowNs - this.lastPublishNs >= QUIET_PUBLISH_EVERY_NS) this.publish(nowNs);
    }
    this.advanceBuild(workStart);
    this.keepSlots();
    const workNs = this.workClock() - workStart;
    this.work.record(workNs);
    if (this.capture) {
      // Test hook (private test channel): a capture write held in progress leaves the ring's seqlock odd,
      // so readers see a torn header (telemetry_busy); the held record is restarted and committed after.
      if (this.captureHeldUntilNs > this.hostNow()) {
        if (!this.captureHeld) this.capture.beginRecord();
        this.captureHeld = true;
      } else {
        this.captureHeld = false;
        captureCycle(this, this.capture, nowNs, lateness, workNs, en);
      }
    }
  }

  /**
   * Hold the observation publisher for `ms` of host time (private test channel): it behaves as a full
   * publication queue, so observations raised meanwhile are dropped and counted; the first publication
   * after the hold is a publisher_overflow notice (docs/profile.md "Events").
   */
  /**
   * The next cycle wakes `ns` late (private test channel): it and every cycle scheduled before the wake
   * run at the wake time, as a real-time core catches up after a stall.
   */
  lateWake(ns: number): void {
    this.lateWakeNs = this.now + BigInt(this.machine.cycle_ns) + BigInt(ns);
  }
  private lateWakeNs = 0n;

  /** The host time read once for the message being handled (atHostTime), null otherwise. */
  private messageHostNs: bigint | null = null;
  /**
   * Handle a message on one reading of the host clock (CoreHost.handle): every decision it leads to (a
   * fenced command's lease check, a jog deadline, the end of an injected hold) is judged on the reading the
   * recording keeps with the request (`host_ns`). A paced replay hands the request over at that recorded
   * time, so it judges as the recorded core did; a second read microseconds later in the recording once
   * moved a hold's end past a cycle boundary the replay did not cross.
   */
  atHostTime<T>(ns: bigint, handle: () => T): T {
    this.messageHostNs = ns;
    try {
      return handle();
    } finally {
      this.messageHostNs = null;
    }
  }

  holdEventPublisher(ms: number): void {
    this.publisherHeldUntilNs = this.hostNow() + BigInt(ms) * 1_000_000n;
  }
  private publisherHeld(): boolean {
    return this.publisherHeldUntilNs !== 0n && this.publisherHeldUntilNs > this.hostNow();
  }
  /** Publish the count of dropped observations once the publisher is free again. */
  private reportLost(send: (m: FromCore) => void): void {
    if (this.lost.count === 0 || this.publisherHeld()) return;
    const payload = { dropped: BigInt(this.lost.count), first_dropped_ns: this.lost.first, last_dropped_ns: this.lost.last };
    this.lost.count = 0;
    this.dirty = true;
    send({ t: 'event', type: 'publisher_overflow', payload, time_ns: this.now });
  }

  /** Hold the next capture write in progress for `ms` of host time (private test channel). */
  holdCaptureWrite(ms: number): void {
    this.captureHeldUntilNs = this.hostNow() + BigInt(ms) * 1_000_000n;
    // Torn from the moment the test channel answers, not from the next cycle: on a loaded host that cycle
    // may come after the reader the test sends next.
    if (this.capture && !this.captureHeld) {
      this.capture.beginRecord();
      this.captureHeld = true;
    }
  }
  private captureHeldUntilNs = 0n;
  private captureHeld = false;

  private allStill(): boolean {
    for (let i = 0; i < this.n; i++) {
      if (!this.image.online[i]) continue; // an offline drive's last statusword says nothing about motion
      const s = stateOf(this.image.statusword[i]!);
      if (s === Ds402State.OperationEnabled || s === Ds402State.QuickStopActive) return false;
    }
    return true;
  }

  status(nowNs: bigint): CoreStatus {
    return buildStatus(this, nowNs);
  }

  /** Cycle timing since this incarnation started (histogram percentiles: see CycleHistogram). */
  timing(): CoreTiming {
    const late = this.lateness;
    const work = this.work;
    const ns = (v: number) => BigInt(Math.round(v));
    return {
      cycles: BigInt(this.cycleCount),
      overruns: BigInt(this.overruns),
      p50_lateness_ns: ns(late.quantile(0.5)),
      p99_lateness_ns: ns(late.quantile(0.99)),
      max_lateness_ns: late.count ? ns(late.max) : 0n,
      p50_work_ns: ns(work.quantile(0.5)),
      p99_work_ns: ns(work.quantile(0.99)),
      max_work_ns: work.count ? ns(work.max) : 0n,
    };
  }

  /** Core time of the last message from the service or the test channel (the quiet publication rate). */
  private lastActivityNs = 0n;
  noteActivity(): void {
    this.lastActivityNs = this.now;
  }

  /** Publish a status snapshot now (the host also calls this after a run of stepped cycles). */
  publish(nowNs: bigint): void {
    this.lastPublishNs = nowNs;
    this.lastPublishWall = performance.now();
    this.dirty = false;
    this.send({ t: 'status', status: this.status(nowNs) });
  }
}
