// The telemetry capture record the core writes each cycle (document 1 part 2 CycleCaptureRecordV2):
// state after the exchange and the cycle's logic, the running trajectory's and jog's fields included.
// Allocates nothing. Fields the core does not know in this build stay zero (collision watchdog,
// coordinates, audits, vendor ext_ registers, master state).
//
// Two writers of the same bytes: `captureCycle` stores each field straight into typed array views of the
// ring (no range or slot checks, no zero fill of a slot that only ever held cycle records; about ten
// times cheaper), and `captureCycleChecked` goes through the checked RecordWriter API (big-endian hosts,
// and the reference the fast path is tested against byte for byte in record.test.ts, idle and moving).
// `captureCycle` writes exactly the same set of fields on every call, motion or not: beginCycleRecord
// relies on it.

import type { ProcessImage } from '../../drivers/bus.ts';
import { Ds402State } from '../../drivers/ds402.ts';
import { AL } from '../../drivers/bus.ts';
import { AX, AXIS_ARRAY_OFFSET, AXIS_BYTES, REC, TWO32 } from './capture/layout.ts';
import type { CaptureRing } from './capture/ring.ts';
import { writeProcessImage } from './capture/writer.ts';
import { stateOf } from './ds402-state.ts';
import type { JogLane } from './jog.ts';
import type { LaneArbiter } from './lanes.ts';
import type { Plan, TrajectoryLane } from './trajectory.ts';

/** What a cycle record is made of (Core provides it; the equivalence test builds its own). */
export interface CaptureSource {
  readonly image: ProcessImage;
  readonly n: number;
  readonly grant: { readonly generation: bigint; readonly deadlineNs: bigint; readonly active: boolean; readonly axisMask: number };
  readonly cycleCount: number;
  readonly homeEpoch: bigint;
  readonly busReturn: number;
  readonly armed: boolean;
  readonly faults: { readonly safetyFaultMask: number; readonly bits: number };
  readonly homeValidMask: number;
  readonly ioConfigured: boolean;
  readonly ioArmed: boolean;
  /** Host time of each axis's last fresh feedback (pdo_observed_time_ns). */
  readonly observedNs: BigInt64Array;
  /** The same times as 32-bit words (a view of observedNs's buffer; read without making bigints). */
  readonly observedWords: Uint32Array;
  // motion (trajectory and jog fields of the record)
  readonly trajectory: TrajectoryLane;
  readonly jog: JogLane;
  readonly lanes: LaneArbiter;
  readonly motionState: number;
  readonly preparedPlan: Plan | null;
  readonly lastEvent: number;
}

/** A velocity as the record's i32 counts/s: rounded, then held to the i32 range (as the checked path writes it). */
function velocityCounts(v: number): number {
  const r = Math.round(v);
  return r < -2147483648 ? -2147483648 : r > 2147483647 ? 2147483647 : r;
}

