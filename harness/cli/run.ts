// `hil run` and `hil test`: the conformance suites (or the harness's own tests) against a target, with the
// run record, the verdict and the reports.

import { existsSync, readFileSync, rmSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { availableParallelism, loadavg } from 'node:os';
import { hostLoadNow, workersForHost } from '../sequencer.ts';
import { startBusyLoops } from '../busy-loops.ts';
import { HilReporter, exitCodeOf, type Expectation } from '../report/reporter.ts';
import { Progress, isInteractive } from '../report/progress.ts';
import { collectTests, lastFailed, selectCovering, type TestSelection } from '../select.ts';
import { LONG_TAG, longTierOn } from '../long-tier.ts';
import { expectationProblems, type ExpectationFile } from '../report/expectations.ts';
import type { RunRecord } from '../report/run-types.ts';
import { TARGETS, isShared } from '../targets/index.ts';
import { checkTargetFlags, prepareTarget, targetFlags } from './run-target.ts';
import { ROOT, DEFAULT_REPORTS, UsageError, InputError, PLANTABLE_FAULTS, suiteFiles, filterMatches, wantsHelp, outputDir } from './common.ts';

export async function run(args: string[], selfTest: boolean): Promise<number> {
  if (await wantsHelp(args, selfTest ? 'test' : 'run')) return 0;
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: !selfTest,
    options: {
      target: { type: 'string', default: 'sim' },
      // Each target's own flags, from its descriptor (harness/cli/run-target.ts).
      ...targetFlags(),
      'no-report': { type: 'boolean', default: false },
      reports: { type: 'string' },
      shard: { type: 'string' },
      grep: { type: 'string' },
      plant: { type: 'string' },
      blob: { type: 'boolean', default: false },
      'last-failed': { type: 'boolean', default: false },
      covers: { type: 'string', multiple: true },
      watch: { type: 'boolean', default: false },
      long: { type: 'boolean', default: false },
      workers: { type: 'string' },
      'busy-loops': { type: 'string' },
    },
  });
  const target = values.target!;
  // The target flags the reports name (a recording, a machine, a driver); the rest are the target's (run-target.ts).
  const named = values as { record?: string; recordings?: string; machine?: string; driver?: string };
  const REPORTS = values.reports ? resolve(values.reports) : DEFAULT_REPORTS;
  const shard = values.shard;
  // A shard always leaves its blob report for hil merge; a whole run only when asked (--blob).
  const blob = shard !== undefined || values.blob === true;
  // The blob reporter serializes the tests' errors in this process, where an assertion's bigint
  // `expected`/`actual` would throw: the JSON form the workers use (harness/bigint-json.ts).
  if (blob) await import('../bigint-json.ts');
  if (shard !== undefined) {
    const m = /^([1-9][0-9]*)\/([1-9][0-9]*)$/.exec(shard);
    if (!m || Number(m[1]) > Number(m[2])) throw new UsageError(`--shard ${shard}: expected i/n with 1 <= i <= n`);
  }
  // The long tier (harness/long-tier.ts): tests that wait out a bound of more than a minute run only when asked.
  if (values.long) process.env.HIL_LONG = '1';
  // --last-failed and --covers choose tests by name: the files and one exact name pattern (harness/select.ts).
  let filters = positionals;
  let grep = values.grep;
  if (values['last-failed'] || values.covers) {
    if (values['last-failed'] && values.covers) throw new UsageError('--last-failed and --covers each choose the tests: give one');
    if (grep !== undefined || shard !== undefined) throw new UsageError(`${values.covers ? '--covers' : '--last-failed'} chooses the tests by name: not with --grep or --shard`);
    const chosen = values.covers ? await coversSelection(values.covers, positionals) : lastFailedSelection(REPORTS, positionals);
    if (!chosen) return 0;
    filters = chosen.files;
    if (chosen.pattern) grep = chosen.pattern;
  }
  // What the target is, and whether it takes what was asked (its descriptor: harness/targets/index.ts).
  if (!Object.hasOwn(TARGETS, target)) throw new UsageError(`unknown target ${target}; known: ${Object.keys(TARGETS).join(', ')}`);
  const abilities = TARGETS[target as keyof typeof TARGETS].abilities;
  if (values.watch && (shard !== undefined || named.record !== undefined || !abilities.watch)) throw new UsageError('--watch reruns files on the sim target: not with --shard, --record or another target');
  if (values.plant !== undefined) {
    if (!/^[a-z_]+@.+$/.test(values.plant as string)) throw new UsageError(`--plant ${values.plant}: expected FAULT@PART-OF-A-TEST-NAME (frozen_feedback@..., following_error@...)`);
    if (!abilities.plant) throw new UsageError('--plant injects through the test channel of the sim target');
    const kind = values.plant.slice(0, values.plant.indexOf('@'));
    // harness_fault is no fault of the target: the fixture throws it in the named test (harness/fixture.ts plantHarnessFault).
    if (kind !== 'harness_fault' && !(PLANTABLE_FAULTS as readonly string[]).includes(kind)) throw new InputError(`--plant ${values.plant}: no fault ${kind}; known: ${PLANTABLE_FAULTS.join(', ')}`);
    process.env.HIL_PLANT = values.plant;
  }
  // A filter that selects no suite file would run nothing and still write a run over reports/.
  if (positionals.length) {
    const files = suiteFiles();
    const none = positionals.filter((f) => !filterMatches(f, files));
    if (none.length) throw new InputError(`no suite file matches ${none.map((f) => JSON.stringify(f)).join(', ')} (filters select files under suites/ whose path contains them)`);
  }
  // The target's own flags, checked against its schema (a flag of another target, a required one missing, a
  // value it refuses: usage errors) and written into the variables the schema names (harness/cli/run-target.ts).
  const chosen = checkTargetFlags(target, values as Record<string, string | boolean | string[] | undefined>, process.env);
  // Without file filters, the files a run of this target can run anything of (the replay target: those its
  // recordings hold); a run so narrowed is a part of the suites, as a filtered one is (no gate).
  if (filters.length === 0) {
    const all = suiteFiles();
    const held = chosen.descriptor.files?.(chosen.options, all);
    if (held) {
      process.stdout.write(`${target}: ${held.length} of ${all.length} suite files hold a recorded test; running those\n`);
      filters = held.map((f) => join(ROOT, f));
    }
  }
  // The output directories are made before anything runs: one that cannot be made is the user's to correct.
  outputDir('--reports', REPORTS);
  if (named.record !== undefined) outputDir('--record', named.record);
  // Workers: --workers N, or from the host's cores and load (harness/sequencer.ts workersForHost); the
  // figure is noted in run.json's host record either way.
  if (values.workers !== undefined && !/^([1-9]|[1-5][0-9]|6[0-4])$/.test(values.workers)) throw new UsageError(`--workers ${values.workers}: an integer 1..64`);
  // The run counts what is busy now (hostLoadNow), not the minute's load average: that still holds work that
  // has just ended (CI's typecheck before `hil test`, the previous row of .ci/matrix) and gave an idle host 2
  // workers, which run the suites' long real-time waits one after another.
  const load = values.workers === undefined && !process.env.HIL_WORKERS && !isShared(target) ? hostLoadNow(availableParallelism(), loadavg()[0]!) : loadavg()[0]!;
  process.env.HIL_WORKERS = isShared(target) ? '1' : (values.workers ?? process.env.HIL_WORKERS ?? String(workersForHost(availableParallelism(), load)));
  // --busy-loops N: the run on a host kept loaded on purpose (README "Verdicts": a correct stack still PASSes,
  // a test held up past what its rule allows is HIL_ERR_HOST_TOO_SLOW). Started after the workers are
  // chosen, so that they do not count themselves out of the run's parallelism.
  if (values['busy-loops'] !== undefined && !/^([0-9]|1[0-6])$/.test(values['busy-loops'])) throw new UsageError(`--busy-loops ${values['busy-loops']}: an integer 0..16`);
  if (values['busy-loops'] !== undefined && values.watch) throw new UsageError('--busy-loops loads the host for one run: not with --watch');
  const busyCount = Number(values['busy-loops'] ?? 0);
  if (busyCount > 0) process.env.HIL_BUSY_LOOPS = String(busyCount);
  process.env.HIL_TARGET = target;
  // A run on a target of the reference system reaches only loopback and Unix sockets, and checks each TLS
  // peer against a CA it made: its workers and the processes they start need no extra CAs, and Node would
  // read the bundle and build its root store at each of their starts (harness/targets/reference.ts
  // referenceEnv). The external target's planner and OLP URLs may be someone's HTTPS: kept there.
  if (target !== 'external') delete process.env.NODE_EXTRA_CA_CERTS;
  // What the target computes once for the run: a recorded or replayed run's machine digest (its prepare).
  await prepareTarget(chosen, process.env);
  process.env.HIL_RUN_DIR = join(REPORTS, '.run');

  try {
    rmSync(join(REPORTS, 'allure-results'), { recursive: true, force: true, maxRetries: 3 });
    rmSync(join(REPORTS, 'blob'), { recursive: true, force: true, maxRetries: 3 });
  } catch (e) {
    process.stderr.write(`warning: could not clear old Allure results: ${(e as Error).message}\n`);
  }
  // N of M files, passed, failed and errored so far, time left (harness/report/progress.ts); the reporter's lines go
  // through it so that in a terminal they land above the redrawn line.
  // Tests are counted as the reporter books them (an informative difference is not a failure).
  const progress = new Progress({ tty: isInteractive(), write: (s) => process.stdout.write(s), columns: process.stdout.columns, classify: (t) => reporter.outcomeOf(t) });
  const reporter: HilReporter = new HilReporter({
    write: progress.print,
    command: ['hil', selfTest ? 'test' : 'run', ...args].join(' '),
    reportsDir: REPORTS,
    // A shard or a filtered run covers part of the catalogue: the gate applies to whole runs (and merges of all shards).
    gate: filters.length === 0 && shard === undefined && grep === undefined,
    selection: { filters, ...(shard ? { shard } : {}), ...(grep ? { grep } : {}) },
    targetName: target,
    ...(named.recordings !== undefined ? { replay: { recordings: resolve(named.recordings), mode: 'strict' } } : {}),
    ...(named.record !== undefined ? { recording: { dir: resolve(named.record) } } : {}),
    // Expected failures per target; per driver on the sim target; per rig (its machine configuration) on a rig.
    expectations: loadExpectations(
      target === 'rig' ? `rig+${basename(named.machine!).replace(/\.json$/, '')}` : named.driver && named.driver !== 'sim' ? `${target}+${named.driver}` : target,
    ),
    ...(named.machine ? { machine: basename(named.machine).replace(/\.json$/, '') } : {}),
  });
  // The stacks' bundle is built while vitest starts (harness/targets/reference.ts startEarlyPrebuild).
  const { startEarlyPrebuild, PREBUILT_ENV } = await import('../targets/reference.ts');
  const dropPrebuild = process.env[PREBUILT_ENV] ? async () => undefined : startEarlyPrebuild();
  const { startVitest } = await import('vitest/node');
  // Each loop ends with this process, or after six hours whatever happens.
  const busy = busyCount > 0 ? startBusyLoops(busyCount, 6 * 3600_000) : undefined;
  if (busy) process.stdout.write(`busy loops: ${busyCount} beside the run (pids ${busy.pids.join(', ')})\n`);
  const ownSignals = { SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM') };
  // A plain run stopped by Ctrl-C or SIGTERM: vitest's own handler exits the process at once, so before it
  // the run says how far it got (listeners run in the order they were added: this one first). The workers
  // follow through their lifeline (harness/worker-lifeline.ts), the next run removes the stack bundle.
  const onStop = (sig: NodeJS.Signals) => progress.interrupted(sig);
  if (!values.watch) for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, onStop);
  const vitest = await startVitest('test', filters, {
    root: ROOT,
    watch: values.watch,
    project: selfTest ? ['unit', ...CONFORMANCE_PROJECTS, 'model'] : CONFORMANCE_PROJECTS,
    ...(shard ? { shard } : {}),
    ...(grep ? { testNamePattern: grep } : {}),
    // Ours last (the progress line after the per-file line it counts); hil prints the plain closing line
    // ("total: N passed, N failed, N errored, N skipped") after vitest has closed, so that it ends the output.
    // HIL_EXTRA_REPORTER names one more vitest reporter module (a developer's timing table, say).
    reporters: [
      // allure-vitest's reporter writing without a fsync per file (harness/report/allure-reporter.ts says why).
      [join(ROOT, 'harness', 'report', 'allure-reporter.ts'), { resultsDir: join(REPORTS, 'allure-results') }],
      ['junit', { outputFile: join(REPORTS, 'junit.xml') }],
      // vitest's own record of the run, which `hil merge` merges shards from (vitest --merge-reports).
      ...(blob ? [['blob', { outputFile: join(REPORTS, 'blob', `blob-${(shard ?? '1/1').replace('/', '-')}.json`) }] as ['blob', { outputFile: string }]] : []),
      ...(process.env.HIL_EXTRA_REPORTER ? [process.env.HIL_EXTRA_REPORTER] : []),
      reporter,
      progress,
    ],
    passWithNoTests: false,
  }).catch(async (e: unknown) => {
    await busy?.stop();
    await dropPrebuild();
    throw e;
  });
  if (values.watch) {
    // Vitest's watch mode: a saved suite file (or a module it imports) reruns that file. The stack bundle
    // (built once, before the first run) and vitest's module transforms stay between reruns; vitest starts
    // its workers, and so their stack hosts, again for each rerun. Each rerun writes run.json.
    process.stdout.write('watching: save a suite file to rerun it; Ctrl-C stops\n');
    // Vitest's own handlers exit the process at once on a signal; ours closes vitest first (its workers and
    // their stack hosts stop, the global teardown runs) and removes the stack bundle.
    for (const sig of ['SIGINT', 'SIGTERM'] as const) for (const l of process.listeners(sig)) if (!ownSignals[sig].includes(l)) process.off(sig, l);
    await new Promise<void>((done) => {
      process.once('SIGINT', done);
      process.once('SIGTERM', done);
      vitest.onClose(done);
    });
  }
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.off(sig, onStop);
  await vitest.close();
  await busy?.stop();
  await dropPrebuild();
  const code = exitCodeOf(reporter.record);
  const closing = reporter.closingLine();
  if (!selfTest && !values['no-report'] && !values.watch && reporter.record) {
    try {
      // Loaded only here: a --no-report, watch or self-test run never needs the report writer.
      const { writeHtmlReport } = await import('../report/html.ts');
      const r = await writeHtmlReport({ runJson: join(REPORTS, 'run.json'), allureDir: join(REPORTS, 'allure-results'), outFile: join(REPORTS, 'html', 'index.html') });
      process.stdout.write(`report: ${r.outFile}${r.warnings.length ? ` (${r.warnings.length} notes)` : ''}\n`);
    } catch (e) {
      process.stdout.write(`report not written: ${(e as Error).message}\n`);
    }
  }
  process.stdout.write(`${closing}\n`);
  return code;
}

