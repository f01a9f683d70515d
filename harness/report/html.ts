// The offline qualification report (`hil report`): one self-contained HTML file rendered from
// reports/run.json (the authority for what ran; read by run-reader.ts) and reports/allure-results/ (which
// only enriches a test with its steps and attachments; allure-results.ts). A reviewer prints and signs it,
// so it must open with no network (inline CSS and a little inline JS from assets.ts, images as data URIs,
// a Content-Security-Policy that forbids fetching) and must render the same bytes for the same input.
//
// Like an OpenHTF output sink, the report never aborts over bad enrichment: malformed or missing Allure
// input, odd Describe data or a run.json with missing fields become warnings shown in the report and
// returned to the caller. Only a missing or unreadable run.json (nothing to report) or a failed write
// throws, as a ReportError with a stable code. Every count it shows comes from verdict.ts, the one place
// the CLI exit status and the reporter's summary count from too.

import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CoverageEntry, RunRecord, RunTest } from './run-types.ts';
import { countTests, verdictOf, type RunVerdict, type VerdictCounts } from './verdict.ts';
import { ReportError, readRunRecord } from './run-reader.ts';
import { attachmentsOf, IMAGE_TYPES, loadAllure, matchAllure, preloadAttachments, TEXT_INLINE_MAX, type AllureAttachment, type AllureResult, type AllureStep, type LoadedAttachment } from './allure-results.ts';
import { cmp, cssToken, errText, esc, fmtBytes, fmtDuration, fmtTime, isRecord, jsonBlock, plural, scalar, sortTests, stateBadge } from './format.ts';
import { barChart, csvPlot, legend, stackBar } from './svg.ts';
import { latenessHistogram, motionPlot } from './plots.ts';
import { limitText, type MeasurementRecord } from '../measure.ts';
import type { Transcript } from '../evidence.ts';
import { compareRuns, DEFAULT_TOLERANCE, type Comparison, type Tolerance } from './compare.ts';
import { CSS, JS } from './assets.ts';
import { aroundFailure, condense, type TranscriptRow } from './transcript.ts';
import { notSelected, selectionText } from './selection.ts';

export { ReportError, type ReportErrorCode } from './run-reader.ts';

export const DEFAULT_RUN_JSON = 'reports/run.json';
export const DEFAULT_ALLURE_DIR = 'reports/allure-results';
export const DEFAULT_HTML_OUT = 'reports/html/index.html';

export interface HtmlReportOptions {
  /** Default reports/run.json (relative paths resolve against the working directory). */
  runJson?: string;
  /** Default reports/allure-results. */
  allureDir?: string;
  /** Default reports/html/index.html. */
  outFile?: string;
  /** Another run's run.json: the report then says what changed since (hil report --baseline). */
  baseline?: string;
  tolerance?: Tolerance;
  /** Sections rendered elsewhere (the nightly history, harness/history.ts), placed after the comparison and linked from the nav. */
  sections?: Array<{ id: string; label: string; html: string }>;
}

export type { Verdict } from './verdict.ts';

// Budget for everything inlined (images, texts) so the page stays printable and small.
const INLINE_TOTAL_MAX = 12 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Entry point

export async function writeHtmlReport(opts: HtmlReportOptions = {}): Promise<{ outFile: string; warnings: string[] }> {
  const runJson = path.resolve(opts.runJson ?? DEFAULT_RUN_JSON);
  const allureDir = path.resolve(opts.allureDir ?? DEFAULT_ALLURE_DIR);
  const outFile = path.resolve(opts.outFile ?? DEFAULT_HTML_OUT);
  const warnings: string[] = [];

  const { run, sha256 } = await readRunRecord(runJson, warnings);
  let comparison: Comparison | undefined;
  if (opts.baseline) {
    const base = await readRunRecord(path.resolve(opts.baseline), []);
    comparison = compareRuns(base.run, run, opts.tolerance ?? DEFAULT_TOLERANCE);
  }
  const allure = await loadAllure(allureDir, warnings);
  const matches = matchAllure(run.tests, allure.results, warnings);
  const ctx: RenderContext = {
    run,
    runJsonSha256: sha256,
    allureEnv: allure.environment,
    matches,
    warnings,
    attachmentCache: new Map(),
    ...(comparison ? { comparison, baselineFile: path.resolve(opts.baseline!) } : {}),
    sections: opts.sections ?? [],
  };
  // Attachments are read before rendering so rendering itself stays synchronous and pure.
  const { failures, others } = evidenceTests(ctx);
  const results = (ts: RunTest[]) => ts.map((t) => matches.get(t)).filter((r): r is AllureResult => r !== undefined);
  await preloadAttachments(allureDir, { failures: results(failures), others: results(others) }, { left: INLINE_TOTAL_MAX }, ctx.attachmentCache, warnings);
  const html = renderReport(ctx);

  try {
    await mkdir(path.dirname(outFile), { recursive: true });
    // Written to a temporary name and renamed, so a crash never leaves half a report.
    const tmp = `${outFile}.${process.pid}.tmp`;
    await writeFile(tmp, html, 'utf8');
    await rename(tmp, outFile);
  } catch (err) {
    throw new ReportError('HIL_REPORT_WRITE_FAILED', `cannot write report ${outFile}: ${errText(err)}`, { cause: err });
  }
  return { outFile, warnings };
}

/** Counts for display: the verdict's own (expected failures apart) plus the sum of test durations. */
type Counts = VerdictCounts & { duration_ms: number };

function countsOf(tests: readonly RunTest[]): Counts {
  return { ...countTests(tests), duration_ms: tests.reduce((n, t) => n + t.duration_ms, 0) };
}

interface RenderContext {
  run: RunRecord;
  runJsonSha256: string;
  allureEnv: [string, string][];
  matches: Map<RunTest, AllureResult>;
  warnings: string[];
  attachmentCache: Map<string, LoadedAttachment>;
  comparison?: Comparison;
  baselineFile?: string;
  sections: Array<{ id: string; label: string; html: string }>;
}

function evidenceTests(ctx: RenderContext): { failures: RunTest[]; others: RunTest[] } {
  const failures = sortTests(ctx.run.tests.filter((t) => t.state === 'failed' || t.state === 'errored'), true);
  const others = sortTests(
    ctx.run.tests.filter((t) => {
      if (t.state === 'failed' || t.state === 'errored') return false;
      const r = ctx.matches.get(t);
      return !!r && attachmentsOf(r).some((a) => IMAGE_TYPES.has(a.type) || a.type === 'text/csv');
    }),
    false,
  );
  return { failures, others };
}

// ---------------------------------------------------------------------------------------------
// Rendering

