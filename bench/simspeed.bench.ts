// How much faster than real time the simulator runs: the Core with the sim driver stepped in a tight
// loop (no sleeping, no worker), nine axes enabled and armed, holding, with the telemetry capture ring
// on. Baseline in the same run: the same loop with capture off. Prints cycles per second, the ratio to
// real time (cycles/s / (1e9 / cycle_ns)), the capture's cost and GC events; asserts nothing.
//
//   node --import tsx bench/simspeed.bench.ts [seconds-per-measurement]
//
// Status publications (every 10 ms of simulated time, as in the worker) are built but not posted to a
// service, so structured cloning is not part of the figure.

import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PerformanceObserver } from 'node:perf_hooks';
import { SimBusDriver } from '../drivers/sim/driver.ts';
import { loadMachine } from '../sims/config/compile.ts';
import { CaptureRing } from '../sims/core/capture.ts';
import { Core } from '../sims/core/core.ts';
import type { FromCore } from '../sims/core/protocol.ts';

const SECONDS = Number(process.argv[2] ?? 4);
const FIXTURE = fileURLToPath(new URL('../fixtures/machines/nine-axis.json', import.meta.url));
const machine = await loadMachine(FIXTURE, join(tmpdir(), 'cell-hil-config'));
const N = machine.axes.length;
const ALL = (1 << N) - 1;
const CYCLE = machine.cycle_ns;
const INC = '00112233445566778899aabbccddeeff';

let gcEvents = 0;
const gcObserver = new PerformanceObserver((list) => (gcEvents += list.getEntries().length));
gcObserver.observe({ entryTypes: ['gc'] });
const tick = () => new Promise((r) => setTimeout(r, 20)); // lets the GC observer deliver

interface Result {
  rate: number;
  /** GC events per 100 000 cycles in the measured thirds (status publications and bigint times allocate). */
  gcPer100k: number;
  ring?: CaptureRing;
}

/** Builds a core, enables and arms every axis, then cycles flat out for SECONDS (best of 3 thirds). */
async function run(capture: boolean): Promise<Result> {
  const ring = capture
    ? new CaptureRing({ axisCount: N, cycleNs: CYCLE, retentionMs: machine.runtime.telemetry.retention_ms, incarnation: INC })
    : undefined;
  let replies = 0;
  const send = (m: FromCore) => {
    if (m.t === 'reply') replies++;
  };
  const core = new Core(machine, new SimBusDriver(), INC, send, { capture: ring });
  let t = 1_000_000_000_000n;
  await core.start(t);
  core.handle({ t: 'grant', generation: 1n, deadlineNs: 1n << 62n, active: true, axisMask: ALL });
  core.handle({ t: 'cmd', id: 1, op: 'enable', generation: 1n, axisMask: ALL });
  for (let k = 0; k < 50 && core.status(t).enable_mask !== ALL; k++) core.cycle((t += CYCLE), t);
  core.handle({ t: 'cmd', id: 2, op: 'arm', generation: 1n, axisMask: 0 });
  const st = core.status(t);
  if (st.enable_mask !== ALL || !st.armed || replies !== 2) throw new Error('could not enable and arm the nine axes');

  let best = 0;
  let gc = 0;
  let cycles = 0;
  // The first third also pays the page faults of a fresh ring (the OS maps shared memory lazily).
  for (let rep = 0; rep < 3; rep++) {
    await tick();
    const gc0 = gcEvents;
    const w0 = process.hrtime.bigint();
    const end = w0 + BigInt(Math.round((SECONDS * 1e9) / 3));
    let n = 0;
    let wall = w0;
    while (wall < end) {
      for (let k = 0; k < 1000; k++) {
        t += CYCLE;
        core.cycle(t, t);
      }
      n += 1000;
      wall = process.hrtime.bigint();
    }
    await tick();
    cycles += n;
    best = Math.max(best, n / (Number(wall - w0) / 1e9));
    gc += gcEvents - gc0;
  }
  if (core.status(t).enable_mask !== ALL) throw new Error('axes dropped out of operation enabled during the run');
  return { rate: best, gcPer100k: (gc / cycles) * 1e5, ring };
}

const off = await run(false);
const on = await run(true);
gcObserver.disconnect();

const realTime = 1e9 / Number(CYCLE);
const line = (name: string, r: Result) =>
  `${name} ${(r.rate / 1e3).toFixed(1).padStart(7)} k cycles/s  ${(r.rate / realTime).toFixed(1).padStart(6)} x real time  ` +
  `${(1e6 / r.rate).toFixed(2)} us/cycle  gc events ${r.gcPer100k.toFixed(1)} per 100k cycles`;
console.log(`simulator speed: nine-axis fixture, ${N} axes enabled and armed, holding; cycle ${CYCLE} ns (real time = ${realTime} cycles/s); best of 3 x ${(SECONDS / 3).toFixed(2)} s`);
console.log(line('baseline, capture off:', off));
console.log(line('capture on:           ', on));
console.log(`capture on / capture off: ${(on.rate / off.rate).toFixed(3)}  (ring ${on.ring!.capacity} records, ${((on.ring!.buffer.byteLength) / 1e6).toFixed(0)} MB; ${on.ring!.newest} records written)`);
