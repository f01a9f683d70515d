// The hil command's contract with its users: exit 0 on success, 1 on failures, 2 on usage errors, and
// --help on every command.
//
// What a verb answers (status, stdout, stderr) is checked through cli.ts main() in this process
// (harness/cli/in-process.ts): a spawned hil spends a second or more of CPU starting the TypeScript loader
// before it reaches the same code. The process itself is checked where the behaviour is the process's:
// harness/bin/hil.mjs handing main's status to the exit status, the verbs that start a process of their own
// (serve, doctor), and whole runs.

import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { catalogue } from './catalogue/index.ts';
import { PLANTABLE_FAULTS } from './cli.ts';
import { hilInProcess as hilHere } from './cli/in-process.ts';
import { packWeldplan, programDigest } from './clients/weldplan.ts';
import { parseExact, stringifyExact, type JsonObject } from './oracle/json.ts';

const HIL = fileURLToPath(new URL('./bin/hil.mjs', import.meta.url));
const hil = (...args: string[]) => spawnSync(process.execPath, [HIL, ...args], { encoding: 'utf8', timeout: 170_000 });
/** A hil process, not waited for: the process-level cases start together. */
const hilProcess = (...args: string[]) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const c = spawn(process.execPath, [HIL, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    c.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    c.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const t = setTimeout(() => c.kill('SIGKILL'), 110_000);
    c.on('error', reject);
    c.on('exit', (status) => {
      clearTimeout(t);
      resolve({ status, stdout, stderr });
    });
  });

// serve, doctor and config hand their arguments (--help too) to a process of the reference system, which
// writes to hil's own stdout and stderr: they are run as processes, started together.
test('the hil process: a usage error exits 2 with the help on stderr; serve and doctor pass on the stack\'s own status 2 for theirs; serve, doctor and config --help exit 0', { timeout: 120_000 }, async () => {
  const [unknown, serve, doctor, serveHelp, doctorHelp, configHelp] = await Promise.all([
    hilProcess('frobnicate'),
    hilProcess('serve'),
    hilProcess('doctor', '--driver', 'sim'),
    hilProcess('serve', '--help'),
    hilProcess('doctor', '--help'),
    hilProcess('config', '--help'),
  ]);
  expect([unknown.status, unknown.stdout]).toEqual([2, '']);
  expect(unknown.stderr).toMatch(/^hil: unknown command frobnicate\n\nusage: hil/);
  for (const [name, r] of [['serve', serve], ['doctor --driver sim', doctor]] as const) {
    expect(r.status, name).toBe(2);
    expect(r.stderr.length, name).toBeGreaterThan(0);
  }
  for (const [name, r] of [['serve --help', serveHelp], ['doctor --help', doctorHelp], ['config --help', configHelp]] as const) {
    expect(r.status, name + r.stderr).toBe(0);
    expect(r.stdout, name).toMatch(/usage: hil/);
  }
});

test('usage errors exit 2 with the command help', async () => {
  for (const args of [['frobnicate'], ['run', '--target', 'nowhere'], ['run', '--target', 'external'], ['run', '--bogus'], ['coverage', '--bogus'], ['run', '--target', 'rig', '--bench', 'sim'], ['run', '--target', 'rig', '--machine', 'm.json'], ['run', '--bench', 'sim'], ['run', '--target', 'external', '--socket', 's', '--driver', 'ethercat-fake'], ['planner'], ['weldplan', 'pack'], ['weldplan', 'unpack', 'x.json', '--out', 'y']]) {
    const r = await hilHere(args);
    expect(r.status, args.join(' ')).toBe(2);
    expect(r.stderr, args.join(' ')).toMatch(/^hil: [^\n]+\n\nusage: hil/);
  }
});

test('--busy-loops takes 0..16 and a single run: usage errors exit 2 before anything starts', async () => {
  for (const [args, line] of [
    [['run', '--busy-loops', '17'], 'hil: --busy-loops 17: an integer 0..16\n'],
    [['run', '--busy-loops', '2', '--watch'], 'hil: --busy-loops loads the host for one run: not with --watch\n'],
  ] as Array<[string[], string]>) {
    const r = await hilHere(args);
    expect(r.status, args.join(' ')).toBe(2);
    expect(r.stderr.split('\n\n')[0] + '\n', args.join(' ')).toBe(line);
  }
});

