// The `hil` command: run the conformance suites against a target, serve the reference stack, print
// catalogue coverage, and render the qualification report. Exit status: 0 all passed, 1 failures,
// 2 usage errors.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { HilReporter, exitCodeOf, type Expectation } from './report/reporter.ts';
import { writeHtmlReport } from './report/html.ts';
import { computeCoverage, familyCounts } from './catalogue/gate.ts';
import { CONFIG_ENTRY, STACK_ENTRY, TS_NODE_ARGS } from './targets/reference.ts';
import { TARGETS } from './targets/index.ts';
import { decodeUtf8Strict, isJsonObject, parseExact, stringifyExact } from './oracle/json.ts';
import type { JsonExact } from './oracle/json.ts';
import { blockSha256, decodeDense } from './oracle/dense.ts';
import { OracleError } from './oracle/errors.ts';
import './trace.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const REPORTS = join(ROOT, 'reports');

class UsageError extends Error {}

const HELP: Record<string, string> = {
  '': `usage: hil <command> [options]

commands:
  run       run the conformance suites against a target and write reports/
  test      run the project's own tests and the conformance suites on the simulator (npm test)
  serve     start the reference stack (control service + core on the sim driver)
  replay    replay one recording on a fresh core on the stepped clock and print the divergence report
  config    compile a machine configuration into its digest-named directory (document 3 part 2)
  coverage  print catalogue coverage (covered / pending per family) without running tests
  report    render reports/html/index.html from the last run
  dense     dense trajectory files: "hil dense inspect FILE" prints header, segments and digest check
  help      this text; "hil <command> --help" for a command

exit status: 0 all passed, 1 failures, 2 usage errors`,
  run: `usage: hil run [--target sim|external] [--socket PATH] [--machine FILE] [--allow-motion] [--no-report] [filter ...]

Runs suites/ against the target. Filters select test files by substring (the traceability gate only
applies to a full run). Writes reports/run.json, reports/allure-results/, reports/junit.xml and, unless
--no-report, reports/html/index.html.

  --target NAME     sim (default): the reference stack started per file; external: a service at --socket
  --socket PATH     control socket of an external target
  --machine FILE    sim: machine configuration (default fixtures/machines/nine-axis.json)
  --allow-motion    allow tests that energise drives on a real rig
  --no-report       skip the HTML report`,
  test: `usage: hil test

Runs the unit tests of the harness and the reference stack, then the conformance suites against the
simulator, with the traceability gate. This is what npm test runs.`,
  serve: `usage: hil serve --socket-dir DIR [options]   (hil serve --help for the stack's own options)`,
  replay: `usage: hil replay FILE [--mode strict|open-loop]   (hil replay --help for the stack's own options)`,
  config: `usage: hil config compile FILE --out DIR   (hil config --help for the compiler's own options)`,
  coverage: `usage: hil coverage [--json]

Collects the suites (without running them) and prints covered and pending counts per catalogue family.
--json prints every catalogue id with its status and covering tests or pending reason.`,
  dense: `usage: hil dense inspect FILE

Reads a robot.v4.dense-joint-trajectory.v1 file (document 2 part 2) with the harness's own decoder and
prints its header, its segments (index, kind, sample count, block digest ok/bad) and the content digest
check. Exit 0 when the file is valid, 1 with the reason label (document 2 part 7) when it is not.`,
  report: `usage: hil report [--out FILE]

Renders the offline qualification report from reports/run.json and reports/allure-results/.`,
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
      case 'replay':
        // The stack's own replay subcommand, as a separate process (DESIGN.md rule 1; docs/recording.md).
        return await serve(['replay', ...rest]);
      case 'config':
        return await config(rest);
      case 'coverage':
        return await coverage(rest);
      case 'report':
        return await report(rest);
      case 'dense':
        return denseCommand(rest);
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(HELP['']! + '\n');
        return 0;
      default:
        throw new UsageError(`unknown command ${cmd}`);
    }
  } catch (e) {
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
      socket: { type: 'string' },
      machine: { type: 'string' },
      'allow-motion': { type: 'boolean', default: false },
      'no-report': { type: 'boolean', default: false },
    },
  });
  const target = values.target!;
  if (!(target in TARGETS)) throw new UsageError(`unknown target ${target}; known: ${Object.keys(TARGETS).join(', ')}`);
  if (target === 'external' && !values.socket) throw new UsageError('--target external needs --socket PATH');

  process.env.HIL_TARGET = target;
  if (values.socket) process.env.HIL_SOCKET = resolve(values.socket);
  if (values.machine) process.env.HIL_MACHINE = resolve(values.machine);
  if (values['allow-motion']) process.env.HIL_ALLOW_MOTION = '1';
  process.env.HIL_RUN_DIR = join(REPORTS, '.run');

  try {
    rmSync(join(REPORTS, 'allure-results'), { recursive: true, force: true, maxRetries: 3 });
  } catch (e) {
    process.stderr.write(`warning: could not clear old Allure results: ${(e as Error).message}\n`);
  }
  const reporter = new HilReporter({
    command: ['hil', selfTest ? 'test' : 'run', ...args].join(' '),
    reportsDir: REPORTS,
    gate: positionals.length === 0,
    targetName: target,
    expectations: loadExpectations(target),
  });
  const { startVitest } = await import('vitest/node');
  const vitest = await startVitest('test', positionals, {
    root: ROOT,
    watch: false,
    project: selfTest ? ['unit', 'conformance'] : ['conformance'],
    // Ours last, so its plain closing line ("total: N passed, N failed, N skipped") ends the output.
    reporters: [['allure-vitest/reporter', { resultsDir: join(REPORTS, 'allure-results') }], ['junit', { outputFile: join(REPORTS, 'junit.xml') }], reporter],
    passWithNoTests: false,
  });
  await vitest.close();
  const code = exitCodeOf(reporter.record);
  const closing = reporter.closingLine();
  if (!selfTest && !values['no-report'] && reporter.record) {
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

/** Per-target expectation file: fixtures/expectations/<target>.json, {"<file> > <test>": {expected, reason}}. */
function loadExpectations(target: string): Record<string, Expectation> {
  const f = join(ROOT, 'fixtures', 'expectations', `${target}.json`);
  if (!existsSync(f)) return {};
  const data = JSON.parse(readFileSync(f, 'utf8')) as Record<string, Expectation>;
  for (const [name, e] of Object.entries(data)) {
    if (e.expected !== 'fail' || typeof e.reason !== 'string' || !e.reason) {
      throw new UsageError(`${f}: entry ${name} must be {"expected": "fail", "reason": "..."}`);
    }
  }
  return data;
}

function serve(args: string[]): Promise<number> {
  // The stack is a separate process (DESIGN.md rule 1): the harness only starts it.
  const child = spawn(process.execPath, [...TS_NODE_ARGS, STACK_ENTRY, ...args], { stdio: 'inherit' });
  const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
  process.on('SIGINT', forward('SIGINT'));
  process.on('SIGTERM', forward('SIGTERM'));
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

function config(args: string[]): Promise<number> {
  // The compiler runs as its own process, like the stack in serve; its exit status is ours.
  const child = spawn(process.execPath, [...TS_NODE_ARGS, CONFIG_ENTRY, ...args], { stdio: 'inherit' });
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

async function coverage(args: string[]): Promise<number> {
  if (wantsHelp(args, 'coverage')) return 0;
  const { values } = parseArgs({ args, options: { json: { type: 'boolean', default: false } } });
  const { createVitest } = await import('vitest/node');
  const vitest = await createVitest('test', { root: ROOT, watch: false, project: ['conformance'], reporters: [] });
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
  const { values } = parseArgs({ args, options: { out: { type: 'string' } } });
  const r = await writeHtmlReport({
    runJson: join(REPORTS, 'run.json'),
    allureDir: join(REPORTS, 'allure-results'),
    outFile: values.out ? resolve(values.out) : join(REPORTS, 'html', 'index.html'),
  });
  for (const w of r.warnings) process.stdout.write(`note: ${w}\n`);
  process.stdout.write(`report: ${r.outFile}\n`);
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
