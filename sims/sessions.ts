// A program host: one process that serves sessions of one reference server one after another: the stack
// (`hil serve sessions`), the weld planner stub (`hil planner sessions`), the OLP server (`hil olp sessions`),
// so that a run which starts many stacks (a replayed run, a stack per test: docs/recording.md "Replaying a
// suite run"; the sim target's run, a stack per file and per variant) does not pay a process start, the bundle's compilation and the machine's loading for every test. Each
// session is a whole stack as `hil serve ARGS` starts it (its own service, core worker thread, sockets and
// directories) and stops the way a lifeline stop stops one; only the process and its loaded code are kept.
// A planner or OLP server session is the same: the server as its `serve ARGS` starts it, its children
// (planning processes, STEP workers, a local simulator's stack) this host's for the session's length.
//
// The protocol is one JSON line per command on standard input, answered on standard output:
//   {"t":"start","args":[...],"env":{...}}  -> the session's `ready {...}` line, or `exited {"code":N}` when
//                                              it refused to start (its reasons are on standard error)
//   {"t":"stop"}                            -> `stopped` once the session has stopped, after a line
//                                              `left [...]` when it left resources running (a timer...)
// `env` is set in process.env for the session and taken back when it stops. Closing standard input (the
// parent went away) or SIGINT/SIGTERM stops the session under way and ends the process. Standard error
// is shared: the harness keeps what each session wrote (harness/targets/program-host.ts).

import { createInterface } from 'node:readline';
import type { Running } from './primitives.ts';

/** How a program runs until it is stopped (primitives.ts runUntilStopped, or a session's). */
export type Runner = (stop: (why: string) => Promise<void>, o: { name: string; lifeline?: boolean; lifelineFd?: number }) => Running;

/** A server's main (`hil serve ARGS`, `hil planner serve ...`) with its runner: a status >= 0 when it ended (refused to start), -1 while it runs. */
export type Serve = (argv: string[], runner: Runner) => Promise<number>;

/** How long what a stopped session still has under way may take to settle before it counts as left running. */
const SETTLE_MS = 10;
const SETTLE_TRIES = 20;

interface Session {
  stop(why: string): Promise<void>;
  restoreEnv(): void;
  /** The process's active resources before the session started (process.getActiveResourcesInfo). */
  resources: string[];
}

/** The resources active now that were not before (by kind, counted). */
export function leftBehind(before: string[]): string[] {
  const count = new Map<string, number>();
  for (const r of before) count.set(r, (count.get(r) ?? 0) + 1);
  const out: string[] = [];
  for (const r of process.getActiveResourcesInfo()) {
    const n = count.get(r) ?? 0;
    if (n > 0) count.set(r, n - 1);
    else out.push(r);
  }
  return out;
}

/**
 * What is still running after a stop that was not before the session (leftBehind), once what the stop had
 * under way has had a moment to settle: up to SETTLE_TRIES waits of SETTLE_MS. A file request the stop
 * awaited last (the socket directory's lock file unlinked) is still listed until the event loop has turned
 * once after it resolved, so the first look again comes after that turn, before any timed wait: every
 * session stop used to wait SETTLE_MS for it, inside the time of the test whose stack it was.
 */
export async function settled(before: string[], sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms))): Promise<string[]> {
  let left = leftBehind(before);
  if (!left.length) return left;
  await new Promise<void>((r) => setImmediate(r));
  left = leftBehind(before);
  for (let k = 0; k < SETTLE_TRIES && left.length; k++) {
    await sleep(SETTLE_MS);
    left = leftBehind(before);
  }
  return left;
}