function renderReport(ctx: RenderContext): string {
  const { run } = ctx;
  const counts = countsOf(run.tests);
  const v = verdictOf(run);
  const verdict = v.verdict;
  // Sections render first so that warnings they add (Describe cross-checks) reach the notes section.
  const body = [
    renderHeader(ctx, v, counts),
    renderEnvironment(ctx),
    renderSummary(ctx, counts),
    renderFailures(ctx),
    renderMeasurements(ctx),
    renderModel(ctx),
    renderMatrix(ctx),
    renderTests(ctx),
    renderGate(ctx),
  ];
  const notes = renderNotes(ctx);
  const title = `Qualification report: ${v.headline} on ${run.target.name} (${run.started_at || 'time not recorded'})`;
  return [
    '<!DOCTYPE html>',
    '<html lang="en"><head><meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="generator" content="cell-hil harness/report/html.ts">',
    `<title>${esc(title)}</title>`,
    `<style>${CSS}</style></head><body>`,
    renderNav(ctx),
    '<main>',
    ...body.slice(0, 1),
    notes,
    renderComparison(ctx),
    ...ctx.sections.map((x) => x.html),
    ...body.slice(1),
    `<footer>Rendered from run.json sha256 <code>${esc(ctx.runJsonSha256)}</code> and ${ctx.matches.size} Allure result${plural(ctx.matches.size)}. The same input renders the same file.</footer>`,
    '</main>',
    `<script>${JS}</script>`,
    '</body></html>',
    '',
  ].join('\n');
}

function renderNav(ctx: RenderContext): string {
  const items: [string, string][] = [
    ['top', 'Verdict'],
    ...ctx.sections.map((x) => [x.id, x.label] as [string, string]),
    ['environment', 'Environment'],
    ['summary', 'Summary'],
    ['measurements', 'Measurements'],
    ['failures', 'Failures'],
    // The model section is there only when hil fuzz attached its figures: no link to nothing.
    ...(ctx.run.model?.fuzz ? ([['model', 'Model']] as [string, string][]) : []),
    ['matrix', 'Traceability'],
    ['tests', 'All tests'],
    ['gate', 'Gate'],
  ];
  return `<nav class="noprint">${items.map(([id, label]) => `<a href="#${id}">${label}</a>`).join('')}</nav>`;
}

/**
 * How long the run took. A merged run says how long each shard ran and their sum beside the span from the
 * first start to the last finish, which on machines taking turns (or a shard run again) says little alone.
 */
function durationCell(run: RunRecord, span: number): string {
  const times = (run.shards ?? []).map((s) => s.duration_ms);
  if (!times.length || times.some((t) => t === undefined)) return esc(fmtDuration(span));
  const each = (times as number[]).map((t) => fmtDuration(t)).join(' + ');
  const sum = (times as number[]).reduce((a, t) => a + t, 0);
  return `${esc(fmtDuration(sum))} in ${times.length} shards (${esc(each)}); ${esc(fmtDuration(span))} from the first start to the last finish`;
}

function renderHeader(ctx: RenderContext, v: RunVerdict, counts: Counts): string {
  const { run } = ctx;
  const verdict = v.verdict;
  const start = Date.parse(run.started_at);
  const end = Date.parse(run.finished_at);
  const duration = Number.isFinite(start) && Number.isFinite(end) && end >= start ? end - start : run.summary.duration_ms;
  const verdictNote =
    verdict === 'PASS'
      ? 'Every test that ran passed or is a listed expected failure, none skipped without a reason, and the traceability gate passed. The verdict speaks only for the documented items counted under Completeness.'
      : verdict === 'ERROR'
        ? 'No test showed the target breaking a rule, but the harness or the environment broke: the run is incomplete and is not a verdict on the target.'
        : 'The target did not do what the documents say in at least one test (see Failures).';
  const cov = v.coverage;
  const kv: [string, string][] = [
    ['Command', `<code>${esc(run.command)}</code>`],
    ['Started', esc(fmtTime(run.started_at))],
    ['Finished', esc(fmtTime(run.finished_at))],
    ['Duration', durationCell(run, duration)],
    [
      'Tests',
      `${counts.total} recorded: ${counts.passed} passed, ${v.counts.failed} failed, ${v.counts.errored} errored, ${counts.skipped} skipped${
        v.counts.expectedFailures ? `, ${v.counts.expectedFailures} expected failure${plural(v.counts.expectedFailures)}` : ''
      }`,
    ],
    ['Run record', `<code class="digest">sha256 ${esc(ctx.runJsonSha256)}</code>`],
  ];
  const pct = cov.documented ? Math.floor((cov.verified / cov.documented) * 1000) / 10 : 0;
  const gaps: string[] = [];
  if (cov.pending) gaps.push(`${cov.pending} have no test in this run (harness/catalogue/pending.ts says why)`);
  if (cov.failing) gaps.push(`${cov.failing} have a failing test`);
  if (cov.unverified) gaps.push(`${cov.unverified} have tests that skipped or did not run`);
  const coverage = `<div class="coverage-line"><div class="verdict-label">Completeness</div><div class="cov-word">${cov.complete ? 'COMPLETE' : 'PARTIAL'}</div>
<div class="cov-words"><b>${cov.verified}</b> of <b>${cov.documented}</b> documented items covered by a passing test (${pct}%)</div>
<div class="bar" role="img" aria-label="${pct}% of documented items covered"><i style="width:${pct}%"></i></div>
<p>${cov.complete ? 'Every documented item is covered by a passing test.' : `Of the documented items, ${esc(gaps.join('; '))}.`} Our own decisions (docs/profile.md, counted apart): ${cov.profileVerified} of ${cov.profileTotal} verified.</p></div>`;
  return `<header id="top" class="head">
<div class="head-main">
<div class="eyebrow">Welding cell HIL · qualification report</div>
<h1 class="headline">${esc(v.headline)}</h1>
<p class="sub">Target <b>${esc(run.target.name)}</b>, driver <b>${esc(run.target.driver)}</b>, ${simText(run.target.simulated)}</p>
<dl class="kv">${kv.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join('')}</dl>
${renderFirstScreenMeasurements(ctx)}
</div>
<div class="verdict v-${verdict.toLowerCase()}"><div class="verdict-label">Verdict</div><div class="verdict-word">${verdict}</div><p>${esc(verdictNote)}</p>${
    v.reasons.length ? `<ul>${v.reasons.map((r) => `<li>${esc(r)}</li>`).join('')}</ul>` : ''
  }${v.notes.length ? `<ul class="vnotes">${v.notes.map((r) => `<li>${esc(r)}</li>`).join('')}</ul>` : ''}${coverage}</div>
</header>
<section class="sign" aria-label="Signature">
<h2>Review and signature</h2>
<p class="muted">I have reviewed this report, the environment digests and the failures listed below.</p>
<div class="sign-grid">
<div><span>Reviewer name</span><i></i></div>
<div><span>Date</span><i></i></div>
<div><span>Signature</span><i></i></div>
<div><span>Decision</span><b>☐ Accepted&nbsp;&nbsp;&nbsp;☐ Accepted with remarks&nbsp;&nbsp;&nbsp;☐ Rejected</b></div>
<div class="wide"><span>Remarks</span><i></i><i></i></div>
</div>
</section>`;
}

function simText(s: boolean | null): string {
  return s === true ? 'simulated' : s === false ? '<strong>real hardware</strong>' : 'simulation unknown';
}

