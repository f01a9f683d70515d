import { test, expect } from 'vitest';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { COLS, DenseFormatError, RECORD, decode, encode } from './codec.ts';
import type { SegmentContent, TrajectoryContent } from './codec.ts';
import { referenceContent } from './reference.ts';

const FIXTURE = new URL('../../fixtures/dense/', import.meta.url);
const rdt = readFileSync(new URL('reference.rdt', FIXTURE));
const sidecar = JSON.parse(readFileSync(new URL('reference.json', FIXTURE), 'utf8'));

// Volume knob for the properties (HIL_PROPERTY_RUNS); the seed is printed so a failure can be replayed
// with HIL_PROPERTY_SEED.
const RUNS = Number(process.env.HIL_PROPERTY_RUNS ?? 100);
const SEED = Number(process.env.HIL_PROPERTY_SEED ?? Date.now() % 2 ** 31);
console.log(`sims/dense properties: seed ${SEED}, runs ${RUNS}`);

function contentFromSidecar(): TrajectoryContent {
  const h = sidecar.header;
  return {
    planId: h.plan_id, programId: h.program_id, programDigest: h.program_digest,
    manifestRevision: BigInt(h.manifest_revision), planRevision: BigInt(h.plan_revision), createdAt: h.created_at,
    axisMask: h.axis_mask, dtS: h.dt_s, maxAbsQd: h.max_abs_qd_rad_s,
    segments: sidecar.segments.map((s: any) => ({ kind: s.kind, sourceId: s.source_id, t: [...s.t], q: [...s.q], qd: [...s.qd], flags: [...s.flags] })),
  };
}

test('the encoder reproduces the reference file byte for byte from its written-down content', () => {
  expect(Buffer.compare(encode(contentFromSidecar()), rdt)).toBe(0);
  expect(Buffer.compare(encode(referenceContent()), rdt)).toBe(0);
});

test('the decoder reads the reference file field by field as the sidecar writes it down', () => {
  const x = decode(rdt);
  const h = sidecar.header;
  expect(x.digest).toBe(sidecar.digest);
  expect(x.t.length).toBe(sidecar.sample_count);
  expect([x.planId, x.programId, x.programDigest, x.createdAt]).toEqual([h.plan_id, h.program_id, h.program_digest, h.created_at]);
  expect([x.manifestRevision, x.planRevision]).toEqual([BigInt(h.manifest_revision), BigInt(h.plan_revision)]);
  expect([x.axisMask, x.dtS, x.totalDurationS]).toEqual([h.axis_mask, h.dt_s, h.total_duration_s]);
  expect(Array.from(x.maxAbsQd)).toEqual(h.max_abs_qd_rad_s);
  expect(x.segments.length).toBe(sidecar.segments.length);
  x.segments.forEach((s, k) => {
    const w = sidecar.segments[k];
    expect([s.index, s.kind, s.sourceId, s.sampleCount, s.durationS, s.byteOffset, s.byteLength, s.sha256]).toEqual([w.index, w.kind, w.source_id, w.sample_count, w.duration_s, w.byte_offset, w.byte_length, w.sha256]);
    const a = s.first;
    expect(Array.from(x.t.subarray(a, a + s.sampleCount))).toEqual(w.t);
    expect(Array.from(x.q.subarray(a * COLS, (a + s.sampleCount) * COLS))).toEqual(w.q);
    expect(Array.from(x.qd.subarray(a * COLS, (a + s.sampleCount) * COLS))).toEqual(w.qd);
    expect(Array.from(x.flags.subarray(a, a + s.sampleCount))).toEqual(w.flags);
  });
  expect(x.t).toBeInstanceOf(Float64Array);
});

// ---- one minimal corruption per documented reason (document 2 part 7) ------------------------

type Json = any;
function rewriteHeader(bytes: Buffer, edit: (h: Json) => void): Buffer {
  const n = bytes.readUInt32BE(0);
  const h = JSON.parse(bytes.subarray(4, 4 + n).toString('utf8'));
  edit(h);
  const text = Buffer.from(JSON.stringify(h), 'utf8');
  const out = Buffer.alloc(4 + text.length + bytes.length - 4 - n);
  out.writeUInt32BE(text.length, 0);
  text.copy(out, 4);
  bytes.copy(out, 4 + text.length, 4 + n);
  return out;
}
function reencode(edit: (c: TrajectoryContent & { segments: SegmentContent[] }) => void): Buffer {
  const c = contentFromSidecar() as TrajectoryContent & { segments: SegmentContent[] };
  edit(c);
  return encode(c);
}
const body = (b: Buffer) => 4 + b.readUInt32BE(0);

