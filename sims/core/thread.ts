// The worker-thread side of a core incarnation, whatever loop runs it: the thread starts with one port and
// its options, runs the loop to the incarnation's end, and, when kept (sims/service/core-threads.ts), says
// so on its parent port and serves the next incarnation that comes as a message. A loop that throws ends
// the thread after a 'fatal' message, so the service sees the exit. The loops themselves are chosen by
// clock mode in the core loop registry (sims/core-loops.ts): the core's own cycling loop (worker.ts) and
// the paced replay's (sims/replay/worker.ts), each a worker entry of its own, so the core never imports
// the replay component.

import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { INCARNATION_OVER, type CoreStartOptions, type FromCore, type IncarnationOver } from './protocol.ts';

/**
 * How an incarnation left its thread, as its end message says (protocol.ts IncarnationOver): `normalScheduling`
 * false when the thread could not give back the real-time priority it raised (sims/core/host.ts
 * lowerThreadPriority). A loop that raises nothing says nothing (void): its thread is at normal scheduling.
 */
export type IncarnationEnd = Pick<IncarnationOver, 'normalScheduling'>;

/** One core incarnation on `port`, to its shutdown. */
export type IncarnationLoop = (port: MessagePort, options: CoreStartOptions) => Promise<IncarnationEnd | void>;

/** Serve this thread's first incarnation with `loop`, and later ones too when the thread is kept. */
export function serveIncarnations(loop: IncarnationLoop): void {
  /**
   * What the thread starts with; `reusable`: it serves later incarnations too. A thread started ahead of any
   * incarnation (core-threads.ts warmThread) has neither port nor options: it waits for its first as a message.
   */
  const first = workerData as { port?: MessagePort; options?: CoreStartOptions; reusable?: boolean };
  const run = (port: MessagePort, options: CoreStartOptions): void => {
    loop(port, options).then(
      (end) => {
        if (first.reusable) parentPort!.postMessage({ t: INCARNATION_OVER, normalScheduling: end?.normalScheduling ?? true } satisfies IncarnationOver);
      },
      (e: unknown) => {
        port.postMessage({ t: 'fatal', message: e instanceof Error ? `${e.name}: ${e.message}` : String(e) } satisfies FromCore);
        // Give the message a chance to leave, then end the thread so the service sees the exit.
        setTimeout(() => process.exit(1), 50);
      },
    );
  };
  if (first.port && first.options) run(first.port, first.options);
  // A kept thread: the next incarnation comes as a message with its own port and options.
  if (first.reusable) parentPort!.on('message', (m: { port: MessagePort; options: CoreStartOptions }) => run(m.port, m.options));
}
