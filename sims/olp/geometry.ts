// The operations of the reference CAD and seam worker (document 3 part 4 /cadquery/topology and /seam;
// bodies and results are ours: docs/profile.md "OLP server: worker operations") on the B-rep that
// OpenCascade (occt-import-js) reads from a STEP file: a triangulated mesh per solid with its B-rep faces
// as triangle ranges. Everything here is computed from that geometry; an operation or a shape this
// worker does not handle is refused (invalid_request) with the reason, never answered with a made-up
// result. Lengths are millimetres in the STEP-facing results (the file's unit, converted by OpenCascade)
// and metres in program-facing ones (document 3 "units fixed").

import { createHash } from 'node:crypto';
import { validateProgram, ProgramInvalid } from '../planner/program.ts';
import { canonicalJson, decodeJson } from '../json.ts';

/** The part of occt-import-js this worker uses. */
export interface Occt {
  ReadStepFile(content: Uint8Array, params: Record<string, unknown> | null): OcctResult;
}
export interface OcctResult {
  success: boolean;
  meshes: Array<{
    name?: string;
    attributes: { position: { array: ArrayLike<number> }; normal?: { array: ArrayLike<number> } };
    index: { array: ArrayLike<number> };
    brep_faces: Array<{ first: number; last: number }>;
  }>;
}

/** A refusal of the request (the bridge's invalid_request). */
export class Refusal extends Error {}

export const CAD_OPERATIONS = ['extract_topology', 'build_seam', 'build_sequence', 'tessellate'] as const;
export const SEAM_OPERATIONS = ['detect_joints', 'check_torch_fits', 'plan_torch_path', 'sample_seam_frames', 'build_plan_request'] as const;
/** Operations of document 3 part 4 this worker does not implement, with the reason (docs/profile.md). */
export const NOT_IMPLEMENTED: Record<string, string> = {
  build_seam: 'build_seam is not implemented by the reference worker: the seam of a program is authored from a detect_joints joint (weld_joint_ref) and build_plan_request writes its weld_line',
  build_sequence: 'build_sequence is not implemented by the reference worker: it has no weld sequencing model',
  check_torch_fits: 'check_torch_fits is not implemented by the reference worker: it has no torch geometry or collision model',
  plan_torch_path: 'plan_torch_path is not implemented by the reference worker: torch paths are planned by the weld planner (/weld-plan)',
};
export const OPERATIONS = [...CAD_OPERATIONS, ...SEAM_OPERATIONS].filter((o) => !(o in NOT_IMPLEMENTED));

type V3 = [number, number, number];
const sub = (a: V3, b: V3): V3 => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
const add = (a: V3, b: V3): V3 => [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
const mul = (a: V3, k: number): V3 => [a[0] * k, a[1] * k, a[2] * k];
const dot = (a: V3, b: V3): number => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
const cross = (a: V3, b: V3): V3 => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
const norm = (a: V3): number => Math.hypot(a[0], a[1], a[2]);
const unit = (a: V3): V3 => mul(a, 1 / norm(a));
const round = (x: number): number => Math.round(x * 1e6) / 1e6;
const r3 = (a: V3): V3 => [round(a[0]), round(a[1]), round(a[2])];

/** Geometric tolerance in mm (points closer than this are one point). */
const TOL = 1e-4;

export interface Face {
  id: string;
  index: number;
  triangles: Array<[V3, V3, V3]>;
  planar: boolean;
  normal: V3;
  /** Plane offset: dot(normal, p) for points p of the face. */
  offset: number;
  area: number;
  centroid: V3;
}

export interface Edge {
  id: string;
  faces: [string, string];
  points: V3[];
  length: number;
  straight: boolean;
}

export interface Solid {
  id: string;
  positions: Float64Array;
  indices: Uint32Array;
  normals?: Float64Array;
  faces: Face[];
  edges: Edge[];
  bbox: { min: V3; max: V3 };
}

export interface Part {
  sha256: string;
  solids: Solid[];
}

/** Read the STEP file of a request body (step_base64) into solids. */
export function readPart(occt: Occt, body: Record<string, unknown>): Part {
  const b64 = body.step_base64;
  if (typeof b64 !== 'string' || b64 === '') throw new Refusal('step_base64 is required: the STEP file, base64');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0) throw new Refusal('step_base64 is not base64');
  const bytes = Buffer.from(b64, 'base64');
  const deflection = body.linear_deflection_mm;
  if (deflection !== undefined && !(typeof deflection === 'number' && deflection > 0 && deflection <= 100)) throw new Refusal('linear_deflection_mm must be a number in (0, 100]');
  // A session authors one part through several operations: the last few parts read are kept.
  const sha256 = 'sha256:' + createHash('sha256').update(bytes).digest('hex');
  const key = `${sha256}@${(deflection as number | undefined) ?? 0.5}`;
  const cached = PARTS.get(key);
  if (cached) return cached;
  const part = readStep(occt, bytes, sha256, (deflection as number | undefined) ?? 0.5);
  PARTS.set(key, part);
  if (PARTS.size > 4) PARTS.delete(PARTS.keys().next().value as string);
  return part;
}

