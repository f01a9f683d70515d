import { codeOf } from './errors.ts';
import { test, expect } from 'vitest';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  DENSE_REASONS, DENSE_SCHEMA, SAMPLE_BYTES, contentDigest, decodeDense, encodeDense, restToRestSamples,
} from './dense.ts';
import type { DenseSampleInput, DenseSegmentInput, DenseSpec } from './dense.ts';
import type { JsonExact, JsonObject } from './json.ts';
import { OracleError } from './errors.ts';
import { propertyRun } from '../property.ts';

const LIMITS = [2, 2, 2, 2, 2, 2, 1, 1, 3];

// Volume knob for the properties (HIL_PROPERTY_RUNS, default 60); the seed is printed so a failing
// run can be replayed with HIL_PROPERTY_SEED.
const RUNS = Number(process.env.HIL_PROPERTY_RUNS ?? 60);
const SEED = Number(process.env.HIL_PROPERTY_SEED ?? Date.now() % 2 ** 31);
console.log(`harness/oracle/dense properties: seed ${SEED}, runs ${RUNS}`);
const Q0 = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];
const Q1 = Q0.map((q) => q + 0.1);
const Q2 = Q1.map((q) => q + 0.02);

/** A valid three-segment program: freespace move, weld with torch on, dwell. */
function baseSpec(): DenseSpec {
  return {
    maxAbsQd: LIMITS,
    segments: [
      { kind: 'freespace', sourceId: 'approach', samples: restToRestSamples(Q0, Q1, 21) },
      { kind: 'weld', sourceId: 'seam-1', samples: restToRestSamples(Q1, Q2, 11, 0.01, 1) },
      { kind: 'dwell', sourceId: 'hold', samples: restToRestSamples(Q2, Q2, 3) },
    ],
  };
}

type SpecEdit = (spec: DenseSpec, samples: DenseSampleInput[][]) => void;
function build(edit?: SpecEdit): Uint8Array {
  const spec = baseSpec();
  const samples = spec.segments.map((s) => s.samples as DenseSampleInput[]);
  edit?.(spec, samples);
  return encodeDense(spec);
}
const header = (edit: (h: Record<string, JsonExact>) => void): SpecEdit => (spec) => {
  spec.mutateHeader = edit;
};
const seg = (h: Record<string, JsonExact>, k: number) => (h.segments as JsonObject[])[k]!;
const blockOf = (h: Record<string, JsonExact>, k: number) => seg(h, k).block as JsonObject;
const sub = (h: Record<string, JsonExact>, key: string) => h[key] as JsonObject;
const setSample = (k: number, i: number, patch: Partial<DenseSampleInput>): SpecEdit => (_spec, samples) => {
  samples[k]![i] = { ...samples[k]![i]!, ...patch };
};
const axisValue = (base: ArrayLike<number>, j: number, v: number) => Array.from(base, (x, a) => (a === j ? v : x));
function bodyStart(bytes: Uint8Array): number {
  return 4 + new DataView(bytes.buffer, bytes.byteOffset).getUint32(0, false);
}

test('a valid file decodes with every field', () => {
  const bytes = build();
  const d = decodeDense(bytes);
  expect(d.segments.map((s) => [s.index, s.kind, s.sourceId, s.sampleCount])).toEqual([
    [0, 'freespace', 'approach', 21],
    [1, 'weld', 'seam-1', 11],
    [2, 'dwell', 'hold', 3],
  ]);
  expect(d.totalSampleCount).toBe(35);
  expect(d.axisMask).toBe(0x1ff);
  expect(d.dtS).toBe(0.01);
  expect(d.maxAbsQd).toEqual(LIMITS);
  expect(d.manifestRevision).toBe(1n);
  expect(d.header.trajectory_digest).toBe(d.trajectoryDigest);
  expect(d.segments[1]!.byteOffset).toBe(21 * SAMPLE_BYTES);
  expect(d.segments[1]!.flags.every((f) => f === 1)).toBe(true);
  expect(d.segments[0]!.q[20 * 9 + 3]).toBeCloseTo(Q1[3]!, 15);
  expect(d.segments[0]!.t).toBeInstanceOf(Float64Array);
  expect(decodeDense(bytes, { order: 'content_first' }).trajectoryDigest).toBe(d.trajectoryDigest);
});

