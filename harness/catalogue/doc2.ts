// Catalogue of document 2: the weld planner HTTP API (port 8796) and the dense joint trajectory
// file (.rdt). Facts (reasons, offsets, limits, defaults) are copied from the document; titles and
// rule texts are our own wording. Tables drive the entries; see index.ts (harness/catalogue/index.ts) for the lookups.

import type {
  CatalogueEntry,
  DenseErrorEntry,
  FieldEntry,
  FormatReasonEntry,
  LayoutEntry,
  LimitEntry,
  RuleEntry,
} from './types.ts';
import { fieldEntries, limitEntries, type FieldRow, type LimitRow } from './rows.ts';

const DOC = 2 as const;

/** Section headings of document 2 as used in `section`. */
const S = {
  what: 'part 1 What the service does',
  health: 'part 2 Health body',
  progress: 'part 2 Progress body',
  result: 'part 2 Plan result document',
  denseError: 'part 2 Plan result document: dense_error reasons',
  file: 'part 2 Dense trajectory file',
  sample: 'part 2 Dense trajectory file: sample record',
  header: 'part 2 Dense trajectory file: header fields',
  segment: 'part 2 Dense trajectory file: segment fields',
  digest: 'part 2 Dense trajectory file: content digest',
  cellCheck: 'part 2 Robot and cell identity check',
  states: 'part 3 States and transitions',
  endpoints: 'part 4 Endpoints',
  plan: 'part 4 Endpoints: POST /api/motion/plan',
  dense: 'part 4 Endpoints: GET /api/motion/dense/{trajectory_digest}',
  auth: 'part 5 Authentication',
  errors: 'part 7 Errors',
  formats: 'part 7 Errors: file-format reasons',
  admission: 'part 7 Errors: admission by the control service',
  limits: 'part 8 Limits',
  versioning: 'part 9 Versioning',
} as const;

type RuleFamily = RuleEntry['family'];

function ruleEntry(family: RuleFamily, id: string, section: string, title: string, text: string, http?: number): RuleEntry {
  const e: RuleEntry = { family, id: `${family}:${id}`, doc: DOC, section, title, text };
  if (http !== undefined) e.http = http;
  return e;
}

// ---------------------------------------------------------------------------------------------
// File-format reasons (part 7). Exported so document 1's "Dense file format" group reuses the list.

/** [reason, rule broken (our wording)] in document order. */
export const FORMAT_REASON_ROWS: readonly (readonly [string, string])[] = [
  ['header_truncated', 'blob under 4 bytes, or header_len reaches past the end of the blob'],
  ['header_json_invalid', 'header is not valid JSON (the daemon also uses it for missing or mistyped fields)'],
  ['schema_mismatch', 'header schema is not robot.v4.dense-joint-trajectory.v1 (name used by decoders other than the control service)'],
  ['dense_schema_mismatch', 'header schema is not robot.v4.dense-joint-trajectory.v1 (name reported by the control service)'],
  ['axis_count_mismatch', 'axes.axis_count is not 9'],
  ['sample_encoding_mismatch', 'encoding is not f64-be-aos.v1 or record_bytes is not 153'],
  ['limits_invalid', 'max_abs_qd_rad_s is not nine finite positive numbers'],
  ['time_grid_invalid', 'dt_s <= 0, a segment whose first t_s is not 0, or a step off dt_s by more than 1e-9 s'],
  ['segments_empty', 'the header lists no segments'],
  ['segment_index_out_of_order', 'a segment index differs from its list position'],
  ['kind_invalid', 'segment kind is not freespace, weld or dwell'],
  ['segment_too_short', 'a segment has fewer than 2 samples'],
  ['block_layout_invalid', 'block offsets not contiguous, or byte_length is not sample_count x 153'],
  ['blob_length_mismatch', 'blocks do not cover the body exactly'],
  ['block_sha256_mismatch', 'block bytes do not match block.sha256'],
  ['reserved_flags_set', 'a flag bit other than bit 0 is set'],
  ['total_sample_count_mismatch', 'sampling.total_sample_count differs from the sum of segment sample counts'],
  ['sample_count_overflow', 'more than 250000 samples'],
  ['nonfinite_sample', 'NaN or infinity in t_s, q_rad or qd_rad_s'],
  ['qd_limit_exceeded', 'a sample velocity exceeds max_abs_qd_rad_s for its axis'],
  ['torch_outside_weld', 'torch bit set in a segment that is not a weld'],
  ['q_step_exceeded', 'a position step exceeds 1.25 x limit x dt_s on some axis'],
  ['boundary_qd_nonzero', 'first or last sample of a segment moves faster than 1e-6 rad/s'],
  ['boundary_q_discontinuity', 'a segment starts more than 1e-3 rad from where the previous one ended'],
  ['duration_mismatch', 'duration_s differs from the last t_s by more than 1e-9 s'],
  ['trajectory_digest_mismatch', 'recomputed content digest differs from the header'],
];

