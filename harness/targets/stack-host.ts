// Stack hosts (sims/sessions.ts, `hil serve sessions`): processes that serve reference stack sessions one
// after another, kept by this harness worker and reused. A replayed run starts a stack for every test
// (docs/recording.md "The replay target"); from a host, a replayed stack costs its service, core and
// sockets, not a process start, the bundle's compilation, the machine's loading and a new core thread
// (10 ms of wall against 155 here, bench/stack-start.bench.ts --replay). A session is a whole
// `hil serve ARGS` stack; a host runs one at a time, so a test with a variant open beside its own stack
// takes a second host.
//
// On a conformance run the hosts are the run's, not a worker's: the run's main process keeps them
// (harness/targets/host-broker.ts, started by the project's global setup) and a worker asks it for a session
// over a Unix socket named by HIL_HOST_BROKER. A host costs its start and the warming of its service's and
// core's code (about a second of CPU each, 2-core machine); with one pool per worker, each of six workers
// kept two (its file's stack and a variant beside it), thirteen in a run, where the run never had more than
// nine sessions open at once. Without a broker (the unit project, a program of its own) the worker keeps
// its own pool, at module level on purpose: shared by the files it runs (vitest's isolate: false).
//
// The sim target's stacks that are not recorded are sessions too (sim.ts hostedByDefault): a fresh stack
// per file, without a process start each. A host one of whose sessions left resources running (a timer, a
// socket: `left [...]` from sims/sessions.ts) serves no further session, so each stack starts as fresh as one
// in a process of its own.
//
// Internal to harness/targets/ (sim.ts startStack, for a stack started with `hosted`). HIL_STACK_HOST=off
// starts every stack as a process of its own instead.

import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { HarnessError } from '../errors.ts';
import { niceNow, reniceProcess } from '../priority.ts';
import { ROOT, referenceCommand, referenceEnv } from './reference.ts';
import type { ReadyProcess } from './spawn.ts';

/** Idle hosts a worker's own pool keeps (no broker); more are stopped when their session ends. */
const KEEP_IDLE = 2;
/** The environment variable that names the run's host broker's socket (host-broker.ts). */
export const BROKER_ENV = 'HIL_HOST_BROKER';
/** How long a session may take to stop before its host is killed (as spawnReady's stop kills at 10 s). */
const STOP_MS = 10_000;

/** Whether stacks marked `hosted` start in a stack host (HIL_STACK_HOST=off: never). */
export function hostingEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.HIL_STACK_HOST !== 'off';
}

/** What a session's environment adds to its host's: what changed in the harness's since the host started, and the stack's own. */
export function sessionEnv(host: NodeJS.ProcessEnv, now: NodeJS.ProcessEnv, own: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(now)) if (v !== undefined && host[k] !== v) env[k] = v;
  return Object.assign(env, own);
}

export class StackHost {
  private readonly child: ChildProcess;
  private out = '';
  /** Who reads the next line of standard output (one command is answered at a time). */
  private reader: ((line: string) => void) | null = null;
  /** The running session's standard error (a host's stderr goes to the session that runs). */
  private err: ((chunk: string) => void) | null = null;
  private exited: Error | null = null;
  /** A session of this host left resources running (sims/sessions.ts): the host serves no more sessions. */
  tainted = false;
  private readonly onExit: Array<() => void> = [];

