// The reference STEP worker's operations (./geometry.ts) on the fixture parts of fixtures/step/ read by
// OpenCascade (occt-import-js): topology ids and normals, tessellation, joints, seam frames with the
// program document's work and travel angles, scalar functions, the plan request and the refusals.

import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, test } from 'vitest';
import { stringifyExact } from '../../harness/oracle/json.ts';
import { baseProgram as exactProgram } from '../../suites/planner/toolkit.ts';
import { CAD_OPERATIONS, NOT_IMPLEMENTED, operate, Refusal, rpyOf, scalar, SEAM_OPERATIONS, type Occt } from './geometry.ts';
import { loadOcct } from './worker.ts';

/** The fixture program as the worker sees it (JSON.parse of the request). */
const baseProgram = () => JSON.parse(stringifyExact(exactProgram())) as Record<string, any>;
const step = (name: string) => readFileSync(new URL(`../../fixtures/step/${name}`, import.meta.url)).toString('base64');
const FILLET = step('fillet-joint.step');
const BUTT = step('butt-joint.step');
let occt: Occt;
beforeAll(async () => {
  occt = await loadOcct();
}, 30_000);

const run = (route: string, body: Record<string, unknown>) => operate(occt, route, body) as { result: any; part: string };
const refusal = (route: string, body: Record<string, unknown>) => {
  try {
    run(route, body);
  } catch (e) {
    expect(e).toBeInstanceOf(Refusal);
    return (e as Error).message;
  }
  throw new Error('not refused');
};

const fillet45 = () => run('seam', { operation: 'detect_joints', step_base64: FILLET }).result.joints[0].id as string;

describe('topology and tessellation', () => {
  test('extract_topology: two boxes, six planar faces and twelve straight edges each, stable ids, outward normals', () => {
    const a = run('cadquery/topology', { operation: 'extract_topology', step_base64: FILLET });
    const b = run('cadquery/topology', { operation: 'extract_topology', step_base64: FILLET });
    expect(a).toEqual(b);
    expect(a.part).toMatch(/^sha256:[0-9a-f]{64}$/);
    const [base, web] = a.result.solids;
    expect([base.bbox_mm, web.bbox_mm]).toEqual([{ min: [0, 0, 0], max: [200, 100, 10] }, { min: [0, 45, 10], max: [200, 55, 110] }]);
    for (const s of [base, web]) {
      expect(s.faces.length).toBe(6);
      expect(s.edges.length).toBe(12);
      expect(s.faces.every((f: any) => f.surface === 'plane')).toBe(true);
      // Outward: the normal points from the box's centre to the face's centroid.
      const c = [0, 1, 2].map((k) => (s.bbox_mm.min[k] + s.bbox_mm.max[k]) / 2);
      for (const f of s.faces) expect(f.normal.reduce((sum: number, n: number, k: number) => sum + n * (f.centroid_mm[k] - c[k]!), 0)).toBeGreaterThan(0);
    }
    expect(base.faces.map((f: any) => f.area_mm2).sort((x: number, y: number) => x - y)).toEqual([1000, 1000, 2000, 2000, 20000, 20000]);
    const top = base.faces.find((f: any) => f.normal[2] === 1);
    const front = base.faces.find((f: any) => f.normal[1] === -1);
    const edge = base.edges.find((e: any) => e.faces.includes(top.id) && e.faces.includes(front.id));
    expect([edge.curve, edge.length_mm, edge.points_mm]).toEqual(['line', 200, [[0, 0, 10], [200, 0, 10]]]);
  });

  test('tessellate: a mesh per solid, each B-rep face a run of triangles', () => {
    const r = run('cadquery/topology', { operation: 'tessellate', step_base64: BUTT });
    expect(r.result.solids.length).toBe(2);
    for (const s of r.result.solids) {
      expect(s.indices.length % 3).toBe(0);
      const triangles = s.indices.length / 3;
      expect(s.faces.reduce((n: number, f: any) => n + f.triangles, 0)).toBe(triangles);
      expect(s.faces.map((f: any) => f.first_triangle)).toEqual(s.faces.map((_f: any, i: number) => s.faces.slice(0, i).reduce((n: number, x: any) => n + x.triangles, 0)));
      expect(Math.max(...s.indices)).toBe(s.positions_mm.length / 3 - 1);
    }
  });

  test('a file that is not STEP, or no file, is refused', () => {
    expect(refusal('cadquery/topology', { operation: 'tessellate', step_base64: Buffer.from('hello').toString('base64') })).toMatch(/cannot be read|no solid/);
    expect(refusal('cadquery/topology', { operation: 'tessellate' })).toMatch(/step_base64 is required/);
    expect(refusal('cadquery/topology', { operation: 'tessellate', step_base64: 'not base64!' })).toMatch(/not base64/);
  });
});

