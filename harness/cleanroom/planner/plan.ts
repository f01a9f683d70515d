// Planning: weldplan container -> plan result document (+ dense trajectory file when asked and admissible).
import { createHash } from "node:crypto";
import {
  AXIS_NAMES, CELL_ID, DOF, HOME, JOINTS, ROBOT_DESCRIPTION_SHA256, UNUSED_COLUMN_CEILING,
  type Mat3, type Pose, type Vec3, add, axisAngle, clearance, fk, ik, logRot, matMul, matVec, norm, rpyToMat, scale, sub, transpose,
} from "./cell.js";
import { AXIS_COUNT, DenseFormatError, MAX_SAMPLES, decodeDense, encodeDense, type Revision, type Sample, type SegmentIn, type SegmentKind } from "./dense.js";
import { readZip } from "./zip.js";

export const RESULT_SCHEMA = "amr-weld-planner-v1.motion-plan-result.v1";
export const PROGRAM_SCHEMA = "robot.v4.program.v2";
export const DT = 0.01;
export const TRACKING_TOLERANCE_MM = 0.5;
/** Planned joint speeds stay at or below this fraction of each ceiling. */
export const SPEED_FRACTION = 0.6;
export const LATTICE_DT_S = 0.2;
export const DEFAULT_MOVE_SPEED_MM_S = 100;
export const IDENTIFIER_RE = /^[A-Za-z0-9._:-]+$/;

export interface PlanOptions {
  k_best: number; screen_collisions: boolean; samples_per_seam: number | null; run_weld_trajopt: boolean;
  run_connecting_trajopt: boolean; free_space_backend: "bspline" | "curobo" | "legacy"; verify: boolean;
  verify_margin_mm: number; order_seams: boolean; dense: boolean; program_id: string; manifest_revision: Revision; plan_revision: Revision;
}

/** A planning failure that the service answers with 422 {error: "<type>: <message>"}. */
export class PlanFailure extends Error {
  constructor(public type: string, message: string) { super(message); }
  get text(): string { return `${this.type}: ${this.message}`; }
}

export interface PlanOutput { result: Record<string, any>; dense: { blob: Buffer; digest: string } | null }

const deg = (r: number): number => (r * 180) / Math.PI;
const r6 = (x: number): number => Math.round(x * 1e6) / 1e6;
const degRow = (q: number[]): number[] => q.map((v) => r6(deg(v)));

// ---------------------------------------------------------------- Hermite trajectories
export interface Traj { knots: number[][]; vel: number[][]; times: number[] }

export function evalTraj(tr: Traj, t: number): { q: number[]; qd: number[] } {
  const n = tr.times.length;
  if (t <= tr.times[0]) return { q: tr.knots[0].slice(), qd: tr.vel[0].slice() };
  if (t >= tr.times[n - 1]) return { q: tr.knots[n - 1].slice(), qd: tr.vel[n - 1].slice() };
  let i = 0; while (i < n - 2 && t > tr.times[i + 1]) i++;
  const h = tr.times[i + 1] - tr.times[i], s = (t - tr.times[i]) / h;
  const s2 = s * s, s3 = s2 * s;
  const h00 = 2 * s3 - 3 * s2 + 1, h10 = s3 - 2 * s2 + s, h01 = -2 * s3 + 3 * s2, h11 = s3 - s2;
  const d00 = 6 * s2 - 6 * s, d10 = 3 * s2 - 4 * s + 1, d01 = -6 * s2 + 6 * s, d11 = 3 * s2 - 2 * s;
  const p0 = tr.knots[i], p1 = tr.knots[i + 1], m0 = tr.vel[i], m1 = tr.vel[i + 1];
  return {
    q: p0.map((_, a) => h00 * p0[a] + h10 * h * m0[a] + h01 * p1[a] + h11 * h * m1[a]),
    qd: p0.map((_, a) => (d00 * p0[a] + d10 * h * m0[a] + d01 * p1[a] + d11 * h * m1[a]) / h),
  };
}
const duration = (tr: Traj): number => tr.times[tr.times.length - 1];

/** Stretch time uniformly by factor f (>= 1): times * f, velocities / f. */
function stretch(tr: Traj, f: number): Traj {
  return { knots: tr.knots, vel: tr.vel.map((v) => v.map((x) => x / f)), times: tr.times.map((t) => t * f) };
}

/**
 * Final timing: keep every sampled joint speed at or below SPEED_FRACTION of its ceiling, apply the plan
 * speed scale, then round the duration up to a whole number of DT (so the dense file resamples it exactly).
 */
function finishTiming(tr: Traj, speedScale: number): Traj {
  let peak = 0;
  const T = duration(tr);
  for (let k = 0; k <= Math.ceil(T / (DT / 4)); k++) {
    const { qd } = evalTraj(tr, Math.min(T, (k * DT) / 4));
    qd.forEach((v, a) => { peak = Math.max(peak, Math.abs(v) / (SPEED_FRACTION * JOINTS[a].vmax)); });
  }
  let out = peak > 1 ? stretch(tr, peak) : tr;
  if (speedScale < 1) out = stretch(out, 1 / speedScale);
  const n = Math.max(1, Math.ceil(duration(out) / DT - 1e-9));
  out = stretch(out, (n * DT) / duration(out));
  out.times[out.times.length - 1] = n * DT;
  return out;
}

/** Knots at rest at both ends; interior velocities from neighbouring knots (Catmull-Rom in time). */
function hermiteThrough(knots: number[][], times: number[], restInterior: boolean): Traj {
  const vel = knots.map((q, i) => {
    if (i === 0 || i === knots.length - 1 || restInterior) return q.map(() => 0);
    return q.map((_, a) => (knots[i + 1][a] - knots[i - 1][a]) / (times[i + 1] - times[i - 1]));
  });
  return { knots, vel, times };
}

/** Joint-space move through via knots, stopping at each, each interval timed from the joint ceilings. */
function jointMove(knots: number[][]): Traj {
  const times = [0];
  for (let i = 1; i < knots.length; i++) {
    let T = 0.3;
    for (let a = 0; a < DOF; a++) T = Math.max(T, (1.5 * Math.abs(knots[i][a] - knots[i - 1][a])) / (SPEED_FRACTION * JOINTS[a].vmax));
    times.push(times[i - 1] + T);
  }
  return hermiteThrough(knots, times, true);
}

