// Dense joint trajectory file (.rdt) codec: document 2 part 2 "Dense trajectory file" and part 7
// "File-format reasons". Every refusal's OracleError code is the document's reason name.
//
// Checking order (document 2 part 7 lets decoders differ when several rules are broken; the control
// service checks the digest first, the daemon content rules first). Both orders share phase A:
//   A  header_truncated, header_json_invalid, schema, axis_count_mismatch, sample_encoding_mismatch,
//      limits_invalid, time_grid_invalid (dt_s), segments_empty, segment_index_out_of_order,
//      kind_invalid, segment_too_short, block_layout_invalid, blob_length_mismatch,
//      total_sample_count_mismatch, sample_count_overflow, block_sha256_mismatch
//      (block digests are "checked before samples are parsed").
//   digest_first:  A, trajectory_digest_mismatch, C
//   content_first: A, C, trajectory_digest_mismatch
//   C  reserved_flags_set, nonfinite_sample, time_grid_invalid (samples), qd_limit_exceeded,
//      torch_outside_weld, q_step_exceeded, boundary_qd_nonzero, boundary_q_discontinuity,
//      duration_mismatch
// Within a phase each rule is applied to the whole file before the next rule (rule-major), so the
// reported reason is the earliest broken rule of this list.

import { createHash } from 'node:crypto';
import { fail } from './errors.ts';
import { decodeUtf8Strict, encodeUtf8, isJsonObject, parseExact, stringifyExact } from './json.ts';
import type { JsonExact, JsonObject } from './json.ts';

export const DENSE_SCHEMA = 'robot.v4.dense-joint-trajectory.v1';
export const SAMPLE_ENCODING = 'f64-be-aos.v1';
export const DENSE_AXES = 9;

/**
 * One dense sample record, big-endian (document 2 "Dense sample"): the decoder and encoder read their
 * offsets from this table, and harness/oracle/layout.test.ts holds it equal to the catalogue's rows.
 */
export const SAMPLE_FIELDS = [
  { field: 't_s', offset: 0, size: 8, type: 'f64' },
  { field: 'q_rad', offset: 8, size: 8 * DENSE_AXES, type: `f64[${DENSE_AXES}]` },
  { field: 'qd_rad_s', offset: 80, size: 8 * DENSE_AXES, type: `f64[${DENSE_AXES}]` },
  { field: 'flags', offset: 152, size: 1, type: 'u8' },
] as const;
const [AT_T, AT_Q, AT_QD, AT_FLAGS] = SAMPLE_FIELDS.map((f) => f.offset) as [number, number, number, number];
export const SAMPLE_BYTES = SAMPLE_FIELDS.reduce((n, f) => n + f.size, 0); // 153
export const MAX_DENSE_SAMPLES = 250_000;
export const DENSE_KINDS = ['freespace', 'weld', 'dwell'] as const;
export type DenseKind = (typeof DENSE_KINDS)[number];

/** Tolerances of document 2 part 2 and part 7. */
export const TIME_TOLERANCE_S = 1e-9;
export const REST_QD_RAD_S = 1e-6;
export const BOUNDARY_Q_RAD = 1e-3;
export const Q_STEP_FACTOR = 1.25;

export const DENSE_REASONS = [
  'header_truncated',
  'header_json_invalid',
  'dense_schema_mismatch',
  'schema_mismatch',
  'axis_count_mismatch',
  'sample_encoding_mismatch',
  'limits_invalid',
  'time_grid_invalid',
  'segments_empty',
  'segment_index_out_of_order',
  'kind_invalid',
  'segment_too_short',
  'block_layout_invalid',
  'blob_length_mismatch',
  'block_sha256_mismatch',
  'reserved_flags_set',
  'total_sample_count_mismatch',
  'sample_count_overflow',
  'nonfinite_sample',
  'qd_limit_exceeded',
  'torch_outside_weld',
  'q_step_exceeded',
  'boundary_qd_nonzero',
  'boundary_q_discontinuity',
  'duration_mismatch',
  'trajectory_digest_mismatch',
] as const;
export type DenseReason = (typeof DENSE_REASONS)[number];

export interface DenseDecodeOptions {
  /** Default 'digest_first' (the control service's order). */
  order?: 'digest_first' | 'content_first';
  /** Default 'dense_schema_mismatch' (the control service's spelling). */
  schemaReason?: 'dense_schema_mismatch' | 'schema_mismatch';
}

