// The nightly history (`hil nightly` keeps it, `hil history DIR` prints it, the night's report shows it):
// one line per night in DIR/history.jsonl with what identifies the night's code and configuration (git
// revision, the machine, configuration and deployment digests, target and driver), each test's outcome
// and each run and soak measurement. From it:
//
// - trends: a run or soak measurement night by night with its limit;
// - flaky tests: a test whose outcome (passed against failed or errored; a skip says nothing) changed from
//   one night to the next while none of the night's identity changed: nothing we know of explains it;
// - first failing night: for each test failing on the latest night, the first night of its current run of
//   failures and what changed from the night before it (revision, digests, target, driver, node, host).
//
// The file is rebuilt from the night directories when a night is missing from it (a night written before
// the history existed, or a lost file): the run records stay the authority.

import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Limit, MeasurementRecord } from './measure.ts';
import { limitText } from './measure.ts';
import type { RunRecord, TestState } from './report/run-types.ts';
import { verdictOf } from './report/verdict.ts';
import { esc } from './report/format.ts';
import { trendPlot } from './report/plots.ts';

export const HISTORY_FILE = 'history.jsonl';
export const NIGHT_SCHEMA = 'cell-hil.night.v1';
/** A night directory's name: the UTC date, with -2, -3 ... for a second night run the same day. */
export const NIGHT_DIR = /^\d{4}-\d{2}-\d{2}(-\d+)?$/;

/** What a night ran: the code, the machine and its configuration, the target. */
export interface NightIdentity {
  git_revision: string;
  package_version: string;
  machine_sha256: string;
  configuration_sha256: string;
  deployment_sha256: string;
  target: string;
  driver: string;
  node: string;
  hostname: string;
}

/** The fields whose change explains a change of outcome (a flaky test is one whose outcome changed without them). */
export const EXPLAINING: ReadonlyArray<keyof NightIdentity> = ['git_revision', 'machine_sha256', 'configuration_sha256', 'deployment_sha256', 'target', 'driver'];

export interface NightMeasurement {
  value: number;
  unit: string;
  limit?: Limit;
  outcome: MeasurementRecord['outcome'];
}

export interface NightEntry {
  schema: typeof NIGHT_SCHEMA;
  night: string;
  started_at: string;
  verdict: string;
  identity: NightIdentity;
  /** "file > full name" -> state. */
  tests: Record<string, TestState>;
  /** Run measurements by name (axis appended for per-axis ones). */
  measurements: Record<string, NightMeasurement>;
  soak?: Record<string, NightMeasurement>;
}

const keyOf = (m: MeasurementRecord) => (m.axis ? `${m.name} ${m.axis}` : m.name);
const figures = (ms: readonly MeasurementRecord[]) =>
  Object.fromEntries(ms.map((m) => [keyOf(m), { value: m.value, unit: m.unit, ...(m.limit ? { limit: m.limit } : {}), outcome: m.outcome }])) as Record<string, NightMeasurement>;

export function nightEntry(night: string, run: RunRecord, soak?: { measurements: MeasurementRecord[] }): NightEntry {
  const e = run.environment;
  return {
    schema: NIGHT_SCHEMA,
    night,
    started_at: run.started_at,
    verdict: verdictOf(run).verdict,
    identity: {
      git_revision: e.git_revision,
      package_version: e.package_version,
      machine_sha256: e.machine_sha256,
      configuration_sha256: e.configuration_sha256,
      deployment_sha256: e.deployment_sha256,
      target: run.target.name,
      driver: run.target.driver,
      node: e.node,
      hostname: e.hostname,
    },
    tests: Object.fromEntries(run.tests.filter((t) => t.file !== '').map((t) => [`${t.file} > ${t.fullName}`, t.state])),
    measurements: figures(run.run_measurements?.measurements ?? []),
    // The night's soak: given, or as the nightly wrote it into the run record.
    ...((soak ?? run.soak) ? { soak: figures((soak ?? run.soak)!.measurements) } : {}),
  };
}

