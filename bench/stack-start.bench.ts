// What a stack costs a run that starts one per test (a replayed run, docs/recording.md): start to ready and
// stop, wall and CPU, as a session of a stack host (harness/targets/program-host.ts, sims/sessions.ts) against
// a process of its own (the baseline), alternating round by round in the same run. The stacks start from a
// bundle as `hil run` builds it (harness/targets/reference.ts prebuildReference), with the test channel:
// plain stacks on the real-time clock, or with --replay paced replays of one short recording made first (as
// a replayed test's stack starts; a host keeps their core threads too, sims/service/core-threads.ts).
//
//   node --import tsx bench/stack-start.bench.ts [stacks-per-round] [rounds] [--replay]
//
// CPU: the processes' from /proc/self/stat (reaped children: cutime + cstime), the host's from its
// /proc/<pid>/stat before and after the round (it lives on). Nothing is asserted.

import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlClient } from '../harness/clients/control.ts';
import { prebuildReference, PREBUILT_ENV } from '../harness/targets/reference.ts';
import { startStack } from '../harness/targets/sim.ts';

const positional = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const STACKS = Number(positional[0] ?? 30);
const ROUNDS = Number(positional[1] ?? 3);
const REPLAY = process.argv.includes('--replay');
/** The stack's arguments (set once the recording is made, with --replay). */
let stackArgs: (k: number) => string[] = () => ['--test-channel'];
const TICK_MS = 10; // USER_HZ 100 on Linux

/** utime + stime (+ cutime + cstime with `children`) of a process, in ms. */
function cpuMs(pid: number | 'self', children = false): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const own = Number(f[11]) + Number(f[12]);
  return (children ? own + Number(f[13]) + Number(f[14]) : own) * TICK_MS;
}

interface Round {
  readyMs: number;
  stopMs: number;
  cpuMs: number;
}

/** The stack host the hosted rounds run in (one: sessions run one after another), seen at warm-up. */
let hostPid = 0;

async function round(hosted: boolean): Promise<Round> {
  let ready = 0;
  let stop = 0;
  const before = hosted ? cpuMs(hostPid) : cpuMs('self', true) - cpuMs('self');
  for (let i = 0; i < STACKS; i++) {
    const t0 = performance.now();
    const s = await startStack({ args: stackArgs(i), hosted });
    const t1 = performance.now();
    if (hosted && s.ready.pid !== hostPid) throw new Error(`a second stack host (${s.ready.pid}, not ${hostPid}): its CPU would be lost`);
    await s.stop();
    ready += t1 - t0;
    stop += performance.now() - t1;
  }
  const cpu = hosted ? cpuMs(hostPid) - before : cpuMs('self', true) - cpuMs('self') - before;
  return { readyMs: ready / STACKS, stopMs: stop / STACKS, cpuMs: cpu / STACKS };
}

const built = await prebuildReference();
process.env[PREBUILT_ENV] = built.dir;
const work = await mkdtemp(join(tmpdir(), 'hil-stack-start-'));
try {
  if (REPLAY) {
    // One short recorded session: Describe, then half a second of cycles.
    const file = join(work, 'session.hilrec');
    const rec = await startStack({ args: ['--test-channel', '--record', file] });
    const c = new ControlClient(rec.ready.control);
    await c.describe();
    await new Promise((r) => setTimeout(r, 500));
    await c.close();
    await rec.stop();
    stackArgs = (k) => ['--test-channel', '--driver', 'replay', '--replay-file', file, '--replay-paced', join(work, `verdict-${k}.json`)];
  }
  // One of each first, unmeasured: the host's own start belongs to no round.
  const first = await startStack({ args: stackArgs(0), hosted: true });
  hostPid = first.ready.pid;
  await first.stop();
  await (await startStack({ args: stackArgs(0), hosted: false })).stop();
  const rows: Array<{ kind: string } & Round> = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const hosted of [false, true]) {
      const x = await round(hosted);
      rows.push({ kind: hosted ? 'hosted' : 'process', ...x });
      console.log(`${hosted ? 'hosted ' : 'process'} round ${r + 1}: ready ${x.readyMs.toFixed(1)} ms, stop ${x.stopMs.toFixed(1)} ms, cpu ${x.cpuMs.toFixed(1)} ms per stack`);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const of = (kind: string, k: keyof Round) => median(rows.filter((x) => x.kind === kind).map((x) => x[k]));
  const wall = (kind: string) => of(kind, 'readyMs') + of(kind, 'stopMs');
  console.log(
    `ratio hosted/process (medians of ${ROUNDS} rounds of ${STACKS}): start+stop wall ${(wall('hosted') / wall('process')).toFixed(2)}x ` +
      `(${wall('hosted').toFixed(1)} against ${wall('process').toFixed(1)} ms), cpu ${(of('hosted', 'cpuMs') / of('process', 'cpuMs')).toFixed(2)}x ` +
      `(${of('hosted', 'cpuMs').toFixed(1)} against ${of('process', 'cpuMs').toFixed(1)} ms)`,
  );
} finally {
  await built.remove();
  await rm(work, { recursive: true, force: true });
}
