// The harness's vitest reporter: one readable progress line per file, a summary, the traceability gate,
// reports/run.json for the HTML report, and a plain closing line "N passed, N failed, N skipped".
// FAIL (the target did not do what the documents say) is kept apart from ERROR (the harness or the
// environment broke), the OpenHTF habit, by the class of the error (harness/errors.ts); the run's verdict
// comes from harness/report/verdict.ts, the same function the exit status and the HTML report use.
// Writing outputs never aborts a run.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, hostname, loadavg } from 'node:os';
import { join, relative } from 'node:path';
import type { Reporter, TestCase, TestModule, Vitest } from 'vitest/node';
import type { SerializedError } from 'vitest';
import { computeCoverage } from '../catalogue/gate.ts';
import { stealSeconds } from '../sequencer.ts';
import { parseExact, stringifyExact } from '../oracle/json.ts';
import { RUN_SCHEMA, type Expectation, type HostRecord, type RecordingUse, type RunRecord, type RunTest } from './run-types.ts';
import { measurementText, runMeasurements } from './run-measurements.ts';
import { runSchemaProblems } from './run-schema.ts';
import { judge, ruleFor, staleExpectations, type ExpectationContext } from './expectations.ts';
import { closingLine, informativeOf, testStateOf, verdictOf } from './verdict.ts';
import { notSelected, selectionText } from './selection.ts';
import '../trace.ts';
import '../lateness.ts';

export type { Expectation } from './run-types.ts';

export interface HilReporterOptions {
  command: string;
  /** reports/ directory. */
  reportsDir: string;
  /** Apply the traceability gate (only when every suite was selected). */
  gate: boolean;
  targetName: string;
  /** The run replayed recordings (hil run --target replay): where from, in which mode. */
  replay?: { recordings: string; mode: string };
  /** The run recorded every test (hil run --record DIR). */
  recording?: { dir: string };
  /** This target's expectations: full test name (file > name) -> allowed outcomes (harness/report/expectations.ts). */
  expectations?: Record<string, Expectation>;
  /** The machine configuration's file name without .json, for expectation conditions (`when.machine`). */
  machine?: string;
  /** What the run selected (file filters, shard, name pattern); a whole run has none. */
  selection?: NonNullable<RunRecord['selection']>;
  /** `hil merge`: the shards' own records (target, environment and times come from them, not from this process). */
  mergedFrom?: RunRecord[];
  write?: (s: string) => void;
}

export class HilReporter implements Reporter {
  private root = process.cwd();
  private started = new Date();
  private context: ExpectationContext = { target: '' };
  record?: RunRecord;
  private readonly write: (s: string) => void;

  constructor(private readonly o: HilReporterOptions) {
    this.write = o.write ?? ((s) => process.stdout.write(s));
  }

  /** The 1-minute load average, sampled over the run (the report's environment: host load). */
  private load: number[] = [];
  private loadTimer: NodeJS.Timeout | undefined;

  /** The host's CPU steal counter when the run started (stealSeconds), s. */
  private steal0: number | undefined;

  onInit(vitest: Vitest): void {
    this.root = vitest.config.root;
    this.started = new Date();
    this.load = [loadavg()[0]!];
    this.steal0 = stealNow();
    this.loadTimer = setInterval(() => this.load.push(loadavg()[0]!), 5_000);
    this.loadTimer.unref();
    rmSync(join(this.o.reportsDir, '.run'), { recursive: true, force: true });
  }

  /**
   * A finished test as the summary and the verdict count it: an expected outcome and an informative profile
   * difference are neither passed nor failed, and a test the harness could not judge is errored. The
   * per-file line and the progress line (harness/report/progress.ts) count with it, so that every number
   * printed in one run agrees with the totals.
   */
  outcomeOf(t: TestCase): 'passed' | 'failed' | 'errored' | 'expected' | 'skipped' {
    if (!this.context.target) this.context = this.contextOf(this.readTarget());
    const x = this.toRunTest(t, relative(this.root, t.module.moduleId));
    if (x.state === 'passed') return 'passed';
    if (x.state === 'skipped') return 'skipped';
    if (x.expected_failure || x.informative) return 'expected';
    return x.state === 'failed' ? 'failed' : 'errored';
  }