/** The history's nights in order; a line that is not a night entry is reported and left out. */
export function readHistory(dir: string, warnings: string[] = []): NightEntry[] {
  const file = join(dir, HISTORY_FILE);
  if (!existsSync(file)) return [];
  const out = new Map<string, NightEntry>();
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (!line.trim()) return;
      try {
        const e = JSON.parse(line) as NightEntry;
        if (e.schema !== NIGHT_SCHEMA || typeof e.night !== 'string' || typeof e.tests !== 'object') throw new Error('not a night entry');
        out.set(e.night, e);
      } catch (err) {
        warnings.push(`${file} line ${i + 1}: ${(err as Error).message}`);
      }
    });
  return [...out.values()].sort((a, b) => compareNights(a.night, b.night));
}

/** Night directory names in order (2026-11-28 < 2026-11-28-2 < 2026-11-29). */
export function compareNights(a: string, b: string): number {
  const [da, ka] = [a.slice(0, 10), Number(a.slice(11) || 1)];
  const [db, kb] = [b.slice(0, 10), Number(b.slice(11) || 1)];
  return da < db ? -1 : da > db ? 1 : ka - kb;
}

/** Write the history with this night in it (replacing an entry of the same night), nights in order. */
export function recordNight(dir: string, entry: NightEntry, warnings: string[] = []): NightEntry[] {
  const all = [...readHistory(dir, warnings).filter((e) => e.night !== entry.night), entry].sort((a, b) => compareNights(a.night, b.night));
  writeHistory(dir, all);
  return all;
}

function writeHistory(dir: string, entries: readonly NightEntry[]): void {
  const file = join(dir, HISTORY_FILE);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, entries.map((e) => JSON.stringify(e)).join('\n') + (entries.length ? '\n' : ''));
  renameSync(tmp, file);
}

/**
 * Nights in DIR that have a run record but no history line get one, read from their run.json and soak.json
 * (readRun reads a record as hil compare does). Returns the whole history.
 */
export async function backfillHistory(dir: string, readRun: (file: string) => Promise<RunRecord>, warnings: string[] = [], write = true): Promise<NightEntry[]> {
  const have = readHistory(dir, warnings);
  const known = new Set(have.map((e) => e.night));
  const missing = existsSync(dir) ? readdirSync(dir).filter((d) => NIGHT_DIR.test(d) && !known.has(d) && existsSync(join(dir, d, 'run', 'run.json'))) : [];
  if (!missing.length) return have;
  const added: NightEntry[] = [];
  for (const night of missing) {
    try {
      const soakFile = join(dir, night, 'soak.json');
      const soak = existsSync(soakFile) ? (JSON.parse(readFileSync(soakFile, 'utf8')) as { measurements: MeasurementRecord[] }) : undefined;
      added.push(nightEntry(night, await readRun(join(dir, night, 'run', 'run.json')), soak));
    } catch (e) {
      warnings.push(`${night}: not added to the history: ${(e as Error).message}`);
    }
  }
  const all = [...have, ...added].sort((a, b) => compareNights(a.night, b.night));
  if (write) writeHistory(dir, all);
  return all;
}

/** Nights a nightly report's History section covers. */
export const HISTORY_NIGHTS = 14;

/**
 * hil nightly's part: the night into DIR/history.jsonl (earlier nights missing from it first), the
 * analysis as DIR/<night>/history.txt and as a report section, and Allure's own report of the night
 * (allurerc.mjs, its history in DIR/allure-history.jsonl) in DIR/<night>/allure/index.html.
 */
