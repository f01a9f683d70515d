// The core's telemetry capture ring: document 1 part 2 "Telemetry binary records" (CycleCaptureRecordV2,
// CycleCaptureAxisV2, TelemetryBatchHeaderV1, little-endian) and part 4 "Observation endpoints" (cursor
// rules), with the record layout digest of docs/profile.md "Harness oracle / Telemetry".
//
// The ring lives in one SharedArrayBuffer: the core's worker writes one record per cycle through a
// reusable RecordWriter (no allocation per cycle), the service thread reads batches through a
// CaptureReader built from the same buffer. Consistency is a seqlock on the ring header:
//
//   writer  beginRecord: G := G + 1 (odd)  -> zero the slot, fill fields
//           commit:      NEWEST := seq; G := G + 1 (even); notify a waiting reader
//   reader  sample:      g1 := G (must be even), NEWEST, g2 := G (must equal g1)  -- else the header is torn
//           copy the slots, then g3 := G: every record begun since g1 may have overwritten the oldest
//           slots; copied records that were (possibly) overwritten are trimmed from the front of the batch
//           and counted in `dropped` (they are history lost after the cursor, which is what dropped means).
//
// A torn header sample is retried (waiting briefly for the writer's commit) up to 16 times, then the read
// answers 'busy' (document 1 part 7: telemetry_busy, "ring header torn after 16 samples").
//
// A slot holds only the record's first 272 + axisCount * 320 bytes (9 axes: 3152 of 5392); the reader
// copies each into a zeroed 5392-byte record, so unused axis slots are zero by construction.
//
// Sequences are 1, 2, 3 ... in commit order, contiguous, owned by the ring (the core's incarnation).
// The writer keeps them as JS numbers (exact up to 2^53: 285 000 years at 1 kHz); the reader's API uses
// bigint like the batch header.

import { createHash } from 'node:crypto';
import { AL, type ProcessImage } from '../../drivers/bus.ts';
import { decodeStatusword } from '../../drivers/ds402.ts';

// ---------------------------------------------------------------------------------------------------
// Documented sizes and constants.

export const RECORD_BYTES = 5392;
export const AXIS_BYTES = 320;
export const HEADER_BYTES = 312;
/** Offset of `ax` (16 CycleCaptureAxisV2 slots) in CycleCaptureRecordV2. */
export const AXIS_ARRAY_OFFSET = 272;
export const AXIS_SLOTS = 16;
export const BATCH_MAGIC = 0x31425452;
export const BATCH_VERSION = 1;
/** At most 4096 records per batch (document 1 part 2 / part 8). */
export const MAX_BATCH_RECORDS = 4096;
/** Read attempts before 'busy' (document 1 part 7: "ring header torn after 16 samples"). */
export const TORN_SAMPLE_LIMIT = 16;
/**
 * Ring capacity ceiling (profile decision). ceil(retention_ms * 1e6 / cycle_ns) can reach 3.6e6 records
 * (1 h at 1 ms), which at 16 axes would be 19 GB of shared memory. The ring holds at most 2^20 records
 * (about 17.5 min at 1 ms) and at most 4 GiB of slots, whichever is smaller.
 */
export const MAX_RING_RECORDS = 1 << 20;
export const MAX_RING_BYTES = 2 ** 32;

// ---------------------------------------------------------------------------------------------------
// Field tables, typed in from document 1 part 2 in documented offset order: [name, type, offset].

type Scalar = 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'u64' | 'i64';
type Arr = 'u8[16]' | 'i32[16]';
export type CaptureFieldType = Scalar | Arr;
type Field = readonly [name: string, type: CaptureFieldType, offset: number];

const BYTES: Readonly<Record<CaptureFieldType, number>> = {
  u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, u64: 8, i64: 8, 'u8[16]': 16, 'i32[16]': 64,
};