  onTestModuleEnd(m: TestModule): void {
    const count = { passed: 0, failed: 0, errored: 0, expected: 0, skipped: 0 };
    for (const t of m.children.allTests()) count[this.outcomeOf(t)]++;
    const { passed, failed, errored, expected, skipped } = count;
    const setup = setupErrors(m);
    // Errored as a file only when vitest failed it for something no test of it carries (an import, a file-level
    // hook): a test vitest failed that is booked as expected or informative leaves the module "failed" too.
    const broken = fileErrored(m, setup.length);
    const mark = failed ? 'FAIL' : errored || broken ? 'ERR ' : 'ok  ';
    const ms = Math.round(m.diagnostic().duration);
    const err = errored ? `, ${errored} errored` : '';
    const exp = expected ? `, ${expected} expected or informative` : '';
    this.write(`${mark} ${m.relativeModuleId.padEnd(48)} ${passed} passed, ${failed} failed${err}${exp}, ${skipped} skipped  ${ms} ms${broken ? '  (file errored)' : ''}\n`);
    // A file-level or set-up error is said here with its message, not only in junit.xml.
    for (const e of [...m.errors(), ...setup.map((x) => x.error)]) this.write(`     ${firstLine(errorText(e))}\n`);
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandled: ReadonlyArray<SerializedError>): void {
    const tests: RunTest[] = [];
    const shards = this.o.mergedFrom;
    const target: Record<string, unknown> = shards?.length ? { ...shards[0]!.target } : this.readTarget();
    const d = (target.describe ?? {}) as Record<string, unknown>;
    this.context = this.contextOf(target);
    // A name pattern (hil run --grep) leaves the other tests skipped without a note: they were not selected.
    const grep = this.o.selection?.grep !== undefined ? new RegExp(this.o.selection.grep) : undefined;
    const unselected = (t: TestCase): boolean => grep !== undefined && t.result().state === 'skipped' && !(t.result() as { note?: string }).note && !grep.test(t.fullName);
    for (const m of modules) {
      const file = relative(this.root, m.moduleId);
      for (const t of m.children.allTests()) if (!unselected(t)) tests.push(this.toRunTest(t, file));
      // A module-level error (an import, a file-level hook): one "(file)" entry with its messages. A failed
      // describe-level hook is booked on the tests it kept from running (toRunTest), with its message.
      const setup = setupErrors(m);
      if (fileErrored(m, setup.length)) {
        tests.push({
          file,
          project: m.project.name,
          name: '(file)',
          fullName: '(file)',
          state: 'errored',
          duration_ms: Math.round(m.diagnostic().duration),
          covers: [],
          kind: 'unit',
          errors: m.errors().length ? m.errors().map(errorText) : ['the file failed without an error message from vitest (see junit.xml)'],
        });
      }
    }
    for (const e of unhandled) {
      tests.push({ file: '', project: '', name: '(unhandled error)', fullName: '(unhandled error)', state: 'errored', duration_ms: 0, covers: [], kind: 'unit', errors: [errorText(e)] });
    }

    const cov = computeCoverage(tests.filter((t) => t.kind !== 'unit').map((t) => ({ fullName: `${t.file} > ${t.fullName}`, covers: t.covers, state: t.state, ...(t.informative ? { informative: true } : {}) })));
    const gateProblems = this.o.gate ? cov.problems : cov.unknownCovered.map((u) => `${u.test} covers ${u.id}, which is not in the catalogue`);
    const count = (s: string) => tests.filter((t) => t.state === s && !t.expected_failure && !t.informative).length;
    const rec: RunRecord = {
      schema: RUN_SCHEMA,
      command: this.o.command,
      started_at: shards?.length ? shards.map((r) => r.started_at).sort()[0]! : this.started.toISOString(),
      // A merged record spans its shards: from the first start to the last finish, not to the merge.
      finished_at: shards?.length ? shards.map((r) => r.finished_at).sort().at(-1)! : new Date().toISOString(),
      target: {
        name: this.o.targetName,
        driver: String(target.driver ?? 'unknown'),
        address: String(target.address ?? ''),
        simulated: typeof d.simulated === 'boolean' ? d.simulated : null,
        ...(target.describe !== undefined ? { describe: target.describe } : {}),
        ...(this.o.replay ? { replay: { ...this.o.replay, tests: this.readRecordingUses() } } : {}),
        ...(this.o.recording ? { recording: { ...this.o.recording, tests: this.readRecordingUses() } } : {}),
      },
      environment: shards?.length ? { ...shards[0]!.environment } : {
        machine_sha256: String(d.machine_sha256 ?? ''),
        configuration_sha256: String(d.configuration_sha256 ?? ''),
        deployment_sha256: String(d.deployment_sha256 ?? ''),
        package_version: packageVersion(this.root),
        git_revision: gitRevision(this.root),
        node: process.version,
        platform: `${process.platform} ${process.arch}`,
        hostname: hostname(),
      },
      tests,
      coverage: cov.entries,
      summary: {
        passed: count('passed'),
        failed: count('failed'),
        skipped: count('skipped'),
        errored: count('errored'),
        // Merged: the time the shards ran, added up (they may have run one after another or side by side).
        duration_ms: shards?.length ? shards.reduce((a, r) => a + r.summary.duration_ms, 0) : Date.now() - this.started.getTime(),
      },
      gate: { ok: gateProblems.length === 0, problems: gateProblems },
      run_measurements: runMeasurements(tests),
      host: shards?.length && shards[0]!.host ? shards[0]!.host : this.hostRecord(tests),
      ...(this.o.selection ? { selection: this.o.selection } : {}),
      ...(shards?.length
        ? { shards: shards.map((r) => ({ command: r.command, hostname: r.environment.hostname, target: r.target.name, started_at: r.started_at, finished_at: r.finished_at, duration_ms: r.summary.duration_ms, ...(r.selection ? { selection: r.selection } : {}) })) }
        : {}),
    };
    const stale = staleExpectations(rec, this.o.expectations ?? {});
    if (stale.length) rec.stale_expectations = stale;
    // Every record written is checked against the schema readers rely on (hil report, compare, merge).
    const schemaProblems = runSchemaProblems(rec);
    if (schemaProblems.length) rec.gate = { ok: false, problems: [...rec.gate.problems, ...schemaProblems.map((p) => `run.json does not match harness/report/run.schema.json: ${p}`)] };
    this.record = rec;
    try {
      mkdirSync(this.o.reportsDir, { recursive: true });
      writeFileSync(join(this.o.reportsDir, 'run.json'), stringifyExact(rec));
    } catch (e) {
      this.write(`warning: could not write run.json: ${(e as Error).message}\n`);
    }
    this.summary(rec);
  }