const CORRUPTIONS: [string, () => Buffer][] = [
  ['header_truncated', () => rdt.subarray(0, 3)],
  ['header_truncated', () => { const b = Buffer.from(rdt); b.writeUInt32BE(rdt.length, 0); return b; }],
  ['header_json_invalid', () => { const b = Buffer.from(rdt); b[4] = 0x20 + 0x5b - 0x20 + 1; return b; }],
  ['header_json_invalid', () => rewriteHeader(rdt, (h) => { h.manifest_revision = '7'; })],
  ['dense_schema_mismatch', () => rewriteHeader(rdt, (h) => { h.schema = 'robot.v4.dense-joint-trajectory.v2'; })],
  ['axis_count_mismatch', () => rewriteHeader(rdt, (h) => { h.axes.axis_count = 6; })],
  ['sample_encoding_mismatch', () => rewriteHeader(rdt, (h) => { h.sample_encoding.record_bytes = 152; })],
  ['limits_invalid', () => rewriteHeader(rdt, (h) => { h.limits.max_abs_qd_rad_s[4] = 0; })],
  ['time_grid_invalid', () => rewriteHeader(rdt, (h) => { h.sampling.dt_s = 0; })],
  ['segments_empty', () => rewriteHeader(rdt, (h) => { h.segments = []; })],
  ['segment_index_out_of_order', () => rewriteHeader(rdt, (h) => { h.segments[1].index = 2; })],
  ['kind_invalid', () => rewriteHeader(rdt, (h) => { h.segments[2].kind = 'hold'; })],
  ['segment_too_short', () => reencode((c) => { const s = c.segments[2]!; c.segments[2] = { ...s, t: [0], q: Array.from(s.q).slice(0, COLS), qd: Array.from(s.qd).slice(0, COLS), flags: [0] }; })],
  ['block_layout_invalid', () => rewriteHeader(rdt, (h) => { h.segments[1].block.byte_offset += 1; })],
  ['blob_length_mismatch', () => Buffer.concat([rdt, Buffer.alloc(1)])],
  ['total_sample_count_mismatch', () => rewriteHeader(rdt, (h) => { h.sampling.total_sample_count += 1; })],
  ['block_sha256_mismatch', () => { const b = Buffer.from(rdt); b[body(b) + RECORD + 20]! ^= 1; return b; }],
  ['trajectory_digest_mismatch', () => rewriteHeader(rdt, (h) => { h.trajectory_digest = h.trajectory_digest.replace(/.$/, (d: string) => (d === '0' ? '1' : '0')); })],
  ['reserved_flags_set', () => reencode((c) => { (c.segments[1]!.flags as number[])[2] = 3; })],
  ['nonfinite_sample', () => reencode((c) => { (c.segments[0]!.q as number[])[2 * COLS + 5] = NaN; })],
  ['time_grid_invalid', () => reencode((c) => { (c.segments[1]!.t as number[])[3] += 2e-9; })],
  ['qd_limit_exceeded', () => reencode((c) => { (c.segments[0]!.qd as number[])[2 * COLS + 6] = 1.0000001; })],
  ['torch_outside_weld', () => reencode((c) => { (c.segments[2]!.flags as number[])[1] = 1; })],
  ['q_step_exceeded', () => reencode((c) => { (c.segments[2]!.q as number[])[1 * COLS + 8] += 0.0126; })],
  ['boundary_qd_nonzero', () => reencode((c) => { (c.segments[1]!.qd as number[])[4 * COLS + 3] = 2e-6; })],
  ['boundary_q_discontinuity', () => reencode((c) => { for (const s of c.segments.slice(2)) for (let i = 0; i < s.t.length; i++) (s.q as number[])[i * COLS] += 0.0011; })],
  ['duration_mismatch', () => reencode((c) => { c.segments[1]!.durationS = 0.04 + 2e-9; })],
];

test.each(CORRUPTIONS.map(([r, f], i) => [`${i}:${r}`, r, f] as const))('corruption %s is refused with its reason', (_n, reason, make) => {
  let err: unknown;
  try {
    decode(make());
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(DenseFormatError);
  expect((err as DenseFormatError).reason).toBe(reason);
  expect((err as DenseFormatError).message.startsWith(`${reason}: `)).toBe(true);
});

test('sample_count_overflow: more than 250000 samples', () => {
  const n = 250001;
  const seg = { kind: 'dwell', sourceId: 'long', t: Float64Array.from({ length: n }, (_, i) => i * 0.01), q: new Float64Array(n * COLS), qd: new Float64Array(n * COLS), flags: new Uint8Array(n) };
  const c = { ...contentFromSidecar(), segments: [seg] };
  expect(() => decode(encode(c))).toThrowError(/^sample_count_overflow: /);
  const ok = { ...c, segments: [{ ...seg, t: seg.t.subarray(0, 250000), q: seg.q.subarray(0, 250000 * COLS), qd: seg.qd.subarray(0, 250000 * COLS), flags: seg.flags.subarray(0, 250000) }] };
  expect(decode(encode(ok)).t.length).toBe(250000);
});

test('schema_mismatch spelling, content_first order, unknown keys ignored, identity outside the digest', () => {
  const wrong = rewriteHeader(rdt, (h) => { h.schema = 'x'; });
  expect(() => decode(wrong, { schemaReason: 'schema_mismatch' })).toThrowError(/^schema_mismatch: /);
  const both = reencode((c) => { (c.segments[2]!.flags as number[])[1] = 1; });
  const stale = rewriteHeader(both, (h) => { h.trajectory_digest = sidecar.digest; });
  expect(() => decode(stale)).toThrowError(/^trajectory_digest_mismatch: /);
  expect(() => decode(stale, { order: 'content_first' })).toThrowError(/^torch_outside_weld: /);
  const extra = rewriteHeader(rdt, (h) => { h.future_section = { a: [1, 2] }; h.plan_id = 'other'; h.program_digest = 'sha256:' + 'b'.repeat(64); });
  expect(decode(extra).digest).toBe(sidecar.digest);
  expect(decode(extra).planId).toBe('other');
});

// ---- properties ---------------------------------------------------------------------------

const LIMIT = [2, 2, 2, 4, 4, 5, 1, 1.5, 1];
const segmentArb = fc.record({
  kind: fc.constantFrom('freespace', 'weld', 'dwell'),
  sourceId: fc.string({ maxLength: 10 }),
  n: fc.integer({ min: 2, max: 30 }),
  delta: fc.array(fc.double({ min: -0.004, max: 0.004, noNaN: true }), { minLength: COLS, maxLength: COLS }),
  torch: fc.boolean(),
});
const trajectoryArb = fc.record({
  mask: fc.integer({ min: 0, max: 0x1ff }),
  start: fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { minLength: COLS, maxLength: COLS }),
  segs: fc.array(segmentArb, { minLength: 1, maxLength: 4 }),
  extra: fc.option(fc.string(), { nil: undefined }),
});