  constructor(
    private readonly env: NodeJS.ProcessEnv,
    /** The nice value its threads run at: the worker's when it was started (take moves it). */
    public nice: number,
  ) {
    this.child = spawn(process.execPath, [...referenceCommand('stack', env), 'sessions'], { stdio: ['pipe', 'pipe', 'pipe'], cwd: ROOT, env: referenceEnv(env) });
    // A host must not keep the worker alive: its lifeline is its standard input, which closes with the worker.
    this.child.unref();
    for (const s of [this.child.stdin, this.child.stdout, this.child.stderr] as Array<{ unref?: () => void } | null>) s?.unref?.();
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      this.out += d;
      for (let nl = this.out.indexOf('\n'); nl >= 0; nl = this.out.indexOf('\n')) {
        const line = this.out.slice(0, nl);
        this.out = this.out.slice(nl + 1);
        if (line.startsWith('left ')) this.tainted = true;
        this.reader?.(line);
      }
    });
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => this.err?.(d));
    this.child.once('exit', (code, signal) => {
      this.exited = new Error(`the stack host exited (${signal ?? `status ${code}`})`);
      for (const f of this.onExit.splice(0)) f();
    });
    this.child.stdin!.on('error', () => undefined); // a host that died: reported by 'exit'
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.exited === null;
  }

  /** Call `f` once the host's process has exited. */
  whenGone(f: () => void): void {
    if (this.exited) f();
    else this.child.once('exit', f);
  }

  /** Send a command and wait for the first answer line `accept` takes (other lines are ignored). */
  private ask<T>(cmd: unknown, accept: (line: string) => T | undefined, timeoutMs: number, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.exited) return reject(this.exited);
      const done = () => {
        clearTimeout(timer);
        this.reader = null;
        const i = this.onExit.indexOf(died);
        if (i >= 0) this.onExit.splice(i, 1);
      };
      const died = () => {
        done();
        reject(this.exited!);
      };
      const timer = setTimeout(() => {
        done();
        this.kill();
        reject(new Error(`${what} took longer than ${timeoutMs} ms`));
      }, timeoutMs);
      this.onExit.push(died);
      this.reader = (line) => {
        const v = accept(line);
        if (v === undefined) return;
        done();
        resolve(v);
      };
      this.child.stdin!.write(`${JSON.stringify(cmd)}\n`);
    });
  }

  /**
   * Start a session: `hil serve ARGS` with `own` set, and whatever of the requesting worker's environment
   * (`now`) changed since the host started (a process of its own would have been started with it); its
   * ready line, or the status it refused with.
   */
  async start<R>(args: string[], now: NodeJS.ProcessEnv, own: Record<string, string>, timeoutMs: number, stderr: (chunk: string) => void): Promise<{ ready: R } | { code: number }> {
    const env = sessionEnv(this.env, now, own);
    this.err = stderr;
    try {
      return await this.ask(
        { t: 'start', args, env },
        (line) => {
          if (line.startsWith('ready ')) return { ready: JSON.parse(line.slice(6)) as R };
          if (line.startsWith('exited ')) return { code: (JSON.parse(line.slice(7)) as { code: number }).code };
          return undefined;
        },
        timeoutMs,
        'the stack',
      );
    } catch (e) {
      this.err = null;
      throw e;
    }
  }

  /** Stop the running session (a host that does not answer in time is killed). */
  async stop(): Promise<void> {
    try {
      await this.ask({ t: 'stop' }, (line) => (line === 'stopped' ? true : undefined), STOP_MS, 'stopping the stack');
    } catch {
      /* killed, or gone: either way the session is over */
    } finally {
      this.err = null;
    }
  }

  kill(): void {
    if (this.alive) this.child.kill('SIGKILL');
  }

  /** Stop the host (its stdin closes: it stops any session and exits). */
  close(): void {
    this.child.stdin!.end();
  }
}

/** Hosts are kept per command: the stack bundle a run built and the Node arguments it starts with. */
function hostKey(env: NodeJS.ProcessEnv): string {
  return referenceCommand('stack', env).join('\0');
}

/**
 * Idle stack hosts by the command they run, each with the nice value its threads run at: a worker's own
 * pool, or the run's (host-broker.ts). `keepIdle` bounds the idle hosts kept per command; more are stopped
 * when their session ends.
 */
export class HostPool {
  private readonly idle = new Map<string, StackHost[]>();
  /** Every host this pool started and has not let go of (idle or serving). */
  private readonly all = new Set<StackHost>();

  constructor(private readonly keepIdle: number) {}

  private idleFor(key: string): StackHost[] {
    let list = this.idle.get(key);
    if (!list) this.idle.set(key, (list = []));
    return list;
  }

  private started(env: NodeJS.ProcessEnv, nice: number): StackHost {
    const h = new StackHost(env, niceNow());
    this.all.add(h);
    h.whenGone(() => this.all.delete(h));
    if (h.nice !== nice) {
      // Just started, the host may be making its threads: a thread made between the two passes is made by one
      // already moved, and so moved too.
      try {
        reniceProcess(h.pid, h.nice, nice);
        reniceProcess(h.pid, h.nice, nice);
        h.nice = nice;
      } catch {
        /* gone already: its start reports that */
      }
    }
    return h;
  }

  /**
   * An idle host for a session at nice value `nice`, or a new one. A host keeps the value it was started or
   * last moved at: a host of a quiet file would serve a busy file's stack at the quiet priority, and the
   * other way round. So an idle host at that value is taken first, then one that can be moved there (a
   * lower value can always be raised; a higher one lowered only with privilege, priority.ts reniceProcess),
   * and only then is a new one started; one that cannot be moved stays idle for a later session at its value.
   */
  take(env: NodeJS.ProcessEnv, nice: number): { host: StackHost; key: string } {
    const key = hostKey(env);
    const list = this.idleFor(key);
    for (let i = list.length - 1; i >= 0; i--) if (!list[i]!.alive) list.splice(i, 1);
    const order = [...list].sort((a, b) => Number(b.nice === nice) - Number(a.nice === nice) || Number(b.nice < nice) - Number(a.nice < nice));
    for (const h of order) {
      if (h.nice !== nice) {
        try {
          reniceProcess(h.pid, h.nice, nice);
          h.nice = nice;
        } catch {
          continue;
        }
      }
      list.splice(list.indexOf(h), 1);
      return { host: h, key };
    }
    return { host: this.started({ ...env }, nice), key };
  }