  private toRunTest(t: TestCase, file: string): RunTest {
    const r = t.result();
    const meta = t.meta();
    const covers = meta.covers ?? [];
    const kind: RunTest['kind'] = t.project.name === 'unit' ? 'unit' : (meta.kind ?? 'contract');
    const fullName = t.fullName;
    // A test a failed set-up hook kept from running (vitest skips it without a note) ends as that hook did,
    // with the hook's message: its outcome is the set-up's, never a silent skip.
    const setup = r.state === 'skipped' && !r.note ? setupErrorOf(t) : undefined;
    const errs = setup ? setup.errors : (r.errors ?? []);
    const vstate = setup ? 'failed' : r.state;
    const state = testStateOf(vstate, errs, { replayUnheld: meta.replayUnheld, hostTooSlow: meta.hostTooSlow, equipmentLoss: meta.equipmentLoss });
    // The replay's lost hold first: it is why the test errored (testStateOf).
    const ordered = meta.replayUnheld ? [...errs].sort((a, b) => Number((b as { code?: unknown }).code === 'HIL_ERR_REPLAY_UNHELD') - Number((a as { code?: unknown }).code === 'HIL_ERR_REPLAY_UNHELD')) : errs;
    const texts = ordered.map(errorText);
    const errors = vstate === 'failed' ? [...(meta.hostTooSlow ? [`HIL_ERR_HOST_TOO_SLOW: ${meta.hostTooSlow}`] : []), ...(meta.equipmentLoss ? [`HIL_ERR_BENCH_BOX: ${meta.equipmentLoss}`] : []), ...texts.map((e) => (setup ? `set-up of "${setup.suite}" failed: ` : '') + e)] : undefined;
    const out: RunTest = { file, project: t.project.name, name: t.name, fullName, state, duration_ms: Math.round(t.diagnostic()?.duration ?? 0), covers, kind };
    if (errors) out.errors = errors;
    // From the errors as thrown, not as prefixed: a set-up hook that ended in HIL_ERR_HOST_TOO_SLOW makes
    // each test it kept from running that ERROR too, and CI's retry rule runs them again.
    const tooSlow = errors ? hostTooSlowOf(meta.hostTooSlow, texts) : undefined;
    if (tooSlow && state === 'errored') out.host_too_slow = tooSlow;
    if (meta.lateness) out.harness_lateness = meta.lateness;
    if (meta.evidence) out.evidence = meta.evidence;
    // A skip without a note stays without a reason: the verdict calls that out (never silently).
    if (state === 'skipped') {
      const reason = (r as { note?: string }).note ?? (t.options.mode === 'todo' ? 'todo' : undefined);
      if (reason) out.skip_reason = reason;
    }
    if (meta.profileDifferences?.length) out.profile_differences = meta.profileDifferences;
    const informative = informativeOf(out, this.o.targetName);
    if (informative) out.informative = informative;
    // The outcome against the set the expectation file allows: inside it, expected; outside it, the outcome
    // keeps its own class (an ERROR where FAIL was expected stays an ERROR and counts against the verdict).
    const rule = ruleFor(this.o.expectations?.[`${file} > ${fullName}`], this.context);
    if (rule) {
      const j = judge(out, rule);
      out.expected_outcomes = j.allowed!;
      if (j.expected && j.outcome !== 'PASS' && j.outcome !== 'SKIP') out.expected_failure = rule.reason;
      else if (!j.expected && j.outcome === 'PASS') out.unexpected_pass = true;
    }
    return out;
  }

