// One capture record's writer: range-checked table-driven writes and the per-cycle fast path.

import { AX, AXIS_ARRAY_OFFSET, AXIS_BYTES, BYTES, type Field, REC, TWO32 } from './layout.ts';
import { AL, type ProcessImage } from '../../../drivers/bus.ts';
import { decodeStatusword } from '../../../drivers/ds402.ts';


/** Range-checks one value of the table-driven path and, when `w` is given, writes it. */
export function writeChecked(w: RecordWriter | null, base: number, [name, type, offset]: Field, v: unknown): void {
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

/** The host stores typed array elements little-endian (checked once at load). */
export const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Typed array views over a whole capture ring buffer, for the core's unchecked per-cycle writes
 * (record.ts): element index = byte offset / element size. Slots start at multiples of 16 bytes and
 * every field is aligned to its size, so each field is one element. Only on a little-endian host (the
 * record is little-endian); `for` answers null elsewhere and the caller uses RecordWriter.
 */
export class RecordViews {
  readonly u8: Uint8Array;
  readonly i8: Int8Array;
  readonly u16: Uint16Array;
  readonly i16: Int16Array;
  readonly u32: Uint32Array;
  readonly i32: Int32Array;
  readonly u64: BigUint64Array;

  private constructor(buffer: SharedArrayBuffer) {
    this.u8 = new Uint8Array(buffer);
    this.i8 = new Int8Array(buffer);
    this.u16 = new Uint16Array(buffer);
    this.i16 = new Int16Array(buffer);
    this.u32 = new Uint32Array(buffer);
    this.i32 = new Int32Array(buffer);
    this.u64 = new BigUint64Array(buffer);
  }

  static for(buffer: SharedArrayBuffer): RecordViews | null {
    return LITTLE_ENDIAN && buffer.byteLength % 8 === 0 ? new RecordViews(buffer) : null;
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

