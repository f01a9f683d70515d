// Catalogue of document 3: the offline programming (OLP) server, the robot.v4.program.v2 program
// document and the compiled machine configuration. Facts are copied from the document; titles and
// rule texts are our own wording. Tables drive the entries; see index.ts (harness/catalogue/index.ts) for the lookups.

import type { CatalogueEntry, FieldEntry, LimitEntry, RuleEntry } from './types.ts';
import { fieldEntries, limitEntries, type FieldRow, type LimitRow } from './rows.ts';

const DOC = 3 as const;

/** Section headings of document 3 as used in `section`. */
const S = {
  what: 'part 1 What the service does',
  conventions: 'part 2 Conventions',
  fencing: 'part 2 Target fencing',
  program: 'part 2 Program document',
  nodes: 'part 2 Program document: nodes',
  ordering: 'part 2 Program document: ordering',
  scalar: 'part 2 Program document: scalar functions',
  geometry: 'part 2 Program document: weld geometry',
  freespace: 'part 2 Program document: freespace nodes',
  teach: 'part 2 Program document: TeachPose and capture',
  forbidden: 'part 2 Program document: forbidden keys',
  digests: 'part 2 Program document: digests',
  machine: 'part 2 Compiled machine configuration',
  endpoints: 'part 4 Endpoints',
  weldPlan: 'part 4 Endpoints: /weld-plan',
  auth: 'part 5 Authentication',
  errors: 'part 7 Errors',
  limits: 'part 8 Limits',
} as const;

const U = 'unspecified';

// ---------------------------------------------------------------------------------------------
// Fields: [path, valueType, required (undefined when the document does not say), rule].


const fields = (type: string, section: string, rows: readonly FieldRow[]): FieldEntry[] => fieldEntries(DOC, type, section, rows);

const PROGRAM_STATES =
  'draft, saved_unplanned, needs_plan, planning, planned, accepted_simulation, accepted_physical, execution_ready, running, completed, stopped, faulted';

const programDocument = fields('ProgramDocument', S.program, [
  ['schema', 'string', true, 'robot.v4.program.v2'],
  ['program_id', 'string', true, ''],
  ['program_name', 'string', true, ''],
  ['program_revision', 'integer', true, '>= 1'],
  ['base_program_revision', 'integer', true, '>= 0'],
  ['program_digest', 'string', false, 'sha256:<64 hex>; sha256 of canonical JSON without program_digest'],
  ['program_state', 'string', true, PROGRAM_STATES],
  ['execution_mode', 'string', true, 'simulation, dry_run, production'],
  ['created_utc', 'string', true, 'RFC 3339'],
  ['units', 'object', true, 'fixed: lengths m, angles rad, time s, joint_order J1..J9'],
  ['producer.component', 'string', true, 'offline-programming-v1 or weld-planner-v1'],
  ['producer.source_revision', 'string', true, ''],
  ['producer.inputs[]', 'array', true, 'at least one input'],
  ['producer.inputs[].kind', 'string', undefined, 'project, weld_program, cad, cell, tool'],
  ['producer.inputs[].ref', U, undefined, 'input reference'],
  ['producer.inputs[].sha256', 'string', undefined, '64 hex without prefix'],
  ['source', 'object', false, 'geometry origin'],
  ['workpiece.frame_id', 'string', true, 'workpiece frame'],
  ['workpiece.solids[]', 'array', false, ''],
  ['workpiece.weld_joints[]', 'array', false, 'weld joint ids unique'],
  ['placement.cell_id', 'string', true, 'equals robot.model_id'],
  ['placement.anchor_xyz_m', 'float64[3]', true, '3 numbers'],
  ['placement.offset_xyz_m', 'float64[3]', true, '3 numbers'],
  ['placement.rpy_rad', 'float64[3]', true, '3 numbers'],
  ['robot.model_id', 'string', true, ''],
  ['robot.robot_description_sha256', 'string', true, 'sha256:<64 hex>; all-zero means no description to pin'],
  ['tool', 'object', false, '{id, sha256}'],
  ['tool.id', U, undefined, 'tool id'],
  ['tool.sha256', U, undefined, 'tool digest'],
  ['speed_scale', 'number', false, '0.01..1; default 1; applied after planning'],
  ['defaults', 'object', true, 'all four subfields required'],
  ['defaults.clearance_min_mm', 'number', true, '>= 0'],
  ['defaults.speed_scale', 'number', true, '(0,1]'],
  ['defaults.torch_policy', 'string', true, 'free, hold_last, torch_down'],
  ['defaults.positioner_policy', 'string', true, 'free, hold'],
  ['nodes[]', 'array', true, '1..4096 nodes'],
  ['planner_owns[]', 'string[]', true, 'at least one'],
  ['extensions', 'object', false, ''],
  // Node fields; unknown keys refused.
  ['nodes[].id', U, undefined, 'unique within the program'],
  ['nodes[].op', 'string', undefined, 'weld, approach, transit, retract, home, move, dwell, io'],
  ['nodes[].enabled', U, undefined, 'node enabled'],
  ['nodes[].label', U, undefined, 'node label'],
  ['nodes[].comment', U, undefined, 'node comment'],
  ['nodes[].row_hash', 'string', undefined, 'nonempty; sha256 of canonical JSON of the node without row_hash'],
  ['nodes[].extensions', 'object', false, 'optional'],
  // weld
  ['nodes[].geometry', U, undefined, 'weld: seam, posed_polyline or manual_pose_wp geometry'],
  ['nodes[].travel_speed_mm_s', U, undefined, 'weld'],
  ['nodes[].standoff_mm', 'ScalarFunction', undefined, 'weld; required and positive everywhere'],
  ['nodes[].weave', U, undefined, 'weld'],
  ['nodes[].weld_parameters', 'object', undefined, 'weld; present and empty in v2'],
  ['nodes[].weld_preset_id', U, false, 'weld; optional'],
  // approach / transit / retract / home
  ['nodes[].depart_standoff', 'Standoff', false, 'approach/transit/retract/home; optional; not allowed on approach or home'],
  ['nodes[].arrive_standoff', 'Standoff', false, 'approach/transit/retract/home; optional; not allowed on retract or home'],
  ['nodes[].overrides', U, false, 'approach/transit/retract/home; optional'],
  // move
  ['nodes[].motion', 'string', undefined, 'move: joint, linear, circular'],
  ['nodes[].target', U, undefined, 'move'],
  ['nodes[].speed_scale', 'number', undefined, 'move: (0,1]'],
  ['nodes[].speed_mm_s', 'number', undefined, 'move: > 0'],
  ['nodes[].capture', 'TeachCapture', undefined, 'move'],
  ['nodes[].target_space', 'string', false, 'move; optional: cartesian or joint'],
  ['nodes[].via', U, false, 'move; optional'],
  ['nodes[].acceleration_scale', U, false, 'move; optional'],
  ['nodes[].constant_tcp_speed', U, false, 'move; optional; default true'],
  // dwell, io
  ['nodes[].duration_s', 'number', undefined, 'dwell: >= 0'],
  ['nodes[].channel', 'string', undefined, 'io: nonempty'],
  ['nodes[].state', 'bool', undefined, 'io: boolean'],
]);

