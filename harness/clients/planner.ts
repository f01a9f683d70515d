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

export class PlannerClient {
  private readonly agent = new Agent({ keepAliveTimeout: 1000 });

  constructor(readonly baseUrl: string) {}

  async raw(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: Uint8Array, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<PlannerReply> {
    const res = await request(this.baseUrl + path, { method, body, headers, dispatcher: this.agent, signal });
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
