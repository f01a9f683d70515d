// Recording and replay (docs/recording.md). Prints, all measured in this run:
//  1. the recorder's cost per cycle: CoreHost (nine-axis fixture, sim driver, stepped clock, capture off)
//     running the same command script with and without --record, alternating rounds; p50/p99 of the time of
//     one host.cycle() and the ratio recorded / plain;
//  2. replay speed: the recording of (1) replayed strict through CoreHost on the replay driver, in cycles
//     per second, against the simulator's own stepped speed (the plain rounds of 1) and real time (1 kHz);
//  3. recording size per minute at 1 kHz with nine axes: idle (the core session, enabled and at rest) and
//     moving (every axis following a sine: target, position, velocity, following error, torque and the
//     absolute encoder change every cycle; written through RecordingWriter directly, since the fixture
//     session has no trajectory lane to drive);
//  4. the paced replay of the replay target (recorded frame times, requests offered and matched) and the
//     closed-loop replay (plants identified at open) of the recording of (1), against the same baselines;
//  5. writing a frame's recorded inputs into the process image (format.ts writeInputs, every replayed cycle):
//     one typed-array copy per field against the element-by-element stores it replaced, same run.
// Asserts nothing.
//
//   node --import tsx bench/replay.bench.ts [cycles-per-round] [rounds]

import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadMachine } from '../sims/config/compile.ts';
import { CoreHost } from '../sims/core/host.ts';
import type { CoreStartOptions, NativeOpName } from '../sims/core/protocol.ts';
import { RecordingWriter, slotLayout, AXIS_FIELDS, writeInputs } from '../drivers/replay/format.ts';
import { ProcessImage } from '../drivers/bus.ts';
import { runReplay, scanRecording } from '../drivers/replay/session.ts';
import { ReplayPacer } from '../sims/replay/pacer.ts';
import { scanForPacing } from '../sims/replay/scan.ts';

const CYCLES = Number(process.argv[2] ?? 20_000);
const ROUNDS = Number(process.argv[3] ?? 3);
const FIXTURE = fileURLToPath(new URL('../fixtures/machines/nine-axis.json', import.meta.url));
const machine = await loadMachine(FIXTURE, join(tmpdir(), 'cell-hil-config'));
const N = machine.axes.length;
const ALL = (1 << N) - 1;
const HOMEABLE = machine.axes.reduce((m, a, i) => (a.native_home ? m | (1 << i) : m), 0);
const DIR = mkdtempSync(join(tmpdir(), 'hil-replay-bench-'));
const SCRIPT: Array<[number, NativeOpName, number]> = [
  [5, 'enable', ALL],
  [120, 'arm', 0],
  [2000, 'stop', 0],
  [3000, 'home', HOMEABLE],
];

const q = (a: Float64Array, p: number) => a[Math.max(1, Math.ceil(p * a.length)) - 1]!;

async function round(record: string | null): Promise<{ work: Float64Array; wallMs: number }> {
  const opts: CoreStartOptions = { machine, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, driverParams: { homingNs: 2_000_000_000n }, ...(record ? { record: { path: record, run: 'bench' } } : {}) };
  const host = await CoreHost.create(opts, () => undefined);
  host.handle({ t: 'grant', generation: 7n, deadlineNs: 1n << 62n, active: true, axisMask: ALL });
  const work = new Float64Array(CYCLES);
  let id = 1;
  const t0 = performance.now();
  for (let c = 0; c < CYCLES; c++) {
    for (const [at, op, axisMask] of SCRIPT) if (at === c) host.handle({ t: 'cmd', id: id++, op, generation: 7n, axisMask });
    const s = performance.now();
    host.cycle();
    work[c] = performance.now() - s;
  }
  const wallMs = performance.now() - t0;
  await host.close();
  return { work: work.sort(), wallMs };
}

