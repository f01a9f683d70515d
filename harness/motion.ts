// What a motion test measured, computed from the telemetry records of its window (document 1 part 2
// CycleCaptureRecordV2: t_ns, seq, cycle_jitter_ns; per axis position, target, following_error_counts
// and following_error_valid, in drive counts converted with Describe's counts_per_unit and sign). Reading
// the window is cheap on purpose: only these fields are read, straight from the batch bytes, at offsets
// taken from the oracle's field tables (harness/oracle/telemetry.ts), so a motion test costs a few ms.
//
// Definitions (docs/profile.md "Measurements"):
// - following error of an axis in a cycle: |following_error_counts| when the drive reports it valid, else
//   |target - position|, in the axis's unit; following_error_max is the largest error the
//   axis held for following_error_timeout_ms (as the configured limit means it), the peak of one cycle is
//   recorded beside it;
// - a moving axis: its target or position spans more than its completion tolerance in the window;
// - completion time of a moving axis: from the first cycle after its target last changed to the first
//   cycle from which its position stays within completion_tolerance of that final target;
// - cycle lateness: cycle_jitter_ns (wake minus scheduled); an overrun is a cycle later than the
//   configuration's max_cycle_lateness_ns.

import { AXIS_BYTES, AXIS_ARRAY_OFFSET, AXIS_FIELDS, HEADER_BYTES, RECORD_BYTES, RECORD_FIELDS, decodeBatchHeader } from './oracle/telemetry.ts';

const offsetOf = (fields: readonly (readonly [number, string, string])[], name: string): number => {
  const f = fields.find((x) => x[2] === name);
  if (!f) throw new Error(`no telemetry field ${name}`);
  return f[0];
};
const R_T = offsetOf(RECORD_FIELDS, 't_ns');
const R_SEQ = offsetOf(RECORD_FIELDS, 'seq');
const R_JITTER = offsetOf(RECORD_FIELDS, 'cycle_jitter_ns');
const R_FAULTS = offsetOf(RECORD_FIELDS, 'execution_fault_reasons');
const A_POS = offsetOf(AXIS_FIELDS, 'position');
const A_TARGET = offsetOf(AXIS_FIELDS, 'target');
const A_FE = offsetOf(AXIS_FIELDS, 'following_error_counts');
const A_FE_VALID = offsetOf(AXIS_FIELDS, 'following_error_valid');

/** The fields of a window of records that the measurements use, as plain arrays. */
export interface TelemetryWindow {
  /** Cycle time relative to the first record, ms. */
  t: Float64Array;
  /** cycle_jitter_ns of each record. */
  jitter: Float64Array;
  /** Per axis slot (header axis_count of them): drive counts. */
  pos: Int32Array[];
  target: Int32Array[];
  fe: Int32Array[];
  feValid: Uint8Array[];
  /** execution_fault_reasons of each record (document 1 part 2: latched bits). */
  faults: Uint32Array;
  count: number;
  /** Records overwritten before they were read (header `dropped`, summed over the polls). */
  dropped: number;
  /** Breaks in the sequence: a record that is not the previous one's seq + 1 (the documents promise none). */
  gaps: number;
  /** The window was longer than the reader's cap: only the first `count` records were read. */
  truncated: boolean;
  cycleNs: number;
  /**
   * Every cycle is exactly one period after the previous one: the core runs on its own time (a stepped
   * or fast clock), not the host's, so its lateness says nothing about real time and is not counted.
   */
  coreTime: boolean;
}

/** A window under construction from batches as they arrive (pure: the polling lives with the caller). */
export class WindowBuilder {
  private chunks: { bytes: Uint8Array; n: number; axes: number }[] = [];
  private n = 0;
  private lastSeq: bigint | undefined;
  dropped = 0;
  gaps = 0;
  cycleNs = 0;
  truncated = false;

  constructor(private readonly cap: number) {}

  get full(): boolean {
    return this.n >= this.cap;
  }

