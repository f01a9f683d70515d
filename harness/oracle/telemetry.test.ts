import { test, expect } from 'vitest';
import fc from 'fast-check';
import {
  AXIS_BYTES, AXIS_FIELDS, AXIS_SLOTS, BatchSplitter, HEADER_BYTES, HEADER_FIELDS, MAX_BATCH_BYTES, RECORD_BYTES,
  RECORD_FIELDS, RECORD_LAYOUT_DIGEST, RECORD_LAYOUT_TEXT, batchLength, checkBatchCursor, decodeBatch,
  decodeBatchHeader, decodeBatchSequences, decodeBatchYielding, decodeRecord, decodeStruct, encodeBatch, splitBatches, compileStructDecoder,
  YIELD_EVERY_RECORDS,
} from './telemetry.ts';
import type { RecordInput } from './telemetry.ts';
import { OracleError } from './errors.ts';
import { sha256Hex } from './json.ts';
import { propertyRun } from '../property.ts';

function errorOf(fn: () => unknown): OracleError | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof OracleError) return e;
    throw e;
  }
  return undefined;
}
const codeOf = (fn: () => unknown) => errorOf(fn)?.code ?? 'no error';

const SIZES: Record<string, number> = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, u64: 8, i64: 8, 'u8[16]': 16, 'i32[16]': 64, hex32: 32, hex64: 64 };

function expectContiguous(fields: ReadonlyArray<readonly [number, string, string]>, end: number): void {
  let at = 0;
  for (const [offset, type] of fields) {
    expect(offset).toBe(at);
    at += SIZES[type]!;
  }
  expect(at).toBe(end);
  expect(new Set(fields.map((f) => f[2])).size).toBe(fields.length);
}

test('documented sizes: header 312, record 5392, axis 320, max batch 22085944', () => {
  expect(HEADER_BYTES).toBe(312);
  expect(RECORD_BYTES).toBe(5392);
  expect(AXIS_BYTES).toBe(320);
  expect(MAX_BATCH_BYTES).toBe(22085944);
  expect(batchLength({ record_count: 4096 })).toBe(22085944);
  expectContiguous(HEADER_FIELDS, 312);
  expectContiguous(RECORD_FIELDS, 272);
  expect(272 + AXIS_SLOTS * AXIS_BYTES).toBe(RECORD_BYTES);
  expectContiguous(AXIS_FIELDS, 320);
});

test('record layout text and digest follow the recipe', () => {
  const lines = RECORD_LAYOUT_TEXT.split('\n');
  expect(lines[0]).toBe('CycleCaptureRecordV2 5392');
  expect(lines[1]).toBe('0 u64 t_ns');
  expect(lines).toContain('272 CycleCaptureAxisV2[16] ax');
  expect(lines).toContain('CycleCaptureAxisV2 320');
  expect(lines).toContain('16 i32[16] absolute_value');
  expect(lines.at(-2)).toBe('312 u64 audit_coherence_error_counts');
  expect(lines.at(-1)).toBe('');
  expect(lines.length).toBe(1 + RECORD_FIELDS.length + 1 + 1 + AXIS_FIELDS.length + 1);
  expect(RECORD_LAYOUT_TEXT).toMatch(/^[\x20-\x7e\n]+$/);
  expect(RECORD_LAYOUT_DIGEST).toBe(sha256Hex(RECORD_LAYOUT_TEXT));
  expect(RECORD_LAYOUT_DIGEST).toMatch(/^[0-9a-f]{64}$/);
});

