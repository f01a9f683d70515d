// The worker bridge of the OLP server (document 3 part 4 POST /cadquery/topology and POST /seam, part 7
// the worker codes). Document 3 says the routes forward to a CAD and a seam worker and lists the codes a
// client sees; how a request reaches a worker is ours (docs/profile.md "OLP server: worker bridge"):
//
// - a worker is a process started from a configured command, at most `size` of them per route, started
//   on demand and kept for the next request; one request at a time per worker, no queue: with every
//   worker of the route busy the request is 429 busy;
// - frames both ways are a 4-byte big-endian length and that many bytes of UTF-8 JSON; the worker's
//   first frame says whether it is ready ({schema, ready: true, pid, operations}) or why its
//   environment is missing ({ready: false, code: "unavailable", error});
// - a request frame is {id, route, body} with the client's body spliced in as it came (it was decoded
//   strictly first); the reply frame is {id, ok: true, result, part} or {id, ok: false, code:
//   "invalid_request", error};
// - a worker that cannot be started, or dies or refuses before it is ready, is 503 unavailable; one that
//   dies while it holds a request is 502 worker_failed; a reply that is not such a frame (not JSON,
//   another id, another shape, over the reply bound) is 502 invalid_response and the worker is stopped;
// - the client going away (its socket closed or half-closed) is 408 canceled, a request over the time
//   limit 504 timeout; in both cases the worker is killed (SIGKILL: it holds nothing that needs a clean
//   exit) and replaced on demand.

import { spawn, type ChildProcess } from 'node:child_process';
import { OlpError } from './http.ts';

export const WORKER_SCHEMA = 'offline-programming.worker.v1';
/** Default number of workers per route (docs/profile.md). */
export const DEFAULT_POOL_SIZE = 2;
/** Default time limit of one worker request, and of a worker's start (docs/profile.md). */
export const DEFAULT_WORKER_TIMEOUT_MS = 120_000;
/** A new worker must say it is ready within this long (or the request limit, when that is longer). */
export const WORKER_START_TIMEOUT_MS = 30_000;
/** A reply frame longer than this is invalid_response (a tessellation of a 12 MiB STEP file fits many times). */
export const MAX_REPLY_BYTES = 256 * 1024 * 1024;

export type WorkerRoute = 'cadquery/topology' | 'seam';

export interface WorkerReply {
  result: unknown;
  /** The part the operation ran on (X-Offline-Seam-Part on /seam). */
  part: string;
  /** The worker's process id (for logs). */
  pid: number;
}

/** Encode one frame. */
export function frame(payload: Uint8Array | string): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : Buffer.from(payload);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  return Buffer.concat([head, body]);
}

/** Splits a byte stream into frames; calls `onFrame` per frame, `onOversize` once when a frame passes `max`. */
export class FrameReader {
  private chunks: Buffer[] = [];
  private size = 0;
  private dead = false;
  constructor(
    private readonly max: number,
    private readonly onFrame: (f: Buffer) => void,
    private readonly onOversize: (declared: number) => void,
  ) {}

  push(c: Buffer): void {
    if (this.dead) return;
    this.chunks.push(c);
    this.size += c.length;
    for (;;) {
      if (this.size < 4) return;
      let buf = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
      this.chunks = [buf];
      const n = buf.readUInt32BE(0);
      if (n > this.max) {
        this.dead = true;
        this.onOversize(n);
        return;
      }
      if (buf.length < 4 + n) return;
      const f = buf.subarray(4, 4 + n);
      buf = buf.subarray(4 + n);
      this.chunks = buf.length ? [buf] : [];
      this.size = buf.length;
      this.onFrame(Buffer.from(f));
    }
  }
}

type Pending = { id: number; resolve: (r: WorkerReply) => void; reject: (e: OlpError) => void };

/** One worker process. */
class Worker {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  busy = false;
  exited = false;
  private isReady = false;
  private pending: Pending | null = null;
  private stderrTail = '';
  private failReady: (e: OlpError) => void = () => undefined;

