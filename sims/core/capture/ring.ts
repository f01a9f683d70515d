// The capture ring's shared buffer and its writer side (see layout.ts for the seqlock protocol).

import { AXIS_SLOTS, AXIS_TABLE, type AxisFields, HEX32, MAX_RING_BYTES, MAX_RING_RECORDS, RECORD_BYTES, TWO32, RECORD_TABLE, type RecordFields, axisOffset, ringCapacity, slotBytes } from './layout.ts';
import { RecordViews, RecordWriter, writeChecked } from './writer.ts';

// ---------------------------------------------------------------------------------------------------
// Shared buffer layout: a 128-byte control block, then `capacity` slots of slotBytes(axisCount) bytes.
// Sequence s (1-based) lives in slot (s - 1) % capacity.

export const CTRL_BYTES = 128;
export const RING_MAGIC = 0x52504143; // 'CAPR'
export const RING_VERSION = 1;
// Int32 word indices.
export const W_MAGIC = 0;
export const W_VERSION = 1;
export const W_CAPACITY = 2;
export const W_AXES = 3;
export const W_STRIDE = 4;
export const W_RECORD_BYTES = 5;
export const W_G = 6; // seqlock generation: odd while a record is being written
export const W_WAITERS = 7; // readers blocked in Atomics.wait on W_G
export const W_NEWEST_LO = 8; // newest committed sequence, low 32 bits (written while G is odd)
export const W_NEWEST_HI = 9;
/**
 * Slots of the buffer any ring ever wrote (from slot 0), kept by a ring written into a reused buffer
 * (CaptureRingOptions.reuse) for the one after it: a slot past the last ring's newest may still hold an
 * earlier ring's record. Zero in a fresh buffer; not part of what a reader reads.
 */
export const W_TOUCHED = 10;
export const B_CYCLE_NS = 48; // u64
export const B_INCARNATION = 64; // 32 ASCII bytes (lowercase hex), the core's incarnation; zeros if none


export interface CaptureRingOptions {
  /** Active axes, 1..16; slots at or beyond it stay zero in every record. */
  axisCount: number;
  /** The core's cycle period (written to every batch header as cycle_period_ns). */
  cycleNs: number | bigint;
  /** Capacity from runtime.telemetry.retention_ms (ringCapacity). Ignored when `capacity` is given. */
  retentionMs?: number | bigint;
  /** Explicit capacity in records (tests, tools); still subject to the ceilings. */
  capacity?: number;
  /** The core's incarnation (32 lowercase hex), readable by the service as CaptureReader.daemonIncarnation. */
  incarnation?: string;
  /**
   * A buffer an earlier ring left behind that nobody reads or writes any more (sims/service/core-link.ts
   * keeps them): written again when its layout is this ring's (capacity, axes), so the records land in pages
   * the process already has instead of faulting in a fresh zero page every 1.3 records for the whole of the
   * retention. The new ring is indistinguishable from a fresh one to its readers: its control block is
   * written anew (sequences from 1, this incarnation), and a slot the earlier ring wrote is zeroed before
   * its first record here (`zeroThrough`). A buffer of another layout is ignored (a fresh one is made).
   */
  reuse?: SharedArrayBuffer;
}


export interface RingLayout {
  capacity: number;
  axisCount: number;
  stride: number;
  cycleNs: bigint;
  incarnation: string;
}

/** Validates a ring buffer's control block (either side) and returns its fixed layout. */
export function readLayout(buffer: SharedArrayBuffer): RingLayout {
  if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength < CTRL_BYTES) throw new TypeError('not a capture ring buffer');
  const ctl = new Int32Array(buffer, 0, CTRL_BYTES / 4);
  if (Atomics.load(ctl, W_MAGIC) !== RING_MAGIC || ctl[W_VERSION] !== RING_VERSION || ctl[W_RECORD_BYTES] !== RECORD_BYTES) {
    throw new TypeError('not a capture ring buffer (magic, version or record size)');
  }
  const capacity = ctl[W_CAPACITY]!;
  const axisCount = ctl[W_AXES]!;
  const stride = ctl[W_STRIDE]!;
  if (axisCount < 1 || axisCount > AXIS_SLOTS || capacity < 1 || stride !== slotBytes(axisCount) || buffer.byteLength !== CTRL_BYTES + capacity * stride) {
    throw new TypeError('capture ring buffer has an inconsistent size');
  }
  const inc = Buffer.from(buffer, B_INCARNATION, 32).toString('latin1');
  return { capacity, axisCount, stride, cycleNs: new DataView(buffer).getBigUint64(B_CYCLE_NS, true), incarnation: HEX32.test(inc) ? inc : '' };
}

