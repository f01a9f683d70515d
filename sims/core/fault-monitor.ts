// Fault evaluation: which execution fault bits latch from what the bus reported this cycle, whether the
// condition behind a latched bit is still present (a reset clears nothing while any selected condition
// persists: document 1 part 4 reset_fault), and the bit set published in status and telemetry.

import { BUS_RC, type ProcessImage } from '../../drivers/bus.ts';
import { Ds402State, MODE } from '../../drivers/ds402.ts';
import { stateOf } from './ds402-state.ts';
import type { CompiledMachine } from '../config/types.ts';
import { FAULT, FAULT_INFO, faultEntry, type FaultRecovery } from './faults.ts';

/** Feedback not fresh for this many consecutive cycles latches pdo_stale. */
export const STALE_CYCLES = 5;

export class FaultMonitor {
  /** Latched fault bits -> axis mask. */
  readonly latched = new Map<number, number>();
  /** Latched bits as a bit set (execution_fault_reasons), kept in step with `latched`. */
  bits = 0;
  private readonly staleCycles: Int32Array;
  private readonly feSince: Array<bigint | null>;
  /** limits.following_error in counts per axis (following_error * counts_per_unit, computed once). */
  private readonly feLimitCounts: Float64Array;
  /** The last bus submission return code (bus_submission persists while it is negative). */
  private busReturn = 0;

  constructor(
    private readonly machine: CompiledMachine,
    private readonly image: ProcessImage,
    private readonly all: number,
    /** Called once per newly latched (bit, axes): the core's fault reaction. */
    private readonly onLatch: (bit: number, axes: number) => void,
  ) {
    const n = machine.axes.length;
    this.staleCycles = new Int32Array(n);
    this.feSince = new Array<bigint | null>(n).fill(null);
    this.feLimitCounts = Float64Array.from(machine.axes, (a) => a.following_error * a.counts_per_unit);
  }

  get size(): number {
    return this.latched.size;
  }

  /** Union of the axis masks of every latched bit. */
  get axisMask(): number {
    let m = 0;
    for (const v of this.latched.values()) m |= v;
    return m;
  }

  get safetyFaultMask(): number {
    return this.image.safetyChainClosed ? 0 : this.all;
  }

  latch(bit: number, axisMask: number): void {
    const prev = this.latched.get(bit) ?? 0;
    if ((prev | axisMask) === prev) return;
    this.latched.set(bit, prev | axisMask);
    this.bits |= 1 << bit;
    this.onLatch(bit, prev | axisMask);
  }

  clear(bit: number, axisMask: number): void {
    const left = (this.latched.get(bit) ?? 0) & ~axisMask;
    if (left) this.latched.set(bit, left);
    else {
      this.latched.delete(bit);
      this.bits &= ~(1 << bit);
    }
  }

  /** Latched bits as FaultRecovery entries, in bit order. */
  entries(): FaultRecovery[] {
    // Every status snapshot asks; almost always with nothing latched (no iterator, no sort then).
    if (this.latched.size === 0) return [];
    return [...this.latched].sort((a, b) => a[0] - b[0]).map(([bit, axes]) => faultEntry(bit, axes));
  }

  /** Whether the condition behind a latched bit is still present for the given axes. */
  persists(bit: number, axes: number): boolean {
    const img = this.image;
    const n = this.machine.axes.length;
    const each = (f: (i: number) => boolean) => {
      for (let i = 0; i < n; i++) if (axes & (1 << i) && f(i)) return true;
      return false;
    };
    switch (bit) {
      case FAULT.drive_fault:
      case FAULT.following_error:
        return each((i) => stateOf(img.statusword[i]!) === Ds402State.Fault);
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
      case FAULT.bus_submission:
        return this.busReturn < 0;
      case FAULT.restart_required:
        return true; // only a bus restart (a new core incarnation) clears it
      default:
        return false; // homing_failed, absolute_disagreement: the evidence is gone, recovery is a new Home
    }
  }

  /** Evaluate this cycle's bus evidence (after the exchange). */
  detect(nowNs: bigint, busReturn: number): void {
    const img = this.image;
    this.busReturn = busReturn;
    if (busReturn === BUS_RC.threw || busReturn === BUS_RC.inactive) {
      // The driver failed and was stopped by its host: nothing on the bus can be trusted until restart.
      this.latch(FAULT.restart_required!, this.all);
      return;
    }
    if (busReturn < 0) this.latch(FAULT.bus_submission!, this.all);
    if (!img.safetyChainClosed) this.latch(FAULT.safety_chain_open!, this.all);
    if (img.wkcActual < img.wkcExpected) this.latch(FAULT.working_counter!, this.all);
    const n = this.machine.axes.length;
    for (let i = 0; i < n; i++) {
      const bit = 1 << i;
      if (!img.online[i]) {
        this.latch(FAULT.slave_offline!, bit);
        continue;
      }
      this.staleCycles[i] = img.pdoFresh[i] ? 0 : this.staleCycles[i]! + 1;
      if (this.staleCycles[i]! >= STALE_CYCLES) this.latch(FAULT.pdo_stale!, bit);
      if (!img.pdoFresh[i]) continue;
      const state = stateOf(img.statusword[i]!);
      // 0x8611: the drive's own following error trip.
      if (state === Ds402State.Fault) this.latch(img.errorCode[i] === 0x8611 ? FAULT.following_error! : FAULT.drive_fault!, bit);
      // The core's own following error watch (limits.following_error for following_error_timeout_ms).
      const enabled = state === Ds402State.OperationEnabled && img.modeDisplay[i] === MODE.cyclicSyncPosition;
      if (enabled && Math.abs(img.followingError[i]!) > this.feLimitCounts[i]!) {
        this.feSince[i] ??= nowNs;
        const a = this.machine.axes[i]!;
        if (nowNs - this.feSince[i]! >= BigInt(a.following_error_timeout_ms) * 1_000_000n) this.latch(FAULT.following_error!, bit);
      } else if (this.feSince[i] !== null) this.feSince[i] = null;
    }
  }

  static info(bit: number) {
    return FAULT_INFO.get(bit)!;
  }
}