const formatReasons: FormatReasonEntry[] = FORMAT_REASON_ROWS.map(([reason, rule]) => ({
  family: 'format_reason',
  id: `format_reason:${reason}`,
  doc: DOC,
  section: S.formats,
  title: `Dense file refused as ${reason}: ${rule.split(' (')[0]}`,
  reason,
  rule,
}));

// ---------------------------------------------------------------------------------------------
// dense_error reasons of a plan result (part 2).

const DENSE_ERROR_ROWS: readonly (readonly [string, string])[] = [
  ['result_empty', 'dense asked for without both trajectory stages, or nothing could be played'],
  ['identity_invalid', 'program_id empty or not a plain identifier'],
  ['seam_not_planned', 'a seam was not crossed by the search'],
  ['motion_not_verified', 'a seam or move lacks PASS, counts collisions, penetrations or limit hits, has an unverifiable check or tracking out of tolerance'],
  ['motion_join_failed', 'connecting moves could not be planned'],
  ['motion_result_invalid', 'the result is malformed (for example duplicate seam ids or an unknown move kind)'],
  ['motion_not_planned', 'a program node has no planned motion'],
  ['qd_limit_exceeded', "a sample exceeds the cell's per-axis velocity ceiling"],
  ['q_step_exceeded', 'the resampled trajectory broke the position step format rule'],
  ['boundary_qd_nonzero', 'the resampled trajectory broke the at-rest boundary format rule'],
  ['boundary_q_discontinuity', 'the resampled trajectory broke the boundary continuity format rule'],
  ['time_grid_invalid', 'the resampled trajectory broke the time grid format rule'],
  ['sample_count_overflow', 'the resampled trajectory has more samples than the format allows'],
];

const denseErrors: DenseErrorEntry[] = DENSE_ERROR_ROWS.map(([reason, title]) => ({
  family: 'dense_error',
  id: `dense_error:${reason}`,
  doc: DOC,
  section: S.denseError,
  title: `No dense file written (${reason}): ${title}`,
  reason,
}));

// ---------------------------------------------------------------------------------------------
// Dense sample record layout (big-endian, 153 bytes).

const denseSample: LayoutEntry[] = (
  [
    ['t_s', 0, 8, 'f64', 'seconds, segment-local, 0.0 at the start of every segment'],
    ['q_rad', 8, 72, 'f64[9]', 'positions J1..J9 in rad'],
    ['qd_rad_s', 80, 72, 'f64[9]', 'velocities J1..J9 in rad/s, mandatory'],
    ['flags', 152, 1, 'u8', 'bit 0 torch_on; bits 1-7 reserved and zero'],
  ] as const
).map(([field, offset, size, type, note]) => ({
  family: 'layout',
  id: `layout:dense_sample:${field}`,
  doc: DOC,
  section: S.sample,
  title: `Dense sample ${field} at byte ${offset} (big-endian ${type})`,
  struct: 'dense_sample',
  field,
  offset,
  size,
  type,
  note: `big-endian; ${note}`,
}));

// ---------------------------------------------------------------------------------------------
// Fields: [path, valueType, required (undefined when the document does not say), rule].


const fields = (type: string, section: string, rows: readonly FieldRow[]): FieldEntry[] => fieldEntries(DOC, type, section, rows);

const U = 'unspecified';

const health = fields('PlannerHealth', S.health, [
  ['cuda', 'bool', undefined, 'whether CUDA is available'],
  ['device', 'string|null', undefined, 'name of device 0; null without a GPU'],
]);

const progress = fields('PlannerProgress', S.progress, [
  ['stage', 'string|null', undefined, 'null when no plan runs, else the last reported stage name (e.g. sweep, weldseam, freespace seed, optimize, verify)'],
]);