// ---------------------------------------------------------------- verification
export interface Verdict { verdict: string; collisions: number; penetrating: number; limit_violations: number; unverifiable: number; worst_clearance_mm: number | null }

function sampleTimes(tr: Traj): number[] {
  const T = duration(tr); const n = Math.round(T / DT); const ts: number[] = [];
  for (let k = 0; k <= n; k++) ts.push(k === n ? T : k * DT);
  return ts;
}

function verifyTraj(tr: Traj, o: PlanOptions): { verdict: Verdict; env: number; self: number } {
  if (!o.verify) return { verdict: { verdict: "NOT_RUN", collisions: 0, penetrating: 0, limit_violations: 0, unverifiable: 1, worst_clearance_mm: null }, env: NaN, self: NaN };
  const finite = tr.knots.every((q) => q.every(Number.isFinite)) && tr.vel.every((q) => q.every(Number.isFinite)) && tr.times.every(Number.isFinite);
  if (!finite || tr.times.length < 2) return { verdict: { verdict: "REFUSED", collisions: 0, penetrating: 0, limit_violations: 0, unverifiable: 1, worst_clearance_mm: null }, env: NaN, self: NaN };
  let collisions = 0, penetrating = 0, limits = 0, env = Infinity, self = Infinity;
  for (const t of sampleTimes(tr)) {
    const { q, qd } = evalTraj(tr, t);
    if (q.some((v, a) => v < JOINTS[a].lower - 1e-9 || v > JOINTS[a].upper + 1e-9) || qd.some((v, a) => Math.abs(v) > JOINTS[a].vmax)) limits++;
    const c = clearance(q); const m = Math.min(c.env, c.self);
    env = Math.min(env, c.env); self = Math.min(self, c.self);
    if (m < o.verify_margin_mm) collisions++;
    if (m < 0) penetrating++;
  }
  const ok = collisions === 0 && penetrating === 0 && limits === 0;
  return { verdict: { verdict: ok ? "PASS" : "FAIL", collisions, penetrating, limit_violations: limits, unverifiable: 0, worst_clearance_mm: r6(Math.min(env, self)) }, env, self };
}

function routeIsClear(tr: Traj, marginMm: number): boolean {
  for (const t of sampleTimes(tr)) {
    const { q } = evalTraj(tr, t);
    const c = clearance(q);
    if (Math.min(c.env, c.self) < marginMm) return false;
  }
  return true;
}

// ---------------------------------------------------------------- geometry
function expRot(w: Vec3): Mat3 { const a = norm(w); return a < 1e-12 ? [1, 0, 0, 0, 1, 0, 0, 0, 1] : axisAngle(scale(w, 1 / a), a); }

interface PathPoint { p: Vec3; R: Mat3 }
/** A posed path in world coordinates with arc-length parameter. */
class PosedPath {
  readonly cum: number[] = [0];
  constructor(readonly pts: PathPoint[]) {
    for (let i = 1; i < pts.length; i++) this.cum.push(this.cum[i - 1] + norm(sub(pts[i].p, pts[i - 1].p)));
  }
  get length(): number { return this.cum[this.cum.length - 1]; }
  at(s: number): PathPoint {
    const L = this.length * Math.min(1, Math.max(0, s));
    let i = 0; while (i < this.pts.length - 2 && L > this.cum[i + 1]) i++;
    const seg = this.cum[i + 1] - this.cum[i]; const u = seg > 0 ? (L - this.cum[i]) / seg : 0;
    const a = this.pts[i], b = this.pts[i + 1];
    return { p: add(a.p, scale(sub(b.p, a.p), u)), R: matMul(a.R, expRot(scale(logRot(matMul(transpose(a.R), b.R)), u))) };
  }
  distanceTo(x: Vec3): number {
    let best = Infinity;
    for (let i = 0; i + 1 < this.pts.length; i++) {
      const a = this.pts[i].p, d = sub(this.pts[i + 1].p, a); const dd = d[0] ** 2 + d[1] ** 2 + d[2] ** 2;
      const u = dd > 0 ? Math.min(1, Math.max(0, ((x[0] - a[0]) * d[0] + (x[1] - a[1]) * d[1] + (x[2] - a[2]) * d[2]) / dd)) : 0;
      best = Math.min(best, norm(sub(x, add(a, scale(d, u)))));
    }
    return best;
  }
}

function scalarFn(f: any, s: number, what: string): number {
  if (!f || typeof f !== "object") throw new PlanFailure("ValueError", `${what} must be a scalar function`);
  switch (f.kind) {
    case "constant": return num(f.value, what);
    case "piecewise_linear": case "samples": {
      const xs: number[] = f.kind === "samples" ? f.s : (f.knots ?? []).map((k: number[]) => k[0]);
      const ys: number[] = f.kind === "samples" ? f.values : (f.knots ?? []).map((k: number[]) => k[1]);
      if (!Array.isArray(xs) || !Array.isArray(ys) || xs.length < 1 || xs.length !== ys.length) throw new PlanFailure("ValueError", `${what}: bad ${f.kind}`);
      if (s <= xs[0]) return ys[0];
      for (let i = 1; i < xs.length; i++) if (s <= xs[i]) return ys[i - 1] + ((ys[i] - ys[i - 1]) * (s - xs[i - 1])) / (xs[i] - xs[i - 1]);
      return ys[ys.length - 1];
    }
    case "bspline": {
      const p: number = f.degree, U: number[] = f.knots_u, c: number[] = f.control_values;
      if (!Number.isInteger(p) || !Array.isArray(U) || !Array.isArray(c) || U.length !== c.length + p + 1) throw new PlanFailure("ValueError", `${what}: bad bspline`);
      let k = p; while (k < c.length - 1 && s >= U[k + 1]) k++;
      const d = c.slice(k - p, k + 1);
      for (let r = 1; r <= p; r++) for (let j = p; j >= r; j--) {
        const i = k - p + j; const den = U[i + p - r + 1] - U[i];
        const al = den === 0 ? 0 : (s - U[i]) / den;
        d[j] = (1 - al) * d[j - 1] + al * d[j];
      }
      return d[p];
    }
    default: throw new PlanFailure("ValueError", `${what}: unknown scalar function kind ${JSON.stringify(f.kind)}`);
  }
}
function num(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isFinite(v)) throw new PlanFailure("ValueError", `${what} must be a finite number`);
  return v;
}
function vec3(v: unknown, what: string): Vec3 {
  if (!Array.isArray(v) || v.length !== 3) throw new PlanFailure("ValueError", `${what} must be 3 numbers`);
  return [num(v[0], what), num(v[1], what), num(v[2], what)];
}

