// The recording format (docs/recording.md, format 3). A recording is a gzip file made of independent gzip
// members (RFC 1952 section 2.2 allows a file of several members; node's gunzip reads them in a row). The
// writer compresses a block of records synchronously every RECORD_FLUSH_FRAMES frames or BLOCK_BYTES bytes
// and appends it with one write, so a killed writer leaves every earlier block readable, and a core thread
// that never yields to its event loop (the real-time clock) still gets its recording onto disk.
//
// Decompressed, the stream is: the magic "HILREC" and the format version byte, then records, each a tag byte:
//   0x00 header: varint length, UTF-8 JSON (RecordingHeader)
//   0x01 frame:  zz(dt - previous dt), zz(rc), [format 3 with header host_times: zz(host dt - previous host
//                dt)], varint(changes), then per change varint(slot gap) and zz(value - prediction), the
//                prediction of a slot being 2 * previous - the one before
//   0x02 note:   varint length, UTF-8 JSON (RecordingNote: requests, replies, events aligned to cycles)
//   0x03 end:    the writer closed the recording cleanly
// Slots are the process image flattened (slotLayout below); a frame lists only the slots off their linear
// prediction, so an idle cycle costs four bytes before compression and a steady motion little more. Outputs are the values the core
// wrote before the exchange, inputs the values the bus returned.

import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, readSync, writeSync } from 'node:fs';
import { constants, gunzipSync, gzipSync } from 'node:zlib';
import type { BusSetup, ProcessImage } from '../bus.ts';

/** The format this build writes. */
export const FORMAT_VERSION = 3;
/**
 * The formats this build reads. Format 1 has the same records; its request notes lack the service's clock,
 * the core's host time and the origin (RecordingNote), so a paced replay of it runs the service's own
 * timing live (docs/recording.md "Format 1 recordings"). Format 3 adds the host time of each frame when the
 * core's time was not the host's (header `host_times`: a stepped or fast clock), and the test's steps as
 * request notes; a format 2 file is a format 3 file without either.
 */
export const READABLE_FORMATS: readonly number[] = [1, 2, 3];
const MAGIC = Buffer.from('HILREC', 'latin1');
const TAG = { header: 0, frame: 1, note: 2, end: 3 } as const;
/** Frames per compressed block (a quarter of a second at 1 kHz): what a crash may lose at most. */
export const RECORD_FLUSH_FRAMES = 250;
const BLOCK_BYTES = 16 * 1024;

/** Per-axis fields in slot order; the first three are outputs (master -> drives). */
export const AXIS_FIELDS = [
  'controlword',
  'modeOfOperation',
  'targetPosition',
  'statusword',
  'modeDisplay',
  'positionActual',
  'velocityActual',
  'followingError',
  'torqueActual',
  'errorCode',
  'digitalInputs',
  'pdoFresh',
  'absolutePosition',
  'absoluteValid',
  'alState',
  'online',
] as const;
export type AxisField = (typeof AXIS_FIELDS)[number];
export const AXIS_OUTPUTS = 3;
/** Cell-wide fields after the per-axis block; the first is an output. */
export const CELL_FIELDS = ['ioOutputWord', 'ioInputWord', 'ioInputValid', 'safetyChainClosed', 'wkcExpected', 'wkcActual'] as const;
export type CellField = (typeof CELL_FIELDS)[number];

export interface SlotLayout {
  axisCount: number;
  count: number;
  /** Slot of (field f, axis a) is f * axisCount + a; cell field c is AXIS_FIELDS.length * axisCount + c. */
  isOutput(slot: number): boolean;
  describe(slot: number): { axis: number | null; field: string };
}

export function slotLayout(axisCount: number): SlotLayout {
  const cellBase = AXIS_FIELDS.length * axisCount;
  return {
    axisCount,
    count: cellBase + CELL_FIELDS.length,
    isOutput: (s) => (s < cellBase ? Math.floor(s / axisCount) < AXIS_OUTPUTS : s === cellBase),
    describe: (s) => (s < cellBase ? { axis: s % axisCount, field: AXIS_FIELDS[Math.floor(s / axisCount)]! } : { axis: null, field: CELL_FIELDS[s - cellBase]! }),
  };
}