const planResult = fields('PlanResult', S.result, [
  ['schema', 'string', undefined, 'amr-weld-planner-v1.motion-plan-result.v1'],
  ['cell_id', U, undefined, 'top-level block'],
  ['screened', U, undefined, 'top-level block'],
  ['k_best', U, undefined, 'top-level block'],
  ['request', 'object', undefined, 'top-level block; includes request_sha256, program_id, cell_id'],
  ['request.request_sha256', U, undefined, 'digest of the request'],
  ['request.program_id', U, undefined, 'program id of the request'],
  ['request.cell_id', U, undefined, 'cell id of the request'],
  ['producer', 'object', undefined, 'top-level block: module, source_revision, source_revision_state'],
  ['producer.module', U, undefined, 'producing module'],
  ['producer.source_revision', U, undefined, 'source revision of the producer'],
  ['producer.source_revision_state', U, undefined, 'state of that source revision'],
  ['coverage', 'object', undefined, 'top-level block saying what was and was not checked'],
  ['coverage.candidate_collision_screening', U, undefined, 'coverage item'],
  ['coverage.weld_trajectory_continuous_verification', U, undefined, 'coverage item'],
  ['coverage.connecting_trajectory_continuous_verification', U, undefined, 'coverage item'],
  ['coverage.canonical_motion_server', U, undefined, 'coverage item'],
  ['coverage.physical_motion', U, undefined, 'coverage item'],
  ['coverage.execution_authority', U, undefined, 'coverage item'],
  ['coverage.candidate_limit_checks', U, undefined, 'coverage item'],
  ['seams[]', 'array', undefined, 'one entry per seam'],
  ['seams[].id', U, undefined, 'seam id'],
  ['seams[].length_mm', U, undefined, 'seam length in mm'],
  ['seams[].crossed', 'bool', undefined, 'whether the search crossed the seam; when false frontier and frontier_causes say where and why it stopped'],
  ['seams[].frontier', U, undefined, 'where the search stopped when crossed is false'],
  ['seams[].frontier_causes', U, undefined, 'why the search stopped when crossed is false'],
  ['seams[].axis_names', U, undefined, 'axis names of the seam'],
  ['seams[].held', 'object', undefined, 'map of axis to held value'],
  ['seams[].candidates[]', 'array', undefined, 'candidates with cost_deg, joints_deg, times_s'],
  ['seams[].candidates[].cost_deg', U, undefined, 'candidate cost in degrees'],
  ['seams[].candidates[].joints_deg', U, undefined, 'candidate joints in degrees'],
  ['seams[].candidates[].times_s', U, undefined, 'candidate times in s'],
  ['seams[].trajectory.knots_deg', U, undefined, 'cubic Hermite knots in degrees'],
  ['seams[].trajectory.knot_velocity_deg_s', U, undefined, 'cubic Hermite knot velocities in deg/s'],
  ['seams[].trajectory.times_s', U, undefined, 'cubic Hermite knot times in s'],
  ['seams[].trajectory.sampled_tracking_mm', U, undefined, 'tracking sampled at knots and midpoints'],
  ['seams[].trajectory.tracking.verdict', U, undefined, 'tracking certificate verdict'],
  ['seams[].trajectory.tracking.tolerance_mm', U, undefined, 'tracking tolerance'],
  ['seams[].trajectory.tracking.bound_mm', U, undefined, 'tracking bound'],
  ['seams[].trajectory.tracking.worst_seen_mm', U, undefined, 'worst tracking error seen'],
  ['seams[].trajectory.tracking.segments_out', U, undefined, 'segments out of tolerance'],
  ['seams[].trajectory.tracking.undecided', U, undefined, 'undecided segments'],
  ['seams[].trajectory.tracking.unverifiable', U, undefined, 'unverifiable segments'],
  ['seams[].trajectory.verdict.verdict', U, undefined, 'verification verdict (values include PASS, REFUSED, FAIL)'],
  ['seams[].trajectory.verdict.collisions', U, undefined, 'collision count'],
  ['seams[].trajectory.verdict.penetrating', U, undefined, 'penetration count'],
  ['seams[].trajectory.verdict.limit_violations', U, undefined, 'limit violation count'],
  ['seams[].trajectory.verdict.unverifiable', U, undefined, 'unverifiable checks'],
  ['seams[].trajectory.verdict.worst_clearance_mm', U, undefined, 'worst clearance in mm'],
  ['connecting_trajectories[]', 'array', undefined, 'connecting moves in execution order'],
  ['connecting_trajectories[].kind', 'string', undefined, 'approach, transit or retract'],
  ['connecting_trajectories[].from', U, undefined, 'seam id moved from; null at the home end'],
  ['connecting_trajectories[].to', U, undefined, 'seam id moved to; null at the home end'],
  ['connecting_trajectories[].node_id', U, undefined, 'program node the move is tied to'],
  ['connecting_trajectories[].duration_s', U, undefined, 'move duration in s'],
  ['connecting_trajectories[].knots_deg', U, undefined, 'knots in degrees'],
  ['connecting_trajectories[].knot_velocity_deg_s', U, undefined, 'knot velocities in deg/s'],
  ['connecting_trajectories[].times_s', U, undefined, 'knot times in s'],
  ['connecting_trajectories[].clearance_mm', U, undefined, 'clearance with env and self parts'],
  ['connecting_trajectories[].verdict', U, undefined, 'verification verdict'],
  ['connecting_trajectories_error', U, undefined, 'present when the connecting stage failed; welds may still be good'],
  ['program_order', U, undefined, 'present when the program has taught moves: enabled nodes in order'],
  ['speed_scale', U, undefined, 'present when plan speed is below 1; times already stretched and velocities scaled'],
  ['dense', 'object', undefined, 'present with dense=true'],
  ['dense.trajectory_digest', 'string', undefined, 'content digest of the stored file'],
  ['dense.plan_id', 'string', undefined, '<program_id>:<first 12 hex of the request digest>'],
  ['dense.program_digest', 'string', undefined, 'sha256: followed by the request digest'],
  ['dense.dt_s', U, undefined, 'sample period in s'],
  ['dense.total_sample_count', U, undefined, 'sample count over all segments'],
  ['dense.total_duration_s', U, undefined, 'duration over all segments'],
  ['dense.max_abs_qd_rad_s', U, undefined, 'per-axis velocity ceiling in rad/s'],
  ['dense.robot_cell', U, undefined, 'robot and cell identity block'],
  ['dense.bytes', U, undefined, 'size of the dense file'],
  ['dense.segments[]', 'array', undefined, 'segments with index, kind, source_id, sample_count, duration_s'],
  ['dense.segments[].index', U, undefined, 'segment index'],
  ['dense.segments[].kind', U, undefined, 'segment kind'],
  ['dense.segments[].source_id', U, undefined, 'segment source id'],
  ['dense.segments[].sample_count', U, undefined, 'samples in the segment'],
  ['dense.segments[].duration_s', U, undefined, 'segment duration in s'],
  ['dense_error', 'object', undefined, 'present with dense=true when no file was written'],
  ['dense_error.reason', 'string', undefined, 'one of the dense_error reasons'],
  ['dense_error.detail', U, undefined, 'explanation'],
  ['dense_error.segment_index', U, undefined, 'segment concerned'],
  ['options', U, undefined, 'top-level block'],
  ['timings_ms', U, undefined, 'top-level block'],
]);