// ---------------------------------------------------------------- container and program
export interface Container { program: any; calibrationSha256: string | null }

export function readContainer(body: Buffer): Container {
  let files: Map<string, Buffer>;
  try { files = readZip(body); } catch (e) { throw new PlanFailure("BadZipFile", (e as Error).message); }
  const man = files.get("manifest.json");
  if (man) {
    let m: any;
    try { m = JSON.parse(man.toString("utf8")); } catch { throw new PlanFailure("ValueError", "manifest.json is not JSON"); }
    const listed = m && typeof m.files === "object" && m.files ? m.files : {};
    for (const [name, want] of Object.entries(listed)) {
      const f = files.get(name);
      const got = f ? createHash("sha256").update(f).digest("hex") : null;
      const w = String(want).replace(/^sha256:/, "");
      if (got !== w) throw new PlanFailure("DigestMismatch", `${name}: manifest says ${w}, content is ${got ?? "missing"}`);
    }
  }
  let raw = files.get("program.json");
  if (!raw) {
    const cands = [...files.entries()].filter(([n, b]) => n.endsWith(".json") && n !== "manifest.json" && (() => { try { return JSON.parse(b.toString("utf8"))?.schema === PROGRAM_SCHEMA; } catch { return false; } })());
    if (cands.length !== 1) throw new PlanFailure("ValueError", `container must hold program.json (or exactly one ${PROGRAM_SCHEMA} document); found ${cands.length}`);
    raw = cands[0][1];
  }
  let program: any;
  try { program = JSON.parse(raw.toString("utf8")); } catch (e) { throw new PlanFailure("ValueError", `program is not JSON: ${(e as Error).message}`); }
  if (!program || typeof program !== "object" || program.schema !== PROGRAM_SCHEMA) throw new PlanFailure("ValueError", `program schema ${JSON.stringify(program?.schema)} is not ${PROGRAM_SCHEMA}`);
  const cal = files.get("machine_planning_calibration.json");
  return { program, calibrationSha256: cal ? "sha256:" + createHash("sha256").update(cal).digest("hex") : null };
}

const OPS = new Set(["weld", "approach", "transit", "retract", "home", "move", "dwell", "io"]);

function checkProgram(p: any): any[] {
  const bad = (m: string): never => { throw new PlanFailure("ValueError", m); };
  if (!Array.isArray(p.nodes) || p.nodes.length < 1 || p.nodes.length > 4096) bad("nodes must hold 1..4096 nodes");
  if (!p.placement || typeof p.placement.cell_id !== "string") bad("placement.cell_id missing");
  if (!p.robot || typeof p.robot.model_id !== "string") bad("robot.model_id missing");
  if (p.placement.cell_id !== p.robot.model_id) bad(`placement.cell_id ${p.placement.cell_id} differs from robot.model_id ${p.robot.model_id}`);
  if (p.placement.cell_id !== CELL_ID) throw new PlanFailure("FileNotFoundError", `no cell meshes for cell ${JSON.stringify(p.placement.cell_id)} (this planner has ${CELL_ID})`);
  const rd = p.robot.robot_description_sha256;
  if (typeof rd === "string" && rd !== "sha256:" + "0".repeat(64) && rd !== ROBOT_DESCRIPTION_SHA256) bad(`robot_description_sha256 ${rd} does not match cell ${CELL_ID} (${ROBOT_DESCRIPTION_SHA256})`);
  const ids = new Set<string>();
  for (const n of p.nodes) {
    if (!n || typeof n.id !== "string" || !n.id) bad("every node needs an id");
    if (ids.has(n.id)) bad(`duplicate node id ${n.id}`);
    ids.add(n.id);
    if (!OPS.has(n.op)) bad(`node ${n.id}: unknown op ${JSON.stringify(n.op)}`);
  }
  const enabled = p.nodes.filter((n: any) => n.enabled !== false);
  // motion grammar over enabled nodes, ignoring dwell, io and move: home? approach weld (transit weld)* retract home?
  const seq = enabled.filter((n: any) => !["dwell", "io", "move"].includes(n.op)).map((n: any) => n.op as string);
  if (seq.length) {
    const letters = seq.map((o: string) => ({ home: "h", approach: "a", weld: "w", transit: "t", retract: "r" } as Record<string, string>)[o]).join("");
    if (!/^h?aw(tw)*rh?$/.test(letters)) bad(`node order ${seq.join(" ")} does not match home? approach weld (transit weld)* retract home?`);
  }
  return enabled;
}

function wpFrame(p: any): Pose {
  const pl = p.placement;
  const t = add(vec3(pl.anchor_xyz_m ?? [0, 0, 0], "placement.anchor_xyz_m"), vec3(pl.offset_xyz_m ?? [0, 0, 0], "placement.offset_xyz_m"));
  return { R: rpyToMat(vec3(pl.rpy_rad ?? [0, 0, 0], "placement.rpy_rad")), p: t };
}
const toWorld = (F: Pose, x: PathPoint): PathPoint => ({ p: add(F.p, matVec(F.R, x.p)), R: matMul(F.R, x.R) });

