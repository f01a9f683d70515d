// Catalogue of document 1: the control service. Facts (labels, offsets, limits, table cells) are
// copied from the document; titles and rule texts are our own wording. Tables drive the entries;
// harness/catalogue/index.ts validates them at load time and offers the lookups.

import type {
  CapabilityEntry,
  CatalogueEntry,
  EventEntry,
  FieldEntry,
  LayoutEntry,
  LimitEntry,
  ReasonEntry,
  RuleEntry,
  TransitionEntry,
} from './types.ts';
import { HarnessError } from '../errors.ts';
import { fieldEntries as buildFields, limitEntries, type FieldRow, type LimitRow } from './rows.ts';
import { FORMAT_REASON_ROWS } from './doc2.ts';

const DOC = 1 as const;

/** Section headings of document 1 as used in `section`. */
const S = {
  what: 'part 1 What the service does',
  transports: 'part 1 Transports',
  request: 'part 2 Request',
  fence: 'part 2 Fence',
  binding: 'part 2 Binding',
  grant: 'part 2 Grant',
  grantObs: 'part 2 GrantObservation',
  response: 'part 2 Response',
  commandResult: 'part 2 CommandResult',
  capabilityInfo: 'part 2 CapabilityInfo',
  point: 'part 2 Point',
  identity: 'part 2 Identity',
  handleRecord: 'part 2 HandleRecord',
  execution: 'part 2 Execution',
  motionState: 'part 2 MotionState',
  program: 'part 2 Program',
  limitEvidence: 'part 2 Program limit evidence',
  planCursor: 'part 2 PlanCursor',
  recovery: 'part 2 RecoveryStatus',
  observation: 'part 2 Observation types',
  telemetry: 'part 2 Telemetry binary records',
  telemetryHeader: 'part 2 Telemetry binary records: TelemetryBatchHeaderV1',
  captureRecord: 'part 2 Telemetry binary records: CycleCaptureRecordV2',
  captureAxis: 'part 2 Telemetry binary records: CycleCaptureAxisV2',
  handles: 'part 3 States and transitions: handle states',
  grants: 'part 3 States and transitions: grant lifecycle',
  effects: 'part 3 States and transitions: machine effects',
  jogSession: 'part 3 States and transitions: jog session',
  endpoints: 'part 4 Endpoints',
  envelope: 'part 4 Envelope rules for every POST /v1/control',
  ops: 'part 4 Operations',
  observationEndpoints: 'part 4 Observation endpoints',
  auth: 'part 5 Authentication',
  ws: 'part 5 Remote jog WebSocket',
  events: 'part 6 Events',
  errors: 'part 7 Errors',
  limits: 'part 8 Limits',
  versioning: 'part 9 Versioning',
} as const;

const op = (name: string) => `${S.ops}: ${name}`;

// =============================================================================================
// Reasons (part 7), with the operation reason lists of part 4 inverted into `operations`.

type Group = 'envelope' | 'authority' | 'handles' | 'native' | 'program' | 'dense' | 'recovery' | 'io' | 'jog' | 'telemetry';

const GROUP_SECTION: Record<Group, string> = {
  envelope: 'part 7 Errors: Envelope and transport',
  authority: 'part 7 Errors: Authority and session',
  handles: 'part 7 Errors: Handles',
  native: 'part 7 Errors: Native admission',
  program: 'part 7 Errors: Program',
  dense: 'part 7 Errors: Dense file format',
  recovery: 'part 7 Errors: Recovery and anchors',
  io: 'part 7 Errors: Cell I/O',
  jog: 'part 7 Errors: Jog',
  telemetry: 'part 7 Errors: Telemetry and events',
};

/** [label, group, title]; numbers and special sections are in REASON_EXTRAS. */
const REASON_ROWS: readonly (readonly [string, Group, string])[] = [
  // Envelope and transport
  ['body_too_large', 'envelope', 'Request body larger than the endpoint allows (HTTP 413)'],
  ['invalid_request_envelope', 'envelope', 'Body is not a JSON object or has a non-string key'],
  ['duplicate_request_field', 'envelope', 'A field repeats in the envelope prefix'],
  ['schema_mismatch', 'envelope', 'Request schema is not svc.rt-control.request.v1'],
  ['unknown_operation', 'envelope', 'Operation name is not known to POST /v1/control'],
  ['unknown_endpoint', 'envelope', 'Method and path pair is not an endpoint of the service'],
  ['trailing_request_data', 'envelope', 'Data follows the JSON request value'],
  ['request_envelope_changed', 'envelope', 'Fully decoded request differs from the admitted prefix'],
  ['invalid_request_id', 'envelope', 'request_id is not 1..64 printable ASCII bytes'],
  ['request_id_conflict', 'envelope', 'Same request_id reused with a different payload'],
  ['capability_unimplemented', 'envelope', 'The capability is not implemented by this service'],
  ['invalid_control_generation', 'envelope', 'X-Control-Generation of a program upload is not a valid generation'],
  ['resource_unknown', 'envelope', 'GET /v1/resources/<sha256> names an unknown digest (HTTP 404)'],
  // Authority and session
  ['control_session_stale', 'authority', 'Session or generation wrong or stale, lease expired, Stop in flight, or lease shorter than the round trip'],
  ['session_principal_mismatch', 'authority', 'Session belongs to another principal or transport'],
  ['daemon_restarted', 'authority', 'Session dates from a previous core incarnation'],
  ['fence', 'authority', 'Well-formed session never issued here, or authority revoked during Start'],
  ['no_grant', 'authority', 'No current valid grant, or its lease expired'],
  ['wrong_generation', 'authority', 'Generation differs from the current application or native generation'],
  ['inhibited', 'authority', 'Stop in flight, or core not armed, enabled and ready'],
  ['control_already_owned', 'authority', 'Another controller already holds the grant'],
  ['expired', 'authority', 'Lease already expired'],
  ['authority_binding_mismatch', 'authority', 'Acquire binding differs from the configured binding'],
  ['application_generation_exhausted', 'authority', 'No further application grant generation can be issued'],
  ['invalid_requested_lease', 'authority', 'requested_lease_ms outside 1..10000 whole ms'],
  // Handles
  ['unknown_handle', 'handles', 'Handle not known for this core incarnation and grant'],
  ['trajectory_identity_mismatch', 'handles', 'Raw trajectory identity differs from the one supplied at prepare'],
  ['handle_active', 'handles', 'Handle already started, so it cannot be discarded'],
  ['handle_started', 'handles', 'Handle is already started'],
  ['handle_consumed', 'handles', 'Handle already consumed'],
  ['handle_discarded', 'handles', 'Handle already discarded'],
  ['handle_superseded', 'handles', 'Handle superseded by a newer preparation'],
  ['handle_retired', 'handles', 'Handle retired by Stop, grant loss, fault or uncertain outcome'],
  // Native admission
  ['native_rejected', 'native', 'Core rejected the command; inspect native_result'],
  ['not_ready', 'native', 'Axes not ready for the start gate (native reason 2)'],
  ['mode_conflict', 'native', 'Machine mode conflicts with the command (armed, enabled, commissioning, other mode)'],
  ['outside_limits_outward', 'native', 'Motion would go further outside limits (native reason 8, jog reason 15)'],
  ['pdo_mapping_mismatch', 'native', 'Drive PDO mapping mismatch (native reason 7, fault bit 11 restart_required)'],
  // Program
  ['busy', 'program', 'Upload in progress, lifecycle lock busy or no free plan slot'],
  ['program_identity_missing', 'program', 'Dense header lacks plan_id, program_id or program_digest'],
  ['program_identity_mismatch', 'program', 'Nothing prepared, or start_program identity differs'],
  ['program_already_executing', 'program', 'A program is already executing'],
  ['manifest_revision_mismatch', 'program', 'Program manifest revision differs from the service pair revision'],
  ['process_io_executor_not_qualified', 'program', 'Program needs process I/O (torch flag); always refused'],
  ['dense_axis_map_requires_nine_ids', 'program', 'Rad axes cannot be mapped onto nine dense columns (more than nine or none)'],
  ['invalid_dense_axis_map', 'program', 'Dense axis map is invalid'],
  ['unmapped_dense_axis', 'program', 'A column beyond the map is commanded or moves (text unmapped_dense_axis: <axis>)'],
  ['native_limit_exceeded', 'program', 'A sample or interval breaks a native position or velocity limit (with limit_violation)'],
  ['native_segment_rate_exceeded', 'program', 'A segment breaks a native rate limit (with limit_violation)'],
  ['segment_boundary_discontinuous', 'program', 'Segment boundary join not continuous (reports join index and gap_counts)'],
  ['native_execution_failed', 'program', 'Program execution failed; appears as execution.error in status'],
  // Recovery and anchors
  ['invalid_axis_mask', 'recovery', 'axis_mask is 0 or outside the configured group'],
  ['anchor_missing', 'recovery', 'No saved anchor for a selected axis'],
  ['anchor_identity_mismatch', 'recovery', 'Anchor pair, revision, configuration, drive identity or Home epoch differs'],
  ['anchor_source_invalid', 'recovery', 'Machine armed or enabled at capture, or axis without a valid absolute source'],
  ['anchor_disagrees', 'recovery', 'Saved anchor disagrees with current evidence beyond tolerance'],
  ['anchor_store_io', 'recovery', 'Anchor directory not readable or writable'],
  ['recovery_observation_unavailable', 'recovery', 'No matching observation within 1 s of the receipt'],
  ['reset_requires_inhibited', 'recovery', 'Machine armed, jogging, commissioning or homing, or no fresh observation within 1 s'],
  ['fault_persists', 'recovery', 'A fault condition persists; nothing is cleared'],
  // Cell I/O
  ['io_not_configured', 'io', 'No cell I/O configured (or markers without cell I/O)'],
  ['io_not_armed', 'io', 'An ON intent needs io_arm first'],
  ['io_fast_input_unsatisfied', 'io', 'Fast input condition not satisfied'],
  ['io_readback_disagreement', 'io', 'Output readback disagrees with intent'],
  ['io_torch_unqualified', 'io', 'Torch-class outputs are always refused'],
  ['io_marker_late', 'io', 'Marker missed its one-cycle bound'],
  ['io_exchange_lost', 'io', 'No current complete I/O exchange'],
  ['io_marker_invalid', 'io', 'Unknown output, or marker not on a sample'],
  // Jog
  ['jog_clock_incarnation_mismatch', 'jog', 'clock_incarnation empty or not the current jog clock incarnation'],
  ['independent_jog_unavailable', 'jog', 'No independent jog lane (or shutting down)'],
  ['jog_session_stale', 'jog', 'Jog session stale when opening the remote jog lane'],
  ['jog_clock_unqualified', 'jog', 'Remote jog clock flags not all nonzero; every remote jog frame refused'],
  ['jog_stream_idle', 'jog', 'Sent before the receiver ends an idle jog'],
  // Telemetry and events
  ['invalid_telemetry_cursor', 'telemetry', 'Telemetry cursor is not valid'],
  ['telemetry_cursor_ahead', 'telemetry', 'Telemetry cursor beyond the ring sequence'],
  ['telemetry_busy', 'telemetry', 'Ring header torn after 16 samples; Retry-After 1, retry same cursor'],
  ['telemetry_unavailable', 'telemetry', 'Telemetry cannot be served'],
  ['telemetry_label_invalid', 'telemetry', 'mark_telemetry label not 1..128 bytes of valid UTF-8'],
  ['invalid_event_cursor', 'telemetry', 'Event cursor is not one unsigned decimal number'],
  ['event_cursor_ahead', 'telemetry', 'Event cursor newer than the log'],
  ['event_cursor_lost', 'telemetry', 'Event history before the cursor was lost'],
];

