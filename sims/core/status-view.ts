// The status snapshot the core publishes to the service (ProcessStatus's core part; document 1 part 2
// "Observation types" lists what it must include; the rest is docs/profile.md "Describe and Status").

import type { ProcessImage } from '../../drivers/bus.ts';
import { Ds402State, DS402_STATE_NAMES } from '../../drivers/ds402.ts';
import type { DriverHost } from '../../drivers/host.ts';
import type { CompiledMachine } from '../config/types.ts';
import { stateOf } from './ds402-state.ts';
import type { FaultMonitor } from './fault-monitor.ts';
import type { JogLane } from './jog.ts';
import type { AxisStatus, CoreStatus, CoreTiming, JogStatus } from './protocol.ts';
import type { Plan, TrajectoryLane } from './trajectory.ts';

/**
 * What the snapshot reads of the core (the Core implements it): declared here, like admission.ts's
 * AdmissionView, so that the view depends on the state it shows and not on the class that keeps it.
 */
export interface StatusView {
  readonly machine: CompiledMachine;
  readonly image: ProcessImage;
  readonly host: DriverHost;
  readonly faults: FaultMonitor;
  readonly incarnation: string;
  readonly cycleCount: number;
  readonly armed: boolean;
  readonly halted: boolean;
  readonly homeValidMask: number;
  readonly homeEpoch: bigint;
  readonly homingMask: number;
  readonly stopDraining: boolean;
  readonly ioArmed: boolean;
  readonly lastResetSequence: bigint;
  readonly grant: { readonly generation: bigint; readonly deadlineNs: bigint; readonly active: boolean; readonly axisMask: number };
  readonly grantTicket: bigint;
  readonly nativeGeneration: bigint;
  readonly stopAckId: bigint;
  readonly trajectory: TrajectoryLane;
  readonly jog: JogLane;
  readonly preparedPlan: Plan | null;
  readonly motionState: number;
  readonly lastEvent: number;
  readonly lastTrajectoryId: bigint;
  readonly busReturn: number;
  readonly clockMode: CoreStatus['clock']['mode'];
  readonly scheduling: string;
  enabledMask(): number;
  timing(): CoreTiming;
  jogStatus(): JogStatus;
}

/** The last incarnation capabilityId was asked for, and its 16 bytes. */
let idOf = '';
let idBytes: number[] = [];

/**
 * grant_observation.CapabilityId: the incarnation's 16 bytes. Decoded once per incarnation rather than on
 * every publication (a hex Buffer and its spread were about a third of building a snapshot); each snapshot
 * gets its own copy.
 */
function capabilityId(incarnation: string): number[] {
  if (incarnation !== idOf) {
    idBytes = [...Buffer.from(incarnation.slice(0, 32).padEnd(32, '0'), 'hex')];
    idOf = incarnation;
  }
  return idBytes.slice();
}

export function buildStatus(core: StatusView, nowNs: bigint): CoreStatus {
  const img = core.image;
  const faults = core.faults;
  const axes: AxisStatus[] = core.machine.axes.map((a, i) => {
    const state = stateOf(img.statusword[i]!);
    const toUnit = (counts: number) => (a.sign * counts) / a.counts_per_unit;
    return {
      index: i,
      id: a.id,
      ds402_state: DS402_STATE_NAMES[state],
      statusword: img.statusword[i]!,
      enabled: state === Ds402State.OperationEnabled,
      ready:
        state === Ds402State.OperationEnabled &&
        core.armed &&
        img.pdoFresh[i] === 1 &&
        faults.size === 0 &&
        (!a.require_home || (core.homeValidMask & (1 << i)) !== 0),
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
  const host = core.host;
  const failure = host.lastFailure;
  const g = core.grant;
  return {
    incarnation: core.incarnation,
    cycle: BigInt(core.cycleCount),
    now_ns: nowNs,
    armed: core.armed,
    enable_mask: core.enabledMask(),
    home_valid_mask: core.homeValidMask,
    safety_fault_mask: faults.safetyFaultMask,
    home_epoch: core.homeEpoch,
    execution_fault_reasons: faults.bits,
    commissioning_phase: core.homingMask ? 'homing' : 'idle',
    stop_draining: core.stopDraining,
    io_armed: core.ioArmed,
    io_output_word: img.ioOutputWord,
    io_input_word: img.ioInputWord >>> 0, // u32 as in telemetry (fast inputs in the high half word)
    wkc_actual: img.wkcActual,
    wkc_expected: img.wkcExpected,
    axes,
    faults: faults.entries(),
    last_reset_sequence: core.lastResetSequence,
    grant_observation: {
      Ticket: core.grantTicket,
      ConnectionId: 0n,
      NativeGeneration: core.nativeGeneration,
      AppGrantGeneration: g.generation,
      CapabilityId: capabilityId(core.incarnation),
      DeadlineHostNs: g.deadlineNs,
      NowHostNs: nowNs,
      ConfigurationEpoch: 1n,
      HomeEpoch: core.homeEpoch,
      StopAckId: core.stopAckId,
      GrantReason: g.active ? 1 : core.stopDraining ? 2 : 0,
      GrantActive: g.active ? 1 : 0,
      AxisMask: g.active ? g.axisMask : 0,
      Reserved: 0,
      Reserved1: 0n,
      Reserved2: 0n,
      Reserved3: 0n,
    },
    homing_mask: core.homingMask,
    motion: {
      mode: core.trajectory.active ? 2 : core.jog.active ? 3 : 0,
      state: core.motionState,
      trajectory_id: core.lastTrajectoryId,
      point_index: core.trajectory.active ? core.trajectory.index : 0,
      queue_depth: core.preparedPlan ? 1 : 0,
      last_event: core.lastEvent,
      done: !core.trajectory.active,
      command_sequence: core.trajectory.commandSequence,
      time_ns: core.trajectory.active ? BigInt(Math.max(0, core.trajectory.elapsed(nowNs))) : 0n,
    },
    plan_cursor: {
      time_ns: core.trajectory.active ? BigInt(Math.max(0, core.trajectory.elapsed(nowNs))) : 0n,
      active_handle: core.trajectory.active ? core.trajectory.plan!.handle : 0n,
      sample_index: core.trajectory.active ? core.trajectory.index : 0,
      native_clock_ns: nowNs,
    },
    prepared_handle: core.preparedPlan?.handle ?? 0n,
    halted: core.halted,
    timing: core.timing(),
    jog: core.jogStatus(),
    driver: {
      name: host.name,
      state: host.state,
      submission_failures: host.submissionFailures,
      last_return_code: core.busReturn,
      ...(failure ? { failure: { hook: failure.hook, message: failure.message } } : {}),
    },
    clock: { mode: core.clockMode, scheduling: core.scheduling },
    ...(host.persist ? { driver_state: host.persist.snapshot() } : {}),
  };
}