export function captureCycle(core: CaptureSource, ring: CaptureRing, nowNs: bigint, lateness: number, workNs: number, enabled: number): void {
  const v = ring.views;
  if (v === null) return captureCycleChecked(core, ring, nowNs, lateness, workNs, enabled);
  const img = core.image;
  const g = core.grant;
  const b = ring.beginCycleRecord(); // a multiple of 16
  const u32 = v.u32;
  const w = b >> 2;
  const q = b >> 3;
  const u64 = v.u64;
  u64[q + R_T_NS] = nowNs;
  putU64n(u32, w + R_CYCLE, core.cycleCount);
  putU64n(u32, w + R_WORK_NS, workNs > 0 ? Math.round(workNs) : 0);
  putI64n(u32, v.i32, w + R_JITTER, lateness);
  u64[q + R_APP_GEN] = g.generation;
  u64[q + R_CTL_GEN] = g.generation;
  u64[q + R_HOME_EPOCH] = core.homeEpoch;
  u64[q + R_DEADLINE] = g.deadlineNs;
  putI64n(u32, v.i32, w + R_BUS_RC, core.busReturn);
  u32[w + R_ARMED] = core.armed ? 1 : 0;
  u32[w + R_ENABLE] = enabled;
  u32[w + R_GRANT_ACTIVE] = g.active ? 1 : 0;
  u32[w + R_GRANT_MASK] = g.axisMask;
  u32[w + R_SAFETY] = core.faults.safetyFaultMask;
  u32[w + R_FAULTS] = core.faults.bits;
  u32[w + R_HOME_VALID] = core.homeValidMask;
  u32[w + R_IO_CONFIGURED] = core.ioConfigured ? 1 : 0;
  u32[w + R_IO_ARMED] = core.ioArmed ? 1 : 0;
  // Motion fields (trajectory and jog), written in every record, zero when there is no such motion: a
  // cycle record is the same set of fields every time (ring.ts beginCycleRecord). Which ones the checked
  // path writes, and when, is the reference (captureCycleChecked below).
  const traj = core.trajectory;
  const tActive = traj.active;
  const jog = core.jog;
  const jogGen = jog.generation;
  const jogOn = jogGen !== 0n;
  u64[q + R_TRAJ_ID] = tActive ? traj.plan!.handle : 0n;
  u64[q + R_COMMAND_SEQ] = tActive ? traj.commandSequence : 0n;
  u32[w + R_POINT_INDEX] = tActive ? traj.index : 0;
  u64[q + R_JOG_GEN] = jogGen;
  u64[q + R_JOG_DEADLINE] = jogOn ? jog.inputDeadlineNs : 0n;
  u64[q + R_JOG_SOURCE_SEQ] = jogOn ? jog.sourceSequence : 0n;
  u32[w + R_JOG_OPEN] = jogOn && jog.open ? 1 : 0;
  u32[w + R_JOG_HAS_INPUT] = jogOn && jog.hasInput ? 1 : 0;
  u32[w + R_JOG_MASK] = jogOn ? jog.axisMask : 0;
  u32[w + R_JOG_RAMPING] = jogOn && jog.ramping ? 1 : 0;
  u32[w + R_ACTIVE_MODE] = tActive ? 2 : jogOn && jog.active ? 3 : 0;
  u32[w + R_STATE] = core.motionState;
  u32[w + R_QUEUE_DEPTH] = core.preparedPlan ? 1 : 0;
  u32[w + R_LAST_EVENT] = core.lastEvent;
  u32[w + R_MOTION_DONE] = tActive ? 0 : 1;
  // Axes a lane moves have a target velocity: the trajectory's where it runs, else the jog's.
  const jogAxes = jog.active ? core.lanes.axesOf(jog) : 0;
  const trajAxes = tActive ? traj.plan!.axisMask : 0;

  const u8 = v.u8;
  const u16 = v.u16;
  const i32 = v.i32;
  // The observed times as 32-bit words (copying a BigInt64Array element as a bigint would allocate).
  const obs = core.observedWords;
  let fresh = 0;
  const n = core.n < img.axisCount ? core.n : img.axisCount;
  for (let i = 0; i < n; i++) {
    const a = b + AXIS_ARRAY_OFFSET + i * AXIS_BYTES; // byte offset of axis slot i
    const a4 = a >> 2;
    const online = img.online[i] === 1 ? 1 : 0;
    const sw = img.statusword[i]!;
    const state = stateOf(sw);
    i32[a4 + A_POSITION] = img.positionActual[i]!;
    i32[a4 + A_TARGET] = img.targetPosition[i]!;
    u16[(a >> 1) + A_STATUSWORD] = sw;
    u16[(a >> 1) + A_ERROR_CODE] = img.errorCode[i]!;
    i32[a4 + A_VELOCITY] = img.velocityActual[i]!;
    u32[a4 + A_VELOCITY_VALID] = online;
    i32[a4 + A_FE] = img.followingError[i]!;
    u32[a4 + A_FE_VALID] = online;
    v.i16[(a >> 1) + A_TORQUE] = img.torqueActual[i]!;
    u8[a + AX.torque_valid] = online;
    u32[a4 + A_DI] = img.digitalInputs[i]!;
    u32[a4 + A_DI_VALID] = online;
    v.i8[a + AX.mode_display] = img.modeDisplay[i]!;
    u8[a + AX.ds402_state] = state;
    u8[a + AX.slave_al_state] = img.alState[i]!;
    u8[a + AX.slave_online] = online;
    u8[a + AX.slave_operational] = online === 1 && img.alState[i] === AL.op ? 1 : 0;
    u8[a + AX.pdo_fresh] = img.pdoFresh[i]!;
    if (img.pdoFresh[i] === 1) fresh |= 1 << i;
    // brake_state (profile): 0 unknown (slave offline), 1 engaged, 2 released; released exactly when
    // the drive reports operation enabled, as status axes[].brake_engaged.
    u32[a4 + A_BRAKE] = online === 0 ? 0 : state === Ds402State.OperationEnabled ? 2 : 1;
    u32[a4 + A_OBSERVED] = obs[2 * i]!;
    u32[a4 + A_OBSERVED + 1] = obs[2 * i + 1]!;
    // One absolute source per axis in this profile: element 0 of absolute_value / absolute_valid.
    i32[a4 + A_ABSOLUTE] = img.absolutePosition[i]!;
    u8[a + AX.absolute_valid] = img.absoluteValid[i]!;
    if ((trajAxes >>> i) & 1) {
      i32[a4 + A_TARGET_VELOCITY] = velocityCounts(traj.targetVelocity[i]!);
      u8[a + AX.target_velocity_valid] = 1;
    } else if ((jogAxes >>> i) & 1) {
      i32[a4 + A_TARGET_VELOCITY] = velocityCounts(jog.velocity[i]!);
      u8[a + AX.target_velocity_valid] = 1;
    } else {
      i32[a4 + A_TARGET_VELOCITY] = 0;
      u8[a + AX.target_velocity_valid] = 0;
    }
  }
  u32[w + R_FRESH] = fresh;
  u32[w + R_WKC_ACTUAL] = img.wkcActual;
  u32[w + R_WKC_EXPECTED] = img.wkcExpected;
  u32[w + R_IO_IN] = img.ioInputWord;
  u32[w + R_IO_OUT] = img.ioOutputWord;
  u32[w + R_IO_IN_VALID] = img.ioInputValid;
  ring.commit();
}

