import { afterAll, test, expect } from 'vitest';
import { mkdtemp, mkdir, readFile, rm, writeFile, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ReportError, writeHtmlReport } from './html.ts';
import { exitCodeOf } from './reporter.ts';
import { verdictOf } from './verdict.ts';
import type { RunRecord } from './run-types.ts';

const DIGESTS = {
  machine_sha256: 'a1'.repeat(32),
  configuration_sha256: 'b2'.repeat(32),
  deployment_sha256: 'c3'.repeat(32),
};
const FAIL_MESSAGE = 'expected reason control_session_stale, got no_grant';
const PENDING_REASON = 'needs a rig with a live torch interlock';
const EVIL_NAME = 'shows <script>alert("x")</script> names';
// 1x1 transparent PNG
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');

function fixture(): RunRecord {
  return {
    schema: 'cell-hil.run.v2',
    command: 'hil run --target sim',
    started_at: '2025-03-01T02:00:00.000Z',
    finished_at: '2025-03-01T02:03:12.500Z',
    target: {
      name: 'sim',
      driver: 'sim',
      address: '/run/cell/control.sock',
      simulated: true,
      describe: {
        backend: 'simulation',
        cycle_ns: 1000000,
        machine_sha256: DIGESTS.machine_sha256,
        axes: [{ id: 0, position_unit: 'rad', min_position: -3.1, max_position: 3.1, native_home: true, counts_per_unit: 83443.0268, sign: 1 }, 'junk axis'],
        capabilities: [{ name: 'home', state: 'implemented', transport: 'control' }, { name: 'abort', state: 'unimplemented', transport: 'none' }, 'odd'],
      },
    },
    environment: {
      ...DIGESTS,
      package_version: '0.1.0',
      git_revision: 'deadbeefcafe',
      node: 'v20.20.2',
      platform: 'linux-x64',
      hostname: 'bench-7',
    },
    tests: [
      { file: 'suites/grant/grant.test.ts', project: 'conformance', name: 'refuses a stale session', fullName: 'grant > refuses a stale session', state: 'failed', duration_ms: 412, covers: ['reason:control_session_stale'], kind: 'contract', errors: [FAIL_MESSAGE] },
      { file: 'suites/grant/grant.test.ts', project: 'conformance', name: 'grants once', fullName: 'grant > grants once', state: 'passed', duration_ms: 95, covers: ['transition:grant:idle->owned:acquire'], kind: 'contract' },
      { file: 'suites/io/io.test.ts', project: 'conformance', name: 'arms outputs', fullName: 'io > arms outputs', state: 'skipped', duration_ms: 0, covers: ['capability:io_arm'], kind: 'contract', skip_reason: 'capability io_arm is unimplemented on this target' },
      { file: 'suites/names/names.test.ts', project: 'conformance', name: EVIL_NAME, fullName: `names > ${EVIL_NAME}`, state: 'passed', duration_ms: 3, covers: [], kind: 'profile' },
      { file: 'suites/jog/jog.test.ts', project: 'conformance', name: 'jog frame layout', fullName: 'jog > jog frame layout', state: 'failed', duration_ms: 20, covers: [], kind: 'profile', errors: ['layout differs'], expected_failure: 'known: frame v2 not implemented' },
    ],
    coverage: [
      { id: 'reason:control_session_stale', family: 'reason', doc: 1, section: 'part 7 Errors: Authority and session', title: 'Stale control session', status: 'covered', tests: ['grant > refuses a stale session'], outcome: 'failed' },
      { id: 'transition:grant:idle->owned:acquire', family: 'transition', doc: 1, section: 'part 5 Grant', title: 'Acquire a grant', status: 'covered', tests: ['grant > grants once'], outcome: 'passed' },
      { id: 'capability:io_arm', family: 'capability', doc: 1, section: 'part 4 Operations', title: 'io_arm', status: 'covered', tests: ['io > arms outputs'], outcome: 'skipped' },
      { id: 'capability:torch_on', family: 'capability', doc: 1, section: 'part 4 Operations', title: 'torch_on', status: 'pending', tests: [], reason: PENDING_REASON },
    ],
    summary: { passed: 2, failed: 2, skipped: 1, errored: 0, duration_ms: 530 },
    gate: { ok: false, problems: ['capability:torch_on has no covering test <and no pending entry>'] },
  };
}

