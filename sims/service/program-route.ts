// POST /v1/program: prepare_program (document 1 part 4; document 2 "Admission by the control service").
// Order: declared body size (413), the two headers (invalid_control_generation), the fence (the
// service's own check), one upload at a time (busy, native_result.Reason 5), the body read up to its
// limit, the file decoded in a worker thread, then the live-machine checks of programs.ts.

import type { IncomingMessage } from 'node:http';
import { Worker } from 'node:worker_threads';
import type { CompiledMachine } from '../config/types.ts';
import type { Trajectory } from '../dense/codec.ts';
import type { Reply } from './authority.ts';
import { Refusal } from './envelope.ts';
import { ProgramRefusal, admitProgram } from './programs.ts';
import type { PreparedProgram, ProgramAxis } from './programs.ts';

/** Document 1 part 8: 1048580 + 250000 x 153. */
export const PROGRAM_BODY_LIMIT = 39298580;
export const PROGRAM_HEADER_LIMIT = 1048576;
const OP = 'prepare_program';
const WORKER = new URL('../dense/decode-worker.mjs', import.meta.url);
const UINT = /^[1-9][0-9]{0,19}$/;

export interface ProgramRouteOptions {
  /** The service's fence check for prepare_program; throws a Refusal. */
  fence: (session: string, generation: bigint) => unknown;
  machine: CompiledMachine;
  /** The pair revision the service was started with (docs/profile.md "Program admission"). */
  manifestRevision: bigint;
}

export class ProgramUploads {
  private uploading = false;
  /** The last admitted program; start_program consumes it. */
  prepared: PreparedProgram | undefined;
  private readonly axes: ProgramAxis[];

  constructor(private readonly o: ProgramRouteOptions) {
    this.axes = o.machine.axes.map((a) => ({ id: a.id, rad: a.position_unit === 'rad', min: a.min_position, max: a.max_position, maxVelocity: a.max_velocity }));
  }

  async prepare(req: IncomingMessage): Promise<Reply> {
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (declared > PROGRAM_BODY_LIMIT) return this.tooLarge(req);
    const session = String(req.headers['x-control-session'] ?? '');
    const genText = String(req.headers['x-control-generation'] ?? '');
    if (!UINT.test(genText) || BigInt(genText) >= 1n << 64n) {
      req.resume();
      return fail(409, 'invalid_control_generation', 'X-Control-Generation is not a nonzero decimal uint64');
    }
    try {
      this.o.fence(session, BigInt(genText));
    } catch (e) {
      req.resume();
      if (e instanceof Refusal) return fail(e.status, e.label, e.detail, e.data);
      throw e;
    }
    if (this.uploading) {
      req.resume();
      return { status: 409, body: { operation: OP, error: 'busy: another program upload is in progress', native_result: { Result: 1, Reason: 5 } } };
    }
    this.uploading = true;
    try {
      const body = await readLimited(req, PROGRAM_BODY_LIMIT);
      if (body === 'too_large') return fail(413, 'body_too_large', `a program is at most ${PROGRAM_BODY_LIMIT} bytes`);
      const decoded = await decodeOffLoop(body);
      if ('reason' in decoded) return fail(409, decoded.reason, decoded.message.slice(decoded.reason.length + 2));
      try {
        this.prepared = admitProgram(decoded.ok, this.axes, this.o.manifestRevision);
      } catch (e) {
        if (!(e instanceof ProgramRefusal)) throw e;
        return { status: 409, body: { operation: OP, error: e.text, data: e.limitViolation ? { limit_violation: e.limitViolation } : undefined } };
      }
      const p = this.prepared;
      return {
        status: 200,
        body: {
          operation: OP,
          data: { process_markers: [], identity: p.identity, requires_process_io: p.requiresProcessIo, segments: p.segments, samples: p.samples, normalised_samples: p.points.segment.length, axis_mask: p.axisMask },
        },
      };
    } finally {
      this.uploading = false;
    }
  }

  private tooLarge(req: IncomingMessage): Reply {
    let seen = 0;
    req.on('data', (c: Buffer) => {
      seen += c.length;
      if (seen > 64 * 1024 * 1024) req.socket.destroy();
    });
    req.resume();
    return fail(413, 'body_too_large', `a program is at most ${PROGRAM_BODY_LIMIT} bytes`);
  }
}

function fail(status: 409 | 413 | 404, label: string, detail?: string, data?: unknown): Reply {
  return { status, body: { operation: OP, error: detail ? `${label}: ${detail}` : label, data } };
}

function readLimited(req: IncomingMessage, limit: number): Promise<Buffer | 'too_large'> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      total += c.length;
      if (over) return;
      if (total > limit) {
        over = true;
        chunks.length = 0;
        resolve('too_large');
        return;
      }
      chunks.push(c);
    });
    req.once('end', () => !over && resolve(Buffer.concat(chunks, total)));
    req.once('error', reject);
  });
}

type Decoded = { ok: Trajectory } | { reason: string; message: string };

function decodeOffLoop(body: Buffer): Promise<Decoded> {
  return new Promise((resolve, reject) => {
    const w = new Worker(WORKER);
    const bytes = new Uint8Array(body.length);
    bytes.set(body);
    w.once('message', (m: Decoded | { defect: string }) => {
      void w.terminate();
      if ('defect' in m) reject(new Error(`dense decoder: ${m.defect}`));
      else resolve(m);
    });
    w.once('error', (e) => reject(e));
    w.postMessage({ bytes, maxHeaderBytes: PROGRAM_HEADER_LIMIT }, [bytes.buffer]);
  });
}

/** The manifest pair revision the service runs with: CELL_MANIFEST_REVISION (decimal u64), default 1 (docs/profile.md). */
export function manifestRevisionFromEnv(): bigint {
  const v = process.env.CELL_MANIFEST_REVISION;
  return v !== undefined && /^(0|[1-9][0-9]{0,19})$/.test(v) && BigInt(v) < 1n << 64n ? BigInt(v) : 1n;
}
