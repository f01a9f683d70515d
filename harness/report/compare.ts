// Two runs side by side (`hil compare A.json B.json`, `hil report --baseline FILE`): what failed that
// passed before, what was fixed, tests added and removed, documented items gained and lost, and the
// measurements that drifted beyond a stated tolerance (the wpt.fyi habit of comparing runs, with the
// OpenHTF measurements this project records). A is the baseline, B the run under review.

import type { MeasurementRecord } from '../measure.ts';
import type { RunRecord, RunTest } from './run-types.ts';
import { verdictOf, type Verdict } from './verdict.ts';

export interface Tolerance {
  /** A measurement drifted when it changed by more than this fraction of the larger of the two values... */
  relative: number;
  /** ...and by more than this fraction of its limit (a Home 400 ms slower is no drift against 60 s)... */
  ofLimit: number;
  /** ...or, without a limit, by more than this much in its unit (noise floors of wall time on a loaded machine). */
  floor: Readonly<Record<string, number>>;
}

export const DEFAULT_TOLERANCE: Tolerance = { relative: 0.5, ofLimit: 0.1, floor: { ms: 10, us: 100, cycles: 10 } };

function limitSize(m: MeasurementRecord): number | undefined {
  const l = m.limit;
  if (!l) return undefined;
  const v = l.kind === 'within' ? l.hi! - l.lo! : Math.abs(l.kind === 'at_most' ? l.hi! : l.lo!);
  return v > 0 ? v : undefined;
}

export interface Drift {
  /** "file > test" for a test's measurement, "(run)" for the run's own. */
  test: string;
  name: string;
  axis?: string;
  unit: string;
  before: number;
  after: number;
  /** The outcome moved (within its limit before, outside now, or back). */
  outcome?: { before: MeasurementRecord['outcome']; after: MeasurementRecord['outcome'] };
}

export interface Comparison {
  verdict: { before: Verdict; after: Verdict };
  /** Why B's verdict is not PASS (verdict.ts), the soak's broken limit included. */
  reasons?: string[];
  /** The nightly soak on each side, in a line (absent when neither run had one). */
  soak?: { before: string; after: string };
  /** Failed or errored in B (and not expected), passed or absent-from-failures in A. */
  newFailures: string[];
  /** Failed or errored in A, passed in B. */
  fixed: string[];
  /** Failing in both. */
  stillFailing: string[];
  added: string[];
  removed: string[];
  coverage: { before: number; after: number; documented: { before: number; after: number }; gained: string[]; lost: string[] };
  drifts: Drift[];
  tolerance: Tolerance;
}

const key = (t: Pick<RunTest, 'file' | 'fullName'>): string => `${t.file} > ${t.fullName}`;
const failing = (t: RunTest): boolean => (t.state === 'failed' || t.state === 'errored') && !t.expected_failure;

export function compareRuns(a: RunRecord, b: RunRecord, tolerance: Tolerance = DEFAULT_TOLERANCE): Comparison {
  const ta = new Map(a.tests.map((t) => [key(t), t]));
  const tb = new Map(b.tests.map((t) => [key(t), t]));
  const sorted = (xs: Iterable<string>): string[] => [...xs].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  const newFailures: string[] = [];
  const fixed: string[] = [];
  const stillFailing: string[] = [];
  for (const [k, t] of tb) {
    const before = ta.get(k);
    if (failing(t)) (before && failing(before) ? stillFailing : newFailures).push(k);
    else if (t.state === 'passed' && before && failing(before)) fixed.push(k);
  }
  const verified = (r: RunRecord): Set<string> => new Set(r.coverage.filter((c) => c.family !== 'profile' && c.status === 'covered' && c.outcome === 'passed').map((c) => c.id));
  const va = verified(a);
  const vb = verified(b);
  const drifts: Drift[] = [];
  const within = (x: number, y: number, m: MeasurementRecord): boolean => {
    const d = Math.abs(x - y);
    const size = limitSize(m);
    return d <= tolerance.relative * Math.max(Math.abs(x), Math.abs(y)) || d <= (size !== undefined ? tolerance.ofLimit * size : (tolerance.floor[m.unit] ?? 0));
  };
  const compareSet = (test: string, ma: readonly MeasurementRecord[], mb: readonly MeasurementRecord[]): void => {
    const byKey = new Map(ma.map((m) => [`${m.name}\u0000${m.axis ?? ''}`, m]));
    for (const m of mb) {
      const p = byKey.get(`${m.name}\u0000${m.axis ?? ''}`);
      if (!p) continue;
      const moved = p.outcome !== m.outcome && (p.outcome === 'fail' || m.outcome === 'fail');
      if (!moved && within(p.value, m.value, m)) continue;
      drifts.push({ test, name: m.name, ...(m.axis ? { axis: m.axis } : {}), unit: m.unit, before: p.value, after: m.value, ...(moved ? { outcome: { before: p.outcome, after: m.outcome } } : {}) });
    }
  };
  for (const [k, t] of tb) {
    const before = ta.get(k);
    if (before?.evidence && t.evidence) compareSet(k, before.evidence.measurements, t.evidence.measurements);
  }
  compareSet('(run)', a.run_measurements?.measurements ?? [], b.run_measurements?.measurements ?? []);
  const docs = (r: RunRecord): number => r.coverage.filter((c) => c.family !== 'profile').length;
  const verdictB = verdictOf(b);
  return {
    verdict: { before: verdictOf(a).verdict, after: verdictB.verdict },
    ...(verdictB.reasons.length ? { reasons: verdictB.reasons } : {}),
    ...(a.soak || b.soak ? { soak: { before: soakLine(a.soak), after: soakLine(b.soak) } } : {}),
    newFailures: sorted(newFailures),
    fixed: sorted(fixed),
    stillFailing: sorted(stillFailing),
    added: sorted([...tb.keys()].filter((k) => !ta.has(k))),
    removed: sorted([...ta.keys()].filter((k) => !tb.has(k))),
    coverage: { before: va.size, after: vb.size, documented: { before: docs(a), after: docs(b) }, gained: sorted([...vb].filter((i) => !va.has(i))), lost: sorted([...va].filter((i) => !vb.has(i))) },
    drifts: drifts.sort((x, y) => Number(Boolean(y.outcome)) - Number(Boolean(x.outcome)) || (x.test < y.test ? -1 : x.test > y.test ? 1 : 0)),
    tolerance,
  };
}