test('the content digest matches an independent reading of document 2', () => {
  // A second writer of the recipe, with Buffer instead of the module's helpers.
  const bytes = build();
  const d = decodeDense(bytes);
  const parts: Buffer[] = [Buffer.from(DENSE_SCHEMA + '\0', 'ascii')];
  const u64 = (v: number | bigint) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(v));
    parts.push(b);
  };
  const f64 = (v: number) => {
    const b = Buffer.alloc(8);
    b.writeDoubleBE(v);
    parts.push(b);
  };
  const str = (s: string) => {
    u64(Buffer.byteLength(s));
    parts.push(Buffer.from(s, 'utf8'));
  };
  u64(9);
  u64(0x1ff);
  f64(0.01);
  u64(3);
  const start = bodyStart(bytes);
  for (const s of d.segments) {
    str(s.kind);
    str(s.sourceId);
    u64(s.sampleCount);
    parts.push(Buffer.from(bytes.subarray(start + s.byteOffset, start + s.byteOffset + s.byteLength)));
  }
  u64(9);
  LIMITS.forEach(f64);
  expect(d.trajectoryDigest).toBe('sha256:' + createHash('sha256').update(Buffer.concat(parts)).digest('hex'));
});

test('identity fields, robot_cell and unknown keys are outside the digest', () => {
  const a = decodeDense(build());
  const b = decodeDense(build((spec) => {
    spec.planId = 'other:123456789abc';
    spec.programId = 'other';
    spec.manifestRevision = 7n;
    spec.robotCell = { model_id: 'x' };
    spec.extraHeader = { future_field: { nested: [1n] } };
  }));
  expect(b.trajectoryDigest).toBe(a.trajectoryDigest);
  expect(b.planId).toBe('other:123456789abc');
});

