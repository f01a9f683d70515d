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

// The clocks as module bindings, not the globals: globalThis.performance and globalThis.process are
// accessor properties in Node, so every global read of them (twice a cycle and more) went through a getter.
import { performance } from 'node:perf_hooks';
import { hrtime } from 'node:process';
import { ProcessImage, type BusDriver, type BusSetup } from '../../drivers/bus.ts';
import { busSetupFor } from './bus-setup.ts';
import { controlwordFor, CW, Ds402State } from '../../drivers/ds402.ts';
import { stateOf } from './ds402-state.ts';
import { DriverHost } from '../../drivers/host.ts';
import type { CompiledMachine } from '../config/types.ts';
import { admit, type AdmissionView, type Cmd } from './admission.ts';
import type { CaptureRing } from './capture/ring.ts';
import { FaultMonitor } from './fault-monitor.ts';
import { FAULT, faultEntry, type FaultRecovery } from './faults.ts';
import { CycleHistogram, cycleTiming } from './histogram.ts';
import { HomingLane } from './homing.ts';
import { JogLane } from './jog.ts';
import { LaneArbiter } from './lanes.ts';
import type { PlanArena } from './plan-arena.ts';
import { PlanBuilder, TrajectoryLane, type Plan, type PlanRefusal, type TrajectoryEnd } from './trajectory.ts';
import { JOG_REASON, NATIVE_REASON } from './reasons.ts';
import { JOG_MODE, NATIVE_OP, type CommandResult, type JogStatus, type CoreStatus, type CoreTiming, type FromCore, type ToCore } from './protocol.ts';
import { captureCycle } from './record.ts';
import { buildStatus, type StatusView } from './status-view.ts';
import { FaultReset } from './fault-reset.ts';
import { ArmWait, ARM_SETTLE_NS } from './arm-wait.ts';
import { LeaseWatch } from './lease-watch.ts';
import { PlanIntake, type PlanBeside } from './plan-intake.ts';
import { TestHolds, type HeldCore } from './test-holds.ts';

export { CycleHistogram } from './histogram.ts';

export { ARM_SETTLE_NS } from './arm-wait.ts';
export { LEASE_GRACE_NS } from './lease-watch.ts';
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
const hrtimeBigint = hrtime.bigint;
const defaultHostClock = (): bigint => hrtimeBigint();



export class Core implements AdmissionView, StatusView, HeldCore {
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
  /**
   * When the cycle of `now` was scheduled: on the real-time clock `now` less its wake-up lateness. A Start
   * admitted after that cycle counts its plan time from here, so a plan runs on the cycle grid and not on
   * the one late wake it happened to follow.
   */
  nowScheduled = 0n;
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
  /** A large plan being taken in, a slice per cycle (plan-intake.ts). */
  private readonly intake: PlanIntake;
  /** Plan memory shared with the service (plan-arena.ts): a slot is given back when its plan is gone (keepSlots). */
  readonly planArena: PlanArena | null;
  /** MotionState bookkeeping (document 1 part 2): state and last event of the latest execution. */
  motionState = 0;
  lastEvent = 0;
  lastTrajectoryId = 0n;
  /** Outputs configured and not torch-class: the only ones an intent may drive (document 1 part 4 io_arm). */
  private readonly drivableOutputs: number;
  /** A finished Home is reported once its axes have really left operation enabled. */
  private homeDone: { sequence: bigint; ok: boolean; detail: string; reason: number; mask: number } | null = null;
  /** A reset_fault in progress (fault-reset.ts). */
  private readonly reset: FaultReset;
  /** An arm waiting for its drives (arm-wait.ts). */
  private readonly armWait: ArmWait;
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
  /** The lease check of each cycle (lease-watch.ts). */
  private readonly leaseWatch: LeaseWatch;
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
  /** The private test channel's holds (test-holds.ts): late wake, held publisher, held capture write. */
  readonly holds: TestHolds;

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
      if (!m.type.startsWith('native_') && !this.holds.admitEvent()) return;
      this.holds.reportLost(send);
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
    this.ioConfigured = (machine.io?.outputs.length ?? 0) > 0;
    this.capture = opts.capture ?? null;
    this.planArena = opts.planArena ?? null;
    this.holds = new TestHolds(this, this.capture);
    if (this.capture && this.capture.axisCount !== this.n) throw new RangeError(`capture ring has ${this.capture.axisCount} axes, the machine ${this.n}`);
    this.workClock = opts.workClock ?? defaultWorkClock;
    this.workIsWall = this.workClock === defaultWorkClock;
    const hostClock = opts.hostClock ?? defaultHostClock;
    this.hostIsDefault = hostClock === defaultHostClock;
    this.hostNow = () => this.messageHostNs ?? hostClock();
    this.leaseWatch = new LeaseWatch(this.hostIsDefault, this.hostNow);
    this.armWait = new ArmWait(opts.armSettleNs ?? ARM_SETTLE_NS);
    this.clockMode = opts.clockMode ?? 'realtime';
    this.scheduling = opts.scheduling ?? 'default';
    this.publishByWall = opts.publishByWall ?? false;
    this.intake = new PlanIntake(Number(machine.cycle_ns), this.clockMode, this.workClock);
    this.faults = new FaultMonitor(machine, this.image, this.all, (bit, axes) => this.onFaultLatched(bit, axes));
    this.reset = new FaultReset(this.faults);
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
    this.nowScheduled = nowNs;
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

