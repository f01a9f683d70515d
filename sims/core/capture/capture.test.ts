// The capture ring against the independent oracle (harness/oracle/telemetry.ts): every field written by
// the ring decodes to the same value there, batches pass the oracle's header, length, unused-axis and
// sequence checks, and the cursor rules of document 1 part 4 hold (checkBatchCursor).

import { test, expect } from 'vitest';
import fc from 'fast-check';
import { Worker } from 'node:worker_threads';
import { ProcessImage } from '../../../drivers/bus.ts';
import { decodeStatusword } from '../../../drivers/ds402.ts';
import * as oracle from '../../../harness/oracle/telemetry.ts';
import { AX, AXIS_BYTES, AXIS_TABLE, HEADER_BYTES, MAX_RING_RECORDS, REC, RECORD_BYTES, RECORD_LAYOUT_DIGEST, RECORD_LAYOUT_TEXT, RECORD_TABLE, TORN_SAMPLE_LIMIT, axisOffset, encodeBatchHeader, ringCapacity, type AxisFields, type RecordFields } from './layout.ts';
import { CaptureCursorError, CaptureReader, type BatchIdentity } from './reader.ts';
import { CaptureRing } from './ring.ts';
import { writeProcessImage, type RecordWriter } from './writer.ts';

const ID: Required<BatchIdentity> = {
  adapter_incarnation: '0123456789abcdef0123456789abcdef',
  daemon_incarnation: 'fedcba9876543210fedcba9876543210',
  machine_sha256: 'a'.repeat(64),
  deployment_sha256: '0f'.repeat(32),
};

type OracleRecord = oracle.CycleCaptureRecordV2;
type Spec = readonly [number, string, string];

/** Reads a batch through the reader and decodes it with the oracle; checks the cursor rule. */
function fetch(reader: CaptureReader, after: bigint, max = 4096): oracle.TelemetryBatch {
  const bytes = reader.readBatch(after, max, ID);
  if (bytes === 'busy') throw new Error('unexpected busy');
  const batch = oracle.decodeBatch(bytes);
  expect(oracle.checkBatchCursor(batch.header, after)).toBe(batch.header.last_sequence);
  return batch;
}

// ---------------------------------------------------------------------------------------------------

test('sizes and the record layout digest equal the oracle and docs/profile.md', () => {
  expect([RECORD_BYTES, AXIS_BYTES, HEADER_BYTES]).toEqual([5392, 320, 312]);
  expect(RECORD_LAYOUT_TEXT).toBe(oracle.RECORD_LAYOUT_TEXT);
  expect(RECORD_LAYOUT_DIGEST).toBe(oracle.RECORD_LAYOUT_DIGEST);
  expect(RECORD_LAYOUT_DIGEST).toBe('a24253770e5545112b9d373e7adbcc76766f21609b707fcd660de564f02a119d');
  expect(RECORD_LAYOUT_TEXT.split('\n').length - 1).toBe(122);
  expect(Buffer.byteLength(RECORD_LAYOUT_TEXT)).toBe(3154);
  // Field by field (a clearer failure than a digest difference).
  expect(RECORD_TABLE.map(([n, t, o]) => [o, t, n])).toEqual(oracle.RECORD_FIELDS.map((f) => [...f]));
  expect(AXIS_TABLE.map(([n, t, o]) => [o, t, n])).toEqual(oracle.AXIS_FIELDS.map((f) => [...f]));
  expect(REC.t_ns).toBe(0);
  expect(REC.io_reason).toBe(268);
  expect(AX.position).toBe(0);
  expect(AX.audit_coherence_error_counts).toBe(312);
  expect(axisOffset(15) + AXIS_BYTES).toBe(RECORD_BYTES);
});

// ---------------------------------------------------------------------------------------------------
// Value generators from the oracle's own field types (not from the ring's tables).

function arbFor(type: string): fc.Arbitrary<unknown> {
  switch (type) {
    case 'u8': return fc.integer({ min: 0, max: 0xff });
    case 'i8': return fc.integer({ min: -0x80, max: 0x7f });
    case 'u16': return fc.integer({ min: 0, max: 0xffff });
    case 'i16': return fc.integer({ min: -0x8000, max: 0x7fff });
    case 'u32': return fc.integer({ min: 0, max: 0xffffffff });
    case 'i32': return fc.integer({ min: -0x80000000, max: 0x7fffffff });
    case 'u64': return fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
    case 'i64': return fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n });
    case 'u8[16]': return fc.array(arbFor('u8') as fc.Arbitrary<number>, { minLength: 0, maxLength: 16 });
    case 'i32[16]': return fc.array(arbFor('i32') as fc.Arbitrary<number>, { minLength: 0, maxLength: 16 });
    default: throw new Error(type);
  }
}