test('fields sit at their documented little-endian offsets', () => {
  const bytes = encodeBatch({
    header: { axis_count: 2, cycle_period_ns: 0x0102030405060708n, adapter_incarnation: 'ab'.repeat(16) },
    records: [{ t_ns: 0x1122334455667788n, seq: 1n, cycle_jitter_ns: -2n, io_reason: 0xdeadbeef, ax: [{}, { position: -1, torque_raw: -2, mode_display: -3, audit_coherence_error_counts: 5n, absolute_valid: [0, 1] }] }],
  });
  const dv = new DataView(bytes.buffer);
  expect(dv.getUint32(0, true)).toBe(0x31425452);
  expect([...bytes.subarray(232, 240)]).toEqual([8, 7, 6, 5, 4, 3, 2, 1]);
  expect(Buffer.from(bytes.subarray(8, 40)).toString('latin1')).toBe('ab'.repeat(16));
  expect(Buffer.from(bytes.subarray(168, 232)).toString('latin1')).toBe(RECORD_LAYOUT_DIGEST);
  const r = HEADER_BYTES;
  expect(dv.getBigUint64(r, true)).toBe(0x1122334455667788n);
  expect(dv.getBigInt64(r + 40, true)).toBe(-2n);
  expect(dv.getUint32(r + 268, true)).toBe(0xdeadbeef);
  const a1 = r + 272 + 320;
  expect(dv.getInt32(a1, true)).toBe(-1);
  expect(dv.getInt16(a1 + 256, true)).toBe(-2);
  expect(dv.getInt8(a1 + 272)).toBe(-3);
  expect(dv.getUint8(a1 + 81)).toBe(1);
  expect(dv.getBigUint64(a1 + 312, true)).toBe(5n);
  const decoded = decodeRecord(bytes, HEADER_BYTES);
  expect(decoded.ax[1]!.mode_display).toBe(-3);
  expect(decoded.ax[1]!.absolute_valid).toEqual([0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  expect(decoded.ax).toHaveLength(16);
});

// Arbitrary values for every field, generated from the same tables the codec uses.
function arbFor(type: string): fc.Arbitrary<unknown> {
  switch (type) {
    case 'u8': return fc.integer({ min: 0, max: 0xff });
    case 'i8': return fc.integer({ min: -0x80, max: 0x7f });
    case 'u16': return fc.integer({ min: 0, max: 0xffff });
    case 'i16': return fc.integer({ min: -0x8000, max: 0x7fff });
    case 'u32': return fc.nat({ max: 0xffffffff });
    case 'i32': return fc.integer({ min: -0x80000000, max: 0x7fffffff });
    case 'u64': return fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
    case 'i64': return fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n });
    case 'u8[16]': return fc.array(fc.integer({ min: 0, max: 0xff }), { minLength: 16, maxLength: 16 });
    case 'i32[16]': return fc.array(fc.integer({ min: -0x80000000, max: 0x7fffffff }), { minLength: 16, maxLength: 16 });
    default: throw new Error(type);
  }
}
const structArb = (fields: ReadonlyArray<readonly [number, string, string]>) =>
  fc.record(Object.fromEntries(fields.map(([, type, name]) => [name, arbFor(type)])) as Record<string, fc.Arbitrary<unknown>>);
const zeroAxis = Object.fromEntries(AXIS_FIELDS.map(([, type, name]) => [name, type.endsWith('[16]') ? new Array(16).fill(0) : type.endsWith('64') ? 0n : 0]));

test('property: encodeBatch/decodeBatch round-trip every record and axis field', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 16 }), fc.integer({ min: 0, max: 3 }), fc.bigInt({ min: 1n, max: 1n << 40n }), structArb(RECORD_FIELDS), structArb(AXIS_FIELDS), (axisCount, n, first, rec, axis) => {
      const records = Array.from({ length: n }, (_, k) => ({
        ...rec,
        seq: first + BigInt(k),
        ax: Array.from({ length: AXIS_SLOTS }, (_, a) => (a < axisCount ? { ...axis, position: a } : zeroAxis)),
      })) as RecordInput[];
      const bytes = encodeBatch({ header: { axis_count: axisCount, first_sequence: n ? first : 0n, last_sequence: n ? first + BigInt(n - 1) : 7n }, records });
      expect(bytes.length).toBe(312 + n * 5392);
      const batch = decodeBatch(bytes);
      expect(batch.header.axis_count).toBe(axisCount);
      expect(batch.header.record_count).toBe(n);
      expect(batch.records).toEqual(records);
    }),
    propertyRun('telemetry.test.ts:123', 40),
  );
});