export async function nightlyHistory(o: { out: string; dated: string; night: string; run: RunRecord; soak?: { measurements: MeasurementRecord[] }; readRun: (file: string) => Promise<RunRecord>; log: (s: string) => void }): Promise<{ sections: Array<{ id: string; label: string; html: string }>; analysis: HistoryAnalysis }> {
  const warnings: string[] = [];
  await backfillHistory(o.out, o.readRun, warnings);
  const entries = recordNight(o.out, nightEntry(o.night, o.run, o.soak), warnings);
  const analysis = analyse(entries, HISTORY_NIGHTS);
  writeFileSync(join(o.dated, 'history.txt'), historyText(analysis));
  for (const w of warnings) o.log(`nightly: history: ${w}\n`);
  o.log(`nightly: history of ${entries.length} night${entries.length === 1 ? '' : 's'} in ${join(o.out, HISTORY_FILE)}: ${analysis.failing.length} failing (first failing nights in history.txt), ${analysis.flaky.length} flaky\n`);
  try {
    const { generateAllureReport } = await import('./report/allure-report.ts');
    const index = await generateAllureReport({ results: [join(o.dated, 'run', 'allure-results')], out: join(o.dated, 'allure'), historyPath: join(o.out, 'allure-history.jsonl'), reportName: `Welding cell HIL, night ${o.night}` });
    o.log(`nightly: Allure report ${index} (opens from disk; history in ${join(o.out, 'allure-history.jsonl')})\n`);
  } catch (e) {
    o.log(`nightly: Allure report not written: ${(e as Error).message}\n`);
  }
  return { sections: [{ id: 'history', label: 'History', html: historySection(analysis) }], analysis };
}

// ---------------------------------------------------------------------------------------------
// Analysis

export interface TrendPoint {
  night: string;
  value?: number;
  outcome?: MeasurementRecord['outcome'];
}

export interface Trend {
  /** run: a run measurement; soak: the nightly soak's. */
  source: 'run' | 'soak';
  name: string;
  unit: string;
  limit?: Limit;
  points: TrendPoint[];
}

export interface FlakyTest {
  test: string;
  outcomes: Array<{ night: string; state: TestState | 'absent' }>;
  /** Nights whose outcome differs from the night before with the same identity. */
  flips: string[];
}

export interface Failing {
  test: string;
  state: TestState;
  /** The first night of the current run of failures (within the nights kept). */
  since: string;
  nights: number;
  /** The night before it, when kept; undefined when the test failed on every night kept. */
  before?: string;
  /** What changed from the night before to the first failing night ("git_revision a -> b"). */
  changed: string[];
}

export interface HistoryAnalysis {
  nights: NightEntry[];
  trends: Trend[];
  flaky: FlakyTest[];
  failing: Failing[];
}

const bad = (s: TestState | undefined) => s === 'failed' || s === 'errored';
const decisive = (s: TestState | undefined): s is TestState => s === 'passed' || bad(s);
const sameIdentity = (a: NightIdentity, b: NightIdentity) => EXPLAINING.every((k) => a[k] === b[k]);

/** What changed between two nights' identities, one "field before -> after" per change (all fields, not only EXPLAINING). */
export function identityChanges(a: NightIdentity, b: NightIdentity): string[] {
  return (Object.keys(b) as Array<keyof NightIdentity>).filter((k) => a[k] !== b[k]).map((k) => `${k} ${a[k] || '(none)'} -> ${b[k] || '(none)'}`);
}

