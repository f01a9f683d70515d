// Program hosts (sims/sessions.ts): processes that serve sessions of one reference server one after another,
// kept by this harness worker and reused: stack hosts (`hil serve sessions`), planner hosts (`hil planner
// sessions`) and OLP hosts (`hil olp sessions`). A replayed run starts a stack for every test
// (docs/recording.md "The replay target"); from a host, a replayed stack costs its service, core and
// sockets, not a process start, the bundle's compilation, the machine's loading and a new core thread
// (10 ms of wall against 155 here, bench/stack-start.bench.ts --replay). A session is a whole
// `hil serve ARGS` stack, or a whole `hil planner serve` or `hil olp serve` server; a host runs one at a
// time, so a test with a variant open beside its own stack takes a second host. The idle hosts are kept at
// module level on purpose: one pool per worker process and program, shared by the files it runs (vitest's
// isolate: false).
//
// The sim target's stacks that are not recorded are sessions too (sim.ts hostedByDefault): a fresh stack
// per file, without a process start each; so are its planners (spawn.ts startPlanner) and OLP servers
// (olp.ts), about 13 and 20 a run: each a process start saved (an OLP server's costs about 110 ms of CPU),
// and a server that starts in a warm host runs code V8 has already compiled. A host one of whose sessions left
// resources running (a timer, a socket: `left [...]` from sims/sessions.ts) serves no further session, so
// each session starts as fresh as one in a process of its own. A session's children (a planner's planning
// processes, an OLP server's STEP workers) are the host's, and the ready line's pid is the host's.
//
// Internal to harness/targets/ (sim.ts startStack, for a stack started with `hosted`; spawn.ts, olp.ts).
// HIL_STACK_HOST=off starts every stack, planner and OLP server as a process of its own instead.

import { spawn, type ChildProcess } from 'node:child_process';
import { HarnessError } from '../errors.ts';
import { niceNow, reniceProcess } from '../priority.ts';
import { ROOT, referenceCommand, referenceEnv, type ReferenceProgram } from './reference.ts';
import type { ReadyProcess } from './spawn.ts';
import { killAtExit } from './exit-cleanup.ts';

/** Idle hosts kept per worker; more are stopped when their session ends. */
const KEEP_IDLE = 2;
/** How long a session may take to stop before its host is killed (as spawnReady's stop kills at 10 s). */
const STOP_MS = 10_000;

/** The reference servers a host can serve. */
export type HostedProgram = Exclude<ReferenceProgram, 'config'>;

/** Whether stacks marked `hosted`, planners and OLP servers start in hosts (HIL_STACK_HOST=off: never). */
export function hostingEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.HIL_STACK_HOST !== 'off';
}

/** What a session's environment adds to its host's: what changed in the harness's since the host started, and the stack's own. */
export function sessionEnv(host: NodeJS.ProcessEnv, now: NodeJS.ProcessEnv, own: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(now)) if (v !== undefined && host[k] !== v) env[k] = v;
  return Object.assign(env, own);
}

