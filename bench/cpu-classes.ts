// Where a conformance run's CPU time goes, by kind of process and by suite file. It runs a command (by
// default the whole sim run, `hil run --target sim --no-report`) under a child subreaper (Python's prctl,
// as bench/conformance.bench.ts does, so a stack host that outlives its worker stays a descendant) and every
// ~200 ms reads /proc/<pid>/stat (utime + stime) of every descendant and /proc/<pid>/task/<tid>/stat and
// schedstat of the threads of the stacks, vitest workers, OLP servers and planners. The last value seen per process (per thread) is booked to a class
// from its command line; the CPU of a process that died between two samples after the last one is lost (the
// reaper's own children total is printed beside the sampled total, so the loss is visible).
//
//   node --import tsx bench/cpu-classes.ts [--interval MS] [--json FILE] [--cwd DIR] [-- command ...]
//
// --cwd runs the command in another checkout (an earlier revision's worktree, for an A/B in the same hour);
// its files are charged only if its harness writes the trace too.
//
// Per file: the run is started with HIL_CPU_TRACE=<file>; harness/evidence-setup.ts then appends one line
// per test file and worker (pid, file, start and end in ms since the epoch). Each sampled increase of a
// process is booked to the file its vitest worker (the nearest ancestor that is one) ran at that moment, so
// a stack host's cycling is charged to the file whose stack it served.
//
// Threads of those processes: the main thread (tid = pid), and the others split by their wakeup rate over
// their life (schedstat's timeslices per second of wall): a thread woken more than 300 times a second is a
// core cycling on a real-time or fast clock ("core-cycling"); the rest ("other threads", by the name the
// kernel keeps: V8's platform threads, worker_threads such as the grant keeper, decode workers and a
// stepped core are all "node"). Each class also says how many of its processes the sampler saw. This is a
// measurement, nothing asserts on it.

import { spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { reaperArgs, reaperFigures } from './reaper.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const HZ = 100; // USER_HZ on Linux


function args() {
  const a = process.argv.slice(2);
  const dd = a.indexOf('--');
  const own = dd >= 0 ? a.slice(0, dd) : a;
  const cmd = dd >= 0 ? a.slice(dd + 1) : ['node', 'harness/bin/hil.mjs', 'run', '--target', 'sim', '--no-report'];
  const get = (k: string) => {
    const i = own.indexOf(k);
    return i >= 0 ? own[i + 1] : undefined;
  };
  return { interval: Number(get('--interval') ?? '200'), json: get('--json'), cwd: get('--cwd') ?? ROOT, cmd };
}

interface Stat {
  pid: number;
  ppid: number;
  ticks: number;
  start: number;
}

/** A thread's name as the kernel keeps it (digits folded, so numbered pool threads add up under one name). */
function threadName(pid: number, tid: string): string {
  try {
    return readFileSync(`/proc/${pid}/task/${tid}/comm`, 'latin1').trim().replace(/[0-9]+/g, '#');
  } catch {
    return '?';
  }
}

function readStat(path: string): Stat | undefined {
  let s: string;
  try {
    s = readFileSync(path, 'latin1');
  } catch {
    return undefined;
  }
  const close = s.lastIndexOf(')');
  const f = s.slice(close + 2).split(' ');
  // f[0] is field 3 (state): utime is field 14, stime 15, starttime 22.
  return { pid: Number(s.slice(0, s.indexOf(' '))), ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]), start: Number(f[19]) };
}

