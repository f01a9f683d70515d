// The usage text of `hil` and of each verb (printed by --help and after a usage error).

type TargetTexts = typeof import('./run-target.ts');

/** The targets' option texts (harness/cli/run-target.ts), loaded only for the run's usage: they load every target's descriptor. */
let targets: TargetTexts | undefined;

/** The usage text of verb `cmd` ('' for hil itself), or undefined for a word that is no verb. */
export async function helpOf(cmd: string): Promise<string | undefined> {
  if (cmd === 'run') targets ??= await import('./run-target.ts');
  return Object.hasOwn(HELP, cmd) ? HELP[cmd] : undefined;
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
  // From the targets' descriptors (harness/cli/run-target.ts), read when printed (helpOf loads them first).
  get run(): string {
    return `usage: hil run ${targets!.targetUsage()}
               [--no-report] [--reports DIR] [--shard i/n] [--blob] [--grep PATTERN] [--plant FAULT@TEST] [--workers N]
               [--busy-loops N] [--long]
               [--last-failed | --covers ID[,ID...]] [--watch] [filter ...]

Runs suites/ against the target. Filters select test files by substring (the traceability gate only
applies to a full run). Writes reports/run.json, reports/allure-results/, reports/junit.xml and, unless
--no-report, reports/html/index.html. A target's options are its own: another target's flag is a usage
error; each reaches the test workers as the environment variable in brackets.

${targets!.targetHelp()}

  --no-report       skip the HTML report
  --reports DIR     write run.json, allure-results/, junit.xml, blob/ and html/ under DIR (default reports/)
  --shard i/n       run the i-th of n shares of the files (vitest's sharding); merge with hil merge
  --blob            also write vitest's blob report of a whole run (a shard always does), for hil merge
  --grep PATTERN    only tests whose name matches (vitest's test name pattern)
  --last-failed     only the tests that failed or errored in the last run (run.json under --reports)
  --covers ID       only the tests whose covers() name a catalogue item: an id (reason:control_session_stale)
                    or a pattern with * ('reason:*'); repeat it or separate ids by commas; file filters narrow it
  --long            also the long tier: tests that wait out a documented bound of more than a minute (the
                    remote listener's 65 s reply write bound, the 90 s idle closes); without it they skip
                    and say so (HIL_LONG=1 too)
  --watch           run, then rerun a suite file when it (or a module it imports) is saved (vitest's watch
                    mode), with the stack bundle and vitest's transforms kept from run to run (the workers and
                    their stack hosts start again per rerun); run.json after each rerun, no HTML report;
                    Ctrl-C stops (exit status: the last run's)
  --plant FAULT@TEST  sim: inject FAULT through the test channel just before the first motion command
                    (other than Home) of the test whose full name contains TEST, on that command's
                    lowest axis (shows a failed motion test in the report); harness_fault@TEST
                    throws a TypeError in that test instead (a harness fault: ERROR, README "Verdicts")
  --workers N       test workers (1..64); default from the host's cores and its load when the run starts
                    (README "Verdicts"); a shared target (external, rig) always runs one
  --busy-loops N    N processes (0..16) each keeping a core busy beside the run, which end with it: what the
                    verdicts are worth on a loaded host (README "Verdicts"); the run record notes them`;
  },
  test: `usage: hil test

Runs the unit tests of the harness and the reference stack, then the conformance suites against the
simulator, with the traceability gate. This is what npm test runs.`,
  serve: `usage: hil serve --socket-dir DIR [options]   (hil serve --help for the stack's own options)`,
  cleanroom: `usage: hil cleanroom serve --socket-dir DIR [--lease-ceiling-ms N] [--pair-id ID] [--lifeline-stdin]
           [--remote-listen HOST:PORT --remote-ca F --remote-cert F --remote-key F --remote-crl F
            --pair-id ID [--link-profile lan|internet] [--log-file FILE]
            [--remote-jog-max-uncertainty-ns N] [--remote-jog-drift-ppb N] [--remote-jog-calibration-max-age-ns N]]
       hil cleanroom check [--update] [suite ...]
       hil cleanroom check-olp [--update] [suite ...]
       hil cleanroom serve --planner --store-dir DIR [--port P]
       hil cleanroom check --planner [--update] [suite ...]

serve: starts the clean-room control service (harness/cleanroom/service.ts), a second, independent reading
of document 1 (envelope, grant authority, Describe, Status, events; every other capability unimplemented),
for running the suites with --target external --socket DIR/control.sock. With --remote-listen it also
serves HTTPS with mutual TLS 1.3 on the files of a pair directory (hil certs create-pair): document 1
part 5, its log on stderr or in --log-file; node then runs with harness/cleanroom/no-tickets.cnf (it
restarts itself with it), and a failed check of the files is exit status 2. Prints one ready {...} line;
stops on SIGINT/SIGTERM, and when stdin closes with --lifeline-stdin.

check: starts it with a remote listener on a fresh pair, runs suites/envelope, grant, events, capabilities,
observation and remote against it through hil run --target external --remote-url ... (reports in a
temporary directory), and exits 0 only when the verdict is PASS and the profile differences are exactly
fixtures/expectations/cleanroom-informative.json; --update rewrites that file from the run instead.

check-olp: the same for document 3: starts a reference stack (hil serve), the weld planner stub and the
clean-room OLP server (harness/cleanroom/olp/, written from the documents alone, driving the stack as a
client of document 1) with a two-cell catalogue, runs suites/olp against it through hil run --target
external --olp-url ... --olp-facts ..., and exits 0 only when the verdict is PASS and the profile
differences are exactly fixtures/expectations/cleanroom-olp-informative.json.

--planner: the same for document 2. serve starts the clean-room weld planner (harness/cleanroom/planner/,
its own six-axis cell blind-six-axis) on 127.0.0.1 and prints one ready {...} line; check starts it
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
check. Exit 0 when the file is valid, 1 with the reason label (document 2 part 7) when it is not, 2 when it
cannot be read.`,
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
  nightly: `usage: hil nightly --out DIR [--soak-minutes N] [--no-record] [--no-long] [run options ...]

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
(--target, --machine, --driver ...; the long tier runs, hil run --long, unless --no-long; --busy-loops 2
for a night on a host loaded on purpose, where a correct stack must still pass). Exit 0 when the run passed, the soak kept every limit and nothing regressed.`,
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