export interface DenseSegment {
  index: number;
  kind: DenseKind;
  sourceId: string;
  sampleCount: number;
  durationS: number;
  byteOffset: number;
  byteLength: number;
  sha256: string;
  /** Views into the file-wide arrays: t[n], q[n*9] and qd[n*9] row-major (sample, axis), flags[n]. */
  t: Float64Array;
  q: Float64Array;
  qd: Float64Array;
  flags: Uint8Array;
}

export interface DecodedDense {
  /** The parsed header (null-prototype objects, integers as bigint), unknown keys included. */
  header: JsonObject;
  headerLength: number;
  planId: string | undefined;
  programId: string | undefined;
  programDigest: string | undefined;
  manifestRevision: bigint;
  planRevision: bigint;
  createdAt: string;
  axisMask: number;
  dtS: number;
  totalSampleCount: number;
  totalDurationS: number;
  maxAbsQd: number[];
  segments: DenseSegment[];
  /** The content digest recomputed from the file (equal to the header's on success). */
  trajectoryDigest: string;
}

// ---------------------------------------------------------------------------------------------
// Content digest (document 2 part 2 "Content digest").

export interface DigestInput {
  axisMask: number | bigint;
  dtS: number;
  segments: ReadonlyArray<{ kind: string; sourceId: string; sampleCount: number | bigint; block: Uint8Array }>;
  maxAbsQd: ArrayLike<number>;
}

function u64be(v: number | bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(v), false);
  return b;
}

function f64be(v: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setFloat64(0, v, false);
  return b;
}

export function contentDigest(input: DigestInput): string {
  const h = createHash('sha256');
  const str = (s: string) => {
    const bytes = encodeUtf8(s);
    h.update(u64be(bytes.length));
    h.update(bytes);
  };
  h.update(encodeUtf8(DENSE_SCHEMA));
  h.update(new Uint8Array([0]));
  h.update(u64be(DENSE_AXES));
  h.update(u64be(input.axisMask));
  h.update(f64be(input.dtS));
  h.update(u64be(input.segments.length));
  for (const seg of input.segments) {
    str(seg.kind);
    str(seg.sourceId);
    h.update(u64be(seg.sampleCount));
    h.update(seg.block);
  }
  h.update(u64be(input.maxAbsQd.length));
  for (let j = 0; j < input.maxAbsQd.length; j++) h.update(f64be(input.maxAbsQd[j]!));
  return `sha256:${h.digest('hex')}`;
}

export function blockSha256(block: Uint8Array): string {
  return `sha256:${createHash('sha256').update(block).digest('hex')}`;
}

// ---------------------------------------------------------------------------------------------
// Header readers. A field whose reason names its value (schema, axis_count, sample_encoding, limits)
// gets that reason for any deviation, absence and wrong type included; every other missing or
// mistyped field is header_json_invalid; a well-typed value breaking a rule gets the rule's reason.

const U64_MAX = (1n << 64n) - 1n;
const SHA256_LABEL = /^sha256:[0-9a-f]{64}$/;
const RFC3339 = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

function invalid(what: string): never {
  return fail('header_json_invalid', what, { field: what.split(' ')[0] });
}

function obj(v: JsonExact | undefined, field: string): JsonObject {
  if (!isJsonObject(v)) invalid(`${field} is missing or not an object`);
  return v;
}

function str(v: JsonExact | undefined, field: string): string {
  if (typeof v !== 'string') invalid(`${field} is missing or not a string`);
  return v;
}

function optStr(o: JsonObject, key: string): string | undefined {
  return Object.hasOwn(o, key) ? str(o[key], key) : undefined;
}

function u64(v: JsonExact | undefined, field: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > U64_MAX) invalid(`${field} is missing or not a u64 JSON integer`);
  return v;
}

/** A JSON number; an integer literal (bigint in our model) is a number too. */
function num(v: JsonExact | undefined, field: string): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  return invalid(`${field} is missing or not a number`);
}

function isNum(v: JsonExact | undefined): v is number | bigint {
  return typeof v === 'number' || typeof v === 'bigint';
}

interface SegmentHeader {
  index: bigint;
  kind: string;
  sourceId: string;
  sampleCount: bigint;
  durationS: number;
  byteOffset: bigint;
  byteLength: bigint;
  sha256: string;
}