const PARTS = new Map<string, Part>();

function readStep(occt: Occt, bytes: Buffer, sha256: string, deflection: number): Part {
  const r = occt.ReadStepFile(new Uint8Array(bytes), { linearUnit: 'millimeter', linearDeflectionType: 'absolute_value', linearDeflection: deflection, angularDeflection: 0.5 });
  if (!r || !r.success) throw new Refusal('the STEP file cannot be read (OpenCascade found no shape in it)');
  if (r.meshes.length === 0) throw new Refusal('the STEP file has no solid');
  const solids = r.meshes.map((m, i) => buildSolid(`solid-${i}`, m));
  return { sha256, solids };
}

function buildSolid(id: string, m: OcctResult['meshes'][number]): Solid {
  const positions = Float64Array.from(m.attributes.position.array);
  const indices = Uint32Array.from(m.index.array);
  const pt = (k: number): V3 => [positions[3 * k]!, positions[3 * k + 1]!, positions[3 * k + 2]!];
  const min: V3 = [Infinity, Infinity, Infinity];
  const max: V3 = [-Infinity, -Infinity, -Infinity];
  for (let k = 0; k < positions.length / 3; k++) {
    const p = pt(k);
    for (let a = 0; a < 3; a++) {
      min[a] = Math.min(min[a]!, p[a]!);
      max[a] = Math.max(max[a]!, p[a]!);
    }
  }
  const faces: Face[] = m.brep_faces.map((f, fi) => {
    const triangles: Array<[V3, V3, V3]> = [];
    for (let t = f.first; t <= f.last; t++) triangles.push([pt(indices[3 * t]!), pt(indices[3 * t + 1]!), pt(indices[3 * t + 2]!)]);
    let area2: V3 = [0, 0, 0];
    let c: V3 = [0, 0, 0];
    let area = 0;
    for (const [a, b, cc] of triangles) {
      const n = cross(sub(b, a), sub(cc, a));
      area2 = add(area2, n);
      const ar = norm(n) / 2;
      area += ar;
      c = add(c, mul(add(add(a, b), cc), ar / 3));
    }
    const normal = norm(area2) > 0 ? unit(area2) : ([0, 0, 0] as V3);
    const offset = triangles.length ? dot(normal, triangles[0]![0]) : 0;
    const planar = norm(area2) > 0 && triangles.every((tr) => tr.every((p) => Math.abs(dot(normal, p) - offset) < TOL * 10));
    return { id: `${id}/face-${fi}`, index: fi, triangles, planar, normal, offset, area, centroid: area > 0 ? mul(c, 1 / area) : c };
  });
  return { id, positions, indices, ...(m.attributes.normal ? { normals: Float64Array.from(m.attributes.normal.array) } : {}), faces, edges: edgesOf(id, faces), bbox: { min, max } };
}

/**
 * The B-rep edges, recovered from the mesh: the boundary segments of each face's triangles (a triangle
 * side used once within its face), matched between faces of the solid (OpenCascade discretises an edge
 * once for both faces) and chained into polylines, one edge per run between a pair of faces.
 */