function renderEnvironment(ctx: RenderContext): string {
  const { run } = ctx;
  const e = run.environment;
  const rows: [string, string, boolean][] = [
    ['Target name', run.target.name, false],
    ['Driver', run.target.driver, false],
    ['Address', run.target.address, true],
    ['Simulated', run.target.simulated === null ? 'unknown' : run.target.simulated ? 'yes' : 'no', false],
    ...(run.target.replay ? ([['Replayed from', run.target.replay.recordings, true], ['Replay mode', run.target.replay.mode, false]] as [string, string, boolean][]) : []),
    ...(run.target.recording ? ([['Recorded into', run.target.recording.dir, true]] as [string, string, boolean][]) : []),
    ['machine_sha256', e.machine_sha256, true],
    ['configuration_sha256', e.configuration_sha256, true],
    ['deployment_sha256', e.deployment_sha256, true],
    ['Package version', e.package_version, false],
    ['Git revision', e.git_revision, true],
    ['Node', e.node, false],
    ['Platform', e.platform, false],
    ['Hostname', e.hostname, false],
    // The host over the run (harness/report/reporter.ts hostRecord): whether the run's timing figures came from a loaded host.
    ...(run.host
      ? ([
          ['Host cores, workers', `${run.host.cores} cores${run.host.workers ? `, ${run.host.workers} workers` : ''}${run.host.busy_loops ? `, ${run.host.busy_loops} busy loop${run.host.busy_loops === 1 ? '' : 's'} beside the run (hil run --busy-loops)` : ''}`, false],
          ['Host load (1 min)', run.host.load1 ? `${run.host.load1.start} at the start, mean ${run.host.load1.mean}, max ${run.host.load1.max} (${run.host.load1.samples} samples)` : '', false],
          ['CPU taken by the hypervisor', run.host.steal_s !== undefined ? `${run.host.steal_s} s over the run (/proc/stat steal: every thread stalls through it)` : '', false],
          ['Harness lateness', run.host.harness_lateness ? `event loop p99 ${run.host.harness_lateness.p99_ms} ms, max ${run.host.harness_lateness.max_ms} ms over ${run.host.harness_lateness.tests} tests${run.host.harness_lateness.worst_test ? ` (worst: ${run.host.harness_lateness.worst_test})` : ''}` : '', false],
          ['HIL_ERR_HOST_TOO_SLOW', String(run.host.host_too_slow ?? 0), false],
        ] as [string, string, boolean][])
      : []),
  ];
  const table = `<table class="kvt">${rows
    .map(([k, v, mono]) => `<tr><th>${esc(k)}</th><td>${v === '' ? '<span class="muted">not recorded</span>' : mono ? `<code class="digest">${esc(v)}</code>` : esc(v)}</td></tr>`)
    .join('')}</table>`;
  const allureEnv = ctx.allureEnv.length
    ? `<details><summary>Allure environment.properties (${ctx.allureEnv.length})</summary><table class="kvt">${ctx.allureEnv
        .map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`)
        .join('')}</table></details>`
    : '';
  return `<section id="environment"><h2>Environment</h2><div class="cols"><div>${table}${allureEnv}${renderRecordings(ctx)}</div><div>${renderDescribe(ctx)}</div></div></section>`;
}

/** Which recording each test replayed (or was recorded into), with what the replay found. */
function renderRecordings(ctx: RenderContext): string {
  const r = ctx.run.target.replay ?? ctx.run.target.recording;
  if (!r || !Array.isArray(r.tests) || r.tests.length === 0) return '';
  const what = ctx.run.target.replay ? `Recordings replayed (${esc(ctx.run.target.replay.mode)})` : 'Recordings written';
  const rows = r.tests
    .map((t) => `<tr><th>${esc(String(t.test))}</th><td><code class="digest">${esc(String(t.recording))}</code>${t.verdict ? `<br>${t.diverged ? '<strong>diverged</strong>: ' : ''}${esc(String(t.verdict))}` : ''}</td></tr>`)
    .join('');
  return `<details open><summary>${what}: ${r.tests.length}</summary><table class="kvt">${rows}</table></details>`;
}

function renderDescribe(ctx: RenderContext): string {
  const d = ctx.run.target.describe;
  if (d === undefined || d === null) return `<h3>Describe</h3><p class="muted">The target did not answer Describe (GET /v1/describe) in this run.</p>`;
  if (!isRecord(d)) return `<h3>Describe</h3><p class="muted">Describe data is not an object; shown as recorded.</p>${jsonBlock(d)}`;
  const known = (v: unknown): boolean => isRecord(v) && ('axes' in v || 'backend' in v || 'capabilities' in v);
  // Tolerate a reply envelope around the description.
  const inner = known(d) ? d : [d.data, d.result, d.description].find(known);
  const o: Record<string, unknown> = isRecord(inner) ? inner : d;
  const out: string[] = ['<h3>Describe</h3>'];

  // Describe reports the digests the target is running; they must be the ones the run recorded.
  const env = ctx.run.environment;
  const checks: [string, unknown, string][] = [
    ['machine_sha256', o.machine_sha256, env.machine_sha256],
    ['configuration_sha256', o.configuration_sha256, env.configuration_sha256],
    ['deployment_sha256', o.deployment_sha256 ?? o.deployment_digest, env.deployment_sha256],
  ];
  const mismatches = checks.filter(([, got, want]) => typeof got === 'string' && want !== '' && got !== want);
  for (const [k, got, want] of mismatches) ctx.warnings.push(`describe: ${k} ${String(got)} differs from the run environment's ${want}`);

  const fields: [string, unknown][] = [
    ['backend', o.backend],
    ['cycle_ns', o.cycle_ns],
    ['control_idle_timeout_ns', o.control_idle_timeout_ns],
  ];
  const present = fields.filter(([, v]) => v !== undefined);
  if (present.length) out.push(`<table class="kvt">${present.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${scalar(v)}</td></tr>`).join('')}</table>`);
  if (mismatches.length)
    out.push(`<p class="bad-note">Digest mismatch between Describe and the run record: ${mismatches.map(([k]) => esc(k)).join(', ')}.</p>`);
  else if (checks.some(([, got]) => typeof got === 'string')) out.push(`<p class="muted small">Digests reported by Describe match the run record.</p>`);

  if (Array.isArray(o.axes)) {
    const cols: [string, string[]][] = [
      ['id', ['id', 'axis', 'name']],
      ['unit', ['position_unit', 'unit']],
      ['min', ['min_position', 'min']],
      ['max', ['max_position', 'max']],
      ['native_home', ['native_home']],
      ['counts_per_unit', ['counts_per_unit']],
      ['sign', ['sign']],
    ];
    const rows = o.axes.map((a, i) => {
      if (!isRecord(a)) return `<tr><td colspan="${cols.length}">${scalar(a)} <span class="muted">(axis ${i}: not an object)</span></td></tr>`;
      return `<tr>${cols.map(([, keys]) => `<td>${scalar(keys.map((k) => a[k]).find((v) => v !== undefined))}</td>`).join('')}</tr>`;
    });
    out.push(`<h4>Axes (${o.axes.length})</h4><table class="grid num"><thead><tr>${cols.map(([h]) => `<th>${h}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`);
  } else if (o.axes !== undefined) out.push(`<p class="muted">axes is not a list.</p>`);

  const caps = capabilityRows(o.capabilities ?? o.capability_list);
  if (caps) {
    const byState = new Map<string, number>();
    for (const c of caps) byState.set(c.state, (byState.get(c.state) ?? 0) + 1);
    const tally = [...byState.entries()].sort((a, b) => cmp(a[0], b[0])).map(([s, n]) => `${n} ${esc(s)}`).join(', ');
    out.push(
      `<details><summary>Capabilities (${caps.length}: ${tally})</summary><table class="grid"><thead><tr><th>name</th><th>state</th><th>transport</th></tr></thead><tbody>${caps
        .map((c) => `<tr><td><code>${esc(c.name)}</code></td><td><span class="cap cap-${cssToken(c.state)}">${esc(c.state)}</span></td><td>${esc(c.transport)}</td></tr>`)
        .join('')}</tbody></table></details>`,
    );
  }
  out.push(`<details class="describe-json"><summary>Describe as recorded (JSON)</summary>${jsonBlock(ctx.run.target.describe)}</details>`);
  return out.join('');
}