  /** Add one batch (bytes as received, already checked by the caller's status); returns its last_sequence and record_count. */
  add(bytes: Uint8Array): { last: bigint; count: number } {
    const h = decodeBatchHeader(bytes);
    this.dropped += Number(h.dropped);
    this.cycleNs = Number(h.cycle_period_ns);
    const take = Math.min(h.record_count, this.cap - this.n);
    if (take < h.record_count) this.truncated = true;
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let k = 0; k < take; k++) {
      const seq = dv.getBigUint64(HEADER_BYTES + k * RECORD_BYTES + R_SEQ, true);
      if (this.lastSeq !== undefined && seq !== this.lastSeq + 1n && !(k === 0 && h.dropped > 0n)) this.gaps++;
      this.lastSeq = seq;
    }
    if (take > 0) this.chunks.push({ bytes, n: take, axes: h.axis_count });
    this.n += take;
    return { last: h.last_sequence, count: h.record_count };
  }

  build(): TelemetryWindow {
    const axes = Math.max(0, ...this.chunks.map((c) => c.axes));
    const n = this.n;
    const w: TelemetryWindow = {
      t: new Float64Array(n),
      jitter: new Float64Array(n),
      pos: Array.from({ length: axes }, () => new Int32Array(n)),
      target: Array.from({ length: axes }, () => new Int32Array(n)),
      fe: Array.from({ length: axes }, () => new Int32Array(n)),
      feValid: Array.from({ length: axes }, () => new Uint8Array(n)),
      faults: new Uint32Array(n),
      count: n,
      dropped: this.dropped,
      gaps: this.gaps,
      truncated: this.truncated,
      cycleNs: this.cycleNs,
      coreTime: n > 1,
    };
    let i = 0;
    let t0: bigint | undefined;
    let prev: bigint | undefined;
    const period = BigInt(this.cycleNs);
    for (const c of this.chunks) {
      const dv = new DataView(c.bytes.buffer, c.bytes.byteOffset, c.bytes.byteLength);
      for (let k = 0; k < c.n; k++, i++) {
        const base = HEADER_BYTES + k * RECORD_BYTES;
        const t = dv.getBigUint64(base + R_T, true);
        t0 ??= t;
        if (prev !== undefined && t - prev !== period) w.coreTime = false;
        prev = t;
        w.t[i] = Number(t - t0) / 1e6;
        w.jitter[i] = Number(dv.getBigInt64(base + R_JITTER, true));
        w.faults[i] = dv.getUint32(base + R_FAULTS, true);
        for (let a = 0; a < c.axes; a++) {
          const ab = base + AXIS_ARRAY_OFFSET + a * AXIS_BYTES;
          w.pos[a]![i] = dv.getInt32(ab + A_POS, true);
          w.target[a]![i] = dv.getInt32(ab + A_TARGET, true);
          w.fe[a]![i] = dv.getInt32(ab + A_FE, true);
          w.feValid[a]![i] = dv.getUint32(ab + A_FE_VALID, true) ? 1 : 0;
        }
      }
    }
    return w;
  }
}

// ---------------------------------------------------------------------------------------------
// Log histograms (20 buckets per decade), mergeable across tests, workers and shards.

/** A sparse log histogram: bucket index -> count; bucket 0 holds values below `base`, k >= 1 holds [base*10^((k-1)/20), base*10^(k/20)). */
export interface LogHist {
  base: number;
  buckets: Record<string, number>;
  count: number;
  /** The largest value added; null while empty (JSON has no -Infinity). */
  max: number | null;
}

export const newHist = (base: number): LogHist => ({ base, buckets: {}, count: 0, max: null });

export function histAdd(h: LogHist, v: number): void {
  const k = v < h.base ? 0 : Math.floor(20 * Math.log10(v / h.base)) + 1;
  h.buckets[k] = (h.buckets[k] ?? 0) + 1;
  h.count++;
  if (h.max === null || v > h.max) h.max = v;
}

export function histMerge(into: LogHist, from: LogHist): void {
  if (into.base !== from.base) throw new Error(`histograms of different bases ${into.base} and ${from.base}`);
  for (const [k, n] of Object.entries(from.buckets)) into.buckets[k] = (into.buckets[k] ?? 0) + n;
  into.count += from.count;
  if (from.max !== null && (into.max === null || from.max > into.max)) into.max = from.max;
}

/** The q-quantile (0..1): the upper edge of the bucket holding it, clamped to the largest value seen. */
export function histQuantile(h: LogHist, q: number): number {
  if (h.count === 0 || h.max === null) return NaN;
  const rank = Math.max(1, Math.ceil(q * h.count));
  let seen = 0;
  for (const k of Object.keys(h.buckets).map(Number).sort((a, b) => a - b)) {
    seen += h.buckets[k]!;
    if (seen >= rank) return Math.min(h.max, k === 0 ? h.base : h.base * 10 ** (k / 20));
  }
  return h.max;
}

// ---------------------------------------------------------------------------------------------
// Motion analysis

export interface AxisInfo {
  id: string;
  unit: string;
  /** counts_per_unit x sign (Describe). */
  countsPerUnit: number;
  /** limits.following_error, limits.completion_tolerance, limits.completion_timeout_ms of the machine configuration, where known. */
  followingError?: number;
  /** limits.following_error_timeout_ms: how long a following error must last to count (document 3). */
  followingErrorTimeoutMs?: number;
  completionTolerance?: number;
  completionTimeoutMs?: number;
  /** Configuration path of the axis (axes[i]) for limit references. */
  configPath?: string;
}

/** Decimated series of one moving axis for the report's plot. */
export interface AxisSeries {
  axis: string;
  unit: string;
  t: number[];
  position: number[];
  target: number[];
  following_error: number[];
  following_error_limit?: number;
}

export interface AxisMotion {
  axis: AxisInfo;
  /** The largest following error the axis held for following_error_timeout_ms (the peak without a timeout). */
  feMax: number;
  /** The largest following error of any one cycle. */
  fePeak: number;
  /**
   * Completion time, ms; undefined when the position never stayed within tolerance in the window, or when
   * an execution fault latched in it (the core then holds the position as the target: not a completion).
   */
  completionMs?: number;
  /** The tolerance used and whether it came from the configuration. */
  tolerance: number;
  toleranceConfigured: boolean;
  series: AxisSeries;
}