/** CycleCaptureRecordV2 before `ax`. */
export const RECORD_TABLE = [
  ['t_ns', 'u64', 0],
  ['seq', 'u64', 8],
  ['cycle', 'u64', 16],
  ['work_ns', 'u64', 24],
  ['axes', 'u32', 32],
  ['reserved', 'u32', 36],
  ['cycle_jitter_ns', 'i64', 40],
  ['active_traj_id', 'u64', 48],
  ['active_command_seq', 'u64', 56],
  ['jog_generation', 'u64', 64],
  ['app_grant_generation', 'u64', 72],
  ['control_generation', 'u64', 80],
  ['configuration_epoch', 'u64', 88],
  ['home_epoch', 'u64', 96],
  ['grant_deadline_host_ns', 'u64', 104],
  ['jog_input_deadline_host_ns', 'u64', 112],
  ['jog_source_sequence', 'u64', 120],
  ['bus_submission_return_code', 'i64', 128],
  ['armed', 'u32', 136],
  ['axis_enable_mask', 'u32', 140],
  ['active_mode', 'u32', 144],
  ['state', 'u32', 148],
  ['current_point_index', 'u32', 152],
  ['queue_depth', 'u32', 156],
  ['last_event_code', 'u32', 160],
  ['underrun_count', 'u32', 164],
  ['stale_command_flag', 'u32', 168],
  ['motion_done', 'u32', 172],
  ['capability_flags', 'u32', 176],
  ['jog_session_open', 'u32', 180],
  ['jog_has_input', 'u32', 184],
  ['jog_axis_mask', 'u32', 188],
  ['jog_ramping', 'u32', 192],
  ['grant_active', 'u32', 196],
  ['grant_axis_mask', 'u32', 200],
  ['safety_fault_mask', 'u32', 204],
  ['execution_fault_reasons', 'u32', 208],
  ['submitted_axis_mask', 'u32', 212],
  ['bus_submission_operation', 'u32', 216],
  ['pdo_fresh_axis_mask', 'u32', 220],
  ['config_verified_mask', 'u32', 224],
  ['home_valid_mask', 'u32', 228],
  ['service_mode_axis_mask', 'u32', 232],
  ['wkc_actual', 'u32', 236],
  ['wkc_expected', 'u32', 240],
  ['master_state', 'u32', 244],
  ['io_configured', 'u32', 248],
  ['io_input_word', 'u32', 252],
  ['io_output_word', 'u32', 256],
  ['io_input_valid', 'u32', 260],
  ['io_armed', 'u32', 264],
  ['io_reason', 'u32', 268],
] as const satisfies readonly Field[];

/** CycleCaptureAxisV2 (320 bytes). */
export const AXIS_TABLE = [
  ['position', 'i32', 0],
  ['target', 'i32', 4],
  ['statusword', 'u16', 8],
  ['error_code', 'u16', 10],
  ['manufacturer_error_code', 'u32', 12],
  ['absolute_value', 'i32[16]', 16],
  ['absolute_valid', 'u8[16]', 80],
  ['velocity_actual_counts_per_s', 'i32', 96],
  ['following_error_counts', 'i32', 100],
  ['velocity_actual_valid', 'u32', 104],
  ['following_error_valid', 'u32', 108],
  ['di_bits', 'u32', 112],
  ['di_valid', 'u32', 116],
  ['external_enable_active', 'u32', 120],
  ['external_enable_valid', 'u32', 124],
  ['coordinate_counts', 'i64', 128],
  ['coordinate_epoch', 'u64', 136],
  ['pdo_observed_time_ns', 'u64', 144],
  ['collision_peak_following_error_counts', 'u64', 152],
  ['collision_trip_count', 'u64', 160],
  ['collision_samples', 'u64', 168],
  ['collision_last_trip_peak_following_error_counts', 'u64', 176],
  ['absolute_source_counts', 'i32', 184],
  ['coordinate_reason', 'u32', 188],
  ['target_velocity_counts_per_s', 'i32', 192],
  ['collision_armed', 'u32', 196],
  ['collision_torque_cycles', 'u32', 200],
  ['collision_following_error_cycles', 'u32', 204],
  ['collision_peak_torque_raw', 'u32', 208],
  ['collision_last_trip_quantity', 'u32', 212],
  ['collision_trip_sustained_cycles', 'u32', 216],
  ['collision_last_trip_peak_torque_raw', 'u32', 220],
  ['brake_state', 'u32', 224],
  ['native_home_position_offset', 'i32', 228],
  ['native_home_last_abort_code', 'u32', 232],
  ['ext_position_error_counts', 'i32', 236],
  ['ext_multi_turn_lo', 'i32', 240],
  ['ext_multi_turn_hi', 'i32', 244],
  ['max_abs_velocity_actual_counts_per_s', 'u32', 248],
  ['max_abs_following_error_counts', 'u32', 252],
  ['torque_raw', 'i16', 256],
  ['ext_bus_voltage_raw', 'u16', 258],
  ['ext_load_rate_raw', 'u16', 260],
  ['ext_igbt_temp_raw', 'i16', 262],
  ['ext_motor_temp_raw', 'i16', 264],
  ['ext_drive_not_ready_bits', 'u16', 266],
  ['ext_motor_not_rotating_code', 'u16', 268],
  ['ext_valid_mask', 'u16', 270],
  ['mode_display', 'i8', 272],
  ['ds402_state', 'u8', 273],
  ['torque_valid', 'u8', 274],
  ['coordinate_valid', 'u8', 275],
  ['coordinate_source_valid', 'u8', 276],
  ['native_home_state', 'u8', 277],
  ['slave_al_state', 'u8', 278],
  ['slave_online', 'u8', 279],
  ['slave_operational', 'u8', 280],
  ['pdo_fresh', 'u8', 281],
  ['target_velocity_valid', 'u8', 282],
  ['ext_valid', 'u8', 283],
  ['calibration_valid', 'u8', 284],
  ['position_state', 'u8', 285],
  ['audit_reason', 'u16', 286],
  ['audit_last_verified_ns', 'u64', 288],
  ['audit_started_ns', 'u64', 296],
  ['audit_completed_ns', 'u64', 304],
  ['audit_coherence_error_counts', 'u64', 312],
] as const satisfies readonly Field[];