function edgesOf(solidId: string, faces: Face[]): Edge[] {
  const key = (p: V3) => r3(p).join(',');
  const boundary = faces.map((f) => {
    const count = new Map<string, { a: V3; b: V3; n: number }>();
    for (const tr of f.triangles) {
      for (let s = 0; s < 3; s++) {
        const a = tr[s]!;
        const b = tr[(s + 1) % 3]!;
        const ka = key(a);
        const kb = key(b);
        if (ka === kb) continue;
        const k = ka < kb ? `${ka}|${kb}` : `${kb}|${ka}`;
        const e = count.get(k);
        if (e) e.n++;
        else count.set(k, { a, b, n: 1 });
      }
    }
    return new Map([...count].filter(([, v]) => v.n === 1));
  });
  const edges: Edge[] = [];
  for (let i = 0; i < faces.length; i++) {
    for (let j = i + 1; j < faces.length; j++) {
      const shared = [...boundary[i]!].filter(([k]) => boundary[j]!.has(k)).map(([, v]) => [v.a, v.b] as [V3, V3]);
      if (shared.length === 0) continue;
      const chains = chain(shared, key);
      chains.forEach((points, n) => {
        let length = 0;
        for (let k = 1; k < points.length; k++) length += norm(sub(points[k]!, points[k - 1]!));
        const d = unit(sub(points.at(-1)!, points[0]!));
        const straight = points.every((p) => norm(cross(sub(p, points[0]!), d)) < TOL * 10);
        edges.push({ id: `${solidId}/edge-${i}-${j}${chains.length > 1 ? `-${n}` : ''}`, faces: [faces[i]!.id, faces[j]!.id], points: straight ? [points[0]!, points.at(-1)!] : points, length, straight });
      });
    }
  }
  return edges;
}

/** Chain segments into polylines (each point shared by at most two segments). */
function chain(segs: Array<[V3, V3]>, key: (p: V3) => string): V3[][] {
  const left = new Set(segs.map((_s, i) => i));
  const at = new Map<string, number[]>();
  segs.forEach(([a, b], i) => {
    for (const p of [a, b]) at.set(key(p), [...(at.get(key(p)) ?? []), i]);
  });
  const out: V3[][] = [];
  while (left.size) {
    const first = left.values().next().value as number;
    left.delete(first);
    const line: V3[] = [segs[first]![0], segs[first]![1]];
    for (const end of [1, 0]) {
      for (;;) {
        const tip = end ? line.at(-1)! : line[0]!;
        const next = (at.get(key(tip)) ?? []).find((k) => left.has(k));
        if (next === undefined) break;
        left.delete(next);
        const [a, b] = segs[next]!;
        const other = key(a) === key(tip) ? b : a;
        if (end) line.push(other);
        else line.unshift(other);
      }
    }
    // A stable direction: from the lexicographically smaller end.
    const [s, e] = [key(line[0]!), key(line.at(-1)!)];
    out.push(s <= e ? line : line.reverse());
  }
  return out.sort((x, y) => key(x[0]!).localeCompare(key(y[0]!)));
}

// ---- point tests ----

function onFace(f: Face, p: V3, tol = TOL * 10): boolean {
  if (!f.planar || Math.abs(dot(f.normal, p) - f.offset) > tol) return false;
  for (const [a, b, c] of f.triangles) {
    const n = cross(sub(b, a), sub(c, a));
    const nn = dot(n, n);
    if (nn === 0) continue;
    // Barycentric coordinates, with a tolerance scaled to the triangle.
    const u = dot(cross(sub(c, b), sub(p, b)), n) / nn;
    const v = dot(cross(sub(a, c), sub(p, c)), n) / nn;
    const w = 1 - u - v;
    const eps = tol / Math.sqrt(Math.sqrt(nn));
    if (u >= -eps && v >= -eps && w >= -eps) return true;
  }
  return false;
}

/** Inside a closed solid: parity of a ray's crossings with its triangles. */
function inside(s: Solid, p: V3): boolean {
  const dir: V3 = unit([0.5773, 0.5774, 0.5775 + 1e-3]);
  let n = 0;
  for (const f of s.faces) {
    for (const [a, b, c] of f.triangles) {
      const e1 = sub(b, a);
      const e2 = sub(c, a);
      const h = cross(dir, e2);
      const det = dot(e1, h);
      if (Math.abs(det) < 1e-12) continue;
      const inv = 1 / det;
      const sv = sub(p, a);
      const u = dot(sv, h) * inv;
      if (u < 0 || u > 1) continue;
      const q = cross(sv, e1);
      const v = dot(dir, q) * inv;
      if (v < 0 || u + v > 1) continue;
      if (dot(e2, q) * inv > 1e-9) n++;
    }
  }
  return n % 2 === 1;
}