/** The directories setup made, removed after the file's tests. */
const made: string[] = [];
afterAll(() => Promise.all(made.map((d) => rm(d, { recursive: true, force: true }))));

async function setup(opts: { allure?: boolean } = {}): Promise<{ dir: string; runJson: string; allureDir: string; outFile: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'hil-report-'));
  made.push(dir);
  const runJson = path.join(dir, 'run.json');
  const allureDir = path.join(dir, 'allure-results');
  await writeFile(runJson, JSON.stringify(fixture(), null, 2));
  if (opts.allure !== false) {
    await mkdir(allureDir);
    const failing = {
      uuid: 'u-fail',
      name: 'refuses a stale session',
      fullName: 'cell-hil:suites/grant/grant.test.ts#grant refuses a stale session',
      status: 'failed',
      statusDetails: { message: FAIL_MESSAGE, trace: 'AssertionError: at grant.test.ts:42' },
      labels: [{ name: 'covers', value: 'reason:control_session_stale' }],
      steps: [
        { name: 'acquire grant', status: 'passed', steps: [], attachments: [], parameters: [], start: 1000, stop: 1040 },
        { name: 'wait past the lease', status: 'failed', steps: [{ name: 'poll status', status: 'passed', steps: [], attachments: [] }], attachments: [{ name: 'reply body', source: 'a1-attachment.txt', type: 'text/plain' }], start: 1040, stop: 1400 },
      ],
      attachments: [
        { name: 'following error', source: 'a2-attachment.png', type: 'image/png' },
        { name: 'position trace', source: 'a3-attachment.csv', type: 'text/csv' },
        { name: 'capture', source: 'a4-attachment.rdt', type: 'application/octet-stream' },
        { name: 'escape attempt', source: '../run.json', type: 'text/plain' },
      ],
      parameters: [],
      start: 1000,
      stop: 1412,
    };
    await writeFile(path.join(allureDir, 'u-fail-result.json'), JSON.stringify(failing));
    await writeFile(path.join(allureDir, 'a1-attachment.txt'), '{"reason":"no_grant"} <b>raw</b>');
    await writeFile(path.join(allureDir, 'a2-attachment.png'), PNG);
    await writeFile(path.join(allureDir, 'a3-attachment.csv'), 't_ms,position,target\n0,0,0\n1,0.1,0.12\n2,0.2,0.22\n3,0.3,0.31\n');
    await writeFile(path.join(allureDir, 'u-bad-result.json'), '{"name": "truncated", "status": ');
    await writeFile(path.join(allureDir, 'environment.properties'), 'os=linux\nharness=cell-hil 0.1.0\n');
  }
  return { dir, runJson, allureDir, outFile: path.join(dir, 'html', 'index.html') };
}

test('renders a self-contained, escaped report with Allure evidence and notes', async () => {
  const p = await setup();
  const { outFile, warnings } = await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile });
  expect(outFile).toBe(p.outFile);
  expect((await stat(outFile)).isFile()).toBe(true);
  const html = await readFile(outFile, 'utf8');

  for (const d of Object.values(DIGESTS)) expect(html).toContain(d);
  expect(html).toContain(FAIL_MESSAGE);
  expect(html).toContain(PENDING_REASON);
  expect(html).toContain('capability io_arm is unimplemented on this target');
  expect(html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
  expect(html).not.toContain('<script>alert');
  expect(html.match(/<script/g)?.length).toBe(1); // only the report's own inline script
  const script = /<script>([\s\S]*?)<\/script>/.exec(html)![1]!;
  expect(() => new Function(script)).not.toThrow(); // the inline filter script at least parses
  expect(html).toContain('&lt;and no pending entry&gt;');
  expect(html).not.toMatch(/(src|href)\s*=\s*["']?\s*(https?:)?\/\//i);
  expect(html).not.toMatch(/@import|url\(/);
  expect(html).toContain('<div class="verdict-word">FAIL</div>');

  // Allure enrichment: steps, escaped text attachment, inline image, CSV plot, listed binary
  expect(html).toContain('wait past the lease');
  expect(html).toContain('poll status');
  expect(html).toContain('&lt;b&gt;raw&lt;/b&gt;');
  expect(html).toContain('src="data:image/png;base64,');
  expect(html).toContain('<polyline');
  expect(html).toContain('application/octet-stream: not shown inline');
  expect(html).toContain('Expected failure for this target: known: frame v2 not implemented');
  expect(html).toContain('cell-hil 0.1.0'); // allure environment.properties

  expect(warnings.some((w) => w.includes('u-bad-result.json'))).toBe(true);
  expect(warnings.some((w) => w.includes('../run.json'))).toBe(true);
  expect(html).toContain('u-bad-result.json'); // warnings are shown to the reviewer too

  // Deterministic: the same input renders the same bytes.
  const again = path.join(p.dir, 'again.html');
  await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: again });
  expect(await readFile(again, 'utf8')).toBe(html);
});

