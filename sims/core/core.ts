// The real-time core's cycle logic, independent of how it is scheduled (worker thread in real time,
// faster than real time, or stepped by replay). One clock: the host monotonic ns passed into `cycle`.
// The CiA 402 drive handling is written once here, above the bus driver interface.

import { ProcessImage, STANDARD_MAPPING, type BusDriver, type BusSetup } from '../../drivers/bus.ts';
import { CW, decodeStatusword, Ds402State, DS402_STATE_NAMES, MODE, SW } from '../../drivers/ds402.ts';
import type { CompiledMachine } from '../config/types.ts';
import { AX, REC, writeProcessImage, type CaptureRing } from './capture.ts';
import { FAULT, FAULT_INFO, faultEntry, type FaultOutcome, type FaultRecovery } from './faults.ts';
import { NATIVE_OP, type AxisStatus, type CommandResult, type CoreStatus, type CoreTiming, type FromCore, type ToCore } from './protocol.ts';

/** Native command reasons (CommandResult.Reason). 2, 5, 7, 8 are documented; the rest are profile. */
export const NATIVE_REASON = {
  none: 0,
  inhibited: 1,
  not_ready: 2,
  mode_conflict: 3,
  no_grant: 4,
  capacity: 5,
  wrong_generation: 6,
  pdo_mapping_mismatch: 7,
  outside_limits_outward: 8,
  unsupported: 9,
  invalid_axis_mask: 10,
  fault_persists: 11,
  io_not_configured: 12,
  io_readback_disagreement: 13,
  io_fast_input_unsatisfied: 14,
  io_exchange_lost: 15,
  homing_failed: 16,
  cancelled: 17,
} as const;

/** Cycles a fault reset pulse is held, and cycles the core waits for drives to leave Fault after it. */
const RESET_PULSE_CYCLES = 3;
const RESET_SETTLE_CYCLES = 30;
/** Feedback not fresh for this many consecutive cycles latches pdo_stale. */
const STALE_CYCLES = 5;

type Cmd = Extract<ToCore, { t: 'cmd' }>;

/**
 * Fixed-bucket histogram of a per-cycle duration in ns (cycle lateness, work time). Buckets are
 * log-spaced, 20 per decade from 1 us to 100 ms (each about 12 % wide), plus one below 1 us (zero and
 * negative values included) and one at or above 100 ms. Recording allocates nothing; percentiles are the
 * upper edge of the bucket that holds the rank, clamped to the observed minimum and maximum (so they
 * over-estimate by at most one bucket width and are exact when all samples are equal).
 */
export class CycleHistogram {
  static readonly LOW_NS = 1_000;
  static readonly HIGH_NS = 100_000_000;
  static readonly PER_DECADE = 20;
  /** Upper edge of bucket k for k = 0..100 (bucket k >= 1 holds EDGES[k-1] <= v < EDGES[k]). */
  static readonly EDGES: Float64Array = (() => {
    const e = new Float64Array(101);
    for (let k = 0; k <= 100; k++) e[k] = CycleHistogram.LOW_NS * 10 ** (k / CycleHistogram.PER_DECADE);
    e[100] = CycleHistogram.HIGH_NS;
    return e;
  })();
  /** Samples per bucket: [0] below 1 us, [1..100] log buckets, [101] 100 ms and above. */
  readonly counts = new Float64Array(102);
  count = 0;
  min = Infinity;
  max = -Infinity;

  /** Adds one sample (ns). */
  record(v: number): void {
    const edges = CycleHistogram.EDGES;
    let k: number;
    if (!(v >= CycleHistogram.LOW_NS)) k = 0;
    else if (v >= CycleHistogram.HIGH_NS) k = 101;
    else {
      k = Math.floor(Math.log10(v / CycleHistogram.LOW_NS) * CycleHistogram.PER_DECADE) + 1;
      // log10 may round across an edge: settle on the bucket whose bounds hold v
      if (k > 1 && v < edges[k - 1]!) k--;
      else if (k < 100 && v >= edges[k]!) k++;
    }
    this.counts[k]!++;
    this.count++;
    if (v < this.min) this.min = v;
    if (v > this.max) this.max = v;
  }

  /** The q-quantile (0 < q <= 1) in whole ns; 0 with no samples. */
  quantile(q: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let k = 0; k < 102; k++) {
      seen += this.counts[k]!;
      if (seen >= rank) {
        const upper = k === 101 ? this.max : Math.ceil(CycleHistogram.EDGES[k]!);
        return Math.min(this.max, Math.max(this.min, upper));
      }
    }
    return this.max;
  }

  reset(): void {
    this.counts.fill(0);
    this.count = 0;
    this.min = Infinity;
    this.max = -Infinity;
  }
}

