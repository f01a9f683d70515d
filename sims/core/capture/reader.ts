// The reader side of the capture ring, in any thread that holds the ring's SharedArrayBuffer.

import { HEADER_BYTES, MAX_BATCH_RECORDS, RECORD_BYTES, TORN_SAMPLE_LIMIT, TWO32, encodeBatchHeader, ringCapacity, slotBytes } from './layout.ts';
import { U64_MAX } from '../../primitives.ts';
import { CTRL_BYTES, W_G, W_NEWEST_HI, W_NEWEST_LO, W_WAITERS, readLayout, touchedSlots } from './ring.ts';

/**
 * Whether a ring of `axisCount` axes kept for `retentionMs` at `cycleNs` would write into `buffer` again
 * (CaptureRingOptions.reuse takes a buffer of the same capacity and axis count, ring.ts): the service's spare
 * rings (sims/service/core-link.ts) are chosen by this, from the buffer's own layout.
 */
export function ringFits(buffer: SharedArrayBuffer, axisCount: number, cycleNs: number | bigint, retentionMs: number): boolean {
  try {
    const l = readLayout(buffer);
    return l.axisCount === axisCount && l.capacity === ringCapacity(retentionMs, cycleNs, axisCount);
  } catch {
    return false;
  }
}

/**
 * Bytes of a ring buffer that rings have written (the part of it the process holds once written), for the
 * service's spare rings (sims/service/core-link.ts); throws TypeError on a buffer that is not a ring.
 */
export function writtenBytes(buffer: SharedArrayBuffer): number {
  return touchedSlots(buffer) * readLayout(buffer).stride;
}

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


export interface Collected {
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

  /** Header samples still to be taken as torn whatever the ring says (tearSamples). */
  private forcedTorn = 0;

  /**
   * Test hook (the private test channel's `tear_header_samples`): the next `n` header samples count as
   * torn, so a read answers 'busy' exactly when n reaches the documented 16 samples.
   */
  tearSamples(n: number): void {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`samples ${n} must be a non-negative integer`);
    this.forcedTorn = n;
  }

  /** One header sample: true when consistent (this.g1 even and unchanged across reading NEWEST). */
  private sample(): boolean {
    if (this.forcedTorn > 0) {
      this.forcedTorn--;
      return false;
    }
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