  constructor(
    command: readonly string[],
    private readonly label: string,
    private readonly log: (l: string) => void,
    private readonly onGone: (w: Worker) => void,
  ) {
    this.child = spawn(command[0]!, command.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
    let okReady: () => void = () => undefined;
    this.ready = new Promise<void>((res, rej) => {
      okReady = res;
      this.failReady = rej;
    });
    this.ready.catch(() => undefined);
    const reader = new FrameReader(MAX_REPLY_BYTES, (f) => this.onFrame(f, okReady), (n) => this.invalid(`a frame of ${n} bytes (over ${MAX_REPLY_BYTES})`));
    this.child.stdout!.on('data', (c: Buffer) => reader.push(c));
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      this.stderrTail = (this.stderrTail + d).slice(-2000);
    });
    this.child.stdin!.on('error', () => undefined); // a dead worker's pipe: its exit says what happened
    this.child.once('error', (e) => {
      this.exited = true;
      this.fail(new OlpError(503, 'unavailable', `${this.label} worker cannot be started: ${e.message}`));
      this.onGone(this);
    });
    this.child.once('exit', (code, signal) => {
      this.exited = true;
      const how = signal ? `signal ${signal}` : `exit code ${code}`;
      if (!this.isReady) this.fail(new OlpError(503, 'unavailable', `${this.label} worker ended before it was ready (${how})${this.tail()}`));
      else this.fail(new OlpError(502, 'worker_failed', `${this.label} worker ended while it held the request (${how})${this.tail()}`));
      this.onGone(this);
    });
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  private tail(): string {
    const t = this.stderrTail.trim().split('\n').slice(-3).join(' | ');
    return t ? `: ${t}` : '';
  }

  private fail(e: OlpError): void {
    this.failReady(e);
    const p = this.pending;
    this.pending = null;
    p?.reject(e);
  }

  private invalid(why: string): void {
    const p = this.pending;
    this.pending = null;
    this.kill();
    const e = new OlpError(502, 'invalid_response', `${this.label} worker answered ${why}`);
    this.failReady(new OlpError(503, 'unavailable', `${this.label} worker did not say it was ready: ${why}`));
    p?.reject(e);
  }

  private onFrame(f: Buffer, okReady: () => void): void {
    let v: any;
    try {
      v = JSON.parse(f.toString('utf8'));
    } catch {
      return this.invalid(`a frame that is not JSON (${JSON.stringify(f.subarray(0, 60).toString('latin1'))})`);
    }
    if (!this.isReady) {
      if (v && v.schema === WORKER_SCHEMA && v.ready === true) {
        this.isReady = true;
        return okReady();
      }
      const why = v && v.ready === false && typeof v.error === 'string' ? v.error : 'its first frame is not a ready frame';
      this.failReady(new OlpError(503, 'unavailable', `${this.label} worker environment: ${why}`));
      this.kill();
      return;
    }
    const p = this.pending;
    if (!p) return this.invalid('a frame nobody asked for');
    if (!v || typeof v !== 'object' || Array.isArray(v) || v.id !== p.id) return this.invalid(`a frame for another request (id ${JSON.stringify(v?.id)}, expected ${p.id})`);
    if (v.ok === true && 'result' in v && typeof v.part === 'string') {
      this.pending = null;
      return p.resolve({ result: v.result, part: v.part, pid: this.pid });
    }
    if (v.ok === false && v.code === 'invalid_request' && typeof v.error === 'string') {
      this.pending = null;
      return p.reject(new OlpError(400, 'invalid_request', v.error));
    }
    return this.invalid('a frame that is neither {ok: true, result, part} nor {ok: false, code: invalid_request, error}');
  }

  /** Send one request; resolves with the reply or rejects with the part 7 code. */
  send(id: number, route: WorkerRoute, body: Uint8Array): Promise<WorkerReply> {
    return new Promise<WorkerReply>((resolve, reject) => {
      this.pending = { id, resolve, reject };
      const head = Buffer.from(`{"id":${id},"route":${JSON.stringify(route)},"body":`);
      const payload = Buffer.concat([head, body, Buffer.from('}')]);
      const len = Buffer.alloc(4);
      len.writeUInt32BE(payload.length);
      this.child.stdin!.write(len);
      this.child.stdin!.write(payload);
    });
  }

