// The planner stub's planning (document 2 parts 1 and 2): deterministic, joint-space, fast. For each
// enabled node a plausible segment: freespace moves between rest poses (half-cosine, inside the cell's
// velocity ceilings), weld segments along the seam's stand-in joint path at the travel speed, dwell holds,
// sampled at dt 0.01 s and at rest at every boundary. The dense file is encoded with the reference codec
// and decoded again before it is offered for the store, so a file that breaks a format rule becomes a
// dense_error with the codec's reason. What the stub plans and how each dense_error is reached from a
// weldplan: docs/profile.md "Weld planner stub: what it plans".

import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { COLS, decode, DenseFormatError, encode, MAX_SAMPLES, SCHEMA, type SegmentContent } from '../dense/codec.ts';
import { JsonNumber, JsonObject, type JsonValue } from '../json.ts';
import { CELLS, jointsAt, unreachableAxis, type PlannerCell } from './cell.ts';
import type { PlanOptions } from './options.ts';
import { dist, numberOf } from './program.ts';
import { PlanningFailure, type Weldplan } from './weldplan.ts';
import { canonicalJson } from '../json.ts';

export const RESULT_SCHEMA = 'amr-weld-planner-v1.motion-plan-result.v1';
export const DT = 0.01;
export const PRODUCER = { module: 'weld-planner-stub', source_revision: 'cell-hil-planner-stub-1', source_revision_state: 'stub' };
export const STAGES = ['sweep', 'weldseam', 'freespace seed', 'optimize', 'verify', 'dense'] as const;
/** Freespace moves peak at this fraction of the ceiling. */
const FREESPACE_FRACTION = 0.8;
const MIN_MOVE_S = 0.2;
const IDENTITY = /^[A-Za-z0-9._:-]+$/;
const DEG = 180 / Math.PI;

export interface StubHooks {
  stageDelayMs: number;
  /**
   * A stage's wait ends early once the file releasePath(token) exists (docs/profile.md "Test hooks"): a
   * test on the planner's machine holds a plan in a stage as long as it needs and lets it go at once,
   * instead of guessing a delay long enough for a loaded host.
   */
  stageRelease: string | undefined;
  ignoreSigterm: boolean;
  helperProcess: boolean;
}

export interface PlanOutcome {
  result: Record<string, unknown>;
  /** The checked dense file when one was built. */
  dense?: { bytes: Buffer; digest: string };
  denseError?: { reason: string; detail: string; segment_index: number | null };
  requestSha256: string;
}

type Stage = (name: (typeof STAGES)[number]) => Promise<void>;

const obj = (v: JsonValue | undefined): JsonObject | undefined => (v instanceof JsonObject ? v : undefined);
const str = (v: JsonValue | undefined): string | undefined => (typeof v === 'string' ? v : undefined);
const nums = (v: JsonValue | undefined): number[] => (Array.isArray(v) ? v.map(numberOf) : []);

/** Hooks of the stub read from the program's extensions.weld_planner_stub (docs/profile.md). */
export function stubHooks(w: Weldplan): StubHooks {
  const h = obj(w.program.extensions?.get('weld_planner_stub'));
  const delay = h?.get('stage_delay_ms');
  return {
    stageDelayMs: delay instanceof JsonNumber ? Math.max(0, Math.min(60_000, Number(delay.text))) : 0,
    stageRelease: releaseToken(h?.get('stage_release')),
    ignoreSigterm: h?.get('ignore_sigterm') === true,
    helperProcess: h?.get('helper_process') === true,
  };
}

/**
 * The release token: a short name, never a path, so a client of a planner listening beyond loopback can
 * ask it about one kind of file only (a release file), not whether any path on its machine exists.
 */
function releaseToken(v: JsonValue | undefined): string | undefined {
  return typeof v === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(v) ? v : undefined;
}

/** Where the release file of a stage_release token is: in the planner's temporary directory. */
export function releasePath(token: string, dir = tmpdir()): string {
  return join(dir, `weld-planner-stub-release-${token}`);
}

function sortedJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return typeof v === 'bigint' ? v.toString() : JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(sortedJson).join(',') + ']';
  const o = v as Record<string, unknown>;
  return '{' + Object.keys(o).sort().map((k) => JSON.stringify(k) + ':' + sortedJson(o[k])).join(',') + '}';
}

/**
 * request_sha256: SHA-256 hex of the canonical JSON of what decides the plan (docs/profile.md): the program
 * digest, the canonical tooling digest, the STEP bytes' digest, the cell and the planning options. Identity
 * stamps (program_id, manifest_revision, plan_revision) are not in it.
 */
export function requestDigest(w: Weldplan, o: PlanOptions): string {
  const tooling = 'sha256:' + createHash('sha256').update(canonicalJson(w.tooling)).digest('hex');
  const req = {
    schema: 'weld-planner-stub.request.v1',
    program_digest: w.program.digest,
    tooling_sha256: tooling,
    step_sha256: w.entryDigests['workpiece.step'] ?? null,
    cell_id: w.program.cellId,
    options: {
      k_best: o.k_best, screen_collisions: o.screen_collisions, samples_per_seam: o.samples_per_seam, run_weld_trajopt: o.run_weld_trajopt,
      run_connecting_trajopt: o.run_connecting_trajopt, free_space_backend: o.free_space_backend, verify: o.verify, verify_margin_mm: o.verify_margin_mm,
      order_seams: o.order_seams, dense: o.dense,
    },
  };
  return createHash('sha256').update(sortedJson(req)).digest('hex');
}

// ---- geometry → points -------------------------------------------------------------------------

function bezier(cps: number[][], u: number): number[] {
  let pts = cps.map((p) => p.slice());
  while (pts.length > 1) pts = pts.slice(1).map((p, i) => p.map((x, k) => pts[i]![k]! * (1 - u) + x * u));
  return pts[0]!;
}

function curvePoints(line: JsonObject): number[][] {
  const out: number[][] = [];
  for (const s of (line.get('segments') as JsonValue[]) ?? []) {
    const cps = ((s as JsonObject).get('control_points_xyz_m') as JsonValue[]).map(nums);
    for (let i = out.length === 0 ? 0 : 1; i <= 32; i++) out.push(bezier(cps, i / 32));
  }
  return out;
}

function arcPoints(a: number[], b: number[], c: number[]): number[][] {
  // Circle through three points, sampled from a through b to c.
  const ab = b.map((x, i) => x - a[i]!);
  const ac = c.map((x, i) => x - a[i]!);
  const cross = (u: number[], v: number[]) => [u[1]! * v[2]! - u[2]! * v[1]!, u[2]! * v[0]! - u[0]! * v[2]!, u[0]! * v[1]! - u[1]! * v[0]!];
  const dot = (u: number[], v: number[]) => u[0]! * v[0]! + u[1]! * v[1]! + u[2]! * v[2]!;
  const n = cross(ab, ac);
  const nn = dot(n, n);
  const t1 = cross(n, ab).map((x) => (x * dot(ac, ac)) / (2 * nn));
  const t2 = cross(ac, n).map((x) => (x * dot(ab, ab)) / (2 * nn));
  const centre = a.map((x, i) => x + t1[i]! + t2[i]!);
  const r = dist(a, centre);
  const e1 = a.map((x, i) => (x - centre[i]!) / r);
  const nl = Math.sqrt(nn);
  const e2 = cross(n.map((x) => x / nl), e1);
  const ang = (p: number[]) => {
    const d = p.map((x, i) => x - centre[i]!);
    const t = Math.atan2(dot(d, e2), dot(d, e1));
    return t < 0 ? t + 2 * Math.PI : t;
  };
  let tb = ang(b);
  let tc = ang(c);
  if (tb > tc) {
    tb -= 2 * Math.PI;
    tc -= 2 * Math.PI;
  } // go the other way round so that b is passed
  const out: number[][] = [];
  for (let i = 0; i <= 64; i++) {
    const t = (tc * i) / 64;
    out.push(centre.map((x, k) => x + r * (Math.cos(t) * e1[k]! + Math.sin(t) * e2[k]!)));
  }
  return out;
}