/**
 * How many slots of a ring buffer, from slot 0, any ring has written: the last ring's newest record and
 * one it may have left open after it, or more where an earlier ring in the same buffer went further.
 */
export function touchedSlots(buffer: SharedArrayBuffer): number {
  const ctl = new Int32Array(buffer, 0, CTRL_BYTES / 4);
  const capacity = ctl[W_CAPACITY]!;
  const newest = (Atomics.load(ctl, W_NEWEST_HI) >>> 0) * TWO32 + (Atomics.load(ctl, W_NEWEST_LO) >>> 0);
  return Math.min(capacity, Math.max(ctl[W_TOUCHED]!, newest + 1));
}

/** Whether `buffer` is a capture ring buffer of `capacity` slots for `axisCount` axes (CaptureRingOptions.reuse). */
function reusable(buffer: SharedArrayBuffer, capacity: number, axisCount: number): boolean {
  try {
    const l = readLayout(buffer);
    return l.capacity === capacity && l.axisCount === axisCount;
  } catch {
    return false;
  }
}

/** The writer side; owned by the core's cycle (one writer per ring). */
export class CaptureRing {
  readonly buffer: SharedArrayBuffer;
  readonly capacity: number;
  readonly axisCount: number;
  /** Bytes of one slot (the record's used prefix). */
  readonly stride: number;
  readonly cycleNs: bigint;
  /** The reusable writer; `beginRecord` positions it on the next slot. */
  readonly writer: RecordWriter;
  private readonly ctl: Int32Array;
  private readonly bytes: Uint8Array;
  private readonly zeroSlot: Uint8Array;
  /**
   * Typed views over the whole buffer for the core's unchecked cycle record (record.ts); null on a
   * big-endian host, where the core writes through `writer` instead.
   */
  readonly views: RecordViews | null;
  /**
   * Every record ever begun on this buffer was begun with beginCycleRecord, and the buffer was new (all
   * zero). Then each slot holds zero or a record written by the same cycle writer, whose fields are
   * rewritten every time, so the slot needs no zeroing (capture.test.ts proves the bytes identical).
   */
  private cycleRecordsOnly: boolean;
  /**
   * A reused buffer (options.reuse): sequences up to this one land in slots an earlier ring in the buffer
   * may have written, whatever record it wrote there (touchedSlots), so those slots are zeroed before their
   * first record here; the slots after them are still zero. 0 on a fresh buffer.
   */
  private readonly zeroThrough: number = 0;
  private g = 0;
  private nextSeq = 1;
  private open = false;