const teach = [
  ...fields('TeachPose', S.teach, [
    ['frame_id', 'string', undefined, 'world'],
    ['xyz_m', U, undefined, 'position in m'],
    ['rpy_rad', U, undefined, 'orientation in rad'],
    ['joint_names', U, undefined, '1..9 unique names'],
    ['joint_values_rad', U, undefined, 'joint values in rad'],
  ]),
  ...fields('TeachCapture', S.teach, [
    ['source', 'string', undefined, 'machine or preview'],
    ['observed_at', 'string', undefined, 'RFC 3339'],
    ['model_id', U, undefined, 'robot model'],
    ['robot_description_sha256', U, undefined, 'robot description digest'],
    ['machine_planning_calibration_sha256', U, false, 'optional'],
    ['cell_id', U, undefined, 'required when source is machine'],
    ['pose', 'TeachPose', undefined, 'captured pose'],
  ]),
  ...fields('Standoff', S.freespace, [
    ['direction', U, undefined, 'torch_axis, workpiece_z or a 3-vector'],
    ['distance_mm', 'number', undefined, '>= 0'],
  ]),
];

const axisPath = (p: string) => `axes[].${p}`;

const machineConfig = fields('MachineConfig', S.machine, [
  ['schema_version', 'integer', true, '1'],
  ['backend', 'string', undefined, 'simulation or live'],
  ['cycle_ns', 'integer', true, 'ns 250000..10000000; divisible by each nonzero drive DC quantum'],
  ['max_cycle_lateness_ns', 'integer', true, '1..249999999'],
  ['axes[]', 'array', true, '1..16 axes; flat or robot-bound form'],
  ['drive_speed_limit_motor_rpm', 'number', undefined, '> 0, at most 6000; default 3000 for flat fixtures; forbidden on robot-bound machines'],
  ['runtime', 'object', true, 'runtime block'],
  ['robot', 'object', undefined, 'robot block'],
  ['control', 'object', undefined, 'control block'],
  ['bus', 'object', undefined, 'bus block'],
  ['bus_bringup', 'object', undefined, 'bus bring-up block'],
  ['io', 'object', undefined, 'io block (contents not shown)'],
  // flat axis form
  ...(
    [
      ['name', U, 'flat form'],
      ['slave_position', 'integer', '0..65535; unique; both forms'],
      ['profile', U, 'flat form'],
      ['type', 'string', 'flat form: rotary or linear'],
      ['wire_counts_per_rev', U, 'flat form'],
      ['motor_encoder_counts_per_rev', U, 'flat form'],
      ['wire_revs_per_axis_rev', U, 'flat form'],
      ['gear_ratio.numerator', U, 'flat form'],
      ['gear_ratio.denominator', U, 'flat form'],
      ['lead_m_per_rev', U, 'flat form'],
      ['sign', 'integer', 'flat form: -1 or +1'],
      ['coordinate_evidence_mode', 'string', 'flat form: multi_turn or single_turn_absolute'],
      ['position_tracking_mode', U, 'flat form'],
      ['require_home', U, 'flat form'],
      ['max_acceleration', U, 'flat form'],
      ['limits', 'object', 'both forms; robot-bound carries tracking fields only'],
      ['startup', U, 'flat form'],
      ['jog', 'object', 'flat form'],
      ['brake', U, 'flat form'],
      ['collision_watchdog', U, 'flat form'],
      ['diagnostics', U, 'flat form'],
      ['robot_joint', U, 'robot-bound form'],
      ['limits.min', U, 'axis limit'],
      ['limits.max', U, 'axis limit'],
      ['limits.max_velocity', U, 'axis limit'],
      ['limits.jog_acceleration', U, 'axis limit'],
      ['limits.max_target_lead', U, 'axis limit'],
      ['limits.following_error', U, 'axis limit'],
      ['limits.following_error_timeout_ms', 'integer', '1..1000'],
      ['limits.completion_tolerance', U, 'axis limit'],
      ['limits.completion_timeout_ms', 'integer', '1..4294967295'],
      ['jog.arrest_ns', 'integer', 'default 200 ms; 1..65535 x cycle_ns'],
      ['jog.quick_stop_ns', 'integer', 'default 300 ms; 1..65535 x cycle_ns'],
    ] as const
  ).map(([p, t, r]) => [axisPath(p), t, undefined, r] as const),
  ['runtime.cpu', 'integer', undefined, '0..1023'],
  ['runtime.priority', 'integer', undefined, '1..99'],
  ['runtime.telemetry.retention_ms', 'integer', undefined, '100..3600000; default 100000'],
  ['runtime.telemetry.dump_count', 'integer', undefined, '1..100; default 20'],
  ['runtime.telemetry.dump_bytes', 'integer', undefined, '529680 or more; default 536870912'],
  ['runtime.telemetry.directory', U, undefined, 'telemetry directory'],
  ['control.link_profile', 'string', undefined, 'lan or internet; default lan'],
  ['control.max_grant_lease_ns', 'integer', undefined, '1000000..10000000000 in whole ms; default 500000000 lan, 3000000000 internet'],
  ['control.max_jog_input_age_ns', 'integer', undefined, '1..2000000000; default 250000000 lan, 750000000 internet'],
  ['bus.unknown_slaves', 'string', undefined, 'refuse (default) or hold with a note'],
  ['bus.unused_slaves[]', 'array', undefined, 'up to 256 entries'],
  ['bus_bringup.startup_passive_ms', U, undefined, 'default 0'],
  ['bus_bringup.explicit_pdo_config', 'bool', undefined, 'default false'],
  ['bus_bringup.disable_output_watchdog', 'bool', undefined, 'default false'],
  ['bus_bringup.no_dc', 'bool', undefined, 'default false'],
  ['bus_bringup.wait_before_safeop_ms', U, undefined, 'default 250'],
  ['bus_bringup.preop_safeop_timeout_ms', U, undefined, 'default 5000'],
  ['bus_bringup.safeop_op_timeout_ms', U, undefined, 'default 5000'],
]);