// ---- joints ----

export interface Joint {
  id: string;
  kind: 'butt' | 'fillet' | 'angle';
  solids: [string, string];
  faces: [string, string];
  start: V3;
  end: V3;
  length: number;
  opening_deg: number;
  /** Into the first face, away from the line. */
  dA: V3;
  /** Into the second face, away from the line; nC its outward normal. */
  dC: V3;
  nC: V3;
}

/** The parameter runs in [0, 1] of segment p→q that lie on face f (sampled, ends refined by bisection). */
function runsOnFace(f: Face, p: V3, q: V3): Array<[number, number]> {
  const N = 64;
  const on = (t: number) => onFace(f, add(p, mul(sub(q, p), t)));
  const flags = Array.from({ length: N + 1 }, (_x, k) => on(k / N));
  const runs: Array<[number, number]> = [];
  let k = 0;
  while (k <= N) {
    if (!flags[k]) {
      k++;
      continue;
    }
    let j = k;
    while (j + 1 <= N && flags[j + 1]) j++;
    const refine = (inT: number, outT: number) => {
      for (let it = 0; it < 40; it++) {
        const m = (inT + outT) / 2;
        if (on(m)) inT = m;
        else outT = m;
      }
      return inT;
    };
    runs.push([k === 0 ? 0 : refine(k / N, (k - 1) / N), j === N ? 1 : refine(j / N, (j + 1) / N)]);
    k = j + 1;
  }
  return runs;
}

/** Unit vector in face f's plane, perpendicular to t, pointing from point m into the face (or undefined). */
function intoFace(f: Face, m: V3, t: V3, prefer?: V3): V3 | undefined {
  const d = unit(cross(f.normal, t));
  const eps = 0.05;
  const cands = [d, mul(d, -1) as V3].filter((x) => onFace(f, add(m, mul(x, eps))));
  if (cands.length === 2 && prefer) return cands.find((x) => dot(x, prefer) > 1e-9);
  return cands.length === 1 ? cands[0] : undefined;
}

/**
 * Joints between solids: straight edges of one solid lying on a planar face of another, where a face of
 * the first (adjacent to the edge) and that face bound a free wedge (the point a little way down the
 * wedge's bisector is outside both solids). Faces in contact (coincident, opposite normals) are not a
 * joint. Kind from the wedge's opening angle: butt about 180 degrees, fillet 60..120, angle otherwise.
 */
