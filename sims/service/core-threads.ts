// The thread a core incarnation runs in (its loop's worker entry, sims/core-loops.ts). A new worker thread costs a new V8 isolate
// and the compilation of the core's code and of Node's own modules in it: about 40 ms of CPU here, most of
// what a stack costs in a stack host (sims/sessions.ts, bench/stack-start.bench.ts), and then the warming of
// the cycle's code again (V8 optimizes the record writer and the cycle anew in every isolate). A thread
// therefore, once its incarnation has ended cleanly, waits for the next one instead of exiting, and the next
// incarnation in this process of the same loop gets it, whatever its clock, with fresh core state (every
// object of an incarnation is made by it; the core's modules keep none). A real-time core raises its
// thread's priority (SCHED_FIFO where permitted) for its cycling and gives it back when the cycling ends
// (sims/core/host.ts lowerThreadPriority), so a kept thread waits at normal priority. A thread whose priority
// could not be given back says so as its incarnation ends; it is kept only for an incarnation of the same
// real-time clock and scheduling request, never a stepped or fast core, so that it never cycles flat out at
// real-time priority. Only the simulated bus and the paced replay keep their threads: a real bus master such
// as node-ethercat is one per process and cannot restart (drivers/ethercat/node-ethercat.ts). A thread that
// failed, was terminated (a simulated crash) or exited is never reused.

import { Worker, type MessagePort } from 'node:worker_threads';
import { coreLoop } from '../core-loops.ts';
import { workerEntry, type WorkerName } from '../paths.ts';
import { INCARNATION_OVER, type CoreStartOptions, type IncarnationOver } from '../core/protocol.ts';

/** Idle reusable threads kept per process and list (IdleThreads); more are terminated when their incarnation ends. */
const KEEP_IDLE = 2;

/** The list of threads that still hold the raised priority of a real-time request: the same loop, clock and request. */
export function raisedKey(worker: WorkerName, options: CoreStartOptions): string {
  return [worker, options.clock.mode, options.clock.mode === 'realtime' ? (options.priority ?? 'auto') : ''].join('\0');
}

/**
 * The idle kept threads of a process. A thread at normal scheduling waits in its loop's list and serves any
 * incarnation of that loop (a stepped core after a real-time one, and the other way round); a thread that
 * still holds a raised priority waits in the list of its clock and request (raisedKey) and serves only an
 * incarnation asking the same, which takes it before a normal one.
 */
export class IdleThreads<T> {
  private readonly lists = new Map<string, T[]>();

  constructor(private readonly keep = KEEP_IDLE) {}

  private list(key: string): T[] {
    let l = this.lists.get(key);
    if (!l) this.lists.set(key, (l = []));
    return l;
  }

  /** An idle thread for an incarnation of `options` on `worker`'s loop, or none. */
  take(worker: WorkerName, options: CoreStartOptions): T | undefined {
    const raised = options.clock.mode === 'realtime' ? this.list(raisedKey(worker, options)).pop() : undefined;
    return raised ?? this.list(worker).pop();
  }

  /**
   * Keep `t` for `worker`'s loop: at normal scheduling, or still holding the priority its incarnation of
   * `raisedFor` raised. False when that list is full.
   */
  put(worker: WorkerName, t: T, raisedFor?: CoreStartOptions): boolean {
    const l = this.list(raisedFor ? raisedKey(worker, raisedFor) : worker);
    if (l.length >= this.keep) return false;
    l.push(t);
    return true;
  }

  /** The threads at normal scheduling waiting for `worker`'s loop. */
  normal(worker: WorkerName): number {
    return this.list(worker).length;
  }
}

const idle = new IdleThreads<Worker>();

/** Whether the incarnation's thread may be kept for a later one (see the header). */
export function keepable(options: CoreStartOptions): boolean {
  return coreLoop(options.clock.mode).keepThread && (options.clock.mode === 'recorded' || options.driver === 'sim');
}

/** The incarnation's end as the core link sees it: the thread's exit code, or 0 for a clean end of a kept thread. */
export interface CoreThread {
  /** The worker thread's id (the same for incarnations that ran in one kept thread). */
  readonly threadId: number;
  /** End the incarnation by force (a simulated crash, a shutdown that did not finish); the thread is not kept. */
  terminate(): Promise<void>;
  /** Once, when the incarnation is over. */
  onEnd(listener: (code: number) => void): void;
  /** An uncaught error in the thread (it then exits). */
  onError(listener: (e: Error) => void): void;
}

/**
 * Start an idle thread for the loop of the clock `mode` now, if this process has none waiting at normal
 * scheduling: its isolate and the loop's code are made while nothing waits for them, not inside the first
 * incarnation's start. For a stack host that is about to serve paced replays (sims/sessions.ts,
 * HIL_WARM_CORE): its first session otherwise made the thread inside the start of a test's stack. The
 * thread serves any clock of its loop, as every kept thread at normal scheduling does.
 */
export function warmThread(mode: 'fast' | 'stepped' | 'recorded'): number | undefined {
  const loop = coreLoop(mode);
  if (!loop.keepThread || idle.normal(loop.worker) > 0) return undefined;
  const w = new Worker(workerEntry(loop.worker), { workerData: { reusable: true } });
  // Idle, it must not keep the process alive.
  w.unref();
  idle.put(loop.worker, w);
  return w.threadId;
}

/** Run one core incarnation on `port` in a worker thread (a kept one when there is one for it). */
export function runIncarnation(port: MessagePort, options: CoreStartOptions): CoreThread {
  // The loop is the clock's (sims/core-loops.ts).
  const loop = coreLoop(options.clock.mode);
  const reusable = keepable(options);
  let w = reusable ? idle.take(loop.worker, options) : undefined;
  if (w) {
    w.ref();
    w.postMessage({ port, options }, [port]);
  } else w = new Worker(workerEntry(loop.worker), { workerData: { port, options, reusable }, transferList: [port] });
  const worker = w;
  let ended = false;
  let keep = reusable;
  const endListeners: Array<(code: number) => void> = [];
  const errorListeners: Array<(e: Error) => void> = [];
  const end = (code: number) => {
    if (ended) return;
    ended = true;
    worker.off('message', onMessage);
    worker.off('exit', onExit);
    worker.off('error', onError);
    for (const l of endListeners) l(code);
  };
  const onMessage = (m: Partial<IncarnationOver>) => {
    if (m?.t !== INCARNATION_OVER) return;
    end(0);
    // Idle, it must not keep the process alive.
    if (keep && idle.put(loop.worker, worker, m.normalScheduling === false ? options : undefined)) worker.unref();
    else void worker.terminate();
  };
  const onExit = (code: number) => {
    keep = false;
    end(code);
  };
  const onError = (e: Error) => {
    keep = false;
    for (const l of errorListeners) l(e);
  };
  worker.on('message', onMessage);
  worker.on('exit', onExit);
  worker.on('error', onError);
  return {
    threadId: worker.threadId,
    async terminate() {
      keep = false;
      if (ended) return;
      // Resolves once the thread has exited ('exit' has ended the incarnation by then).
      await worker.terminate();
      end(1);
    },
    onEnd: (l) => void endListeners.push(l),
    onError: (l) => void errorListeners.push(l),
  };
}