const olpBodies = [
  ...fields('OlpHealth', `${S.endpoints}: GET /health`, (
    ['ok', 'schema', 'mode', 'network_required', 'connected', 'connected_targets', 'local_simulator', 'local_ready', 'execution_enabled', 'target_planning', 'teleop_enabled', 'program_catalog'] as const
  ).map((p) => [p, U, undefined, 'health field'] as const)),
  ...fields('OlpCaptureModelRequest', `${S.endpoints}: POST /robots/capture-model`, [
    ['model_id', 'string', true, 'robot model'],
    ['robot_description_sha256', 'string', true, 'sha256:<64 hex>'],
    ['machine_planning_calibration_base64', U, false, 'optional'],
  ]),
  ...fields('OlpTargetSelectRequest', `${S.endpoints}: POST /targets/select`, [
    ['cell_id', U, undefined, 'cell to select'],
    ['model_id', U, undefined, 'robot model of the cell'],
  ]),
  ...fields('OlpDenseTargetRequest', `${S.endpoints}: POST /dense-execution/target`, [['cell', U, undefined, 'cell id; empty string clears']]),
  ...fields('OlpArmRequest', `${S.endpoints}: POST /dense-execution/arm`, [['armed', 'bool', undefined, 'arm or disarm; arming acquires the lease']]),
  ...fields('OlpJogRequest', `${S.endpoints}: /dense-execution/jog`, (
    ['target_id', 'session_id', 'revision', 'axis', 'direction', 'fraction'] as const
  ).map((p) => [p, U, undefined, 'joint jog body field'] as const)),
  ...fields('OlpWeldPlanRequest', S.weldPlan, [
    ['program', 'object', true, 'program document'],
    ['tooling', 'object', true, 'tooling'],
    ['step_base64', 'string', true, 'STEP file; empty only when workpiece_absent is true'],
    ['step_filename', U, undefined, 'STEP file name'],
    ['workpiece_absent', 'bool', undefined, 'no workpiece'],
    ['cell_id', U, true, 'cell'],
    ['free_space_backend', 'string', undefined, 'bspline, curobo, legacy'],
    ['machine_planning_calibration_base64', U, undefined, 'only read when no cell is connected'],
    ['program_id', U, undefined, 'program id'],
    ['program_digest', U, undefined, 'echoed'],
    ['manifest_revision', U, undefined, 'stamped into identity'],
    ['plan_revision', U, undefined, 'stamped into identity'],
    ['fixtures', U, undefined, 'fixtures'],
  ]),
  ...fields('OlpWeldPlanResponse', S.weldPlan, [
    ['result', 'object', undefined, 'planner document unchanged'],
    ['weldplan_sha256', U, undefined, 'digest of the packed weldplan'],
    ['program_digest', U, undefined, 'program digest'],
    ['dense', 'object', undefined, 'digest, plan_id, samples, segments, robot_cell'],
    ['dense.digest', U, undefined, 'dense digest'],
    ['dense.plan_id', U, undefined, 'plan id'],
    ['dense.samples', U, undefined, 'sample count'],
    ['dense.segments', U, undefined, 'segments'],
    ['dense.robot_cell', U, undefined, 'robot cell identity'],
    ['dense_blob_base64', 'string', undefined, 'dense file bytes in base64'],
  ]),
  ...fields('OlpMachineError', S.errors, [
    ['error', 'string', undefined, 'stable code; a control service refusal keeps its reason as the code'],
    ['detail', U, undefined, 'explanation'],
    ['limit_violation', 'object', false, 'limit refusals may add {kind, segment, sample, axis, value, limit, unit}'],
  ]),
  ...fields('OlpAuthoringError', S.errors, [
    ['ok', 'bool', undefined, 'false'],
    ['code', 'string', undefined, 'error code from the part 7 table'],
    ['error', U, undefined, 'message'],
  ]),
];