  /** The host over the run: cores, workers, load average, the harness's own lateness (harness/lateness.ts). */
  private hostRecord(tests: readonly RunTest[]): HostRecord {
    clearInterval(this.loadTimer);
    this.load.push(loadavg()[0]!);
    const r2 = (x: number) => Math.round(x * 100) / 100;
    const lat = tests.filter((t) => t.harness_lateness);
    const p99s = lat.map((t) => t.harness_lateness!.p99_ms).sort((a, b) => a - b);
    const worst = lat.reduce<RunTest | undefined>((w, t) => (!w || t.harness_lateness!.max_ms > w.harness_lateness!.max_ms ? t : w), undefined);
    const workers = Number(process.env.HIL_WORKERS);
    const slow = tests.filter((t) => t.host_too_slow).length;
    return {
      cores: availableParallelism(),
      ...(Number.isInteger(workers) && workers > 0 ? { workers } : {}),
      load1: { start: r2(this.load[0]!), mean: r2(this.load.reduce((a, b) => a + b, 0) / this.load.length), max: r2(Math.max(...this.load)), samples: this.load.length },
      ...(lat.length
        ? { harness_lateness: { tests: lat.length, p99_ms: p99s[Math.min(p99s.length - 1, Math.floor(p99s.length * 0.99))]!, max_ms: worst!.harness_lateness!.max_ms, worst_test: `${worst!.file} > ${worst!.fullName}` } }
        : {}),
      ...(slow ? { host_too_slow: slow } : {}),
      ...(Number(process.env.HIL_BUSY_LOOPS) > 0 ? { busy_loops: Number(process.env.HIL_BUSY_LOOPS) } : {}),
      ...stealOver(this.steal0, stealNow()),
    };
  }

  /** What an expectation's conditions may name (harness/report/expectations.ts). */
  private contextOf(target: Record<string, unknown>): ExpectationContext {
    const d = (target.describe ?? {}) as Record<string, unknown>;
    return {
      target: this.o.targetName,
      ...(typeof target.driver === 'string' ? { driver: target.driver } : process.env.HIL_DRIVER ? { driver: process.env.HIL_DRIVER } : {}),
      ...(this.o.machine ? { machine: this.o.machine } : {}),
      ...(typeof d.machine_sha256 === 'string' ? { machine_sha256: d.machine_sha256 } : {}),
    };
  }