function arbStruct(fields: readonly Spec[], skip: readonly string[] = []): fc.Arbitrary<Record<string, unknown>> {
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [, type, name] of fields) if (!skip.includes(name)) model[name] = arbFor(type);
  return fc.record(model);
}

const ZERO = (type: string): unknown => (type === 'u64' || type === 'i64' ? 0n : type.endsWith('[16]') ? [] : 0);
const pad16 = (v: unknown): number[] => [...(v as number[]), ...Array<number>(16).fill(0)].slice(0, 16);

function expectStruct(actual: Record<string, unknown>, written: Record<string, unknown>, fields: readonly Spec[], where: string): void {
  for (const [, type, name] of fields) {
    const want = written[name] ?? ZERO(type);
    const got = actual[name];
    if (type.endsWith('[16]')) expect(got, `${where}.${name}`).toEqual(pad16(want));
    else expect(got, `${where}.${name}`).toBe(want);
  }
}

function expectAxisZero(rec: OracleRecord, from: number): void {
  for (let a = from; a < 16; a++) {
    const ax = rec.ax[a] as unknown as Record<string, unknown>;
    expectStruct(ax, {}, oracle.AXIS_FIELDS, `ax[${a}]`);
  }
}

test('property: every record and axis field written with writeRecord round-trips through the oracle', () => {
  const arbCase = fc.integer({ min: 1, max: 16 }).chain((axisCount) =>
    fc.record({
      axisCount: fc.constant(axisCount),
      records: fc.array(
        fc.record({
          fields: arbStruct(oracle.RECORD_FIELDS, ['seq']),
          axes: fc.array(arbStruct(oracle.AXIS_FIELDS), { minLength: 0, maxLength: axisCount }),
        }),
        { minLength: 1, maxLength: 4 },
      ),
    }),
  );
  fc.assert(
    fc.property(arbCase, ({ axisCount, records }) => {
      const ring = new CaptureRing({ axisCount, cycleNs: 1_000_000n, capacity: 8, incarnation: ID.daemon_incarnation });
      const reader = new CaptureReader(ring.buffer);
      records.forEach((r, k) => {
        expect(ring.writeRecord(r.fields as Partial<RecordFields>, r.axes as Partial<AxisFields>[])).toBe(k + 1);
      });
      const batch = fetch(reader, 0n);
      expect(batch.header.axis_count).toBe(axisCount);
      expect(batch.header.record_count).toBe(records.length);
      batch.records.forEach((rec, k) => {
        const written = records[k]!;
        expect(rec.seq).toBe(BigInt(k + 1));
        expectStruct(rec as unknown as Record<string, unknown>, { ...written.fields, seq: BigInt(k + 1) }, oracle.RECORD_FIELDS, `record ${k}`);
        for (let a = 0; a < axisCount; a++) {
          expectStruct(rec.ax[a] as unknown as Record<string, unknown>, written.axes[a] ?? {}, oracle.AXIS_FIELDS, `record ${k} ax[${a}]`);
        }
        expectAxisZero(rec, axisCount);
      });
    }),
    { numRuns: 60 },
  );
});

/** A distinct, full-width value per field index, with the sign bit set on signed types. */
function distinctive(type: string, k: number): unknown {
  const b = BigInt(k + 1);
  switch (type) {
    case 'u8': return 0x80 | (k & 0x7f);
    case 'i8': return -((k % 127) + 1);
    case 'u16': return 0x8000 | ((k * 37) & 0x7fff);
    case 'i16': return -(((k * 37) % 0x7fff) + 1);
    case 'u32': return (0x80000000 | ((k * 0x010203) & 0x7fffffff)) >>> 0;
    case 'i32': return -(((k * 0x010203) % 0x7fffffff) + 1);
    case 'u64': return (1n << 63n) | BigInt.asUintN(63, b * 0x0102030405060708n);
    case 'i64': return -BigInt.asUintN(62, b * 0x0102030405060708n) - 1n;
    case 'u8[16]': return Array.from({ length: 16 }, (_, j) => (k * 16 + j * 7 + 1) & 0xff);
    case 'i32[16]': return Array.from({ length: 16 }, (_, j) => (j % 2 ? -1 : 1) * (k * 1000 + j * 65537 + 1));
    default: throw new Error(type);
  }
}

