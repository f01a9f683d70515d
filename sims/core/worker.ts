// Worker-thread host of the core: owns the clock and the cycle schedule. It never yields to its event
// loop while cycling: it sleeps with Atomics.wait until shortly before each deadline, optionally spins the
// rest, drains service messages synchronously, and runs one Core.cycle. Lateness and overruns are counted,
// never assumed away (NOTES-dependencies: setTimeout alone misses cycles).

import { randomBytes } from 'node:crypto';
import { receiveMessageOnPort, workerData, type MessagePort } from 'node:worker_threads';
import { SimBusDriver } from '../../drivers/sim/driver.ts';
import type { BusDriver } from '../../drivers/bus.ts';
import { CaptureRing } from './capture.ts';
import { Core } from './core.ts';
import type { CoreStartOptions, FromCore, ToCore } from './protocol.ts';

const { port, options } = workerData as { port: MessagePort; options: CoreStartOptions };
let simDriver: SimBusDriver | undefined;
const send = (m: FromCore) => {
  // Drives keep their state when the master restarts: hand it to the service for the next incarnation.
  if (m.t === 'status' && simDriver) m.status.sim_persist = simDriver.persistedState();
  port.postMessage(m);
};
const sleeper = new Int32Array(new SharedArrayBuffer(4));
const now = () => process.hrtime.bigint();

async function loadDriver(o: CoreStartOptions): Promise<BusDriver> {
  switch (o.driver) {
    case 'sim':
      simDriver = new SimBusDriver(o.sim);
      return simDriver;
    default:
      throw new Error(`driver ${o.driver} is not available in this build`);
  }
}

async function main(): Promise<void> {
  const driver = await loadDriver(options);
  const incarnation = randomBytes(16).toString('hex');
  // A new ring per incarnation: the incarnation owns its sequence numbers (document 1 part 2). The
  // buffer is mapped lazily by the OS, so resident memory grows with the records actually written.
  const retentionMs = options.captureRetentionMs ?? options.machine.runtime.telemetry.retention_ms;
  const capture =
    retentionMs > 0
      ? new CaptureRing({ axisCount: options.machine.axes.length, cycleNs: options.machine.cycle_ns, retentionMs, incarnation })
      : undefined;
  const core = new Core(options.machine, driver, incarnation, send, { capture });
  await core.start(now());

  const cycleNs = options.machine.cycle_ns;
  const speed = options.speed > 0 ? options.speed : 1;
  // Faster than real time: the simulated clock advances cycleNs per cycle, the wall sleeps cycleNs/speed.
  const wallCycle = speed === 1 ? cycleNs : BigInt(Math.max(1, Math.round(Number(cycleNs) / speed)));
  const spin = BigInt(options.spinNs);
  let deadline = now() + wallCycle;
  const simOrigin = now();
  let simCycles = 0n;

  for (;;) {
    const ahead = deadline - now() - spin;
    if (ahead > 0n) Atomics.wait(sleeper, 0, 0, Number(ahead) / 1e6);
    while (spin > 0n && now() < deadline) {
      /* spin to the deadline */
    }
    const wake = now();
    for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) {
      const msg = m.message as ToCore;
      if (msg.t === 'shutdown') {
        await driver.close();
        port.close();
        return;
      }
      if (msg.t === 'inject') {
        if (msg.fault.kind === 'stall_next_command') {
          // A core that goes silent: the next native command freezes the whole cycle for ms.
          stallNextMs = msg.fault.ms;
          send({ t: 'reply', id: msg.id, result: { ...rejected(), Result: 0 } });
        } else handleInject(driver, msg);
        continue;
      }
      if (msg.t === 'cmd' && stallNextMs > 0) {
        Atomics.wait(sleeper, 0, 0, stallNextMs);
        stallNextMs = 0;
      }
      core.handle(msg);
    }
    simCycles++;
    if (speed === 1) core.cycle(wake, deadline);
    else core.cycle(simOrigin + simCycles * cycleNs, simOrigin + simCycles * cycleNs);
    deadline += wallCycle;
    // Far behind (for example the machine was suspended): count once and re-anchor the schedule.
    if (now() - deadline > 10n * wallCycle) deadline = now() + wallCycle;
  }
}

let stallNextMs = 0;

function handleInject(driver: BusDriver, msg: Extract<ToCore, { t: 'inject' }> & { fault: { kind: string } }): void {
  if (!(driver instanceof SimBusDriver)) {
    send({ t: 'reply', id: msg.id, result: rejected(), detail: 'fault injection needs the sim driver' });
    return;
  }
  try {
    if (msg.fault.kind === 'clear') driver.clearInjected();
    else driver.inject(msg.fault as Parameters<SimBusDriver['inject']>[0]);
    send({ t: 'reply', id: msg.id, result: { ...rejected(), Result: 0 } });
  } catch (e) {
    send({ t: 'reply', id: msg.id, result: rejected(), detail: (e as Error).message });
  }
}

function rejected() {
  return { Sequence: 0n, Handle: 0n, Generation: 0n, Operation: 0, Result: 1, Reason: 0, AxisMask: 0 };
}

main().catch((e: unknown) => {
  send({ t: 'fatal', message: e instanceof Error ? e.message : String(e) });
});
