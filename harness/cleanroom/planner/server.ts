// The clean-room weld planner (document 2 parts 1, 4, 7, 8), written from document 2 alone as a second,
// independent reading: test equipment that shows where the planner suites ask for more than the document
// says. One plan at a time in a fresh process group per admitted plan; a client that goes away gets 499
// (its plan's group terminated, killed 2 s later) and nothing is stored; the store names files by digest.
// Listens on loopback only and refuses a Host it does not serve (a browser on this host is the threat).

import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TS_NODE_ARGS } from '../../targets/reference.ts';
import type { Options } from './plan.ts';
import { checkProgram, PlanRefused, readContainer } from './program.ts';
import { CELL } from './plan.ts';

const CHILD = fileURLToPath(new URL('./child.ts', import.meta.url));
const BODY_LIMIT = 32 * 1024 * 1024;
const U64_MAX = 2n ** 64n - 1n;

export interface PlannerOptions {
  storeDir: string;
  port?: number;
}

interface Job {
  bytes: Uint8Array;
  options: Options;
  res: ServerResponse;
  gone: boolean;
  finished: boolean;
  child?: ChildProcess;
  start(): void;
  cancel(): void;
}

type Detail = { query: string; problem: string };

function parseOptions(url: URL): { options?: Options; details: Detail[]; unknownBackend?: string } {
  const q = url.searchParams;
  const details: Detail[] = [];
  const get = (k: string) => (q.has(k) ? q.getAll(k).at(-1)! : undefined);
  const bool = (k: string, d: boolean) => {
    const v = get(k);
    if (v === undefined) return d;
    const l = v.toLowerCase();
    if (l === 'true' || l === '1') return true;
    if (l === 'false' || l === '0') return false;
    details.push({ query: k, problem: `${JSON.stringify(v)} is not a boolean` });
    return d;
  };
  const int = (k: string, d: bigint, lo: bigint, hi: bigint) => {
    const v = get(k);
    if (v === undefined) return d;
    if (!/^[+-]?\d+$/.test(v) || BigInt(v) < lo || BigInt(v) > hi) {
      details.push({ query: k, problem: `${JSON.stringify(v)} is not an integer in ${lo}..${hi}` });
      return d;
    }
    return BigInt(v);
  };
  const sps = get('samples_per_seam');
  const margin = get('verify_margin_mm');
  let m = 2.0;
  if (margin !== undefined) {
    const x = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(margin) ? Number(margin) : NaN;
    if (!(x >= 0 && x <= 50)) details.push({ query: 'verify_margin_mm', problem: `${JSON.stringify(margin)} is not a number in 0..50` });
    else m = x;
  }
  const programId = get('program_id') ?? '';
  if ([...programId].length > 120) details.push({ query: 'program_id', problem: 'longer than 120 characters' });
  const options: Options = {
    k_best: int('k_best', 5n, 1n, 16n),
    screen_collisions: bool('screen_collisions', true),
    samples_per_seam: sps === undefined || sps === 'null' ? null : int('samples_per_seam', 0n, 2n, 512n),
    run_weld_trajopt: bool('run_weld_trajopt', false),
    run_connecting_trajopt: bool('run_connecting_trajopt', true),
    free_space_backend: get('free_space_backend') ?? 'bspline',
    verify: bool('verify', true),
    verify_margin_mm: m,
    order_seams: bool('order_seams', false),
    dense: bool('dense', false),
    program_id: programId,
    manifest_revision: int('manifest_revision', 1n, 1n, U64_MAX),
    plan_revision: int('plan_revision', 1n, 1n, U64_MAX),
  };
  if (details.length) return { details };
  if (!['bspline', 'curobo', 'legacy'].includes(options.free_space_backend)) return { details, unknownBackend: options.free_space_backend };
  return { options, details };
}

export class CleanroomPlanner {
  private server?: Server;
  private queue: Job[] = [];
  private running?: Job;
  private stage: string | null = null;
  readonly storeDir: string;
  url = '';

  constructor(private readonly o: PlannerOptions) {
    this.storeDir = o.storeDir;
  }