test('missing allure results are a warning, not an error', async () => {
  const p = await setup({ allure: false });
  const { warnings } = await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile });
  expect(warnings.some((w) => w.includes('allure results directory not found'))).toBe(true);
  const html = await readFile(p.outFile, 'utf8');
  expect(html).toContain(FAIL_MESSAGE); // run.json alone carries the failure
});

test('a missing or unreadable run.json is a clear error', async () => {
  const p = await setup();
  const missing = writeHtmlReport({ runJson: path.join(p.dir, 'nope.json'), allureDir: p.allureDir, outFile: p.outFile });
  await expect(missing).rejects.toBeInstanceOf(ReportError);
  await expect(missing).rejects.toMatchObject({ code: 'HIL_REPORT_RUN_JSON_MISSING' });
  await writeFile(p.runJson, '{"schema": "cell-hil.run.v1", ');
  await expect(writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile })).rejects.toMatchObject({ code: 'HIL_REPORT_RUN_JSON_UNREADABLE' });
});

test('a run.json with missing fields still renders, with warnings', async () => {
  const p = await setup();
  await writeFile(p.runJson, JSON.stringify({ schema: 'cell-hil.run.v1', command: 'hil run', tests: [{ name: 'x', state: 'weird' }] }));
  const { warnings } = await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile });
  expect(warnings.some((w) => w.startsWith('run.json:'))).toBe(true);
  expect(await readFile(p.outFile, 'utf8')).toContain('<div class="verdict-word">ERROR</div>');
});

test('the report states the same verdict as the exit status, with coverage on the first screen', async () => {
  // Regression: an expected failure alone once rendered FAIL while hil exited 0.
  const p = await setup({ allure: false });
  const run = fixture();
  run.tests = run.tests.filter((t) => t.state !== 'failed' || t.expected_failure);
  run.tests = run.tests.filter((t) => t.state !== 'skipped');
  run.gate = { ok: true, problems: [] };
  run.coverage = run.coverage.map((c) => (c.outcome === 'failed' ? { ...c, outcome: 'passed' as const } : c));
  await writeFile(p.runJson, JSON.stringify(run));
  await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile });
  const html = await readFile(p.outFile, 'utf8');
  expect(exitCodeOf(run)).toBe(0);
  expect(verdictOf(run).verdict).toBe('PASS');
  expect(html).toContain('<div class="verdict-word">PASS</div>');
  // 2 of the 4 documented items have a passing test (io_arm's only test skipped, torch_on pending).
  expect(html).toContain('<h1 class="headline">PASS — 2 of 4 documented items covered</h1>');
  expect(html).toContain('<div class="cov-word">PARTIAL</div>');
  expect(html).toContain('<title>Qualification report: PASS — 2 of 4 documented items covered on sim');
  expect(html).toContain('1 expected failure listed in the target&#39;s expectation file');
});