export function analyse(all: readonly NightEntry[], lastN = 14): HistoryAnalysis {
  const nights = all.slice(-lastN);
  const trends: Trend[] = [];
  for (const source of ['run', 'soak'] as const) {
    const names = [...new Set(nights.flatMap((n) => Object.keys((source === 'run' ? n.measurements : n.soak) ?? {})))].sort();
    for (const name of names) {
      const at = (n: NightEntry) => (source === 'run' ? n.measurements : n.soak)?.[name];
      const latest = [...nights].reverse().map(at).find((m) => m !== undefined)!;
      trends.push({
        source,
        name,
        unit: latest.unit,
        ...(latest.limit ? { limit: latest.limit } : {}),
        points: nights.map((n) => {
          const m = at(n);
          return m ? { night: n.night, value: m.value, outcome: m.outcome } : { night: n.night };
        }),
      });
    }
  }
  const tests = [...new Set(nights.flatMap((n) => Object.keys(n.tests)))].sort();
  const flaky: FlakyTest[] = [];
  for (const test of tests) {
    const flips: string[] = [];
    let prev: { state: TestState; identity: NightIdentity } | undefined;
    for (const n of nights) {
      const s = n.tests[test];
      if (!decisive(s)) continue;
      if (prev && bad(prev.state) !== bad(s) && sameIdentity(prev.identity, n.identity)) flips.push(n.night);
      prev = { state: s, identity: n.identity };
    }
    if (flips.length) flaky.push({ test, flips, outcomes: nights.map((n) => ({ night: n.night, state: n.tests[test] ?? 'absent' })) });
  }
  const failing: Failing[] = [];
  const last = nights.at(-1);
  if (last) {
    for (const [test, state] of Object.entries(last.tests).sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (!bad(state)) continue;
      let i = nights.length - 1;
      // Back over the nights it failed (or did not run); a pass ends the run of failures.
      let first = i;
      for (; i >= 0; i--) {
        const s = nights[i]!.tests[test];
        if (s === 'passed') break;
        if (bad(s)) first = i;
      }
      const since = nights[first]!;
      const before = first > 0 ? nights[first - 1] : undefined;
      failing.push({
        test,
        state,
        since: since.night,
        nights: nights.slice(first).filter((n) => bad(n.tests[test])).length,
        ...(before ? { before: before.night } : {}),
        changed: before ? identityChanges(before.identity, since.identity) : [],
      });
    }
  }
  return { nights: [...nights], trends, flaky, failing };
}

// ---------------------------------------------------------------------------------------------
// Output

const mark = (s: TestState | 'absent' | undefined) => (s === 'passed' ? 'P' : s === 'failed' ? 'F' : s === 'errored' ? 'E' : s === 'skipped' ? 's' : '.');
const limitValue = (l: Limit | undefined) => (l ? (l.kind === 'at_least' || l.kind === 'equals' ? l.lo : l.hi) : undefined);
const fmt = (v: number | undefined) => (v === undefined ? '-' : Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4))));

/** hil history DIR: the same analysis as text. */
export function historyText(a: HistoryAnalysis): string {
  const out: string[] = [];
  const n = a.nights;
  if (!n.length) return 'no nights in the history yet\n';
  out.push(`nights: ${n.length} (${n[0]!.night} .. ${n.at(-1)!.night})`);
  for (const e of n) out.push(`  ${e.night}  ${e.verdict.padEnd(5)}  git ${e.identity.git_revision.slice(0, 12)}  machine ${e.identity.machine_sha256.slice(0, 12) || '-'}  ${e.identity.target}/${e.identity.driver}  ${Object.keys(e.tests).length} tests`);
  out.push('', `first failing night of the latest failures: ${a.failing.length}`);
  for (const f of a.failing) {
    out.push(`  ${f.test}`, `    ${f.state} since ${f.since} (${f.nights} night${f.nights === 1 ? '' : 's'})${f.before ? `; changed since ${f.before}: ${f.changed.length ? f.changed.join('; ') : 'nothing recorded'}` : '; failing on every night kept'}`);
  }
  out.push('', `flaky (outcome changed while revision, digests, target and driver did not): ${a.flaky.length}`);
  for (const f of a.flaky) out.push(`  FLAKY ${f.test}`, `    ${f.outcomes.map((o) => mark(o.state)).join(' ')}   changed on ${f.flips.join(', ')} with nothing else changed`);
  out.push('', 'trends (one value per night, oldest first; * outside the limit):');
  for (const t of a.trends) {
    const lim = t.limit ? `  limit ${limitText(t.limit)}` : '';
    out.push(`  ${t.source} ${t.name} (${t.unit}): ${t.points.map((p) => `${fmt(p.value)}${p.outcome === 'fail' ? '*' : ''}`).join(' ')}${lim}`);
  }
  return `${out.join('\n')}\n`;
}

