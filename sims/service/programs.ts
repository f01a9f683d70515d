// Live-machine admission of a decoded dense file as a program (document 1 part 4 prepare_program,
// part 2 "Program", "Program limit evidence"; document 2 part 7 "Admission by the control service").
// Pure: a decoded Trajectory and the described axes in, a PreparedProgram or a ProgramRefusal out.
// The HTTP route (headers, fence, body limit, upload slot, worker decode) and start_program consume it.
// Decisions the documents leave open are in docs/profile.md "Program admission".

import type { Identity } from './envelope.ts';
import { createHash } from 'node:crypto';
import { COLS } from '../dense/codec.ts';
import type { MarkerShape, Trajectory } from '../dense/codec.ts';
import type { PlanArrays, PlanWorkspace } from '../core/protocol.ts';
import type { SlotStorage } from '../core/plan-arena.ts';

/** One described axis, in machine order (document 3 axes[]); values are logical (sign and Home removed). */
export interface ProgramAxis {
  id: string;
  /** True when the axis's position unit is rad (rotary); only those take dense columns. */
  rad: boolean;
  min: number;
  max: number;
  maxVelocity: number;
  /** Present when the axis declares a maximum acceleration (document 3 axis max_acceleration). */
  maxAcceleration?: number;
  /** Drive counts per unit (positive) and command direction: gaps at segment joins are measured in counts. */
  countsPerUnit: number;
  sign: number;
}