const denseHeader = fields('DenseHeader', S.header, [
  ['schema', 'string', undefined, 'exactly robot.v4.dense-joint-trajectory.v1'],
  ['plan_id', 'string', undefined, 'nonempty for the control service'],
  ['program_id', 'string', undefined, 'nonempty for the control service'],
  ['program_digest', 'string', undefined, 'sha256:<64 hex>; nonempty for the control service'],
  ['trajectory_digest', 'string', undefined, 'content digest sha256:<64 hex>, recomputed on every decode'],
  ['manifest_revision', 'uint64', undefined, 'JSON integer, not a string'],
  ['plan_revision', 'uint64', undefined, 'JSON integer, not a string'],
  ['created_at', 'string', undefined, 'RFC 3339 timestamp'],
  ['axes.axis_count', 'integer', undefined, 'must be 9'],
  ['axes.axis_mask', 'integer', undefined, 'commanded columns, one bit per column, J1 = bit 0 (0x1ff nine axes, 0x3f six)'],
  ['axes.position_unit', 'string', undefined, 'rad'],
  ['axes.velocity_unit', 'string', undefined, 'rad_s'],
  ['sampling.dt_s', 'number', undefined, 'sample period in s, > 0 (the planner uses 0.01)'],
  ['sampling.total_sample_count', 'integer', undefined, 'sum of segment sample counts, at most 250000'],
  ['sampling.total_duration_s', 'number', undefined, 'sum of segment durations'],
  ['limits.max_abs_qd_rad_s', 'float64[9]', undefined, 'nine finite positive per-axis velocity ceilings; every sample at or below'],
  ['segments[]', 'array', undefined, 'at least one segment'],
  ['sample_encoding.encoding', 'string', undefined, 'f64-be-aos.v1'],
  ['sample_encoding.record_bytes', 'integer', undefined, '153'],
  ['robot_cell', 'object', false, 'optional identity block'],
  ['robot_cell.model_id', U, undefined, 'robot model id'],
  ['robot_cell.robot_description_sha256', U, undefined, 'robot description digest'],
  ['robot_cell.machine_planning_calibration_sha256', U, undefined, 'planning calibration digest'],
  ['robot_cell.machine_planning_calibration_source', U, undefined, 'target or empty'],
  ['robot_cell.machine_configuration_sha256', U, false, 'optional; recorded only'],
  ['process_markers', 'array', false, 'optional output intents tied to exact samples; read only by the control service'],
]);

