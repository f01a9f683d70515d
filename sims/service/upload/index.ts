// Reading a POST /v1/control body that may be a prepare_trajectory upload (document 1 part 4 "Envelope
// rules" and "prepare_trajectory", part 8 limits; docs/profile.md "Envelope check order").
//
//   uploadBody(req, { axes, admit, release }) →
//     { kind: 'ordinary', body }      not an upload and at most 16384 bytes: decodeRequest as usual
//     { kind: 'refused', refusal }    413 body_too_large, a prefix refusal, admit's refusal, or the full
//                                     decode's refusal (request_envelope_changed included)
//     { kind: 'trajectory', prefix, body }  admitted and fully decoded into typed arrays
//     { kind: 'aborted' }             the client went away mid-upload; the decode was dropped
//
// The first 16384 bytes are scanned (scanPrefix) and `admit` is called before anything else is read (the
// fence check and the upload slot are the service's). After admit, the body streams through one warm
// worker thread (worker.ts) with flow control; the service's event loop only copies bytes. `release` is
// called exactly once when an admitted upload ends without a decoded body (refused or aborted), so the
// service can free the slot it reserved.

import type { IncomingMessage } from 'node:http';
import { Worker } from 'node:worker_threads';
import { REQUEST_SCHEMA, Refusal } from '../envelope.ts';
import {
  TRAJECTORY_BODY_LIMIT,
  TrajectoryDecoder,
  UploadRefusal,
  type Envelope,
  type PointArrays,
  type TrajectoryBody,
} from './decoder.ts';
import { workerEntry } from '../../paths.ts';
import { DISCARD_BOUND_BYTES, discardBody, REQUEST_PREFIX_BYTES } from '../../primitives.ts';
import { checkSameEnvelope, scanPrefix, type AdmittedPrefix } from './prefix.ts';
import { PLAN_ARENA_MIN_BYTES, PlanLease, type PlanArena } from '../../core/plan-arena.ts';
import type { FromWorker, ToWorker } from './protocol.ts';

export { MAX_POINTS, TRAJECTORY_BODY_LIMIT, TrajectoryDecoder, UploadRefusal, decodeTrajectory } from './decoder.ts';
export type { Envelope, PointArrays, TrajectoryBody, UploadCode } from './decoder.ts';
export { checkSameEnvelope, scanPrefix, type AdmittedPrefix, type PrefixScan } from './prefix.ts';

export type UploadOutcome =
  | { kind: 'ordinary'; body: Uint8Array }
  | { kind: 'refused'; refusal: Refusal; admitted: boolean }
  | { kind: 'trajectory'; prefix: AdmittedPrefix; body: TrajectoryBody }
  | { kind: 'aborted'; admitted: boolean };

export interface UploadOptions {
  /** The machine's axis count. */
  axes: number;
  /** Fence check and upload slot reservation; throw a Refusal to refuse (the rest is not read). */
  admit(prefix: AdmittedPrefix): Promise<void> | void;
  /** Called once when an admitted upload ends without a decoded body (refusal or disconnect). */
  release?(): void;
  /** Body limit; default 222516384 bytes (document 1 part 8). */
  limit?: number;
  /** The decode worker; default the shared warm one. */
  worker?: UploadWorker;
  /**
   * The core's plan arena now (sims/core/plan-arena.ts): a large upload is decoded into a slot of it when
   * one is free (the result's `lease`), else into arrays of its own as before.
   */
  arena?: () => PlanArena | undefined;
}


/**
 * Refusals before the body is read discard as the service does for ordinary bodies (DISCARD_BOUND_BYTES,
 * 64 MiB); a body that crosses the 222516384-byte limit while streaming is cut off sooner (1 MiB past
 * the limit).
 */
export const DISCARD_PAST_LIMIT = 1024 * 1024;
/** Flow control: stop reading the socket while this many bytes wait for the worker; resume below half. */
export const MAX_IN_FLIGHT = 8 * 1024 * 1024;
/** Bytes gathered into one message to the worker. */
const BATCH = 1024 * 1024;