function weldPath(w: Weldplan, g: JsonObject): number[][] {
  const kind = g.get('kind');
  let pts: number[][];
  if (kind === 'seam') {
    const line = g.has('line') ? (g.get('line') as JsonObject) : (w.program.weldJoints.get(g.get('weld_joint_ref') as string)!.get('weld_line') as JsonObject | undefined);
    pts = line ? curvePoints(line) : [];
  } else {
    const raw = (g.get('points') as JsonValue[]).map((p) => nums((p as JsonObject).get('xyz_m')));
    pts = kind === 'manual_pose_wp' && g.get('shape') === 'arc' ? arcPoints(raw[0]!, raw[1]!, raw[2]!) : raw;
  }
  if (g.get('direction') === 'reverse') pts.reverse();
  const span = g.get('span');
  if (Array.isArray(span)) pts = cut(pts, numberOf(span[0]), numberOf(span[1]));
  const shift = w.program.anchor.map((a, i) => a + w.program.offset[i]!);
  return pts.map((p) => p.map((x, i) => x + shift[i]!));
}

function cumulative(pts: number[][]): number[] {
  const c = [0];
  for (let i = 1; i < pts.length; i++) c.push(c[i - 1]! + dist(pts[i - 1]!, pts[i]!));
  return c;
}

function pointAt(pts: number[][], cum: number[], d: number): number[] {
  let k = 1;
  while (k < pts.length - 1 && cum[k]! < d) k++;
  const seg = cum[k]! - cum[k - 1]!;
  const u = seg > 0 ? Math.min(1, Math.max(0, (d - cum[k - 1]!) / seg)) : 0;
  return pts[k - 1]!.map((x, i) => x + (pts[k]![i]! - x) * u);
}

function cut(pts: number[][], s0: number, s1: number): number[][] {
  const cum = cumulative(pts);
  const L = cum[cum.length - 1]!;
  const out = [pointAt(pts, cum, s0 * L)];
  for (let i = 1; i < pts.length - 1; i++) if (cum[i]! > s0 * L && cum[i]! < s1 * L) out.push(pts[i]!);
  out.push(pointAt(pts, cum, s1 * L));
  return out;
}

// ---- sampling ------------------------------------------------------------------------------------

interface Seg extends SegmentContent {
  nodeId: string;
}

const gridCount = (T: number) => Math.max(2, Math.ceil(T / DT - 1e-9) + 1);

/** Rest-to-rest half-cosine move over n samples (exact rest and exact end pose). */
function restMove(kind: string, id: string, from: readonly number[], to: readonly number[], n: number, torch: number): Seg {
  const T = (n - 1) * DT;
  const t: number[] = [];
  const q: number[] = [];
  const qd: number[] = [];
  const flags: number[] = [];
  for (let i = 0; i < n; i++) {
    t.push(i * DT);
    const ph = (Math.PI * i) / (n - 1);
    for (let j = 0; j < COLS; j++) {
      const d = to[j]! - from[j]!;
      q.push(i === n - 1 ? to[j]! : from[j]! + (d * (1 - Math.cos(ph))) / 2);
      qd.push(i === 0 || i === n - 1 ? 0 : ((d * Math.PI) / (2 * T)) * Math.sin(ph));
    }
    flags.push(torch);
  }
  return { kind, sourceId: id, nodeId: id, t, q, qd, flags };
}

/** Samples for a freespace move with its peak speed at FREESPACE_FRACTION of every ceiling, stretched by scale. */
function freespaceCount(cell: PlannerCell, from: readonly number[], to: readonly number[], scale: number): number {
  let T = MIN_MOVE_S;
  for (let j = 0; j < COLS; j++) T = Math.max(T, (Math.PI * Math.abs(to[j]! - from[j]!)) / (2 * FREESPACE_FRACTION * cell.ceiling[j]!));
  return gridCount(T / scale);
}

