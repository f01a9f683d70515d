// The run's measurements, merged from what each test contributed (harness/evidence.ts RunSamples and
// its measurements), so a run split into shards and merged (`hil merge`) measures the same as the run
// in one piece. The names are the same on every target; a limit is present where the configuration
// (or the documents) give one.
//
//   cycle_lateness_p50 / _p99 / _max  us   cycle_jitter_ns of the cycles the run read (motion tests'
//                                          windows), limit max_cycle_lateness_ns (configured)
//   cycle_overruns                     cycles  later than max_cycle_lateness_ns
//   cycles_observed                    cycles  how many cycles the lateness figures are over
//   control_round_trip_p50 / _p99      ms   renew round trips
//   home_duration_max                  ms   the longest Home, limit 60 s (documented)
//   upload_admission_max_body          ms   the maximum-size prepare_trajectory body, sent to answered
//   telemetry_dropped / telemetry_gaps records  over the windows read; gaps limit 0 (documented)
//   evidence_collection               ms   what collecting the above cost the run (the harness's own figure)
//
// A run measurement outside its limit does not decide the verdict (no test failed for it: the tests'
// own measurements do that); harness/report/verdict.ts states it as a note.

import { GAPS_LIMIT, HOME_LIMIT, type TestEvidence } from '../evidence.ts';
import { withinLimit, type Limit, type MeasurementRecord } from '../measure.ts';
import { histMerge, histQuantile, newHist, type LogHist } from '../motion.ts';
import type { RunMeasurements } from './run-types.ts';


export function runMeasurements(tests: readonly { evidence?: TestEvidence }[]): RunMeasurements {
  const late = newHist(1000);
  const renew = newHist(0.001);
  let limitNs: number | undefined;
  let overruns: number | undefined;
  let dropped = 0;
  let gaps = 0;
  let windows = 0;
  let home: number | undefined;
  let upload: number | undefined;
  let cost = 0;
  for (const t of tests) {
    const e = t.evidence;
    if (!e) continue;
    const s = e.samples;
    if (s?.lateness) {
      histMerge(late, s.lateness as LogHist);
      windows++;
    }
    if (s?.renew_ms) histMerge(renew, s.renew_ms as LogHist);
    if (s?.lateness_limit_ns !== undefined) limitNs = s.lateness_limit_ns;
    if (s?.overruns !== undefined) overruns = (overruns ?? 0) + s.overruns;
    dropped += s?.telemetry_dropped ?? 0;
    cost += s?.evidence_ms ?? 0;
    gaps += s?.telemetry_gaps ?? 0;
    for (const m of e.measurements) {
      if (m.name === 'home_duration') home = Math.max(home ?? 0, m.value);
      if (m.name === 'upload_admission') upload = Math.max(upload ?? 0, m.value);
    }
  }
  const out: MeasurementRecord[] = [];
  const add = (name: string, unit: string, value: number, limit?: Limit, note?: string): void => {
    if (!Number.isFinite(value)) return;
    out.push({ name, unit, value, ...(limit ? { limit } : {}), outcome: limit ? (withinLimit(value, limit) ? 'pass' : 'fail') : 'unlimited', ...(note ? { note } : {}) });
  };
  const lateLimit: Limit | undefined = limitNs !== undefined ? { kind: 'at_most', hi: limitNs / 1000, source: 'configured', ref: 'max_cycle_lateness_ns' } : undefined;
  const us = (ns: number): number => Math.round(ns / 10) / 100;
  if (late.count) {
    const over = `over ${late.count} cycles of ${windows} motion test windows`;
    add('cycle_lateness_p50', 'us', us(histQuantile(late, 0.5)), lateLimit, over);
    add('cycle_lateness_p99', 'us', us(histQuantile(late, 0.99)), lateLimit, over);
    add('cycle_lateness_max', 'us', us(late.max!), lateLimit, over);
    if (overruns !== undefined) add('cycle_overruns', 'cycles', overruns, undefined, `cycles later than max_cycle_lateness_ns, ${over}`);
    add('cycles_observed', 'cycles', late.count);
  }
  if (renew.count) {
    const note = `over ${renew.count} renew requests`;
    add('control_round_trip_p50', 'ms', round3(histQuantile(renew, 0.5)), undefined, note);
    add('control_round_trip_p99', 'ms', round3(histQuantile(renew, 0.99)), undefined, note);
  }
  if (home !== undefined) add('home_duration_max', 'ms', home, HOME_LIMIT);
  if (upload !== undefined) add('upload_admission_max_body', 'ms', upload);
  if (windows) {
    add('telemetry_dropped', 'records', dropped);
    add('telemetry_gaps', 'records', gaps, GAPS_LIMIT);
  }
  if (cost > 0) add('evidence_collection', 'ms', Math.round(cost), undefined, 'wall time the harness spent reading telemetry windows for measurements, summed over the tests (they run in parallel)');
  const rm: RunMeasurements = { measurements: out };
  if (late.count) {
    rm.lateness_histogram = Object.keys(late.buckets)
      .map(Number)
      .sort((a, b) => a - b)
      .map((k) => ({ upper_us: k === 0 ? 1 : round3(10 ** (k / 20)), count: late.buckets[k]! }));
    if (limitNs !== undefined) rm.lateness_limit_us = limitNs / 1000;
  }
  return rm;
}

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

export { measurementText } from '../measure.ts';