  /**
   * A new ring (options), or the writer side of an existing ring's buffer (`{ buffer }`, for example a
   * ring the service allocated and passed to the core's worker). One writer per ring: attaching resumes
   * after the newest committed sequence; a record left open by a previous writer is restarted.
   */
  constructor(opts: CaptureRingOptions | { buffer: SharedArrayBuffer }) {
    if ('buffer' in opts) {
      const layout = readLayout(opts.buffer);
      this.buffer = opts.buffer;
      this.capacity = layout.capacity;
      this.axisCount = layout.axisCount;
      this.stride = layout.stride;
      this.cycleNs = layout.cycleNs;
      this.ctl = new Int32Array(this.buffer, 0, CTRL_BYTES / 4);
      this.bytes = new Uint8Array(this.buffer);
      this.g = Atomics.load(this.ctl, W_G);
      this.open = (this.g & 1) === 1;
      this.nextSeq = (Atomics.load(this.ctl, W_NEWEST_HI) >>> 0) * TWO32 + (Atomics.load(this.ctl, W_NEWEST_LO) >>> 0) + 1;
      this.writer = new RecordWriter(this.buffer, this.stride, this.axisCount);
      this.zeroSlot = new Uint8Array(this.stride);
      this.views = RecordViews.for(this.buffer);
      this.cycleRecordsOnly = false; // written by someone else before: contents unknown
      return;
    }
    const { axisCount } = opts;
    if (!Number.isInteger(axisCount) || axisCount < 1 || axisCount > AXIS_SLOTS) throw new RangeError(`axisCount ${axisCount} is outside 1..16`);
    const cycleNs = BigInt(opts.cycleNs);
    if (cycleNs <= 0n || cycleNs >= 1n << 64n) throw new RangeError(`cycleNs ${cycleNs} is not a positive u64`);
    let capacity: number;
    if (opts.capacity !== undefined) {
      if (!Number.isInteger(opts.capacity) || opts.capacity < 1) throw new RangeError(`capacity ${opts.capacity} must be a positive integer`);
      capacity = Math.min(opts.capacity, MAX_RING_RECORDS, Math.floor(MAX_RING_BYTES / slotBytes(axisCount)));
    } else if (opts.retentionMs !== undefined) {
      capacity = ringCapacity(opts.retentionMs, cycleNs, axisCount);
    } else {
      throw new RangeError('CaptureRing needs retentionMs or capacity');
    }
    if (opts.incarnation !== undefined && !HEX32.test(opts.incarnation)) throw new RangeError('incarnation must be 32 lowercase hex characters');

    this.axisCount = axisCount;
    this.capacity = capacity;
    this.stride = slotBytes(axisCount);
    this.cycleNs = cycleNs;
    const reused = opts.reuse !== undefined && reusable(opts.reuse, capacity, axisCount) ? opts.reuse : undefined;
    this.buffer = reused ?? new SharedArrayBuffer(CTRL_BYTES + capacity * this.stride);
    this.ctl = new Int32Array(this.buffer, 0, CTRL_BYTES / 4);
    this.bytes = new Uint8Array(this.buffer);
    if (reused) {
      // How far the earlier ring wrote (its newest sequence; every slot once it had gone round), then a
      // control block as a new buffer has it: all zero, the magic last (below).
      this.zeroThrough = touchedSlots(this.buffer);
      Atomics.store(this.ctl, W_MAGIC, 0);
      this.bytes.fill(0, 4, CTRL_BYTES);
      this.ctl[W_TOUCHED] = this.zeroThrough;
    }
    const dv = new DataView(this.buffer);
    this.ctl[W_VERSION] = RING_VERSION;
    this.ctl[W_CAPACITY] = capacity;
    this.ctl[W_AXES] = axisCount;
    this.ctl[W_STRIDE] = this.stride;
    this.ctl[W_RECORD_BYTES] = RECORD_BYTES;
    dv.setBigUint64(B_CYCLE_NS, cycleNs, true);
    if (opts.incarnation !== undefined) this.bytes.set(Buffer.from(opts.incarnation, 'latin1'), B_INCARNATION);
    Atomics.store(this.ctl, W_MAGIC, RING_MAGIC); // last: a reader never sees a half-initialised block
    this.writer = new RecordWriter(this.buffer, this.stride, axisCount);
    this.zeroSlot = new Uint8Array(this.stride);
    this.views = RecordViews.for(this.buffer);
    this.cycleRecordsOnly = true;
  }

  /** Newest committed sequence (0 before the first commit). */
  get newest(): number {
    return this.nextSeq - 1;
  }

  /** Sequence the next beginRecord writes. */
  get next(): number {
    return this.nextSeq;
  }

  /**
   * Starts the record with the next sequence and returns the (reused) writer positioned on its slot.
   * The slot is zeroed, then `seq` and `axes` (= axisCount) are filled in; every other field is 0 until
   * set. `seq`, when given, must be the next sequence. Called again before commit, it restarts the
   * same record from zero (a cycle that threw half-way loses nothing else). Allocates nothing.
   */
  beginRecord(seq?: number | bigint): RecordWriter {
    if (seq !== undefined && Number(seq) !== this.nextSeq) {
      throw new RangeError(`beginRecord(${seq}): the next sequence is ${this.nextSeq}`);
    }
    this.cycleRecordsOnly = false;
    const base = this.openSlot(true);
    const w = this.writer;
    const s = this.nextSeq;
    const lo = s >>> 0;
    w.view.setUint32(base + 8, lo, true);
    w.view.setUint32(base + 12, (s - lo) / TWO32, true);
    w.view.setUint32(base + 32, this.axisCount, true);
    return w;
  }

