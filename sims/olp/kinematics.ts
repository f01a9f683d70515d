// Forward and inverse kinematics of a robot description (URDF, docs/profile.md "OLP server: robot
// store") for Cartesian jog and moves (document 3 part 1: joint limits only, no collisions). The tool
// chain runs from the root link to the link `tool0`; the six movable joints nearest the tool take part
// in Cartesian motion and any joint further towards the base (a turn, a track) holds its position.
// Inverse kinematics is damped least squares; a solution outside a joint limit or at a singularity
// (smallest singular value of the Jacobian under SINGULAR_SIGMA) is refused with the reason.

import { XMLParser } from 'fast-xml-parser';

export type M4 = number[]; // 4x4 row-major
export type V3 = [number, number, number];

export const TOOL_LINK = 'tool0';
/** Below this smallest singular value of the 6 x 6 Jacobian (metres and radians mixed) a pose is singular. */
export const SINGULAR_SIGMA = 0.01;

export interface ChainJoint {
  name: string;
  type: 'revolute' | 'prismatic' | 'continuous' | 'fixed';
  origin: M4;
  axis: V3;
  lower: number;
  upper: number;
}

export interface Chain {
  joints: ChainJoint[];
  /** Names of the movable joints of the chain, base first. */
  movable: string[];
  /** The movable joints that take part in Cartesian motion (the six nearest the tool). */
  active: string[];
}

const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '', isArray: (n, _path, _leaf, isAttribute) => !isAttribute && (n === 'link' || n === 'joint') });

const nums = (s: string | undefined, d: V3): V3 => {
  if (!s) return d;
  const v = s.trim().split(/\s+/).map(Number);
  return v.length === 3 && v.every(Number.isFinite) ? (v as V3) : d;
};

export function rpyMatrix(r: number, p: number, y: number, xyz: V3 = [0, 0, 0]): M4 {
  const [cr, sr, cp, sp, cy, sy] = [Math.cos(r), Math.sin(r), Math.cos(p), Math.sin(p), Math.cos(y), Math.sin(y)];
  return [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr, xyz[0], sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr, xyz[1], -sp, cp * sr, cp * cr, xyz[2], 0, 0, 0, 1];
}

export function mul4(a: M4, b: M4): M4 {
  const o = new Array<number>(16).fill(0);
  for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) for (let k = 0; k < 4; k++) o[4 * i + j]! += a[4 * i + k]! * b[4 * k + j]!;
  return o;
}

function axisAngle(axis: V3, q: number): M4 {
  const [x, y, z] = axis;
  const c = Math.cos(q);
  const s = Math.sin(q);
  const t = 1 - c;
  return [t * x * x + c, t * x * y - s * z, t * x * z + s * y, 0, t * x * y + s * z, t * y * y + c, t * y * z - s * x, 0, t * x * z - s * y, t * y * z + s * x, t * z * z + c, 0, 0, 0, 0, 1];
}

/** The chain from the root link to `tip` of a URDF text. */
export function chainOf(urdf: string, tip = TOOL_LINK): Chain {
  const doc = parser.parse(urdf) as { robot?: { joint?: Array<Record<string, any>> } };
  const joints = doc.robot?.joint ?? [];
  const byChild = new Map(joints.map((j) => [j.child?.link as string, j]));
  const out: ChainJoint[] = [];
  let link = tip;
  for (let guard = 0; byChild.has(link) && guard < 64; guard++) {
    const j = byChild.get(link)!;
    const axis = nums(j.axis?.xyz, [1, 0, 0]);
    const n = Math.hypot(...axis) || 1;
    out.unshift({
      name: j.name,
      type: j.type,
      origin: rpyMatrix(...nums(j.origin?.rpy, [0, 0, 0]), nums(j.origin?.xyz, [0, 0, 0])),
      axis: axis.map((x) => x / n) as V3,
      lower: Number(j.limit?.lower ?? (j.type === 'continuous' ? -Infinity : 0)),
      upper: Number(j.limit?.upper ?? (j.type === 'continuous' ? Infinity : 0)),
    });
    link = j.parent?.link;
  }
  if (out.length === 0) throw new Error(`no joint chain ends at link ${tip}`);
  const movable = out.filter((j) => j.type !== 'fixed' && j.lower < j.upper).map((j) => j.name);
  if (movable.length < 6) throw new Error(`the chain to ${tip} has ${movable.length} movable joints; Cartesian motion needs six`);
  return { joints: out, movable, active: movable.slice(-6) };
}