// Each row: a minimal mutation of a valid one-record batch, and the code it must raise.
type Mutation = (b: Uint8Array, dv: DataView) => Uint8Array | void;
const validBatch = () => encodeBatch({ header: { axis_count: 2 }, records: [{ seq: 5n, ax: [{ position: 1 }, { position: 2 }] }] });
const BATCH_ERRORS: Array<[string, Mutation, string]> = [
  ['header cut short', (b) => b.subarray(0, 311), 'telemetry_truncated'],
  ['magic', (_b, dv) => dv.setUint32(0, 0x31425453, true), 'telemetry_magic'],
  ['magic big-endian', (_b, dv) => dv.setUint32(0, 0x31425452, false), 'telemetry_magic'],
  ['version 2', (_b, dv) => dv.setUint16(4, 2, true), 'telemetry_version'],
  ['header_bytes 320', (_b, dv) => dv.setUint16(6, 320, true), 'telemetry_header_bytes'],
  ['record_bytes 5393', (_b, dv) => dv.setUint32(272, 5393, true), 'telemetry_record_bytes'],
  ['layout digest one char', (b) => { b[168] = b[168] === 0x30 ? 0x31 : 0x30; }, 'telemetry_layout_mismatch'],
  ['axis_count 0', (_b, dv) => dv.setUint32(264, 0, true), 'telemetry_axis_count'],
  ['axis_count 17', (_b, dv) => dv.setUint32(264, 17, true), 'telemetry_axis_count'],
  ['record_count 4097', (_b, dv) => dv.setUint32(268, 4097, true), 'telemetry_record_count'],
  ['record_count 2', (_b, dv) => dv.setUint32(268, 2, true), 'telemetry_length'],
  ['trailing byte', (b) => Uint8Array.from([...b, 0]), 'telemetry_length'],
  ['missing byte', (b) => b.subarray(0, b.length - 1), 'telemetry_length'],
  ['reserved', (_b, dv) => dv.setUint32(276, 1, true), 'telemetry_reserved'],
  ['uppercase machine_sha256', (b) => { b[40] = 0x41; }, 'telemetry_hex_field'],
  ['NUL-padded daemon_incarnation', (b) => { b[311] = 0; }, 'telemetry_hex_field'],
  ['unused axis slot', (b) => { b[312 + 272 + 2 * 320 + 7] = 1; }, 'telemetry_unused_axis_nonzero'],
  ['record seq off', (_b, dv) => dv.setBigUint64(312 + 8, 6n, true), 'telemetry_sequence'],
  ['last_sequence off', (_b, dv) => dv.setBigUint64(248, 9n, true), 'telemetry_sequence'],
];

test.each(BATCH_ERRORS)('decodeBatch refuses %s', (_name, mutate, code) => {
  const b = validBatch();
  const mutated = mutate(b, new DataView(b.buffer)) ?? b;
  expect(codeOf(() => decodeBatch(mutated))).toBe(code);
});

// The sequence-only reader skips the record decode, not the checks a cursor relies on; the axis slots and
// field values are decodeBatch's alone.
const NOT_SEQUENCE_ONLY = new Set(['unused axis slot']);
test.each(BATCH_ERRORS.filter(([name]) => !NOT_SEQUENCE_ONLY.has(name)))('decodeBatchSequences refuses %s', (_name, mutate, code) => {
  const b = validBatch();
  const mutated = mutate(b, new DataView(b.buffer)) ?? b;
  expect(codeOf(() => decodeBatchSequences(mutated))).toBe(code);
});

test('decodeBatchSequences reads the sequences decodeBatch reads', () => {
  const bytes = encodeBatch({ header: { axis_count: 3, first_sequence: 41n, last_sequence: 44n }, records: [41n, 42n, 43n, 44n].map((seq) => ({ seq, cycle: seq * 2n })) });
  const b = decodeBatchSequences(bytes);
  expect(b.seqs).toEqual(decodeBatch(bytes).records.map((r) => r.seq));
  expect(b.header).toEqual(decodeBatch(bytes).header);
});

