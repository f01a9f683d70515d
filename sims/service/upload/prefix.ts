// Admission of a prepare_trajectory body from its prefix (document 1 part 4 "prepare_trajectory": schema,
// operation, session and a nonzero generation must appear within the first 16384 bytes, before points, so
// the service admits the fence and reserves the upload slot before reading the rest; part 4 "Envelope
// rules": request_envelope_changed when the fully decoded request differs from the admitted prefix).
//
// The prefix is read by the same TrajectoryDecoder that decodes the whole body later (stopping at the
// root key "points"), so both read every member the same way. The check order is docs/profile.md
// "Envelope check order" (prepare_trajectory uploads).

import { REQUEST_SCHEMA } from '../envelope.ts';
import { TrajectoryDecoder, UploadRefusal, sameValue, type Envelope } from './decoder.ts';
import { REQUEST_PREFIX_BYTES } from '../../primitives.ts';

export interface AdmittedPrefix {
  /** The envelope members that end within the first 16384 bytes, before points, as decodeRequest types them. */
  envelope: Envelope;
  /** Offset of the root key "points" when it lies within the bytes scanned, else -1. */
  pointsAt: number;
}

export type PrefixScan =
  | { kind: 'trajectory'; prefix: AdmittedPrefix }
  | { kind: 'refused'; refusal: UploadRefusal }
  /** The prefix does not name prepare_trajectory (or breaks before it does): not an upload. */
  | { kind: 'other' };

/** The fence fields that must lie in the prefix (part 4 "prepare_trajectory"). */
export const PREFIX_FIELDS = ['schema', 'operation', 'session', 'generation'] as const;

/**
 * Read the root object's members in order from the first 16384 bytes of `bytes` (one more byte is looked
 * at when a number member ends exactly at byte 16384, to see that it ends), up to the key "points".
 * A member counts when its value ends within the first 16384 bytes.
 */
export function scanPrefix(bytes: Uint8Array): PrefixScan {
  const d = new TrajectoryDecoder({ axes: 1, stopAtPoints: true });
  d.push(bytes.subarray(0, REQUEST_PREFIX_BYTES));
  if (d.pendingScalar && bytes.length > REQUEST_PREFIX_BYTES) d.push(bytes.subarray(REQUEST_PREFIX_BYTES, REQUEST_PREFIX_BYTES + 1));

  const inPrefix = new Set(d.memberInfo.filter((m) => m.end <= REQUEST_PREFIX_BYTES).map((m) => m.key));
  const env = d.envelope();
  const raw = d.rawEnvelope();
  // 1. Only a prefix that names the operation can be an upload.
  if (!inPrefix.has('operation') || raw.operation !== 'prepare_trajectory') return { kind: 'other' };
  const withOp = (r: UploadRefusal) => {
    r.operation = 'prepare_trajectory';
    return { kind: 'refused' as const, refusal: r };
  };
  // 2. A JSON error within the prefix (the first error of the whole body, whatever follows).
  const failed = d.failed;
  if (failed && d.failedAt < REQUEST_PREFIX_BYTES) return withOp(failed);
  // 3. schema.
  if (inPrefix.has('schema') && raw.schema !== REQUEST_SCHEMA) {
    return withOp(new UploadRefusal('envelope', 409, 'schema_mismatch', `schema must be ${REQUEST_SCHEMA}`));
  }
  // 4. The first field problem among the prefix's members (unknown field, wrong type, bad request_id).
  const problem = d.fieldProblem;
  if (problem) return withOp(problem);
  // 5. The fence fields within the prefix, before points.
  const missing = PREFIX_FIELDS.filter((f) => !inPrefix.has(f));
  if (missing.length > 0) {
    return withOp(
      new UploadRefusal(
        'fence_outside_prefix',
        409,
        'invalid_request_envelope',
        `${missing.join(', ')} must appear within the first ${REQUEST_PREFIX_BYTES} bytes, before points`,
      ),
    );
  }
  const envelope: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const k of inPrefix) if (k in env) envelope[k] = env[k];
  return { kind: 'trajectory', prefix: { envelope: envelope as unknown as Envelope, pointsAt: d.pointsKeyAt } };
}

/** request_envelope_changed unless every member of the admitted prefix has the same value in the full decode. */
export function checkSameEnvelope(prefix: AdmittedPrefix, full: Envelope): void {
  const f = full as unknown as Record<string, unknown>;
  for (const [k, v] of Object.entries(prefix.envelope as unknown as Record<string, unknown>)) {
    if (!sameValue(v, f[k])) {
      const r = new UploadRefusal('envelope_changed', 409, 'request_envelope_changed', `field ${k} differs from the admitted prefix`);
      r.operation = 'prepare_trajectory';
      throw r;
    }
  }
}