/** Extra facts per label: HTTP status, native reason, jog reason, section override. */
const REASON_EXTRAS: Readonly<Record<string, { http?: number; native?: number; jogReason?: number; section?: string }>> = {
  body_too_large: { http: 413 },
  resource_unknown: { http: 404, section: S.observationEndpoints },
  not_ready: { native: 2 },
  pdo_mapping_mismatch: { native: 7 },
  outside_limits_outward: { native: 8, jogReason: 15 },
};

const IO_REASONS = [
  'capability_unimplemented', 'no_grant', 'wrong_generation', 'inhibited', 'io_not_configured', 'io_not_armed',
  'io_fast_input_unsatisfied', 'io_readback_disagreement', 'io_torch_unqualified', 'io_marker_late', 'io_exchange_lost',
];
const TERMINAL_HANDLE = ['unknown_handle', 'handle_started', 'handle_consumed', 'handle_discarded', 'handle_superseded', 'handle_retired'];

/** Dense file-format reasons as the control service reports them (document 2; schema_mismatch is reported as dense_schema_mismatch). */
const DENSE_LABELS = FORMAT_REASON_ROWS.map(([r]) => r).filter((r) => r !== 'schema_mismatch');

/**
 * Reason lists per operation. Part 4 operation paragraphs, plus the endpoint-specific refusals that
 * parts 4 to 6 name for the transports of telemetry, subscribe_events, update_jog and resource.
 */
export const OPERATION_REASONS: Readonly<Record<string, readonly string[]>> = {
  acquire: ['authority_binding_mismatch', 'control_already_owned', 'application_generation_exhausted', 'invalid_requested_lease', 'control_session_stale', 'session_principal_mismatch'],
  renew: ['expired', 'control_session_stale', 'daemon_restarted', 'fence', 'session_principal_mismatch'],
  release: ['expired'],
  stop: ['expired'],
  enable: [],
  arm: [],
  home: ['anchor_source_invalid', 'anchor_identity_mismatch', 'anchor_store_io'],
  halt: ['no_grant', 'wrong_generation', 'inhibited', 'capability_unimplemented'],
  restore_anchor: ['invalid_axis_mask', 'mode_conflict', 'anchor_missing', 'anchor_identity_mismatch', 'anchor_source_invalid', 'anchor_disagrees', 'anchor_store_io', 'recovery_observation_unavailable'],
  reset_fault: ['program_already_executing', 'reset_requires_inhibited', 'recovery_observation_unavailable', 'fault_persists'],
  recovery_status: ['program_already_executing', 'reset_requires_inhibited', 'recovery_observation_unavailable'],
  io_arm: IO_REASONS,
  io_disarm: IO_REASONS,
  mark_telemetry: ['telemetry_label_invalid', 'capability_unimplemented'],
  begin_jog: ['jog_clock_incarnation_mismatch', 'independent_jog_unavailable', 'mode_conflict'],
  end_jog: [],
  jog: [],
  prepare_trajectory: ['busy', 'no_grant', 'wrong_generation', 'inhibited', 'outside_limits_outward', 'native_rejected'],
  start_trajectory: [...TERMINAL_HANDLE, 'trajectory_identity_mismatch', 'mode_conflict', 'not_ready'],
  discard_trajectory: ['unknown_handle', 'handle_active', 'handle_discarded'],
  prepare_program: [
    'invalid_control_generation', 'body_too_large', 'session_principal_mismatch', 'busy', 'program_already_executing',
    'manifest_revision_mismatch', 'process_io_executor_not_qualified', 'program_identity_missing',
    'dense_axis_map_requires_nine_ids', 'invalid_dense_axis_map', 'unmapped_dense_axis', 'native_limit_exceeded',
    'native_segment_rate_exceeded', 'outside_limits_outward', 'segment_boundary_discontinuous', 'io_not_configured',
    'io_torch_unqualified', 'io_marker_invalid', ...DENSE_LABELS,
  ],
  start_program: ['program_identity_mismatch', 'program_already_executing', 'process_io_executor_not_qualified', ...TERMINAL_HANDLE, 'mode_conflict', 'not_ready', 'fence'],
  abort: ['capability_unimplemented'],
  readiness: ['capability_unimplemented'],
  // Endpoint-specific refusals named outside the part 4 paragraphs.
  telemetry: ['invalid_telemetry_cursor', 'telemetry_cursor_ahead', 'telemetry_busy', 'telemetry_unavailable'],
  subscribe_events: ['invalid_event_cursor', 'event_cursor_ahead', 'event_cursor_lost'],
  update_jog: ['session_principal_mismatch', 'jog_session_stale', 'control_session_stale', 'independent_jog_unavailable', 'jog_clock_unqualified', 'jog_stream_idle'],
  resource: ['resource_unknown'],
};

function operationsNaming(label: string): string[] {
  return Object.entries(OPERATION_REASONS)
    .filter(([, labels]) => labels.includes(label))
    .map(([name]) => name);
}

function reasonEntry(label: string, group: Group, title: string): ReasonEntry {
  const x = REASON_EXTRAS[label] ?? {};
  const e: ReasonEntry = {
    family: 'reason',
    id: `reason:${label}`,
    doc: DOC,
    section: x.section ?? GROUP_SECTION[group],
    title,
    label,
    group,
    operations: operationsNaming(label),
    http: x.http ?? 409,
  };
  if (x.native !== undefined) e.native = x.native;
  if (x.jogReason !== undefined) e.jogReason = x.jogReason;
  return e;
}

const reasons: ReasonEntry[] = [
  ...REASON_ROWS.map(([label, group, title]) => reasonEntry(label, group, title)),
  ...FORMAT_REASON_ROWS.filter(([r]) => r !== 'schema_mismatch').map(([label, rule]) =>
    reasonEntry(label, 'dense', `prepare_program refuses a dense file: ${rule.split(' (')[0]} (document 2 part 7)`),
  ),
];

// Every label an operation list names must be catalogued (loud failure at load).
for (const [name, labels] of Object.entries(OPERATION_REASONS)) {
  for (const l of labels) {
    if (!reasons.some((r) => r.label === l)) throw new HarnessError('HIL_ERR_CATALOGUE', `catalogue doc1: operation ${name} names uncatalogued reason ${l}`);
  }
}

// =============================================================================================
// Capabilities (part 4 table): [name, state, transport, fence, result, title].

const CTL = 'POST /v1/control';
const FENCE = 'session+generation';

const CAPABILITY_ROWS: readonly (readonly [string, CapabilityEntry['state'], string, string, string, string])[] = [
  ['telemetry', 'implemented', 'GET /v1/telemetry?after=<sequence>; GET /v1/telemetry/stream?after=<sequence>', 'none', 'TelemetryBatch (binary)', 'Binary telemetry batches by cursor, polled or streamed'],
  ['mark_telemetry', 'implemented', CTL, FENCE, 'sequence', 'Publish a telemetry_mark event with a label'],
  ['acquire', 'implemented', CTL, 'none; binding checked', 'data Grant', 'Take the grant after a binding check'],
  ['renew', 'implemented', CTL, FENCE, 'data Grant', 'Extend the lease of the current grant'],
  ['release', 'implemented', CTL, FENCE, 'data Grant', 'Give up the grant'],
  ['stop', 'implemented', CTL, FENCE, 'data Grant', 'Stop motion, turn outputs off and revoke authority'],
  ['enable', 'implemented', CTL, FENCE, 'sequence', 'Enable drives for an axis mask'],
  ['arm', 'implemented', CTL, FENCE, 'sequence', 'Arm the core'],
  ['home', 'implemented', CTL, FENCE, 'sequence', 'Run native Home on selected axes'],
  ['reset_fault', 'interim', CTL, FENCE, 'data RecoveryStatus', 'Submit one native fault reset (interim reset API)'],
  ['recovery_status', 'implemented', CTL, FENCE, 'data RecoveryStatus', 'Read fault recovery status without clearing'],
  ['jog', 'test_only', CTL, FENCE, 'sequence', 'Legacy velocity jog for fixtures'],
  ['begin_jog', 'implemented', CTL, FENCE, 'handle (jog generation)', 'Open an independent jog generation'],
  ['end_jog', 'implemented', CTL, FENCE, 'handle', 'Close the current jog generation'],
  ['prepare_trajectory', 'implemented', CTL, FENCE, 'handle', 'Upload a point-list trajectory and get a handle'],
  ['start_trajectory', 'implemented', CTL, FENCE, 'sequence', 'Start a prepared trajectory handle'],
  ['discard_trajectory', 'implemented', CTL, FENCE, 'sequence', 'Discard a prepared trajectory handle'],
  ['start_program', 'implemented', CTL, FENCE, 'sequence', 'Start the prepared program by identity'],
  ['describe', 'implemented', 'GET /v1/describe', 'none', 'Description', 'Describe backend, digests, capabilities and axes'],
  ['status', 'implemented', 'GET /v1/status', 'none', 'ProcessStatus', 'Read the process status'],
  ['jog_clock', 'implemented', 'GET /v1/jog/clock', 'none', 'LocalJogClock', 'Read the local jog clock incarnation'],
  ['jog_status', 'implemented', 'GET /v1/jog (local socket)', 'none', 'JogObservation', 'Observe the jog lane over the local socket'],
  ['jog_ingress', 'implemented', 'GET /v1/jog/ingress', 'none', 'JogIngressObservation', 'Observe jog ingress'],
  ['prepare_program', 'implemented', 'POST /v1/program', 'headers X-Control-Session, X-Control-Generation', 'data Program', 'Upload a dense trajectory file as the program'],
  ['update_jog', 'implemented', 'datagram on jog.sock, or WebSocket on remote GET /v1/jog', FENCE, 'JogObservation', 'Stream jog updates over datagrams or the remote WebSocket'],
  ['halt', 'implemented', CTL, FENCE, 'sequence, native_result on refusal', 'Decelerate to an enabled hold keeping the grant'],
  ['abort', 'unimplemented', 'none', 'none', 'none', 'Reserved; always capability_unimplemented (table: POST /v1/control, no transport)'],
  ['subscribe_events', 'implemented', 'GET /v1/events?after=<sequence>; GET /v1/events/stream?after=<sequence> (SSE)', 'none', 'EventBatch', 'Read the event log by poll or SSE'],
  ['readiness', 'unimplemented', 'none', 'none', 'none', 'Reserved; always capability_unimplemented (table: POST /v1/control, no transport)'],
  ['restore_anchor', 'implemented', CTL, FENCE, 'sequence + data RecoveryStatus', 'Re-establish Home from saved anchors without moving'],
  ['io_arm', 'implemented', CTL, FENCE, 'sequence', 'Grant fenced permission for non-torch outputs'],
  ['io_disarm', 'implemented', CTL, FENCE, 'sequence', 'Clear output permission and intent'],
  ['resource', 'implemented', 'GET /v1/resources/<sha256>', 'none (remote mutual TLS required)', 'binary', 'Fetch a content-addressed compiled resource'],
];

