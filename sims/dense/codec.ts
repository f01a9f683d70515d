// Reference codec of the dense joint trajectory file `robot.v4.dense-joint-trajectory.v1`
// (document 2 part 2 "Dense trajectory file", part 7 "File-format reasons"). Used by the planner stub
// (writer) and the control service (admission). Written for the reference system: it must not import
// harness/ (DESIGN.md rule 1); the harness has its own codec in harness/oracle/dense.ts.
//
// Decoding works on the bytes in place and writes samples straight into file-wide typed arrays; the
// sample rules run as one fused pass that only answers "is anything broken"; when something is, the
// rules are re-run one at a time in the documented order (docs/profile.md "Dense file", "Check order")
// so the reported reason is the earliest broken rule of that list.

import { createHash } from 'node:crypto';
import { decodeJson, JsonNumber, JsonObject, encodeJson } from '../json.ts';
import type { JsonValue } from '../json.ts';

export const SCHEMA = 'robot.v4.dense-joint-trajectory.v1';
export const ENCODING = 'f64-be-aos.v1';
export const RECORD = 153;
export const COLS = 9;
export const MAX_SAMPLES = 250000;
const T_TOL = 1e-9;
const REST = 1e-6;
const JOIN = 1e-3;
const STEP = 1.25;
const KINDS = ['freespace', 'weld', 'dwell'];

/** A refusal named by its document 2 part 7 reason. */
export class DenseFormatError extends Error {
  constructor(
    readonly reason: string,
    message: string,
    readonly where: { segment?: number; sample?: number; axis?: number } = {},
  ) {
    super(`${reason}: ${message}`);
    this.name = 'DenseFormatError';
  }
}

function refuse(reason: string, message: string, where?: DenseFormatError['where']): never {
  throw new DenseFormatError(reason, message, where);
}

export interface Segment {
  index: number;
  kind: string;
  sourceId: string;
  sampleCount: number;
  durationS: number;
  /** Index of this segment's first sample in the file-wide arrays. */
  first: number;
  byteOffset: number;
  byteLength: number;
  sha256: string;
}

export interface Trajectory {
  planId?: string;
  programId?: string;
  programDigest?: string;
  manifestRevision: bigint;
  planRevision: bigint;
  createdAt: string;
  axisMask: number;
  dtS: number;
  totalDurationS: number;
  maxAbsQd: Float64Array;
  segments: Segment[];
  /** File-wide columns: t[n], q[n*9], qd[n*9] row-major (sample, axis), flags[n]. */
  t: Float64Array;
  q: Float64Array;
  qd: Float64Array;
  flags: Uint8Array;
  /** The verified content digest. */
  digest: string;
  robotCell?: JsonValue;
  processMarkers?: JsonValue;
  headerBytes: number;
}

/**
 * One header process marker as read from the file (docs/profile.md "Program admission", process markers):
 * `{segment, sample, action, value}`; an entry that does not have that shape keeps why.
 */
export type MarkerShape = { segment: number; sample: number; action: string; value: boolean } | { invalid: string };

const U32 = /^(0|[1-9][0-9]{0,9})$/;

/** Reads header process_markers into plain shapes (undefined when the key is absent). */
export function readMarkers(v: JsonValue | undefined): MarkerShape[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) return [{ invalid: 'process_markers is not an array' }];
  return v.map((e, i): MarkerShape => {
    if (!(e instanceof JsonObject)) return { invalid: `process_markers[${i}] is not an object` };
    const int = (k: string) => {
      const x = e.get(k);
      return x instanceof JsonNumber && U32.test(x.text) && Number(x.text) <= 0xffffffff ? Number(x.text) : undefined;
    };
    const segment = int('segment');
    const sample = int('sample');
    const action = e.get('action');
    const value = e.get('value');
    if (segment === undefined) return { invalid: `process_markers[${i}].segment is missing or not a u32 JSON integer` };
    if (sample === undefined) return { invalid: `process_markers[${i}].sample is missing or not a u32 JSON integer` };
    if (typeof action !== 'string') return { invalid: `process_markers[${i}].action is missing or not a string` };
    if (typeof value !== 'boolean') return { invalid: `process_markers[${i}].value is missing or not a boolean` };
    return { segment, sample, action, value };
  });
}