// Each row: name, edit of a valid file, expected reason with digest_first, with content_first.
interface ByteEdit {
  bytes: (b: Uint8Array) => Uint8Array;
}
const raw = (fn: (b: Uint8Array) => Uint8Array): ByteEdit => ({ bytes: fn });
type Row = [string, SpecEdit | ByteEdit, string, string?];
const ERRORS: Row[] = [
  ['blob shorter than 4 bytes', raw((_b) => new Uint8Array(3)), 'header_truncated'],
  ['header_len past the end', raw((b) => { new DataView(b.buffer).setUint32(0, b.length, false); return b; }), 'header_truncated'],
  ['header not JSON', raw((b) => { b[4] = 0x78; return b; }), 'header_json_invalid'],
  ['header invalid UTF-8', raw((b) => { b[5] = 0xff; return b; }), 'header_json_invalid'],
  ['header duplicate key', raw((b) => {
    const len = new DataView(b.buffer).getUint32(0, false);
    const text = Buffer.from(b.subarray(4, 4 + len)).toString('utf8').replace('"plan_id"', '"schema"');
    return Uint8Array.from(Buffer.concat([b.subarray(0, 4), Buffer.from(text), b.subarray(4 + len)]));
  }), 'header_json_invalid'],
  ['header is an empty object', header((h) => { for (const k of Object.keys(h)) delete h[k]; }), 'dense_schema_mismatch'],
  ['header is an array', raw(() => Uint8Array.from([0, 0, 0, 2, 0x5b, 0x5d])), 'header_json_invalid'],
  ['header is empty', raw(() => Uint8Array.from([0, 0, 0, 0])), 'header_json_invalid'],
  ['created_at missing', header((h) => { delete h.created_at; }), 'header_json_invalid'],
  ['created_at not RFC 3339', header((h) => { h.created_at = '2024-01-01 12:00'; }), 'header_json_invalid'],
  ['manifest_revision as string', header((h) => { h.manifest_revision = '1'; }), 'header_json_invalid'],
  ['plan_revision negative', header((h) => { h.plan_revision = -1n; }), 'header_json_invalid'],
  ['plan_id not a string', header((h) => { h.plan_id = 5n; }), 'header_json_invalid'],
  ['axis_mask beyond nine bits', header((h) => { sub(h, 'axes').axis_mask = 0x200n; }), 'header_json_invalid'],
  ['position_unit deg', header((h) => { sub(h, 'axes').position_unit = 'deg'; }), 'header_json_invalid'],
  ['sampling missing', header((h) => { delete h.sampling; }), 'header_json_invalid'],
  ['segment block missing', header((h) => { delete seg(h, 1).block; }), 'header_json_invalid'],
  ['schema differs', header((h) => { h.schema = 'robot.v4.dense-joint-trajectory.v2'; }), 'dense_schema_mismatch'],
  ['schema missing', header((h) => { delete h.schema; }), 'dense_schema_mismatch'],
  ['axis_count 6', header((h) => { sub(h, 'axes').axis_count = 6n; }), 'axis_count_mismatch'],
  ['axis_count as string', header((h) => { sub(h, 'axes').axis_count = '9'; }), 'axis_count_mismatch'],
  ['record_bytes 152', header((h) => { sub(h, 'sample_encoding').record_bytes = 152n; }), 'sample_encoding_mismatch'],
  ['encoding f32', header((h) => { sub(h, 'sample_encoding').encoding = 'f32-be-aos.v1'; }), 'sample_encoding_mismatch'],
  ['limits eight numbers', (spec: DenseSpec) => { spec.maxAbsQd = LIMITS.slice(0, 8); }, 'limits_invalid'],
  ['limit zero', (spec: DenseSpec) => { spec.maxAbsQd = axisValue(LIMITS, 4, 0); }, 'limits_invalid'],
  ['limit negative', (spec: DenseSpec) => { spec.maxAbsQd = axisValue(LIMITS, 4, -1); }, 'limits_invalid'],
  ['limit as string', header((h) => { (sub(h, 'limits').max_abs_qd_rad_s as JsonExact[])[0] = '2'; }), 'limits_invalid'],
  ['dt_s zero', header((h) => { sub(h, 'sampling').dt_s = 0n; }), 'time_grid_invalid'],
  ['dt_s negative', header((h) => { sub(h, 'sampling').dt_s = -0.01; }), 'time_grid_invalid'],
  ['segments empty', header((h) => { h.segments = []; }), 'segments_empty'],
  ['segment index skips', header((h) => { seg(h, 1).index = 5n; }), 'segment_index_out_of_order'],
  ['kind transit', (spec: DenseSpec) => { (spec.segments as DenseSegmentInput[])[1]!.kind = 'transit'; }, 'kind_invalid'],
  ['segment of one sample', (_spec, s) => { s[2]!.splice(1); }, 'segment_too_short'],
  ['block offset shifted', header((h) => { blockOf(h, 1).byte_offset = (blockOf(h, 1).byte_offset as bigint) + 1n; }), 'block_layout_invalid'],
  ['block length not n x 153', header((h) => { blockOf(h, 2).byte_length = 3n * 153n + 1n; }), 'block_layout_invalid'],
  ['trailing byte', raw((b) => Uint8Array.from([...b, 0])), 'blob_length_mismatch'],
  ['body cut short', raw((b) => b.subarray(0, b.length - 1)), 'blob_length_mismatch'],
  ['block byte flipped', raw((b) => { b[bodyStart(b) + 21 * 153 + 40] ^= 0x01; return b; }), 'block_sha256_mismatch'],
  ['block sha256 in uppercase', header((h) => { blockOf(h, 0).sha256 = (blockOf(h, 0).sha256 as string).toUpperCase().replace('SHA256', 'sha256'); }), 'block_sha256_mismatch'],
  ['total_sample_count off by one', header((h) => { sub(h, 'sampling').total_sample_count = 36n; }), 'total_sample_count_mismatch'],
  ['reserved flag bit', setSample(1, 3, { flags: 3 }), 'reserved_flags_set'],
  ['NaN position', setSample(0, 5, { q: axisValue(Q0, 2, NaN) }), 'nonfinite_sample'],
  ['infinite time', setSample(2, 1, { t: Infinity }), 'nonfinite_sample'],
  ['first t_s not 0', setSample(2, 0, { t: 1e-12 }), 'time_grid_invalid'],
  ['step off the grid', setSample(0, 10, { t: 0.1 + 2e-9 }), 'time_grid_invalid'],
  ['header dt_s differs from samples', (spec: DenseSpec) => { spec.dtS = 0.02; }, 'time_grid_invalid'],
  ['velocity above limit', setSample(0, 10, { qd: axisValue(new Array(9).fill(0), 6, 1.0001) }), 'qd_limit_exceeded'],
  ['negative velocity above limit', setSample(0, 10, { qd: axisValue(new Array(9).fill(0), 8, -3.5) }), 'qd_limit_exceeded'],
  ['torch in freespace', setSample(0, 4, { flags: 1 }), 'torch_outside_weld'],
  ['torch in dwell', setSample(2, 2, { flags: 1 }), 'torch_outside_weld'],
  ['position step', setSample(0, 10, { q: axisValue(restToRestSamples(Q0, Q1, 21)[10]!.q, 6, 0.9) }), 'q_step_exceeded'],
  ['first sample moving', setSample(1, 0, { qd: axisValue(new Array(9).fill(0), 0, 2e-6) }), 'boundary_qd_nonzero'],
  ['last sample moving', setSample(2, 2, { qd: axisValue(new Array(9).fill(0), 8, -2e-6) }), 'boundary_qd_nonzero'],
  ['segment starts away', (_spec, s) => { for (const x of s[2]!) x.q = axisValue(x.q, 5, x.q[5]! + 0.002); }, 'boundary_q_discontinuity'],
  ['duration_s off', (spec: DenseSpec) => { (spec.segments as DenseSegmentInput[])[1]!.durationS = 0.1 + 2e-9; }, 'duration_mismatch'],
  ['total_duration_s off', header((h) => { sub(h, 'sampling').total_duration_s = 1; }), 'duration_mismatch'],
  ['trajectory digest of another file', header((h) => { h.trajectory_digest = 'sha256:' + '0'.repeat(64); }), 'trajectory_digest_mismatch'],
  ['trajectory digest malformed', header((h) => { h.trajectory_digest = 'abc'; }), 'trajectory_digest_mismatch'],
  ['trajectory digest missing', header((h) => { delete h.trajectory_digest; }), 'header_json_invalid'],
  ['source_id changed after digest', header((h) => { seg(h, 0).source_id = 'other'; }), 'trajectory_digest_mismatch'],
  ['dt_s changed after digest', header((h) => { sub(h, 'sampling').dt_s = 0.01 + 1e-12; }), 'trajectory_digest_mismatch'],
  ['limit changed after digest', header((h) => { (sub(h, 'limits').max_abs_qd_rad_s as JsonExact[])[0] = 2.5; }), 'trajectory_digest_mismatch'],
  ['axis_mask changed after digest', header((h) => { sub(h, 'axes').axis_mask = 0x3fn; }), 'trajectory_digest_mismatch'],
];

