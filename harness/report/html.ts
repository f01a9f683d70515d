// The offline qualification report (`hil report`): one self-contained HTML file rendered from
// reports/run.json (the authority for what ran) and reports/allure-results/ (which only enriches a test
// with its steps and attachments). A reviewer prints and signs it, so it must open with no network
// (inline CSS, a little inline JS, images as data URIs, a Content-Security-Policy that forbids fetching)
// and must render the same bytes for the same input.
//
// Like an OpenHTF output sink, the report never aborts over bad enrichment: malformed or missing Allure
// input, odd Describe data or a run.json with missing fields become warnings shown in the report and
// returned to the caller. Only a missing or unreadable run.json (nothing to report) or a failed write
// throws, as a ReportError with a stable code.

import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CoverageEntry, RunRecord, RunTest, TestState } from './run-types.ts';
import { countTests as verdictCounts, verdictOf, type RunVerdict } from './verdict.ts';
import { HarnessError } from '../errors.ts';

export const DEFAULT_RUN_JSON = 'reports/run.json';
export const DEFAULT_ALLURE_DIR = 'reports/allure-results';
export const DEFAULT_HTML_OUT = 'reports/html/index.html';

export type ReportErrorCode = 'HIL_REPORT_RUN_JSON_MISSING' | 'HIL_REPORT_RUN_JSON_UNREADABLE' | 'HIL_REPORT_WRITE_FAILED';

/** A report that cannot be rendered: a harness-side error (harness/errors.ts) with its own stable code. */
export class ReportError extends HarnessError {
  override readonly name: string = 'ReportError';
  declare readonly code: ReportErrorCode;
  constructor(code: ReportErrorCode, message: string, options?: { cause?: unknown }) {
    super('HIL_ERR_TOOL_FAILED', message, { cause: options?.cause });
    this.recode(code, message);
  }
}

export interface HtmlReportOptions {
  /** Default reports/run.json (relative paths resolve against the working directory). */
  runJson?: string;
  /** Default reports/allure-results. */
  allureDir?: string;
  /** Default reports/html/index.html. */
  outFile?: string;
}

export type { Verdict } from './verdict.ts';

// Budgets that keep the page printable and small even when a run attaches large evidence.
const TEXT_INLINE_MAX = 64 * 1024;
const IMAGE_INLINE_MAX = 1536 * 1024;
const INLINE_TOTAL_MAX = 12 * 1024 * 1024;
const DESCRIBE_JSON_MAX = 32 * 1024;
const STEP_DEPTH_MAX = 12;
const STEP_COUNT_MAX = 500;
const PLOT_POINTS_MAX = 800;
const WARN_LIST_MAX = 8;

// ---------------------------------------------------------------------------------------------
// Entry point

export async function writeHtmlReport(opts: HtmlReportOptions = {}): Promise<{ outFile: string; warnings: string[] }> {
  const runJson = path.resolve(opts.runJson ?? DEFAULT_RUN_JSON);
  const allureDir = path.resolve(opts.allureDir ?? DEFAULT_ALLURE_DIR);
  const outFile = path.resolve(opts.outFile ?? DEFAULT_HTML_OUT);
  const warnings: string[] = [];

  let bytes: Buffer;
  try {
    bytes = await readFile(runJson);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      throw new ReportError('HIL_REPORT_RUN_JSON_MISSING', `run record not found: ${runJson} (run the suites first: hil run)`, { cause: err });
    }
    throw new ReportError('HIL_REPORT_RUN_JSON_UNREADABLE', `cannot read run record ${runJson}: ${errText(err)}`, { cause: err });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new ReportError('HIL_REPORT_RUN_JSON_UNREADABLE', `run record ${runJson} is not valid JSON: ${errText(err)}`, { cause: err });
  }
  if (!isRecord(raw)) {
    throw new ReportError('HIL_REPORT_RUN_JSON_UNREADABLE', `run record ${runJson} is not a JSON object`);
  }

  const run = normalizeRun(raw, warnings);
  const allure = await loadAllure(allureDir, warnings);
  const matches = matchAllure(run.tests, allure.results, warnings);
  const budget = { left: INLINE_TOTAL_MAX };
  const ctx: RenderContext = {
    run,
    runJsonSha256: createHash('sha256').update(bytes).digest('hex'),
    allureDir,
    allureEnv: allure.environment,
    matches,
    warnings,
    budget,
    attachmentCache: new Map(),
  };
  // Attachments are read before rendering so rendering itself stays synchronous and pure.
  await preloadAttachments(ctx);
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

// ---------------------------------------------------------------------------------------------
// Counts for display (the verdict itself comes from verdict.ts, shared with the CLI exit status)

interface Counts {
  total: number;
  passed: number;
  failed: number;
  errored: number;
  skipped: number;
  expectedFailures: number;
  unexpectedPasses: number;
  duration_ms: number;
}

