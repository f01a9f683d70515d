// Strict checks of the control service's reply envelope: document 1 part 2 "Response",
// "CommandResult", "Grant", "Binding", and part 4 "HTTP status". Membership of the error label in the
// reason catalogue is deliberately NOT checked here: harness/catalogue owns the catalogue and callers check it.

import { fail, OracleError } from './errors.ts';
import { isJsonObject, parseExact } from './json.ts';
import type { JsonExact, JsonObject } from './json.ts';

export const RESPONSE_SCHEMA = 'svc.rt-control.response.v1';
export const UINT64_MAX = (1n << 64n) - 1n;
export const UINT32_MAX = 0xffff_ffff;

/** Document 1 part 4: 200 admitted; 409 refused with error; 413 body_too_large; 404 resource_unknown. */
export const REPLY_STATUSES = [200, 409, 413, 404] as const;
export type ReplyStatus = (typeof REPLY_STATUSES)[number];

/** The only label each non-409 refusal status may carry, and vice versa (document 1 part 4, part 7). */
const STATUS_LABEL: ReadonlyArray<readonly [ReplyStatus, string]> = [
  [413, 'body_too_large'],
  [404, 'resource_unknown'],
];

export const RESPONSE_FIELDS = [
  'schema',
  'operation',
  'sequence',
  'handle',
  'data',
  'native_result',
  'native_jog_result',
  'error',
] as const;

export interface CommandResult {
  Sequence: bigint;
  Handle: bigint;
  Generation: bigint;
  Operation: number;
  /** 0 accepted, 1 rejected, 2 prepared. */
  Result: 0 | 1 | 2;
  Reason: number;
  AxisMask: number;
}

export interface Binding {
  pair_id: string;
  revision: bigint;
  configuration_sha256: string;
  machine_sha256?: string;
}

export interface Grant {
  stopping: boolean;
  deadline_host_ns: bigint;
  /** 64 lowercase hex characters while owned; empty after release or expiry. */
  session: string;
  generation: bigint;
  controller: string;
  binding: Binding;
  lease_ms: number;
}

export interface ResponseEnvelope {
  schema: typeof RESPONSE_SCHEMA;
  operation: string;
  sequence?: bigint;
  handle?: bigint;
  data?: JsonExact;
  native_result?: CommandResult;
  /** JogObservation: its field list is not shown (document 1 part 2), so only its object shape is checked. */
  native_jog_result?: JsonObject;
  error?: string;
}

export interface CheckedReply {
  status: ReplyStatus;
  reply: ResponseEnvelope;
  /** Leading catalogue label of `error` (text before the first ':' or whitespace); undefined on 200. */
  label: string | undefined;
}

// ---------------------------------------------------------------------------------------------
// Small typed field readers. `code` is the caller's stable code naming the field.

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

export function readUint64(v: unknown, code: string, field: string, opts: { nonzero?: boolean } = {}): bigint {
  if (typeof v !== 'bigint') fail(code, `${field} must be a JSON integer, got ${describe(v)}`, { field });
  if (v < 0n || v > UINT64_MAX) fail(code, `${field} ${v} is outside uint64`, { field });
  if (opts.nonzero && v === 0n) fail(code, `${field} must be nonzero`, { field });
  return v;
}

export function readUint32(v: unknown, code: string, field: string): number {
  if (typeof v !== 'bigint') fail(code, `${field} must be a JSON integer, got ${describe(v)}`, { field });
  if (v < 0n || v > BigInt(UINT32_MAX)) fail(code, `${field} ${v} is outside uint32`, { field });
  return Number(v);
}

function readString(v: unknown, code: string, field: string, opts: { nonempty?: boolean } = {}): string {
  if (typeof v !== 'string') fail(code, `${field} must be a string, got ${describe(v)}`, { field });
  if (opts.nonempty && v.length === 0) fail(code, `${field} must not be empty`, { field });
  return v;
}

function readObject(v: unknown, code: string, what: string): JsonObject {
  if (!isJsonObject(v)) fail(code, `${what} must be a JSON object, got ${describe(v)}`);
  return v;
}

function refuseUnknown(obj: JsonObject, allowed: readonly string[], code: string, what: string): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) fail(code, `${what} has undocumented field ${JSON.stringify(key)}`, { field: key });
  }
}

// ---------------------------------------------------------------------------------------------
// Response envelope.

/** Media type of a reply: application/json, optionally with charset=utf-8 (a profile decision). */
export function checkContentType(contentType: string | undefined): void {
  if (contentType === undefined) fail('reply_content_type', 'reply has no Content-Type');
  const [essence = '', ...params] = contentType.split(';').map((p) => p.trim().toLowerCase());
  if (essence !== 'application/json') fail('reply_content_type', `Content-Type ${contentType} is not application/json`);
  for (const p of params) {
    if (p !== 'charset=utf-8' && p !== 'charset="utf-8"') fail('reply_content_type', `unexpected Content-Type parameter ${p}`);
  }
}