test('bad input is one line on stderr, exit 2, and nothing under --reports is touched: an unknown --plant fault, a filter matching no suite file, hil report on a directory without run.json, hil compare of a missing file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hil-cli-input-'));
  try {
    writeFileSync(join(dir, 'run.json'), 'the previous run\n');
    const cases: Array<[string[], string]> = [
      [['run', '--reports', dir, '--plant', 'nosuchfault@TEST'], `hil: --plant nosuchfault@TEST: no fault nosuchfault; known: ${PLANTABLE_FAULTS.join(', ')}\n`],
      [['run', '--reports', dir, 'suites/no-such-area/'], 'hil: no suite file matches "suites/no-such-area/" (filters select files under suites/ whose path contains them)\n'],
      [['run', '--reports', dir, 'suites/grant/grant.test.ts', 'nosuchsuite'], 'hil: no suite file matches "nosuchsuite" (filters select files under suites/ whose path contains them)\n'],
      [['report', '--reports', '/nowhere'], 'hil: /nowhere: no run.json there (a directory written by hil run --reports DIR)\n'],
      [['compare', '/nonexistent.json', 'B'], 'hil: /nonexistent.json: no such file (a run.json written by hil run)\n'],
    ];
    for (const [args, line] of cases) {
      const r = await hilHere(args);
      expect([r.status, r.stderr, r.stdout], args.join(' ')).toEqual([2, line, '']);
    }
    expect(readdirSync(dir)).toEqual(['run.json']);
    expect(readFileSync(join(dir, 'run.json'), 'utf8')).toBe('the previous run\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a file named on the command line that is missing or not what it should be is one line on stderr and exit 2, never a stack trace, and nothing is written', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hil-cli-files-'));
  try {
    writeFileSync(join(dir, 'run.json'), 'the previous run\n');
    const notJson = join(dir, 'run.json');
    const cases: Array<[string[], string | RegExp]> = [
      [['report', '--reports', dir, '--baseline', '/nonexistent.json'], 'hil: /nonexistent.json: no such file (a run.json written by hil run)\n'],
      [['expectations', 'update', '--target', 'sim', '--run', '/nonexistent.json', '--dir', dir], 'hil: /nonexistent.json: no such file (a run.json written by hil run)\n'],
      [['expectations', 'update', '--target', 'sim', '--run', notJson, '--dir', dir], new RegExp(`^hil: ${notJson}: not a run record: HIL_REPORT_RUN_JSON_UNREADABLE: [^\\n]*\\n$`)],
      [['compare', notJson, notJson], new RegExp(`^hil: ${notJson}: not a run record: HIL_REPORT_RUN_JSON_UNREADABLE: [^\\n]*\\n$`)],
      [['dense', 'inspect', '/nonexistent.rdt'], "hil: cannot read /nonexistent.rdt: ENOENT: no such file or directory, open '/nonexistent.rdt'\n"],
      [['weldplan', 'pack', '/nonexistent.json', '--out', join(dir, 'x.weldplan')], "hil: cannot read program document /nonexistent.json: ENOENT: no such file or directory, open '/nonexistent.json'\n"],
      [['weldplan', 'pack', notJson, '--out', join(dir, 'x.weldplan')], new RegExp(`^hil: program document ${notJson}: json_syntax: [^\\n]*\\n$`)],
      // The output directory is made level by level (harness/cli/common.ts makeDirs): the level that is a file is named.
      [['nightly', '--out', join(notJson, 'nights')], new RegExp(`^hil: --out ${notJson}/nights: cannot create ${notJson}/nights/[0-9-]+: ${notJson} is not a directory\\n$`)],
    ];
    for (const [args, line] of cases) {
      // A verb that throws instead (a stack trace, from a process) rejects here and fails the test.
      const r = await hilHere(args);
      expect([r.status, r.stdout], args.join(' ')).toEqual([2, '']);
      if (typeof line === 'string') expect(r.stderr, args.join(' ')).toBe(line);
      else expect(r.stderr, args.join(' ')).toMatch(line);
    }
    expect(readdirSync(dir)).toEqual(['run.json']);
    expect(readFileSync(join(dir, 'run.json'), 'utf8')).toBe('the previous run\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the faults --plant accepts are the sim driver\'s faults that take one axis and nothing else', () => {
  // Read as text, never imported: the harness does not depend on drivers/ (DESIGN.md rule 1).
  const table = readFileSync(join(fileURLToPath(new URL('..', import.meta.url)), 'drivers', 'faults.ts'), 'utf8');
  const axisOnly = [...table.matchAll(/\{ kind: '([a-z_]+)'; axis: number \}/g)].map((m) => m[1]);
  expect([...PLANTABLE_FAULTS].sort()).toEqual(axisOnly.sort());
});

test('--help on every command exits 0', async () => {
  // serve, doctor and config hand --help to a process of their own: the first test above runs them.
  for (const cmd of ['run', 'test', 'coverage', 'report', 'dense', 'planner', 'weldplan', 'history', 'allure', 'fuzz', 'nightly']) {
    const r = await hilHere([cmd, '--help']);
    expect(r.status, cmd).toBe(0);
    expect(r.stdout, cmd).toMatch(/usage: hil/);
  }
  expect((await hilHere(['help'])).status).toBe(0);
});

// Collecting every suite takes a minute of wall time on a loaded two-core machine.
test('coverage --json lists every catalogue item as covered with its tests or pending with a reason', { timeout: 180_000 }, () => {
  const r = hil('coverage', '--json');
  expect(r.status).toBe(0);
  const rows = JSON.parse(r.stdout) as Array<{ id: string; status: string; tests?: string[]; reason?: string }>;
  const ids = new Set(rows.map((x) => x.id));
  for (const e of catalogue) expect(ids.has(e.id), e.id).toBe(true);
  for (const row of rows) {
    if (row.status === 'covered') expect(row.tests!.length).toBeGreaterThan(0);
    else expect(row.reason!.length).toBeGreaterThan(0);
  }
});

test('dense inspect: the reference file is valid, a flipped sample byte is block_sha256_mismatch on its segment', async () => {
  const fixture = fileURLToPath(new URL('../fixtures/dense/reference.rdt', import.meta.url));
  const side = JSON.parse(readFileSync(fileURLToPath(new URL('../fixtures/dense/reference.json', import.meta.url)), 'utf8'));
  const good = await hilHere(['dense', 'inspect', fixture]);
  expect(good.status).toBe(0);
  expect(good.stdout).toContain(`digest      ${side.digest} ok`);
  expect(good.stdout).toMatch(/^  1 +weld +5 .* ok$/m);
  const dir = mkdtempSync(join(tmpdir(), 'hil-dense-'));
  try {
    const bytes = readFileSync(fixture);
    const body = 4 + bytes.readUInt32BE(0);
    bytes[body + side.segments[1].byte_offset + 30]! ^= 0x40;
    writeFileSync(join(dir, 'bad.rdt'), bytes);
    const bad = await hilHere(['dense', 'inspect', join(dir, 'bad.rdt')]);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toBe('block_sha256_mismatch\n');
    expect(bad.stdout).toMatch(/^  1 +weld +5 .* bad$/m);
    expect(bad.stdout).toMatch(/^  0 +freespace +6 .* ok$/m);
    expect(bad.stdout).toMatch(/^verdict {5}block_sha256_mismatch: /m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  expect((await hilHere(['dense', 'look', fixture])).status).toBe(2);
});

test('weldplan pack writes the container the harness packer builds, --seal fills the digests', async () => {
  const program = fileURLToPath(new URL('../fixtures/weldplans/line-weld.program.json', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'hil-weldplan-'));
  try {
    const out = join(dir, 'line.weldplan');
    const r = await hilHere(['weldplan', 'pack', program, '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    const prog = parseExact(readFileSync(program)) as JsonObject;
    expect(Buffer.from(readFileSync(out)).equals(Buffer.from(packWeldplan({ program: prog })))).toBe(true);
    expect(r.stdout).toContain(`program_digest ${prog.program_digest}`);
    const unsealed = { ...prog, program_name: 'changed' };
    writeFileSync(join(dir, 'p.json'), JSON.stringify(JSON.parse(stringifyExact(unsealed))));
    const s = await hilHere(['weldplan', 'pack', join(dir, 'p.json'), '--out', join(dir, 's.weldplan'), '--seal']);
    expect(s.status, s.stderr).toBe(0);
    expect(s.stdout).toContain(`program_digest ${programDigest(unsealed)}`);
    // A missing input is bad input: one line and exit 2 (the bad-input test above has the rule).
    const missing = await hilHere(['weldplan', 'pack', join(dir, 'missing.json'), '--out', join(dir, 'x')]);
    expect([missing.status, missing.stderr.trim().split('\n').length]).toEqual([2, 1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The replay's default pace (docs/recording.md "Faster than recorded"): flat out to each sync point, and
// paced to the recorded wall time only while the recorded test had a stream open. The telemetry test below
// holds the capture for 1.5 s with its stream open and counts the empty batches it reads meanwhile: paced,
// that span takes its recorded 1.5 s at least, however fast the host, and the test passes; its verdict says
// the rest ran flat out. On a core flat out throughout (max) the hold passes as fast as the host runs the
// core: on a quiet host the stream then reads too few empty batches and the test fails, but a host that
// runs it slower lets it pass (seen at 1.9 to 3.1 times the recorded speed), so that run's outcome is no
// evidence either way; its verdict is.
const STREAM_HOLD_S = 1.5;
test('a replay runs flat out but while the recorded test had a stream open: a stream test passes there, its stream span paced to the recorded time', { timeout: 120_000 }, () => {
  const out = mkdtempSync(join(tmpdir(), 'hil-watched-'));
  const grep = ['--no-report', '--grep', 'established stream', 'suites/telemetry/busy.test.ts'];
  // The default pace's replay is given no file filter: it runs the one file its recordings hold.
  const replay = (speed: string | undefined, reports: string) =>
    spawnSync(process.execPath, [HIL, 'run', '--target', 'replay', '--recordings', join(out, 'rec'), '--reports', join(out, reports), ...(speed === undefined ? grep.slice(0, -1) : grep)], {
      encoding: 'utf8',
      timeout: 110_000,
      env: { ...process.env, HIL_REPLAY_SPEED: speed },
    });
  try {
    const rec = hil('run', '--record', join(out, 'rec'), '--reports', join(out, 'recorded'), ...grep);
    expect(rec.status, rec.stdout + rec.stderr).toBe(0);
    expect(rec.stdout).toMatch(/total: 1 passed, 0 failed, 0 errored, 0 skipped/);
    const auto = replay(undefined, 'auto');
    expect(auto.status, auto.stdout + auto.stderr).toBe(0);
    expect(auto.stdout).toMatch(/^replay: 1 of \d+ suite files hold a recorded test; running those$/m);
    expect(auto.stdout).toMatch(/total: 1 passed, 0 failed, 0 errored, 0 skipped/);
    const run = JSON.parse(readFileSync(join(out, 'auto', 'run.json'), 'utf8')) as { target: { replay: { tests: Array<{ verdict: string }> } } };
    expect(run.target.replay.tests.map((t) => t.verdict)).toEqual([expect.stringMatching(/; flat out but while a stream was open \(1\/1 recorded streams opened\)$/)]);
    const took = (out: string) => Number(/^replay: 1 tests took ([0-9.]+) s, ([0-9.]+) s when recorded/m.exec(out)?.[1]);
    // The paced span alone lasts the recorded hold: a default pace that ran it flat out could take less.
    expect(took(auto.stdout)).toBeGreaterThanOrEqual(STREAM_HOLD_S);
    const flat = replay('max', 'max');
    expect(flat.stdout, flat.stderr).toMatch(/total: (1 passed, 0 failed, 0 errored|0 passed, 1 failed, 0 errored|0 passed, 0 failed, 1 errored), 0 skipped/);
    const flatRun = JSON.parse(readFileSync(join(out, 'max', 'run.json'), 'utf8')) as { target: { replay: { tests: Array<{ verdict: string }> } } };
    // Flat out throughout: no span paced, so no stream span claimed.
    expect(flatRun.target.replay.tests.map((t) => t.verdict)).toEqual([expect.not.stringMatching(/while a stream was open/)]);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

// The night's job end to end on one small file (two nights, a short soak): what a rig owner finds in the
// morning. Spawns two conformance runs of one file and a replay of the first night's recordings.
test('nightly: a dated directory with the run, its recordings (replayable), the soak, the comparison with the night before and one report; --no-record records nothing', { timeout: 170_000 }, () => {
  const out = mkdtempSync(join(tmpdir(), 'hil-nightly-'));
  // The stepped drain file: a stop whose reply the test does not wait for races the test's next stops, so
  // its replay checks that answers of concurrent requests are compared whatever their order (it diverged on
  // about one replay in three until they were, docs/recording.md "The service's replies").
  const FILE = 'suites/grant/drain.test.ts';
  try {
    const first = hil('nightly', '--out', out, '--soak-minutes', '0.02', FILE);
    expect(first.status, first.stdout + first.stderr).toBe(0);
    const day = new Date().toISOString().slice(0, 10);
    const night = join(out, day);
    const run1 = JSON.parse(readFileSync(join(night, 'run', 'run.json'), 'utf8')) as { command: string; summary: { passed: number; failed: number }; soak?: { measurements: Array<{ name: string }> }; target: { driver: string; describe?: unknown }; environment: { machine_sha256: string } };
    expect(run1.summary.failed).toBe(0);
    // The night runs the long tier (hil run --long) unless told not to.
    expect(run1.command.split(' ')).toContain('--long');
    // The soak is part of the night's record (its verdict, report and comparison), and so are the target's Describe and digests.
    expect(run1.soak?.measurements.map((m) => m.name)).toContain('soak_renewals_refused');
    expect(run1.target.driver).not.toBe('unknown');
    expect(run1.target.describe).toBeDefined();
    expect(run1.environment.machine_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(first.stdout).toMatch(/\nnightly verdict: PASS/);
    expect(run1.summary.passed).toBeGreaterThan(0);
    const soak = JSON.parse(readFileSync(join(night, 'soak.json'), 'utf8')) as { measurements: Array<{ name: string }> };
    expect(soak.measurements.map((m) => m.name)).toContain('soak_renewals_refused');
    expect(readFileSync(join(night, 'report.html'), 'utf8')).toMatch(/<html[\s\S]*The soak \(/);
    expect(first.stdout).toContain(`recordings in ${join(night, 'recordings')}`);
    // the recordings replay: the same tests, the same verdict
    const replay = hil('run', '--target', 'replay', '--recordings', join(night, 'recordings'), '--reports', join(out, 'replayed'), '--no-report', FILE);
    expect(replay.status, replay.stdout + replay.stderr).toBe(0);
    expect(replay.stdout).toMatch(/total: [1-9]\d* passed, 0 failed, 0 errored, 0 skipped/);
    // the second night: another dated directory, compared with the first, not recorded when told
    const second = hil('nightly', '--out', out, '--soak-minutes', '0', '--no-record', '--no-long', FILE);
    expect(second.status, second.stdout + second.stderr).toBe(0);
    const night2 = join(out, `${day}-2`);
    expect(readFileSync(join(night2, 'comparison.txt'), 'utf8')).toMatch(new RegExp(`^since ${day}\\n`));
    expect(second.stdout).toContain('the run is not recorded (--no-record)');
    expect(() => readFileSync(join(night2, 'recordings'))).toThrow();
    expect((JSON.parse(readFileSync(join(night2, 'run', 'run.json'), 'utf8')) as { command: string }).command.split(' ')).not.toContain('--long');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