/** Tool pose and, per active joint, its world axis and origin (for the Jacobian). */
export function forward(c: Chain, q: Record<string, number>): { pose: M4; frames: Map<string, { axis: V3; origin: V3; type: string }> } {
  let T: M4 = rpyMatrix(0, 0, 0);
  const frames = new Map<string, { axis: V3; origin: V3; type: string }>();
  for (const j of c.joints) {
    T = mul4(T, j.origin);
    if (j.type === 'fixed') continue;
    const v = q[j.name] ?? 0;
    frames.set(j.name, { axis: [T[0]! * j.axis[0] + T[1]! * j.axis[1] + T[2]! * j.axis[2], T[4]! * j.axis[0] + T[5]! * j.axis[1] + T[6]! * j.axis[2], T[8]! * j.axis[0] + T[9]! * j.axis[1] + T[10]! * j.axis[2]], origin: [T[3]!, T[7]!, T[11]!], type: j.type });
    T = mul4(T, j.type === 'prismatic' ? [1, 0, 0, j.axis[0] * v, 0, 1, 0, j.axis[1] * v, 0, 0, 1, j.axis[2] * v, 0, 0, 0, 1] : axisAngle(j.axis, v));
  }
  return { pose: T, frames };
}

const cross = (a: V3, b: V3): V3 => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];

/** The 6 x n geometric Jacobian (rows vx vy vz wx wy wz) over the active joints. */
export function jacobian(c: Chain, q: Record<string, number>): number[][] {
  const { pose, frames } = forward(c, q);
  const p: V3 = [pose[3]!, pose[7]!, pose[11]!];
  const cols = c.active.map((n) => {
    const f = frames.get(n)!;
    if (f.type === 'prismatic') return [...f.axis, 0, 0, 0];
    return [...cross(f.axis, [p[0] - f.origin[0], p[1] - f.origin[1], p[2] - f.origin[2]]), ...f.axis];
  });
  return [0, 1, 2, 3, 4, 5].map((r) => cols.map((col) => col[r]!));
}

/** Pose error [dp; dtheta] from `a` to `b` (rotation error as the axis-angle vector of Rb Ra^T). */
export function poseError(a: M4, b: M4): number[] {
  const R = (m: M4, i: number, j: number) => m[4 * i + j]!;
  const E = [0, 1, 2].map((i) => [0, 1, 2].map((j) => R(b, i, 0) * R(a, j, 0) + R(b, i, 1) * R(a, j, 1) + R(b, i, 2) * R(a, j, 2)));
  const tr = E[0]![0]! + E[1]![1]! + E[2]![2]!;
  const ang = Math.acos(Math.max(-1, Math.min(1, (tr - 1) / 2)));
  const v: V3 = [E[2]![1]! - E[1]![2]!, E[0]![2]! - E[2]![0]!, E[1]![0]! - E[0]![1]!];
  let w: V3;
  if (ang < 1e-9) w = [v[0] / 2, v[1] / 2, v[2] / 2];
  else if (Math.PI - ang < 1e-6) {
    // Near a half turn: the axis from the diagonal.
    const ax = [0, 1, 2].map((i) => Math.sqrt(Math.max(0, (E[i]![i]! + 1) / 2)));
    const k = ax.indexOf(Math.max(...ax));
    const axis = [0, 1, 2].map((i) => (i === k ? ax[k]! : (E[k]![i]! + E[i]![k]!) / (4 * ax[k]!)));
    w = axis.map((x) => x * ang) as V3;
  } else {
    const s = ang / (2 * Math.sin(ang));
    w = [v[0] * s, v[1] * s, v[2] * s];
  }
  return [b[3]! - a[3]!, b[7]! - a[7]!, b[11]! - a[11]!, ...w];
}

