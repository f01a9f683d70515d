// How much faster than real time the simulator runs on the stepped clock: the core host exactly as the
// stack and replay use it (CoreHost with the sim driver from the registry, DriverHost, SteppedClock;
// status published by wall time as the stepped worker does), nine axes enabled and armed, holding, with
// the telemetry capture ring on. Baseline in the same run: the same with capture off. Prints cycles per
// second, the ratio to real time (cycles/s / (1e9 / cycle_ns)), the capture's cost and GC events;
// asserts nothing. Goal: >= 500x real time with capture on.
//
//   node --import tsx bench/simspeed.bench.ts [seconds-per-measurement]   (default 4: about 10 s in all)
//
// Status publications are built but not posted to a service, so structured cloning is not in the figure.

import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PerformanceObserver } from 'node:perf_hooks';
import { loadMachine } from '../sims/config/compile.ts';
import type { CaptureRing } from '../sims/core/capture/ring.ts';
import { CoreHost } from '../sims/core/host.ts';
import type { FromCore } from '../sims/core/protocol.ts';

const SECONDS = Number(process.argv[2] ?? 4);
const FIXTURE = fileURLToPath(new URL('../fixtures/machines/nine-axis.json', import.meta.url));
const machine = await loadMachine(FIXTURE, join(tmpdir(), 'cell-hil-config'));
const N = machine.axes.length;
const ALL = (1 << N) - 1;
const CYCLE = machine.cycle_ns;

let gcEvents = 0;
const gcObserver = new PerformanceObserver((list) => (gcEvents += list.getEntries().length));
gcObserver.observe({ entryTypes: ['gc'] });
const tick = () => new Promise((r) => setTimeout(r, 20)); // lets the GC observer deliver

interface Result {
  rate: number;
  /**
   * CPU time of the process per cycle in the best window (process.cpuUsage, user + system, every thread
   * of the process: GC helpers included). On a shared machine the wall figure also counts the time other
   * processes held the CPU; this one does not.
   */
  cpuUsPerCycle: number;
  /** GC events per 100 000 cycles over every measured window. */
  gcPer100k: number;
  ring?: CaptureRing;
}

interface Setup {
  host: CoreHost;
  ring?: CaptureRing;
  best: number;
  bestCpu: number;
  gc: number;
  cycles: number;
}

/** Builds a core and enables and arms every axis. */
async function setup(capture: boolean): Promise<Setup> {
  let replies = 0;
  const send = (m: FromCore) => {
    if (m.t === 'reply') replies++;
  };
  const host = await CoreHost.create(
    { machine, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: capture ? machine.runtime.telemetry.retention_ms : 0 },
    send,
  );
  const core = host.core;
  const t = () => core.now;
  core.handle({ t: 'grant', generation: 1n, deadlineNs: 1n << 62n, active: true, axisMask: ALL });
  core.handle({ t: 'cmd', id: 1, op: 'enable', generation: 1n, axisMask: ALL });
  for (let k = 0; k < 50 && core.status(t()).enable_mask !== ALL; k++) host.cycle();
  core.handle({ t: 'cmd', id: 2, op: 'arm', generation: 1n, axisMask: 0 });
  const st = core.status(t());
  if (st.enable_mask !== ALL || !st.armed || replies !== 2) throw new Error('could not enable and arm the nine axes');
  return { host, ring: core.capture ?? undefined, best: 0, bestCpu: 0, gc: 0, cycles: 0 };
}

/** Cycles one core flat out for `seconds` (CoreHost.step in runs of 1000, as the stepped worker does). */
async function window(s: Setup, seconds: number): Promise<void> {
  await tick();
  const gc0 = gcEvents;
  const cpu0 = process.cpuUsage();
  const w0 = process.hrtime.bigint();
  const end = w0 + BigInt(Math.round(seconds * 1e9));
  let n = 0;
  let wall = w0;
  while (wall < end) {
    s.host.step(1000);
    n += 1000;
    wall = process.hrtime.bigint();
  }
  const cpu = process.cpuUsage(cpu0);
  await tick();
  s.cycles += n;
  s.gc += gcEvents - gc0;
  const rate = n / (Number(wall - w0) / 1e9);
  if (rate > s.best) {
    s.best = rate;
    s.bestCpu = (cpu.user + cpu.system) / n;
  }
}

// Windows alternate between the two cores, so the load other processes put on a shared machine falls on
// both alike; each figure is its best window. The first windows with capture on also pay the page faults
// of a fresh ring (the OS maps shared memory lazily).
const WINDOWS = 6;
const off0 = await setup(false);
const on0 = await setup(true);
for (let rep = 0; rep < WINDOWS; rep++) {
  await window(off0, SECONDS / WINDOWS);
  await window(on0, SECONDS / WINDOWS);
}
for (const s of [off0, on0]) {
  if (s.host.core.status(s.host.core.now).enable_mask !== ALL) throw new Error('axes dropped out of operation enabled during the run');
}
const result = (s: Setup): Result => ({ rate: s.best, cpuUsPerCycle: s.bestCpu, gcPer100k: (s.gc / s.cycles) * 1e5, ring: s.ring });
const off = result(off0);
const on = result(on0);
gcObserver.disconnect();

const realTime = 1e9 / Number(CYCLE);
const line = (name: string, r: Result) =>
  `${name} ${(r.rate / 1e3).toFixed(1).padStart(7)} k cycles/s  ${(r.rate / realTime).toFixed(1).padStart(6)} x real time  ` +
  `${(1e6 / r.rate).toFixed(2)} us/cycle (cpu ${r.cpuUsPerCycle.toFixed(2)} us: ${(1e3 / r.cpuUsPerCycle).toFixed(0)} x per cpu-second)  ` +
  `gc events ${r.gcPer100k.toFixed(1)} per 100k cycles`;
console.log(`simulator speed: nine-axis fixture, ${N} axes enabled and armed, holding; cycle ${CYCLE} ns (real time = ${realTime} cycles/s); best of ${WINDOWS} alternating windows of ${(SECONDS / WINDOWS).toFixed(2)} s each`);
console.log(line('baseline, capture off:', off));
console.log(line('capture on:           ', on));
console.log(`capture on / capture off: ${(on.rate / off.rate).toFixed(3)}  (ring ${on.ring!.capacity} records, ${((on.ring!.buffer.byteLength) / 1e6).toFixed(0)} MB; ${on.ring!.newest} records written)`);