const plain: Float64Array[] = [];
const recorded: Float64Array[] = [];
let plainMs = 0;
let recordFile = '';
for (let r = 0; r < ROUNDS; r++) {
  const a = await round(null);
  plain.push(a.work);
  plainMs += a.wallMs;
  recordFile = join(DIR, `round-${r}.hilrec`);
  recorded.push((await round(recordFile)).work);
}
const merge = (xs: Float64Array[]) => Float64Array.from(xs.flatMap((x) => [...x])).sort();
const P = merge(plain);
const R = merge(recorded);
const us = (ms: number) => (ms * 1000).toFixed(2);
console.log(`recorder cost per cycle (${ROUNDS} rounds x ${CYCLES} cycles, nine axes, sim driver, stepped):`);
console.log(`  plain     p50 ${us(q(P, 0.5))} us  p99 ${us(q(P, 0.99))} us`);
console.log(`  recorded  p50 ${us(q(R, 0.5))} us  p99 ${us(q(R, 0.99))} us`);
console.log(`  ratio recorded/plain  p50 ${(q(R, 0.5) / q(P, 0.5)).toFixed(2)}  p99 ${(q(R, 0.99) / q(P, 0.99)).toFixed(2)}`);
const cycleMs = Number(machine.cycle_ns) / 1e6;
console.log(`  added by recording, as a share of the ${cycleMs} ms cycle: p50 ${((100 * (q(R, 0.5) - q(P, 0.5))) / cycleMs).toFixed(2)} %  p99 ${((100 * (q(R, 0.99) - q(P, 0.99))) / cycleMs).toFixed(2)} %`);

const scan = scanRecording(recordFile);
const host = await CoreHost.create({ machine, driver: 'replay', driverParams: { file: recordFile, reportFile: '' }, clock: { mode: 'stepped' }, captureRetentionMs: 0 }, () => undefined);
const out = runReplay(host, scan);
await host.close();
const replayCps = out.cycles / (out.wallMs / 1000);
const simCps = (CYCLES * ROUNDS) / (plainMs / 1000);
console.log(`replay (strict, ${out.cycles} cycles, divergence ${out.divergence ? out.divergence.kind : 'none'}):`);
console.log(`  replay ${Math.round(replayCps)} cycles/s  sim stepped ${Math.round(simCps)} cycles/s  ratio replay/sim ${(replayCps / simCps).toFixed(2)}  vs real time (1 kHz) ${(replayCps / 1000).toFixed(1)}x`);

// The same recording paced (the replay target's way: recorded frame times, requests offered as live ones and
// matched) and in closed loop (plants identified at open), in the same run.
{
  const ps = scanForPacing(recordFile);
  let pacer: ReplayPacer | undefined;
  const ph = await CoreHost.create({ machine, driver: 'replay', driverParams: { file: recordFile, reportFile: '' }, clock: { mode: 'recorded' }, captureRetentionMs: 0 }, (m) => pacer?.observe(m), 'none', { t0Ns: BigInt(ps.header.t0_ns), timesNs: ps.times });
  const p = (pacer = new ReplayPacer(ph, ps, { file: recordFile, mode: 'strict' }));
  const live = ps.requests.map((n) => {
    const d = { ...(n.data as Record<string, unknown>) };
    for (const k of ['generation', 'deadlineNs']) if (typeof d[k] === 'string') d[k] = BigInt(d[k] as string);
    return d;
  });
  const t0 = performance.now();
  for (let guard = 0; guard < 1e7; guard++) {
    const st = p.advance(1000);
    if (st === 'end') break;
    if (st === 'wait') p.offer(live.shift());
  }
  const ms = performance.now() - t0;
  const v = p.finish();
  await ph.close();
  const pacedCps = v.cycles / (ms / 1000);
  console.log(`paced replay (the replay target's core: ${v.cycles} cycles, ${v.requests_matched} requests and ${v.outputs_matched} replies/events matched, divergence ${v.divergence ? v.divergence.kind : 'none'}):`);
  console.log(`  paced ${Math.round(pacedCps)} cycles/s  ratio paced/sim ${(pacedCps / simCps).toFixed(2)}  vs real time ${(pacedCps / 1000).toFixed(1)}x`);

  const ti = performance.now();
  const ch = await CoreHost.create({ machine, driver: 'replay', driverParams: { file: recordFile, mode: 'closed-loop', reportFile: '' }, clock: { mode: 'stepped' }, captureRetentionMs: 0 }, () => undefined);
  const openMs = performance.now() - ti;
  const co = runReplay(ch, scan);
  await ch.close();
  const closedCps = co.cycles / (co.wallMs / 1000);
  console.log(`closed-loop replay (${co.cycles} cycles; plant identification at open ${openMs.toFixed(0)} ms):`);
  console.log(`  closed loop ${Math.round(closedCps)} cycles/s  ratio closed/strict ${(closedCps / replayCps).toFixed(2)}  ratio closed/sim ${(closedCps / simCps).toFixed(2)}`);
}