// ---------------------------------------------------------------------------------------------
// Limits: [name, section, min, max, value, unit, text].


const LIMIT_ROWS: readonly LimitRow[] = [
  ['olp_port', S.what, undefined, undefined, 8794n, 'port', 'OLP server listens on 127.0.0.1:8794 by default'],
  ['olp_dense_execution_body_bytes', S.conventions, undefined, 65536n, undefined, 'bytes', '64 KiB body for dense-execution routes'],
  ['olp_cad_seam_body_bytes', S.conventions, undefined, 12582912n, undefined, 'bytes', '12 MiB body for /cadquery/topology and /seam'],
  ['olp_weld_plan_body_bytes', S.conventions, undefined, 25165824n, undefined, 'bytes', '24 MiB body for /weld-plan'],
  ['olp_weld_plan_minutes', S.limits, undefined, 30n, undefined, 'min', '/weld-plan runs up to 30 minutes'],
  ['olp_concurrent_weld_plans', S.limits, undefined, 1n, undefined, 'plans', 'one weld plan at a time'],
  ['olp_heartbeat_s', S.limits, undefined, 5n, undefined, 's', 'heartbeat at least every 5 s while the lease is held'],
  ['olp_jog_update_interval_ms', S.endpoints, undefined, undefined, 50n, 'ms', 'jog update repeats about every 50 ms'],
  ['program_revision', S.program, 1n, undefined, undefined, '', 'program_revision >= 1'],
  ['base_program_revision', S.program, 0n, undefined, undefined, '', 'base_program_revision >= 0'],
  ['program_nodes', S.program, 1n, 4096n, undefined, 'nodes', 'nodes 1..4096'],
  ['program_speed_scale', S.program, 0.01, 1, 1, '', 'speed_scale 0.01..1, default 1'],
  ['teach_pose_joint_names', S.teach, 1n, 9n, undefined, 'names', 'joint_names 1..9 unique'],
  ['manual_pose_point_spacing_m', S.geometry, 1e-6, undefined, undefined, 'm', 'consecutive manual_pose_wp points more than 1 micrometre apart'],
  ['machine_schema_version', S.machine, undefined, undefined, 1n, '', 'schema_version 1'],
  ['machine_cycle_ns', S.machine, 250000n, 10000000n, undefined, 'ns', 'cycle_ns 250000..10000000'],
  ['machine_max_cycle_lateness_ns', S.machine, 1n, 249999999n, undefined, 'ns', 'max_cycle_lateness_ns 1..249999999'],
  ['machine_axes', S.machine, 1n, 16n, undefined, 'axes', 'axes 1..16'],
  ['machine_drive_speed_limit_motor_rpm', S.machine, undefined, 6000n, 3000n, 'rpm', 'drive_speed_limit_motor_rpm > 0, at most 6000, default 3000 for flat fixtures'],
  ['machine_slave_position', S.machine, 0n, 65535n, undefined, '', 'slave_position 0..65535'],
  ['machine_following_error_timeout_ms', S.machine, 1n, 1000n, undefined, 'ms', 'following_error_timeout_ms 1..1000'],
  ['machine_completion_timeout_ms', S.machine, 1n, 4294967295n, undefined, 'ms', 'completion_timeout_ms 1..4294967295'],
  ['machine_jog_stop_cycles', S.machine, 1n, 65535n, undefined, 'cycles', 'arrest_ns and quick_stop_ns each 1..65535 x cycle_ns'],
  ['machine_jog_arrest_ns', S.machine, undefined, undefined, 200000000n, 'ns', 'arrest_ns default 200 ms'],
  ['machine_jog_quick_stop_ns', S.machine, undefined, undefined, 300000000n, 'ns', 'quick_stop_ns default 300 ms'],
  ['machine_runtime_cpu', S.machine, 0n, 1023n, undefined, '', 'runtime.cpu 0..1023'],
  ['machine_runtime_priority', S.machine, 1n, 99n, undefined, '', 'runtime.priority 1..99'],
  ['machine_telemetry_retention_ms', S.machine, 100n, 3600000n, 100000n, 'ms', 'telemetry.retention_ms 100..3600000, default 100000'],
  ['machine_telemetry_dump_count', S.machine, 1n, 100n, 20n, 'dumps', 'telemetry.dump_count 1..100, default 20'],
  ['machine_telemetry_dump_bytes', S.machine, 529680n, undefined, 536870912n, 'bytes', 'telemetry.dump_bytes 529680 or more, default 536870912'],
  ['machine_max_grant_lease_ns', S.machine, 1000000n, 10000000000n, undefined, 'ns', 'control.max_grant_lease_ns 1000000..10000000000 in whole ms'],
  ['machine_max_grant_lease_lan_default_ns', S.machine, undefined, undefined, 500000000n, 'ns', 'max_grant_lease_ns default 500000000 on lan'],
  ['machine_max_grant_lease_internet_default_ns', S.machine, undefined, undefined, 3000000000n, 'ns', 'max_grant_lease_ns default 3000000000 on internet'],
  ['machine_max_jog_input_age_ns', S.machine, 1n, 2000000000n, undefined, 'ns', 'control.max_jog_input_age_ns 1..2000000000'],
  ['machine_max_jog_input_age_lan_default_ns', S.machine, undefined, undefined, 250000000n, 'ns', 'max_jog_input_age_ns default 250000000 on lan'],
  ['machine_max_jog_input_age_internet_default_ns', S.machine, undefined, undefined, 750000000n, 'ns', 'max_jog_input_age_ns default 750000000 on internet'],
  ['machine_unused_slaves', S.machine, undefined, 256n, undefined, 'entries', 'bus.unused_slaves up to 256 entries'],
  ['machine_bus_bringup_startup_passive_ms', S.machine, undefined, undefined, 0n, 'ms', 'startup_passive_ms default 0'],
  ['machine_bus_bringup_wait_before_safeop_ms', S.machine, undefined, undefined, 250n, 'ms', 'wait_before_safeop_ms default 250'],
  ['machine_bus_bringup_preop_safeop_timeout_ms', S.machine, undefined, undefined, 5000n, 'ms', 'preop_safeop_timeout_ms default 5000'],
  ['machine_bus_bringup_safeop_op_timeout_ms', S.machine, undefined, undefined, 5000n, 'ms', 'safeop_op_timeout_ms default 5000'],
];