test('the summary tiles count what the verdict counts (expected failures and errors apart)', async () => {
  const p = await setup({ allure: false });
  const run = fixture();
  run.tests.push(
    { file: 'suites/jog/jog.test.ts', project: 'conformance', name: 'expected error', fullName: 'jog > expected error', state: 'errored', duration_ms: 1, covers: [], kind: 'contract', errors: ['HIL_ERR_X'], expected_failure: 'known' },
    { file: 'suites/jog/jog.test.ts', project: 'conformance', name: 'unexpected pass', fullName: 'jog > unexpected pass', state: 'passed', duration_ms: 1, covers: [], kind: 'contract', unexpected_pass: true },
  );
  await writeFile(p.runJson, JSON.stringify(run));
  await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile });
  const html = await readFile(p.outFile, 'utf8');
  const c = verdictOf(run).counts;
  expect(c).toMatchObject({ failed: 1, errored: 0, expectedFailures: 2, unexpectedPasses: 1 });
  const tile = (label: string) => new RegExp(`<div class="n">(\\d+)</div><div class="l">${label}</div>`).exec(html)?.[1];
  expect([tile('Passed'), tile('Failed'), tile('Errored'), tile('Skipped'), tile('Expected failures'), tile('Unexpected passes')].map(Number)).toEqual([
    c.passed,
    c.failed,
    c.errored,
    c.skipped,
    c.expectedFailures,
    c.unexpectedPasses,
  ]);
});

test('the summary tiles count profile differences against an external target apart from failures (DESIGN.md rule 3)', async () => {
  const p = await setup({ allure: false });
  const run = fixture();
  run.target = { ...run.target, name: 'external', driver: 'external', simulated: false };
  run.tests.push(
    {
      file: 'suites/envelope/envelope.test.ts',
      project: 'conformance',
      name: 'check order',
      fullName: 'envelope > check order',
      state: 'failed',
      duration_ms: 4,
      covers: ['profile:check-order'],
      kind: 'profile',
      errors: ['schema checked before size'],
      informative: 'differs from profile:check-order: schema checked before size',
    },
    {
      file: 'suites/grant/grant.test.ts',
      project: 'conformance',
      name: 'renews',
      fullName: 'grant > renews',
      state: 'passed',
      duration_ms: 4,
      covers: [],
      kind: 'contract',
      profile_differences: [
        { profile: 'profile:retry-after', message: 'no Retry-After' },
        { profile: 'profile:renew-early', message: 'renewal refused early' },
      ],
    },
  );
  await writeFile(p.runJson, JSON.stringify(run));
  await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile });
  const html = await readFile(p.outFile, 'utf8');
  const c = verdictOf(run).counts;
  // One profile test and two checks inside a contract test: the failed profile test is informative, not failed.
  expect(c).toMatchObject({ failed: 1, informative: 1, profileDifferences: 2 });
  expect(html).toContain('<div class="tile t-info"><div class="n">3</div><div class="l">Profile differences</div><div class="s">1 profile test, 2 checks in contract tests</div></div>');
  expect(html).toContain('<div class="tile t-fail"><div class="n">1</div><div class="l">Failed</div>');
  // the outcome chart draws the informative test once, in its own bar (the bars add up to the tests)
  expect(html).toMatch(/>Profile differences<\/text><rect [^>]*fill="#0969da"\/><text [^>]*class="v">1<\/text>/);
  // its card and its row in the list say it is informative
  expect(html).toContain('Informative, not counted against the verdict (DESIGN.md rule 3): differs from profile:check-order: schema checked before size');
  expect(html).toContain('<span class="tag xf" title="differs from profile:check-order: schema checked before size">profile difference</span>');

  // on the reference target nothing is informative: the tile says 0
  await writeFile(p.runJson, JSON.stringify(fixture()));
  await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile });
  expect(await readFile(p.outFile, 'utf8')).toContain('<div class="tile t-zero"><div class="n">0</div><div class="l">Profile differences</div>');
});