export function detectJoints(part: Part): Joint[] {
  const nonPlanar = part.solids.flatMap((s) => s.faces.filter((f) => !f.planar).map((f) => f.id));
  if (nonPlanar.length) throw new Refusal(`detect_joints handles planar faces only; not planar: ${nonPlanar.slice(0, 8).join(', ')}`);
  const found: Joint[] = [];
  for (const A of part.solids) {
    for (const B of part.solids) {
      if (A === B) continue;
      for (const e of A.edges) {
        if (!e.straight) continue;
        const [p, q] = [e.points[0]!, e.points.at(-1)!];
        const t = unit(sub(q, p));
        for (const fc of B.faces) {
          if (Math.abs(dot(fc.normal, t)) > 1e-6) continue;
          for (const [t0, t1] of runsOnFace(fc, p, q)) {
            const s = add(p, mul(sub(q, p), t0));
            const en = add(p, mul(sub(q, p), t1));
            const length = norm(sub(en, s));
            if (length < 10 * TOL) continue;
            const mid = mul(add(s, en), 0.5);
            for (const faId of e.faces) {
              const fa = A.faces.find((f) => f.id === faId)!;
              if (dot(fa.normal, fc.normal) < -1 + 1e-9 && Math.abs(fa.offset + fc.offset) < TOL * 10) continue; // contact
              const dA = intoFace(fa, mid, t);
              const dC = intoFace(fc, mid, t, fa.normal);
              if (!dA || !dC) continue;
              const opening = (Math.acos(Math.max(-1, Math.min(1, dot(dA, dC)))) * 180) / Math.PI;
              const bis = norm(add(dA, dC)) < 1e-6 ? fa.normal : unit(add(dA, dC));
              if (opening < 1) continue;
              const probe = add(mid, mul(bis, 0.05));
              if (inside(A, probe) || inside(B, probe)) continue;
              const kind = opening > 170 ? 'butt' : opening >= 60 && opening <= 120 ? 'fillet' : 'angle';
              found.push({ id: `${fa.id}~${fc.id}`, kind, solids: [A.id, B.id], faces: [fa.id, fc.id], start: s, end: en, length, opening_deg: opening, dA, dC, nC: fc.normal });
            }
          }
        }
      }
    }
  }
  // The same line found from both solids is one joint: the first found (solid order) is kept.
  const same = (a: Joint, b: Joint) =>
    (norm(sub(a.start, b.start)) < 10 * TOL && norm(sub(a.end, b.end)) < 10 * TOL) || (norm(sub(a.start, b.end)) < 10 * TOL && norm(sub(a.end, b.start)) < 10 * TOL);
  const out: Joint[] = [];
  for (const j of found) if (!out.some((k) => same(j, k))) out.push(j);
  // Ids: face pair, numbered when one pair has several lines.
  const counts = new Map<string, number>();
  for (const j of out) counts.set(j.id, (counts.get(j.id) ?? 0) + 1);
  const seen = new Map<string, number>();
  for (const j of out) {
    if (counts.get(j.id)! > 1) {
      const n = seen.get(j.id) ?? 0;
      seen.set(j.id, n + 1);
      j.id = `${j.id}#${n}`;
    }
  }
  return out.sort((a, b) => b.length - a.length || a.id.localeCompare(b.id));
}

function jointView(j: Joint): Record<string, unknown> {
  return {
    id: j.id,
    kind: j.kind,
    solids: j.solids,
    faces: j.faces,
    opening_deg: round(j.opening_deg),
    length_mm: round(j.length),
    start_mm: r3(j.start),
    end_mm: r3(j.end),
    weld_line: { segments: [{ degree: 1, control_points_xyz_m: [r3(mul(j.start, 1e-3)), r3(mul(j.end, 1e-3))] }] },
  };
}

// ---- scalar functions (document 3 "Scalar function") ----

export function scalar(f: unknown, s: number, what: string): number {
  const bad = (why: string) => new Refusal(`${what}: ${why}`);
  if (!f || typeof f !== 'object' || Array.isArray(f)) throw bad('a scalar function is an object {kind, ...}');
  const o = f as Record<string, any>;
  const nums = (a: unknown, k: string): number[] => {
    if (!Array.isArray(a) || !a.every((x) => typeof x === 'number' && Number.isFinite(x))) throw bad(`${k} must be finite numbers`);
    return a as number[];
  };
  const lerp = (xs: number[], ys: number[]) => {
    if (s <= xs[0]!) return ys[0]!;
    for (let i = 1; i < xs.length; i++) if (s <= xs[i]!) return ys[i - 1]! + ((ys[i]! - ys[i - 1]!) * (s - xs[i - 1]!)) / (xs[i]! - xs[i - 1]! || 1);
    return ys.at(-1)!;
  };
  switch (o.kind) {
    case 'constant':
      if (typeof o.value !== 'number' || !Number.isFinite(o.value)) throw bad('constant needs a finite value');
      return o.value;
    case 'piecewise_linear': {
      if (!Array.isArray(o.knots) || o.knots.length < 1 || !o.knots.every((k: unknown) => Array.isArray(k) && k.length === 2)) throw bad('piecewise_linear needs knots [[s, value], ...]');
      const k = (o.knots as number[][]).map((x) => nums(x, 'knots'));
      return lerp(k.map((x) => x[0]!), k.map((x) => x[1]!));
    }
    case 'samples': {
      const xs = nums(o.s, 's');
      const ys = nums(o.values, 'values');
      if (xs.length !== ys.length || xs.length < 2) throw bad('samples needs s and values of one length, at least two');
      return lerp(xs, ys);
    }
    case 'bspline': {
      const p = o.degree;
      const U = nums(o.knots_u, 'knots_u');
      const c = nums(o.control_values, 'control_values');
      if (!Number.isInteger(p) || p < 0 || U.length !== c.length + p + 1) throw bad('bspline knots_u must have control_values + degree + 1 entries');
      // de Boor at s, clamped to the knot span.
      const n = c.length - 1;
      let k = p;
      while (k < n && s >= U[k + 1]!) k++;
      const d = Array.from({ length: p + 1 }, (_x, j) => c[j + k - p]!);
      for (let r = 1; r <= p; r++) {
        for (let j = p; j >= r; j--) {
          const i = j + k - p;
          const den = U[i + p - r + 1]! - U[i]!;
          const a = den === 0 ? 0 : (s - U[i]!) / den;
          d[j] = (1 - a) * d[j - 1]! + a * d[j]!;
        }
      }
      return d[p]!;
    }
  }
  throw bad(`unknown kind ${JSON.stringify(o.kind)} (constant, piecewise_linear, bspline, samples)`);
}

