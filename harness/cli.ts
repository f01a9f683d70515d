// The `hil` command: run the conformance suites against a target, serve the reference stack, print
// catalogue coverage, and render the qualification report. Exit status: 0 all passed, 1 failures,
// 2 usage errors.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { availableParallelism, loadavg } from 'node:os';
import { workersForHost } from './sequencer.ts';
import { isShared } from './targets/shared.ts';
import { HilReporter, exitCodeOf, type Expectation } from './report/reporter.ts';
import { writeHtmlReport } from './report/html.ts';
import { Progress, isInteractive } from './report/progress.ts';
import { collectTests, lastFailed, selectCovering, type TestSelection } from './select.ts';
import { readRunRecord } from './report/run-reader.ts';
import { comparisonText, compareRuns, DEFAULT_TOLERANCE, regressed, type Tolerance } from './report/compare.ts';
import { expectationProblems, updateExpectations, type ExpectationFile } from './report/expectations.ts';
import { mergeRuns } from './report/merge.ts';
import { verdictOf } from './report/verdict.ts';
import { measurementText } from './report/run-measurements.ts';
import { DEFAULT_RSS_GROWTH_MIB, noteSoak, soak } from './soak.ts';
import { openTarget } from './targets/index.ts';
import type { BindingInput } from './clients/control.ts';
import type { RunRecord } from './report/run-types.ts';
import { computeCoverage, familyCounts } from './catalogue/gate.ts';
import { CONFIG_ENTRY, OLP_ENTRY, PLANNER_ENTRY, STACK_ENTRY, STACK_NODE_ARGS, TS_NODE_ARGS } from './targets/reference.ts';
import { packWeldplan, programDigest, sealProgram } from './clients/weldplan.ts';
import { TARGETS } from './targets/index.ts';
import { machineDigest } from './targets/recorder.ts';
import { decodeUtf8Strict, isJsonObject, parseExact, stringifyExact } from './oracle/json.ts';
import type { JsonExact, JsonObject } from './oracle/json.ts';
import { blockSha256, decodeDense } from './oracle/dense.ts';
import { OracleError } from './oracle/errors.ts';
import './trace.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// HIL_REPORTS_DIR: another directory for a run's reports (a nested run, such as hil cleanroom check's);
// --reports DIR says the same on the command line.
const DEFAULT_REPORTS = process.env.HIL_REPORTS_DIR ? resolve(process.env.HIL_REPORTS_DIR) : join(ROOT, 'reports');

class UsageError extends Error {}
/**
 * Bad input a user can correct from one line (a name that matches nothing, a file that is not there):
 * exit 2 with `hil: <message>` alone, before anything under reports/ is touched.
 */
class InputError extends UsageError {}

/**
 * Faults --plant may inject: the sim driver's test-channel faults that take one axis and nothing else (the
 * planted fault is `{kind, axis}`, harness/evidence.ts maybePlant). cli.test.ts checks them against the
 * driver's fault table, which the harness does not import.
 */
export const PLANTABLE_FAULTS = ['following_error', 'frozen_feedback', 'slave_offline', 'pdo_mapping_mismatch', 'homing_fails', 'sluggish_drive'] as const;

/** The conformance suite files (the conformance projects' include, vitest.config.ts), relative to ROOT. */
function suiteFiles(): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const e of readdirSync(join(ROOT, rel), { withFileTypes: true })) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) walk(r);
      else if (e.name.endsWith('.test.ts')) out.push(r);
    }
  };
  walk('suites');
  return out;
}

/** A filter of hil run selects files as vitest does: a file whose path contains it (relative or absolute). */
function filterMatches(filter: string, files: string[]): boolean {
  filter = filter.replace(/:[0-9]+$/, ''); // vitest's FILE:LINE form
  const abs = resolve(filter);
  return files.some((f) => f.includes(filter) || join(ROOT, f).includes(filter) || join(ROOT, f).startsWith(abs));
}

