// The whole conformance run (`hil run --target sim`, every suite, with its report) against a baseline tree
// measured in the same session: wall time, the CPU time of every process the run started (its workers, the
// stacks and stack hosts, planners, browsers), the load average around each run, and each file's own
// duration, for this checkout and for a pinned earlier revision, alternating run by run. The ratio lines are
// this checkout's medians over the baseline's. It asserts nothing: a run's outcome is printed, not judged.
//
//   node --import tsx bench/conformance.bench.ts [--base REV] [--this REV] [--rounds N] [--skip-base] [-- hil run arguments]
//
// "this" is the checkout as it is, or with --this REV that revision's tree extracted as the baseline's is (so
// that editing the checkout while the benchmark runs changes nothing it measures).
// The baseline is REV's tree (default BASE_REV below) extracted with `git archive` into a temporary
// directory, sharing this checkout's node_modules when the two lockfiles are the same (otherwise the
// benchmark stops: the baseline would not be what REV ran). Each run writes its reports into a temporary
// directory; the trees and reports are removed at the end.
//
// CPU time: a stack host or a helper outlives the process that started it by a moment (it stops when its
// standard input closes), so it is reaped by init and its CPU time would be lost to a plain wait. Each run
// is started by a small reaper (Python's prctl through ctypes, PR_SET_CHILD_SUBREAPER) that adopts every
// orphaned descendant, waits for all of them and prints the children's user and system time. Without
// python3 the CPU figures are missing (wall only). The load average is the machine's: the machine is
// shared, and CPU time is what load disturbs least.

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { reaperArgs, reaperFigures } from './reaper.ts';
import { baselineTree, median } from './baseline.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** main before the sim target served its stacks from stack hosts (the whole run at 104.8 s quiet). */
const BASE_REV = '19ac429';


interface Run {
  tree: 'base' | 'this';
  wall: number;
  user?: number;
  sys?: number;
  status: number | null;
  load: [number, number];
  files: Map<string, number>;
  summary: string;
  workers?: number;
  notPassed: string[];
}

function args(): { base: string; thisRev: string | undefined; rounds: number; skipBase: boolean; extra: string[] } {
  const a = process.argv.slice(2);
  const dd = a.indexOf('--');
  const own = dd >= 0 ? a.slice(0, dd) : a;
  const extra = dd >= 0 ? a.slice(dd + 1) : [];
  const get = (k: string) => {
    const i = own.indexOf(k);
    return i >= 0 ? own[i + 1] : undefined;
  };
  return { base: get('--base') ?? BASE_REV, thisRev: get('--this'), rounds: Number(get('--rounds') ?? '1'), skipBase: own.includes('--skip-base'), extra };
}