/** The zero-allocation path: typed setters at REC / AX offsets. */
function setWithWriter(w: RecordWriter, base: number, type: string, off: number, v: unknown): void {
  switch (type) {
    case 'u8': return w.u8(base + off, v as number);
    case 'i8': return w.i8(base + off, v as number);
    case 'u16': return w.u16(base + off, v as number);
    case 'i16': return w.i16(base + off, v as number);
    case 'u32': return w.u32(base + off, v as number);
    case 'i32': return w.i32(base + off, v as number);
    case 'u64': return w.u64(base + off, v as bigint);
    case 'i64': return w.i64(base + off, v as bigint);
    case 'u8[16]': return (v as number[]).forEach((x, j) => w.u8At(base + off, j, x));
    case 'i32[16]': return (v as number[]).forEach((x, j) => w.i32At(base + off, j, x));
  }
}

test('RecordWriter setters put every field at its documented offset (distinct values, nine axes)', () => {
  const ring = new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, retentionMs: 100, incarnation: ID.daemon_incarnation });
  expect(ring.capacity).toBe(100);
  const reader = new CaptureReader(ring.buffer);
  const expectedRecords: Array<{ rec: Record<string, unknown>; ax: Record<string, unknown>[] }> = [];
  for (let r = 0; r < 3; r++) {
    const w = ring.beginRecord(r + 1);
    const rec: Record<string, unknown> = {};
    RECORD_TABLE.forEach(([name, type, off], k) => {
      if (name === 'seq') return;
      const v = distinctive(type, k + r * 200);
      rec[name] = v;
      setWithWriter(w, 0, type, off, v);
    });
    rec.seq = BigInt(r + 1);
    const ax: Record<string, unknown>[] = [];
    for (let a = 0; a < 9; a++) {
      const vals: Record<string, unknown> = {};
      AXIS_TABLE.forEach(([name, type, off], k) => {
        const v = distinctive(type, 60 + k + a * 70 + r * 1000);
        vals[name] = v;
        setWithWriter(w, w.axis(a), type, off, v);
      });
      ax.push(vals);
    }
    expect(ring.commit()).toBe(r + 1);
    expectedRecords.push({ rec, ax });
  }
  const batch = fetch(reader, 0n);
  expect(batch.header).toMatchObject({
    magic: 0x31425452, version: 1, header_bytes: 312, record_bytes: 5392, reserved: 0,
    ...ID, record_layout_digest: oracle.RECORD_LAYOUT_DIGEST,
    cycle_period_ns: 1_000_000n, first_sequence: 1n, last_sequence: 3n, dropped: 0n, axis_count: 9, record_count: 3,
  });
  batch.records.forEach((got, r) => {
    expectStruct(got as unknown as Record<string, unknown>, expectedRecords[r]!.rec, oracle.RECORD_FIELDS, `record ${r}`);
    for (let a = 0; a < 9; a++) expectStruct(got.ax[a] as unknown as Record<string, unknown>, expectedRecords[r]!.ax[a]!, oracle.AXIS_FIELDS, `record ${r} ax[${a}]`);
    expectAxisZero(got, 9);
  });
});

test('number setters: u64n and i64n agree with the bigint setters', () => {
  const ring = new CaptureRing({ axisCount: 1, cycleNs: 4_000_000n, capacity: 4, incarnation: ID.daemon_incarnation });
  const cases = [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, -1, -(2 ** 32), -(2 ** 53) + 1];
  for (const v of cases) {
    const w = ring.beginRecord();
    if (v >= 0) w.u64n(REC.t_ns, v);
    w.i64n(REC.cycle_jitter_ns, v);
    w.i64n(w.axis(0) + AX.coordinate_counts, v);
    ring.commit();
  }
  const batch = fetch(new CaptureReader(ring.buffer), 4n);
  batch.records.forEach((rec, k) => {
    const v = cases[k + 4]!;
    expect(rec.t_ns).toBe(v >= 0 ? BigInt(v) : 0n);
    expect(rec.cycle_jitter_ns).toBe(BigInt(v));
    expect(rec.ax[0]!.coordinate_counts).toBe(BigInt(v));
  });
});

