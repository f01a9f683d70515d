// What a process the harness starts costs before it does its work: CPU (user + sys, the process and its
// threads) of Node's start with and without NODE_EXTRA_CA_CERTS (the reference programs and a sim run's
// workers start without it: harness/targets/reference.ts referenceEnv), and of `hil --help` and
// `hil certs create-pair` through the command's bundle (harness/bin/cli-cache.mjs) and through tsx
// (HIL_CLI_BUNDLE=off: the same sources, so the verbs' lazy usage texts are in both), and of loading the
// run's stack and OLP server bundles (`--help`) with and without their directory's package.json
// (harness/targets/reference.ts prebuildReference; without it node parses each bundle twice), and of a planning
// process planning the fixture program (five plans one after the other, each in a fresh process, as the
// planner stub runs them) started from its bundle and from its startup snapshot (buildChildSnapshot),
// alternating case by case, round by round. Each call runs under the benches' reaper (bench/reaper.ts) so that every thread
// and child is counted; its figures come in 10 ms clock ticks, hence the rounds and the medians.
//
//   node --import tsx bench/process-start.bench.ts [rounds] [--ca FILE]
//
// --ca names the certificate bundle of the "with" case (default /etc/ssl/certs/ca-certificates.crt, or
// NODE_EXTRA_CA_CERTS when set). Nothing is asserted.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serialize } from 'node:v8';
import { fileURLToPath } from 'node:url';
import { fixtureJobOptions, fixtureWeldplan } from '../harness/clients/weldplan.ts';
import { BUNDLE_PACKAGE, CHILD_SNAPSHOT, prebuildReference } from '../harness/targets/reference.ts';
import { median } from './baseline.ts';
import { reaperArgs, reaperFigures } from './reaper.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const HIL = join(ROOT, 'harness', 'bin', 'hil.mjs');
const args = process.argv.slice(2);
const caAt = args.indexOf('--ca');
const CA = caAt >= 0 ? args[caAt + 1]! : (process.env.NODE_EXTRA_CA_CERTS ?? '/etc/ssl/certs/ca-certificates.crt');
const ROUNDS = Number(args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--ca') ?? 7);

/** CPU seconds of `cmd` and everything it started. */
function cpu(cmd: string[], env: NodeJS.ProcessEnv): number {
  const r = spawnSync('python3', reaperArgs(ROOT, cmd), { env, encoding: 'utf8' });
  const f = reaperFigures(r.stderr);
  if (!f || f.status !== 0) throw new Error(`${cmd.join(' ')}: ${r.stderr.slice(-400)}`);
  return f.user_s + f.sys_s;
}

const bare: NodeJS.ProcessEnv = { ...process.env };
delete bare.NODE_EXTRA_CA_CERTS;
delete bare.HIL_CLI_BUNDLE;
const tmp = mkdtempSync(join(tmpdir(), 'hil-bench-start-'));
let pairs = 0;
const pairDir = () => join(tmp, `pair-${++pairs}`);

const built = await prebuildReference();
/** A bundle of the run's directory, loaded with its package.json (`typed`) or without it (node detects the module syntax). */
function bundle(name: string, typed: boolean): string[] {
  const pkg = join(built.dir, 'package.json');
  if (typed) writeFileSync(pkg, BUNDLE_PACKAGE);
  else rmSync(pkg, { force: true });
  return [process.execPath, join(built.dir, name), '--help'];
}

// The planning processes: a driver (its own CPU is in both cases alike) sends each one the fixture program's
// job over the IPC channel, as sims/planner/server.ts does, and waits for it to answer and exit.
// The job's options (they hold bigints) reach the driver as V8 bytes in a file.
const weldplanFile = join(tmp, 'line-weld.weldplan');
writeFileSync(weldplanFile, fixtureWeldplan());
const optionsFile = join(tmp, 'job-options.v8');
writeFileSync(optionsFile, serialize(fixtureJobOptions({ program_id: 'bench', manifest_revision: 1n, plan_revision: 1n })));
const PLANS = 5;
const DRIVER = `const { spawn } = require('node:child_process');
const { readFileSync } = require('node:fs');
const bytes = new Uint8Array(readFileSync(process.argv[1]));
const options = require('node:v8').deserialize(readFileSync(process.argv[2]));
(async () => {
  for (let i = 0; i < ${PLANS}; i++) await new Promise((ok, fail) => {
    const c = spawn(process.execPath, process.argv.slice(3), { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], serialization: 'advanced' });
    let done = false;
    c.on('message', (m) => (done ||= m.kind === 'done'));
    c.on('exit', (code) => (code === 0 && done ? ok() : fail(new Error('plan failed: exit ' + code))));
    c.send({ bytes, options, tmpPath: process.argv[1] + '.rdt' });
  });
})().catch((e) => { console.error(e.message); process.exit(1); });`;
const planning = (child: string[]) => () => [process.execPath, '-e', DRIVER, weldplanFile, optionsFile, ...child];
if (!existsSync(join(built.dir, CHILD_SNAPSHOT))) throw new Error(`no ${CHILD_SNAPSHOT} in the run's bundle (see ${CHILD_SNAPSHOT}.log there)`);

/** name: [baseline, this]; each a command and its environment. */
const CASES: Array<[string, [() => string[], NodeJS.ProcessEnv], [() => string[], NodeJS.ProcessEnv]]> = [
  ['node -e 0', [() => [process.execPath, '-e', '0'], { ...bare, NODE_EXTRA_CA_CERTS: CA }], [() => [process.execPath, '-e', '0'], bare]],
  ['hil --help', [() => [process.execPath, HIL, '--help'], { ...bare, HIL_CLI_BUNDLE: 'off' }], [() => [process.execPath, HIL, '--help'], bare]],
  ['stack bundle --help', [() => bundle('main.js', false), bare], [() => bundle('main.js', true), bare]],
  ['OLP bundle --help', [() => bundle('olp.js', false), bare], [() => bundle('olp.js', true), bare]],
  [`${PLANS} plans, a process each`, [planning([join(built.dir, 'planner-child.cjs')]), bare], [planning(['--snapshot-blob', join(built.dir, CHILD_SNAPSHOT)]), bare]],
  ['hil certs create-pair', [() => [process.execPath, HIL, 'certs', 'create-pair', '--dir', pairDir(), '--pair-id', 'bench'], { ...bare, HIL_CLI_BUNDLE: 'off' }], [() => [process.execPath, HIL, 'certs', 'create-pair', '--dir', pairDir(), '--pair-id', 'bench'], bare]],
];

if (!existsSync(CA)) console.log(`note: ${CA} does not exist; the "with" case then only warns`);
console.log(`rounds ${ROUNDS}; baseline: node with NODE_EXTRA_CA_CERTS=${CA}, hil through tsx (HIL_CLI_BUNDLE=off), bundles without their package.json, planning processes from the bundle instead of its snapshot`);
// Warm-up: the bundle built, tsx's own transform cache filled.
for (const [, b, t] of CASES) {
  cpu(b[0](), b[1]);
  cpu(t[0](), t[1]);
}
const got = new Map<string, { base: number[]; now: number[] }>(CASES.map(([n]) => [n, { base: [], now: [] }]));
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, b, t] of CASES) {
    const g = got.get(name)!;
    g.base.push(cpu(b[0](), b[1]));
    g.now.push(cpu(t[0](), t[1]));
  }
}
rmSync(tmp, { recursive: true, force: true });
await built.remove();
console.log(`${'case'.padEnd(24)}${'baseline s'.padStart(12)}${'this s'.padStart(10)}${'ratio'.padStart(8)}`);
for (const [name, g] of got) {
  const b = median(g.base);
  const n = median(g.now);
  console.log(`${name.padEnd(24)}${b.toFixed(3).padStart(12)}${n.toFixed(3).padStart(10)}${(n / b).toFixed(2).padStart(8)}`);
}