type Arr = Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array;

/** Copy the image's outputs (outputs=true) or inputs into `v`. */
/**
 * How a value is written into a note's JSON: a bigint as its decimal string; a typed array (a trajectory's
 * times and positions, up to 250000 points by nine axes) as `{"$typed": "<constructor>", "base64": <its
 * bytes>}`. Decision: JSON of a typed array is an object with one string key per element, which for a
 * 250000-point prepare took 3.6 s of the core thread and 46 MB (the recorded core then missed its lease);
 * its bytes in base64 take about 40 ms and 24 MB, and compare exactly (NaN, -0 and all). Recordings
 * written before this keep the per-element objects; the pacer compares either with either (pacer.ts).
 */
export function noteValue(_k: string, x: unknown): unknown {
  if (typeof x === 'bigint') return x.toString();
  if (ArrayBuffer.isView(x) && !(x instanceof DataView)) return { $typed: x.constructor.name, base64: Buffer.from(x.buffer, x.byteOffset, x.byteLength).toString('base64') };
  return x;
}

const TYPED: Record<string, new (b: ArrayBuffer) => ArrayBufferView> = {
  Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array,
};

/** A note's `{"$typed", "base64"}` value as the typed array it was, or null when it is not one. */
export function typedFromNote(v: unknown): ArrayBufferView | null {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return null;
  const o = v as { $typed?: unknown; base64?: unknown };
  if (typeof o.$typed !== 'string' || typeof o.base64 !== 'string' || Object.keys(o).length !== 2) return null;
  const make = TYPED[o.$typed];
  if (!make) return null;
  const bytes = Buffer.from(o.base64, 'base64');
  const copy = new ArrayBuffer(bytes.length); // aligned for any element size
  new Uint8Array(copy).set(bytes);
  return new make(copy);
}

export function readImage(img: ProcessImage, v: Float64Array, outputs: boolean): void {
  const n = img.axisCount;
  const from = outputs ? 0 : AXIS_OUTPUTS;
  const to = outputs ? AXIS_OUTPUTS : AXIS_FIELDS.length;
  for (let f = from; f < to; f++) {
    const a = img[AXIS_FIELDS[f]!] as Arr;
    for (let i = 0; i < n; i++) v[f * n + i] = a[i]!;
  }
  const c = AXIS_FIELDS.length * n;
  if (outputs) v[c] = img.ioOutputWord;
  else {
    v[c + 1] = img.ioInputWord;
    v[c + 2] = img.ioInputValid;
    v[c + 3] = img.safetyChainClosed;
    v[c + 4] = img.wkcExpected;
    v[c + 5] = img.wkcActual;
  }
}

/** Each input field's values of a recorded-values array, as views of it (writeInputs), made once per array. */
const inputViews = new WeakMap<Float64Array, { n: number; views: Float64Array[] }>();

/**
 * Write the inputs of `v` into the image: each field in one typed-array copy from a view of `v` (the same
 * conversion as an element store). Element by element, the stores into arrays of different element types
 * were a quarter of a replayed cycle's time (a paced replay runs tens of thousands of cycles a test).
 */
export function writeInputs(img: ProcessImage, v: Float64Array): void {
  const n = img.axisCount;
  let cached = inputViews.get(v);
  if (cached?.n !== n) {
    const views: Float64Array[] = [];
    for (let f = AXIS_OUTPUTS; f < AXIS_FIELDS.length; f++) views.push(v.subarray(f * n, f * n + n));
    inputViews.set(v, (cached = { n, views }));
  }
  const views = cached.views;
  for (let f = AXIS_OUTPUTS; f < AXIS_FIELDS.length; f++) (img[AXIS_FIELDS[f]!] as Arr).set(views[f - AXIS_OUTPUTS]!);
  const c = AXIS_FIELDS.length * n;
  img.ioInputWord = v[c + 1]!;
  img.ioInputValid = v[c + 2]!;
  img.safetyChainClosed = v[c + 3]!;
  img.wkcExpected = v[c + 4]!;
  img.wkcActual = v[c + 5]!;
}

