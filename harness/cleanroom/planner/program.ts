// The clean-room planner's reading of its input: the .weldplan container (document 2 part 7 names only
// "bad zip, digest mismatch, wrong program schema") and the program document robot.v4.program.v2
// (document 3 part 2). Written from the documents alone; where they leave a detail open this reading takes
// the plainest choice and says so. Test equipment, not a second product: its own zip reader, canonical
// JSON and error names, so that a suite which leans on the reference planner's choices shows it.

import { createHash } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';

/** A refusal answered 422 with error "<type>: <message>" (document 2 part 7). */
export class PlanRefused extends Error {
  constructor(readonly type: string, message: string) {
    super(`${type}: ${message}`);
  }
}

const refuse = (type: string, message: string): never => {
  throw new PlanRefused(type, message);
};

// ---- zip --------------------------------------------------------------------------------------------

/** Every file of a zip archive by name, read from its central directory (stored or deflated entries). */
export function readZip(bytes: Uint8Array, maxInflated = 64 * 1024 * 1024): Map<string, Uint8Array> {
  const bad = (m: string) => refuse('ContainerUnreadable', m);
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let eocd = -1;
  for (let i = bytes.length - 22; i >= Math.max(0, bytes.length - 22 - 65535); i--) {
    if (v.getUint32(i, true) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) bad('not a zip archive (no end of central directory)');
  const count = v.getUint16(eocd + 10, true);
  const cdSize = v.getUint32(eocd + 12, true);
  const cdOffset = v.getUint32(eocd + 16, true);
  if (cdOffset + cdSize > eocd) bad('central directory outside the archive');
  const out = new Map<string, Uint8Array>();
  let total = 0;
  let at = cdOffset;
  for (let n = 0; n < count; n++) {
    if (at + 46 > bytes.length || v.getUint32(at, true) !== 0x02014b50) bad('damaged central directory');
    const method = v.getUint16(at + 10, true);
    const csize = v.getUint32(at + 20, true);
    const usize = v.getUint32(at + 24, true);
    const nlen = v.getUint16(at + 28, true);
    const xlen = v.getUint16(at + 30, true);
    const clen = v.getUint16(at + 32, true);
    const local = v.getUint32(at + 42, true);
    const name = new TextDecoder().decode(bytes.subarray(at + 46, at + 46 + nlen));
    at += 46 + nlen + xlen + clen;
    if (name.endsWith('/')) continue;
    if (name === '' || name.startsWith('/') || name.includes('\\') || name.includes('\0') || name.split('/').includes('..') || /^[A-Za-z]:/.test(name)) bad(`unsafe entry name ${JSON.stringify(name)}`);
    if (out.has(name)) bad(`entry ${name} appears twice`);
    total += usize;
    if (total > maxInflated) bad(`entries inflate past ${maxInflated} bytes`);
    if (local + 30 > bytes.length || v.getUint32(local, true) !== 0x04034b50) bad(`entry ${name}: no local header`);
    const start = local + 30 + v.getUint16(local + 26, true) + v.getUint16(local + 28, true);
    if (start + csize > bytes.length) bad(`entry ${name} runs past the archive`);
    const raw = bytes.subarray(start, start + csize);
    let data: Uint8Array;
    try {
      data = method === 0 ? raw.slice() : method === 8 ? new Uint8Array(inflateRawSync(raw, { maxOutputLength: Math.max(usize, 1) })) : bad(`entry ${name}: compression method ${method}`);
    } catch (e) {
      if (e instanceof PlanRefused) throw e;
      return bad(`entry ${name} does not inflate to its declared size`);
    }
    if (data.length !== usize) bad(`entry ${name} inflates to ${data.length} bytes, declared ${usize}`);
    out.set(name, data);
  }
  return out;
}

// ---- canonical JSON (document 3 "Digests": keys sorted at every level, no whitespace, non-finite refused)

export function canonical(v: unknown): string {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) refuse('ProgramInvalid', 'a number with no finite value');
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(',')}}`;
}
export const sha256hex = (b: Uint8Array | string) => createHash('sha256').update(b).digest('hex');
const bareHex = (s: unknown) => (typeof s === 'string' ? s.replace(/^sha256:/, '') : '');

// ---- the container ----------------------------------------------------------------------------------

export interface Container {
  program: Record<string, any>;
  /** The manifest's identity, when the container has one. */
  containerSha256: string;
}

const PROGRAM_SCHEMA = 'robot.v4.program.v2';

/**
 * The program is the JSON entry named program.json (or, failing that, the one JSON entry whose schema
 * names a program document). A JSON entry that lists entries with digests (a manifest) is checked: every
 * digest it gives must match the entry's bytes, and a program digest it gives must match the program.
 */
export function readContainer(bytes: Uint8Array): Container {
  const files = readZip(bytes);
  const json = new Map<string, unknown>();
  for (const [name, data] of files) {
    if (!name.endsWith('.json')) continue;
    try {
      json.set(name, JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(data)));
    } catch {
      if (name === 'program.json') refuse('ProgramInvalid', 'program.json is not JSON');
    }
  }
  let programName = files.has('program.json') ? 'program.json' : undefined;
  if (!programName) for (const [n, j] of json) if (j && typeof j === 'object' && typeof (j as any).schema === 'string' && (j as any).schema.startsWith('robot.v4.program')) programName = n;
  if (!programName) refuse('ContainerUnreadable', 'no program document in the container');
  const program = json.get(programName!);
  if (!program || typeof program !== 'object' || Array.isArray(program)) refuse('ProgramInvalid', `${programName} is not a JSON object`);
  for (const [, j] of json) {
    const entries = (j as any)?.entries;
    if (!Array.isArray(entries)) continue;
    for (const e of entries) {
      if (!e || typeof e.name !== 'string' || typeof e.sha256 !== 'string') continue;
      const data = files.get(e.name);
      if (data && sha256hex(data) !== bareHex(e.sha256)) refuse('DigestMismatch', `${e.name} does not match its listed digest`);
    }
    const pd = (j as any).program_digest;
    if (typeof pd === 'string' && bareHex(pd) !== sha256hex(canonical(withoutKey(program as Record<string, unknown>, 'program_digest')))) refuse('DigestMismatch', 'the listed program digest is not the program document\'s');
  }
  return { program: program as Record<string, any>, containerSha256: sha256hex(bytes) };
}

const withoutKey = (o: Record<string, unknown>, k: string) => Object.fromEntries(Object.entries(o).filter(([x]) => x !== k));

// ---- the program document (document 3 part 2) ------------------------------------------------------

const FORBIDDEN = new Set(['joints', 'joint_positions_rad', 'target_joints_rad', 'q_rad', 'qd_rad_s', 'target_tcp_m', 'tcp_pose_m', 'trajectory', 'planned_path', 'accepted_plan', 'preloaded_plan', 'waypoints', 'rows']);
const PATH_WORDS = new Set(['knots', 'knots_u', 'times_s', 'control_points_xyz_m', 'segments', 'samples', 'points', 'poses', 'rpy_rad', 'path']);
const STATES = ['draft', 'saved_unplanned', 'needs_plan', 'planning', 'planned', 'accepted_simulation', 'accepted_physical', 'execution_ready', 'running', 'completed', 'stopped', 'faulted'];
const OPS = ['weld', 'approach', 'transit', 'retract', 'home', 'move', 'dwell', 'io'];
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
const SHA = /^sha256:[0-9a-f]{64}$/;

const bad = (path: string, m: string): never => refuse('ProgramInvalid', `${path || 'document'}: ${m}`);
const isObj = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isInt = (v: unknown): v is number => isNum(v) && Number.isInteger(v);

function need(o: Record<string, any>, k: string, path: string): any {
  if (!(k in o)) bad(`${path}${k}`, 'required');
  return o[k];
}
function str(o: Record<string, any>, k: string, path: string, required = true): void {
  if (!(k in o)) return void (required && bad(`${path}${k}`, 'required'));
  if (typeof o[k] !== 'string') bad(`${path}${k}`, 'must be a string');
}
function oneOf(o: Record<string, any>, k: string, path: string, values: readonly string[], required = true): void {
  if (!(k in o)) return void (required && bad(`${path}${k}`, 'required'));
  if (!values.includes(o[k])) bad(`${path}${k}`, `must be one of ${values.join(', ')}`);
}
function vec3(v: unknown, path: string): void {
  if (!Array.isArray(v) || v.length !== 3 || !v.every(isNum)) bad(path, 'must be 3 numbers');
}
function scalarFn(f: unknown, path: string, positive: boolean): void {
  if (!isObj(f)) return bad(path, 'must be a scalar function object');
  const vals: unknown[] = [];
  switch (f.kind) {
    case 'constant':
      vals.push(f.value);
      break;
    case 'piecewise_linear':
      if (!Array.isArray(f.knots) || f.knots.length < 2 || !f.knots.every((k: unknown) => Array.isArray(k) && k.length === 2 && k.every(isNum))) bad(`${path}.knots`, 'pairs of numbers, at least two');
      for (const k of f.knots) vals.push(k[1]);
      break;
    case 'bspline':
      if (!isInt(f.degree) || f.degree < 1) bad(`${path}.degree`, 'an integer >= 1');
      if (!Array.isArray(f.control_values) || !f.control_values.every(isNum)) bad(`${path}.control_values`, 'numbers');
      if (!Array.isArray(f.knots_u) || !f.knots_u.every(isNum) || f.knots_u.length !== f.control_values.length + f.degree + 1) bad(`${path}.knots_u`, 'control_values + degree + 1 numbers');
      vals.push(...f.control_values);
      break;
    case 'samples':
      if (!Array.isArray(f.s) || !Array.isArray(f.values) || f.s.length !== f.values.length || f.s.length < 2) bad(path, 's and values of the same length, at least two');
      vals.push(...f.values);
      break;
    default:
      bad(`${path}.kind`, 'constant, piecewise_linear, bspline or samples');
  }
  if (!vals.every(isNum)) bad(path, 'values must be numbers');
  if (positive && !vals.every((x) => (x as number) > 0)) bad(path, 'must be positive everywhere');
}
function teachPose(p: unknown, path: string): void {
  if (!isObj(p)) return bad(path, 'must be a TeachPose object');
  for (const k of Object.keys(p)) if (!['frame_id', 'xyz_m', 'rpy_rad', 'joint_names', 'joint_values_rad'].includes(k)) bad(`${path}.${k}`, 'not a TeachPose key');
  if (need(p, 'frame_id', `${path}.`) !== 'world') bad(`${path}.frame_id`, 'must be world');
  vec3(need(p, 'xyz_m', `${path}.`), `${path}.xyz_m`);
  vec3(need(p, 'rpy_rad', `${path}.`), `${path}.rpy_rad`);
  const names = need(p, 'joint_names', `${path}.`);
  if (!Array.isArray(names) || names.length < 1 || names.length > 9 || !names.every((n) => typeof n === 'string') || new Set(names).size !== names.length) bad(`${path}.joint_names`, '1..9 unique names');
  const vals = need(p, 'joint_values_rad', `${path}.`);
  if (!Array.isArray(vals) || vals.length !== names.length || !vals.every(isNum)) bad(`${path}.joint_values_rad`, 'one number per joint name');
}
function standoff(s: unknown, path: string): void {
  if (!isObj(s)) return bad(path, 'must be a standoff object');
  const d = need(s, 'direction', `${path}.`);
  if (!(d === 'torch_axis' || d === 'workpiece_z' || (Array.isArray(d) && d.length === 3 && d.every(isNum)))) bad(`${path}.direction`, 'torch_axis, workpiece_z or a 3-vector');
  const m = need(s, 'distance_mm', `${path}.`);
  if (!isNum(m) || m < 0) bad(`${path}.distance_mm`, 'a number >= 0');
}
function points(ps: unknown, path: string, min: number): Array<Record<string, any>> {
  if (!Array.isArray(ps) || ps.length < min) bad(path, `at least ${min} points`);
  (ps as unknown[]).forEach((p, i) => {
    if (!isObj(p)) bad(`${path}[${i}]`, 'a point object');
    vec3((p as any).xyz_m, `${path}[${i}].xyz_m`);
    vec3((p as any).rpy_rad, `${path}[${i}].rpy_rad`);
  });
  return ps as Array<Record<string, any>>;
}

function walkForbidden(v: unknown, path: string, words: Set<string>, what: string): void {
  if (Array.isArray(v)) v.forEach((x, i) => walkForbidden(x, `${path}[${i}]`, words, what));
  else if (isObj(v)) for (const [k, x] of Object.entries(v)) {
    const p = path ? `${path}.${k}` : k;
    if (words.has(k)) bad(p, what);
    walkForbidden(x, p, words, what);
  }
}

const NODE_KEYS: Record<string, string[]> = {
  weld: ['geometry', 'travel_speed_mm_s', 'standoff_mm', 'weave', 'weld_parameters', 'weld_preset_id'],
  approach: ['depart_standoff', 'arrive_standoff', 'overrides'],
  transit: ['depart_standoff', 'arrive_standoff', 'overrides'],
  retract: ['depart_standoff', 'arrive_standoff', 'overrides'],
  home: ['depart_standoff', 'arrive_standoff', 'overrides'],
  move: ['motion', 'target', 'speed_scale', 'speed_mm_s', 'capture', 'target_space', 'via', 'acceleration_scale', 'constant_tcp_speed'],
  dwell: ['duration_s'],
  io: ['channel', 'state'],
};

function geometry(g: unknown, path: string, doc: Record<string, any>): void {
  if (!isObj(g)) return bad(path, 'must be a geometry object');
  if (g.kind === 'seam') {
    str(g, 'id', `${path}.`);
    need(g, 'reference', `${path}.`);
    const o = need(g, 'orientation', `${path}.`);
    if (!isObj(o)) bad(`${path}.orientation`, 'an object');
    scalarFn(need(o, 'work_angle_deg', `${path}.orientation.`), `${path}.orientation.work_angle_deg`, false);
    scalarFn(need(o, 'travel_angle_deg', `${path}.orientation.`), `${path}.orientation.travel_angle_deg`, false);
    if ('direction' in g) oneOf(g, 'direction', `${path}.`, ['forward', 'reverse']);
    if ('line' in g) curve(g.line, `${path}.line`);
    else if ('weld_joint_ref' in g) {
      const j = (doc.workpiece?.weld_joints ?? []).find((x: any) => isObj(x) && x.id === g.weld_joint_ref);
      if (!j || !('weld_line' in j)) bad(`${path}.weld_joint_ref`, 'names no weld joint with a weld_line');
    } else bad(path, 'a seam needs a line or a weld_joint_ref');
  } else if (g.kind === 'posed_polyline') {
    str(g, 'frame_id', `${path}.`);
    points(g.points, `${path}.points`, 2);
  } else if (g.kind === 'manual_pose_wp') {
    if (g.frame_id !== doc.workpiece?.frame_id) bad(`${path}.frame_id`, 'must be the workpiece frame');
    const ps = points(g.points, `${path}.points`, 2);
    ps.forEach((p, i) => {
      if (!['C0', 'C1', 'C2'].includes(p.continuity)) bad(`${path}.points[${i}].continuity`, 'C0, C1 or C2');
      if (i > 0 && dist(p.xyz_m, ps[i - 1]!.xyz_m) <= 1e-6) bad(`${path}.points[${i}]`, 'within a micrometre of the previous point');
    });
    if ('shape' in g) oneOf(g, 'shape', `${path}.`, ['spline', 'arc']);
    if (g.shape === 'arc') {
      if (ps.length !== 3) bad(`${path}.points`, 'an arc has exactly three points');
      const [a, b, c] = ps.map((p) => p.xyz_m as number[]);
      const u = sub(b!, a!), w = sub(c!, a!);
      if (Math.hypot(u[1]! * w[2]! - u[2]! * w[1]!, u[2]! * w[0]! - u[0]! * w[2]!, u[0]! * w[1]! - u[1]! * w[0]!) < 1e-12) bad(`${path}.points`, 'the arc\'s points are collinear');
    }
  } else bad(`${path}.kind`, 'seam, posed_polyline or manual_pose_wp');
}
function curve(c: unknown, path: string): void {
  if (!isObj(c) || !Array.isArray(c.segments) || c.segments.length < 1) return bad(path, 'an inline curve of segments');
  c.segments.forEach((s: any, i: number) => {
    if (!isObj(s) || !Array.isArray(s.control_points_xyz_m) || s.control_points_xyz_m.length < 2) bad(`${path}.segments[${i}]`, 'control points, at least two');
    s.control_points_xyz_m.forEach((p: unknown, k: number) => vec3(p, `${path}.segments[${i}].control_points_xyz_m[${k}]`));
  });
}
const sub = (a: number[], b: number[]) => a.map((x, i) => x - b[i]!);
const dist = (a: number[], b: number[]) => Math.hypot(...sub(a, b));

/** Checks a program document; returns nothing, or throws PlanRefused("ProgramInvalid", ...). */
export function checkProgram(doc: Record<string, any>): void {
  walkForbidden(doc, '', FORBIDDEN, 'a solved-motion key is not allowed in an authored program');
  if (doc.schema !== PROGRAM_SCHEMA) bad('schema', `must be ${PROGRAM_SCHEMA}`);
  str(doc, 'program_id', '');
  str(doc, 'program_name', '');
  if (!isInt(doc.program_revision) || doc.program_revision < 1) bad('program_revision', 'an integer >= 1');
  if (!isInt(doc.base_program_revision) || doc.base_program_revision < 0) bad('base_program_revision', 'an integer >= 0');
  if ('program_digest' in doc && !(typeof doc.program_digest === 'string' && SHA.test(doc.program_digest))) bad('program_digest', 'sha256:<64 hex>');
  oneOf(doc, 'program_state', '', STATES);
  oneOf(doc, 'execution_mode', '', ['simulation', 'dry_run', 'production']);
  if (typeof doc.created_utc !== 'string' || !RFC3339.test(doc.created_utc)) bad('created_utc', 'an RFC 3339 time');
  const u = need(doc, 'units', '');
  if (!isObj(u) || u.length !== 'm' || u.angle !== 'rad' || u.time !== 's' || canonical(u.joint_order) !== canonical(['J1', 'J2', 'J3', 'J4', 'J5', 'J6', 'J7', 'J8', 'J9'])) bad('units', 'lengths m, angles rad, time s, joint_order J1..J9');
  const pr = need(doc, 'producer', '');
  if (!isObj(pr)) bad('producer', 'an object');
  oneOf(pr, 'component', 'producer.', ['offline-programming-v1', 'weld-planner-v1']);
  str(pr, 'source_revision', 'producer.');
  if (!Array.isArray(pr.inputs) || pr.inputs.length < 1) bad('producer.inputs', 'at least one input');
  pr.inputs.forEach((x: any, i: number) => {
    if (!isObj(x)) bad(`producer.inputs[${i}]`, 'an object');
    oneOf(x, 'kind', `producer.inputs[${i}].`, ['project', 'weld_program', 'cad', 'cell', 'tool']);
    str(x, 'ref', `producer.inputs[${i}].`);
    if (!/^[0-9a-f]{64}$/.test(x.sha256)) bad(`producer.inputs[${i}].sha256`, '64 hex without prefix');
  });
  if ('source' in doc && !isObj(doc.source)) bad('source', 'an object');
  const wp = need(doc, 'workpiece', '');
  if (!isObj(wp)) bad('workpiece', 'an object');
  str(wp, 'frame_id', 'workpiece.');
  if ('solids' in wp && !Array.isArray(wp.solids)) bad('workpiece.solids', 'an array');
  if ('weld_joints' in wp) {
    if (!Array.isArray(wp.weld_joints)) bad('workpiece.weld_joints', 'an array');
    const seen = new Set<unknown>();
    wp.weld_joints.forEach((j: any, i: number) => {
      if (isObj(j) && 'id' in j) {
        if (seen.has(j.id)) bad(`workpiece.weld_joints[${i}].id`, 'weld joint ids are unique');
        seen.add(j.id);
      }
    });
  }
  const pl = need(doc, 'placement', '');
  if (!isObj(pl)) bad('placement', 'an object');
  str(pl, 'cell_id', 'placement.');
  vec3(need(pl, 'anchor_xyz_m', 'placement.'), 'placement.anchor_xyz_m');
  vec3(need(pl, 'offset_xyz_m', 'placement.'), 'placement.offset_xyz_m');
  vec3(need(pl, 'rpy_rad', 'placement.'), 'placement.rpy_rad');
  const rb = need(doc, 'robot', '');
  if (!isObj(rb)) bad('robot', 'an object');
  str(rb, 'model_id', 'robot.');
  if (typeof rb.robot_description_sha256 !== 'string' || !SHA.test(rb.robot_description_sha256)) bad('robot.robot_description_sha256', 'sha256:<64 hex>');
  if (pl.cell_id !== rb.model_id) bad('placement.cell_id', 'must equal robot.model_id');
  if ('tool' in doc) {
    if (!isObj(doc.tool)) bad('tool', 'an object {id, sha256}');
    need(doc.tool, 'id', 'tool.');
    need(doc.tool, 'sha256', 'tool.');
  }
  if ('speed_scale' in doc && !(isNum(doc.speed_scale) && doc.speed_scale >= 0.01 && doc.speed_scale <= 1)) bad('speed_scale', '0.01..1');
  const df = need(doc, 'defaults', '');
  if (!isObj(df)) bad('defaults', 'an object');
  if (!isNum(df.clearance_min_mm) || df.clearance_min_mm < 0) bad('defaults.clearance_min_mm', 'a number >= 0');
  if (!isNum(df.speed_scale) || df.speed_scale <= 0 || df.speed_scale > 1) bad('defaults.speed_scale', 'in (0, 1]');
  oneOf(df, 'torch_policy', 'defaults.', ['free', 'hold_last', 'torch_down']);
  oneOf(df, 'positioner_policy', 'defaults.', ['free', 'hold']);
  const nodes = need(doc, 'nodes', '');
  if (!Array.isArray(nodes) || nodes.length < 1 || nodes.length > 4096) bad('nodes', '1..4096 nodes');
  if (!Array.isArray(doc.planner_owns) || doc.planner_owns.length < 1 || !doc.planner_owns.every((x: unknown) => typeof x === 'string')) bad('planner_owns', 'at least one string');
  if ('extensions' in doc && !isObj(doc.extensions)) bad('extensions', 'an object');

  const ids = new Set<unknown>();
  nodes.forEach((n: any, i: number) => {
    const p = `nodes[${i}]`;
    if (!isObj(n)) bad(p, 'a node object');
    oneOf(n, 'op', `${p}.`, OPS);
    for (const k of Object.keys(n)) if (!['id', 'op', 'enabled', 'label', 'comment', 'row_hash', 'extensions', ...NODE_KEYS[n.op]!].includes(k)) bad(`${p}.${k}`, `not a field of a ${n.op} node`);
    str(n, 'id', `${p}.`);
    if (ids.has(n.id)) bad(`${p}.id`, 'node ids are unique');
    ids.add(n.id);
    if (typeof need(n, 'enabled', `${p}.`) !== 'boolean') bad(`${p}.enabled`, 'a boolean');
    need(n, 'label', `${p}.`);
    need(n, 'comment', `${p}.`);
    if (typeof n.row_hash !== 'string' || n.row_hash === '') bad(`${p}.row_hash`, 'a nonempty string');
    if (['approach', 'transit', 'retract', 'home'].includes(n.op)) {
      walkForbidden(withoutKey(n, 'extensions'), p, PATH_WORDS, 'a freespace node states constraints, not a path');
      if ('depart_standoff' in n) (n.op === 'approach' || n.op === 'home' ? bad(`${p}.depart_standoff`, `not allowed on ${n.op}`) : standoff(n.depart_standoff, `${p}.depart_standoff`));
      if ('arrive_standoff' in n) (n.op === 'retract' || n.op === 'home' ? bad(`${p}.arrive_standoff`, `not allowed on ${n.op}`) : standoff(n.arrive_standoff, `${p}.arrive_standoff`));
    } else if (n.op === 'weld') {
      geometry(need(n, 'geometry', `${p}.`), `${p}.geometry`, doc);
      if (!isNum(need(n, 'travel_speed_mm_s', `${p}.`)) || n.travel_speed_mm_s <= 0) bad(`${p}.travel_speed_mm_s`, 'a number > 0');
      scalarFn(need(n, 'standoff_mm', `${p}.`), `${p}.standoff_mm`, true);
      need(n, 'weave', `${p}.`);
      const wpar = need(n, 'weld_parameters', `${p}.`);
      if (!isObj(wpar) || Object.keys(wpar).length) bad(`${p}.weld_parameters`, 'present and empty in v2');
    } else if (n.op === 'move') {
      oneOf(n, 'motion', `${p}.`, ['joint', 'linear', 'circular']);
      teachPose(need(n, 'target', `${p}.`), `${p}.target`);
      if (!isNum(need(n, 'speed_scale', `${p}.`)) || n.speed_scale <= 0 || n.speed_scale > 1) bad(`${p}.speed_scale`, 'in (0, 1]');
      if (!isNum(need(n, 'speed_mm_s', `${p}.`)) || n.speed_mm_s <= 0) bad(`${p}.speed_mm_s`, 'a number > 0');
      if ('target_space' in n) oneOf(n, 'target_space', `${p}.`, ['cartesian', 'joint']);
      if ('constant_tcp_speed' in n && typeof n.constant_tcp_speed !== 'boolean') bad(`${p}.constant_tcp_speed`, 'a boolean');
      if ('via' in n) {
        if (!Array.isArray(n.via)) bad(`${p}.via`, 'an array of TeachPoses');
        n.via.forEach((x: unknown, k: number) => teachPose(x, `${p}.via[${k}]`));
      }
      if ('acceleration_scale' in n && !(isNum(n.acceleration_scale) && n.acceleration_scale > 0 && n.acceleration_scale <= 1)) bad(`${p}.acceleration_scale`, 'in (0, 1]');
      const c = need(n, 'capture', `${p}.`);
      if (!isObj(c)) bad(`${p}.capture`, 'an object');
      oneOf(c, 'source', `${p}.capture.`, ['machine', 'preview']);
      if (typeof c.observed_at !== 'string' || !RFC3339.test(c.observed_at)) bad(`${p}.capture.observed_at`, 'an RFC 3339 time');
      str(c, 'model_id', `${p}.capture.`);
      str(c, 'robot_description_sha256', `${p}.capture.`);
      str(c, 'machine_planning_calibration_sha256', `${p}.capture.`, false);
      if (c.source === 'machine') str(c, 'cell_id', `${p}.capture.`);
      teachPose(need(c, 'pose', `${p}.capture.`), `${p}.capture.pose`);
    } else if (n.op === 'dwell') {
      if (!isNum(need(n, 'duration_s', `${p}.`)) || n.duration_s < 0) bad(`${p}.duration_s`, 'a number >= 0');
    } else if (n.op === 'io') {
      if (typeof need(n, 'channel', `${p}.`) !== 'string' || n.channel === '') bad(`${p}.channel`, 'a nonempty string');
      if (typeof need(n, 'state', `${p}.`) !== 'boolean') bad(`${p}.state`, 'a boolean');
    }
  });
  // Ordering over motion nodes, enabled or not: home? (move* approach weld (transit weld)* retract)+ move* home?
  const seq = nodes.filter((n: any) => n.op !== 'dwell' && n.op !== 'io').map((n: any) => ({ weld: 'W', approach: 'A', transit: 'T', retract: 'R', home: 'H', move: 'M' })[n.op as 'weld']).join('');
  if (!/^H?M*(AW(TW)*RM*)+H?$/.test(seq)) bad('nodes', `motion nodes out of order (${seq}): home? approach weld (transit weld)* retract, moves between blocks, home only at the ends`);
  // Digests last.
  nodes.forEach((n: any, i: number) => {
    if (bareHex(n.row_hash) !== sha256hex(canonical(withoutKey(n, 'row_hash')))) bad(`nodes[${i}].row_hash`, 'not the digest of the node');
  });
  if ('program_digest' in doc && bareHex(doc.program_digest) !== sha256hex(canonical(withoutKey(doc, 'program_digest')))) bad('program_digest', 'not the digest of the document');
}
