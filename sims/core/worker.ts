// Worker-thread adapter of the core host. Real time and fast clocks: it never yields to its event loop
// while cycling; the clock sleeps with Atomics.wait until shortly before each deadline, then the worker
// drains service messages synchronously and runs one cycle. Stepped clock: it waits for messages and runs
// cycles only when asked ('step'), draining messages between them. Lateness and overruns are counted,
// never assumed away (NOTES-dependencies: setTimeout alone misses cycles).

import { parentPort, receiveMessageOnPort, workerData, type MessagePort } from 'node:worker_threads';
import { CoreHost, raiseThreadPriority } from './host.ts';
import { runPaced } from '../replay/worker-loop.ts';
import { INCARNATION_OVER, type CoreStartOptions, type FromCore, type ToCore } from './protocol.ts';

/** What the thread starts with; `reusable`: it serves later incarnations too (sims/service/core-threads.ts). */
const first = workerData as { port: MessagePort; options: CoreStartOptions; reusable?: boolean };

/** One core incarnation on `port`, to its shutdown. */
async function incarnation(port: MessagePort, options: CoreStartOptions): Promise<void> {
  const send = (m: FromCore) => port.postMessage(m);
  // Paced replay is the replay component's (sims/replay/): it drives this core against a recording.
  if (options.clock.mode === 'recorded') return runPaced(port, options);
  // Only a real-time clock deserves real-time scheduling; fast and stepped clocks run flat out.
  const scheduling = options.clock.mode === 'realtime' ? raiseThreadPriority(options.priority ?? 'auto') : 'none (not real time)';
  const host = await CoreHost.create(options, send, scheduling);
  let running = true;
  const drain = () => {
    for (let m = receiveMessageOnPort(port); m && running; m = receiveMessageOnPort(port)) {
      if (!host.handle(m.message as ToCore)) running = false;
    }
  };

  if (options.clock.mode === 'stepped') {
    host.stepper = (cycles) => host.step(cycles, drain);
    await new Promise<void>((resolve) => {
      port.on('message', (msg: ToCore) => {
        if (!running) return;
        if (!host.handle(msg)) {
          running = false;
          resolve();
        }
      });
    });
  } else {
    while (running) {
      host.cycle();
      drain();
    }
  }
  await host.close().catch(() => undefined);
  port.close();
}

function run(port: MessagePort, options: CoreStartOptions): void {
  incarnation(port, options).then(
    () => {
      if (first.reusable) parentPort!.postMessage({ t: INCARNATION_OVER });
    },
    (e: unknown) => {
      port.postMessage({ t: 'fatal', message: e instanceof Error ? `${e.name}: ${e.message}` : String(e) } satisfies FromCore);
      // Give the message a chance to leave, then end the thread so the service sees the exit.
      setTimeout(() => process.exit(1), 50);
    },
  );
}

run(first.port, first.options);
// A kept thread: the next incarnation comes as a message with its own port and options.
if (first.reusable) parentPort!.on('message', (m: { port: MessagePort; options: CoreStartOptions }) => run(m.port, m.options));