function readSegmentHeader(v: JsonExact | undefined, k: number): SegmentHeader {
  const s = obj(v, `segments[${k}]`);
  const block = obj(s.block, `segments[${k}].block`);
  return {
    index: u64(s.index, `segments[${k}].index`),
    kind: str(s.kind, `segments[${k}].kind`),
    sourceId: str(s.source_id, `segments[${k}].source_id`),
    sampleCount: u64(s.sample_count, `segments[${k}].sample_count`),
    durationS: num(s.duration_s, `segments[${k}].duration_s`),
    byteOffset: u64(block.byte_offset, `segments[${k}].block.byte_offset`),
    byteLength: u64(block.byte_length, `segments[${k}].block.byte_length`),
    sha256: str(block.sha256, `segments[${k}].block.sha256`),
  };
}

// ---------------------------------------------------------------------------------------------
// Decoder.

export function decodeDense(bytes: Uint8Array, opts: DenseDecodeOptions = {}): DecodedDense {
  const order = opts.order ?? 'digest_first';
  const schemaReason = opts.schemaReason ?? 'dense_schema_mismatch';

  // --- phase A: header and layout ---------------------------------------------------------
  if (bytes.length < 4) fail('header_truncated', `blob of ${bytes.length} bytes has no header length`);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = dv.getUint32(0, false);
  if (4 + headerLength > bytes.length) fail('header_truncated', `header_len ${headerLength} runs past the end of ${bytes.length} bytes`);
  let parsed: JsonExact;
  try {
    parsed = parseExact(decodeUtf8Strict(bytes.subarray(4, 4 + headerLength)));
  } catch (cause) {
    return fail('header_json_invalid', `header is not valid JSON: ${(cause as Error).message}`, {}, cause);
  }
  const header = obj(parsed, 'header');

  if (header.schema !== DENSE_SCHEMA) fail(schemaReason, `schema is not ${DENSE_SCHEMA}`);
  const planId = optStr(header, 'plan_id');
  const programId = optStr(header, 'program_id');
  const programDigest = optStr(header, 'program_digest');
  const declaredDigest = str(header.trajectory_digest, 'trajectory_digest');
  const manifestRevision = u64(header.manifest_revision, 'manifest_revision');
  const planRevision = u64(header.plan_revision, 'plan_revision');
  const createdAt = str(header.created_at, 'created_at');
  if (!RFC3339.test(createdAt)) invalid('created_at is not an RFC 3339 timestamp');

  const axes = isJsonObject(header.axes) ? header.axes : undefined;
  if (axes?.axis_count !== BigInt(DENSE_AXES)) fail('axis_count_mismatch', 'axes.axis_count is not 9');
  const axisMaskBig = u64(axes.axis_mask, 'axes.axis_mask');
  if (axisMaskBig > 0x1ffn) invalid('axes.axis_mask has bits beyond the nine columns');
  if (axes.position_unit !== 'rad') invalid('axes.position_unit is not rad');
  if (axes.velocity_unit !== 'rad_s') invalid('axes.velocity_unit is not rad_s');

  const enc = isJsonObject(header.sample_encoding) ? header.sample_encoding : undefined;
  if (enc?.encoding !== SAMPLE_ENCODING || enc.record_bytes !== BigInt(SAMPLE_BYTES)) {
    fail('sample_encoding_mismatch', `sample_encoding is not ${SAMPLE_ENCODING} with ${SAMPLE_BYTES}-byte records`);
  }

  const limitsObj = isJsonObject(header.limits) ? header.limits : undefined;
  const limitsRaw = limitsObj?.max_abs_qd_rad_s;
  if (!Array.isArray(limitsRaw) || limitsRaw.length !== DENSE_AXES || !limitsRaw.every(isNum)) {
    fail('limits_invalid', 'limits.max_abs_qd_rad_s is not nine numbers');
  }
  const maxAbsQd = limitsRaw.map((v) => Number(v));
  maxAbsQd.forEach((v, j) => {
    if (!Number.isFinite(v) || v <= 0) fail('limits_invalid', `limits.max_abs_qd_rad_s[${j}] is not finite positive`, { axis: j });
  });

  const sampling = obj(header.sampling, 'sampling');
  const dtS = num(sampling.dt_s, 'sampling.dt_s');
  const totalSampleCountBig = u64(sampling.total_sample_count, 'sampling.total_sample_count');
  const totalDurationS = num(sampling.total_duration_s, 'sampling.total_duration_s');
  if (!(dtS > 0)) fail('time_grid_invalid', `dt_s ${dtS} is not positive`);

  if (!Array.isArray(header.segments)) invalid('segments is missing or not an array');
  const segs = header.segments.map(readSegmentHeader);
  if (segs.length === 0) fail('segments_empty', 'no segments');
  segs.forEach((s, k) => {
    if (s.index !== BigInt(k)) fail('segment_index_out_of_order', `segment at position ${k} has index ${s.index}`, { segment: k });
  });
  segs.forEach((s, k) => {
    if (!(DENSE_KINDS as readonly string[]).includes(s.kind)) fail('kind_invalid', `segment ${k} kind ${JSON.stringify(s.kind)}`, { segment: k });
  });
  segs.forEach((s, k) => {
    if (s.sampleCount < 2n) fail('segment_too_short', `segment ${k} has ${s.sampleCount} samples`, { segment: k });
  });
  let running = 0n;
  segs.forEach((s, k) => {
    if (s.byteOffset !== running) fail('block_layout_invalid', `segment ${k} block starts at ${s.byteOffset}, expected ${running}`, { segment: k });
    if (s.byteLength !== s.sampleCount * BigInt(SAMPLE_BYTES)) fail('block_layout_invalid', `segment ${k} block length ${s.byteLength} is not sample_count x 153`, { segment: k });
    running += s.byteLength;
  });
  const bodyStart = 4 + headerLength;
  const bodyLength = bytes.length - bodyStart;
  if (running !== BigInt(bodyLength)) fail('blob_length_mismatch', `blocks cover ${running} bytes, body is ${bodyLength}`);
  const sumSamples = segs.reduce((a, s) => a + s.sampleCount, 0n);
  if (totalSampleCountBig !== sumSamples) fail('total_sample_count_mismatch', `total_sample_count ${totalSampleCountBig} differs from the segments' ${sumSamples}`);
  if (sumSamples > BigInt(MAX_DENSE_SAMPLES)) fail('sample_count_overflow', `${sumSamples} samples exceed ${MAX_DENSE_SAMPLES}`);

  // All sizes are now bounded by the body length, so Number conversion is exact.
  const blocks = segs.map((s) => bytes.subarray(bodyStart + Number(s.byteOffset), bodyStart + Number(s.byteOffset + s.byteLength)));
  segs.forEach((s, k) => {
    if (blockSha256(blocks[k]!) !== s.sha256) fail('block_sha256_mismatch', `segment ${k} block bytes differ from ${s.sha256}`, { segment: k });
  });

  const axisMask = Number(axisMaskBig);
  const recomputed = contentDigest({
    axisMask,
    dtS,
    segments: segs.map((s, k) => ({ kind: s.kind, sourceId: s.sourceId, sampleCount: s.sampleCount, block: blocks[k]! })),
    maxAbsQd,
  });
  const checkDigest = () => {
    if (!SHA256_LABEL.test(declaredDigest) || declaredDigest !== recomputed) {
      fail('trajectory_digest_mismatch', `header says ${declaredDigest}, content is ${recomputed}`, { expected: declaredDigest, actual: recomputed });
    }
  };
  if (order === 'digest_first') checkDigest();

  // --- phase C: samples --------------------------------------------------------------------
  const total = Number(sumSamples);
  const T = new Float64Array(total);
  const Q = new Float64Array(total * DENSE_AXES);
  const QD = new Float64Array(total * DENSE_AXES);
  const F = new Uint8Array(total);
  const segments: DenseSegment[] = [];
  let first = 0;
  segs.forEach((s, k) => {
    const n = Number(s.sampleCount);
    const block = blocks[k]!;
    const bv = new DataView(block.buffer, block.byteOffset, block.byteLength);
    for (let i = 0; i < n; i++) {
      const at = i * SAMPLE_BYTES;
      const row = first + i;
      T[row] = bv.getFloat64(at + AT_T, false);
      for (let j = 0; j < DENSE_AXES; j++) {
        Q[row * DENSE_AXES + j] = bv.getFloat64(at + AT_Q + 8 * j, false);
        QD[row * DENSE_AXES + j] = bv.getFloat64(at + AT_QD + 8 * j, false);
      }
      F[row] = bv.getUint8(at + AT_FLAGS);
    }
    segments.push({
      index: k,
      kind: s.kind as DenseKind,
      sourceId: s.sourceId,
      sampleCount: n,
      durationS: s.durationS,
      byteOffset: Number(s.byteOffset),
      byteLength: Number(s.byteLength),
      sha256: s.sha256,
      t: T.subarray(first, first + n),
      q: Q.subarray(first * DENSE_AXES, (first + n) * DENSE_AXES),
      qd: QD.subarray(first * DENSE_AXES, (first + n) * DENSE_AXES),
      flags: F.subarray(first, first + n),
    });
    first += n;
  });

  for (const rule of CONTENT_RULES) rule(segments, dtS, maxAbsQd);
  const durationSum = segs.reduce((a, s) => a + s.durationS, 0);
  if (!(Math.abs(totalDurationS - durationSum) <= TIME_TOLERANCE_S * segs.length)) {
    fail('duration_mismatch', `total_duration_s ${totalDurationS} differs from the sum of segment durations ${durationSum}`);
  }
  if (order === 'content_first') checkDigest();

  return {
    header,
    headerLength,
    planId,
    programId,
    programDigest,
    manifestRevision,
    planRevision,
    createdAt,
    axisMask,
    dtS,
    totalSampleCount: total,
    totalDurationS,
    maxAbsQd,
    segments,
    trajectoryDigest: recomputed,
  };
}