// ---- frames ----

/** Roll, pitch, yaw (extrinsic x, y, z: R = Rz(yaw) Ry(pitch) Rx(roll)) of a rotation given by its columns. */
export function rpyOf(x: V3, y: V3, z: V3): V3 {
  // R = [x y z] as columns: R[2][0] = x[2], R[2][1] = y[2], R[2][2] = z[2], R[1][0] = x[1], R[0][0] = x[0].
  const pitch = Math.asin(Math.max(-1, Math.min(1, -x[2])));
  if (Math.abs(Math.cos(pitch)) < 1e-9) return [Math.atan2(-z[1], y[1]), pitch, 0];
  return [Math.atan2(y[2], z[2]), pitch, Math.atan2(x[1], x[0])];
}

/**
 * Frames along a joint's line: the torch approach axis z points into the joint. Work angle w (degrees)
 * turns the torch from the second face towards the first in the plane across the seam (measured from
 * the second face's surface: 45 on a 90 degree fillet is the bisector, 90 on a butt joint is square to
 * the plates); travel angle a tilts it along the seam, positive pushing (the torch leans back against
 * the travel direction). x is the travel direction made square to z.
 */
export function seamFrames(j: Joint, o: { spacing_mm: number; reverse: boolean; work: unknown; travel: unknown }): Array<Record<string, unknown>> {
  const [a, b] = o.reverse ? [j.end, j.start] : [j.start, j.end];
  const t = unit(sub(b, a));
  const L = j.length;
  const n = Math.floor(L / o.spacing_mm + 1e-9);
  const ss: number[] = [];
  for (let k = 0; k <= n; k++) ss.push(Math.min(1, (k * o.spacing_mm) / L));
  if (ss.at(-1)! < 1 - 1e-9) ss.push(1);
  return ss.map((s) => {
    const w = (scalar(o.work, s, 'orientation.work_angle_deg') * Math.PI) / 180;
    const tr = (scalar(o.travel, s, 'orientation.travel_angle_deg') * Math.PI) / 180;
    const out = add(mul(j.dC, Math.cos(w)), mul(j.nC, Math.sin(w))); // from the seam out to the torch
    const leaned = unit(add(mul(out, Math.cos(tr)), mul(t, -Math.sin(tr))));
    const z = mul(leaned, -1) as V3;
    const x = unit(sub(t, mul(z, dot(t, z))));
    const y = cross(z, x);
    const p = add(a, mul(sub(b, a), s));
    return {
      s: round(s),
      xyz_m: r3(mul(p, 1e-3)),
      rpy_rad: rpyOf(x, y, z).map((v) => Math.round(v * 1e9) / 1e9),
      z_axis: z.map((v) => Math.round(v * 1e9) / 1e9),
      work_angle_deg: round((w * 180) / Math.PI),
      travel_angle_deg: round((tr * 180) / Math.PI),
    };
  });
}

// ---- operations ----

