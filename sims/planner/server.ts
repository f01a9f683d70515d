// The weld planner stub's HTTP service (document 2 parts 1, 4, 7, 8). One plan at a time; a waiting
// request stays cancellable; each admitted plan runs in a fresh child process in its own process group;
// a client that goes away gets its group SIGTERM, SIGKILL 2 s later, and a 499; the dense file reaches the
// store (sha256-<hex>.rdt, temporary name then rename) only after the child succeeded and the client is
// still connected; refused plans keep request and result under refused/ (newest 5).

import { spawn, type ChildProcess } from 'node:child_process';
import { CHILD_SNAPSHOT_REFUSED, childSnapshotInUse, programArgs, refuseChildSnapshot } from '../paths.ts';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { homedir } from 'node:os';
import { mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { encodeJson } from '../json.ts';
import { LocalGuard } from '../local-guard.ts';
import { closeAfterReply, readBoundedBody } from '../primitives.ts';
import { parsePlanQuery, type PlanOptions } from './options.ts';
import type { ChildMessage, Job as ChildJob } from './child.ts';
import { Intake } from './intake.ts';

export const DEFAULT_PORT = 8796;
export const DEFAULT_HOST = '0.0.0.0';
export const STORE_ENV = 'WELD_PLANNER_DENSE_STORE_DIR';
/** Document 2 part 8: kill 2 s after the termination signal. */
export const KILL_AFTER_MS = 2000;
export const REFUSED_KEPT = 5;
/** Largest weldplan body accepted (docs/profile.md "Weld planner: query and body"). */
export const BODY_LIMIT = 64 * 1024 * 1024;
const DIGEST_PATH = /^sha256:[0-9a-f]{64}$/;

/** Store directory: --dense-store-dir, else $WELD_PLANNER_DENSE_STORE_DIR, else the per-user cache. */
export function storeDirectory(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (flag) return flag;
  if (env[STORE_ENV]) return env[STORE_ENV]!;
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'weld-planner', 'dense');
}

interface Job {
  options: PlanOptions;
  bytes: Uint8Array;
  res: ServerResponse;
  state: 'queued' | 'running' | 'done';
  connected: boolean;
  child?: ChildProcess;
  cancelled: boolean;
  killTimer?: NodeJS.Timeout;
}

export class PlannerService {
  private server: Server;
  private queue: Job[] = [];
  private running: Job | undefined;
  private stage: string | null = null;
  private seq = 0;
  /**
   * One planning process started ahead of its job, so a plan does not wait for a process to load: it has
   * never planned (a fresh process per admitted request, document 2 part 1) and gets exactly one job.
   */
  private spare: ChildProcess | undefined;
  private started = 0;
  /** Planning processes started so far (the spare included): what intake saves is seen here. */
  get processesStarted(): number {
    return this.started;
  }
  private spawnChild(): ChildProcess {
    this.started++;
    return spawnChild();
  }
  /** Reads each container before a planning process is started for it (sims/planner/intake.ts). */
  private readonly intake = new Intake();

  /** What a browser on this host is refused (sims/local-guard.ts); a container is sent as application/octet-stream (part 4). */
  private readonly guard: LocalGuard;