  /** The per-test recording notes the fixture left (harness/targets/test-stacks.ts), in test order. */
  private readRecordingUses(): RecordingUse[] {
    const dir = join(this.o.reportsDir, '.run');
    const out: RecordingUse[] = [];
    try {
      for (const f of readdirSync(dir).sort()) {
        if (!f.startsWith('recordings-')) continue;
        for (const line of readFileSync(join(dir, f), 'utf8').split('\n')) if (line) out.push(JSON.parse(line) as RecordingUse);
      }
    } catch {
      // none written: a sink never aborts a run
    }
    return out.sort((a, b) => a.test.localeCompare(b.test));
  }

  private readTarget(): Record<string, unknown> {
    const dir = join(this.o.reportsDir, '.run');
    try {
      for (const f of readdirSync(dir).sort()) {
        if (f.startsWith('target-')) return parseExact(readFileSync(join(dir, f))) as Record<string, unknown>;
      }
    } catch {
      // no target note: unit-only run or the target never answered
    }
    return {};
  }

  private summary(rec: RunRecord): void {
    const s = rec.summary;
    const w = this.write;
    const failures = rec.tests.filter((t) => (t.state === 'failed' || t.state === 'errored') && !t.expected_failure && !t.informative);
    if (failures.length) {
      w('\nFailures:\n');
      for (const t of failures) {
        w(`  ${t.state === 'errored' ? 'ERROR' : 'FAIL '} ${t.file} > ${t.fullName}\n`);
        if (t.expected_outcomes) w(`        (the expectation file allows ${t.expected_outcomes.join(', ')} here: this outcome is not one of them)\n`);
        // Each error's first line, its expected/actual difference (at most 16 lines) and where in the test it came from.
        for (const e of t.errors ?? []) {
          const lines = e.split('\n');
          const at = lines.find((l) => l.trim().startsWith('at '));
          const diff = lines.slice(1).filter((l) => !l.trim().startsWith('at ')).slice(0, 16);
          w(`        ${firstLine(e)}\n`);
          for (const d of diff) w(`          ${d.slice(0, 300)}\n`);
          if (at) w(`          ${at.trim()}\n`);
        }
      }
    }
    const differing = rec.tests.filter((t) => t.informative || t.profile_differences?.length);
    if (differing.length) {
      w('\nProfile differences (informative: a detail the documents leave open, answered otherwise than docs/profile.md):\n');
      for (const t of differing) {
        w(`  DIFF  ${t.file} > ${t.fullName}\n`);
        if (t.informative) w(`        ${firstLine(t.informative)}\n`);
        for (const d of t.profile_differences ?? []) w(`        ${d.profile}: ${firstLine(d.message)}\n`);
      }
    }
    const silent = rec.tests.filter((t) => t.state === 'skipped' && !t.skip_reason);
    if (silent.length) {
      w('\nSkipped without a stated reason:\n');
      for (const t of silent) w(`  SKIP  ${t.file} > ${t.fullName}\n`);
    }
    const v = verdictOf(rec);
    const covered = rec.coverage.filter((c) => c.status === 'covered').length;
    w(`\ntarget ${rec.target.name} (${rec.target.driver})  machine_sha256 ${rec.environment.machine_sha256 || '-'}\n`);
    if (selectionText(rec) !== undefined) {
      // A filtered run: the items it has no test for are not in its selection, not pending (selection.ts).
      const left = rec.coverage.filter((c) => notSelected(rec, c)).length;
      w(`catalogue: ${covered} covered, ${rec.coverage.length - covered - left} pending, ${left} not in this selection (of ${rec.coverage.length})\n`);
    } else w(`catalogue: ${covered} covered, ${rec.coverage.length - covered} pending of ${rec.coverage.length}\n`);
    for (const note of v.notes) w(`note: ${note}\n`);
    if (!rec.gate.ok) {
      w(`traceability gate FAILED (${rec.gate.problems.length} problems):\n`);
      for (const p of rec.gate.problems.slice(0, 40)) w(`  - ${p}\n`);
      if (rec.gate.problems.length > 40) w(`  ... ${rec.gate.problems.length - 40} more in reports/run.json\n`);
    } else if (this.o.gate) {
      w('traceability gate ok\n');
    }
    for (const m of rec.run_measurements?.measurements ?? []) w(`measured: ${measurementText(m)}${m.outcome === 'fail' ? '  OUTSIDE THE LIMIT' : ''}\n`);
    if (rec.host) w(`${hostLine(rec.host)}\n`);
    const speed = replaySpeedLine(rec);
    if (speed) w(`${speed}\n`);
    const silentSkips = v.counts.silentSkips ? ` and ${v.counts.silentSkips} skipped without a stated reason` : '';
    w(`errors: ${s.errored} harness or environment errors${silentSkips}\n`);
    w(`verdict: ${v.headline}\n`);
    w(`completeness: ${v.completeness}\n`);
    for (const r of v.reasons) w(`  - ${r}\n`);
  }

