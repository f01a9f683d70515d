// What the upload decoder gives and refuses (document 1 part 2 "Request" and "Point", part 8 limits): the
// point arrays it fills, the decoded body, and its refusal codes. Apart from the decoder (decoder.ts) so
// the worker, the prefix scan and the service read these without the state machine.

import { createHash } from 'node:crypto';
import { Refusal, type Request } from '../envelope.ts';
import type { PlanArrays, PlanWorkspace } from '../../core/protocol.ts';
import type { PlanLease } from '../../core/plan-arena.ts';

/** Most points a trajectory may carry (document 1 part 8); the decoder refuses more, to bound memory. */
export const MAX_POINTS = 250_000;
/** Largest prepare_trajectory body (document 1 part 8). */
export const TRAJECTORY_BODY_LIMIT = 222_516_384;

/** The plan's arrays (sims/core/protocol.ts PlanArrays) with their counts, as the decoder fills them. */
export interface PointArrays extends PlanArrays {
  count: number;
  axes: number;
  /** bit0 io_mask present, bit1 io_values present. */
  ioFlags: Uint8Array;
  /** Memory the core builds the plan in, faulted in off the core thread (upload/worker.ts; core protocol.ts PlanWorkspace). */
  workspace?: PlanWorkspace;
  /** SHA-256 of the arrays (pointsArraysDigest), taken by the upload worker so the main loop need not. */
  digest?: string;
  /**
   * The plan arena slot the arrays and workspace are views of (sims/core/plan-arena.ts), held by the
   * service until the prepare carrying it is posted; absent when the arrays are the points' own.
   */
  lease?: PlanLease;
}

/**
 * SHA-256 over a point list's arrays: the request_id cache key of an uploaded prepare_trajectory (document 1
 * part 3 "request_id": the same id with another payload is a conflict). A maximum upload's arrays are 40 MB,
 * about 80 ms of hashing: the upload worker takes it (worker.ts), not the service's main loop.
 */
export function pointsArraysDigest(p: PointArrays): string {
  const h = createHash('sha256');
  for (const a of [p.timeNs, p.position, p.velocity, p.hasVelocity, p.ioMask, p.ioValues, p.ioFlags]) h.update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  return h.digest('hex');
}

export type Envelope = Omit<Request, 'points'>;

export interface TrajectoryBody {
  request: Envelope;
  points: PointArrays;
}

/**
 * Stable codes of the decoder's refusals, for the service to map. The label each carries is written in
 * docs/profile.md "Envelope check order".
 */
export type UploadCode =
  | 'json' // a JSON error (label invalid_request_envelope, duplicate_request_field or trailing_request_data)
  | 'envelope' // schema_mismatch, unknown_operation, capability_unimplemented, invalid_request_id, invalid_request_envelope
  | 'axis_count' // a position or velocity array whose length is not the machine's axis count
  | 'point_count' // more than 250000 points
  | 'not_trajectory' // a valid request for another operation
  | 'fence_outside_prefix' // schema, operation, session or generation not within the first 16384 bytes
  | 'envelope_changed' // the full decode differs from the admitted prefix
  | 'too_large'; // more than 222516384 bytes

export class UploadRefusal extends Refusal {
  constructor(
    readonly code: UploadCode,
    status: 409 | 413,
    label: string,
    detail?: string,
    data?: unknown,
  ) {
    super(status, label, detail, data);
  }
  static from(code: UploadCode, r: Refusal): UploadRefusal {
    const u = new UploadRefusal(code, r.status as 409 | 413, r.label, r.detail, r.data);
    u.operation = r.operation;
    return u;
  }
}

/** Where a root member's value ends, in the order the members were read. */
export interface MemberInfo {
  key: string;
  /** Offset just past the member's value. */
  end: number;
}

/** Smallest bytes a point can take with `axes` positions: {"time_ns":0,"position":[0,...]} plus a comma. */
export function minPointBytes(axes: number): number {
  return '{"time_ns":0,"position":[]},'.length + Math.max(1, 2 * axes - 1);
}

/** Equality of decoded member values (bigint, string, boolean, null, arrays and objects of them). */
export function sameValue(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return Object.is(a, b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}