const limits: LimitEntry[] = limitEntries(DOC, LIMIT_ROWS);

// ---------------------------------------------------------------------------------------------
// OLP routes (one per table row), error codes (one per code) and server behaviours.

type OlpRow = readonly [name: string, section: string, title: string, text: string, http?: number];

const ROUTE_ROWS: readonly OlpRow[] = [
  ['route.health', S.endpoints, 'Server status, always 200', 'GET /health', 200],
  ['route.capabilities', S.endpoints, 'Feature flags, schema offline-programming.capabilities.v1', 'GET /capabilities'],
  ['route.robots', S.endpoints, 'Robot descriptions with problems list; 500 robot_store_unreadable', 'GET /robots'],
  ['route.robots_capture_model', S.endpoints, 'Capture a robot model, returning urdf and identity; failure 400', 'POST /robots/capture-model'],
  ['route.cadquery_topology', S.endpoints, 'Forward to the CAD worker (extract_topology, build_seam, build_sequence, tessellate)', 'POST /cadquery/topology'],
  ['route.seam', S.endpoints, 'Forward to the seam worker; reply header X-Offline-Seam-Part', 'POST /seam'],
  ['route.weld_plan', S.endpoints, 'Pack a weldplan, call the planner and return the result (up to 30 min, one at a time)', 'POST /weld-plan'],
  ['route.weld_plan_export', S.endpoints, 'Return the weldplan container as <program_id>.weldplan with X-Weldplan-SHA256', 'POST /weld-plan/export'],
  ['route.targets', S.endpoints, 'List cells and select one', 'GET /targets, POST /targets/select'],
  ['route.dense_execution_cells', S.endpoints, 'Cell registry and target selection ({cell: id}, empty clears)', 'GET/POST /dense-execution/cells, DELETE /dense-execution/cells/{id}, POST /dense-execution/target'],
  ['route.dense_execution_observe', S.endpoints, 'Observe the selected cell', 'GET /dense-execution/capabilities, /status, /cell, /telemetry/window'],
  ['route.dense_execution_home_arm', S.endpoints, 'Home and arm; arming acquires the lease', 'POST /dense-execution/home, /arm'],
  ['route.dense_execution_run', S.endpoints, 'Load, play, pause, stop and heartbeat a planned program', 'POST /dense-execution/load, /play, /pause, /stop, /heartbeat'],
  ['route.dense_execution_jog', S.endpoints, 'Joint jog state, begin, update, end', 'GET /dense-execution/jog/state; POST /dense-execution/jog/begin, /update, /end'],
  ['route.dense_execution_move', S.endpoints, 'Joint move', 'POST /dense-execution/move'],
  ['route.dense_execution_cartesian', S.endpoints, 'Cartesian jog and move', 'GET /dense-execution/cartesian/state; POST /cartesian/start, /intent, /stop, /halt, /move'],
  ['route.dense_execution_go_home', S.endpoints, 'go-home is not available on the core backend', 'POST /dense-execution/go-home'],
  ['route.local_simulator_programs', S.endpoints, 'Loopback simulator with preview jog and program catalog proxy', '/local-simulator/*, /programs*'],
];