test('ring defaults: seq and axes filled in, slot zeroed on reuse, beginRecord again restarts the record', () => {
  const ring = new CaptureRing({ axisCount: 3, cycleNs: 1_000_000n, capacity: 2, incarnation: ID.daemon_incarnation });
  const reader = new CaptureReader(ring.buffer);
  ring.writeRecord({ t_ns: 11n, armed: 1 }, [{ position: -5, absolute_valid: [1, 1] }, {}, { target: 9 }]);
  ring.writeRecord({ t_ns: 12n }, []);
  // Third record reuses the first slot: nothing of record 1 may survive.
  let w = ring.beginRecord(3);
  w.u32(REC.state, 77);
  w = ring.beginRecord(3); // restart (e.g. the cycle threw half-way)
  w.u64(REC.t_ns, 13n);
  ring.commit();
  const batch = fetch(reader, 0n);
  expect(batch.header.dropped).toBe(1n);
  const [r2, r3] = batch.records;
  expect(r2!.seq).toBe(2n);
  expect(r2!.axes).toBe(3);
  expect(r3!.seq).toBe(3n);
  expect(r3!.t_ns).toBe(13n);
  expect(r3!.state).toBe(0);
  expect(r3!.armed).toBe(0);
  expect(r3!.ax[0]!.position).toBe(0);
  expect(r3!.ax[0]!.absolute_valid).toEqual(Array(16).fill(0));
  expect(r3!.ax[2]!.target).toBe(0);
  expect(() => ring.beginRecord(7)).toThrow(RangeError);
});

test('writer guards: axis slots beyond axisCount, writes with no record open, out-of-range values', () => {
  const ring = new CaptureRing({ axisCount: 2, cycleNs: 1_000_000n, capacity: 4 });
  const w = ring.writer;
  expect(() => w.u32(REC.armed, 1)).toThrow(/no record is open/);
  ring.beginRecord();
  expect(() => w.axis(2)).toThrow(RangeError);
  expect(() => w.axis(-1)).toThrow(RangeError);
  expect(() => w.u32(axisOffset(2) + AX.di_bits, 1)).toThrow(/outside/);
  expect(() => w.u64(ring.stride - 4, 1n)).toThrow(/outside/);
  ring.commit();
  expect(() => ring.commit()).toThrow();
  expect(() => ring.writeRecord({ armed: 2 ** 32 })).toThrow(RangeError);
  expect(() => ring.writeRecord({ cycle_jitter_ns: 1 as unknown as bigint })).toThrow(RangeError);
  expect(() => ring.writeRecord({}, [{}, {}, {}])).toThrow(RangeError);
  expect(() => ring.writeRecord({ seq: 9n })).toThrow(RangeError);
  // Refused records consumed no sequence and left no torn header behind.
  const reader = new CaptureReader(ring.buffer, { tornWaitMs: 0 });
  expect(reader.newestSequence()).toBe(1n);
  expect(ring.writeRecord({ seq: 2n, armed: 1 })).toBe(2);
  expect(() => new CaptureRing({ axisCount: 0, cycleNs: 1n, capacity: 1 })).toThrow(RangeError);
  expect(() => new CaptureRing({ axisCount: 17, cycleNs: 1n, capacity: 1 })).toThrow(RangeError);
});

test('attaching a writer to an existing ring resumes its sequences; an open record is restarted', () => {
  const ring = new CaptureRing({ axisCount: 2, cycleNs: 1_000_000n, capacity: 4, incarnation: ID.daemon_incarnation });
  ring.writeRecord({ t_ns: 1n });
  ring.writeRecord({ t_ns: 2n });
  ring.beginRecord().u32(REC.state, 99); // the previous writer stops inside record 3
  const again = new CaptureRing({ buffer: ring.buffer });
  expect([again.capacity, again.axisCount, again.cycleNs, again.next]).toEqual([4, 2, 1_000_000n, 3]);
  expect(new CaptureReader(ring.buffer, { tornWaitMs: 0 }).read(0n)).toBe('busy');
  again.beginRecord(3).u64(REC.t_ns, 3n);
  expect(again.commit()).toBe(3);
  const b = fetch(new CaptureReader(ring.buffer), 0n);
  expect(b.records.map((r) => [r.seq, r.t_ns, r.state])).toEqual([[1n, 1n, 0], [2n, 2n, 0], [3n, 3n, 0]]);
  expect(() => new CaptureRing({ buffer: new SharedArrayBuffer(64) })).toThrow(TypeError);
});