/** hil run --last-failed: the failed and errored tests of DIR/run.json; undefined (and said) when there are none. */
export function lastFailedSelection(reports: string, positionals: string[]): TestSelection | undefined {
  const file = join(reports, 'run.json');
  if (positionals.length) throw new UsageError('--last-failed reruns the last run\'s failures: no file filters');
  if (!existsSync(file)) throw new UsageError(`--last-failed: no ${file} (run hil run first, or name the run's --reports DIR)`);
  const sel = lastFailed(JSON.parse(readFileSync(file, 'utf8')) as RunRecord);
  if (!sel) {
    process.stdout.write(`--last-failed: nothing failed in ${file}; nothing to run\n`);
    return undefined;
  }
  process.stdout.write(`--last-failed: ${sel.tests.length} test${sel.tests.length === 1 ? '' : 's'} from ${file}\n${sel.tests.map((t) => `  ${t}\n`).join('')}`);
  return sel;
}

/** hil run --covers ID...: the tests covering the named catalogue items (collected first, as hil coverage does). */
export async function coversSelection(args: string[], positionals: string[]): Promise<TestSelection | undefined> {
  const patterns = args.flatMap((a) => a.split(',')).map((a) => a.trim()).filter(Boolean);
  if (patterns.length === 0) throw new UsageError('--covers ID: a catalogue id (reason:control_session_stale) or a pattern (\'reason:*\')');
  const { tests, errors } = await collectTests(ROOT, CONFORMANCE_PROJECTS, positionals);
  for (const e of errors) process.stderr.write(`collection error: ${e}\n`);
  const r = selectCovering(patterns, tests);
  const none = r.matched.filter((m) => m.items.length === 0).map((m) => m.pattern);
  if (none.length) throw new UsageError(`--covers: ${none.join(', ')} names no catalogue item (hil coverage --json lists them)`);
  for (const id of r.uncovered) process.stdout.write(`--covers: ${id} has no test${positionals.length ? ' in the selected files' : ''} (hil coverage --json gives its pending reason)\n`);
  if (!r.selection) {
    process.stdout.write('--covers: no test covers the named items; nothing to run\n');
    return undefined;
  }
  process.stdout.write(`--covers: ${r.selection.tests.length} test${r.selection.tests.length === 1 ? '' : 's'} in ${r.selection.files.length} file${r.selection.files.length === 1 ? '' : 's'} cover ${r.matched.reduce((a, m) => a + m.items.length, 0) - r.uncovered.length} of the items named\n`);
  // A long-tier test chosen here still skips unless the run has --long.
  const chosen = new Set(r.selection.tests);
  const long = tests.filter((t) => t.tags.includes(LONG_TAG) && chosen.has(`${t.file} > ${t.fullName}`)).length;
  if (long > 0 && !longTierOn()) process.stdout.write(`--covers: ${long} of them ${long === 1 ? 'is' : 'are'} in the long tier and skip${long === 1 ? 's' : ''} without --long\n`);
  return r.selection;
}

/** The vitest projects that hold the conformance suites (vitest.config.ts: one project, each file at its own priority). */
export const CONFORMANCE_PROJECTS = ['conformance'];

/**
 * Per-target expectation file: fixtures/expectations/<target>.json, <target>+<driver>.json for the sim
 * target on another bus driver, rig+<machine file name>.json for a rig; {"<file> > <test>": {expected, reason}}.
 */
export function loadExpectations(target: string): Record<string, Expectation> {
  const f = join(ROOT, 'fixtures', 'expectations', `${target}.json`);
  if (!existsSync(f)) return {};
  const data = JSON.parse(readFileSync(f, 'utf8')) as ExpectationFile;
  const problems = expectationProblems(data);
  if (problems.length) throw new UsageError(`${f}: ${problems.join('; ')}`);
  return data;
}
