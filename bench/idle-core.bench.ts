// What an idle real-time core costs per wake-up: the core worker (sims/core/worker.ts) started through
// CoreLink on the real-time clock (nine-axis fixture, sim driver, capture on, priority none), the cell
// untouched, for this tree and for a baseline tree, against a bare Atomics.wait loop at the same 1 kHz.
//
//   node --import tsx bench/idle-core.bench.ts [seconds-per-run] [rounds] [--base REV]
//
// Every run is a process of its own (the bare loop too), started one after the other in each round
// (base, this, bare; the order turns round by round), so load from other processes falls on all three
// alike. A run waits 1.5 s after the core's ready (the quiet publication rate begins 0.5 s after the last
// message), then reads /proc/<pid>/task/<tid>/schedstat over the run: the cycling thread is the one
// with the most timeslices. Per run it prints the thread's CPU per second of wall (at the fixture's 1 ms
// cycle: its CPU per cycle in us), its wake-ups per second, CPU per wake-up, and the whole process's CPU
// per second (the service side's share of status messages included; clock-tick resolution). The ratio
// lines are medians of the same-round ratios this/base and this/bare; the spread is min..max of them.
// Baseline: REV's tree (default: main) extracted with `git archive`, sharing this checkout's node_modules.
// Linux only (schedstat). Asserts nothing.

import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { baselineTree, median } from './baseline.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const WARMUP_MS = 1500;

interface Sample {
  /** Cycling thread: CPU ns and timeslices (wake-ups) over the run. */
  threadNs: number;
  slices: number;
  /** Whole process: utime + stime over the run, ns. */
  processNs: number;
  wallNs: number;
}

function threads(pid: number): Map<string, [number, number]> {
  const out = new Map<string, [number, number]>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const [ns, , slices] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(' ').map(Number);
      out.set(tid, [ns!, slices!]);
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

function processCpuNs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const after = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return ((Number(after[11]) + Number(after[12])) * 1e9) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

/** Measure the running process `pid` (in this process, from outside the child) over `ms`. */
async function measure(pid: number, ms: number): Promise<Sample> {
  const t0 = process.hrtime.bigint();
  const a = threads(pid);
  const p0 = processCpuNs(pid);
  await new Promise((r) => setTimeout(r, ms));
  const b = threads(pid);
  const p1 = processCpuNs(pid);
  const wallNs = Number(process.hrtime.bigint() - t0);
  let best: Sample = { threadNs: 0, slices: -1, processNs: p1 - p0, wallNs };
  for (const [tid, [ns, sl]] of b) {
    const [ns0, sl0] = a.get(tid) ?? [0, 0];
    if (sl - sl0 > best.slices) best = { threadNs: ns - ns0, slices: sl - sl0, processNs: p1 - p0, wallNs };
  }
  return best;
}

// --- child side ---------------------------------------------------------------------------------------
const BARE = `
const sleeper = new Int32Array(new SharedArrayBuffer(4));
const now = () => process.hrtime.bigint();
let deadline = now() + 1000000n;
for (;;) {
  const ahead = deadline - now();
  if (ahead > 0n) Atomics.wait(sleeper, 0, 0, Number(ahead) / 1e6);
  deadline += 1000000n;
  if (now() - deadline > 10000000n) deadline = now() + 1000000n;
}`;

async function child(kind: string, tree: string): Promise<void> {
  if (kind === 'bare') {
    const { Worker } = await import('node:worker_threads');
    new Worker(BARE, { eval: true });
    process.stdout.write('ready\n');
    process.stdin.resume();
    process.stdin.on('end', () => process.exit(0));
    return;
  }
  const { loadMachine } = (await import(pathToFileURL(join(tree, 'sims/config/compile.ts')).href)) as typeof import('../sims/config/compile.ts');
  const { CoreLink } = (await import(pathToFileURL(join(tree, 'sims/service/core-link.ts')).href)) as typeof import('../sims/service/core-link.ts');
  const machine = await loadMachine(join(tree, 'fixtures/machines/nine-axis.json'), join(tmpdir(), 'cell-hil-config'));
  const link = new CoreLink(machine, { driver: 'sim', clock: { mode: 'realtime', spinNs: 0 }, priority: 'none' });
  await link.start();
  process.stdout.write('ready\n');
  process.stdin.resume();
  process.stdin.on('end', () => void link.shutdown().then(() => process.exit(0)));
}

// --- parent side --------------------------------------------------------------------------------------
async function run(kind: string, tree: string, seconds: number): Promise<Sample> {
  const p = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', kind, tree], { cwd: tree, stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((resolve, reject) => {
      let out = '';
      p.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('ready\n')) resolve();
      });
      p.once('exit', (code) => reject(new Error(`${kind} run ended early (exit ${code})`)));
    });
    await new Promise((r) => setTimeout(r, WARMUP_MS));
    return await measure(p.pid!, seconds * 1000);
  } finally {
    p.stdin!.end();
    const ended = new Promise((r) => p.once('exit', r));
    const kill = setTimeout(() => p.kill('SIGKILL'), 3000);
    await ended;
    clearTimeout(kill);
  }
}