const capabilities: CapabilityEntry[] = CAPABILITY_ROWS.map(([name, state, transport, fence, result, title]) => ({
  family: 'capability',
  id: `capability:${name}`,
  doc: DOC,
  section: S.endpoints,
  title,
  name,
  state,
  transport,
  fence,
  result,
}));

// =============================================================================================
// Events (part 6): [type, payload field, emitted when, title].

const EVENT_ROWS: readonly (readonly [string, string, string, string])[] = [
  ['grant_acquired', 'grant', 'acquire succeeded', 'Grant acquired'],
  ['grant_renewed', 'grant', 'renew succeeded; stopping true while Stop drains', 'Grant renewed (stopping while a Stop drains)'],
  ['grant_released', 'grant', 'release', 'Grant released'],
  ['grant_expired', 'grant', 'lease ran out', 'Grant lease expired'],
  ['grant_revoked', 'grant', 'stop, or authority lost to a native or transport failure', 'Grant revoked by stop or failure'],
  ['enable_changed', 'enable', 'axis_enable_mask changed', 'Axis enable mask changed'],
  ['arm_changed', 'enable', 'armed changed', 'Armed state changed'],
  ['handle_transition', 'handle', 'a handle changed state (from, to)', 'Handle state change'],
  ['execution_started', 'execution', 'a handle started', 'Execution started'],
  ['execution_completed', 'execution', 'a started handle was consumed', 'Execution completed'],
  ['execution_aborted', 'execution', 'a started handle retired with no fault bits', 'Execution aborted without fault bits'],
  ['execution_faulted', 'execution', 'a started handle retired with fault bits (fault_bits, recovery)', 'Execution faulted with fault bits'],
  ['jog_begin', 'jog', 'a jog session opened', 'Jog session opened'],
  ['jog_end', 'jog', 'a jog session closed for a reason other than expiry', 'Jog session closed (not by expiry)'],
  ['jog_expired', 'jog', 'jog input expired', 'Jog input expired'],
  ['jog_ramping', 'jog', 'jog ramping down', 'Jog ramping down'],
  ['jog_limited', 'jog', 'jog slowed at a position limit', 'Jog slowed at a position limit'],
  ['fault_latched', 'fault', 'an execution fault bit was set', 'Execution fault bit latched'],
  ['fault_cleared', 'fault', 'an execution fault bit was cleared', 'Execution fault bit cleared'],
  ['home_epoch_changed', 'epoch', 'Home evidence changed', 'Home epoch changed'],
  ['daemon_incarnation_changed', 'incarnation', 'core process changed (and once at adapter start)', 'Core incarnation changed'],
  ['adapter_incarnation_changed', 'incarnation', 'once when the service starts', 'Service incarnation announced at start'],
  ['publisher_overflow', 'overflow', 'native observations dropped before reaching the log', 'Native observations dropped before the log'],
  ['events_dropped', 'events_dropped', 'cursor fell behind the 256-event ring', 'Synthetic record for events lost behind the cursor'],
  ['telemetry_mark', 'mark', 'mark_telemetry accepted', 'Telemetry mark published'],
];

const events: EventEntry[] = EVENT_ROWS.map(([type, payload, when, title]) => ({
  family: 'event',
  id: `event:${type}`,
  doc: DOC,
  section: S.events,
  title,
  type,
  payload,
  when,
}));

// =============================================================================================
// Transitions (part 3): [machine, from, trigger token, trigger text, condition, to, also].

type TransitionRow = readonly [TransitionEntry['machine'], string, string, string, string, string, string];

const TRANSITION_ROWS: readonly TransitionRow[] = [
  ['handle', 'none', 'prepare', 'prepare_trajectory or prepare_program', 'accepted', 'prepared', 'handle_transition event; response carries handle for trajectories'],
  ['handle', 'prepared', 'start', 'start_trajectory or start_program', 'start gate passes', 'started', 'execution_started event; count of acknowledged Starts increases'],
  ['handle', 'prepared', 'discard', 'discard_trajectory', 'handle exists', 'discarded', 'handle_transition event'],
  ['handle', 'prepared', 'newer_preparation', 'newer preparation committed', '', 'superseded', ''],
  ['handle', 'prepared', 'stop_or_grant_loss', 'Stop, grant loss or uncertain outcome', '', 'retired', 'prepare again'],
  ['handle', 'started', 'completion', 'completion, or a later execution replaces it', '', 'consumed', 'execution_completed event'],
  ['handle', 'started', 'stop', 'Stop, fault or uncertain outcome', 'no fault bits', 'retired', 'execution_aborted event'],
  ['handle', 'started', 'fault', 'fault', 'fault bits set', 'retired', 'execution_faulted event with fault_bits and recovery'],
  ['handle', 'started', 'discard', 'discard_trajectory', '', 'refused', 'reason handle_active'],
  ['handle', 'prepared', 'start_refused', 'start refused with mode_conflict or not_ready', '', 'prepared', 'the handle is kept; retry later'],
  ['handle', 'prepared', 'fence_failure', 'fence failure while starting', 'authority revoked or request cancelled', 'retired', 'reason fence'],
  ['grant', 'no_grant', 'acquire', 'acquire', 'binding equal, no other owner, no Stop draining', 'owned', 'new session token, generation increases; grant_acquired'],
  ['grant', 'owned', 'renew', 'renew', 'fence valid, lease not expired', 'owned', 'lease_ms preserved; grant_renewed; stopping true while a Stop drains'],
  ['grant', 'owned', 'release', 'release', 'fence valid', 'no_grant', 'session empty; grant_released; retry cache dropped'],
  ['grant', 'owned', 'lease_expiry', 'lease deadline passes', '', 'no_grant', 'grant_expired; retry cache dropped'],
  ['grant', 'owned', 'stop', 'stop', 'fence valid', 'stopping', 'then revoked; grant_revoked; every output commanded OFF; outputs inhibit immediately'],
  ['grant', 'stopping', 'drain', 'Stop drained (second half of "stopping, then revoked")', '', 'revoked', 'grant_revoked'],
  ['grant', 'owned', 'native_failure', 'native or transport failure', '', 'revoked', 'grant_revoked'],
  ['grant', 'owned', 'reset_fault', 'reset_fault submitted', 'even if the core refuses it', 'session_retired', 'acquire again'],
  ['grant', 'owned', 'home_fails', 'home fails', '', 'stopping', 'the service issues a stop (table: "stop issued by the service")'],
  ['grant', 'owned', 'halt', 'halt', 'armed, enabled, ready', 'owned', 'Enable and Arm kept; active trajectory handle and jog generation retired'],
];

const transitions: TransitionEntry[] = TRANSITION_ROWS.map(([machine, from, token, trigger, condition, to, also]) => ({
  family: 'transition',
  id: `transition:${machine}:${from}->${to}:${token}`,
  doc: DOC,
  section: machine === 'handle' ? S.handles : S.grants,
  title: `${machine === 'handle' ? 'Handle' : 'Grant'} ${from} -> ${to} on ${trigger}${condition ? ` when ${condition}` : ''}`,
  machine,
  from,
  trigger,
  condition,
  to,
  also,
}));

// =============================================================================================
// Limits: [name, section, min, max, value, unit, text].