/** Completion tolerance used where the target has no machine configuration to take it from (docs/profile.md "Measurements"). */
export const PROFILE_COMPLETION_TOLERANCE = 0.001;
const PLOT_BUCKETS = 300;

export function analyseMotion(w: TelemetryWindow, axes: readonly AxisInfo[]): AxisMotion[] {
  const out: AxisMotion[] = [];
  const n = w.count;
  if (n < 2) return out;
  // A fault that latched during the window stopped the motion: the target jumps to where the axis stood,
  // and "within tolerance of the final target" would read as a completion at once (0 ms).
  let faultLatched = false;
  for (let i = 1; i < n && !faultLatched; i++) faultLatched = (w.faults[i]! & ~w.faults[i - 1]!) !== 0;
  axes.forEach((ax, a) => {
    if (a >= w.pos.length || !(Math.abs(ax.countsPerUnit) > 0)) return;
    const cpu = Math.abs(ax.countsPerUnit);
    const pos = w.pos[a]!;
    const tgt = w.target[a]!;
    const tol = ax.completionTolerance ?? PROFILE_COMPLETION_TOLERANCE;
    const tolCounts = tol * cpu;
    let pmin = Infinity;
    let pmax = -Infinity;
    let tmin = Infinity;
    let tmax = -Infinity;
    for (let i = 0; i < n; i++) {
      pmin = Math.min(pmin, pos[i]!);
      pmax = Math.max(pmax, pos[i]!);
      tmin = Math.min(tmin, tgt[i]!);
      tmax = Math.max(tmax, tgt[i]!);
    }
    if (pmax - pmin <= tolCounts && tmax - tmin <= tolCounts) return; // not a moving axis
    const feAt = (i: number): number => {
      // The drive's own following error when it reports one valid (what the core trips on, docs/profile.md
      // execution fault bit 5): |target - position| also holds the bus's one-cycle delay between the
      // target sent and the position read back, which an EtherCAT drive does not count as error.
      return (w.feValid[a]![i] ? Math.abs(w.fe[a]![i]!) : Math.abs(tgt[i]! - pos[i]!)) / cpu;
    };
    const fe = new Float64Array(n);
    let fePeak = 0;
    for (let i = 0; i < n; i++) fePeak = Math.max(fePeak, (fe[i] = feAt(i)));
    // The configuration's limit is a following error held for following_error_timeout_ms (document 3
    // limits; the core trips on it): the largest error every cycle of some such stretch reached.
    let feMax = fePeak;
    const hold = ax.followingErrorTimeoutMs;
    if (hold !== undefined && hold > 0) {
      feMax = 0;
      for (let i = 0, j = 0; i < n; i++) {
        let low = Infinity;
        for (j = i; j < n && w.t[j]! - w.t[i]! < hold; j++) low = Math.min(low, fe[j]!);
        if (j < n || w.t[n - 1]! - w.t[i]! >= hold) feMax = Math.max(feMax, low === Infinity ? 0 : low);
      }
    }
    // Completion: after the target's last change, the first cycle from which the position stays within tolerance.
    const final = tgt[n - 1]!;
    let last = n - 1;
    while (last > 0 && tgt[last - 1] === final) last--;
    let completionMs: number | undefined;
    if (!faultLatched && Math.abs(pos[n - 1]! - final) <= tolCounts) {
      let j = n - 1;
      while (j > last && Math.abs(pos[j - 1]! - final) <= tolCounts) j--;
      completionMs = w.t[j]! - w.t[last]!;
    }
    out.push({ axis: ax, feMax, fePeak, ...(completionMs !== undefined ? { completionMs } : {}), tolerance: tol, toleranceConfigured: ax.completionTolerance !== undefined, series: decimate(w, a, ax, feAt) });
  });
  return out;
}

const round = (x: number): number => Number(x.toPrecision(7));

/** At most two points per bucket: its first sample and its largest following error, in time order. */
function decimate(w: TelemetryWindow, a: number, ax: AxisInfo, feAt: (i: number) => number): AxisSeries {
  const n = w.count;
  const cpu = ax.countsPerUnit;
  const pick: number[] = [];
  const per = Math.max(1, Math.ceil(n / PLOT_BUCKETS));
  for (let s = 0; s < n; s += per) {
    const e = Math.min(n, s + per);
    let worst = s;
    for (let i = s; i < e; i++) if (feAt(i) > feAt(worst)) worst = i;
    pick.push(s);
    if (worst !== s) pick.push(worst);
  }
  if (pick[pick.length - 1] !== n - 1) pick.push(n - 1);
  return {
    axis: ax.id,
    unit: ax.unit,
    t: pick.map((i) => round(w.t[i]!)),
    position: pick.map((i) => round(w.pos[a]![i]! / cpu)),
    target: pick.map((i) => round(w.target[a]![i]! / cpu)),
    following_error: pick.map((i) => round(feAt(i))),
    ...(ax.followingError !== undefined ? { following_error_limit: ax.followingError } : {}),
  };
}