// ---------------------------------------------------------------------------------------------------
// Cursor rules (document 1 part 4).

function writeN(ring: CaptureRing, n: number): void {
  for (let k = 0; k < n; k++) {
    const w = ring.beginRecord();
    w.u64n(REC.t_ns, 1000 + w.seq);
    ring.commit();
  }
}

test('empty ring: an empty batch with first 0, last after + dropped; any later cursor is ahead', () => {
  const ring = new CaptureRing({ axisCount: 1, cycleNs: 1_000_000n, capacity: 4, incarnation: ID.daemon_incarnation });
  const reader = new CaptureReader(ring.buffer);
  const batch = fetch(reader, 0n);
  expect(batch.header).toMatchObject({ first_sequence: 0n, last_sequence: 0n, dropped: 0n, record_count: 0 });
  expect(batch.records).toEqual([]);
  const raw = reader.readBatch(0n, 10, ID) as Uint8Array;
  expect(raw.length).toBe(HEADER_BYTES);
  expect(reader.read(0n)).toMatchObject({ first: 0n, last: 0n, dropped: 0n, count: 0 });
  expect(() => reader.read(1n)).toThrow(CaptureCursorError);
  try {
    reader.read(1n);
  } catch (e) {
    expect((e as CaptureCursorError).code).toBe('telemetry_cursor_ahead');
  }
});

test('wrap-around: overwritten history is reported in dropped, batches start at after + dropped + 1', () => {
  const ring = new CaptureRing({ axisCount: 2, cycleNs: 1_000_000n, capacity: 5, incarnation: ID.daemon_incarnation });
  const reader = new CaptureReader(ring.buffer);
  writeN(ring, 12); // sequences 1..12, ring keeps 8..12
  const seqs = (b: oracle.TelemetryBatch) => b.records.map((r) => Number(r.seq));
  let b = fetch(reader, 0n);
  expect(b.header).toMatchObject({ first_sequence: 8n, last_sequence: 12n, dropped: 7n, record_count: 5 });
  expect(seqs(b)).toEqual([8, 9, 10, 11, 12]);
  expect(b.records.map((r) => r.t_ns)).toEqual([1008n, 1009n, 1010n, 1011n, 1012n]);
  b = fetch(reader, 3n);
  expect(b.header).toMatchObject({ first_sequence: 8n, dropped: 4n });
  b = fetch(reader, 7n);
  expect(b.header).toMatchObject({ first_sequence: 8n, dropped: 0n });
  b = fetch(reader, 9n);
  expect(b.header).toMatchObject({ first_sequence: 10n, last_sequence: 12n, dropped: 0n });
  b = fetch(reader, 0n, 2);
  expect(b.header).toMatchObject({ first_sequence: 8n, last_sequence: 9n, dropped: 7n, record_count: 2 });
  b = fetch(reader, b.header.last_sequence, 2);
  expect(seqs(b)).toEqual([10, 11]);
  b = fetch(reader, 12n);
  expect(b.header).toMatchObject({ first_sequence: 0n, last_sequence: 12n, dropped: 0n, record_count: 0 });
  expect(() => reader.read(13n)).toThrow(/telemetry_cursor_ahead/);
  expect(() => reader.read(-1n)).toThrow(/invalid_telemetry_cursor/);
  expect(() => reader.read(1n << 64n)).toThrow(/invalid_telemetry_cursor/);
  expect(() => reader.read(0n, 0)).toThrow(RangeError);
});