export interface RecordingHeader {
  format: number;
  /** Registry name of the driver that was recorded (sim, ethercat). */
  driver: string;
  axisCount: number;
  cycle_ns: string;
  /** sha256 of the BusSetup the core gave the driver (setupDigest): what replay checks first. */
  setup_sha256: string;
  machine_sha256?: string;
  configuration_sha256?: string;
  deployment_sha256?: string;
  /** Rig identity as the driver reported it (per slave vendor/product/revision/serial, firmware). */
  identity?: Record<string, unknown>;
  package_version?: string;
  git_revision?: string;
  /** The test or run the recording belongs to. */
  run?: string;
  /** The recorded driver's own parameters (bigints as decimal strings), for re-simulating it (mode verify). */
  driver_params?: Record<string, unknown>;
  /** Axes whose PDO mapping differed at bring-up (BusStartup.mappingMismatchMask), when any did. */
  mapping_mismatch_mask?: number;
  /** Host time of the first frame (frames carry time relative to it). */
  t0_ns: string;
  /** Format 2: the core's clock mode when recorded (realtime: the core's time was the host clock). */
  clock?: string;
  /**
   * On the real-time clock: the clock's origin (host ns, decimal), from which its schedule runs one cycle_ns
   * after another (sims/core/clock.ts RealTimeClock). With the frame times it gives every cycle's scheduled
   * time, which the core's decisions use beside its wake time (a Start's plan time counts from the scheduled
   * time of its cycle): a replay rebuilds it (RecordedClock). Absent in recordings made before (2026-12-01):
   * their replay counts every cycle as on time.
   */
  clock_origin_ns?: string;
  /**
   * Format 3: every frame carries the host time the core read in that cycle (lease, jog and hold deadlines
   * are judged on it), because the core's own time was not the host's (a stepped or fast clock).
   */
  host_times?: true;
  /**
   * The service notes when a stream opens and closes ({t: 'watch'} service notes): a paced replay runs flat
   * out outside those spans (sims/replay/modes.ts WatchedMode). Absent in recordings made before.
   */
  watch_notes?: true;
  /**
   * 'all': every status read the service served is noted, also one served before the core published
   * anything (`{t: "status_read", cycle: "none"}`); before this (2026-11-27) such a read was not noted, and a
   * replay could only guess which live read was one (sims/service/replay-timing.ts nextStatusReadCycle).
   */
  status_reads?: 'all';
  started_at: string;
}

export interface RecordingNote {
  /** The core cycle count when the note was taken (a command noted at cycle c is admitted in cycle c+1). */
  cycle: number;
  /** 'service' (format 2): the service's own log (its fence decisions in order), not a message of the core's. */
  kind: 'request' | 'reply' | 'event' | 'service';
  data: unknown;
  /** Format 2, requests: the service's clock when it posted the message (host ns, decimal). */
  sent_ns?: string;
  /** Format 2, requests: the core's host clock when it handled the message (after any stall), decimal. */
  host_ns?: string;
  /** Format 2, requests the service sent of its own accord: why (lease_expired). */
  origin?: string;
}

/** Every failure of reading or replaying a recording has a stable string code (the undici habit). */
export class RecordingError extends Error {
  constructor(
    readonly code: 'REPLAY_MISSING' | 'REPLAY_TRUNCATED' | 'REPLAY_BAD_FORMAT' | 'REPLAY_STALE' | 'REPLAY_BAD_PARAMS',
    message: string,
  ) {
    super(message);
    this.name = 'RecordingError';
  }
}

