// Worker-thread adapter of the core host. Real time and fast clocks: it never yields to its event loop
// while cycling; the clock sleeps with Atomics.wait until shortly before each deadline, then the worker
// drains service messages synchronously and runs one cycle. Stepped clock: it waits for messages and runs
// cycles only when asked ('step'), draining messages between them. Lateness and overruns are counted,
// never assumed away (NOTES-dependencies: setTimeout alone misses cycles).

import { receiveMessageOnPort, workerData, type MessagePort } from 'node:worker_threads';
import { CoreHost, raiseThreadPriority } from './host.ts';
import { ReplayPacer, scanForPacing } from '../../drivers/replay/pacer.ts';
import type { CoreStartOptions, FromCore, ToCore } from './protocol.ts';

const { port, options } = workerData as { port: MessagePort; options: CoreStartOptions };
let pacer: ReplayPacer | undefined;
/** Paced replay: what the core sent while it was being created (bring-up events), for the pacer to check first. */
let beforePacer: FromCore[] | undefined;
const send = (m: FromCore) => {
  if (pacer) {
    pacer.observe(m);
    port.postMessage(pacer.outward(m));
    return;
  }
  beforePacer?.push(m);
  port.postMessage(m);
};

/** Cycles run between two looks at the port in paced replay (about a millisecond of work). */
const PACE_BUDGET = 200;
/** How often a held paced core publishes its (unchanged) status: the core's own publication period off real time. */
const HELD_PUBLISH_MS = 10;

/**
 * Paced replay (clock 'recorded'): the pacer runs the core up to each recorded request and matches the live
 * one; the port is read between slices so live requests and shutdown get in.
 */
async function paced(): Promise<void> {
  const file = (options.driverParams?.file as string | undefined) ?? '';
  const scan = scanForPacing(file);
  beforePacer = [];
  const host = await CoreHost.create(options, send, 'none (paced replay)', { t0Ns: BigInt(scan.header.t0_ns), timesNs: scan.times, hostTimesNs: scan.hostTimes });
  const p = (pacer = new ReplayPacer(host, scan, { file, mode: String(options.driverParams?.mode ?? 'strict'), reportFile: options.replayPace?.verdictFile, toService: (m) => port.postMessage(m), speed: options.replayPace?.speed ?? null }));
  // Events of bring-up (a latched restart_required) were recorded at cycle 0: compared like any other.
  for (const m of beforePacer.splice(0)) p.observe(m);
  beforePacer = undefined;
  let running = true;
  let wake: (() => void) | null = null;
  port.on('message', (msg: ToCore) => {
    if (!running) return;
    if (msg.t === 'shutdown') running = false;
    else if (msg.t === 'flush_record') {
      // A simulated crash comes next: the recorded core ran to the end of its recording before it died.
      p.runToEnd();
      port.postMessage({ t: 'record_flushed', id: msg.id } satisfies FromCore);
    }
    // A recording made on the stepped clock has the test's steps among its requests: matched like any other.
    else if (msg.t === 'step' && !p.steps) host.handle(msg);
    else p.offer(msg);
    wake?.();
  });
  while (running) {
    const s = p.advance(PACE_BUDGET);
    if (s !== 'more') p.writeVerdict();
    if (s === 'more') await new Promise<void>((r) => setImmediate(r));
    else if (s === 'pace') {
      // Paced to the recorded time: sleep until the next cycle is due (at least a timer tick; the cycles
      // due by then run back to back), or until a message comes in.
      await new Promise<void>((r) => {
        const timer = setTimeout(() => {
          wake = null;
          r();
        }, Math.max(1, Math.min(p.pauseMs, HELD_PUBLISH_MS)));
        wake = () => {
          clearTimeout(timer);
          wake = null;
          r();
        };
      });
    } else {
      // Held (waiting for a live request, or past the recording): time stands still, but a core keeps
      // publishing its status, and the service may be waiting for the next publication (reset_fault's fresh
      // observation) before it sends the very request the replay waits for.
      const woken = await new Promise<boolean>((r) => {
        const timer = setTimeout(() => {
          wake = null;
          r(false);
        }, HELD_PUBLISH_MS);
        wake = () => {
          clearTimeout(timer);
          wake = null;
          r(true);
        };
      });
      if (!woken && running && p.mayPublish()) host.core.publish(host.core.now);
    }
  }
  p.finish();
  await host.close().catch(() => undefined);
  port.close();
}

async function main(): Promise<void> {
  if (options.clock.mode === 'recorded') return paced();
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

main().catch((e: unknown) => {
  send({ t: 'fatal', message: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
  // Give the message a chance to leave, then end the thread so the service sees the exit.
  setTimeout(() => process.exit(1), 50);
});