  async listen(): Promise<string> {
    mkdirSync(this.storeDir, { recursive: true });
    const server = createServer((req, res) => this.handle(req, res));
    // A client that shuts down its sending side still reads the reply (its 499).
    (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.o.port ?? 0, '127.0.0.1', () => resolve());
    });
    this.server = server;
    const a = server.address() as { port: number };
    this.url = `http://127.0.0.1:${a.port}`;
    return this.url;
  }

  async close(): Promise<void> {
    for (const j of [...this.queue, ...(this.running ? [this.running] : [])]) j.cancel();
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    if (res.writableEnded || res.destroyed) return;
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const port = (this.server!.address() as { port: number }).port;
    const host = req.headers.host ?? '';
    if (![`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`].includes(host)) return this.json(res, 421, { error: 'host not served' });
    const url = new URL(req.url ?? '/', 'http://planner');
    const route = url.pathname;
    if (route === '/api/motion/health' && req.method === 'GET') return this.json(res, 200, { cuda: false, device: null });
    if (route === '/api/motion/progress' && req.method === 'GET') return this.json(res, 200, { stage: this.stage });
    if (route === '/api/motion/plan' && req.method === 'POST') return this.plan(req, res, url);
    if (route.startsWith('/api/motion/dense/') && req.method === 'GET') {
      let d: string;
      try {
        d = decodeURIComponent(route.slice('/api/motion/dense/'.length));
      } catch {
        d = '';
      }
      if (!/^sha256:[0-9a-f]{64}$/.test(d)) {
        res.writeHead(422, { 'content-type': 'text/plain; charset=utf-8' });
        return void res.end('expected sha256:<64 hex>');
      }
      const file = join(this.storeDir, `sha256-${d.slice(7)}.rdt`);
      if (!existsSync(file)) return this.json(res, 404, { error: 'no stored trajectory with this digest' });
      const b = readFileSync(file);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'no-store', 'content-length': b.length });
      return void res.end(b);
    }
    return this.json(res, 404, { error: 'no such route' });
  }

  private plan(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const parsed = parseOptions(url);
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > BODY_LIMIT) over = true;
      else chunks.push(c);
    });
    req.on('end', () => {
      if (parsed.details.length) return this.json(res, 422, { detail: parsed.details });
      if (parsed.unknownBackend !== undefined) return this.json(res, 422, { detail: `unknown free_space_backend ${JSON.stringify(parsed.unknownBackend)}` });
      if (over) return this.json(res, 413, { error: `a weldplan is at most ${BODY_LIMIT} bytes` });
      const bytes = new Uint8Array(Buffer.concat(chunks));
      if (bytes.length === 0) return this.json(res, 400, { error: 'empty body is not a weldplan' });
      // Reading the container and its program is bounded work: refused here, before a process is started.
      try {
        const { program } = readContainer(bytes);
        checkProgram(program);
        if (program.placement.cell_id !== CELL) throw new PlanRefused('CellUnknown', `no collision meshes for cell ${JSON.stringify(program.placement.cell_id)} (this planner has ${CELL})`);
      } catch (e) {
        if (e instanceof PlanRefused) return this.json(res, 422, { error: e.message });
        return this.json(res, 422, { error: `ContainerUnreadable: ${String((e as Error).message).split('\n')[0]}` });
      }
      this.enqueue(bytes, parsed.options!, req, res);
    });
  }

  private enqueue(bytes: Uint8Array, options: Options, req: IncomingMessage, res: ServerResponse): void {
    const self = this;
    let tmp: string | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    const job: Job = {
      bytes, options, res, gone: false, finished: false,
      start() {
        const child = fork(CHILD, [], { execArgv: [...TS_NODE_ARGS], serialization: 'advanced', detached: true, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
        job.child = child;
        let answer: { status: number; body: unknown } | undefined;
        child.on('message', (m: { stage?: string; done?: string; tmp?: string; digest?: string; refused?: string }) => {
          if (m.stage) self.stage = m.stage;
          if (m.refused) answer = { status: 422, body: { error: m.refused } };
          if (m.done !== undefined) {
            tmp = m.tmp;
            answer = { status: 200, body: m };
          }
        });
        child.on('exit', () => {
          job.finished = true;
          req.socket.off('end', onEnd);
          if (killTimer) clearTimeout(killTimer);
          try {
            process.kill(-child.pid!, 'SIGKILL'); // helpers it left behind
          } catch {
            // the group is gone
          }
          self.stage = null;
          if (job.gone || !answer) {
            if (tmp) rmSync(tmp, { force: true });
            if (job.gone) self.json(res, 499, { error: 'Planning cancelled' });
            else self.json(res, 500, { error: 'PlanningFailed: the planning process ended without an answer' });
          } else if (answer.status === 200) {
            const m = answer.body as { done: string; digest?: string };
            if (tmp && m.digest) renameSync(tmp, join(self.storeDir, `sha256-${m.digest.slice(7)}.rdt`));
            if (!res.writableEnded) {
              res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(m.done) });
              res.end(m.done);
            }
          } else self.json(res, answer.status, answer.body);
          self.running = undefined;
          self.next();
        });
        child.send({ bytes, options, storeDir: self.storeDir });
      },
      cancel() {
        if (job.gone || job.finished) return;
        job.gone = true;
        if (job.child) {
          try {
            process.kill(-job.child.pid!, 'SIGTERM');
          } catch {
            // already gone
          }
          killTimer = setTimeout(() => {
            try {
              process.kill(-job.child!.pid!, 'SIGKILL');
            } catch {
              // already gone
            }
          }, 2000);
        } else {
          job.finished = true;
          req.socket.off('end', onEnd);
          self.queue = self.queue.filter((j) => j !== job);
          self.json(res, 499, { error: 'Planning cancelled' });
        }
      },
    };
    // The client went away: it shut down its side, or the connection closed.
    const onEnd = () => job.cancel();
    req.socket.once('end', onEnd);
    res.once('close', () => !res.writableFinished && job.cancel());
    this.queue.push(job);
    this.next();
  }

  private next(): void {
    if (this.running) return;
    const job = this.queue.shift();
    if (!job) return;
    this.running = job;
    job.start();
  }
}

/** `hil cleanroom planner serve`: prints one `ready {"url": ...}` line and stops on SIGINT/SIGTERM. */
export async function serveCleanroomPlanner(o: PlannerOptions): Promise<number> {
  const p = new CleanroomPlanner(o);
  const url = await p.listen();
  process.stdout.write(`ready ${JSON.stringify({ url, store_dir: o.storeDir, cell: CELL })}\n`);
  await new Promise<void>((r) => {
    process.once('SIGINT', r);
    process.once('SIGTERM', r);
  });
  await p.close();
  return 0;
}