/** Canonical digest of a BusSetup (bigints as decimal strings, keys in declaration order). */
export function setupDigest(setup: BusSetup): string {
  const json = JSON.stringify(setup, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  return createHash('sha256').update(json).digest('hex');
}

const zz = (v: number): number => (v >= 0 ? v * 2 : -v * 2 - 1);
const unzz = (u: number): number => (u % 2 === 0 ? u / 2 : -(u + 1) / 2);

/** Appends records to a recording file, compressing a block at a time. Synchronous throughout. */
export class RecordingWriter {
  private buf = Buffer.allocUnsafe(64 * 1024);
  private n = 0;
  private framesInBlock = 0;
  private fd: number | null;
  private readonly prev: Float64Array;
  private prevT = 0;
  private prevDt = 0;
  private prevHostT = 0;
  private prevHostDt = 0;
  private first = true;
  private t0 = 0n;
  frames = 0;
  bytesWritten = 0;

  constructor(
    readonly path: string,
    readonly header: Omit<RecordingHeader, 'format' | 't0_ns' | 'started_at'>,
  ) {
    this.fd = openSync(path, 'w');
    this.prev = new Float64Array(slotLayout(header.axisCount).count);
    this.prev2 = new Float64Array(this.prev.length);
  }
  private readonly prev2: Float64Array;

  private ensure(extra: number): void {
    if (this.n + extra <= this.buf.length) return;
    const b = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.n + extra));
    this.buf.copy(b, 0, 0, this.n);
    this.buf = b;
  }
  private byte(b: number): void {
    this.buf[this.n++] = b;
  }
  private varint(u: number): void {
    while (u >= 0x80) {
      this.buf[this.n++] = (u % 0x80) | 0x80;
      u = Math.floor(u / 0x80);
    }
    this.buf[this.n++] = u;
  }
  private json(tag: number, v: unknown): void {
    const s = Buffer.from(JSON.stringify(v, noteValue), 'utf8');
    this.ensure(s.length + 16);
    this.byte(tag);
    this.varint(s.length);
    s.copy(this.buf, this.n);
    this.n += s.length;
  }

  /**
   * One frame: `values` holds the outputs the core wrote and the inputs the bus returned; `hostNs`, the host
   * time the core read in the cycle, is written when the header says `host_times` (it must then be given).
   */
  frame(values: Float64Array, rc: number, nowNs: bigint, hostNs?: bigint): void {
    if (this.first) {
      this.first = false;
      this.t0 = nowNs;
      this.json(TAG.header, { format: FORMAT_VERSION, ...this.header, t0_ns: nowNs.toString(), started_at: new Date().toISOString() } satisfies RecordingHeader);
      for (const n of this.early) this.json(TAG.note, n);
      this.early = [];
    }
    const t = Number(nowNs - this.t0);
    const dt = t - this.prevT;
    this.prevT = t;
    const count = values.length;
    this.ensure(24 + count * 12);
    this.byte(TAG.frame);
    this.varint(zz(dt - this.prevDt));
    this.prevDt = dt;
    this.varint(zz(rc));
    if (this.header.host_times) {
      const h = Number((hostNs ?? nowNs) - this.t0);
      const hdt = h - this.prevHostT;
      this.prevHostT = h;
      this.varint(zz(hdt - this.prevHostDt));
      this.prevHostDt = hdt;
    }
    // Each slot is predicted linearly from its last two values (2 * prev - prev2): a value at rest or moving
    // at a steady rate costs nothing; only the slots off their prediction are listed. Count them first.
    const prev = this.prev;
    const prev2 = this.prev2;
    let changes = 0;
    for (let s = 0; s < count; s++) if (values[s] !== 2 * prev[s]! - prev2[s]!) changes++;
    this.varint(changes);
    let last = -1;
    for (let s = 0; s < count; s++) {
      const v = values[s]!;
      const p = 2 * prev[s]! - prev2[s]!;
      prev2[s] = prev[s]!;
      prev[s] = v;
      if (v === p) continue;
      this.varint(s - last - 1);
      this.varint(zz(v - p));
      last = s;
    }
    this.frames++;
    if (++this.framesInBlock >= RECORD_FLUSH_FRAMES || this.n >= BLOCK_BYTES) this.flush();
  }

  note(n: RecordingNote): void {
    if (this.fd === null) return;
    // Notes before the first frame (the grant a service gives at start) wait for the header.
    if (this.first) this.early.push(n);
    else this.json(TAG.note, n);
  }
  private early: RecordingNote[] = [];

  /** Compress what is buffered as one gzip member and append it. */
  flush(): void {
    if (this.fd === null || this.n === 0) return;
    const head = this.bytesWritten === 0 ? Buffer.concat([MAGIC, Buffer.from([FORMAT_VERSION]), this.buf.subarray(0, this.n)]) : this.buf.subarray(0, this.n);
    const z = gzipSync(head, { level: 1 });
    writeSync(this.fd, z);
    this.bytesWritten += z.length;
    this.n = 0;
    this.framesInBlock = 0;
  }

  /**
   * Close the recording. One without a frame (a stepped core never stepped) still gets its header, with
   * `firstFrameNs` as t0 (when the first frame would have been), and its notes, so that it replays.
   */
  close(firstFrameNs?: bigint): void {
    if (this.fd === null) return;
    if (this.first && firstFrameNs !== undefined) {
      this.first = false;
      this.json(TAG.header, { format: FORMAT_VERSION, ...this.header, t0_ns: firstFrameNs.toString(), started_at: new Date().toISOString() } satisfies RecordingHeader);
      for (const n of this.early) this.json(TAG.note, n);
      this.early = [];
    }
    if (!this.first) {
      this.ensure(1);
      this.byte(TAG.end);
    }
    this.flush();
    closeSync(this.fd);
    this.fd = null;
  }
}

