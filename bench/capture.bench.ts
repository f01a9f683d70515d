// Capture ring write throughput for a nine-axis cell, against a baseline measured in the same run: a
// plain Buffer.fill of the same slot bytes in a ring of the same size. Prints ratios; asserts nothing.
//
//   node --import tsx bench/capture.bench.ts [seconds-per-measurement]
//
// "full" sets every CycleCaptureRecordV2 field and every CycleCaptureAxisV2 field of nine axes through the
// RecordWriter setters (the worst case); "cycle" is what a core cycle typically writes: about twenty
// record fields plus writeProcessImage. GC events are counted during each loop: the cycle path is meant
// to allocate nothing, so it should show none.

import { PerformanceObserver } from 'node:perf_hooks';
import { ProcessImage } from '../drivers/bus.ts';
import { AX, AXIS_TABLE, REC, RECORD_TABLE } from '../sims/core/capture/layout.ts';
import { CaptureRing } from '../sims/core/capture/ring.ts';
import { writeProcessImage, type RecordWriter } from '../sims/core/capture/writer.ts';

const AXES = 9;
const CAPACITY = 8192; // 8192 x 3152 bytes = 26 MB: larger than the caches, like a real retention window
const SECONDS = Number(process.argv[2] ?? 1);

let gcEvents = 0;
const gcObserver = new PerformanceObserver((list) => (gcEvents += list.getEntries().length));
gcObserver.observe({ entryTypes: ['gc'] });

interface Result {
  rate: number;
  gc: number;
}

/** Runs `step` in batches until `SECONDS` have passed; returns steps per second (best of 3). */
async function measure(step: (k: number) => void): Promise<Result> {
  let best = 0;
  let gc = 0;
  for (let rep = 0; rep < 3; rep++) {
    await new Promise((r) => setTimeout(r, 20)); // let the GC observer deliver
    const gc0 = gcEvents;
    const t0 = process.hrtime.bigint();
    const end = t0 + BigInt(Math.round(SECONDS * 1e9 / 3));
    let n = 0;
    let now = t0;
    while (now < end) {
      for (let k = 0; k < 1000; k++) step(n + k);
      n += 1000;
      now = process.hrtime.bigint();
    }
    await new Promise((r) => setTimeout(r, 20));
    const rate = n / (Number(now - t0) / 1e9);
    if (rate > best) best = rate;
    gc = Math.max(gc, gcEvents - gc0);
  }
  return { rate: best, gc };
}

// --- baseline: fill the same bytes in a plain ring buffer -------------------------------------------
const ring = new CaptureRing({ axisCount: AXES, cycleNs: 1_000_000n, capacity: CAPACITY });
const stride = ring.stride;
const plain = Buffer.alloc(CAPACITY * stride);
const baseline = await measure((k) => {
  const base = (k % CAPACITY) * stride;
  plain.fill(k & 0xff, base, base + stride);
});

// --- full: every field of the record and of nine axes ----------------------------------------------
type Setter = (w: RecordWriter, off: number, v: number) => void;
const SETTER: Record<string, Setter> = {
  u8: (w, o, v) => w.u8(o, v & 0xff),
  i8: (w, o, v) => w.i8(o, v),
  u16: (w, o, v) => w.u16(o, v & 0xffff),
  i16: (w, o, v) => w.i16(o, v),
  u32: (w, o, v) => w.u32(o, v >>> 0),
  i32: (w, o, v) => w.i32(o, v | 0),
  u64: (w, o, v) => w.u64n(o, v),
  i64: (w, o, v) => w.i64n(o, v),
  'u8[16]': (w, o, v) => { for (let j = 0; j < 16; j++) w.u8At(o, j, (v + j) & 0xff); },
  'i32[16]': (w, o, v) => { for (let j = 0; j < 16; j++) w.i32At(o, j, v + j); },
};
const recordPlan = RECORD_TABLE.filter((f) => f[0] !== 'seq').map(([, type, off]) => [SETTER[type]!, off] as const);
const axisPlan = AXIS_TABLE.map(([, type, off]) => [SETTER[type]!, off] as const);
const full = await measure((k) => {
  const w = ring.beginRecord();
  for (let f = 0; f < recordPlan.length; f++) recordPlan[f]![0](w, recordPlan[f]![1], k + f);
  for (let a = 0; a < AXES; a++) {
    const base = w.axis(a);
    for (let f = 0; f < axisPlan.length; f++) axisPlan[f]![0](w, base + axisPlan[f]![1], k + f);
  }
  ring.commit();
});

// --- cycle: what a core cycle writes ----------------------------------------------------------------
const img = new ProcessImage(AXES);
for (let i = 0; i < AXES; i++) {
  img.statusword[i] = 0x0237;
  img.online[i] = 1;
  img.alState[i] = 8;
  img.pdoFresh[i] = 1;
  img.modeDisplay[i] = 8;
}
const T0 = 1_000_000_000_000;
const cycle = await measure((k) => {
  const tNs = T0 + k * 1_000_000;
  for (let i = 0; i < AXES; i++) img.positionActual[i] = (k * (i + 1)) | 0;
  const w = ring.beginRecord();
  w.u64n(REC.t_ns, tNs);
  w.u64n(REC.cycle, k);
  w.u64n(REC.work_ns, 12_000);
  w.i64n(REC.cycle_jitter_ns, (k % 200) - 100);
  w.u64n(REC.app_grant_generation, 7);
  w.u64n(REC.control_generation, 7);
  w.u64n(REC.home_epoch, 2);
  w.u64n(REC.grant_deadline_host_ns, tNs + 500_000_000);
  w.u32(REC.armed, 1);
  w.u32(REC.axis_enable_mask, 0x1ff);
  w.u32(REC.active_mode, 2);
  w.u32(REC.state, 3);
  w.u32(REC.current_point_index, k);
  w.u32(REC.queue_depth, 64);
  w.u32(REC.grant_active, 1);
  w.u32(REC.grant_axis_mask, 0x1ff);
  w.u32(REC.submitted_axis_mask, 0x1ff);
  w.u32(REC.config_verified_mask, 0x1ff);
  w.u32(REC.home_valid_mask, 0x1ff);
  w.u32(REC.master_state, 8);
  writeProcessImage(w, img);
  for (let i = 0; i < AXES; i++) w.u64n(w.axis(i) + AX.pdo_observed_time_ns, tNs);
  ring.commit();
});

gcObserver.disconnect();

const fmt = (r: number) => `${(r / 1e6).toFixed(3)} M/s`;
const us = (r: number) => `${(1e6 / r).toFixed(2)} us/record`;
console.log(`capture ring, ${AXES} axes, slot ${stride} bytes, capacity ${CAPACITY} records, ${SECONDS} s per measurement (best of 3)`);
console.log(`baseline Buffer.fill of ${stride} bytes: ${fmt(baseline.rate)}  (${us(baseline.rate)})  gc events ${baseline.gc}`);
console.log(`full (every field, ${AXES} axes):        ${fmt(full.rate)}  (${us(full.rate)})  ratio ${(full.rate / baseline.rate).toFixed(3)}  gc events ${full.gc}`);
console.log(`cycle (typical fields + image):       ${fmt(cycle.rate)}  (${us(cycle.rate)})  ratio ${(cycle.rate / baseline.rate).toFixed(3)}  gc events ${cycle.gc}`);
console.log(`at 1 kHz the cycle path uses ${((1e3 / cycle.rate) * 100).toFixed(3)} % of each cycle`);