type RecordTable = typeof RECORD_TABLE;
type AxisTable = typeof AXIS_TABLE;
export type RecordFieldName = RecordTable[number][0];
export type AxisFieldName = AxisTable[number][0];

type ValueFor<T extends CaptureFieldType> = T extends 'u64' | 'i64' ? bigint : T extends Arr ? ArrayLike<number> : number;
type Struct<F extends readonly Field[]> = { [E in F[number] as E[0]]: ValueFor<E[1]> };
/** Values of CycleCaptureRecordV2's fields before `ax` (u64/i64 as bigint). */
export type RecordFields = Struct<RecordTable>;
/** Values of CycleCaptureAxisV2's fields (u64/i64 as bigint, arrays of up to 16 numbers). */
export type AxisFields = Struct<AxisTable>;

function offsets<F extends readonly Field[]>(table: F): { readonly [E in F[number] as E[0]]: number } {
  // Object.fromEntries gives V8 fast properties; assigning 50+ computed keys one by one would leave a
  // dictionary-mode object whose every `REC.x` in the cycle is a hash lookup (measured 10x slower).
  return Object.freeze(Object.fromEntries(table.map(([name, , offset]) => [name, offset]))) as { readonly [E in F[number] as E[0]]: number };
}

/** Record-relative offsets of CycleCaptureRecordV2's fields, e.g. `REC.t_ns` (0), `REC.io_reason` (268). */
export const REC = offsets(RECORD_TABLE);
/** Axis-relative offsets of CycleCaptureAxisV2's fields; add `axisOffset(i)` for a record-relative offset. */
export const AX = offsets(AXIS_TABLE);

/** Record-relative offset of axis slot `i` (0..15). */
export function axisOffset(i: number): number {
  return AXIS_ARRAY_OFFSET + i * AXIS_BYTES;
}

// The tables must tile their structs exactly; checked once at load so an editing slip cannot ship.
function checkTiling(table: readonly Field[], size: number, what: string): void {
  let at = 0;
  for (const [name, type, offset] of table) {
    if (offset !== at) throw new Error(`${what}.${name} at ${offset}, expected ${at}`);
    at += BYTES[type];
  }
  if (at !== size) throw new Error(`${what} fields end at ${at}, expected ${size}`);
}
checkTiling(RECORD_TABLE, AXIS_ARRAY_OFFSET, 'CycleCaptureRecordV2');
checkTiling(AXIS_TABLE, AXIS_BYTES, 'CycleCaptureAxisV2');
if (AXIS_ARRAY_OFFSET + AXIS_SLOTS * AXIS_BYTES !== RECORD_BYTES) throw new Error('record size does not add up');

// ---------------------------------------------------------------------------------------------------
// Record layout digest (docs/profile.md "Harness oracle / Telemetry").

const line = ([name, type, offset]: Field): string => `${offset} ${type} ${name}\n`;

/** The canonical layout text (122 lines, 3154 bytes). */
export const RECORD_LAYOUT_TEXT: string =
  `CycleCaptureRecordV2 ${RECORD_BYTES}\n` +
  RECORD_TABLE.map(line).join('') +
  `${AXIS_ARRAY_OFFSET} CycleCaptureAxisV2[${AXIS_SLOTS}] ax\n` +
  `CycleCaptureAxisV2 ${AXIS_BYTES}\n` +
  AXIS_TABLE.map(line).join('');

/** SHA-256 of RECORD_LAYOUT_TEXT, lowercase hex: the header's record_layout_digest. */
export const RECORD_LAYOUT_DIGEST: string = createHash('sha256').update(RECORD_LAYOUT_TEXT, 'utf8').digest('hex');

// ---------------------------------------------------------------------------------------------------
// Ring capacity.

/** Records one slot holds for `axisCount` axes: the record without its unused axis slots. */
export function slotBytes(axisCount: number): number {
  return AXIS_ARRAY_OFFSET + axisCount * AXIS_BYTES;
}

/**
 * ceil(retention_ms * 1e6 / cycle_ns), at least 1, at most MAX_RING_RECORDS and MAX_RING_BYTES / slot.
 * `axisCount` defaults to 16 (the byte ceiling then uses full records).
 */
