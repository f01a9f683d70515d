// Validation of the program document `robot.v4.program.v2` (document 3 part 2 "Program document") as the
// weld planner stub reads it from a .weldplan container. Every problem found is listed with the rule it
// breaks (the catalogue's rule names: program.forbidden_keys, program.ordering_grammar, ...; `field` for a
// required field, type, range or enum) and a path; the planner reports the first. Shapes the document
// leaves open (units object, weld geometry lines, scalar function fields, weave, lead) are decided in
// docs/profile.md "Weld planner: program document shapes".

import { JsonNumber, JsonObject, type JsonValue } from '../json.ts';
import { canonicalDigest, without } from './canonical.ts';
import { CanonicalError } from '../json.ts';

export const PROGRAM_SCHEMA = 'robot.v4.program.v2';
export const PROGRAM_STATES = ['draft', 'saved_unplanned', 'needs_plan', 'planning', 'planned', 'accepted_simulation', 'accepted_physical', 'execution_ready', 'running', 'completed', 'stopped', 'faulted'];
export const EXECUTION_MODES = ['simulation', 'dry_run', 'production'];
export const OPS = ['weld', 'approach', 'transit', 'retract', 'home', 'move', 'dwell', 'io'] as const;
export type Op = (typeof OPS)[number];
/** Document 3 "Forbidden keys anywhere, any depth". */
export const FORBIDDEN_KEYS = ['joints', 'joint_positions_rad', 'target_joints_rad', 'q_rad', 'qd_rad_s', 'target_tcp_m', 'tcp_pose_m', 'trajectory', 'planned_path', 'accepted_plan', 'preloaded_plan', 'waypoints', 'rows'];
/** Document 3 "Freespace nodes state constraints only": path vocabulary refused in them. */
export const PATH_VOCABULARY = ['knots', 'knots_u', 'times_s', 'control_points_xyz_m', 'segments', 'samples', 'points', 'poses', 'rpy_rad', 'path'];
export const JOINT_ORDER = ['J1', 'J2', 'J3', 'J4', 'J5', 'J6', 'J7', 'J8', 'J9'];
const FREESPACE = new Set(['approach', 'transit', 'retract', 'home']);
const COMMON_NODE_KEYS = ['id', 'op', 'enabled', 'label', 'comment', 'row_hash', 'extensions'];
const EXTRA_KEYS: Record<Op, { required: string[]; optional: string[] }> = {
  weld: { required: ['geometry', 'travel_speed_mm_s', 'standoff_mm', 'weave', 'weld_parameters'], optional: ['weld_preset_id'] },
  approach: { required: [], optional: ['depart_standoff', 'arrive_standoff', 'overrides'] },
  transit: { required: [], optional: ['depart_standoff', 'arrive_standoff', 'overrides'] },
  retract: { required: [], optional: ['depart_standoff', 'arrive_standoff', 'overrides'] },
  home: { required: [], optional: ['depart_standoff', 'arrive_standoff', 'overrides'] },
  move: { required: ['motion', 'target', 'speed_scale', 'speed_mm_s', 'capture'], optional: ['target_space', 'via', 'acceleration_scale', 'constant_tcp_speed'] },
  dwell: { required: ['duration_s'], optional: [] },
  io: { required: ['channel', 'state'], optional: [] },
};

const SHA_PREFIXED = /^sha256:[0-9a-f]{64}$/;
const HEX64 = /^[0-9a-f]{64}$/;
const RFC3339 = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

export interface Problem {
  /** Catalogue rule name without the `rule:` prefix (program.*), or `field` for field-level problems. */
  rule: string;
  path: string;
  message: string;
}

export class ProgramInvalid extends Error {
  constructor(readonly problems: Problem[]) {
    const p = problems[0]!;
    super(`${p.rule}: ${p.path}: ${p.message}`);
    this.name = 'ProgramDocumentInvalid';
  }
}

/** The parts of a valid program the planner uses (paths into the decoded document). */
export interface ProgramView {
  doc: JsonObject;
  programId: string;
  digest: string;
  executionMode: string;
  cellId: string;
  modelId: string;
  robotDescriptionSha256: string;
  workpieceFrame: string;
  anchor: number[];
  offset: number[];
  speedScale: number;
  nodes: JsonObject[];
  weldJoints: Map<string, JsonObject>;
  extensions?: JsonObject;
}

const isObj = (v: JsonValue | undefined): v is JsonObject => v instanceof JsonObject;
const num = (v: JsonValue | undefined): number | undefined => (v instanceof JsonNumber ? Number(v.text) : undefined);
const isInt = (v: JsonValue | undefined): boolean => v instanceof JsonNumber && /^-?(0|[1-9][0-9]*)$/.test(v.text);
export const numberOf = (v: JsonValue | undefined): number => num(v) ?? NaN;