function capabilityRows(v: unknown): { name: string; state: string; transport: string }[] | undefined {
  const text = (x: unknown): string => (x === undefined || x === null ? '' : typeof x === 'string' ? x : JSON.stringify(x) ?? '');
  if (Array.isArray(v))
    return v.map((c) => (isRecord(c) ? { name: text(c.name ?? c.id), state: text(c.state), transport: text(c.transport) } : { name: text(c), state: '', transport: '' }));
  if (isRecord(v))
    return Object.keys(v).map((k) => {
      const c = v[k];
      return isRecord(c) ? { name: k, state: text(c.state), transport: text(c.transport) } : { name: k, state: text(c), transport: '' };
    });
  return undefined;
}

const CATEGORIES = [
  { key: 'passed', label: 'Passed', color: '#1a7f37' },
  { key: 'unexpectedPasses', label: 'Unexpected passes', color: '#4ac26b' },
  { key: 'failed', label: 'Failed', color: '#cf222e' },
  { key: 'expectedFailures', label: 'Expected failures', color: '#e8a0a6' },
  { key: 'errored', label: 'Errored', color: '#bc4c00' },
  { key: 'informative', label: 'Profile differences', color: '#0969da' },
  { key: 'skipped', label: 'Skipped', color: '#8c959f' },
] as const;

function renderSummary(ctx: RenderContext, c: Counts): string {
  // Failed and errored count what the verdict counts: outcomes the expectation file does not list.
  const tiles: [string, number, string, string][] = [
    ['Passed', c.passed, 'pass', c.unexpectedPasses ? `${c.unexpectedPasses} unexpected` : ''],
    ['Failed', c.failed, c.failed ? 'fail' : 'zero', ''],
    ['Errored', c.errored, c.errored ? 'error' : 'zero', ''],
    ['Skipped', c.skipped, 'skip', c.silentSkips ? `${c.silentSkips} without a reason` : ''],
    ['Expected failures', c.expectedFailures, 'zero', ''],
    ['Unexpected passes', c.unexpectedPasses, c.unexpectedPasses ? 'warn' : 'zero', ''],
    // On a target other than the reference stack a failed profile test and a profile check inside a contract
    // test that the target answers otherwise are informative, not failures (DESIGN.md rule 3): the same sum
    // as the verdict's note, split in the sub-line.
    [
      'Profile differences',
      c.informative + c.profileDifferences,
      c.informative + c.profileDifferences ? 'info' : 'zero',
      c.informative + c.profileDifferences ? `${c.informative} profile ${c.informative === 1 ? 'test' : 'tests'}, ${c.profileDifferences} ${c.profileDifferences === 1 ? 'check' : 'checks'} in contract tests` : '',
    ],
  ];
  // Disjoint categories for the chart: an expected failure or unexpected pass is drawn once.
  const bars = {
    passed: c.passed - c.unexpectedPasses,
    unexpectedPasses: c.unexpectedPasses,
    failed: c.failed,
    expectedFailures: c.expectedFailures,
    errored: c.errored,
    informative: c.informative,
    skipped: c.skipped,
  };
  const chart = barChart(CATEGORIES.map((k) => ({ label: k.label, value: bars[k.key], color: k.color })));

  const byFile = new Map<string, RunTest[]>();
  for (const t of ctx.run.tests) {
    const l = byFile.get(t.file);
    if (l) l.push(t);
    else byFile.set(t.file, [t]);
  }
  const files = [...byFile.keys()].sort(cmp);
  const fileRows = files.map((f) => {
    const fc = countsOf(byFile.get(f)!);
    const seg = [
      { value: fc.passed, color: '#1a7f37' },
      { value: fc.failed, color: '#cf222e' },
      { value: fc.errored, color: '#bc4c00' },
      { value: fc.expectedFailures, color: '#e8a0a6' },
      { value: fc.informative, color: '#0969da' },
      { value: fc.skipped, color: '#8c959f' },
    ];
    return `<tr><td><code>${esc(f)}</code></td><td>${fc.total}</td><td>${fc.passed}</td><td class="${fc.failed ? 'c-fail' : ''}">${fc.failed}</td><td class="${
      fc.errored ? 'c-error' : ''
    }">${fc.errored}</td><td>${fc.expectedFailures}</td><td>${fc.informative}</td><td>${fc.skipped}</td><td>${esc(fmtDuration(fc.duration_ms))}</td><td>${stackBar(seg, 140, 10)}</td></tr>`;
  });
  return `<section id="summary"><h2>Summary</h2>
<div class="tiles">${tiles
    .map(([label, n, cls, sub]) => `<div class="tile t-${cls}"><div class="n">${n}</div><div class="l">${label}</div>${sub ? `<div class="s">${esc(sub)}</div>` : '<div class="s">&nbsp;</div>'}</div>`)
    .join('')}</div>
<div class="cols"><div><h3>Outcomes</h3>${chart}</div><div><h3>Sum of test durations</h3><p class="big">${esc(fmtDuration(c.duration_ms))}</p><p class="muted small">Across ${c.total} test${plural(
    c.total,
  )} in ${files.length} file${plural(files.length)}; tests may run concurrently.</p></div></div>
<h3>Per file</h3>
<table class="grid num"><thead><tr><th>File</th><th>Tests</th><th>Passed</th><th>Failed</th><th>Errored</th><th>Expected</th><th>Profile diff.</th><th>Skipped</th><th>Duration</th><th>Outcome</th></tr></thead><tbody>${fileRows.join(
    '',
  )}</tbody></table></section>`;
}

function renderFailures(ctx: RenderContext): string {
  const { failures, others } = evidenceTests(ctx);
  const unexpected = sortTests(ctx.run.tests.filter((t) => t.unexpected_pass), false);
  const parts: string[] = [`<section id="failures"><h2>Failures and errors <span class="count">${failures.length}</span></h2>`];
  if (!failures.length) parts.push('<p class="ok-note">No test failed or errored.</p>');
  for (const t of failures) parts.push(renderTestCard(ctx, t, true));
  if (unexpected.length) {
    parts.push(
      `<h3>Unexpected passes <span class="count">${unexpected.length}</span></h3><p class="muted">The target's expectation file lists these as known failures, but they passed: update the expectation file.</p><ul class="plain">${unexpected
        .map((t) => `<li><code>${esc(t.file)}</code> › ${esc(t.fullName)}${t.expected_failure ? ` <span class="muted">(expected: ${esc(t.expected_failure)})</span>` : ''}</li>`)
        .join('')}</ul>`,
    );
  }
  parts.push('</section>');
  if (others.length) {
    parts.push(`<section id="evidence"><h2>Plots and evidence from other tests <span class="count">${others.length}</span></h2>`);
    for (const t of others) parts.push(renderTestCard(ctx, t, false));
    parts.push('</section>');
  }
  return parts.join('\n');
}