export interface CoreOptions {
  /** Telemetry capture ring: one CycleCaptureRecordV2 per cycle (none: no capture). */
  capture?: CaptureRing;
  /**
   * Clock measuring the time spent inside a cycle (work_ns), in ns as a double. Default
   * performance.now() * 1e6; a stepped test may pass its own.
   */
  workClock?: () => number;
}

const defaultWorkClock = (): number => performance.now() * 1e6;

interface Homing {
  mask: number;
  sequence: bigint;
  deadlineNs: bigint;
  started: number; // axes whose homing start bit is set
}

interface Reset {
  id: number;
  sequence: bigint;
  generation: bigint;
  mask: number;
  cycle: number;
}

export class Core {
  readonly image: ProcessImage;
  private readonly n: number;
  private readonly all: number;
  private sequence = 0n;
  /** Cycles run by this incarnation (a number: exact to 2^53, and no bigint allocation per cycle). */
  private cycleCount = 0;
  private lastPublishNs = 0n;
  private now = 0n;
  /** Axes the core wants enabled. */
  private enableMask = 0;
  private armed = false;
  private halted = false;
  private homeValidMask = 0;
  private homeEpoch = 0n;
  private ioArmed = false;
  private stopDraining: bigint | null = null;
  private homing: Homing | null = null;
  /** A finished Home is reported once its axes have really left operation enabled. */
  private homeDone: { sequence: bigint; ok: boolean; detail: string; reason: number; mask: number } | null = null;
  private reset: Reset | null = null;
  private lastResetSequence = 0n;
  /** Latched fault bits -> axis mask. */
  private faults = new Map<number, number>();
  private staleCycles: number[];
  private feSince: Array<bigint | null>;
  private grant = { generation: 0n, deadlineNs: 0n, active: false, axisMask: 0 };
  /** Native grant receipt bookkeeping (GrantObservation, docs/profile.md "Grant observation"). */
  private grantTicket = 0n;
  private nativeGeneration = 0n;
  private stopAckId = 0n;
  private overruns = 0;
  /** Cycle lateness (wake minus scheduled) and work time (inside cycle()) since this incarnation started. */
  readonly lateness = new CycleHistogram();
  readonly work = new CycleHistogram();
  private readonly maxLatenessNs: number;
  /** Latched fault bits as a bit set (execution_fault_reasons), kept in step with `faults`. */
  private faultBits = 0;
  /** Return of the last driver.exchange (bus_submission_return_code). */
  private busReturn = 0;
  /** Host time of each axis's last fresh feedback (pdo_observed_time_ns). */
  private readonly observedNs: bigint[];
  private readonly ioConfigured: boolean;
  readonly capture: CaptureRing | null;
  private readonly workClock: () => number;
  private dirty = true;
  private lastEnabledMask = 0;
  private lastArmed = false;

  constructor(
    readonly machine: CompiledMachine,
    readonly driver: BusDriver,
    readonly incarnation: string,
    private readonly send: (m: FromCore) => void,
    opts: CoreOptions = {},
  ) {
    this.n = machine.axes.length;
    this.all = this.n >= 32 ? 0xffffffff : (1 << this.n) - 1;
    this.image = new ProcessImage(this.n);
    this.staleCycles = new Array<number>(this.n).fill(0);
    this.feSince = new Array<bigint | null>(this.n).fill(null);
    this.observedNs = new Array<bigint>(this.n).fill(0n);
    this.maxLatenessNs = Number(machine.max_cycle_lateness_ns);
    this.ioConfigured = (machine.io?.outputs.length ?? 0) > 0;
    this.capture = opts.capture ?? null;
    if (this.capture && this.capture.axisCount !== this.n) throw new RangeError(`capture ring has ${this.capture.axisCount} axes, the machine ${this.n}`);
    this.workClock = opts.workClock ?? defaultWorkClock;
  }

  busSetup(): BusSetup {
    return {
      cycleNs: this.machine.cycle_ns,
      axes: this.machine.axes.map((a) => ({
        index: a.index,
        id: a.id,
        slavePosition: a.slave_position,
        countsPerUnit: a.counts_per_unit,
        sign: a.sign,
        minPosition: a.min_position,
        maxPosition: a.max_position,
        maxVelocity: a.max_velocity,
        followingError: a.following_error,
      })),
      expectedMapping: STANDARD_MAPPING,
      ioOutputs: this.machine.io?.outputs.length ?? 0,
      ioInputs: this.machine.io?.inputs.length ?? 0,
    };
  }