/** A weld along lattice knots q_k at arc parameters s_k, timed s(t) = (1 - cos(pi t / T)) / 2. */
function weldSamples(id: string, knots: number[][], s: number[], n: number, torch: number): Seg {
  const T = (n - 1) * DT;
  const t: number[] = [];
  const q: number[] = [];
  const qd: number[] = [];
  const flags: number[] = [];
  let k = 1;
  for (let i = 0; i < n; i++) {
    const ti = i * DT;
    const si = i === n - 1 ? 1 : (1 - Math.cos((Math.PI * ti) / T)) / 2;
    const sdot = i === 0 || i === n - 1 ? 0 : (Math.PI / (2 * T)) * Math.sin((Math.PI * ti) / T);
    while (k < s.length - 1 && s[k]! < si) k++;
    const ds = s[k]! - s[k - 1]!;
    const u = ds > 0 ? Math.min(1, Math.max(0, (si - s[k - 1]!) / ds)) : 1;
    t.push(ti);
    for (let j = 0; j < COLS; j++) {
      const a = knots[k - 1]![j]!;
      const b = knots[k]![j]!;
      q.push(i === n - 1 ? knots[knots.length - 1]![j]! : a + (b - a) * u);
      qd.push(ds > 0 ? ((b - a) / ds) * sdot : 0);
    }
    flags.push(torch);
  }
  return { kind: 'weld', sourceId: id, nodeId: id, t, q, qd, flags };
}

/** How many samples holdSamples writes for `duration` (counted before any is allocated). */
function holdCount(duration: number): number {
  const steps = duration / DT;
  const whole = Math.round(steps);
  if (Math.abs(steps - whole) <= 1e-9 * Math.max(1, steps)) return whole + 1;
  // Far past the limit the exact count does not matter; below it, count as holdSamples writes.
  if (steps > MAX_SAMPLES + 2) return Math.ceil(steps) + 1;
  let n = 0;
  while (n * DT < duration) n++;
  return n + 1;
}

function holdSamples(id: string, pose: readonly number[], duration: number): Seg {
  const steps = duration / DT;
  const whole = Math.round(steps);
  const t: number[] = [];
  // On the grid when the duration is a whole number of periods; otherwise the authored duration is kept
  // as the last sample's time (the step before it is short: time_grid_invalid).
  if (Math.abs(steps - whole) <= 1e-9 * Math.max(1, steps)) for (let i = 0; i <= whole; i++) t.push(i * DT);
  else {
    for (let i = 0; i * DT < duration; i++) t.push(i * DT);
    t.push(duration);
  }
  const n = t.length;
  const q: number[] = [];
  for (let i = 0; i < n; i++) q.push(...pose);
  return { kind: 'dwell', sourceId: id, nodeId: id, t, q, qd: new Array(n * COLS).fill(0), flags: new Array(n).fill(0) };
}

/**
 * The stub's header fault hook (extensions.weld_planner_stub.header_defect "schema"): the written header
 * names schema version 2, in place (the same length, so header_len stands).
 */
function writeOtherSchema(bytes: Buffer): void {
  const n = bytes.readUInt32BE(0);
  const at = bytes.subarray(4, 4 + n).indexOf(`"schema":"${SCHEMA}"`);
  if (at < 0) throw new Error('the encoder wrote no schema member');
  bytes.write('2', 4 + at + `"schema":"${SCHEMA}`.length - 1, 'latin1');
}

/** The stub's resampling fault hook: nodes[].extensions.weld_planner_stub.resample_defect. */
function applyDefect(seg: Seg, defect: string | undefined, cell: PlannerCell): void {
  const n = seg.t.length;
  const q = seg.q as number[];
  const qd = seg.qd as number[];
  if (defect === 'q_step_exceeded' && n >= 3) {
    const i = Math.floor(n / 2);
    q[i * COLS] = q[i * COLS]! + 2 * 1.25 * cell.ceiling[0]! * DT;
  } else if (defect === 'boundary_qd_nonzero') qd[(n - 1) * COLS] = 1e-3;
}

// ---- planning ----------------------------------------------------------------------------------------

interface SeamPlan {
  nodeId: string;
  id: string;
  lengthMm: number;
  crossed: boolean;
  knots: number[][];
  s: number[];
  frontier?: { s: number; knot: number };
  cause?: string;
  standoffMin: number;
  travel: number;
}