  /** Start idle hosts until `count` are idle for the command `env` names (at most keepIdle). */
  warm(count: number, env: NodeJS.ProcessEnv, nice: number): void {
    const list = this.idleFor(hostKey(env));
    for (let have = this.idleCount(env); have < Math.min(count, this.keepIdle); have++) list.push(this.started({ ...env }, nice));
  }

  /** How many hosts are idle for the command `env` names. */
  idleCount(env: NodeJS.ProcessEnv): number {
    return this.idleFor(hostKey(env)).filter((h) => h.alive && !h.tainted).length;
  }

  giveBack(key: string, host: StackHost): void {
    const list = this.idleFor(key);
    if (host.alive && !host.tainted && list.length < this.keepIdle) list.push(host);
    else host.close();
  }

  /** Stop every host (their standard input closes; each stops its session and exits). */
  closeAll(): void {
    for (const h of this.all) h.close();
    this.all.clear();
    this.idle.clear();
  }

  /** How many hosts this pool has started and not let go of (idle or serving). */
  get size(): number {
    return this.all.size;
  }
}

/** This worker's own pool: used when the run has no host broker. */
const local = new HostPool(KEEP_IDLE);

/** Whether a run-wide host broker serves this worker's sessions. */
function brokerPath(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env[BROKER_ENV] || undefined;
}

/**
 * Start idle hosts now until `count` are idle for the current command (at most KEEP_IDLE), so that the next
 * sessions find them loaded: a host's start (a process, the bundle's compilation, the machine's loading)
 * otherwise falls inside the first test that opens a stack, on the replay target the first test of each
 * worker's first file (1.5 to 2.5 s of that test's wall time beside five other workers starting, 2-core
 * host), and inside the first test that opens a variant beside its own stack (a second host: about 1 s of
 * suites/machine/recovery.test.ts "io_arm with torch outputs only ..."). Called from the conformance
 * project's setup file while vitest collects a file (harness/targets/warm-setup.ts). With a broker, the
 * run's pool starts them, `count` for each worker that asks (host-broker.ts).
 */
export function warmHosts(count: number, core?: 'recorded', env: NodeJS.ProcessEnv = process.env): void {
  if (!hostingEnabled(env)) return;
  // HIL_WARM_CORE: the host makes the paced replay's core thread before its first session (sims/sessions.ts).
  const hostEnv = { ...env, ...(core ? { HIL_WARM_CORE: core } : {}) };
  const broker = brokerPath(env);
  if (!broker) return local.warm(count, hostEnv, niceNow());
  const s = connect(broker);
  s.on('error', () => undefined); // warming is a head start, nothing depends on it
  s.end(`${JSON.stringify({ t: 'warm', count: Math.min(count, KEEP_IDLE), env: hostEnv, nice: niceNow(), worker: process.pid })}\n`);
}

/**
 * Start `hil serve ARGS` as a session of a stack host, with `env` added to the host's environment for the
 * session; the same promise and errors as spawnReady's (HIL_ERR_TARGET_START with the session's standard
 * error when it exits before ready or does not report ready in time).
 */
export async function startHosted<R>(args: string[], env: Record<string, string>, timeoutMs: number): Promise<ReadyProcess<R>> {
  const broker = brokerPath();
  if (broker) return startBrokered<R>(broker, args, env, timeoutMs);
  const { host, key } = local.take(process.env, niceNow());
  let err = '';
  const collect = (d: string) => {
    err = (err + d).slice(-64 * 1024);
  };
  let started: { ready: R } | { code: number };
  try {
    started = await host.start<R>(args, process.env, env, timeoutMs, collect);
  } catch (e) {
    host.kill();
    throw new HarnessError('HIL_ERR_TARGET_START', `stack did not report ready: ${(e as Error).message}\n${err}`);
  }
  if ('code' in started) {
    local.giveBack(key, host);
    throw new HarnessError('HIL_ERR_TARGET_START', `stack exited with code ${started.code} before ready\n${err}`, { detail: { exit_code: started.code } });
  }
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= host.stop().then(() => {
      local.giveBack(key, host);
    }));
  return {
    ready: started.ready,
    stderr: () => err,
    beginStop: () => void stop(),
    stop,
  };
}

