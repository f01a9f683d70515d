// Request envelope decoding (document 1 part 2 "Request" and part 4 "Envelope rules").
// Pure and table driven: bytes in, a typed Request or a refusal (status, leading label, detail) out.
// The order of checks is a profile decision (docs/profile.md "Envelope check order").

import { CAPABILITY, capabilityInfo } from './capabilities.ts';
import {
  decodeJson,
  JsonDecodeError,
  JsonNumber,
  JsonObject,
  toInteger,
  toUint64,
  type JsonValue,
  canonicalJson,
  type CanonicalInput,
} from '../json.ts';

export const REQUEST_SCHEMA = 'svc.rt-control.request.v1';
export const RESPONSE_SCHEMA = 'svc.rt-control.response.v1';

export interface Binding {
  pair_id: string;
  revision: bigint;
  configuration_sha256: string;
  machine_sha256?: string;
}

export interface Identity {
  plan_id: string;
  program_id: string;
  program_digest: string;
  trajectory_digest: string;
  source_digest: string;
  normalised_digest: string;
  manifest_revision: bigint;
  plan_revision: bigint;
}

export interface Point {
  time_ns: bigint;
  position: number[];
  velocity?: number[];
  io_mask?: number;
  io_values?: number;
}

export interface Request {
  request_id?: string;
  schema: string;
  operation: string;
  session?: string;
  generation?: bigint;
  label?: string;
  controller?: string;
  binding?: Binding;
  axis_mask?: number;
  velocity?: number[];
  timeout_ms?: number;
  handle?: bigint;
  points?: Point[];
  identity?: Identity;
  jog_generation?: bigint;
  source_sequence?: bigint;
  source_origin_host_ns?: bigint;
  deadline_host_ns?: bigint;
  clock_incarnation?: string;
  requested_lease_ms?: bigint;
}

/** A refusal: HTTP status, the leading catalogue label, an optional detail and optional data. */
export class Refusal {
  constructor(
    readonly status: 409 | 413 | 404,
    readonly label: string,
    readonly detail?: string,
    readonly data?: unknown,
    /** Envelope fields a refusal may also carry: the native receipt and its sequence. */
    readonly extra?: { native_result?: unknown; native_jog_result?: unknown; sequence?: bigint },
  ) {}
  /** The operation the refused request named, when the body decoded far enough to tell. */
  operation?: string;
  get error(): string {
    return this.detail ? `${this.label}: ${this.detail}` : this.label;
  }
}

export const refuse = (label: string, detail?: string, data?: unknown) => new Refusal(409, label, detail, data);

// ---- field schema ----

export type Kind = 'string' | 'uint64' | 'uint32' | 'int' | 'float64[]' | 'binding' | 'identity' | 'points';

export const REQUEST_FIELDS: Record<string, Kind> = {
  request_id: 'string',
  schema: 'string',
  operation: 'string',
  session: 'string',
  generation: 'uint64',
  label: 'string',
  controller: 'string',
  binding: 'binding',
  axis_mask: 'uint32',
  velocity: 'float64[]',
  timeout_ms: 'uint32',
  handle: 'uint64',
  points: 'points',
  identity: 'identity',
  jog_generation: 'uint64',
  source_sequence: 'uint64',
  source_origin_host_ns: 'uint64',
  deadline_host_ns: 'uint64',
  clock_incarnation: 'string',
  requested_lease_ms: 'int',
};

export const BINDING_FIELDS: Record<string, [Kind, boolean]> = {
  pair_id: ['string', true],
  revision: ['uint64', true],
  configuration_sha256: ['string', true],
  machine_sha256: ['string', false],
};

/** Identity (document 1 part 2): every field required. */
const IDENTITY_FIELDS: Record<string, [Kind, boolean]> = {
  plan_id: ['string', true],
  program_id: ['string', true],
  program_digest: ['string', true],
  trajectory_digest: ['string', true],
  source_digest: ['string', true],
  normalised_digest: ['string', true],
  manifest_revision: ['uint64', true],
  plan_revision: ['uint64', true],
};