/** Solve A x = b (A square) by Gaussian elimination with partial pivoting. */
export function solve(A: number[][], b: number[]): number[] {
  const n = b.length;
  const M = A.map((r, i) => [...r, b[i]!]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(M[r]![c]!) > Math.abs(M[p]![c]!)) p = r;
    [M[c], M[p]] = [M[p]!, M[c]!];
    const d = M[c]![c]! || 1e-300;
    for (let r = c + 1; r < n; r++) {
      const f = M[r]![c]! / d;
      for (let k = c; k <= n; k++) M[r]![k]! -= f * M[c]![k]!;
    }
  }
  const x = new Array<number>(n).fill(0);
  for (let r = n - 1; r >= 0; r--) {
    let s = M[r]![n]!;
    for (let k = r + 1; k < n; k++) s -= M[r]![k]! * x[k]!;
    x[r] = s / (M[r]![r]! || 1e-300);
  }
  return x;
}

/** Damped least squares step: J^T (J J^T + lambda^2 I)^-1 e. */
export function dls(J: number[][], e: number[], lambda: number): number[] {
  const m = J.length;
  const n = J[0]!.length;
  const A = Array.from({ length: m }, (_x, i) => Array.from({ length: m }, (_y, j) => J[i]!.reduce((s, v, k) => s + v * J[j]![k]!, 0) + (i === j ? lambda * lambda : 0)));
  const y = solve(A, e);
  return Array.from({ length: n }, (_x, k) => J.reduce((s, row, i) => s + row[k]! * y[i]!, 0));
}

/** Smallest singular value of J (square root of the smallest eigenvalue of J J^T, Jacobi rotations). */
export function sigmaMin(J: number[][]): number {
  const m = J.length;
  const A = Array.from({ length: m }, (_x, i) => Array.from({ length: m }, (_y, j) => J[i]!.reduce((s, v, k) => s + v * J[j]![k]!, 0)));
  for (let sweep = 0; sweep < 50; sweep++) {
    let off = 0;
    for (let p = 0; p < m; p++) for (let q = p + 1; q < m; q++) off += A[p]![q]! ** 2;
    if (off < 1e-22) break;
    for (let p = 0; p < m; p++) {
      for (let q = p + 1; q < m; q++) {
        if (Math.abs(A[p]![q]!) < 1e-300) continue;
        const theta = (A[q]![q]! - A[p]![p]!) / (2 * A[p]![q]!);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < m; k++) {
          const akp = A[k]![p]!;
          const akq = A[k]![q]!;
          A[k]![p] = c * akp - s * akq;
          A[k]![q] = s * akp + c * akq;
        }
        for (let k = 0; k < m; k++) {
          const apk = A[p]![k]!;
          const aqk = A[q]![k]!;
          A[p]![k] = c * apk - s * aqk;
          A[q]![k] = s * apk + c * aqk;
        }
      }
    }
  }
  return Math.sqrt(Math.max(0, Math.min(...A.map((r, i) => r[i]!))));
}

export type IkResult =
  | { ok: true; q: Record<string, number>; iterations: number; error_m: number; error_rad: number; sigma_min: number }
  | { ok: false; reason: 'unreachable' | 'joint_limit' | 'singularity'; detail: string; q?: Record<string, number>; joint?: string; value?: number; limit?: number; sigma_min?: number };

/**
 * Inverse kinematics by damped least squares from `seed` (every joint of the chain; inactive ones hold).
 * Converged within 1e-6 m and 1e-6 rad, then checked: a joint outside its limits is joint_limit, a
 * Jacobian whose smallest singular value is under SINGULAR_SIGMA is singularity.
 */