/** [code, http or undefined, meaning (our words)]. */
const ERROR_ROWS: readonly (readonly [string, number | undefined, string])[] = [
  ['invalid_request', 400, 'worker refused the request'],
  ['payload_too_large', 413, 'body over 12 MiB'],
  ['busy', 429, 'no worker free'],
  ['canceled', 408, 'client went away'],
  ['timeout', 504, 'worker ran out of time'],
  ['unavailable', 503, 'worker environment missing'],
  ['worker_failed', 502, 'worker crashed or answered invalid JSON'],
  ['invalid_response', 502, 'worker crashed or answered invalid JSON'],
  ['weld_plan_invalid', 400, 'invalid JSON or missing STEP'],
  ['seam_worker_unavailable', 503, 'worker or planner origin not configured'],
  ['motion_origin_unavailable', 503, 'worker or planner origin not configured'],
  ['motion_plan_seam_refused', 502, 'welds could not be planned'],
  ['motion_plan_unjoined', 502, 'welds planned but connecting moves not'],
  ['motion_plan_no_trajectory', 502, 'no dense trajectory; dense_error gives reason, detail, segment_index'],
  ['motion_plan_failed', 502, 'planner call failed'],
  ['motion_plan_invalid_response', 502, 'planner call failed'],
  ['dense_blob_unreachable', 502, 'planner call failed'],
  ['target_changed', 409, 'selection changed since the request fence'],
  ...(
    [
      'cell_switch_busy', 'cell_switch_while_playing', 'cell_model_mismatch', 'cell_id_unknown', 'cell_mode_mismatch',
      'cell_previous_stop_failed', 'cell_backend_unavailable', 'cell_configuration_mismatch', 'cell_description_invalid',
      'cell_backend_mismatch', 'cell_unreachable',
    ] as const
  ).map((c) => [c, 409, 'target selection refusal'] as const),
  ['cell_catalogue_unavailable', 503, 'no cell catalogue'],
  ['cell_not_commissioned', undefined, 'POST /dense-execution/cells refusal (status not given)'],
  ['cell_binding_pinned', undefined, 'POST /dense-execution/cells refusal (status not given)'],
  ['dense_blob_not_found', undefined, 'planner no longer holds the trajectory (status not given)'],
  ['home_required', undefined, 'example machine-control code (status not given)'],
  ['robot_store_unreadable', 500, 'GET /robots cannot read the robot store'],
];