// Size per minute at 1 kHz.
const perMinute = (bytes: number, cycles: number) => (bytes * 60_000) / cycles;
{
  const idleFile = join(DIR, 'idle.hilrec');
  const h = await CoreHost.create({ machine, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, record: { path: idleFile } }, () => undefined);
  h.handle({ t: 'grant', generation: 7n, deadlineNs: 1n << 62n, active: true, axisMask: ALL });
  h.handle({ t: 'cmd', id: 1, op: 'enable', generation: 7n, axisMask: ALL });
  for (let c = 0; c < 60_000; c++) h.cycle();
  await h.close();
  console.log(`size per minute at 1 kHz, nine axes: idle (enabled, at rest) ${(perMinute(statSync(idleFile).size, 60_000) / 1024).toFixed(1)} KiB`);
}
{
  const movingFile = join(DIR, 'moving.hilrec');
  const L = slotLayout(N);
  const w = new RecordingWriter(movingFile, { driver: 'synthetic', axisCount: N, cycle_ns: '1000000', setup_sha256: '0'.repeat(64) });
  const v = new Float64Array(L.count);
  const f = (name: (typeof AXIS_FIELDS)[number]) => AXIS_FIELDS.indexOf(name) * N;
  let ms = 0;
  for (let c = 1; c <= 60_000; c++) {
    for (let a = 0; a < N; a++) {
      const w0 = (2 * Math.PI * (0.2 + 0.05 * a)) / 1000;
      const target = Math.round(200_000 * Math.sin(w0 * c));
      const fe = Math.round(40 * Math.cos(w0 * c) + ((c * 7 + a) % 5) - 2);
      v[f('controlword') + a] = 0x0f;
      v[f('modeOfOperation') + a] = 8;
      v[f('targetPosition') + a] = target;
      v[f('statusword') + a] = 0x1237;
      v[f('modeDisplay') + a] = 8;
      v[f('positionActual') + a] = target - fe;
      v[f('velocityActual') + a] = Math.round(200_000 * w0 * 1000 * Math.cos(w0 * c));
      v[f('followingError') + a] = fe;
      v[f('torqueActual') + a] = Math.round(300 * Math.sin(w0 * c + 0.3) + ((c + a) % 3));
      v[f('absolutePosition') + a] = 1_000_000 + target - fe;
      v[f('absoluteValid') + a] = 1;
      v[f('pdoFresh') + a] = 1;
      v[f('online') + a] = 1;
      v[f('alState') + a] = 8;
    }
    const s = performance.now();
    w.frame(v, 0, BigInt(c) * 1_000_000n);
    ms += performance.now() - s;
  }
  w.close();
  console.log(`size per minute at 1 kHz, nine axes: moving (all axes, sines) ${(perMinute(statSync(movingFile).size, 60_000) / 1024).toFixed(1)} KiB; writer ${((ms * 1000) / 60_000).toFixed(2)} us per moving frame`);
}

{
  // The element-by-element stores writeInputs made before (the baseline): one megamorphic store per value.
  const img = new ProcessImage(N);
  const v = new Float64Array(slotLayout(N).count).map((_, i) => i % 7);
  const firstInput = AXIS_FIELDS.indexOf('statusword');
  const perElement = () => {
    for (let f = firstInput; f < AXIS_FIELDS.length; f++) {
      const a = img[AXIS_FIELDS[f]!] as unknown as Float64Array;
      for (let i = 0; i < N; i++) a[i] = v[f * N + i]!;
    }
  };
  const time = (fn: () => void) => {
    const s = performance.now();
    for (let k = 0; k < 200_000; k++) fn();
    return ((performance.now() - s) * 1000) / 200_000;
  };
  for (let r = 0; r < ROUNDS; r++) {
    const before = time(perElement);
    const now = time(() => writeInputs(img, v));
    console.log(`inputs into the image per frame (round ${r + 1}): element by element ${before.toFixed(2)} us, writeInputs ${now.toFixed(2)} us, ratio ${(before / now).toFixed(2)}`);
  }
}
rmSync(DIR, { recursive: true, force: true });