function classify(cmd: string): string {
  if (cmd.includes('vitest/dist/workers')) return 'vitest worker';
  // Program hosts (harness/targets/program-host.ts): booked with the server they serve sessions of.
  if (/(planner\.js|planner\/main\.ts) sessions$/.test(cmd)) return 'planner';
  if (/(olp\.js|olp\/main\.ts) sessions$/.test(cmd)) return 'OLP server';
  if (cmd.includes('main.js sessions') || /\bsessions$/.test(cmd)) return 'stack host';
  if (/main\.js|sims\/main\.ts/.test(cmd)) return 'stack (own process)';
  // The run's build of the planning process's startup snapshot names its bundle too (harness/targets/reference.ts).
  if (/--build-snapshot/.test(cmd)) return 'snapshot build';
  if (/planner-child/.test(cmd)) return 'planner child';
  if (/planner\.js|planner\/main/.test(cmd)) return 'planner';
  // Before the OLP patterns: a run's own command line may hold a filter naming suites/olp.
  if (/hil\.mjs run/.test(cmd)) return 'hil run (vitest main)';
  if (/olp\.js worker|olp\/main\.ts worker/.test(cmd)) return 'OLP worker';
  if (/olp\.js|olp\/main/.test(cmd)) return 'OLP server';
  if (/olp|step-worker|occt/i.test(cmd)) return 'OLP helper';
  if (/\bcerts\b/.test(cmd)) return 'hil certs';
  if (/openssl/.test(cmd)) return 'openssl';
  if (/esbuild/.test(cmd)) return 'esbuild';
  if (/chrom/i.test(cmd)) return 'chromium';
  if (/config\.js|sims\/config/.test(cmd)) return 'hil config';
  if (/busy-loops|while \(Date\.now\(\)/.test(cmd)) return 'busy loop';
  if (/python3/.test(cmd)) return 'reaper';
  return `other: ${cmd.slice(0, 80)}`;
}

interface Proc {
  pid: number;
  start: number;
  cls: string;
  cmd: string;
  ticks: number;
  /** The vitest worker this process belongs to (itself for a worker), decided when first seen. */
  worker?: number;
  threads: Map<number, { ticks: number; slices: number; start: number; seenFirst: number; seenLast: number; comm: string }>;
}

interface TraceLine {
  pid: number;
  file: string;
  start: number;
  end: number;
  requests?: Record<string, number>;
}

function readTrace(path: string): TraceLine[] {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  const open = new Map<string, TraceLine>();
  const out: TraceLine[] = [];
  for (const line of text.split('\n')) {
    const [kind, pid, at, file, requests] = line.split('\t');
    if (!file) continue;
    const key = `${pid}\t${file}`;
    if (kind === 'begin') open.set(key, { pid: Number(pid), file, start: Number(at), end: Infinity });
    else if (kind === 'end') {
      const t = open.get(key);
      if (t) {
        t.end = Number(at);
        if (requests) t.requests = JSON.parse(requests) as Record<string, number>;
        out.push(t);
        open.delete(key);
      }
    }
  }
  return [...out, ...open.values()];
}

async function main(): Promise<void> {
  const o = args();
  const dir = mkdtempSync(join(tmpdir(), 'hil-cpu-'));
  const trace = join(dir, 'trace.tsv');
  writeFileSync(trace, '');
  const load0 = loadavg();
  const t0 = Date.now();
  const child = spawn('python3', reaperArgs(o.cwd, o.cmd), { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, HIL_CPU_TRACE: trace } });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    process.stdout.write(d);
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  const root = child.pid!;
  const procs = new Map<string, Proc>();
  /** Increases booked per sample: [time, key, ticks]. */
  const deltas: Array<[number, string, number]> = [];
  /** Cycling intervals of a thread (more than 300 wake-ups a second between two samples): [time, key, ticks, seconds]. */
  const cycling: Array<[number, string, number, number]> = [];
  let sampleCpu = 0;
  let done = false;
  child.on('exit', () => {
    done = true;
  });
  const cmdOf = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim();
    } catch {
      return '';
    }
  };
  const sample = () => {
    const c0 = process.cpuUsage();
    const now = Date.now();
    const all = new Map<number, Stat>();
    for (const name of readdirSync('/proc')) {
      if (name.charCodeAt(0) > 57) continue;
      const s = readStat(`/proc/${name}/stat`);
      if (s) all.set(s.pid, s);
    }
    const kids = new Map<number, number[]>();
    for (const s of all.values()) {
      const l = kids.get(s.ppid) ?? [];
      l.push(s.pid);
      kids.set(s.ppid, l);
    }
    const stack = [...(kids.get(root) ?? [])];
    while (stack.length) {
      const pid = stack.pop()!;
      stack.push(...(kids.get(pid) ?? []));
      const s = all.get(pid)!;
      const key = `${pid}:${s.start}`;
      let p = procs.get(key);
      if (!p) {
        const cmd = cmdOf(pid);
        p = { pid, start: s.start, cls: classify(cmd), cmd, ticks: 0, threads: new Map() };
        if (p.cls === 'vitest worker') p.worker = pid;
        else {
          for (let a = all.get(s.ppid); a; a = all.get(a.ppid)) {
            const ak = [...procs.values()].find((q) => q.pid === a!.pid && q.start === a!.start);
            if (ak?.cls === 'vitest worker') {
              p.worker = ak.pid;
              break;
            }
            if (a.pid === root) break;
          }
        }
        procs.set(key, p);
      }
      if (s.ticks > p.ticks) {
        deltas.push([now, key, s.ticks - p.ticks]);
        p.ticks = s.ticks;
      }
      if (p.cls.startsWith('stack') || p.cls === 'vitest worker' || p.cls.startsWith('OLP') || p.cls.startsWith('planner')) {
        let tids: string[] = [];
        try {
          tids = readdirSync(`/proc/${pid}/task`);
        } catch {
          /* gone */
        }
        for (const t of tids) {
          const ts = readStat(`/proc/${pid}/task/${t}/stat`);
          if (!ts) continue;
          let slices = 0;
          try {
            slices = Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'latin1').split(' ')[2]);
          } catch {
            /* gone */
          }
          const th = p.threads.get(ts.pid) ?? { ticks: 0, slices: 0, start: ts.start, seenFirst: now, seenLast: now, comm: threadName(pid, t) };
          const dt = (now - th.seenLast) / 1000;
          if (ts.pid !== pid && dt > 0 && (slices - th.slices) / dt > 300) cycling.push([now, key, ts.ticks - th.ticks, dt]);
          th.ticks = ts.ticks;
          th.slices = slices;
          th.seenLast = now;
          p.threads.set(ts.pid, th);
        }
      }
    }
    const c1 = process.cpuUsage(c0);
    sampleCpu += (c1.user + c1.system) / 1e6;
  };
  while (!done) {
    sample();
    await new Promise((r) => setTimeout(r, o.interval));
  }
  await new Promise<void>((r) => (child.exitCode !== null ? r() : child.once('close', () => r())));
  const wall = (Date.now() - t0) / 1000;
  const load1 = loadavg();
  const totals = reaperFigures(err);

  // Per class.
  const byClass = new Map<string, number>();
  const started = new Map<string, number>();
  for (const p of procs.values()) {
    byClass.set(p.cls, (byClass.get(p.cls) ?? 0) + p.ticks / HZ);
    started.set(p.cls, (started.get(p.cls) ?? 0) + 1);
  }
  // Threads of the stacks.
  const threadClass = new Map<string, number>();
  for (const p of procs.values()) {
    for (const [tid, th] of p.threads) {
      const life = Math.max(0.2, (th.seenLast - th.seenFirst) / 1000);
      // The other threads by name (V8's platform workers, libuv's pool, a worker_threads Worker is "node"...).
      const kind = tid === p.pid ? 'main thread' : th.slices / life > 300 ? 'core-cycling thread (>300 wakeups/s)' : `other threads: ${th.comm}`;
      const k = `${p.cls}: ${kind}`;
      threadClass.set(k, (threadClass.get(k) ?? 0) + th.ticks / HZ);
    }
  }
  // Per file.
  const lines = readTrace(trace);
  /** The suite file the vitest worker of `p` ran at `at` (or where the time went when none). */
  const fileAt = (p: Proc, at: number): string => {
    if (p.worker === undefined) return '(outside any file)';
    const hit = lines.find((l) => l.pid === p.worker && l.start <= at && at <= l.end + o.interval);
    return hit ? relative(o.cwd, hit.file) : '(worker between files)';
  };
  const byFile = new Map<string, Map<string, number>>();
  for (const [at, key, ticks] of deltas) {
    const p = procs.get(key)!;
    const file = fileAt(p, at);
    const m = byFile.get(file) ?? new Map<string, number>();
    m.set(p.cls, (m.get(p.cls) ?? 0) + ticks / HZ);
    byFile.set(file, m);
  }
  // Cycling threads per file and per process kind: the seconds they cycled, and their CPU.
  const cyclingByFile = new Map<string, { s: number; cpu: number }>();
  for (const [at, key, ticks, dt] of cycling) {
    const p = procs.get(key)!;
    for (const k of [fileAt(p, at), `[${p.cls}]`]) {
      const c = cyclingByFile.get(k) ?? { s: 0, cpu: 0 };
      c.s += dt;
      c.cpu += ticks / HZ;
      cyclingByFile.set(k, c);
    }
  }
  const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
  const sampled = sum(byClass);
  console.log('\n== CPU by process class (s) ==');
  for (const [k, v] of [...byClass].sort((a, b) => b[1] - a[1])) console.log(`${v.toFixed(1).padStart(8)}  ${k}  (${started.get(k)} ${started.get(k) === 1 ? 'process' : 'processes'})`);
  console.log(`${sampled.toFixed(1).padStart(8)}  sampled total`);
  if (totals) console.log(`${(totals.user_s + totals.sys_s).toFixed(1).padStart(8)}  reaper's children total (user ${totals.user_s.toFixed(1)} + sys ${totals.sys_s.toFixed(1)})`);
  console.log(`${sampleCpu.toFixed(1).padStart(8)}  this sampler (not in the totals)`);
  console.log('\n== threads of stacks, vitest workers, OLP and planner processes (s) ==');
  for (const [k, v] of [...threadClass].sort((a, b) => b[1] - a[1])) console.log(`${v.toFixed(1).padStart(8)}  ${k}`);
  console.log('\n== CPU by file (s): total, then the classes above 0.5 s ==');
  const files = [...byFile].sort((a, b) => sum(b[1]) - sum(a[1]));
  for (const [f, m] of files) {
    const parts = [...m].filter(([, v]) => v >= 0.5).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v.toFixed(1)}`);
    console.log(`${sum(m).toFixed(1).padStart(8)}  ${f}  (${parts.join(', ')})`);
  }
  const cyc = [...cyclingByFile].sort((a, b) => b[1].cpu - a[1].cpu);
  console.log(`\n== cycling threads by file: thread-seconds above 300 wake-ups/s and their CPU (s); by process class in brackets ==`);
  for (const [f, c] of cyc.slice(0, 30)) console.log(`${c.cpu.toFixed(1).padStart(8)}  ${c.s.toFixed(1).padStart(6)} s  ${f}`);
  const durations = new Map<string, number>();
  for (const l of lines) if (Number.isFinite(l.end)) durations.set(relative(o.cwd, l.file), (durations.get(relative(o.cwd, l.file)) ?? 0) + (l.end - l.start) / 1000);
  console.log('\n== longest files (wall s, from the trace) ==');
  for (const [f, d] of [...durations].sort((a, b) => b[1] - a[1]).slice(0, 10)) console.log(`${d.toFixed(1).padStart(8)}  ${f}`);
  const reqs = new Map<string, Record<string, number>>();
  for (const l of lines) {
    const m = reqs.get(l.file) ?? {};
    for (const [k, v] of Object.entries(l.requests ?? {})) m[k] = (m[k] ?? 0) + v;
    reqs.set(l.file, m);
  }
  const count = (m: Record<string, number>) => Object.values(m).reduce((a, b) => a + b, 0);
  const allReqs: Record<string, number> = {};
  for (const m of reqs.values()) for (const [k, v] of Object.entries(m)) allReqs[k] = (allReqs[k] ?? 0) + v;
  console.log(`\n== requests through the harness's control clients: ${count(allReqs)} in all ==`);
  for (const [k, v] of Object.entries(allReqs).sort((a, b) => b[1] - a[1]).slice(0, 8)) console.log(`${String(v).padStart(8)}  ${k}`);
  console.log('by file (the ten with most):');
  for (const [f, m] of [...reqs].sort((a, b) => count(b[1]) - count(a[1])).slice(0, 10)) {
    const top = Object.entries(m).sort((a, b) => b[1] - a[1]).slice(0, 3).map(([k, v]) => `${k} ${v}`);
    console.log(`${String(count(m)).padStart(8)}  ${relative(o.cwd, f)}  (${top.join(', ')})`);
  }
  console.log(`\nwall ${wall.toFixed(1)} s; load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')}; status ${totals?.status}`);
  const summary = out.split('\n').filter((l) => /passed|failed|Tests|Test Files/.test(l)).slice(-3).join(' | ');
  console.log(`closing lines: ${summary}`);
  if (o.json) {
    writeFileSync(
      o.json,
      JSON.stringify({ wall, load0, load1, totals, sampled, byClass: Object.fromEntries(byClass), threads: Object.fromEntries(threadClass), byFile: Object.fromEntries([...byFile].map(([f, m]) => [f, Object.fromEntries(m)])), cyclingByFile: Object.fromEntries(cyclingByFile), durations: Object.fromEntries(durations), requests: Object.fromEntries([...reqs].map(([f, m]) => [relative(o.cwd, f), m])), summary }, null, 1),
    );
  }
  rmSync(dir, { recursive: true, force: true });
  void appendFileSync;
}

await main();
