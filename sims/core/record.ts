// The telemetry capture record the core writes each cycle (document 1 part 2 CycleCaptureRecordV2):
// state after the exchange and the cycle's logic. Allocates nothing. Fields the core does not know in
// this build stay zero (trajectory, jog, collision watchdog, coordinates, audits, vendor ext_ registers,
// master state).

import { decodeStatusword, Ds402State } from '../../drivers/ds402.ts';
import { AX, REC } from './capture/layout.ts';
import type { CaptureRing } from './capture/ring.ts';
import { writeProcessImage } from './capture/writer.ts';
import type { Core } from './core.ts';

export function captureCycle(core: Core, ring: CaptureRing, nowNs: bigint, lateness: number, workNs: number, enabled: number): void {
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
    // brake_state (profile): 0 unknown (slave offline), 1 engaged, 2 released; released exactly when
    // the drive reports operation enabled, as status axes[].brake_engaged.
    w.u32(a + AX.brake_state, !online ? 0 : decodeStatusword(img.statusword[i]!) === Ds402State.OperationEnabled ? 2 : 1);
    w.u64(a + AX.pdo_observed_time_ns, core.observedNs[i]!);
    // One absolute source per axis in this profile: element 0 of absolute_value / absolute_valid.
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