/** The leading catalogue label of an error text: everything before the first ':' or whitespace. */
export function leadingLabel(error: string): string {
  const m = /^[^:\s]*/.exec(error);
  return m === null ? '' : m[0];
}

export function checkReply(
  status: number,
  contentType: string | undefined,
  body: Uint8Array,
  expectOperation?: string,
): CheckedReply {
  if (!(REPLY_STATUSES as readonly number[]).includes(status)) fail('reply_status', `HTTP status ${status} is not one of 200, 409, 413, 404`, { status });
  const replyStatus = status as ReplyStatus;
  checkContentType(contentType);

  let parsed: JsonExact;
  try {
    parsed = parseExact(body);
  } catch (e) {
    const inner = e instanceof OracleError ? e.code : 'unknown';
    return fail('reply_json', `reply body is not exact JSON (${inner})`, { json_code: inner }, e);
  }
  const obj = readObject(parsed, 'reply_not_object', 'reply');
  refuseUnknown(obj, RESPONSE_FIELDS, 'reply_unknown_field', 'reply');

  if (obj.schema !== RESPONSE_SCHEMA) fail('reply_schema', `schema must be ${RESPONSE_SCHEMA}`, { field: 'schema' });
  const operation = readString(obj.operation, 'reply_operation', 'operation', { nonempty: true });
  if (expectOperation !== undefined && operation !== expectOperation) {
    fail('reply_operation', `operation ${operation} answers a request for ${expectOperation}`, { field: 'operation', expected: expectOperation, actual: operation });
  }

  // "fields that are zero or empty are omitted": a present zero, empty string or null is a violation.
  const reply: ResponseEnvelope = { schema: RESPONSE_SCHEMA, operation };
  if (Object.hasOwn(obj, 'sequence')) reply.sequence = readUint64(obj.sequence, 'reply_sequence', 'sequence', { nonzero: true });
  if (Object.hasOwn(obj, 'handle')) reply.handle = readUint64(obj.handle, 'reply_handle', 'handle', { nonzero: true });
  if (Object.hasOwn(obj, 'data')) {
    if (obj.data === null) fail('reply_data', 'data is present but null', { field: 'data' });
    reply.data = obj.data;
  }
  if (Object.hasOwn(obj, 'native_result')) reply.native_result = checkCommandResult(obj.native_result);
  if (Object.hasOwn(obj, 'native_jog_result')) {
    reply.native_jog_result = readObject(obj.native_jog_result, 'reply_native_jog_result', 'native_jog_result');
  }

  const hasError = Object.hasOwn(obj, 'error');
  if (hasError) reply.error = readString(obj.error, 'reply_error', 'error', { nonempty: true });
  if (replyStatus === 200 && hasError) fail('reply_error', 'HTTP 200 reply carries error', { field: 'error', status });
  if (replyStatus !== 200 && !hasError) fail('reply_error', `HTTP ${status} reply has no error`, { field: 'error', status });

  let label: string | undefined;
  if (reply.error !== undefined) {
    label = leadingLabel(reply.error);
    if (label === '') fail('reply_error', 'error does not start with a label', { field: 'error' });
    for (const [s, l] of STATUS_LABEL) {
      if ((replyStatus === s) !== (label === l)) {
        fail('reply_status_label', `HTTP ${status} with label ${label}: ${l} goes with ${s} only`, { status, label });
      }
    }
  }
  return { status: replyStatus, reply, label };
}

// ---------------------------------------------------------------------------------------------
// CommandResult (document 1 part 2, case-sensitive names).

const COMMAND_RESULT_FIELDS = [
  ['Sequence', 'u64', 'reply_command_result_sequence'],
  ['Handle', 'u64', 'reply_command_result_handle'],
  ['Generation', 'u64', 'reply_command_result_generation'],
  ['Operation', 'u32', 'reply_command_result_operation'],
  ['Result', 'u32', 'reply_command_result_result'],
  ['Reason', 'u32', 'reply_command_result_reason'],
  ['AxisMask', 'u32', 'reply_command_result_axis_mask'],
] as const;

export interface CommandResultOptions {
  /** Accept an omitted field as zero. Default false: the native record is written whole (profile). */
  allowOmittedZero?: boolean;
}