class Checker {
  readonly problems: Problem[] = [];
  add(rule: string, path: string, message: string): void {
    this.problems.push({ rule, path, message });
  }
  field(path: string, message: string): void {
    this.add('field', path, message);
  }

  obj(o: JsonObject, key: string, path: string, required: boolean): JsonObject | undefined {
    const v = o.get(key);
    if (v === undefined) {
      if (required) this.field(`${path}${key}`, 'required object is missing');
      return undefined;
    }
    if (!isObj(v)) {
      this.field(`${path}${key}`, 'must be an object');
      return undefined;
    }
    return v;
  }
  str(o: JsonObject, key: string, path: string, required: boolean, opts: { nonEmpty?: boolean; oneOf?: readonly string[]; pattern?: RegExp; what?: string } = {}): string | undefined {
    const v = o.get(key);
    if (v === undefined) {
      if (required) this.field(`${path}${key}`, 'required string is missing');
      return undefined;
    }
    if (typeof v !== 'string') return void this.field(`${path}${key}`, 'must be a string');
    if (opts.nonEmpty && v === '') return void this.field(`${path}${key}`, 'must not be empty');
    if (opts.oneOf && !opts.oneOf.includes(v)) return void this.field(`${path}${key}`, `must be one of ${opts.oneOf.join(', ')}`);
    if (opts.pattern && !opts.pattern.test(v)) return void this.field(`${path}${key}`, `must be ${opts.what ?? opts.pattern.source}`);
    return v;
  }
  number(o: JsonObject, key: string, path: string, required: boolean, range: { min?: number; max?: number; minExclusive?: boolean; integer?: boolean; text?: string } = {}): number | undefined {
    const v = o.get(key);
    if (v === undefined) {
      if (required) this.field(`${path}${key}`, 'required number is missing');
      return undefined;
    }
    if (!(v instanceof JsonNumber)) return void this.field(`${path}${key}`, range.integer ? 'must be an integer' : 'must be a number');
    if (range.integer && !isInt(v)) return void this.field(`${path}${key}`, 'must be an integer');
    const x = Number(v.text);
    if (!Number.isFinite(x)) return void this.field(`${path}${key}`, 'must be finite');
    const low = range.min !== undefined && (range.minExclusive ? !(x > range.min) : !(x >= range.min));
    const high = range.max !== undefined && !(x <= range.max);
    if (low || high) return void this.field(`${path}${key}`, `must be ${range.text ?? `${range.minExclusive ? '>' : '>='} ${range.min}`}`);
    return x;
  }
  bool(o: JsonObject, key: string, path: string, required: boolean): boolean | undefined {
    const v = o.get(key);
    if (v === undefined) {
      if (required) this.field(`${path}${key}`, 'required boolean is missing');
      return undefined;
    }
    if (typeof v !== 'boolean') return void this.field(`${path}${key}`, 'must be a boolean');
    return v;
  }
  vec(o: JsonObject, key: string, path: string, required: boolean, n = 3): number[] | undefined {
    const v = o.get(key);
    if (v === undefined) {
      if (required) this.field(`${path}${key}`, `required array of ${n} numbers is missing`);
      return undefined;
    }
    if (!Array.isArray(v) || v.length !== n || v.some((x) => !(x instanceof JsonNumber) || !Number.isFinite(Number(x.text)))) {
      return void this.field(`${path}${key}`, `must be an array of ${n} finite numbers`);
    }
    return v.map((x) => Number((x as JsonNumber).text));
  }
  arr(o: JsonObject, key: string, path: string, required: boolean, min = 0, max = Infinity): JsonValue[] | undefined {
    const v = o.get(key);
    if (v === undefined) {
      if (required) this.field(`${path}${key}`, 'required array is missing');
      return undefined;
    }
    if (!Array.isArray(v)) return void this.field(`${path}${key}`, 'must be an array');
    if (v.length < min || v.length > max) return void this.field(`${path}${key}`, `must hold ${min}..${max === Infinity ? 'any' : max} entries`);
    return v;
  }
}

/** Keys found anywhere below a value, with their paths. */
function walkKeys(v: JsonValue, path: string, visit: (key: string, path: string) => void): void {
  if (Array.isArray(v)) v.forEach((x, i) => walkKeys(x, `${path}[${i}]`, visit));
  else if (isObj(v)) {
    for (const [k, x] of v.fields) {
      visit(k, `${path}.${k}`);
      walkKeys(x, `${path}.${k}`, visit);
    }
  }
}

// ---- scalar functions (document 3 "Scalar function") ----------------------------------------

