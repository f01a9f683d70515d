// Where the vitest workers of a conformance run spend their time, from V8 CPU profiles. Profile a run with
// HIL_WORKER_CPU_PROF=DIR (vitest.config.ts passes --cpu-prof --cpu-prof-dir=DIR to the conformance
// project's workers; each worker writes DIR/CPU.*.cpuprofile when it exits), then summarise:
//
//   HIL_WORKER_CPU_PROF=/tmp/prof node harness/bin/hil.mjs run --target sim --no-report suites/envelope
//   node --import tsx bench/worker-profile.ts /tmp/prof [rows] [--callers NAME]
//
// Printed: self time by function and by file, inclusive time by package or project file (each counted once
// per sample), and with --callers the call stacks of the samples whose leaf function (or file) matches NAME.
// A V8 profile samples wall time of a thread that holds the CPU or is waiting for it: on a loaded machine a
// write that wakes another process (a socket write to the stack, IPC to vitest's main process) is where the
// kernel preempts the worker, and those sites collect samples far beyond their CPU. They are printed apart
// ("syscall sites") and left out of the inclusive figures; /proc's utime+stime (bench/cpu-classes.ts) is
// the CPU figure. This is a measurement, nothing asserts on it.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const SYSCALL_SITES = new Set(['writev', 'writeBuffer', 'writeUtf8String', 'writeLatin1String', 'postMessage']);
const IDLE = new Set(['(idle)', '(program)']);

const argv = process.argv.slice(2);
const dir = argv[0];
if (!dir) {
  process.stderr.write('usage: node --import tsx bench/worker-profile.ts DIR [rows] [--callers NAME]\n');
  process.exit(2);
}
const ci = argv.indexOf('--callers');
const callers = ci >= 0 ? argv[ci + 1] : undefined;
const rows = Number(argv.find((a, i) => /^\d+$/.test(a) && argv[i - 1] !== '--callers') ?? 30);

const shortUrl = (u: string): string => u.replace(/^file:\/\//, '').replace(/^.*node_modules\//, '').replace(`${process.cwd()}/`, '');
const group = (u: string): string | undefined => {
  if (!u || u.startsWith('node:')) return undefined;
  const m = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(u);
  return m ? `package ${m[1]}` : shortUrl(u);
};
const label = (n: ProfileNode): string => `${n.callFrame.functionName || '(anonymous)'} ${shortUrl(n.callFrame.url) || '(native)'}:${n.callFrame.lineNumber + 1}`;

const selfFn = new Map<string, number>();
const selfFile = new Map<string, number>();
const inclusive = new Map<string, number>();
const stacks = new Map<string, number>();
const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
let idle = 0;
let syscall = 0;
let busy = 0;
let files = 0;

for (const f of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
  files++;
  const p = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Profile;
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  for (let i = 0; i < p.samples.length; i++) {
    const t = p.timeDeltas[i] ?? 0;
    const leaf = nodes.get(p.samples[i]!)!;
    const fn = leaf.callFrame.functionName;
    if (IDLE.has(fn)) {
      idle += t;
      continue;
    }
    if (callers && (fn === callers || label(leaf).includes(callers))) {
      const chain: string[] = [];
      for (let cur = parent.get(leaf.id); cur !== undefined && chain.length < 8; cur = parent.get(cur)) {
        const n = nodes.get(cur)!;
        if (n.callFrame.functionName !== '(root)') chain.push(label(n));
      }
      add(stacks, chain.join('\n      < '), t);
    }
    if (SYSCALL_SITES.has(fn)) {
      syscall += t;
      continue;
    }
    busy += t;
    add(selfFn, label(leaf), t);
    add(selfFile, shortUrl(leaf.callFrame.url) || `(${fn})`, t);
    const seen = new Set<string>();
    for (let cur: number | undefined = leaf.id; cur !== undefined; cur = parent.get(cur)) {
      const g = group(nodes.get(cur)!.callFrame.url);
      if (g && !seen.has(g)) {
        seen.add(g);
        add(inclusive, g, t);
      }
    }
  }
}

const ms = (us: number) => `${(us / 1e3).toFixed(0).padStart(7)} ms`;
const table = (title: string, m: Map<string, number>, n = rows) => {
  process.stdout.write(`== ${title} ==\n`);
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n)) process.stdout.write(`${ms(v)} ${((100 * v) / busy).toFixed(1).padStart(5)}%  ${k}\n`);
  process.stdout.write('\n');
};
process.stdout.write(`${files} profiles: busy ${(busy / 1e6).toFixed(2)} s, syscall sites ${(syscall / 1e6).toFixed(2)} s, idle ${(idle / 1e6).toFixed(2)} s\n\n`);
table('inclusive by package or project file (busy samples)', inclusive);
table('self by file', selfFile);
table('self by function', selfFn);
if (callers) table(`stacks of ${callers} (all samples)`, stacks, 10);
