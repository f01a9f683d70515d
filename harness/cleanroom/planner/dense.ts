// Dense joint trajectory file (document 2 part 2): encoder, content digest and a checking decoder.
import { createHash } from "node:crypto";

export const DENSE_SCHEMA = "robot.v4.dense-joint-trajectory.v1";
export const ENCODING = "f64-be-aos.v1";
export const RECORD_BYTES = 153;
export const AXIS_COUNT = 9;
export const MAX_SAMPLES = 250000;
export const TIME_EPS = 1e-9;
export const REST_EPS = 1e-6;
export const JOIN_EPS = 1e-3;
export const Q_STEP_FACTOR = 1.25;

export type SegmentKind = "freespace" | "weld" | "dwell";
export interface Sample { t: number; q: number[]; qd: number[]; flags: number } // q, qd: 9 entries
export interface SegmentIn { kind: SegmentKind; source_id: string; samples: Sample[] }
export interface Identity {
  plan_id: string; program_id: string; program_digest: string;
  manifest_revision: Revision; plan_revision: Revision; created_at: string;
}

/**
 * A revision (document 2: `manifest_revision`, `plan_revision` are u64 JSON integers). Changed after integration:
 * past 2^53 a revision is carried as U64_MARK + its decimal digits and written as a bare JSON integer by
 * u64Json, so every u64 the query admits reaches the header and the result exactly.
 */
export type Revision = number | string;
export const U64_MARK = "\u0000u64:";
export const u64Json = (json: string): string => json.replace(/"\\u0000u64:(\d+)"/g, "$1");
export interface EncodeInput {
  identity: Identity; axis_mask: number; dt_s: number; max_abs_qd_rad_s: number[];
  segments: SegmentIn[]; robot_cell?: Record<string, string>; process_markers?: unknown[];
  extra_axes?: Record<string, unknown>;
}
export interface HeaderSegment {
  index: number; kind: string; source_id: string; sample_count: number; duration_s: number;
  block: { byte_offset: number; byte_length: number; sha256: string };
}

export class DenseFormatError extends Error {
  constructor(public reason: string, message: string, public segment_index: number | null = null) { super(`${reason}: ${message}`); }
}

const sha = (b: Uint8Array): string => createHash("sha256").update(b).digest("hex");
const u64 = (n: number | bigint): Buffer => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; };
const f64 = (x: number): Buffer => { const b = Buffer.alloc(8); b.writeDoubleBE(x); return b; };
const str = (s: string): Buffer => { const u = Buffer.from(s, "utf8"); return Buffer.concat([u64(u.length), u]); };

export function encodeBlock(samples: Sample[]): Buffer {
  const b = Buffer.alloc(samples.length * RECORD_BYTES);
  samples.forEach((s, i) => {
    let o = i * RECORD_BYTES;
    b.writeDoubleBE(s.t, o); o += 8;
    for (let k = 0; k < AXIS_COUNT; k++) { b.writeDoubleBE(s.q[k], o); o += 8; }
    for (let k = 0; k < AXIS_COUNT; k++) { b.writeDoubleBE(s.qd[k], o); o += 8; }
    b.writeUInt8(s.flags, o);
  });
  return b;
}

/** Content digest over the digest-relevant fields (identity strings and robot_cell excluded). */
export function contentDigest(axisMask: number, dt: number, segs: { kind: string; source_id: string; sample_count: number; bytes: Uint8Array }[], ceilings: number[]): string {
  const h = createHash("sha256");
  h.update(Buffer.concat([Buffer.from(DENSE_SCHEMA, "ascii"), Buffer.from([0])]));
  h.update(u64(AXIS_COUNT)); h.update(u64(axisMask)); h.update(f64(dt)); h.update(u64(segs.length));
  for (const s of segs) { h.update(str(s.kind)); h.update(str(s.source_id)); h.update(u64(s.sample_count)); h.update(s.bytes); }
  h.update(u64(AXIS_COUNT));
  for (const c of ceilings) h.update(f64(c));
  return "sha256:" + h.digest("hex");
}