const HELP: Record<string, string> = {
  '': `usage: hil <command> [options]

commands:
  run       run the conformance suites against a target and write reports/
  test      run the project's own tests and the conformance suites on the simulator (npm test)
  serve     start the reference stack (control service + core on the sim driver)
  cleanroom start the clean-room control service (test equipment: document 1 read independently)
  replay    replay one recording on a fresh core on the stepped clock and print the divergence report
  doctor    check what an EtherCAT rig needs (module, master, slaves) and say what is missing
  config    compile a machine configuration into its digest-named directory (document 3 part 2)
  certs     make and maintain the certificates of a remote listener pair (document 1 part 5)
  coverage  print catalogue coverage (covered / pending per family) without running tests
  fuzz      run the documented state machines as a model against a target for some minutes
  report    render reports/html/index.html from the last run (--baseline: what changed since another)
  compare   compare two runs: new failures, fixed, coverage, drifted measurements
  expectations  write a run's failures into a target's expectation file (stale entries reported)
  nightly   the conformance run, a soak, and the comparison with the previous night, in a dated directory
  history   the nights of a nightly directory: first failing nights, flaky tests, measurement trends
  allure    Allure's own report of the last run (single file, categories, history)
  merge     merge shard runs (hil run --shard i/n) from several machines into one run and report
  dense     dense trajectory files: "hil dense inspect FILE" prints header, segments and digest check
  planner   start the weld planner stub: "hil planner serve [--host H] [--port P] [--dense-store-dir DIR]"
  olp       start the offline programming server: "hil olp serve [--listen HOST:PORT] [--catalogue FILE] ..."
  weldplan  build a .weldplan container: "hil weldplan pack PROGRAM.json --out FILE" 
  help      this text; "hil <command> --help" for a command; hil --version: package version and git revision

exit status: 0 all passed, 1 failures, 2 usage errors`,
  run: `usage: hil run [--target sim|external|replay|rig] [--driver NAME] [--socket PATH] [--planner-url URL]
               [--olp-url URL] [--machine FILE] [--record DIR] [--recordings DIR] [--bench PORT] [--allow-motion]
               [--no-report] [--reports DIR] [--shard i/n] [--blob] [--grep PATTERN] [--plant FAULT@TEST] [--workers N]
               [--last-failed | --covers ID[,ID...]] [--watch] [filter ...]

Runs suites/ against the target. Filters select test files by substring (the traceability gate only
applies to a full run). Writes reports/run.json, reports/allure-results/, reports/junit.xml and, unless
--no-report, reports/html/index.html.

  --target NAME     sim (default): the reference stack started per file; external: a service at --socket;
                    replay: each test replayed from its recording (--recordings)
                    rig: the stack on the rig's EtherCAT bus with the bench box (--machine, --bench)
  --driver NAME     sim: the stack's bus driver (default sim; ethercat-fake runs the EtherCAT driver over a
                    fake master); expected failures then come from fixtures/expectations/<target>+<driver>.json
  --socket PATH     control socket of an external target
  --planner-url URL external: the weld planner's base URL (planner suites skip without it)
  --olp-url URL     external: the offline programming server's base URL {olp_url} (OLP suites skip without it)
  --olp-facts FILE  external: what discovery cannot tell of that server's deployment (README "Your own OLP server")
  --machine FILE    sim: machine configuration (default fixtures/machines/nine-axis.json)
  --record DIR      sim: record every test into its own recording under DIR/sim/<machine digest>/
                    (a fresh stack per test; docs/recording.md "Recording a suite run")
  --recordings DIR  replay: the recordings of an earlier --record run; each test replays its own
                    recording (strict), a test without one is skipped as not recorded
  --bench PORT      rig: the bench box's serial port (sim: the simulated box, with HIL_RIG_DRIVER=ethercat-fake)
  --allow-motion    allow tests that energise drives on a rig (only with the E-stop chain closed through the bench box)
  --no-report       skip the HTML report
  --reports DIR     write run.json, allure-results/, junit.xml, blob/ and html/ under DIR (default reports/)
  --shard i/n       run the i-th of n shares of the files (vitest's sharding); merge with hil merge
  --blob            also write vitest's blob report of a whole run (a shard always does), for hil merge
  --grep PATTERN    only tests whose name matches (vitest's test name pattern)
  --last-failed     only the tests that failed or errored in the last run (run.json under --reports)
  --covers ID       only the tests whose covers() name a catalogue item: an id (reason:control_session_stale)
                    or a pattern with * ('reason:*'); repeat it or separate ids by commas; file filters narrow it
  --watch           run, then rerun a suite file when it (or a module it imports) is saved (vitest's watch
                    mode), with the stack bundle and vitest's transforms kept from run to run (the workers and
                    their stack hosts start again per rerun); run.json after each rerun, no HTML report;
                    Ctrl-C stops (exit status: the last run's)
  --plant FAULT@TEST  sim: inject FAULT through the test channel just before the first motion command
                    (other than Home) of the test whose full name contains TEST, on that command's
                    lowest axis (shows a failed motion test in the report); harness_fault@TEST
                    throws a TypeError in that test instead (a harness fault: ERROR, README "Verdicts")
  --workers N       test workers (1..64); default from the host's cores and its load when the run starts
                    (README "Verdicts"); a shared target (external, rig) always runs one`,
  test: `usage: hil test

Runs the unit tests of the harness and the reference stack, then the conformance suites against the
simulator, with the traceability gate. This is what npm test runs.`,
  serve: `usage: hil serve --socket-dir DIR [options]   (hil serve --help for the stack's own options)`,
  cleanroom: `usage: hil cleanroom serve --socket-dir DIR [--lease-ceiling-ms N] [--lifeline-stdin]
       hil cleanroom check [--update] [suite ...]
       hil cleanroom check-olp [--update] [suite ...]
       hil cleanroom serve --planner --store-dir DIR [--port P]
       hil cleanroom check --planner [--update] [suite ...]

serve: starts the clean-room control service (harness/cleanroom/service.ts), a second, independent reading
of document 1 (envelope, grant authority, Describe, Status, events; every other capability unimplemented),
for running the suites with --target external --socket DIR/control.sock. Prints one ready {...} line;
stops on SIGINT/SIGTERM, and when stdin closes with --lifeline-stdin.

check: starts it, runs suites/envelope, grant, events, capabilities and observation against it through
hil run --target external (reports in a temporary directory), and exits 0 only when the verdict is PASS
and the profile differences are exactly fixtures/expectations/cleanroom-informative.json; --update rewrites
that file from the run instead.

check-olp: the same for document 3: starts a reference stack (hil serve), the weld planner stub and the
clean-room OLP server (harness/cleanroom/olp/, written from the documents alone, driving the stack as a
client of document 1) with a two-cell catalogue, runs suites/olp against it through hil run --target
external --olp-url ... --olp-facts ..., and exits 0 only when the verdict is PASS and the profile
differences are exactly fixtures/expectations/cleanroom-olp-informative.json.

--planner: the same for document 2. serve starts the clean-room weld planner (harness/cleanroom/planner/,
its own six-axis cell cleanroom-six-axis) on 127.0.0.1 and prints one ready {...} line; check starts it
and hil serve, runs suites/planner and suites/dense-format/planner-file.test.ts with --target external
--planner-url, and holds the result to PASS and fixtures/expectations/cleanroom-planner-informative.json.`,
  replay: `usage: hil replay FILE [--mode strict|closed-loop|open-loop|verify]   (hil replay --help for the stack's own options)`,
  doctor: `usage: hil doctor --driver ethercat|ethercat-fake [--machine FILE]   (hil doctor --help for its options)`,
  config: `usage: hil config compile FILE --out DIR   (hil config --help for the compiler's own options)`,
  certs: `usage: hil certs <subcommand> --dir DIR [options]

Certificates for the remote listener (document 1 part 5 item 8): one EC P-256 CA per pair (3650 days,
path length 0), a server certificate (365 days), one client certificate per principal (365 days, URIs
svc-principal:<id> and svc-pair:<pair>), a CRL valid 7 days. Each subcommand prints one JSON line.

  create-pair --dir DIR --pair-id ID [--host NAME ...]
                       new CA, server certificate (default names localhost and 127.0.0.1), empty CRL
  issue-client --dir DIR --principal ID
                       DIR/clients/<ID>.crt and .key
  revoke --dir DIR --serial HEX
                       add a serial issued by this pair to the CRL and renew it
  renew-crl --dir DIR  a fresh CRL (next number, valid 7 days from now); run it well within 7 days

Files: DIR/ca.crt ca.key server.crt server.key crl.pem pair.json clients/. Serve them with
  hil serve --remote-listen 127.0.0.1:8443 --remote-ca DIR/ca.crt --remote-cert DIR/server.crt
            --remote-key DIR/server.key --remote-crl DIR/crl.pem --pair-id ID ...`,
  fuzz: `usage: hil fuzz [--target sim|ethercat-fake|external|rig] [--minutes M] [--seed N] [--commands N]
               [--socket PATH] [--machine FILE] [--bench PORT] [--allow-motion] [--strict] [--attach RUN.json]
       hil fuzz --differential A,B [--minutes M] [--seed N] [--commands N]

Runs the documented state machines as a model (harness/model/) against a target for M minutes (default 1):
random sequences of control operations, observations and out-of-band actions, each reply, status and the
event log checked against the model. A failure is shrunk to a minimal sequence and printed with
HIL_MODEL_SEED and HIL_MODEL_PATH and a vitest example. Figures (sequences, commands, transitions reached,
per-rule counts) are printed and written to reports/fuzz.json, the fuzz run's own record (with the command,
package version and git revision); --attach RUN.json also writes them into that run record (model.fuzz),
whose HTML report then shows them. Without --attach no run.json is touched.

  --target NAME     sim (default): the reference stack on the stepped clock; ethercat-fake: the same over
                    the EtherCAT driver's fake master; external: a service at --socket (no stepping);
                    rig: the stack on the rig (--machine, --bench)
  --commands N      longest sequence (default 200)
  --allow-motion    rig: sequences may energise drives; without it, motion commands are left out
  --strict          refuse the reference stack's known defects too (harness/model/variants.ts KNOWN_DEFECTS)
  --attach RUN.json add the figures to that run record (model.fuzz) as well
  --differential A,B  run each generated sequence on two targets (sim, ethercat-fake) and report the first
                    reply that differs, with the sequence and HIL_MODEL_SEED to get it again.
                    sim,replay: the sequence runs on a sim stack that records its session (hil serve
                    --record, docs/recording.md), then on a stack replaying that recording (the replay
                    driver, paced), the same sequence sent live; the first reply that differs is reported
                    with the replay's verdict (its first divergence from the recording).`,
  coverage: `usage: hil coverage [--json]

Collects the suites (without running them) and prints covered and pending counts per catalogue family.
--json prints every catalogue id with its status and covering tests or pending reason.`,
  dense: `usage: hil dense inspect FILE

Reads a robot.v4.dense-joint-trajectory.v1 file (document 2 part 2) with the harness's own decoder and
prints its header, its segments (index, kind, sample count, block digest ok/bad) and the content digest
check. Exit 0 when the file is valid, 1 with the reason label (document 2 part 7) when it is not.`,
  olp: `usage: hil olp serve [--listen HOST:PORT] [--catalogue FILE | --control-socket PATH] ...   (hil olp serve --help for details)`,
  planner: `usage: hil planner serve [--host H] [--port P] [--dense-store-dir DIR]   (hil planner serve --help for details)`,
  weldplan: `usage: hil weldplan pack PROGRAM.json --out FILE [--tooling FILE] [--step FILE] [--seal]

Builds a .weldplan container (docs/profile.md "Weld planner: the .weldplan container") from a
robot.v4.program.v2 document: manifest.json with the entries' digests and the program digest,
program.json, tooling.json (a stub tool when --tooling is not given) and workpiece.step when given.
--seal first computes every node's row_hash and the program_digest (document 3 "Digests"); without it the
document is packed exactly as read. Exit 0 written, 1 unreadable input, 2 usage.`,
  report: `usage: hil report [--reports DIR] [--out FILE] [--baseline RUN.json] [--tolerance F]

Renders the offline qualification report from reports/run.json and reports/allure-results/ (or DIR's).
--baseline adds what changed since another run (new failures, fixed, coverage, drifted measurements,
tests added and removed; as hil compare).`,
  compare: `usage: hil compare A.json B.json [--tolerance F] [--json]

B (the run under review) against A (the baseline): new failures, fixed tests, tests added and removed,
documented items gained and lost, and measurements that moved outside or inside their limits or changed
by more than F of the larger value (default 0.5) and more than a tenth of their limit (without a limit:
more than 10 ms, 100 us, 10 cycles).
Exit 0 when B did not regress, 1 when it has a new failure or a measurement newly outside its limit.`,
  expectations: `usage: hil expectations update --target T [--run RUN.json] [--dir DIR]

Writes the outcome each test of a run (default reports/run.json) had into fixtures/expectations/T.json, as
the set of outcomes allowed (PASS, FAIL, ERROR, TIMEOUT, SKIP; README "Verdicts"): reasons already written
are kept, a new entry gets a reason to fill in, an outcome outside its rule's set is added to it as seen (an
ERROR is written as ERROR, never as FAIL), an entry that passed is removed (fixed), and on a whole run an
entry naming no test is removed and reported (stale).`,
  nightly: `usage: hil nightly --out DIR [--soak-minutes N] [--no-record] [run options ...]

The night's qualification in DIR/<UTC date>/: run/ (the conformance run with run.json, Allure results, the
blob report and its report), recordings/ (on the sim target: every test of the run recorded, hil run
--record, so that a failure can be replayed the next morning with hil run --target replay --recordings or
hil replay FILE; --no-record runs without, faster; other targets are not recorded), soak.json (the grant held and renewed, telemetry and events followed for N
minutes, default 10: refused and late renewals, telemetry drops and gaps, events lost, the stack's memory),
comparison.txt (against the newest earlier night in DIR) and report.html (the run's report with what
changed since that night, and a History section: the last 14 nights' measurement trends with their limits,
flaky tests, each failure's first failing night and what changed that night). Across nights: DIR/history.jsonl
(one line per night; hil history DIR prints it) and DIR/allure-history.jsonl, the history of Allure's own
report of each night, DIR/<date>/allure/index.html (one file, opens from disk). Run options are hil run's
(--target, --machine, --driver ...). Exit 0 when the run passed, the soak kept every limit and nothing
regressed.`,
  history: `usage: hil history DIR [--json] [--nights N]

The nightly history of DIR (hil nightly --out DIR): its nights with their git revision, digests, target and
driver; each test failing on the latest night with its first failing night and what changed that night;
flaky tests (an outcome that changed from one night to the next while the revision, the machine,
configuration and deployment digests, the target and the driver did not); and each run and soak
measurement night by night with its limit. --json prints the same as JSON; --nights N the last N nights
(default 14). Reads DIR/history.jsonl, and the run records of nights missing from it.`,
  allure: `usage: hil allure [--reports DIR] [--out DIR] [--history FILE]

Allure's own report of the last run (DIR/allure-results, default reports/), generated with the project's
allurerc.mjs: one self-contained index.html that opens from disk, categories for FAIL, ERROR and a host
too slow for a timing rule, and the history of earlier runs (--history FILE, default DIR/allure-history.jsonl).
Allure's page template always includes an analytics script; it is taken out. Output: DIR/allure-report/.`,
  merge: `usage: hil merge DIR... --out DIR [--no-report]

Merges runs made on several machines or runners (hil run --shard i/n --reports DIR, or whole runs) into
one run: vitest's blob reports merged by vitest itself (--merge-reports) through the harness reporter,
the Allure results put together, one run.json, one verdict, one coverage figure and one report. A test
failed in any shard fails the merge; an item covered in any shard counts. Runs against different targets
(target, driver, machine digest) stay apart: one merged run per target under DIR/<target>-<driver>-<machine>.`,
};