export interface DecodeOptions {
  /** digest_first (default, the control service) or content_first (the daemon); document 2 part 7. */
  order?: 'digest_first' | 'content_first';
  schemaReason?: 'dense_schema_mismatch' | 'schema_mismatch';
  /** Admission's header ceiling (document 2 part 7 "Admission": 1048576); none by default. */
  maxHeaderBytes?: number;
}

// ---- header field readers -------------------------------------------------------------------

const DIGEST_TEXT = /^sha256:[0-9a-f]{64}$/;
const TIMESTAMP = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;
const UINT = /^(0|[1-9]\d*)$/;

const bad = (field: string, what: string): never => refuse('header_json_invalid', `${field} ${what}`);
const objectAt = (v: JsonValue | undefined, field: string): JsonObject => (v instanceof JsonObject ? v : bad(field, 'is missing or not an object'));
const textAt = (v: JsonValue | undefined, field: string): string => (typeof v === 'string' ? v : bad(field, 'is missing or not a string'));
function uintAt(v: JsonValue | undefined, field: string): bigint {
  if (v instanceof JsonNumber && UINT.test(v.text)) {
    const n = BigInt(v.text);
    if (n < 1n << 64n) return n;
  }
  return bad(field, 'is missing or not a u64 JSON integer');
}
function numberAt(v: JsonValue | undefined, field: string): number {
  return v instanceof JsonNumber ? v.toFloat() : bad(field, 'is missing or not a number');
}
function optText(o: JsonObject, key: string): string | undefined {
  return o.has(key) ? textAt(o.get(key), key) : undefined;
}
const isUintLiteral = (v: JsonValue | undefined, value: bigint) => v instanceof JsonNumber && UINT.test(v.text) && BigInt(v.text) === value;

function hex(bytes: Uint8Array | Buffer): string {
  return 'sha256:' + createHash('sha256').update(bytes).digest('hex');
}

// ---- content digest (document 2 part 2 "Content digest") --------------------------------------

export function contentDigest(axisMask: number, dtS: number, segments: readonly { kind: string; sourceId: string; sampleCount: number; block: Uint8Array }[], maxAbsQd: ArrayLike<number>): string {
  const h = createHash('sha256');
  const word = Buffer.alloc(8);
  const u64 = (n: number | bigint) => {
    word.writeBigUInt64BE(BigInt(n));
    h.update(word);
  };
  const f64 = (x: number) => {
    word.writeDoubleBE(x);
    h.update(word);
  };
  const text = (s: string) => {
    const b = Buffer.from(s, 'utf8');
    u64(b.length);
    h.update(b);
  };
  h.update(Buffer.from(SCHEMA + '\0', 'latin1'));
  u64(COLS);
  u64(axisMask);
  f64(dtS);
  u64(segments.length);
  for (const s of segments) {
    text(s.kind);
    text(s.sourceId);
    u64(s.sampleCount);
    h.update(s.block);
  }
  u64(maxAbsQd.length);
  for (let j = 0; j < maxAbsQd.length; j++) f64(maxAbsQd[j]!);
  return 'sha256:' + h.digest('hex');
}

// ---- decoder --------------------------------------------------------------------------------

interface RawSegment {
  index: bigint;
  kind: string;
  sourceId: string;
  count: bigint;
  durationS: number;
  offset: bigint;
  length: bigint;
  sha256: string;
}

