// The real-time core's 1 kHz cycle under load: the real core worker started through CoreLink with the
// nine-axis fixture, first with the main thread idle (the baseline, same run), then while the main thread
// decodes a ~50 MB prepare_trajectory body with the service's strict decoder over and over (what an
// upload does to the service's event loop). Once with spinNs 0 (sleep only) and once with spinNs
// 200000 (sleep, then spin the last 200 us). Prints lateness, overruns, skipped cycles and work time per
// phase and the ratio loaded / idle; asserts nothing.
//
//   node --import tsx bench/cycle.bench.ts [seconds-per-phase] [body-MB]
//
// Per-phase figures are exact, computed from the telemetry capture records of the phase (cycle_jitter_ns,
// work_ns, t_ns): lateness = wake minus scheduled; overrun = lateness above max_cycle_lateness_ns;
// skipped = cycles the worker dropped when it fell more than 10 cycles behind and re-anchored its
// schedule (gaps in the scheduled times t_ns - cycle_jitter_ns); secs = span of the schedule. The core's
// own histogram (status.timing, cumulative over the incarnation, bucket-rounded) is printed to compare.
//
// A second baseline, also taken in the run: the bare scheduling loop of sims/core/worker.ts (same sleep,
// spin and re-anchoring) in a worker with no core in it, for half a phase. It shows what the host itself
// allows (a virtual machine's timer and scheduling noise), so the core's own share can be told apart.

import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep, setImmediate as yieldLoop } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { loadMachine } from '../sims/config/compile.ts';
import { RECORD_BYTES, REC } from '../sims/core/capture/layout.ts';
import { CaptureReader } from '../sims/core/capture/reader.ts';
import { CoreLink } from '../sims/service/core-link.ts';
import type { PriorityRequest } from '../sims/core/protocol.ts';
import { decodeJson } from '../sims/json.ts';
import { makePointsBody } from './points-body.ts';

const PHASE_S = Number(process.argv[2] ?? 10);
const BODY_MB = Number(process.argv[3] ?? 50);
const WARMUP_MS = 1000;
const FIXTURE = fileURLToPath(new URL('../fixtures/machines/nine-axis.json', import.meta.url));

const machine = await loadMachine(FIXTURE, join(tmpdir(), 'cell-hil-config'));
const CYCLE = Number(machine.cycle_ns);
const LIMIT = Number(machine.max_cycle_lateness_ns);
const body = makePointsBody(BODY_MB * 1e6);

interface PhaseStats {
  seconds: number;
  cycles: number;
  skipped: number;
  overruns: number;
  late: Float64Array; // sorted
  work: Float64Array; // sorted
  extra: string;
}

const q = (sorted: Float64Array, p: number) => (sorted.length ? sorted[Math.max(1, Math.ceil(p * sorted.length)) - 1]! : 0);
const max = (sorted: Float64Array) => (sorted.length ? sorted[sorted.length - 1]! : 0);

function newest(reader: CaptureReader): bigint {
  const n = reader.newestSequence();
  if (n === 'busy') throw new Error('capture ring busy');
  return n;
}

/** Records (from, to] of the ring: lateness, work, and gaps in the schedule (t_ns - cycle_jitter_ns). */
function collect(reader: CaptureReader, from: bigint, to: bigint, extra: string): PhaseStats {
  const late: number[] = [];
  const work: number[] = [];
  let skipped = 0;
  let firstT = -1n;
  let prevT = -1n;
  let after = from;
  while (after < to) {
    const r = reader.read(after, Math.min(4096, Number(to - after)));
    if (r === 'busy') continue;
    if (r.dropped !== 0n) throw new Error(`${r.dropped} records overwritten before they were read (retention too short)`);
    const dv = new DataView(r.records.buffer, r.records.byteOffset, r.records.byteLength);
    for (let k = 0; k < r.count; k++) {
      const at = k * RECORD_BYTES;
      const jitter = dv.getBigInt64(at + REC.cycle_jitter_ns, true);
      const t = dv.getBigUint64(at + REC.t_ns, true) - jitter; // the scheduled time
      late.push(Number(jitter));
      work.push(Number(dv.getBigUint64(at + REC.work_ns, true)));
      if (prevT >= 0n) skipped += Math.max(0, Math.round(Number(t - prevT) / CYCLE) - 1);
      else firstT = t;
      prevT = t;
    }
    after = r.last;
  }
  const seconds = late.length ? Number(prevT - firstT + BigInt(CYCLE)) / 1e9 : 0;
  return { seconds, cycles: late.length, skipped, overruns: late.filter((l) => l > LIMIT).length, late: sorted(late), work: sorted(work), extra };
}