export async function main(argv: string[]): Promise<number> {
  const [cmd = 'help', ...rest] = argv;
  try {
    switch (cmd) {
      case 'run':
        return await run(rest, false);
      case 'test':
        return await run(rest, true);
      case 'serve':
        return await serve(rest);
      case 'cleanroom':
        return await cleanroom(rest);
      case 'replay':
        // The stack's own replay subcommand, as a separate process (DESIGN.md rule 1; docs/recording.md).
        return await serve(['replay', ...rest]);
      case 'doctor':
        // Checks what a rig needs (module, master, slaves); the stack's own subcommand, as a process.
        return await serve(['doctor', ...rest]);
      case 'config':
        return await config(rest);
      case 'coverage':
        return await coverage(rest);
      case 'fuzz':
        return await fuzz(rest);
      case 'certs':
        return await certs(rest);
      case 'report':
        return await report(rest);
      case 'compare':
        return await compare(rest);
      case 'expectations':
        return await expectations(rest);
      case 'merge':
        return await merge(rest);
      case 'nightly':
        return await nightly(rest);
      case 'dense':
        return denseCommand(rest);
      case 'history':
        return await historyCommand(rest);
      case 'allure':
        return await allureCommand(rest);
      case 'planner':
        // The planner stub is a process of the reference system (DESIGN.md rule 1): started, never imported.
        if (rest[0] !== 'serve') {
          if (wantsHelp(rest, 'planner')) return 0;
          throw new UsageError('expected: planner serve [options]');
        }
        return await startProcess(PLANNER_ENTRY, rest);
      case 'olp':
        // The OLP server is a process of the reference system (DESIGN.md rule 1): started, never imported.
        if (rest[0] !== 'serve') {
          if (wantsHelp(rest, 'olp')) return 0;
          throw new UsageError('expected: olp serve [options]');
        }
        return await startProcess(OLP_ENTRY, rest);
      case 'weldplan':
        return weldplanCommand(rest);
      case '--version':
      case 'version': {
        const { versionText } = await import('./version.ts');
        process.stdout.write(`${versionText(ROOT)}\n`);
        return 0;
      }
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(HELP['']! + '\n');
        return 0;
      default:
        throw new UsageError(`unknown command ${cmd}`);
    }
  } catch (e) {
    if (e instanceof InputError) {
      process.stderr.write(`hil: ${e.message}\n`);
      return 2;
    }
    if (e instanceof UsageError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`hil: ${(e as Error).message}\n\n${HELP[cmd] ?? HELP['']}\n`);
      return 2;
    }
    throw e;
  }
}

function wantsHelp(args: string[], cmd: string): boolean {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(HELP[cmd] + '\n');
    return true;
  }
  return false;
}