function weldPath(node: any, F: Pose, wpId: string): PosedPath {
  const g = node.geometry;
  if (!g || (g.kind !== "posed_polyline" && g.kind !== "manual_pose_wp"))
    throw new PlanFailure("NotImplementedError", `weld ${node.id}: geometry kind ${JSON.stringify(g?.kind)} is not supported by this planner`);
  if (!Array.isArray(g.points) || g.points.length < 2) throw new PlanFailure("ValueError", `weld ${node.id}: at least two points`);
  const frame: Pose = g.frame_id === "world" ? { R: [1, 0, 0, 0, 1, 0, 0, 0, 1], p: [0, 0, 0] } : F;
  if (g.frame_id !== "world" && g.frame_id !== wpId) throw new PlanFailure("ValueError", `weld ${node.id}: unknown frame ${g.frame_id}`);
  return new PosedPath(g.points.map((pt: any, i: number) => toWorld(frame, { p: vec3(pt.xyz_m, `weld ${node.id} point ${i}`), R: rpyToMat(vec3(pt.rpy_rad, `weld ${node.id} point ${i}`)) })));
}

/** Torch pose for a point on the path: TCP sits standoff back along the torch axis (tool z points at the work). */
const torchPose = (x: PathPoint, standoffM: number): Pose => ({ R: x.R, p: sub(x.p, scale([x.R[2], x.R[5], x.R[8]], standoffM)) });

// ---------------------------------------------------------------- seams
interface SeamPlan {
  id: string; node: any; path: PosedPath; tcpPath: PosedPath; lattice: Pose[]; s: number[]; times: number[];
  candidates: { cost: number; q: number[][] }[]; crossed: boolean; frontier: any; causes: string[];
  traj: Traj | null; out: Record<string, any>;
  /** Samples the weld alone would take in the dense file when that is more than MAX_SAMPLES (else 0): no trajectory is built for it. */
  overflowSamples: number;
}

function seeds(): number[][] {
  const out: number[][] = [HOME.slice()];
  for (const d1 of [-0.6, 0.6]) out.push(HOME.map((v, i) => (i === 0 ? v + d1 : v)));
  out.push(HOME.map((v, i) => (i === 3 ? v + Math.PI : i === 4 ? -v : i === 5 ? v + Math.PI : v)));
  out.push(HOME.map((v, i) => (i === 5 ? v - Math.PI : v)));
  out.push(HOME.map((v, i) => (i === 5 ? v + Math.PI : v)));
  out.push([0, 0.6, 0.2, 0, 0.8, 0]);
  out.push([0, 0.3, 1.2, 0, -0.2, 0]);
  return out;
}

function planSeam(node: any, F: Pose, wpId: string, o: PlanOptions, speedScale: number): SeamPlan {
  const path = weldPath(node, F, wpId);
  const speed = num(node.travel_speed_mm_s, `weld ${node.id} travel_speed_mm_s`) / 1000;
  if (speed <= 0) throw new PlanFailure("ValueError", `weld ${node.id}: travel_speed_mm_s must be positive`);
  const L = path.length;
  // Changed after integration: a weld slower than the dense file can hold (document 2 part 8: 250000 samples)
  // is answered with dense_error sample_count_overflow, not by allocating its samples (a crash on valid input).
  const weldSamples = Math.ceil(L / speed / DT) + 1;
  const overflowSamples = weldSamples > MAX_SAMPLES ? weldSamples : 0;
  const n = o.samples_per_seam ?? (overflowSamples ? 512 : Math.max(2, Math.ceil(L / (speed * LATTICE_DT_S)) + 1));
  const s: number[] = Array.from({ length: n }, (_, i) => i / (n - 1));
  const lattice = s.map((si) => {
    const so = scalarFn(node.standoff_mm, si, `weld ${node.id} standoff_mm`);
    if (!(so > 0)) throw new PlanFailure("ValueError", `weld ${node.id}: standoff_mm must be positive`);
    return torchPose(path.at(si), so / 1000);
  });
  const tcpPath = new PosedPath(lattice.map((x) => ({ p: x.p, R: x.R })));
  const times = s.map((si) => (si * L) / speed);

  // candidate lattice paths from several start solutions
  const starts: number[][] = [];
  let furthest = -1; let causes = new Set<string>();
  const note = (i: number, c: string): void => { if (i > furthest) { furthest = i; causes = new Set([c]); } else if (i === furthest) causes.add(c); };
  for (const seed of seeds()) {
    const r = ik(lattice[0], seed);
    if (!r.q) { note(0, r.cause ?? "unreachable"); continue; }
    if (!starts.some((q) => q.every((v, a) => Math.abs(v - r.q![a]) < 0.05))) starts.push(r.q);
  }
  const candidates: { cost: number; q: number[][] }[] = [];
  for (const q0 of starts) {
    const qs = [q0]; let ok = true;
    for (let i = 0; i < n && ok; i++) {
      if (i > 0) {
        const r = ik(lattice[i], qs[i - 1]);
        if (!r.q) { note(i, r.cause ?? "unreachable"); ok = false; break; }
        if (r.q.some((v, a) => Math.abs(v - qs[i - 1][a]) > 0.5)) { note(i, "configuration_flip"); ok = false; break; }
        qs.push(r.q);
      }
      if (o.screen_collisions) {
        const c = clearance(qs[i]);
        if (Math.min(c.env, c.self) < o.verify_margin_mm) { note(i, "collision"); ok = false; }
      }
    }
    if (!ok) continue;
    let cost = Math.sqrt(q0.reduce((a, v, k) => a + deg(v - HOME[k]) ** 2, 0));
    for (let i = 1; i < n; i++) cost += Math.sqrt(qs[i].reduce((a, v, k) => a + deg(v - qs[i - 1][k]) ** 2, 0));
    candidates.push({ cost, q: qs });
  }
  candidates.sort((a, b) => a.cost - b.cost);
  candidates.splice(o.k_best);
  const crossed = candidates.length > 0;
  const seam: SeamPlan = {
    id: node.id, node, path, tcpPath, lattice, s, times, candidates, crossed,
    frontier: crossed ? null : { index: Math.max(0, furthest), s: s[Math.max(0, furthest)], xyz_m: lattice[Math.max(0, furthest)].p.map(r6) },
    causes: crossed ? [] : [...causes].sort(), traj: null, out: {}, overflowSamples,
  };
  if (crossed && o.run_weld_trajopt && !overflowSamples) {
    const t = times.slice();
    // ends at rest: give the first and last interval half again as long
    if (n > 2) { const d0 = t[1] * 0.5, d1 = (t[n - 1] - t[n - 2]) * 0.5; for (let i = 1; i < n; i++) t[i] += d0; t[n - 1] += d1; }
    seam.traj = finishTiming(hermiteThrough(candidates[0].q, t, false), speedScale);
  }
  return seam;
}

