// Profile items: decisions of ours where the documents say "not shown" (docs/profile.md). They are
// traceable like catalogue items, but a test covering them is a profile test, informative against an
// external target.

import type { RuleEntry } from './types.ts';

function p(name: string, doc: 1 | 2 | 3, section: string, text: string): RuleEntry {
  return { id: `profile:${name}`, family: 'profile', doc, section: `docs/profile.md: ${section}`, title: text, text };
}

export const PROFILE: readonly RuleEntry[] = [
  p('envelope.check_order', 1, 'Envelope check order', 'size, JSON syntax, schema, operation, reserved operations, field names and types, request_id, required fields'),
  p('envelope.unknown_field', 1, 'Envelope labels', 'an unknown request field is refused with invalid_request_envelope'),
  p('envelope.field_type', 1, 'Envelope labels', 'a field of the wrong JSON type or out of its integer range is refused with invalid_request_envelope'),
  p('envelope.missing_field', 1, 'Envelope labels', 'a field the operation requires that is absent is refused with invalid_request_envelope'),
  p('envelope.missing_schema', 1, 'Envelope labels', 'an absent schema is refused with schema_mismatch'),
  p('envelope.missing_operation', 1, 'Envelope labels', 'an absent or non-control operation is refused with unknown_operation'),
  p('envelope.refusal_operation', 1, 'Reply envelope', 'a refusal names the requested operation when known, else "unknown"'),
  p('envelope.controller_range', 1, 'Envelope labels', 'a controller outside 1..63 bytes is refused with invalid_request_envelope'),
  p('fence.table', 1, 'Fence checks', 'the fence refusal table: malformed token or zero generation control_session_stale, never issued fence, previous core daemon_restarted, expired/no_grant/stale by operation'),
  p('grant.stop_generation', 1, 'Grant generation and stop', 'stop advances the application generation; the stopping grant keeps its session until the drain ends'),
  p('grant.acquire_retry', 1, 'Idempotent acquire', 'an acquire retried with the same request_id and payload replays the original grant'),
  p('grant.acquire_check_order', 1, 'Envelope check order', 'acquire checks controller, requested lease, binding, then ownership'),
  p('data.zero_fields', 1, 'Reply envelope', 'data objects carry all their fields (zero and empty values included); only the envelope omits them'),
  p('describe.fields', 1, 'Describe and Status fields', 'Describe carries contract_version, simulated, binding, incarnations, link profile, lease ceiling and axis max_velocity'),
  p('status.fields', 1, 'Describe and Status fields', 'Status carries core, commissioning, grant (without the session token), axes and execution'),
  p('machine.enable_mask', 1, 'Machine operations', 'enable takes the mask of axes to hold enabled (0 disables every axis); a mask outside the configured group is native_rejected'),
  p('machine.home_mask', 1, 'Machine operations', 'home with axis_mask 0, outside the group, or naming an axis without native Home answers invalid_axis_mask'),
  p('machine.arm_settle', 1, 'Machine operations', 'arm sent right after enable waits up to the arm settle bound (500 ms by default) for the enabled axes to reach operation enabled, then answers not_ready'),
  p('trajectory.identity', 1, 'Trajectories', 'prepare_trajectory may carry an identity; Start must then present the same identity (or none was given at prepare and none at Start), else trajectory_identity_mismatch'),
  p('trajectory.point_rules', 1, 'Trajectories', 'point count outside 2..250000, a first time other than 0, times not strictly increasing, position/velocity arrays of another length than the axes, non-finite values, io_values outside io_mask, io bits beyond eight: invalid_request_envelope'),
  p('upload.prefix', 1, 'prepare_trajectory uploads', 'a prepare_trajectory body whose schema, operation, session or generation does not end within the first 16384 bytes, before points, is refused invalid_request_envelope without the rest being decoded'),
  p('machine.fault_bits', 1, 'Execution fault bits', 'the execution fault bit table beyond bits 5 and 11 (drive_fault 0, safety_chain_open 1, pdo_stale 2, ...)'),
  p('service.socket_mode', 1, 'Transports', 'the control socket is created with mode 0660 and a public/control.sock symbolic link beside it'),
  p('config.reading_json', 3, 'Machine configuration: Reading the JSON', 'strict machine JSON: no BOM, comments or trailing data; repeated keys refused even when escaped'),
  p('config.error_codes', 3, 'Machine configuration: Reading the JSON', 'compile refusals carry a config_* code and a field path a.b[i].c'),
  p('config.digest_split', 3, 'Machine configuration: Digest split', 'which identity lines feed deployment_sha256 and machine_sha256; the base identity is the configuration without io.*'),
  p('config.files', 3, 'Machine configuration: Files', 'formats of argv.json, axes.conf, coordinate.identity.json, robot.json and resources.json; directory reuse and conflict'),
  p('config.compile_command', 3, 'Machine configuration', 'hil config compile prints one JSON line; exit 0 compiled, 1 refused, 2 usage'),
  p('status.grant_observation', 1, 'Grant observation', 'Status core.grant_observation carries the native grant receipt (GrantObservation) of the core'),
  p('events.array_field', 1, 'Events', 'the events array of an EventBatch is named events'),
  p('jog.observations', 1, 'Jog', 'LocalJogClock (incarnation, CLOCK_MONOTONIC, now, input age, frame bounds), JogObservation native fields and JogIngressObservation counters by reason label'),
  p('jog.frame_refusals', 1, 'Jog', 'local_jog_update frames: oversize, malformed, other version, stale fence, other jog generation, out of order, stale, future or before-origin capture, invalid velocity, axis outside the session are refused, counted by label and move nothing'),
  p('events.dropped_reason', 1, 'Events', 'the synthetic events_dropped payload carries reason "event_cursor_lost" beside first_lost_sequence and last_lost_sequence'),
];