async function run(args: string[], selfTest: boolean): Promise<number> {
  if (wantsHelp(args, selfTest ? 'test' : 'run')) return 0;
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: !selfTest,
    options: {
      target: { type: 'string', default: 'sim' },
      driver: { type: 'string' },
      socket: { type: 'string' },
      'planner-url': { type: 'string' },
      'olp-url': { type: 'string' },
      'olp-facts': { type: 'string' },
      machine: { type: 'string' },
      record: { type: 'string' },
      recordings: { type: 'string' },
      bench: { type: 'string' },
      'allow-motion': { type: 'boolean', default: false },
      'no-report': { type: 'boolean', default: false },
      reports: { type: 'string' },
      shard: { type: 'string' },
      grep: { type: 'string' },
      plant: { type: 'string' },
      blob: { type: 'boolean', default: false },
      'last-failed': { type: 'boolean', default: false },
      covers: { type: 'string', multiple: true },
      watch: { type: 'boolean', default: false },
      workers: { type: 'string' },
    },
  });
  const target = values.target!;
  const REPORTS = values.reports ? resolve(values.reports) : DEFAULT_REPORTS;
  const shard = values.shard;
  // A shard always leaves its blob report for hil merge; a whole run only when asked (--blob).
  const blob = shard !== undefined || values.blob === true;
  // The blob reporter serializes the tests' errors in this process, where an assertion's bigint
  // `expected`/`actual` would throw: the JSON form the workers use (harness/bigint-json.ts).
  if (blob) await import('./bigint-json.ts');
  if (shard !== undefined) {
    const m = /^([1-9][0-9]*)\/([1-9][0-9]*)$/.exec(shard);
    if (!m || Number(m[1]) > Number(m[2])) throw new UsageError(`--shard ${shard}: expected i/n with 1 <= i <= n`);
  }
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
  if (values.watch && (shard !== undefined || values.record !== undefined || target !== 'sim')) throw new UsageError('--watch reruns files on the sim target: not with --shard, --record or another target');
  if (values.plant !== undefined) {
    if (!/^[a-z_]+@.+$/.test(values.plant)) throw new UsageError(`--plant ${values.plant}: expected FAULT@PART-OF-A-TEST-NAME (frozen_feedback@..., following_error@...)`);
    if (target !== 'sim') throw new UsageError('--plant injects through the test channel of the sim target');
    const kind = values.plant.slice(0, values.plant.indexOf('@'));
    // harness_fault is no fault of the target: the fixture throws it in the named test (harness/fixture.ts plantHarnessFault).
    if (kind !== 'harness_fault' && !(PLANTABLE_FAULTS as readonly string[]).includes(kind)) throw new InputError(`--plant ${values.plant}: no fault ${kind}; known: ${PLANTABLE_FAULTS.join(', ')}`);
    process.env.HIL_PLANT = values.plant;
  }
  if (!(target in TARGETS)) throw new UsageError(`unknown target ${target}; known: ${Object.keys(TARGETS).join(', ')}`);
  // A filter that selects no suite file would run nothing and still write a run over reports/.
  if (positionals.length) {
    const files = suiteFiles();
    const none = positionals.filter((f) => !filterMatches(f, files));
    if (none.length) throw new InputError(`no suite file matches ${none.map((f) => JSON.stringify(f)).join(', ')} (filters select files under suites/ whose path contains them)`);
  }
  if (target === 'external' && !values.socket) throw new UsageError('--target external needs --socket PATH');
  if (values.record !== undefined && target !== 'sim') throw new UsageError('--record records the sim target (a stack of ours); a replay is not re-recorded');
  if (target === 'replay') {
    if (!values.recordings) throw new UsageError('--target replay needs --recordings DIR (made with hil run --record DIR)');
    if (!existsSync(resolve(values.recordings))) throw new UsageError(`--recordings ${values.recordings}: no such directory (HIL_ERR_REPLAY_MISSING; make one with hil run --record DIR)`);
  } else if (values.recordings !== undefined) throw new UsageError('--recordings needs --target replay');

  if (target === 'rig' && (!values.machine || !values.bench)) throw new UsageError('--target rig needs --machine CONFIG and --bench PORT');
  if (values.bench !== undefined && target !== 'rig') throw new UsageError('--bench applies to the rig target');
  if (values.driver !== undefined && target !== 'sim') throw new UsageError('--driver applies to the sim target (the reference stack on a chosen bus driver)');
  if (values.driver !== undefined && !/^[a-z][a-z0-9-]{0,31}$/.test(values.driver)) throw new UsageError(`--driver ${values.driver}: not a driver name`);
  // Workers: --workers N, or from the host's cores and load (harness/sequencer.ts workersForHost); the
  // figure is noted in run.json's host record either way.
  if (values.workers !== undefined && !/^([1-9]|[1-5][0-9]|6[0-4])$/.test(values.workers)) throw new UsageError(`--workers ${values.workers}: an integer 1..64`);
  process.env.HIL_WORKERS = isShared(target) ? '1' : (values.workers ?? process.env.HIL_WORKERS ?? String(workersForHost(availableParallelism(), loadavg()[0]!)));
  process.env.HIL_TARGET = target;
  if (values.driver) process.env.HIL_DRIVER = values.driver;
  if (values.bench) process.env.HIL_BENCH = values.bench === 'sim' ? 'sim' : resolve(values.bench);
  if (values.socket) process.env.HIL_SOCKET = resolve(values.socket);
  if (values['planner-url']) process.env.HIL_PLANNER_URL = values['planner-url'];
  if (values['olp-url']) process.env.HIL_OLP_URL = values['olp-url'];
  if (values['olp-facts']) process.env.HIL_OLP_FACTS = resolve(values['olp-facts']);
  if (values.machine) process.env.HIL_MACHINE = resolve(values.machine);
  if (values['allow-motion']) process.env.HIL_ALLOW_MOTION = '1';
  if (values.record !== undefined) {
    process.env.HIL_RECORD_DIR = resolve(values.record);
    // A test that never opens the target is noted under this digest (a stackless sidecar, harness/targets/recording-store.ts).
    process.env.HIL_MACHINE_SHA256 = await machineDigest({ ...(values.machine ? { machine: resolve(values.machine) } : {}) });
  }
  if (values.recordings !== undefined) {
    process.env.HIL_RECORDINGS = resolve(values.recordings);
    process.env.HIL_REPLAY_MODE = 'strict';
    // The recordings are keyed by the machine digest of the configuration under test: compiled once here.
    process.env.HIL_MACHINE_SHA256 = await machineDigest({ ...(values.machine ? { machine: resolve(values.machine) } : {}) });
  }
  process.env.HIL_RUN_DIR = join(REPORTS, '.run');

  try {
    rmSync(join(REPORTS, 'allure-results'), { recursive: true, force: true, maxRetries: 3 });
    rmSync(join(REPORTS, 'blob'), { recursive: true, force: true, maxRetries: 3 });
  } catch (e) {
    process.stderr.write(`warning: could not clear old Allure results: ${(e as Error).message}\n`);
  }
  // N of M files, passed and failed so far, time left (harness/report/progress.ts); the reporter's lines go
  // through it so that in a terminal they land above the redrawn line.
  const progress = new Progress({ tty: isInteractive(), write: (s) => process.stdout.write(s), columns: process.stdout.columns });
  const reporter = new HilReporter({
    write: progress.print,
    command: ['hil', selfTest ? 'test' : 'run', ...args].join(' '),
    reportsDir: REPORTS,
    // A shard or a filtered run covers part of the catalogue: the gate applies to whole runs (and merges of all shards).
    gate: filters.length === 0 && shard === undefined && grep === undefined,
    selection: { filters, ...(shard ? { shard } : {}), ...(grep ? { grep } : {}) },
    targetName: target,
    ...(values.recordings !== undefined ? { replay: { recordings: resolve(values.recordings), mode: 'strict' } } : {}),
    ...(values.record !== undefined ? { recording: { dir: resolve(values.record) } } : {}),
    // Expected failures per target; per driver on the sim target; per rig (its machine configuration) on a rig.
    expectations: loadExpectations(
      target === 'rig' ? `rig+${basename(values.machine!).replace(/\.json$/, '')}` : values.driver && values.driver !== 'sim' ? `${target}+${values.driver}` : target,
    ),
    ...(values.machine ? { machine: basename(values.machine).replace(/\.json$/, '') } : {}),
  });
  // The stacks' bundle is built while vitest starts (harness/targets/reference.ts startEarlyPrebuild).
  const { startEarlyPrebuild, PREBUILT_ENV } = await import('./targets/reference.ts');
  const dropPrebuild = process.env[PREBUILT_ENV] ? async () => undefined : startEarlyPrebuild();
  const { startVitest } = await import('vitest/node');
  const ownSignals = { SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM') };
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
  await vitest.close();
  await dropPrebuild();
  const code = exitCodeOf(reporter.record);
  const closing = reporter.closingLine();
  if (!selfTest && !values['no-report'] && !values.watch && reporter.record) {
    try {
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
function lastFailedSelection(reports: string, positionals: string[]): TestSelection | undefined {
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
async function coversSelection(args: string[], positionals: string[]): Promise<TestSelection | undefined> {
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
  return r.selection;
}

/** The vitest projects that hold the conformance suites (vitest.config.ts: three projects, one pool, three priorities). */
const CONFORMANCE_PROJECTS = ['conformance', 'conformance-quiet', 'conformance-jog'];

/**
 * Per-target expectation file: fixtures/expectations/<target>.json, <target>+<driver>.json for the sim
 * target on another bus driver, rig+<machine file name>.json for a rig; {"<file> > <test>": {expected, reason}}.
 */
function loadExpectations(target: string): Record<string, Expectation> {
  const f = join(ROOT, 'fixtures', 'expectations', `${target}.json`);
  if (!existsSync(f)) return {};
  const data = JSON.parse(readFileSync(f, 'utf8')) as ExpectationFile;
  const problems = expectationProblems(data);
  if (problems.length) throw new UsageError(`${f}: ${problems.join('; ')}`);
  return data;
}

/** `hil fuzz`: the model (harness/model/) against a target for some minutes; figures printed and kept. */
async function fuzz(args: string[]): Promise<number> {
  if (wantsHelp(args, 'fuzz')) return 0;
  const { values } = parseArgs({
    args,
    options: {
      target: { type: 'string', default: 'sim' },
      minutes: { type: 'string', default: '1' },
      seed: { type: 'string' },
      commands: { type: 'string', default: '200' },
      socket: { type: 'string' },
      machine: { type: 'string' },
      bench: { type: 'string' },
      'allow-motion': { type: 'boolean', default: false },
      strict: { type: 'boolean', default: false },
      differential: { type: 'string' },
      attach: { type: 'string' },
    },
  });
  if (values.differential !== undefined) return fuzzDifferential(values);
  if (values.attach !== undefined && !existsSync(resolve(values.attach))) throw new UsageError(`--attach ${values.attach}: no such run record (a run.json written by hil run)`);
  const kind = values.target!;
  const minutes = Number(values.minutes);
  const maxCommands = Number(values.commands);
  if (!['sim', 'ethercat-fake', 'external', 'rig'].includes(kind)) throw new UsageError(`--target ${kind}: expected sim, ethercat-fake, external or rig`);
  if (!(minutes > 0)) throw new UsageError('--minutes must be a positive number');
  if (!Number.isInteger(maxCommands) || maxCommands < 1) throw new UsageError('--commands must be a positive integer');
  if (kind === 'external' && !values.socket) throw new UsageError('--target external needs --socket PATH');
  if (kind === 'rig' && (!values.machine || !values.bench)) throw new UsageError('--target rig needs --machine CONFIG and --bench PORT');
  const { checkModel, failureReport } = await import('./model/commands.ts');
  const { newStats } = await import('./model/run.ts');
  const { KNOWN_DEFECTS, rulesWithKnownDefects } = await import('./model/variants.ts');
  const { REFERENCE_RULES } = await import('./model/model.ts');
  // Known defects of the reference stack (harness/model/variants.ts) are allowed unless --strict.
  const rules = values.strict ? REFERENCE_RULES : rulesWithKnownDefects();
  if (!values.strict) for (const d of KNOWN_DEFECTS) process.stdout.write(`known defect allowed (--strict to refuse it): ${d.name}: ${d.reason}\n`);
  const { prebuildReference, PREBUILT_ENV } = await import('./targets/reference.ts');
  const built = kind === 'sim' || kind === 'ethercat-fake' ? await prebuildReference() : undefined;
  if (built) process.env[PREBUILT_ENV] = built.dir;
  const { target, stepped } = await openFuzzTarget(kind, values);
  const motion = target.abilities.motion && (kind !== 'rig' || values['allow-motion']);
  const stats = newStats();
  const started = performance.now();
  const until = started + minutes * 60_000;
  let failed = false;
  let failure: string | undefined;
  const seeds: number[] = [];
  try {
    process.stdout.write(`hil fuzz: target ${kind} (${stepped ? 'stepped clock' : 'real time'}), ${minutes} min, sequences up to ${maxCommands} commands${motion ? '' : ', motion commands left out'}
`);
    while (performance.now() < until && !failed) {
      const seed = values.seed !== undefined && seeds.length === 0 ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
      seeds.push(seed);
      process.stdout.write(`seed ${seed} (replay: HIL_MODEL_SEED=${seed} HIL_MODEL_COMMANDS=${maxCommands})
`);
      // A few sequences per seed, then the clock is looked at again (a sequence is never cut off midway,
      // so the cell is always left released).
      const r = await checkModel({ target, rules, seed, numRuns: 5, maxCommands, motion, stats });
      if (r.failed) {
        failed = true;
        failure = r.error?.split('\n')[0] ?? 'model run failed';
        process.stdout.write(`${failureReport(r, { maxCommands })}
`);
      }
    }
  } finally {
    await target.close();
    if (built) await built.remove();
  }
  const transitions = Object.entries(stats.hits).filter(([k]) => k.startsWith('transition:')).sort();
  const figures = {
    target: kind,
    clock: stepped ? 'stepped' : 'real time',
    minutes,
    seeds,
    passed: !failed,
    ...(failure !== undefined ? { failure } : {}),
    sequences: stats.sequences,
    commands: stats.commands,
    transitions_reached: transitions.length,
    per_transition: Object.fromEntries(transitions),
    per_rule: Object.fromEntries(Object.entries(stats.hits).sort()),
    wall_ms: Math.round(performance.now() - started),
  };
  process.stdout.write(`sequences ${figures.sequences}, commands ${figures.commands}, transitions reached ${figures.transitions_reached}
`);
  for (const [k, n] of transitions) process.stdout.write(`  ${k}: ${n}
`);
  // The fuzz run's own record: its figures with what ran them. A conformance run's record is changed only
  // when asked (--attach RUN.json): the last reports/run.json may be any earlier, unrelated run.
  const { gitRevisionOf, packageVersion } = await import('./version.ts');
  mkdirSync(DEFAULT_REPORTS, { recursive: true });
  const own = { schema: 'cell-hil.fuzz.v1', command: ['hil', 'fuzz', ...args].join(' '), finished_at: new Date().toISOString(), package_version: packageVersion(ROOT), git_revision: gitRevisionOf(ROOT) ?? 'unknown', ...figures };
  writeFileSync(join(DEFAULT_REPORTS, 'fuzz.json'), `${JSON.stringify(own, null, 2)}\n`);
  process.stdout.write(`hil fuzz: ${join(DEFAULT_REPORTS, 'fuzz.json')}${values.attach ? '' : ' (hil fuzz --attach RUN.json adds the figures to a run\'s report)'}\n`);
  const runJson = values.attach !== undefined ? resolve(values.attach) : undefined;
  if (runJson) {
    try {
      // Exact JSON both ways: run.json holds uint64 values (generations, sequences) a float would round.
      // run.json schema v3 (harness/report/run.schema.json): the figures go under model.fuzz; the record is
      // checked before it is written back, so a record nobody can read back is never left behind.
      const run = parseExact(readFileSync(runJson)) as Record<string, unknown>;
      run.schema = 'cell-hil.run.v3';
      run.model = { ...((run.model as object | undefined) ?? {}), fuzz: figures };
      const { runSchemaProblems } = await import('./report/run-schema.ts');
      const problems = runSchemaProblems(JSON.parse(stringifyExact(run)));
      if (problems.length) throw new Error(`the record would not match run.schema.json: ${problems.join('; ')}`);
      writeFileSync(runJson, stringifyExact(run));
    } catch (e) {
      process.stderr.write(`hil fuzz: run.json not updated: ${(e as Error).message}\n`);
    }
  }
  return failed ? 1 : 0;
}

type FuzzValues = { socket?: string; machine?: string; bench?: string; 'allow-motion'?: boolean; minutes?: string; seed?: string; commands?: string; differential?: string };

/** A fuzz target: the stepped clock and short Home where the target can give them (never sleeping through real time); otherwise real time. */
async function openFuzzTarget(kind: string, values: FuzzValues): Promise<{ target: import('./targets/types.ts').Target; stepped: boolean }> {
  const options = {
    ...(values.socket ? { socket: resolve(values.socket) } : {}),
    ...(values.machine ? { machine: resolve(values.machine) } : {}),
    ...(values.bench ? { bench: values.bench === 'sim' ? 'sim' : resolve(values.bench) } : {}),
    allowMotion: values['allow-motion'],
    serveArgs: kind === 'ethercat-fake' ? ['--driver', 'ethercat-fake'] : [],
    ...(kind === 'rig' ? { rigDriver: process.env.HIL_RIG_DRIVER } : {}),
  };
  const d = TARGETS[kind === 'ethercat-fake' ? 'sim' : (kind as 'sim' | 'external' | 'rig')];
  const { MODEL_VARIANT } = await import('./model/commands.ts');
  const short = d.cannotProvide(MODEL_VARIANT, options) === undefined;
  const stepped = short || d.cannotProvide({ clock: 'stepped' }, options) === undefined;
  const target = short ? await d.openVariant(MODEL_VARIANT, options) : stepped ? await d.openVariant({ clock: 'stepped' }, options) : await d.open(options);
  return { target, stepped };
}

/** `hil fuzz --differential A,B`: each generated sequence on two targets; the first reply that differs ends the run. */
async function fuzzDifferential(values: FuzzValues): Promise<number> {
  const kinds = values.differential!.split(',');
  if (kinds.length === 2 && kinds[0] === 'sim' && kinds[1] === 'replay') return fuzzReplay(values);
  if (kinds.length !== 2 || !kinds.every((k) => ['sim', 'ethercat-fake'].includes(k))) {
    throw new UsageError(`--differential ${values.differential}: expected two of sim, ethercat-fake, or sim,replay`);
  }
  const minutes = Number(values.minutes ?? '1');
  const maxCommands = Number(values.commands ?? '200');
  if (!(minutes > 0)) throw new UsageError('--minutes must be a positive number');
  if (!Number.isInteger(maxCommands) || maxCommands < 1) throw new UsageError('--commands must be a positive integer');
  const { differential, differentialReport, sequenceOf, sharedAbilities } = await import('./model/differential.ts');
  const { prebuildReference, PREBUILT_ENV } = await import('./targets/reference.ts');
  const built = await prebuildReference();
  process.env[PREBUILT_ENV] = built.dir;
  const opened: Array<import('./targets/types.ts').Target> = [];
  let status = 0;
  const seeds: number[] = [];
  let commands = 0;
  try {
    for (const k of kinds) opened.push((await openFuzzTarget(k, values)).target);
    const [a, b] = opened as [import('./targets/types.ts').Target, import('./targets/types.ts').Target];
    const ab = await sharedAbilities(a, b);
    const until = performance.now() + minutes * 60_000;
    process.stdout.write(`hil fuzz --differential ${kinds.join(',')}: ${minutes} min, sequences up to ${maxCommands} commands\n`);
    while (performance.now() < until) {
      const seed = values.seed !== undefined && seeds.length === 0 ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
      seeds.push(seed);
      const sequence = sequenceOf(ab, seed, maxCommands);
      commands += sequence.length;
      const r = await differential(a, b, sequence, { ab });
      if (r.first) {
        process.stdout.write(`${differentialReport(r, { names: [kinds[0]!, kinds[1]!], seed, maxCommands })}\n`);
        status = 1;
        break;
      }
      process.stdout.write(r.timing ? `seed ${seed}: ${differentialReport(r, { names: [kinds[0]!, kinds[1]!] })}\n` : `seed ${seed}: ${sequence.length} commands answered alike\n`);
    }
  } finally {
    for (const t of opened) await t.close();
    await built.remove();
  }
  process.stdout.write(`differential: ${seeds.length} sequences, ${commands} commands, ${status ? 'a difference found' : 'no difference'}\n`);
  return status;
}

/**
 * `hil fuzz --differential sim,replay`: each generated sequence is recorded on a sim stack (stepped clock,
 * `--record`) and sent again to a stack replaying that recording (`--driver replay --replay-paced`, as the
 * replay target starts one: harness/targets/replay.ts). Only the public interface: `hil serve` flags, the
 * recording file and the verdict file the replay stack writes when it stops (docs/recording.md).
 */
async function fuzzReplay(values: FuzzValues): Promise<number> {
  const minutes = Number(values.minutes ?? '1');
  const maxCommands = Number(values.commands ?? '200');
  if (!(minutes > 0)) throw new UsageError('--minutes must be a positive number');
  if (!Number.isInteger(maxCommands) || maxCommands < 1) throw new UsageError('--commands must be a positive integer');
  const { differentialReplay, differentialReport, sequenceOf } = await import('./model/differential.ts');
  const { describedAbilities } = await import('./model/commands.ts');
  const { replayStacks } = await import('./model/replay-side.ts');
  const { prebuildReference, PREBUILT_ENV } = await import('./targets/reference.ts');
  const built = await prebuildReference();
  process.env[PREBUILT_ENV] = built.dir;
  const names: [string, string] = ['sim', 'replay'];
  let status = 0;
  const seeds: number[] = [];
  let commands = 0;
  try {
    const until = performance.now() + minutes * 60_000;
    process.stdout.write(`hil fuzz --differential sim,replay: ${minutes} min, sequences up to ${maxCommands} commands\n`);
    while (performance.now() < until) {
      const seed = values.seed !== undefined && seeds.length === 0 ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
      seeds.push(seed);
      const stacks = await replayStacks({ ...(values.machine ? { machine: values.machine } : {}), run: `hil fuzz seed ${seed}` });
      try {
        const first = await stacks.record();
        const ab = await describedAbilities(first);
        const sequence = sequenceOf(ab, seed, maxCommands);
        commands += sequence.length;
        const r = await differentialReplay(sequence, { ab, record: async () => first, replay: stacks.replay });
        const verdict = stacks.verdictText(r.verdict);
        if (r.first || stacks.diverged(r.verdict)) {
          process.stdout.write(`${differentialReport(r, { names, seed, maxCommands })}\n${verdict}\n`);
          status = 1;
          break;
        }
        process.stdout.write(r.timing ? `seed ${seed}: ${differentialReport(r, { names })}\n${verdict}\n` : `seed ${seed}: ${sequence.length} commands answered alike; ${verdict}\n`);
      } finally {
        await stacks.remove();
      }
    }
  } finally {
    await built.remove();
  }
  process.stdout.write(`differential: ${seeds.length} sequences, ${commands} commands, ${status ? 'a difference found' : 'no difference'}\n`);
  return status;
}

function serve(args: string[]): Promise<number> {
  // The stack is a separate process (DESIGN.md rule 1): the harness only starts it. Descriptor 3 is its
  // lifeline, a pipe this process never writes: however this process ends (kill -9 included) the kernel
  // closes it, and the stack stops the orderly way, its planner and OLP server with it (their own lifelines).
  const stack = !['replay', 'doctor', 'sessions'].includes(args[0] ?? '') && !args.includes('-h') && !args.includes('--help');
  const child = spawn(process.execPath, [...STACK_NODE_ARGS, ...TS_NODE_ARGS, STACK_ENTRY, ...args, ...(stack ? ['--lifeline-fd', '3'] : [])], { stdio: ['inherit', 'inherit', 'inherit', 'pipe'] });
  const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
  process.on('SIGINT', forward('SIGINT'));
  process.on('SIGTERM', forward('SIGTERM'));
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

async function cleanroom(args: string[]): Promise<number> {
  if (wantsHelp(args, 'cleanroom')) return 0;
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { 'socket-dir': { type: 'string' }, 'lease-ceiling-ms': { type: 'string' }, 'lifeline-stdin': { type: 'boolean', default: false }, update: { type: 'boolean', default: false }, planner: { type: 'boolean', default: false }, 'store-dir': { type: 'string' }, port: { type: 'string' } },
  });
  if (positionals[0] === 'check-olp') {
    const { checkCleanroomOlp } = await import('./cleanroom/check.ts');
    const suites = positionals.slice(1);
    return checkCleanroomOlp({ update: values.update, ...(suites.length ? { suites } : {}) });
  }
  // The clean-room weld planner (document 2): `cleanroom serve --planner --store-dir DIR [--port P]`, `cleanroom check --planner`.
  if (values.planner) {
    if (positionals[0] === 'check') {
      const { checkCleanroomPlanner } = await import('./cleanroom/planner-check.ts');
      const suites = positionals.slice(1);
      return checkCleanroomPlanner({ update: values.update, ...(suites.length ? { suites } : {}) });
    }
    if (positionals[0] !== 'serve' || positionals.length !== 1 || !values['store-dir']) throw new UsageError('expected: cleanroom serve --planner --store-dir DIR [--port P], or cleanroom check --planner');
    const port = values.port === undefined ? undefined : Number(values.port);
    if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) throw new UsageError('--port takes 0..65535');
    const { serveCleanroomPlanner } = await import('./cleanroom/planner/server.ts');
    process.exit(await serveCleanroomPlanner({ storeDir: resolve(values['store-dir']), ...(port !== undefined ? { port } : {}) }));
  }
  if (positionals[0] === 'check') {
    if (values['socket-dir'] || values['lease-ceiling-ms'] || values['lifeline-stdin']) throw new UsageError('cleanroom check starts its own service: no serve options');
    const { checkCleanroom } = await import('./cleanroom/check.ts');
    const suites = positionals.slice(1);
    return checkCleanroom({ update: values.update, ...(suites.length ? { suites } : {}) });
  }
  if (positionals[0] !== 'serve' || positionals.length !== 1) throw new UsageError('expected: cleanroom serve --socket-dir DIR, or cleanroom check');
  if (!values['socket-dir']) throw new UsageError('cleanroom serve needs --socket-dir DIR');
  const ceiling = values['lease-ceiling-ms'] === undefined ? undefined : Number(values['lease-ceiling-ms']);
  if (ceiling !== undefined && !(Number.isInteger(ceiling) && ceiling >= 1 && ceiling <= 10_000)) throw new UsageError('--lease-ceiling-ms takes a whole number of ms, 1..10000');
  // Test equipment of the harness (like the simulated bench box), so it runs in this process.
  const { serveCleanroom } = await import('./cleanroom/service.ts');
  const code = await serveCleanroom({ socketDir: resolve(values['socket-dir']), ...(ceiling !== undefined ? { leaseCeilingMs: ceiling } : {}), lifelineStdin: values['lifeline-stdin'] });
  // Stopped (signal or lifeline): exit now, whatever the loader or stdin still hold open.
  process.exit(code);
}

function startProcess(entry: string, args: string[]): Promise<number> {
  const child = spawn(process.execPath, [...TS_NODE_ARGS, entry, ...args], { stdio: 'inherit' });
  const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
  process.on('SIGINT', forward('SIGINT'));
  process.on('SIGTERM', forward('SIGTERM'));
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

function weldplanCommand(args: string[]): number {
  if (wantsHelp(args, 'weldplan')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { out: { type: 'string' }, tooling: { type: 'string' }, step: { type: 'string' }, seal: { type: 'boolean', default: false } } });
  if (positionals[0] !== 'pack' || positionals.length !== 2 || !values.out) throw new UsageError('expected: weldplan pack PROGRAM.json --out FILE');
  const read = (file: string, what: string): Uint8Array | undefined => {
    try {
      return new Uint8Array(readFileSync(resolve(file)));
    } catch (e) {
      process.stderr.write(`hil: cannot read ${what} ${file}: ${(e as Error).message}\n`);
      return undefined;
    }
  };
  const object = (file: string, what: string): JsonObject | undefined => {
    const bytes = read(file, what);
    if (!bytes) return undefined;
    try {
      const v = parseExact(bytes);
      if (isJsonObject(v)) return v;
      process.stderr.write(`hil: ${what} ${file} is not a JSON object\n`);
    } catch (e) {
      process.stderr.write(`hil: ${what} ${file}: ${(e as { code?: string }).code ?? 'error'}: ${(e as Error).message}\n`);
    }
    return undefined;
  };
  let program = object(positionals[1]!, 'program document');
  const tooling = values.tooling ? object(values.tooling, 'tooling') : undefined;
  const step = values.step ? read(values.step, 'STEP file') : undefined;
  if (!program || (values.tooling && !tooling) || (values.step && !step)) return 1;
  if (values.seal) program = sealProgram(program);
  const bytes = packWeldplan({ program, ...(tooling ? { tooling } : {}), ...(step ? { step } : {}) });
  writeFileSync(resolve(values.out), bytes);
  process.stdout.write(`${values.out}: ${bytes.length} bytes, program_digest ${programDigest(program)}\n`);
  return 0;
}

function config(args: string[]): Promise<number> {
  // The compiler runs as its own process, like the stack in serve; its exit status is ours.
  const child = spawn(process.execPath, [...TS_NODE_ARGS, CONFIG_ENTRY, ...args], { stdio: 'inherit' });
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

async function certs(args: string[]): Promise<number> {
  if (wantsHelp(args, 'certs')) return 0;
  const [sub, ...rest] = args;
  const { values } = parseArgs({
    args: rest,
    options: {
      dir: { type: 'string' },
      'pair-id': { type: 'string' },
      host: { type: 'string', multiple: true },
      principal: { type: 'string' },
      serial: { type: 'string' },
    },
  });
  if (!values.dir) throw new UsageError('--dir DIR is required');
  const dir = resolve(values.dir);
  const tooling = await import('./certs.ts');
  const need = (v: string | undefined, flag: string): string => {
    if (!v) throw new UsageError(`${sub} needs ${flag}`);
    return v;
  };
  let out: unknown;
  try {
    switch (sub) {
      case 'create-pair':
        if (existsSync(join(dir, 'pair.json'))) throw new UsageError(`${dir} already holds a pair (pair.json); choose another directory`);
        out = await tooling.createPair({ dir, pairId: need(values['pair-id'], '--pair-id'), hosts: values.host });
        break;
      case 'issue-client':
        out = await tooling.issueClient({ dir, principal: need(values.principal, '--principal') });
        break;
      case 'revoke':
        out = await tooling.revokeSerial(dir, need(values.serial, '--serial'));
        break;
      case 'renew-crl':
        out = await tooling.renewCrl({ dir });
        break;
      default:
        throw new UsageError(`unknown certs subcommand ${sub ?? '(none)'}`);
    }
  } catch (e) {
    if (e instanceof tooling.CertError) {
      process.stderr.write(`hil certs: ${e.code}: ${e.message}\n`);
      return e.code === 'certs_usage' ? 2 : 1;
    }
    throw e;
  }
  process.stdout.write(JSON.stringify(out) + '\n');
  return 0;
}

async function coverage(args: string[]): Promise<number> {
  if (wantsHelp(args, 'coverage')) return 0;
  const { values } = parseArgs({ args, options: { json: { type: 'boolean', default: false } } });
  const { createVitest } = await import('vitest/node');
  const vitest = await createVitest('test', { root: ROOT, watch: false, project: CONFORMANCE_PROJECTS, reporters: [] });
  const traces: Array<{ fullName: string; covers: string[] }> = [];
  try {
    const result = await vitest.collect();
    for (const m of result.testModules) {
      const file = m.relativeModuleId;
      for (const t of m.children.allTests()) traces.push({ fullName: `${file} > ${t.fullName}`, covers: t.meta().covers ?? [] });
    }
    if (result.unhandledErrors.length) {
      process.stderr.write(`collection errors:\n${result.unhandledErrors.map((e) => `  ${(e as Error).message}`).join('\n')}\n`);
    }
  } finally {
    await vitest.close();
  }
  const cov = computeCoverage(traces);
  if (values.json) {
    process.stdout.write(
      stringifyExact(
        cov.entries.map((e) => (e.status === 'covered' ? { id: e.id, status: e.status, tests: e.tests } : { id: e.id, status: e.status, reason: e.reason })),
      ) + '\n',
    );
  } else {
    const rows = familyCounts(cov.entries);
    process.stdout.write(`${'family'.padEnd(16)} ${'covered'.padStart(8)} ${'pending'.padStart(8)} ${'total'.padStart(6)}\n`);
    for (const r of rows) process.stdout.write(`${r.family.padEnd(16)} ${String(r.covered).padStart(8)} ${String(r.pending).padStart(8)} ${String(r.total).padStart(6)}\n`);
    const c = rows.reduce((a, r) => a + r.covered, 0);
    const t = rows.reduce((a, r) => a + r.total, 0);
    process.stdout.write(`${'all'.padEnd(16)} ${String(c).padStart(8)} ${String(t - c).padStart(8)} ${String(t).padStart(6)}\n`);
    if (cov.problems.length) {
      process.stdout.write(`\ngate problems (${cov.problems.length}):\n${cov.problems.slice(0, 30).map((p) => `  - ${p}`).join('\n')}\n`);
    }
  }
  return cov.problems.length ? 1 : 0;
}

async function report(args: string[]): Promise<number> {
  if (wantsHelp(args, 'report')) return 0;
  const { values } = parseArgs({ args, options: { out: { type: 'string' }, reports: { type: 'string' }, baseline: { type: 'string' }, tolerance: { type: 'string' } } });
  const dir = values.reports ? resolve(values.reports) : DEFAULT_REPORTS;
  if (!existsSync(join(dir, 'run.json'))) throw new InputError(`${values.reports ?? 'reports/'}: no run.json there (a directory written by hil run --reports DIR)`);
  const r = await writeHtmlReport({
    runJson: join(dir, 'run.json'),
    allureDir: join(dir, 'allure-results'),
    outFile: values.out ? resolve(values.out) : join(dir, 'html', 'index.html'),
    ...(values.baseline ? { baseline: resolve(values.baseline), tolerance: toleranceOf(values.tolerance) } : {}),
  });
  for (const w of r.warnings) process.stdout.write(`note: ${w}\n`);
  process.stdout.write(`report: ${r.outFile}\n`);
  return 0;
}

function toleranceOf(text: string | undefined): Tolerance {
  if (text === undefined) return DEFAULT_TOLERANCE;
  const v = Number(text);
  if (!(v >= 0) || !Number.isFinite(v)) throw new UsageError(`--tolerance ${text}: a fraction (0.5 is 50%)`);
  return { ...DEFAULT_TOLERANCE, relative: v };
}

async function readRun(file: string): Promise<RunRecord> {
  const warnings: string[] = [];
  const { run } = await readRunRecord(resolve(file), warnings);
  for (const w of warnings) process.stderr.write(`note: ${file}: ${w}\n`);
  return run;
}

/** hil nightly: run, soak, compare with the previous night (harness/soak.ts, harness/report/compare.ts). */
async function nightly(args: string[]): Promise<number> {
  if (wantsHelp(args, 'nightly')) return 0;
  const outAt = args.indexOf('--out');
  const soakAt = args.indexOf('--soak-minutes');
  if (outAt < 0 || !args[outAt + 1]) throw new UsageError('expected: nightly --out DIR [--soak-minutes N] [run options]');
  const out = resolve(args[outAt + 1]!);
  const minutes = soakAt >= 0 ? Number(args[soakAt + 1]) : 10;
  const rssAt = args.indexOf('--soak-rss-growth-mib');
  const rssGrowthMiB = rssAt >= 0 ? Number(args[rssAt + 1]) : DEFAULT_RSS_GROWTH_MIB;
  if (!(rssGrowthMiB > 0) || !Number.isFinite(rssGrowthMiB)) throw new UsageError('--soak-rss-growth-mib N: a positive number of MiB');
  if (!(minutes >= 0) || !Number.isFinite(minutes)) throw new UsageError('--soak-minutes N: a number of minutes (0 skips the soak)');
  const runArgs = args.filter((_, i) => ![outAt, outAt + 1, soakAt, soakAt >= 0 ? soakAt + 1 : -1, rssAt, rssAt >= 0 ? rssAt + 1 : -1].includes(i) && args[i] !== '--no-record');
  if (runArgs.some((a) => a === '--reports' || a === '--shard' || a === '--record')) throw new UsageError('nightly chooses its own --reports and --record and runs every file');
  const targetAt = runArgs.indexOf('--target');
  const targetName = targetAt >= 0 ? runArgs[targetAt + 1] : 'sim';
  // The run recorded (hil run --record: a stack per test, each test's recording kept) where a recording
  // can be made: the sim target, our stack. A morning's failure then replays without the rig or the night.
  const record = !args.includes('--no-record') && targetName === 'sim';
  const earlier = existsSync(out) ? readdirSync(out).filter((d) => /^\d{4}-\d{2}-\d{2}(-\d+)?$/.test(d) && existsSync(join(out, d, 'run', 'run.json'))).sort() : [];
  const day = new Date().toISOString().slice(0, 10);
  let dated = join(out, day);
  for (let k = 2; existsSync(dated); k++) dated = join(out, `${day}-${k}`);
  mkdirSync(dated, { recursive: true });
  const code = await run([...runArgs, '--reports', join(dated, 'run'), '--blob', '--no-report', ...(record ? ['--record', join(dated, 'recordings')] : [])], false);
  process.stdout.write(record ? `nightly: recordings in ${join(dated, 'recordings')} (replay: hil run --target replay --recordings ${join(dated, 'recordings')})\n` : `nightly: the run is not recorded (${targetName === 'sim' ? '--no-record' : `only the sim target records; this is ${targetName}`})\n`);
  let soaked: { measurements: import('./measure.ts').MeasurementRecord[] } | undefined;
  // The soak is part of the night's verdict: its figures, its first refusal and memory against a limit go
  // into the run's record, so the verdict, the report and the next night's comparison all carry it.
  // The soak's own Describe fills in a record whose run noted none (the digests of what ran).
  const target = await openTarget();
  try {
    const described = await target.client().describe();
    const d = described.reply.data as unknown as { binding: BindingInput };
    const soakRecord = minutes > 0 ? await soak(target, d.binding, minutes * 60_000, { rssGrowthMiB }) : undefined;
    soaked = soakRecord;
    if (soakRecord) {
      writeFileSync(join(dated, 'soak.json'), `${JSON.stringify(soakRecord, null, 2)}\n`);
      for (const m of soakRecord.measurements) process.stdout.write(`soak: ${measurementText(m)}${m.outcome === 'fail' ? '  OUTSIDE THE LIMIT' : ''}\n`);
      if (soakRecord.first_refusal) process.stdout.write(`soak: first refusal ${soakRecord.first_refusal.at_s} s in: ${soakRecord.first_refusal.status} ${soakRecord.first_refusal.error}\n`);
      if (soakRecord.host_too_slow) process.stdout.write(`soak: HIL_ERR_HOST_TOO_SLOW: ${soakRecord.host_too_slow}\n`);
    }
    noteSoak(join(dated, 'run', 'run.json'), soakRecord, described.status === 200 ? { driver: target.driver, describe: described.reply.data } : undefined);
  } finally {
    await target.close();
  }
  const previous = earlier.at(-1);
  let regressedSince = false;
  if (previous) {
    const c = compareRuns(await readRun(join(out, previous, 'run', 'run.json')), await readRun(join(dated, 'run', 'run.json')));
    writeFileSync(join(dated, 'comparison.txt'), `since ${previous}\n${comparisonText(c)}\n`);
    regressedSince = regressed(c);
    process.stdout.write(`compared with ${previous}: ${c.newFailures.length} new failures, ${c.fixed.length} fixed, ${c.drifts.length} drifted measurements\n`);
  }
  // Across nights: DIR/history.jsonl, the report's History section, Allure's report with its history (harness/history.ts).
  const { nightlyHistory } = await import('./history.ts');
  const { sections } = await nightlyHistory({ out, dated, night: basename(dated), run: await readRun(join(dated, 'run', 'run.json')), ...(soaked ? { soak: soaked } : {}), readRun, log: (s) => process.stdout.write(s) });
  const r = await writeHtmlReport({
    runJson: join(dated, 'run', 'run.json'),
    allureDir: join(dated, 'run', 'allure-results'),
    outFile: join(dated, 'report.html'),
    sections,
    ...(previous ? { baseline: join(out, previous, 'run', 'run.json') } : {}),
  });
  const night = await readRun(join(dated, 'run', 'run.json'));
  const v = verdictOf(night);
  process.stdout.write(`nightly: ${dated} (report ${r.outFile})\nnightly verdict: ${v.headline}\n`);
  for (const reason of v.reasons) process.stdout.write(`  - ${reason}\n`);
  return code === 0 && v.exitCode === 0 && !regressedSince ? 0 : 1;
}

/** hil history DIR [--json] [--nights N]: the nightly history as the night's report shows it (harness/history.ts). */
async function historyCommand(args: string[]): Promise<number> {
  if (wantsHelp(args, 'history')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { json: { type: 'boolean', default: false }, nights: { type: 'string' } } });
  if (positionals.length !== 1) throw new UsageError('expected: history DIR (the --out DIR of hil nightly)');
  const dir = resolve(positionals[0]!);
  if (!existsSync(dir)) throw new UsageError(`${positionals[0]}: no such directory`);
  const { analyse, backfillHistory, historyText, HISTORY_NIGHTS } = await import('./history.ts');
  const nights = values.nights === undefined ? HISTORY_NIGHTS : Number(values.nights);
  if (!Number.isInteger(nights) || nights < 1) throw new UsageError(`--nights ${values.nights}: a whole number of nights, at least 1`);
  const warnings: string[] = [];
  // Nights missing from history.jsonl are read from their run records, without writing the file.
  const a = analyse(await backfillHistory(dir, readRun, warnings, false), nights);
  for (const w of warnings) process.stderr.write(`note: ${w}\n`);
  process.stdout.write(values.json ? `${JSON.stringify({ nights: a.nights.map((n) => ({ night: n.night, verdict: n.verdict, identity: n.identity })), failing: a.failing, flaky: a.flaky, trends: a.trends }, null, 2)}\n` : historyText(a));
  return 0;
}

/** hil allure [--reports DIR] [--out DIR] [--history FILE]: Allure's report of a run, configured by allurerc.mjs, with no analytics tag. */
async function allureCommand(args: string[]): Promise<number> {
  if (wantsHelp(args, 'allure')) return 0;
  const { values } = parseArgs({ args, options: { reports: { type: 'string' }, out: { type: 'string' }, history: { type: 'string' } } });
  const dir = values.reports ? resolve(values.reports) : DEFAULT_REPORTS;
  if (!existsSync(join(dir, 'allure-results'))) throw new UsageError(`${join(dir, 'allure-results')}: no Allure results (run hil run first)`);
  const { generateAllureReport } = await import('./report/allure-report.ts');
  const index = await generateAllureReport({ results: [join(dir, 'allure-results')], out: values.out ? resolve(values.out) : join(dir, 'allure-report'), historyPath: values.history ? resolve(values.history) : join(dir, 'allure-history.jsonl') });
  process.stdout.write(`allure: ${index} (one file; open it from disk)\n`);
  return 0;
}

/** hil merge DIR... --out DIR: shard runs merged into one run per target (harness/report/merge.ts). */
async function merge(args: string[]): Promise<number> {
  if (wantsHelp(args, 'merge')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { out: { type: 'string' }, 'no-report': { type: 'boolean', default: false } } });
  if (!values.out || positionals.length === 0) throw new UsageError('expected: merge DIR... --out DIR');
  for (const d of positionals) if (!existsSync(join(resolve(d), 'run.json'))) throw new UsageError(`${d}: no run.json (a directory written by hil run --reports DIR)`);
  const merged = await mergeRuns({
    root: ROOT,
    dirs: positionals.map((d) => resolve(d)),
    out: resolve(values.out),
    report: !values['no-report'],
    // The sim target on another driver has its own file (as hil run chooses it); a rig's is chosen by its machine file, which a record does not keep.
    expectationsFor: (r) => loadExpectations(r.target.name === 'sim' && r.target.driver !== 'sim' && r.target.driver !== 'unknown' ? `sim+${r.target.driver}` : r.target.name),
  });
  for (const m of merged) process.stdout.write(`${m.group}: ${m.closing}\n`);
  return merged.some((m) => m.exitCode !== 0) ? 1 : 0;
}

/** hil compare A.json B.json: B (the run under review) against A (the baseline). Exit 1 when B regressed. */
async function compare(args: string[]): Promise<number> {
  if (wantsHelp(args, 'compare')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { tolerance: { type: 'string' }, json: { type: 'boolean', default: false } } });
  if (positionals.length !== 2) throw new UsageError('expected: compare A.json B.json');
  for (const f of positionals) if (!existsSync(resolve(f))) throw new InputError(`${f}: no such file (a run.json written by hil run)`);
  const runOf = (f: string) =>
    readRun(f).catch((e: unknown) => {
      throw new InputError(`${f}: not a run record: ${String((e as Error).message ?? e).split('\n')[0]}`);
    });
  const c = compareRuns(await runOf(positionals[0]!), await runOf(positionals[1]!), toleranceOf(values.tolerance));
  process.stdout.write(values.json ? `${JSON.stringify(c, null, 2)}\n` : `${comparisonText(c)}\n`);
  return regressed(c) ? 1 : 0;
}