test('property: cursor semantics match the model for any capacity, write count, cursor and max', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 12 }),
      fc.integer({ min: 0, max: 40 }),
      fc.integer({ min: 1, max: 15 }),
      fc.nat(),
      (capacity, written, max, afterSeed) => {
        const ring = new CaptureRing({ axisCount: 1, cycleNs: 1_000_000n, capacity, incarnation: ID.daemon_incarnation });
        const reader = new CaptureReader(ring.buffer);
        writeN(ring, written);
        const after = afterSeed % (written + 1);
        const oldest = Math.max(1, written - capacity + 1);
        const first = Math.max(after + 1, oldest);
        const count = Math.max(0, Math.min(written - first + 1, max));
        const b = fetch(reader, BigInt(after), max);
        expect(b.header.dropped).toBe(BigInt(first - after - 1));
        expect(b.header.record_count).toBe(count);
        expect(b.header.first_sequence).toBe(count ? BigInt(first) : 0n);
        expect(b.header.last_sequence).toBe(count ? BigInt(first + count - 1) : BigInt(after) + b.header.dropped);
        b.records.forEach((r, k) => expect(r.t_ns).toBe(BigInt(1000 + first + k)));
        // read() + encodeBatchHeader give the same bytes as readBatch().
        const r = reader.read(BigInt(after), max);
        if (r === 'busy') throw new Error('busy');
        const header = encodeBatchHeader({ ...ID, cycle_period_ns: 1_000_000n, first_sequence: r.first, last_sequence: r.last, dropped: r.dropped, axis_count: 1, record_count: r.count });
        const joined = Buffer.concat([header, r.records]);
        expect(joined.equals(reader.readBatch(BigInt(after), max, ID) as Uint8Array)).toBe(true);
        const decoded = oracle.decodeBatch(joined);
        oracle.checkBatchSequences(decoded.header, decoded.records);
        expect(() => reader.read(BigInt(written + 1))).toThrow(CaptureCursorError);
      },
    ),
    { numRuns: 300 },
  );
});

test('batch size is bounded by 4096 records and by the ring capacity', () => {
  const ring = new CaptureRing({ axisCount: 1, cycleNs: 250_000n, capacity: 5000 });
  const reader = new CaptureReader(ring.buffer);
  writeN(ring, 5000);
  const r = reader.read(0n, 1_000_000);
  if (r === 'busy') throw new Error('busy');
  expect(r.count).toBe(4096);
  expect(r.records.length).toBe(4096 * RECORD_BYTES);
  expect([r.first, r.last, r.dropped]).toEqual([1n, 4096n, 0n]);
  const raw = reader.readBatch(0n, 1_000_000, ID) as Uint8Array;
  expect(raw.length).toBe(oracle.MAX_BATCH_BYTES);
});

// ---------------------------------------------------------------------------------------------------
// Torn reads.

test('a writer stuck mid-record: the header is torn for 16 samples and the read answers busy', () => {
  const ring = new CaptureRing({ axisCount: 1, cycleNs: 1_000_000n, capacity: 4, incarnation: ID.daemon_incarnation });
  writeN(ring, 2);
  const fast = new CaptureReader(ring.buffer, { tornWaitMs: 0 });
  const waiting = new CaptureReader(ring.buffer); // default: waits up to 0.1 ms per sample for the commit
  const w = ring.beginRecord(); // the writer is now inside record 3
  w.u32(REC.state, 5);
  expect(fast.read(0n)).toBe('busy');
  expect(fast.lastSamples).toBe(TORN_SAMPLE_LIMIT);
  expect(fast.readBatch(0n, 10, ID)).toBe('busy');
  expect(fast.newestSequence()).toBe('busy');
  const t0 = process.hrtime.bigint();
  expect(waiting.read(1n)).toBe('busy');
  expect(waiting.lastSamples).toBe(16);
  expect(process.hrtime.bigint() - t0).toBeGreaterThanOrEqual(1_000_000n); // 16 x 0.1 ms waited
  ring.commit();
  const r = fast.read(0n);
  if (r === 'busy') throw new Error('busy after commit');
  expect(fast.lastSamples).toBe(1);
  expect([r.first, r.last, r.count]).toEqual([1n, 3n, 3]);
  expect(fast.newestSequence()).toBe(3n);
});

