// Shared pieces of the offline programming server suites (document 3): a client a real consumer (the
// programming web app, a pendant) would write, the target's OLP servers as file-scoped fixtures (opened
// per configuration name, closed at the end of the file), fence headers, and checks of the two error
// shapes of part 7.

import { gunzipSync } from 'node:zlib';
import { Agent, request } from 'undici';
import type { ControlClient } from '../../harness/clients/control.ts';
import { expect, test as base } from '../../harness/fixture.ts';
import { parseExact, stringifyExact } from '../../harness/oracle/json.ts';
import { olpFromEnv, targetFromEnv, type OlpSpec, type OpenedOlp } from '../../harness/targets/index.ts';

export const BASE = '/api/offline-programming/v1';

export interface OlpReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body as sent (still compressed when content-encoding is gzip). */
  wire: Uint8Array;
  /** The body after gzip decoding. */
  body: Uint8Array;
  text: string;
  /** JSON body (exact integers as bigint) or undefined when not JSON. */
  json: any;
}

export class OlpClient {
  readonly agent = new Agent({ connections: 8, keepAliveTimeout: 4_000, headersTimeout: 0, bodyTimeout: 0 });
  constructor(readonly url: string) {}

  async raw(method: 'GET' | 'POST' | 'DELETE' | 'PUT', path: string, body?: string | Uint8Array, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<OlpReply> {
    const res = await request(`${this.url}${BASE}${path}`, {
      method,
      dispatcher: this.agent,
      ...(body !== undefined ? { body } : {}),
      headers: body !== undefined ? { 'content-type': 'application/json', ...headers } : headers,
      ...(signal ? { signal } : {}),
    });
    const wire = new Uint8Array(await res.body.arrayBuffer());
    const gz = res.headers['content-encoding'] === 'gzip';
    const bytes = gz ? new Uint8Array(gunzipSync(wire)) : wire;
    const text = Buffer.from(bytes).toString('utf8');
    let json: unknown;
    try {
      json = parseExact(bytes);
    } catch {
      json = undefined;
    }
    return { status: res.statusCode, headers: res.headers, wire, body: bytes, text, json };
  }

  get(path: string, headers: Record<string, string> = {}): Promise<OlpReply> {
    return this.raw('GET', path, undefined, headers);
  }

  post(path: string, body: unknown = {}, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<OlpReply> {
    return this.raw('POST', path, typeof body === 'string' || body instanceof Uint8Array ? body : stringifyExact(body), headers, signal);
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

/** The fence headers of part 2 "Target fencing". */
export function fence(generation: bigint | number, cell: string): Record<string, string> {
  return { 'x-rt-target-generation': String(generation), 'x-rt-target-cell': cell };
}

/** A machine-control refusal (part 7): {error, detail, limit_violation?}, no ok/code. */
export function expectMachineError(r: OlpReply, status: number | undefined, code: string): void {
  const why = `${r.status} ${r.text.slice(0, 400)}`;
  if (status !== undefined) expect(r.status, why).toBe(status);
  else expect(r.status, why).toBeGreaterThanOrEqual(400);
  expect(r.json?.error, why).toBe(code);
  expect(typeof r.json?.detail, why).toBe('string');
  expect(r.json?.ok, why).toBeUndefined();
  expect(r.json?.code, why).toBeUndefined();
}

/** An authoring or service route refusal (part 7): {ok: false, code, error}. */
export function expectAuthoringError(r: OlpReply, status: number | undefined, code: string): void {
  const why = `${r.status} ${r.text.slice(0, 400)}`;
  if (status !== undefined) expect(r.status, why).toBe(status);
  else expect(r.status, why).toBeGreaterThanOrEqual(400);
  expect(r.json?.ok, why).toBe(false);
  expect(r.json?.code, why).toBe(code);
  expect(typeof r.json?.error, why).toBe('string');
}

export interface Olp extends OpenedOlp {
  client: OlpClient;
}

type Skip = { skip: (c: boolean, note?: string) => void };

/** Why the OLP suites cannot run on this run's target at all, or undefined. */
export function olpUnavailable(): string | undefined {
  const { name, options } = targetFromEnv();
  if (options.recordDir) return 'an OLP server is a process of its own, outside the stack recordings of hil run --record: the OLP suites are not recorded';
  if (name === 'external' && !options.olpUrl) return 'the external target names no OLP server (--olp-url / HIL_OLP_URL)';
  if (name !== 'sim' && name !== 'external') return `target ${name} has no OLP server`;
  return undefined;
}

/**
 * The file's OLP servers by configuration name: `open(name, spec)` starts (on sim) or reaches (external)
 * a server once per name and file; all are closed when the file ends.
 */
export const olpTest = base.extend<{ $file: { olps: OlpPool } }>({
  olps: [
    async ({}, use) => {
      const pool = new OlpPool();
      try {
        await use(pool);
      } finally {
        await pool.close();
      }
    },
    { scope: 'file' },
  ],
});

export class OlpPool {
  private readonly opened = new Map<string, Promise<Olp | undefined>>();

  open(name: string, spec: () => OlpSpec | Promise<OlpSpec>): Promise<Olp | undefined> {
    let p = this.opened.get(name);
    if (!p) {
      p = (async () => {
        if (olpUnavailable()) return undefined;
        const o = await olpFromEnv(await spec());
        return o ? { ...o, client: new OlpClient(o.endpoint.url) } : undefined;
      })();
      this.opened.set(name, p);
    }
    return p;
  }

  /** Close one server now (a test that needs it gone). */
  async drop(name: string): Promise<void> {
    const p = this.opened.get(name);
    this.opened.delete(name);
    const o = await p?.catch(() => undefined);
    if (o) {
      await o.client.close();
      await o.close();
    }
  }

  async close(): Promise<void> {
    for (const name of [...this.opened.keys()]) await this.drop(name);
  }
}

/** Skip unless the OLP server exists; returns it. */
export function useOlp(ctx: Skip, o: Olp | undefined): Olp {
  ctx.skip(!o, olpUnavailable() ?? 'the target has no OLP server');
  return o!;
}

/** Skip unless the harness configured the server (a catalogue of its own, a planner stub, bounds). */
export function needsConfigured(ctx: Skip, o: Olp, what: string): void {
  ctx.skip(!o.endpoint.configured, `${what} needs an OLP server the harness starts with its own configuration; the external one is configured by its owner`);
}

/** The cell's Status data (document 1), read from the control service directly, not through the OLP server. */
export async function cellStatus(c: ControlClient): Promise<Record<string, any>> {
  return (await c.status()).reply.data as Record<string, any>;
}

/** Look at `f()` until `ok` holds, at most `ms`; the last value seen goes into the failure. */
export async function until<T>(what: string, f: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (ok(v)) return v;
    // Not within the bound: the target never reached the state, an assertion (FAIL), not a harness error.
    if (Date.now() > end) expect(false, `${what}: not within ${ms} ms (last ${JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? String(x) : x)).slice(0, 400)})`).toBe(true);
    // Every 100 ms: each look is a status request through the OLP server or to the cell, and the
    // conformance run has a CPU budget (issue 19); a state that lasts is seen at most 100 ms late.
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The cell's status once its grant has ended after the OLP server's stop: a stop ends the grant by itself,
 * stopping and then revoked once the core has drained (document 1 part 3), so right after the stop the
 * grant may still be stopping. A grant that never ends fails here.
 */
export function released(client: ControlClient): Promise<Record<string, any>> {
  return until('the cell is released', () => cellStatus(client), (s) => s.grant.active === false, 5_000);
}
