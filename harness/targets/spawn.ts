// Starting a reference program (the stack, the weld planner stub, the OLP server) as a process of its own
// and waiting for its `ready {...}` line: with the program hosts of program-host.ts, the one way the
// harness starts the implementation (DESIGN.md rule 1). Internal to harness/targets/; sim.ts adds the
// stack's own flags, olp.ts the OLP server's.

import { spawn, type ChildProcess } from 'node:child_process';
import { makeTempDir, removeTempDir } from './exit-cleanup.ts';
import { join } from 'node:path';
import { HarnessError } from '../errors.ts';
import { ROOT, referenceCommand, referenceEnv } from './reference.ts';
import type { PlannerEndpoint } from './types.ts';
import { hostingEnabled, startHosted, type HostedProgram } from './program-host.ts';

/** A reference program started as a process, once it has printed its `ready {...}` line. */
export interface ReadyProcess<R> {
  /** The process (absent for a session of a stack host, harness/targets/program-host.ts). */
  child?: ChildProcess;
  ready: R;
  stderr: () => string;
  /** Close its stdin (the lifeline), then SIGTERM after 5 s and SIGKILL after 10 s; resolves at exit. */
  stop(): Promise<void>;
  /** Begin the orderly stop (close the lifeline) without waiting for it; stop() then waits. */
  beginStop(): void;
}

/** Spawn `args` and wait for the process's ready line; what it printed on stderr goes into any error. */
export async function spawnReady<R>(what: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<ReadyProcess<R>> {
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'], cwd: ROOT, env: referenceEnv(env) });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err = (err + d).slice(-64 * 1024);
  });
  const ready = await new Promise<R>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new HarnessError('HIL_ERR_TARGET_START', `${what} did not report ready within ${timeoutMs} ms\n${err}`));
    }, timeoutMs);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('ready '));
      if (line) {
        clearTimeout(timer);
        resolve(JSON.parse(line.slice(6)) as R);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new HarnessError('HIL_ERR_TARGET_START', `${what} exited with code ${code} before ready\n${err}`, { detail: { exit_code: code ?? undefined } }));
    });
  });
  child.removeAllListeners('exit');
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child,
    ready,
    stderr: () => err,
    beginStop: () => void child.stdin!.end(),
    async stop() {
      child.stdin!.end();
      const t = setTimeout(() => child.kill('SIGTERM'), 5_000);
      const k = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
      clearTimeout(k);
    },
  };
}

/**
 * A reference server (`hil serve`, `hil planner serve`, `hil olp serve`) started with `args`, `own` added
 * to its environment, once it has printed its ready line: a session of a host of that program this worker
 * keeps (program-host.ts) unless `hosted` is false or HIL_STACK_HOST=off, else a process of its own. The
 * arguments are the same either way (a session's `--lifeline-stdin` is its host's business).
 */
export function startServer<R>(program: HostedProgram, what: string, args: string[], o: { timeoutMs: number; own?: Record<string, string>; hosted?: boolean }): Promise<ReadyProcess<R>> {
  const own = o.own ?? {};
  return (o.hosted ?? true) && hostingEnabled() ? startHosted<R>(args, own, o.timeoutMs, program, what) : spawnReady<R>(what, [...referenceCommand(program), ...args], { ...process.env, ...own }, o.timeoutMs);
}

export interface PlannerProcess {
  endpoint: PlannerEndpoint;
  stderr: () => string;
  stop(): Promise<void>;
}

/**
 * Start the weld planner stub (`hil planner serve`) on 127.0.0.1 and a free port, its store in `dir`, and
 * wait for its ready line: a session of a planner host this worker keeps (program-host.ts), or a process
 * of its own with HIL_STACK_HOST=off. Internal to harness/targets/.
 */
export async function startPlanner(dir: string, timeoutMs = 30_000): Promise<PlannerProcess> {
  const args = ['serve', '--host', '127.0.0.1', '--port', '0', '--dense-store-dir', dir, '--lifeline-stdin'];
  const p = await startServer<{ planner: string; pid: number; store: string }>('planner', 'planner', args, { timeoutMs });
  return {
    endpoint: { url: p.ready.planner, pid: p.ready.pid, storeDir: p.ready.store, stubHooks: true },
    stderr: p.stderr,
    stop: () => p.stop(),
  };
}

/**
 * The weld planner stub on its own (no cell stack), its store in a temporary directory of its own: the
 * planner of the sim target, and of the replay target (a planner is not replayed).
 */
export async function openStubPlanner(): Promise<{ endpoint: PlannerEndpoint; close(): Promise<void> }> {
  const dir = await makeTempDir('hil-planner-');
  try {
    const p = await startPlanner(join(dir, 'planner-store'));
    return {
      endpoint: p.endpoint,
      async close() {
        await p.stop();
        await removeTempDir(dir, { maxRetries: 3 });
      },
    };
  } catch (e) {
    await removeTempDir(dir);
    throw e;
  }
}
