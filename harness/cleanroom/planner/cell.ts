// The one cell this planner serves: a six-axis arm of our own design on a fixed pedestal beside a
// welding table. Kinematics are URDF-like (joint origin, then rotation about a unit axis), the collision
// model is capsules (robot) against boxes (environment). Lengths in m, angles in rad.
import { createHash } from "node:crypto";

export type Vec3 = [number, number, number];
export type Mat3 = number[]; // row-major 3x3
export interface Pose { R: Mat3; p: Vec3 }

export const CELL_ID = "blind-six-axis";

interface JointDef { name: string; origin: Vec3; axis: Vec3; lower: number; upper: number; vmax: number }

export const JOINTS: JointDef[] = [
  { name: "J1", origin: [0, 0, 0.35], axis: [0, 0, 1], lower: -2.9, upper: 2.9, vmax: 2.0 },
  { name: "J2", origin: [0.12, 0, 0.1], axis: [0, 1, 0], lower: -1.5, upper: 1.9, vmax: 2.0 },
  { name: "J3", origin: [0, 0, 0.55], axis: [0, 1, 0], lower: -1.4, upper: 2.6, vmax: 2.4 },
  { name: "J4", origin: [0.4, 0, 0.06], axis: [1, 0, 0], lower: -3.0, upper: 3.0, vmax: 4.0 },
  { name: "J5", origin: [0.12, 0, 0], axis: [0, 1, 0], lower: -2.1, upper: 2.1, vmax: 4.0 },
  { name: "J6", origin: [0.08, 0, 0], axis: [1, 0, 0], lower: -6.0, upper: 6.0, vmax: 5.5 },
];
export const AXIS_NAMES = JOINTS.map((j) => j.name);
export const DOF = JOINTS.length;
/** Ceiling for the three unused dense columns J7..J9 (they hold 0 at zero velocity). */
export const UNUSED_COLUMN_CEILING = 1.0;
/** Torch: tool frame origin 0.22 m along flange x; tool z axis = flange x (points at the work). */
export const TCP_OFFSET = 0.22;
export const HOME: number[] = [0, -0.2, 0.4, 0, 1.37, 0];

export interface Box { name: string; min: Vec3; max: Vec3 }
export const ENVIRONMENT: Box[] = [
  { name: "floor", min: [-5, -5, -1], max: [5, 5, 0] },
  { name: "weld_table", min: [0.3, -0.4, 0], max: [0.8, 0.4, 0.2] },
];

export const ROBOT_DESCRIPTION = JSON.stringify({ cell: CELL_ID, joints: JOINTS, tcp_offset_m: TCP_OFFSET, home: HOME, environment: ENVIRONMENT });
export const ROBOT_DESCRIPTION_SHA256 = "sha256:" + createHash("sha256").update(ROBOT_DESCRIPTION).digest("hex");