const LIMIT_ROWS: readonly LimitRow[] = [
  ['ordinary_body_bytes', S.limits, undefined, 16384n, undefined, 'bytes', 'ordinary command body at most 16384 bytes; 413 beyond'],
  ['prepare_trajectory_body_bytes', S.limits, undefined, 222516384n, undefined, 'bytes', 'prepare_trajectory body at most 222516384 bytes'],
  ['fence_prefix_bytes', S.limits, undefined, 16384n, undefined, 'bytes', 'prepare_trajectory fence fields within the first 16384 bytes'],
  ['prepare_program_body_bytes', S.limits, undefined, 39298580n, undefined, 'bytes', 'prepare_program body at most 39298580 bytes'],
  ['points_per_trajectory', S.limits, 2n, 250000n, undefined, 'points', 'points 2..250000 per trajectory'],
  ['request_id_bytes', S.limits, 1n, 64n, undefined, 'bytes', 'request_id 1..64 printable ASCII bytes (0x20..0x7e)'],
  ['request_id_outcomes', S.limits, undefined, 256n, undefined, 'outcomes', 'last 256 outcomes remembered per session'],
  ['label_bytes', S.limits, 1n, 128n, undefined, 'bytes', 'label 1..128 bytes of valid UTF-8'],
  ['controller_bytes', S.limits, 1n, 63n, undefined, 'bytes', 'controller 1..63 bytes'],
  ['legacy_jog_timeout_ms', S.limits, 1n, 250n, undefined, 'ms', 'legacy jog timeout_ms 1..250'],
  ['requested_lease_ms', S.limits, 1n, 10000n, undefined, 'ms', 'requested_lease_ms whole ms 1..10000; capped by the cell ceiling'],
  ['default_lease_ms', S.limits, undefined, undefined, 500n, 'ms', 'omitted or 0 requested_lease_ms keeps 500 ms (LAN profile)'],
  ['session_token_hex', S.limits, undefined, undefined, 64n, 'lowercase hex characters', 'session token is 64 lowercase hex characters'],
  ['events_per_poll', S.limits, undefined, 64n, undefined, 'events', 'up to 64 events per poll'],
  ['event_log_retained', S.limits, undefined, undefined, 256n, 'events', 'the log retains the last 256 events'],
  ['telemetry_batch_records', S.limits, undefined, 4096n, undefined, 'records', 'at most 4096 records per batch (and at most the ring capacity)'],
  ['telemetry_batch_bytes', S.limits, undefined, 22085944n, undefined, 'bytes', 'batch at most 312 + 4096 x 5392 = 22085944 bytes'],
  ['telemetry_axis_count', S.limits, 1n, 16n, undefined, 'axes', 'axis_count 1..16'],
  ['telemetry_header_bytes', S.telemetry, undefined, undefined, 312n, 'bytes', 'TelemetryBatchHeaderV1 is 312 bytes'],
  ['telemetry_record_bytes', S.telemetry, undefined, undefined, 5392n, 'bytes', 'CycleCaptureRecordV2 is 5392 bytes'],
  ['telemetry_stream_write_block_s', S.limits, undefined, undefined, 5n, 's', 'telemetry stream closes when a write blocks 5 s (or the core disconnects)'],
  ['telemetry_stream_flush_ms', S.observationEndpoints, undefined, undefined, 20n, 'ms', 'one complete batch per flush about every 20 ms'],
  ['telemetry_busy_samples', S.errors, undefined, undefined, 16n, 'samples', 'telemetry_busy after the ring header is torn over 16 samples'],
  ['telemetry_busy_retry_after_s', S.errors, undefined, undefined, 1n, 's', 'telemetry_busy carries Retry-After 1'],
  ['home_wait_s', S.limits, undefined, 60n, undefined, 's', 'Home waits up to 60 s'],
  ['recovery_observation_wait_s', S.limits, undefined, undefined, 1n, 's', 'recovery observation wait 1 s'],
  ['idle_connection_s', S.limits, undefined, undefined, 90n, 's', 'idle connection timeout 90 s'],
  ['control_idle_timeout_ns', S.transports, undefined, undefined, 90000000000n, 'ns', 'control_idle_timeout_ns reported by Describe: 90 s'],
  ['remote_header_read_timeout_lan_s', S.limits, undefined, undefined, 2n, 's', 'remote: 2 s to read headers on LAN defaults'],
  ['remote_header_read_timeout_s', S.limits, undefined, undefined, 10n, 's', 'remote: 10 s to read headers otherwise'],
  ['remote_request_read_timeout_s', S.limits, undefined, undefined, 30n, 's', 'remote: 30 s to read a request'],
  ['remote_reply_write_timeout_s', S.limits, undefined, undefined, 65n, 's', 'remote: 65 s to write a reply'],
  ['remote_idle_timeout_s', S.limits, undefined, undefined, 90n, 's', 'remote: 90 s idle'],
  ['remote_jog_setup_idle_s', S.limits, undefined, undefined, 5n, 's', 'remote jog: 5 s without a complete frame during setup ends the jog'],
  ['remote_jog_frame_bytes', S.limits, undefined, 4096n, undefined, 'bytes', 'remote jog frames at most 4096 bytes, unfragmented'],
  ['remote_jog_connections', S.limits, undefined, 1n, undefined, 'connections', 'one remote jog connection at a time'],
  ['lan_grant_lease_ceiling_ms', S.limits, undefined, undefined, 500n, 'ms', 'LAN profile grant lease ceiling 500 ms'],
  ['lan_jog_input_age_ms', S.limits, undefined, undefined, 250n, 'ms', 'LAN profile jog input age 250 ms (remote jog idle ceiling)'],
  ['internet_grant_lease_ceiling_ms', S.limits, undefined, undefined, 3000n, 'ms', 'internet profile grant lease ceiling 3000 ms (marked unverified)'],
  ['internet_jog_input_age_ms', S.limits, undefined, undefined, 750n, 'ms', 'internet profile jog input age 750 ms (marked unverified)'],
  ['absolute_lease_bound_ms', S.grant, undefined, 10000n, undefined, 'ms', 'absolute 10000 ms lease bound, marked unverified'],
  ['upload_slots_per_kind', S.limits, undefined, 1n, undefined, 'uploads', 'one upload of the same kind at a time (busy)'],
  ['point_io_bits', S.point, undefined, undefined, 8n, 'bits', 'io_mask and io_values are eight-bit masks'],
  ['remote_default_port', S.transports, undefined, undefined, 8443n, 'port', 'remote default host 127.0.0.1, port 8443'],
  ['ws_key_bytes', S.ws, undefined, undefined, 16n, 'bytes', 'Sec-WebSocket-Key decodes to 16 bytes'],
  ['ws_source_incarnation_hex', S.ws, undefined, undefined, 32n, 'hex characters', 'calibrate source_incarnation: 32 hex, 16 nonzero bytes'],
  ['ca_validity_days', S.auth, undefined, undefined, 3650n, 'days', 'tooling CA (EC P-256) valid 3650 days'],
  ['server_certificate_validity_days', S.auth, undefined, undefined, 365n, 'days', 'server certificate valid 365 days'],
  ['client_certificate_validity_days', S.auth, undefined, undefined, 365n, 'days', 'client certificates valid 365 days'],
  ['crl_validity_days', S.auth, undefined, undefined, 7n, 'days', 'CRL valid 7 days'],
  ['remote_startup_failure_exit_status', S.auth, undefined, undefined, 2n, 'exit status', 'failed remote startup check exits with status 2'],
  ['contract_version', S.versioning, undefined, undefined, 2n, '', 'contract version 2'],
  ['telemetry_header_version', S.versioning, undefined, undefined, 1n, '', 'telemetry batch header version 1'],
];

const limits: LimitEntry[] = limitEntries(DOC, LIMIT_ROWS);

// =============================================================================================
// Fields (part 2): per type [path, valueType, required (undefined when not stated), rule].

const U = 'unspecified';

const fields = (type: string, section: string, rows: readonly FieldRow[]): FieldEntry[] => buildFields(DOC, type, section, rows);

