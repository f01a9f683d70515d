// Where the upload decoder writes points: typed arrays of its own, grown as points arrive, or the views of a
// plan arena slot (sims/core/plan-arena.ts) so the core builds the plan from the bytes the decoder wrote.
// One row per point (document 1 part 2 "Point"): time_ns as int64, position and velocity as float64 per
// axis, io_mask and io_values as uint32 with a presence byte. The decoder (decoder.ts) judges the fields;
// this only stores what it accepted.

import type { SlotStorage } from '../../core/plan-arena.ts';
import type { NumberToken } from './number-token.ts';
import { latin1Slice } from './number-token.ts';
import { JsonNumber, toInteger } from '../../json.ts';
import { MAX_POINTS, minPointBytes, type PointArrays } from './types.ts';

const TWO32 = 4294967296;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export class PointStore {
  // Of their own, or views of a plan arena slot.
  timeNs: BigInt64Array = new BigInt64Array(0);
  private timeWords: Uint32Array = new Uint32Array(0);
  position: Float64Array = new Float64Array(0);
  velocity: Float64Array = new Float64Array(0);
  private hasVelocity: Uint8Array = new Uint8Array(0);
  private ioMask: Uint32Array = new Uint32Array(0);
  private ioValues: Uint32Array = new Uint32Array(0);
  private ioFlags: Uint8Array = new Uint8Array(0);
  private cap = 0;
  /** Points ended so far. */
  count = 0;
  /** Row written by the current point. */
  row = 0;

  /**
   * `storage`: a plan arena slot at least MAX_POINTS long; every element of an accepted point is written
   * (begin, end), so what the slot held before never shows. Without it the arrays are sized from
   * `expectedBytes` (the body length when known) and grow.
   */
  constructor(
    readonly axes: number,
    storage?: SlotStorage,
    expectedBytes?: number,
  ) {
    if (storage) {
      const st = storage;
      if (st.timeNs.length < MAX_POINTS || st.position.length < MAX_POINTS * axes) throw new RangeError('storage must hold MAX_POINTS points of the decoder axes');
      this.timeNs = st.timeNs;
      this.timeWords = new Uint32Array(st.timeNs.buffer, st.timeNs.byteOffset, st.timeNs.length * 2);
      this.position = st.position;
      this.velocity = st.velocity;
      this.hasVelocity = st.hasVelocity;
      this.ioMask = st.ioMask;
      this.ioValues = st.ioValues;
      this.ioFlags = st.ioFlags;
      this.cap = MAX_POINTS;
      return;
    }
    const pre = expectedBytes ? Math.min(MAX_POINTS, Math.ceil(expectedBytes / minPointBytes(axes))) : 64;
    this.grow(Math.max(2, pre));
  }

  /** A point starts: false when it is past MAX_POINTS (its row is then the last one, overwritten harmlessly: the body is refused). */
  begin(): boolean {
    const idx = this.count;
    let within = true;
    if (idx >= MAX_POINTS) {
      within = false;
      this.row = MAX_POINTS - 1;
    } else {
      if (idx >= this.cap) this.grow(idx + 1);
      this.row = idx;
    }
    const r = this.row;
    this.ioFlags[r] = 0;
    this.ioMask[r] = 0;
    this.ioValues[r] = 0;
    this.hasVelocity[r] = 0;
    return within;
  }

  /** The point ends: a point without velocity has NaN there (no feedforward). */
  end(): void {
    if (!this.hasVelocity[this.row]) this.velocity.fill(NaN, this.row * this.axes, (this.row + 1) * this.axes);
    this.count++;
  }

  /** The current point's velocity array had every axis. */
  velocityComplete(): void {
    this.hasVelocity[this.row] = 1;
  }

  /** time_ns from the scanned literal in b; false when it is not a signed 64-bit integer (json.ts toInteger; "-0" neither). */
  time(num: NumberToken, b: Buffer): boolean {
    const r = this.row;
    if (num.frac || (num.neg && num.a === 0 && num.digits === 0)) return false;
    if (num.digits <= 15 && LITTLE_ENDIAN) {
      // Exact integer arithmetic below 2^53: the 64-bit pattern written as two 32-bit words.
      const v = num.neg ? -num.a : num.a;
      const w = this.timeWords;
      w[2 * r] = v >>> 0;
      w[2 * r + 1] = Math.floor(v / TWO32) >>> 0;
      return true;
    }
    const v = toInteger(new JsonNumber(latin1Slice(b, num.start, num.end)), -(1n << 63n), (1n << 63n) - 1n);
    if (v === undefined) return false;
    this.timeNs[r] = v;
    return true;
  }

  /** io_mask (`values` false) or io_values from the scanned literal; false when it is not an unsigned 32-bit integer. */
  io(num: NumberToken, values: boolean): boolean {
    if (num.frac || num.neg || num.digits > 10 || num.a > 0xffffffff) return false;
    const r = this.row;
    if (!values) {
      this.ioMask[r] = num.a;
      this.ioFlags[r]! |= 1;
    } else {
      this.ioValues[r] = num.a;
      this.ioFlags[r]! |= 2;
    }
    return true;
  }

  /** The first `count` points' arrays (views, no copy). */
  arrays(): PointArrays {
    const n = this.count;
    const a = this.axes;
    return {
      count: n,
      axes: a,
      timeNs: this.timeNs.subarray(0, n),
      position: this.position.subarray(0, n * a),
      velocity: this.velocity.subarray(0, n * a),
      hasVelocity: this.hasVelocity.subarray(0, n),
      ioMask: this.ioMask.subarray(0, n),
      ioValues: this.ioValues.subarray(0, n),
      ioFlags: this.ioFlags.subarray(0, n),
    };
  }

  heldBytes(): number {
    return (
      this.timeNs.byteLength + this.position.byteLength + this.velocity.byteLength + this.hasVelocity.byteLength +
      this.ioMask.byteLength + this.ioValues.byteLength + this.ioFlags.byteLength
    );
  }

  /** Drop the arrays (a client went away). */
  release(): void {
    this.timeNs = new BigInt64Array(0);
    this.timeWords = new Uint32Array(0);
    this.position = this.velocity = new Float64Array(0);
    this.hasVelocity = this.ioFlags = new Uint8Array(0);
    this.ioMask = this.ioValues = new Uint32Array(0);
  }

  private grow(min: number): void {
    const cap = Math.min(MAX_POINTS, Math.max(min, this.cap * 2, 64));
    if (cap <= this.cap) return;
    const a = this.axes;
    const n = this.count;
    this.timeNs = grown(this.timeNs, cap, n);
    this.timeWords = new Uint32Array(this.timeNs.buffer);
    this.position = grown(this.position, cap * a, n * a);
    this.velocity = grown(this.velocity, cap * a, n * a);
    this.hasVelocity = grown(this.hasVelocity, cap, n);
    this.ioMask = grown(this.ioMask, cap, n);
    this.ioValues = grown(this.ioValues, cap, n);
    this.ioFlags = grown(this.ioFlags, cap, n);
    this.cap = cap;
  }
}

/** A typed array of `length` elements holding the first `used` of `old` (a column grown in place of it). */
function grown<T extends BigInt64Array | Float64Array | Uint32Array | Uint8Array>(old: T, length: number, used: number): T {
  const next = new (old.constructor as new (n: number) => T)(length);
  next.set(old.subarray(0, used) as never);
  return next;
}