// Sample rules of phase C, in order. Each visits every segment before the next rule runs.
type ContentRule = (segments: readonly DenseSegment[], dtS: number, limit: readonly number[]) => void;

function at(k: number, i: number, j?: number) {
  return j === undefined ? { segment: k, sample: i } : { segment: k, sample: i, axis: j };
}

const CONTENT_RULES: readonly ContentRule[] = [
  function reservedFlags(segments) {
    for (const s of segments) {
      for (let i = 0; i < s.sampleCount; i++) {
        if ((s.flags[i]! & 0xfe) !== 0) fail('reserved_flags_set', `segment ${s.index} sample ${i} flags 0x${s.flags[i]!.toString(16)}`, at(s.index, i));
      }
    }
  },
  function nonfinite(segments) {
    for (const s of segments) {
      for (let i = 0; i < s.sampleCount; i++) {
        if (!Number.isFinite(s.t[i]!)) fail('nonfinite_sample', `segment ${s.index} sample ${i} t_s`, at(s.index, i));
        for (let j = 0; j < DENSE_AXES; j++) {
          const r = i * DENSE_AXES + j;
          if (!Number.isFinite(s.q[r]!) || !Number.isFinite(s.qd[r]!)) fail('nonfinite_sample', `segment ${s.index} sample ${i} axis ${j}`, at(s.index, i, j));
        }
      }
    }
  },
  function timeGrid(segments, dtS) {
    for (const s of segments) {
      if (s.t[0] !== 0) fail('time_grid_invalid', `segment ${s.index} starts at t_s ${s.t[0]}`, at(s.index, 0));
      for (let i = 1; i < s.sampleCount; i++) {
        const step = s.t[i]! - s.t[i - 1]!;
        if (!(Math.abs(step - dtS) <= TIME_TOLERANCE_S)) fail('time_grid_invalid', `segment ${s.index} sample ${i} step ${step} differs from dt_s ${dtS}`, at(s.index, i));
      }
    }
  },
  function qdLimit(segments, _dtS, limit) {
    for (const s of segments) {
      for (let i = 0; i < s.sampleCount; i++) {
        for (let j = 0; j < DENSE_AXES; j++) {
          if (Math.abs(s.qd[i * DENSE_AXES + j]!) > limit[j]!) fail('qd_limit_exceeded', `segment ${s.index} sample ${i} axis ${j}`, at(s.index, i, j));
        }
      }
    }
  },
  function torch(segments) {
    for (const s of segments) {
      if (s.kind === 'weld') continue;
      for (let i = 0; i < s.sampleCount; i++) {
        if ((s.flags[i]! & 1) !== 0) fail('torch_outside_weld', `torch on in ${s.kind} segment ${s.index} sample ${i}`, at(s.index, i));
      }
    }
  },
  function qStep(segments, dtS, limit) {
    for (const s of segments) {
      for (let i = 1; i < s.sampleCount; i++) {
        for (let j = 0; j < DENSE_AXES; j++) {
          const step = Math.abs(s.q[i * DENSE_AXES + j]! - s.q[(i - 1) * DENSE_AXES + j]!);
          if (step > Q_STEP_FACTOR * limit[j]! * dtS) fail('q_step_exceeded', `segment ${s.index} sample ${i} axis ${j} step ${step}`, at(s.index, i, j));
        }
      }
    }
  },
  function boundaryRest(segments) {
    for (const s of segments) {
      for (const i of [0, s.sampleCount - 1]) {
        for (let j = 0; j < DENSE_AXES; j++) {
          if (Math.abs(s.qd[i * DENSE_AXES + j]!) > REST_QD_RAD_S) fail('boundary_qd_nonzero', `segment ${s.index} sample ${i} axis ${j} is not at rest`, at(s.index, i, j));
        }
      }
    }
  },
  function boundaryContinuity(segments) {
    for (let k = 1; k < segments.length; k++) {
      const prev = segments[k - 1]!;
      const cur = segments[k]!;
      const last = (prev.sampleCount - 1) * DENSE_AXES;
      for (let j = 0; j < DENSE_AXES; j++) {
        const gap = Math.abs(cur.q[j]! - prev.q[last + j]!);
        if (gap > BOUNDARY_Q_RAD) fail('boundary_q_discontinuity', `segment ${k} starts ${gap} rad from segment ${k - 1}'s end on axis ${j}`, at(k, 0, j));
      }
    }
  },
  function duration(segments) {
    for (const s of segments) {
      const lastT = s.t[s.sampleCount - 1]!;
      if (!(Math.abs(s.durationS - lastT) <= TIME_TOLERANCE_S)) fail('duration_mismatch', `segment ${s.index} duration_s ${s.durationS} but last t_s ${lastT}`, { segment: s.index });
    }
  },
];

