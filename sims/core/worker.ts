// The core's own cycling loop, a worker entry (sims/core-loops.ts chooses it for the real-time, fast and
// stepped clocks; a paced replay has its own entry, sims/replay/worker.ts). Real time and fast clocks: it never yields to its event loop
// while cycling; the clock sleeps with Atomics.wait until shortly before each deadline, then the worker
// drains service messages synchronously and runs one cycle. Stepped clock: it waits for messages and runs
// cycles only when asked ('step'), draining messages between them. Lateness and overruns are counted,
// never assumed away (NOTES-dependencies: setTimeout alone misses cycles).

import { serialize } from 'node:v8';
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { CoreHost, lowerThreadPriority, raiseThreadPriority } from './host.ts';
import type { CoreStartOptions, FromCore, PackedStatus } from './protocol.ts';
import { serveIncarnations, type IncarnationEnd } from './thread.ts';

/**
 * Real time and fast clocks: one cycle, then the messages that came meanwhile, until `drained` says stop.
 * A plain function rather than a loop inside the async `cycling`: V8 left that loop in baseline code for
 * good, with an inline-cache call for every property it read, a thousand times a second.
 */
function cycleUntil(host: CoreHost, drained: () => boolean): void {
  do host.cycle();
  while (drained());
}

/** One core incarnation on `port`, to its shutdown; how its thread's scheduling was left (thread.ts). */
async function cycling(port: MessagePort, options: CoreStartOptions): Promise<IncarnationEnd> {
  // A status snapshot leaves as its serialized bytes, read by the service only when needed (protocol.ts PackedStatus).
  const send = (m: FromCore) => port.postMessage(m.t === 'status' ? ({ t: 'status_packed', bytes: serialize(m.status), now_ns: m.status.now_ns } satisfies PackedStatus) : m);
  // A recorded clock is paced by the replay component, whose loop is another worker entry (sims/core-loops.ts).
  if (options.clock.mode === 'recorded') throw new Error('a recorded clock runs in the paced replay loop (sims/replay/worker.ts), not the cycling loop');
  // Only a real-time clock deserves real-time scheduling; fast and stepped clocks run flat out.
  const scheduling = options.clock.mode === 'realtime' ? raiseThreadPriority(options.priority ?? 'auto') : 'none (not real time)';
  const host = await CoreHost.create(options, send, scheduling);
  /** What the port carries: the core's protocol and the tap's messages, both for the host to take (host.ts handle). */
  type PortMessage = Parameters<CoreHost['handle']>[0];
  let running = true;
  const drain = () => {
    for (let m = receiveMessageOnPort(port); m && running; m = receiveMessageOnPort(port)) {
      if (!host.handle(m.message as PortMessage)) running = false;
    }
  };

  if (options.clock.mode === 'stepped') {
    host.stepper = (cycles) => host.step(cycles, drain);
    await new Promise<void>((resolve) => {
      port.on('message', (msg: PortMessage) => {
        if (!running) return;
        if (!host.handle(msg)) {
          running = false;
          resolve();
        }
      });
    });
  } else cycleUntil(host, () => (drain(), running));
  // The cycling is over: the rest (the stop, the heap's collection, a kept thread's wait) runs at normal priority.
  const normalScheduling = lowerThreadPriority(scheduling);
  await host.close().catch(() => undefined);
  port.close();
  return { normalScheduling };
}

serveIncarnations(cycling);