function countTests(tests: readonly RunTest[]): Counts {
  const c: Counts = { total: 0, passed: 0, failed: 0, errored: 0, skipped: 0, expectedFailures: 0, unexpectedPasses: 0, duration_ms: 0 };
  for (const t of tests) {
    c.total++;
    c[t.state]++;
    c.duration_ms += t.duration_ms;
    if (t.expected_failure && (t.state === 'failed' || t.state === 'errored')) c.expectedFailures++;
    if (t.unexpected_pass) c.unexpectedPasses++;
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// run.json, read defensively: the type says what the harness writes, but a report must still render
// a record from an older or half-written harness, saying what it had to guess.

const STATES: readonly TestState[] = ['passed', 'failed', 'skipped', 'errored'];
const KINDS: readonly RunTest['kind'][] = ['contract', 'profile', 'unit'];
const OUTCOMES: readonly NonNullable<CoverageEntry['outcome']>[] = ['passed', 'failed', 'skipped', 'not_run'];

function normalizeRun(raw: Record<string, unknown>, warnings: string[]): RunRecord {
  const problems: string[] = [];
  const str = (v: unknown, what: string, fallback = ''): string => {
    if (typeof v === 'string') return v;
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    if (v !== undefined) problems.push(`${what} is not a string`);
    else problems.push(`${what} is missing`);
    return fallback;
  };
  const num = (v: unknown, what: string): number => {
    if (typeof v === 'number' && Number.isFinite(v)) return v;
    if (v !== undefined) problems.push(`${what} is not a number`);
    return 0;
  };
  const strList = (v: unknown, what: string): string[] => {
    if (v === undefined) return [];
    if (!Array.isArray(v)) {
      problems.push(`${what} is not a list`);
      return [];
    }
    return v.map((x) => (typeof x === 'string' ? x : JSON.stringify(x) ?? String(x)));
  };

  if (raw.schema !== 'cell-hil.run.v1') warnings.push(`run.json: schema is ${JSON.stringify(raw.schema) ?? 'missing'}, expected "cell-hil.run.v1"; rendering what is there`);

  const target = isRecord(raw.target) ? raw.target : {};
  if (!isRecord(raw.target)) problems.push('target is missing');
  const env = isRecord(raw.environment) ? raw.environment : {};
  if (!isRecord(raw.environment)) problems.push('environment is missing');

  const tests: RunTest[] = [];
  if (!Array.isArray(raw.tests)) problems.push('tests is not a list');
  else
    raw.tests.forEach((t, i) => {
      if (!isRecord(t)) {
        problems.push(`tests[${i}] is not an object`);
        return;
      }
      const w = `tests[${i}]`;
      let state = t.state as TestState;
      if (!STATES.includes(state)) {
        problems.push(`${w}.state ${JSON.stringify(t.state)} is not one of ${STATES.join(', ')}; shown as errored`);
        state = 'errored';
      }
      const kind = KINDS.includes(t.kind as RunTest['kind']) ? (t.kind as RunTest['kind']) : 'contract';
      if (kind !== t.kind) problems.push(`${w}.kind ${JSON.stringify(t.kind)} is unknown; shown as contract`);
      const name = str(t.name, `${w}.name`, '(unnamed)');
      const rt: RunTest = {
        file: str(t.file, `${w}.file`, '(unknown file)'),
        project: typeof t.project === 'string' ? t.project : '',
        name,
        fullName: typeof t.fullName === 'string' ? t.fullName : name,
        state,
        duration_ms: Math.max(0, num(t.duration_ms, `${w}.duration_ms`)),
        covers: strList(t.covers, `${w}.covers`),
        kind,
      };
      if (typeof t.skip_reason === 'string') rt.skip_reason = t.skip_reason;
      if (t.errors !== undefined) rt.errors = strList(t.errors, `${w}.errors`);
      if (typeof t.expected_failure === 'string') rt.expected_failure = t.expected_failure;
      if (t.unexpected_pass === true) rt.unexpected_pass = true;
      tests.push(rt);
    });

  const coverage: CoverageEntry[] = [];
  if (!Array.isArray(raw.coverage)) problems.push('coverage is not a list');
  else
    raw.coverage.forEach((c, i) => {
      if (!isRecord(c)) {
        problems.push(`coverage[${i}] is not an object`);
        return;
      }
      const w = `coverage[${i}]`;
      const id = str(c.id, `${w}.id`, `(entry ${i})`);
      const ce: CoverageEntry = {
        id,
        family: typeof c.family === 'string' && c.family ? c.family : id.includes(':') ? id.slice(0, id.indexOf(':')) : 'other',
        doc: typeof c.doc === 'number' ? c.doc : 0,
        section: typeof c.section === 'string' ? c.section : '',
        title: typeof c.title === 'string' ? c.title : '',
        status: c.status === 'covered' ? 'covered' : 'pending',
        tests: strList(c.tests, `${w}.tests`),
      };
      if (c.status !== 'covered' && c.status !== 'pending') problems.push(`${w}.status ${JSON.stringify(c.status)} is unknown; shown as pending`);
      if (OUTCOMES.includes(c.outcome as NonNullable<CoverageEntry['outcome']>)) ce.outcome = c.outcome as CoverageEntry['outcome'];
      if (typeof c.reason === 'string') ce.reason = c.reason;
      coverage.push(ce);
    });

  const gateRaw = isRecord(raw.gate) ? raw.gate : undefined;
  if (!gateRaw) problems.push('gate is missing; treated as failed');
  const gate = { ok: gateRaw?.ok === true, problems: strList(gateRaw?.problems, 'gate.problems') };
  if (gateRaw && typeof gateRaw.ok !== 'boolean') problems.push('gate.ok is not a boolean; treated as failed');
  if (!gate.ok && gate.problems.length === 0) gate.problems.push('gate result missing or not ok, with no problem listed');

  const sumRaw = isRecord(raw.summary) ? raw.summary : {};
  const summary = {
    passed: num(sumRaw.passed, 'summary.passed'),
    failed: num(sumRaw.failed, 'summary.failed'),
    skipped: num(sumRaw.skipped, 'summary.skipped'),
    errored: num(sumRaw.errored, 'summary.errored'),
    duration_ms: num(sumRaw.duration_ms, 'summary.duration_ms'),
  };
  // The reporter's summary counts failures and errors the expectation file does not list, as verdict.ts does.
  const c = verdictCounts(tests);
  if (isRecord(raw.summary)) {
    const diffs = (['passed', 'failed', 'skipped', 'errored'] as const).filter((k) => summary[k] !== c[k]).map((k) => `${k} ${summary[k]} vs ${c[k]}`);
    if (diffs.length) warnings.push(`run.json: summary counts disagree with the tests list (${diffs.join(', ')}); the report counts the tests list`);
  }

  const simulated = target.simulated;
  const record: RunRecord = {
    schema: 'cell-hil.run.v1',
    command: str(raw.command, 'command', '(not recorded)'),
    started_at: str(raw.started_at, 'started_at'),
    finished_at: str(raw.finished_at, 'finished_at'),
    target: {
      name: str(target.name, 'target.name', '(unknown)'),
      driver: str(target.driver, 'target.driver', '(unknown)'),
      address: str(target.address, 'target.address', '(unknown)'),
      simulated: typeof simulated === 'boolean' ? simulated : null,
      describe: target.describe,
      ...(isRecord(target.replay) ? { replay: target.replay as unknown as NonNullable<RunRecord['target']['replay']> } : {}),
      ...(isRecord(target.recording) ? { recording: target.recording as unknown as NonNullable<RunRecord['target']['recording']> } : {}),
    },
    environment: {
      machine_sha256: str(env.machine_sha256, 'environment.machine_sha256'),
      configuration_sha256: str(env.configuration_sha256, 'environment.configuration_sha256'),
      deployment_sha256: str(env.deployment_sha256, 'environment.deployment_sha256'),
      package_version: str(env.package_version, 'environment.package_version'),
      git_revision: str(env.git_revision, 'environment.git_revision'),
      node: str(env.node, 'environment.node'),
      platform: str(env.platform, 'environment.platform'),
      hostname: str(env.hostname, 'environment.hostname'),
    },
    tests,
    coverage,
    summary,
    gate,
  };
  if (problems.length) warnings.push(`run.json: ${problems.length} field problem${plural(problems.length)}: ${listSome(problems)}`);
  return record;
}

// ---------------------------------------------------------------------------------------------
// Allure results (allure-vitest 3.12): <uuid>-result.json, <uuid>-attachment.<ext>, environment.properties

interface AllureAttachment {
  name: string;
  source: string;
  type: string;
}

interface AllureStep {
  name: string;
  status: string;
  start?: number;
  stop?: number;
  message?: string;
  steps: AllureStep[];
  attachments: AllureAttachment[];
}

interface AllureResult {
  file: string;
  uuid: string;
  name: string;
  fullName: string;
  status: string;
  message?: string;
  trace?: string;
  labels: { name: string; value: string }[];
  parameters: { name: string; value: string }[];
  steps: AllureStep[];
  attachments: AllureAttachment[];
  start?: number;
  stop?: number;
}

async function loadAllure(dir: string, warnings: string[]): Promise<{ results: AllureResult[]; environment: [string, string][] }> {
  const results: AllureResult[] = [];
  let environment: [string, string][] = [];
  let names: string[];
  try {
    names = (await readdir(dir)).sort(cmp);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    warnings.push(
      code === 'ENOENT'
        ? `allure results directory not found (${dir}); tests are shown without steps and attachments`
        : `allure results directory unreadable (${dir}: ${errText(err)}); tests are shown without steps and attachments`,
    );
    return { results, environment };
  }
  const malformed: string[] = [];
  for (const name of names) {
    if (name === 'environment.properties') {
      try {
        environment = parseProperties(await readFile(path.join(dir, name), 'utf8'));
      } catch (err) {
        warnings.push(`allure: environment.properties unreadable: ${errText(err)}`);
      }
      continue;
    }
    if (!name.endsWith('-result.json')) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(path.join(dir, name), 'utf8'));
    } catch (err) {
      malformed.push(`${name} (${errText(err)})`);
      continue;
    }
    const r = toAllureResult(name, parsed);
    if (typeof r === 'string') malformed.push(`${name} (${r})`);
    else results.push(r);
  }
  for (const m of malformed) warnings.push(`allure: malformed result file ignored: ${m}`);
  return { results, environment };
}