/** A recording read back: the header, and a cursor that walks its frames and notes in order. */
export class RecordingReader {
  readonly header: RecordingHeader;
  /** True when the writer closed the recording (an end record was found). */
  complete = false;
  private pos: number;
  readonly values: Float64Array;
  t = 0;
  private dt = 0;
  /** Format 3 with `host_times`: the host time the core read in the current frame's cycle, ns from t0_ns. */
  hostT = 0;
  private hostDt = 0;
  rc = 0;
  /** Frames read so far (1-based index of the current frame). */
  frame = 0;
  /** Byte offset (decompressed) of an incomplete last frame, when the writer was killed inside one. */
  cutAt: number | null = null;
  /** Notes met since the last call to takeNotes(). */
  private pending: RecordingNote[] = [];

  private constructor(private readonly data: Buffer) {
    const lead = Buffer.concat([MAGIC, Buffer.from([data[MAGIC.length] ?? FORMAT_VERSION])]);
    if (data.length < lead.length && lead.subarray(0, data.length).equals(data)) throw new RecordingError('REPLAY_TRUNCATED', 'the recording ends inside its magic (the writer stopped in its first block)');
    if (data.length < MAGIC.length + 1 || !data.subarray(0, MAGIC.length).equals(MAGIC)) throw new RecordingError('REPLAY_BAD_FORMAT', 'not a recording (no HILREC magic)');
    if (!READABLE_FORMATS.includes(data[MAGIC.length]!)) throw new RecordingError('REPLAY_BAD_FORMAT', `recording format ${data[MAGIC.length]} is not supported (this build reads formats ${READABLE_FORMATS.join(', ')})`);
    this.version = data[MAGIC.length]!;
    this.pos = MAGIC.length + 1;
    const h = this.record();
    if (!h || h.tag !== TAG.header) throw new RecordingError('REPLAY_TRUNCATED', 'the recording ends before its header is complete');
    this.header = h.json as RecordingHeader;
    this.values = new Float64Array(slotLayout(this.header.axisCount).count);
    this.prev2 = new Float64Array(this.values.length);
  }
  private readonly prev2: Float64Array;
  /** The format version byte of the file (READABLE_FORMATS). */
  readonly version: number;

  static open(path: string): RecordingReader {
    if (!existsSync(path)) throw new RecordingError('REPLAY_MISSING', `no recording at ${path}`);
    let raw: Buffer;
    try {
      raw = readFileSync(path);
    } catch (e) {
      throw new RecordingError('REPLAY_MISSING', `cannot read the recording ${path}: ${(e as Error).message}`);
    }
    return RecordingReader.fromBytes(raw, path);
  }

  /** Only the header of a recording: inflates its first blocks, not the whole file (a big recording is megabytes). */
  static header(path: string): RecordingHeader {
    let fd: number;
    try {
      fd = openSync(path, 'r');
    } catch {
      return RecordingReader.open(path).header; // the same errors as a whole read
    }
    try {
      const head = Buffer.alloc(256 * 1024);
      const n = readSync(fd, head, 0, head.length, 0);
      try {
        return RecordingReader.fromBytes(head.subarray(0, n), path).header;
      } catch {
        return RecordingReader.open(path).header; // a header beyond the first blocks, or a bad file: read it all
      }
    } finally {
      closeSync(fd);
    }
  }