function standoffMin(f: JsonObject): number {
  switch (f.get('kind')) {
    case 'constant':
      return numberOf(f.get('value'));
    case 'piecewise_linear':
      return Math.min(...(f.get('knots') as JsonValue[]).map((k) => numberOf((k as JsonValue[])[1])));
    case 'bspline':
      return Math.min(...nums(f.get('control_values')));
    default:
      return Math.min(...nums(f.get('values')));
  }
}

function planSeam(w: Weldplan, cell: PlannerCell, n: JsonObject, o: PlanOptions): SeamPlan {
  const g = n.get('geometry') as JsonObject;
  const id = str(g.get('id')) ?? str(n.get('id'))!;
  const path = weldPath(w, g);
  const cum = cumulative(path);
  const L = cum[cum.length - 1]!;
  const travel = numberOf(n.get('travel_speed_mm_s'));
  const N = o.samples_per_seam ?? Math.max(2, Math.min(512, Math.ceil((L * 1000) / (travel * 0.1)) + 1));
  const knots: number[][] = [];
  const s: number[] = [];
  let frontier: SeamPlan['frontier'];
  let cause: string | undefined;
  for (let k = 0; k < N; k++) {
    const sk = k / (N - 1);
    const q = jointsAt(pointAt(path, cum, sk * L), cell.home);
    const bad = unreachableAxis(cell, q);
    if (bad >= 0) {
      frontier = { s: k === 0 ? 0 : (k - 1) / (N - 1), knot: k };
      cause = `joint_limit:${cell.axisNames[bad]}`;
      break;
    }
    knots.push(q);
    s.push(sk);
  }
  return { nodeId: str(n.get('id'))!, id, lengthMm: L * 1000, crossed: frontier === undefined, knots, s, frontier, cause, standoffMin: standoffMin(n.get('standoff_mm') as JsonObject), travel };
}

const round = (x: number, d = 6) => Math.round(x * 10 ** d) / 10 ** d;
const deg = (q: readonly number[]) => q.map((x) => round(x * DEG));