/** The nightly report's History section (inserted into the night's report.html). */
export function historySection(a: HistoryAnalysis): string {
  const n = a.nights;
  const head = `<section id="history"><h2>History <span class="count">${n.length} night${n.length === 1 ? '' : 's'}</span></h2>`;
  if (!n.length) return `${head}<p class="muted">No earlier nights.</p></section>`;
  const parts = [head, `<p class="muted">The last ${n.length} nights of this directory (history.jsonl; <code>hil history DIR</code> prints the same). A test is <b>flaky</b> when its outcome changed from one night to the next while the git revision, the machine, configuration and deployment digests, the target and the driver stayed the same.</p>`];
  parts.push(`<table class="grid"><thead><tr><th>Night</th><th>Verdict</th><th>Git revision</th><th>machine_sha256</th><th>configuration_sha256</th><th>Target / driver</th><th>Tests</th></tr></thead><tbody>${n
    .map((e) => `<tr><td>${esc(e.night)}</td><td>${esc(e.verdict)}</td><td><code class="digest">${esc(e.identity.git_revision.slice(0, 12))}</code></td><td><code class="digest">${esc(e.identity.machine_sha256.slice(0, 12))}</code></td><td><code class="digest">${esc(e.identity.configuration_sha256.slice(0, 12))}</code></td><td>${esc(e.identity.target)} / ${esc(e.identity.driver)}</td><td>${Object.keys(e.tests).length}</td></tr>`)
    .join('')}</tbody></table>`);
  parts.push(`<h3>Failing now: first failing night <span class="count">${a.failing.length}</span></h3>`);
  if (a.failing.length) {
    parts.push(`<table class="grid"><thead><tr><th>Test</th><th>First failing night</th><th>Nights failing</th><th>What changed that night</th></tr></thead><tbody>${a.failing
      .map((f) => `<tr class="first-failing"><td>${esc(f.test)}</td><td><b>${esc(f.since)}</b></td><td>${f.nights}</td><td class="small">${f.before ? (f.changed.length ? `since ${esc(f.before)}: ${f.changed.map((c) => esc(c)).join('<br>')}` : `nothing recorded changed since ${esc(f.before)}`) : 'failing on every night kept'}</td></tr>`)
      .join('')}</tbody></table>`);
  } else parts.push('<p class="ok-note">No test failed on the latest night.</p>');
  parts.push(`<h3>Flaky tests <span class="count">${a.flaky.length}</span></h3>`);
  if (a.flaky.length) {
    const cell = (s: TestState | 'absent') => `<td class="hx hx-${s}" title="${esc(s)}">${mark(s)}</td>`;
    parts.push(`<table class="grid"><thead><tr><th>Test</th>${n.map((e) => `<th class="small">${esc(e.night)}</th>`).join('')}<th>Changed with nothing else changed</th></tr></thead><tbody>${a.flaky
      .map((f) => `<tr class="flaky"><td><span class="tag flaky">FLAKY</span> ${esc(f.test)}</td>${f.outcomes.map((o) => cell(o.state)).join('')}<td>${f.flips.map(esc).join(', ')}</td></tr>`)
      .join('')}</tbody></table><p class="muted small">P passed, F failed, E errored, s skipped, . not run.</p>`);
  } else parts.push('<p class="muted">None.</p>');
  parts.push('<h3>Trends</h3><div class="plots">');
  for (const t of a.trends) {
    const lv = limitValue(t.limit);
    const plot = trendPlot(
      t.points.map((p) => ({ label: p.night, value: p.value, outside: p.outcome === 'fail' })),
      `${t.source === 'soak' ? 'soak: ' : ''}${t.name}`,
      t.unit,
      lv !== undefined ? { value: lv, label: `limit ${limitText(t.limit!)}` } : undefined,
    );
    if (plot) parts.push(plot);
  }
  parts.push('</div></section>');
  return parts.join('\n');
}
