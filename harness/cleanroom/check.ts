// `hil cleanroom check`: the suites against an independent reading of document 1 (harness/cleanroom/
// service.ts), as CI runs it. It starts the clean-room service, runs the folders it can answer through
// `hil run --target external`, and holds the outcome to two statements:
//
// - the verdict is PASS: every contract test passes or skips with its reason, so a suite that asks for more
//   than the document says (a profile detail asserted as contract, a rule reached only through an
//   operation the target declares unimplemented) shows up as a FAIL here;
// - the profile differences (informative: a detail the documents leave open, answered otherwise than
//   docs/profile.md) are exactly the expected list in fixtures/expectations/cleanroom-informative.json, so a
//   suite change that turns a difference into a failure, or hides one, is caught too.
//
// The clean-room service runs as its own process, as `hil cleanroom serve` with a remote listener on
// 127.0.0.1 and a free port, on the files of a pair directory the certificate tooling made in the check's
// temporary directory (its TLS needs an OpenSSL configuration of its own, harness/cleanroom/remote.ts);
// its log goes to a file there. The run is a child `hil run` that reaches both transports (`--socket`,
// `--remote-url`, `--remote-pair`, `--service-log`), starts the clean room itself with flags of the
// start-up tests' choosing (`--serve-command`), and writes its reports to the temporary directory
// (HIL_REPORTS_DIR), so the project's reports/ stay untouched.

import type { CleanroomOlpCell } from './processes.ts';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostTooSlowOnly } from '../report/retry-rule.ts';
import type { RunRecord } from '../report/run-types.ts';
import { startCleanroomService } from './processes.ts';
import { shellWord } from '../targets/remote.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The suite folders whose subject the clean-room service implements (document 1 parts 1, 2, 4, 5, 6, 8). */
export const CLEANROOM_SUITES = ['suites/envelope', 'suites/grant', 'suites/events', 'suites/capabilities', 'suites/observation', 'suites/remote'];

/** The pair the check's certificates are made for (the clean-room service's binding names it too). */
const PAIR_ID = 'cleanroom-pair';

/** Where the expected profile differences are kept. */
export const EXPECTED_FILE = join(ROOT, 'fixtures', 'expectations', 'cleanroom-informative.json');

/** A fixed property seed: the envelope property test's cases (and so its difference) are the same every run. */
const PROPERTY_SEED = '20261125';

/** "<file> > <full test name>" → the profile decisions it differs from, sorted. */
export type Differences = Record<string, string[]>;