// ---- the warm worker ----

interface Pending {
  onAck(bytes: number): void;
  onDone(m: FromWorker): void;
}

/** One worker thread decoding uploads, kept warm between them. */
export class UploadWorker {
  private worker: Worker | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly stats = new Map<number, (m: { active: number; heldBytes: number }) => void>();

  private get w(): Worker {
    if (!this.worker) {
      const w = new Worker(workerEntry('upload'));
      w.on('message', (m: FromWorker) => this.onMessage(m));
      const fail = (message: string) => {
        if (this.worker === w) this.worker = undefined;
        for (const [id, p] of this.pending) p.onDone({ t: 'crashed', id, message });
        this.pending.clear();
      };
      w.on('error', (e) => fail(e.message));
      w.on('exit', (code) => fail(`upload worker exited (${code})`));
      // After the listeners (sims/warm-worker.ts says why): a kept worker holds no reference to the process.
      w.unref();
      this.worker = w;
    }
    return this.worker;
  }

  private onMessage(m: FromWorker): void {
    if (m.t === 'stats') {
      this.stats.get(m.id)?.({ active: m.active, heldBytes: m.heldBytes });
      this.stats.delete(m.id);
      return;
    }
    const p = this.pending.get(m.id);
    if (!p) return;
    if (m.t === 'ack') {
      if (m.spare) this.batches.give(m.spare);
      return p.onAck(m.bytes);
    }
    this.pending.delete(m.id);
    p.onDone(m);
  }

  /** Batches the worker handed back, for the next chunks of any upload. */
  readonly batches = new BatchPool();

  /** Start a decode session (into a plan arena slot with `lease`). */
  open(axes: number, expectedBytes: number | undefined, p: Pending, lease?: PlanLease): WorkerSession {
    const id = this.nextId++;
    this.pending.set(id, p);
    this.post({ t: 'begin', id, axes, expectedBytes, ...(lease ? { arena: { buffer: lease.arena.buffer, slot: lease.slot } } : {}) });
    return {
      chunk: (bytes) => this.post({ t: 'chunk', id, bytes }, [bytes.buffer as ArrayBuffer]),
      end: () => this.post({ t: 'end', id }),
      abort: () => this.post({ t: 'abort', id }),
    };
  }

  private post(m: ToWorker, transfer: ArrayBuffer[] = []): void {
    this.w.postMessage(m, transfer);
  }

  /** Sessions open inside the worker and the bytes they hold (tests: nothing is left after an abort). */
  inspect(): Promise<{ active: number; heldBytes: number }> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.stats.set(id, resolve);
      this.post({ t: 'stats', id });
    });
  }

  /** Sessions the main thread still waits on. */
  get waiting(): number {
    return this.pending.size;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }
}

interface WorkerSession {
  chunk(bytes: Uint8Array): void;
  end(): void;
  abort(): void;
}

/**
 * The main thread's 1 MiB batches, used again once the worker has decoded them. A maximum upload is 212
 * batches: allocated fresh, each was 256 first-touch page faults on the main thread and an unmap in the
 * worker when collected, 222 MB of memory churned per upload while status readers and the core's thread
 * wait (measured with bench/upload-impact.bench.ts). At most the in-flight window and a few more are kept.
 */
export class BatchPool {
  private readonly free: ArrayBuffer[] = [];
  static readonly KEEP = MAX_IN_FLIGHT / BATCH + 4;

  /** A batch of BATCH bytes (its contents are whatever it held: the caller tracks its fill). */
  take(): Uint8Array {
    const b = this.free.pop();
    return b ? new Uint8Array(b) : new Uint8Array(BATCH);
  }

  /** A buffer back from the worker: kept when it is a whole batch and the pool is not full. */
  give(b: ArrayBuffer): void {
    if (b.byteLength === BATCH && this.free.length < BatchPool.KEEP) this.free.push(b);
  }