export function ringCapacity(retentionMs: number | bigint, cycleNs: number | bigint, axisCount = AXIS_SLOTS): number {
  const ms = BigInt(retentionMs);
  const ns = BigInt(cycleNs);
  if (ms <= 0n || ns <= 0n) throw new RangeError(`retention_ms ${ms} and cycle_ns ${ns} must be positive`);
  const wanted = (ms * 1_000_000n + ns - 1n) / ns;
  const ceiling = Math.min(MAX_RING_RECORDS, Math.floor(MAX_RING_BYTES / slotBytes(axisCount)));
  return wanted > BigInt(ceiling) ? ceiling : Math.max(1, Number(wanted));
}

// ---------------------------------------------------------------------------------------------------
// Shared buffer layout: a 128-byte control block, then `capacity` slots of slotBytes(axisCount) bytes.
// Sequence s (1-based) lives in slot (s - 1) % capacity.

const CTRL_BYTES = 128;
const RING_MAGIC = 0x52504143; // 'CAPR'
const RING_VERSION = 1;
// Int32 word indices.
const W_MAGIC = 0;
const W_VERSION = 1;
const W_CAPACITY = 2;
const W_AXES = 3;
const W_STRIDE = 4;
const W_RECORD_BYTES = 5;
const W_G = 6; // seqlock generation: odd while a record is being written
const W_WAITERS = 7; // readers blocked in Atomics.wait on W_G
const W_NEWEST_LO = 8; // newest committed sequence, low 32 bits (written while G is odd)
const W_NEWEST_HI = 9;
const B_CYCLE_NS = 48; // u64
const B_INCARNATION = 64; // 32 ASCII bytes (lowercase hex), the core's incarnation; zeros if none

const TWO32 = 2 ** 32;

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
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX64 = /^[0-9a-f]{64}$/;

interface RingLayout {
  capacity: number;
  axisCount: number;
  stride: number;
  cycleNs: bigint;
  incarnation: string;
}

