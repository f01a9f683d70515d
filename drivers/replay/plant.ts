// Per-axis plant identified from a recording (closed-loop replay, docs/recording.md "Closed loop").
//
// The model is what a drive in cyclic synchronous position mode does with the target it is given: a
// second-order follower with a transport delay. In frame terms (outputs written before the exchange, inputs
// read after it), with u the target the core wrote and y the position the drive returned, both in counts:
//
//   y(k) = y(k-1) + alpha * (y(k-1) - y(k-2)) + b * u(k-d) - c * y(k-1) + e
//
// a linear least-squares problem in (alpha, b, c, e) for each delay d in 0..MAX_DELAY; the delay with the
// smallest residual wins. The intercept e absorbs the centring. From it:
//   gain       b / c             the steady-state position per unit of target (1 for a drive that follows)
//   delay      d cycles          the transport delay between a target and its first effect
//   wn, zeta   from the poles of z^2 - (1 + alpha - c) z + alpha: the following-error dynamics
// Only the frames in which the drive reported operation in CSP mode count (modeDisplay 8), and only in runs
// of at least MIN_RUN such frames. An axis whose target never moved there is not identifiable and says so.
//
// Fit quality: the model is simulated free-running over every such run from the recorded start, driven
// by the recorded targets; fit = 100 * (1 - |y - y_sim| / |y - mean(y)|) (the normalised root-mean-square
// fit of system identification tools), plus the one-step residual RMS in counts.

import type { RecordingReader } from './format.ts';
import { AXIS_FIELDS } from './format.ts';

export const MAX_DELAY = 4;
const MIN_RUN = 8;
const CSP = 8;

export interface PlantFit {
  axis: number;
  identified: boolean;
  /** Why not, when not identified. */
  reason?: string;
  delay_cycles: number;
  alpha: number;
  b: number;
  c: number;
  e: number;
  gain: number;
  wn_rad_s: number;
  zeta: number;
  /** Normalised RMS fit of the free-running simulation, percent (100 is exact). */
  fit_percent: number;
  /** One-step prediction residual, RMS counts. */
  residual_rms_counts: number;
  /** Frames used. */
  samples: number;
}

/** The target, position and CSP flag of every frame, per axis (read once from the recording). */
export interface AxisSeries {
  u: Float64Array;
  y: Float64Array;
  csp: Uint8Array;
}

export function readSeries(r: RecordingReader): AxisSeries[] {
  const n = r.header.axisCount;
  const fTarget = AXIS_FIELDS.indexOf('targetPosition');
  const fPos = AXIS_FIELDS.indexOf('positionActual');
  const fMode = AXIS_FIELDS.indexOf('modeDisplay');
  let cap = 4096;
  let out = Array.from({ length: n }, () => ({ u: new Float64Array(cap), y: new Float64Array(cap), csp: new Uint8Array(cap) }));
  let k = 0;
  while (r.next()) {
    if (k === cap) {
      cap *= 2;
      out = out.map((s) => {
        const g = { u: new Float64Array(cap), y: new Float64Array(cap), csp: new Uint8Array(cap) };
        g.u.set(s.u);
        g.y.set(s.y);
        g.csp.set(s.csp);
        return g;
      });
    }
    for (let a = 0; a < n; a++) {
      out[a]!.u[k] = r.values[fTarget * n + a]!;
      out[a]!.y[k] = r.values[fPos * n + a]!;
      out[a]!.csp[k] = r.values[fMode * n + a] === CSP ? 1 : 0;
    }
    k++;
  }
  return out.map((s) => ({ u: s.u.slice(0, k), y: s.y.slice(0, k), csp: s.csp.slice(0, k) }));
}

/** Solve the 4x4 normal equations (Gaussian elimination with partial pivoting); null when singular. */
function solve(A: number[][], v: number[]): number[] | null {
  const n = v.length;
  const M = A.map((row, i) => [...row, v[i]!]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(M[r]![c]!) > Math.abs(M[p]![c]!)) p = r;
    if (Math.abs(M[p]![c]!) < 1e-12) return null;
    [M[c], M[p]] = [M[p]!, M[c]!];
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = M[r]![c]! / M[c]![c]!;
      for (let k = c; k <= n; k++) M[r]![k]! -= f * M[c]![k]!;
    }
  }
  return M.map((row, i) => row[n]! / row[i]!);
}

/** Rows usable for delay d: k with CSP on k-2-d .. k (a run of at least MIN_RUN). */
function usable(s: AxisSeries, d: number): number[] {
  const rows: number[] = [];
  let run = 0;
  for (let k = 0; k < s.y.length; k++) {
    run = s.csp[k] ? run + 1 : 0;
    if (run >= Math.max(MIN_RUN, 3 + d)) rows.push(k);
  }
  return rows;
}