/** Checks a scalar function; returns its minimum value over s in [0,1] (a lower bound for bspline). */
function scalarFunction(c: Checker, f: JsonValue | undefined, path: string): number | undefined {
  if (!isObj(f)) {
    c.field(path, 'must be a scalar function object');
    return undefined;
  }
  const kind = f.get('kind');
  switch (kind) {
    case 'constant':
      return c.number(f, 'value', `${path}.`, true);
    case 'piecewise_linear': {
      const knots = c.arr(f, 'knots', `${path}.`, true, 2);
      if (!knots) return undefined;
      let lo = Infinity;
      let prev = -Infinity;
      for (const [i, k] of knots.entries()) {
        const s = Array.isArray(k) && k.length === 2 ? num(k[0]) : undefined;
        const v = Array.isArray(k) && k.length === 2 ? num(k[1]) : undefined;
        if (s === undefined || v === undefined || !Number.isFinite(s) || !Number.isFinite(v) || s < 0 || s > 1 || s < prev) {
          c.add('program.scalar_function_kinds', `${path}.knots[${i}]`, 'knots are [s, value] pairs with s in [0,1] nondecreasing');
          return undefined;
        }
        prev = s;
        lo = Math.min(lo, v);
      }
      return lo;
    }
    case 'bspline': {
      const degree = c.number(f, 'degree', `${path}.`, true, { min: 1, integer: true });
      const ku = c.arr(f, 'knots_u', `${path}.`, true);
      const cv = c.arr(f, 'control_values', `${path}.`, true, 1);
      if (degree === undefined || !ku || !cv) return undefined;
      if (ku.length !== cv.length + degree + 1) {
        c.add('program.bspline_knots', `${path}.knots_u`, `has ${ku.length} entries; control_values + degree + 1 = ${cv.length + degree + 1}`);
        return undefined;
      }
      const vals = cv.map(num);
      if (vals.some((x) => x === undefined || !Number.isFinite(x)) || ku.map(num).some((x) => x === undefined || !Number.isFinite(x))) {
        c.field(`${path}`, 'knots_u and control_values must be finite numbers');
        return undefined;
      }
      return Math.min(...(vals as number[]));
    }
    case 'samples': {
      const s = c.arr(f, 's', `${path}.`, true);
      const values = c.arr(f, 'values', `${path}.`, true);
      if (!s || !values) return undefined;
      if (s.length !== values.length || s.length < 2) {
        c.add('program.samples_function', path, 's and values must have the same length, at least two');
        return undefined;
      }
      const vals = values.map(num);
      if (vals.some((x) => x === undefined || !Number.isFinite(x)) || s.map(num).some((x) => x === undefined || !Number.isFinite(x))) {
        c.field(path, 's and values must be finite numbers');
        return undefined;
      }
      return Math.min(...(vals as number[]));
    }
    default:
      c.add('program.scalar_function_kinds', `${path}.kind`, 'must be constant, piecewise_linear, bspline or samples');
      return undefined;
  }
}

// ---- weld geometry (document 3 "Weld geometry kinds") ---------------------------------------

function curve(c: Checker, line: JsonValue | undefined, path: string): void {
  if (!isObj(line)) return void c.add('program.geometry_seam', path, 'line must be an object {segments}');
  const segs = c.arr(line, 'segments', `${path}.`, true, 1);
  for (const [i, s] of (segs ?? []).entries()) {
    const p = `${path}.segments[${i}]`;
    if (!isObj(s)) {
      c.add('program.geometry_seam', p, 'a B-spline segment is an object {degree, control_points_xyz_m}');
      continue;
    }
    const degree = c.number(s, 'degree', `${p}.`, true, { min: 1, max: 7, integer: true, text: 'an integer 1..7' });
    const cps = c.arr(s, 'control_points_xyz_m', `${p}.`, true, 2);
    if (degree === undefined || !cps) continue;
    if (cps.length !== degree + 1) c.add('program.geometry_seam', `${p}.control_points_xyz_m`, `a degree ${degree} segment has ${degree + 1} control points`);
    cps.forEach((pt, k) => {
      if (!Array.isArray(pt) || pt.length !== 3 || pt.some((x) => !Number.isFinite(numberOf(x)))) c.add('program.geometry_seam', `${p}.control_points_xyz_m[${k}]`, 'a point is three finite numbers');
    });
  }
}