function tracking(seam: SeamPlan): { sampled: { knots: number[]; midpoints: number[] }; tracking: Record<string, any> } {
  const tr = seam.traj!;
  const dev = (t: number): number => seam.tcpPath.distanceTo(fk(evalTraj(tr, t).q).tool.p) * 1000;
  const knots = tr.times.map((t) => r6(dev(t)));
  const midpoints = tr.times.slice(1).map((t, i) => r6(dev((t + tr.times[i]) / 2)));
  const h = DT / 4; let worst = 0, out = 0, undecided = 0, unverifiable = 0, bound = 0;
  for (let i = 0; i + 1 < tr.times.length; i++) {
    let w = 0, vmax = 0; let prev: Vec3 | null = null;
    const a = tr.times[i], b = tr.times[i + 1]; const m = Math.max(2, Math.ceil((b - a) / h));
    for (let k = 0; k <= m; k++) {
      const t = a + ((b - a) * k) / m; const p = fk(evalTraj(tr, t).q).tool.p;
      const d = seam.tcpPath.distanceTo(p) * 1000;
      if (!Number.isFinite(d)) unverifiable++;
      w = Math.max(w, d);
      if (prev) vmax = Math.max(vmax, (norm(sub(p, prev)) * 1000) / ((b - a) / m));
      prev = p;
    }
    const bd = w + (1.5 * vmax * ((b - a) / m)) / 2;
    worst = Math.max(worst, w); bound = Math.max(bound, bd);
    if (w > TRACKING_TOLERANCE_MM) out++; else if (bd > TRACKING_TOLERANCE_MM) undecided++;
  }
  const pass = out === 0 && undecided === 0 && unverifiable === 0;
  return {
    sampled: { knots, midpoints },
    tracking: { verdict: pass ? "PASS" : "FAIL", tolerance_mm: TRACKING_TOLERANCE_MM, bound_mm: r6(bound), worst_seen_mm: r6(worst), segments_out: out, undecided, unverifiable },
  };
}

// ---------------------------------------------------------------- connecting moves
interface Conn { kind: string; from: string | null; to: string | null; node_id: string | null; traj: Traj; verdict?: Verdict; env?: number; self?: number }

function standoffPose(tcp: Pose, so: any, F: Pose, what: string): Pose | null {
  if (!so) return null;
  const d = num(so.distance_mm, `${what}.distance_mm`) / 1000;
  if (d <= 0) return null;
  let dir: Vec3;
  if (so.direction === "torch_axis") dir = scale([tcp.R[2], tcp.R[5], tcp.R[8]], -1);
  else if (so.direction === "workpiece_z") dir = [F.R[2], F.R[5], F.R[8]];
  else { const v = matVec(F.R, vec3(so.direction, `${what}.direction`)); const l = norm(v); if (l === 0) throw new PlanFailure("ValueError", `${what}.direction is zero`); dir = scale(v, 1 / l); }
  return { R: tcp.R, p: add(tcp.p, scale(dir, d)) };
}
const lifted = (x: Pose, dz: number): Pose => ({ R: x.R, p: add(x.p, [0, 0, dz]) });

class JoinError extends Error {}

function solveVia(pose: Pose, seed: number[], what: string): number[] {
  const r = ik(pose, seed);
  if (!r.q) throw new JoinError(`${what}: ${r.cause}`);
  return r.q;
}

/** Route start -> vias -> end; when screening, try lifted detours, then a detour through home, until the route clears the margin. */
function route(start: number[], vias: number[][], end: number[], o: PlanOptions, what: string): Traj {
  const dedupe = (k: number[][]): number[][] => {
    const out = k.filter((q, i) => i === 0 || q.some((v, a) => Math.abs(v - k[i - 1][a]) > 1e-12));
    return out.length >= 2 ? out : [start, end];
  };
  const direct = [start, ...vias, end];
  if (!o.screen_collisions) return jointMove(dedupe(direct));
  const tries: number[][][] = [direct];
  const first = vias[0] ?? end;
  for (const dz of [0.15, 0.3]) {
    try {
      const a = solveVia(lifted(fk(start).tool, dz), start, what);
      const b = solveVia(lifted(fk(first).tool, dz), first, what);
      tries.push([start, a, b, ...vias, end]);
    } catch { /* no lifted detour at this height */ }
  }
  tries.push([start, HOME, ...vias, end]);
  for (const k of tries) {
    const tr = jointMove(dedupe(k));
    if (routeIsClear(tr, o.verify_margin_mm)) return tr;
  }
  throw new JoinError(`${what}: no collision-free connection found`);
}

function teachTarget(node: any, cur: number[], F: Pose): { q: number[]; pose: Pose | null } {
  const t = node.target;
  if (!t || typeof t !== "object") throw new JoinError(`move ${node.id}: target missing`);
  const q = cur.slice();
  if (Array.isArray(t.joint_names) && Array.isArray(t.joint_values_rad)) {
    t.joint_names.forEach((nm: string, i: number) => { const a = AXIS_NAMES.indexOf(nm); if (a >= 0) q[a] = t.joint_values_rad[i]; });
  }
  if (node.target_space === "joint") return { q, pose: null };
  const pose: Pose = { p: vec3(t.xyz_m, `move ${node.id} target.xyz_m`), R: rpyToMat(vec3(t.rpy_rad, `move ${node.id} target.rpy_rad`)) };
  void F; // TeachPose frame is world
  return { q: solveVia(pose, q, `move ${node.id}`), pose };
}