function toAllureResult(file: string, v: unknown): AllureResult | string {
  if (!isRecord(v)) return 'not a JSON object';
  const name = typeof v.name === 'string' ? v.name : undefined;
  const fullName = typeof v.fullName === 'string' ? v.fullName : undefined;
  if (name === undefined && fullName === undefined) return 'neither name nor fullName';
  const details = isRecord(v.statusDetails) ? v.statusDetails : {};
  const steps = { count: 0 };
  const r: AllureResult = {
    file,
    uuid: typeof v.uuid === 'string' ? v.uuid : file.replace(/-result\.json$/, ''),
    name: name ?? fullName ?? '',
    fullName: fullName ?? '',
    status: typeof v.status === 'string' ? v.status : 'unknown',
    labels: pairs(v.labels),
    parameters: pairs(v.parameters),
    steps: toSteps(v.steps, 0, steps),
    attachments: toAttachments(v.attachments),
  };
  if (typeof details.message === 'string') r.message = details.message;
  if (typeof details.trace === 'string') r.trace = details.trace;
  if (typeof v.start === 'number') r.start = v.start;
  if (typeof v.stop === 'number') r.stop = v.stop;
  return r;
}

function pairs(v: unknown): { name: string; value: string }[] {
  if (!Array.isArray(v)) return [];
  const out: { name: string; value: string }[] = [];
  for (const x of v) if (isRecord(x) && typeof x.name === 'string') out.push({ name: x.name, value: typeof x.value === 'string' ? x.value : String(x.value ?? '') });
  return out;
}

function toSteps(v: unknown, depth: number, seen: { count: number }): AllureStep[] {
  if (!Array.isArray(v) || depth > STEP_DEPTH_MAX) return [];
  const out: AllureStep[] = [];
  for (const s of v) {
    if (!isRecord(s) || seen.count >= STEP_COUNT_MAX) continue;
    seen.count++;
    const d = isRecord(s.statusDetails) ? s.statusDetails : {};
    const step: AllureStep = {
      name: typeof s.name === 'string' ? s.name : '(unnamed step)',
      status: typeof s.status === 'string' ? s.status : 'unknown',
      steps: toSteps(s.steps, depth + 1, seen),
      attachments: toAttachments(s.attachments),
    };
    if (typeof s.start === 'number') step.start = s.start;
    if (typeof s.stop === 'number') step.stop = s.stop;
    if (typeof d.message === 'string' && d.message) step.message = d.message;
    out.push(step);
  }
  return out;
}

function toAttachments(v: unknown): AllureAttachment[] {
  if (!Array.isArray(v)) return [];
  const out: AllureAttachment[] = [];
  for (const a of v) {
    if (!isRecord(a) || typeof a.source !== 'string') continue;
    out.push({ name: typeof a.name === 'string' ? a.name : a.source, source: a.source, type: typeof a.type === 'string' ? a.type : '' });
  }
  return out;
}

function parseProperties(text: string): [string, string][] {
  const out: [string, string][] = [];
  for (const line of text.split(/\r?\n/)) {
    const l = line.trim();
    if (!l || l.startsWith('#') || l.startsWith('!')) continue;
    const m = /^((?:\\.|[^=:\s\\])+)\s*[=:\s]\s*(.*)$/.exec(l);
    if (m) out.push([m[1]!.replace(/\\(.)/g, '$1'), m[2]!.replace(/\\(.)/g, '$1')]);
    else out.push([l, '']);
  }
  return out;
}

// Matching: allure-vitest writes fullName as `<package name>:<file>#<describe ... test>` joined by
// spaces; run.json writes file and `describe > test`. Match on that key, then the exact fullName, then
// on the test name together with its `covers` labels.

function runKey(t: RunTest): string {
  return `${t.file}#${t.fullName.split(' > ').join(' ')}`;
}

function allureKey(r: AllureResult): string | undefined {
  const hash = r.fullName.indexOf('#');
  if (hash < 0) return undefined;
  const left = r.fullName.slice(0, hash);
  const file = left.slice(left.lastIndexOf(':') + 1);
  return `${file}#${r.fullName.slice(hash + 1)}`;
}

function coversKey(name: string, covers: readonly string[]): string {
  return `${name}\u0000${[...covers].sort(cmp).join('\u0000')}`;
}

function matchAllure(tests: readonly RunTest[], results: readonly AllureResult[], warnings: string[]): Map<RunTest, AllureResult> {
  const byKey = new Map<string, AllureResult[]>();
  const add = (k: string | undefined, r: AllureResult): void => {
    if (k === undefined) return;
    const list = byKey.get(k);
    if (list) list.push(r);
    else byKey.set(k, [r]);
  };
  for (const r of results) {
    add(allureKey(r), r);
    if (r.fullName) add(`=${r.fullName}`, r);
    const covers = r.labels.filter((l) => l.name === 'covers').map((l) => l.value);
    if (covers.length) add(`c${coversKey(r.name, covers)}`, r);
  }
  const matches = new Map<RunTest, AllureResult>();
  const used = new Set<AllureResult>();
  const unmatched: string[] = [];
  for (const t of tests) {
    const keys = [runKey(t), `=${t.fullName}`];
    if (t.covers.length) keys.push(`c${coversKey(t.name, t.covers)}`);
    let picked: AllureResult | undefined;
    for (const k of keys) {
      const cands = (byKey.get(k) ?? []).filter((r) => !used.has(r));
      if (cands.length) {
        picked = pickBest(cands, t.state);
        break;
      }
    }
    if (picked) {
      matches.set(t, picked);
      used.add(picked);
    } else if (t.state !== 'skipped') unmatched.push(`${t.file} > ${t.fullName}`);
  }
  if (results.length > 0 && unmatched.length)
    warnings.push(`allure: no result for ${unmatched.length} test${plural(unmatched.length)} that ran: ${listSome(unmatched)}`);
  // Retries leave several results for one test; only results that match no test at all are worth a note.
  const keyOf = (r: AllureResult): string => allureKey(r) ?? (r.fullName || r.name);
  const usedKeys = new Set([...used].map(keyOf));
  const orphans = [...new Set(results.filter((r) => !used.has(r)).map(keyOf))].filter((k) => !usedKeys.has(k));
  if (orphans.length) warnings.push(`allure: ${orphans.length} result${plural(orphans.length)} match no test in run.json (ignored): ${listSome(orphans)}`);
  return matches;
}