  /**
   * The core's per-cycle begin (record.ts only): opens the next record like beginRecord, writes `seq` and
   * `axes`, and returns the byte offset of its slot in `buffer` for writes through `views`. The caller
   * must write the same set of fields in every record it begins this way (fields it does not write stay
   * zero): on a ring that has only ever held such records the slot is not zeroed first, because every
   * byte the caller wrote into it last time is written again. Needs `views` (a little-endian host).
   */
  beginCycleRecord(): number {
    const base = this.openSlot(!this.cycleRecordsOnly || this.nextSeq <= this.zeroThrough);
    const v = this.views!;
    const s = this.nextSeq;
    const lo = s >>> 0;
    const w = base >> 2;
    v.u32[w + 2] = lo;
    v.u32[w + 3] = (s - lo) / TWO32;
    v.u32[w + 8] = this.axisCount;
    return base;
  }

  /** Marks the next record open (seqlock odd), positions the writer on its slot, zeroes it if asked. */
  private openSlot(zero: boolean): number {
    if (!this.open) {
      this.g = (this.g + 1) | 0;
      Atomics.store(this.ctl, W_G, this.g); // odd: the slot of sequence next - capacity is being overwritten
      this.open = true;
    }
    const s = this.nextSeq;
    const base = CTRL_BYTES + ((s - 1) % this.capacity) * this.stride;
    // Copying a zero template is ~5x faster than fill(0) on shared memory (V8 fills those byte by byte).
    if (zero) this.bytes.set(this.zeroSlot, base);
    this.writer.position(base, s);
    return base;
  }

  /** Publishes the open record; returns its sequence. Allocates nothing. */
  commit(): number {
    if (!this.open) throw new Error('commit without beginRecord');
    const s = this.nextSeq;
    this.writer.close();
    const lo = s >>> 0;
    Atomics.store(this.ctl, W_NEWEST_LO, lo | 0);
    Atomics.store(this.ctl, W_NEWEST_HI, (s - lo) / TWO32);
    this.g = (this.g + 1) | 0;
    Atomics.store(this.ctl, W_G, this.g); // even: consistent again
    this.open = false;
    this.nextSeq = s + 1;
    if (Atomics.load(this.ctl, W_WAITERS) !== 0) Atomics.notify(this.ctl, W_G);
    return s;
  }

  /**
   * Table-driven write of one whole record (begin, fields, commit); range-checks every value. For
   * tests and tools: it allocates, the cycle uses beginRecord + RecordWriter setters + commit.
   * `fields.seq`, if present, must be the next sequence; `fields.axes` defaults to axisCount.
   */
  writeRecord(fields: Partial<RecordFields>, axes: readonly Partial<AxisFields>[] = []): number {
    if (axes.length > this.axisCount) throw new RangeError(`${axes.length} axis entries for a ${this.axisCount}-axis ring`);
    if (fields.seq !== undefined && Number(fields.seq) !== this.nextSeq) {
      throw new RangeError(`seq ${fields.seq}: the next sequence is ${this.nextSeq}`);
    }
    const values = fields as Record<string, unknown>;
    // Pass 1 checks every value with no record open (a refused record never leaves the header torn);
    // pass 2 writes.
    for (const w of [null, this.writer]) {
      if (w !== null) this.beginRecord();
      for (const f of RECORD_TABLE) if (f[0] !== 'seq') writeChecked(w, 0, f, values[f[0]]);
      axes.forEach((axis, i) => {
        const a = axis as Record<string, unknown>;
        const base = axisOffset(i);
        for (const f of AXIS_TABLE) writeChecked(w, base, f, a[f[0]]);
      });
    }
    return this.commit();
  }
}

