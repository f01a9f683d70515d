// Exact conversion of a JSON number literal's digits to the float64 JSON.parse would give (document 1
// part 1: numbers are float64; the service must not round differently from a conforming parser).
//
// The literal arrives as m * 10^e10 with m held exactly as up to 19 significant digits (A: the first 15,
// B: up to 4 more, nb of them). Three paths, each exact:
// 1. m <= 2^53 and |e10| <= 22: one IEEE multiplication or division of two exact doubles, rounded once
//    (Clinger's fast path).
// 2. m up to 19 digits and -22 <= e10 <= 0: a candidate y = m/10^k is checked against the exact residual
//    m - y*10^k, computed with error-free transformations (Dekker's product, Knuth's sum); when the
//    residual is not clearly inside half an ulp the neighbour is tried, and a near-tie gives up (NaN).
// 3. Anything else (and a give-up): Number() of the literal's text, done by the caller.

const POW10 = new Float64Array(23);
for (let k = 0; k < 23; k++) POW10[k] = Number(`1e${k}`);
const SPLIT = 134217729; // 2^27 + 1
const TWO53 = 9007199254740992;
const P_HI = new Float64Array(23);
const P_LO = new Float64Array(23);
for (let k = 0; k < 23; k++) {
  const c = SPLIT * POW10[k]!;
  P_HI[k] = c - (c - POW10[k]!);
  P_LO[k] = POW10[k]! - P_HI[k]!;
}
/** HALF_ULP[exp] = half the spacing of doubles whose biased exponent is exp (normal numbers). */
const HALF_ULP = new Float64Array(2048);
for (let e = 1; e < 2047; e++) HALF_ULP[e] = Math.pow(2, e - 1076);
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const F = new Float64Array(1);
const U = new Uint32Array(F.buffer);
const MARGIN = 1 / 2 ** 40;

/** Exact value of (A * 10^nb + B) * 10^e10, or NaN when this module cannot decide (use Number(text)). */
export function digitsToFloat(A: number, B: number, nb: number, e10: number): number {
  if (nb === 0) {
    if (A === 0) return 0;
    if (e10 < -22 || e10 > 22) return NaN;
    return e10 < 0 ? A / POW10[-e10]! : A * POW10[e10]!;
  }
  // m = A*10^nb + B exactly as mhi + mlo.
  const q = POW10[nb]!;
  const th = A * q;
  const tl = twoProdErr(A, q, th, P_HI[nb]!, P_LO[nb]!);
  const s = th + B;
  const bb = s - th;
  const e1 = th - (s - bb) + (B - bb);
  const small = e1 + tl; // both small integers: exact
  const mhi = s + small;
  const mlo = small - (mhi - s);
  if (mlo === 0 && mhi <= TWO53) {
    if (e10 < -22 || e10 > 22) return NaN;
    return e10 < 0 ? mhi / POW10[-e10]! : mhi * POW10[e10]!;
  }
  if (e10 > 0 || e10 < -22 || !LITTLE_ENDIAN) return NaN;
  const k = -e10;
  const P = POW10[k]!;
  const ph0 = P_HI[k]!;
  const pl0 = P_LO[k]!;
  let y = mhi / P;
  for (let tries = 0; tries < 3; tries++) {
    const pH = y * P;
    const pL = twoProdErr(y, P, pH, ph0, pl0);
    const r = mhi - pH + (mlo - pL); // mhi - pH is exact (Sterbenz): y*P is close to m
    F[0] = y;
    const hi = U[1]!;
    let h = HALF_ULP[(hi >>> 20) & 0x7ff]! * P;
    // Below a power of two the spacing halves.
    if (r < 0 && U[0] === 0 && (hi & 0xfffff) === 0) h *= 0.5;
    const ar = r < 0 ? -r : r;
    if (ar < h * (1 - MARGIN)) return y;
    if (ar <= h * (1 + MARGIN)) return NaN;
    // The neighbour towards m.
    if (r > 0) {
      if (U[0] === 0xffffffff) {
        U[0] = 0;
        U[1] = hi + 1;
      } else U[0] = U[0]! + 1;
    } else {
      if (U[0] === 0) {
        U[0] = 0xffffffff;
        U[1] = hi - 1;
      } else U[0] = U[0]! - 1;
    }
    y = F[0]!;
  }
  return NaN;
}

/** The exact error of the product p = fl(a*b), b given split as bh + bl (Dekker, no FMA needed). */
function twoProdErr(a: number, b: number, p: number, bh: number, bl: number): number {
  void b;
  const c = SPLIT * a;
  const ah = c - (c - a);
  const al = a - ah;
  return ah * bh - p + ah * bl + al * bh + al * bl;
}