  /** The plain closing line, printed by hil after vitest has closed so that it ends the output. */
  closingLine(): string {
    const rec = this.record;
    if (!rec) return 'total: 0 passed, 0 failed, 1 errored, 0 skipped';
    return closingLine(verdictOf(rec));
  }
}

/** The host over the run, in one line (the terminal; the report's environment shows the same figures). */
export function hostLine(h: HostRecord): string {
  const load = h.load1 ? `load average ${h.load1.start} at the start, mean ${h.load1.mean}, max ${h.load1.max}` : 'load not sampled';
  const lat = h.harness_lateness ? `; harness event-loop lateness p99 ${h.harness_lateness.p99_ms} ms, max ${h.harness_lateness.max_ms} ms` : '';
  const slow = h.host_too_slow ? `; ${h.host_too_slow} test${h.host_too_slow === 1 ? '' : 's'} HIL_ERR_HOST_TOO_SLOW` : '';
  const busy = h.busy_loops ? `, ${h.busy_loops} busy loop${h.busy_loops === 1 ? '' : 's'} beside the run` : '';
  const steal = h.steal_s ? `; CPU taken by the hypervisor ${h.steal_s} s` : '';
  return `host: ${h.cores} cores${h.workers ? `, ${h.workers} workers` : ''}${busy}, ${load}${lat}${steal}${slow}`;
}

/** The host's steal counter now (harness/sequencer.ts stealSeconds), or undefined off Linux. */
function stealNow(): number | undefined {
  try {
    return stealSeconds(readFileSync('/proc/stat', 'utf8'));
  } catch {
    return undefined;
  }
}

/** The run's host record's steal_s from the counter at its start and at its end (nothing when either is unknown). */
export function stealOver(start: number | undefined, end: number | undefined): { steal_s?: number } {
  if (start === undefined || end === undefined || end < start) return {};
  return { steal_s: Math.round((end - start) * 100) / 100 };
}

/** Exit status of a finished run: the verdict's (0 exactly on PASS); 1 when no run record was made. */
export function exitCodeOf(rec: RunRecord | undefined): number {
  return rec ? verdictOf(rec).exitCode : 1;
}

function firstLine(s: string): string {
  return s.split('\n')[0]!.slice(0, 300);
}

/**
 * An error as run.json, the report and the terminal show it: its class and message, the full difference of
 * an assertion (vitest's diff, not the shortened `expected { ... } to deeply equal { ... }`), and the frames
 * of the project's own code: the test's source line first, never allure-vitest's or vitest's frames.
 */
export function errorText(e: { message?: string; name?: string; stack?: string; diff?: unknown } | SerializedError): string {
  const message = String(e.message ?? '') || thrownValueText(e);
  const name = typeof e.name === 'string' && e.name && e.name !== 'Error' && !message.startsWith(`${e.name}:`) && !/^[A-Z][A-Z_]+: |^[a-z_]+: /.test(message) ? `${e.name}: ` : '';
  const frames = ownFrames(String(e.stack ?? ''));
  const diff = typeof e.diff === 'string' && e.diff.trim() ? `\n${stripAnsi(e.diff)}` : '';
  return [`${name}${message}${diff}`, ...frames].join('\n');
}