// ---------------------------------------------------------------------------------------------
// Encoder: the oracle's own writer. It does not validate samples, so tests can write files that
// break content rules with consistent block digests and content digest.

export interface DenseSampleInput {
  t: number;
  q: ArrayLike<number>;
  qd: ArrayLike<number>;
  flags?: number;
}

export interface DenseColumns {
  t: Float64Array;
  /** Row-major n x 9. */
  q: Float64Array;
  qd: Float64Array;
  flags?: Uint8Array;
}

export interface DenseSegmentInput {
  kind: string;
  sourceId: string;
  samples: readonly DenseSampleInput[] | DenseColumns;
  /** Default: the last t_s. */
  durationS?: number;
}

export interface DenseSpec {
  planId?: string;
  programId?: string;
  programDigest?: string;
  manifestRevision?: bigint;
  planRevision?: bigint;
  createdAt?: string;
  axisMask?: number;
  dtS?: number;
  maxAbsQd: readonly number[];
  segments: readonly DenseSegmentInput[];
  robotCell?: JsonObject;
  processMarkers?: JsonExact[];
  /** Extra header keys (decoders ignore unknown keys). */
  extraHeader?: Record<string, JsonExact>;
  /** Last word on the header object before it is written: tests use it to break header rules. */
  mutateHeader?: (header: Record<string, JsonExact>) => void;
}