export function encodeDense(inp: EncodeInput): { blob: Buffer; header: Record<string, unknown>; digest: string } {
  const blocks = inp.segments.map((s) => encodeBlock(s.samples));
  let offset = 0;
  const segments: HeaderSegment[] = inp.segments.map((s, i) => {
    const seg: HeaderSegment = {
      index: i, kind: s.kind, source_id: s.source_id, sample_count: s.samples.length,
      duration_s: s.samples[s.samples.length - 1].t,
      block: { byte_offset: offset, byte_length: blocks[i].length, sha256: "sha256:" + sha(blocks[i]) },
    };
    offset += blocks[i].length;
    return seg;
  });
  const digest = contentDigest(inp.axis_mask, inp.dt_s,
    inp.segments.map((s, i) => ({ kind: s.kind, source_id: s.source_id, sample_count: s.samples.length, bytes: blocks[i] })), inp.max_abs_qd_rad_s);
  const header: Record<string, unknown> = {
    schema: DENSE_SCHEMA,
    ...inp.identity,
    trajectory_digest: digest,
    axes: { axis_count: AXIS_COUNT, axis_mask: inp.axis_mask, position_unit: "rad", velocity_unit: "rad_s", ...(inp.extra_axes ?? {}) },
    sampling: {
      dt_s: inp.dt_s,
      total_sample_count: segments.reduce((a, s) => a + s.sample_count, 0),
      total_duration_s: segments.reduce((a, s) => a + s.duration_s, 0),
    },
    limits: { max_abs_qd_rad_s: inp.max_abs_qd_rad_s },
    segments,
    sample_encoding: { encoding: ENCODING, record_bytes: RECORD_BYTES },
  };
  if (inp.robot_cell) header.robot_cell = inp.robot_cell;
  if (inp.process_markers && inp.process_markers.length) header.process_markers = inp.process_markers;
  const hj = Buffer.from(u64Json(JSON.stringify(header)), "utf8");
  const len = Buffer.alloc(4); len.writeUInt32BE(hj.length);
  return { blob: Buffer.concat([len, hj, ...blocks]), header, digest };
}

// ---------- decoder ----------
export interface Decoded { header: any; segments: { kind: string; source_id: string; samples: Sample[] }[] }

const isObj = (v: unknown): v is Record<string, any> => typeof v === "object" && v !== null && !Array.isArray(v);
const isUint = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

/**
 * Decodes and checks a dense file. Order: header and layout rules in table order, then block digests,
 * totals, sample content per segment, and the content digest last. Throws DenseFormatError.
 */