test('the valid batch of the table decodes', () => {
  const batch = decodeBatch(validBatch());
  expect(batch.records[0]!.ax[1]!.position).toBe(2);
});

test('header checks run in the documented order', () => {
  // Each row breaks two fields; the earlier one in the documented order must be reported.
  const rows: Array<[Mutation, string]> = [
    [(_b, dv) => { dv.setUint32(0, 0, true); dv.setUint16(4, 9, true); }, 'telemetry_magic'],
    [(_b, dv) => { dv.setUint16(4, 9, true); dv.setUint16(6, 0, true); }, 'telemetry_version'],
    [(_b, dv) => { dv.setUint16(6, 0, true); dv.setUint32(272, 0, true); }, 'telemetry_header_bytes'],
    [(b, dv) => { dv.setUint32(272, 0, true); b[168] = 0x5a; }, 'telemetry_record_bytes'],
    [(b, dv) => { b[168] = 0x5a; dv.setUint32(264, 0, true); }, 'telemetry_layout_mismatch'],
    [(_b, dv) => { dv.setUint32(264, 0, true); dv.setUint32(268, 5000, true); }, 'telemetry_axis_count'],
    [(_b, dv) => { dv.setUint32(268, 5000, true); dv.setUint32(276, 1, true); }, 'telemetry_record_count'],
  ];
  for (const [mutate, code] of rows) {
    const b = validBatch();
    mutate(b, new DataView(b.buffer));
    expect(codeOf(() => decodeBatch(b))).toBe(code);
  }
});

test('layout mismatch carries both digests; a caller-supplied digest is honoured', () => {
  const other = 'f'.repeat(64);
  const e = errorOf(() => decodeBatch(encodeBatch({ header: { record_layout_digest: other } })));
  expect(e?.code).toBe('telemetry_layout_mismatch');
  expect(e?.detail).toMatchObject({ expected: RECORD_LAYOUT_DIGEST, actual: other });
  expect(decodeBatch(encodeBatch({ header: { record_layout_digest: other } }), { expectedLayoutDigest: other }).records).toEqual([]);
});

test('header is checked before the body is read', () => {
  // A header announcing 4096 records is accepted on its own; the body length is a separate check.
  const b = encodeBatch({});
  new DataView(b.buffer).setUint32(268, 4096, true);
  expect(decodeBatchHeader(b).record_count).toBe(4096);
  expect(codeOf(() => decodeBatch(b))).toBe('telemetry_length');
});

test('empty batch and cursor rules', () => {
  const empty = decodeBatch(encodeBatch({ header: { first_sequence: 0n, last_sequence: 42n, dropped: 2n } }));
  expect(checkBatchCursor(empty.header, 40n)).toBe(42n);
  expect(codeOf(() => checkBatchCursor(empty.header, 41n))).toBe('telemetry_cursor');
  expect(codeOf(() => decodeBatch(encodeBatch({ header: { first_sequence: 3n } })))).toBe('telemetry_sequence');
  const full = decodeBatch(encodeBatch({ header: { dropped: 3n }, records: [{ seq: 11n }, { seq: 12n }] }));
  expect(checkBatchCursor(full.header, 7n)).toBe(12n);
  expect(codeOf(() => checkBatchCursor(full.header, 8n))).toBe('telemetry_cursor');
});

const streamOf = (n: number) =>
  Array.from({ length: n }, (_, k) => encodeBatch({ records: Array.from({ length: k % 3 }, (_, j) => ({ seq: BigInt(100 * k + j + 1) })), header: k % 3 === 0 ? { last_sequence: 0n } : {} }));
const concat = (parts: Uint8Array[]) => Uint8Array.from(Buffer.concat(parts));