  async start(nowNs: bigint): Promise<void> {
    const startup = await this.driver.open(this.busSetup());
    for (let i = 0; i < this.n; i++) this.image.modeOfOperation[i] = MODE.cyclicSyncPosition;
    // A drive whose PDO mapping differs cannot be trusted until the bus is restarted (fault bit 11).
    if (startup.mappingMismatchMask) this.latch(FAULT.restart_required!, startup.mappingMismatchMask);
    this.send({
      t: 'ready',
      incarnation: this.incarnation,
      nowNs,
      startupNotes: startup.notes,
      mappingMismatchMask: startup.mappingMismatchMask,
      ...(this.capture ? { capture: this.capture.buffer } : {}),
    });
  }

  /** Handle one message from the service. */
  handle(m: ToCore): void {
    switch (m.t) {
      case 'grant': {
        const wasActive = this.grant.active;
        this.grantTicket++;
        if (wasActive !== m.active || m.generation !== this.grant.generation) this.nativeGeneration++;
        this.grant = { generation: m.generation, deadlineNs: m.deadlineNs, active: m.active, axisMask: m.axisMask };
        // Authority ended (release, expiry, revocation, retirement): nobody controls the cell, so it is
        // brought to the safe state a stop leaves (docs/profile.md "Grant end").
        if (wasActive && !m.active && this.stopDraining === null) this.safeState('authority ended');
        this.dirty = true;
        return;
      }
      case 'cmd':
        this.command(m);
        return;
      case 'cancel_home':
        this.finishHoming(false, 'home cancelled: authority lost', NATIVE_REASON.cancelled);
        return;
      case 'inject':
      case 'shutdown':
        return; // handled by the host (worker), which owns the driver's private test hooks
    }
  }

  private result(op: number, reason: number, axisMask: number, generation: bigint, accepted = reason === NATIVE_REASON.none): CommandResult {
    return { Sequence: ++this.sequence, Handle: 0n, Generation: generation, Operation: op, Result: accepted ? 0 : 1, Reason: reason, AxisMask: axisMask };
  }

  private reply(m: Cmd, reason: number, axisMask: number, detail?: string, extra?: Record<string, unknown>): CommandResult {
    const r = this.result(NATIVE_OP[m.op], reason, axisMask, m.generation);
    // Publish the state the command produced before its receipt, so a client reading status after the
    // reply sees it (arm: "afterwards status core.armed equals 1").
    this.publish(this.now);
    this.send({ t: 'reply', id: m.id, result: r, detail, extra });
    return r;
  }

  private get faultMask(): number {
    let m = 0;
    for (const v of this.faults.values()) m |= v;
    return m;
  }

  private get safetyFaultMask(): number {
    return this.image.safetyChainClosed ? 0 : this.all;
  }

  /**
   * Axes whose drive reports operation enabled. An offline slave's inputs are not refreshed (its image
   * keeps the last statusword), so it is never counted as enabled.
   */
  private enabledMask(): number {
    const img = this.image;
    let m = 0;
    for (let i = 0; i < this.n; i++) if (img.online[i] === 1 && decodeStatusword(img.statusword[i]!) === Ds402State.OperationEnabled) m |= 1 << i;
    return m;
  }

