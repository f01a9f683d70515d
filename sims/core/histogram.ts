// Cycle timing histograms (lateness and work per cycle), allocation-free on the cycle path.

import type { CoreTiming } from './protocol.ts';

/**
 * Fixed-bucket histogram of a per-cycle duration in ns (cycle lateness, work time). Buckets are
 * log-spaced, 20 per decade from 1 us to 100 ms (each about 12 % wide), plus one below 1 us (zero and
 * negative values included) and one at or above 100 ms. Recording allocates nothing; percentiles are the
 * upper edge of the bucket that holds the rank, clamped to the observed minimum and maximum (so they
 * over-estimate by at most one bucket width and are exact when all samples are equal).
 */
export class CycleHistogram {
  static readonly LOW_NS = 1_000;
  static readonly HIGH_NS = 100_000_000;
  static readonly PER_DECADE = 20;
  /** Upper edge of bucket k for k = 0..100 (bucket k >= 1 holds EDGES[k-1] <= v < EDGES[k]). */
  static readonly EDGES: Float64Array = (() => {
    const e = new Float64Array(101);
    for (let k = 0; k <= 100; k++) e[k] = CycleHistogram.LOW_NS * 10 ** (k / CycleHistogram.PER_DECADE);
    e[100] = CycleHistogram.HIGH_NS;
    return e;
  })();
  /** Samples per bucket: [0] below 1 us, [1..100] log buckets, [101] 100 ms and above. */
  readonly counts = new Float64Array(102);
  count = 0;
  min = Infinity;
  max = -Infinity;

  /** Bounds [lo, hi) of the bucket the last sample fell in (a run of similar samples skips the log10). */
  private lastLo = 0;
  private lastHi = 0;
  private lastK = 0;

  /** Adds one sample (ns). */
  record(v: number): void {
    const edges = CycleHistogram.EDGES;
    let k: number;
    if (v >= this.lastLo && v < this.lastHi) k = this.lastK;
    else if (!(v >= CycleHistogram.LOW_NS)) k = 0;
    else if (v >= CycleHistogram.HIGH_NS) k = 101;
    else {
      k = Math.floor(Math.log10(v / CycleHistogram.LOW_NS) * CycleHistogram.PER_DECADE) + 1;
      // log10 may round across an edge: settle on the bucket whose bounds hold v
      if (k > 1 && v < edges[k - 1]!) k--;
      else if (k < 100 && v >= edges[k]!) k++;
      // bucket k now holds v: edges[k - 1] <= v < edges[k]
      this.lastK = k;
      this.lastLo = edges[k - 1]!;
      this.lastHi = edges[k]!;
    }
    this.counts[k]!++;
    this.count++;
    if (v < this.min) this.min = v;
    if (v > this.max) this.max = v;
  }

  /** The q-quantile (0 < q <= 1) in whole ns; 0 with no samples. */
  quantile(q: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let k = 0; k < 102; k++) {
      seen += this.counts[k]!;
      if (seen >= rank) {
        const upper = k === 101 ? this.max : Math.ceil(CycleHistogram.EDGES[k]!);
        return Math.min(this.max, Math.max(this.min, upper));
      }
    }
    return this.max;
  }

  reset(): void {
    this.counts.fill(0);
    this.count = 0;
    this.min = Infinity;
    this.max = -Infinity;
  }
}

/** An incarnation's cycle timing as the core publishes it (protocol.ts CoreTiming), from its two histograms. */
export function cycleTiming(cycles: number, overruns: number, late: CycleHistogram, work: CycleHistogram): CoreTiming {
  const ns = (v: number) => BigInt(Math.round(v));
  return {
    cycles: BigInt(cycles),
    overruns: BigInt(overruns),
    p50_lateness_ns: ns(late.quantile(0.5)),
    p99_lateness_ns: ns(late.quantile(0.99)),
    max_lateness_ns: late.count ? ns(late.max) : 0n,
    p50_work_ns: ns(work.quantile(0.5)),
    p99_work_ns: ns(work.quantile(0.99)),
    max_work_ns: work.count ? ns(work.max) : 0n,
  };
}