/** Validates a ring buffer's control block (either side) and returns its fixed layout. */
function readLayout(buffer: SharedArrayBuffer): RingLayout {
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
    this.buffer = new SharedArrayBuffer(CTRL_BYTES + capacity * this.stride);
    this.ctl = new Int32Array(this.buffer, 0, CTRL_BYTES / 4);
    this.bytes = new Uint8Array(this.buffer);
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
    if (!this.open) {
      this.g = (this.g + 1) | 0;
      Atomics.store(this.ctl, W_G, this.g); // odd: the slot of sequence next - capacity is being overwritten
      this.open = true;
    }
    const s = this.nextSeq;
    const base = CTRL_BYTES + ((s - 1) % this.capacity) * this.stride;
    // Copying a zero template is ~5x faster than fill(0) on shared memory (V8 fills those byte by byte).
    this.bytes.set(this.zeroSlot, base);
    const w = this.writer;
    w.position(base, s);
    const lo = s >>> 0;
    w.view.setUint32(base + 8, lo, true);
    w.view.setUint32(base + 12, (s - lo) / TWO32, true);
    w.view.setUint32(base + 32, this.axisCount, true);
    return w;
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

/** Range-checks one value of the table-driven path and, when `w` is given, writes it. */
function writeChecked(w: RecordWriter | null, base: number, [name, type, offset]: Field, v: unknown): void {
  if (v === undefined) return;
  if (type === 'u8[16]' || type === 'i32[16]') {
    const arr = v as ArrayLike<number>;
    if (typeof arr !== 'object' || arr === null || typeof arr.length !== 'number' || arr.length > 16) {
      throw new RangeError(`${name} must be an array of at most 16 numbers`);
    }
    const elem = type === 'u8[16]' ? 'u8' : 'i32';
    for (let k = 0; k < arr.length; k++) writeChecked(w, base, [name, elem, offset + k * BYTES[elem]], arr[k]);
    return;
  }
  const wide = type === 'u64' || type === 'i64';
  if (wide ? typeof v !== 'bigint' : typeof v !== 'number' || !Number.isInteger(v)) {
    throw new RangeError(`${name} must be ${wide ? 'a bigint' : 'an integer number'}`);
  }
  const bits = BYTES[type] * 8;
  const n = BigInt(v as number | bigint);
  const lo = type.startsWith('i') ? -(1n << BigInt(bits - 1)) : 0n;
  const hi = type.startsWith('i') ? (1n << BigInt(bits - 1)) - 1n : (1n << BigInt(bits)) - 1n;
  if (n < lo || n > hi) throw new RangeError(`${name}=${n} does not fit ${type}`);
  if (w === null) return;
  const at = base + offset;
  switch (type) {
    case 'u8': return w.u8(at, v as number);
    case 'i8': return w.i8(at, v as number);
    case 'u16': return w.u16(at, v as number);
    case 'i16': return w.i16(at, v as number);
    case 'u32': return w.u32(at, v as number);
    case 'i32': return w.i32(at, v as number);
    case 'u64': return w.u64(at, v as bigint);
    case 'i64': return w.i64(at, v as bigint);
  }
}

/**
 * Typed little-endian setters on the open record; offsets are record-relative (`REC.x`, or
 * `w.axis(i) + AX.x`). No allocation, no range checks: values wrap like DataView setters (u64n/i64n take
 * a safe-integer number instead of a bigint). Offsets outside the open record's slot (an axis at or beyond
 * axisCount included) and writes with no record open throw.
 */
export class RecordWriter {
  /** DataView over the whole shared buffer; the open record starts at `offset`. */
  readonly view: DataView;
  /** Byte offset of the open record's slot in the shared buffer. */
  offset = 0;
  /** Sequence of the open record (0 when none is open). */
  seq = 0;

  constructor(
    buffer: SharedArrayBuffer,
    /** Bytes writable in a slot: 272 + axisCount * 320. */
    readonly stride: number,
    readonly axisCount: number,
  ) {
    this.view = new DataView(buffer);
  }

  /** @internal */
  position(offset: number, seq: number): void {
    this.offset = offset;
    this.seq = seq;
  }

  /** @internal */
  close(): void {
    this.seq = 0;
  }

  private at(off: number, size: number): number {
    if (this.seq === 0 || !(off >= 0 && off + size <= this.stride)) {
      throw new RangeError(this.seq === 0 ? 'no record is open (beginRecord first)' : `offset ${off} is outside the ${this.stride}-byte slot`);
    }
    return this.offset + off;
  }

  /** Record-relative offset of axis slot i; throws for i outside 0..axisCount-1. */
  axis(i: number): number {
    if (!(i >= 0 && i < this.axisCount)) throw new RangeError(`axis ${i} is outside 0..${this.axisCount - 1}`);
    return AXIS_ARRAY_OFFSET + i * AXIS_BYTES;
  }

  u8(off: number, v: number): void { this.view.setUint8(this.at(off, 1), v); }
  i8(off: number, v: number): void { this.view.setInt8(this.at(off, 1), v); }
  u16(off: number, v: number): void { this.view.setUint16(this.at(off, 2), v, true); }
  i16(off: number, v: number): void { this.view.setInt16(this.at(off, 2), v, true); }
  u32(off: number, v: number): void { this.view.setUint32(this.at(off, 4), v, true); }
  i32(off: number, v: number): void { this.view.setInt32(this.at(off, 4), v, true); }
  u64(off: number, v: bigint): void { this.view.setBigUint64(this.at(off, 8), v, true); }
  i64(off: number, v: bigint): void { this.view.setBigInt64(this.at(off, 8), v, true); }
  /** u64 from a non-negative safe integer (no bigint needed). */
  u64n(off: number, v: number): void {
    const at = this.at(off, 8);
    const lo = v >>> 0; // ToUint32 is exact modulo 2^32 for every safe integer
    this.view.setUint32(at, lo, true);
    this.view.setUint32(at + 4, (v - lo) / TWO32, true);
  }
  /** i64 from a safe integer of either sign (two's complement). */
  i64n(off: number, v: number): void {
    const at = this.at(off, 8);
    const lo = v >>> 0;
    this.view.setUint32(at, lo, true);
    this.view.setInt32(at + 4, (v - lo) / TWO32, true);
  }
  /** A boolean as u32 0/1 (armed, motion_done, *_valid ...). */
  flag32(off: number, v: boolean): void { this.view.setUint32(this.at(off, 4), v ? 1 : 0, true); }
  /** A boolean as u8 0/1 (pdo_fresh, torque_valid, ...). */
  flag8(off: number, v: boolean): void { this.view.setUint8(this.at(off, 1), v ? 1 : 0); }
  /** Element k (0..15) of an i32[16] field such as AX.absolute_value. */
  i32At(off: number, k: number, v: number): void { this.i32(off + 4 * (k & 15), v); }
  /** Element k (0..15) of a u8[16] field such as AX.absolute_valid. */
  u8At(off: number, k: number, v: number): void { this.u8(off + (k & 15), v); }
}

/**
 * Fills what the bus side of the process image carries into the open record (a convenience for the
 * core's cycle; allocates nothing). Per axis i < axisCount: position, target, statusword, error_code,
 * velocity/following error/torque/digital inputs with their validity flags, mode_display, ds402_state
 * (drivers/ds402.ts decodeStatusword numbering), slave_al_state, slave_online, slave_operational (AL state 8, op), pdo_fresh.
 * Record: pdo_fresh_axis_mask, wkc_actual, wkc_expected, io_input_word, io_output_word, io_input_valid.
 * Validity (profile): the standard PDO mapping carries velocity, following error, torque and digital
 * inputs, so their *_valid flags are 1 while the slave is online; freshness is pdo_fresh.
 */
export function writeProcessImage(w: RecordWriter, img: ProcessImage): void {
  let fresh = 0;
  const n = Math.min(img.axisCount, w.axisCount);
  for (let i = 0; i < n; i++) {
    const a = w.axis(i);
    const online = img.online[i]! === 1;
    w.i32(a + AX.position, img.positionActual[i]!);
    w.i32(a + AX.target, img.targetPosition[i]!);
    w.u16(a + AX.statusword, img.statusword[i]!);
    w.u16(a + AX.error_code, img.errorCode[i]!);
    w.i32(a + AX.velocity_actual_counts_per_s, img.velocityActual[i]!);
    w.flag32(a + AX.velocity_actual_valid, online);
    w.i32(a + AX.following_error_counts, img.followingError[i]!);
    w.flag32(a + AX.following_error_valid, online);
    w.i16(a + AX.torque_raw, img.torqueActual[i]!);
    w.flag8(a + AX.torque_valid, online);
    w.u32(a + AX.di_bits, img.digitalInputs[i]!);
    w.flag32(a + AX.di_valid, online);
    w.i8(a + AX.mode_display, img.modeDisplay[i]!);
    w.u8(a + AX.ds402_state, decodeStatusword(img.statusword[i]!));
    w.u8(a + AX.slave_al_state, img.alState[i]!);
    w.flag8(a + AX.slave_online, online);
    w.flag8(a + AX.slave_operational, online && img.alState[i]! === AL.op);
    w.u8(a + AX.pdo_fresh, img.pdoFresh[i]!);
    if (img.pdoFresh[i]! === 1) fresh |= 1 << i;
  }
  w.u32(REC.pdo_fresh_axis_mask, fresh >>> 0);
  w.u32(REC.wkc_actual, img.wkcActual);
  w.u32(REC.wkc_expected, img.wkcExpected);
  w.u32(REC.io_input_word, img.ioInputWord);
  w.u32(REC.io_output_word, img.ioOutputWord);
  w.u32(REC.io_input_valid, img.ioInputValid);
}

// ---------------------------------------------------------------------------------------------------
// Reader side.

/** A cursor the ring cannot serve. The service maps `code` to its 409 reply. */
export class CaptureCursorError extends Error {
  override readonly name = 'CaptureCursorError';
  constructor(
    readonly code: 'telemetry_cursor_ahead' | 'invalid_telemetry_cursor',
    message: string,
    readonly after: bigint,
    /** Newest committed sequence when the cursor was judged (0n for invalid cursors). */
    readonly newest: bigint,
  ) {
    super(`${code}: ${message}`);
  }
}

export interface CaptureRead {
  /** record_count whole 5392-byte records (unused axis slots zero), a copy owned by the caller. */
  records: Uint8Array;
  /** Sequence of the first record; 0n when empty. */
  first: bigint;
  /** Sequence of the last record; after + dropped when empty. The next cursor. */
  last: bigint;
  /** Records lost after the cursor and before this batch. */
  dropped: bigint;
  /** Number of records (records.length / 5392). */
  count: number;
}

/** The identity fields of TelemetryBatchHeaderV1 that the ring does not know. */
export interface BatchIdentity {
  adapter_incarnation: string;
  machine_sha256: string;
  deployment_sha256: string;
  /** Defaults to the ring's incarnation (CaptureRingOptions.incarnation). */
  daemon_incarnation?: string;
}

export interface CaptureReaderOptions {
  /** How long one torn header sample waits for the writer's commit before sampling again (ms). Default 0.1. */
  tornWaitMs?: number;
}

const U64_MAX = (1n << 64n) - 1n;

interface Collected {
  bytes: Uint8Array;
  /** Byte offset in `bytes` of the first returned record. */
  start: number;
  count: number;
  first: number;
  dropped: number;
  after: number;
}

/** The reader side, in any thread that holds the ring's SharedArrayBuffer. */
export class CaptureReader {
  readonly capacity: number;
  readonly axisCount: number;
  readonly stride: number;
  readonly cycleNs: bigint;
  /** The core incarnation stored in the ring ('' when none was given). */
  readonly daemonIncarnation: string;
  /** Header samples the last read took (1 when the first was clean; 16 when it answered 'busy'). */
  lastSamples = 0;
  private readonly ctl: Int32Array;
  private readonly bytes: Uint8Array;
  private readonly tornWaitMs: number;
  // Header sample, filled by sample().
  private g1 = 0;
  private newest = 0;

  constructor(buffer: SharedArrayBuffer, opts: CaptureReaderOptions = {}) {
    const layout = readLayout(buffer);
    this.ctl = new Int32Array(buffer, 0, CTRL_BYTES / 4);
    this.bytes = new Uint8Array(buffer);
    this.capacity = layout.capacity;
    this.axisCount = layout.axisCount;
    this.stride = layout.stride;
    this.cycleNs = layout.cycleNs;
    this.daemonIncarnation = layout.incarnation;
    this.tornWaitMs = opts.tornWaitMs ?? 0.1;
  }

  /** Newest committed sequence, or 'busy' when the header stays torn for 16 samples. */
  newestSequence(): bigint | 'busy' {
    for (let k = 1; k <= TORN_SAMPLE_LIMIT; k++) {
      this.lastSamples = k;
      if (this.sample()) return BigInt(this.newest);
    }
    return 'busy';
  }

  /**
   * Document 1 part 4 cursor rules. `after` is the last sequence consumed (0n: from sequence 1).
   * Returns up to min(max, 4096, capacity) contiguous records starting at after + dropped + 1, where
   * dropped counts sequences after the cursor no longer in the ring; an empty batch has first 0n and
   * last after + dropped. Throws CaptureCursorError 'telemetry_cursor_ahead' when after exceeds the
   * newest committed sequence, 'invalid_telemetry_cursor' when after is not a u64. Answers 'busy'
   * after 16 torn header samples.
   */
  read(after: bigint, max: number = MAX_BATCH_RECORDS): CaptureRead | 'busy' {
    const c = this.collect(after, max, 0);
    if (c === 'busy') return c;
    return {
      records: c.bytes.subarray(c.start, c.start + c.count * RECORD_BYTES),
      count: c.count,
      first: c.count === 0 ? 0n : BigInt(c.first),
      last: c.count === 0 ? BigInt(c.after + c.dropped) : BigInt(c.first + c.count - 1),
      dropped: BigInt(c.dropped),
    };
  }

  /**
   * `read` plus the 312-byte TelemetryBatchHeaderV1 in front, in one allocation: the complete body of
   * GET /v1/telemetry (and one batch of the stream).
   */
  readBatch(after: bigint, max: number, identity: BatchIdentity): Uint8Array | 'busy' {
    const c = this.collect(after, max, HEADER_BYTES);
    if (c === 'busy') return c;
    const at = c.start - HEADER_BYTES;
    const out = c.bytes.subarray(at, c.start + c.count * RECORD_BYTES);
    encodeBatchHeader(
      {
        adapter_incarnation: identity.adapter_incarnation,
        daemon_incarnation: identity.daemon_incarnation ?? this.daemonIncarnation,
        machine_sha256: identity.machine_sha256,
        deployment_sha256: identity.deployment_sha256,
        cycle_period_ns: this.cycleNs,
        first_sequence: c.count === 0 ? 0n : BigInt(c.first),
        last_sequence: c.count === 0 ? BigInt(c.after + c.dropped) : BigInt(c.first + c.count - 1),
        dropped: BigInt(c.dropped),
        axis_count: this.axisCount,
        record_count: c.count,
      },
      out,
    );
    return out;
  }

  /** One header sample: true when consistent (this.g1 even and unchanged across reading NEWEST). */
  private sample(): boolean {
    const g1 = Atomics.load(this.ctl, W_G);
    if ((g1 & 1) === 0) {
      const lo = Atomics.load(this.ctl, W_NEWEST_LO) >>> 0;
      const hi = Atomics.load(this.ctl, W_NEWEST_HI) >>> 0;
      if (Atomics.load(this.ctl, W_G) === g1) {
        this.g1 = g1;
        this.newest = hi * TWO32 + lo;
        return true;
      }
      return false; // the writer moved while we read: sample again at once
    }
    // The writer is inside a record: wait (briefly) for its commit to change G.
    if (this.tornWaitMs > 0) {
      Atomics.add(this.ctl, W_WAITERS, 1);
      Atomics.wait(this.ctl, W_G, g1, this.tornWaitMs);
      Atomics.sub(this.ctl, W_WAITERS, 1);
    }
    return false;
  }

  private collect(afterIn: bigint, maxIn: number, headroom: number): Collected | 'busy' {
    if (typeof afterIn !== 'bigint' || afterIn < 0n || afterIn > U64_MAX) {
      throw new CaptureCursorError('invalid_telemetry_cursor', `cursor ${String(afterIn)} is not a u64`, typeof afterIn === 'bigint' ? afterIn : 0n, 0n);
    }
    if (!Number.isInteger(maxIn) || maxIn < 1) throw new RangeError(`max ${maxIn} must be a positive integer`);
    const max = Math.min(maxIn, MAX_BATCH_RECORDS, this.capacity);
    const cap = this.capacity;
    for (let k = 1; k <= TORN_SAMPLE_LIMIT; k++) {
      this.lastSamples = k;
      if (!this.sample()) continue;
      const newest = this.newest;
      if (afterIn > BigInt(newest)) {
        throw new CaptureCursorError('telemetry_cursor_ahead', `cursor ${afterIn} is ahead of the newest sequence ${newest}`, afterIn, BigInt(newest));
      }
      const after = Number(afterIn); // exact: after <= newest < 2^53
      const oldest = Math.max(1, newest - cap + 1);
      let first = Math.max(after + 1, oldest);
      let count = Math.max(0, Math.min(newest - first + 1, max));
      const bytes = new Uint8Array(headroom + count * RECORD_BYTES);
      for (let r = 0; r < count; r++) {
        const src = CTRL_BYTES + ((first + r - 1) % cap) * this.stride;
        bytes.set(this.bytes.subarray(src, src + this.stride), headroom + r * RECORD_BYTES);
      }
      // Lap check: every record begun since the sample may have overwritten the slot of seq - cap.
      let start = headroom;
      if (count > 0) {
        const begun = Math.ceil(((Atomics.load(this.ctl, W_G) - this.g1) >>> 0) / 2);
        const intactFrom = newest + begun - cap + 1;
        if (intactFrom > first) {
          const lost = intactFrom - first;
          if (lost >= count) continue; // the whole copy was overwritten: a torn sample
          first += lost;
          count -= lost;
          start += lost * RECORD_BYTES;
        }
      }
      return { bytes, start, count, first: count === 0 ? 0 : first, dropped: first - after - 1, after };
    }
    return 'busy';
  }
}

// ---------------------------------------------------------------------------------------------------
// TelemetryBatchHeaderV1.

export interface BatchHeaderFields {
  /** 32 lowercase hex: the service process identity. */
  adapter_incarnation: string;
  /** 32 lowercase hex: the core process identity, owner of the sequence numbers. */
  daemon_incarnation: string;
  /** 64 lowercase hex each. */
  machine_sha256: string;
  deployment_sha256: string;
  /** Defaults to RECORD_LAYOUT_DIGEST. */
  record_layout_digest?: string;
  cycle_period_ns: bigint;
  first_sequence: bigint;
  last_sequence: bigint;
  dropped: bigint;
  axis_count: number;
  record_count: number;
}

function putHex(out: Uint8Array, at: number, text: string, re: RegExp, name: string): void {
  if (typeof text !== 'string' || !re.test(text)) throw new RangeError(`${name} must be ${re === HEX32 ? 32 : 64} lowercase hex characters`);
  for (let k = 0; k < text.length; k++) out[at + k] = text.charCodeAt(k);
}

function u64(v: bigint, name: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > U64_MAX) throw new RangeError(`${name} ${String(v)} is not a u64`);
  return v;
}