function apply(edit: Row[1]): Uint8Array {
  return typeof edit === 'function' ? build(edit) : edit.bytes(build());
}

test.each(ERRORS)('decodeDense refuses %s', (_name, edit, reason, contentFirst) => {
  const bytes = apply(edit);
  expect(codeOf(() => decodeDense(bytes))).toBe(reason);
  expect(codeOf(() => decodeDense(bytes, { order: 'content_first' }))).toBe(contentFirst ?? reason);
});

test('every reason of document 2 part 7 is raised by some row', () => {
  const raised = new Set(ERRORS.map((r) => r[2]).concat('schema_mismatch', 'sample_count_overflow'));
  expect(DENSE_REASONS.filter((r) => !raised.has(r))).toEqual([]);
});

test('schema reason can use the document 2 spelling', () => {
  const bytes = build(header((h) => { h.schema = 'x'; }));
  expect(codeOf(() => decodeDense(bytes, { schemaReason: 'schema_mismatch' }))).toBe('schema_mismatch');
});

test('the two checking orders differ when a content rule and the digest are both broken', () => {
  const rows: Array<[SpecEdit, string]> = [
    [setSample(0, 5, { q: axisValue(Q0, 2, NaN) }), 'nonfinite_sample'],
    [setSample(0, 4, { flags: 1 }), 'torch_outside_weld'],
    [setSample(1, 0, { qd: axisValue(new Array(9).fill(0), 0, 1e-3) }), 'boundary_qd_nonzero'],
  ];
  for (const [edit, content] of rows) {
    const bytes = build((spec, s) => {
      edit(spec, s);
      spec.mutateHeader = (h) => { h.trajectory_digest = 'sha256:' + 'f'.repeat(64); };
    });
    expect(codeOf(() => decodeDense(bytes, { order: 'digest_first' }))).toBe('trajectory_digest_mismatch');
    expect(codeOf(() => decodeDense(bytes, { order: 'content_first' }))).toBe(content);
  }
});

