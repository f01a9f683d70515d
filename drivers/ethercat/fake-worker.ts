// The fake master's cycle thread (thread mode): runs the fake bus at the configured period on host
// monotonic time, like node-ethercat's SCHED_FIFO cycle thread, never synchronised with the core's cycle.
// Out-of-band conditions arrive on a message port and are drained between cycles.

import { receiveMessageOnPort, workerData, parentPort, type MessagePort } from 'node:worker_threads';
import { FakeBus, type DomainPin, type FakeBusSpec, type FakeFault } from './fake-bus.ts';
import type { CycleThreadReport } from './fake-master.ts';
import { ownThreadId, raiseToFifo, schedulingOf, toNormalScheduling } from '../thread-scheduling.ts';

const d = workerData as { bench: FakeBusSpec; pins: DomainPin[]; domain: SharedArrayBuffer; status: SharedArrayBuffer; reached: number[]; port: MessagePort };
// Only the cycle runs at real-time priority. The master has this thread born at normal scheduling though a
// real-time core's thread makes it (fake-master.ts activate, drivers/thread-scheduling.ts); should it be born
// real-time all the same, it gives that back before setting the bus up.
const born = schedulingOf();
const setup = toNormalScheduling();
const bus = new FakeBus(d.bench, d.pins, d.domain, d.status, d.reached);
await bus.ready();
const period = d.bench.cycleNs;
// node-ethercat's cycle thread asks for SCHED_FIFO 49; the fake asks for the same where permitted
// (root or CAP_SYS_NICE) and runs at normal priority otherwise.
const cycling = raiseToFifo(49);
const sleeper = new Int32Array(new SharedArrayBuffer(4));
// The first bus cycle runs before activate() returns, so the domain never shows the driver its zeros.
let next = process.hrtime.bigint();
bus.cycle(next);
next += period;
parentPort!.postMessage({ t: 'running', scheduling: { born, setup, cycling }, tid: ownThreadId() } satisfies CycleThreadReport);

/**
 * The thread's end, at normal scheduling: the master has lowered it before asking it to stop (fake-master.ts
 * close says why); should that have failed, it gives SCHED_FIFO back itself. What it found at the stop (and
 * did) is sent before it ends. The master waits for the end rather than terminating the thread.
 */
function end(code: number): never {
  const found = schedulingOf() ?? 'unknown';
  const stopped = found.startsWith('SCHED_FIFO') || found.startsWith('SCHED_RR') ? `${found}, then ${toNormalScheduling()} (lowered itself)` : found;
  parentPort!.postMessage({ t: 'stopped', scheduling: { stopped } } satisfies CycleThreadReport);
  process.exit(code);
}

try {
  for (;;) {
    for (let m = receiveMessageOnPort(d.port); m; m = receiveMessageOnPort(d.port)) {
      const f = m.message as FakeFault | { kind: 'stop' };
      if (f.kind === 'stop') end(0);
      try {
        bus.apply(f);
      } catch (e) {
        process.emitWarning(`fake master: ${(e as Error).message}`);
      }
    }
    bus.cycle(process.hrtime.bigint());
    next += period;
    const now = process.hrtime.bigint();
    if (next < now) next = now; // late: the next cycle starts now (a real master counts an overrun)
    const waitMs = Number(next - now) / 1e6;
    if (waitMs > 0) Atomics.wait(sleeper, 0, 0, waitMs);
  }
} catch (e) {
  // A failed cycle ends the thread too (the master sees its 'error'): not at real-time priority either.
  toNormalScheduling();
  throw e;
}