  get size(): number {
    return this.free.length;
  }
}

let shared: UploadWorker | undefined;
/** The shared warm worker (created on first use). */
export function uploadWorker(): UploadWorker {
  return (shared ??= new UploadWorker());
}

// ---- reading a body ----

/**
 * Read a POST /v1/control body that may be a prepare_trajectory upload. Never rejects for bad input: every
 * outcome is a value (see the file header); it rejects only when `admit` throws something that is not a
 * Refusal (after stopping the read).
 */
export async function uploadBody(req: IncomingMessage, o: UploadOptions): Promise<UploadOutcome> {
  const limit = o.limit ?? TRAJECTORY_BODY_LIMIT;
  const declared = Number(req.headers['content-length'] ?? NaN);
  const tooLarge = () =>
    new UploadRefusal('too_large', 413, 'body_too_large', `prepare_trajectory bodies are at most ${limit} bytes`);
  if (Number.isFinite(declared) && declared > limit) {
    discardBody(req);
    return { kind: 'refused', refusal: tooLarge(), admitted: false };
  }

  const reader = new BodyReader(req);
  // The prefix: 16384 bytes and one more (to see whether a number ends at the boundary and whether more follows).
  const head = await reader.readAtLeast(REQUEST_PREFIX_BYTES + 1);
  if (head === 'aborted') return { kind: 'aborted', admitted: false };
  const complete = reader.ended;
  // The common case, a small complete body that cannot name prepare_trajectory (those bytes absent and
  // no escape that could spell them): an ordinary command, without decoding it here (scanPrefix and
  // lateTrajectory would both answer that, at the cost of two decodes on every control request).
  if (complete && head.length <= REQUEST_PREFIX_BYTES && cannotNameTrajectory(head)) return { kind: 'ordinary', body: head };
  const scan = scanPrefix(head);
  if (scan.kind === 'other') {
    if (complete && head.length <= REQUEST_PREFIX_BYTES) {
      const late = lateTrajectory(head);
      if (late) return { kind: 'refused', refusal: late, admitted: false };
      return { kind: 'ordinary', body: head };
    }
    reader.discard();
    const r = new Refusal(413, 'body_too_large', `ordinary commands are at most ${REQUEST_PREFIX_BYTES} bytes`);
    return { kind: 'refused', refusal: r, admitted: false };
  }
  if (scan.kind === 'refused') {
    if (!complete) reader.discard();
    return { kind: 'refused', refusal: scan.refusal, admitted: false };
  }

  try {
    await o.admit(scan.prefix);
  } catch (e) {
    if (!complete) reader.discard();
    if (e instanceof Refusal) {
      if (e.operation === undefined) e.operation = 'prepare_trajectory';
      return { kind: 'refused', refusal: e, admitted: false };
    }
    throw e;
  }

  let released = false;
  const release = () => {
    if (!released) {
      released = true;
      o.release?.();
    }
  };
  const finishWith = (body: TrajectoryBody): UploadOutcome => {
    try {
      checkSameEnvelope(scan.prefix, body.request);
    } catch (e) {
      release();
      body.points.lease?.release();
      return { kind: 'refused', refusal: e as Refusal, admitted: true };
    }
    return { kind: 'trajectory', prefix: scan.prefix, body };
  };

  if (complete) {
    if (head.length > limit) {
      release();
      return { kind: 'refused', refusal: tooLarge(), admitted: true };
    }
    // Small enough to have arrived whole: decode here (a few microseconds), no worker round trip.
    try {
      const d = new TrajectoryDecoder({ axes: o.axes, expectedBytes: head.length });
      d.push(head);
      return finishWith(d.finish());
    } catch (e) {
      release();
      if (e instanceof Refusal) return { kind: 'refused', refusal: e, admitted: true };
      throw e;
    }
  }

  const expected = Number.isFinite(declared) ? declared : undefined;
  const arena = expected === undefined || expected >= PLAN_ARENA_MIN_BYTES ? o.arena?.() : undefined;
  const slot = arena ? arena.claim() : -1;
  const lease = arena && slot >= 0 ? new PlanLease(arena, slot) : undefined;
  const out = await streamThroughWorker(reader, head, o.axes, limit, expected, o.worker ?? uploadWorker(), lease);
  if (out.kind === 'decoded') return finishWith(out.body);
  release();
  if (out.kind === 'aborted') return { kind: 'aborted', admitted: true };
  reader.discard(out.kind === 'too_large' ? DISCARD_PAST_LIMIT : DISCARD_BOUND_BYTES);
  if (out.kind === 'too_large') return { kind: 'refused', refusal: tooLarge(), admitted: true };
  return { kind: 'refused', refusal: out.refusal, admitted: true };
}

