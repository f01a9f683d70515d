// A control client as a real consumer would write it: undici over the Unix socket (or HTTPS with a client
// certificate to the remote listener, document 1 part 5), exact JSON (bigint) both ways, and every reply passed through the oracle's strict reply checks before a test sees it.

import { Agent, type Dispatcher } from 'undici';
import { exchange } from './exchange.ts';
import { asTransportError } from '../errors.ts';
import { noteRefusal } from './lapses.ts';
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

/**
 * The grants a client was given and has not seen end (acquire replies), so that a harness sharing one
 * service between many tests can stop and release what a failed test left behind (document 1 part 4: a
 * client that does not know an outcome stops its grant and reconciles).
 */
export class SessionLedger {
  private open = new Map<string, { session: string; generation: bigint; lease_ms: number }>();

  /**
   * Note a reply: a granted acquire opens an entry; a granted release of that session closes it. A release
   * answers a Grant with an empty session (document 1 part 4), so the released session is the request's.
   */
  note(operation: string, status: number, data: unknown, requestSession?: string): void {
    if (status !== 200) return;
    if (operation === 'release' && requestSession !== undefined) this.open.delete(requestSession);
    if (data === null || typeof data !== 'object') return;
    const g = data as { session?: unknown; generation?: unknown; lease_ms?: unknown };
    if (typeof g.session !== 'string' || g.session === '' || typeof g.generation !== 'bigint') return;
    if (operation === 'acquire') this.open.set(g.session, { session: g.session, generation: g.generation, lease_ms: typeof g.lease_ms === 'bigint' ? Number(g.lease_ms) : 0 });
    else if (operation === 'release') this.open.delete(g.session);
    else if (this.open.has(g.session)) this.open.get(g.session)!.generation = g.generation;
  }

  /** The grants still open, forgotten by the ledger (the caller ends them). */
  take(): Array<{ session: string; generation: bigint; lease_ms: number }> {
    const all = [...this.open.values()];
    this.open.clear();
    return all;
  }
}

/** One request and its reply as a client saw it, for observers (harness/evidence-setup.ts: transcripts, round trips). */
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

/** The error text of a 409's JSON body, for noting a lapsed grant (harness/clients/lapses.ts); never throws. */
function refusalText(body: Uint8Array): string | undefined {
  try {
    const e = (JSON.parse(Buffer.from(body).toString('utf8')) as { error?: unknown }).error;
    return typeof e === 'string' ? e : undefined;
  } catch {
    return undefined;
  }
}

export class ControlClient {
  readonly agent: Dispatcher;
  /** Set by a target shared between tests (external, rig): every granted acquire is noted for reconciliation. */
  ledger: SessionLedger | undefined;
  /** Base address {base_url} (document 1 part 1). */
  readonly origin: string;
  /** The remote listener and client certificate, for a client of the remote listener (the grant keeper's thread opens its own connection). */
  readonly https: HttpsTarget | undefined;

  constructor(
    readonly socketPath: string,
    options: { connections?: number; keepAliveTimeout?: number; https?: HttpsTarget } = {},
  ) {
    const t = options.https;
    this.https = t;
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
    // Only a pending observer delays the request: an await here would let a request the caller makes next
    // (a stepped-clock step on the test channel) reach the target first.
    const waiting = o.before?.(this, method, path, body);
    if (waiting) await waiting;
    const at = performance.now();
    try {
      const res = await exchange(this.agent, `${this.origin}${path}`, {
        method,
        ...(body !== undefined ? { body } : {}),
        headers: body !== undefined ? { 'content-type': 'application/json', ...headers } : headers,
      });
      const buf = res.body;
      const reply = { status: res.status, headers: res.headers, body: buf };
      if (reply.status === 409) noteRefusal(409, refusalText(buf), performance.timeOrigin + at);
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
    const checked = checkReply(r.status, contentType(r), r.body, expectOperation);
    this.ledger?.note(checked.reply.operation, checked.status, checked.reply.data, this.ledger && checked.reply.operation === 'release' ? sessionOf(req) : undefined);
    return checked;
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

/** The `session` a request carries (release bodies are small: a text body is parsed only for a release). */
function sessionOf(req: Record<string, unknown> | string | Uint8Array): string | undefined {
  let obj: unknown = req;
  if (typeof req === 'string' || req instanceof Uint8Array) {
    try {
      obj = parseExact(req);
    } catch {
      return undefined;
    }
  }
  const s = (obj as { session?: unknown } | null)?.session;
  return typeof s === 'string' ? s : undefined;
}

export function contentType(r: RawReply): string | undefined {
  const v = r.headers['content-type'];
  return Array.isArray(v) ? v[0] : v;
}

export function json(r: RawReply): JsonExact {
  return parseExact(r.body);
}