export function inverse(c: Chain, target: M4, seed: Record<string, number>, maxIterations = 200): IkResult {
  const q = { ...seed };
  let it = 0;
  let e: number[] = [];
  for (; it < maxIterations; it++) {
    e = poseError(forward(c, q).pose, target);
    const ep = Math.hypot(e[0]!, e[1]!, e[2]!);
    const er = Math.hypot(e[3]!, e[4]!, e[5]!);
    if (ep < 1e-6 && er < 1e-6) break;
    const J = jacobian(c, q);
    // Damping grows near a singularity, so a step never explodes there.
    const s = sigmaMin(J);
    const lambda = s < 0.05 ? 0.05 : 0.005;
    const dq = dls(J, e, lambda);
    const big = Math.max(...dq.map(Math.abs));
    const k = big > 0.3 ? 0.3 / big : 1;
    c.active.forEach((n, i) => (q[n] = q[n]! + k * dq[i]!));
  }
  const ep = Math.hypot(e[0]!, e[1]!, e[2]!);
  const er = Math.hypot(e[3]!, e[4]!, e[5]!);
  const J = jacobian(c, q);
  const sigma = sigmaMin(J);
  if (!(ep < 1e-6 && er < 1e-6)) {
    if (sigma < SINGULAR_SIGMA) return { ok: false, reason: 'singularity', detail: `no solution away from a singularity: the Jacobian's smallest singular value is ${sigma.toExponential(3)} (under ${SINGULAR_SIGMA})`, q, sigma_min: sigma };
    return { ok: false, reason: 'unreachable', detail: `no solution: ${ep.toExponential(3)} m and ${er.toExponential(3)} rad from the pose after ${it} iterations`, q };
  }
  for (const n of c.active) {
    const j = c.joints.find((x) => x.name === n)!;
    if (q[n]! < j.lower || q[n]! > j.upper) {
      const limit = q[n]! < j.lower ? j.lower : j.upper;
      return { ok: false, reason: 'joint_limit', detail: `the solution has ${n} at ${q[n]!.toFixed(6)}, outside ${j.lower}..${j.upper}`, q, joint: n, value: q[n]!, limit };
    }
  }
  if (sigma < SINGULAR_SIGMA) return { ok: false, reason: 'singularity', detail: `the pose is at a singularity: the Jacobian's smallest singular value is ${sigma.toExponential(3)} (under ${SINGULAR_SIGMA})`, q, sigma_min: sigma };
  return { ok: true, q, iterations: it, error_m: ep, error_rad: er, sigma_min: sigma };
}

/** Pose matrix from xyz and rpy (R = Rz(yaw) Ry(pitch) Rx(roll)). */
export function poseOf(xyz: V3, rpy: V3): M4 {
  return rpyMatrix(rpy[0], rpy[1], rpy[2], xyz);
}

/** xyz and rpy of a pose matrix. */
export function xyzRpy(T: M4): { xyz_m: V3; rpy_rad: V3 } {
  const pitch = Math.asin(Math.max(-1, Math.min(1, -T[8]!)));
  const roll = Math.abs(Math.cos(pitch)) < 1e-9 ? 0 : Math.atan2(T[9]!, T[10]!);
  const yaw = Math.abs(Math.cos(pitch)) < 1e-9 ? Math.atan2(-T[1]!, T[5]!) : Math.atan2(T[4]!, T[0]!);
  return { xyz_m: [T[3]!, T[7]!, T[11]!], rpy_rad: [roll, pitch, yaw] };
}

/** Interpolate poses: position linearly, rotation along the geodesic (axis-angle scaled by u). */
export function interpolate(a: M4, b: M4, u: number): M4 {
  const e = poseError(a, b);
  const w: V3 = [e[3]! * u, e[4]! * u, e[5]! * u];
  const ang = Math.hypot(...w);
  const R = ang < 1e-12 ? rpyMatrix(0, 0, 0) : axisAngle([w[0] / ang, w[1] / ang, w[2] / ang], ang);
  const out = mul4(R, [a[0]!, a[1]!, a[2]!, 0, a[4]!, a[5]!, a[6]!, 0, a[8]!, a[9]!, a[10]!, 0, 0, 0, 0, 1]);
  out[3] = a[3]! + e[0]! * u;
  out[7] = a[7]! + e[1]! * u;
  out[11] = a[11]! + e[2]! * u;
  return out;
}
