// Shared pieces of the offline programming server suites (document 3): a client a real consumer (the
// programming web app, a pendant) would write, the target's OLP servers as file-scoped fixtures (opened
// per configuration name, closed at the end of the file), fence headers, and checks of the two error
// shapes of part 7.

import { rm } from 'node:fs/promises';
import { connect as netConnect, createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { Agent, request } from 'undici';
import { ControlClient } from '../../harness/clients/control.ts';
import { expect, test as base } from '../../harness/fixture.ts';
import { parseExact, stringifyExact } from '../../harness/oracle/json.ts';
import { olpFromEnv, targetFromEnv, type OlpSpec, type OpenedOlp } from '../../harness/targets/index.ts';
import { olpFactsFromFile } from '../../harness/targets/olp-facts.ts';

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
  readonly host: string;
  constructor(readonly url: string) {
    this.host = new URL(url).host;
  }

  async raw(method: 'GET' | 'POST' | 'DELETE' | 'PUT', path: string, body?: string | Uint8Array, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<OlpReply> {
    const res = await request(`${this.url}${BASE}${path}`, {
      method,
      dispatcher: this.agent,
      ...(body !== undefined ? { body } : {}),
      // Every request names a loopback Host (the server is same-host, document 3 parts 1 and 5) and every
      // body is JSON as application/json (part 2 "Conventions"), unless a test says otherwise.
      headers: { host: this.host, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
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
  /** What discovery found (once per server, see discoverCells). */
  found?: Promise<Found>;
  /** Cells this file registered on someone else's server (removed when the file ends). */
  registered: string[];
  /** Control clients opened for cells the facts file places (closed when the file ends). */
  controls: ControlClient[];
}

/** A cell of the server as discovery found it (GET /targets) or the harness configured it. */
export interface FoundCell {
  cell_id: string;
  /** The robot model a selection names: the listing's model_id, else the facts file's, else undefined. */
  model_id: string | undefined;
  reachable: boolean;
  reason?: string;
  /** The listing entry as the server sent it (its fields beyond cell_id are not shown by document 3). */
  entry: Record<string, any>;
  /** The cell's control service (document 1), when the suite knows where it is. */
  control?: ControlClient;
}

export interface Found {
  /** A catalogue is configured: an unknown cell's selection is refused 409 cell_id_unknown, not 503 (part 7). */
  catalogue: boolean;
  cells: FoundCell[];
  /** Reachable cells with a known model, those whose control service the suite can read first. */
  usable: FoundCell[];
}

const sameDigest = (a: unknown, b: unknown) => typeof a === 'string' && typeof b === 'string' && a.replace(/^sha256:/, '') === b.replace(/^sha256:/, '');

/**
 * The cells of an OLP server, read through the documented routes: whether it has a catalogue (an unknown
 * cell's selection: 409 cell_id_unknown with one, 503 cell_catalogue_unavailable without, part 7), and
 * GET /targets's list. Which listed cell is the run's own control service: the facts file's
 * control_socket, else a listing that names the pair and configuration of the run's Describe.
 */
export function discoverCells(o: Olp, target: { client(): ControlClient } | undefined, d: { binding: { pair_id: string; configuration_sha256: string } } | undefined): Promise<Found> {
  o.found ??= (async () => {
    const facts = o.endpoint.facts?.cells ?? {};
    const probe = await o.client.post('/targets/select', { cell_id: `hil-no-such-cell-${process.pid}`, model_id: 'hil-no-such-model' });
    const catalogue = probe.status !== 503;
    const t = await o.client.get('/targets');
    const list = Array.isArray(t.json?.targets) ? (t.json.targets as Record<string, any>[]) : [];
    const cells: FoundCell[] = [];
    for (const e of list) {
      if (typeof e?.cell_id !== 'string') continue;
      const f = facts[e.cell_id] ?? {};
      let control: ControlClient | undefined;
      if (f.control_socket) {
        control = new ControlClient(f.control_socket);
        o.controls.push(control);
      } else if (target && d && e.pair_id === d.binding.pair_id && sameDigest(e.configuration_sha256, d.binding.configuration_sha256)) control = target.client();
      const model = typeof e.model_id === 'string' && e.model_id !== '' ? e.model_id : f.model_id;
      cells.push({ cell_id: e.cell_id, model_id: model, reachable: e.reachable !== false, ...(typeof e.reason === 'string' ? { reason: e.reason } : {}), entry: e, ...(control ? { control } : {}) });
    }
    const usable = cells.filter((c) => c.reachable && c.model_id !== undefined).sort((a, b) => Number(!a.control) - Number(!b.control));
    return { catalogue, cells, usable };
  })();
  return o.found;
}

/**
 * Register a cell on someone else's server for this file (POST /dense-execution/cells; the body is the
 * docs/profile.md "OLP server: cell registry" decision, document 3 shows only the route and its refusals).
 * Returns the refusal text when the server does not take it (the caller skips with it).
 */
export async function registerCell(o: Olp, cell: Record<string, unknown>): Promise<string | undefined> {
  const r = await o.client.post('/dense-execution/cells', cell);
  if (r.status !== 200) return `the server does not register a cell from the body of docs/profile.md "OLP server: cell registry" (${r.status} ${r.text.slice(0, 160)})`;
  o.registered.push(String(cell.cell_id));
  return undefined;
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
        return o ? { ...o, client: new OlpClient(o.endpoint.url), registered: [], controls: [] } : undefined;
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
      for (const id of o.registered.splice(0)) await o.client.raw('DELETE', `/dense-execution/cells/${encodeURIComponent(id)}`).catch(() => undefined);
      for (const c of o.controls.splice(0)) await c.close().catch(() => undefined);
      await o.client.close();
      await o.close();
    }
  }

  async close(): Promise<void> {
    for (const name of [...this.opened.keys()]) await this.drop(name);
  }
}

/**
 * Where a planner of the suite's own listens: any free loopback port where the harness configures the
 * server itself; on someone else's deployment the address its own_planner server calls as its planner
 * (harness/targets/olp-facts.ts), else the test skips and says what it needs.
 */
export function ownPlannerAddress(skip: Skip['skip']): { host: string; port: number } {
  const { name, options } = targetFromEnv();
  if (name !== 'external') return { host: '127.0.0.1', port: 0 };
  const f = olpFactsFromFile(options.olpFacts as string | undefined).own_planner;
  skip(f === undefined, 'needs a planner of the test\'s own behind a server of the deployment: the OLP facts file\'s own_planner (README "Your own OLP server")');
  const i = f!.listen.lastIndexOf(':');
  return { host: f!.listen.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(f!.listen.slice(i + 1)) };
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
    // conformance run has a CPU budget; a state that lasts is seen at most 100 ms late.
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

/**
 * A cell's line to its control service that the suite controls: a Unix socket of the suite's own that
 * forwards every connection to the real control socket. Registered as a cell's control socket (part 4
 * /dense-execution/cells), it lets a client stage "the selected cell does not stop" on a deployment it
 * does not run: `refuseStops()` drops every connection that carries a stop or release (document 1 part 2:
 * the envelope's `operation`), as a cell whose service dies at that moment would, while renewals and
 * reads still pass; `mend()` forwards everything again so that the server can stop the cell and go on.
 */
export class CellLine {
  private server: NetServer | undefined;
  private readonly open = new Set<Socket>();
  private refusing = false;
  constructor(readonly path: string, private readonly to: string) {}

  async listen(): Promise<void> {
    await rm(this.path, { force: true });
    const server = createNetServer((a) => {
      const b = netConnect(this.to);
      for (const s of [a, b]) {
        this.open.add(s);
        s.on('close', () => this.open.delete(s));
        s.on('error', () => undefined);
      }
      // What the server sends, looked at across chunk boundaries (the tail of the last chunk kept).
      let tail = '';
      a.on('data', (d: Buffer) => {
        const text = tail + d.toString('latin1');
        tail = text.slice(-64);
        if (this.refusing && /"operation"\s*:\s*"(stop|release)"/.test(text)) {
          a.destroy();
          b.destroy();
          return;
        }
        b.write(d);
      });
      b.pipe(a).on('error', () => b.destroy());
      a.on('close', () => b.destroy());
      b.on('close', () => a.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.path, () => resolve());
    });
    this.server = server;
  }

  refuseStops(): void {
    this.refusing = true;
  }

  mend(): void {
    this.refusing = false;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    for (const c of this.open) c.destroy();
    this.open.clear();
    if (s) await new Promise<void>((r) => s.close(() => r()));
    await rm(this.path, { force: true });
  }
}