function toColumns(samples: readonly DenseSampleInput[] | DenseColumns): DenseColumns {
  if (!Array.isArray(samples)) return samples as DenseColumns;
  const list = samples as readonly DenseSampleInput[];
  const n = list.length;
  const cols: DenseColumns = { t: new Float64Array(n), q: new Float64Array(n * DENSE_AXES), qd: new Float64Array(n * DENSE_AXES), flags: new Uint8Array(n) };
  list.forEach((s, i) => {
    cols.t[i] = s.t;
    for (let j = 0; j < DENSE_AXES; j++) {
      cols.q[i * DENSE_AXES + j] = s.q[j] ?? 0;
      cols.qd[i * DENSE_AXES + j] = s.qd[j] ?? 0;
    }
    cols.flags![i] = s.flags ?? 0;
  });
  return cols;
}

export function encodeBlock(cols: DenseColumns): Uint8Array {
  const n = cols.t.length;
  const block = new Uint8Array(n * SAMPLE_BYTES);
  const dv = new DataView(block.buffer);
  for (let i = 0; i < n; i++) {
    const at = i * SAMPLE_BYTES;
    dv.setFloat64(at + AT_T, cols.t[i]!, false);
    for (let j = 0; j < DENSE_AXES; j++) {
      dv.setFloat64(at + AT_Q + 8 * j, cols.q[i * DENSE_AXES + j]!, false);
      dv.setFloat64(at + AT_QD + 8 * j, cols.qd[i * DENSE_AXES + j]!, false);
    }
    dv.setUint8(at + AT_FLAGS, cols.flags?.[i] ?? 0);
  }
  return block;
}