/** Identify one axis's plant from its series (cycle time in seconds for wn). */
export function identifyAxis(axis: number, s: AxisSeries, cycleS: number): PlantFit {
  const none = (reason: string, samples = 0): PlantFit => ({ axis, identified: false, reason, delay_cycles: 0, alpha: 0, b: 0, c: 0, e: 0, gain: 0, wn_rad_s: 0, zeta: 0, fit_percent: 0, residual_rms_counts: 0, samples });
  const rows0 = usable(s, 0);
  if (rows0.length === 0) return none('the drive was never in cyclic synchronous position mode for long enough');
  let umin = Infinity;
  let umax = -Infinity;
  for (const k of rows0) {
    umin = Math.min(umin, s.u[k]!);
    umax = Math.max(umax, s.u[k]!);
  }
  if (umax - umin < 1) return none('the target never moved while the drive followed it (nothing to identify)', rows0.length);
  const m = s.y[rows0[0]!]!; // centring
  let best: { d: number; p: number[]; sse: number; n: number } | null = null;
  for (let d = 0; d <= MAX_DELAY; d++) {
    const rows = usable(s, d);
    const A = [0, 0, 0, 0].map(() => [0, 0, 0, 0]);
    const v = [0, 0, 0, 0];
    for (const k of rows) {
      const x = [s.y[k - 1]! - s.y[k - 2]!, s.u[k - d]! - m, -(s.y[k - 1]! - m), 1];
      const t = s.y[k]! - s.y[k - 1]!;
      for (let i = 0; i < 4; i++) {
        v[i]! += x[i]! * t;
        for (let j = 0; j < 4; j++) A[i]![j]! += x[i]! * x[j]!;
      }
    }
    const p = solve(A, v);
    if (!p) continue;
    let sse = 0;
    for (const k of rows) {
      const pred = p[0]! * (s.y[k - 1]! - s.y[k - 2]!) + p[1]! * (s.u[k - d]! - m) - p[2]! * (s.y[k - 1]! - m) + p[3]!;
      sse += (s.y[k]! - s.y[k - 1]! - pred) ** 2;
    }
    // A longer delay must earn its place: quantised positions make neighbouring delays fit almost alike,
    // so a longer one wins only when its residual is clearly (5 %) smaller.
    if (!best || sse / rows.length < 0.95 * (best.sse / best.n)) best = { d, p, sse, n: rows.length };
  }
  if (!best) return none('the least-squares problem is singular (too little excitation)', rows0.length);
  const [alpha, b, c, e] = best.p as [number, number, number, number];
  const fit: PlantFit = { axis, identified: true, delay_cycles: best.d, alpha, b, c, e, gain: c !== 0 ? b / c : 0, wn_rad_s: 0, zeta: 0, fit_percent: 0, residual_rms_counts: Math.sqrt(best.sse / best.n), samples: best.n };
  // Re-express the intercept for uncentred use: y(k) = y1 + alpha*dy + b*u - c*y1 + (e + (c - b) * m).
  fit.e = e + (c - b) * m;
  const [wn, zeta] = dynamics(1 + alpha - c, -alpha, cycleS);
  fit.wn_rad_s = wn;
  fit.zeta = zeta;
  fit.fit_percent = freeRunFit(fit, s);
  return fit;
}

/** wn and zeta of the discrete poles of z^2 - a1 z - a2, mapped to continuous time. */
function dynamics(a1: number, a2: number, dt: number): [number, number] {
  const disc = a1 * a1 + 4 * a2;
  if (disc < 0) {
    const r = Math.sqrt(-a2);
    const th = Math.atan2(Math.sqrt(-disc) / 2, a1 / 2);
    const re = Math.log(r) / dt;
    const im = th / dt;
    const wn = Math.hypot(re, im);
    return [wn, wn > 0 ? -re / wn : 0];
  }
  const z1 = (a1 + Math.sqrt(disc)) / 2;
  const z2 = (a1 - Math.sqrt(disc)) / 2;
  if (z1 <= 0 || z2 <= 0) return [0, 0];
  const s1 = Math.log(z1) / dt;
  const s2 = Math.log(z2) / dt;
  const wn = Math.sqrt(s1 * s2);
  return [wn, wn > 0 ? -(s1 + s2) / (2 * wn) : 0];
}

/** One step of the model (uncentred). */
export function plantStep(f: PlantFit, y1: number, y2: number, u: number): number {
  return y1 + f.alpha * (y1 - y2) + f.b * u - f.c * y1 + f.e;
}

function freeRunFit(f: PlantFit, s: AxisSeries): number {
  let num = 0;
  let den = 0;
  let sum = 0;
  let cnt = 0;
  const runs: Array<[number, number]> = [];
  let start = -1;
  for (let k = 0; k <= s.y.length; k++) {
    const on = k < s.y.length && s.csp[k] === 1;
    if (on && start < 0) start = k;
    if (!on && start >= 0) {
      if (k - start >= MIN_RUN) runs.push([start, k]);
      start = -1;
    }
  }
  for (const [a, z] of runs) for (let k = a; k < z; k++) (sum += s.y[k]!), cnt++;
  const mean = cnt ? sum / cnt : 0;
  for (const [a, z] of runs) {
    let y1 = s.y[a + 1]!;
    let y2 = s.y[a]!;
    for (let k = a + 2; k < z; k++) {
      const u = s.u[Math.max(a, k - f.delay_cycles)]!;
      const y = plantStep(f, y1, y2, u);
      num += (s.y[k]! - y) ** 2;
      den += (s.y[k]! - mean) ** 2;
      y2 = y1;
      y1 = y;
    }
  }
  return den > 0 ? 100 * (1 - Math.sqrt(num / den)) : 0;
}

/** Identify every axis of a recording. */
export function identifyPlants(r: RecordingReader): PlantFit[] {
  const cycleS = Number(BigInt(r.header.cycle_ns)) / 1e9;
  return readSeries(r).map((s, a) => identifyAxis(a, s, cycleS));
}