const BEHAVIOUR_ROWS: readonly OlpRow[] = [
  ['listen_default', S.what, 'Listens on 127.0.0.1:8794 (serve --listen), routes under /api/offline-programming/v1', '127.0.0.1:8794'],
  ['same_host_only', S.what, 'Meant for same-host use; must not be exposed on a network', 'exposure'],
  ['joint_limits_only', S.what, 'Jog, moves and Home are checked against joint limits only, not collisions', 'no software E-stop'],
  ['conventions.unknown_fields_ignored', S.conventions, 'Unknown request fields are ignored', 'JSON bodies'],
  ['conventions.trailing_data_refused', S.conventions, 'Trailing data after the JSON value is refused', 'JSON bodies'],
  ['conventions.gzip', S.conventions, 'Responses are gzip-compressed when accepted', 'compression'],
  ['conventions.units_in_names', S.conventions, 'Units are carried in field names (_rad, _deg, _mm, _m, _s, _ms, _ns)', 'units'],
  ['fencing.headers', S.fencing, 'With a cell catalogue every POST under /dense-execution/ carries X-RT-Target-Generation and X-RT-Target-Cell', 'target fence'],
  ['fencing.target_changed', S.fencing, 'A different selected cell answers 409 target_changed and sends nothing to the robot', 'target fence', 409],
  ['fencing.exempt_routes', S.fencing, 'Exempt: /stop, /pause, /heartbeat, /target, /cells, /jog/stop, /jog/end and /arm with armed false', 'target fence'],
  ['fencing.cartesian_not_exempt', S.fencing, '/cartesian/stop and /cartesian/halt are fenced', 'target fence'],
  ['fencing.single_target', S.fencing, 'With no catalogue there is no selection and no fencing', 'target fence'],
  ['heartbeat.required', S.endpoints, 'Without a heartbeat every 5 s while the lease is held the machine stops with ui_heartbeat_lost', 'heartbeat'],
  ['stop.unfenced_releases', S.endpoints, 'Stop needs no fence and releases the lease', 'stop'],
  ['weld_plan.always_dense', S.weldPlan, '/weld-plan always asks for weld and connecting optimisation, verification and a dense trajectory', 'planner options'],
  ['weld_plan.calibration_when_disconnected', S.weldPlan, 'machine_planning_calibration_base64 is only read when no cell is connected', 'request'],
  ['errors.machine_shape', S.errors, 'Machine-control routes reply with error and detail, keeping a control service reason as the code', 'error shape'],
  ['errors.authoring_shape', S.errors, 'Authoring and service routes reply with ok false, code and error', 'error shape'],
  ['targets.unreachable_reasons', S.errors, 'Targets list entries may report backend unreachable with cell_configuration_missing, cell_mode_mismatch or cell_unreachable', 'targets list'],
  ['reason.ui_heartbeat_lost', S.endpoints, 'A machine stopped for a missing heartbeat while the lease was held reports ui_heartbeat_lost', 'heartbeat'],
  ['auth.none', S.auth, 'No authentication; reach it from the same host only', 'authentication'],
];

const olp: RuleEntry[] = [
  ...ROUTE_ROWS,
  ...ERROR_ROWS.map(([code, http, meaning]): OlpRow => [`error.${code}`, S.errors, `OLP error ${code}${http ? ` (HTTP ${http})` : ''}: ${meaning}`, meaning, http]),
  ...BEHAVIOUR_ROWS,
].map(([name, section, title, text, http]) => {
  const e: RuleEntry = { family: 'olp', id: `olp:${name}`, doc: DOC, section, title, text };
  if (http !== undefined) e.http = http;
  return e;
});

// ---------------------------------------------------------------------------------------------
// Program document and machine configuration rules.

