// The reference dense codec (sims/dense/codec.ts decode: header, layout, block SHA-256, content digest,
// samples into typed arrays, every sample rule) on a 250000-sample file, against two plain SHA-256
// passes over the same bytes (the hashing any decoder must do: block digests and content digest),
// measured in the same run. Goal: ratio <= 1.5. Prints; asserts nothing.
//
//   node --import tsx bench/dense.bench.ts [samples] [repetitions]

import { createHash } from 'node:crypto';
import { COLS, decode, encode } from '../sims/dense/codec.ts';

const N = Number(process.argv[2] ?? 250000);
const REPS = Number(process.argv[3] ?? 7);
const DT = 0.01;

// Ten segments of slow sine motion, at rest at both ends of each segment, continuous across them.
const SEGMENTS = 10;
const per = Math.floor(N / SEGMENTS);
const segments = Array.from({ length: SEGMENTS }, (_, k) => {
  const n = k === SEGMENTS - 1 ? N - per * (SEGMENTS - 1) : per;
  const t = new Float64Array(n);
  const q = new Float64Array(n * COLS);
  const qd = new Float64Array(n * COLS);
  const T = (n - 1) * DT;
  for (let i = 0; i < n; i++) {
    t[i] = i * DT;
    const ph = (Math.PI * i) / (n - 1);
    for (let j = 0; j < COLS; j++) {
      const d = 0.1 * (j + 1) * (k % 2 === 0 ? 1 : -1);
      q[i * COLS + j] = i === n - 1 ? (k % 2 === 0 ? d : 0) : (k % 2 === 0 ? 0 : -d) + (d * (1 - Math.cos(ph))) / 2;
      qd[i * COLS + j] = i === 0 || i === n - 1 ? 0 : ((d * Math.PI) / (2 * T)) * Math.sin(ph);
    }
  }
  return { kind: k % 3 === 1 ? 'weld' : 'freespace', sourceId: `seg-${k}`, t, q, qd, flags: new Uint8Array(n) };
});
const bytes = encode({ manifestRevision: 1n, planRevision: 1n, createdAt: '2026-01-01T00:00:00Z', axisMask: 0x1ff, dtS: DT, maxAbsQd: Array(COLS).fill(2), segments });
decode(bytes); // valid, or this throws before timing anything

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
let sink: unknown;
function time(f: () => unknown): number {
  const ts: number[] = [];
  for (let k = 0; k <= REPS; k++) {
    const t0 = process.hrtime.bigint();
    sink = f();
    if (k > 0) ts.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  return median(ts);
}
const baseline = time(() => [createHash('sha256').update(bytes).digest(), createHash('sha256').update(bytes).digest()]);
const full = time(() => decode(bytes));
void sink;
const ms = (s: number) => `${(s * 1e3).toFixed(1).padStart(7)} ms`;
console.log(`file ${(bytes.length / 1e6).toFixed(1)} MB, ${N} samples in ${SEGMENTS} segments; median of ${REPS} runs after one warm-up`);
console.log(`baseline two SHA-256 passes: ${ms(baseline)}`);
console.log(`decode + validate + digest:  ${ms(full)}`);
console.log(`ratio ${(full / baseline).toFixed(2)} (goal <= 1.5)`);