test('a failed motion test shows its plot first, its measurement outside the limit and its transcript; the run lateness is on the first screen', async () => {
  const p = await setup({ allure: false });
  const run = fixture();
  const fe = { name: 'following_error_max', unit: 'rad', axis: 'J1', value: 0.0312, limit: { kind: 'at_most' as const, hi: 0.01, source: 'configured' as const, ref: 'axes[0].limits.following_error' }, outcome: 'fail' as const };
  run.tests[0]!.evidence = {
    measurements: [fe],
    plots: [{ axis: 'J1', unit: 'rad', t: [0, 1, 2, 3], position: [0, 0, 0, 0], target: [0, 0.01, 0.02, 0.03], following_error: [0, 0.01, 0.02, 0.0312], following_error_limit: 0.01 }],
    transcript: { exchanges: [{ at_ms: 3, method: 'POST', path: '/v1/control', request: '{"operation":"start_trajectory","session":"<session #1>"}', status: 200, reply: '{"sequence":7}', ms: 0.8 }], omitted: 2, events: '{"events":[{"type":"fault_latched"}]}', stderr: [{ target: 'sim (sim)', text: 'core: frozen feedback on J1' }] },
  };
  run.run_measurements = {
    measurements: [{ name: 'cycle_lateness_p99', unit: 'us', value: 80, limit: { kind: 'at_most', hi: 500, source: 'configured', ref: 'max_cycle_lateness_ns' }, outcome: 'pass', note: 'over 10 cycles' }],
    lateness_histogram: [{ upper_us: 11.22, count: 3 }, { upper_us: 89.13, count: 7 }],
    lateness_limit_us: 500,
  };
  await writeFile(p.runJson, JSON.stringify(run));
  await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile });
  const html = await readFile(p.outFile, 'utf8');
  // first screen: the header holds the run's lateness against its limit and the histogram, before the signature block
  const header = html.slice(html.indexOf('<header id="top"'), html.indexOf('<section class="sign"'));
  expect(header).toContain('cycle_lateness_p99');
  expect(header).toContain('&lt;= 500 (configured: max_cycle_lateness_ns)');
  expect(header).toContain('data-plot="lateness"');
  expect(header).toContain('following_error_max J1 in “refuses a stale session”');
  // the failure card: plot, then the measurement, then the message; and the transcript with its events and stderr
  const card = html.slice(html.indexOf('<article class="card s-failed">'));
  const at = (s: string) => card.indexOf(s);
  expect(at('data-plot="motion"')).toBeGreaterThan(0);
  expect(at('data-plot="motion"')).toBeLessThan(at('<pre class="msg">'));
  expect(card).toContain('0.0312 rad');
  expect(card).toContain('<span class="badge b-failed">OUTSIDE</span>');
  expect(card).toContain('&lt;session #1&gt;');
  expect(card).toContain('(the first 2 left out)');
  expect(card).toContain('fault_latched');
  expect(card).toContain('core: frozen feedback on J1');
  expect(card).toContain('class="limit"'); // the limit line drawn in the following error panel
  expect(html.match(/<script/g)?.length).toBe(1); // still only the report's own inline script
});

test('a run.json with model figures (hil fuzz, schema v3) shows which transitions and rules the model exercised, how often', async () => {
  const p = await setup({ allure: false });
  const run = fixture() as RunRecord & { schema: string };
  run.schema = 'cell-hil.run.v3';
  run.model = {
    fuzz: {
      target: 'sim',
      clock: 'stepped',
      minutes: 10,
      seeds: [11, 22],
      passed: true,
      sequences: 41,
      commands: 5021,
      transitions_reached: 2,
      per_transition: { 'transition:handle:prepared->superseded:newer_preparation': 17, 'transition:grant:no_grant->owned:acquire': 93 },
      per_rule: { 'transition:handle:prepared->superseded:newer_preparation': 17, 'transition:grant:no_grant->owned:acquire': 93, 'rule:update_jog.accepted': 8, 'limit:upload_slots_per_kind:busy <x>': 3 },
      wall_ms: 600_000,
    },
  };
  await writeFile(p.runJson, JSON.stringify(run));
  await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile });
  const html = await readFile(p.outFile, 'utf8');
  const section = /<section id="model">([\s\S]*?)<\/section>/.exec(html)?.[1];
  expect(section).toBeDefined();
  expect(section).toContain('41 sequences, 5021 commands, 2 transitions reached');
  expect(section).toContain('ran clean');
  expect(section).toContain('11, 22');
  // each transition with its count, sorted by name; the other rules beside them, escaped
  expect(section).toMatch(/transition:grant:no_grant-&gt;owned:acquire<\/code><\/td><td class="num">93<\/td>[\s\S]*transition:handle:prepared-&gt;superseded:newer_preparation<\/code><\/td><td class="num">17</);
  expect(section).toContain('rule:update_jog.accepted</code></td><td class="num">8<');
  expect(section).toContain('busy &lt;x&gt;');
  // without model figures there is no section
  await writeFile(p.runJson, JSON.stringify(fixture()));
  await writeHtmlReport({ runJson: p.runJson, allureDir: p.allureDir, outFile: p.outFile });
  expect(await readFile(p.outFile, 'utf8')).not.toContain('<section id="model">');
});