function hasPython(): boolean {
  try {
    execFileSync('python3', ['-c', 'import ctypes'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}


async function runOnce(tree: 'base' | 'this', dir: string, extra: string[], python: boolean): Promise<Run> {
  const reports = mkdtempSync(join(tmpdir(), 'hil-bench-reports-'));
  const cmd = [process.execPath, 'harness/bin/hil.mjs', 'run', '--target', 'sim', '--reports', reports, ...extra];
  const l0 = loadavg()[0]!;
  const t0 = performance.now();
  const child = python ? spawn('python3', reaperArgs(dir, cmd), { stdio: ['ignore', 'pipe', 'pipe'] }) : spawn(cmd[0]!, cmd.slice(1), { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)));
  const wallJs = (performance.now() - t0) / 1000;
  const l1 = loadavg()[0]!;
  const files = new Map<string, number>();
  for (const m of out.matchAll(/^(?:ok {2}|FAIL|ERR ) (\S+)\s.*?\s(\d+) ms/gm)) files.set(m[1]!, Number(m[2]));
  const summary = [/^verdict: .*$/m.exec(out)?.[0] ?? '(no verdict line)', /^total: .*$/m.exec(out)?.[0] ?? '(no total line)'].join('; ');
  let workers: number | undefined;
  const notPassed: string[] = [];
  try {
    type T = { file: string; name: string; state: string; errors?: string[]; host_too_slow?: unknown };
    const rec = JSON.parse(readFileSync(join(reports, 'run.json'), 'utf8')) as { host?: { workers?: number }; tests?: T[] };
    workers = rec.host?.workers;
    // What did not pass, with the first line of its first error: a run on a loaded machine ends in ERROR
    // (host too slow) where a quiet one passes, and the figures are read knowing that.
    for (const t of rec.tests ?? []) {
      if (t.state !== 'failed' && t.state !== 'errored') continue;
      notPassed.push(`${t.state}${t.host_too_slow ? ' (host too slow)' : ''}: ${t.file} > ${t.name.slice(0, 80)}: ${(t.errors?.[0] ?? '').split('\n')[0]!.slice(0, 160)}`);
    }
  } catch {
    /* no run record */
  }
  const r = reaperFigures(err);
  rmSync(reports, { recursive: true, force: true });
  if (r) {
    return { tree, wall: r.wall_s ?? wallJs, user: r.user_s, sys: r.sys_s, status: r.status, load: [l0, l1], files, summary, workers, notPassed };
  }
  if (python) process.stderr.write(`(no reaper line; stderr ends: ${err.slice(-400)})\n`);
  return { tree, wall: wallJs, status: code, load: [l0, l1], files, summary, workers, notPassed };
}

const f1 = (x: number | undefined) => (x === undefined ? '-' : x.toFixed(1));

function print(r: Run): void {
  const cpu = r.user !== undefined ? r.user + r.sys! : undefined;
  console.log(`${r.tree.padEnd(4)}  wall ${f1(r.wall)} s  cpu ${f1(cpu)} s (user ${f1(r.user)}, sys ${f1(r.sys)})  load1 ${r.load[0].toFixed(1)} -> ${r.load[1].toFixed(1)}  workers ${r.workers ?? '?'}  exit ${r.status}`);
  console.log(`      ${r.summary.trim()}`);
  const top = [...r.files].sort((a, b) => b[1] - a[1]).slice(0, 10);
  for (const l of r.notPassed.slice(0, 20)) console.log(`      ${l}`);
  if (r.notPassed.length > 20) console.log(`      ... and ${r.notPassed.length - 20} more`);
  console.log(`      top files: ${top.map(([f, ms]) => `${f.replace(/^suites\//, '')} ${(ms / 1000).toFixed(1)}`).join(', ')}`);
}

async function main(): Promise<void> {
  const o = args();
  const python = hasPython();
  if (!python) console.log('python3 not found: CPU time of the runs cannot be gathered, wall only');
  const head = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['-C', ROOT, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '';
  const base = o.skipBase ? undefined : baselineTree(o.base);
  const mine = o.thisRev ? baselineTree(o.thisRev) : ROOT;
  const what = o.thisRev ? `${o.thisRev} (extracted)` : `${head}${dirty ? ' with uncommitted changes' : ''}`;
  console.log(`whole conformance run, ${o.rounds} round(s): base ${o.base}${o.skipBase ? ' (skipped)' : ''}, this ${what}; hil run --target sim ${o.extra.join(' ')}`);
  const runs: Run[] = [];
  try {
    for (let k = 0; k < o.rounds; k++) {
      // Alternating, base first in even rounds and second in odd ones, so a load trend falls on both.
      const order: Array<'base' | 'this'> = base ? (k % 2 ? ['this', 'base'] : ['base', 'this']) : ['this'];
      for (const t of order) {
        const r = await runOnce(t, t === 'base' ? base! : mine, o.extra, python);
        print(r);
        runs.push(r);
      }
    }
  } finally {
    if (base) rmSync(base, { recursive: true, force: true });
    if (mine !== ROOT) rmSync(mine, { recursive: true, force: true });
  }
  const of = (t: 'base' | 'this') => runs.filter((r) => r.tree === t);
  for (const t of ['base', 'this'] as const) {
    const rs = of(t);
    if (!rs.length) continue;
    const cpu = rs.filter((r) => r.user !== undefined).map((r) => r.user! + r.sys!);
    console.log(`median ${t}: wall ${f1(median(rs.map((r) => r.wall)))} s, cpu ${cpu.length ? f1(median(cpu)) : '-'} s`);
  }
  if (of('base').length && of('this').length) {
    const w = median(of('this').map((r) => r.wall)) / median(of('base').map((r) => r.wall));
    const cpuOf = (t: 'base' | 'this') => of(t).filter((r) => r.user !== undefined).map((r) => r.user! + r.sys!);
    const c = cpuOf('this').length && cpuOf('base').length ? median(cpuOf('this')) / median(cpuOf('base')) : undefined;
    console.log(`ratio this/base: wall ${w.toFixed(2)}x, cpu ${c === undefined ? '-' : `${c.toFixed(2)}x`} (goal: wall <= 40 s on a quiet 2-core machine)`);
  }
  const out = process.env.HIL_BENCH_JSON;
  if (out) writeFileSync(out, JSON.stringify(runs.map((r) => ({ ...r, files: Object.fromEntries(r.files) })), null, 1));
}

await main();