const POINT_FIELDS: Record<string, [Kind | 'int64', boolean]> = {
  time_ns: ['int64', true],
  position: ['float64[]', true],
  velocity: ['float64[]', false],
  io_mask: ['uint32', false],
  io_values: ['uint32', false],
};

/** Fields each operation requires beyond schema and operation (document 1 part 4 "Operations"). */
export const REQUIRED: Record<string, readonly string[]> = {
  acquire: ['controller', 'binding'],
  renew: [],
  release: [],
  stop: [],
  enable: ['axis_mask'],
  arm: [],
  home: ['axis_mask'],
  halt: [],
  reset_fault: [],
  recovery_status: [],
  restore_anchor: ['axis_mask'],
  io_arm: [],
  io_disarm: [],
  mark_telemetry: ['label'],
  begin_jog: ['axis_mask', 'source_origin_host_ns', 'deadline_host_ns', 'clock_incarnation'],
  end_jog: ['jog_generation'],
  jog: ['axis_mask', 'velocity', 'timeout_ms'],
  prepare_trajectory: ['axis_mask', 'points'],
  start_trajectory: ['handle'],
  discard_trajectory: ['handle'],
  start_program: ['identity'],
};

const bad = (detail: string) => refuse('invalid_request_envelope', detail);

/**
 * One envelope field's JSON value as its Kind says (exact integers, finite floats, nested tables), or
 * invalid_request_envelope naming the path: the one converter of the request decoder and the streaming
 * upload decoder (upload/decoder.ts).
 */
export function convertField(kind: Kind | 'int64', v: JsonValue, path: string): unknown {
  switch (kind) {
    case 'string':
      if (typeof v !== 'string') throw bad(`field ${path} must be a string`);
      return v;
    case 'uint64': {
      const n = v instanceof JsonNumber ? toUint64(v) : undefined;
      if (n === undefined) throw bad(`field ${path} must be an unsigned 64-bit integer`);
      return n;
    }
    case 'uint32': {
      const n = v instanceof JsonNumber ? toUint64(v) : undefined;
      if (n === undefined || n > 0xffffffffn) throw bad(`field ${path} must be an unsigned 32-bit integer`);
      return Number(n);
    }
    case 'int': {
      const n = v instanceof JsonNumber ? toInteger(v, -(1n << 63n), (1n << 63n) - 1n) : undefined;
      if (n === undefined) throw bad(`field ${path} must be an integer`);
      return n;
    }
    case 'int64': {
      const n = v instanceof JsonNumber ? toInteger(v, -(1n << 63n), (1n << 63n) - 1n) : undefined;
      if (n === undefined) throw bad(`field ${path} must be a signed 64-bit integer`);
      return n;
    }
    case 'float64[]': {
      if (!Array.isArray(v)) throw bad(`field ${path} must be an array of numbers`);
      return v.map((x, i) => {
        const f = x instanceof JsonNumber ? x.toFloat() : NaN;
        if (!Number.isFinite(f)) throw bad(`field ${path}[${i}] must be a finite number`);
        return f;
      });
    }
    case 'binding':
      return convertObject(v, path, BINDING_FIELDS);
    case 'identity':
      return convertObject(v, path, IDENTITY_FIELDS);
    case 'points': {
      if (!Array.isArray(v)) throw bad(`field ${path} must be an array of points`);
      return v.map((p, i) => convertObject(p, `${path}[${i}]`, POINT_FIELDS));
    }
  }
}

