// Live-machine admission of a decoded dense file as a program (document 1 part 4 prepare_program,
// part 2 "Program", "Program limit evidence"; document 2 part 7 "Admission by the control service").
// Pure: a decoded Trajectory and the described axes in, a PreparedProgram or a ProgramRefusal out.
// The HTTP route (headers, fence, body limit, upload slot, worker decode) and start_program consume it.
// Decisions the documents leave open are in docs/profile.md "Program admission".

import type { Identity } from './envelope.ts';
import { createHash } from 'node:crypto';
import { COLS } from '../dense/codec.ts';
import type { Trajectory } from '../dense/codec.ts';

/** One described axis, in machine order (document 3 axes[]); values are logical (sign and Home removed). */
export interface ProgramAxis {
  id: string;
  /** True when the axis's position unit is rad (rotary); only those take dense columns. */
  rad: boolean;
  min: number;
  max: number;
  maxVelocity: number;
}

export interface LimitViolation {
  kind: 'position' | 'velocity';
  segment: number;
  sample: number;
  axis: string;
  value: number;
  limit: number;
  unit: 'rad' | 'rad/s';
}

export class ProgramRefusal extends Error {
  constructor(readonly reason: string, readonly text: string, readonly limitViolation?: LimitViolation) {
    super(text);
    this.name = 'ProgramRefusal';
  }
}

/** The program identity (document 1 part 2 Identity). */
export type ProgramIdentity = Identity;

export interface PreparedProgram {
  identity: ProgramIdentity;
  /** Column k drives axes[axisOf[k]] of the machine (k < mapped); columns past the map are idle. */
  axisOf: number[];
  axisMask: number;
  segments: number;
  samples: number;
  /** Executed points after boundary merge: samples - segments + 1 (document 1 part 2 "Program"). */
  /** Executed points: segment index, local clock (ns from its segment's start), program clock (ns from program start), q and qd row-major (point, column), flags. */
  points: { segment: Uint32Array; localNs: Float64Array; tNs: Float64Array; q: Float64Array; qd: Float64Array; flags: Uint8Array };
  requiresProcessIo: boolean;
}

const NORMALISED_TAG = 'robot.v4.normalised-program.v1\0';

export function admitProgram(x: Trajectory, axes: readonly ProgramAxis[], manifestRevision: bigint): PreparedProgram {
  // Identity (document 2 "Admission": plan_id, program_id, program_digest nonempty).
  for (const [name, v] of [['plan_id', x.planId], ['program_id', x.programId], ['program_digest', x.programDigest]] as const) {
    if (v === undefined || v === '') throw new ProgramRefusal('program_identity_missing', `program_identity_missing: ${name}`);
  }
  if (x.manifestRevision !== manifestRevision) throw new ProgramRefusal('manifest_revision_mismatch', `manifest_revision_mismatch: file ${x.manifestRevision}, service ${manifestRevision}`);

  const n = x.t.length;
  // Process I/O before the axes: torch output is refused everywhere.
  let torch = false;
  for (let i = 0; i < n && !torch; i++) torch = (x.flags[i]! & 1) === 1;
  const markers = Array.isArray(x.processMarkers) && x.processMarkers.length > 0;
  // Torch output is refused everywhere (document 2 "Admission"; document 1 prepare_program).
  if (torch) throw new ProgramRefusal('process_io_executor_not_qualified', 'process_io_executor_not_qualified: torch flag set');

  // Axis map: wire columns in order onto the rad axes.
  const axisOf: number[] = [];
  axes.forEach((a, i) => a.rad && axisOf.push(i));
  if (axisOf.length === 0 || axisOf.length > COLS) throw new ProgramRefusal('dense_axis_map_requires_nine_ids', `dense_axis_map_requires_nine_ids: ${axisOf.length} rad axes`);
  const ids = axisOf.map((i) => axes[i]!.id);
  if (ids.some((id, k) => id === '' || ids.indexOf(id) !== k)) throw new ProgramRefusal('invalid_dense_axis_map', 'invalid_dense_axis_map: axis ids empty or repeated');
  for (let c = axisOf.length; c < COLS; c++) {
    const held = x.q[c]!;
    let idle = (x.axisMask & (1 << c)) === 0;
    for (let i = 0; idle && i < n; i++) idle = x.q[i * COLS + c] === held && x.qd[i * COLS + c] === 0;
    if (!idle) throw new ProgramRefusal('unmapped_dense_axis', `unmapped_dense_axis: J${c + 1}`);
  }

  // Samples inside position limits and below described velocity, then every interval's cubic Hermite.
  const h = x.dtS;
  for (const s of x.segments) {
    for (let i = 0; i < s.sampleCount; i++) {
      const r = (s.first + i) * COLS;
      for (let c = 0; c < axisOf.length; c++) {
        const a = axes[axisOf[c]!]!;
        const q = x.q[r + c]!;
        if (q < a.min || q > a.max) limit('native_limit_exceeded', 'position', s.index, i, a, q, q < a.min ? a.min : a.max);
        const v = Math.abs(x.qd[r + c]!);
        if (v > a.maxVelocity) limit('native_limit_exceeded', 'velocity', s.index, i, a, x.qd[r + c]!, a.maxVelocity);
      }
    }
  }
  for (const s of x.segments) {
    for (let i = 0; i + 1 < s.sampleCount; i++) {
      const r = (s.first + i) * COLS;
      for (let c = 0; c < axisOf.length; c++) {
        const a = axes[axisOf[c]!]!;
        const e = hermiteExtremes(x.q[r + c]!, x.qd[r + c]!, x.q[r + COLS + c]!, x.qd[r + COLS + c]!, h);
        if (e.qMin < a.min) limit('native_segment_rate_exceeded', 'position', s.index, i, a, e.qMin, a.min);
        if (e.qMax > a.max) limit('native_segment_rate_exceeded', 'position', s.index, i, a, e.qMax, a.max);
        const ceiling = Math.min(a.maxVelocity, x.maxAbsQd[c]!);
        if (Math.abs(e.vPeak) > ceiling) limit('native_segment_rate_exceeded', 'velocity', s.index, i, a, e.vPeak, ceiling);
      }
    }
  }

  // Boundary merge: a segment's first sample (at rest, within 1e-3 rad) replaces the previous last one.
  const m = n - x.segments.length + 1;
  const points = { segment: new Uint32Array(m), localNs: new Float64Array(m), tNs: new Float64Array(m), q: new Float64Array(m * COLS), qd: new Float64Array(m * COLS), flags: new Uint8Array(m) };
  let p = 0;
  let clockNs = 0;
  for (const s of x.segments) {
    for (let i = s.index === 0 ? 0 : 1; i < s.sampleCount; i++) {
      const row = s.first + i;
      points.segment[p] = s.index;
      points.localNs[p] = Math.round(x.t[row]! * 1e9);
      points.tNs[p] = clockNs + points.localNs[p]!;
      points.q.set(x.q.subarray(row * COLS, row * COLS + COLS), p * COLS);
      points.qd.set(x.qd.subarray(row * COLS, row * COLS + COLS), p * COLS);
      points.flags[p] = x.flags[row]!;
      p++;
    }
    clockNs += Math.round(x.t[s.first + s.sampleCount - 1]! * 1e9);
  }

  return {
    identity: {
      plan_id: x.planId!, program_id: x.programId!, program_digest: x.programDigest!, trajectory_digest: x.digest,
      source_digest: x.digest, normalised_digest: normalisedDigest(points, m), manifest_revision: x.manifestRevision, plan_revision: x.planRevision,
    },
    axisOf, axisMask: x.axisMask, segments: x.segments.length, samples: n, points, requiresProcessIo: torch || markers,
  };
}

