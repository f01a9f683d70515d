// Reading reports/run.json for the report: defensively, since a reviewer must still get a report of a
// record from an older or half-written harness, with what had to be guessed said as warnings. Only a
// missing or unreadable run.json (nothing to report) throws, as a ReportError with a stable code.

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { RUN_SCHEMA, type CoverageEntry, type RunRecord, type RunTest, type TestState } from './run-types.ts';
import { countTests as verdictCounts } from './verdict.ts';
import { HarnessError } from '../errors.ts';
import { errText, isRecord, listSome, plural } from './format.ts';

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

/** Read and normalise a run record; the raw bytes' SHA-256 identifies it in the report's footer. */
export async function readRunRecord(runJson: string, warnings: string[]): Promise<{ run: RunRecord; sha256: string }> {
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
  return { run: normalizeRun(raw, warnings), sha256: createHash('sha256').update(bytes).digest('hex') };
}

const STATES: readonly TestState[] = ['passed', 'failed', 'skipped', 'errored'];
const KINDS: readonly RunTest['kind'][] = ['contract', 'profile', 'unit'];
const OUTCOMES: readonly NonNullable<CoverageEntry['outcome']>[] = ['passed', 'failed', 'informative', 'skipped', 'not_run'];

export function normalizeRun(raw: Record<string, unknown>, warnings: string[]): RunRecord {
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

  if (raw.schema !== RUN_SCHEMA && raw.schema !== 'cell-hil.run.v2' && raw.schema !== 'cell-hil.run.v1') warnings.push(`run.json: schema is ${JSON.stringify(raw.schema) ?? 'missing'}, expected "${RUN_SCHEMA}"; rendering what is there`);

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
      if (Array.isArray(t.expected_outcomes)) rt.expected_outcomes = strList(t.expected_outcomes, `${w}.expected_outcomes`) as NonNullable<RunTest['expected_outcomes']>;
      if (typeof t.host_too_slow === 'string') rt.host_too_slow = t.host_too_slow;
      if (isRecord(t.harness_lateness)) rt.harness_lateness = { p99_ms: num(t.harness_lateness.p99_ms, `${w}.harness_lateness.p99_ms`), max_ms: num(t.harness_lateness.max_ms, `${w}.harness_lateness.max_ms`) };
      // Kept so the report counts what the run's verdict counted: on an external target a failed profile
      // test and a profile check answered otherwise are informative, not failures (DESIGN.md rule 3).
      if (typeof t.informative === 'string') rt.informative = t.informative;
      if (t.profile_differences !== undefined) {
        const d = Array.isArray(t.profile_differences) ? t.profile_differences : [];
        if (!Array.isArray(t.profile_differences)) problems.push(`${w}.profile_differences is not a list`);
        const ok = d.filter((x): x is { profile: string; message: string } => isRecord(x) && typeof x.profile === 'string' && typeof x.message === 'string');
        if (ok.length !== d.length) problems.push(`${w}.profile_differences: ${d.length - ok.length} entries without a profile and a message`);
        if (ok.length) rt.profile_differences = ok.map((x) => ({ profile: x.profile, message: x.message }));
      }
      // Evidence is shown as far as it has the expected shape (harness/report/html.ts reads it defensively).
      if (isRecord(t.evidence) && Array.isArray(t.evidence.measurements)) rt.evidence = t.evidence as unknown as NonNullable<RunTest['evidence']>;
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
    schema: RUN_SCHEMA,
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
    ...(isRecord(raw.run_measurements) && Array.isArray(raw.run_measurements.measurements) ? { run_measurements: raw.run_measurements as unknown as NonNullable<RunRecord['run_measurements']> } : {}),
    ...(isRecord(raw.selection) && Array.isArray(raw.selection.filters) ? { selection: raw.selection as unknown as NonNullable<RunRecord['selection']> } : {}),
    ...(Array.isArray(raw.stale_expectations) ? { stale_expectations: strList(raw.stale_expectations, 'stale_expectations') } : {}),
    ...(isRecord(raw.host) && typeof raw.host.cores === 'number' ? { host: raw.host as unknown as NonNullable<RunRecord['host']> } : {}),
    ...(isRecord(raw.soak) && Array.isArray(raw.soak.measurements) ? { soak: raw.soak as unknown as NonNullable<RunRecord['soak']> } : {}),
    ...(Array.isArray(raw.shards) ? { shards: raw.shards.filter(isRecord) as unknown as NonNullable<RunRecord['shards']> } : {}),
    ...(isRecord(raw.model) && isRecord(raw.model.fuzz) ? { model: { fuzz: raw.model.fuzz as unknown as NonNullable<NonNullable<RunRecord['model']>['fuzz']> } } : {}),
  };
  if (problems.length) warnings.push(`run.json: ${problems.length} field problem${plural(problems.length)}: ${listSome(problems)}`);
  return record;
}