export function decode(input: Uint8Array, opts: DecodeOptions = {}): Trajectory {
  const bytes = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const order = opts.order ?? 'digest_first';

  // Phase A: header and layout (docs/profile.md "Check order").
  if (bytes.length < 4) refuse('header_truncated', `${bytes.length} bytes cannot hold header_len`);
  const headerLen = bytes.readUInt32BE(0);
  if (headerLen > bytes.length - 4) refuse('header_truncated', `header_len ${headerLen} runs past the end of ${bytes.length} bytes`);
  if (opts.maxHeaderBytes !== undefined && headerLen > opts.maxHeaderBytes) refuse('header_json_invalid', `header of ${headerLen} bytes exceeds ${opts.maxHeaderBytes}`);
  let root: JsonValue;
  try {
    root = decodeJson(bytes.subarray(4, 4 + headerLen));
  } catch (e) {
    return refuse('header_json_invalid', `header is not valid JSON (${(e as Error).message})`);
  }
  const h = objectAt(root, 'header');
  if (h.get('schema') !== SCHEMA) refuse(opts.schemaReason ?? 'dense_schema_mismatch', `schema is not ${SCHEMA}`);
  const planId = optText(h, 'plan_id');
  const programId = optText(h, 'program_id');
  const programDigest = optText(h, 'program_digest');
  const declared = textAt(h.get('trajectory_digest'), 'trajectory_digest');
  const manifestRevision = uintAt(h.get('manifest_revision'), 'manifest_revision');
  const planRevision = uintAt(h.get('plan_revision'), 'plan_revision');
  const createdAt = textAt(h.get('created_at'), 'created_at');
  if (!TIMESTAMP.test(createdAt)) bad('created_at', 'is not an RFC 3339 timestamp');

  const axes = h.get('axes');
  if (!(axes instanceof JsonObject) || !isUintLiteral(axes.get('axis_count'), 9n)) refuse('axis_count_mismatch', 'axes.axis_count is not 9');
  const mask = uintAt(axes.get('axis_mask'), 'axes.axis_mask');
  if (mask > 0x1ffn) bad('axes.axis_mask', 'sets bits beyond the nine columns');
  if (axes.get('position_unit') !== 'rad') bad('axes.position_unit', 'is not rad');
  if (axes.get('velocity_unit') !== 'rad_s') bad('axes.velocity_unit', 'is not rad_s');

  const enc = h.get('sample_encoding');
  if (!(enc instanceof JsonObject) || enc.get('encoding') !== ENCODING || !isUintLiteral(enc.get('record_bytes'), BigInt(RECORD))) {
    refuse('sample_encoding_mismatch', `sample_encoding is not ${ENCODING} with ${RECORD}-byte records`);
  }
  const limits = h.get('limits');
  const ceiling = limits instanceof JsonObject ? limits.get('max_abs_qd_rad_s') : undefined;
  if (!Array.isArray(ceiling) || ceiling.length !== COLS) refuse('limits_invalid', 'max_abs_qd_rad_s is not nine numbers');
  const maxAbsQd = new Float64Array(COLS);
  ceiling.forEach((v, j) => {
    const x = v instanceof JsonNumber ? v.toFloat() : NaN;
    if (!(Number.isFinite(x) && x > 0)) refuse('limits_invalid', `max_abs_qd_rad_s[${j}] is not a finite positive number`, { axis: j });
    maxAbsQd[j] = x;
  });
  const sampling = objectAt(h.get('sampling'), 'sampling');
  const dtS = numberAt(sampling.get('dt_s'), 'sampling.dt_s');
  const total = uintAt(sampling.get('total_sample_count'), 'sampling.total_sample_count');
  const totalDurationS = numberAt(sampling.get('total_duration_s'), 'sampling.total_duration_s');
  if (!(dtS > 0)) refuse('time_grid_invalid', `dt_s ${dtS} is not positive`);

  const listed = h.get('segments');
  const list: JsonValue[] = Array.isArray(listed) ? listed : bad('segments', 'is missing or not an array');
  const raw: RawSegment[] = list.map((v, k) => {
    const s = objectAt(v, `segments[${k}]`);
    const b = objectAt(s.get('block'), `segments[${k}].block`);
    return {
      index: uintAt(s.get('index'), `segments[${k}].index`),
      kind: textAt(s.get('kind'), `segments[${k}].kind`),
      sourceId: textAt(s.get('source_id'), `segments[${k}].source_id`),
      count: uintAt(s.get('sample_count'), `segments[${k}].sample_count`),
      durationS: numberAt(s.get('duration_s'), `segments[${k}].duration_s`),
      offset: uintAt(b.get('byte_offset'), `segments[${k}].block.byte_offset`),
      length: uintAt(b.get('byte_length'), `segments[${k}].block.byte_length`),
      sha256: textAt(b.get('sha256'), `segments[${k}].block.sha256`),
    };
  });
  if (raw.length === 0) refuse('segments_empty', 'the header lists no segments');
  for (let k = 0; k < raw.length; k++) if (raw[k]!.index !== BigInt(k)) refuse('segment_index_out_of_order', `segment ${k} has index ${raw[k]!.index}`, { segment: k });
  for (let k = 0; k < raw.length; k++) if (!KINDS.includes(raw[k]!.kind)) refuse('kind_invalid', `segment ${k} kind ${JSON.stringify(raw[k]!.kind)}`, { segment: k });
  for (let k = 0; k < raw.length; k++) if (raw[k]!.count < 2n) refuse('segment_too_short', `segment ${k} has ${raw[k]!.count} samples`, { segment: k });
  let covered = 0n;
  for (let k = 0; k < raw.length; k++) {
    const s = raw[k]!;
    if (s.offset !== covered || s.length !== s.count * BigInt(RECORD)) refuse('block_layout_invalid', `segment ${k} block at ${s.offset}+${s.length}, expected ${covered}+${s.count * BigInt(RECORD)}`, { segment: k });
    covered += s.length;
  }
  const body = 4 + headerLen;
  if (covered !== BigInt(bytes.length - body)) refuse('blob_length_mismatch', `blocks cover ${covered} bytes, the body has ${bytes.length - body}`);
  let sum = 0n;
  for (const s of raw) sum += s.count;
  if (total !== sum) refuse('total_sample_count_mismatch', `total_sample_count ${total}, segments hold ${sum}`);
  if (sum > BigInt(MAX_SAMPLES)) refuse('sample_count_overflow', `${sum} samples exceed ${MAX_SAMPLES}`);

  // Every size is bounded by the body now; numbers are exact.
  const segments: Segment[] = [];
  let first = 0;
  for (let k = 0; k < raw.length; k++) {
    const s = raw[k]!;
    segments.push({ index: k, kind: s.kind, sourceId: s.sourceId, sampleCount: Number(s.count), durationS: s.durationS, first, byteOffset: Number(s.offset), byteLength: Number(s.length), sha256: s.sha256 });
    first += Number(s.count);
  }
  const blockOf = (s: Segment) => bytes.subarray(body + s.byteOffset, body + s.byteOffset + s.byteLength);
  for (const s of segments) if (hex(blockOf(s)) !== s.sha256) refuse('block_sha256_mismatch', `segment ${s.index} block differs from ${s.sha256}`, { segment: s.index });

  const axisMask = Number(mask);
  const digest = contentDigest(axisMask, dtS, segments.map((s) => ({ kind: s.kind, sourceId: s.sourceId, sampleCount: s.sampleCount, block: blockOf(s) })), maxAbsQd);
  const digestRule = () => {
    if (declared !== digest || !DIGEST_TEXT.test(declared)) refuse('trajectory_digest_mismatch', `header says ${declared}, content is ${digest}`);
  };
  if (order === 'digest_first') digestRule();

  // Phase C: samples into columns, then the sample rules.
  const n = first;
  const t = new Float64Array(n);
  const q = new Float64Array(n * COLS);
  const qd = new Float64Array(n * COLS);
  const flags = new Uint8Array(n);
  readSamples(bytes, body, n, t, q, qd, flags);
  const traj: Trajectory = {
    planId, programId, programDigest, manifestRevision, planRevision, createdAt, axisMask, dtS, totalDurationS, maxAbsQd, segments, t, q, qd, flags, digest,
    robotCell: h.get('robot_cell'), processMarkers: h.get('process_markers'), headerBytes: headerLen,
  };
  if (!samplesLookValid(traj)) for (const rule of SAMPLE_RULES) rule(traj);
  let durations = 0;
  for (const s of segments) durations += s.durationS;
  if (!(Math.abs(totalDurationS - durations) <= T_TOL * segments.length)) refuse('duration_mismatch', `total_duration_s ${totalDurationS}, segments sum to ${durations}`);
  if (order === 'content_first') digestRule();
  return traj;
}