/** u64 from a non-negative safe integer, as RecordWriter.u64n. */
function putU64n(u32: Uint32Array, word: number, v: number): void {
  const lo = v >>> 0;
  u32[word] = lo;
  u32[word + 1] = (v - lo) / TWO32;
}

/** i64 from a safe integer of either sign, as RecordWriter.i64n. */
function putI64n(u32: Uint32Array, i32: Int32Array, word: number, v: number): void {
  const lo = v >>> 0;
  u32[word] = lo;
  i32[word + 1] = (v - lo) / TWO32;
}

/** Element index of a field in a typed array of `size`-byte elements; the field must be aligned. */
function at(offset: number, size: number): number {
  if (offset % size !== 0) throw new Error(`capture field at ${offset} is not ${size}-byte aligned`);
  return offset / size;
}
const R_T_NS = at(REC.t_ns, 8);
const R_CYCLE = at(REC.cycle, 4);
const R_WORK_NS = at(REC.work_ns, 4);
const R_JITTER = at(REC.cycle_jitter_ns, 4);
const R_APP_GEN = at(REC.app_grant_generation, 8);
const R_CTL_GEN = at(REC.control_generation, 8);
const R_HOME_EPOCH = at(REC.home_epoch, 8);
const R_DEADLINE = at(REC.grant_deadline_host_ns, 8);
const R_BUS_RC = at(REC.bus_submission_return_code, 4);
const R_ARMED = at(REC.armed, 4);
const R_ENABLE = at(REC.axis_enable_mask, 4);
const R_GRANT_ACTIVE = at(REC.grant_active, 4);
const R_GRANT_MASK = at(REC.grant_axis_mask, 4);
const R_SAFETY = at(REC.safety_fault_mask, 4);
const R_FAULTS = at(REC.execution_fault_reasons, 4);
const R_HOME_VALID = at(REC.home_valid_mask, 4);
const R_IO_CONFIGURED = at(REC.io_configured, 4);
const R_IO_ARMED = at(REC.io_armed, 4);
const R_MOTION_DONE = at(REC.motion_done, 4);
const R_TRAJ_ID = at(REC.active_traj_id, 8);
const R_COMMAND_SEQ = at(REC.active_command_seq, 8);
const R_POINT_INDEX = at(REC.current_point_index, 4);
const R_JOG_GEN = at(REC.jog_generation, 8);
const R_JOG_DEADLINE = at(REC.jog_input_deadline_host_ns, 8);
const R_JOG_SOURCE_SEQ = at(REC.jog_source_sequence, 8);
const R_JOG_OPEN = at(REC.jog_session_open, 4);
const R_JOG_HAS_INPUT = at(REC.jog_has_input, 4);
const R_JOG_MASK = at(REC.jog_axis_mask, 4);
const R_JOG_RAMPING = at(REC.jog_ramping, 4);
const R_ACTIVE_MODE = at(REC.active_mode, 4);
const R_STATE = at(REC.state, 4);
const R_QUEUE_DEPTH = at(REC.queue_depth, 4);
const R_LAST_EVENT = at(REC.last_event_code, 4);
const R_FRESH = at(REC.pdo_fresh_axis_mask, 4);
const R_WKC_ACTUAL = at(REC.wkc_actual, 4);
const R_WKC_EXPECTED = at(REC.wkc_expected, 4);
const R_IO_IN = at(REC.io_input_word, 4);
const R_IO_OUT = at(REC.io_output_word, 4);
const R_IO_IN_VALID = at(REC.io_input_valid, 4);
const A_POSITION = at(AX.position, 4);
const A_TARGET = at(AX.target, 4);
const A_STATUSWORD = at(AX.statusword, 2);
const A_ERROR_CODE = at(AX.error_code, 2);
const A_VELOCITY = at(AX.velocity_actual_counts_per_s, 4);
const A_VELOCITY_VALID = at(AX.velocity_actual_valid, 4);
const A_FE = at(AX.following_error_counts, 4);
const A_FE_VALID = at(AX.following_error_valid, 4);
const A_TORQUE = at(AX.torque_raw, 2);
const A_DI = at(AX.di_bits, 4);
const A_DI_VALID = at(AX.di_valid, 4);
const A_BRAKE = at(AX.brake_state, 4);
const A_OBSERVED = at(AX.pdo_observed_time_ns, 8) * 2;
const A_ABSOLUTE = at(AX.absolute_value, 4);
const A_TARGET_VELOCITY = at(AX.target_velocity_counts_per_s, 4);
if (AXIS_ARRAY_OFFSET % 16 !== 0 || AXIS_BYTES % 16 !== 0) throw new Error('capture axis slots are not 16-byte aligned');