const denseSegment = fields('DenseSegment', S.segment, [
  ['index', 'integer', undefined, 'equals the list position'],
  ['kind', 'string', undefined, 'freespace, weld or dwell'],
  ['source_id', 'string', undefined, 'source of the segment'],
  ['sample_count', 'integer', undefined, 'at least 2'],
  ['duration_s', 'number', undefined, 'equals the last t_s within 1e-9 s'],
  ['block.byte_offset', 'integer', undefined, 'running sum of earlier block lengths, counted from the end of the JSON header'],
  ['block.byte_length', 'integer', undefined, 'sample_count x 153'],
  ['block.sha256', 'string', undefined, 'sha256:<64 hex> over the block bytes, checked before samples are parsed'],
]);

/** Query options of POST /api/motion/plan: [name, type, default, range, meaning]. */
const QUERY_ROWS: readonly (readonly [string, string, string, string, string])[] = [
  ['k_best', 'integer', '5', '1..16', 'candidate paths kept per seam'],
  ['screen_collisions', 'boolean', 'true', '', 'screen search poses against the collision model; false means unchecked, not safe'],
  ['samples_per_seam', 'integer|null', 'null', '2..512', 'lattice by sample count; null spaces by time from travel speed'],
  ['run_weld_trajopt', 'boolean', 'false', '', 'continuous weld trajectories'],
  ['run_connecting_trajopt', 'boolean', 'true', '', 'approach, transits, retract and taught moves'],
  ['free_space_backend', 'string', 'bspline', 'bspline, curobo, legacy', 'connecting-move solver; other values give 422'],
  ['verify', 'boolean', 'true', '', 'run the verifier'],
  ['verify_margin_mm', 'number', '2.0', '0..50', 'clearance margin in mm'],
  ['order_seams', 'boolean', 'false', '', 'reorder welds to shorten transits'],
  ['dense', 'boolean', 'false', '', 'build, check and store the trajectory; needs both trajectory stages'],
  ['program_id', 'string', 'empty', 'up to 120 chars', 'stamped into plan identity; dense needs letters, digits, dot, underscore, colon, hyphen only'],
  ['manifest_revision', 'integer', '1', '>= 1', 'stamped into identity'],
  ['plan_revision', 'integer', '1', '>= 1', 'stamped into identity'],
];

const plannerQuery = fields(
  'PlannerQuery',
  S.plan,
  QUERY_ROWS.map(([name, type, dflt, range, meaning]) => [
    name,
    type,
    undefined,
    `${meaning}; default ${dflt}${range ? `; range ${range}` : ''}`,
  ]),
);

// ---------------------------------------------------------------------------------------------
// Limits: [name, section, min, max, value, unit, text].


