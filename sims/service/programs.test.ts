import { test, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { COLS, decode, encode } from '../dense/codec.ts';
import type { SegmentContent, TrajectoryContent } from '../dense/codec.ts';
import { ProgramRefusal, admitProgram, programPlan } from './programs.ts';
import type { ProgramAxis } from './programs.ts';

const machine = JSON.parse(readFileSync(new URL('../../fixtures/machines/nine-axis.json', import.meta.url), 'utf8'));
const AXES: ProgramAxis[] = machine.axes.map((a: any) => ({
  id: a.name, rad: a.type === 'rotary', min: a.limits.min, max: a.limits.max, maxVelocity: a.limits.max_velocity,
  maxAcceleration: a.max_acceleration, countsPerUnit: (a.wire_counts_per_rev * a.wire_revs_per_axis_rev) / (2 * Math.PI), sign: a.sign,
}));
const OUTPUTS = machine.io.outputs as Array<{ name: string; torch: boolean }>;
const CEIL = [2, 2, 2, 4, 4, 5, 1, 1.5, 1];

function seg(kind: string, rows: number[][], qdRows?: number[][]): SegmentContent {
  return {
    kind, sourceId: kind, t: rows.map((_, i) => i * 0.01), q: rows.flat(),
    qd: qdRows ? qdRows.flat() : rows.flatMap(() => Array(COLS).fill(0)), flags: rows.map(() => 0),
  };
}
const at = (v: number, j?: number, base = 0.1) => Array.from({ length: COLS }, (_, k) => (k === j ? v : base));
function program(edit?: (c: TrajectoryContent & { segments: SegmentContent[] }) => void) {
  const c = {
    planId: 'p', programId: 'prog', programDigest: 'sha256:' + 'a'.repeat(64), manifestRevision: 4n, planRevision: 1n, createdAt: '2026-01-01T00:00:00Z',
    axisMask: 0x1ff, dtS: 0.01, maxAbsQd: CEIL,
    segments: [seg('freespace', [at(0.1), at(0.1005, 0), at(0.101, 0)]), seg('dwell', [at(0.101, 0), at(0.101, 0)])],
  };
  edit?.(c);
  return decode(encode(c));
}
function refusal(f: () => unknown): ProgramRefusal {
  try {
    f();
  } catch (e) {
    if (e instanceof ProgramRefusal) return e;
    throw e;
  }
  throw new Error('admitted');
}

test('a valid program: boundary samples merge, identity carries both digests', () => {
  const x = program();
  const p = admitProgram(x, AXES, 4n);
  expect([p.samples, p.segments, p.points.q.length / COLS]).toEqual([5, 2, 4]);
  expect(Array.from(p.points.segment)).toEqual([0, 0, 0, 1]);
  expect(Array.from(p.points.tNs)).toEqual([0, 10e6, 20e6, 30e6]);
  expect(Array.from(p.points.localNs)).toEqual([0, 10e6, 20e6, 10e6]);
  expect(p.identity.source_digest).toBe(x.digest);
  expect(p.identity.trajectory_digest).toBe(x.digest);
  expect(p.identity.normalised_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  expect(p.identity.normalised_digest).not.toBe(x.digest);
  expect(p.requiresProcessIo).toBe(false);
  // The identity strings are not in either digest; the executed points are.
  expect(admitProgram(program((c) => { c.planId = 'other'; }), AXES, 4n).identity.normalised_digest).toBe(p.identity.normalised_digest);
  expect(admitProgram(program((c) => { (c.segments[1]!.q as number[])[COLS + 4] = 0.1000001; }), AXES, 4n).identity.normalised_digest).not.toBe(p.identity.normalised_digest);
});

test('identity, manifest and torch refusals', () => {
  expect(refusal(() => admitProgram(program((c) => { c.programId = ''; }), AXES, 4n)).text).toBe('program_identity_missing: program_id');
  expect(refusal(() => admitProgram(program((c) => { c.programDigest = undefined; }), AXES, 4n)).reason).toBe('program_identity_missing');
  expect(refusal(() => admitProgram(program(), AXES, 5n)).reason).toBe('manifest_revision_mismatch');
  const rdt = decode(readFileSync(new URL('../../fixtures/dense/reference.rdt', import.meta.url)));
  expect(refusal(() => admitProgram(rdt, AXES, 7n)).reason).toBe('process_io_executor_not_qualified');
});

test('axis map: rad axes take the columns in order', () => {
  const ten = [...AXES, { ...AXES[0]!, id: 'J10' }];
  expect(refusal(() => admitProgram(program(), ten, 4n)).reason).toBe('dense_axis_map_requires_nine_ids');
  expect(refusal(() => admitProgram(program(), AXES.map((a) => ({ ...a, rad: false })), 4n)).reason).toBe('dense_axis_map_requires_nine_ids');
  expect(refusal(() => admitProgram(program(), AXES.map((a, i) => (i === 4 ? { ...a, id: 'J1' } : a)), 4n)).reason).toBe('invalid_dense_axis_map');
  const six = AXES.map((a, i) => (i < 6 ? a : { ...a, rad: false }));
  // Columns 7..9 unmapped: mask bit set -> refused; cleared and held -> admitted; moving -> refused.
  expect(refusal(() => admitProgram(program(), six, 4n)).text).toBe('unmapped_dense_axis: J7');
  expect(admitProgram(program((c) => { c.axisMask = 0x3f; }), six, 4n).axisOf).toEqual([0, 1, 2, 3, 4, 5]);
  const moving = program((c) => { c.axisMask = 0x3f; (c.segments[0]!.q as number[])[2 * COLS + 7] = 0.1001; (c.segments[1]!.q as number[])[7] = 0.1001; (c.segments[1]!.q as number[])[COLS + 7] = 0.1001; });
  expect(refusal(() => admitProgram(moving, six, 4n)).text).toBe('unmapped_dense_axis: J8');
});

test('a sample outside position limits: native_limit_exceeded with exact evidence', () => {
  const max = AXES[2]!.max;
  const x = program((c) => { c.segments = [seg('dwell', [at(max, 2, 0.1), at(max + 1e-9, 2, 0.1)])]; });
  const r = refusal(() => admitProgram(x, AXES, 4n));
  expect(r.text).toBe('native_limit_exceeded: segment=0 sample=1 axis=J3');
  expect(r.limitViolation).toEqual({ kind: 'position', segment: 0, sample: 1, axis: 'J3', value: max + 1e-9, limit: max, unit: 'rad' });
  const ok = program((c) => { c.segments = [seg('dwell', [at(max, 2, 0.1), at(max, 2, 0.1)])]; });
  expect(admitProgram(ok, AXES, 4n).samples).toBe(2);
});

test('a Hermite interval bowing past the limit: native_segment_rate_exceeded at the curve extremum', () => {
  // J6 ends at its max at rest, but enters the last interval still moving up fast: the curve overshoots.
  const max = AXES[5]!.max;
  const qs = [max - 0.04, max - 0.01, max];
  const vs = [0, 4, 0];
  const x = program((c) => {
    c.segments = [seg('freespace', qs.map((v) => at(v, 5)), vs.map((v) => at(v, 5, 0)))];
  });
  const r = refusal(() => admitProgram(x, AXES, 4n));
  expect(r.reason).toBe('native_segment_rate_exceeded');
  expect(r.text).toBe('native_segment_rate_exceeded: segment=0 sample=1 axis=J6');
  // Independent extremum: sample the curve densely.
  const h = 0.01;
  let peak = -Infinity;
  for (let k = 0; k <= 100000; k++) {
    const s = k / 100000;
    const q = (2 * s ** 3 - 3 * s ** 2 + 1) * qs[1]! + (s ** 3 - 2 * s ** 2 + s) * h * vs[1]! + (-2 * s ** 3 + 3 * s ** 2) * qs[2]!;
    peak = Math.max(peak, q);
  }
  expect(r.limitViolation!.kind).toBe('position');
  expect(r.limitViolation!.limit).toBe(max);
  expect(r.limitViolation!.value).toBeGreaterThan(max);
  expect(Math.abs(r.limitViolation!.value - peak)).toBeLessThan(1e-9);
});

test('a Hermite interval faster than the lower ceiling: native_segment_rate_exceeded velocity evidence', () => {
  // J1: samples at 0 and 1.2 rad/s (under both ceilings), but the curve between them peaks above
  // min(axis 2.2, header 2) = 2 rad/s.
  const qs = [0.1, 0.115, 0.13];
  const vs = [0, 1.2, 0];
  const x = program((c) => {
    c.segments = [seg('freespace', qs.map((v) => at(v, 0)), vs.map((v) => at(v, 0, 0)))];
  });
  const r = refusal(() => admitProgram(x, AXES, 4n));
  expect(r.text).toBe('native_segment_rate_exceeded: segment=0 sample=0 axis=J1');
  const h = 0.01;
  let peak = 0;
  for (let k = 0; k <= 100000; k++) {
    const s = k / 100000;
    const v = ((6 * s ** 2 - 6 * s) * qs[0]! + (3 * s ** 2 - 2 * s) * h * vs[1]! + (-6 * s ** 2 + 6 * s) * qs[1]!) / h;
    if (Math.abs(v) > Math.abs(peak)) peak = v;
  }
  expect(r.limitViolation).toMatchObject({ kind: 'velocity', segment: 0, sample: 0, axis: 'J1', limit: 2, unit: 'rad/s' });
  expect(peak).toBeGreaterThan(2);
  expect(Math.abs(r.limitViolation!.value - peak)).toBeLessThan(1e-6);
});

test('a program starting outside a limit may move back in, never further out: outside_limits_outward', () => {
  const max = AXES[2]!.max;
  const inward = program((c) => { c.segments = [seg('dwell', [at(max + 1e-4, 2, 0.1), at(max + 5e-5, 2, 0.1)])]; });
  expect(admitProgram(inward, AXES, 4n).samples).toBe(2);
  const further = program((c) => { c.segments = [seg('dwell', [at(max + 1e-4, 2, 0.1), at(max + 2e-4, 2, 0.1)])]; });
  expect(refusal(() => admitProgram(further, AXES, 4n)).reason).toBe('outside_limits_outward');
  // the curve between two samples at the start position bows further out
  const bow = program((c) => { c.segments = [seg('freespace', [at(max + 1e-4, 2), at(max + 1e-4, 2), at(max + 1e-4, 2)], [at(0, 2, 0), at(0.1, 2, 0), at(0, 2, 0)])]; });
  const r = refusal(() => admitProgram(bow, AXES, 4n));
  expect([r.reason, r.limitViolation]).toEqual(['outside_limits_outward', undefined]);
});

test('finite-difference acceleration above the axis maximum: native_segment_rate_exceeded without evidence block', () => {
  // J9 max_acceleration 2 rad/s^2: 0 -> 0.015 rad/s in one 0.01 s step is 1.5 rad/s^2, 0.025 rad/s is 2.5.
  const rows = [at(0.1, 8), at(0.10015, 8), at(0.1003, 8)];
  const x = program((c) => { c.segments = [seg('freespace', rows, [at(0, 8, 0), at(0.015, 8, 0), at(0, 8, 0)])]; });
  expect(admitProgram(x, AXES, 4n).samples).toBe(3); // 1.5 rad/s^2
  const y = program((c) => { c.segments = [seg('freespace', [at(0.1, 8), at(0.10025, 8), at(0.1005, 8)], [at(0, 8, 0), at(0.025, 8, 0), at(0, 8, 0)])]; });
  const r = refusal(() => admitProgram(y, AXES, 4n));
  expect(r.text).toMatch(/^native_segment_rate_exceeded: segment=0 sample=0 axis=J9 acceleration=2\.5\d* limit=2$/);
  expect(r.limitViolation).toBeUndefined();
});

test('segment joins must coincide in drive counts: segment_boundary_discontinuous', () => {
  const cpu = AXES[0]!.countsPerUnit;
  const gap = (d: number) => program((c) => { c.segments = [seg('dwell', [at(0.1, 0), at(0.1, 0)]), seg('dwell', [at(0.1 + d, 0), at(0.1 + d, 0)])]; });
  expect(admitProgram(gap(0.4 / cpu), AXES, 4n).points.segment.length).toBe(3);
  expect(refusal(() => admitProgram(gap(3 / cpu), AXES, 4n)).text).toBe('segment_boundary_discontinuous: join=0 axis=J1 gap_counts=3');
});

test('process markers: configured non-torch outputs on exact samples become intents of their executed point', () => {
  const mk = (segment: number, sample: number, action: string, value = true) => ({ segment, sample, action, value });
  const p = admitProgram(program(), AXES, 4n, OUTPUTS, [mk(0, 1, 'clamp'), mk(1, 0, 'gas_purge'), mk(1, 1, 'clamp', false)]);
  expect(p.requiresProcessIo).toBe(true);
  expect(p.markers).toEqual([
    { time_ns: 10_000_000n, segment: 0, sample: 1, action: 'clamp', value: true },
    { time_ns: 20_000_000n, segment: 1, sample: 0, action: 'gas_purge', value: true }, // the join point
    { time_ns: 30_000_000n, segment: 1, sample: 1, action: 'clamp', value: false },
  ]);
  expect(Array.from(p.points.ioMask)).toEqual([0, 2, 4, 2]);
  expect(Array.from(p.points.ioValues)).toEqual([0, 2, 4, 0]);
  expect(p.identity.normalised_digest).not.toBe(admitProgram(program(), AXES, 4n).identity.normalised_digest);
  expect(refusal(() => admitProgram(program(), AXES, 4n, [], [mk(0, 0, 'clamp')])).reason).toBe('io_not_configured');
  expect(refusal(() => admitProgram(program(), AXES, 4n, OUTPUTS, [mk(0, 0, 'torch')])).reason).toBe('io_torch_unqualified');
  expect(refusal(() => admitProgram(program(), AXES, 4n, OUTPUTS, [mk(0, 0, 'nozzle')])).reason).toBe('io_marker_invalid');
  expect(refusal(() => admitProgram(program(), AXES, 4n, OUTPUTS, [mk(0, 3, 'clamp')])).reason).toBe('io_marker_invalid');
  expect(refusal(() => admitProgram(program(), AXES, 4n, OUTPUTS, [mk(2, 0, 'clamp')])).reason).toBe('io_marker_invalid');
  expect(refusal(() => admitProgram(program(), AXES, 4n, OUTPUTS, [{ invalid: 'x' }])).reason).toBe('io_marker_invalid');
  expect(refusal(() => admitProgram(program(), AXES, 4n, OUTPUTS, [mk(0, 2, 'clamp'), mk(1, 0, 'clamp')])).reason).toBe('io_marker_invalid');
});

test('programPlan: the executed points in machine order, unmapped axes 0, every point with its velocity; into a slot over what it held, the same values', async () => {
  const { PlanArena } = await import('../core/plan-arena.ts');
  const x = program();
  // Ten axes, the fifth not in rad: the nine columns map onto axes 0-3 and 5-9, axis 4 is not commanded.
  const axes: ProgramAxis[] = [...AXES.slice(0, 4), { ...AXES[0]!, id: 'rail', rad: false }, ...AXES.slice(4)];
  const p = admitProgram(x, axes, 4n);
  expect(p.axisOf).toEqual([0, 1, 2, 3, 5, 6, 7, 8, 9]);
  const N = axes.length;
  const own = programPlan(p, N);
  const m = p.points.segment.length;
  expect(Array.from(own.timeNs)).toEqual(Array.from(p.points.tNs, (t) => BigInt(t)));
  for (let k = 0; k < m; k++) {
    for (let c = 0; c < 9; c++) {
      expect(own.position[k * N + p.axisOf[c]!]).toBe(p.points.q[k * COLS + c]);
      expect(own.velocity[k * N + p.axisOf[c]!]).toBe(p.points.qd[k * COLS + c]);
    }
    expect([own.position[k * N + 4], own.velocity[k * N + 4]]).toEqual([0, 0]);
  }
  expect(Array.from(own.hasVelocity)).toEqual(Array(m).fill(1));
  expect([own.workspace.t.length, own.workspace.q.length, own.workspace.qd.length]).toEqual([m, m * N, m * N]);
  // A slot keeps what its last plan left: every element is written.
  const arena = PlanArena.create(N, { slots: 1, maxPoints: 16 });
  const st = arena.storage(0);
  st.position.fill(9);
  st.velocity.fill(9);
  st.hasVelocity.fill(0);
  st.ioMask.fill(7);
  const inSlot = programPlan(p, N, { plan: arena.plan(0, m, true), workspace: arena.workspace(0, m) });
  for (const k of ['timeNs', 'position', 'velocity', 'hasVelocity', 'ioMask', 'ioValues'] as const) expect(Array.from(inSlot[k] as ArrayLike<unknown>), k).toEqual(Array.from(own[k] as ArrayLike<unknown>));
  expect(inSlot.position.buffer).toBe(arena.buffer);
});