function limit(reason: string, kind: 'position' | 'velocity', segment: number, sample: number, a: ProgramAxis, value: number, lim: number): never {
  const ev: LimitViolation | undefined = Number.isFinite(value) && Number.isFinite(lim) ? { kind, segment, sample, axis: a.id, value, limit: lim, unit: kind === 'position' ? 'rad' : 'rad/s' } : undefined;
  throw new ProgramRefusal(reason, `${reason}: segment=${segment} sample=${sample} axis=${a.id}`, ev);
}

/**
 * Extremes of the cubic Hermite curve from (q0, v0) to (q1, v1) over h seconds: q(s) = a s^3 + b s^2 +
 * c s + q0, s in [0, 1]; position extremes at the ends or where q'(s) = 0, peak velocity at the ends or
 * where q''(s) = 0. vPeak keeps its sign.
 */
export function hermiteExtremes(q0: number, v0: number, q1: number, v1: number, h: number): { qMin: number; qMax: number; vPeak: number } {
  const c = h * v0;
  const b = 3 * (q1 - q0) - 2 * h * v0 - h * v1;
  const a = 2 * (q0 - q1) + h * v0 + h * v1;
  const at = (s: number) => ((a * s + b) * s + c) * s + q0;
  const vel = (s: number) => ((3 * a * s + 2 * b) * s + c) / h;
  let qMin = Math.min(q0, q1);
  let qMax = Math.max(q0, q1);
  const roots: number[] = [];
  if (a === 0) {
    if (b !== 0) roots.push(-c / (2 * b));
  } else {
    const disc = 4 * b * b - 12 * a * c;
    if (disc >= 0) {
      const sq = Math.sqrt(disc);
      roots.push((-2 * b - sq) / (6 * a), (-2 * b + sq) / (6 * a));
    }
  }
  for (const s of roots) {
    if (s > 0 && s < 1) {
      qMin = Math.min(qMin, at(s));
      qMax = Math.max(qMax, at(s));
    }
  }
  let vPeak = Math.abs(v0) >= Math.abs(v1) ? v0 : v1;
  if (a !== 0) {
    const s = -b / (3 * a);
    if (s > 0 && s < 1 && Math.abs(vel(s)) > Math.abs(vPeak)) vPeak = vel(s);
  }
  return { qMin, qMax, vPeak };
}

/** docs/profile.md "Program admission": SHA-256 over the executed points with local clocks and process bits. */
function normalisedDigest(pts: PreparedProgram['points'], m: number): string {
  const hsh = createHash('sha256');
  hsh.update(Buffer.from(NORMALISED_TAG, 'latin1'));
  // Per point: u64 segment, u64 local clock ns, 9 f64 q, 9 f64 qd, u8 flags (169 bytes), all big-endian.
  const rec = Buffer.alloc(8 + 8 + 8 * COLS * 2 + 1);
  rec.writeBigUInt64BE(BigInt(m), 0);
  hsh.update(rec.subarray(0, 8));
  for (let p = 0; p < m; p++) {
    rec.writeBigUInt64BE(BigInt(pts.segment[p]!), 0);
    rec.writeBigUInt64BE(BigInt(pts.localNs[p]!), 8);
    for (let j = 0; j < COLS; j++) {
      rec.writeDoubleBE(pts.q[p * COLS + j]!, 16 + 8 * j);
      rec.writeDoubleBE(pts.qd[p * COLS + j]!, 16 + 72 + 8 * j);
    }
    rec.writeUInt8(pts.flags[p]!, 16 + 144);
    hsh.update(rec);
  }
  return 'sha256:' + hsh.digest('hex');
}