/** Blocks are contiguous and in order, so the body is one run of n records. */
function readSamples(b: Buffer, at: number, n: number, t: Float64Array, q: Float64Array, qd: Float64Array, flags: Uint8Array): void {
  const dv = new DataView(b.buffer, b.byteOffset + at, n * RECORD);
  let p = 0;
  let r = 0;
  for (let i = 0; i < n; i++) {
    t[i] = dv.getFloat64(p);
    for (let j = 0; j < COLS; j++) {
      q[r + j] = dv.getFloat64(p + 8 + 8 * j);
      qd[r + j] = dv.getFloat64(p + 80 + 8 * j);
    }
    flags[i] = dv.getUint8(p + 152);
    p += RECORD;
    r += COLS;
  }
}

/** One fused pass over every sample rule; true when none is broken. */
function samplesLookValid(x: Trajectory): boolean {
  const { t, q, qd, flags, maxAbsQd: lim, dtS, segments } = x;
  for (let k = 0; k < segments.length; k++) {
    const s = segments[k]!;
    const weld = s.kind === 'weld';
    const a = s.first;
    const end = a + s.sampleCount;
    if (t[a] !== 0) return false;
    if (!(Math.abs(s.durationS - t[end - 1]!) <= T_TOL)) return false;
    if (k > 0) {
      const prevLast = (a - 1) * COLS;
      for (let j = 0; j < COLS; j++) if (!(Math.abs(q[a * COLS + j]! - q[prevLast + j]!) <= JOIN)) return false;
    }
    for (let i = a; i < end; i++) {
      const f = flags[i]!;
      if (f > 1 || (f === 1 && !weld)) return false;
      const ti = t[i]!;
      if (!Number.isFinite(ti)) return false;
      if (i > a && !(Math.abs(ti - t[i - 1]! - dtS) <= T_TOL)) return false;
      const r = i * COLS;
      const edge = i === a || i === end - 1;
      for (let j = 0; j < COLS; j++) {
        const v = qd[r + j]!;
        const av = Math.abs(v);
        // NaN fails every comparison below, so it lands on the slow path too.
        if (!(av <= lim[j]!)) return false;
        if (edge && !(av <= REST)) return false;
        const p = q[r + j]!;
        if (!Number.isFinite(p)) return false;
        if (i > a && !(Math.abs(p - q[r - COLS + j]!) <= STEP * lim[j]! * dtS)) return false;
      }
    }
  }
  return true;
}