const fieldEntries: FieldEntry[] = [
  ...fields('Request', S.request, [
    ['request_id', 'string', false, 'non-null, 1..64 printable ASCII bytes 0x20..0x7e'],
    ['schema', 'string', true, 'exactly svc.rt-control.request.v1'],
    ['operation', 'string', true, 'operation name; only POST /v1/control operations dispatch'],
    ['session', 'string', undefined, 'required per operation; fence field at top level; absent on acquire'],
    ['generation', 'uint64', undefined, 'required per operation; fence field at top level; nonzero'],
    ['label', 'string', false, 'mark_telemetry: 1..128 bytes valid UTF-8'],
    ['controller', 'string', false, 'acquire: 1..63 bytes, opaque'],
    ['binding', 'Binding', false, 'acquire: equal to the configured binding'],
    ['axis_mask', 'uint32', false, 'configured axis group mask; per operation; 0 means all axes for reset_fault'],
    ['velocity', 'float64[]', false, 'legacy jog: finite logical velocities in described axis order'],
    ['timeout_ms', 'uint32', false, 'legacy jog: integer 1..250'],
    ['handle', 'uint64', false, 'nonzero handle owned by the current core incarnation and grant'],
    ['points', 'Point[]', false, '2..250000 records'],
    ['identity', 'Identity', false, 'exact prepared program identity for start_program'],
    ['jog_generation', 'uint64', false, 'end_jog: exact current nonzero jog generation'],
    ['source_sequence', 'uint64', false, 'accepted and ignored by dispatch; compatibility only'],
    ['source_origin_host_ns', 'uint64', false, 'begin_jog: input capture time, negotiated host monotonic clock'],
    ['deadline_host_ns', 'uint64', false, 'begin_jog: producer deadline after the origin, never extended'],
    ['clock_incarnation', 'string', false, 'begin_jog: equals the GET /v1/jog/clock incarnation'],
    ['requested_lease_ms', 'int', false, 'acquire: whole ms 1..10000; omitted or 0 keeps 500; result min(request, ceiling)'],
  ]),
  ...fields('Fence', S.fence, [
    ['session', 'string', undefined, 'service-issued token of 64 lowercase hex characters'],
    ['generation', 'uint64', undefined, 'nonzero; motion needs equality; renew and stop accept an older nonzero one of the same session'],
  ]),
  ...fields('Binding', S.binding, [
    ['pair_id', 'string', true, 'exact configured nonempty pair id'],
    ['revision', 'uint64', true, 'nonzero, equal to the configured pair revision'],
    ['configuration_sha256', 'string', true, 'exact configured SHA-256 label'],
    ['machine_sha256', 'string', false, 'machine-semantics digest; may be omitted'],
  ]),
  ...fields('Grant', S.grant, [
    ['stopping', 'bool', undefined, 'true while a Stop drains; no movement permission'],
    ['deadline_host_ns', 'uint64', undefined, 'absolute lease deadline, host monotonic ns'],
    ['session', 'string', undefined, '64 lowercase hex while owned; empty after release or expiry'],
    ['generation', 'uint64', undefined, 'monotonically increasing application generation'],
    ['controller', 'string', undefined, 'label sent to acquire'],
    ['binding', 'Binding', undefined, "binding completed with the service's digests"],
    ['lease_ms', 'int', undefined, 'effective lease min(requested, ceiling); renew preserves it'],
  ]),
  ...fields(
    'GrantObservation',
    S.grantObs,
    (
      [
        ['Ticket', 'u64'], ['ConnectionId', 'u64'], ['NativeGeneration', 'u64'], ['AppGrantGeneration', 'u64'],
        ['CapabilityId', 'u8[16]'], ['DeadlineHostNs', 'u64'], ['NowHostNs', 'u64'], ['ConfigurationEpoch', 'u64'],
        ['HomeEpoch', 'u64'], ['StopAckId', 'u64'], ['GrantReason', 'u32'], ['GrantActive', 'u32'], ['AxisMask', 'u32'],
        ['Reserved', 'u32'], ['Reserved1', 'u64'], ['Reserved2', 'u64'], ['Reserved3', 'u64'],
      ] as const
    ).map(([name, t]) => [name, t, undefined, 'native receipt field; case-sensitive name'] as const),
  ),
  ...fields('Response', S.response, [
    ['schema', 'string', true, 'svc.rt-control.response.v1'],
    ['operation', 'string', true, 'the operation answered'],
    ['sequence', 'uint64', false, 'native command sequence where returned'],
    ['handle', 'uint64', false, 'trajectory handle, or jog generation for jog calls'],
    ['data', 'any', false, 'result type; on some refusals structured evidence such as limit_violation'],
    ['native_result', 'CommandResult', false, 'present when the core refused a command'],
    ['native_jog_result', 'JogObservation', false, 'present when the jog lane refused'],
    ['error', 'string', false, 'failure only: reason code or diagnostic starting with one'],
  ]),
  ...fields('CommandResult', S.commandResult, [
    ['Sequence', 'uint64', undefined, 'native command sequence'],
    ['Handle', 'uint64', undefined, 'native handle when relevant'],
    ['Generation', 'uint64', undefined, 'native control generation'],
    ['Operation', 'uint32', undefined, 'native message code'],
    ['Result', 'uint32', undefined, '0 accepted, 1 rejected, 2 prepared'],
    ['Reason', 'uint32', undefined, 'native command reason (part 7)'],
    ['AxisMask', 'uint32', undefined, 'axes the result applies to'],
  ]),
  ...fields('CapabilityInfo', S.capabilityInfo, [
    ['name', 'string', true, 'canonical capability name'],
    ['state', 'string', true, 'implemented, interim, test_only or unimplemented'],
    ['transport', 'string', true, 'actual ingress; none for unimplemented'],
  ]),
  ...fields('Point', S.point, [
    ['time_ns', 'int64', true, 'ns from plan start; first 0, then strictly increasing'],
    ['position', 'float64[]', true, 'finite logical rad or m in described axis order, inside native bounds'],
    ['velocity', 'float64[]', false, 'finite feedforward; nil or empty omits it'],
    ['io_mask', 'uint32', false, 'eight-bit mask in configured output order; set bits need non-torch outputs'],
    ['io_values', 'uint32', false, 'eight-bit intents; every set bit also set in io_mask'],
  ]),
  ...fields('Identity', S.identity, [
    ['plan_id', 'string', undefined, 'from the trajectory file header'],
    ['program_id', 'string', undefined, 'from the header'],
    ['program_digest', 'string', undefined, 'from the header'],
    ['trajectory_digest', 'string', undefined, 'content digest of the dense trajectory'],
    ['source_digest', 'string', undefined, 'verified source digest; start_program echoes it exactly'],
    ['normalised_digest', 'string', undefined, 'digest of executed points incl. local clocks and process bits; echoed exactly'],
    ['manifest_revision', 'uint64', undefined, 'equals the pair revision the service started with'],
    ['plan_revision', 'uint64', undefined, 'from the header'],
  ]),
  ...fields('HandleRecord', S.handleRecord, [
    ['handle', 'uint64', undefined, 'handle number'],
    ['state', 'string', undefined, 'one of the part 3 handle states'],
    ['generation', 'uint64', undefined, 'application grant generation that prepared it'],
    ['execution_generation', 'uint64', undefined, 'acknowledged native Starts when it started; 0 before Start'],
    ['native_sequence', 'uint64', undefined, 'correlated Start sequence; 0 before Start'],
    ['identity', 'Identity', false, 'immutable raw trajectory identity from prepare, checked at Start'],
  ]),
  ...fields('Execution', S.execution, [
    ['handles', 'HandleRecord[]', undefined, 'every handle the adapter knows'],
    ['generation', 'uint64', undefined, 'count of acknowledged native Starts, distinct from control generation'],
    ['state', 'string', undefined, 'empty, prepared, executing, completed, faulted, cancelled, discarded, released'],
    ['identity', 'Identity', undefined, 'identity of the execution'],
    ['segment', 'int', undefined, 'zero-based current program segment'],
    ['native_sequence', 'uint64', undefined, 'native sequence'],
    ['error', 'string', false, 'for example native_execution_failed'],
  ]),
  ...fields('MotionState', S.motionState, [
    ['mode', 'uint32', undefined, '0 idle, 2 trajectory, 3 jog'],
    ['state', 'uint32', undefined, '0 idle, 1 accepted, 2 queued, 3 executing, 4 completed, 5 aborted, 6 faulted, 7 underrun'],
    ['trajectory_id', 'uint64', undefined, 'trajectory id'],
    ['point_index', 'uint32', undefined, 'point index'],
    ['queue_depth', 'uint32', undefined, 'queue depth'],
    ['last_event', 'uint32', undefined, 'last event code'],
    ['done', 'bool', undefined, 'motion done'],
    ['command_sequence', 'uint64', undefined, 'command sequence'],
    ['time_ns', 'uint64', undefined, 'time in ns'],
  ]),
  ...fields('Program', S.program, [
    ['process_markers', 'ProcessMarker[]', undefined, 'process markers of the program'],
    ['identity', 'Identity', undefined, 'echo unchanged to start_program'],
    ['requires_process_io', 'bool', undefined, 'program needs process I/O'],
    ['segments', 'int', undefined, 'segment count'],
    ['samples', 'int', undefined, 'source sample count'],
    ['normalised_samples', 'int', undefined, 'execution count after shared coincident segment endpoints'],
    ['axis_mask', 'uint32', undefined, 'axes of the program'],
  ]),
  ...fields('ProcessMarker', S.program, [
    ['time_ns', 'int64', undefined, 'from program start'],
    ['segment', 'int', undefined, 'segment index'],
    ['sample', 'int', undefined, 'sample index'],
    ['action', 'string', undefined, 'output name'],
    ['value', 'bool', undefined, 'output value'],
  ]),
  ...fields('LimitViolation', S.limitEvidence, [
    ['kind', 'string', undefined, 'position or velocity'],
    ['segment', 'int', undefined, 'zero-based, matches the refusal text'],
    ['sample', 'int', undefined, 'zero-based, matches the refusal text'],
    ['axis', 'string', undefined, 'canonical joint id'],
    ['value', 'float64', undefined, 'finite logical value, direction and Home offset removed'],
    ['limit', 'float64', undefined, 'finite logical limit, direction and Home offset removed'],
    ['unit', 'string', undefined, 'rad for position, rad/s for velocity'],
  ]),
  ...fields('PlanCursor', S.planCursor, [
    ['time_ns', 'uint64', undefined, 'plan time'],
    ['active_handle', 'uint64', undefined, 'active handle'],
    ['sample_index', 'uint32', undefined, 'sample index'],
    ['native_clock_ns', 'uint64', undefined, 'native clock'],
  ]),
  ...fields('RecoveryStatus', S.recovery, [
    ['home_valid_mask', 'uint32', undefined, 'per-axis home evidence after observed recovery'],
    ['faults', 'FaultRecovery[]', undefined, 'latched fault bits with axis masks and recovery policy'],
    ['reset_sequence', 'uint64', undefined, '0 before any reset; equals the response sequence for reset_fault'],
    ['reason', 'string', undefined, 'empty when no fault persists, else fault_persists'],
    ['outcomes', 'FaultRecovery[]', undefined, 'per-bit outcomes of the correlated reset, never inferred from time'],
  ]),
  ...fields(
    'FaultRecovery',
    S.recovery,
    (['bit', 'name', 'axis_mask', 'recovery', 'outcome', 'rehome_axis_mask'] as const).map(
      (p) => [p, U, undefined, p === 'bit' ? 'bit index in this type; value type not shown' : 'value type not shown'] as const,
    ),
  ),
  ...fields('Description', S.observation, [
    ['backend', U, undefined, 'included in Describe'],
    ['machine_sha256', U, undefined, 'included in Describe'],
    ['configuration_sha256', U, undefined, 'included in Describe'],
    ['cycle_ns', U, undefined, 'included in Describe'],
    ['control_idle_timeout_ns', U, undefined, 'idle timeout in ns (90 s)'],
    ['axes[]', 'array', undefined, 'one entry per axis'],
    ...(['id', 'position_unit', 'min_position', 'max_position', 'native_home', 'counts_per_unit', 'sign'] as const).map(
      (p) => [`axes[].${p}`, U, undefined, 'axis entry field'] as const,
    ),
  ]),
  ...fields('ProcessStatus', S.observation, [
    ['core.armed', U, undefined, 'equals 1 after a successful arm'],
    ['core.home_valid_mask', U, undefined, 'per-axis home evidence'],
    ['core.safety_fault_mask', U, undefined, 'safety fault mask'],
    ['core.home_epoch', U, undefined, 'Home epoch'],
    ['execution', 'Execution', undefined, 'execution block (part 2 Execution)'],
  ]),
  ...fields('LocalJogClock', S.observation, [['incarnation', 'string', undefined, 'jog clock incarnation for begin_jog']]),
  ...fields(
    'JogObservation',
    S.observation,
    (['StateReason', 'ControlReason', 'UpdateReason'] as const).map((p) => [p, U, undefined, 'native name among the fields'] as const),
  ),
  ...fields('Event', S.events, [
    ['sequence', 'uint64', undefined, 'increases by one within an adapter_incarnation'],
    ['time_ns', 'uint64', undefined, "core's publication time"],
    ['type', 'string', undefined, 'one of the 25 event types'],
    ['daemon_incarnation', 'string', undefined, 'core process identity'],
    ['adapter_incarnation', 'string', undefined, 'service process identity'],
    ['grant.generation', 'uint64', undefined, 'grant payload'],
    ['grant.stopping', 'bool', undefined, 'grant payload'],
    ['incarnation.previous', U, undefined, 'incarnation payload'],
    ['incarnation.current', U, undefined, 'incarnation payload'],
    ['events_dropped.first_lost_sequence', 'uint64', undefined, 'first lost sequence, inclusive'],
    ['events_dropped.last_lost_sequence', 'uint64', undefined, 'last lost sequence, inclusive; equals the event sequence'],
    ['fault.bit', U, undefined, "the bit's value (32 for bit 5), not its index"],
    ['handle.from', U, undefined, 'handle_transition: state before'],
    ['handle.to', U, undefined, 'handle_transition: state after'],
    ['execution.fault_bits', U, undefined, 'execution_faulted: fault bits'],
    ['execution.recovery', U, undefined, 'execution_faulted: recovery'],
  ]),
  ...fields('EventBatch', S.events, [
    ['next_sequence', 'uint64', undefined, 'use as the next after'],
    ['latest_sequence', 'uint64', undefined, 'latest sequence in the log'],
  ]),
];

// =============================================================================================
// Binary layouts (part 2), little-endian.

const SIZE: Readonly<Record<string, number>> = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, u64: 8, i64: 8, f64: 8 };

/** Size of a layout type such as `u32` or `i32[16]`. */
function sizeOf(type: string): number {
  const m = /^([a-z]\d+)(?:\[(\d+)\])?$/.exec(type);
  const base = m ? SIZE[m[1]!] : undefined;
  if (!m || base === undefined) throw new HarnessError('HIL_ERR_CATALOGUE', `catalogue doc1: bad layout type ${type}`);
  return base * (m[2] ? Number(m[2]) : 1);
}

/**
 * Parse "offset type name[: note]" items separated by `;`. The layout text below is the
 * document's field list in our compact notation (notes are ours).
 */
function layout(struct: LayoutEntry['struct'], section: string, label: string, spec: string): LayoutEntry[] {
  return spec
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item) => {
      const m = /^(\d+) (\S+) ([a-z0-9_]+)(?:: (.*))?$/.exec(item);
      if (!m) throw new HarnessError('HIL_ERR_CATALOGUE', `catalogue doc1: bad layout item "${item}"`);
      const offset = Number(m[1]);
      const type = m[2]!;
      const field = m[3]!;
      const e: LayoutEntry = {
        family: 'layout',
        id: `layout:${struct}:${field}`,
        doc: DOC,
        section,
        title: `${label} ${field} at byte ${offset} (${type}, little-endian)`,
        struct,
        field,
        offset,
        size: sizeOf(type),
        type,
        note: m[4] ? `little-endian; ${m[4]}` : 'little-endian',
      };
      return e;
    });
}

const telemetryHeader = layout(
  'telemetry_header',
  S.telemetryHeader,
  'Telemetry batch header',
  `0 u32 magic: constant 0x31425452;
   4 u16 version: constant 1;
   6 u16 header_bytes: constant 312;
   8 u8[32] adapter_incarnation: lowercase hex, service process identity;
   40 u8[64] machine_sha256: lowercase hex;
   104 u8[64] deployment_sha256: lowercase hex;
   168 u8[64] record_layout_digest: equals the producer's record layout digest, else the reader refuses with both digests;
   232 u64 cycle_period_ns;
   240 u64 first_sequence: 0 for an empty batch;
   248 u64 last_sequence: after+dropped when empty, the next cursor;
   256 u64 dropped: records lost after the cursor before this batch;
   264 u32 axis_count: 1..16;
   268 u32 record_count: at most min(ring capacity, 4096);
   272 u32 record_bytes: constant 5392;
   276 u32 reserved: 0;
   280 u8[32] daemon_incarnation: lowercase hex, core process identity, owns the sequences`,
);

const U32_FIELDS =
  'armed,axis_enable_mask,active_mode,state,current_point_index,queue_depth,last_event_code,underrun_count,stale_command_flag,' +
  'motion_done,capability_flags,jog_session_open,jog_has_input,jog_axis_mask,jog_ramping,grant_active,grant_axis_mask,' +
  'safety_fault_mask,execution_fault_reasons,submitted_axis_mask,bus_submission_operation,pdo_fresh_axis_mask,config_verified_mask,' +
  'home_valid_mask,service_mode_axis_mask,wkc_actual,wkc_expected,master_state,io_configured,io_input_word,io_output_word,' +
  'io_input_valid,io_armed,io_reason';