/** What the broker answers on a session's connection, one JSON line each (host-broker.ts). */
export type BrokerReply = { t: 'err'; d: string } | { t: 'ready'; ready: unknown } | { t: 'exited'; code: number } | { t: 'failed'; message: string } | { t: 'stopped' };

/** What a worker asks the broker, one JSON line each. */
export type BrokerRequest =
  | { t: 'start'; args: string[]; env: NodeJS.ProcessEnv; own: Record<string, string>; nice: number; timeoutMs: number; trace?: string }
  | { t: 'stop' }
  | { t: 'warm'; count: number; env: NodeJS.ProcessEnv; nice: number; worker: number };

/**
 * A session of one of the run's hosts: one connection to the broker per session, which ends with it (a
 * worker that dies or closes the connection mid-session has its session stopped by the broker). The
 * session runs at this worker's nice value now and with this worker's environment, as a host of its own
 * would have; the errors are startHosted's.
 */
async function startBrokered<R>(path: string, args: string[], own: Record<string, string>, timeoutMs: number): Promise<ReadyProcess<R>> {
  const sock = connect(path);
  sock.setEncoding('utf8');
  let err = '';
  let buf = '';
  let onReply: ((r: BrokerReply) => void) | null = null;
  let closed: Error | null = null;
  const onClose: Array<() => void> = [];
  sock.on('data', (d: string) => {
    buf += d;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const r = JSON.parse(buf.slice(0, nl)) as BrokerReply;
      buf = buf.slice(nl + 1);
      if (r.t === 'err') err = (err + r.d).slice(-64 * 1024);
      else onReply?.(r);
    }
  });
  sock.on('error', (e) => {
    closed ??= e;
  });
  sock.on('close', () => {
    closed ??= new Error('the host broker closed the connection');
    for (const f of onClose.splice(0)) f();
  });
  // The broker bounds the start itself (it kills a host that does not answer in time); this bounds a broker
  // that does not answer at all.
  const next = (limitMs: number, what: string) =>
    new Promise<BrokerReply>((resolve, reject) => {
      if (closed) return reject(closed);
      const timer = setTimeout(() => {
        sock.destroy();
        reject(new Error(`${what} took longer than ${limitMs} ms`));
      }, limitMs);
      const gone = () => {
        clearTimeout(timer);
        reject(closed!);
      };
      onClose.push(gone);
      onReply = (r) => {
        clearTimeout(timer);
        onClose.splice(onClose.indexOf(gone), 1);
        onReply = null;
        resolve(r);
      };
    });
  const request: BrokerRequest = { t: 'start', args, env: process.env, own, nice: niceNow(), timeoutMs, ...(traceFile() ? { trace: traceFile() } : {}) };
  const answered = next(timeoutMs + BROKER_GRACE_MS, 'the stack');
  sock.write(`${JSON.stringify(request)}\n`);
  let started: BrokerReply;
  try {
    started = await answered;
  } catch (e) {
    sock.destroy();
    throw new HarnessError('HIL_ERR_TARGET_START', `stack did not report ready: ${(e as Error).message}\n${err}`);
  }
  if (started.t !== 'ready') {
    sock.end();
    if (started.t === 'exited') throw new HarnessError('HIL_ERR_TARGET_START', `stack exited with code ${started.code} before ready\n${err}`, { detail: { exit_code: started.code } });
    throw new HarnessError('HIL_ERR_TARGET_START', `stack did not report ready: ${started.t === 'failed' ? started.message : `the broker answered ${started.t}`}\n${err}`);
  }
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      const done = next(STOP_MS + BROKER_GRACE_MS, 'stopping the stack');
      sock.write(`${JSON.stringify({ t: 'stop' } satisfies BrokerRequest)}\n`);
      await done.catch(() => undefined); // stopped, killed or gone: either way the session is over
      sock.end();
    })());
  return {
    ready: started.ready as R,
    stderr: () => err,
    beginStop: () => void stop(),
    stop,
  };
}

/** Beyond the broker's own bounds, how long a worker waits for its answer before giving up on the broker. */
const BROKER_GRACE_MS = 5_000;

/** The file a benchmark's CPU trace books this worker's current test file's stacks to (bench/cpu-classes.ts), when it traces. */
function traceFile(): string | undefined {
  if (!process.env.HIL_CPU_TRACE) return undefined;
  return (globalThis as { [k: symbol]: { file?: string } | undefined })[Symbol.for('cell-hil.cpu-trace')]?.file;
}
