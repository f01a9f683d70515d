// Machine configurations the config suites build beside the fixtures in fixtures/machines/: a machine
// with a robot block and robot-bound axes (document 3 part 2 "Axis forms", provenance), and helpers to
// give every numeric robot fact its provenance sibling.

import type { JsonObj, JsonValue } from './toolkit.ts';

/** Bytes of the robot description file the robot machine pins (any bytes do; the compiler hashes them). */
export const ROBOT_DESCRIPTION = '<robot name="arm-2">\n  <link name="base"/>\n</robot>\n';
export const ROBOT_DESCRIPTION_FILE = 'arm-2.urdf';

/** Give every numeric field of `o` a `<field>_source` sibling (robot facts need provenance). */
export function sourced(o: JsonObj, source = 'vendor datasheet rev C'): JsonObj {
  const out: JsonObj = {};
  for (const [k, v] of Object.entries(o)) {
    out[k] = v;
    if (typeof v === 'bigint' || typeof v === 'number') out[`${k}_source`] = source;
  }
  return out;
}

function joint(id: string, revs: number): JsonObj {
  return sourced({
    id,
    profile: 'sim-ds402',
    type: 'rotary',
    wire_counts_per_rev: 1048576n,
    motor_encoder_counts_per_rev: 1048576n,
    wire_revs_per_axis_rev: revs,
    sign: 1n,
    coordinate_evidence_mode: 'multi_turn',
    min: -3.0,
    max: 3.0,
    max_velocity: 2.0,
    jog_acceleration: 4.0,
  });
}

const TRACKING = (): JsonObj =>
  sourced({ max_target_lead: 0.05, following_error: 0.01, following_error_timeout_ms: 50n, completion_tolerance: 0.001, completion_timeout_ms: 2000n }, 'commissioning 2026-03');

/**
 * Two robot joints bound by robot-bound axes plus one flat positioner axis (a machine may mix both
 * forms). No drive_speed_limit_motor_rpm: it is forbidden on a robot-bound machine. With `description`
 * the robot description file (written beside the JSON by the test) is pinned.
 */
export function robotMachine(opts: { description?: boolean; descriptionSha256?: string } = {}): JsonObj {
  const robot: JsonObj = { model_id: 'arm-2' };
  if (opts.description) robot.description = ROBOT_DESCRIPTION_FILE;
  if (opts.descriptionSha256) robot.description_sha256 = opts.descriptionSha256;
  robot.joints = [joint('A1', 100), joint('A2', 80)];
  return {
    schema_version: 1n,
    backend: 'simulation',
    cycle_ns: 1000000n,
    max_cycle_lateness_ns: 500000n,
    robot,
    axes: [
      { robot_joint: 'A1', slave_position: 0n, limits: TRACKING() },
      { robot_joint: 'A2', slave_position: 1n, limits: TRACKING() },
      {
        name: 'P1',
        slave_position: 2n,
        profile: 'sim-ds402',
        type: 'rotary',
        wire_counts_per_rev: 131072n,
        motor_encoder_counts_per_rev: 131072n,
        wire_revs_per_axis_rev: 50,
        sign: -1n,
        coordinate_evidence_mode: 'single_turn_absolute',
        limits: {
          min: -3.1,
          max: 3.1,
          max_velocity: 1.0,
          jog_acceleration: 2.0,
          max_target_lead: 0.05,
          following_error: 0.01,
          following_error_timeout_ms: 50n,
          completion_tolerance: 0.001,
          completion_timeout_ms: 2000n,
        },
      },
    ],
    runtime: { cpu: 3n, priority: 60n },
  } satisfies Record<string, JsonValue>;
}