function convertObject(v: JsonValue, path: string, fields: Record<string, [Kind | 'int64', boolean]>): Record<string, unknown> {
  if (!(v instanceof JsonObject)) throw bad(`field ${path} must be an object`);
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [k, val] of v.fields) {
    const spec = Object.hasOwn(fields, k) ? fields[k] : undefined;
    if (!spec) throw bad(`unknown field ${path}.${JSON.stringify(k).slice(0, 80)}`);
    out[k] = convertField(spec[0], val, `${path}.${k}`);
  }
  for (const [k, [, required]] of Object.entries(fields)) {
    if (required && !(k in out)) throw bad(`missing field ${path}.${k}`);
  }
  return out;
}

/** request_id: non-null, 1..64 printable ASCII bytes (0x20..0x7e). */
export function validRequestId(v: unknown): v is string {
  return typeof v === 'string' && v.length >= 1 && v.length <= 64 && /^[\x20-\x7e]+$/.test(v);
}

/**
 * Decode and validate a POST /v1/control body that already passed the size limit.
 * Throws a Refusal; returns the typed request otherwise.
 */
export function decodeRequest(body: Uint8Array): Request {
  let root: JsonValue;
  try {
    root = decodeJson(body);
  } catch (e) {
    if (e instanceof JsonDecodeError) {
      if (e.code === 'json_duplicate_key') throw refuse('duplicate_request_field', `field "${e.key}" repeated at byte ${e.offset}`);
      if (e.code === 'json_trailing_data') throw refuse('trailing_request_data', `data after the request object at byte ${e.offset}`);
      throw bad(e.message);
    }
    throw e;
  }
  if (!(root instanceof JsonObject)) throw bad('body must be a JSON object');
  const named = root.get('operation');
  try {
    return decodeObject(root);
  } catch (e) {
    if (e instanceof Refusal && typeof named === 'string') e.operation = named;
    throw e;
  }
}

function decodeObject(root: JsonObject): Request {
  const schema = root.get('schema');
  if (schema !== REQUEST_SCHEMA) {
    throw refuse('schema_mismatch', schema === undefined ? 'schema missing' : `schema must be ${REQUEST_SCHEMA}`);
  }
  const operation = root.get('operation');
  const cap = typeof operation === 'string' ? CAPABILITY.get(operation) : undefined;
  if (!cap || !cap.control) {
    throw refuse(
      'unknown_operation',
      typeof operation === 'string' ? `operation ${JSON.stringify(operation).slice(0, 80)} is not dispatched by /v1/control` : 'operation missing',
    );
  }
  if (cap.state === 'unimplemented') {
    throw refuse('capability_unimplemented', `${cap.name} is reserved`, capabilityInfo(cap));
  }

  const req: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [k, v] of root.fields) {
    // Own keys only: "__proto__", "constructor" and friends are unknown fields like any other.
    const kind = Object.hasOwn(REQUEST_FIELDS, k) ? REQUEST_FIELDS[k] : undefined;
    if (!kind) throw bad(`unknown field ${JSON.stringify(k).slice(0, 80)}`);
    if (k === 'request_id') {
      if (!validRequestId(v)) throw refuse('invalid_request_id', 'request_id must be 1..64 printable ASCII bytes');
      req[k] = v;
      continue;
    }
    req[k] = convertField(kind, v, k);
  }
  const required = [...(cap.fenced ? ['session', 'generation'] : []), ...(REQUIRED[cap.name] ?? [])];
  for (const f of required) {
    if (!(f in req)) throw bad(`missing field ${f} for operation ${cap.name}`);
  }
  // The fence is "absent on acquire" (document 1 part 2 "Request"): acquire checks the binding instead.
  if (cap.name === 'acquire' && ('session' in req || 'generation' in req)) throw bad('session and generation are absent on acquire');
  return req as unknown as Request;
}

/**
 * Canonical text of a decoded request without its request_id, to compare retried payloads: canonical
 * JSON (sims/json.ts), so numbers compare by value and -0 equals 0 (docs/profile.md "Grant authority").
 */
export function payloadKey(req: Request): string {
  const { request_id: _ignored, ...rest } = req;
  return canonicalJson(rest as unknown as CanonicalInput);
}