function pickBest(cands: AllureResult[], state: TestState): AllureResult {
  const want = state === 'errored' ? 'broken' : state;
  return [...cands].sort((a, b) => {
    const sa = a.status === want ? 0 : 1;
    const sb = b.status === want ? 0 : 1;
    if (sa !== sb) return sa - sb;
    const ta = a.stop ?? 0;
    const tb = b.stop ?? 0;
    if (ta !== tb) return tb - ta;
    return cmp(a.uuid, b.uuid);
  })[0]!;
}

// ---------------------------------------------------------------------------------------------
// Attachments

type LoadedAttachment =
  | { kind: 'text'; text: string; truncated: boolean; size: number }
  | { kind: 'image'; dataUri: string; size: number }
  | { kind: 'listed'; note: string; size?: number };

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/svg+xml']);
const TEXT_TYPES = new Set(['text/plain', 'text/csv', 'text/tab-separated-values', 'application/json', 'application/xml', 'text/xml', 'text/html', 'text/css', 'text/uri-list', 'application/vnd.allure.http+json']);

interface RenderContext {
  run: RunRecord;
  runJsonSha256: string;
  allureDir: string;
  allureEnv: [string, string][];
  matches: Map<RunTest, AllureResult>;
  warnings: string[];
  budget: { left: number };
  attachmentCache: Map<string, LoadedAttachment>;
}

function attachmentsOf(r: AllureResult): AllureAttachment[] {
  const out: AllureAttachment[] = [...r.attachments];
  const walk = (steps: AllureStep[]): void => {
    for (const s of steps) {
      out.push(...s.attachments);
      walk(s.steps);
    }
  };
  walk(r.steps);
  return out;
}

/** Which tests show their evidence: every failed or errored test, then tests with images or plots. */
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

async function preloadAttachments(ctx: RenderContext): Promise<void> {
  const { failures, others } = evidenceTests(ctx);
  const missing: string[] = [];
  const load = async (a: AllureAttachment, onlyPlots: boolean): Promise<void> => {
    if (ctx.attachmentCache.has(a.source)) return;
    if (onlyPlots && !(IMAGE_TYPES.has(a.type) || a.type === 'text/csv')) return;
    if (path.basename(a.source) !== a.source || a.source.startsWith('.')) {
      ctx.attachmentCache.set(a.source, { kind: 'listed', note: 'refused: source is not a plain file name' });
      ctx.warnings.push(`allure: attachment source ${JSON.stringify(a.source)} is not a plain file name; not read`);
      return;
    }
    const isImage = IMAGE_TYPES.has(a.type);
    const isText = TEXT_TYPES.has(a.type) || a.type.startsWith('text/') || a.type.endsWith('+json');
    if (!isImage && !isText) {
      ctx.attachmentCache.set(a.source, { kind: 'listed', note: `${a.type || 'unknown type'}: not shown inline` });
      return;
    }
    let data: Buffer;
    try {
      data = await readFile(path.join(ctx.allureDir, a.source));
    } catch (err) {
      ctx.attachmentCache.set(a.source, { kind: 'listed', note: 'file missing from the allure results' });
      missing.push(`${a.source} (${(err as NodeJS.ErrnoException).code ?? errText(err)})`);
      return;
    }
    if (isImage) {
      const encoded = Math.ceil(data.length / 3) * 4;
      if (data.length > IMAGE_INLINE_MAX || encoded > ctx.budget.left) {
        ctx.attachmentCache.set(a.source, { kind: 'listed', note: `image too large to inline (${fmtBytes(data.length)}); see allure-results/${a.source}`, size: data.length });
        return;
      }
      ctx.budget.left -= encoded;
      ctx.attachmentCache.set(a.source, { kind: 'image', dataUri: `data:${a.type};base64,${data.toString('base64')}`, size: data.length });
      return;
    }
    if (data.includes(0)) {
      ctx.attachmentCache.set(a.source, { kind: 'listed', note: `binary content despite type ${a.type}; not shown`, size: data.length });
      return;
    }
    const keep = Math.min(data.length, TEXT_INLINE_MAX, Math.max(0, ctx.budget.left));
    if (keep === 0) {
      ctx.attachmentCache.set(a.source, { kind: 'listed', note: `report size budget used up; see allure-results/${a.source}`, size: data.length });
      return;
    }
    ctx.budget.left -= keep * 2; // shown as text and, for CSV, as a plot
    let text = data.subarray(0, keep).toString('utf8');
    if (keep < data.length) text = text.replace(/\uFFFD$/, '');
    if (a.type === 'application/json' && keep === data.length) {
      try {
        text = JSON.stringify(JSON.parse(text), null, 2);
      } catch {
        /* shown as it is */
      }
    }
    ctx.attachmentCache.set(a.source, { kind: 'text', text, truncated: keep < data.length, size: data.length });
  };
  for (const t of failures) {
    const r = ctx.matches.get(t);
    if (r) for (const a of attachmentsOf(r)) await load(a, false);
  }
  for (const t of others) {
    const r = ctx.matches.get(t);
    if (r) for (const a of attachmentsOf(r)) await load(a, true);
  }
  if (missing.length) ctx.warnings.push(`allure: ${missing.length} attachment file${plural(missing.length)} missing: ${listSome(missing)}`);
}

// ---------------------------------------------------------------------------------------------
// Rendering

function renderReport(ctx: RenderContext): string {
  const { run } = ctx;
  const counts = countTests(run.tests);
  const v = verdictOf(run);
  const verdict = v.verdict;
  // Sections render first so that warnings they add (Describe cross-checks) reach the notes section.
  const body = [
    renderHeader(ctx, v, counts),
    renderEnvironment(ctx),
    renderSummary(ctx, counts),
    renderFailures(ctx),
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
    renderNav(),
    '<main>',
    ...body.slice(0, 1),
    notes,
    ...body.slice(1),
    `<footer>Rendered from run.json sha256 <code>${esc(ctx.runJsonSha256)}</code> and ${ctx.matches.size} Allure result${plural(ctx.matches.size)}. The same input renders the same file.</footer>`,
    '</main>',
    `<script>${JS}</script>`,
    '</body></html>',
    '',
  ].join('\n');
}

function renderNav(): string {
  const items: [string, string][] = [
    ['top', 'Verdict'],
    ['environment', 'Environment'],
    ['summary', 'Summary'],
    ['failures', 'Failures'],
    ['matrix', 'Traceability'],
    ['tests', 'All tests'],
    ['gate', 'Gate'],
  ];
  return `<nav class="noprint">${items.map(([id, label]) => `<a href="#${id}">${label}</a>`).join('')}</nav>`;
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
    ['Duration', esc(fmtDuration(duration))],
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
  out.push(`<details><summary>Describe as recorded (JSON)</summary>${jsonBlock(ctx.run.target.describe)}</details>`);
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
  { key: 'skipped', label: 'Skipped', color: '#8c959f' },
] as const;

