// The clean-room planner's planning (document 2 parts 1, 2): a deliberately simple strategy on its own
// six-axis stand-in robot, with every documented rule of the result and the dense file kept: segments
// at rest at both ends on the 0.01 s grid, velocities from the positions, the per-axis ceiling, the
// dense_error reasons in the document's order, the content digest as part 2 defines it. Runs in the fresh
// process of each admitted plan (child.ts); reports stages through `stage`.

import { canonical, checkProgram, PlanRefused, readContainer, sha256hex } from './program.ts';

export const CELL = 'cleanroom-six-axis';
const AXES = ['J1', 'J2', 'J3', 'J4', 'J5', 'J6'];
const MASK = 0x3f;
/** Per-column velocity ceilings, rad/s (nine columns; J7-J9 are not commanded). */
const CEIL = [1.2, 1.0, 1.0, 2.5, 2.5, 3.0, 1, 1, 1];
const LIMITS: Array<[number, number]> = [[-2.9, 2.9], [-0.5, 0.9], [-0.6, 0.8], [-3.1, 3.1], [-3.1, 3.1], [-3.1, 3.1]];
const DT = 0.01;
/** A gentle acceleration bound for connecting moves, rad/s^2 (the cell's own figures are not known to a planner). */
const ACCEL = 2;
const MAX_SAMPLES = 250000;
const DESCRIPTION = 'cleanroom-six-axis: J1 = atan2(y, x), J2 = r - 0.6, J3 = z - 0.3, J4..J6 = torch roll - pi, pitch, yaw';
export const DESCRIPTION_SHA256 = `sha256:${sha256hex(DESCRIPTION)}`;

export interface Options {
  k_best: bigint;
  screen_collisions: boolean;
  samples_per_seam: bigint | null;
  run_weld_trajopt: boolean;
  run_connecting_trajopt: boolean;
  free_space_backend: string;
  verify: boolean;
  verify_margin_mm: number;
  order_seams: boolean;
  dense: boolean;
  program_id: string;
  manifest_revision: bigint;
  plan_revision: bigint;
}

export interface PlanOutput {
  result: Record<string, unknown>;
  /** The dense file, when one was built and checked. */
  blob?: Uint8Array;
}

type Q = number[]; // nine columns, rad
const wrap = (a: number) => Math.atan2(Math.sin(a), Math.cos(a));
const deg = (q: Q) => q.map((x) => x * (180 / Math.PI));
const HOME: Q = [0, 0, 0, 0, 0, 0, 0, 0, 0];

/** The stand-in inverse kinematics: a workpiece point and torch angles to nine columns, or why not. */
function ik(p: number[], rpy: number[]): { q: Q } | { cause: string } {
  const q = [Math.atan2(p[1]!, p[0]!), Math.hypot(p[0]!, p[1]!) - 0.6, p[2]! - 0.3, wrap(rpy[0]! - Math.PI), wrap(rpy[1]!), wrap(rpy[2]!), 0, 0, 0];
  for (let j = 0; j < 6; j++) if (q[j]! < LIMITS[j]![0] || q[j]! > LIMITS[j]![1]) return { cause: `${AXES[j]} outside its limits` };
  return { q };
}

interface Path {
  at(s: number): { p: number[]; rpy: number[] };
  length: number;
}
/** A polyline through points (metres) with torch angles interpolated along it. */
function polyline(pts: number[][], rpys: number[][]): Path {
  const cum = [0];
  for (let i = 1; i < pts.length; i++) cum.push(cum[i - 1]! + Math.hypot(...pts[i]!.map((x, k) => x - pts[i - 1]![k]!)));
  const L = cum[cum.length - 1]!;
  return {
    length: L,
    at(s) {
      const d = Math.min(Math.max(s, 0), 1) * L;
      let i = 1;
      while (i < pts.length - 1 && cum[i]! < d) i++;
      const f = cum[i]! === cum[i - 1]! ? 0 : (d - cum[i - 1]!) / (cum[i]! - cum[i - 1]!);
      const mix = (a: number[], b: number[]) => a.map((x, k) => x + f * (b[k]! - x));
      return { p: mix(pts[i - 1]!, pts[i]!), rpy: mix(rpys[i - 1]!, rpys[i]!) };
    },
  };
}

