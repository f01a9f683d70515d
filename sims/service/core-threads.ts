// The thread a core incarnation runs in (its loop's worker entry, sims/core-loops.ts). A new worker thread costs a new V8 isolate
// and the compilation of the core's code and of Node's own modules in it: about 40 ms of CPU here, most of
// what a stack costs in a stack host (sims/sessions.ts, bench/stack-start.bench.ts). A thread therefore,
// once its incarnation has ended cleanly, waits for the next one instead of exiting: the next incarnation
// in this process with the same loop, clock and scheduling request gets it, with fresh core state (every
// object of an incarnation is made by it; the core's modules keep none). A real-time core raises its
// thread's priority (SCHED_FIFO where permitted) for its cycling and gives it back when the cycling ends
// (sims/core/host.ts lowerThreadPriority), so a kept thread waits at normal priority; it is still handed
// only to an incarnation of the same scheduling request, never to a stepped or fast core, so that a thread
// whose priority could not be given back never cycles flat out at real-time priority. Only the simulated
// bus and the paced replay keep their threads: a real bus master such as node-ethercat is one per process
// and cannot restart (drivers/ethercat/node-ethercat.ts). A thread that failed, was terminated (a simulated
// crash) or exited is never reused.

import { Worker, type MessagePort } from 'node:worker_threads';
import { coreLoop } from '../core-loops.ts';
import { workerEntry, type WorkerName } from '../paths.ts';
import { INCARNATION_OVER, type CoreStartOptions } from '../core/protocol.ts';

/** Idle reusable threads kept per process and kind (idleKey); more are terminated when their incarnation ends. */
const KEEP_IDLE = 2;
const idleByKind = new Map<string, Worker[]>();

/** This process's idle threads of `key` (the list is kept). */
function idleFor(key: string): Worker[] {
  let idle = idleByKind.get(key);
  if (!idle) idleByKind.set(key, (idle = []));
  return idle;
}

/** Which idle threads an incarnation may take: the same loop, clock and scheduling request. */
export function idleKey(worker: WorkerName, options: CoreStartOptions): string {
  return [worker, options.clock.mode, options.clock.mode === 'realtime' ? (options.priority ?? 'auto') : ''].join('\0');
}

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
 * Start an idle thread for incarnations on the clock `mode` now, if this process has none: its isolate and
 * the loop's code are made while nothing waits for them, not inside the first incarnation's start. For a
 * stack host that is about to serve paced replays (sims/sessions.ts, HIL_WARM_CORE): its first session
 * otherwise made the thread inside the start of a test's stack. Real time is never warmed: its thread is
 * kept per priority request, which only the incarnation knows.
 */
export function warmThread(mode: 'fast' | 'stepped' | 'recorded'): number | undefined {
  const loop = coreLoop(mode);
  if (!loop.keepThread) return undefined;
  const key = idleKey(loop.worker, { clock: { mode } } as CoreStartOptions);
  const idle = idleFor(key);
  if (idle.length) return undefined;
  const w = new Worker(workerEntry(loop.worker), { workerData: { reusable: true } });
  // Idle, it must not keep the process alive.
  w.unref();
  idle.push(w);
  return w.threadId;
}

/** Run one core incarnation on `port` in a worker thread (a kept one when there is one for it). */
export function runIncarnation(port: MessagePort, options: CoreStartOptions): CoreThread {
  // The loop is the clock's (sims/core-loops.ts).
  const loop = coreLoop(options.clock.mode);
  const reusable = keepable(options);
  const key = idleKey(loop.worker, options);
  const idle = idleFor(key);
  let w = reusable ? idle.pop() : undefined;
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
  const onMessage = (m: { t?: string }) => {
    if (m?.t !== INCARNATION_OVER) return;
    end(0);
    if (keep && idle.length < KEEP_IDLE) {
      // Idle, it must not keep the process alive.
      worker.unref();
      idle.push(worker);
    } else void worker.terminate();
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