function pointList(c: Checker, g: JsonObject, path: string, rule: string, withContinuity: boolean): number[][] | undefined {
  const pts = g.get('points');
  if (!Array.isArray(pts) || pts.length < 2) {
    c.add(rule, `${path}.points`, 'at least two points are required');
    return undefined;
  }
  const out: number[][] = [];
  for (const [i, p] of pts.entries()) {
    const pp = `${path}.points[${i}]`;
    if (!isObj(p)) {
      c.add(rule, pp, 'a point is an object');
      return undefined;
    }
    const xyz = c.vec(p, 'xyz_m', `${pp}.`, true);
    c.vec(p, 'rpy_rad', `${pp}.`, true);
    if (withContinuity) c.str(p, 'continuity', `${pp}.`, true, { oneOf: ['C0', 'C1', 'C2'] });
    if (!xyz) return undefined;
    out.push(xyz);
  }
  return out;
}

function geometry(c: Checker, g: JsonValue | undefined, path: string, workpieceFrame: string | undefined, weldJoints: Map<string, JsonObject>): void {
  if (!isObj(g)) return void c.field(path, 'required geometry object is missing or not an object');
  const kind = g.get('kind');
  if (kind === 'seam') {
    c.str(g, 'id', `${path}.`, true, { nonEmpty: true });
    c.str(g, 'reference', `${path}.`, true, { nonEmpty: true });
    const o = c.obj(g, 'orientation', `${path}.`, true);
    if (o) {
      scalarFunction(c, o.get('work_angle_deg'), `${path}.orientation.work_angle_deg`);
      scalarFunction(c, o.get('travel_angle_deg'), `${path}.orientation.travel_angle_deg`);
    }
    const hasLine = g.has('line');
    const ref = g.get('weld_joint_ref');
    if (hasLine === (ref !== undefined)) c.add('program.geometry_seam', path, 'exactly one of line and weld_joint_ref');
    else if (hasLine) curve(c, g.get('line'), `${path}.line`);
    else if (typeof ref !== 'string' || !weldJoints.has(ref)) c.add('program.geometry_seam', `${path}.weld_joint_ref`, 'must name a workpiece.weld_joints[] id');
    // Document 3: the seam's line is "the weld_line of the joint named by weld_joint_ref": a joint without
    // one leaves the seam with no line.
    else if (!weldJoints.get(ref)!.has('weld_line')) c.add('program.geometry_seam', `${path}.weld_joint_ref`, `weld joint ${ref} has no weld_line`);
    const span = g.get('span');
    if (span !== undefined) {
      const ok = Array.isArray(span) && span.length === 2 && span.every((x) => Number.isFinite(numberOf(x))) && numberOf(span[0]) >= 0 && numberOf(span[0]) < numberOf(span[1]) && numberOf(span[1]) <= 1;
      if (!ok) c.add('program.geometry_seam', `${path}.span`, 'span is [s0, s1] with 0 <= s0 < s1 <= 1');
    }
    c.str(g, 'direction', `${path}.`, false, { oneOf: ['forward', 'reverse'] });
    c.obj(g, 'lead', `${path}.`, false);
    c.obj(g, 'search_provenance', `${path}.`, false);
  } else if (kind === 'posed_polyline') {
    c.str(g, 'frame_id', `${path}.`, true, { nonEmpty: true });
    pointList(c, g, path, 'program.geometry_posed_polyline', false);
  } else if (kind === 'manual_pose_wp') {
    const frame = c.str(g, 'frame_id', `${path}.`, true);
    if (frame !== undefined && frame !== workpieceFrame) c.add('program.geometry_manual_pose_wp', `${path}.frame_id`, 'must equal workpiece.frame_id');
    const pts = pointList(c, g, path, 'program.geometry_manual_pose_wp', true);
    const shape = c.str(g, 'shape', `${path}.`, false, { oneOf: ['spline', 'arc'] }) ?? 'spline';
    if (pts) {
      for (let i = 1; i < pts.length; i++) {
        if (!(dist(pts[i - 1]!, pts[i]!) > 1e-6)) c.add('program.geometry_manual_pose_wp', `${path}.points[${i}]`, 'consecutive points must be more than 1 micrometre apart');
      }
      if (shape === 'arc') {
        if (pts.length !== 3) c.add('program.geometry_manual_pose_wp', `${path}.points`, 'an arc has exactly three points');
        else if (collinear(pts[0]!, pts[1]!, pts[2]!)) c.add('program.geometry_manual_pose_wp', `${path}.points`, 'the three arc points are collinear');
      }
    }
  } else c.field(`${path}.kind`, 'must be seam, posed_polyline or manual_pose_wp');
}