/** Plan a validated weldplan. `stage` reports progress (and is where the stub's stage delay waits). */
export async function plan(w: Weldplan, o: PlanOptions, stage: Stage): Promise<PlanOutcome> {
  const started = performance.now();
  const timings: Record<string, number> = {};
  let mark = started;
  const lap = (name: string) => {
    const now = performance.now();
    timings[name] = round(now - mark, 3);
    mark = now;
  };
  const cell = CELLS[w.program.cellId];
  if (!cell) throw new PlanningFailure('CellMeshesMissing', `no collision meshes for cell ${JSON.stringify(w.program.cellId)} (known: ${Object.keys(CELLS).join(', ')})`);
  const req = requestDigest(w, o);
  const scale = w.program.speedScale;
  const torch = w.program.executionMode === 'production' ? 1 : 0;
  const enabled = w.program.nodes.filter((n) => n.get('enabled') === true);

  await stage('sweep');
  lap('sweep');
  await stage('weldseam');
  const seams = new Map<JsonObject, SeamPlan>();
  for (const n of enabled) if (n.get('op') === 'weld') seams.set(n, planSeam(w, cell, n, o));
  lap('weldseam');

  await stage('freespace seed');
  const connectingFailed = o.run_connecting_trajopt && o.free_space_backend === 'curobo';
  const segs: Seg[] = [];
  // Document 2 limits: at most MAX_SAMPLES samples in a dense file. Every segment's sample count is known
  // before its samples are written (a 1e-9 mm/s weld or a year-long dwell is valid input and would need
  // more memory than the machine has): once the total passes the limit nothing more is allocated, and the
  // dense stage answers sample_count_overflow with the total counted.
  let sampleTotal = 0;
  const fits = (count: number): boolean => {
    sampleTotal += count;
    return sampleTotal <= MAX_SAMPLES;
  };
  const connecting: Record<string, unknown>[] = [];
  const unplanned: string[] = [];
  let pose: readonly number[] = cell.home;
  let firstMotion = true;
  const nextWeldStart = (from: number): number[] | undefined => {
    for (let k = from + 1; k < enabled.length; k++) {
      const op = enabled[k]!.get('op');
      if (op === 'weld') {
        const sp = seams.get(enabled[k]!)!;
        return sp.knots[0];
      }
      if (op === 'retract' || op === 'approach' || op === 'home') return undefined;
    }
    return undefined;
  };
  const free = (kind: string, n: JsonObject, to: readonly number[], connKind: string, fromSeam: string | null, toSeam: string | null, moveScale = 1) => {
    const id = str(n.get('id'))!;
    const count = freespaceCount(cell, pose, to, scale * moveScale);
    if (o.run_connecting_trajopt && !connectingFailed) {
      const T = (count - 1) * DT;
      if (fits(count)) segs.push(restMove(kind, id, pose, to, count, 0));
      connecting.push({
        kind: connKind, from: fromSeam, to: toSeam, node_id: id, duration_s: round(T, 9),
        knots_deg: [deg(pose), deg(to)], knot_velocity_deg_s: [new Array(COLS).fill(0), new Array(COLS).fill(0)], times_s: [0, round(T, 9)],
        clearance_mm: { env: 50, self: 100 }, verdict: o.verify ? 'PASS' : 'NOT_RUN',
      });
    }
    pose = to;
  };
  let lastSeam: string | null = null;
  for (const [k, n] of enabled.entries()) {
    const op = n.get('op') as string;
    const id = str(n.get('id'))!;
    if (op === 'weld') {
      const sp = seams.get(n)!;
      if (!sp.crossed) continue;
      if (o.run_weld_trajopt) {
        const T = sp.lengthMm / sp.travel / scale;
        const count = gridCount(T);
        if (fits(count)) {
          const seg = weldSamples(id, sp.knots, sp.s, count, torch);
          applyDefect(seg, str(obj(obj(n.get('extensions'))?.get('weld_planner_stub'))?.get('resample_defect')), cell);
          segs.push(seg);
        }
      }
      pose = sp.knots[sp.knots.length - 1]!;
      lastSeam = sp.id;
      firstMotion = false;
      continue;
    }
    if (op === 'approach' || op === 'transit') {
      const to = nextWeldStart(k);
      const toSeam = (() => {
        for (let m = k + 1; m < enabled.length; m++) if (enabled[m]!.get('op') === 'weld') return seams.get(enabled[m]!)!.id;
        return null;
      })();
      if (!to) unplanned.push(id);
      else free('freespace', n, to, op, op === 'approach' ? null : lastSeam, toSeam);
      firstMotion = false;
    } else if (op === 'retract') {
      free('freespace', n, cell.home, 'retract', lastSeam, null);
      firstMotion = false;
    } else if (op === 'home') {
      free('freespace', n, cell.home, firstMotion ? 'approach' : 'retract', null, null);
      firstMotion = false;
    } else if (op === 'move') {
      const target = n.get('target') as JsonObject;
      const names = target.get('joint_names') as string[];
      const values = nums(target.get('joint_values_rad'));
      const to = pose.slice();
      let ok = n.get('target_space') !== 'cartesian';
      names.forEach((nm, i) => {
        const j = cell.axisNames.indexOf(nm);
        if (j < 0) ok = false;
        else to[j] = values[i]!;
      });
      if (ok && unreachableAxis(cell, to) >= 0) ok = false;
      if (!ok) unplanned.push(id);
      else free('freespace', n, to, 'transit', lastSeam, null, numberOf(n.get('speed_scale')));
      firstMotion = false;
    } else if (op === 'dwell') {
      const d = numberOf(n.get('duration_s'));
      if (d > 0 && fits(holdCount(d))) segs.push(holdSamples(id, pose, d));
    }
    // io nodes add no motion (docs/profile.md).
  }
  lap('freespace seed');
  await stage('optimize');
  lap('optimize');
  await stage('verify');
  const seamEntries = [...seams.values()].map((sp, i) => {
    const entry: Record<string, unknown> = {
      id: sp.id, node_id: sp.nodeId, length_mm: round(sp.lengthMm), crossed: sp.crossed, axis_names: [...cell.axisNames], held: { J7: cell.home[6], J8: cell.home[7], J9: cell.home[8] },
      candidates: Array.from({ length: o.k_best }, (_, c) => ({
        cost_deg: round(sp.knots.reduce((a, q, k) => (k === 0 ? 0 : a + dist3(q, sp.knots[k - 1]!)), 0) * DEG * (1 + 0.1 * c)),
        joints_deg: sp.knots.map((q) => deg(q.map((x, j) => (j === 5 ? x + (c * Math.PI) / 180 : x)))),
        times_s: sp.s.map((x) => round(x * (sp.lengthMm / sp.travel), 9)),
      })),
    };
    if (!sp.crossed) {
      entry.frontier = sp.frontier;
      entry.frontier_causes = [sp.cause];
    }
    if (o.run_weld_trajopt && sp.crossed) {
      const T = (gridCount(sp.lengthMm / sp.travel / scale) - 1) * DT;
      const times = sp.s.map((x) => (T / Math.PI) * Math.acos(1 - 2 * x));
      const pass = o.verify && sp.standoffMin >= o.verify_margin_mm;
      entry.trajectory = {
        knots_deg: sp.knots.map(deg),
        knot_velocity_deg_s: sp.knots.map((q, k) => {
          const a = sp.knots[Math.max(0, k - 1)]!;
          const b = sp.knots[Math.min(sp.knots.length - 1, k + 1)]!;
          const ds = sp.s[Math.min(sp.s.length - 1, k + 1)]! - sp.s[Math.max(0, k - 1)]!;
          const sdot = (Math.PI / (2 * T)) * Math.sin((Math.PI * times[k]!) / T);
          return q.map((_, j) => round(ds > 0 ? (((b[j]! - a[j]!) / ds) * sdot * DEG) : 0));
        }),
        times_s: times.map((x) => round(x, 9)),
        sampled_tracking_mm: { knots: sp.knots.map(() => 0), midpoints: sp.knots.slice(1).map(() => 0) },
        tracking: { verdict: o.verify ? 'PASS' : 'NOT_RUN', tolerance_mm: 0.5, bound_mm: 0, worst_seen_mm: 0, segments_out: 0, undecided: 0, unverifiable: o.verify ? 0 : sp.knots.length - 1 },
        verdict: { verdict: !o.verify ? 'NOT_RUN' : pass ? 'PASS' : 'FAIL', collisions: o.verify && !pass ? 1 : 0, penetrating: 0, limit_violations: 0, unverifiable: o.verify ? 0 : 1, worst_clearance_mm: round(sp.standoffMin) },
      };
    }
    void i;
    return entry;
  });
  lap('verify');

  const result: Record<string, unknown> = {
    schema: RESULT_SCHEMA,
    cell_id: w.program.cellId,
    screened: o.screen_collisions,
    k_best: o.k_best,
    request: {
      request_sha256: req, program_id: o.program_id, cell_id: w.program.cellId, program_digest: w.program.digest,
      document_program_id: w.program.programId, entries: w.entryDigests, manifest_revision: o.manifest_revision, plan_revision: o.plan_revision,
    },
    producer: PRODUCER,
    coverage: {
      candidate_collision_screening: o.screen_collisions ? 'stand_in' : 'unchecked',
      weld_trajectory_continuous_verification: o.run_weld_trajopt && o.verify ? 'stand_in' : 'not_run',
      connecting_trajectory_continuous_verification: o.run_connecting_trajopt && o.verify ? 'stand_in' : 'not_run',
      canonical_motion_server: false,
      physical_motion: false,
      execution_authority: 'control_service',
      candidate_limit_checks: 'position',
    },
    seams: seamEntries,
    connecting_trajectories: connecting,
  };
  if (connectingFailed) result.connecting_trajectories_error = { type: 'BackendUnavailable', message: 'free_space_backend curobo needs CUDA; this planner has no GPU' };
  if (w.program.nodes.some((n) => n.get('op') === 'move')) result.program_order = enabled.map((n) => n.get('id'));
  if (scale < 1) result.speed_scale = scale;

  let outcome: Omit<PlanOutcome, 'result'> = { requestSha256: req };
  if (o.dense) {
    await stage('dense');
    outcome = { requestSha256: req, ...denseStage(w, o, cell, req, seams, seamEntries, segs, sampleTotal, unplanned, connectingFailed, result) };
    lap('dense');
  }
  result.options = { ...o };
  timings.total = round(performance.now() - started, 3);
  result.timings_ms = timings;
  return { result, ...outcome };
}