type Rule = (x: Trajectory) => void;
const each = (x: Trajectory, visit: (s: Segment, i: number, row: number) => void) => {
  for (const s of x.segments) for (let i = 0; i < s.sampleCount; i++) visit(s, i, s.first + i);
};

// Phase C rules in the documented order (docs/profile.md "Check order"); each scans the whole file.
const SAMPLE_RULES: readonly Rule[] = [
  (x) => each(x, (s, i, row) => {
    if (x.flags[row]! > 1) refuse('reserved_flags_set', `segment ${s.index} sample ${i} flags ${x.flags[row]}`, { segment: s.index, sample: i });
  }),
  (x) => each(x, (s, i, row) => {
    if (!Number.isFinite(x.t[row]!)) refuse('nonfinite_sample', `segment ${s.index} sample ${i} t_s`, { segment: s.index, sample: i });
    for (let j = 0; j < COLS; j++) {
      if (!Number.isFinite(x.q[row * COLS + j]!) || !Number.isFinite(x.qd[row * COLS + j]!)) refuse('nonfinite_sample', `segment ${s.index} sample ${i} axis ${j}`, { segment: s.index, sample: i, axis: j });
    }
  }),
  (x) => each(x, (s, i, row) => {
    if (i === 0 && x.t[row] !== 0) refuse('time_grid_invalid', `segment ${s.index} starts at t_s ${x.t[row]}`, { segment: s.index, sample: 0 });
    if (i > 0 && !(Math.abs(x.t[row]! - x.t[row - 1]! - x.dtS) <= T_TOL)) refuse('time_grid_invalid', `segment ${s.index} sample ${i} is off the dt_s grid`, { segment: s.index, sample: i });
  }),
  (x) => each(x, (s, i, row) => {
    for (let j = 0; j < COLS; j++) if (Math.abs(x.qd[row * COLS + j]!) > x.maxAbsQd[j]!) refuse('qd_limit_exceeded', `segment ${s.index} sample ${i} axis ${j}`, { segment: s.index, sample: i, axis: j });
  }),
  (x) => each(x, (s, i, row) => {
    if (s.kind !== 'weld' && (x.flags[row]! & 1) === 1) refuse('torch_outside_weld', `torch on in ${s.kind} segment ${s.index} sample ${i}`, { segment: s.index, sample: i });
  }),
  (x) => each(x, (s, i, row) => {
    if (i === 0) return;
    for (let j = 0; j < COLS; j++) {
      if (Math.abs(x.q[row * COLS + j]! - x.q[(row - 1) * COLS + j]!) > STEP * x.maxAbsQd[j]! * x.dtS) refuse('q_step_exceeded', `segment ${s.index} sample ${i} axis ${j}`, { segment: s.index, sample: i, axis: j });
    }
  }),
  (x) => each(x, (s, i, row) => {
    if (i !== 0 && i !== s.sampleCount - 1) return;
    for (let j = 0; j < COLS; j++) if (Math.abs(x.qd[row * COLS + j]!) > REST) refuse('boundary_qd_nonzero', `segment ${s.index} sample ${i} axis ${j} is not at rest`, { segment: s.index, sample: i, axis: j });
  }),
  (x) => {
    for (let k = 1; k < x.segments.length; k++) {
      const a = x.segments[k]!.first;
      for (let j = 0; j < COLS; j++) {
        if (Math.abs(x.q[a * COLS + j]! - x.q[(a - 1) * COLS + j]!) > JOIN) refuse('boundary_q_discontinuity', `segment ${k} starts away from segment ${k - 1}'s end on axis ${j}`, { segment: k, sample: 0, axis: j });
      }
    }
  },
  (x) => {
    for (const s of x.segments) {
      if (!(Math.abs(s.durationS - x.t[s.first + s.sampleCount - 1]!) <= T_TOL)) refuse('duration_mismatch', `segment ${s.index} duration_s ${s.durationS}`, { segment: s.index });
    }
  },
];