export const dist = (a: number[], b: number[]) => Math.hypot(a[0]! - b[0]!, a[1]! - b[1]!, a[2]! - b[2]!);
function collinear(a: number[], b: number[], c: number[]): boolean {
  const u = [b[0]! - a[0]!, b[1]! - a[1]!, b[2]! - a[2]!];
  const v = [c[0]! - a[0]!, c[1]! - a[1]!, c[2]! - a[2]!];
  const cross = Math.hypot(u[1]! * v[2]! - u[2]! * v[1]!, u[2]! * v[0]! - u[0]! * v[2]!, u[0]! * v[1]! - u[1]! * v[0]!);
  return cross <= 1e-12 * Math.max(1e-300, Math.hypot(...u) * Math.hypot(...v));
}

// ---- teach poses, standoffs ------------------------------------------------------------------

function teachPose(c: Checker, v: JsonValue | undefined, path: string): void {
  if (!isObj(v)) return void c.field(path, 'required TeachPose object is missing or not an object');
  for (const k of v.keys()) {
    if (!['frame_id', 'xyz_m', 'rpy_rad', 'joint_names', 'joint_values_rad'].includes(k)) c.add('program.teach_pose_keys', `${path}.${k}`, 'TeachPose has no such key');
  }
  const frame = c.str(v, 'frame_id', `${path}.`, true);
  if (frame !== undefined && frame !== 'world') c.add('program.teach_pose_keys', `${path}.frame_id`, 'must be world');
  c.vec(v, 'xyz_m', `${path}.`, true);
  c.vec(v, 'rpy_rad', `${path}.`, true);
  const names = c.arr(v, 'joint_names', `${path}.`, true, 1, 9);
  const values = c.arr(v, 'joint_values_rad', `${path}.`, true);
  if (names) {
    if (names.some((n) => typeof n !== 'string' || n === '')) c.field(`${path}.joint_names`, 'names are nonempty strings');
    else if (new Set(names).size !== names.length) c.field(`${path}.joint_names`, 'names must be unique');
    if (values && (values.length !== names.length || values.some((x) => !Number.isFinite(numberOf(x))))) c.field(`${path}.joint_values_rad`, 'one finite value per joint name');
  }
}

function capture(c: Checker, v: JsonValue | undefined, path: string): void {
  if (!isObj(v)) return void c.field(path, 'required capture object is missing or not an object');
  const source = c.str(v, 'source', `${path}.`, true, { oneOf: ['machine', 'preview'] });
  c.str(v, 'observed_at', `${path}.`, true, { pattern: RFC3339, what: 'an RFC 3339 timestamp' });
  c.str(v, 'model_id', `${path}.`, true, { nonEmpty: true });
  c.str(v, 'robot_description_sha256', `${path}.`, true, { pattern: SHA_PREFIXED, what: 'sha256:<64 hex>' });
  c.str(v, 'machine_planning_calibration_sha256', `${path}.`, false, { pattern: SHA_PREFIXED, what: 'sha256:<64 hex>' });
  if (source === 'machine' && !v.has('cell_id')) c.add('program.capture_cell_id', `${path}.cell_id`, 'required when source is machine');
  c.str(v, 'cell_id', `${path}.`, false, { nonEmpty: true });
  teachPose(c, v.get('pose'), `${path}.pose`);
}

function standoff(c: Checker, v: JsonValue | undefined, path: string): void {
  if (!isObj(v)) return void c.field(path, 'a standoff is an object {direction, distance_mm}');
  const d = v.get('direction');
  const dirOk = d === 'torch_axis' || d === 'workpiece_z' || (Array.isArray(d) && d.length === 3 && d.every((x) => Number.isFinite(numberOf(x))));
  if (!dirOk) c.field(`${path}.direction`, 'must be torch_axis, workpiece_z or a 3-vector');
  c.number(v, 'distance_mm', `${path}.`, true, { min: 0 });
}

// ---- nodes -------------------------------------------------------------------------------------