const U32_NOTES: Readonly<Record<string, string>> = {
  armed: '1 when armed',
  active_mode: '0 idle, 2 trajectory, 3 jog',
  jog_session_open: '1 while jog input is accepted',
  safety_fault_mask: 'nonzero blocks motion',
  execution_fault_reasons: 'latched bits',
};

const captureRecord = layout(
  'capture_record',
  S.captureRecord,
  'Capture record',
  `0 u64 t_ns: cycle time, host monotonic ns;
   8 u64 seq; 16 u64 cycle; 24 u64 work_ns;
   32 u32 axes: active axis count;
   36 u32 reserved;
   40 i64 cycle_jitter_ns: wake minus scheduled, signed;
   48 u64 active_traj_id; 56 u64 active_command_seq; 64 u64 jog_generation; 72 u64 app_grant_generation;
   80 u64 control_generation; 88 u64 configuration_epoch; 96 u64 home_epoch; 104 u64 grant_deadline_host_ns;
   112 u64 jog_input_deadline_host_ns; 120 u64 jog_source_sequence; 128 i64 bus_submission_return_code;
   ${U32_FIELDS.split(',')
     .map((f, i) => `${136 + 4 * i} u32 ${f}${U32_NOTES[f] ? `: ${U32_NOTES[f]}` : ''}`)
     .join(';')};
   272 u8[5120] ax: 16 CycleCaptureAxisV2 entries of 320 bytes, unused axes zero`,
).map((e) => (e.field === 'ax' ? { ...e, type: 'CycleCaptureAxisV2[16]' } : e));

const captureAxis = layout(
  'capture_axis',
  S.captureAxis,
  'Capture axis',
  `0 i32 position: drive counts; 4 i32 target: drive counts; 8 u16 statusword; 10 u16 error_code; 12 u32 manufacturer_error_code;
   16 i32[16] absolute_value; 80 u8[16] absolute_valid;
   96 i32 velocity_actual_counts_per_s: valid only with velocity_actual_valid;
   100 i32 following_error_counts: valid only with following_error_valid;
   104 u32 velocity_actual_valid; 108 u32 following_error_valid; 112 u32 di_bits;
   116 u32 di_valid: 0 means unavailable, not inputs off;
   120 u32 external_enable_active; 124 u32 external_enable_valid; 128 i64 coordinate_counts; 136 u64 coordinate_epoch;
   144 u64 pdo_observed_time_ns; 152 u64 collision_peak_following_error_counts; 160 u64 collision_trip_count;
   168 u64 collision_samples; 176 u64 collision_last_trip_peak_following_error_counts; 184 i32 absolute_source_counts;
   188 u32 coordinate_reason; 192 i32 target_velocity_counts_per_s; 196 u32 collision_armed; 200 u32 collision_torque_cycles;
   204 u32 collision_following_error_cycles; 208 u32 collision_peak_torque_raw; 212 u32 collision_last_trip_quantity;
   216 u32 collision_trip_sustained_cycles; 220 u32 collision_last_trip_peak_torque_raw; 224 u32 brake_state;
   228 i32 native_home_position_offset; 232 u32 native_home_last_abort_code; 236 i32 ext_position_error_counts;
   240 i32 ext_multi_turn_lo; 244 i32 ext_multi_turn_hi; 248 u32 max_abs_velocity_actual_counts_per_s;
   252 u32 max_abs_following_error_counts;
   256 i16 torque_raw: per-mille of rated, valid only with torque_valid;
   258 u16 ext_bus_voltage_raw; 260 u16 ext_load_rate_raw; 262 i16 ext_igbt_temp_raw; 264 i16 ext_motor_temp_raw;
   266 u16 ext_drive_not_ready_bits; 268 u16 ext_motor_not_rotating_code;
   270 u16 ext_valid_mask: bits 0..8 qualify the ext_ fields;
   272 i8 mode_display: 8 = cyclic synchronous position;
   273 u8 ds402_state; 274 u8 torque_valid; 275 u8 coordinate_valid: 1 when trustworthy; 276 u8 coordinate_source_valid;
   277 u8 native_home_state; 278 u8 slave_al_state; 279 u8 slave_online; 280 u8 slave_operational;
   281 u8 pdo_fresh: 1 when this axis's feedback is fresh;
   282 u8 target_velocity_valid; 283 u8 ext_valid; 284 u8 calibration_valid; 285 u8 position_state; 286 u16 audit_reason;
   288 u64 audit_last_verified_ns; 296 u64 audit_started_ns; 304 u64 audit_completed_ns; 312 u64 audit_coherence_error_counts`,
);

// =============================================================================================
// Endpoints (parts 4 to 6).

const ENDPOINT_ROWS: readonly (readonly [string, string, string])[] = [
  ['POST /v1/control', S.endpoints, 'JSON command endpoint: Request body, Response reply'],
  ['POST /v1/program', op('prepare_program'), 'Program upload: binary dense file with fence headers'],
  ['GET /v1/describe', S.observationEndpoints, 'Describe observation'],
  ['GET /v1/status', S.observationEndpoints, 'Status observation'],
  ['GET /v1/jog/clock', S.observationEndpoints, 'Local jog clock observation'],
  ['GET /v1/jog', S.observationEndpoints, 'Jog status on the local socket; always a WebSocket upgrade on the remote listener'],
  ['GET /v1/jog/ingress', S.observationEndpoints, 'Jog ingress observation'],
  ['GET /v1/resources/<sha256>', S.observationEndpoints, 'Content-addressed compiled resource (remote mutual TLS only; 404 resource_unknown)'],
  ['GET /v1/events', S.events, 'Event poll: one batch of up to 64 events after a cursor'],
  ['GET /v1/events/stream', S.events, 'Event stream as Server-Sent Events after a cursor'],
  ['GET /v1/telemetry', S.observationEndpoints, 'Telemetry poll: one binary batch, gzip on request'],
  ['GET /v1/telemetry/stream', S.observationEndpoints, 'Telemetry stream: concatenated batches over chunked HTTP'],
];

const endpoints: RuleEntry[] = ENDPOINT_ROWS.map(([name, section, title]) => ({
  family: 'endpoint',
  id: `endpoint:${name}`,
  doc: DOC,
  section,
  title,
  text: name,
}));

// =============================================================================================
// Rules: [area.name, section, title, text, http?].

type RuleRow = readonly [string, string, string, string, number?];