  /** Handle one message from the service (what comes beside a prepare: plan-intake.ts PlanBeside). */
  handle(m: ToCore, beside?: PlanBeside): void {
    this.handleMessage(m, beside);
    // A discard, a Start (the plan it replaces), a refused or superseded prepare: their slots go back now.
    this.keepSlots();
  }

  /**
   * Give back every arena slot whose plan the core no longer keeps (plan-arena.ts): the plan being built,
   * the prepared one and the executing one are all it keeps. Called after each message and each cycle.
   */
  private keepSlots(): void {
    this.planArena?.keep(this.intake.slot, this.preparedPlan?.slot, this.trajectory.plan?.slot);
  }

  private handleMessage(m: ToCore, beside?: PlanBeside): void {
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
        this.prepare(m, beside ?? {});
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
        const superseded = this.armWait.begin(m, this.now);
        if (superseded) this.reply(superseded, NATIVE_REASON.not_ready, this.enableMask, 'superseded by a newer arm');
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
        this.reset.begin({ id: m.id, sequence: r.Sequence, generation: m.generation, mask: sel });
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
        // Plan time counts from the scheduled time of the cycle the Start follows (docs/profile.md "Output
        // intents": the cycle grid counted from the Start). From its wake-up instead, a Start after a late
        // wake put every later cycle that much earlier in plan time than on the grid, and an intent due a few
        // microseconds after one of them was reached only by the next: io_marker_late on a cycle that was
        // not late at all (seen on the real-time clock with 22 us of jitter).
        this.trajectory.begin(plan, this.nowScheduled, r.Sequence, this.image.ioOutputWord);
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
   * prepare: convert and check a point list, keep it in the plan slot (replacing an older one), at once or
   * over the following cycles (plan-intake.ts); the older plan stays in the slot until then.
   */
  private prepare(m: Extract<ToCore, { t: 'prepare' }>, { workspace, slot, answerAtCycle }: PlanBeside): void {
    const asCmd: Cmd = { t: 'cmd', id: m.id, op: 'prepare', generation: m.generation, axisMask: m.axisMask, handle: m.handle };
    // The slot is the core's from here, whatever the answer (a refused plan's slot goes back at once: keepSlots).
    if (slot !== undefined) this.planArena?.adopt(slot);
    const refusal = admit(this, asCmd);
    if (refusal) return void this.reply(asCmd, refusal.reason, refusal.mask, refusal.detail);
    const build = { builder: new PlanBuilder(this.machine, m, workspace), cmd: asCmd, ...(answerAtCycle !== undefined ? { answerAt: answerAtCycle } : {}), ...(slot !== undefined ? { slot } : {}) };
    const now = this.intake.begin(build, (cmd) => this.reply(cmd, NATIVE_REASON.cancelled, 0, 'replaced by a newer preparation'));
    if (now) this.prepared(asCmd, now, slot);
  }

  /** One slice of the plan being built (each cycle, `workStart` its start on the work clock); answers the prepare when it is done. */
  private advanceBuild(workStart: number): void {
    const done = this.intake.advance(this.cycleCount, workStart);
    if (!done) return;
    const b = done.build;
    // The fence must still hold after the cycles the build took (a stop or lost lease meanwhile).
    const refusal = admit(this, b.cmd);
    if (refusal) return void this.reply(b.cmd, refusal.reason, refusal.mask, refusal.detail);
    this.prepared(b.cmd, done.out, b.slot);
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
    if (!this.armWait.waiting) return;
    const withdrawn = this.enableMask === 0 || this.faults.size !== 0 || this.stopDraining || this.faults.safetyFaultMask !== 0;
    const e = this.armWait.step(this.now, withdrawn, (this.enabledMask() & this.enableMask) === this.enableMask);
    if (!e) return;
    if (e.end === 'settled') return this.completeArm(e.m);
    if (e.end === 'withdrawn') this.reply(e.m, this.faults.safetyFaultMask || this.stopDraining ? NATIVE_REASON.inhibited : NATIVE_REASON.not_ready, this.enableMask, 'enable was withdrawn or a fault latched while arm waited');
    else this.reply(e.m, NATIVE_REASON.not_ready, this.enableMask, `enabled axes did not reach operation enabled within ${this.armWait.settleNs / 1_000_000n} ms`);
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
    const done = this.reset.step((o) => {
      const info = FaultMonitor.info(o.bit);
      this.send({ t: 'event', type: 'fault_cleared', payload: { bit: 1 << o.bit, name: info.name, axis_mask: o.axis_mask, recovery: info.recovery } });
      if (info.recovery === 'rehome') this.homeValidMask &= ~o.axis_mask;
    });
    if (!done) return;
    const { reset: r, outcomes, persistent } = done;
    this.lastResetSequence = r.sequence;
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

  /** The lease ran out in host time without a renewal reaching the core: it stops on its own. */
  private stepLease(wallMs: number): void {
    if (!this.grant.active || !this.leaseWatch.expired(this.grant, wallMs)) return;
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
    nowNs = this.holds.wakeTime(nowNs);
    this.now = nowNs;
    this.nowScheduled = scheduledNs;
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
    const resetting = this.reset.pulseMask;
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
    if (this.holds.anyLost) this.holds.reportLost(this.sendRaw);
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
    if (this.holds.captureWritable()) captureCycle(this, this.capture!, nowNs, lateness, workNs, en);
  }

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
    return cycleTiming(this.cycleCount, this.overruns, this.lateness, this.work);
  }

  /** A publication is due at the end of this cycle (or the next). */
  markDirty(): void {
    this.dirty = true;
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
