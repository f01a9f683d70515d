// The offline programming server's HTTP conventions (document 3 part 2 "Conventions", part 7 "Errors"):
// JSON bodies read against a per-route byte limit (413 payload_too_large past it), decoded strictly
// (trailing data refused) with unknown fields left alone, replies gzip-compressed when the client
// accepts gzip, and the two error shapes: machine-control routes {error, detail, limit_violation?},
// authoring and service routes {ok: false, code, error}.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import { decodeJson, encodeJson, JsonDecodeError, JsonNumber, JsonObject, type JsonValue } from '../json.ts';
import { closeAfterReply, readBoundedBody } from '../primitives.ts';

/** Part 2 body limits. */
export const DENSE_EXECUTION_BODY_BYTES = 64 * 1024;
export const CAD_SEAM_BODY_BYTES = 12 * 1024 * 1024;
export const WELD_PLAN_BODY_BYTES = 24 * 1024 * 1024;

/** A refusal on its way to the client, in the route's shape. */
export class OlpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(`${code}: ${detail}`);
  }
}

export type Shape = 'machine' | 'authoring';

/**
 * The body's bytes, at most `limit`. A declared Content-Length past the limit is refused
 * payload_too_large before any of the body is read, a body without one (chunked) as soon as the bytes
 * read pass the limit; the rest is not read: the reply says `Connection: close` and the server closes
 * after it (sims/primitives.ts closeAfterReply).
 */
export async function readBody(req: IncomingMessage, limit: number, res?: ServerResponse): Promise<Buffer> {
  const body = await readBoundedBody(req, { limit, refuse: 'declared' });
  if (body === 'too_large') {
    if (res) closeAfterReply(req, res, limit);
    throw new OlpError(413, 'payload_too_large', `request body over ${limit} bytes`, { limit_bytes: limit });
  }
  if (body === 'gone') throw new Error('the client went away before its body ended');
  return body;
}

/** Decode a JSON body strictly (one value, nothing after it); the refusal label is the route's own. */
export function decodeBody(bytes: Uint8Array, code = 'invalid_request', status = 400): JsonValue {
  try {
    return decodeJson(bytes);
  } catch (e) {
    if (e instanceof JsonDecodeError) throw new OlpError(status, code, `body is not one JSON value: ${e.message}`);
    throw e;
  }
}

/** A decoded value as plain JavaScript: integers that fit a double exactly as numbers, larger ones as bigint. */
export function plain(v: JsonValue): unknown {
  if (v instanceof JsonNumber) {
    if (/^-?(0|[1-9][0-9]*)$/.test(v.text)) {
      const b = BigInt(v.text);
      return b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(b) : b;
    }
    return Number(v.text);
  }
  if (v instanceof JsonObject) {
    const o: Record<string, unknown> = {};
    for (const [k, x] of v.fields) o[k] = plain(x);
    return o;
  }
  if (Array.isArray(v)) return v.map(plain);
  return v;
}

/** A JSON object body as a plain record (refused when the value is not an object). */
export function objectBody(bytes: Uint8Array, code = 'invalid_request'): Record<string, unknown> {
  const v = bytes.length === 0 ? new JsonObject() : decodeBody(bytes, code);
  if (!(v instanceof JsonObject)) throw new OlpError(400, code, 'body is not a JSON object');
  return plain(v) as Record<string, unknown>;
}

export function acceptsGzip(req: IncomingMessage): boolean {
  const h = req.headers['accept-encoding'];
  const v = Array.isArray(h) ? h.join(',') : h ?? '';
  return v.split(',').some((part) => {
    const [name, ...params] = part.trim().split(';');
    if (name?.trim().toLowerCase() !== 'gzip') return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/** Send bytes, gzip-compressed when the client accepts gzip (part 2). */
export function sendBytes(req: IncomingMessage, res: ServerResponse, status: number, body: Uint8Array, headers: Record<string, string>): void {
  const gz = acceptsGzip(req) && body.length > 0;
  const out = gz ? gzipSync(body) : body;
  res.writeHead(status, { ...headers, ...(gz ? { 'content-encoding': 'gzip' } : {}), vary: 'Accept-Encoding', 'content-length': String(out.length), 'cache-control': 'no-store' });
  res.end(out);
}

export function sendJson(req: IncomingMessage, res: ServerResponse, status: number, value: unknown): void {
  sendBytes(req, res, status, Buffer.from(encodeJson(value)), { 'content-type': 'application/json' });
}

/** A refusal in the route's shape (part 7). */
export function sendError(req: IncomingMessage, res: ServerResponse, shape: Shape, e: OlpError): void {
  const body = shape === 'machine' ? { error: e.code, detail: e.detail, ...e.extra } : { ok: false, code: e.code, error: e.detail, ...e.extra };
  sendJson(req, res, e.status, body);
}

/**
 * A path parameter ({id} of /programs/{id}, /dense-execution/cells/{id}) percent-decoded: a malformed
 * escape (`%ZZ`, a lone `%`, bytes that are not UTF-8, an overlong form such as `%c0%ae`) is the client's
 * error, 400 invalid_request (docs/profile.md "OLP server: labels"), never a failure of the server.
 */
export function pathParam(raw: string, what: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new OlpError(400, 'invalid_request', `${what} ${JSON.stringify(raw.slice(0, 200))} is not valid percent-encoded UTF-8`);
  }
}

// ---- small field readers for route bodies (unknown fields are ignored: part 2) ----

export function str(body: Record<string, unknown>, key: string, code = 'invalid_request', required = true): string | undefined {
  const v = body[key];
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'string') throw new OlpError(400, code, `${key} must be a string`);
  return v;
}

export function bool(body: Record<string, unknown>, key: string, code = 'invalid_request'): boolean {
  const v = body[key];
  if (typeof v !== 'boolean') throw new OlpError(400, code, `${key} must be a boolean`);
  return v;
}

export function num(body: Record<string, unknown>, key: string, code = 'invalid_request'): number {
  const v = body[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new OlpError(400, code, `${key} must be a finite number`);
  return v;
}