/** The weld's path in the robot's frame: placement offsets added, direction and span applied. */
function weldPath(n: Record<string, any>, doc: Record<string, any>): Path {
  const g = n.geometry;
  const off = [0, 1, 2].map((k) => doc.placement.anchor_xyz_m[k] + doc.placement.offset_xyz_m[k]);
  let pts: number[][];
  let rpys: number[][];
  if (g.kind === 'seam') {
    const line = g.line ?? doc.workpiece.weld_joints.find((j: any) => j.id === g.weld_joint_ref).weld_line;
    pts = (line.segments as any[]).flatMap((s, i) => (i === 0 ? s.control_points_xyz_m : s.control_points_xyz_m.slice(1)));
    rpys = pts.map(() => [Math.PI, 0, 0]);
    if (g.direction === 'reverse') pts = [...pts].reverse();
  } else {
    pts = g.points.map((p: any) => p.xyz_m);
    rpys = g.points.map((p: any) => p.rpy_rad);
  }
  const base = polyline(pts.map((p) => p.map((x, k) => x + off[k]!)), rpys);
  const span: [number, number] = Array.isArray(g.span) ? [g.span[0], g.span[1]] : [0, 1];
  return { length: base.length * (span[1] - span[0]), at: (s) => base.at(span[0] + s * (span[1] - span[0])) };
}

/** Minimum-jerk time law: position fraction and its rate at t of T (at rest at both ends). */
const law = (t: number, T: number) => {
  const x = Math.min(Math.max(t / T, 0), 1);
  return { s: x * x * x * (10 - 15 * x + 6 * x * x), ds: (30 * x * x * (1 - x) * (1 - x)) / T };
};
const samplesOf = (T: number) => Math.round(T / DT) + 1;
const onGrid = (T: number) => Math.ceil(T / DT - 1e-9) * DT;

interface Segment {
  kind: 'freespace' | 'weld' | 'dwell';
  sourceId: string;
  t: number[];
  q: Q[];
  qd: Q[];
  torch: boolean;
}

function freespace(from: Q, to: Q, scale: number, sourceId: string): { seg: Segment; T: number } | undefined {
  const d = to.map((x, j) => x - from[j]!);
  if (d.every((x) => Math.abs(x) < 1e-12)) return undefined;
  // Peak speed 1.875 d/T at most 0.8 of the ceiling, peak acceleration 5.77 d/T^2 at most ACCEL.
  const T = onGrid(Math.max(0.2, ...d.map((x, j) => Math.max((1.875 * Math.abs(x)) / (0.8 * CEIL[j]!), Math.sqrt((5.78 * Math.abs(x)) / ACCEL)))) / scale);
  const seg: Segment = { kind: 'freespace', sourceId, t: [], q: [], qd: [], torch: false };
  const n = samplesOf(T);
  for (let i = 0; i < n; i++) {
    const { s, ds } = law(i * DT, T);
    seg.t.push(i * DT);
    seg.q.push(from.map((x, j) => x + s * d[j]!));
    seg.qd.push(d.map((x) => (i === 0 || i === n - 1 ? 0 : ds * x)));
  }
  return { seg, T };
}

export class DenseError extends Error {
  constructor(readonly reason: string, readonly detail: string, readonly segmentIndex: number | null) {
    super(detail);
  }
}

