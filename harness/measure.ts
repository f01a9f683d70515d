// Measurements with limits, the OpenHTF habit: a test declares what it measures, in which unit and
// against which limit, records the value, and a value outside its limit fails the test with both numbers
// (FAIL: the target did not do what its documents or its configuration promise). Every limit says where
// it comes from:
//
//   documented   a number in the documents (document 1 part 4 "home ... waits up to 60 s")
//   configured   the machine configuration the target runs (document 3: limits.following_error,
//                completion_timeout_ms, max_cycle_lateness_ns)
//   profile      a decision of ours (docs/profile.md)
//
//   measure('following_error_max', 'rad', { axis: 'J1' }).atMost(0.01, 'configured', 'axes[0].limits.following_error').record(v)
//
// Measurements belong to the running test: harness/evidence-setup.ts opens a collector before each
// conformance test and hands what it gathered to the test's meta (run.json, blob reports), Allure and
// the HTML report after it. The same names are measured on every target; a limit is absent only where
// the target has no document or configuration to take it from.

import { HarnessError } from './errors.ts';

export type LimitSource = 'documented' | 'configured' | 'profile';

export interface Limit {
  /** at_most: value <= hi; at_least: value >= lo; within: lo <= value <= hi; equals: value == lo. */
  kind: 'at_most' | 'at_least' | 'within' | 'equals';
  lo?: number;
  hi?: number;
  source: LimitSource;
  /** Where the number comes from: a document section or a configuration path. */
  ref: string;
}

export type MeasurementOutcome = 'pass' | 'fail' | 'unlimited';

export interface MeasurementRecord {
  name: string;
  unit: string;
  /** The axis (Describe id) for per-axis measurements. */
  axis?: string;
  value: number;
  limit?: Limit;
  outcome: MeasurementOutcome;
  /** How the value was obtained, when it is not obvious from the name (a window cut short, say). */
  note?: string;
}

/** The limit in words, for messages and the report: "<= 0.01 (configured: axes[0].limits.following_error)". */
export function limitText(l: Limit): string {
  const v =
    l.kind === 'at_most' ? `<= ${fmt(l.hi!)}` : l.kind === 'at_least' ? `>= ${fmt(l.lo!)}` : l.kind === 'equals' ? `== ${fmt(l.lo!)}` : `within [${fmt(l.lo!)}, ${fmt(l.hi!)}]`;
  return `${v} (${l.source}: ${l.ref})`;
}

/** "cycle_lateness_max = 812 us, limit <= 500 (configured: max_cycle_lateness_ns)" for notes and summaries. */
export function measurementText(m: MeasurementRecord): string {
  return `${m.name}${m.axis ? ` ${m.axis}` : ''} = ${m.value} ${m.unit}${m.limit ? `, limit ${limitText(m.limit)}` : ''}`;
}

export function withinLimit(value: number, l: Limit): boolean {
  switch (l.kind) {
    case 'at_most':
      return value <= l.hi!;
    case 'at_least':
      return value >= l.lo!;
    case 'equals':
      return value === l.lo!;
    case 'within':
      return value >= l.lo! && value <= l.hi!;
  }
}

function fmt(n: number): string {
  if (Number.isInteger(n)) return String(n);
  const a = Math.abs(n);
  return a !== 0 && (a < 1e-3 || a >= 1e6) ? n.toExponential(4) : String(Number(n.toPrecision(6)));
}

/** A declared measurement: give it at most one limit, then record its value once. */
export class Measurement {
  private limit?: Limit;
  private done = false;

  constructor(
    readonly name: string,
    readonly unit: string,
    private readonly axis: string | undefined,
    private readonly sink: (m: MeasurementRecord) => void,
  ) {
    if (!/^[a-z][a-z0-9_]*$/.test(name)) throw new HarnessError('HIL_ERR_MEASUREMENT', `measurement name ${JSON.stringify(name)}: lowercase words joined by _`);
  }

  atMost(hi: number, source: LimitSource, ref: string): this {
    return this.set({ kind: 'at_most', hi, source, ref });
  }

  atLeast(lo: number, source: LimitSource, ref: string): this {
    return this.set({ kind: 'at_least', lo, source, ref });
  }