  private command(m: Cmd): void {
    const mask = m.axisMask >>> 0;
    switch (m.op) {
      case 'stop': {
        this.safeState('home cancelled by stop');
        this.stopDraining = this.reply(m, NATIVE_REASON.none, this.all).Sequence;
        return;
      }
      case 'mark':
        this.reply(m, NATIVE_REASON.none, 0);
        return;
      case 'enable': {
        if ((mask & ~this.all) !== 0) return void this.reply(m, NATIVE_REASON.invalid_axis_mask, mask, 'axis_mask outside the configured axes');
        if (mask !== 0 && this.safetyFaultMask) return void this.reply(m, NATIVE_REASON.inhibited, mask, 'safety chain open');
        if (mask & (this.faults.get(FAULT.restart_required!) ?? 0)) {
          return void this.reply(m, NATIVE_REASON.pdo_mapping_mismatch, mask & this.faults.get(FAULT.restart_required!)!, 'PDO mapping differs: restart required');
        }
        if (mask & this.faultMask) return void this.reply(m, NATIVE_REASON.not_ready, mask, 'latched faults on selected axes');
        if (this.homing) return void this.reply(m, NATIVE_REASON.mode_conflict, mask, 'native Home in progress');
        if (this.stopDraining !== null) return void this.reply(m, NATIVE_REASON.inhibited, mask, 'stop draining');
        this.enableMask = mask;
        if (mask === 0) this.armed = false;
        this.halted = false;
        this.dirty = true;
        this.reply(m, NATIVE_REASON.none, mask);
        return;
      }
      case 'arm': {
        if (this.safetyFaultMask) return void this.reply(m, NATIVE_REASON.inhibited, 0, 'safety chain open');
        if (this.faults.size) return void this.reply(m, NATIVE_REASON.not_ready, this.faultMask, 'latched faults');
        if (this.homing) return void this.reply(m, NATIVE_REASON.mode_conflict, this.homing.mask, 'native Home in progress');
        const en = this.enabledMask();
        if (this.enableMask === 0 || (en & this.enableMask) !== this.enableMask) {
          return void this.reply(m, NATIVE_REASON.not_ready, this.enableMask, 'enabled axes have not reached operation enabled');
        }
        this.armed = true;
        this.dirty = true;
        this.reply(m, NATIVE_REASON.none, this.enableMask);
        return;
      }
      case 'halt': {
        const ready = this.armed && this.enableMask !== 0 && (this.enabledMask() & this.enableMask) === this.enableMask && this.faults.size === 0;
        if (!ready || this.homing || this.stopDraining !== null) return void this.reply(m, NATIVE_REASON.inhibited, this.enableMask, 'core not armed, enabled and ready');
        this.halted = true; // controlled deceleration to an enabled hold (no trajectory or jog is active in this build)
        this.dirty = true;
        this.reply(m, NATIVE_REASON.none, this.enableMask);
        return;
      }
      case 'home': {
        if (mask === 0 || (mask & ~this.all) !== 0) return void this.reply(m, NATIVE_REASON.invalid_axis_mask, mask, 'axis_mask must select configured axes');
        if (this.safetyFaultMask) return void this.reply(m, NATIVE_REASON.inhibited, mask, 'safety chain open');
        if (this.faults.size) return void this.reply(m, NATIVE_REASON.not_ready, this.faultMask, 'latched faults');
        if (this.homing || this.stopDraining !== null) return void this.reply(m, NATIVE_REASON.mode_conflict, mask, 'Home or stop in progress');
        const r = this.reply(m, NATIVE_REASON.none, mask);
        this.homing = { mask, sequence: r.Sequence, deadlineNs: this.now + 60_000_000_000n, started: 0 };
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
        this.reply(m, NATIVE_REASON.none, 0, undefined, { recovery: this.recovery([], this.lastResetSequence, '') });
        return;
      case 'restore_anchor': {
        if (mask === 0 || (mask & ~this.all) !== 0) return void this.reply(m, NATIVE_REASON.invalid_axis_mask, mask);
        if (this.armed || this.enabledMask() || this.homing) return void this.reply(m, NATIVE_REASON.mode_conflict, mask, 'armed, enabled or commissioning');
        for (let i = 0; i < this.n; i++) {
          if (mask & (1 << i) && !this.image.absoluteValid[i]) return void this.reply(m, NATIVE_REASON.not_ready, 1 << i, 'absolute source invalid');
        }
        this.homeValidMask |= mask;
        this.homeEpoch++;
        this.send({ t: 'event', type: 'home_epoch_changed', payload: { previous: this.homeEpoch - 1n, current: this.homeEpoch, home_valid_mask: this.homeValidMask, source: 'anchor' } });
        this.dirty = true;
        this.reply(m, NATIVE_REASON.none, mask, undefined, { recovery: this.recovery([], this.lastResetSequence, '') });
        return;
      }
      case 'io_arm':
      case 'io_disarm': {
        if (!this.machine.io || this.machine.io.outputs.length === 0) return void this.reply(m, NATIVE_REASON.io_not_configured, 0, 'no cell I/O configured');
        if (m.op === 'io_disarm') {
          this.ioArmed = false;
          this.image.ioOutputWord = 0;
          this.dirty = true;
          return void this.reply(m, NATIVE_REASON.none, 0);
        }
        if (this.safetyFaultMask) return void this.reply(m, NATIVE_REASON.inhibited, 0, 'safety chain open');
        if (this.image.wkcActual < this.image.wkcExpected || !this.image.ioInputValid) return void this.reply(m, NATIVE_REASON.io_exchange_lost, 0, 'no current complete exchange');
        const outputs = this.machine.io.outputs.length;
        const outMask = outputs >= 16 ? 0xffff : (1 << outputs) - 1;
        if ((this.image.ioInputWord & outMask) !== (this.image.ioOutputWord & outMask)) {
          return void this.reply(m, NATIVE_REASON.io_readback_disagreement, 0, 'output readback differs from the commanded OFF state');
        }
        const fastMask = this.fastInputMask();
        if (((this.image.ioInputWord >>> 16) & fastMask) !== fastMask) return void this.reply(m, NATIVE_REASON.io_fast_input_unsatisfied, 0, 'a fast input is not satisfied');
        this.ioArmed = true;
        this.dirty = true;
        this.reply(m, NATIVE_REASON.none, 0);
        return;
      }
      default:
        this.reply(m, NATIVE_REASON.unsupported, mask, `native ${m.op} is not available in this core build`);
    }
  }

  /** Disarm, disable, every output OFF with permission withdrawn, Home cancelled. */
  private safeState(why: string): void {
    this.armed = false;
    this.halted = false;
    this.enableMask = 0;
    this.ioArmed = false;
    this.image.ioOutputWord = 0; // every cell output commanded OFF, immediately
    this.finishHoming(false, why, NATIVE_REASON.cancelled);
    this.dirty = true;
  }

  private fastInputMask(): number {
    let m = 0;
    this.machine.io?.inputs.forEach((inp, i) => {
      if (inp.fast) m |= 1 << i;
    });
    return m;
  }

  private latch(bit: number, axisMask: number): void {
    const prev = this.faults.get(bit) ?? 0;
    if ((prev | axisMask) === prev) return;
    this.faults.set(bit, prev | axisMask);
    this.faultBits |= 1 << bit;
    const info = FAULT_INFO.get(bit)!;
    this.send({ t: 'event', type: 'fault_latched', payload: { bit: 1 << bit, name: info.name, axis_mask: prev | axisMask, recovery: info.recovery } });
    // Fault reaction: disarm and disable; motion needs a reset and a new enable and arm.
    this.armed = false;
    this.halted = false;
    this.enableMask = 0;
    this.ioArmed = false;
    this.image.ioOutputWord = 0;
    if (this.homing) this.finishHoming(false, `home aborted: ${info.name}`, NATIVE_REASON.homing_failed, false);
    this.dirty = true;
  }

  /** Whether the condition behind a latched bit is still present for the given axes. */
  private persists(bit: number, axes: number): boolean {
    const img = this.image;
    const each = (f: (i: number) => boolean) => {
      for (let i = 0; i < this.n; i++) if (axes & (1 << i) && f(i)) return true;
      return false;
    };
    switch (bit) {
      case FAULT.drive_fault:
      case FAULT.following_error:
        return each((i) => decodeStatusword(img.statusword[i]!) === Ds402State.Fault);
      case FAULT.safety_chain_open:
        return !img.safetyChainClosed;
      case FAULT.pdo_stale:
        return each((i) => !img.pdoFresh[i]);
      case FAULT.slave_offline:
        return each((i) => !img.online[i]);
      case FAULT.working_counter:
        return img.wkcActual < img.wkcExpected;
      case FAULT.io_readback_disagreement:
        return (img.ioInputWord & 0xffff) !== (img.ioOutputWord & 0xffff);
      case FAULT.restart_required:
        return true; // only a bus restart clears it
      default:
        return false; // homing_failed, absolute_disagreement: the evidence is gone, recovery is a new Home
    }
  }

  private detectFaults(): void {
    const img = this.image;
    if (!img.safetyChainClosed) this.latch(FAULT.safety_chain_open!, this.all);
    if (img.wkcActual < img.wkcExpected) this.latch(FAULT.working_counter!, this.all);
    for (let i = 0; i < this.n; i++) {
      const bit = 1 << i;
      if (!img.online[i]) {
        this.latch(FAULT.slave_offline!, bit);
        continue;
      }
      this.staleCycles[i] = img.pdoFresh[i] ? 0 : this.staleCycles[i]! + 1;
      if (this.staleCycles[i]! >= STALE_CYCLES) this.latch(FAULT.pdo_stale!, bit);
      if (!img.pdoFresh[i]) continue;
      if (decodeStatusword(img.statusword[i]!) === Ds402State.Fault) {
        // 0x8611: the drive's own following error trip.
        this.latch(img.errorCode[i] === 0x8611 ? FAULT.following_error! : FAULT.drive_fault!, bit);
      }
      // The core's own following error watch (limits.following_error for following_error_timeout_ms).
      const a = this.machine.axes[i]!;
      const enabled = decodeStatusword(img.statusword[i]!) === Ds402State.OperationEnabled && img.modeDisplay[i] === MODE.cyclicSyncPosition;
      if (enabled && Math.abs(img.followingError[i]!) > a.following_error * a.counts_per_unit) {
        this.feSince[i] ??= this.now;
        if (this.now - this.feSince[i]! >= BigInt(a.following_error_timeout_ms) * 1_000_000n) this.latch(FAULT.following_error!, bit);
      } else this.feSince[i] = null;
    }
  }

  private stepHoming(): void {
    const h = this.homing;
    if (!h) return;
    if (this.now > h.deadlineNs) return this.finishHoming(false, 'Home did not complete within 60 s', NATIVE_REASON.homing_failed);
    let attained = 0;
    for (let i = 0; i < this.n; i++) {
      if (!(h.mask & (1 << i))) continue;
      const sw = this.image.statusword[i]!;
      const st = decodeStatusword(sw);
      if (st === Ds402State.OperationEnabled && this.image.modeDisplay[i] === MODE.homing) h.started |= 1 << i;
      if (h.started & (1 << i)) {
        if (sw & SW.opMode13) {
          this.latch(FAULT.homing_failed!, 1 << i);
          return;
        }
        if (sw & SW.opMode12) attained |= 1 << i;
      }
    }
    if (attained === h.mask) this.finishHoming(true, 'Home complete', NATIVE_REASON.none);
  }

  private finishHoming(ok: boolean, detail: string, reason: number, notify = true): void {
    const h = this.homing;
    if (!h) return;
    this.homing = null;
    // Home leaves the selected axes disabled (document 1 part 3 machine effects).
    this.enableMask &= ~h.mask;
    for (let i = 0; i < this.n; i++) if (h.mask & (1 << i)) this.image.modeOfOperation[i] = MODE.cyclicSyncPosition;
    if (ok) {
      this.homeValidMask |= h.mask;
      this.homeEpoch++;
      this.send({ t: 'event', type: 'home_epoch_changed', payload: { previous: this.homeEpoch - 1n, current: this.homeEpoch, home_valid_mask: this.homeValidMask, source: 'home' } });
    }
    void notify;
    this.dirty = true;
    this.homeDone = { sequence: h.sequence, ok, detail, reason, mask: h.mask };
  }

  private stepReset(): void {
    const r = this.reset;
    if (!r) return;
    r.cycle++;
    if (r.cycle <= RESET_PULSE_CYCLES + RESET_SETTLE_CYCLES) {
      // keep pulsing/settling until every selected drive left Fault, or the settle time ran out
      const stillFault = [...this.faults.keys()].some((b) => (b === FAULT.drive_fault || b === FAULT.following_error) && this.persists(b, r.mask & this.faults.get(b)!));
      if (stillFault || r.cycle <= RESET_PULSE_CYCLES) return;
    }
    this.reset = null;
    this.lastResetSequence = r.sequence;
    const outcomes: FaultRecovery[] = [];
    let persistent = false;
    for (const [bit, axes] of this.faults) {
      const sel = axes & r.mask;
      if (!sel) {
        outcomes.push(faultEntry(bit, axes, 'not_selected'));
        continue;
      }
      const p = this.persists(bit, sel);
      persistent ||= p;
      outcomes.push(faultEntry(bit, sel, p ? 'persists' : 'cleared'));
    }
    if (!persistent) {
      for (const o of outcomes) {
        if (o.outcome !== 'cleared') continue;
        const left = this.faults.get(o.bit)! & ~o.axis_mask;
        if (left) this.faults.set(o.bit, left);
        else {
          this.faults.delete(o.bit);
          this.faultBits &= ~(1 << o.bit);
        }
        const info = FAULT_INFO.get(o.bit)!;
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
      faults: [...this.faults].sort((a, b) => a[0] - b[0]).map(([bit, axes]) => faultEntry(bit, axes)),
      reset_sequence: resetSequence,
      reason,
      outcomes,
    };
  }

  /** One cycle at host time `nowNs`, scheduled for `scheduledNs`. */
  cycle(nowNs: bigint, scheduledNs: bigint): void {
    const workStart = this.workClock();
    this.now = nowNs;
    this.cycleCount++;
    const lateness = Number(nowNs - scheduledNs);
    this.lateness.record(lateness);
    if (lateness > this.maxLatenessNs) this.overruns++;

    const img = this.image;
    const homingMask = this.homing?.mask ?? 0;
    const resetting = this.reset !== null && this.reset.cycle < RESET_PULSE_CYCLES;
    for (let i = 0; i < this.n; i++) {
      const bit = 1 << i;
      const state = decodeStatusword(img.statusword[i]!);
      const wantEnabled = ((this.enableMask | homingMask) & bit) !== 0 && this.stopDraining === null;
      let cw = this.controlwordFor(state, wantEnabled);
      if (state === Ds402State.Fault && resetting && this.reset!.mask & bit) cw = CW.faultReset;
      if (homingMask & bit) {
        img.modeOfOperation[i] = MODE.homing;
        if (state === Ds402State.OperationEnabled && img.modeDisplay[i] === MODE.homing) cw |= CW.homingStart;
      }
      img.controlword[i] = cw;
      // Hold: command the actual position (no trajectory or jog lane in this build).
      img.targetPosition[i] = img.positionActual[i]!;
    }
    this.busReturn = this.driver.exchange(img, nowNs);
    for (let i = 0; i < this.n; i++) if (img.pdoFresh[i] === 1) this.observedNs[i] = nowNs;

    this.detectFaults();
    this.stepHoming();
    this.stepReset();
    if (this.homeDone && (this.enabledMask() & this.homeDone.mask) === 0) {
      const { mask: _m, ...d } = this.homeDone;
      this.homeDone = null;
      this.publish(nowNs);
      this.send({ t: 'home_done', ...d });
    }
    if (this.stopDraining !== null && this.allStill()) {
      const seq = this.stopDraining;
      this.stopDraining = null;
      this.dirty = true;
      this.stopAckId = seq;
      this.send({ t: 'stop_drained', sequence: seq });
    }
    const en = this.enabledMask();
    if (en !== this.lastEnabledMask || this.armed !== this.lastArmed) {
      if (en !== this.lastEnabledMask) this.send({ t: 'event', type: 'enable_changed', payload: { axis_enable_mask: en, armed: this.armed } });
      if (this.armed !== this.lastArmed) this.send({ t: 'event', type: 'arm_changed', payload: { axis_enable_mask: en, armed: this.armed } });
      this.lastEnabledMask = en;
      this.lastArmed = this.armed;
      this.dirty = true;
    }
    if (this.dirty || nowNs - this.lastPublishNs >= 10_000_000n) this.publish(nowNs);
    const workNs = this.workClock() - workStart;
    this.work.record(workNs);
    if (this.capture) this.captureCycle(this.capture, nowNs, lateness, workNs, en);
  }

  /**
   * One CycleCaptureRecordV2 for the cycle that just ran (state after the exchange and the cycle's
   * logic). Allocates nothing. Fields the core does not know in this build stay zero (trajectory, jog,
   * collision watchdog, coordinates, audits, vendor ext_ registers, master state).
   */
  private captureCycle(ring: CaptureRing, nowNs: bigint, lateness: number, workNs: number, enabled: number): void {
    const img = this.image;
    const g = this.grant;
    const w = ring.beginRecord();
    w.u64(REC.t_ns, nowNs);
    w.u64n(REC.cycle, this.cycleCount);
    w.u64n(REC.work_ns, workNs > 0 ? Math.round(workNs) : 0);
    w.i64n(REC.cycle_jitter_ns, lateness);
    w.u64(REC.app_grant_generation, g.generation);
    w.u64(REC.control_generation, g.generation);
    w.u64(REC.home_epoch, this.homeEpoch);
    w.u64(REC.grant_deadline_host_ns, g.deadlineNs);
    w.i64n(REC.bus_submission_return_code, this.busReturn);
    w.u32(REC.armed, this.armed ? 1 : 0);
    w.u32(REC.axis_enable_mask, enabled >>> 0);
    w.u32(REC.grant_active, g.active ? 1 : 0);
    w.u32(REC.grant_axis_mask, g.axisMask >>> 0);
    w.u32(REC.safety_fault_mask, this.safetyFaultMask >>> 0);
    w.u32(REC.execution_fault_reasons, this.faultBits >>> 0);
    w.u32(REC.home_valid_mask, this.homeValidMask >>> 0);
    w.u32(REC.io_configured, this.ioConfigured ? 1 : 0);
    w.u32(REC.io_armed, this.ioArmed ? 1 : 0);
    writeProcessImage(w, img);
    for (let i = 0; i < this.n; i++) {
      const a = w.axis(i);
      const online = img.online[i] === 1;
      // brake_state (profile): 0 unknown (slave offline), 1 engaged, 2 released; released exactly when
      // the drive reports operation enabled, as status axes[].brake_engaged.
      w.u32(a + AX.brake_state, !online ? 0 : decodeStatusword(img.statusword[i]!) === Ds402State.OperationEnabled ? 2 : 1);
      w.u64(a + AX.pdo_observed_time_ns, this.observedNs[i]!);
      // One absolute source per axis in this profile: element 0 of absolute_value / absolute_valid.
      w.i32(a + AX.absolute_value, img.absolutePosition[i]!);
      w.u8(a + AX.absolute_valid, img.absoluteValid[i]!);
    }
    ring.commit();
  }

  /** The CiA 402 controlword that moves a drive one step toward enabled (or away from it). */
  private controlwordFor(state: Ds402State, wantEnabled: boolean): number {
    if (state === Ds402State.Fault) return CW.disableVoltage;
    if (!wantEnabled) return state === Ds402State.OperationEnabled ? CW.quickStop : CW.disableVoltage;
    switch (state) {
      case Ds402State.SwitchOnDisabled:
        return CW.shutdown;
      case Ds402State.ReadyToSwitchOn:
        return CW.switchOn;
      case Ds402State.SwitchedOn:
      case Ds402State.OperationEnabled:
        return CW.enableOperation;
      default:
        return CW.disableVoltage;
    }
  }

  private allStill(): boolean {
    for (let i = 0; i < this.n; i++) {
      if (!this.image.online[i]) continue; // an offline drive's last statusword says nothing about motion
      const s = decodeStatusword(this.image.statusword[i]!);
      if (s === Ds402State.OperationEnabled || s === Ds402State.QuickStopActive) return false;
    }
    return true;
  }

  status(nowNs: bigint): CoreStatus {
    const img = this.image;
    const axes: AxisStatus[] = this.machine.axes.map((a, i) => {
      const state = decodeStatusword(img.statusword[i]!);
      const toUnit = (counts: number) => (a.sign * counts) / a.counts_per_unit;
      return {
        index: i,
        id: a.id,
        ds402_state: DS402_STATE_NAMES[state],
        statusword: img.statusword[i]!,
        enabled: state === Ds402State.OperationEnabled,
        ready:
          state === Ds402State.OperationEnabled &&
          this.armed &&
          img.pdoFresh[i] === 1 &&
          this.faults.size === 0 &&
          (!a.require_home || (this.homeValidMask & (1 << i)) !== 0),
        fault: state === Ds402State.Fault,
        error_code: img.errorCode[i]!,
        position: toUnit(img.positionActual[i]!),
        velocity: toUnit(img.velocityActual[i]!),
        following_error: toUnit(img.followingError[i]!),
        pdo_fresh: img.pdoFresh[i] === 1,
        online: img.online[i] === 1,
        brake_engaged: state !== Ds402State.OperationEnabled,
        position_counts: img.positionActual[i]!,
        absolute_counts: img.absolutePosition[i]!,
        absolute_valid: img.absoluteValid[i] === 1,
      };
    });
    return {
      incarnation: this.incarnation,
      cycle: BigInt(this.cycleCount),
      now_ns: nowNs,
      armed: this.armed,
      enable_mask: this.enabledMask(),
      home_valid_mask: this.homeValidMask,
      safety_fault_mask: this.safetyFaultMask,
      home_epoch: this.homeEpoch,
      execution_fault_reasons: this.faultBits,
      commissioning_phase: this.homing ? 'homing' : 'idle',
      stop_draining: this.stopDraining !== null,
      io_armed: this.ioArmed,
      io_output_word: img.ioOutputWord,
      io_input_word: img.ioInputWord >>> 0, // u32 as in telemetry (fast inputs in the high half word)
      wkc_actual: img.wkcActual,
      wkc_expected: img.wkcExpected,
      axes,
      faults: [...this.faults].sort((a, b) => a[0] - b[0]).map(([bit, m]) => faultEntry(bit, m)),
      last_reset_sequence: this.lastResetSequence,
      grant_observation: {
        Ticket: this.grantTicket,
        ConnectionId: 0n,
        NativeGeneration: this.nativeGeneration,
        AppGrantGeneration: this.grant.generation,
        CapabilityId: [...Buffer.from(this.incarnation.slice(0, 32).padEnd(32, '0'), 'hex')],
        DeadlineHostNs: this.grant.deadlineNs,
        NowHostNs: nowNs,
        ConfigurationEpoch: 1n,
        HomeEpoch: this.homeEpoch,
        StopAckId: this.stopAckId,
        GrantReason: this.grant.active ? 1 : this.stopDraining !== null ? 2 : 0,
        GrantActive: this.grant.active ? 1 : 0,
        AxisMask: this.grant.active ? this.grant.axisMask : 0,
        Reserved: 0,
        Reserved1: 0n,
        Reserved2: 0n,
        Reserved3: 0n,
      },
      homing_mask: this.homing?.mask ?? 0,
      halted: this.halted,
      timing: this.timing(),
    };
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

  private publish(nowNs: bigint): void {
    this.lastPublishNs = nowNs;
    this.dirty = false;
    this.send({ t: 'status', status: this.status(nowNs) });
  }
}

export type { FaultOutcome };