function renderTestCard(ctx: RenderContext, t: RunTest, failure: boolean): string {
  const r = ctx.matches.get(t);
  const out: string[] = [];
  out.push(`<article class="card s-${t.state}"><div class="card-head">${stateBadge(t.state)}<div><div class="card-title">${esc(t.name)}</div><div class="muted small"><code>${esc(
    t.file,
  )}</code> › ${esc(t.fullName)} · ${esc(t.kind)} · ${esc(fmtDuration(t.duration_ms))}</div></div></div>`);
  if (t.expected_failure) out.push(`<p class="xfail">Expected failure for this target: ${esc(t.expected_failure)}</p>`);
  else if (t.informative) out.push(`<p class="xfail">Informative, not counted against the verdict (DESIGN.md rule 3): ${esc(t.informative)}</p>`);
  // A failed motion test shows its plot first: what the axis did is the first thing to look at.
  const plots = (t.evidence?.plots ?? []).map((p) => motionPlot(p, `${p.axis}: ${t.name}`)).join('');
  if (plots) out.push(`<div class="plots">${plots}</div>`);
  if (t.evidence?.measurements.length) out.push(measurementTable(t.evidence.measurements, false));
  if (t.evidence?.notes?.length) out.push(`<ul class="plain small muted">${t.evidence.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>`);
  if (t.covers.length) out.push(`<div class="covers">Covers ${t.covers.map((c) => `<code class="chip">${esc(c)}</code>`).join(' ')}</div>`);
  if (failure) {
    const msgs = t.errors ?? [];
    if (msgs.length) out.push(msgs.map((m) => `<pre class="msg">${esc(m)}</pre>`).join(''));
    else if (!r?.message) out.push('<p class="muted">No failure message recorded.</p>');
    if (r?.message && !msgs.some((m) => m.includes(r.message!.trim().split('\n')[0]!))) out.push(`<pre class="msg">${esc(r.message)}</pre>`);
    if (r?.trace) out.push(`<details><summary>Stack trace</summary><pre class="trace">${esc(r.trace)}</pre></details>`);
    if (t.evidence?.transcript) out.push(renderTranscript(t.evidence.transcript));
  }
  if (!r) out.push('<p class="muted small">No Allure result matched this test: steps and attachments are not available.</p>');
  else {
    // Measurements travel as Allure parameters too; they are shown above from run.json.
    const measured = new Set((t.evidence?.measurements ?? []).map((m) => `${m.name}${m.axis ? ` ${m.axis}` : ''}`));
    const params = r.parameters.filter((p) => !measured.has(p.name));
    if (params.length) out.push(`<div class="small muted">Parameters: ${params.map((p) => `<code>${esc(p.name)}=${esc(p.value)}</code>`).join(' ')}</div>`);
    if (r.steps.length) out.push(`<details${failure ? ' open' : ''}><summary>Steps (${countSteps(r.steps)})</summary>${renderSteps(r.steps)}</details>`);
    // The transcript and the motion data are Allure's copies of what run.json carries and is drawn above.
    const atts = attachmentsOf(r).filter((a) => a.name !== 'transcript' && a.name !== 'motion' && (failure || IMAGE_TYPES.has(a.type) || a.type === 'text/csv'));
    if (atts.length) out.push(`<div class="atts">${atts.map((a) => renderAttachment(ctx, a)).join('')}</div>`);
  }
  out.push('</article>');
  return out.join('');
}

function countSteps(steps: AllureStep[]): number {
  return steps.reduce((n, s) => n + 1 + countSteps(s.steps), 0);
}

function renderSteps(steps: AllureStep[]): string {
  return `<ol class="steps">${steps
    .map((s) => {
      const dur = s.start !== undefined && s.stop !== undefined && s.stop >= s.start ? ` <span class="muted">${esc(fmtDuration(s.stop - s.start))}</span>` : '';
      const atts = s.attachments.length ? ` <span class="muted">· ${s.attachments.length} attachment${plural(s.attachments.length)}</span>` : '';
      return `<li><span class="st st-${cssToken(s.status)}">${esc(s.status)}</span> ${esc(s.name)}${dur}${atts}${s.message ? `<div class="step-msg">${esc(s.message)}</div>` : ''}${
        s.steps.length ? renderSteps(s.steps) : ''
      }</li>`;
    })
    .join('')}</ol>`;
}

function renderAttachment(ctx: RenderContext, a: AllureAttachment): string {
  const loaded = ctx.attachmentCache.get(a.source);
  const head = `<div class="att-head"><strong>${esc(a.name)}</strong> <span class="muted">${esc(a.type || 'unknown type')}${
    loaded && 'size' in loaded && loaded.size !== undefined ? ` · ${esc(fmtBytes(loaded.size))}` : ''
  } · <code>${esc(a.source)}</code></span></div>`;
  if (!loaded) return `<div class="att">${head}<p class="muted small">Not loaded.</p></div>`;
  if (loaded.kind === 'listed') return `<div class="att">${head}<p class="muted small">${esc(loaded.note)}</p></div>`;
  if (loaded.kind === 'image') return `<div class="att">${head}<img alt="${esc(a.name)}" src="${esc(loaded.dataUri)}"></div>`;
  const plot = a.type === 'text/csv' || a.type === 'text/tab-separated-values' ? csvPlot(loaded.text, a.type === 'text/csv' ? ',' : '\t') : '';
  const trunc = loaded.truncated ? `<p class="muted small">Truncated to the first ${esc(fmtBytes(TEXT_INLINE_MAX))}; the full file is allure-results/${esc(a.source)}.</p>` : '';
  const pre = `<pre class="att-text">${esc(loaded.text)}</pre>`;
  return `<div class="att">${head}${plot}${plot ? `<details><summary>Data</summary>${pre}</details>` : pre}${trunc}</div>`;
}

// ---------------------------------------------------------------------------------------------
// Measurements (harness/measure.ts, harness/report/run-measurements.ts)

const FIRST_SCREEN = ['cycle_lateness_p99', 'cycle_lateness_max', 'cycle_overruns', 'control_round_trip_p99', 'home_duration_max'];