const TRAJECTORY_BYTES = Buffer.from('prepare_trajectory', 'latin1');
const BACKSLASH = 0x5c;

/** True when no JSON text of these bytes can have the string value prepare_trajectory anywhere. */
function cannotNameTrajectory(body: Uint8Array): boolean {
  const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return b.indexOf(BACKSLASH) < 0 && b.indexOf(TRAJECTORY_BYTES) < 0;
}

/**
 * A small, JSON-valid prepare_trajectory body whose operation member came after points: its fence was not
 * in the prefix before points (document 1 part 4 "prepare_trajectory"), so it is refused like a large one.
 */
function lateTrajectory(body: Uint8Array): UploadRefusal | undefined {
  const d = new TrajectoryDecoder({ axes: 1 });
  d.push(body);
  try {
    d.finish();
  } catch {
    // only the raw members matter here
  }
  const raw = d.rawEnvelope();
  if (d.failed || raw.schema !== REQUEST_SCHEMA || raw.operation !== 'prepare_trajectory') return undefined;
  const r = new UploadRefusal(
    'fence_outside_prefix',
    409,
    'invalid_request_envelope',
    `schema, operation, session, generation must appear within the first ${REQUEST_PREFIX_BYTES} bytes, before points`,
  );
  r.operation = 'prepare_trajectory';
  return r;
}

type StreamResult =
  | { kind: 'decoded'; body: TrajectoryBody }
  | { kind: 'refused'; refusal: Refusal }
  | { kind: 'too_large' }
  | { kind: 'aborted' };