const sorted = (xs: ArrayLike<number>) => Float64Array.from(xs).sort();

/** The scheduling loop of sims/core/worker.ts with nothing in the cycle, in its own worker. */
const BARE_LOOP = `
const { parentPort, workerData } = require('node:worker_threads');
const { cycleNs, spinNs, seconds } = workerData;
const sleeper = new Int32Array(new SharedArrayBuffer(4));
const now = () => process.hrtime.bigint();
const cycle = BigInt(cycleNs), spin = BigInt(spinNs);
const late = new Float64Array(Math.ceil(seconds * 1e9 / cycleNs) + 16);
let n = 0, skipped = 0, deadline = now() + cycle;
const end = now() + BigInt(Math.round(seconds * 1e9));
while (n < late.length) {
  const ahead = deadline - now() - spin;
  if (ahead > 0n) Atomics.wait(sleeper, 0, 0, Number(ahead) / 1e6);
  while (spin > 0n && now() < deadline) {}
  const wake = now();
  if (wake >= end) break;
  late[n++] = Number(wake - deadline);
  deadline += cycle;
  if (now() - deadline > 10n * cycle) { const d = now() + cycle; skipped += Math.round(Number(d - deadline) / cycleNs); deadline = d; }
}
parentPort.postMessage({ late: late.subarray(0, n), skipped });
`;