// ---------------------------------------------------------------- the plan
export function plan(body: Buffer, o: PlanOptions, progress: (stage: string) => void = () => {}): PlanOutput {
  const timings: Record<string, number> = {};
  let t0 = performance.now();
  const lap = (name: string): void => { const t = performance.now(); timings[name] = Math.round((t - t0) * 1000) / 1000; t0 = t; };
  const requestSha = createHash("sha256").update(body).digest("hex");

  progress("sweep");
  const container = readContainer(body);
  const p = container.program;
  let enabled = checkProgram(p);
  const F = wpFrame(p);
  const wpId: string = p.workpiece?.frame_id ?? "wp";
  const speedScaleRaw = typeof p.speed_scale === "number" ? p.speed_scale : typeof p.defaults?.speed_scale === "number" ? p.defaults.speed_scale : 1;
  const speedScale = Math.min(1, Math.max(0.01, speedScaleRaw));
  lap("sweep");

  progress("weldseam");
  const seams = new Map<string, SeamPlan>();
  for (const n of enabled) if (n.op === "weld") seams.set(n.id, planSeam(n, F, wpId, o, speedScale));
  if (o.order_seams) enabled = orderSeams(enabled, seams);
  lap("weldseam");

  // connecting moves in execution order, plus dwell and io items
  type Item = { type: "conn"; conn: Conn } | { type: "weld"; seam: SeamPlan } | { type: "dwell"; id: string; q: number[]; dur: number } | { type: "io"; node: any };
  const items: Item[] = [];
  const conns: Conn[] = [];
  let connError: Record<string, string> | null = null;
  const unplanned: string[] = [];
  if (o.run_connecting_trajopt) {
    progress("freespace seed");
    if (o.free_space_backend === "curobo") connError = { type: "BackendUnavailable", message: "free_space_backend curobo is not installed in this planner" };
  }
  let cur = HOME.slice();
  let lastSeam: SeamPlan | null = null;
  const motion = (i: number): any => enabled.slice(i + 1).find((n: any) => !["dwell", "io"].includes(n.op));
  const nextWeld = (i: number): SeamPlan | null => { const n = enabled.slice(i + 1).find((x: any) => x.op === "weld"); return n ? seams.get(n.id)! : null; };
  const seamQ = (s: SeamPlan, end: boolean): number[] => { const q = s.candidates[0].q; return end ? q[q.length - 1] : q[0]; };
  const pushConn = (c: Conn): void => { conns.push(c); items.push({ type: "conn", conn: c }); cur = c.traj.knots[c.traj.knots.length - 1]; };
  for (let i = 0; i < enabled.length; i++) {
    const n = enabled[i];
    if (n.op === "dwell") { items.push({ type: "dwell", id: n.id, q: cur, dur: Math.max(0, num(n.duration_s ?? 0, `dwell ${n.id}`)) }); continue; }
    if (n.op === "io") { items.push({ type: "io", node: n }); continue; }
    if (n.op === "weld") {
      const s = seams.get(n.id)!;
      if (s.traj) items.push({ type: "weld", seam: s }); else if (!(s.overflowSamples && o.run_weld_trajopt)) unplanned.push(n.id);
      if (s.crossed) cur = seamQ(s, true);
      lastSeam = s; continue;
    }
    if (!o.run_connecting_trajopt || connError) { if (n.op !== "home") unplanned.push(n.id); continue; }
    try {
      if (n.op === "home") {
        if (cur.some((v, a) => Math.abs(v - HOME[a]) > 1e-9)) pushConn({ kind: "move", from: null, to: null, node_id: n.id, traj: finishTiming(route(cur, [], HOME, o, `home ${n.id}`), speedScale) });
      } else if (n.op === "approach" || n.op === "transit") {
        const s = nextWeld(i);
        if (!s || !s.crossed) throw new JoinError(`${n.op} ${n.id}: weld ${s?.id ?? "?"} was not crossed`);
        const startPose = s.lattice[0];
        const vias: number[][] = [];
        if (n.op === "transit" && lastSeam?.crossed) {
          const dp = standoffPose(lastSeam.lattice[lastSeam.lattice.length - 1], n.depart_standoff, F, `${n.id}.depart_standoff`);
          if (dp) vias.push(solveVia(dp, cur, `${n.id} depart pose`));
        }
        const ap = standoffPose(startPose, n.arrive_standoff, F, `${n.id}.arrive_standoff`);
        if (ap) vias.push(solveVia(ap, seamQ(s, false), `${n.id} arrive pose`));
        const tr = finishTiming(route(cur, vias, seamQ(s, false), o, `${n.op} ${n.id}`), speedScale);
        pushConn({ kind: n.op, from: n.op === "transit" ? lastSeam?.id ?? null : null, to: s.id, node_id: n.id, traj: tr });
      } else if (n.op === "retract") {
        const vias: number[][] = [];
        const end = lastSeam?.crossed ? lastSeam.lattice[lastSeam.lattice.length - 1] : null;
        const dp = end ? standoffPose(end, n.depart_standoff, F, `${n.id}.depart_standoff`) : null;
        const dq = dp ? solveVia(dp, cur, `${n.id} depart pose`) : null;
        const home = motion(i)?.op === "home";
        if (!dq && !home) continue; // nothing to move
        const goal = home ? HOME : dq!;
        if (dq && home) vias.push(dq);
        pushConn({ kind: "retract", from: lastSeam?.id ?? null, to: null, node_id: n.id, traj: finishTiming(route(cur, vias, goal, o, `retract ${n.id}`), speedScale) });
      } else if (n.op === "move") {
        const motionKind = n.motion ?? "joint";
        const { q, pose } = teachTarget(n, cur, F);
        let tr: Traj;
        if (motionKind === "joint") tr = route(cur, [], q, o, `move ${n.id}`);
        else if (motionKind === "linear" && pose) {
          const a = fk(cur).tool; const spd = (typeof n.speed_mm_s === "number" && n.speed_mm_s > 0 ? n.speed_mm_s : DEFAULT_MOVE_SPEED_MM_S) / 1000;
          const pathL = new PosedPath([{ p: a.p, R: a.R }, { p: pose.p, R: pose.R }]);
          const m = Math.max(2, Math.ceil(pathL.length / 0.005) + 1);
          const qs = [cur]; const ts = [0];
          for (let k = 1; k < m; k++) { const x = pathL.at(k / (m - 1)); qs.push(solveVia({ p: x.p, R: x.R }, qs[k - 1], `move ${n.id}`)); ts.push(((k / (m - 1)) * pathL.length) / spd); }
          if (m > 2) { const d0 = ts[1] * 0.5; for (let k = 1; k < m; k++) ts[k] += d0; ts[m - 1] += d0; } else ts[1] = Math.max(ts[1], 0.3);
          tr = hermiteThrough(qs, ts, false);
        } else { unplanned.push(n.id); continue; } // circular moves and linear moves without a Cartesian target
        const sc = typeof n.speed_scale === "number" && n.speed_scale > 0 && n.speed_scale < 1 ? n.speed_scale : 1;
        pushConn({ kind: "move", from: null, to: null, node_id: n.id, traj: finishTiming(tr, speedScale * sc) });
      }
    } catch (e) {
      if (!(e instanceof JoinError)) throw e;
      connError = { type: "JoinError", message: e.message };
    }
  }
  if (o.run_connecting_trajopt) { progress("optimize"); lap("connecting"); }

  // verification
  progress("verify");
  const seamOut: Record<string, any>[] = [];
  for (const s of seams.values()) {
    const out: Record<string, any> = {
      id: s.id, length_mm: r6(s.path.length * 1000), crossed: s.crossed, axis_names: AXIS_NAMES, held: {},
      candidates: s.candidates.map((c) => ({ cost_deg: r6(c.cost), joints_deg: c.q.map(degRow), times_s: s.times.map(r6) })),
    };
    if (!s.crossed) { out.frontier = s.frontier; out.frontier_causes = s.causes; }
    if (s.traj) {
      const tk = tracking(s); const v = verifyTraj(s.traj, o);
      out.trajectory = {
        knots_deg: s.traj.knots.map(degRow), knot_velocity_deg_s: s.traj.vel.map(degRow), times_s: s.traj.times.map(r6),
        sampled_tracking_mm: tk.sampled, tracking: tk.tracking, verdict: v.verdict,
      };
    }
    s.out = out; seamOut.push(out);
  }
  const connOut = conns.map((c) => {
    const v = verifyTraj(c.traj, o); c.verdict = v.verdict;
    return {
      kind: c.kind, from: c.from, to: c.to, node_id: c.node_id, duration_s: r6(duration(c.traj)),
      knots_deg: c.traj.knots.map(degRow), knot_velocity_deg_s: c.traj.vel.map(degRow), times_s: c.traj.times.map(r6),
      clearance_mm: { env: Number.isFinite(v.env) ? r6(v.env) : null, self: Number.isFinite(v.self) ? r6(v.self) : null }, verdict: v.verdict,
    };
  });
  lap("verify");

  const programId = o.program_id;
  const result: Record<string, any> = {
    schema: RESULT_SCHEMA, cell_id: CELL_ID, screened: o.screen_collisions, k_best: o.k_best,
    request: {
      request_sha256: requestSha, program_id: programId, cell_id: CELL_ID,
      source_program_id: p.program_id ?? null, manifest_revision: o.manifest_revision, plan_revision: o.plan_revision, weldplan_bytes: body.length,
    },
    producer: { module: "blind-planner", source_revision: "blind-1", source_revision_state: "unversioned" },
    coverage: {
      candidate_collision_screening: o.screen_collisions ? "capsule_vs_box" : "unchecked",
      weld_trajectory_continuous_verification: o.run_weld_trajopt && o.verify ? "sampled_dt_with_bound" : "not_run",
      connecting_trajectory_continuous_verification: o.run_connecting_trajopt && o.verify ? "sampled_dt" : "not_run",
      canonical_motion_server: false, physical_motion: false, execution_authority: "none",
      candidate_limit_checks: "position",
    },
    seams: seamOut,
    connecting_trajectories: connOut,
  };
  if (connError) result.connecting_trajectories_error = connError;
  if (enabled.some((n: any) => n.op === "move")) result.program_order = enabled.map((n: any) => n.id);
  if (speedScale < 1) result.speed_scale = speedScale;
  if (o.free_space_backend === "legacy") result.warnings = ["free_space_backend legacy is deprecated"];

  let dense: PlanOutput["dense"] = null;
  if (o.dense) {
    progress("dense");
    const r = buildDense(o, requestSha, programId, items, seams, conns, connError, unplanned, container);
    if ("error" in r) result.dense_error = r.error; else { result.dense = r.summary; dense = { blob: r.blob, digest: r.digest }; }
    lap("dense");
  }
  result.options = { ...o };
  result.timings_ms = timings;
  return { result, dense };
}