function node(c: Checker, n: JsonValue, i: number, ctx: { frame?: string; weldJoints: Map<string, JsonObject> }): Op | undefined {
  const path = `nodes[${i}]`;
  if (!isObj(n)) {
    c.field(path, 'a node is an object');
    return undefined;
  }
  c.str(n, 'id', `${path}.`, true, { nonEmpty: true });
  const op = c.str(n, 'op', `${path}.`, true, { oneOf: OPS }) as Op | undefined;
  c.bool(n, 'enabled', `${path}.`, true);
  c.str(n, 'label', `${path}.`, true);
  c.str(n, 'comment', `${path}.`, true);
  c.str(n, 'row_hash', `${path}.`, true, { nonEmpty: true });
  c.obj(n, 'extensions', `${path}.`, false);
  if (op === undefined) return undefined;
  const extra = EXTRA_KEYS[op];
  for (const k of n.keys()) {
    if (!COMMON_NODE_KEYS.includes(k) && !extra.required.includes(k) && !extra.optional.includes(k)) c.add('program.node_unknown_keys', `${path}.${k}`, `a ${op} node has no such key`);
  }
  for (const k of extra.required) if (!n.has(k)) c.field(`${path}.${k}`, `required for a ${op} node`);
  switch (op) {
    case 'weld': {
      geometry(c, n.get('geometry'), `${path}.geometry`, ctx.frame, ctx.weldJoints);
      c.number(n, 'travel_speed_mm_s', `${path}.`, true, { min: 0, minExclusive: true });
      if (n.has('standoff_mm')) {
        const lo = scalarFunction(c, n.get('standoff_mm'), `${path}.standoff_mm`);
        if (lo !== undefined && !(lo > 0)) c.add('program.standoff_positive', `${path}.standoff_mm`, 'standoff must be positive everywhere');
      }
      c.obj(n, 'weave', `${path}.`, true);
      const wp = c.obj(n, 'weld_parameters', `${path}.`, true);
      if (wp && wp.fields.size !== 0) c.field(`${path}.weld_parameters`, 'must be present and empty in v2');
      c.str(n, 'weld_preset_id', `${path}.`, false);
      break;
    }
    case 'approach':
    case 'transit':
    case 'retract':
    case 'home': {
      if (n.has('depart_standoff')) {
        if (op === 'approach' || op === 'home') c.add('program.depart_standoff_forbidden', `${path}.depart_standoff`, `not allowed on ${op}`);
        else standoff(c, n.get('depart_standoff'), `${path}.depart_standoff`);
      }
      if (n.has('arrive_standoff')) {
        if (op === 'retract' || op === 'home') c.add('program.arrive_standoff_forbidden', `${path}.arrive_standoff`, `not allowed on ${op}`);
        else standoff(c, n.get('arrive_standoff'), `${path}.arrive_standoff`);
      }
      c.obj(n, 'overrides', `${path}.`, false);
      walkKeys(n, path, (k, p) => {
        if (PATH_VOCABULARY.includes(k)) c.add('program.path_vocabulary_refused', p, 'freespace nodes state constraints only, never a path');
      });
      break;
    }
    case 'move':
      c.str(n, 'motion', `${path}.`, true, { oneOf: ['joint', 'linear', 'circular'] });
      teachPose(c, n.get('target'), `${path}.target`);
      c.number(n, 'speed_scale', `${path}.`, true, { min: 0, minExclusive: true, max: 1, text: 'in (0, 1]' });
      c.number(n, 'speed_mm_s', `${path}.`, true, { min: 0, minExclusive: true });
      capture(c, n.get('capture'), `${path}.capture`);
      c.str(n, 'target_space', `${path}.`, false, { oneOf: ['cartesian', 'joint'] });
      if (n.has('via')) {
        const via = c.arr(n, 'via', `${path}.`, false);
        via?.forEach((v, k) => teachPose(c, v, `${path}.via[${k}]`));
      }
      c.number(n, 'acceleration_scale', `${path}.`, false, { min: 0, minExclusive: true, max: 1, text: 'in (0, 1]' });
      c.bool(n, 'constant_tcp_speed', `${path}.`, false);
      break;
    case 'dwell':
      c.number(n, 'duration_s', `${path}.`, true, { min: 0 });
      break;
    case 'io':
      c.str(n, 'channel', `${path}.`, true, { nonEmpty: true });
      c.bool(n, 'state', `${path}.`, true);
      break;
  }
  return op;
}

/**
 * Document 3 "Ordering": motion nodes (dwell and io ignored) form `home? approach weld (transit weld)*
 * retract home?`; moves may sit before, after or between complete weld blocks (docs/profile.md: several
 * blocks may follow each other; the grammar applies to every node, enabled or not).
 */