test('a concurrent writer thread: every batch read while it writes is whole and follows the cursor rules', async () => {
  const capacity = 16;
  const ring = new CaptureRing({ axisCount: 4, cycleNs: 1_000_000n, capacity, incarnation: ID.daemon_incarnation });
  const reader = new CaptureReader(ring.buffer);
  // The worker attaches to the ring's buffer as its writer (same SharedArrayBuffer, real threads).
  const worker = new Worker(
    `
    const { workerData, parentPort } = require('node:worker_threads');
    (async () => {
      const { register } = await import('tsx/esm/api');
      register();
      const m = { ...(await import(workerData.url)), ...(await import(workerData.layout)) };
      const ring = new m.CaptureRing({ buffer: workerData.buffer });
      parentPort.postMessage('go');
      const end = Date.now() + workerData.ms;
      let n = 0;
      while (Date.now() < end) {
        const r = ring.beginRecord();
        const s = r.seq;
        r.u64n(m.REC.t_ns, s * 3);
        r.u64n(m.REC.cycle, s);
        for (let a = 0; a < 4; a++) {
          const b = r.axis(a);
          for (let off = 0; off < 320; off += 4) r.u32(b + off, (s * 16 + a * 4 + off) >>> 0);
        }
        ring.commit();
        n++;
      }
      parentPort.postMessage(n);
    })().catch((e) => parentPort.postMessage(String(e && e.stack || e)));
    `,
    { eval: true, workerData: { url: new URL('./ring.ts', import.meta.url).href, layout: new URL('./layout.ts', import.meta.url).href, buffer: ring.buffer, ms: 400 } },
  );
  const go = await new Promise<unknown>((resolve, reject) => (worker.once('message', resolve), worker.once('error', reject)));
  expect(go).toBe('go'); // the writer is attached (loading tsx in a worker takes a while)
  const done = new Promise<unknown>((resolve) => worker.once('message', resolve));
  let after = 0n;
  let ok = 0;
  let busy = 0;
  let finished: unknown;
  void done.then((v) => (finished = v));
  while (finished === undefined) {
    const bytes = reader.readBatch(after, capacity, ID);
    if (bytes === 'busy') {
      busy++;
    } else {
      const b = oracle.decodeBatch(bytes);
      after = oracle.checkBatchCursor(b.header, after);
      for (const rec of b.records) {
        const s = Number(rec.seq);
        expect(rec.t_ns).toBe(BigInt(s * 3));
        expect(rec.cycle).toBe(BigInt(s));
        for (let a = 0; a < 4; a++) expect(rec.ax[a]!.position).toBe((s * 16 + a * 4) | 0);
        expect(rec.ax[3]!.audit_coherence_error_counts).toBe(BigInt(((s * 16 + 12 + 312) >>> 0) + ((s * 16 + 12 + 316) >>> 0) * 2 ** 32));
      }
      if (b.records.length) ok++;
    }
    await new Promise((r) => setImmediate(r));
  }
  const written = await done;
  expect(typeof written).toBe('number');
  expect(ok).toBeGreaterThan(0);
  // The final state: everything up to the writer's last record accounted for exactly once.
  const last = fetch(reader, after);
  expect(last.header.last_sequence).toBe(BigInt(written as number));
  await worker.terminate();
  expect(busy).toBeLessThan(ok + busy); // busy is allowed, but not all the time
}, 20_000);

// ---------------------------------------------------------------------------------------------------

test('encodeBatchHeader writes the documented header and refuses malformed fields', () => {
  const h = encodeBatchHeader({ ...ID, cycle_period_ns: 2_000_000n, first_sequence: 5n, last_sequence: 6n, dropped: 4n, axis_count: 9, record_count: 2 });
  expect(h.length).toBe(312);
  expect(oracle.decodeBatchHeader(h)).toEqual({
    magic: 0x31425452, version: 1, header_bytes: 312, ...ID, record_layout_digest: oracle.RECORD_LAYOUT_DIGEST,
    cycle_period_ns: 2_000_000n, first_sequence: 5n, last_sequence: 6n, dropped: 4n, axis_count: 9, record_count: 2,
    record_bytes: 5392, reserved: 0,
  });
  const base = { ...ID, cycle_period_ns: 1n, first_sequence: 0n, last_sequence: 0n, dropped: 0n, axis_count: 1, record_count: 0 };
  expect(() => encodeBatchHeader({ ...base, adapter_incarnation: 'ABCDEF'.padEnd(32, '0') })).toThrow(RangeError);
  expect(() => encodeBatchHeader({ ...base, machine_sha256: 'sha256:' + 'a'.repeat(64) })).toThrow(RangeError);
  expect(() => encodeBatchHeader({ ...base, daemon_incarnation: '' })).toThrow(RangeError);
  expect(() => encodeBatchHeader({ ...base, axis_count: 17 })).toThrow(RangeError);
  expect(() => encodeBatchHeader({ ...base, record_count: 4097, first_sequence: 1n, last_sequence: 4097n })).toThrow(RangeError);
  expect(() => encodeBatchHeader({ ...base, first_sequence: 3n })).toThrow(RangeError);
  expect(() => encodeBatchHeader({ ...base, record_count: 2, first_sequence: 3n, last_sequence: 5n })).toThrow(RangeError);
  expect(() => encodeBatchHeader({ ...base, dropped: -1n })).toThrow(RangeError);
  // A producer with a different layout digest is refused by the reader, carrying both digests.
  const other = encodeBatchHeader({ ...base, record_layout_digest: 'b'.repeat(64) });
  expect(() => oracle.decodeBatchHeader(other)).toThrow(/telemetry_layout_mismatch/);
});

