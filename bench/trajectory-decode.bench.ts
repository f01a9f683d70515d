// Streaming strict decode of a 250000-point prepare_trajectory body (sims/service/upload TrajectoryDecoder,
// fed in 64 KiB chunks as a socket delivers them, points into typed arrays) against JSON.parse of the same
// bytes, measured in the same run (goal: ratio >= 1.0). Prints; asserts nothing.
//
//   node --import tsx bench/trajectory-decode.bench.ts [repetitions] [--tree]
//
// Baseline: JSON.parse of the body's bytes (UTF-8 decoding included, since the service receives bytes).
// --tree also times today's strict tree decoder (json.ts decodeJson + envelope.ts decodeRequest).
// The two alternate, one warm-up each; each figure is the median of the repetitions.

import { decodeRequest } from '../sims/service/envelope.ts';
import { TrajectoryDecoder } from '../sims/service/upload/decoder.ts';
import { makePointsBody } from './points-body.ts';

const REPS = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 5);
const TREE = process.argv.includes('--tree');
const CHUNK = 65536;

const { bytes, points } = makePointsBody(250_000 * 1000); // stops at 250000 points (document 1 part 8)

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

let sink: unknown;
/** Median seconds of `reps` runs after one warm-up (reps 0: one run, no warm-up). */
function time(f: () => unknown, reps = REPS): number {
  const ts: number[] = [];
  for (let k = reps ? 0 : 1; k <= reps || k === 1; k++) {
    sink = undefined;
    const t0 = process.hrtime.bigint();
    sink = f();
    if (k > 0) ts.push(Number(process.hrtime.bigint() - t0) / 1e9);
    if (reps === 0) break;
  }
  sink = undefined;
  return median(ts);
}

function stream(): unknown {
  const d = new TrajectoryDecoder({ axes: 9, expectedBytes: bytes.length });
  for (let o = 0; o < bytes.length; o += CHUNK) d.push(bytes.subarray(o, Math.min(bytes.length, o + CHUNK)));
  const r = d.finish();
  if (r.points.count !== points) throw new Error('wrong point count');
  return r;
}

// Alternate the two (one warm-up each) so a change in machine load hits both alike.
const tb: number[] = [];
const to: number[] = [];
for (let k = 0; k <= REPS; k++) {
  const b = time(() => JSON.parse(bytes.toString('utf8')), 0);
  const o = time(stream, 0);
  if (k > 0) {
    tb.push(b);
    to.push(o);
  }
}
const baseline = median(tb);
const ours = median(to);
const ratios = tb.map((b, i) => b / to[i]!).sort((x, y) => x - y);
const tree = TREE ? time(() => decodeRequest(bytes), 1) : undefined;
void sink;

const mb = bytes.length / 1e6;
const rate = (s: number) => `${(mb / s).toFixed(1).padStart(6)} MB/s  ${(s * 1e3).toFixed(0).padStart(5)} ms`;
console.log(`body ${mb.toFixed(1)} MB, ${points} points of 9 axes (positions and velocities); median of ${REPS} runs after one warm-up`);
console.log(`baseline JSON.parse(bytes -> utf8 string):        ${rate(baseline)}`);
console.log(`streaming TrajectoryDecoder (64 KiB chunks):      ${rate(ours)}  ratio to baseline ${(baseline / ours).toFixed(2)} (goal >= 1.0)`);
console.log(`per-pair ratios (each run against the baseline run just before it): min ${ratios[0]!.toFixed(2)} median ${ratios[Math.floor(ratios.length / 2)]!.toFixed(2)} max ${ratios[ratios.length - 1]!.toFixed(2)}`);
if (tree !== undefined) console.log(`tree decoder decodeRequest (one run):             ${rate(tree)}  ratio to baseline ${(baseline / tree).toFixed(2)}`);