  /** Killed by the bridge (its exit may not have been seen yet): never handed another request. */
  killed = false;

  /** Whether the worker can take a request: neither exited nor killed. */
  get usable(): boolean {
    return !this.exited && !this.killed;
  }

  kill(): void {
    this.killed = true;
    if (!this.exited) this.child.kill('SIGKILL');
    this.onGone(this);
  }
}

export interface PoolOptions {
  /** Which worker, for messages ("CAD", "seam"). */
  label: string;
  command: readonly string[];
  size: number;
  timeoutMs: number;
  log: (l: string) => void;
}

/** The workers of one route. */
export class WorkerPool {
  private readonly workers = new Set<Worker>();
  private nextId = 1;
  private closed = false;

  constructor(readonly o: PoolOptions) {}

  get busy(): number {
    return [...this.workers].filter((w) => w.busy).length;
  }

  /** Process ids of the running workers (for logs and the unit tests). */
  pids(): number[] {
    return [...this.workers].filter((w) => w.usable).map((w) => w.pid);
  }

  /**
   * Run one request on a free worker. `gone` resolves when the client goes away. Rejects with the part 7
   * code: busy, canceled, timeout, unavailable, worker_failed, invalid_response, invalid_request.
   */
  async run(route: WorkerRoute, body: Uint8Array, gone: AbortSignal): Promise<WorkerReply> {
    if (this.closed) throw new OlpError(503, 'unavailable', `${this.o.label} worker pool is closed`);
    let w = [...this.workers].find((x) => !x.busy && x.usable);
    if (!w) {
      if (this.workers.size >= this.o.size) throw new OlpError(429, 'busy', `every ${this.o.label} worker is busy (${this.o.size} at most)`);
      w = new Worker(this.o.command, this.o.label, this.o.log, (x) => this.workers.delete(x));
      this.workers.add(w);
    }
    const worker = w;
    worker.busy = true;
    let timer: NodeJS.Timeout | undefined;
    let onGone: (() => void) | undefined;
    let expire: (what: string) => void = () => undefined;
    const stop = new Promise<never>((_res, rej) => {
      expire = (what) => {
        const limit = what === 'starting' ? Math.max(this.o.timeoutMs, WORKER_START_TIMEOUT_MS) : this.o.timeoutMs;
        this.o.log(`olp: ${this.o.label} worker ${worker.pid} over its ${limit} ms limit (${what}): killed`);
        worker.kill();
        rej(new OlpError(504, 'timeout', `the ${this.o.label} worker ran longer than ${limit} ms (${what})`));
      };
      onGone = () => {
        this.o.log(`olp: client went away: ${this.o.label} worker ${worker.pid} killed`);
        worker.kill();
        rej(new OlpError(408, 'canceled', 'the client went away'));
      };
      if (gone.aborted) onGone();
      else gone.addEventListener('abort', onGone, { once: true });
    });
    stop.catch(() => undefined);
    try {
      // A new worker's start has a limit of its own; the request limit counts from the request.
      timer = setTimeout(() => expire('starting'), Math.max(this.o.timeoutMs, WORKER_START_TIMEOUT_MS));
      await Promise.race([worker.ready, stop]);
      clearTimeout(timer);
      timer = setTimeout(() => expire('request'), this.o.timeoutMs);
      return await Promise.race([worker.send(this.nextId++, route, body), stop]);
    } finally {
      clearTimeout(timer);
      if (onGone) gone.removeEventListener('abort', onGone);
      worker.busy = false;
      if (!worker.usable) this.workers.delete(worker);
    }
  }

  close(): void {
    this.closed = true;
    for (const w of this.workers) w.kill();
    this.workers.clear();
  }
}