export function checkCommandResult(value: unknown, opts: CommandResultOptions = {}): CommandResult {
  const obj = readObject(value, 'reply_command_result_not_object', 'CommandResult');
  refuseUnknown(obj, COMMAND_RESULT_FIELDS.map((f) => f[0]), 'reply_command_result_unknown_field', 'CommandResult');
  const out: Record<string, bigint | number> = {};
  for (const [name, type, code] of COMMAND_RESULT_FIELDS) {
    let v: unknown = obj[name];
    if (!Object.hasOwn(obj, name)) {
      if (!opts.allowOmittedZero) fail(code, `CommandResult lacks ${name}`, { field: name });
      v = 0n;
    }
    out[name] = type === 'u64' ? readUint64(v, code, name) : readUint32(v, code, name);
  }
  if (out.Result !== 0 && out.Result !== 1 && out.Result !== 2) {
    fail('reply_command_result_result', `Result ${out.Result} is not 0 accepted, 1 rejected or 2 prepared`, { field: 'Result' });
  }
  return out as unknown as CommandResult;
}

// ---------------------------------------------------------------------------------------------
// Binding and Grant (document 1 part 2).

const BINDING_FIELDS = ['pair_id', 'revision', 'configuration_sha256', 'machine_sha256'] as const;

export function checkBinding(value: unknown, prefix = 'reply_binding'): Binding {
  const obj = readObject(value, `${prefix}_not_object`, 'Binding');
  refuseUnknown(obj, BINDING_FIELDS, `${prefix}_unknown_field`, 'Binding');
  const binding: Binding = {
    pair_id: readString(obj.pair_id, `${prefix}_pair_id`, 'pair_id', { nonempty: true }),
    revision: readUint64(obj.revision, `${prefix}_revision`, 'revision', { nonzero: true }),
    configuration_sha256: readString(obj.configuration_sha256, `${prefix}_configuration_sha256`, 'configuration_sha256', { nonempty: true }),
  };
  if (Object.hasOwn(obj, 'machine_sha256')) {
    binding.machine_sha256 = readString(obj.machine_sha256, `${prefix}_machine_sha256`, 'machine_sha256');
  }
  return binding;
}

const GRANT_FIELDS = ['stopping', 'deadline_host_ns', 'session', 'generation', 'controller', 'binding', 'lease_ms'] as const;
const SESSION_TOKEN = /^[0-9a-f]{64}$/;
const CONTROLLER_MAX_BYTES = 63;
const INT64_MAX = (1n << 63n) - 1n;

/**
 * Grant shape. The zero-omission rule is stated for the Response envelope; inside data an omitted
 * scalar is read as its zero value and a present zero is accepted (profile). binding is required.
 */
export function checkGrant(value: unknown): Grant {
  const obj = readObject(value, 'reply_grant_not_object', 'Grant');
  refuseUnknown(obj, GRANT_FIELDS, 'reply_grant_unknown_field', 'Grant');
  const has = (k: string) => Object.hasOwn(obj, k);

  let stopping = false;
  if (has('stopping')) {
    if (typeof obj.stopping !== 'boolean') fail('reply_grant_stopping', 'stopping must be a boolean', { field: 'stopping' });
    stopping = obj.stopping;
  }
  const deadline_host_ns = has('deadline_host_ns') ? readUint64(obj.deadline_host_ns, 'reply_grant_deadline_host_ns', 'deadline_host_ns') : 0n;
  const session = has('session') ? readString(obj.session, 'reply_grant_session', 'session') : '';
  if (session !== '' && !SESSION_TOKEN.test(session)) fail('reply_grant_session', 'session is neither empty nor 64 lowercase hex characters', { field: 'session' });
  const generation = has('generation') ? readUint64(obj.generation, 'reply_grant_generation', 'generation') : 0n;
  const controller = has('controller') ? readString(obj.controller, 'reply_grant_controller', 'controller') : '';
  if (Buffer.byteLength(controller, 'utf8') > CONTROLLER_MAX_BYTES) fail('reply_grant_controller', 'controller is longer than 63 bytes', { field: 'controller' });
  if (!has('binding')) fail('reply_grant_binding_not_object', 'Grant lacks binding', { field: 'binding' });
  const binding = checkBinding(obj.binding, 'reply_grant_binding');

  let lease_ms = 0;
  if (has('lease_ms')) {
    const v = obj.lease_ms;
    if (typeof v !== 'bigint' || v < 0n || v > INT64_MAX) fail('reply_grant_lease_ms', 'lease_ms must be a non-negative JSON integer', { field: 'lease_ms' });
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) fail('reply_grant_lease_ms', `lease_ms ${v} is not a plausible whole-ms lease`, { field: 'lease_ms' });
    lease_ms = Number(v);
  }
  return { stopping, deadline_host_ns, session, generation, controller, binding, lease_ms };
}