/** A valid file: each segment a linear move with rest samples at both ends (steps stay small). */
type Generated = typeof trajectoryArb extends fc.Arbitrary<infer T> ? T : never;
function build(g: Generated): TrajectoryContent {
  let at = [...g.start];
  const segments = g.segs.map((s) => {
    const t: number[] = [];
    const q: number[] = [];
    const qd: number[] = [];
    const flags: number[] = [];
    for (let i = 0; i < s.n; i++) {
      t.push(i * 0.01);
      for (let j = 0; j < COLS; j++) {
        q.push(at[j]! + (s.delta[j]! * i) / s.n);
        qd.push(i === 0 || i === s.n - 1 ? 0 : s.delta[j]!);
      }
      flags.push(s.kind === 'weld' && s.torch ? 1 : 0);
    }
    at = q.slice(-COLS);
    return { kind: s.kind, sourceId: s.sourceId, t, q, qd, flags };
  });
  return { planId: g.extra, manifestRevision: 1n, planRevision: 2n, createdAt: '2026-01-01T00:00:00+01:00', axisMask: g.mask, dtS: 0.01, maxAbsQd: LIMIT, segments };
}

test('property: encode then decode gives back every value', () => {
  fc.assert(
    fc.property(trajectoryArb, (g) => {
      const c = build(g);
      const x = decode(encode(c));
      expect(x.axisMask).toBe(g.mask);
      expect(x.planId).toBe(g.extra);
      let row = 0;
      c.segments.forEach((s, k) => {
        expect([x.segments[k]!.kind, x.segments[k]!.sourceId, x.segments[k]!.first]).toEqual([s.kind, s.sourceId, row]);
        expect(Array.from(x.q.subarray(row * COLS, (row + s.t.length) * COLS))).toEqual(Array.from(s.q));
        expect(Array.from(x.qd.subarray(row * COLS, (row + s.t.length) * COLS))).toEqual(Array.from(s.qd));
        expect(Array.from(x.flags.subarray(row, row + s.t.length))).toEqual(Array.from(s.flags));
        row += s.t.length;
      });
    }),
    { numRuns: RUNS, seed: SEED },
  );
});

test('property: any single-byte change gives a documented reason or the same decode', () => {
  const REASONS = new Set(['header_truncated', 'header_json_invalid', 'dense_schema_mismatch', 'axis_count_mismatch', 'sample_encoding_mismatch', 'limits_invalid', 'time_grid_invalid', 'segments_empty', 'segment_index_out_of_order', 'kind_invalid', 'segment_too_short', 'block_layout_invalid', 'blob_length_mismatch', 'block_sha256_mismatch', 'reserved_flags_set', 'total_sample_count_mismatch', 'sample_count_overflow', 'nonfinite_sample', 'qd_limit_exceeded', 'torch_outside_weld', 'q_step_exceeded', 'boundary_qd_nonzero', 'boundary_q_discontinuity', 'duration_mismatch', 'trajectory_digest_mismatch']);
  fc.assert(
    fc.property(trajectoryArb, fc.nat(), fc.integer({ min: 1, max: 255 }), (g, where, xor) => {
      const good = encode(build(g));
      const ref = decode(good);
      const bad = Buffer.from(good);
      bad[where % bad.length]! ^= xor;
      let x;
      try {
        x = decode(bad);
      } catch (e) {
        expect(e).toBeInstanceOf(DenseFormatError);
        expect(REASONS.has((e as DenseFormatError).reason)).toBe(true);
        return;
      }
      // Accepted: only a byte that does not change meaning (e.g. inside an unknown or identity key).
      expect(x.digest).toBe(ref.digest);
      expect(Buffer.from(x.q.buffer).equals(Buffer.from(ref.q.buffer))).toBe(true);
    }),
    { numRuns: RUNS * 5, seed: SEED },
  );
});