export function decodeDense(blob: Uint8Array): Decoded {
  const buf = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
  const fail = (r: string, m: string, seg: number | null = null): never => { throw new DenseFormatError(r, m, seg); };
  if (buf.length < 4) fail("header_truncated", "blob shorter than 4 bytes");
  const hl = buf.readUInt32BE(0);
  if (4 + hl > buf.length) fail("header_truncated", `header_len ${hl} runs past the end`);
  let h: any;
  try { h = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(buf.subarray(4, 4 + hl))); } catch (e) { fail("header_json_invalid", String(e)); }
  if (!isObj(h)) fail("header_json_invalid", "header is not an object");
  if (h.schema !== DENSE_SCHEMA) fail("schema_mismatch", `schema ${JSON.stringify(h.schema)}`);
  for (const k of ["plan_id", "program_id", "program_digest", "trajectory_digest", "created_at"]) if (typeof h[k] !== "string") fail("header_json_invalid", `${k} must be a string`);
  // u64 integers: past 2^53 JSON.parse gives the nearest double, still a nonnegative integer.
  for (const k of ["manifest_revision", "plan_revision"]) if (!(typeof h[k] === "number" && Number.isInteger(h[k]) && h[k] >= 0)) fail("header_json_invalid", `${k} must be a JSON integer`);
  if (!isObj(h.axes) || !isObj(h.sampling) || !isObj(h.limits) || !isObj(h.sample_encoding)) fail("header_json_invalid", "axes, sampling, limits and sample_encoding are objects");
  if (h.axes.axis_count !== AXIS_COUNT) fail("axis_count_mismatch", `axis_count ${h.axes.axis_count}`);
  if (!isUint(h.axes.axis_mask) || h.axes.axis_mask > 0x1ff) fail("header_json_invalid", "axis_mask must be an integer below 512");
  if (h.sample_encoding.encoding !== ENCODING || h.sample_encoding.record_bytes !== RECORD_BYTES) fail("sample_encoding_mismatch", "expected f64-be-aos.v1 with 153-byte records");
  const lim = h.limits.max_abs_qd_rad_s;
  if (!Array.isArray(lim) || lim.length !== AXIS_COUNT || !lim.every((v: unknown) => typeof v === "number" && Number.isFinite(v) && v > 0)) fail("limits_invalid", "max_abs_qd_rad_s must be nine finite positive numbers");
  const dt = h.sampling.dt_s;
  if (typeof dt !== "number" || !Number.isFinite(dt)) fail("header_json_invalid", "sampling.dt_s must be a number");
  if (dt <= 0) fail("time_grid_invalid", "dt_s <= 0");
  if (!isUint(h.sampling.total_sample_count) || typeof h.sampling.total_duration_s !== "number") fail("header_json_invalid", "sampling totals");
  if (!Array.isArray(h.segments)) fail("header_json_invalid", "segments must be an array");
  if (h.segments.length === 0) fail("segments_empty", "no segments");
  const segs: HeaderSegment[] = h.segments;
  segs.forEach((s, i) => {
    if (!isObj(s) || !isObj(s.block) || typeof s.kind !== "string" || typeof s.source_id !== "string" || !isUint(s.sample_count)
      || typeof s.duration_s !== "number" || !isUint(s.block.byte_offset) || !isUint(s.block.byte_length) || typeof s.block.sha256 !== "string") fail("header_json_invalid", `segment ${i} fields`, i);
  });
  segs.forEach((s, i) => { if (s.index !== i) fail("segment_index_out_of_order", `segment at ${i} has index ${s.index}`, i); });
  segs.forEach((s, i) => { if (!["freespace", "weld", "dwell"].includes(s.kind)) fail("kind_invalid", `kind ${s.kind}`, i); });
  segs.forEach((s, i) => { if (s.sample_count < 2) fail("segment_too_short", `${s.sample_count} samples`, i); });
  let off = 0;
  segs.forEach((s, i) => {
    if (s.block.byte_offset !== off || s.block.byte_length !== s.sample_count * RECORD_BYTES) fail("block_layout_invalid", `segment ${i} block`, i);
    off += s.block.byte_length;
  });
  const body = buf.subarray(4 + hl);
  if (off !== body.length) fail("blob_length_mismatch", `blocks cover ${off} of ${body.length} body bytes`);
  segs.forEach((s, i) => {
    const bytes = body.subarray(s.block.byte_offset, s.block.byte_offset + s.block.byte_length);
    if (!DIGEST_RE.test(s.block.sha256) || s.block.sha256 !== "sha256:" + sha(bytes)) fail("block_sha256_mismatch", `segment ${i}`, i);
  });
  const total = segs.reduce((a, s) => a + s.sample_count, 0);
  if (total !== h.sampling.total_sample_count) fail("total_sample_count_mismatch", `header ${h.sampling.total_sample_count}, segments ${total}`);
  if (total > MAX_SAMPLES) fail("sample_count_overflow", `${total} samples`);

  const out: Decoded["segments"] = [];
  let prevLast: number[] | null = null;
  segs.forEach((s, si) => {
    const samples: Sample[] = [];
    for (let k = 0; k < s.sample_count; k++) {
      let o = s.block.byte_offset + k * RECORD_BYTES;
      const t = body.readDoubleBE(o); o += 8;
      const q: number[] = [], qd: number[] = [];
      for (let a = 0; a < AXIS_COUNT; a++) { q.push(body.readDoubleBE(o)); o += 8; }
      for (let a = 0; a < AXIS_COUNT; a++) { qd.push(body.readDoubleBE(o)); o += 8; }
      samples.push({ t, q, qd, flags: body.readUInt8(o) });
    }
    for (const x of samples) if (x.flags & 0xfe) fail("reserved_flags_set", `flags ${x.flags}`, si);
    for (const x of samples) if (![x.t, ...x.q, ...x.qd].every(Number.isFinite)) fail("nonfinite_sample", "NaN or infinity", si);
    if (samples[0].t !== 0) fail("time_grid_invalid", `first t_s ${samples[0].t}`, si);
    for (let k = 1; k < samples.length; k++) if (Math.abs(samples[k].t - samples[k - 1].t - dt) > TIME_EPS) fail("time_grid_invalid", `step at sample ${k}`, si);
    for (const x of samples) x.qd.forEach((v, a) => { if (Math.abs(v) > lim[a]) fail("qd_limit_exceeded", `axis J${a + 1} ${v} > ${lim[a]}`, si); });
    if (s.kind !== "weld") for (const x of samples) if (x.flags & 1) fail("torch_outside_weld", `torch bit in ${s.kind} segment`, si);
    for (let k = 1; k < samples.length; k++) for (let a = 0; a < AXIS_COUNT; a++)
      if (Math.abs(samples[k].q[a] - samples[k - 1].q[a]) > Q_STEP_FACTOR * lim[a] * dt) fail("q_step_exceeded", `axis J${a + 1} at sample ${k}`, si);
    for (const x of [samples[0], samples[samples.length - 1]]) if (x.qd.some((v) => Math.abs(v) > REST_EPS)) fail("boundary_qd_nonzero", "segment does not start and end at rest", si);
    if (prevLast) { const p = prevLast; if (samples[0].q.some((v, a) => Math.abs(v - p[a]) > JOIN_EPS)) fail("boundary_q_discontinuity", `segment ${si} start`, si); }
    if (Math.abs(s.duration_s - samples[samples.length - 1].t) > TIME_EPS) fail("duration_mismatch", `duration_s ${s.duration_s}`, si);
    prevLast = samples[samples.length - 1].q;
    out.push({ kind: s.kind, source_id: s.source_id, samples });
  });
  const digest = contentDigest(h.axes.axis_mask, dt, segs.map((s) => ({
    kind: s.kind, source_id: s.source_id, sample_count: s.sample_count,
    bytes: body.subarray(s.block.byte_offset, s.block.byte_offset + s.block.byte_length),
  })), lim);
  if (h.trajectory_digest !== digest) fail("trajectory_digest_mismatch", `header ${h.trajectory_digest}, content ${digest}`);
  return { header: h, segments: out };
}