function orderSeams(enabled: any[], seams: Map<string, SeamPlan>): any[] {
  const welds = enabled.filter((n) => n.op === "weld");
  const first = enabled.findIndex((n) => n.op === "weld"), last = enabled.length - 1 - [...enabled].reverse().findIndex((n) => n.op === "weld");
  const block = enabled.slice(first, last + 1);
  if (welds.length < 2) return enabled;
  if (block.some((n) => n.op !== "weld" && n.op !== "transit")) return enabled; // moves, dwells or io between welds: keep order
  const transits = block.filter((n) => n.op === "transit");
  const left = welds.slice(); const order: any[] = [];
  let at = fk(HOME).tool.p;
  while (left.length) {
    let bi = 0, bd = Infinity;
    left.forEach((w, i) => { const d = norm(sub(seams.get(w.id)!.lattice[0].p, at)); if (d < bd) { bd = d; bi = i; } });
    const w = left.splice(bi, 1)[0]; order.push(w);
    const s = seams.get(w.id)!; at = s.lattice[s.lattice.length - 1].p;
  }
  const nb: any[] = [];
  order.forEach((w, i) => { if (i > 0) nb.push(transits[i - 1]); nb.push(w); });
  return [...enabled.slice(0, first), ...nb, ...enabled.slice(last + 1)];
}

// ---------------------------------------------------------------- dense output
type DenseBuild = { error: { reason: string; detail: string; segment_index: number | null } } | { blob: Buffer; digest: string; summary: Record<string, any> };

function resample(tr: Traj): Sample[] {
  const n = Math.round(duration(tr) / DT); const out: Sample[] = [];
  for (let k = 0; k <= n; k++) {
    const { q, qd } = evalTraj(tr, k === n ? duration(tr) : k * DT);
    out.push({ t: k * DT, q: [...q, 0, 0, 0], qd: [...qd, 0, 0, 0], flags: 0 });
  }
  return out;
}

