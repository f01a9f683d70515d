// Inverse kinematics of the OLP server (sims/olp/kinematics.ts, damped least squares) on the fixture
// robot: solve time per pose (p50, p99) for goals drawn around a non-singular configuration, seeded
// from that configuration, against the baseline of one forward-kinematics evaluation measured in the same
// run (the ratio says how many FK evaluations one solve costs). Also the pose error of the solutions
// (FK of the solution against the goal). And the STEP worker's figures: OpenCascade (occt-import-js)
// module load, each fixture's read (first and second) and the peak RSS. Prints; asserts nothing.
//
//   node --import tsx bench/olp-ik.bench.ts [solves]

import { readFileSync } from 'node:fs';
import { chainOf, forward, inverse, poseError } from '../sims/olp/kinematics.ts';
import { loadOcct } from '../sims/olp/worker.ts';

const N = Number(process.argv[2] ?? 2000);
const chain = chainOf(readFileSync(new URL('../fixtures/robots/sim-nine-axis.urdf', import.meta.url), 'utf8'));
const Q0: Record<string, number> = { J9: 0, J1: 0, J2: 0.3, J3: 0.6, J4: 0.2, J5: 0.7, J6: -0.3 };
let seed = 12345;
const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) * 2 - 1;

const goals = Array.from({ length: N }, () => {
  const q = { ...Q0 };
  for (const n of chain.active) q[n]! += 0.3 * rnd();
  return forward(chain, q).pose;
});
const now = () => Number(process.hrtime.bigint()) / 1e3; // microseconds
const fkT: number[] = [];
for (let i = 0; i < N; i++) {
  const t0 = now();
  forward(chain, Q0);
  fkT.push(now() - t0);
}
const ikT: number[] = [];
let worstM = 0;
let worstRad = 0;
let failed = 0;
for (const g of goals) {
  const t0 = now();
  const r = inverse(chain, g, Q0);
  ikT.push(now() - t0);
  if (!r.ok) {
    failed++;
    continue;
  }
  const e = poseError(forward(chain, r.q).pose, g);
  worstM = Math.max(worstM, Math.hypot(e[0]!, e[1]!, e[2]!));
  worstRad = Math.max(worstRad, Math.hypot(e[3]!, e[4]!, e[5]!));
}
const pct = (a: number[], p: number) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor((p / 100) * a.length))]!;
console.log(`IK solves: ${N} (${failed} refused); solve p50 ${pct(ikT, 50).toFixed(1)} us, p99 ${pct(ikT, 99).toFixed(1)} us; FK p50 ${pct(fkT, 50).toFixed(2)} us; ratio p99 IK / p50 FK ${(pct(ikT, 99) / pct(fkT, 50)).toFixed(0)}`);
console.log(`IK pose error (worst over the solves): ${worstM.toExponential(2)} m, ${worstRad.toExponential(2)} rad`);

const rss0 = process.memoryUsage().rss;
const t0 = now();
const occt = await loadOcct();
const load = (now() - t0) / 1000;
const reads: string[] = [];
let peak = process.memoryUsage().rss;
for (const f of ['fillet-joint.step', 'butt-joint.step']) {
  const bytes = readFileSync(new URL(`../fixtures/step/${f}`, import.meta.url));
  for (const pass of ['first', 'second']) {
    const a = now();
    occt.ReadStepFile(bytes, { linearUnit: 'millimeter' });
    reads.push(`${f} ${pass} ${((now() - a) / 1000).toFixed(0)} ms`);
    peak = Math.max(peak, process.memoryUsage().rss);
  }
}
console.log(`STEP (occt-import-js, Liftoff only): module load ${load.toFixed(0)} ms; ${reads.join('; ')}; RSS before ${(rss0 / 1e6).toFixed(0)} MB, peak ${(peak / 1e6).toFixed(0)} MB`);