test('more than 250000 samples is sample_count_overflow', () => {
  const n = 250_001;
  const t = new Float64Array(n);
  for (let i = 0; i < n; i++) t[i] = i * 0.01;
  const bytes = encodeDense({
    maxAbsQd: LIMITS,
    segments: [{ kind: 'dwell', sourceId: 'long', samples: { t, q: new Float64Array(n * 9), qd: new Float64Array(n * 9) } }],
  });
  expect(codeOf(() => decodeDense(bytes))).toBe('sample_count_overflow');
  // The same file one sample shorter is valid.
  const ok = encodeDense({
    maxAbsQd: LIMITS,
    segments: [{ kind: 'dwell', sourceId: 'long', samples: { t: t.subarray(0, n - 1), q: new Float64Array((n - 1) * 9), qd: new Float64Array((n - 1) * 9) } }],
  });
  expect(decodeDense(ok).totalSampleCount).toBe(250_000);
});

// Generated valid programs: chained rest-to-rest segments, torch only in welds.
const programArb = fc
  .array(
    fc.record({
      kind: fc.constantFrom('freespace', 'weld', 'dwell'),
      sourceId: fc.string({ unit: 'grapheme', maxLength: 12 }),
      n: fc.integer({ min: 2, max: 40 }),
      delta: fc.array(fc.double({ min: -0.05, max: 0.05, noNaN: true }), { minLength: 9, maxLength: 9 }),
      torch: fc.boolean(),
    }),
    { minLength: 1, maxLength: 5 },
  )
  .map((segs) => {
    let q = Q0;
    const segments = segs.map((s) => {
      // Keep peak velocity |d| pi / (2 (n-1) dt) under the smallest limit (1 rad/s).
      const scale = Math.min(1, ((s.n - 1) * 0.01 * 2) / Math.PI);
      const next = q.map((x, j) => (s.kind === 'dwell' ? x : x + s.delta[j]! * scale));
      const samples = restToRestSamples(q, next, s.n, 0.01, s.kind === 'weld' && s.torch ? 1 : 0);
      q = samples[samples.length - 1]!.q as number[];
      return { kind: s.kind, sourceId: s.sourceId, samples };
    });
    return { maxAbsQd: LIMITS, segments } satisfies DenseSpec;
  });

test('property: encodeDense/decodeDense round trip', () => {
  fc.assert(
    fc.property(programArb, (spec) => {
      const bytes = encodeDense(spec);
      for (const order of ['digest_first', 'content_first'] as const) {
        const d = decodeDense(bytes, { order });
        expect(d.segments.length).toBe(spec.segments.length);
        d.segments.forEach((s, k) => {
          const input = spec.segments[k]!;
          expect(s.kind).toBe(input.kind);
          expect(s.sourceId).toBe(input.sourceId);
          expect(Array.from(s.t)).toEqual(input.samples.map((x) => x.t));
          expect(Array.from(s.q)).toEqual(input.samples.flatMap((x) => Array.from(x.q)));
          expect(Array.from(s.qd)).toEqual(input.samples.flatMap((x) => Array.from(x.qd)));
          expect(Array.from(s.flags)).toEqual(input.samples.map((x) => x.flags ?? 0));
        });
        expect(d.trajectoryDigest).toBe(d.header.trajectory_digest);
      }
    }),
    propertyRun('dense.test.ts:292', 60),
  );
});

test('property: one mutated block byte gives block_sha256_mismatch in both orders', () => {
  fc.assert(
    fc.property(programArb, fc.nat(), fc.integer({ min: 1, max: 255 }), (spec, where, xor) => {
      const bytes = encodeDense(spec);
      const start = bodyStart(bytes);
      const at = start + (where % (bytes.length - start));
      bytes[at] ^= xor;
      expect(codeOf(() => decodeDense(bytes))).toBe('block_sha256_mismatch');
      expect(codeOf(() => decodeDense(bytes, { order: 'content_first' }))).toBe('block_sha256_mismatch');
    }),
    propertyRun('dense.test.ts:306', 60),
  );
});