const LIMIT_ROWS: readonly LimitRow[] = [
  ['plan_query_k_best', S.plan, 1n, 16n, 5n, 'candidates', 'k_best 1..16, default 5'],
  ['plan_query_samples_per_seam', S.plan, 2n, 512n, undefined, 'samples', 'samples_per_seam 2..512 or null (default null)'],
  ['plan_query_verify_margin_mm', S.plan, 0, 50, 2.0, 'mm', 'verify_margin_mm 0..50, default 2.0'],
  ['plan_query_program_id_chars', S.plan, undefined, 120n, undefined, 'characters', 'program_id up to 120 characters (part 4 and part 8)'],
  ['plan_query_manifest_revision', S.plan, 1n, undefined, 1n, '', 'manifest_revision >= 1, default 1'],
  ['plan_query_plan_revision', S.plan, 1n, undefined, 1n, '', 'plan_revision >= 1, default 1'],
  ['planner_port', S.what, undefined, undefined, 8796n, 'port', 'default listen address 0.0.0.0:8796'],
  ['planner_concurrent_plans', S.limits, undefined, 1n, undefined, 'plans', 'one plan runs at a time'],
  ['planner_cancel_kill_s', S.limits, undefined, undefined, 2n, 's', 'kill follows the termination signal after 2 s on client disconnect'],
  ['planner_refused_results_kept', S.result, undefined, 5n, undefined, 'requests', 'refused directory keeps the newest 5'],
  ['dense_samples', S.limits, undefined, 250000n, undefined, 'samples', 'at most 250000 samples in a dense file (about 38 MB)'],
  ['dense_sample_period_s', S.limits, undefined, undefined, 0.01, 's', 'sample period used by the planner'],
  ['dense_header_bytes', S.limits, undefined, 1048576n, undefined, 'bytes', 'JSON header at most 1048576 bytes for admission'],
  ['dense_admission_body_bytes', S.admission, undefined, 39298580n, undefined, 'bytes', 'body at most 1048580 + 250000 x 153 bytes'],
  ['dense_record_bytes', S.sample, undefined, undefined, 153n, 'bytes', 'sample record size, encoding f64-be-aos.v1'],
  ['dense_axis_count', S.header, undefined, undefined, 9n, 'columns', 'axes.axis_count must be 9'],
  ['dense_header_len_prefix_bytes', S.file, undefined, undefined, 4n, 'bytes', 'u32 big-endian header_len before the JSON header'],
  ['dense_segment_samples', S.segment, 2n, undefined, undefined, 'samples', 'each segment holds at least 2 samples'],
  ['dense_boundary_rest_rad_s', S.file, undefined, 1e-6, undefined, 'rad/s', 'first and last sample of each segment at most 1e-6 rad/s on every axis'],
  ['dense_boundary_continuity_rad', S.file, undefined, 1e-3, undefined, 'rad', 'segment starts within 1e-3 rad of the previous end on every axis'],
  ['dense_time_tolerance_s', S.formats, undefined, 1e-9, undefined, 's', 'time step and duration tolerance 1e-9 s'],
  ['dense_q_step_factor', S.formats, undefined, 1.25, undefined, 'x limit x dt_s', 'position step at most 1.25 x limit x dt_s'],
];

const limits: LimitEntry[] = limitEntries(DOC, LIMIT_ROWS);

// ---------------------------------------------------------------------------------------------
// Endpoints, planner behaviours and errors, dense format and admission rules.

const endpoints: RuleEntry[] = [
  ruleEntry('endpoint', 'GET /api/motion/health', S.endpoints, 'Planner health: GPU availability as a JSON health body', 'returns PlannerHealth'),
  ruleEntry('endpoint', 'GET /api/motion/progress', S.endpoints, 'Planner progress: stage of the running plan', 'returns PlannerProgress'),
  ruleEntry('endpoint', 'POST /api/motion/plan', S.endpoints, 'Plan a raw .weldplan body; options in the query string', 'body application/octet-stream; returns the plan result document'),
  ruleEntry('endpoint', 'GET /api/motion/dense/{trajectory_digest}', S.endpoints, 'Fetch a stored dense trajectory by digest', 'returns the stored bytes as application/octet-stream'),
];