function ordering(c: Checker, ops: Array<{ op: Op; i: number }>): void {
  const motion = ops.filter((x) => x.op !== 'dwell' && x.op !== 'io');
  let state: 'out' | 'approached' | 'welded' | 'transited' = 'out';
  let blocks = 0;
  for (const [k, { op, i }] of motion.entries()) {
    const at = `nodes[${i}]`;
    if (op === 'home') {
      if (k !== 0 && k !== motion.length - 1) return c.add('program.home_at_ends', at, 'home only starts or ends the program');
      if (k !== 0 && state !== 'out') return c.add('program.ordering_grammar', at, 'home ends the program only after a complete weld block');
      continue;
    }
    if (op === 'move') {
      if (state !== 'out') return c.add('program.move_placement', at, 'a move may not sit inside a weld block');
      continue;
    }
    if (op === 'approach') {
      if (state !== 'out') return c.add('program.weld_neighbours', at, 'an approach must be followed by a weld');
      state = 'approached';
      continue;
    }
    if (op === 'weld') {
      if (state !== 'approached' && state !== 'transited') return c.add('program.weld_neighbours', at, 'a weld follows an approach or a transit');
      state = 'welded';
      continue;
    }
    if (op === 'transit') {
      if (state !== 'welded') return c.add('program.transit_between_welds', at, 'a transit sits between two welds');
      state = 'transited';
      continue;
    }
    // retract
    if (state === 'transited') return c.add('program.transit_between_welds', at, 'a transit sits between two welds');
    if (state !== 'welded') return c.add('program.weld_neighbours', at, 'a retract follows a weld');
    state = 'out';
    blocks++;
  }
  if (state === 'welded' || state === 'approached') return c.add('program.weld_neighbours', 'nodes', 'the last weld is not followed by a retract');
  if (state === 'transited') return c.add('program.transit_between_welds', 'nodes', 'a transit sits between two welds');
  if (blocks === 0) c.add('program.ordering_grammar', 'nodes', 'a program holds at least one approach, weld, retract block');
}