/** The run's key measurements and its lateness histogram, beside the verdict on the first screen. */
function renderFirstScreenMeasurements(ctx: RenderContext): string {
  const rm = ctx.run.run_measurements;
  const failing = ctx.run.tests.flatMap((t) => (t.evidence?.measurements ?? []).filter((m) => m.outcome === 'fail').map((m) => ({ t, m })));
  if (!rm?.measurements.length && !failing.length) return '<p class="muted small first-m">No measurements were recorded in this run (no test commanded motion).</p>';
  const shown = (rm?.measurements ?? []).filter((m) => FIRST_SCREEN.includes(m.name));
  const rows = shown.map((m) => `<tr class="${m.outcome === 'fail' ? 'm-fail' : ''}"><th>${esc(m.name)}</th><td class="r">${esc(fmtValue(m.value))} ${esc(m.unit)}</td><td>${m.limit ? esc(limitText(m.limit)) : '<span class="muted">no limit</span>'}</td><td>${outcomeBadge(m.outcome)}</td></tr>`);
  const hist = rm?.lateness_histogram ? latenessHistogram(rm.lateness_histogram, rm.lateness_limit_us, 560) : '';
  const fail = failing.length ? `<p class="bad-note small">${failing.length} measurement${plural(failing.length)} of tests outside the limit: ${failing.slice(0, 3).map(({ t, m }) => `${esc(m.name)}${m.axis ? ` ${esc(m.axis)}` : ''} in “${esc(t.name)}”`).join('; ')}${failing.length > 3 ? '…' : ''} (see Failures).</p>` : '';
  // The first of them drawn here too, with its limit: the cause beside the verdict, also in a run whose
  // cells ran on the stepped clock and so have no lateness histogram to show.
  const first = failing.find(({ t, m }) => m.axis !== undefined && t.evidence?.plots?.some((p) => p.axis === m.axis));
  const firstPlot = first ? motionPlot(first.t.evidence!.plots!.find((p) => p.axis === first.m.axis)!, `${first.m.axis}: ${first.t.name}`) : '';
  return `<div class="first-m"><h3>Run measurements</h3>${fail}${firstPlot}${rows.length ? `<table class="kvt mt">${rows.join('')}</table>` : ''}${hist}</div>`;
}

function renderMeasurements(ctx: RenderContext): string {
  const rm = ctx.run.run_measurements;
  const parts: string[] = ['<section id="measurements"><h2>Measurements</h2>'];
  parts.push('<p class="muted">Each limit says where its number comes from: <b>documented</b> (the documents), <b>configured</b> (the machine configuration the target runs) or <b>profile</b> (our decision, docs/profile.md “Measurements”). A test measurement outside its limit fails the test; a run measurement outside its limit is a note of the verdict.</p>');
  if (rm?.measurements.length) {
    parts.push(`<h3>The run</h3>${measurementTable(rm.measurements, false)}`);
    if (rm.lateness_histogram) parts.push(`<h4>Cycle lateness</h4>${latenessHistogram(rm.lateness_histogram, rm.lateness_limit_us)}`);
  } else parts.push('<p class="muted">No run measurements (no test read telemetry).</p>');
  const measured = sortTests(ctx.run.tests.filter((t) => t.evidence?.measurements.length), true);
  if (measured.length) {
    const rows = measured.flatMap((t) =>
      t.evidence!.measurements.map(
        (m) =>
          `<tr class="${m.outcome === 'fail' ? 'm-fail' : ''}" data-s="${m.outcome}"><td>${esc(t.fullName)}</td><td><code>${esc(m.name)}</code></td><td>${esc(m.axis ?? '')}</td><td class="r">${esc(fmtValue(m.value))}</td><td>${esc(m.unit)}</td><td class="small">${m.limit ? esc(limitText(m.limit)) : '<span class="muted">no limit</span>'}</td><td>${outcomeBadge(m.outcome)}</td></tr>`,
      ),
    );
    parts.push(
      `<h3>Per test <span class="count">${rows.length}</span></h3><div class="filter noprint"><input type="search" placeholder="Filter tests, names, axes…" data-filter="measure-table" aria-label="Filter measurements"><select data-filter-state="measure-table" aria-label="Outcome"><option value="">all</option><option value="fail">outside the limit</option><option value="pass">within</option><option value="unlimited">no limit</option></select><span class="muted small" data-filter-count="measure-table"></span></div><p class="print-only muted">The per-test table is in the HTML file; measurements outside their limit are printed with their failing tests.</p><table class="grid num" id="measure-table"><thead><tr><th>Test</th><th>Measurement</th><th>Axis</th><th>Value</th><th>Unit</th><th>Limit</th><th>Outcome</th></tr></thead><tbody>${rows.join('')}</tbody></table>`,
    );
  }
  const soak = ctx.run.soak;
  if (soak) {
    const first = soak.first_refusal ? `<p class="bad-note small">First refusal ${esc(String(soak.first_refusal.at_s))} s into the soak: ${esc(String(soak.first_refusal.status))} ${esc(soak.first_refusal.error)}</p>` : '';
    const slow = soak.host_too_slow ? `<p class="small">HIL_ERR_HOST_TOO_SLOW: ${esc(soak.host_too_slow)}</p>` : '';
    parts.push(`<h3 id="soak">The soak (${esc(String(soak.seconds))} s, part of the verdict)</h3>${first}${slow}${measurementTable(soak.measurements, false)}`);
  }
  const motion = sortTests(ctx.run.tests.filter((t) => t.evidence?.plots?.length && t.state !== 'failed' && t.state !== 'errored'), false);
  if (motion.length) {
    parts.push(`<h3>Motion of the passing tests <span class="count">${motion.length}</span></h3>`);
    for (const t of motion) parts.push(`<details class="motion-test"><summary>${esc(t.fullName)} <span class="muted small">${esc(t.file)}</span></summary><div class="plots">${t.evidence!.plots!.map((p) => motionPlot(p, `${p.axis}: ${t.name}`)).join('')}</div></details>`);
  }
  parts.push('</section>');
  return parts.join('\n');
}

function measurementTable(ms: readonly MeasurementRecord[], _compact: boolean): string {
  return `<table class="grid num mtable"><thead><tr><th>Measurement</th><th>Axis</th><th>Value</th><th>Limit</th><th>Outcome</th></tr></thead><tbody>${ms
    .map(
      (m) =>
        `<tr class="${m.outcome === 'fail' ? 'm-fail' : ''}"><td><code>${esc(m.name)}</code>${m.note ? `<div class="muted small">${esc(m.note)}</div>` : ''}</td><td>${esc(m.axis ?? '')}</td><td class="r">${esc(fmtValue(m.value))} ${esc(m.unit)}</td><td class="small">${
          m.limit ? esc(limitText(m.limit)) : '<span class="muted">no limit</span>'
        }</td><td>${outcomeBadge(m.outcome)}</td></tr>`,
    )
    .join('')}</tbody></table>`;
}

function outcomeBadge(o: MeasurementRecord['outcome']): string {
  return o === 'fail' ? '<span class="badge b-failed">OUTSIDE</span>' : o === 'pass' ? '<span class="badge b-passed">WITHIN</span>' : '<span class="muted small">recorded</span>';
}

function fmtValue(v: number): string {
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e7) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
}

/**
 * A failed test's requests and replies (tokens already redacted where they were collected), its events and
 * stderr tail. The last requests before the failure are shown; earlier ones are folded (closed, and not
 * opened for printing); a run of alike requests (a poll) is one line with its count (transcript.ts).
 */