function operationOf(route: string, body: Record<string, unknown>): string {
  const op = body.operation;
  const ops: readonly string[] = route === 'seam' ? SEAM_OPERATIONS : CAD_OPERATIONS;
  if (typeof op !== 'string') throw new Refusal(`operation is required: one of ${ops.join(', ')}`);
  if (!ops.includes(op)) throw new Refusal(`operation ${op} is not a ${route === 'seam' ? '/seam' : '/cadquery/topology'} operation (${ops.join(', ')})`);
  if (op in NOT_IMPLEMENTED) throw new Refusal(NOT_IMPLEMENTED[op]!);
  return op;
}

/** The reply of an operation that reports every solid of the part (tessellate, extract_topology). */
function solidsReply(part: Part, view: (s: Solid) => Record<string, unknown>): { result: unknown; part: string } {
  return { part: part.sha256, result: { units: 'mm', solids: part.solids.map((s) => ({ id: s.id, ...view(s) })) } };
}

/** Each face's triangles in the solid's index list: they follow one another in face order (a running sum). */
function faceRanges(s: Solid): Array<{ id: string; first_triangle: number; triangles: number }> {
  let first = 0;
  return s.faces.map((f) => {
    const r = { id: f.id, first_triangle: first, triangles: f.triangles.length };
    first += f.triangles.length;
    return r;
  });
}

/** Run one request of the bridge. */
export function operate(occt: Occt, route: string, body: Record<string, unknown>): { result: unknown; part: string } {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new Refusal('the body is not an object');
  const op = operationOf(route, body);
  if (op === 'build_plan_request') return buildPlanRequest(occt, body);
  const part = readPart(occt, body);
  switch (op) {
    case 'tessellate':
      return solidsReply(part, (s) => ({
        positions_mm: Array.from(s.positions, round),
        ...(s.normals ? { normals: Array.from(s.normals, (v) => Math.round(v * 1e6) / 1e6) } : {}),
        indices: Array.from(s.indices),
        faces: faceRanges(s),
      }));
    case 'extract_topology':
      return solidsReply(part, (s) => ({
        bbox_mm: { min: r3(s.bbox.min), max: r3(s.bbox.max) },
        faces: s.faces.map((f) => ({ id: f.id, surface: f.planar ? 'plane' : 'other', ...(f.planar ? { normal: r3(f.normal) } : {}), area_mm2: round(f.area), centroid_mm: r3(f.centroid) })),
        edges: s.edges.map((e) => ({ id: e.id, faces: e.faces, curve: e.straight ? 'line' : 'polyline', length_mm: round(e.length), points_mm: e.points.map(r3) })),
      }));
    case 'detect_joints':
      return { part: part.sha256, result: { units: 'mm', joints: detectJoints(part).map(jointView) } };
    case 'sample_seam_frames': {
      const seam = body.seam as Record<string, any> | undefined;
      if (!seam || typeof seam !== 'object') throw new Refusal('seam is required: the program document\'s seam geometry {weld_joint_ref, orientation, direction?}');
      if (seam.line !== undefined) throw new Refusal('seams with an inline line are not sampled by the reference worker: give weld_joint_ref, a joint of detect_joints');
      const ref = seam.weld_joint_ref;
      const joints = detectJoints(part);
      const j = joints.find((x) => x.id === ref);
      if (!j) throw new Refusal(`weld_joint_ref ${JSON.stringify(ref)} is not a joint of this part (detect_joints: ${joints.map((x) => x.id).join(', ') || 'none'})`);
      const spacing = body.spacing_mm;
      if (typeof spacing !== 'number' || !(spacing > 0) || !Number.isFinite(spacing)) throw new Refusal('spacing_mm must be a positive number');
      if (j.length / spacing > 100_000) throw new Refusal(`spacing_mm ${spacing} gives more than 100000 frames on a ${round(j.length)} mm seam`);
      const dir = seam.direction ?? 'forward';
      if (dir !== 'forward' && dir !== 'reverse') throw new Refusal('seam.direction must be forward or reverse');
      const orientation = seam.orientation as Record<string, unknown> | undefined;
      if (!orientation || typeof orientation !== 'object') throw new Refusal('seam.orientation {work_angle_deg, travel_angle_deg} is required');
      const frames = seamFrames(j, { spacing_mm: spacing, reverse: dir === 'reverse', work: orientation.work_angle_deg, travel: orientation.travel_angle_deg });
      return { part: part.sha256, result: { frame_id: 'workpiece', joint: jointView(j), direction: dir, spacing_mm: spacing, frames } };
    }
  }
  throw new Refusal(`operation ${op} is not handled`);
}