const RULE_ROWS: readonly (readonly [string, string, string, string])[] = [
  ['program.authored_not_solved', S.program, 'A program is an ordered node list saying what to do, never a solved trajectory', 'document nature'],
  ['program.units_fixed', S.program, 'Units are fixed: m, rad, s, joint_order J1..J9', 'units'],
  ['program.node_ids_unique', S.nodes, 'Node ids are unique', 'nodes'],
  ['program.node_unknown_keys', S.nodes, 'Unknown node keys are refused', 'nodes'],
  ['program.weld_joint_ids_unique', S.program, 'Weld joint ids are unique', 'workpiece'],
  ['program.placement_cell_is_model', S.program, 'placement.cell_id equals robot.model_id', 'placement'],
  ['program.ordering_grammar', S.ordering, 'Motion nodes (ignoring dwell and io) follow home? approach weld (transit weld)* retract home?', 'ordering'],
  ['program.weld_neighbours', S.ordering, 'A weld follows an approach or transit and precedes a retract or transit', 'ordering'],
  ['program.transit_between_welds', S.ordering, 'A transit sits between two welds', 'ordering'],
  ['program.home_at_ends', S.ordering, 'home only starts or ends the program', 'ordering'],
  ['program.move_placement', S.ordering, 'move nodes may sit before, after or between complete weld blocks', 'ordering'],
  ['program.scalar_function_kinds', S.scalar, 'Scalar functions over s in [0,1]: constant, piecewise_linear, bspline, samples', 'scalar function'],
  ['program.bspline_knots', S.scalar, 'bspline knots_u has control_values + degree + 1 entries', 'scalar function'],
  ['program.samples_function', S.scalar, 'samples has s and values of equal length, at least two', 'scalar function'],
  ['program.standoff_positive', S.scalar, 'standoff_mm is required and positive everywhere', 'scalar function'],
  ['program.geometry_seam', S.geometry, 'seam geometry: id, reference, orientation work and travel angle functions, inline B-spline line or weld_joint_ref', 'weld geometry'],
  ['program.geometry_posed_polyline', S.geometry, 'posed_polyline: frame_id and at least two points of xyz_m and rpy_rad', 'weld geometry'],
  ['program.geometry_manual_pose_wp', S.geometry, 'manual_pose_wp: workpiece frame, points with continuity C0/C1/C2 more than 1 micrometre apart; shape spline or arc of three non-collinear points', 'weld geometry'],
  ['program.depart_standoff_forbidden', S.freespace, 'depart_standoff is not allowed on approach or home', 'freespace'],
  ['program.arrive_standoff_forbidden', S.freespace, 'arrive_standoff is not allowed on retract or home', 'freespace'],
  ['program.path_vocabulary_refused', S.freespace, 'Freespace nodes refuse knots, knots_u, times_s, control_points_xyz_m, segments, samples, points, poses, rpy_rad, path', 'freespace'],
  ['program.teach_pose_keys', S.teach, 'TeachPose has frame_id world, xyz_m, rpy_rad, joint_names, joint_values_rad and no other keys', 'teach'],
  ['program.capture_cell_id', S.teach, 'capture.cell_id is required when source is machine', 'teach'],
  ['program.forbidden_keys', S.forbidden, 'Refused at any depth: joints, joint_positions_rad, target_joints_rad, q_rad, qd_rad_s, target_tcp_m, tcp_pose_m, trajectory, planned_path, accepted_plan, preloaded_plan, waypoints, rows', 'forbidden keys'],
  ['program.row_hash', S.digests, 'row_hash is sha256 of the canonical JSON of the node without row_hash', 'digest'],
  ['program.program_digest', S.digests, 'program_digest is sha256 of the canonical JSON of the document without program_digest', 'digest'],
  ['program.canonical_json', S.digests, 'Canonical JSON sorts keys at every level, has no whitespace and refuses non-finite numbers', 'canonical JSON'],
  ['machine_config.compiled_directory', S.machine, 'Compiling yields an immutable directory named by the configuration digest', 'compile'],
  ['machine_config.compiled_files', S.machine, 'Files: argv.json, axes.conf, configuration.identity, configuration.base.identity, machine.identity, deployment.identity, coordinate.identity.json, robot.json, resources.json, resources/<sha256>', 'compiled files'],
  ['machine_config.base_identity_with_io', S.machine, 'configuration.base.identity exists only with an io block', 'compiled files'],
  ['machine_config.robot_json_when_pinned', S.machine, 'robot.json exists when a robot description is pinned', 'compiled files'],
  ['machine_config.configuration_sha256', S.machine, 'configuration_sha256 covers machine JSON and resolved drive configs; pinned in acquire bindings', 'digest'],
  ['machine_config.machine_sha256', S.machine, 'machine_sha256 covers anything altering motion or drive behaviour', 'digest'],
  ['machine_config.deployment_sha256', S.machine, 'deployment_sha256 covers runtime placement and non-motion metadata', 'digest'],
  ['machine_config.canonical_identity_text', S.machine, 'Identity text: sorted keys, one key=value per line, %.17g doubles, decimal integers', 'identity text'],
  ['machine_config.provenance', S.machine, 'Numeric robot facts and exceptions need a <field>_source or <field>_unverified string; missing provenance fails the compile', 'provenance'],
  ['machine_config.cycle_divisible', S.machine, 'cycle_ns is divisible by each nonzero drive DC quantum', 'cycle'],
  ['machine_config.slave_position_unique', S.machine, 'slave_position is unique across axes', 'axes'],
  ['machine_config.drive_speed_robot_bound', S.machine, 'drive_speed_limit_motor_rpm is forbidden on robot-bound machines', 'axes'],
  ['machine_config.robot_bound_form', S.machine, 'Robot-bound axes carry robot_joint, slave_position and limits with tracking fields only', 'axes'],
  ['machine_config.lease_whole_ms', S.machine, 'max_grant_lease_ns is in whole ms', 'control'],
  ['machine_config.unknown_slaves', S.machine, 'bus.unknown_slaves refuses by default, or holds with a note', 'bus'],
];

const rules: RuleEntry[] = RULE_ROWS.map(([name, section, title, text]) => ({
  family: 'rule',
  id: `rule:${name}`,
  doc: DOC,
  section,
  title,
  text,
}));

export const entries: CatalogueEntry[] = [...programDocument, ...teach, ...machineConfig, ...olpBodies, ...limits, ...olp, ...rules];