/** hil expectations update --target T [--run FILE]: the run's failures into fixtures/expectations/<target>.json. */
async function expectations(args: string[]): Promise<number> {
  if (wantsHelp(args, 'expectations')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { target: { type: 'string' }, run: { type: 'string' }, dir: { type: 'string' } } });
  if (positionals[0] !== 'update' || positionals.length !== 1) throw new UsageError('expected: expectations update --target T');
  if (!values.target || !/^[a-z][a-z0-9+_.-]{0,63}$/.test(values.target)) throw new UsageError('--target T: the expectation file name (sim, sim+ethercat-fake, rig+bench-two-axis ...)');
  const run = await readRun(values.run ?? join(DEFAULT_REPORTS, 'run.json'));
  const file = join(values.dir ? resolve(values.dir) : join(ROOT, 'fixtures', 'expectations'), `${values.target}.json`);
  const current = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as ExpectationFile) : {};
  const problems = expectationProblems(current);
  if (problems.length) throw new UsageError(`${file}: ${problems.join('; ')}`);
  // The run's own context decides which conditional rule its outcomes update (harness/report/expectations.ts).
  const machine = /--machine[= ](\S+)/.exec(run.command)?.[1];
  const u = updateExpectations(run, current, {
    target: run.target.name,
    ...(run.target.driver !== 'unknown' ? { driver: run.target.driver } : {}),
    ...(machine ? { machine: basename(machine).replace(/\.json$/, '') } : {}),
    ...(run.environment.machine_sha256 ? { machine_sha256: run.environment.machine_sha256 } : {}),
  });
  writeFileSync(file, `${JSON.stringify(u.next, null, 2)}\n`);
  const w = (title: string, xs: string[]) => {
    process.stdout.write(`${title}: ${xs.length}\n`);
    for (const x of xs) process.stdout.write(`  ${x}\n`);
  };
  w('added (write a reason)', u.added);
  w('kept', u.kept);
  w('widened by the outcome seen (an ERROR is written as ERROR)', u.widened);
  w('fixed (removed)', u.fixed);
  w('stale: no such test (removed)', u.stale);
  process.stdout.write(`wrote ${file}\n`);
  return 0;
}