/**
 * build_plan_request: the /weld-plan body (document 3 part 4) from a program document, tooling, the STEP
 * file and a cell: every seam whose weld_joint_ref names a joint of the part gets that joint's weld_line
 * in workpiece.weld_joints (metres, the workpiece frame), the row hashes and program digest are
 * recomputed, and the program is validated as robot.v4.program.v2 (a problem is the refusal).
 */
function buildPlanRequest(occt: Occt, body: Record<string, unknown>): { result: unknown; part: string } {
  const program = body.program;
  const tooling = body.tooling;
  const cell = body.cell_id;
  if (!program || typeof program !== 'object' || Array.isArray(program)) throw new Refusal('program is required: a robot.v4.program.v2 document');
  if (!tooling || typeof tooling !== 'object' || Array.isArray(tooling)) throw new Refusal('tooling is required: an object');
  if (typeof cell !== 'string' || cell === '') throw new Refusal('cell_id is required');
  const absent = body.workpiece_absent === true;
  const doc = structuredClone(program) as Record<string, any>;
  let partId = 'none';
  if (!absent) {
    const part = readPart(occt, body);
    partId = part.sha256;
    const joints = new Map(detectJoints(part).map((j) => [j.id, j]));
    const refs = new Set<string>();
    for (const n of Array.isArray(doc.nodes) ? doc.nodes : []) {
      const g = n?.geometry;
      if (n?.op === 'weld' && g?.kind === 'seam' && typeof g.weld_joint_ref === 'string') refs.add(g.weld_joint_ref);
    }
    doc.workpiece = doc.workpiece && typeof doc.workpiece === 'object' ? doc.workpiece : {};
    const existing: Array<Record<string, unknown>> = Array.isArray(doc.workpiece.weld_joints) ? doc.workpiece.weld_joints : [];
    for (const ref of refs) {
      const j = joints.get(ref);
      if (!j) {
        if (existing.some((x) => x?.id === ref)) continue;
        throw new Refusal(`seam weld_joint_ref ${ref} is not a joint of this part (detect_joints: ${[...joints.keys()].join(', ') || 'none'})`);
      }
      const view = jointView(j);
      const entry = { id: ref, kind: j.kind, weld_line: view.weld_line };
      const i = existing.findIndex((x) => x?.id === ref);
      if (i >= 0) existing[i] = { ...existing[i], ...entry };
      else existing.push(entry);
    }
    doc.workpiece.weld_joints = existing;
    if (doc.source === undefined || (typeof doc.source === 'object' && doc.source !== null)) {
      doc.source = { ...(doc.source ?? {}), step_sha256: partId, ...(typeof body.step_filename === 'string' ? { step_filename: body.step_filename } : {}) };
    }
  } else if (typeof body.step_base64 === 'string' && body.step_base64 !== '') throw new Refusal('workpiece_absent true with a STEP file: one or the other');
  // Digests (document 3 "Digests").
  const sha = (v: unknown) => 'sha256:' + createHash('sha256').update(canonicalJson(decodeJson(Buffer.from(JSON.stringify(v))))).digest('hex');
  if (Array.isArray(doc.nodes)) {
    for (const n of doc.nodes) {
      if (n && typeof n === 'object') {
        delete n.row_hash;
        n.row_hash = sha(n);
      }
    }
  }
  delete doc.program_digest;
  doc.program_digest = sha(doc);
  try {
    validateProgram(decodeJson(Buffer.from(JSON.stringify(doc))));
  } catch (e) {
    if (e instanceof ProgramInvalid) throw new Refusal(`the program is not a valid robot.v4.program.v2 document: ${e.message}`);
    throw e;
  }
  const request: Record<string, unknown> = {
    program: doc,
    tooling,
    step_base64: absent ? '' : body.step_base64,
    cell_id: cell,
    program_id: doc.program_id,
    program_digest: doc.program_digest,
  };
  if (absent) request.workpiece_absent = true;
  if (typeof body.step_filename === 'string') request.step_filename = body.step_filename;
  return { part: partId, result: { request } };
}