class ProgramHost {
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
    private readonly program: HostedProgram,
    private readonly env: NodeJS.ProcessEnv,
    /** The nice value its threads run at: the worker's when it was started (take moves it). */
    public nice: number,
  ) {
    this.child = spawn(process.execPath, [...referenceCommand(program, env), 'sessions'], { stdio: ['pipe', 'pipe', 'pipe'], cwd: ROOT, env: referenceEnv(env) });
    // A worker that exits with a session still starting here (a run ended by a signal) kills it first (exit-cleanup.ts).
    killAtExit(this.child);
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
      this.exited = new Error(`the ${this.program} host exited (${signal ?? `status ${code}`})`);
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
   * Start a session: the program's `ARGS` (`hil serve ARGS`, `hil olp serve ...`) with `env` set, and
   * whatever of the harness's environment changed since the host started (a process of its own would have
   * been started with it); its ready line, or the status it refused with.
   */
  async start<R>(args: string[], own: Record<string, string>, timeoutMs: number, stderr: (chunk: string) => void): Promise<{ ready: R } | { code: number }> {
    const env = sessionEnv(this.env, process.env, own);
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
        `the ${this.program}`,
      );
    } catch (e) {
      this.err = null;
      throw e;
    }
  }

  /** Stop the running session (a host that does not answer in time is killed). */
  async stop(): Promise<void> {
    try {
      await this.ask({ t: 'stop' }, (line) => (line === 'stopped' ? true : undefined), STOP_MS, `stopping the ${this.program}`);
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

/**
 * The idle hosts of this worker, by the command they run (the bundle a run built), each with the nice value
 * its threads were started at.
 */
const idle = new Map<string, ProgramHost[]>();

/**
 * Hosts are kept per command: the program's bundle a run built and the Node arguments it starts with; and
 * per NODE_OPTIONS, which a host's own Node took at its start and a session's environment cannot change.
 */
function hostKey(program: HostedProgram, env: NodeJS.ProcessEnv): string {
  return [...referenceCommand(program, env), env.NODE_OPTIONS ?? ''].join('\0');
}

/** This worker's idle hosts for `key` (the list is kept). */
function idleFor(key: string): ProgramHost[] {
  let list = idle.get(key);
  if (!list) idle.set(key, (list = []));
  return list;
}

/**
 * An idle host for a session at the worker's nice value now, or a new one. One worker runs files of every
 * priority one after another (harness/priority.ts: its nice value only goes up), and a host keeps the value
 * it was started at: a host started for a quiet file would serve a busy file's stack at the quiet priority,
 * and one started for a busy file a quiet file's at the busy one. So an idle host is first moved to the
 * worker's value, as if started there (its threads that inherited its value; priority.ts reniceProcess),
 * and one that cannot be moved (back up, without privilege) is stopped, never used at the wrong value.
 */
function take(program: HostedProgram, env: NodeJS.ProcessEnv): { host: ProgramHost; key: string } {
  const key = hostKey(program, env);
  const nice = niceNow();
  const list = idleFor(key);
  for (let h = list.pop(); h; h = list.pop()) {
    if (!h.alive) continue;
    if (h.nice !== nice) {
      try {
        reniceProcess(h.pid, h.nice, nice);
        h.nice = nice;
      } catch {
        h.close();
        continue;
      }
    }
    return { host: h, key };
  }
  return { host: new ProgramHost(program, { ...env }, nice), key };
}

/**
 * Start idle hosts now until this worker has `count` for its current command (at most KEEP_IDLE), so that
 * the next sessions find them loaded: a host's start (a process, the bundle's compilation, the machine's
 * loading) otherwise falls inside the first test that opens a stack, on the replay target the first test of
 * each worker's first file (1.5 to 2.5 s of that test's wall time beside five other workers starting, 2-core
 * host), and inside the first test that opens a variant beside its own stack (a second host: about 1 s of
 * suites/machine/recovery.test.ts "io_arm with torch outputs only ..."). Called from the conformance
 * project's setup file while vitest collects a file (harness/targets/warm-setup.ts). A host started at
 * another nice value than the one a session later takes it at is moved as take() moves any.
 */
export function warmHosts(count: number, core?: 'recorded', env: NodeJS.ProcessEnv = process.env): void {
  if (!hostingEnabled(env)) return;
  const list = idleFor(hostKey('stack', env));
  // HIL_WARM_CORE: the host makes the paced replay's core thread before its first session (sims/main.ts).
  for (let have = list.filter((h) => h.alive && !h.tainted).length; have < Math.min(count, KEEP_IDLE); have++) list.push(new ProgramHost('stack', { ...env, ...(core ? { HIL_WARM_CORE: core } : {}) }, niceNow()));
}

function giveBack(key: string, host: ProgramHost): void {
  const list = idleFor(key);
  if (host.alive && !host.tainted && list.length < KEEP_IDLE) list.push(host);
  else host.close();
}

/**
 * Start `hil serve ARGS` (or the planner's or OLP server's `serve ...`) as a session of a host of that
 * program, with `env` added to the host's environment for the session; the same promise and errors as
 * spawnReady's (HIL_ERR_TARGET_START with the session's standard error when it exits before ready or does
 * not report ready in time).
 */
export async function startHosted<R>(args: string[], env: Record<string, string>, timeoutMs: number, program: HostedProgram = 'stack', what = 'stack'): Promise<ReadyProcess<R>> {
  const { host, key } = take(program, process.env);
  let err = '';
  const collect = (d: string) => {
    err = (err + d).slice(-64 * 1024);
  };
  let started: { ready: R } | { code: number };
  try {
    started = await host.start<R>(args, env, timeoutMs, collect);
  } catch (e) {
    host.kill();
    throw new HarnessError('HIL_ERR_TARGET_START', `${what} did not report ready: ${(e as Error).message}\n${err}`);
  }
  if ('code' in started) {
    giveBack(key, host);
    throw new HarnessError('HIL_ERR_TARGET_START', `${what} exited with code ${started.code} before ready\n${err}`, { detail: { exit_code: started.code } });
  }
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= host.stop().then(() => {
      giveBack(key, host);
    }));
  return {
    ready: started.ready,
    stderr: () => err,
    beginStop: () => void stop(),
    stop,
  };
}