async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const at = args.indexOf('--base');
  const rev = at >= 0 ? args.splice(at, 2)[1]! : 'main';
  const seconds = Number(args[0] ?? 5);
  const rounds = Number(args[1] ?? 5);
  const base = baselineTree(rev);
  const kinds = { base, this: ROOT, bare: ROOT } as const;
  const results: Record<keyof typeof kinds, Sample[]> = { base: [], this: [], bare: [] };
  const us = (ns: number) => (ns / 1e3).toFixed(1);
  const ms = (ns: number, s: Sample) => ((ns / s.wallNs) * 1e3).toFixed(1);
  console.log(`idle real-time core, nine-axis fixture, sim driver, capture on; ${seconds} s per run after ${WARMUP_MS} ms, ${rounds} rounds; base = ${rev}`);
  console.log('round kind   load  thread_ms/s  wakes/s  us/wake  process_ms/s');
  try {
    for (let r = 0; r < rounds; r++) {
      const order = (['base', 'this', 'bare'] as const).map((_, k, a) => a[(k + r) % a.length]!);
      for (const kind of order) {
        const load = loadavg()[0]!;
        const s = await run(kind === 'bare' ? 'bare' : 'core', kinds[kind], seconds);
        results[kind].push(s);
        const perS = (s.slices / s.wallNs) * 1e9;
        console.log(
          `${String(r + 1).padStart(5)} ${kind.padEnd(5)} ${load.toFixed(1).padStart(5)}  ${ms(s.threadNs, s).padStart(11)}  ${perS.toFixed(0).padStart(7)}  ${us(s.threadNs / s.slices).padStart(7)}  ${ms(s.processNs, s).padStart(12)}`,
        );
      }
    }
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
  // The main figure: the cycling thread's CPU per second of wall, which at the fixture's 1 ms cycle is
  // its CPU per cycle in us. Wake-ups per second are less than cycles when a late cycle needed no sleep.
  const perCycle = (k: keyof typeof kinds) => results[k].map((s) => (s.threadNs / s.wallNs) * 1e3);
  const procPerS = (k: keyof typeof kinds) => results[k].map((s) => (s.processNs / s.wallNs) * 1e3);
  const spread = (xs: number[], f: (x: number) => string) => `${f(median(xs))} (${f(Math.min(...xs))}..${f(Math.max(...xs))})`;
  const f1 = (x: number) => x.toFixed(1);
  const f2 = (x: number) => x.toFixed(2);
  for (const k of ['base', 'this', 'bare'] as const) {
    console.log(`${k.padEnd(5)} thread us per cycle (= ms/s), median (min..max): ${spread(perCycle(k), f1)}; process ms/s ${spread(procPerS(k), f1)}`);
  }
  const ratios = (xs: number[], ys: number[]) => xs.map((x, i) => x / ys[i]!);
  console.log(`ratio this/base thread CPU, same round: median ${spread(ratios(perCycle('this'), perCycle('base')), f2)}`);
  console.log(`ratio this/bare thread CPU, same round: median ${spread(ratios(perCycle('this'), perCycle('bare')), f2)}; base/bare ${spread(ratios(perCycle('base'), perCycle('bare')), f2)}`);
  console.log(`above the bare loop, us per cycle: this ${spread(perCycle('this').map((x, i) => x - perCycle('bare')[i]!), f1)}, base ${spread(perCycle('base').map((x, i) => x - perCycle('bare')[i]!), f1)}`);
  console.log(`ratio this/base process CPU, same round: median ${spread(ratios(procPerS('this'), procPerS('base')), f2)}`);
}

if (process.argv[2] === '--child') await child(process.argv[3]!, process.argv[4]!);
else await main();