describe('joints and seam frames', () => {
  test('detect_joints: the fillet part has two 200 mm fillet seams at the web\'s foot; the butt part two 100 mm butt seams', () => {
    const f = run('seam', { operation: 'detect_joints', step_base64: FILLET }).result.joints;
    const long = f.filter((j: any) => j.length_mm > 50);
    expect(long.map((j: any) => [j.kind, j.length_mm, j.opening_deg, j.start_mm, j.end_mm])).toEqual([
      ['fillet', 200, 90, [0, 45, 10], [200, 45, 10]],
      ['fillet', 200, 90, [0, 55, 10], [200, 55, 10]],
    ]);
    expect(long[0].weld_line).toEqual({ segments: [{ degree: 1, control_points_xyz_m: [[0, 0.045, 0.01], [0.2, 0.045, 0.01]] }] });
    const b = run('seam', { operation: 'detect_joints', step_base64: BUTT }).result.joints.filter((j: any) => j.length_mm > 50);
    expect(b.map((j: any) => [j.kind, j.length_mm, j.opening_deg, j.start_mm[2], j.start_mm[0], j.end_mm[0]])).toEqual([
      ['butt', 100, 180, 0, 100, 100],
      ['butt', 100, 180, 10, 100, 100],
    ]);
  });

  test('sample_seam_frames: spacing, end frame, work angle about the seam, travel angle along it, reverse direction', () => {
    const ref = fillet45();
    const frames = (spacing: number, work: unknown, travel: unknown, direction?: string) =>
      run('seam', { operation: 'sample_seam_frames', step_base64: FILLET, spacing_mm: spacing, seam: { weld_joint_ref: ref, orientation: { work_angle_deg: work, travel_angle_deg: travel }, ...(direction ? { direction } : {}) } }).result.frames as any[];
    const c = (v: number) => ({ kind: 'constant', value: v });
    // 60 mm on a 200 mm seam: 0, 60, 120, 180 and the end.
    const f = frames(60, c(45), c(0));
    expect(f.map((x) => x.xyz_m[0])).toEqual([0, 0.06, 0.12, 0.18, 0.2]);
    expect(f.every((x) => x.xyz_m[1] === 0.045 && x.xyz_m[2] === 0.01)).toBe(true);
    // Work 45 on the 90 degree fillet: the approach bisects the wedge (towards +y, down).
    const h = Math.SQRT1_2;
    f[0].z_axis.forEach((v: number, k: number) => expect(v).toBeCloseTo([0, h, -h][k]!, 9));
    // Work 30 from the base plate: flatter, closer to the plate's surface.
    const w30 = frames(100, c(30), c(0))[0].z_axis;
    [0, Math.cos(Math.PI / 6), -Math.sin(Math.PI / 6)].forEach((v, k) => expect(w30[k]).toBeCloseTo(v, 9));
    // Travel 15 (push): the torch points 15 degrees ahead along +x.
    const t15 = frames(100, c(45), c(15))[0];
    expect(t15.z_axis[0]).toBeCloseTo(Math.sin((15 * Math.PI) / 180), 9);
    expect(t15.travel_angle_deg).toBe(15);
    // Reverse: from x 200 to 0; the push now points along -x.
    const r = frames(100, c(45), c(15), 'reverse');
    expect(r.map((x) => x.xyz_m[0])).toEqual([0.2, 0.1, 0]);
    expect(r[0].z_axis[0]).toBeCloseTo(-Math.sin((15 * Math.PI) / 180), 9);
    // A work angle that varies along the seam.
    const pl = frames(100, { kind: 'piecewise_linear', knots: [[0, 40], [1, 50]] }, c(0));
    expect(pl.map((x) => x.work_angle_deg)).toEqual([40, 45, 50]);
    // rpy describes the same frame as the axes.
    const [roll, pitch, yaw] = f[0].rpy_rad as number[];
    const zFromRpy = [Math.cos(yaw!) * Math.sin(pitch!) * Math.cos(roll!) + Math.sin(yaw!) * Math.sin(roll!), Math.sin(yaw!) * Math.sin(pitch!) * Math.cos(roll!) - Math.cos(yaw!) * Math.sin(roll!), Math.cos(pitch!) * Math.cos(roll!)];
    zFromRpy.forEach((v, k) => expect(v).toBeCloseTo(f[0].z_axis[k], 6));
  });

  test('sample_seam_frames refusals: unknown joint, bad spacing, inline line, missing orientation', () => {
    const ref = fillet45();
    const o = { work_angle_deg: { kind: 'constant', value: 45 }, travel_angle_deg: { kind: 'constant', value: 0 } };
    const base = { operation: 'sample_seam_frames', step_base64: FILLET, spacing_mm: 10 };
    expect(refusal('seam', { ...base, seam: { weld_joint_ref: 'nope', orientation: o } })).toMatch(/not a joint of this part/);
    expect(refusal('seam', { ...base, spacing_mm: 0, seam: { weld_joint_ref: ref, orientation: o } })).toMatch(/spacing_mm/);
    expect(refusal('seam', { ...base, seam: { line: { segments: [] }, orientation: o } })).toMatch(/inline line/);
    expect(refusal('seam', { ...base, seam: { weld_joint_ref: ref } })).toMatch(/orientation/);
  });

  test('scalar functions: constant, piecewise_linear, samples, bspline', () => {
    expect(scalar({ kind: 'constant', value: 3 }, 0.4, 'x')).toBe(3);
    expect(scalar({ kind: 'piecewise_linear', knots: [[0, 0], [0.5, 10], [1, 0]] }, 0.25, 'x')).toBe(5);
    expect(scalar({ kind: 'samples', s: [0, 1], values: [2, 4] }, 0.75, 'x')).toBe(3.5);
    // Degree 1 clamped B-spline through 0, 10, 20 at s 0, 0.5, 1.
    expect(scalar({ kind: 'bspline', degree: 1, knots_u: [0, 0, 0.5, 1, 1], control_values: [0, 10, 20] }, 0.75, 'x')).toBeCloseTo(15, 12);
    // Degree 2 clamped with three control values is a quadratic Bezier: at 0.5, (a + 2b + c) / 4.
    expect(scalar({ kind: 'bspline', degree: 2, knots_u: [0, 0, 0, 1, 1, 1], control_values: [0, 8, 4] }, 0.5, 'x')).toBeCloseTo(5, 12);
    expect(() => scalar({ kind: 'bspline', degree: 2, knots_u: [0, 1], control_values: [0, 1, 2] }, 0.5, 'x')).toThrow(/knots_u/);
    expect(() => scalar({ kind: 'cubic' }, 0.5, 'x')).toThrow(/unknown kind/);
  });

  test('rpyOf inverts R = Rz(yaw) Ry(pitch) Rx(roll)', () => {
    const [r, p, y] = [0.3, -0.4, 1.1];
    const R = [
      [Math.cos(y) * Math.cos(p), Math.cos(y) * Math.sin(p) * Math.sin(r) - Math.sin(y) * Math.cos(r), Math.cos(y) * Math.sin(p) * Math.cos(r) + Math.sin(y) * Math.sin(r)],
      [Math.sin(y) * Math.cos(p), Math.sin(y) * Math.sin(p) * Math.sin(r) + Math.cos(y) * Math.cos(r), Math.sin(y) * Math.sin(p) * Math.cos(r) - Math.cos(y) * Math.sin(r)],
      [-Math.sin(p), Math.cos(p) * Math.sin(r), Math.cos(p) * Math.cos(r)],
    ];
    const col = (k: number) => [R[0]![k]!, R[1]![k]!, R[2]![k]!] as [number, number, number];
    rpyOf(col(0), col(1), col(2)).forEach((v, k) => expect(v).toBeCloseTo([r, p, y][k]!, 12));
  });
});