/** [name, section, title, text, http] */
const PLANNER_ROWS: readonly (readonly [string, string, string, string, number?])[] = [
  ['listen.default', S.what, 'Planner listens on 0.0.0.0:8796 by default; --host picks the interface', 'default listen address 0.0.0.0:8796; flag --host selects the interface'],
  ['plan.one_at_a_time', S.what, 'Only one plan runs; a second request waits and stays cancellable', 'one plan at a time; a waiting request can still be cancelled'],
  ['plan.fresh_process', S.what, 'Each admitted plan runs in a fresh process owning the GPU', 'each admitted request runs in a fresh process'],
  ['plan.disconnect_cancels', S.what, 'Client disconnect terminates the planning process group (kill after 2 s) and answers 499', 'termination signal, kill after 2 s, reply 499', 499],
  ['plan.cancelled_never_stores', S.what, 'A cancelled plan stores no trajectory', 'no store on cancel'],
  ['plan.store_after_success', S.what, 'A trajectory is stored only after the planning process succeeded with the client still connected', 'store only on success and live client'],
  ['plan.body_octet_stream', S.plan, 'Plan body is the raw .weldplan with Content-Type application/octet-stream', 'raw weldplan bytes'],
  ['plan.dense_needs_both_stages', S.plan, 'dense=true needs both trajectory stages', 'dense builds, checks and stores the trajectory; needs weld and connecting stages'],
  ['plan.program_id_charset', S.plan, 'A dense trajectory needs program_id of letters, digits, dot, underscore, colon, hyphen', 'program_id charset for dense'],
  ['result.schema', S.result, 'Plan results carry schema amr-weld-planner-v1.motion-plan-result.v1', 'schema string'],
  ['result.units', S.result, 'Plan results use degrees, millimetres and seconds', 'angles deg, lengths mm, times s'],
  ['result.verdict_values', S.result, 'Verdict values include PASS, REFUSED and FAIL', 'verdict values'],
  ['result.plan_id_format', S.result, 'dense.plan_id is <program_id>:<first 12 hex of request digest>', 'plan_id format'],
  ['result.program_digest_format', S.result, 'dense.program_digest is sha256: followed by the request digest', 'program_digest format'],
  ['result.speed_scale_present', S.result, 'speed_scale appears only when plan speed is below 1, with times stretched and velocities scaled', 'speed_scale presence'],
  ['result.200_without_trajectory', S.result, 'A 200 reply may have no trajectory; dense_error explains and the request is kept under the refused directory', 'refused directory keeps the newest 5', 200],
  ['dense.fetch_headers', S.dense, 'Dense fetch returns application/octet-stream with Cache-Control no-store', 'content type and cache control'],
  ['dense.store_naming', S.dense, 'The store holds only admitted trajectories named sha256-<hex>.rdt', 'store file naming'],
  ['dense.store_directory', S.dense, 'Store directory comes from --dense-store-dir, an environment override or a per-user cache default', 'store location; the store is a cache'],
  ['auth.none', S.auth, 'The planner has no authentication and no interactive API page', 'no authentication'],
  ['error.400_empty_body', S.errors, 'Empty plan body answers 400 with error "empty body is not a weldplan"', 'object with error', 400],
  ['error.422_unknown_backend', S.errors, 'Unknown free_space_backend answers 422 with detail naming it', 'object with detail', 422],
  ['error.422_query_invalid', S.errors, 'Query parameter out of range or of wrong type answers 422 with detail items', 'object with detail listing items', 422],
  ['error.422_planning_failed', S.errors, 'Planning failure (unreadable container or missing meshes) answers 422 with error "<type>: <message>"', 'object with error', 422],
  ['error.499_cancelled', S.errors, 'Client disconnect answers 499 with error "Planning cancelled"', 'object with error', 499],
  ['error.404_dense_unknown', S.errors, 'Dense fetch of an unknown digest answers 404', 'unknown digest', 404],
  ['error.422_dense_malformed', S.errors, 'Dense fetch with a malformed digest answers 422 (text expected sha256:<64 hex>)', 'malformed digest', 422],
  ['versioning.three_codecs', S.versioning, 'Encoder and two decoders stay byte-identical against one reference fixture', 'codec agreement'],
];

const planner: RuleEntry[] = PLANNER_ROWS.map(([name, section, title, text, http]) => ruleEntry('planner', name, section, title, text, http));