/**
 * Writes the 312-byte TelemetryBatchHeaderV1 into out[0..312) (a new array when omitted) and returns
 * `out`. Checks the hex fields, axis_count 1..16, record_count 0..4096 and the sequence shape of part 4
 * (empty: first 0; otherwise last = first + record_count - 1, first >= 1).
 */
export function encodeBatchHeader(h: BatchHeaderFields, out: Uint8Array = new Uint8Array(HEADER_BYTES)): Uint8Array {
  if (out.length < HEADER_BYTES) throw new RangeError(`header needs ${HEADER_BYTES} bytes`);
  const first = u64(h.first_sequence, 'first_sequence');
  const last = u64(h.last_sequence, 'last_sequence');
  const dropped = u64(h.dropped, 'dropped');
  const cycle = u64(h.cycle_period_ns, 'cycle_period_ns');
  if (!Number.isInteger(h.axis_count) || h.axis_count < 1 || h.axis_count > AXIS_SLOTS) throw new RangeError(`axis_count ${h.axis_count} is outside 1..16`);
  if (!Number.isInteger(h.record_count) || h.record_count < 0 || h.record_count > MAX_BATCH_RECORDS) throw new RangeError(`record_count ${h.record_count} is outside 0..4096`);
  if (h.record_count === 0 ? first !== 0n : first === 0n || last !== first + BigInt(h.record_count - 1)) {
    throw new RangeError(`first_sequence ${first} / last_sequence ${last} do not fit record_count ${h.record_count}`);
  }
  const dv = new DataView(out.buffer, out.byteOffset, HEADER_BYTES);
  dv.setUint32(0, BATCH_MAGIC, true);
  dv.setUint16(4, BATCH_VERSION, true);
  dv.setUint16(6, HEADER_BYTES, true);
  putHex(out, 8, h.adapter_incarnation, HEX32, 'adapter_incarnation');
  putHex(out, 40, h.machine_sha256, HEX64, 'machine_sha256');
  putHex(out, 104, h.deployment_sha256, HEX64, 'deployment_sha256');
  putHex(out, 168, h.record_layout_digest ?? RECORD_LAYOUT_DIGEST, HEX64, 'record_layout_digest');
  dv.setBigUint64(232, cycle, true);
  dv.setBigUint64(240, first, true);
  dv.setBigUint64(248, last, true);
  dv.setBigUint64(256, dropped, true);
  dv.setUint32(264, h.axis_count, true);
  dv.setUint32(268, h.record_count, true);
  dv.setUint32(272, RECORD_BYTES, true);
  dv.setUint32(276, 0, true);
  putHex(out, 280, h.daemon_incarnation, HEX32, 'daemon_incarnation');
  return out;
}