/** Validate a decoded program document; throws ProgramInvalid listing every problem found. */
export function validateProgram(doc: JsonValue): ProgramView {
  const c = new Checker();
  if (!isObj(doc)) throw new ProgramInvalid([{ rule: 'field', path: '$', message: 'the program document is not a JSON object' }]);
  // Forbidden keys first: anywhere, at any depth (document 3 "Forbidden keys").
  walkKeys(doc, '$', (k, p) => {
    if (FORBIDDEN_KEYS.includes(k)) c.add('program.forbidden_keys', p.slice(2), `key ${k} is forbidden anywhere in a program document`);
  });
  const schema = doc.get('schema');
  if (schema !== PROGRAM_SCHEMA) c.field('schema', `must be ${PROGRAM_SCHEMA}`);
  const programId = c.str(doc, 'program_id', '', true);
  c.str(doc, 'program_name', '', true);
  c.number(doc, 'program_revision', '', true, { min: 1, integer: true });
  c.number(doc, 'base_program_revision', '', true, { min: 0, integer: true });
  c.str(doc, 'program_digest', '', false, { pattern: SHA_PREFIXED, what: 'sha256:<64 hex>' });
  c.str(doc, 'program_state', '', true, { oneOf: PROGRAM_STATES });
  const executionMode = c.str(doc, 'execution_mode', '', true, { oneOf: EXECUTION_MODES });
  c.str(doc, 'created_utc', '', true, { pattern: RFC3339, what: 'an RFC 3339 timestamp' });
  const units = c.obj(doc, 'units', '', true);
  if (units) {
    const ok = units.get('length') === 'm' && units.get('angle') === 'rad' && units.get('time') === 's' && Array.isArray(units.get('joint_order')) && (units.get('joint_order') as JsonValue[]).join(',') === JOINT_ORDER.join(',') && units.fields.size === 4;
    if (!ok) c.add('program.units_fixed', 'units', 'units are fixed: {length: m, angle: rad, time: s, joint_order: [J1..J9]}');
  }
  const producer = c.obj(doc, 'producer', '', true);
  if (producer) {
    c.str(producer, 'component', 'producer.', true, { oneOf: ['offline-programming-v1', 'weld-planner-v1'] });
    c.str(producer, 'source_revision', 'producer.', true);
    const inputs = c.arr(producer, 'inputs', 'producer.', true, 1);
    inputs?.forEach((x, i) => {
      const p = `producer.inputs[${i}].`;
      if (!isObj(x)) return c.field(p.slice(0, -1), 'an input is an object');
      c.str(x, 'kind', p, true, { oneOf: ['project', 'weld_program', 'cad', 'cell', 'tool'] });
      c.str(x, 'ref', p, true);
      c.str(x, 'sha256', p, true, { pattern: HEX64, what: '64 lowercase hex without prefix' });
    });
  }
  c.obj(doc, 'source', '', false);
  const workpiece = c.obj(doc, 'workpiece', '', true);
  const frame = workpiece ? c.str(workpiece, 'frame_id', 'workpiece.', true, { nonEmpty: true }) : undefined;
  const weldJoints = new Map<string, JsonObject>();
  if (workpiece) {
    c.arr(workpiece, 'solids', 'workpiece.', false);
    const wj = c.arr(workpiece, 'weld_joints', 'workpiece.', false);
    wj?.forEach((j, i) => {
      const p = `workpiece.weld_joints[${i}]`;
      if (!isObj(j)) return c.field(p, 'a weld joint is an object');
      const id = c.str(j, 'id', `${p}.`, true, { nonEmpty: true });
      if (id === undefined) return;
      if (weldJoints.has(id)) c.add('program.weld_joint_ids_unique', `${p}.id`, `weld joint id ${id} repeats`);
      weldJoints.set(id, j);
      if (j.has('weld_line')) curve(c, j.get('weld_line'), `${p}.weld_line`);
    });
  }
  const placement = c.obj(doc, 'placement', '', true);
  const robot = c.obj(doc, 'robot', '', true);
  const cellId = placement ? c.str(placement, 'cell_id', 'placement.', true, { nonEmpty: true }) : undefined;
  const anchor = placement ? c.vec(placement, 'anchor_xyz_m', 'placement.', true) : undefined;
  const offset = placement ? c.vec(placement, 'offset_xyz_m', 'placement.', true) : undefined;
  if (placement) c.vec(placement, 'rpy_rad', 'placement.', true);
  const modelId = robot ? c.str(robot, 'model_id', 'robot.', true, { nonEmpty: true }) : undefined;
  const rds = robot ? c.str(robot, 'robot_description_sha256', 'robot.', true, { pattern: SHA_PREFIXED, what: 'sha256:<64 hex>' }) : undefined;
  if (cellId !== undefined && modelId !== undefined && cellId !== modelId) c.add('program.placement_cell_is_model', 'placement.cell_id', 'must equal robot.model_id');
  const tool = c.obj(doc, 'tool', '', false);
  if (tool) {
    c.str(tool, 'id', 'tool.', true, { nonEmpty: true });
    c.str(tool, 'sha256', 'tool.', true, { pattern: SHA_PREFIXED, what: 'sha256:<64 hex>' });
  }
  const speedScale = c.number(doc, 'speed_scale', '', false, { min: 0.01, max: 1, text: 'in 0.01..1' }) ?? 1;
  const defaults = c.obj(doc, 'defaults', '', true);
  if (defaults) {
    c.number(defaults, 'clearance_min_mm', 'defaults.', true, { min: 0 });
    c.number(defaults, 'speed_scale', 'defaults.', true, { min: 0, minExclusive: true, max: 1, text: 'in (0, 1]' });
    c.str(defaults, 'torch_policy', 'defaults.', true, { oneOf: ['free', 'hold_last', 'torch_down'] });
    c.str(defaults, 'positioner_policy', 'defaults.', true, { oneOf: ['free', 'hold'] });
  }
  const owns = c.arr(doc, 'planner_owns', '', true, 1);
  if (owns?.some((x) => typeof x !== 'string')) c.field('planner_owns', 'must hold strings');
  const extensions = c.obj(doc, 'extensions', '', false);
  const nodes = c.arr(doc, 'nodes', '', true, 1, 4096);
  const ops: Array<{ op: Op; i: number }> = [];
  const ids = new Set<string>();
  nodes?.forEach((n, i) => {
    const op = node(c, n, i, { frame, weldJoints });
    if (op) ops.push({ op, i });
    const id = isObj(n) ? n.get('id') : undefined;
    if (typeof id === 'string' && id !== '') {
      if (ids.has(id)) c.add('program.node_ids_unique', `nodes[${i}].id`, `node id ${id} repeats`);
      ids.add(id);
    }
  });
  if (nodes && ops.length === nodes.length) ordering(c, ops);

  // Digests last (document 3 "Digests"): canonical JSON refuses non-finite numbers.
  let digest = '';
  try {
    digest = canonicalDigest(without(doc, 'program_digest'));
    nodes?.forEach((n, i) => {
      if (!isObj(n) || typeof n.get('row_hash') !== 'string' || n.get('row_hash') === '') return;
      const want = canonicalDigest(without(n, 'row_hash'));
      if (n.get('row_hash') !== want) c.add('program.row_hash', `nodes[${i}].row_hash`, `is not the digest of the node (${want})`);
    });
    const declared = doc.get('program_digest');
    if (typeof declared === 'string' && SHA_PREFIXED.test(declared) && declared !== digest) c.add('program.program_digest', 'program_digest', `is not the digest of the document (${digest})`);
  } catch (e) {
    if (!(e instanceof CanonicalError)) throw e;
    c.add('program.canonical_json', e.path.slice(2), e.message);
  }
  if (c.problems.length) throw new ProgramInvalid(c.problems);
  return {
    doc,
    programId: programId!,
    digest,
    executionMode: executionMode!,
    cellId: cellId!,
    modelId: modelId!,
    robotDescriptionSha256: rds!,
    workpieceFrame: frame!,
    anchor: anchor!,
    offset: offset!,
    speedScale,
    nodes: nodes as JsonObject[],
    weldJoints,
    extensions,
  };
}