/** [area.name, section, title, text] */
const RULE_ROWS: readonly (readonly [string, string, string, string])[] = [
  ['dense.blob_layout', S.file, 'Blob is u32 big-endian header_len, UTF-8 JSON header, then one block per segment', '[u32 BE header_len][JSON header][block 0]...[block S-1]'],
  ['dense.big_endian', S.file, 'Every binary field of the dense file is big-endian', 'all binary fields big-endian'],
  ['dense.blocks_cover_body', S.file, 'Blocks are contiguous in segment order and cover the body with no gap or trailing bytes', 'byte_offset counts from the end of the JSON header'],
  ['dense.columns', S.file, 'Columns are J1-J6 arm, J7 and J8 positioner tables, J9 turn; a six-axis robot still uses nine', 'axis_mask names the commanded columns'],
  ['dense.flags_reserved_zero', S.sample, 'Flag bits 1-7 are reserved and must be zero', 'bit 0 torch_on'],
  ['dense.segment_clocks', S.file, 'Each segment has its own clock; the executor never interpolates across a boundary', 'holds are explicit dwell segments'],
  ['dense.boundary_at_rest', S.file, 'First and last sample of every segment are at rest (at most 1e-6 rad/s on every axis)', 'at-rest boundaries'],
  ['dense.boundary_continuity', S.file, 'Each segment starts within 1e-3 rad of where the previous one ended, on every axis', 'boundary continuity'],
  ['dense.content_digest', S.digest, 'Content digest hashes the schema text and zero byte, axis_count, axis_mask, dt_s, segment count, per segment kind, source_id, sample_count and block bytes, then 9 and the nine ceilings', 'sha256: plus lowercase hex'],
  ['dense.digest_encoding', S.digest, 'Digest integers are u64 big-endian, f64 as big-endian IEEE bits, strings as u64 length then UTF-8', 'digest encoding'],
  ['dense.identity_not_in_digest', S.digest, 'Identity strings and robot_cell are outside the content digest', 'identity excluded'],
  ['dense.tagged_section_reserved', S.digest, 'Version 1 has no optional sections; a tagged section after each block is reserved', 'u8 tag, u64 length, content'],
  ['dense.unknown_header_keys_ignored', S.header, 'Decoders ignore unknown header keys', 'forward compatibility'],
  ['dense.block_digest_first', S.segment, 'block.sha256 is checked before the samples are parsed', 'block digest order'],
  ['dense.first_rule_named', S.formats, 'A refusal names the first rule broken; decoders may differ when several break (service checks digest first, daemon content first)', 'reason choice'],
  ['robot_cell_check.mismatch', S.cellCheck, 'OLP server compares robot_cell with the selected cell before acquiring: robot_cell_mismatch', 'done by the OLP server, not the control service'],
  ['robot_cell_check.missing', S.cellCheck, 'A missing robot_cell block gives robot_cell_missing', 'OLP check'],
  ['robot_cell_check.unavailable', S.cellCheck, 'A cell unable to say which robot it is gives robot_cell_unavailable', 'OLP check'],
  ['robot_cell_check.configuration_note', S.cellCheck, 'A different machine_configuration_sha256 only produces a note', 'OLP check'],
  ['dense_admission.header_bytes', S.admission, 'Control service admits a header of at most 1048576 bytes', 'admission addition'],
  ['dense_admission.body_bytes', S.admission, 'Control service refuses a body above 1048580 + 250000 x 153 bytes as too large', 'admission addition'],
  ['dense_admission.axis_map', S.admission, 'Wire columns map in order to rad axes; more than nine or none gives dense_axis_map_requires_nine_ids', 'axis mapping'],
  ['dense_admission.unmapped_column', S.admission, 'A column past the map must be unset in axis_mask, hold one position and have zero velocity, else unmapped_dense_axis', 'unmapped columns'],
  ['dense_admission.boundary_merge', S.admission, 'At-rest boundary samples merge: executed points = samples - segments + 1', 'normalisation'],
  ['dense_admission.digests_to_start', S.admission, 'Both source_digest and normalised_digest must be presented to start_program', 'identity'],
  ['dense_admission.sample_limits', S.admission, 'Every sample inside position limits and below described velocity', 'native limits'],
  ['dense_admission.hermite_intervals', S.admission, 'Cubic Hermite interpolation of every interval stays inside limits and below the lower of axis and header ceilings', 'interval check'],
  ['dense_admission.acceleration', S.admission, 'Finite-difference acceleration is checked where the axis declares a maximum', 'acceleration check'],
  ['dense_admission.no_slack', S.admission, 'No interpolation slack (native_limit_exceeded, native_segment_rate_exceeded, outside_limits_outward, segment_boundary_discontinuous)', 'no slack'],
  ['dense_admission.identity_nonempty', S.admission, 'plan_id, program_id and program_digest must be nonempty (program_identity_missing)', 'identity presence'],
  ['dense_admission.process_io', S.admission, 'A torch bit or any process marker makes the program require process I/O; torch output is refused everywhere', 'process I/O'],
  ['versioning.schemas', S.versioning, 'Dense schema robot.v4.dense-joint-trajectory.v1 with encoding f64-be-aos.v1', 'versioning'],
];

const rules: RuleEntry[] = RULE_ROWS.map(([name, section, title, text]) => ruleEntry('rule', name, section, title, text));

export const entries: CatalogueEntry[] = [
  ...formatReasons,
  ...denseErrors,
  ...denseSample,
  ...health,
  ...progress,
  ...planResult,
  ...denseHeader,
  ...denseSegment,
  ...plannerQuery,
  ...limits,
  ...endpoints,
  ...planner,
  ...rules,
];
