// The OLP server as a client of one cell's control service (document 1): undici over the local Unix
// socket, or HTTPS with mutual TLS 1.3 and a client certificate to the remote listener (document 1
// part 5). Exact JSON both ways (sims/json.ts). Also the telemetry batch reader the telemetry window
// needs (document 1 part 2 "Telemetry binary records"), with the layout constants of sims/core/capture.

import { readFileSync } from 'node:fs';
import { Agent, request, type Dispatcher } from 'undici';
import { decodeJson, encodeJson, JsonDecodeError } from '../json.ts';
import { AXIS_ARRAY_OFFSET, AXIS_BYTES, BATCH_MAGIC, HEADER_BYTES, RECORD_BYTES } from '../core/capture/layout.ts';
import { plain } from './http.ts';

export const REQUEST_SCHEMA = 'svc.rt-control.request.v1';

/** How a catalogue cell's control service is reached. */
export type ControlAddress = { socket: string } | { url: string; cert: string; key: string; ca: string; servername?: string };

/** The control service could not be reached or answered something that is not a reply. */
export class LinkError extends Error {}

export interface Reply {
  status: number;
  /** The Response envelope as plain values (integers past 2^53 as bigint). */
  body: Record<string, any>;
  error?: string;
  data?: any;
}

export interface Fence {
  session: string;
  generation: number | bigint;
}

export class ControlLink {
  private readonly agent: Dispatcher;
  private readonly origin: string;

  constructor(readonly address: ControlAddress, timeoutMs = 10_000) {
    if ('socket' in address) {
      this.origin = 'http://localhost';
      this.agent = new Agent({ connect: { socketPath: address.socket, timeout: timeoutMs }, headersTimeout: 70_000, bodyTimeout: 70_000, keepAliveTimeout: 4_000 });
    } else {
      this.origin = address.url.replace(/\/+$/, '');
      this.agent = new Agent({
        connect: { cert: readFileSync(address.cert), key: readFileSync(address.key), ca: readFileSync(address.ca), minVersion: 'TLSv1.3', timeout: timeoutMs, ...(address.servername ? { servername: address.servername } : {}) },
        headersTimeout: 70_000,
        bodyTimeout: 70_000,
        keepAliveTimeout: 4_000,
      });
    }
  }

  /** One exchange; a transport failure is a LinkError. */
  async raw(method: 'GET' | 'POST', path: string, body?: Uint8Array | string, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<{ status: number; bytes: Buffer }> {
    try {
      const res = await request(`${this.origin}${path}`, { method, dispatcher: this.agent, body, headers, ...(signal ? { signal } : {}) });
      return { status: res.statusCode, bytes: Buffer.from(await res.body.arrayBuffer()) };
    } catch (e) {
      throw new LinkError(`${method} ${path}: ${(e as Error).message}`);
    }
  }

  private async json(method: 'GET' | 'POST', path: string, body?: Uint8Array | string, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Reply> {
    const r = await this.raw(method, path, body, headers, signal);
    let v: unknown;
    try {
      v = plain(decodeJson(r.bytes));
    } catch (e) {
      if (e instanceof JsonDecodeError) throw new LinkError(`${method} ${path}: reply is not JSON (HTTP ${r.status})`);
      throw e;
    }
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new LinkError(`${method} ${path}: reply is not an object`);
    const b = v as Record<string, any>;
    return { status: r.status, body: b, error: typeof b.error === 'string' ? b.error : undefined, data: b.data };
  }

  describe(signal?: AbortSignal): Promise<Reply> {
    return this.json('GET', '/v1/describe', undefined, {}, signal);
  }

  status(): Promise<Reply> {
    return this.json('GET', '/v1/status');
  }

  /** POST /v1/control with the schema, the fence when given, and the operation's fields. */
  op(operation: string, fence: Fence | undefined, fields: Record<string, unknown> = {}): Promise<Reply> {
    const body = { schema: REQUEST_SCHEMA, operation, ...(fence ? { session: fence.session, generation: fence.generation } : {}), ...fields };
    return this.json('POST', '/v1/control', encodeJson(body), { 'content-type': 'application/json' });
  }

  /** POST /v1/program (prepare_program) with the dense file. */
  program(blob: Uint8Array, fence: Fence): Promise<Reply> {
    return this.json('POST', '/v1/program', blob, { 'content-type': 'application/octet-stream', 'x-control-session': fence.session, 'x-control-generation': String(fence.generation) });
  }

  /** GET /v1/telemetry?after= as raw bytes. */
  async telemetry(after: bigint): Promise<Buffer> {
    const r = await this.raw('GET', `/v1/telemetry?after=${after}`);
    if (r.status !== 200) throw new LinkError(`telemetry: HTTP ${r.status}`);
    return r.bytes;
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => undefined);
  }
}

/** What the telemetry window keeps of one capture record. */
export interface WindowSample {
  t_ns: bigint;
  seq: bigint;
  armed: number;
  active_mode: number;
  motion_state: number;
  position_counts: number[];
}

/** Decode a telemetry batch (document 1 part 2); the header's checks as a reader must make them. */
export function decodeBatch(b: Buffer): { last: bigint; axisCount: number; records: WindowSample[] } {
  if (b.length < HEADER_BYTES) throw new LinkError(`telemetry batch of ${b.length} bytes is shorter than its header`);
  if (b.readUInt32LE(0) !== BATCH_MAGIC || b.readUInt16LE(4) !== 1 || b.readUInt16LE(6) !== HEADER_BYTES || b.readUInt32LE(272) !== RECORD_BYTES) {
    throw new LinkError('telemetry batch header is not TelemetryBatchHeaderV1');
  }
  const axisCount = b.readUInt32LE(264);
  const count = b.readUInt32LE(268);
  if (axisCount < 1 || axisCount > 16 || b.length !== HEADER_BYTES + count * RECORD_BYTES) throw new LinkError('telemetry batch length or axis count is wrong');
  const records: WindowSample[] = [];
  for (let i = 0; i < count; i++) {
    const o = HEADER_BYTES + i * RECORD_BYTES;
    const pos: number[] = [];
    for (let a = 0; a < axisCount; a++) pos.push(b.readInt32LE(o + AXIS_ARRAY_OFFSET + a * AXIS_BYTES));
    records.push({ t_ns: b.readBigUInt64LE(o), seq: b.readBigUInt64LE(o + 8), armed: b.readUInt32LE(o + 136), active_mode: b.readUInt32LE(o + 144), motion_state: b.readUInt32LE(o + 148), position_counts: pos });
  }
  return { last: b.readBigUInt64LE(248), axisCount, records };
}