const RULE_ROWS: readonly RuleRow[] = [
  // part 1
  ['service.single_controller', S.what, 'One controller holds the grant; any number of clients observe', 'one grant holder, many observers'],
  ['service.http_200_is_admission', S.what, 'HTTP 200 on a motion command means admitted, not physically completed', 'admission only'],
  ['service.describe_lists_capabilities', S.what, 'Describe returns the capability list at run time', 'capability list with name, state, transport'],
  ['service.unimplemented_answers', S.what, 'An unimplemented capability returns capability_unimplemented', 'unimplemented state'],
  ['service.no_software_estop', S.what, 'stop is not an emergency stop; the hardware E-stop is the only one', 'safety statement'],
  ['transport.control_socket', S.transports, 'HTTP over {socket_dir}/control.sock, also via the link public/control.sock', 'socket group permissions authenticate'],
  ['transport.jog_socket', S.transports, 'Jog datagrams on {socket_dir}/jog.sock beside the control socket, binary frames only', 'jog socket'],
  ['transport.remote_listener', S.transports, 'HTTPS with mutual TLS 1.3 on --remote-listen (default 127.0.0.1:8443)', 'remote listener'],
  ['transport.base_url', S.transports, 'Base address http://localhost over the socket, https://{host}:{port} remotely', 'base url'],
  ['transport.socket_flag_default', S.transports, '--socket defaults to {socket_dir}/control.sock', 'flag default'],
  ['transport.keep_alive', S.transports, 'Connections are kept alive up to control_idle_timeout_ns (90 s)', 'idle timeout'],
  ['transport.exact_uint64', S.transports, 'JSON integers are exact uint64, parsed without floating point', 'exact integers'],
  ['transport.units', S.transports, 'Positions in position_unit, velocities per second, times in host monotonic ns', 'units'],
  // part 2
  ['envelope.strict_decoding', S.request, 'Unknown fields, duplicate fields and trailing data are refused', 'strict decoding'],
  ['envelope.fence_top_level', S.request, 'Fence fields session and generation sit at the top level of the request', 'embedded fence'],
  ['envelope.unused_fields_optional', S.request, 'Fields an operation does not use may be omitted', 'omission'],
  ['envelope.source_sequence_ignored', S.request, 'source_sequence is accepted and ignored by /v1/control dispatch', 'compatibility field'],
  ['fence.exact_generation_for_motion', S.fence, 'Motion needs the exact current generation', 'fence equality'],
  ['fence.older_generation_renew_stop', S.fence, 'renew and stop accept an older nonzero generation of the same session not above the current one', 'fence tolerance'],
  ['binding.machine_sha256_optional', S.binding, 'Binding machine_sha256 may be omitted by clients knowing only the artifact digest', 'binding'],
  ['grant.lease_min_of_request_and_ceiling', S.grant, 'Effective lease is min(requested, cell ceiling) in whole ms', 'lease'],
  ['grant.stopping_no_movement', S.grant, 'A stopping grant keeps the lease alive but permits no movement', 'stopping'],
  ['response.omit_zero_empty', S.response, 'Reply fields that are zero or empty are omitted', 'omission'],
  ['response.error_leading_label', S.errors, 'error is a catalogue label or a diagnostic starting with one; clients match the leading label', 'leading label'],
  ['response.native_result_on_refusal', S.response, 'native_result is present when the core refused a command', 'native evidence'],
  ['point.time_monotonic', S.point, 'First point time_ns is 0 and later ones strictly increase', 'point times'],
  ['point.io_values_within_mask', S.point, 'Every set io_values bit is also set in io_mask; set bits need configured non-torch outputs', 'point I/O'],
  ['limit_violation.omitted_if_invalid', S.limitEvidence, 'limit_violation is omitted when a number is invalid; the refusal stays', 'evidence'],
  ['limit_violation.with_reasons', S.limitEvidence, 'native_limit_exceeded and native_segment_rate_exceeded carry data.limit_violation', 'evidence'],
  ['recovery.reset_sequence_matches', S.recovery, 'reset_fault RecoveryStatus.reset_sequence equals the response sequence', 'correlation'],
  ['recovery.outcomes_correlated', S.recovery, 'Outcomes come from the correlated reset, never from elapsed time', 'correlation'],
  ['describe.deployment_digest', S.observation, 'Describe includes a deployment digest (field name not given)', 'Description content'],
  ['describe.capability_list', S.observation, 'Describe includes the capability list (field name not given)', 'Description content'],
  ['status.commissioning_phase', S.observation, 'Status includes a commissioning phase (field name not given)', 'ProcessStatus content'],
  ['status.axis_readiness', S.observation, 'Status includes per-axis readiness (field name not given)', 'ProcessStatus content'],
  ['telemetry.little_endian', S.telemetry, 'Telemetry batches are little-endian application/octet-stream', 'encoding'],
  ['telemetry.batch_shape', S.telemetry, 'A batch is the 312-byte header plus exactly record_count records of 5392 bytes', 'batch size'],
  ['telemetry.reader_checks', S.telemetry, 'Readers check magic, version, header_bytes, record_bytes, layout digest, axis_count and record_count before the body', 'reader checks'],
  ['telemetry.layout_digest_mismatch', S.telemetry, 'A record layout digest difference refuses the batch with an error carrying both digests', 'layout check'],
  ['telemetry.unused_axes_zero', S.captureRecord, 'Unused axis entries of ax are zero', 'capture record'],
  ['telemetry.drive_counts', S.captureRecord, 'Positions and targets are drive counts converted with counts_per_unit and sign', 'units'],
  ['telemetry.check_validity_flags', S.captureAxis, 'Check pdo_fresh and each validity flag before using a value', 'validity'],
  // part 3
  ['handle.terminal_never_regain', S.handles, 'Terminal handle states never regain permission', 'terminal states'],
  ['machine_effect.home_leaves_axes_disabled', S.effects, 'Home leaves the selected axes disabled; enable and arm are needed again', 'machine effect'],
  ['machine_effect.restore_anchor_no_enable_arm', S.effects, 'restore_anchor never enables or arms', 'machine effect'],
  ['machine_effect.reset_fault_no_motion', S.effects, 'reset_fault never starts motion', 'machine effect'],
  ['machine_effect.reset_fault_no_home', S.effects, 'reset_fault never grants Home', 'machine effect'],
  ['jog_session.begin_opens_generation', S.jogSession, 'begin_jog opens an independent jog generation returned as handle', 'jog session'],
  ['jog_session.end_closes', S.jogSession, 'end_jog closes the jog generation', 'jog session'],
  ['jog_session.halt_retires', S.jogSession, 'halt retires the jog generation', 'jog session'],
  ['jog_session.expiry_event', S.jogSession, 'Input expiry emits jog_expired and ramp-down emits jog_ramping', 'jog session'],
  ['jog_session.limited_is_accepted', S.jogSession, 'jog_limited at a position limit is an accepted state, not a failure', 'jog session'],
  // part 4 HTTP and envelope
  ['http.status_codes', S.endpoints, '200 admitted, 409 refused with error, 413 body_too_large, 404 resource_unknown only from /v1/resources', 'statuses'],
  ['envelope.body_limit', S.envelope, 'Ordinary command bodies above 16384 bytes get HTTP 413 body_too_large', 'body limit', 413],
  ['envelope.schema_mismatch', S.envelope, 'A schema other than the request schema string gives schema_mismatch', 'schema'],
  ['envelope.unknown_operation', S.envelope, 'An unknown operation gives unknown_operation', 'operation'],
  ['envelope.non_object', S.envelope, 'A non-object body or non-string key gives invalid_request_envelope', 'shape'],
  ['envelope.duplicate_field', S.envelope, 'A repeated field in the envelope prefix gives duplicate_request_field', 'duplicates'],
  ['envelope.trailing_data', S.envelope, 'Trailing data gives trailing_request_data', 'trailing data'],
  ['envelope.changed_after_prefix', S.envelope, 'A decoded request differing from the admitted prefix gives request_envelope_changed', 'prefix'],
  ['idempotency.remember_outcomes', S.envelope, 'With request_id the session remembers its last 256 outcomes', 'retry cache'],
  ['idempotency.join_or_replay', S.envelope, 'Same id and same payload joins the in-flight request or replays the final reply', 'retry'],
  ['idempotency.conflict', S.envelope, 'Same id with a changed payload gives request_id_conflict', 'retry conflict'],
  ['idempotency.cache_dropped', S.envelope, 'Release, lease expiry and service restart drop the retry cache', 'cache drops'],
  ['idempotency.invalid_id', S.envelope, 'An invalid request_id gives invalid_request_id', 'id check'],
  ['idempotency.program_no_dedup', S.envelope, '/v1/program uploads are never deduplicated', 'uploads'],
  ['idempotency.fresh_id', S.envelope, 'Use a fresh request_id per renewal and after correcting a refused request', 'client duty'],
  ['client.ambiguous_start', S.envelope, 'After an ambiguous Start inspect handle state and incarnations before new motion', 'client duty'],
  ['client.unknown_outcome', S.envelope, 'Unknown label, malformed reply or transport failure is an unknown outcome: stop motion, stop the grant, reconcile', 'client duty'],
  ['common_sets.envelope', 'part 7 Errors: Common sets', 'Envelope reasons apply to every POST /v1/control', 'common set'],
  ['common_sets.authority', 'part 7 Errors: Common sets', 'control_session_stale, daemon_restarted and fence apply to every fenced call', 'common set'],
  ['common_sets.native', 'part 7 Errors: Common sets', 'native_rejected and outside_limits_outward apply to calls the core admits', 'common set'],
  ['common_sets.io', 'part 7 Errors: Common sets', 'Cell I/O reasons apply to calls that can carry outputs', 'common set'],
  // part 4 operations
  ['op.fenced_required_fields', S.ops, 'Every fenced operation requires schema, operation, session and generation; request_id optional', 'fenced calls'],
  ['op.acquire.binding', op('acquire'), 'acquire needs controller (1..63 bytes) and binding; requested_lease_ms optional', 'acquire'],
  ['op.renew.lease_unchanged', op('renew'), 'renew returns the Grant with lease_ms unchanged', 'renew'],
  ['op.release.empty_session', op('release'), 'release returns the Grant with an empty session', 'release'],
  ['op.stop.outputs_off', op('stop'), 'stop commands every cell output OFF, revokes authority and inhibits at once', 'stop'],
  ['op.enable.axis_mask_required', op('enable'), 'enable requires axis_mask', 'enable'],
  ['op.arm.core_armed', op('arm'), 'After a successful arm status core.armed equals 1; readiness is still checked at every Start and jog', 'arm'],
  ['op.home.axis_mask', op('home'), 'home needs a nonzero axis_mask of configured axes with native_home true', 'home'],
  ['op.home.observable_success', op('home'), 'Success shows a new home_epoch, idle commissioning phase and the selected home_valid_mask bits', 'home'],
  ['op.home.stop_on_failure', op('home'), 'On Home failure the service issues a stop', 'home'],
  ['op.home.saves_anchors', op('home'), 'With the anchor directory variable set, success saves one anchor file per selected axis', 'home'],
  ['op.home.reply_loss', op('home'), 'Losing the reply does not cancel Home; stop, lease expiry or transport loss do', 'home'],
  ['op.halt.hold', op('halt'), 'halt decelerates to an enabled hold, retires trajectory handle and jog generation, keeps grant, Enable and Arm', 'halt'],
  ['op.halt.restart_at_hold', op('halt'), 'After halt a Start must begin at the held target; jogging needs a new begin_jog', 'halt'],
  ['op.halt.native_result', op('halt'), 'A native refusal of halt also carries native_result', 'halt'],
  ['op.restore_anchor.precondition', op('restore_anchor'), 'restore_anchor needs a disarmed, disabled, non-commissioning machine and nonzero axis_mask', 'restore_anchor'],
  ['op.restore_anchor.result', op('restore_anchor'), 'restore_anchor returns sequence and RecoveryStatus with the selected home_valid_mask bits set', 'restore_anchor'],
  ['op.reset_fault.precondition', op('reset_fault'), 'reset_fault needs an inhibited idle machine (not armed, no jog, commissioning, Home or program)', 'reset_fault'],
  ['op.reset_fault.axis_mask_zero', op('reset_fault'), 'reset_fault axis_mask 0 means every configured axis', 'reset_fault'],
  ['op.reset_fault.retires_session', op('reset_fault'), 'A submitted reset retires the session even when the core refuses it', 'reset_fault'],
  ['op.reset_fault.no_partial_clear', op('reset_fault'), 'Any persistent condition refuses the whole reset', 'reset_fault'],
  ['op.recovery_status.keeps_session', op('recovery_status'), 'recovery_status clears nothing and keeps the session', 'recovery_status'],
  ['op.io_arm.drive_conditions', op('io_arm'), 'Outputs drive only after io_arm under a fresh grant with valid OFF readback after the last stop', 'io_arm'],
  ['op.io_disarm.clears', op('io_disarm'), 'io_disarm clears output permission and intent in the native cycle', 'io_disarm'],
  ['op.mark_telemetry.event', op('mark_telemetry'), 'mark_telemetry publishes one telemetry_mark with label, native sequence and grant generation', 'mark_telemetry'],
  ['op.mark_telemetry.no_motion_lock', op('mark_telemetry'), 'mark_telemetry does not take the motion lock and works during a long Home', 'mark_telemetry'],
  ['op.begin_jog.required', op('begin_jog'), 'begin_jog needs axis_mask, source_origin_host_ns, deadline_host_ns and clock_incarnation; handle is the jog generation', 'begin_jog'],
  ['op.end_jog.exact_generation', op('end_jog'), 'end_jog needs the exact current nonzero jog_generation', 'end_jog'],
  ['op.jog.required', op('jog'), 'Legacy jog needs axis_mask, velocity and timeout_ms 1..250', 'jog'],
  ['op.prepare_trajectory.fence_prefix', op('prepare_trajectory'), 'schema, operation, session and nonzero generation must appear in the first 16384 bytes, before points', 'prepare_trajectory'],
  ['op.prepare_program.headers', op('prepare_program'), 'Program uploads carry X-Control-Session and decimal X-Control-Generation headers', 'prepare_program'],
  ['op.prepare_program.one_upload', op('prepare_program'), 'One program upload at a time', 'prepare_program'],
  ['op.prepare_program.busy_native_reason', op('prepare_program'), 'busy on upload carries native_result.Reason 5 (capacity)', 'prepare_program'],
  ['op.prepare_program.check_order', op('prepare_program'), 'File format rules first, then live-machine checks', 'prepare_program'],
  ['op.start_program.identity_equal', op('start_program'), 'start_program needs the complete Identity from prepare_program, every field equal', 'start_program'],
  ['op.start_program.completion', op('start_program'), 'Completion shows as execution.state completed for the next execution.generation, or faulted with native_execution_failed', 'start_program'],
  ['op.start_program.retry', op('start_program'), 'A lost receipt is retried with the same request_id', 'start_program'],
  ['op.start.handle_kept', op('start_program'), 'mode_conflict and not_ready keep the handle; fence retires it', 'start gate'],
  ['op.abort_readiness.capability_info', op('abort, readiness'), 'abort and readiness answer capability_unimplemented with CapabilityInfo in data', 'reserved'],
  // observation endpoints
  ['observation.no_fence', S.observationEndpoints, 'Observation endpoints take no parameters and no fence and return the Response envelope', 'observation'],
  ['observation.resource_remote_only', S.observationEndpoints, 'Resources need remote mutual TLS; unknown digest gives 404 resource_unknown', 'resource', 404],
  ['observation.unknown_endpoint', S.observationEndpoints, 'Any other method and path gives unknown_endpoint', 'unknown endpoint'],
  ['telemetry.gzip', S.observationEndpoints, 'Telemetry poll is gzip when the request accepts gzip', 'encoding'],
  ['telemetry.stream_batches', S.observationEndpoints, 'Telemetry stream flushes one complete batch at a time; clients split by header, not chunks', 'stream'],
  ['telemetry.cursor_start', S.observationEndpoints, 'Cursor 0 starts at sequence 1; overwritten history is reported in dropped', 'cursor'],
  ['telemetry.cursor_contiguous', S.observationEndpoints, 'A non-empty batch starts at after + dropped + 1 with contiguous sequences', 'cursor'],
  ['telemetry.cursor_empty_batch', S.observationEndpoints, 'An empty batch has first_sequence 0 and last_sequence after + dropped', 'cursor'],
  ['telemetry.cursor_resume', S.observationEndpoints, 'Always resume from last_sequence', 'cursor'],
  ['telemetry.incarnation_change', S.observationEndpoints, 'On an incarnation change stop and re-read Describe and Status before resetting the cursor', 'cursor'],
  ['telemetry.no_session', S.observationEndpoints, 'Telemetry needs no session; remotely it needs a valid client certificate', 'access'],
  ['telemetry.stream_close', S.limits, 'Telemetry stream closes when the core disconnects or a write blocks 5 s', 'stream'],
  ['telemetry.errors_json_409', 'part 7 Errors: Telemetry and events', 'All telemetry errors are JSON with HTTP 409', 'errors', 409],
  ['telemetry.busy_retry', 'part 7 Errors: Telemetry and events', 'telemetry_busy carries Retry-After 1; on an established stream it becomes an empty batch with unchanged cursor', 'busy'],
  // part 5 authentication (numbered statements)
  ['auth.local_permissions', `${S.auth}, statement 1`, 'Socket group permissions authenticate local clients; local sessions belong to the local transport', 'statement 1'],
  ['auth.tls13_client_cert', `${S.auth}, statement 2`, 'Remote listener is TLS 1.3 only with a required client certificate verified against one self-signed CA', 'statement 2'],
  ['auth.no_intermediate_ca', `${S.auth}, statement 2`, 'Client certificates must be issued directly by the CA; intermediates are refused', 'statement 2'],
  ['auth.certificate_identity', `${S.auth}, statement 3`, 'Client certificate has exactly one svc-principal:<id> and one svc-pair:<pair> URI, tokens [A-Za-z0-9_.:-]+', 'statement 3'],
  ['auth.pair_matches', `${S.auth}, statement 3`, 'The svc-pair must equal the service --pair-id', 'statement 3'],
  ['auth.principal_owns_session', `${S.auth}, statement 3`, 'The acquiring principal owns the session; others and local clients get session_principal_mismatch', 'statement 3'],
  ['auth.crl_every_handshake', `${S.auth}, statement 4`, 'CRL checked every handshake: revoked serial, foreign signer, unsupported critical extension or outside validity refuses', 'statement 4'],
  ['auth.failed_handshake_no_http', `${S.auth}, statement 4`, 'Failed handshakes get a TLS alert or close; no HTTP response even to plaintext', 'statement 4'],
  ['auth.credential_reload', `${S.auth}, statement 5`, 'Credential files reload before a full handshake when their mtime changes', 'statement 5'],
  ['auth.failed_reload_refuses', `${S.auth}, statement 5`, 'A failed reload refuses new handshakes and never falls back to old credentials', 'statement 5'],
  ['auth.open_connections_kept', `${S.auth}, statement 5`, 'Open connections are not revoked by a reload', 'statement 5'],
  ['auth.no_session_tickets', `${S.auth}, statement 5`, 'TLS session tickets are disabled', 'statement 5'],
  ['auth.startup_flags', `${S.auth}, statement 6`, 'With --remote-listen, --remote-ca (one self-signed CA), --remote-cert, --remote-key, --remote-crl and --pair-id are checked; failure exits 2', 'statement 6'],
  ['auth.remote_jog_flags', `${S.auth}, statement 6`, 'Remote jog clock flags default 0; unless all three are nonzero every remote jog frame gets jog_clock_unqualified', 'statement 6'],
  ['auth.fence_after_acquire', `${S.auth}, statement 7`, 'After acquire every command carries the fence; acquire checks the binding; observation needs no session', 'statement 7'],
  ['auth.certificate_tooling', `${S.auth}, statement 8`, 'Tooling makes one EC P-256 CA per pair (3650 d), server and per-principal client certificates (365 d), CRL (7 d)', 'statement 8'],
  ['auth.expired_crl', `${S.auth}, statement 8`, 'Once the CRL expires every handshake is refused (remote CRL not current)', 'statement 8'],
  // remote jog WebSocket
  ['remote_jog_ws.upgrade', S.ws, 'Remote GET /v1/jog is always a WebSocket upgrade with session, generation and jog_generation query', 'upgrade'],
  ['remote_jog_ws.handshake_101', S.ws, 'Upgrade needs Connection Upgrade, Upgrade websocket, version 13 and a 16-byte base64 key; success is 101', 'handshake', 101],
  ['remote_jog_ws.query', S.ws, 'session owned by the principal, decimal generation, jog_generation 0 to set up or an existing one', 'query'],
  ['remote_jog_ws.pre_upgrade_text', S.ws, 'Pre-upgrade failures are text/plain', 'pre-upgrade'],
  ['remote_jog_ws.pre_upgrade_400', S.ws, 'Invalid websocket upgrade answers 400', 'pre-upgrade', 400],
  ['remote_jog_ws.pre_upgrade_403', S.ws, 'Wrong principal answers 403 session_principal_mismatch', 'pre-upgrade', 403],
  ['remote_jog_ws.pre_upgrade_409', S.ws, 'Stale jog or control session answers 409 jog_session_stale or control_session_stale', 'pre-upgrade', 409],
  ['remote_jog_ws.pre_upgrade_503', S.ws, 'During shutdown the upgrade answers 503 independent_jog_unavailable', 'pre-upgrade', 503],
  ['remote_jog_ws.single_connection', S.ws, 'A second remote jog connection closes both with code 1008', 'close 1008'],
  ['remote_jog_ws.msg_calibrate', S.ws, 'Client calibrate: source_incarnation, source_ns, seq, host_tx_ns from the second on', 'calibrate'],
  ['remote_jog_ws.msg_calibrated', S.ws, 'Service calibrated: seq, source_ns, host_rx_ns, host_tx_ns', 'calibrated'],
  ['remote_jog_ws.msg_begin', S.ws, 'Client begin: seq 3, axis_mask, source_ns, host_tx_ns of the second reply', 'begin'],
  ['remote_jog_ws.msg_begun', S.ws, 'Service begun: seq, jog_generation', 'begun'],
  ['remote_jog_ws.msg_rejected', S.ws, 'Service rejected: seq, reason, only on refusal', 'rejected'],
  ['remote_jog_ws.sequence', S.ws, 'Calibrate twice, begin (service runs begin_jog), then binary local_jog_update frames without replies', 'exchange'],
  ['remote_jog_ws.input_before_begin', S.ws, 'Input captured before the begin sample is refused', 'exchange'],
  ['remote_jog_ws.frames', S.ws, 'Frames at most 4096 bytes and unfragmented; ping and pong answered', 'frames'],
  ['remote_jog_ws.protocol_close', S.ws, 'Protocol violations close with 1002, 1007 or 1009', 'close codes'],
  ['remote_jog_ws.idle_close', 'part 7 Errors', 'On idle or stopped grants the receiver answers jog_stream_idle or control_session_stale before closing', 'close'],
  ['remote_jog_ws.idle_ends_jog', S.limits, 'No complete frame within the input-age ceiling ends the jog (5 s during setup)', 'idle'],
  // part 6 events
  ['events.no_session', S.events, 'Events are observable without a session', 'access'],
  ['events.poll_batch', S.events, 'GET /v1/events returns up to 64 events in a Response envelope with EventBatch data', 'poll'],
  ['events.sse_messages', S.events, 'SSE messages carry id (sequence), event (type) and data (one Event, no envelope)', 'SSE'],
  ['events.last_event_id_ignored', S.events, 'Last-Event-ID is not read; resume with after', 'SSE'],
  ['events.cursor_zero', S.events, 'after omitted or 0 starts at the oldest retained event', 'cursor'],
  ['events.cursor_invalid', S.events, 'after that is not one unsigned decimal number gives 409 invalid_event_cursor', 'cursor', 409],
  ['events.cursor_ahead', S.events, 'A cursor newer than the log gives 409 event_cursor_ahead', 'cursor', 409],
  ['events.ring_256', S.events, 'The log keeps the last 256 events', 'ring'],
  ['events.dropped_synthetic', S.events, 'An old cursor first gets events_dropped (first..last lost, inclusive) with sequence last_lost_sequence', 'ring'],
  ['events.original_sequences', S.events, 'Retained events keep their original sequences', 'ring'],
  ['events.sequence_increment', S.events, 'Sequences increase by one within an adapter_incarnation', 'sequences'],
  ['events.restart', S.events, 'A service restart restarts sequences under a new adapter_incarnation', 'restart'],
  ['events.envelope_fields', S.events, 'Each event has sequence, time_ns, type, daemon_incarnation, adapter_incarnation and one payload field', 'shape'],
  ['events.core_publication_time', S.events, 'time_ns is the core\'s publication time (its clock in the cycle that published the event)', 'time'],
  ['events.no_session_token', S.events, 'Events never contain the session token', 'privacy'],
  ['events.fault_bit_value', S.events, 'Fault event bit is the bit value (32 for bit 5); RecoveryStatus.faults[].bit is the index', 'fault bit'],
  // part 7 numeric facts
  ['native.reason_capacity', 'part 7 Errors', 'Native command reason 5 is capacity', 'numeric native reason'],
  ['fault_bits.bit5_following_error', 'part 7 Errors', 'Fault bit 5 is following_error, value 32, recovery reset_after_condition_clears', 'fault bit'],
  ['fault_bits.bit11_restart_required', 'part 7 Errors', 'Fault bit 11 is restart_required (pdo_mapping_mismatch)', 'fault bit'],
  // part 9
  ['versioning.request_schema', S.versioning, 'Request schema string is svc.rt-control.request.v1', 'schema'],
  ['versioning.response_schema', S.versioning, 'Response schema string is svc.rt-control.response.v1', 'schema'],
  ['versioning.telemetry_header', S.versioning, 'Telemetry header version 1; record layout identified by a compared digest', 'telemetry version'],
];

const rules: RuleEntry[] = RULE_ROWS.map(([name, section, title, text, http]) => {
  const e: RuleEntry = { family: 'rule', id: `rule:${name}`, doc: DOC, section, title, text };
  if (http !== undefined) e.http = http;
  return e;
});

export const entries: CatalogueEntry[] = [
  ...reasons,
  ...capabilities,
  ...events,
  ...transitions,
  ...limits,
  ...fieldEntries,
  ...telemetryHeader,
  ...captureRecord,
  ...captureAxis,
  ...endpoints,
  ...rules,
];