/**
 * What a test threw that was not an Error (a rejection with a plain object, say), or an Error with an empty
 * message: its own fields, so the record never shows an ERROR with nothing to read.
 */
function thrownValueText(e: object): string {
  const own = Object.entries(e).filter(([k, v]) => !['message', 'name', 'stack', 'stacks', 'diff', 'expected', 'actual'].includes(k) && v !== undefined && typeof v !== 'function');
  if (own.length === 0) return '(an error with no message)';
  const text = JSON.stringify(Object.fromEntries(own), (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
  return `a thrown value with no message: ${text.length > 500 ? `${text.slice(0, 500)}...` : text}`;
}

/** Stack frames in the project's own files (suites/, harness/, sims/, drivers/), at most four. */
export function ownFrames(stack: string): string[] {
  const frames = stack.split('\n').filter((l) => l.trim().startsWith('at '));
  const own = frames.filter((l) => !/node_modules|node:internal|\(node:|\/@vitest\/|allure-/.test(l));
  return (own.length ? own : frames).slice(0, 4);
}

const stripAnsi = (s: string): string => s.replace(/\u001b\[[0-9;]*m/g, '');

/**
 * Whether the module errored for something none of its tests carries: an error of its own (an import, a
 * file-level hook: an afterAll that broke counts even beside a failed test, which may be an expected or
 * informative one), or a failed module with no error at all and no failed test. A failed describe-level
 * hook is booked on the tests it kept from running.
 */
function fileErrored(m: TestModule, setupErrorCount: number): boolean {
  if (m.errors().length > 0) return true;
  return m.state() === 'failed' && ![...m.children.allTests()].some((t) => t.result().state === 'failed') && setupErrorCount === 0;
}

/** The errors of a module's failed describe-level hooks, each with its suite. */
function setupErrors(m: TestModule): { suite: string; error: SerializedError }[] {
  const out: { suite: string; error: SerializedError }[] = [];
  for (const s of m.children.allSuites()) for (const error of s.errors()) out.push({ suite: s.fullName, error });
  return out;
}

/** What made a failed test HIL_ERR_HOST_TOO_SLOW: the judged loss noted on it, or the first such error thrown (its first line). */
export function hostTooSlowOf(noted: string | undefined, errors: readonly string[]): string | undefined {
  return noted ?? errors.find((e) => e.startsWith('HarnessError: HIL_ERR_HOST_TOO_SLOW') || e.startsWith('HIL_ERR_HOST_TOO_SLOW'))?.split('\n')[0];
}

/** The nearest enclosing suite (or the module) whose hook failed, with its errors. */
function setupErrorOf(t: TestCase): { suite: string; errors: SerializedError[] } | undefined {
  for (let p: TestCase['parent'] | undefined = t.parent; p; p = p.type === 'suite' ? p.parent : undefined) {
    const errors = p.errors();
    if (errors.length) return { suite: p.type === 'suite' ? p.fullName : '(file)', errors };
  }
  return undefined;
}

function packageVersion(root: string): string {
  try {
    return (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function gitRevision(root: string): string {
  try {
    if (!existsSync(join(root, '.git'))) return 'unknown';
    const rev = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return dirty ? `${rev}+dirty` : rev;
  } catch {
    return 'unknown';
  }
}

/**
 * A replay run: the wall time of the replayed tests against the wall time the same tests took when recorded
 * (each recording's sidecar keeps it), and the ratio. Null for any other run, or when no test has both.
 */
export function replaySpeedLine(rec: Pick<RunRecord, 'target'>): string | null {
  const tests = rec.target.replay?.tests ?? [];
  let recorded = 0;
  let now = 0;
  let n = 0;
  for (const t of tests) {
    if (t.recorded_wall_ms === undefined || t.wall_ms === undefined) continue;
    recorded += t.recorded_wall_ms;
    now += t.wall_ms;
    n++;
  }
  if (n === 0 || now <= 0) return null;
  return `replay: ${n} tests took ${(now / 1000).toFixed(1)} s, ${(recorded / 1000).toFixed(1)} s when recorded: ${(recorded / now).toFixed(2)} times the recorded speed`;
}
