// The fake master's cycle thread (thread mode): runs the fake bus at the configured period on host
// monotonic time, like node-ethercat's SCHED_FIFO cycle thread, never synchronised with the core's cycle.
// Out-of-band conditions arrive on a message port and are drained between cycles.

import { execFileSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { receiveMessageOnPort, workerData, parentPort, type MessagePort } from 'node:worker_threads';
import { FakeBus, type DomainPin, type FakeBusSpec, type FakeFault } from './fake-bus.ts';

const d = workerData as { bench: FakeBusSpec; pins: DomainPin[]; domain: SharedArrayBuffer; status: SharedArrayBuffer; reached: number[]; port: MessagePort };
const bus = new FakeBus(d.bench, d.pins, d.domain, d.status, d.reached);
await bus.ready();
const period = d.bench.cycleNs;
// node-ethercat's cycle thread asks for SCHED_FIFO 49; the fake asks for the same where permitted
// (root or CAP_SYS_NICE) and runs at normal priority otherwise.
try {
  const tid = readlinkSync('/proc/thread-self').split('/').pop() ?? '';
  if (process.platform === 'linux' && tid) execFileSync('chrt', ['-f', '-p', '49', tid], { stdio: 'ignore', timeout: 2000 });
} catch {
  /* not permitted: normal priority */
}
const sleeper = new Int32Array(new SharedArrayBuffer(4));
// The first bus cycle runs before activate() returns, so the domain never shows the driver its zeros.
let next = process.hrtime.bigint();
bus.cycle(next);
next += period;
parentPort!.postMessage({ t: 'running' });

for (;;) {
  for (let m = receiveMessageOnPort(d.port); m; m = receiveMessageOnPort(d.port)) {
    const f = m.message as FakeFault | { kind: 'stop' };
    if (f.kind === 'stop') process.exit(0);
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