const dist3 = (a: number[], b: number[]) => Math.sqrt(a.reduce((s, x, j) => s + (x - b[j]!) ** 2, 0));

function denseStage(
  w: Weldplan, o: PlanOptions, cell: PlannerCell, req: string, seams: Map<JsonObject, SeamPlan>, seamEntries: Record<string, unknown>[],
  segs: Seg[], sampleTotal: number, unplanned: string[], connectingFailed: boolean, result: Record<string, unknown>,
): Omit<PlanOutcome, 'result' | 'requestSha256'> {
  const fail = (reason: string, detail: string, segment_index: number | null = null) => {
    const e = { reason, detail, segment_index };
    result.dense_error = e;
    return { denseError: e };
  };
  // Document 2 part 2 "dense_error reason" table, in its order (docs/profile.md).
  if (!o.run_weld_trajopt || !o.run_connecting_trajopt) return fail('result_empty', 'dense needs run_weld_trajopt and run_connecting_trajopt');
  if (o.program_id === '' || !IDENTITY.test(o.program_id)) return fail('identity_invalid', 'program_id must be letters, digits, dot, underscore, colon or hyphen');
  const uncrossed = [...seams.values()].find((s) => !s.crossed);
  if (uncrossed) return fail('seam_not_planned', `seam ${uncrossed.id} was not crossed (${uncrossed.cause})`);
  const unverified = seamEntries.find((s) => ((s.trajectory as { verdict: { verdict: string } }).verdict.verdict !== 'PASS'));
  if (unverified) return fail('motion_not_verified', `seam ${unverified.id as string} verdict is not PASS`);
  if (connectingFailed) return fail('motion_join_failed', 'connecting moves could not be planned (free_space_backend curobo unavailable)');
  const ids = seamEntries.map((s) => s.id as string);
  const dup = ids.find((x, i) => ids.indexOf(x) !== i);
  if (dup !== undefined) return fail('motion_result_invalid', `duplicate seam id ${dup}`);
  if (unplanned.length) return fail('motion_not_planned', `node ${unplanned[0]} has no planned motion`);
  if (sampleTotal === 0) return fail('result_empty', 'nothing playable');
  // Counted, not built, past the limit (see `fits` in plan()).
  if (sampleTotal > MAX_SAMPLES) return fail('sample_count_overflow', `${sampleTotal} samples, more than ${MAX_SAMPLES}`);

  const planId = `${o.program_id}:${req.slice(0, 12)}`;
  const programDigest = `sha256:${req}`;
  const robotCell = {
    model_id: w.program.modelId,
    robot_description_sha256: w.program.robotDescriptionSha256,
    machine_planning_calibration_sha256: '',
    machine_planning_calibration_source: '',
  };
  const bytes = encode({
    planId, programId: o.program_id, programDigest, manifestRevision: o.manifest_revision, planRevision: o.plan_revision,
    createdAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), axisMask: cell.axisMask, dtS: DT, maxAbsQd: cell.ceiling, segments: segs, robotCell,
  });
  if (str(obj(w.program.extensions?.get('weld_planner_stub'))?.get('header_defect')) === 'schema') writeOtherSchema(bytes);
  let x;
  try {
    x = decode(bytes, { order: 'content_first', schemaReason: 'schema_mismatch' });
  } catch (e) {
    if (!(e instanceof DenseFormatError)) throw e;
    return fail(e.reason, e.message.slice(e.reason.length + 2), e.where.segment ?? null);
  }
  result.dense = {
    trajectory_digest: x.digest, plan_id: planId, program_digest: programDigest, dt_s: DT, total_sample_count: x.t.length, total_duration_s: x.totalDurationS,
    max_abs_qd_rad_s: [...cell.ceiling], robot_cell: robotCell, bytes: bytes.length,
    segments: x.segments.map((s) => ({ index: s.index, kind: s.kind, source_id: s.sourceId, sample_count: s.sampleCount, duration_s: s.durationS })),
  };
  return { dense: { bytes, digest: x.digest } };
}