/** A soak in a line: within its limits, or which it broke with the first refusal. */
function soakLine(s: RunRecord['soak']): string {
  if (!s) return 'none';
  const out = s.measurements.filter((m) => m.outcome === 'fail');
  if (!out.length) return `${s.seconds} s, every limit kept`;
  const first = s.first_refusal ? `, first refusal at ${s.first_refusal.at_s} s: ${s.first_refusal.status} ${s.first_refusal.error}` : '';
  return `${s.seconds} s, ${out.map((m) => `${m.name} = ${m.value} ${m.unit} OUTSIDE THE LIMIT`).join(', ')}${first}${s.host_too_slow ? ' (the host\'s doing: HIL_ERR_HOST_TOO_SLOW)' : ''}`;
}

/** Whether B regressed against A: a new failure, or a measurement that moved outside its limit. */
export function regressed(c: Comparison): boolean {
  return c.newFailures.length > 0 || c.drifts.some((d) => d.outcome?.after === 'fail') || (c.verdict.after === 'FAIL' && c.verdict.before !== 'FAIL');
}

/** The comparison as text (the `hil compare` output). */
export function comparisonText(c: Comparison): string {
  const out: string[] = [];
  const list = (title: string, xs: string[], max = 50): void => {
    out.push(`${title}: ${xs.length}`);
    for (const x of xs.slice(0, max)) out.push(`  ${x}`);
    if (xs.length > max) out.push(`  ... and ${xs.length - max} more`);
  };
  out.push(`verdict: ${c.verdict.before} -> ${c.verdict.after}`);
  for (const r of c.reasons ?? []) out.push(`  - ${r}`);
  if (c.soak) out.push(`soak: ${c.soak.before} -> ${c.soak.after}`);
  list('new failures', c.newFailures);
  list('fixed', c.fixed);
  list('still failing', c.stillFailing, 10);
  list('tests added', c.added, 20);
  list('tests removed', c.removed, 20);
  const cv = c.coverage;
  out.push(`coverage: ${cv.before} of ${cv.documented.before} -> ${cv.after} of ${cv.documented.after} documented items verified (${cv.gained.length} gained, ${cv.lost.length} lost)`);
  for (const i of cv.lost.slice(0, 30)) out.push(`  lost  ${i}`);
  for (const i of cv.gained.slice(0, 30)) out.push(`  gained ${i}`);
  const floors = Object.entries(c.tolerance.floor).map(([u, v]) => `${v} ${u}`).join(', ');
  out.push(`measurements drifted (across their limit, or by more than ${Math.round(c.tolerance.relative * 100)}% and more than ${Math.round(c.tolerance.ofLimit * 100)}% of the limit; without a limit more than ${floors || 'nothing'}): ${c.drifts.length}`);
  for (const d of c.drifts.slice(0, 60)) {
    const o = d.outcome ? `  [${d.outcome.before} -> ${d.outcome.after}]` : '';
    out.push(`  ${d.test}: ${d.name}${d.axis ? ` ${d.axis}` : ''} ${d.before} -> ${d.after} ${d.unit}${o}`);
  }
  return out.join('\n');
}