// ---- encoder --------------------------------------------------------------------------------

export interface SegmentContent {
  kind: string;
  sourceId: string;
  /** Row-major columns of this segment: t[n], q[n*9], qd[n*9], flags[n]. */
  t: ArrayLike<number>;
  q: ArrayLike<number>;
  qd: ArrayLike<number>;
  flags: ArrayLike<number>;
  /** Default: the last t_s. */
  durationS?: number;
}

export interface TrajectoryContent {
  planId?: string;
  programId?: string;
  programDigest?: string;
  manifestRevision: bigint;
  planRevision: bigint;
  createdAt: string;
  axisMask: number;
  dtS: number;
  maxAbsQd: ArrayLike<number>;
  segments: readonly SegmentContent[];
  robotCell?: unknown;
  processMarkers?: unknown;
}

/**
 * Writes a file from its logical content. The header is written compactly with keys in the order of
 * document 2 part 2's field table; floats as JavaScript's shortest round-trip text, integers exact.
 * It does not check sample rules: the planner's own checks come before writing.
 */
export function encode(c: TrajectoryContent): Buffer {
  const blocks = c.segments.map(encodeBlock);
  const durations = c.segments.map((s) => s.durationS ?? (s.t.length > 0 ? s.t[s.t.length - 1]! : 0));
  const digest = contentDigest(c.axisMask, c.dtS, c.segments.map((s, k) => ({ kind: s.kind, sourceId: s.sourceId, sampleCount: s.t.length, block: blocks[k]! })), c.maxAbsQd);
  let offset = 0;
  let count = 0;
  let duration = 0;
  const segments = c.segments.map((s, k) => {
    const entry = {
      index: BigInt(k), kind: s.kind, source_id: s.sourceId, sample_count: BigInt(s.t.length), duration_s: durations[k],
      block: { byte_offset: BigInt(offset), byte_length: BigInt(blocks[k]!.length), sha256: hex(blocks[k]!) },
    };
    offset += blocks[k]!.length;
    count += s.t.length;
    duration += durations[k]!;
    return entry;
  });
  const header = {
    schema: SCHEMA,
    plan_id: c.planId,
    program_id: c.programId,
    program_digest: c.programDigest,
    trajectory_digest: digest,
    manifest_revision: c.manifestRevision,
    plan_revision: c.planRevision,
    created_at: c.createdAt,
    axes: { axis_count: BigInt(COLS), axis_mask: BigInt(c.axisMask), position_unit: 'rad', velocity_unit: 'rad_s' },
    sampling: { dt_s: c.dtS, total_sample_count: BigInt(count), total_duration_s: duration },
    limits: { max_abs_qd_rad_s: Array.from(c.maxAbsQd) },
    segments,
    sample_encoding: { encoding: ENCODING, record_bytes: BigInt(RECORD) },
    robot_cell: c.robotCell,
    process_markers: c.processMarkers,
  };
  const text = Buffer.from(encodeJson(header), 'utf8');
  const out = Buffer.allocUnsafe(4 + text.length + offset);
  out.writeUInt32BE(text.length, 0);
  text.copy(out, 4);
  let at = 4 + text.length;
  for (const b of blocks) {
    b.copy(out, at);
    at += b.length;
  }
  return out;
}

function encodeBlock(s: SegmentContent): Buffer {
  const n = s.t.length;
  const b = Buffer.alloc(n * RECORD);
  for (let i = 0; i < n; i++) {
    const p = i * RECORD;
    b.writeDoubleBE(s.t[i]!, p);
    for (let j = 0; j < COLS; j++) {
      b.writeDoubleBE(s.q[i * COLS + j]!, p + 8 + 8 * j);
      b.writeDoubleBE(s.qd[i * COLS + j]!, p + 80 + 8 * j);
    }
    b.writeUInt8(s.flags[i]!, p + 152);
  }
  return b;
}

/** A decoded segment's columns as views into the file-wide arrays. */
export function segmentColumns(x: Trajectory, s: Segment): { t: Float64Array; q: Float64Array; qd: Float64Array; flags: Uint8Array } {
  const a = s.first;
  const e = a + s.sampleCount;
  return { t: x.t.subarray(a, e), q: x.q.subarray(a * COLS, e * COLS), qd: x.qd.subarray(a * COLS, e * COLS), flags: x.flags.subarray(a, e) };
}
