// A control client as a real consumer would write it: undici over the Unix socket (or HTTPS with a client
// certificate to the remote listener, document 1 part 5), exact JSON (bigint) both ways, and every reply passed through the oracle's strict reply checks before a test sees it.

import { Agent, request, type Dispatcher } from 'undici';
import { asTransportError } from '../errors.ts';
import { checkReply, type CheckedReply } from '../oracle/reply.ts';
import { parseExact, stringifyExact, type JsonExact } from '../oracle/json.ts';

export const REQUEST_SCHEMA = 'svc.rt-control.request.v1';

export interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Uint8Array;
}

export interface BindingInput {
  pair_id: string;
  revision: bigint;
  configuration_sha256: string;
  machine_sha256?: string;
}

/** HTTPS to a remote listener: `origin` is https://host:port; PEM texts of the client pair and the CA. */
export interface HttpsTarget {
  origin: string;
  cert: string;
  key: string;
  ca: string;
  /** TLS server name (SNI and certificate check); default the origin's host name (IP addresses are checked against the certificate's IP names). */
  servername?: string;
}

/** One request and its reply as a client saw it, for observers (harness/measure-setup.ts: transcripts, round trips). */
export interface Exchange {
  client: ControlClient;
  method: string;
  path: string;
  body: string | Uint8Array | undefined;
  /** The reply, or undefined when the transport failed. */
  reply?: RawReply;
  error?: unknown;
  /** Wall time from sending to the whole reply, ms. */
  ms: number;
  /** performance.now() when the request was sent. */
  at: number;
}

/**
 * Observers of every exchange of every ControlClient of this process: `before` may delay the request
 * (a telemetry cursor taken before a motion command), `after` sees the reply. Empty unless a harness
 * module installs them; they must never throw.
 */
export const exchangeObservers: {
  before?: (client: ControlClient, method: string, path: string, body: string | Uint8Array | undefined) => Promise<void> | void;
  after?: (x: Exchange) => void;
} = {};

export class ControlClient {
  readonly agent: Dispatcher;
  /** Base address {base_url} (document 1 part 1). */
  readonly origin: string;

  constructor(
    readonly socketPath: string,
    options: { connections?: number; keepAliveTimeout?: number; https?: HttpsTarget } = {},
  ) {
    const t = options.https;
    this.origin = t ? t.origin.replace(/\/$/, '') : 'http://localhost';
    this.agent = new Agent({
      connect: t ? { cert: t.cert, key: t.key, ca: t.ca, ...(t.servername ? { servername: t.servername } : {}), minVersion: 'TLSv1.3' } : { socketPath },
      connections: options.connections ?? 4,
      keepAliveTimeout: options.keepAliveTimeout ?? 4_000,
    });
  }

  /** A client of the remote listener, authenticated by a client certificate. */
  static https(target: HttpsTarget, options: { connections?: number; keepAliveTimeout?: number } = {}): ControlClient {
    return new ControlClient('', { ...options, https: target });
  }

  /** One HTTP exchange, nothing checked. */
  async raw(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH' | 'HEAD' | 'OPTIONS',
    path: string,
    body?: string | Uint8Array,
    headers: Record<string, string> = {},
  ): Promise<RawReply> {
    const o = exchangeObservers;
    if (o.before) await o.before(this, method, path, body);
    const at = performance.now();
    try {
      const res = await request(`${this.origin}${path}`, {
        method,
        dispatcher: this.agent,
        body,
        headers: body !== undefined ? { 'content-type': 'application/json', ...headers } : headers,
      });
      const buf = new Uint8Array(await res.body.arrayBuffer());
      const reply = { status: res.statusCode, headers: res.headers, body: buf };
      o.after?.({ client: this, method, path, body, reply, ms: performance.now() - at, at });
      return reply;
    } catch (e) {
      o.after?.({ client: this, method, path, body, error: e, ms: performance.now() - at, at });
      throw asTransportError(e, `${method} ${path}`);
    }
  }

  /** POST /v1/control with a request object (exact JSON) or literal bytes; the reply is strictly checked. */
  async control(req: Record<string, unknown> | string | Uint8Array, expectOperation?: string): Promise<CheckedReply> {
    const body = typeof req === 'string' || req instanceof Uint8Array ? req : stringifyExact(req);
    const r = await this.raw('POST', '/v1/control', body);
    return checkReply(r.status, contentType(r), r.body, expectOperation);
  }

  /** A request with the schema filled in. */
  op(operation: string, fields: Record<string, unknown> = {}): Promise<CheckedReply> {
    return this.control({ schema: REQUEST_SCHEMA, operation, ...fields }, operation);
  }

  async get(path: string, expectOperation?: string): Promise<CheckedReply> {
    const r = await this.raw('GET', path);
    return checkReply(r.status, contentType(r), r.body, expectOperation);
  }

  describe(): Promise<CheckedReply> {
    return this.get('/v1/describe', 'describe');
  }

  status(): Promise<CheckedReply> {
    return this.get('/v1/status', 'status');
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

export function contentType(r: RawReply): string | undefined {
  const v = r.headers['content-type'];
  return Array.isArray(v) ? v[0] : v;
}

export function json(r: RawReply): JsonExact {
  return parseExact(r.body);
}