async function bareLoop(spinNs: number, seconds: number): Promise<PhaseStats> {
  const w = new Worker(BARE_LOOP, { eval: true, workerData: { cycleNs: CYCLE, spinNs, seconds } });
  const { late, skipped } = await new Promise<{ late: Float64Array; skipped: number }>((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  await w.terminate();
  let overruns = 0;
  for (const l of late) if (l > LIMIT) overruns++;
  return { seconds, cycles: late.length, skipped, overruns, late: sorted(late), work: new Float64Array(0), extra: 'no core: the host scheduling floor' };
}

async function phase(reader: CaptureReader, load: (until: number) => Promise<string>): Promise<PhaseStats> {
  const from = newest(reader);
  const extra = await load(performance.now() + PHASE_S * 1000);
  return collect(reader, from, newest(reader), extra);
}

const idleLoad = async (until: number) => {
  await sleep(until - performance.now());
  return '';
};
const jsonLoad = async (until: number) => {
  let decodes = 0;
  const t0 = performance.now();
  let last = 0;
  // At least one decode; no new one that would end well after the phase.
  while (decodes === 0 || performance.now() + last / 2 < until) {
    const d0 = performance.now();
    decodeJson(body.bytes);
    last = performance.now() - d0;
    decodes++;
    await yieldLoop(); // let the core's status messages in, as the service's loop would between requests
  }
  const s = (performance.now() - t0) / 1000;
  return `${decodes} decodes, ${((decodes * body.bytes.length) / 1e6 / s).toFixed(1)} MB/s`;
};

const us = (ns: number) => `${(ns / 1e3).toFixed(1)}`;
const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(2) : a > 0 ? 'inf' : '-');

console.log(
  `cycle loop: nine-axis fixture, cycle ${CYCLE / 1e6} ms, max_cycle_lateness ${us(LIMIT)} us, ${PHASE_S} s per phase after ${WARMUP_MS} ms warm-up; ` +
    `load = strict decodeJson of a ${(body.bytes.length / 1e6).toFixed(1)} MB body (${body.points} points) on the main thread`,
);
console.log('lateness and work in us; secs = span of the phase; cycles = records captured (bare: wake-ups)');
console.log('spinNs  phase    secs  cycles skipped overruns  late_p50  late_p99  late_max  work_p50  work_p99  work_max');
const row = (spinNs: number, name: string, s: PhaseStats) =>
  `${String(spinNs).padStart(6)}  ${name.padEnd(7)}${s.seconds.toFixed(1).padStart(5)} ${String(s.cycles).padStart(7)} ${String(s.skipped).padStart(7)} ${String(s.overruns).padStart(8)}` +
  `  ${us(q(s.late, 0.5)).padStart(8)}  ${us(q(s.late, 0.99)).padStart(8)}  ${us(max(s.late)).padStart(8)}` +
  (s.work.length ? `  ${us(q(s.work, 0.5)).padStart(8)}  ${us(q(s.work, 0.99)).padStart(8)}  ${us(max(s.work)).padStart(8)}` : `  ${'-'.padStart(8)}  ${'-'.padStart(8)}  ${'-'.padStart(8)}`) +
  (s.extra ? `   (${s.extra})` : '');
const ratios = (a: PhaseStats, b: PhaseStats) =>
  `late_p50 ${ratio(q(a.late, 0.5), q(b.late, 0.5))}, late_p99 ${ratio(q(a.late, 0.99), q(b.late, 0.99))}, late_max ${ratio(max(a.late), max(b.late))}, ` +
  `overruns per 1000 cycles ${((a.overruns / Math.max(1, a.cycles)) * 1e3).toFixed(1)} vs ${((b.overruns / Math.max(1, b.cycles)) * 1e3).toFixed(1)}`;
// Settings: the core thread at normal priority (the first figures taken), then with the scheduling the
// stack asks for by default (--core-priority auto: SCHED_FIFO where permitted, else nice), with and
// without a spin. Each setting prints its own idle baseline and the loaded/idle ratios (goal: p99 <= 1.5,
// overruns per 1000 cycles <= 2x idle).
const SETTINGS: Array<{ spinNs: number; priority: PriorityRequest }> = [
  { spinNs: 0, priority: 'none' },
  { spinNs: 0, priority: 'auto' },
  { spinNs: 200_000, priority: 'auto' },
];
for (const { spinNs, priority } of SETTINGS) {
  const bare = await bareLoop(spinNs, PHASE_S / 2);
  console.log(row(spinNs, 'bare', bare));
  const link = new CoreLink(machine, { driver: 'sim', clock: { mode: 'realtime', spinNs }, priority });
  await link.start();
  try {
    const reader = new CaptureReader(link.captureBuffer!);
    await sleep(WARMUP_MS);
    const sched = ((await link.nextStatus(200)) ?? link.status)?.clock.scheduling ?? '?';
    console.log(`${String(spinNs).padStart(6)}  core thread priority requested ${priority}, obtained: ${sched}`);
    const idle = await phase(reader, idleLoad);
    const loaded = await phase(reader, jsonLoad);
    console.log(row(spinNs, 'idle', idle));
    console.log(row(spinNs, 'loaded', loaded));
    console.log(`${String(spinNs).padStart(6)}  ratio loaded/idle: ${ratios(loaded, idle)}, work_p99 ${ratio(q(loaded.work, 0.99), q(idle.work, 0.99))}`);
    console.log(`${String(spinNs).padStart(6)}  ratio idle/bare:   ${ratios(idle, bare)}`);
    const st = (await link.nextStatus(200)) ?? link.status;
    if (st) {
      const t = st.timing;
      console.log(
        `${String(spinNs).padStart(6)}  core status.timing (whole incarnation, bucket upper edges): cycles ${t.cycles} overruns ${t.overruns} ` +
          `late p50/p99/max ${us(Number(t.p50_lateness_ns))}/${us(Number(t.p99_lateness_ns))}/${us(Number(t.max_lateness_ns))} ` +
          `work p50/p99/max ${us(Number(t.p50_work_ns))}/${us(Number(t.p99_work_ns))}/${us(Number(t.max_work_ns))}`,
      );
    }
  } finally {
    await link.shutdown();
  }
}