// ---------- small linear algebra ----------
export const add = (a: Vec3, b: Vec3): Vec3 => [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
export const sub = (a: Vec3, b: Vec3): Vec3 => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
export const scale = (a: Vec3, s: number): Vec3 => [a[0] * s, a[1] * s, a[2] * s];
export const dot = (a: Vec3, b: Vec3): number => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
export const cross = (a: Vec3, b: Vec3): Vec3 => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
export const norm = (a: Vec3): number => Math.sqrt(dot(a, a));
export function matMul(A: Mat3, B: Mat3): Mat3 {
  const C: Mat3 = new Array<number>(9).fill(0);
  for (let i = 0; i < 3; i++) for (let j = 0; j < 3; j++) for (let k = 0; k < 3; k++) C[i * 3 + j] += A[i * 3 + k] * B[k * 3 + j];
  return C;
}
export const matVec = (A: Mat3, v: Vec3): Vec3 => [
  A[0] * v[0] + A[1] * v[1] + A[2] * v[2],
  A[3] * v[0] + A[4] * v[1] + A[5] * v[2],
  A[6] * v[0] + A[7] * v[1] + A[8] * v[2],
];
export const transpose = (A: Mat3): Mat3 => [A[0], A[3], A[6], A[1], A[4], A[7], A[2], A[5], A[8]];
export function axisAngle(axis: Vec3, q: number): Mat3 {
  const [x, y, z] = axis; const c = Math.cos(q), s = Math.sin(q), t = 1 - c;
  return [t * x * x + c, t * x * y - s * z, t * x * z + s * y, t * x * y + s * z, t * y * y + c, t * y * z - s * x, t * x * z - s * y, t * y * z + s * x, t * z * z + c];
}
/** URDF convention: R = Rz(yaw) Ry(pitch) Rx(roll). */
export function rpyToMat(rpy: number[]): Mat3 {
  return matMul(axisAngle([0, 0, 1], rpy[2]), matMul(axisAngle([0, 1, 0], rpy[1]), axisAngle([1, 0, 0], rpy[0])));
}
/** Rotation vector (axis x angle) of R. */
export function logRot(R: Mat3): Vec3 {
  const c = Math.min(1, Math.max(-1, (R[0] + R[4] + R[8] - 1) / 2));
  const angle = Math.acos(c);
  const v: Vec3 = [R[7] - R[5], R[2] - R[6], R[3] - R[1]];
  if (angle < 1e-9) return scale(v, 0.5);
  if (Math.PI - angle > 1e-6) return scale(v, angle / (2 * Math.sin(angle)));
  // near pi: axis from the diagonal
  const xx = Math.sqrt(Math.max(0, (R[0] + 1) / 2)), yy = Math.sqrt(Math.max(0, (R[4] + 1) / 2)), zz = Math.sqrt(Math.max(0, (R[8] + 1) / 2));
  let a: Vec3;
  if (xx >= yy && xx >= zz) a = [xx, (R[1] + R[3]) / (4 * xx), (R[2] + R[6]) / (4 * xx)];
  else if (yy >= zz) a = [(R[1] + R[3]) / (4 * yy), yy, (R[5] + R[7]) / (4 * yy)];
  else a = [(R[2] + R[6]) / (4 * zz), (R[5] + R[7]) / (4 * zz), zz];
  return scale(a, angle / norm(a));
}

// ---------- kinematics ----------
export interface FkResult { tool: Pose; jointPos: Vec3[]; jointAxis: Vec3[]; flange: Vec3 }
const TOOL_R = axisAngle([0, 1, 0], Math.PI / 2); // tool z = flange x
export function fk(q: number[]): FkResult {
  let R: Mat3 = [1, 0, 0, 0, 1, 0, 0, 0, 1];
  let p: Vec3 = [0, 0, 0];
  const jointPos: Vec3[] = [], jointAxis: Vec3[] = [];
  for (let i = 0; i < DOF; i++) {
    const J = JOINTS[i];
    p = add(p, matVec(R, J.origin));
    jointPos.push(p);
    jointAxis.push(matVec(R, J.axis));
    R = matMul(R, axisAngle(J.axis, q[i]));
  }
  const flange = p;
  const tcp = add(p, matVec(R, [TCP_OFFSET, 0, 0]));
  return { tool: { R: matMul(R, TOOL_R), p: tcp }, jointPos, jointAxis, flange };
}

function solve6(A: number[][], b: number[]): number[] | null {
  const n = b.length; const M = A.map((r, i) => [...r, b[i]]);
  for (let c = 0; c < n; c++) {
    let piv = c; for (let r = c + 1; r < n; r++) if (Math.abs(M[r][c]) > Math.abs(M[piv][c])) piv = r;
    if (Math.abs(M[piv][c]) < 1e-14) return null;
    [M[c], M[piv]] = [M[piv], M[c]];
    for (let r = 0; r < n; r++) if (r !== c) { const f = M[r][c] / M[c][c]; for (let k = c; k <= n; k++) M[r][k] -= f * M[c][k]; }
  }
  return M.map((r, i) => r[n] / M[i][i]);
}

export function withinLimits(q: number[]): boolean {
  return q.every((v, i) => v >= JOINTS[i].lower - 1e-9 && v <= JOINTS[i].upper + 1e-9);
}

/** Damped least squares IK for the tool pose. Returns null when it does not converge within limits. */
export function ik(target: Pose, seed: number[]): { q: number[] | null; cause: "unreachable" | "joint_limit" | null } {
  let q = seed.slice();
  for (let it = 0; it < 400; it++) {
    const f = fk(q);
    const ep = sub(target.p, f.tool.p);
    const er = logRot(matMul(target.R, transpose(f.tool.R)));
    if (norm(ep) < 1e-7 && norm(er) < 1e-7) {
      if (!withinLimits(q)) return { q: null, cause: "joint_limit" };
      return { q, cause: null };
    }
    const e = [...ep, ...er];
    const J: number[][] = Array.from({ length: 6 }, () => new Array<number>(DOF).fill(0));
    for (let i = 0; i < DOF; i++) {
      const jv = cross(f.jointAxis[i], sub(f.tool.p, f.jointPos[i]));
      for (let r = 0; r < 3; r++) { J[r][i] = jv[r]; J[r + 3][i] = f.jointAxis[i][r]; }
    }
    const lambda2 = 1e-4;
    const JJt = J.map((ri) => J.map((rj) => ri.reduce((s, v, k) => s + v * rj[k], 0)));
    for (let i = 0; i < 6; i++) JJt[i][i] += lambda2;
    const y = solve6(JJt, e);
    if (!y) return { q: null, cause: "unreachable" };
    const dq = new Array<number>(DOF).fill(0);
    for (let i = 0; i < DOF; i++) for (let r = 0; r < 6; r++) dq[i] += J[r][i] * y[r];
    const n = Math.sqrt(dq.reduce((s, v) => s + v * v, 0));
    const k = n > 0.3 ? 0.3 / n : 1;
    q = q.map((v, i) => v + dq[i] * k);
  }
  return { q: null, cause: "unreachable" };
}

// ---------- collision model ----------
interface Capsule { name: string; a: Vec3; b: Vec3; r: number; link: number }
export function capsules(q: number[]): Capsule[] {
  const f = fk(q); const P = f.jointPos;
  return [
    { name: "pedestal", a: [0, 0, 0], b: [0, 0, 0.25], r: 0.1, link: 0 },
    { name: "shoulder", a: P[0], b: P[1], r: 0.09, link: 1 },
    { name: "upper_arm", a: P[1], b: P[2], r: 0.07, link: 2 },
    { name: "forearm", a: P[2], b: P[4], r: 0.06, link: 3 },
    { name: "wrist", a: P[4], b: f.flange, r: 0.05, link: 4 },
    { name: "torch", a: add(f.flange, scale(sub(f.tool.p, f.flange), 0.3)), b: add(f.flange, scale(sub(f.tool.p, f.flange), 0.93)), r: 0.018, link: 5 },
  ];
}

function pointBoxDistance(p: Vec3, b: Box): number {
  let s = 0; let inside = true; let minIn = Infinity;
  for (let i = 0; i < 3; i++) {
    if (p[i] < b.min[i]) { s += (b.min[i] - p[i]) ** 2; inside = false; }
    else if (p[i] > b.max[i]) { s += (p[i] - b.max[i]) ** 2; inside = false; }
    else minIn = Math.min(minIn, p[i] - b.min[i], b.max[i] - p[i]);
  }
  return inside ? -minIn : Math.sqrt(s);
}

function segSegDistance(p1: Vec3, q1: Vec3, p2: Vec3, q2: Vec3): number {
  const d1 = sub(q1, p1), d2 = sub(q2, p2), r = sub(p1, p2);
  const a = dot(d1, d1), e = dot(d2, d2), f = dot(d2, r);
  let s = 0, t = 0;
  if (a <= 1e-12 && e <= 1e-12) return norm(r);
  if (a <= 1e-12) { t = Math.min(1, Math.max(0, f / e)); }
  else {
    const c = dot(d1, r);
    if (e <= 1e-12) { s = Math.min(1, Math.max(0, -c / a)); }
    else {
      const b = dot(d1, d2), den = a * e - b * b;
      s = den > 1e-12 ? Math.min(1, Math.max(0, (b * f - c * e) / den)) : 0;
      t = (b * s + f) / e;
      if (t < 0) { t = 0; s = Math.min(1, Math.max(0, -c / a)); }
      else if (t > 1) { t = 1; s = Math.min(1, Math.max(0, (b - c) / a)); }
    }
  }
  return norm(sub(add(p1, scale(d1, s)), add(p2, scale(d2, t))));
}

/** Clearances in mm: env = robot links (not the pedestal) against boxes; self = non-adjacent link pairs. */
export function clearance(q: number[]): { env: number; self: number } {
  const caps = capsules(q);
  let env = Infinity, self = Infinity;
  for (const c of caps) {
    if (c.link === 0) continue;
    for (const b of ENVIRONMENT) {
      for (let k = 0; k <= 12; k++) {
        const p = add(c.a, scale(sub(c.b, c.a), k / 12));
        env = Math.min(env, pointBoxDistance(p, b) - c.r);
      }
    }
  }
  for (let i = 0; i < caps.length; i++) for (let j = i + 2; j < caps.length; j++) {
    self = Math.min(self, segSegDistance(caps[i].a, caps[i].b, caps[j].a, caps[j].b) - caps[i].r - caps[j].r);
  }
  return { env: env * 1000, self: self * 1000 };
}
