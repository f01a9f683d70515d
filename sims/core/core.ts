// The real-time core's cycle logic, independent of how it is scheduled (worker thread in real time,
// faster than real time, or stepped by replay). One clock: the host monotonic ns passed into `cycle`.
// The CiA 402 drive handling is written once here, above the bus driver interface.

import { ProcessImage, STANDARD_MAPPING, type BusDriver, type BusSetup } from '../../drivers/bus.ts';
import { decodeStatusword, Ds402State, DS402_STATE_NAMES, MODE, CW } from '../../drivers/ds402.ts';
import type { CompiledMachine } from '../config/types.ts';
import {
  NATIVE_OP,
  type AxisStatus,
  type CommandResult,
  type CoreStatus,
  type FromCore,
  type ToCore,
} from './protocol.ts';

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
} as const;

export class Core {
  readonly image: ProcessImage;
  private sequence = 0n;
  private cycleCount = 0n;
  private lastPublishNs = 0n;
  private enableMask = 0;
  private armed = false;
  private homeValidMask = 0;
  private homeEpoch = 0n;
  private safetyFaultMask = 0;
  private faultReasons = 0;
  private ioArmed = false;
  private stopDraining: bigint | null = null;
  private grant = { generation: 0n, deadlineNs: 0n, active: false, axisMask: 0 };
  private overruns = 0n;
  private maxLatenessNs = 0n;
  private dirty = true;

  constructor(
    readonly machine: CompiledMachine,
    readonly driver: BusDriver,
    readonly incarnation: string,
    private readonly send: (m: FromCore) => void,
  ) {
    this.image = new ProcessImage(machine.axes.length);
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
    for (let i = 0; i < this.machine.axes.length; i++) this.image.modeOfOperation[i] = MODE.cyclicSyncPosition;
    this.send({
      t: 'ready',
      incarnation: this.incarnation,
      nowNs,
      startupNotes: startup.notes,
      mappingMismatchMask: startup.mappingMismatchMask,
    });
  }

  /** Handle one message from the service. */
  handle(m: ToCore): void {
    switch (m.t) {
      case 'grant':
        this.grant = { generation: m.generation, deadlineNs: m.deadlineNs, active: m.active, axisMask: m.axisMask };
        this.dirty = true;
        return;
      case 'cmd':
        this.command(m);
        return;
      case 'inject':
      case 'shutdown':
        return; // handled by the host (worker) which owns the driver's private test hooks
    }
  }

  private result(op: number, accepted: boolean, reason: number, axisMask: number, generation: bigint): CommandResult {
    return {
      Sequence: ++this.sequence,
      Handle: 0n,
      Generation: generation,
      Operation: op,
      Result: accepted ? 0 : 1,
      Reason: reason,
      AxisMask: axisMask,
    };
  }

  private command(m: Extract<ToCore, { t: 'cmd' }>): void {
    const op = NATIVE_OP[m.op];
    switch (m.op) {
      case 'stop': {
        const r = this.result(op, true, NATIVE_REASON.none, this.allAxes(), m.generation);
        this.stopDraining = r.Sequence;
        this.armed = false;
        this.enableMask = 0;
        this.ioArmed = false;
        this.image.ioOutputWord = 0; // every cell output commanded OFF, immediately
        this.dirty = true;
        this.send({ t: 'reply', id: m.id, result: r });
        return;
      }
      case 'mark': {
        const r = this.result(op, true, NATIVE_REASON.none, 0, m.generation);
        this.send({ t: 'reply', id: m.id, result: r });
        return;
      }
      default: {
        const r = this.result(op, false, NATIVE_REASON.unsupported, m.axisMask, m.generation);
        this.send({ t: 'reply', id: m.id, result: r, detail: `native ${m.op} is not available in this core build` });
      }
    }
  }

  private allAxes(): number {
    return this.machine.axes.length >= 32 ? 0xffffffff : (1 << this.machine.axes.length) - 1;
  }

  /** One cycle at host time `nowNs`, scheduled for `scheduledNs`. */
  cycle(nowNs: bigint, scheduledNs: bigint): void {
    this.cycleCount++;
    const lateness = nowNs - scheduledNs;
    if (lateness > this.maxLatenessNs) this.maxLatenessNs = lateness;
    if (lateness > this.machine.max_cycle_lateness_ns) this.overruns++;

    const img = this.image;
    for (let i = 0; i < this.machine.axes.length; i++) {
      const want = (this.enableMask & (1 << i)) !== 0 && this.stopDraining === null;
      img.controlword[i] = this.controlwordFor(decodeStatusword(img.statusword[i]!), want);
      // Hold: command the actual position while not moving under a trajectory.
      img.targetPosition[i] = img.positionActual[i]!;
    }
    this.driver.exchange(img, nowNs);

    if (this.stopDraining !== null && this.allStill()) {
      const seq = this.stopDraining;
      this.stopDraining = null;
      this.dirty = true;
      this.send({ t: 'stop_drained', sequence: seq });
    }
    if (this.dirty || nowNs - this.lastPublishNs >= 10_000_000n) {
      this.publish(nowNs);
    }
  }

  /** The CiA 402 controlword that moves a drive one step toward enabled (or away from it). */
  private controlwordFor(state: Ds402State, wantEnabled: boolean): number {
    if (state === Ds402State.Fault) return CW.disableVoltage;
    if (!wantEnabled) {
      if (state === Ds402State.OperationEnabled) return CW.quickStop;
      return CW.disableVoltage;
    }
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
    for (let i = 0; i < this.machine.axes.length; i++) {
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
          (!a.require_home || (this.homeValidMask & (1 << i)) !== 0),
        fault: state === Ds402State.Fault,
        error_code: img.errorCode[i]!,
        position: toUnit(img.positionActual[i]!),
        velocity: toUnit(img.velocityActual[i]!),
        following_error: toUnit(img.followingError[i]!),
        pdo_fresh: img.pdoFresh[i] === 1,
        online: img.online[i] === 1,
        brake_engaged: state !== Ds402State.OperationEnabled,
      };
    });
    return {
      incarnation: this.incarnation,
      cycle: this.cycleCount,
      now_ns: nowNs,
      armed: this.armed,
      enable_mask: this.enableMask,
      home_valid_mask: this.homeValidMask,
      safety_fault_mask: this.safetyFaultMask,
      home_epoch: this.homeEpoch,
      execution_fault_reasons: this.faultReasons,
      commissioning_phase: 'idle',
      stop_draining: this.stopDraining !== null,
      io_armed: this.ioArmed,
      io_output_word: img.ioOutputWord,
      io_input_word: img.ioInputWord,
      wkc_actual: img.wkcActual,
      wkc_expected: img.wkcExpected,
      axes,
      timing: { overruns: this.overruns, max_lateness_ns: this.maxLatenessNs, cycles: this.cycleCount },
    };
  }

  private publish(nowNs: bigint): void {
    this.lastPublishNs = nowNs;
    this.dirty = false;
    this.send({ t: 'status', status: this.status(nowNs) });
  }
}