test('ring capacity: ceil(retention_ms * 1e6 / cycle_ns) with the documented ceilings', () => {
  expect(ringCapacity(100_000, 1_000_000n)).toBe(100_000);
  expect(ringCapacity(100, 3_000_000n)).toBe(34);
  expect(ringCapacity(100, 1_000_000_000n)).toBe(1);
  expect(ringCapacity(3_600_000, 1_000_000n, 9)).toBe(MAX_RING_RECORDS);
  expect(ringCapacity(3_600_000, 1_000_000n, 16)).toBe(Math.floor(2 ** 32 / RECORD_BYTES));
  expect(() => ringCapacity(0, 1n)).toThrow(RangeError);
  const ring = new CaptureRing({ axisCount: 2, cycleNs: 2_000_000n, retentionMs: 101 });
  expect(ring.capacity).toBe(51);
  expect(ring.buffer.byteLength).toBe(128 + 51 * (272 + 2 * 320));
  const reader = new CaptureReader(ring.buffer);
  expect([reader.capacity, reader.axisCount, reader.cycleNs, reader.daemonIncarnation]).toEqual([51, 2, 2_000_000n, '']);
  expect(() => new CaptureReader(new SharedArrayBuffer(256))).toThrow(TypeError);
});

test('writeProcessImage carries the bus side of the process image', () => {
  const img = new ProcessImage(2);
  img.positionActual.set([1234, -99]);
  img.targetPosition.set([1240, -100]);
  img.statusword.set([0x0237, 0x0008]);
  img.errorCode.set([0, 0x7500]);
  img.velocityActual.set([500, 0]);
  img.followingError.set([-6, 0]);
  img.torqueActual.set([-120, 0]);
  img.digitalInputs.set([0x10001, 0]);
  img.modeDisplay.set([8, 0]);
  img.pdoFresh.set([1, 0]);
  img.alState.set([8, 2]);
  img.online.set([1, 0]);
  img.wkcActual = 5;
  img.wkcExpected = 6;
  img.ioInputWord = 0xa5;
  img.ioOutputWord = 0x3c;
  img.ioInputValid = 1;
  const ring = new CaptureRing({ axisCount: 2, cycleNs: 1_000_000n, capacity: 2, incarnation: ID.daemon_incarnation });
  writeProcessImage(ring.beginRecord(), img);
  ring.commit();
  const [rec] = fetch(new CaptureReader(ring.buffer), 0n).records;
  expect(rec).toMatchObject({ pdo_fresh_axis_mask: 1, wkc_actual: 5, wkc_expected: 6, io_input_word: 0xa5, io_output_word: 0x3c, io_input_valid: 1 });
  expect(rec!.ax[0]).toMatchObject({
    position: 1234, target: 1240, statusword: 0x0237, error_code: 0, velocity_actual_counts_per_s: 500, velocity_actual_valid: 1,
    following_error_counts: -6, following_error_valid: 1, torque_raw: -120, torque_valid: 1, di_bits: 0x10001, di_valid: 1,
    mode_display: 8, ds402_state: decodeStatusword(0x0237), slave_al_state: 8, slave_online: 1, slave_operational: 1, pdo_fresh: 1,
  });
  expect(rec!.ax[1]).toMatchObject({
    position: -99, error_code: 0x7500, ds402_state: decodeStatusword(0x0008), velocity_actual_valid: 0, torque_valid: 0, di_valid: 0,
    slave_al_state: 2, slave_online: 0, slave_operational: 0, pdo_fresh: 0,
  });
});