function streamThroughWorker(
  reader: BodyReader,
  head: Uint8Array,
  axes: number,
  limit: number,
  declared: number | undefined,
  worker: UploadWorker,
  lease?: PlanLease,
): Promise<StreamResult> {
  return new Promise((resolve) => {
    let posted = 0;
    let acked = 0;
    let settled = false;
    let batch = worker.batches.take();
    let fill = 0;
    const settle = (r: StreamResult) => {
      if (settled) return;
      settled = true;
      reader.stop();
      resolve(r);
    };
    const session = worker.open(axes, declared, {
      onAck(bytes) {
        acked = bytes;
        if (posted - acked < MAX_IN_FLIGHT / 2) reader.resume();
      },
      onDone(m) {
        // The worker's last word on this session: it writes into the slot no more. Decoded, the slot goes on
        // with the points; otherwise it is free again. Not sooner (a body over the limit settles before the
        // worker has read its abort, and a program could claim the slot while queued chunks still land in it).
        if (m.t === 'done' && !settled && lease) (m.points as PointArrays).lease = lease;
        else lease?.release();
        if (m.t === 'done') settle({ kind: 'decoded', body: { request: m.request as Envelope, points: m.points as PointArrays } });
        else if (m.t === 'refused') {
          const r = new UploadRefusal(m.refusal.code, m.refusal.status, m.refusal.label, m.refusal.detail, m.refusal.data);
          if (m.refusal.operation !== undefined) r.operation = m.refusal.operation;
          settle({ kind: 'refused', refusal: r });
        } else if (m.t === 'crashed') {
          process.stderr.write(`upload worker: ${m.message}\n`);
          settle({ kind: 'refused', refusal: new Refusal(409, 'internal_defect', 'the upload decoder failed') });
        } else if (m.t === 'aborted') settle({ kind: 'aborted' });
      },
    }, lease);
    const flush = () => {
      if (fill === 0) return;
      const out = fill === batch.length ? batch : batch.slice(0, fill);
      posted += fill;
      session.chunk(out);
      if (out !== batch) worker.batches.give(batch.buffer as ArrayBuffer); // copied out: still ours
      batch = worker.batches.take();
      fill = 0;
      if (posted - acked >= MAX_IN_FLIGHT) reader.pause();
    };
    /** The batch being filled is not needed any more: back to the pool (it was never posted). */
    const release = () => {
      if (batch.byteLength) worker.batches.give(batch.buffer as ArrayBuffer);
      batch = new Uint8Array(0);
    };
    const take = (c: Uint8Array) => {
      let off = 0;
      while (off < c.length) {
        const n = Math.min(c.length - off, batch.length - fill);
        batch.set(c.subarray(off, off + n), fill);
        fill += n;
        off += n;
        if (fill === batch.length) flush();
      }
    };
    take(head);
    let total = head.length;
    reader.stream({
      data(c) {
        if (settled) return;
        total += c.length;
        if (total > limit) {
          // Stop decoding at once; the caller discards a bounded remainder so the 413 reaches the client.
          session.abort();
          settle({ kind: 'too_large' });
          return;
        }
        take(c);
      },
      end() {
        if (settled) return;
        flush();
        session.end();
        release();
      },
      aborted() {
        if (settled) return;
        session.abort();
        // 'aborted' from the worker settles; the batch being filled goes back to the pool now.
        release();
      },
    });
  });
}

/** Pull-style reading over an IncomingMessage: a head of known size, then streaming, pause/resume, discard. */
class BodyReader {
  private chunks: Buffer[] = [];
  private have = 0;
  ended = false;
  private gone = false;
  private sink: { data(c: Buffer): void; end(): void; aborted(): void } | undefined;
  private wake: (() => void) | undefined;
  private discarding = false;

  constructor(private readonly req: IncomingMessage) {
    req.on('data', (c: Buffer) => {
      if (this.discarding) return;
      if (this.sink) return this.sink.data(c);
      this.chunks.push(c);
      this.have += c.length;
      this.wake?.();
    });
    req.once('end', () => {
      this.ended = true;
      if (this.sink) this.sink.end();
      this.wake?.();
    });
    const gone = () => {
      if (this.ended || this.gone) return;
      this.gone = true;
      this.sink?.aborted();
      this.wake?.();
    };
    req.once('aborted', gone);
    req.once('close', gone);
    req.once('error', gone);
  }

  async readAtLeast(n: number): Promise<Uint8Array | 'aborted'> {
    while (this.have < n && !this.ended && !this.gone) {
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
    if (this.gone && !this.ended) return 'aborted';
    this.req.pause();
    const all = Buffer.concat(this.chunks, this.have);
    this.chunks = [];
    this.have = 0;
    return all;
  }

  stream(sink: { data(c: Buffer): void; end(): void; aborted(): void }): void {
    this.sink = sink;
    if (this.ended) return sink.end();
    if (this.gone) return sink.aborted();
    this.req.resume();
  }

  pause(): void {
    if (!this.discarding) this.req.pause();
  }
  resume(): void {
    if (!this.discarding && this.sink) this.req.resume();
  }
  /** Stop delivering data (the decode is over); what remains waits until discard(). */
  stop(): void {
    this.sink = undefined;
    if (!this.discarding) this.req.pause();
  }
  /** Read and drop what remains, up to `bound` bytes; past it the connection is closed. */
  discard(bound = DISCARD_BOUND_BYTES): void {
    if (this.ended || this.discarding) return;
    this.discarding = true;
    this.sink = undefined;
    discardBody(this.req, bound);
  }
}