function renderTranscript(tr: Transcript): string {
  const row = (r: TranscriptRow) => {
    const x = r.x;
    const when = r.count > 1 ? `${r.from_ms}–${x.at_ms}` : String(x.at_ms);
    const times = r.count > 1 ? ` <span class="tag rep">× ${r.count}</span>` : '';
    return `<tr${r.count > 1 ? ' class="rep"' : ''}><td class="r">${when}</td><td>${esc(x.method)} <code>${esc(x.path)}</code>${times}</td><td><pre class="tx">${esc(x.request)}</pre></td><td>${x.status ?? '<span class="c-error">—</span>'}</td><td><pre class="tx">${esc(x.reply ?? x.error ?? '')}</pre>${r.count > 1 ? '<div class="muted small">the last reply of the run</div>' : ''}</td><td class="r">${x.ms}</td></tr>`;
  };
  const head = '<thead><tr><th>ms</th><th>Request</th><th>Body</th><th>Status</th><th>Reply</th><th>took ms</th></tr></thead>';
  const rows = condense(tr.exchanges);
  const { earlier, recent } = aroundFailure(rows);
  const folded = rows.length < tr.exchanges.length ? `, ${tr.exchanges.length - rows.length} repeats folded into their lines` : '';
  const parts = [`<div class="transcript"><h4>Transcript: ${tr.exchanges.length} request${plural(tr.exchanges.length)}${tr.omitted ? ` (the first ${tr.omitted} left out)` : ''}${folded}</h4>`];
  if (earlier.length) {
    const n = earlier.reduce((a, r) => a + r.count, 0);
    parts.push(`<details class="tx-earlier"><summary>${n} earlier request${plural(n)} (${earlier.length} line${plural(earlier.length)})</summary><table class="grid tx-table">${head}<tbody>${earlier.map(row).join('')}</tbody></table></details>`);
  }
  if (recent.length) parts.push(`<p class="muted small">The last ${recent.length} line${plural(recent.length)} before the failure:</p><table class="grid tx-table">${head}<tbody>${recent.map(row).join('')}</tbody></table>`);
  if (tr.events) parts.push(`<h4>Events around the failure</h4><pre class="trace">${esc(tr.events)}</pre>`);
  for (const s of tr.stderr ?? []) parts.push(`<h4>stderr of ${esc(s.target)} (tail)</h4><pre class="trace">${esc(s.text)}</pre>`);
  for (const n of tr.notes ?? []) parts.push(`<p class="muted small">${esc(n)}</p>`);
  parts.push('</div>');
  return parts.join('');
}

/** What changed since the baseline run (hil report --baseline), right after the verdict. */
function renderComparison(ctx: RenderContext): string {
  const c = ctx.comparison;
  if (!c) return '';
  const list = (title: string, xs: string[], cls = ''): string =>
    `<h3>${esc(title)} <span class="count">${xs.length}</span></h3>${xs.length ? `<ul class="plain ${cls}">${xs.slice(0, 200).map((x) => `<li>${esc(x)}</li>`).join('')}</ul>` : ''}`;
  const drift = c.drifts.length
    ? `<table class="grid num"><thead><tr><th>Test</th><th>Measurement</th><th>Axis</th><th>Before</th><th>Now</th><th>Unit</th><th>Outcome</th></tr></thead><tbody>${c.drifts
        .map((d) => `<tr class="${d.outcome?.after === 'fail' ? 'm-fail' : ''}"><td>${esc(d.test)}</td><td><code>${esc(d.name)}</code></td><td>${esc(d.axis ?? '')}</td><td class="r">${esc(fmtValue(d.before))}</td><td class="r">${esc(fmtValue(d.after))}</td><td>${esc(d.unit)}</td><td>${d.outcome ? `${esc(d.outcome.before)} → ${esc(d.outcome.after)}` : ''}</td></tr>`)
        .join('')}</tbody></table>`
    : '';
  const cv = c.coverage;
  return `<section id="baseline"><h2>Since the baseline</h2><p class="muted">Compared with <code>${esc(ctx.baselineFile ?? '')}</code>: verdict ${esc(c.verdict.before)} → ${esc(c.verdict.after)}; ${cv.before} → ${cv.after} documented items verified (${cv.gained.length} gained, ${cv.lost.length} lost). A measurement drifted when it moved across its limit or changed by more than ${Math.round(c.tolerance.relative * 100)}% of the larger value and more than its unit's noise floor.</p>
${list('New failures', c.newFailures, 'problems')}${list('Fixed', c.fixed)}${list('Tests added', c.added)}${list('Tests removed', c.removed)}${list('Documented items lost', cv.lost, 'problems')}${list('Documented items gained', cv.gained)}
<h3>Measurements drifted <span class="count">${c.drifts.length}</span></h3>${drift}</section>`;
}

/**
 * The model-based run (harness/model/, `hil fuzz`): its figures, and which transitions and rules the model
 * exercised and how often. Absent when no fuzz run was written into run.json.
 */
function renderModel(ctx: RenderContext): string {
  const f = ctx.run.model?.fuzz;
  if (!f) return '';
  const rows = (o: Record<string, number>) =>
    Object.entries(o)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, n]) => `<tr><td><code>${esc(k)}</code></td><td class="num">${n}</td></tr>`)
      .join('');
  const others = Object.fromEntries(Object.entries(f.per_rule).filter(([k]) => !k.startsWith('transition:')));
  const verdict = f.passed ? 'ran clean' : `failed: ${esc(f.failure ?? 'see hil fuzz output')}`;
  return `<section id="model"><h2>Model-based run <span class="count">${f.transitions_reached} transitions reached</span></h2>
<p>hil fuzz on <code>${esc(f.target)}</code> (${esc(f.clock)} clock), ${f.minutes} min: ${verdict}. ${f.sequences} sequences, ${f.commands} commands, ${f.transitions_reached} transitions reached, wall time ${Math.round(f.wall_ms / 1000)} s. Seeds (HIL_MODEL_SEED): ${f.seeds.length > 12 ? `${f.seeds.slice(0, 12).join(', ')} and ${f.seeds.length - 12} more` : f.seeds.join(', ')}.</p>
<div class="cols"><div><h3>Transitions, how often</h3><table><thead><tr><th>transition</th><th>count</th></tr></thead><tbody>${rows(f.per_transition)}</tbody></table></div>
<div><h3>Other rules and outcomes, how often</h3><table><thead><tr><th>rule</th><th>count</th></tr></thead><tbody>${rows(others)}</tbody></table></div></div></section>`;
}