/** The profile differences of a run: failed profile tests (informative) and profile checks inside contract tests. */
export function differencesOf(run: Pick<RunRecord, 'tests'>): Differences {
  const out: Differences = {};
  for (const t of run.tests) {
    const ids = new Set<string>();
    if (t.informative) for (const c of t.covers) if (c.startsWith('profile:')) ids.add(c);
    for (const d of t.profile_differences ?? []) ids.add(d.profile);
    if (ids.size) out[`${t.file} > ${t.fullName}`] = [...ids].sort();
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** What differs between the expected and the found differences; empty when they are equal. */
export function compareDifferences(expected: Differences, found: Differences): string[] {
  const problems: string[] = [];
  for (const [test, ids] of Object.entries(expected)) {
    const got = found[test];
    if (!got) problems.push(`no longer a profile difference (hidden, or now passing or failing): ${test} [${ids.join(', ')}]`);
    else if (got.join() !== ids.join()) problems.push(`differs from other decisions than expected: ${test}: expected [${ids.join(', ')}], found [${got.join(', ')}]`);
  }
  for (const [test, ids] of Object.entries(found)) if (!expected[test]) problems.push(`a new profile difference: ${test} [${ids.join(', ')}]`);
  return problems;
}

export interface CheckOptions {
  /** Rewrite the expected list from this run instead of comparing (after a deliberate suite change). */
  update?: boolean;
  /** Suite folders or files (default CLEANROOM_SUITES). */
  suites?: string[];
  log?: (line: string) => void;
}

export async function checkCleanroom(o: CheckOptions = {}): Promise<number> {
  const log = o.log ?? ((l: string) => process.stdout.write(`${l}\n`));
  const dir = mkdtempSync(join(tmpdir(), 'hil-cleanroom-'));
  const reports = join(dir, 'reports');
  let service: Awaited<ReturnType<typeof startCleanroomService>> | undefined;
  try {
    const { createPair } = await import('../certs.ts');
    const pair = await createPair({ dir: join(dir, 'pair'), pairId: PAIR_ID });
    const serviceLog = join(dir, 'cleanroom.log');
    service = await startCleanroomService({ socketDir: join(dir, 'sock'), pair, pairId: PAIR_ID, log: serviceLog });
    const env: NodeJS.ProcessEnv = { ...process.env, HIL_REPORTS_DIR: reports, HIL_PROPERTY_SEED: PROPERTY_SEED };
    // A check started from inside a vitest worker must not hand the nested run the worker's own settings.
    for (const k of Object.keys(env)) if (k.startsWith('VITEST') || k.startsWith('HIL_REMOTE') || ['HIL_TARGET', 'HIL_SOCKET', 'HIL_RUN_DIR', 'HIL_SERVICE_LOG', 'HIL_SERVICE_PID', 'HIL_SERVE_COMMAND'].includes(k)) delete env[k];
    return await runAndPin({
      name: 'cleanroom check', env, reports, expectedFile: EXPECTED_FILE, update: o.update, log,
      args: [
        ...['run', '--target', 'external', '--socket', service.control],
        ...['--remote-url', `https://${service.remote}`, '--remote-pair', pair.dir, '--service-log', serviceLog],
        // The service runs on this host beside whatever else loads it: a rule it keeps by acting in time
        // counts the host's delays as the host's (README "Verdicts").
        ...servicePidArgs(service.pid),
        ...['--serve-command', `${shellWord(process.execPath)} ${shellWord(join(ROOT, 'harness', 'bin', 'hil.mjs'))} cleanroom serve --socket-dir {socket_dir}`],
        ...['--no-report', ...(o.suites ?? CLEANROOM_SUITES)],
      ],
      notPass: 'the run against the clean-room service is not PASS: a suite asks for more than document 1 says, or the clean-room service broke it',
    });
  } finally {
    await service?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Where the expected profile differences of the OLP suites against the clean-room OLP server are kept. */
export const EXPECTED_OLP_FILE = join(ROOT, 'fixtures', 'expectations', 'cleanroom-olp-informative.json');

/**
 * `hil cleanroom check-olp`: the OLP suites against the clean-room OLP server (harness/cleanroom/olp/, written
 * from the documents alone), as CI runs it. One `hil serve --planner-port 0` stack (the control service and
 * the weld planner stub) stands behind it; the server runs as its own process, started as its authors start
 * it (harness/cleanroom/processes.ts), with a two-cell catalogue (cell-a and cell-b, both that stack's
 * control service) written in the authors' cells-file format. The run is a child `hil run --target external
 * --olp-url ... --olp-facts ...`. It holds the outcome to the same two statements as the document-1 check:
 * PASS, and exactly the pinned profile differences.
 */
export async function checkCleanroomOlp(o: CheckOptions = {}): Promise<number> {
  const log = o.log ?? ((l: string) => process.stdout.write(`${l}\n`));
  const dir = mkdtempSync(join(tmpdir(), 'hil-cleanroom-olp-'));
  const reports = join(dir, 'reports');
  const { startCleanroomOlp } = await import('./processes.ts');
  const { createHash } = await import('node:crypto');
  const stackDir = join(dir, 'stack');
  const stack = spawn(process.execPath, [join(ROOT, 'harness', 'bin', 'hil.mjs'), 'serve', '--socket-dir', stackDir, '--planner-port', '0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let server: Awaited<ReturnType<typeof startCleanroomOlp>> | undefined;
  try {
    const ready = await new Promise<{ control: string; planner: string; pid: number | undefined }>((resolve, reject) => {
      let out = '';
      stack.stdout!.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        const line = out.split('\n').find((l) => l.startsWith('ready '));
        if (line) {
          const j = JSON.parse(line.slice(6)) as Record<string, unknown>;
          // The stack's own process (hil serve starts it as its child): the ready line's pid.
          resolve({ control: String(j.control), planner: String(j.planner), pid: typeof j.pid === 'number' ? j.pid : undefined });
        }
      });
      stack.once('exit', (c) => reject(new Error(`hil serve exited with ${c} before ready`)));
    });
    const robots = join(ROOT, 'fixtures', 'robots');
    const urdfFile = join(robots, 'sim-nine-axis.urdf');
    const cell = {
      control_socket: ready.control, model_id: 'sim-nine-axis',
      robot_description_sha256: 'sha256:' + createHash('sha256').update(readFileSync(urdfFile)).digest('hex'),
      robot_description_file: urdfFile, backend: 'simulation' as const,
    };
    const cellsFile = join(dir, 'cells.json');
    const cells: CleanroomOlpCell[] = [{ cell_id: 'cell-a', ...cell }, { cell_id: 'cell-b', ...cell }];
    writeFileSync(cellsFile, JSON.stringify({ cells }, null, 2));
    server = await startCleanroomOlp({ cellsFile, plannerUrl: ready.planner, robotStore: robots });
    const facts = join(dir, 'olp-facts.json');
    writeFileSync(facts, JSON.stringify({
      planner_url: ready.planner, planner_stub: true,
      cells: { 'cell-a': { model_id: cell.model_id, control_socket: ready.control }, 'cell-b': { model_id: cell.model_id, control_socket: ready.control } },
    }));
    const env: NodeJS.ProcessEnv = { ...process.env, HIL_REPORTS_DIR: reports };
    for (const k of Object.keys(env)) if (k.startsWith('VITEST') || k.startsWith('HIL_TARGET') || k === 'HIL_SOCKET' || k === 'HIL_RUN_DIR' || k === 'HIL_SERVICE_PID' || k.startsWith('HIL_OLP') || k === 'HIL_PLANNER_URL') delete env[k];
    return await runAndPin({
      name: 'cleanroom check-olp', env, reports, expectedFile: EXPECTED_OLP_FILE, update: o.update, log,
      // The stack's and the OLP server's processes: both on this host (README "Verdicts", --service-pid).
      args: ['run', '--target', 'external', '--socket', ready.control, '--olp-url', server.url, '--olp-facts', facts, '--allow-motion', ...servicePidArgs(ready.pid, server.pid), '--no-report', ...(o.suites ?? ['suites/olp'])],
      notPass: 'the run against the clean-room OLP server is not PASS: a suite asks for more than document 3 says, or the clean-room server broke it',
    });
  } finally {
    await server?.close();
    stack.kill('SIGTERM');
    await new Promise<void>((r) => (stack.exitCode !== null ? r() : stack.once('exit', () => r())));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `--service-pid` naming the processes of these ids that are known (none: no option). */
function servicePidArgs(...pids: Array<number | undefined>): string[] {
  const known = pids.filter((p): p is number => p !== undefined);
  return known.length ? ['--service-pid', known.join(',')] : [];
}

/**
 * Runs `hil run ARGS` (the external target against a clean-room reading) with its reports in `reports`,
 * prints the run's own summary, and holds its profile differences to the pinned file: exit 0 only when the
 * verdict is PASS and the differences are exactly the pinned ones (`update` rewrites the file instead).
 */
export async function runAndPin(p: { name: string; args: string[]; env: NodeJS.ProcessEnv; reports: string; expectedFile: string; update?: boolean; notPass: string; log: (line: string) => void }): Promise<number> {
  const { name, log } = p;
  let code = await runChild(p.args, p.env, log);
  const runFile = join(p.reports, 'run.json');
  if (!existsSync(runFile)) {
    log(`${name}: the run wrote no run.json`);
    return 1;
  }
  let record = JSON.parse(readFileSync(runFile, 'utf8')) as RunRecord;
  // Tests the harness could not judge on a loaded host (HIL_ERR_HOST_TOO_SLOW), and nothing else, kept the
  // run from passing: they run once more and their outcomes replace the first ones (harness/report/retry-rule.ts).
  const retry = code !== 0 && !p.update ? hostTooSlowOnly(record) : undefined;
  if (retry?.retry) {
    log(`${name}: only HIL_ERR_HOST_TOO_SLOW kept the run from passing; ${retry.tests.length} test${retry.tests.length === 1 ? '' : 's'} once more`);
    const first = record;
    code = await runChild([...p.args.filter((a) => !a.startsWith('suites/')), '--last-failed'], p.env, log);
    const again = JSON.parse(readFileSync(runFile, 'utf8')) as RunRecord;
    const merged = mergeRetry(first, again, retry.tests);
    record = merged.record;
    code = merged.passed ? 0 : 1;
  }
  const found = differencesOf(record);
  if (p.update) {
    writeFileSync(p.expectedFile, JSON.stringify(found, null, 2) + '\n');
    log(`${name}: wrote ${Object.keys(found).length} expected profile differences to ${p.expectedFile}`);
    return code;
  }
  const expected = existsSync(p.expectedFile) ? (JSON.parse(readFileSync(p.expectedFile, 'utf8')) as Differences) : {};
  const problems = compareDifferences(expected, found);
  for (const x of problems) log(`${name}: ${x}`);
  if (code !== 0) log(`${name}: ${p.notPass}`);
  const ok = code === 0 && problems.length === 0;
  log(`${name}: ${ok ? 'ok' : 'FAILED'} (${Object.keys(found).length} profile differences${problems.length ? `, ${problems.length} unlike ${p.expectedFile}` : ', as expected'})`);
  return ok ? 0 : 1;
}

/**
 * The first run with the outcomes of the retried tests from the second. Only the tests the retry is for take
 * their second outcome: --last-failed may rerun more (a profile difference is a failed test too), and a second
 * outcome of those says nothing the first did not. `passed`: no test left failed or errored that counts (the
 * retry rule let the rest of the first run pass: gate, measurements, skips).
 */
export function mergeRetry(first: RunRecord, again: RunRecord, retried: ReadonlyArray<RunRecord['tests'][number]>): { record: RunRecord; passed: boolean } {
  const key = (t: RunRecord['tests'][number]) => `${t.file} > ${t.fullName}`;
  const want = new Set(retried.map(key));
  const rerun = new Map(again.tests.filter((t) => want.has(key(t))).map((t) => [key(t), t]));
  const record = { ...first, tests: first.tests.map((t) => rerun.get(key(t)) ?? t) };
  const passed = [...want].every((k) => rerun.has(k)) && !record.tests.some((t) => (t.state === 'failed' || t.state === 'errored') && !t.expected_failure && !t.informative);
  return { record, passed };
}

/** One child `hil ARGS`; logs the run's own summary and resolves with its exit status. */
function runChild(args: string[], env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<number> {
  return new Promise<number>((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'harness', 'bin', 'hil.mjs'), ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (c) => {
      // The run's own summary: its failures, profile differences and closing line.
      const at = out.indexOf('\nFailures:');
      const at2 = out.indexOf('\nProfile differences');
      const from = at >= 0 ? at : at2 >= 0 ? at2 : Math.max(0, out.lastIndexOf('\ntarget '));
      log(out.slice(from).trim());
      resolve(c ?? 1);
    });
  });
}