  static fromBytes(raw: Buffer, where = 'recording'): RecordingReader {
    if (raw.length === 0) throw new RecordingError('REPLAY_TRUNCATED', `${where} is empty (the writer stopped before its first block)`);
    let data: Buffer;
    try {
      // A killed writer leaves a partial last member: take what inflates (Z_SYNC_FLUSH accepts a cut end).
      data = gunzipSync(raw, { finishFlush: constants.Z_SYNC_FLUSH });
    } catch (e) {
      throw new RecordingError('REPLAY_BAD_FORMAT', `${where} is not a gzip recording: ${(e as Error).message}`);
    }
    return new RecordingReader(data);
  }

  private varint(): number | null {
    let u = 0;
    let mul = 1;
    for (;;) {
      if (this.pos >= this.data.length) return null;
      const b = this.data[this.pos++]!;
      u += (b & 0x7f) * mul;
      if (b < 0x80) return u;
      mul *= 0x80;
    }
  }

  /** Reads one whole header or note record; null when the data ends inside it. */
  private record(): { tag: number; json: unknown } | null {
    const start = this.pos;
    const tag = this.data[this.pos++];
    const len = this.varint();
    if (tag === undefined || len === null || this.pos + len > this.data.length) {
      this.pos = start;
      return null;
    }
    const json: unknown = JSON.parse(this.data.toString('utf8', this.pos, this.pos + len));
    this.pos += len;
    return { tag, json };
  }

  /**
   * Advance to the next frame, applying its changes to `values` (notes met on the way are kept for
   * takeNotes). False at the end of the recording: clean (complete) or cut (a truncated recording ends at
   * its last complete frame).
   */
  next(): boolean {
    for (;;) {
      if (this.pos >= this.data.length) return false;
      const tag = this.data[this.pos]!;
      if (tag === TAG.end) {
        this.complete = true;
        return false;
      }
      if (tag === TAG.note) {
        const r = this.record();
        if (!r) return false;
        this.pending.push(r.json as RecordingNote);
        continue;
      }
      if (tag !== TAG.frame) throw new RecordingError('REPLAY_BAD_FORMAT', `unknown record tag ${tag} after frame ${this.frame}`);
      const start = this.pos++;
      const ddt = this.varint();
      const rc = this.varint();
      const hddt = this.header.host_times ? this.varint() : 0;
      const changes = this.varint();
      if (ddt === null || rc === null || hddt === null || changes === null) return this.cut(start);
      // Decode into a scratch list first so a cut frame leaves the values of the last complete one.
      const slots: number[] = [];
      let s = -1;
      for (let k = 0; k < changes; k++) {
        const gap = this.varint();
        const d = this.varint();
        if (gap === null || d === null) return this.cut(start);
        s += gap + 1;
        if (s >= this.values.length) throw new RecordingError('REPLAY_BAD_FORMAT', `frame ${this.frame + 1} names slot ${s} of ${this.values.length}`);
        slots.push(s, unzz(d));
      }
      const v = this.values;
      const p2 = this.prev2;
      for (let i = 0; i < v.length; i++) {
        const cur = v[i]!;
        v[i] = 2 * cur - p2[i]!; // the writer's prediction
        p2[i] = cur;
      }
      for (let k = 0; k < slots.length; k += 2) {
        const i = slots[k]!;
        v[i] = v[i]! + slots[k + 1]!;
      }
      this.dt += unzz(ddt);
      this.t += this.dt;
      this.hostDt += unzz(hddt);
      this.hostT += this.hostDt;
      this.rc = unzz(rc);
      this.frame++;
      return true;
    }
  }

  private cut(start: number): false {
    // The rest, from `start`, is an incomplete frame: the recording ends at the frame before it.
    this.cutAt = start;
    this.pos = this.data.length;
    return false;
  }

  takeNotes(): RecordingNote[] {
    const n = this.pending;
    this.pending = [];
    return n;
  }
}
