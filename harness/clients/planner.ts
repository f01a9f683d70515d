// A typed client of the weld planner HTTP API (document 2 part 4), written as a consumer would: undici over
// TCP, raw bytes in and out, JSON parsed by the harness's exact parser (uint64 stays bigint). No
// authentication (document 2 part 5).

import { Agent, request } from 'undici';
import { parseExact, type JsonExact } from '../oracle/json.ts';

export type PlanQuery = Record<string, string | number | bigint | boolean | null | undefined>;

export interface PlannerReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Uint8Array;
  /** The body parsed exactly when it is JSON, else undefined. */
  json: JsonExact | undefined;
  text: string;
}

export function planQueryString(q: PlanQuery = {}): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined) p.append(k, v === null ? 'null' : String(v));
  const s = p.toString();
  return s ? `?${s}` : '';
}

/**
 * Whether a request failed because the connection closed before any of the reply came: the planner closed a
 * kept-alive connection as the client reused it (the client's idle timer had not run: its loop was held up),
 * not an answer of the planner's.
 */
function closedBeforeReply(e: unknown): boolean {
  const code = (e as { code?: string }).code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE';
}

/** A request that failed before any of its reply came (closedBeforeReply), with undici's error. */
class NoReply extends Error {
  constructor(override readonly cause: Error) {
    super(cause.message);
  }
}

export class PlannerClient {
  // An idle connection is given up after 1 s, whatever the planner's Keep-Alive hint says (undici would
  // otherwise keep it for the hint less 2 s: 3 s for Node's 5 s). A request the planner's close still meets
  // (a client loop held up for seconds on a loaded host) is sent once more on a connection of its own.
  private readonly agent = new Agent({ keepAliveTimeout: 1000, keepAliveMaxTimeout: 1000 });

  constructor(readonly baseUrl: string) {}

  /**
   * One request. Document 2's routes are all safe to send twice (reads, and a plan that is deterministic and
   * stored by its content's digest, one at a time), so a request whose connection closed before any of the
   * reply came is sent once more on a fresh connection; a planner that closes that one too fails the request.
   */
  async raw(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: Uint8Array, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<PlannerReply> {
    try {
      return await this.once(this.agent, method, path, body, headers, signal);
    } catch (e) {
      if (!(e instanceof NoReply)) throw e;
      if (signal?.aborted) throw e.cause;
      const fresh = new Agent({ pipelining: 1 });
      try {
        return await this.once(fresh, method, path, body, headers, signal);
      } catch (again) {
        if (!(again instanceof NoReply)) throw again;
        throw new Error(`the planner closed the connection before any reply, twice (${e.cause.message}; again on a fresh connection: ${again.cause.message})`, { cause: again.cause });
      } finally {
        await fresh.close();
      }
    }
  }

  private async once(dispatcher: Agent, method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body: Uint8Array | undefined, headers: Record<string, string>, signal: AbortSignal | undefined): Promise<PlannerReply> {
    let res;
    try {
      res = await request(this.baseUrl + path, { method, body, headers, dispatcher, signal });
    } catch (e) {
      // Only here, before the status line: a reply cut short later is the planner's and is never sent again.
      if (closedBeforeReply(e)) throw new NoReply(e as Error);
      throw e;
    }
    const bytes = new Uint8Array(await res.body.arrayBuffer());
    const text = new TextDecoder().decode(bytes);
    let json: JsonExact | undefined;
    const ct = String(res.headers['content-type'] ?? '');
    if (ct.startsWith('application/json')) json = parseExact(bytes);
    return { status: res.statusCode, headers: res.headers, body: bytes, json, text };
  }

  health(): Promise<PlannerReply> {
    return this.raw('GET', '/api/motion/health');
  }

  progress(): Promise<PlannerReply> {
    return this.raw('GET', '/api/motion/progress');
  }

  /** POST /api/motion/plan with the raw weldplan bytes (Content-Type application/octet-stream). */
  plan(weldplan: Uint8Array, query: PlanQuery = {}, signal?: AbortSignal): Promise<PlannerReply> {
    return this.raw('POST', `/api/motion/plan${planQueryString(query)}`, weldplan, { 'content-type': 'application/octet-stream' }, signal);
  }

  dense(digest: string): Promise<PlannerReply> {
    return this.raw('GET', `/api/motion/dense/${digest}`);
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}