function renderMatrix(ctx: RenderContext): string {
  const cov = ctx.run.coverage;
  const families = [...new Set(cov.map((c) => c.family))].sort(cmp);
  const famRows = families.map((f) => {
    const list = cov.filter((c) => c.family === f);
    const covered = list.filter((c) => c.status === 'covered');
    const failing = covered.filter((c) => c.outcome === 'failed').length;
    const passing = covered.filter((c) => c.outcome === 'passed').length;
    const pending = list.length - covered.length;
    const pct = list.length ? Math.round((covered.length * 100) / list.length) : 0;
    const bar = stackBar(
      [
        { value: passing, color: '#1a7f37' },
        { value: failing, color: '#cf222e' },
        { value: covered.length - passing - failing, color: '#d4a72c' },
        { value: pending, color: '#d0d7de' },
      ],
      220,
      12,
    );
    return `<tr><td><a href="#fam-${cssToken(f)}"><code>${esc(f)}</code></a></td><td>${covered.length}</td><td>${pending}</td><td>${list.length}</td><td>${pct}%</td><td>${failing ? `<span class="c-fail">${failing}</span>` : '0'}</td><td>${bar}</td></tr>`;
  });
  const total = cov.length;
  const totalCovered = cov.filter((c) => c.status === 'covered').length;

  const rows: string[] = [];
  for (const f of families) {
    const list = cov.filter((c) => c.family === f);
    rows.push(`<tr class="g" id="fam-${cssToken(f)}"><th colspan="5">${esc(f)} <span class="muted">${list.filter((c) => c.status === 'covered').length} / ${list.length} covered</span></th></tr>`);
    const groups = new Map<string, CoverageEntry[]>();
    for (const c of list) {
      const k = `${String(c.doc).padStart(3, '0')}\u0000${c.section}`;
      const l = groups.get(k);
      if (l) l.push(c);
      else groups.set(k, [c]);
    }
    for (const k of [...groups.keys()].sort(cmp)) {
      const entries = groups.get(k)!.sort((a, b) => cmp(a.id, b.id));
      const e0 = entries[0]!;
      rows.push(`<tr class="sg"><th colspan="5">Document ${esc(String(e0.doc || '?'))} · ${esc(e0.section || 'section not recorded')}</th></tr>`);
      for (const c of entries) {
        const outcome = c.status === 'covered' ? (c.outcome ?? 'not_run') : '';
        const detail =
          c.status === 'covered'
            ? c.tests.length
              ? c.tests.map((t) => esc(t)).join('<br>')
              : '<span class="muted">no test named</span>'
            : notSelected(ctx.run, c)
              ? '<span class="reason">not in this selection</span>'
              : `<span class="reason">${c.reason ? esc(c.reason) : '<em>no reason recorded</em>'}</span>`;
        rows.push(
          `<tr data-s="${c.status} ${outcome}"><td><code>${esc(c.id)}</code></td><td class="small">${esc(c.title)}</td><td><span class="cs cs-${c.status}">${notSelected(ctx.run, c) ? 'not selected' : c.status}</span></td><td>${
            outcome ? `<span class="oc oc-${outcome}">${outcome.replace('_', ' ')}</span>` : ''
          }</td><td class="small">${detail}</td></tr>`,
        );
      }
    }
  }
  return `<section id="matrix"><h2>Traceability matrix <span class="count">${totalCovered} / ${total} covered</span></h2>
<p class="muted">Every catalogue entry of the documents, with the tests of this run that cover it or the reason it is pending.</p>
<table class="grid num fam"><thead><tr><th>Family</th><th>Covered</th><th>Pending</th><th>Total</th><th>%</th><th>Failing</th><th>Coverage</th></tr></thead><tbody>${famRows.join('')}</tbody></table>
<p class="legend small">${legend([
    ['#1a7f37', 'covered, passed'],
    ['#cf222e', 'covered, failed'],
    ['#d4a72c', 'covered, skipped or not run'],
    ['#d0d7de', 'pending'],
  ])}</p>
<div class="filter noprint"><input type="search" placeholder="Filter ids, titles, tests…" data-filter="matrix-table" aria-label="Filter the matrix"><select data-filter-state="matrix-table" aria-label="Status"><option value="">all entries</option><option value="covered">covered</option><option value="pending">pending</option><option value="failed">failing</option><option value="informative">covered, informative</option><option value="not_run">covered, not run</option><option value="skipped">covered, skipped</option></select><span class="muted small" data-filter-count="matrix-table"></span></div>
<p class="print-only muted">The paper copy carries the family table above; the matrix of all ${total} entries with their tests or pending reasons is in the HTML file (run.json sha256 ${esc(ctx.runJsonSha256)}).</p>
<table class="grid matrix" id="matrix-table"><thead><tr><th>Entry</th><th>Title</th><th>Status</th><th>Outcome</th><th>Covering tests / pending reason</th></tr></thead><tbody>${rows.join('\n')}</tbody></table></section>`;
}

function renderTests(ctx: RenderContext): string {
  const tests = sortTests(ctx.run.tests, false);
  const rows = tests.map((t) => {
    const extra = t.expected_failure
      ? ` <span class="tag xf" title="${esc(t.expected_failure)}">expected</span>`
      : t.informative
        ? ` <span class="tag xf" title="${esc(t.informative)}">profile difference</span>`
        : t.unexpected_pass ? ' <span class="tag up">unexpected pass</span>' : '';
    return `<tr data-s="${t.state} ${t.kind}"><td><code>${esc(t.file)}</code></td><td title="${esc(t.fullName)}">${esc(t.fullName)}</td><td>${esc(t.kind)}</td><td>${stateBadge(t.state)}${extra}</td><td class="r">${esc(
      fmtDuration(t.duration_ms),
    )}</td><td class="small">${t.covers.map((c) => esc(c)).join('<br>')}</td><td class="small">${t.skip_reason ? esc(t.skip_reason) : ''}</td></tr>`;
  });
  return `<section id="tests"><h2>All tests <span class="count">${tests.length}</span></h2>
<div class="filter noprint"><input type="search" placeholder="Filter files, names, covers…" data-filter="tests-table" aria-label="Filter the tests"><select data-filter-state="tests-table" aria-label="State"><option value="">all states</option><option value="passed">passed</option><option value="failed">failed</option><option value="errored">errored</option><option value="skipped">skipped</option><option value="contract">contract</option><option value="profile">profile</option><option value="unit">unit</option></select><span class="muted small" data-filter-count="tests-table"></span></div>
<p class="print-only muted">The list of all ${tests.length} tests (file, name, state, duration, covers, skip reason) is in the HTML file; the per-file table under Summary gives their counts.</p>
<table class="grid tests" id="tests-table"><thead><tr><th>File</th><th>Test</th><th>Kind</th><th>State</th><th>Duration</th><th>Covers</th><th>Skip reason</th></tr></thead><tbody>${rows.join('\n')}</tbody></table></section>`;
}

function renderGate(ctx: RenderContext): string {
  const g = ctx.run.gate;
  const sel = selectionText(ctx.run);
  return `<section id="gate"><h2>Traceability gate</h2>${
    g.ok && sel
      ? `<p class="ok-note">The gate applies to whole runs; this run selected ${esc(sel)}. No problem was found in what ran (every id a test covers is in the catalogue); documented items with no test in the selection are marked “not in this selection” in the matrix.</p>`
      : g.ok
      ? '<p class="ok-note">Gate ok: every catalogue entry is covered by a test or is on the pending list with a reason.</p>'
      : `<p class="bad-note">Gate failed with ${g.problems.length} problem${plural(g.problems.length)}:</p><ul class="problems">${g.problems.map((p) => `<li>${esc(p)}</li>`).join('')}</ul>`
  }</section>`;
}

function renderNotes(ctx: RenderContext): string {
  if (!ctx.warnings.length) return '';
  return `<section id="notes" class="notes"><h2>Report notes <span class="count">${ctx.warnings.length}</span></h2><p class="muted small">Problems met while building this report. They do not change the test outcomes but may leave parts of the report incomplete.</p><ul>${ctx.warnings
    .map((w) => `<li>${esc(w)}</li>`)
    .join('')}</ul></section>`;
}