/** A configured cell output (document 3 io block, in configured order: bit n is the n-th). */
export interface ProgramOutput {
  name: string;
  torch: boolean;
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

/** Program.process_markers entry (document 1 part 2 ProcessMarker). */
export interface ProcessMarker {
  time_ns: bigint;
  segment: number;
  sample: number;
  action: string;
  value: boolean;
}

export interface PreparedProgram {
  identity: ProgramIdentity;
  /** Column k drives axes[axisOf[k]] of the machine (k < mapped); columns past the map are idle. */
  axisOf: number[];
  /** The machine axes the program commands: axisOf of the columns set in the file's axis_mask. */
  axisMask: number;
  segments: number;
  samples: number;
  /**
   * Executed points after boundary merge: samples - segments + 1 (document 1 part 2 "Program"): segment
   * index, local clock (ns from its segment's start), program clock (ns from program start), q and qd
   * row-major (point, column), flags, and the output intents of the markers on the point.
   */
  points: { segment: Uint32Array; localNs: Float64Array; tNs: Float64Array; q: Float64Array; qd: Float64Array; flags: Uint8Array; ioMask: Uint32Array; ioValues: Uint32Array };
  markers: ProcessMarker[];
  requiresProcessIo: boolean;
}

const NORMALISED_TAG = 'robot.v4.normalised-program.v1\0';

/**
 * The live-machine checks, in the order of docs/profile.md "Program admission"; the first broken rule
 * answers. `markers` are the header's process markers as read by `readMarkers` (the decode worker reads
 * them, since JSON objects do not cross threads).
 */
export function admitProgram(x: Trajectory, axes: readonly ProgramAxis[], manifestRevision: bigint, outputs: readonly ProgramOutput[] = [], markers: readonly MarkerShape[] = []): PreparedProgram {
  // Identity (document 2 "Admission": plan_id, program_id, program_digest nonempty).
  for (const [name, v] of [['plan_id', x.planId], ['program_id', x.programId], ['program_digest', x.programDigest]] as const) {
    if (v === undefined || v === '') throw new ProgramRefusal('program_identity_missing', `program_identity_missing: ${name}`);
  }
  if (x.manifestRevision !== manifestRevision) throw new ProgramRefusal('manifest_revision_mismatch', `manifest_revision_mismatch: file ${x.manifestRevision}, service ${manifestRevision}`);

  const n = x.t.length;
  // Torch output is refused everywhere (document 2 "Admission"; document 1 prepare_program).
  for (let i = 0; i < n; i++) {
    if ((x.flags[i]! & 1) === 1) throw new ProgramRefusal('process_io_executor_not_qualified', `process_io_executor_not_qualified: torch flag set at sample ${i}`);
  }

  // Process markers (document 1 part 7 Cell I/O: io_not_configured, io_marker_invalid, io_torch_unqualified).
  const placed = placeMarkers(x, outputs, markers);

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
  const mapped = axisOf.length;

  // Position bounds per column: the axis limits, widened to the program's first sample where that sample
  // is outside them (a recovery program; docs/profile.md: it may never go further out than it starts).
  const lo = new Float64Array(mapped);
  const hi = new Float64Array(mapped);
  for (let c = 0; c < mapped; c++) {
    const a = axes[axisOf[c]!]!;
    lo[c] = Math.min(a.min, x.q[c]!);
    hi[c] = Math.max(a.max, x.q[c]!);
  }
  const outward = (reason: string, s: number, i: number, a: ProgramAxis, value: number, bound: number): never => {
    throw new ProgramRefusal('outside_limits_outward', `outside_limits_outward: segment=${s} sample=${i} axis=${a.id} position=${value} starts at ${bound}; ${reason}`);
  };

  // Samples inside position limits and below described velocity.
  for (const s of x.segments) {
    for (let i = 0; i < s.sampleCount; i++) {
      const r = (s.first + i) * COLS;
      for (let c = 0; c < mapped; c++) {
        const a = axes[axisOf[c]!]!;
        const q = x.q[r + c]!;
        if (q < lo[c]!) lo[c]! < a.min ? outward('a sample further out', s.index, i, a, q, lo[c]!) : limit('native_limit_exceeded', 'position', s.index, i, a, q, a.min);
        if (q > hi[c]!) hi[c]! > a.max ? outward('a sample further out', s.index, i, a, q, hi[c]!) : limit('native_limit_exceeded', 'position', s.index, i, a, q, a.max);
        const v = Math.abs(x.qd[r + c]!);
        if (v > a.maxVelocity) limit('native_limit_exceeded', 'velocity', s.index, i, a, x.qd[r + c]!, a.maxVelocity);
      }
    }
  }
  // Every interval's cubic Hermite curve.
  const h = x.dtS;
  for (const s of x.segments) {
    for (let i = 0; i + 1 < s.sampleCount; i++) {
      const r = (s.first + i) * COLS;
      for (let c = 0; c < mapped; c++) {
        const a = axes[axisOf[c]!]!;
        const e = hermiteExtremes(x.q[r + c]!, x.qd[r + c]!, x.q[r + COLS + c]!, x.qd[r + COLS + c]!, h);
        if (e.qMin < lo[c]!) lo[c]! < a.min ? outward('the curve bows further out', s.index, i, a, e.qMin, lo[c]!) : limit('native_segment_rate_exceeded', 'position', s.index, i, a, e.qMin, a.min);
        if (e.qMax > hi[c]!) hi[c]! > a.max ? outward('the curve bows further out', s.index, i, a, e.qMax, hi[c]!) : limit('native_segment_rate_exceeded', 'position', s.index, i, a, e.qMax, a.max);
        const ceiling = Math.min(a.maxVelocity, x.maxAbsQd[c]!);
        if (Math.abs(e.vPeak) > ceiling) limit('native_segment_rate_exceeded', 'velocity', s.index, i, a, e.vPeak, ceiling);
      }
    }
  }
  // Finite-difference acceleration where the axis declares a maximum (document 2 "Admission").
  for (const s of x.segments) {
    for (let i = 0; i + 1 < s.sampleCount; i++) {
      const r = (s.first + i) * COLS;
      for (let c = 0; c < mapped; c++) {
        const a = axes[axisOf[c]!]!;
        if (a.maxAcceleration === undefined) continue;
        const acc = (x.qd[r + COLS + c]! - x.qd[r + c]!) / h;
        if (Math.abs(acc) > a.maxAcceleration) {
          throw new ProgramRefusal('native_segment_rate_exceeded', `native_segment_rate_exceeded: segment=${s.index} sample=${i} axis=${a.id} acceleration=${acc} limit=${a.maxAcceleration}`);
        }
      }
    }
  }
  // Joins: the merged boundary samples must coincide in drive counts (no interpolation slack).
  for (let k = 0; k + 1 < x.segments.length; k++) {
    const endRow = (x.segments[k]!.first + x.segments[k]!.sampleCount - 1) * COLS;
    const startRow = x.segments[k + 1]!.first * COLS;
    for (let c = 0; c < mapped; c++) {
      const a = axes[axisOf[c]!]!;
      const gap = Math.round((x.q[startRow + c]! - x.q[endRow + c]!) * a.sign * a.countsPerUnit);
      if (gap !== 0) throw new ProgramRefusal('segment_boundary_discontinuous', `segment_boundary_discontinuous: join=${k} axis=${a.id} gap_counts=${gap}`);
    }
  }

  // Boundary merge: at a join the earlier segment's last sample is executed and the later segment's first
  // (at rest, coincident in counts) is not; a marker on that first sample acts at the join point.
  const m = n - x.segments.length + 1;
  const points = {
    segment: new Uint32Array(m), localNs: new Float64Array(m), tNs: new Float64Array(m), q: new Float64Array(m * COLS), qd: new Float64Array(m * COLS),
    flags: new Uint8Array(m), ioMask: new Uint32Array(m), ioValues: new Uint32Array(m),
  };
  /** Executed point of each source row. */
  const pointOf = new Uint32Array(n);
  let p = 0;
  let clockNs = 0;
  for (const s of x.segments) {
    if (s.index > 0) pointOf[s.first] = p - 1;
    for (let i = s.index === 0 ? 0 : 1; i < s.sampleCount; i++) {
      const row = s.first + i;
      pointOf[row] = p;
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
  const out: ProcessMarker[] = [];
  for (const mk of placed) {
    const pt = pointOf[mk.row]!;
    const bit = 1 << mk.output;
    if (points.ioMask[pt]! & bit) throw new ProgramRefusal('io_marker_invalid', `io_marker_invalid: process_markers[${mk.index}] sets output ${mk.action} on a point another marker already sets`);
    points.ioMask[pt]! |= bit;
    if (mk.value) points.ioValues[pt]! |= bit;
    out.push({ time_ns: BigInt(points.tNs[pt]!), segment: mk.segment, sample: mk.sample, action: mk.action, value: mk.value });
  }

  let machineMask = 0;
  for (let c = 0; c < mapped; c++) if (x.axisMask & (1 << c)) machineMask |= 1 << axisOf[c]!;
  return {
    identity: {
      plan_id: x.planId!, program_id: x.programId!, program_digest: x.programDigest!, trajectory_digest: x.digest,
      source_digest: x.digest, normalised_digest: normalisedDigest(points, m), manifest_revision: x.manifestRevision, plan_revision: x.planRevision,
    },
    axisOf, axisMask: machineMask, segments: x.segments.length, samples: n, points, markers: out, requiresProcessIo: placed.length > 0,
  };
}

/** Checks every marker against the cell's outputs and the file's samples; returns them with their rows. */
function placeMarkers(x: Trajectory, outputs: readonly ProgramOutput[], markers: readonly MarkerShape[]) {
  const placed: Array<{ index: number; row: number; output: number; segment: number; sample: number; action: string; value: boolean }> = [];
  if (markers.length === 0) return placed;
  if (outputs.length === 0) throw new ProgramRefusal('io_not_configured', `io_not_configured: the program has ${markers.length} process markers and the cell has no outputs`);
  markers.forEach((mk, index) => {
    if ('invalid' in mk) throw new ProgramRefusal('io_marker_invalid', `io_marker_invalid: ${mk.invalid}`);
    const output = outputs.findIndex((o) => o.name === mk.action);
    if (output < 0 || output >= 8) throw new ProgramRefusal('io_marker_invalid', `io_marker_invalid: process_markers[${index}].action ${JSON.stringify(mk.action)} is not a configured output`);
    if (outputs[output]!.torch) throw new ProgramRefusal('io_torch_unqualified', `io_torch_unqualified: process_markers[${index}] drives the torch-class output ${mk.action}`);
    const seg = x.segments[mk.segment];
    if (!seg || mk.sample >= seg.sampleCount) throw new ProgramRefusal('io_marker_invalid', `io_marker_invalid: process_markers[${index}] is not on a sample (segment ${mk.segment} sample ${mk.sample})`);
    placed.push({ index, row: seg.first + mk.sample, output, segment: mk.segment, sample: mk.sample, action: mk.action, value: mk.value });
  });
  return placed;
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
  // Per point: u64 segment, u64 local clock ns, 9 f64 q, 9 f64 qd, u8 flags, u8 io_mask, u8 io_values
  // (171 bytes), all big-endian.
  const rec = Buffer.alloc(8 + 8 + 8 * COLS * 2 + 3);
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
    rec.writeUInt8(pts.ioMask[p]! & 0xff, 16 + 145);
    rec.writeUInt8(pts.ioValues[p]! & 0xff, 16 + 146);
    hsh.update(rec);
  }
  return 'sha256:' + hsh.digest('hex');
}

/**
 * The core's plan arrays of an admitted program (core protocol.ts PlanArrays and PlanWorkspace): the
 * executed points in machine order, `axes` wide (the axes the program does not map are 0), every point
 * with its velocity, the output intents as admitted, and the memory the core builds the plan in, written
 * once so that its pages are faulted in here rather than on the core's thread. Into `slot` (views of a plan
 * arena slot of at least that many points, sims/core/plan-arena.ts) when given, else into arrays of their
 * own. Run in the decode worker (sims/dense/decode-worker.ts), off the service's main thread: for a
 * maximum program this is hundreds of ms of copying that would hold every reply of the service
 * (document 1 part 3: a renewal sent within its lease must be answered).
 */
export function programPlan(p: PreparedProgram, axes: number, slot?: { plan: SlotStorage; workspace: PlanWorkspace }): PlanArrays & { workspace: PlanWorkspace } {
  const m = p.points.segment.length;
  const N = axes;
  const timeNs = slot?.plan.timeNs ?? new BigInt64Array(m);
  const position = slot?.plan.position.fill(0) ?? new Float64Array(m * N);
  const velocity = slot?.plan.velocity.fill(0) ?? new Float64Array(m * N);
  const hasVelocity = (slot?.plan.hasVelocity ?? new Uint8Array(m)).fill(1);
  const ioMask = slot ? (slot.plan.ioMask.set(p.points.ioMask), slot.plan.ioMask) : p.points.ioMask.slice();
  const ioValues = slot ? (slot.plan.ioValues.set(p.points.ioValues), slot.plan.ioValues) : p.points.ioValues.slice();
  const workspace = slot?.workspace ?? { t: new Float64Array(m).fill(0), q: new Float64Array(m * N).fill(0), qd: new Float64Array(m * N).fill(0) };
  const { tNs, q, qd } = p.points;
  const map = p.axisOf;
  for (let k = 0; k < m; k++) {
    timeNs[k] = BigInt(tNs[k]!);
    for (let c = 0; c < map.length; c++) {
      position[k * N + map[c]!] = q[k * COLS + c]!;
      velocity[k * N + map[c]!] = qd[k * COLS + c]!;
    }
  }
  return { timeNs, position, velocity, hasVelocity, ioMask, ioValues, workspace };
}

/** What the service asks the decode worker for one upload (sims/dense/decode-worker.ts). */
export interface AdmitJob {
  id: number;
  bytes: Uint8Array;
  maxHeaderBytes: number;
  axes: ProgramAxis[];
  outputs: ProgramOutput[];
  manifestRevision: bigint;
  /**
   * A plan arena slot the service claimed for this upload: the plan is written into it when it is large
   * enough to belong there (commitNow's rule: positions of at least PLAN_ARENA_MIN_BYTES, points within the
   * slot's capacity), else into arrays of their own and the slot is not touched.
   */
  arena?: { buffer: SharedArrayBuffer; slot: number };
}

/** The admitted program without its points (they stay in the worker), and where its plan was written. */
export type AdmittedProgram = Omit<PreparedProgram, 'points'> & {
  /** Executed points. */
  count: number;
  /** Segment of each executed point (the handle's segmentOf). */
  segment: Uint32Array;
};

export type AdmitAnswer =
  | { id: number; admitted: AdmittedProgram; inSlot: true }
  | { id: number; admitted: AdmittedProgram; inSlot: false; plan: PlanArrays & { workspace: PlanWorkspace } }
  /** A document 2 file-format refusal: its reason and text. */
  | { id: number; reason: string; message: string }
  /** A live-machine refusal (ProgramRefusal's fields). */
  | { id: number; refusal: { reason: string; text: string; limitViolation?: LimitViolation } }
  | { id: number; defect: string };