/** The same record through the checked RecordWriter API (DataView setters, slot zeroed first). */
export function captureCycleChecked(core: CaptureSource, ring: CaptureRing, nowNs: bigint, lateness: number, workNs: number, enabled: number): void {
  const img = core.image;
  const g = core.grant;
  const w = ring.beginRecord();
  w.u64(REC.t_ns, nowNs);
  w.u64n(REC.cycle, core.cycleCount);
  w.u64n(REC.work_ns, workNs > 0 ? Math.round(workNs) : 0);
  w.i64n(REC.cycle_jitter_ns, lateness);
  w.u64(REC.app_grant_generation, g.generation);
  w.u64(REC.control_generation, g.generation);
  w.u64(REC.home_epoch, core.homeEpoch);
  w.u64(REC.grant_deadline_host_ns, g.deadlineNs);
  w.i64n(REC.bus_submission_return_code, core.busReturn);
  w.u32(REC.armed, core.armed ? 1 : 0);
  w.u32(REC.axis_enable_mask, enabled >>> 0);
  w.u32(REC.grant_active, g.active ? 1 : 0);
  w.u32(REC.grant_axis_mask, g.axisMask >>> 0);
  w.u32(REC.safety_fault_mask, core.faults.safetyFaultMask >>> 0);
  w.u32(REC.execution_fault_reasons, core.faults.bits >>> 0);
  w.u32(REC.home_valid_mask, core.homeValidMask >>> 0);
  w.u32(REC.io_configured, core.ioConfigured ? 1 : 0);
  w.u32(REC.io_armed, core.ioArmed ? 1 : 0);
  const traj = core.trajectory;
  if (traj.active) {
    w.u64(REC.active_traj_id, traj.plan!.handle);
    w.u64(REC.active_command_seq, traj.commandSequence);
    w.u32(REC.active_mode, 2);
    w.u32(REC.current_point_index, traj.index);
  }
  // Jog fields (document 1 part 2 CycleCaptureRecordV2 offsets 64, 112, 120, 144, 180..192).
  const jog = core.jog;
  const jogAxes = jog.active ? core.lanes.axesOf(jog) : 0;
  if (jog.generation !== 0n) {
    w.u64(REC.jog_generation, jog.generation);
    w.u64(REC.jog_input_deadline_host_ns, jog.inputDeadlineNs);
    w.u64(REC.jog_source_sequence, jog.sourceSequence);
    w.u32(REC.jog_session_open, jog.open ? 1 : 0);
    w.u32(REC.jog_has_input, jog.hasInput ? 1 : 0);
    w.u32(REC.jog_axis_mask, jog.axisMask >>> 0);
    w.u32(REC.jog_ramping, jog.ramping ? 1 : 0);
    if (jog.active && !traj.active) w.u32(REC.active_mode, 3);
  }
  w.u32(REC.state, core.motionState);
  w.u32(REC.queue_depth, core.preparedPlan ? 1 : 0);
  w.u32(REC.last_event_code, core.lastEvent);
  w.u32(REC.motion_done, traj.active ? 0 : 1);
  writeProcessImage(w, img);
  for (let i = 0; i < core.n; i++) {
    const a = w.axis(i);
    const online = img.online[i] === 1;
    w.u32(a + AX.brake_state, !online ? 0 : stateOf(img.statusword[i]!) === Ds402State.OperationEnabled ? 2 : 1);
    w.u64(a + AX.pdo_observed_time_ns, core.observedNs[i]!);
    w.i32(a + AX.absolute_value, img.absolutePosition[i]!);
    w.u8(a + AX.absolute_valid, img.absoluteValid[i]!);
    if ((jogAxes >>> i) & 1) {
      w.i32(a + AX.target_velocity_counts_per_s, Math.max(-2147483648, Math.min(2147483647, Math.round(jog.velocity[i]!))));
      w.u8(a + AX.target_velocity_valid, 1);
    }
    if (traj.active && (traj.plan!.axisMask >>> i) & 1) {
      w.i32(a + AX.target_velocity_counts_per_s, Math.max(-2147483648, Math.min(2147483647, Math.round(traj.targetVelocity[i]!))));
      w.u8(a + AX.target_velocity_valid, 1);
    }
  }
  ring.commit();
}