function buildDense(o: PlanOptions, requestSha: string, programId: string, items: any[], seams: Map<string, SeamPlan>, conns: Conn[],
  connError: Record<string, string> | null, unplanned: string[], container: Container): DenseBuild {
  const err = (reason: string, detail: string, segment_index: number | null = null): DenseBuild => ({ error: { reason, detail, segment_index } });
  const motionItems = items.filter((x) => x.type !== "io");
  if (!o.run_weld_trajopt || !o.run_connecting_trajopt) return err("result_empty", "dense needs run_weld_trajopt and run_connecting_trajopt");
  if (!programId || programId.length > 120 || !IDENTIFIER_RE.test(programId)) return err("identity_invalid", `program_id ${JSON.stringify(programId)} is empty or not a plain identifier`);
  for (const s of seams.values()) if (!s.crossed) return err("seam_not_planned", `seam ${s.id} was not crossed (${s.causes.join(", ")})`);
  if (connError) return err("motion_join_failed", `${connError.type}: ${connError.message}`);
  const ids = [...seams.keys()];
  if (new Set(ids).size !== ids.length) return err("motion_result_invalid", "duplicate seam ids");
  if (conns.some((c) => !["approach", "transit", "retract", "move"].includes(c.kind))) return err("motion_result_invalid", "unknown move kind");
  if (unplanned.length) return err("motion_not_planned", `no planned motion for node ${unplanned[0]}`);
  if (!motionItems.some((x) => x.type !== "dwell")) return err("result_empty", "nothing playable");
  const pass = (v: any): boolean => v && v.verdict === "PASS" && v.collisions === 0 && v.penetrating === 0 && v.limit_violations === 0 && v.unverifiable === 0;
  let segIndex = 0;
  for (const it of motionItems) {
    if (it.type === "weld") {
      const t = it.seam.out.trajectory;
      if (!pass(t.verdict)) return err("motion_not_verified", `seam ${it.seam.id} verdict ${t.verdict.verdict}`, segIndex);
      if (t.tracking.verdict !== "PASS") return err("motion_not_verified", `seam ${it.seam.id} tracking certificate out of tolerance (bound ${t.tracking.bound_mm} mm)`, segIndex);
    } else if (it.type === "conn" && !pass(it.conn.verdict)) return err("motion_not_verified", `${it.conn.kind} ${it.conn.node_id} verdict ${it.conn.verdict?.verdict}`, segIndex);
    segIndex++;
  }
  for (const s of seams.values()) if (s.overflowSamples) return err("sample_count_overflow", `weld ${s.id} alone needs ${s.overflowSamples} samples (at most ${MAX_SAMPLES})`);
  // segments
  const segs: SegmentIn[] = []; const markers: any[] = [];
  for (const it of items) {
    if (it.type === "io") {
      const si = Math.max(0, segs.length - 1);
      markers.push({ node_id: it.node.id, channel: it.node.channel, state: !!it.node.state, segment_index: si, sample_index: segs.length ? segs[si].samples.length - 1 : 0 });
      continue;
    }
    if (it.type === "dwell") {
      const n = Math.max(1, Math.ceil(it.dur / DT - 1e-9));
      // Changed after integration: counted before the samples are allocated (document 2 part 8, 250000 samples).
      if (n + 1 > MAX_SAMPLES) return err("sample_count_overflow", `dwell ${it.id} alone needs ${n + 1} samples (at most ${MAX_SAMPLES})`);
      const q = [...it.q, 0, 0, 0];
      segs.push({ kind: "dwell", source_id: it.id, samples: Array.from({ length: n + 1 }, (_, k) => ({ t: k * DT, q, qd: new Array<number>(AXIS_COUNT).fill(0), flags: 0 })) });
      continue;
    }
    const kind: SegmentKind = it.type === "weld" ? "weld" : "freespace";
    const source = it.type === "weld" ? it.seam.id : it.conn.node_id ?? it.conn.kind;
    segs.push({ kind, source_id: source, samples: resample(it.type === "weld" ? it.seam.traj : it.conn.traj) });
  }
  const ceilings = [...JOINTS.map((j) => j.vmax), ...new Array<number>(AXIS_COUNT - DOF).fill(UNUSED_COLUMN_CEILING)];
  const robot_cell = {
    model_id: CELL_ID, robot_description_sha256: ROBOT_DESCRIPTION_SHA256,
    machine_planning_calibration_sha256: container.calibrationSha256 ?? "", machine_planning_calibration_source: container.calibrationSha256 ? "target" : "",
  };
  const planId = `${programId}:${requestSha.slice(0, 12)}`;
  const enc = encodeDense({
    identity: { plan_id: planId, program_id: programId, program_digest: "sha256:" + requestSha, manifest_revision: o.manifest_revision, plan_revision: o.plan_revision, created_at: new Date().toISOString() },
    axis_mask: (1 << DOF) - 1, dt_s: DT, max_abs_qd_rad_s: ceilings, segments: segs, robot_cell, process_markers: markers,
    extra_axes: { axis_names: ["J1", "J2", "J3", "J4", "J5", "J6", "J7", "J8", "J9"] },
  });
  try { decodeDense(enc.blob); } catch (e) {
    if (e instanceof DenseFormatError) return err(e.reason, e.message, e.segment_index);
    throw e;
  }
  const h: any = enc.header;
  return {
    blob: enc.blob, digest: enc.digest,
    summary: {
      trajectory_digest: enc.digest, plan_id: planId, program_digest: "sha256:" + requestSha, dt_s: DT,
      total_sample_count: h.sampling.total_sample_count, total_duration_s: r6(h.sampling.total_duration_s),
      max_abs_qd_rad_s: ceilings, axis_mask: (1 << DOF) - 1, robot_cell, bytes: enc.blob.length,
      segments: h.segments.map((s: any) => ({ index: s.index, kind: s.kind, source_id: s.source_id, sample_count: s.sample_count, duration_s: s.duration_s })),
    },
  };
}