/** Writes a file: blocks, their sha256, offsets, totals and the content digest are computed. */
export function encodeDense(spec: DenseSpec): Uint8Array {
  const dtS = spec.dtS ?? 0.01;
  const axisMask = spec.axisMask ?? 0x1ff;
  const cols = spec.segments.map((s) => toColumns(s.samples));
  const blocks = cols.map(encodeBlock);
  const durations = spec.segments.map((s, k) => s.durationS ?? cols[k]!.t[cols[k]!.t.length - 1] ?? 0);
  const digest = contentDigest({
    axisMask,
    dtS,
    segments: spec.segments.map((s, k) => ({ kind: s.kind, sourceId: s.sourceId, sampleCount: cols[k]!.t.length, block: blocks[k]! })),
    maxAbsQd: spec.maxAbsQd,
  });
  let offset = 0;
  const segments = spec.segments.map((s, k) => {
    const seg = {
      index: BigInt(k),
      kind: s.kind,
      source_id: s.sourceId,
      sample_count: BigInt(cols[k]!.t.length),
      duration_s: durations[k]!,
      block: { byte_offset: BigInt(offset), byte_length: BigInt(blocks[k]!.length), sha256: blockSha256(blocks[k]!) },
    };
    offset += blocks[k]!.length;
    return seg;
  });
  const header: Record<string, JsonExact> = {
    schema: DENSE_SCHEMA,
    plan_id: spec.planId ?? 'oracle:000000000000',
    program_id: spec.programId ?? 'oracle',
    program_digest: spec.programDigest ?? `sha256:${'0'.repeat(64)}`,
    trajectory_digest: digest,
    manifest_revision: spec.manifestRevision ?? 1n,
    plan_revision: spec.planRevision ?? 1n,
    created_at: spec.createdAt ?? '2024-01-01T00:00:00Z',
    axes: { axis_count: BigInt(DENSE_AXES), axis_mask: BigInt(axisMask), position_unit: 'rad', velocity_unit: 'rad_s' },
    sampling: { dt_s: dtS, total_sample_count: BigInt(cols.reduce((a, c) => a + c.t.length, 0)), total_duration_s: durations.reduce((a, d) => a + d, 0) },
    limits: { max_abs_qd_rad_s: [...spec.maxAbsQd] },
    sample_encoding: { encoding: SAMPLE_ENCODING, record_bytes: BigInt(SAMPLE_BYTES) },
    segments,
  };
  if (spec.robotCell !== undefined) header.robot_cell = spec.robotCell;
  if (spec.processMarkers !== undefined) header.process_markers = spec.processMarkers;
  Object.assign(header, spec.extraHeader);
  spec.mutateHeader?.(header);
  const headerBytes = encodeUtf8(stringifyExact(header));
  const out = new Uint8Array(4 + headerBytes.length + offset);
  new DataView(out.buffer).setUint32(0, headerBytes.length, false);
  out.set(headerBytes, 4);
  let at = 4 + headerBytes.length;
  for (const b of blocks) {
    out.set(b, at);
    at += b.length;
  }
  return out;
}

/**
 * A segment that starts and ends at rest: q moves from q0 to q1 on a half-cosine profile over n
 * samples at dt_s, so it satisfies the rest, step and velocity rules whenever
 * |q1 - q0| * pi / (2 (n-1) dt_s) is within the axis limit. For fixtures and tests.
 */
export function restToRestSamples(q0: readonly number[], q1: readonly number[], n: number, dtS = 0.01, flags = 0): DenseSampleInput[] {
  const duration = (n - 1) * dtS;
  const out: DenseSampleInput[] = [];
  for (let i = 0; i < n; i++) {
    const t = i * dtS;
    const phase = i === n - 1 ? Math.PI : (Math.PI * i) / (n - 1);
    const q: number[] = [];
    const qd: number[] = [];
    for (let j = 0; j < DENSE_AXES; j++) {
      const d = (q1[j] ?? 0) - (q0[j] ?? 0);
      q.push(i === n - 1 ? (q1[j] ?? 0) : (q0[j] ?? 0) + (d * (1 - Math.cos(phase))) / 2);
      qd.push(i === 0 || i === n - 1 ? 0 : ((d * Math.PI) / (2 * duration)) * Math.sin(phase));
    }
    out.push({ t, q, qd, flags });
  }
  return out;
}