test('property: the splitter finds batch boundaries from headers, whatever the chunking', () => {
  fc.assert(
    fc.asyncProperty(fc.integer({ min: 0, max: 5 }), fc.array(fc.integer({ min: 1, max: 7000 }), { maxLength: 20 }), async (n, cuts) => {
      const batches = streamOf(n);
      const all = concat(batches);
      const chunks: Uint8Array[] = [];
      let at = 0;
      for (const c of cuts) {
        if (at >= all.length) break;
        chunks.push(all.subarray(at, Math.min(all.length, at + c)));
        at += c;
      }
      if (at < all.length) chunks.push(all.subarray(at));
      const got: Uint8Array[] = [];
      for await (const b of splitBatches(chunks)) got.push(b);
      expect(got.map((b) => Buffer.from(b).toString('hex'))).toEqual(batches.map((b) => Buffer.from(b).toString('hex')));
      got.forEach((b) => decodeBatch(b));
    }),
    propertyRun('telemetry.test.ts:229', 60),
  );
});

test('splitter refuses a bad header as soon as it is complete, and a stream ending mid-batch', async () => {
  const s = new BatchSplitter();
  const bad = encodeBatch({ records: [{ seq: 1n }] });
  bad[4] = 9;
  expect(s.push(bad.subarray(0, 311))).toEqual([]);
  expect(codeOf(() => s.push(bad.subarray(311, 312)))).toBe('telemetry_version');

  const good = encodeBatch({ records: [{ seq: 1n }] });
  const run = async () => {
    for await (const _ of splitBatches([good, good.subarray(0, 400)])) void _;
  };
  await expect(run()).rejects.toMatchObject({ code: 'telemetry_stream_truncated' });
});

test('encodeBatch refuses values that do not fit', () => {
  expect(codeOf(() => encodeBatch({ records: [{ armed: -1 }] }))).toBe('telemetry_encode_range');
  expect(codeOf(() => encodeBatch({ header: { machine_sha256: 'abc' } }))).toBe('telemetry_encode_range');
});

test('the generated record decoder reads every field exactly as the table walk does (random bytes, signed and unsigned edges)', () => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: RECORD_BYTES, maxLength: RECORD_BYTES }), fc.constantFrom(0, 0xff, -1), (bytes, fill) => {
      if (fill >= 0) bytes.fill(fill, 0, 64);
      const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const want = decodeStruct(dv, 0, RECORD_FIELDS);
      want.ax = Array.from({ length: AXIS_SLOTS }, (_, a) => decodeStruct(dv, 272 + a * AXIS_BYTES, AXIS_FIELDS));
      expect(decodeRecord(bytes)).toEqual(want);
    }),
    propertyRun('telemetry.generated_decoder', 50),
  );
  expect(() => compileStructDecoder([[0, 'u128' as never, 'x']])).toThrow(/bad field spec/);
});

test('decodeBatchYielding: the same batch as decodeBatch, the same refusal, and the event loop gets turns on a large batch', async () => {
  const n = YIELD_EVERY_RECORDS * 3 + 5;
  const records = Array.from({ length: n }, (_, i) => ({ seq: 100n + BigInt(i), t_ns: 1_000n + BigInt(i), ax: [{ position: i }, { position: -i }] }));
  const bytes = encodeBatch({ header: { axis_count: 2, first_sequence: 100n, last_sequence: 100n + BigInt(n - 1) }, records });
  // A chain of immediates: each link runs only when the decoder gives the event loop a turn.
  let turns = 0;
  let done = false;
  const tick = () => {
    turns++;
    if (!done) setImmediate(tick);
  };
  setImmediate(tick);
  const yielded = await decodeBatchYielding(bytes);
  done = true;
  expect(yielded).toEqual(decodeBatch(bytes));
  expect(yielded.records).toHaveLength(n);
  // Three turns at least (one per YIELD_EVERY_RECORDS records); decodeBatch alone would give none.
  expect(turns).toBeGreaterThanOrEqual(3);
  // A record with data in an unused axis slot: refused alike, with the same code.
  const bad = bytes.slice();
  bad[HEADER_BYTES + (n - 1) * RECORD_BYTES + RECORD_BYTES - 1] = 1;
  expect(codeOf(() => decodeBatch(bad))).toBe('telemetry_unused_axis_nonzero');
  await expect(decodeBatchYielding(bad)).rejects.toMatchObject({ code: 'telemetry_unused_axis_nonzero' });
});