test('contentDigest depends on every documented input', () => {
  const block = new Uint8Array(2 * 153);
  const base = { axisMask: 0x1ff, dtS: 0.01, segments: [{ kind: 'weld', sourceId: 'a', sampleCount: 2, block }], maxAbsQd: LIMITS };
  const d0 = contentDigest(base);
  expect(d0).toMatch(/^sha256:[0-9a-f]{64}$/);
  const variants = [
    { ...base, axisMask: 0x3f },
    { ...base, dtS: 0.02 },
    { ...base, maxAbsQd: axisValue(LIMITS, 8, 4) },
    { ...base, segments: [{ ...base.segments[0]!, kind: 'dwell' }] },
    { ...base, segments: [{ ...base.segments[0]!, sourceId: 'b' }] },
    { ...base, segments: [{ ...base.segments[0]!, block: Uint8Array.from(block, (_, i) => (i === 0 ? 1 : 0)) }] },
    // Length prefixes keep ("ab", "") and ("a", "b") apart.
    { ...base, segments: [{ ...base.segments[0]!, kind: 'weldx', sourceId: '' }] },
  ];
  for (const v of variants) expect(contentDigest(v)).not.toBe(d0);
});

test('property: any single-byte change of a valid file gives a documented reason or the same decode', () => {
  const known = new Set<string>(DENSE_REASONS);
  fc.assert(
    fc.property(programArb, fc.nat(), fc.integer({ min: 1, max: 255 }), (spec, where, xor) => {
      const good = encodeDense(spec);
      const ref = decodeDense(good);
      const bytes = Uint8Array.from(good);
      bytes[where % bytes.length] ^= xor;
      let d;
      try {
        d = decodeDense(bytes);
      } catch (e) {
        expect(e).toBeInstanceOf(OracleError);
        expect(known.has((e as OracleError).code)).toBe(true);
        return;
      }
      expect(d.trajectoryDigest).toBe(ref.trajectoryDigest);
      expect(Array.from(d.segments.flatMap((s) => Array.from(s.q)))).toEqual(Array.from(ref.segments.flatMap((s) => Array.from(s.q))));
    }),
    { numRuns: RUNS * 5, seed: SEED },
  );
});

// Three codecs, one reference: fixtures/dense/reference.rdt was written by the reference system's
// encoder; its sidecar writes down its logical content and digest. The oracle must read the same.
test('the reference fixture decodes field by field as its sidecar writes it down', () => {
  const dir = new URL('../../fixtures/dense/', import.meta.url);
  const bytes = new Uint8Array(readFileSync(new URL('reference.rdt', dir)));
  const side = JSON.parse(readFileSync(new URL('reference.json', dir), 'utf8'));
  for (const order of ['digest_first', 'content_first'] as const) {
    const d = decodeDense(bytes, { order });
    const h = side.header;
    expect(d.trajectoryDigest).toBe(side.digest);
    expect(d.header.trajectory_digest).toBe(side.digest);
    expect(d.totalSampleCount).toBe(side.sample_count);
    expect(d.header.schema).toBe(h.schema);
    expect([d.planId, d.programId, d.programDigest, d.createdAt]).toEqual([h.plan_id, h.program_id, h.program_digest, h.created_at]);
    expect([d.manifestRevision, d.planRevision]).toEqual([BigInt(h.manifest_revision), BigInt(h.plan_revision)]);
    expect([d.axisMask, d.dtS, d.totalDurationS]).toEqual([h.axis_mask, h.dt_s, h.total_duration_s]);
    expect(d.maxAbsQd).toEqual(h.max_abs_qd_rad_s);
    expect(d.segments.length).toBe(side.segments.length);
    d.segments.forEach((s, k) => {
      const w = side.segments[k];
      expect([s.index, s.kind, s.sourceId, s.sampleCount, s.durationS, s.byteOffset, s.byteLength, s.sha256]).toEqual([w.index, w.kind, w.source_id, w.sample_count, w.duration_s, w.byte_offset, w.byte_length, w.sha256]);
      expect(Array.from(s.t)).toEqual(w.t);
      expect(Array.from(s.q)).toEqual(w.q);
      expect(Array.from(s.qd)).toEqual(w.qd);
      expect(Array.from(s.flags)).toEqual(w.flags);
    });
  }
});