  within(lo: number, hi: number, source: LimitSource, ref: string): this {
    if (!(lo <= hi)) throw new HarnessError('HIL_ERR_MEASUREMENT', `${this.name}: within(${lo}, ${hi}) is empty`);
    return this.set({ kind: 'within', lo, hi, source, ref });
  }

  equals(x: number, source: LimitSource, ref: string): this {
    return this.set({ kind: 'equals', lo: x, source, ref });
  }

  /**
   * Record the value. Outside its limit this throws HIL_ERR_MEASUREMENT_LIMIT (a FAIL of the target)
   * naming the value and the limit; the measurement is kept either way, so the report shows it.
   */
  record(value: number, note?: string): MeasurementRecord {
    if (this.done) throw new HarnessError('HIL_ERR_MEASUREMENT', `${this.name}${this.axis ? ` (${this.axis})` : ''} recorded twice`);
    if (!Number.isFinite(value)) throw new HarnessError('HIL_ERR_MEASUREMENT', `${this.name}: ${value} is not a finite number`);
    this.done = true;
    const outcome: MeasurementOutcome = this.limit ? (withinLimit(value, this.limit) ? 'pass' : 'fail') : 'unlimited';
    const rec: MeasurementRecord = { name: this.name, unit: this.unit, ...(this.axis !== undefined ? { axis: this.axis } : {}), value, ...(this.limit ? { limit: this.limit } : {}), outcome, ...(note ? { note } : {}) };
    this.sink(rec);
    if (outcome === 'fail') throw measurementFailure([rec]);
    return rec;
  }

  private set(l: Limit): this {
    if (this.limit) throw new HarnessError('HIL_ERR_MEASUREMENT', `${this.name}: a second limit`);
    for (const v of [l.lo, l.hi]) if (v !== undefined && !Number.isFinite(v)) throw new HarnessError('HIL_ERR_MEASUREMENT', `${this.name}: limit ${v} is not a finite number`);
    this.limit = l;
    return this;
  }
}

/** The error a test ends with when measurements are outside their limits: every one of them, with both numbers. */
export function measurementFailure(recs: readonly MeasurementRecord[]): HarnessError {
  const text = recs.map((r) => `${r.name}${r.axis ? ` ${r.axis}` : ''} = ${fmt(r.value)} ${r.unit}, limit ${limitText(r.limit!)}`).join('; ');
  return new HarnessError('HIL_ERR_MEASUREMENT_LIMIT', `measured outside the limit: ${text}`, {
    detail: { measurement: recs[0]!.name, value: recs[0]!.value, unit: recs[0]!.unit },
  });
}

/** Where measurements of the running test go (set by harness/evidence-setup.ts). */
export interface MeasurementSink {
  add(m: MeasurementRecord): void;
}

const active = new Set<MeasurementSink>();

/** Enter and leave a test (harness/evidence-setup.ts). */
export function enterMeasuredTest(s: MeasurementSink): void {
  active.add(s);
}
export function leaveMeasuredTest(s: MeasurementSink): void {
  active.delete(s);
}

/**
 * Declare a measurement of the running test. A test that runs concurrently with others in its file
 * cannot be told apart here: it passes its own sink (the `measured` fixture value).
 */
export function measure(name: string, unit: string, opts: { axis?: string; sink?: MeasurementSink } = {}): Measurement {
  let sink = opts.sink;
  if (!sink) {
    // Collection turned off (HIL_EVIDENCE=0, harness/evidence-setup.ts): the limit is still checked, the
    // value goes nowhere.
    if (active.size === 0 && process.env.HIL_EVIDENCE === '0') return new Measurement(name, unit, opts.axis, () => undefined);
    if (active.size !== 1) {
      throw new HarnessError('HIL_ERR_MEASUREMENT', active.size === 0 ? `measure(${name}) outside a conformance test` : `measure(${name}) while ${active.size} tests run concurrently: pass the test's sink`);
    }
    sink = [...active][0]!;
  }
  const s = sink;
  return new Measurement(name, unit, opts.axis, (m) => s.add(m));
}