  constructor(readonly o: { host: string; port: number; storeDir: string; allowedHosts?: readonly string[]; log?: (line: string) => void }) {
    mkdirSync(o.storeDir, { recursive: true });
    this.guard = new LocalGuard(o.host, o.allowedHosts ?? [], 'application/octet-stream');
    this.server = createServer((req, res) => void this.route(req, res).catch((e: Error) => this.defect(res, e)));
    // Keep the response writable after the client half-closes: the 499 is still sent (document 2 part 7).
    (this.server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.o.port, this.o.host, () => resolve());
    });
    const a = this.server.address() as AddressInfo;
    this.guard.listening(a.port);
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${a.port}`;
  }

  async stop(): Promise<void> {
    if (this.spare?.pid !== undefined) signalGroup(this.spare.pid, 'SIGKILL');
    this.spare = undefined;
    for (const j of [...this.queue, ...(this.running ? [this.running] : [])]) {
      j.connected = false;
      this.cancel(j);
    }
    this.server.closeAllConnections();
    await Promise.all([new Promise<void>((r) => this.server.close(() => r())), this.intake.close()]);
  }

  private log(line: string): void {
    this.o.log?.(line);
  }

  private defect(res: ServerResponse, e: Error): void {
    this.log(`planner defect: ${e.stack ?? e.message}`);
    if (!res.headersSent) json(res, 500, { error: `internal_defect: ${e.message}` });
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://planner');
    } catch {
      req.resume();
      json(res, 400, { detail: 'the request target is not a URL path' });
      return;
    }
    const path = url.pathname;
    const method = req.method ?? 'GET';
    const refused = this.guard.check(req);
    if (refused) {
      // Document 2 part 7 gives no label for these: the error text leads with ours (docs/profile.md).
      this.log(`planner: ${refused.label} on ${method} ${path}: ${refused.detail}`);
      closeAfterReply(req, res);
      json(res, refused.status, { error: `${refused.label}: ${refused.detail}` });
      return;
    }
    const allow = (m: string) => {
      if (method === m) return true;
      req.resume();
      json(res, 405, { detail: 'Method Not Allowed' }, { allow: m });
      return false;
    };
    if (path === '/api/motion/health') {
      if (allow('GET')) json(res, 200, { cuda: false, device: null });
      return;
    }
    if (path === '/api/motion/progress') {
      if (allow('GET')) json(res, 200, { stage: this.stage });
      return;
    }
    if (path === '/api/motion/plan') {
      if (allow('POST')) await this.plan(req, res, url.searchParams);
      return;
    }
    if (path.startsWith('/api/motion/dense/')) {
      if (allow('GET')) await this.dense(res, path.slice('/api/motion/dense/'.length));
      return;
    }
    req.resume();
    json(res, 404, { detail: 'Not Found' });
  }

  private async dense(res: ServerResponse, raw: string): Promise<void> {
    let digest: string;
    try {
      digest = decodeURIComponent(raw);
    } catch {
      digest = '';
    }
    if (!DIGEST_PATH.test(digest)) {
      res.writeHead(422, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
      res.end('expected sha256:<64 hex>');
      return;
    }
    const file = join(this.o.storeDir, `sha256-${digest.slice(7)}.rdt`);
    let bytes: Buffer;
    try {
      bytes = await readFile(file);
    } catch {
      json(res, 404, { detail: `no stored trajectory ${digest}` });
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'no-store', 'content-length': bytes.length });
    res.end(bytes);
  }

  private async plan(req: IncomingMessage, res: ServerResponse, search: URLSearchParams): Promise<void> {
    const parsed = parsePlanQuery(search);
    if ('status' in parsed) {
      req.resume();
      json(res, 422, parsed.body);
      return;
    }
    // A declared length past the limit is answered before any of the body is read, a chunked body as
    // soon as it passes the limit; the rest is not read (closeAfterReply).
    const body = await readBoundedBody(req, { limit: BODY_LIMIT, refuse: 'declared' });
    if (body === 'too_large') {
      closeAfterReply(req, res, BODY_LIMIT);
      json(res, 413, { error: `a weldplan is at most ${BODY_LIMIT} bytes` });
      return;
    }
    if (body === 'gone') return; // the client left before its body arrived: nothing was queued
    if (body.length === 0) {
      json(res, 400, { error: 'empty body is not a weldplan' });
      return;
    }
    const job: Job = { options: parsed.ok, bytes: body, res, state: 'queued', connected: true, cancelled: false };
    const gone = () => {
      if (!job.connected) return;
      job.connected = false;
      this.cancel(job);
    };
    req.socket.once('end', gone);
    req.socket.once('close', gone);
    req.socket.once('error', gone);
    res.once('finish', () => {
      req.socket.off('end', gone);
      req.socket.off('close', gone);
      req.socket.off('error', gone);
    });
    this.queue.push(job);
    this.pump();
  }

  /** Client gone: a queued job leaves the queue; a running one has its process group signalled. */
  private cancel(job: Job): void {
    if (job.state === 'done' || job.cancelled) return;
    job.cancelled = true;
    if (job.state === 'queued') {
      this.queue = this.queue.filter((j) => j !== job);
      job.state = 'done';
      this.cancelledReply(job);
      return;
    }
    const pid = job.child?.pid;
    if (pid === undefined) return;
    this.log(`plan cancelled: SIGTERM to process group ${pid}`);
    signalGroup(pid, 'SIGTERM');
    job.killTimer = setTimeout(() => {
      this.log(`plan cancelled: SIGKILL to process group ${pid}`);
      signalGroup(pid, 'SIGKILL');
    }, KILL_AFTER_MS);
  }

  private cancelledReply(job: Job): void {
    if (!job.res.headersSent && job.res.writable) json(job.res, 499, { error: 'Planning cancelled' });
    else job.res.destroy();
  }

  private pump(): void {
    if (this.running || this.queue.length === 0) return;
    const job = this.queue.shift()!;
    this.running = job;
    job.state = 'running';
    void this.runJob(job)
      .catch((e: Error) => this.defect(job.res, e))
      .finally(() => {
        job.state = 'done';
        this.running = undefined;
        this.stage = null;
        this.pump();
      });
  }

  /** The job in a fresh planning process (the spare when it is alive, a new spare after it): what it answered and how it ended. */
  private async planIn(job: Job, tmpPath: string): Promise<{ child: ChildProcess; outcome: Extract<ChildMessage, { kind: 'done' | 'failed' }> | undefined; code: number | null; signal: NodeJS.Signals | null; err: string }> {
    const alive = (c: ChildProcess | undefined) => c !== undefined && c.exitCode === null && c.signalCode === null && c.connected;
    const child = alive(this.spare) ? this.spare! : this.spawnChild();
    this.spare = this.spawnChild();
    job.child = child;
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-8192)));
    let outcome: Extract<ChildMessage, { kind: 'done' | 'failed' }> | undefined;
    child.on('message', (m: ChildMessage) => {
      if (m.kind === 'stage') this.stage = m.stage;
      else outcome = m;
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
    child.send({ bytes: job.bytes, options: job.options, tmpPath } satisfies ChildJob);
    child.once('error', (e) => this.log(`planner child: ${e.message}`));
    const { code, signal } = await exited;
    return { child, outcome, code, signal, err };
  }

  private async runJob(job: Job): Promise<void> {
    // An unreadable container is answered without a planning process (sims/planner/intake.ts).
    const read = await this.intake.check(job.bytes);
    if (job.cancelled || !job.connected) {
      this.cancelledReply(job);
      return;
    }
    if (read.failed !== undefined) {
      json(job.res, 422, { error: read.failed });
      return;
    }
    const tmpPath = join(this.o.storeDir, `.tmp-${process.pid}-${randomBytes(6).toString('hex')}.rdt`);
    const fromSnapshot = childSnapshotInUse();
    let r = await this.planIn(job, tmpPath);
    if (fromSnapshot && r.outcome === undefined && r.code === CHILD_SNAPSHOT_REFUSED && !job.cancelled && job.connected) {
      // The process never ran (Node refused the snapshot before loading anything): the request goes, once,
      // to a fresh process started from the bundle, and so does every later one.
      this.log(`planner: a planning process could not start from its startup snapshot (exit ${r.code}: ${r.err.trim().split('\n')[0]}); planning processes start from their bundle from now on`);
      refuseChildSnapshot();
      if (this.spare?.pid !== undefined) signalGroup(this.spare.pid, 'SIGKILL');
      this.spare = undefined;
      r = await this.planIn(job, tmpPath);
    }
    const { child, outcome, code, signal, err } = r;
    clearTimeout(job.killTimer);
    // Whatever the child left in its group (helpers) goes with it.
    if (child.pid !== undefined) signalGroup(child.pid, 'SIGKILL');
    const dropTmp = () => rmSync(tmpPath, { force: true });
    if (job.cancelled || !job.connected) {
      dropTmp();
      this.cancelledReply(job);
      return;
    }
    if (!outcome || code !== 0) {
      dropTmp();
      const why = outcome?.kind === 'failed' ? outcome.text : `PlanningProcessFailed: planning process exited with ${signal ?? `code ${code}`}`;
      if (!outcome) this.log(`planner child failed (${signal ?? code}): ${err}`);
      json(job.res, 422, { error: why });
      return;
    }
    if (outcome.kind === 'failed') {
      dropTmp();
      json(job.res, 422, { error: outcome.text });
      return;
    }
    if (outcome.dense) {
      // Stored only now: the child succeeded and the client is still connected (document 2 part 1).
      renameSync(tmpPath, join(this.o.storeDir, `sha256-${outcome.dense.digest.slice(7)}.rdt`));
    } else dropTmp();
    if (outcome.denseError) this.keepRefused(job, outcome.resultText, outcome.requestSha256);
    sendJsonText(job.res, 200, outcome.resultText);
  }

  /** refused/<name>/{request.weldplan, request.json, result.json}, newest 5 (document 2 part 2). */
  private keepRefused(job: Job, resultText: string, requestSha256: string): void {
    const dir = join(this.o.storeDir, 'refused');
    mkdirSync(dir, { recursive: true });
    const name = `${String(Date.now()).padStart(13, '0')}-${String(++this.seq).padStart(6, '0')}-${requestSha256.slice(0, 12)}`;
    const tmp = join(dir, `.tmp-${name}`);
    mkdirSync(tmp);
    writeFileSync(join(tmp, 'request.weldplan'), job.bytes);
    writeFileSync(join(tmp, 'request.json'), encodeJson({ options: job.options, received_bytes: job.bytes.length }));
    writeFileSync(join(tmp, 'result.json'), resultText);
    renameSync(tmp, join(dir, name));
    const kept = readdirSync(dir).filter((n) => !n.startsWith('.') && statSync(join(dir, n)).isDirectory()).sort();
    for (const old of kept.slice(0, Math.max(0, kept.length - REFUSED_KEPT))) rmSync(join(dir, old), { recursive: true, force: true });
  }
}

/** A planning process in its own process group (pgid = its pid), with an IPC channel. */
function spawnChild(): ChildProcess {
  const c = spawn(process.execPath, programArgs('planner-child'), { detached: true, stdio: ['ignore', 'ignore', 'pipe', 'ipc'], serialization: 'advanced' });
  c.on('error', () => undefined);
  return c;
}

function signalGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
  }
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  sendJsonText(res, status, encodeJson(body), headers);
}

function sendJsonText(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  const b = Buffer.from(text, 'utf8');
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': b.length, ...headers });
  res.end(b);
}