/** JSON with exact integers (bigint) and the plain spelling of every other number. */
export function toJson(v: unknown): string {
  if (typeof v === 'bigint') return v.toString();
  if (v === undefined) return 'null';
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(toJson).join(',')}]`;
  return `{${Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => `${JSON.stringify(k)}:${toJson(x)}`).join(',')}}`;
}

export async function plan(bytes: Uint8Array, o: Options, stage: (s: string) => Promise<void> | void): Promise<PlanOutput> {
  const { program: doc, containerSha256 } = readContainer(bytes);
  checkProgram(doc);
  if (doc.placement.cell_id !== CELL) throw new PlanRefused('CellUnknown', `no collision meshes for cell ${JSON.stringify(doc.placement.cell_id)} (this planner has ${CELL})`);
  const requestSha = sha256hex(canonical({ container: containerSha256, cell: CELL, k: Number(o.k_best), screen: o.screen_collisions, sps: o.samples_per_seam === null ? null : Number(o.samples_per_seam), weld: o.run_weld_trajopt, conn: o.run_connecting_trajopt, backend: o.free_space_backend, verify: o.verify, margin: o.verify_margin_mm, order: o.order_seams, dense: o.dense }));
  const speed = typeof doc.speed_scale === 'number' ? doc.speed_scale : 1;
  const torchOn = doc.execution_mode === 'production';
  const enabled = (doc.nodes as any[]).filter((n) => n.enabled);
  const welds = enabled.filter((n) => n.op === 'weld');

  await stage('sweep');
  const seams: Record<string, any>[] = [];
  const weldSegs = new Map<string, { seam: Record<string, any>; path: Path; T: number; start: Q; end: Q } | undefined>();
  for (const n of welds) {
    const path = weldPath(n, doc);
    const seamId = n.geometry.kind === 'seam' ? n.geometry.id : n.id;
    const T = onGrid(path.length * 1000 / n.travel_speed_mm_s / speed);
    const lattice = o.samples_per_seam !== null ? Number(o.samples_per_seam) : Math.max(2, Math.min(512, Math.ceil(T / 0.1) + 1));
    const poses: Q[] = [];
    let frontier: Record<string, unknown> | undefined;
    for (let i = 0; i < lattice; i++) {
      const s = i / (lattice - 1);
      const at = path.at(s);
      const r = ik(at.p, at.rpy);
      if ('cause' in r) {
        frontier = { s, cause: r.cause };
        break;
      }
      poses.push(r.q);
    }
    const standoffs = standoffValues(n.standoff_mm);
    const seam: Record<string, any> = {
      id: seamId, length_mm: path.length * 1000, crossed: !frontier, axis_names: AXES, held: {},
      candidates: frontier ? [] : Array.from({ length: Number(o.k_best) }, (_, k) => ({ cost_deg: k, joints_deg: poses.map((q) => deg(q).slice(0, 6).map((x, j) => (j === 5 ? x + k : x))), times_s: poses.map((_, i) => (T * i) / (lattice - 1)) })),
    };
    if (frontier) {
      seam.frontier = { s: frontier.s };
      seam.frontier_causes = [frontier.cause];
    }
    seams.push(seam);
    weldSegs.set(n.id, frontier ? undefined : { seam, path, T, start: poses[0]!, end: poses[poses.length - 1]! });
    seam._standoff = Math.min(...standoffs);
  }
  await stage('weldseam');
  const result: Record<string, any> = {
    schema: 'amr-weld-planner-v1.motion-plan-result.v1', cell_id: CELL, screened: o.screen_collisions, k_best: o.k_best,
    request: { request_sha256: requestSha, program_id: o.program_id, cell_id: CELL, program_digest: doc.program_digest ?? `sha256:${sha256hex(canonical(doc))}` },
    producer: { module: 'hil-cleanroom-planner', source_revision: 'document-2', source_revision_state: 'clean' },
    coverage: {
      candidate_collision_screening: o.screen_collisions ? 'none_modelled' : 'unchecked', weld_trajectory_continuous_verification: o.run_weld_trajopt && o.verify,
      connecting_trajectory_continuous_verification: o.run_connecting_trajopt && o.verify, canonical_motion_server: false, physical_motion: false, execution_authority: false, candidate_limit_checks: true,
    },
    seams, connecting_trajectories: [],
    options: { ...o },
    timings_ms: {},
  };
  const verdictOf = (ok: boolean) => (!o.verify ? 'NOT_RUN' : ok ? 'PASS' : 'FAIL');
  // Weld trajectories (run_weld_trajopt): the lattice as knots of a Hermite curve, verified by standoff.
  if (o.run_weld_trajopt) {
    for (const s of seams) {
      const w = [...weldSegs.values()].find((x) => x?.seam === s);
      if (!w) continue;
      const knots = s.candidates[0].joints_deg as number[][];
      const ok = s._standoff >= o.verify_margin_mm;
      s.trajectory = {
        knots_deg: [deg(w.start).slice(0, 6), ...knots.slice(1, -1), deg(w.end).slice(0, 6)], knot_velocity_deg_s: knots.map(() => [0, 0, 0, 0, 0, 0]), times_s: s.candidates[0].times_s,
        sampled_tracking_mm: { knots: 0, midpoints: 0 },
        tracking: { verdict: verdictOf(true), tolerance_mm: 0.5, bound_mm: 0, worst_seen_mm: 0, segments_out: 0, undecided: 0, unverifiable: 0 },
        verdict: { verdict: verdictOf(ok), collisions: 0, penetrating: 0, limit_violations: 0, unverifiable: 0, worst_clearance_mm: s._standoff },
      };
    }
  }
  for (const s of seams) delete s._standoff;

  // Motion in execution order: one segment per move that moves, a dwell per dwell node.
  await stage('freespace seed');
  const segs: Segment[] = [];
  const conn: Record<string, any>[] = [];
  let pose = HOME;
  let problem: DenseError | undefined;
  const firstWeld = enabled.findIndex((n) => n.op === 'weld');
  let lastWeld = -1;
  enabled.forEach((n, i) => n.op === 'weld' && (lastWeld = i));
  const idsSeen = new Set<string>();
  for (const s of seams) {
    if (idsSeen.has(s.id) && !problem) problem = new DenseError('motion_result_invalid', `two seams named ${s.id}`, null);
    idsSeen.add(s.id);
  }
  const joinFailed = o.free_space_backend === 'curobo';
  if (joinFailed) result.connecting_trajectories_error = { type: 'BackendUnavailable', message: 'curobo needs a CUDA device; this planner has none' };
  let prevSeam: string | null = null;
  for (const [i, n] of enabled.entries()) {
    if (n.op === 'weld') {
      const w = weldSegs.get(n.id);
      if (!w) {
        problem ??= new DenseError('seam_not_planned', `seam ${n.id} was not crossed`, null);
        continue;
      }
      const seg: Segment = { kind: 'weld', sourceId: n.id, t: [], q: [], qd: [], torch: torchOn };
      const count = samplesOf(w.T);
      if (count > MAX_SAMPLES) {
        problem ??= new DenseError('sample_count_overflow', `the weld ${n.id} alone has ${count} samples`, null);
        prevSeam = w.seam.id;
        pose = w.end;
        continue;
      }
      for (let k = 0; k < count; k++) {
        const { s, ds } = law(k * DT, w.T);
        const h = 1e-6;
        const at = (x: number) => { const a = w.path.at(x); const r = ik(a.p, a.rpy); return 'q' in r ? r.q : HOME; };
        const q = at(s);
        const dq = at(Math.min(1, s + h)).map((x, j) => (x - at(Math.max(0, s - h))[j]!) / (Math.min(1, s + h) - Math.max(0, s - h)));
        seg.t.push(k * DT);
        seg.q.push(q);
        seg.qd.push(k === 0 || k === count - 1 ? [0, 0, 0, 0, 0, 0, 0, 0, 0] : dq.map((x) => x * ds));
      }
      segs.push(seg);
      pose = seg.q[seg.q.length - 1]!;
      prevSeam = w.seam.id;
      continue;
    }
    if (n.op === 'dwell') {
      if (n.duration_s > 0) {
        const count = samplesOf(onGrid(n.duration_s / speed));
        if (count > MAX_SAMPLES) problem ??= new DenseError('sample_count_overflow', `the dwell ${n.id} alone has ${count} samples`, null);
        else segs.push({ kind: 'dwell', sourceId: n.id, t: Array.from({ length: count }, (_, k) => k * DT), q: Array.from({ length: count }, () => pose), qd: Array.from({ length: count }, () => [0, 0, 0, 0, 0, 0, 0, 0, 0]), torch: false });
      }
      continue;
    }
    if (n.op === 'io') continue;
    // A connecting move: where it goes.
    let to: Q | undefined;
    let toSeam: string | null = null;
    let scale = speed;
    if (n.op === 'approach' || n.op === 'transit') {
      const next = enabled.slice(i + 1).find((x) => x.op === 'weld');
      const w = next && weldSegs.get(next.id);
      to = w ? w.start : undefined;
      toSeam = w ? w.seam.id : null;
      if (!to) continue; // the weld is not planned: seam_not_planned names it
    } else if (n.op === 'retract' || n.op === 'home') to = HOME;
    else if (n.op === 'move') {
      scale = speed * n.speed_scale;
      if (n.target_space === 'cartesian') {
        problem ??= new DenseError('motion_not_planned', `move ${n.id}: a Cartesian target (this planner plans joint targets only)`, null);
        continue;
      }
      const q = [...pose];
      let why: string | undefined;
      n.target.joint_names.forEach((name: string, k: number) => {
        const j = Number(/^J([1-9])$/.exec(name)?.[1] ?? 0) - 1;
        const v = n.target.joint_values_rad[k];
        if (j < 0 || (j >= 6 && v !== 0)) why = `the cell has no axis ${name} to move`;
        else if (j < 6 && (v < LIMITS[j]![0] || v > LIMITS[j]![1])) why = `${name} ${v} outside its limits`;
        else if (j < 6) q[j] = v;
      });
      if (why) {
        problem ??= new DenseError('motion_not_planned', `move ${n.id}: ${why}`, null);
        continue;
      }
      to = q;
    }
    const kind = n.op === 'transit' || (i > firstWeld && i < lastWeld) ? 'transit' : i < firstWeld ? 'approach' : 'retract';
    const f = freespace(pose, to!, scale, n.id);
    if (!f) continue;
    if (o.run_connecting_trajopt && !joinFailed) {
      conn.push({
        kind, from: kind === 'approach' ? null : prevSeam, to: kind === 'retract' ? null : toSeam, node_id: n.id, duration_s: f.T,
        knots_deg: [deg(pose), deg(to!)].map((x) => x.slice(0, 6)), knot_velocity_deg_s: [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]], times_s: [0, f.T],
        clearance_mm: { env: null, self: null }, verdict: verdictOf(true),
      });
    }
    segs.push(f.seg);
    pose = to!;
  }
  if (o.run_connecting_trajopt && !joinFailed) result.connecting_trajectories = conn;
  else delete result.connecting_trajectories;
  if (speed < 1) result.speed_scale = speed;
  if (enabled.some((n) => n.op === 'move')) result.program_order = enabled.map((n) => n.id);
  await stage('optimize');
  await stage('verify');
  if (!o.dense) return { result };

  // dense_error in document 2's order.
  await stage('dense');
  const fail = (reason: string, detail: string, seg: number | null = null): PlanOutput => ({ result: { ...result, dense_error: { reason, detail, segment_index: seg } } });
  if (!o.run_weld_trajopt || !o.run_connecting_trajopt) return fail('result_empty', 'dense needs both trajectory stages (run_weld_trajopt and run_connecting_trajopt)');
  if (!/^[A-Za-z0-9._:-]+$/.test(o.program_id)) return fail('identity_invalid', 'program_id must be letters, digits, dot, underscore, colon or hyphen');
  if (problem?.reason === 'seam_not_planned') return fail(problem.reason, problem.detail);
  const unverified = seams.find((s) => s.trajectory?.verdict.verdict !== 'PASS');
  if (unverified) return fail('motion_not_verified', `seam ${unverified.id}: verdict ${unverified.trajectory?.verdict.verdict ?? 'none'}`);
  if (joinFailed) return fail('motion_join_failed', 'connecting moves could not be planned');
  if (problem) return fail(problem.reason, problem.detail, problem.segmentIndex);
  if (segs.length === 0) return fail('result_empty', 'nothing playable');
  const total = segs.reduce((a, s) => a + s.t.length, 0);
  if (total > MAX_SAMPLES) return fail('sample_count_overflow', `${total} samples, at most ${MAX_SAMPLES}`);
  for (const [k, s] of segs.entries()) {
    const bad = checkSegment(s, k === 0 ? undefined : segs[k - 1]!);
    if (bad) return fail(bad[0], bad[1], k);
  }
  const planId = `${o.program_id}:${requestSha.slice(0, 12)}`;
  const programDigest = `sha256:${requestSha}`;
  const robotCell = { model_id: CELL, robot_description_sha256: DESCRIPTION_SHA256, machine_planning_calibration_sha256: '', machine_planning_calibration_source: '' };
  const { blob, digest } = encode(segs, { plan_id: planId, program_id: o.program_id, program_digest: programDigest, manifest_revision: o.manifest_revision, plan_revision: o.plan_revision, robot_cell: robotCell });
  const duration = segs.reduce((a, s) => a + s.t[s.t.length - 1]!, 0);
  result.dense = {
    trajectory_digest: digest, plan_id: planId, program_digest: programDigest, dt_s: DT, total_sample_count: total, total_duration_s: duration,
    max_abs_qd_rad_s: CEIL, robot_cell: robotCell, bytes: blob.length,
    segments: segs.map((s, k) => ({ index: k, kind: s.kind, source_id: s.sourceId, sample_count: s.t.length, duration_s: s.t[s.t.length - 1]! })),
  };
  return { result, blob };
}

function standoffValues(f: Record<string, any>): number[] {
  switch (f.kind) {
    case 'constant': return [f.value];
    case 'piecewise_linear': return f.knots.map((k: number[]) => k[1]);
    case 'bspline': return f.control_values;
    default: return f.values;
  }
}

/** Document 2's sample rules on one segment: [reason, detail] of the first broken, or undefined. */
function checkSegment(s: Segment, prev: Segment | undefined): [string, string] | undefined {
  const n = s.t.length;
  if (n < 2) return ['segment_too_short', 'fewer than 2 samples'];
  for (let i = 0; i < n; i++) {
    if (![s.t[i]!, ...s.q[i]!, ...s.qd[i]!].every(Number.isFinite)) return ['nonfinite_sample', `sample ${i}`];
    if (Math.abs(s.t[i]! - i * DT) > 1e-9) return ['time_grid_invalid', `sample ${i} at ${s.t[i]} s`];
    for (let j = 0; j < 9; j++) {
      if (Math.abs(s.qd[i]![j]!) > CEIL[j]!) return ['qd_limit_exceeded', `J${j + 1} at ${s.qd[i]![j]} rad/s, ceiling ${CEIL[j]}`];
      if (i > 0 && Math.abs(s.q[i]![j]! - s.q[i - 1]![j]!) > 1.25 * CEIL[j]! * DT) return ['q_step_exceeded', `J${j + 1} at sample ${i}`];
    }
  }
  for (const i of [0, n - 1]) if (s.qd[i]!.some((v) => Math.abs(v) > 1e-6)) return ['boundary_qd_nonzero', `sample ${i} is moving`];
  if (prev && s.q[0]!.some((v, j) => Math.abs(v - prev.q[prev.q.length - 1]![j]!) > 1e-3)) return ['boundary_q_discontinuity', 'starts away from where the previous segment ended'];
  return undefined;
}

/** The dense file (document 2 part 2): u32 header length, JSON header, 153-byte big-endian records. */
function encode(segs: Segment[], id: Record<string, unknown>): { blob: Uint8Array; digest: string } {
  const blocks = segs.map((s) => {
    const b = Buffer.alloc(s.t.length * 153);
    for (let i = 0; i < s.t.length; i++) {
      const at = i * 153;
      b.writeDoubleBE(s.t[i]!, at);
      for (let j = 0; j < 9; j++) {
        b.writeDoubleBE(s.q[i]![j]!, at + 8 + 8 * j);
        b.writeDoubleBE(s.qd[i]![j]!, at + 80 + 8 * j);
      }
      b.writeUInt8(s.torch && s.kind === 'weld' ? 1 : 0, at + 152);
    }
    return b;
  });
  // Content digest: the schema text and a zero byte, u64 axis_count, u64 mask, f64 dt, u64 segment count,
  // per segment kind, source_id, u64 sample count and the block bytes, then u64 9 and the nine ceilings.
  const u64 = (v: number | bigint) => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(v)); return b; };
  const f64 = (v: number) => { const b = Buffer.alloc(8); b.writeDoubleBE(v); return b; };
  const text = (s: string) => { const b = Buffer.from(s, 'utf8'); return Buffer.concat([u64(b.length), b]); };
  const parts: Buffer[] = [Buffer.from('robot.v4.dense-joint-trajectory.v1\0', 'ascii'), u64(9), u64(MASK), f64(DT), u64(segs.length)];
  segs.forEach((s, k) => parts.push(text(s.kind), text(s.sourceId), u64(s.t.length), blocks[k]!));
  parts.push(u64(9), ...CEIL.map(f64));
  const digest = `sha256:${sha256hex(Buffer.concat(parts))}`;
  let offset = 0;
  const header = {
    schema: 'robot.v4.dense-joint-trajectory.v1', ...id, trajectory_digest: digest, created_at: new Date().toISOString(),
    axes: { axis_count: 9, axis_mask: MASK, position_unit: 'rad', velocity_unit: 'rad_s' },
    sampling: { dt_s: DT, total_sample_count: segs.reduce((a, s) => a + s.t.length, 0), total_duration_s: segs.reduce((a, s) => a + s.t[s.t.length - 1]!, 0) },
    limits: { max_abs_qd_rad_s: CEIL },
    sample_encoding: { encoding: 'f64-be-aos.v1', record_bytes: 153 },
    segments: segs.map((s, k) => {
      const seg = { index: k, kind: s.kind, source_id: s.sourceId, sample_count: s.t.length, duration_s: s.t[s.t.length - 1]!, block: { byte_offset: offset, byte_length: blocks[k]!.length, sha256: `sha256:${sha256hex(blocks[k]!)}` } };
      offset += blocks[k]!.length;
      return seg;
    }),
  };
  const h = Buffer.from(toJson(header), 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(h.length);
  return { blob: new Uint8Array(Buffer.concat([len, h, ...blocks])), digest };
}