/** Set `env` in process.env; returns what takes it back. */
export function overlayEnv(env: Record<string, string>): () => void {
  const before = new Map<string, string | undefined>();
  for (const [k, v] of Object.entries(env)) {
    before.set(k, process.env[k]);
    process.env[k] = v;
  }
  return () => {
    for (const [k, v] of before) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
}

/** Who the host is in what it says on standard error, and what it makes ready before its first session. */
export interface HostOptions {
  /** The host's command, as its messages name it (`hil serve sessions`). */
  name: string;
  /** Run once before the first command is read (a stack host's replay core thread, sims/main.ts). */
  prepare?: () => void;
}

/**
 * Serve sessions until standard input closes. Returns -1 (the process keeps running; it exits when its
 * input ends or on a signal).
 */
export function runSessions(serve: Serve, o: HostOptions): number {
  let current: Session | null = null;
  // The standard streams are opened on first use: open them now, so that the first session is not taken for
  // having left their pipes behind.
  void process.stdout.writableLength;
  void process.stderr.writableLength;
  const say = (line: string) => void process.stdout.write(`${line}\n`);
  o.prepare?.();
  const stopCurrent = async (why: string) => {
    const s = current;
    current = null;
    if (!s) return;
    try {
      await s.stop(why);
    } finally {
      s.restoreEnv();
    }
    // A session must leave nothing behind (a timer, a socket, a worker): in a process of its own that went
    // unseen, here it would run on in every later session. Said on standard error, which the harness shows.
    // Said on standard output too, before the stop's answer: the harness then uses this host no more (the
    // next stack must start as fresh as one in a process of its own).
    // A request already under way when the stop returned (a file operation finishing) settles in a moment:
    // only what is still there after it has had that moment counts.
    const left = await settled(s.resources);
    if (left.length) {
      process.stderr.write(`${o.name}: the session left ${left.length} resources running: ${left.join(', ')}\n`);
      say(`left ${JSON.stringify(left)}`);
    }
  };

  const start = async (args: string[], env: Record<string, string>) => {
    // A start while a session runs ends that one first: one session at a time, never two sharing a core.
    await stopCurrent('the next session starts');
    const resources = process.getActiveResourcesInfo();
    const restoreEnv = overlayEnv(env);
    let stop: ((why: string) => Promise<void>) | undefined;
    const runner: Runner = (stopFn, o) => {
      let stopping: Promise<void> | undefined;
      stop = (why) =>
        (stopping ??= stopFn(why).catch((e: Error) => {
          process.stderr.write(`${o.name}: stop: ${(e as Error).message}\n`);
        }));
      return { stop, ready: (json) => say(`ready ${json}`) };
    };
    let code: number;
    try {
      code = await serve(args, runner);
    } catch (e) {
      process.stderr.write(`${o.name}: session: ${(e as Error).stack ?? String(e)}\n`);
      code = 1;
    }
    if (code >= 0 || !stop) {
      // Refused (usage, a machine refused) or failed to start: it stopped what it had started.
      restoreEnv();
      say(`exited ${JSON.stringify({ code: code >= 0 ? code : 1 })}`);
      return;
    }
    current = { stop, restoreEnv, resources };
  };

  const handle = async (line: string) => {
    let cmd: { t?: unknown; args?: unknown; env?: unknown };
    try {
      cmd = JSON.parse(line) as typeof cmd;
    } catch {
      process.stderr.write(`${o.name}: not a JSON command: ${line.slice(0, 200)}\n`);
      return;
    }
    if (cmd.t === 'start' && Array.isArray(cmd.args) && cmd.args.every((a) => typeof a === 'string')) {
      const env = cmd.env && typeof cmd.env === 'object' ? (cmd.env as Record<string, unknown>) : {};
      await start(cmd.args as string[], Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => typeof e[1] === 'string')));
    } else if (cmd.t === 'stop') {
      await stopCurrent('session stopped');
      say('stopped');
    } else process.stderr.write(`${o.name}: unknown command: ${line.slice(0, 200)}\n`);
  };

  // Commands are handled in order, each after the one before has finished.
  let queue = Promise.resolve();
  const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
  input.on('line', (line) => {
    queue = queue.then(() => handle(line));
  });
  let ending = false;
  const end = (why: string, status = 0) => {
    if (ending) return;
    ending = true;
    void queue
      .then(() => stopCurrent(why))
      .catch((e: Error) => process.stderr.write(`${o.name}: stop: ${e.message}\n`))
      .then(() => process.exit(status));
  };
  input.on('close', () => end('stdin closed'));
  process.stdin.on('error', () => end('stdin error'));
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => end(sig));
  return -1;
}