describe('plan request and refusals', () => {
  test('build_plan_request writes the joint\'s weld_line into workpiece.weld_joints, seals the program and returns a /weld-plan body', () => {
    const ref = fillet45();
    const p = structuredClone(baseProgram()) as Record<string, any>;
    const weld = p.nodes.find((n: any) => n.op === 'weld');
    weld.geometry = { kind: 'seam', id: 'seam-1', reference: 'workpiece', orientation: { work_angle_deg: { kind: 'constant', value: 45 }, travel_angle_deg: { kind: 'constant', value: 10 } }, weld_joint_ref: ref };
    const r = run('seam', { operation: 'build_plan_request', program: p, tooling: { tool_id: 't' }, step_base64: FILLET, step_filename: 'fillet-joint.step', cell_id: 'cell-a' });
    const req = r.result.request;
    expect(r.part).toMatch(/^sha256:/);
    expect(req.program.workpiece.weld_joints.find((j: any) => j.id === ref).weld_line).toEqual({ segments: [{ degree: 1, control_points_xyz_m: [[0, 0.045, 0.01], [0.2, 0.045, 0.01]] }] });
    expect([req.cell_id, req.step_base64, req.step_filename, req.program_digest, req.program_id]).toEqual(['cell-a', FILLET, 'fillet-joint.step', req.program.program_digest, p.program_id]);
    expect(req.program.program_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    // A reference to a joint the part does not have, and an invalid program, are refused.
    weld.geometry.weld_joint_ref = 'solid-9/face-0~solid-8/face-0';
    expect(refusal('seam', { operation: 'build_plan_request', program: p, tooling: {}, step_base64: FILLET, cell_id: 'c' })).toMatch(/not a joint of this part/);
    expect(refusal('seam', { operation: 'build_plan_request', program: { ...baseProgram(), schema: 'v1' }, tooling: {}, step_base64: FILLET, cell_id: 'c' })).toMatch(/not a valid robot.v4.program.v2/);
  });

  test('operations of the other route, unknown ones and the unimplemented ones are refused with the reason', () => {
    expect(refusal('seam', { operation: 'tessellate' })).toMatch(/not a \/seam operation/);
    expect(refusal('cadquery/topology', { operation: 'detect_joints' })).toMatch(/not a \/cadquery\/topology operation/);
    expect(refusal('seam', {})).toMatch(/operation is required/);
    for (const op of Object.keys(NOT_IMPLEMENTED)) {
      const route = (CAD_OPERATIONS as readonly string[]).includes(op) ? 'cadquery/topology' : 'seam';
      expect((SEAM_OPERATIONS as readonly string[]).includes(op) || (CAD_OPERATIONS as readonly string[]).includes(op)).toBe(true);
      expect(refusal(route, { operation: op, step_base64: FILLET })).toBe(NOT_IMPLEMENTED[op]);
    }
  });
});