function renderSummary(ctx: RenderContext, c: Counts): string {
  const failedUnexpected = c.failed - ctx.run.tests.filter((t) => t.state === 'failed' && t.expected_failure).length;
  const erroredUnexpected = c.errored - ctx.run.tests.filter((t) => t.state === 'errored' && t.expected_failure).length;
  const tiles: [string, number, string, string][] = [
    ['Passed', c.passed, 'pass', c.unexpectedPasses ? `${c.unexpectedPasses} unexpected` : ''],
    // Failed and errored count what the verdict counts: outcomes the expectation file does not list.
    ['Failed', failedUnexpected, failedUnexpected ? 'fail' : 'zero', c.failed !== failedUnexpected ? `+${c.failed - failedUnexpected} expected` : ''],
    ['Errored', erroredUnexpected, erroredUnexpected ? 'error' : 'zero', c.errored !== erroredUnexpected ? `+${c.errored - erroredUnexpected} expected` : ''],
    ['Skipped', c.skipped, 'skip', ''],
    ['Expected failures', c.expectedFailures, 'zero', ''],
    ['Unexpected passes', c.unexpectedPasses, c.unexpectedPasses ? 'warn' : 'zero', ''],
  ];
  // Disjoint categories for the chart: an expected failure or unexpected pass is drawn once.
  const bars = {
    passed: c.passed - c.unexpectedPasses,
    unexpectedPasses: c.unexpectedPasses,
    failed: failedUnexpected,
    expectedFailures: c.expectedFailures,
    errored: erroredUnexpected,
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
    const fc = countTests(byFile.get(f)!);
    const seg = [
      { value: fc.passed, color: '#1a7f37' },
      { value: fc.failed, color: '#cf222e' },
      { value: fc.errored, color: '#bc4c00' },
      { value: fc.skipped, color: '#8c959f' },
    ];
    return `<tr><td><code>${esc(f)}</code></td><td>${fc.total}</td><td>${fc.passed}</td><td class="${fc.failed ? 'c-fail' : ''}">${fc.failed}</td><td class="${
      fc.errored ? 'c-error' : ''
    }">${fc.errored}</td><td>${fc.skipped}</td><td>${esc(fmtDuration(fc.duration_ms))}</td><td>${stackBar(seg, 140, 10)}</td></tr>`;
  });
  return `<section id="summary"><h2>Summary</h2>
<div class="tiles">${tiles
    .map(([label, n, cls, sub]) => `<div class="tile t-${cls}"><div class="n">${n}</div><div class="l">${label}</div>${sub ? `<div class="s">${esc(sub)}</div>` : '<div class="s">&nbsp;</div>'}</div>`)
    .join('')}</div>
<div class="cols"><div><h3>Outcomes</h3>${chart}</div><div><h3>Sum of test durations</h3><p class="big">${esc(fmtDuration(c.duration_ms))}</p><p class="muted small">Across ${c.total} test${plural(
    c.total,
  )} in ${files.length} file${plural(files.length)}; tests may run concurrently.</p></div></div>
<h3>Per file</h3>
<table class="grid num"><thead><tr><th>File</th><th>Tests</th><th>Passed</th><th>Failed</th><th>Errored</th><th>Skipped</th><th>Duration</th><th>Outcome</th></tr></thead><tbody>${fileRows.join(
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
  if (t.covers.length) out.push(`<div class="covers">Covers ${t.covers.map((c) => `<code class="chip">${esc(c)}</code>`).join(' ')}</div>`);
  if (failure) {
    const msgs = t.errors ?? [];
    if (msgs.length) out.push(msgs.map((m) => `<pre class="msg">${esc(m)}</pre>`).join(''));
    else if (!r?.message) out.push('<p class="muted">No failure message recorded.</p>');
    if (r?.message && !msgs.some((m) => m.includes(r.message!.trim().split('\n')[0]!))) out.push(`<pre class="msg">${esc(r.message)}</pre>`);
    if (r?.trace) out.push(`<details><summary>Stack trace</summary><pre class="trace">${esc(r.trace)}</pre></details>`);
  }
  if (!r) out.push('<p class="muted small">No Allure result matched this test: steps and attachments are not available.</p>');
  else {
    if (r.parameters.length)
      out.push(`<div class="small muted">Parameters: ${r.parameters.map((p) => `<code>${esc(p.name)}=${esc(p.value)}</code>`).join(' ')}</div>`);
    if (r.steps.length) out.push(`<details${failure ? ' open' : ''}><summary>Steps (${countSteps(r.steps)})</summary>${renderSteps(r.steps)}</details>`);
    const atts = attachmentsOf(r).filter((a) => failure || IMAGE_TYPES.has(a.type) || a.type === 'text/csv');
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
            : `<span class="reason">${c.reason ? esc(c.reason) : '<em>no reason recorded</em>'}</span>`;
        rows.push(
          `<tr data-s="${c.status} ${outcome}"><td><code>${esc(c.id)}</code></td><td class="small">${esc(c.title)}</td><td><span class="cs cs-${c.status}">${c.status}</span></td><td>${
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
<div class="filter noprint"><input type="search" placeholder="Filter ids, titles, tests…" data-filter="matrix-table" aria-label="Filter the matrix"><select data-filter-state="matrix-table" aria-label="Status"><option value="">all entries</option><option value="covered">covered</option><option value="pending">pending</option><option value="failed">failing</option><option value="not_run">covered, not run</option><option value="skipped">covered, skipped</option></select><span class="muted small" data-filter-count="matrix-table"></span></div>
<table class="grid matrix" id="matrix-table"><thead><tr><th>Entry</th><th>Title</th><th>Status</th><th>Outcome</th><th>Covering tests / pending reason</th></tr></thead><tbody>${rows.join('\n')}</tbody></table></section>`;
}

function renderTests(ctx: RenderContext): string {
  const tests = sortTests(ctx.run.tests, false);
  const rows = tests.map((t) => {
    const extra = t.expected_failure ? ` <span class="tag xf" title="${esc(t.expected_failure)}">expected</span>` : t.unexpected_pass ? ' <span class="tag up">unexpected pass</span>' : '';
    return `<tr data-s="${t.state} ${t.kind}"><td><code>${esc(t.file)}</code></td><td title="${esc(t.fullName)}">${esc(t.fullName)}</td><td>${esc(t.kind)}</td><td>${stateBadge(t.state)}${extra}</td><td class="r">${esc(
      fmtDuration(t.duration_ms),
    )}</td><td class="small">${t.covers.map((c) => esc(c)).join('<br>')}</td><td class="small">${t.skip_reason ? esc(t.skip_reason) : ''}</td></tr>`;
  });
  return `<section id="tests"><h2>All tests <span class="count">${tests.length}</span></h2>
<div class="filter noprint"><input type="search" placeholder="Filter files, names, covers…" data-filter="tests-table" aria-label="Filter the tests"><select data-filter-state="tests-table" aria-label="State"><option value="">all states</option><option value="passed">passed</option><option value="failed">failed</option><option value="errored">errored</option><option value="skipped">skipped</option><option value="contract">contract</option><option value="profile">profile</option><option value="unit">unit</option></select><span class="muted small" data-filter-count="tests-table"></span></div>
<table class="grid tests" id="tests-table"><thead><tr><th>File</th><th>Test</th><th>Kind</th><th>State</th><th>Duration</th><th>Covers</th><th>Skip reason</th></tr></thead><tbody>${rows.join('\n')}</tbody></table></section>`;
}

function renderGate(ctx: RenderContext): string {
  const g = ctx.run.gate;
  return `<section id="gate"><h2>Traceability gate</h2>${
    g.ok
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

// ---------------------------------------------------------------------------------------------
// Inline SVG plots

function barChart(items: { label: string; value: number; color: string }[]): string {
  const w = 520;
  const lw = 140;
  const rowH = 26;
  const max = Math.max(1, ...items.map((i) => i.value));
  const h = items.length * rowH + 4;
  const bars = items.map((it, i) => {
    const y = i * rowH + 4;
    const bw = it.value > 0 ? Math.max(2, Math.round(((w - lw - 50) * it.value) / max)) : 0;
    return `<text x="${lw - 8}" y="${y + 13}" text-anchor="end">${esc(it.label)}</text><rect x="${lw}" y="${y}" width="${bw}" height="18" rx="3" fill="${it.color}"/><text x="${lw + bw + 6}" y="${y + 13}" class="v">${it.value}</text>`;
  });
  return `<svg class="chart" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-label="Test outcomes"><line x1="${lw}" y1="0" x2="${lw}" y2="${h}" stroke="#d0d7de"/>${bars.join('')}</svg>`;
}

function stackBar(segs: { value: number; color: string }[], w: number, h: number): string {
  const total = segs.reduce((n, s) => n + s.value, 0);
  if (total === 0) return `<svg width="${w}" height="${h}" class="sbar"><rect width="${w}" height="${h}" rx="2" fill="#eaeef2"/></svg>`;
  let x = 0;
  const rects = segs
    .filter((s) => s.value > 0)
    .map((s) => {
      const sw = (w * s.value) / total;
      const r = `<rect x="${x.toFixed(1)}" width="${sw.toFixed(1)}" height="${h}" fill="${s.color}"/>`;
      x += sw;
      return r;
    });
  return `<svg width="${w}" height="${h}" class="sbar"><g>${rects.join('')}</g></svg>`;
}

const SERIES_COLORS = ['#0969da', '#cf222e', '#1a7f37', '#8250df'];

/** A line plot of a numeric CSV attachment: first column on x, up to four further numeric columns. */
function csvPlot(text: string, sep: string): string {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  if (lines.length < 3) return '';
  const header = lines[0]!.split(sep).map((s) => s.trim());
  const rows = lines.slice(1).map((l) => l.split(sep).map((s) => Number(s.trim())));
  const numericCols = header.map((_, i) => rows.every((r) => r.length > i && Number.isFinite(r[i]!)));
  if (!numericCols[0]) return '';
  const series = header.map((_, i) => i).filter((i) => i > 0 && numericCols[i]).slice(0, SERIES_COLORS.length);
  if (!series.length) return '';
  const stride = Math.max(1, Math.ceil(rows.length / PLOT_POINTS_MAX));
  const pts = rows.filter((_, i) => i % stride === 0 || i === rows.length - 1);
  const xs = pts.map((r) => r[0]!);
  const ys = pts.flatMap((r) => series.map((i) => r[i]!));
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (y0 === y1) [y0, y1] = [y0 - 1, y1 + 1];
  const W = 640;
  const H = 220;
  const L = 64;
  const B = 24;
  const px = (x: number): string => (L + ((x - x0) / (x1 - x0 || 1)) * (W - L - 10)).toFixed(1);
  const py = (y: number): string => (8 + (1 - (y - y0) / (y1 - y0)) * (H - B - 8)).toFixed(1);
  const lines2 = series.map((i, k) => `<polyline fill="none" stroke="${SERIES_COLORS[k]}" stroke-width="1.4" points="${pts.map((r) => `${px(r[0]!)},${py(r[i]!)}`).join(' ')}"/>`);
  const legendItems = series.map((i, k) => `<tspan fill="${SERIES_COLORS[k]}">■</tspan> ${esc(header[i]!)}  `).join('');
  return `<svg class="plot" viewBox="0 0 ${W} ${H + 18}" width="${W}" height="${H + 18}" role="img" aria-label="Plot">
<rect x="${L}" y="8" width="${W - L - 10}" height="${H - B - 8}" fill="#fff" stroke="#d0d7de"/>
<text x="${L - 6}" y="14" text-anchor="end">${esc(fmtNum(y1))}</text><text x="${L - 6}" y="${H - B}" text-anchor="end">${esc(fmtNum(y0))}</text>
<text x="${L}" y="${H - 8}">${esc(fmtNum(x0))}</text><text x="${W - 10}" y="${H - 8}" text-anchor="end">${esc(fmtNum(x1))}</text><text x="${(W + L) / 2}" y="${H - 8}" text-anchor="middle">${esc(header[0]!)}</text>
${lines2.join('')}<text x="${L}" y="${H + 12}">${legendItems}</text></svg>`;
}

function legend(items: [string, string][]): string {
  return items.map(([c, l]) => `<span class="lg"><i style="background:${c}"></i>${esc(l)}</span>`).join('');
}

// ---------------------------------------------------------------------------------------------
// Small helpers

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Code-unit order: locale-independent, so the output does not depend on the machine's locale. */
function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const STATE_ORDER: Record<TestState, number> = { errored: 0, failed: 1, passed: 2, skipped: 3 };

/** File then full name; with byState, errored first, then failures, then expected failures last. */
function sortTests(tests: readonly RunTest[], byState: boolean): RunTest[] {
  const rank = (t: RunTest): number => (byState ? STATE_ORDER[t.state] * 2 + (t.expected_failure ? 1 : 0) : 0);
  return [...tests].sort((a, b) => rank(a) - rank(b) || cmp(a.file, b.file) || cmp(a.fullName, b.fullName));
}

function stateBadge(s: TestState): string {
  const label = { passed: 'PASS', failed: 'FAIL', errored: 'ERROR', skipped: 'SKIP' }[s];
  return `<span class="badge b-${s}">${label}</span>`;
}

function cssToken(s: string): string {
  return s.toLowerCase().replace(/[^a-z0-9_-]/g, '_');
}

function scalar(v: unknown): string {
  if (v === undefined || v === null) return '<span class="muted">—</span>';
  if (typeof v === 'string') return esc(v);
  if (typeof v === 'number' || typeof v === 'boolean') return esc(String(v));
  const j = JSON.stringify(v) ?? String(v);
  return `<code>${esc(j.length > 200 ? `${j.slice(0, 200)}…` : j)}</code>`;
}

function jsonBlock(v: unknown): string {
  let j: string;
  try {
    j = JSON.stringify(v, null, 2) ?? String(v);
  } catch {
    j = String(v);
  }
  const cut = j.length > DESCRIBE_JSON_MAX;
  return `<pre class="json">${esc(cut ? j.slice(0, DESCRIBE_JSON_MAX) : j)}</pre>${cut ? `<p class="muted small">Truncated at ${fmtBytes(DESCRIBE_JSON_MAX)}.</p>` : ''}`;
}

function fmtDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(Math.round(s - m * 60)).padStart(2, '0')} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min`;
}

/** The recorded timestamp, plus its UTC reading when it parses; never the renderer's local time zone. */
function fmtTime(iso: string): string {
  if (!iso) return 'not recorded';
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return `${iso} (unparsed)`;
  const utc = new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC').replace(/Z$/, ' UTC');
  return utc === iso ? iso : `${utc} (${iso})`;
}

function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function fmtNum(n: number): string {
  if (Number.isInteger(n)) return String(n);
  return Math.abs(n) >= 1000 || Math.abs(n) < 0.01 ? n.toExponential(3) : n.toPrecision(4);
}

function plural(n: number): string {
  return n === 1 ? '' : 's';
}

function listSome(items: string[]): string {
  const shown = items.slice(0, WARN_LIST_MAX).join('; ');
  return items.length > WARN_LIST_MAX ? `${shown}; and ${items.length - WARN_LIST_MAX} more` : shown;
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// ---------------------------------------------------------------------------------------------
// Inline style and script (no external fonts, scripts or requests)

const CSS = `
:root{--fg:#1f2328;--mut:#656d76;--line:#d0d7de;--bg:#f6f8fa;--pass:#1a7f37;--fail:#cf222e;--err:#bc4c00;--skip:#8c959f;--blue:#0969da}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI","Helvetica Neue",Arial,sans-serif;color:var(--fg);background:#fff}
code,pre,.digest{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px}
nav{position:sticky;top:0;z-index:5;background:#24292f;padding:0 24px;display:flex;gap:4px}
nav a{color:#e6edf3;text-decoration:none;padding:10px 12px;font-size:13px}
nav a:hover{background:#32383f}
main{max-width:1240px;margin:0 auto;padding:24px}
h1{font-size:26px;margin:4px 0 14px}
h2{font-size:19px;margin:0 0 12px;padding-bottom:6px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:18px 0 8px}
h4{font-size:13px;margin:14px 0 6px;color:var(--mut);text-transform:uppercase;letter-spacing:.04em}
section{margin:0 0 34px}
.muted{color:var(--mut)} .small{font-size:12px} .big{font-size:26px;margin:6px 0}
.count{display:inline-block;font-size:12px;font-weight:600;background:var(--bg);border:1px solid var(--line);border-radius:10px;padding:1px 8px;vertical-align:middle;color:var(--mut)}
.head{display:grid;grid-template-columns:1fr 340px;gap:24px;margin-bottom:22px}
.eyebrow{font-size:12px;text-transform:uppercase;letter-spacing:.08em;color:var(--mut)}
.kv{display:grid;grid-template-columns:110px 1fr;gap:4px 12px;margin:0}
.kv dt{color:var(--mut)} .kv dd{margin:0;word-break:break-all}
.verdict{border-radius:8px;padding:16px 18px;color:#fff}
.verdict p{margin:6px 0 0;font-size:13px} .verdict ul{margin:8px 0 0;padding-left:18px;font-size:13px}
.verdict-label{font-size:12px;text-transform:uppercase;letter-spacing:.1em;opacity:.85}
.verdict-word{font-size:44px;font-weight:800;letter-spacing:.04em;line-height:1.1}
.headline{font-size:24px;line-height:1.25;margin:4px 0 2px} .sub{margin:0 0 10px;font-size:14px}
.cov-word{font-size:20px;font-weight:800;letter-spacing:.04em}
.coverage-line{margin-top:12px;padding-top:10px;border-top:1px solid rgba(255,255,255,.45)}
.cov-words{font-size:14px;margin:2px 0 6px}
.bar{height:8px;border-radius:4px;background:rgba(255,255,255,.35);overflow:hidden}.bar i{display:block;height:100%;background:#fff}
.v-pass{background:var(--pass)} .v-fail{background:var(--fail)} .v-error{background:var(--err)}
.sign{border:1px solid var(--line);border-radius:8px;padding:14px 18px;background:#fff}
.sign h2{border:0;margin:0 0 2px;padding:0;font-size:16px} .sign p{margin:0 0 10px;font-size:13px}
.sign-grid{display:grid;grid-template-columns:2fr 1fr 2fr;gap:16px 28px}
.sign-grid div{display:flex;flex-direction:column}
.sign-grid span{font-size:11px;text-transform:uppercase;letter-spacing:.06em;color:var(--mut)}
.sign-grid i{display:block;height:30px;border-bottom:1px solid #8c959f}
.sign-grid b{font-weight:normal;padding-top:8px}
.sign-grid .wide{grid-column:2/4}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:28px}
.cols>*,.head>*{min-width:0} .grid td{overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%}
.kvt th{text-align:left;font-weight:500;color:var(--mut);width:190px;padding:5px 10px 5px 0;vertical-align:top;border-bottom:1px solid #eaeef2}
.kvt td{padding:5px 0;border-bottom:1px solid #eaeef2;word-break:break-all}
.grid th,.grid td{border-bottom:1px solid #eaeef2;padding:5px 8px;text-align:left;vertical-align:top}
.grid thead th{background:var(--bg);border-bottom:1px solid var(--line);font-size:12px;color:var(--mut);font-weight:600;position:sticky;top:38px}
.grid.num td{font-variant-numeric:tabular-nums}
.grid td.r{text-align:right;white-space:nowrap}
.tiles{display:grid;grid-template-columns:repeat(6,1fr);gap:12px;margin-bottom:16px}
.tile{border:1px solid var(--line);border-radius:8px;padding:10px 14px;border-top-width:4px}
.tile .n{font-size:28px;font-weight:700;font-variant-numeric:tabular-nums}
.tile .l{font-size:12px;color:var(--mut);text-transform:uppercase;letter-spacing:.04em}
.tile .s{font-size:12px;color:var(--mut)}
.t-pass{border-top-color:var(--pass)} .t-fail{border-top-color:var(--fail)} .t-fail .n{color:var(--fail)} .t-error{border-top-color:var(--err)} .t-error .n{color:var(--err)}
.t-skip{border-top-color:var(--skip)} .t-warn{border-top-color:#d4a72c} .t-zero{border-top-color:var(--line)}
.chart text{font-size:12px;fill:#1f2328} .chart text.v{font-weight:600}
.plot{max-width:100%;height:auto;background:var(--bg);border-radius:6px} .plot text{font-size:11px;fill:#57606a}
.sbar{vertical-align:middle;border-radius:2px}
.badge{display:inline-block;min-width:46px;text-align:center;font-size:11px;font-weight:700;border-radius:4px;padding:1px 6px;color:#fff;letter-spacing:.03em}
.b-passed{background:var(--pass)} .b-failed{background:var(--fail)} .b-errored{background:var(--err)} .b-skipped{background:var(--skip)}
.tag{font-size:11px;border-radius:4px;padding:0 5px;margin-left:4px;border:1px solid}
.tag.xf{color:#8c2f39;border-color:#e8a0a6} .tag.up{color:#116329;border-color:#4ac26b}
.c-fail{color:var(--fail);font-weight:600} .c-error{color:var(--err);font-weight:600}
.card{border:1px solid var(--line);border-left:4px solid var(--skip);border-radius:6px;padding:12px 16px;margin:0 0 14px;background:#fff}
.card.s-failed{border-left-color:var(--fail)} .card.s-errored{border-left-color:var(--err)} .card.s-passed{border-left-color:var(--pass)}
.card-head{display:flex;gap:10px;align-items:flex-start} .card-head .badge{margin-top:2px}
.card-title{font-weight:600;font-size:15px}
.covers{margin:8px 0;font-size:12px;color:var(--mut)}
.chip{background:#ddf4ff;color:#0550ae;border-radius:10px;padding:1px 7px;font-size:11.5px}
pre{white-space:pre-wrap;word-break:break-word;margin:8px 0}
pre.msg{background:#ffebe9;border:1px solid #ffcecb;border-radius:6px;padding:8px 10px;color:#82071e}
pre.trace,pre.json,pre.att-text{background:var(--bg);border:1px solid #eaeef2;border-radius:6px;padding:8px 10px;max-height:360px;overflow:auto}
.xfail{background:#fff8c5;border:1px solid #eac54f;border-radius:6px;padding:6px 10px;margin:8px 0;font-size:13px}
details{margin:8px 0} summary{cursor:pointer;color:var(--blue);font-size:13px}
ol.steps{margin:6px 0;padding-left:22px;font-size:13px} ol.steps ol{padding-left:20px}
.st{font-size:10.5px;font-weight:700;text-transform:uppercase;border-radius:3px;padding:0 4px;color:#fff;background:var(--skip)}
.st-passed{background:var(--pass)} .st-failed{background:var(--fail)} .st-broken{background:var(--err)}
.step-msg{color:#82071e;font-size:12px;white-space:pre-wrap}
.atts{display:grid;gap:10px;margin-top:8px}
.att{border:1px solid #eaeef2;border-radius:6px;padding:8px 10px}
.att img{max-width:100%;border:1px solid #eaeef2;margin-top:6px}
.att-head{font-size:13px}
.ok-note{background:#dafbe1;border:1px solid #aceebb;border-radius:6px;padding:8px 12px;color:#116329}
.bad-note{background:#ffebe9;border:1px solid #ffcecb;border-radius:6px;padding:8px 12px;color:#82071e}
ul.problems li{color:#82071e;margin:2px 0}
ul.plain{padding-left:18px}
.notes{background:#fff8c5;border:1px solid #eac54f;border-radius:8px;padding:12px 16px}
.notes h2{border:0;padding:0;margin:0 0 4px;font-size:16px} .notes ul{margin:6px 0 0;padding-left:18px;font-size:13px}
.legend .lg{margin-right:14px;white-space:nowrap} .legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.filter{display:flex;gap:10px;align-items:center;margin:10px 0}
.filter input{flex:0 1 380px;padding:6px 10px;border:1px solid var(--line);border-radius:6px;font:inherit}
.filter select{padding:5px 8px;border:1px solid var(--line);border-radius:6px;font:inherit;background:#fff}
.matrix tr.g th{background:#24292f;color:#fff;font-size:13px;padding:7px 8px;position:static}
.matrix tr.g th .muted{color:#afb8c1;font-weight:normal;margin-left:8px}
.matrix tr.sg th{background:var(--bg);font-weight:600;font-size:12px;color:#424a53;padding:4px 8px}
.matrix td:first-child{width:26%;word-break:break-all} .matrix td:nth-child(2){width:24%} .matrix td:nth-child(3),.matrix td:nth-child(4){width:80px;white-space:nowrap}
.matrix td{padding:3px 8px}
.cs,.oc,.cap{font-size:11px;border-radius:10px;padding:1px 8px;font-weight:600}
.cs-covered{background:#dafbe1;color:#116329} .cs-pending{background:#eaeef2;color:#57606a}
.oc-passed{color:var(--pass)} .oc-failed{color:#fff;background:var(--fail)} .oc-skipped{color:#7d4e00;background:#fff8c5} .oc-not_run{color:#57606a;background:#eaeef2}
.cap-implemented{background:#dafbe1;color:#116329} .cap-interim{background:#fff8c5;color:#7d4e00} .cap-test_only{background:#ddf4ff;color:#0550ae} .cap-unimplemented{background:#eaeef2;color:#57606a}
.reason{color:#57606a;font-style:italic}
.tests td:nth-child(2){max-width:420px}
footer{margin-top:40px;padding-top:12px;border-top:1px solid var(--line);color:var(--mut);font-size:12px}
@media (max-width:900px){.head,.cols{grid-template-columns:1fr}.tiles{grid-template-columns:repeat(3,1fr)}}
@media print{nav,.noprint{display:none}main{max-width:none;padding:0}.grid thead th{position:static}section{break-inside:auto}.card,.sign,tr{break-inside:avoid}body{font-size:11px}pre{max-height:none!important}}
`;

// Filter boxes for the matrix and the tests table; opens every <details> before printing so the
// signed paper copy shows everything.
const JS = `
(function(){
  var inputs=document.querySelectorAll('input[data-filter]');
  Array.prototype.forEach.call(inputs,function(inp){
    var id=inp.getAttribute('data-filter'),table=document.getElementById(id);
    if(!table)return;
    var sel=document.querySelector('select[data-filter-state="'+id+'"]');
    var counter=document.querySelector('[data-filter-count="'+id+'"]');
    var rows=Array.prototype.slice.call(table.tBodies[0].rows);
    var text=rows.map(function(r){return r.textContent.toLowerCase();});
    function apply(){
      var q=inp.value.trim().toLowerCase(),s=sel?sel.value:'',shown=0,total=0,heads=[];
      rows.forEach(function(r,i){
        if(r.className==='g'||r.className==='sg'){
          if(r.className==='g')heads=[];
          heads=heads.filter(function(h){return h.className!==r.className;});
          heads.push(r);r.hidden=true;return;
        }
        total++;
        var st=' '+(r.getAttribute('data-s')||'')+' ';
        var ok=(!q||text[i].indexOf(q)>=0)&&(!s||st.indexOf(' '+s+' ')>=0);
        r.hidden=!ok;
        if(ok){shown++;heads.forEach(function(h){h.hidden=false;});}
      });
      if(counter)counter.textContent=(q||s)?shown+' of '+total+' shown':total+' rows';
    }
    inp.addEventListener('input',apply);
    if(sel)sel.addEventListener('change',apply);
    apply();
  });
  window.addEventListener('beforeprint',function(){
    Array.prototype.forEach.call(document.querySelectorAll('details'),function(d){d.open=true;});
  });
})();
`;