/**
 * hil dense inspect FILE. The verdict is the oracle decoder's (the first broken rule); the listing is
 * read leniently so a person sees as much of a broken file as can be read.
 */
function denseCommand(args: string[]): number {
  if (wantsHelp(args, 'dense')) return 0;
  const [sub, file, ...extra] = args;
  if (sub !== 'inspect' || file === undefined || extra.length) throw new UsageError('expected: dense inspect FILE');
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(readFileSync(resolve(file)));
  } catch (e) {
    process.stderr.write(`hil: cannot read ${file}: ${(e as Error).message}\n`);
    return 1;
  }
  const out: string[] = [`file        ${file} (${bytes.length} bytes)`];
  let header: JsonExact | undefined;
  const headerLength = bytes.length >= 4 ? new DataView(bytes.buffer, bytes.byteOffset).getUint32(0, false) : undefined;
  if (headerLength !== undefined && 4 + headerLength <= bytes.length) {
    out.push(`header_len  ${headerLength}`);
    try {
      header = parseExact(decodeUtf8Strict(bytes.subarray(4, 4 + headerLength)));
    } catch {
      out.push('header      (not valid JSON)');
    }
  }
  if (isJsonObject(header)) {
    const show = (v: JsonExact | undefined) => (v === undefined ? '(absent)' : typeof v === 'string' ? v : stringifyExact(v));
    out.push('header:');
    for (const key of ['schema', 'plan_id', 'program_id', 'program_digest', 'trajectory_digest', 'manifest_revision', 'plan_revision', 'created_at', 'axes', 'sampling', 'limits', 'sample_encoding']) {
      out.push(`  ${key.padEnd(18)} ${show(header[key])}`);
    }
    const others = Object.keys(header).filter((k) => !['segments', 'schema', 'plan_id', 'program_id', 'program_digest', 'trajectory_digest', 'manifest_revision', 'plan_revision', 'created_at', 'axes', 'sampling', 'limits', 'sample_encoding'].includes(k));
    if (others.length) out.push(`  other keys         ${others.join(', ')}`);
    const segs = Array.isArray(header.segments) ? header.segments : [];
    out.push(`segments (${segs.length}):`);
    out.push(`  ${'index'.padEnd(6)}${'kind'.padEnd(11)}${'samples'.padStart(8)}  ${'duration_s'.padEnd(12)}${'offset'.padStart(10)}${'length'.padStart(10)}  block`);
    const bodyStart = 4 + headerLength!;
    for (const seg of segs) {
      if (!isJsonObject(seg)) continue;
      const block = isJsonObject(seg.block) ? seg.block : {};
      const off = typeof block.byte_offset === 'bigint' ? Number(block.byte_offset) : NaN;
      const len = typeof block.byte_length === 'bigint' ? Number(block.byte_length) : NaN;
      const inside = Number.isSafeInteger(off) && Number.isSafeInteger(len) && bodyStart + off + len <= bytes.length;
      const ok = inside ? (blockSha256(bytes.subarray(bodyStart + off, bodyStart + off + len)) === block.sha256 ? 'ok' : 'bad') : 'outside the file';
      out.push(`  ${show(seg.index).padEnd(6)}${show(seg.kind).padEnd(11)}${show(seg.sample_count).padStart(8)}  ${show(seg.duration_s).padEnd(12)}${show(block.byte_offset).padStart(10)}${show(block.byte_length).padStart(10)}  ${ok}`);
    }
  }
  try {
    const d = decodeDense(bytes);
    out.push(`digest      ${d.trajectoryDigest} ok`);
    out.push(`verdict     valid (${d.totalSampleCount} samples in ${d.segments.length} segments, ${d.totalDurationS} s)`);
    process.stdout.write(out.join('\n') + '\n');
    return 0;
  } catch (e) {
    if (!(e instanceof OracleError)) throw e;
    out.push(`verdict     ${e.code}: ${e.message}`);
    process.stdout.write(out.join('\n') + '\n');
    process.stderr.write(`${e.code}\n`);
    return 1;
  }
}
