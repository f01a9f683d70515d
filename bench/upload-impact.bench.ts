// What a maximum prepare_trajectory upload does to the rest of the cell:
// the core's cycle lateness and the latency of GET /v1/status while a 222516384-byte, 250000-point body
// streams into the service, against the same figures with the service idle, measured on one stack in the
// same run. Both phases run the same observers: a client that asks for the status back to back, and a
// telemetry reader that drains the capture ring (the lateness comes from the records' cycle_jitter_ns, one
// record per cycle, so every cycle of each phase counts).
//
// The uploader is a client of its own, as on a cell (a planner, the OLP server): a child process streaming a
// body file written before the first phase. Generated on the fly in this process, the body's chunks were
// built on the observers' event loop, and their waits for it counted as the service's status latency.
//
//   node --import tsx bench/upload-impact.bench.ts [idle-seconds] [uploads]
//
// The stack is the reference stack on the sim driver (harness/targets/sim.ts), started as `hil run`
// starts it (from the prebuilt bundle: HIL_STACK_PREBUILT=off runs the TypeScript sources); nothing here
// asserts anything.

import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { Cell } from '../harness/clients/cell.ts';
import type { BindingInput, ControlClient } from '../harness/clients/control.ts';
import { readStatus } from '../harness/clients/status.ts';
import { latestSequence, readBatch } from '../harness/clients/telemetry.ts';
import { openTarget } from '../harness/targets/index.ts';
import { PREBUILT_ENV, prebuildReference } from '../harness/targets/reference.ts';

const BODY_LIMIT = 222_516_384; // document 1 part 8
const POINTS = 250_000;
const SCHEMA = 'svc.rt-control.request.v1';
const idleSeconds = Number(process.argv[2] ?? 5);
const uploads = Number(process.argv[3] ?? 2);

const quantile = (xs: number[], q: number) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

/** A 222516384-byte body: 250000 points 1 ms apart holding `hold`, whitespace before each point. */
function* body(head: string, hold: number[]): Generator<Buffer> {
  const pos = `[${hold.map((q) => JSON.stringify(q)).join(',')}]`;
  const point = (k: number) => `${k ? ',' : ''}{"time_ns":${k * 1_000_000},"position":${pos}}`;
  let plain = head.length + 2; // "]}"
  for (let k = 0; k < POINTS; k++) plain += point(k).length;
  const spare = BODY_LIMIT - plain;
  const per = Math.floor(spare / POINTS);
  const pad = ' '.repeat(per);
  yield Buffer.from(head, 'latin1');
  let batch: string[] = [];
  for (let k = 0; k < POINTS; k++) {
    batch.push(pad + point(k));
    if (batch.length === 500) {
      yield Buffer.from(batch.join(''), 'latin1');
      batch = [];
    }
  }
  yield Buffer.from(batch.join('') + ' '.repeat(spare - per * POINTS) + ']}', 'latin1');
}

interface Phase {
  name: string;
  seconds: number;
  statusMs: number[];
  /** Latency of the controller's lease renewals (every 100 ms, one grant for the whole run). */
  renewMs: number[];
  lateUs: number[];
  overruns: number;
  outcome?: string;
}

/** Run `during` while observing; returns the phase's status latencies and the cycles' lateness. */
/** Where the run's renewer (main) files each renewal's latency: the phase running now. */
let renewals: number[] = [];

async function phase(name: string, client: ControlClient, maxLateNs: number, during: () => Promise<string | undefined>): Promise<Phase> {
  const from = await latestSequence(client);
  const statusMs: number[] = [];
  const renewMs: number[] = [];
  renewals = renewMs;
  let running = true;
  const poller = (async () => {
    while (running) {
      const t = performance.now();
      await client.status();
      statusMs.push(performance.now() - t);
    }
  })();
  // Drain the ring as we go (a phase may last longer than the ring holds).
  const lateUs: number[] = [];
  let overruns = 0;
  let cursor = from;
  const drain = async () => {
    for (;;) {
      const b = await readBatch(client, cursor);
      for (const r of b.records) {
        const late = Number(r.cycle_jitter_ns);
        lateUs.push(late / 1000);
        if (late > maxLateNs) overruns++;
      }
      cursor = b.header.last_sequence;
      if (b.header.record_count < 4096) return;
    }
  };
  const drainer = (async () => {
    while (running) {
      await drain();
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  const t0 = performance.now();
  const outcome = await during();
  const seconds = (performance.now() - t0) / 1000;
  running = false;
  await poller;
  renewals = [];
  await drainer;
  await drain();
  return { name, seconds, statusMs, renewMs, lateUs, overruns, ...(outcome ? { outcome } : {}) };
}

function row(p: Phase): string {
  const f = (x: number) => x.toFixed(2).padStart(9);
  return `${p.name.padEnd(8)} ${p.seconds.toFixed(1).padStart(6)} ${String(p.lateUs.length).padStart(7)} ${String(p.overruns).padStart(8)} ${f(quantile(p.lateUs, 0.5))} ${f(quantile(p.lateUs, 0.99))} ${f(Math.max(...p.lateUs))} ${String(p.statusMs.length).padStart(7)} ${f(quantile(p.statusMs, 0.5))} ${f(quantile(p.statusMs, 0.99))} ${f(Math.max(...p.statusMs))} ${f(quantile(p.renewMs, 0.99))}${p.outcome ? `  ${p.outcome}` : ''}`;
}

/**
 * POST `head` and then the points file to /v1/control from a child process (undici over the Unix socket, the
 * file streamed);
 * resolves with `<status> <first 100 characters of the reply>`.
 */
async function uploadFrom(head: string, file: string, socketPath: string): Promise<string> {
  const script = `
    import { createReadStream, statSync } from 'node:fs';
    import { Agent, request } from 'undici';
    const [head, file, socketPath] = process.argv.slice(1);
    async function* body() { yield Buffer.from(head, 'latin1'); yield* createReadStream(file, { highWaterMark: 1 << 20 }); }
    const agent = new Agent({ connect: { socketPath }, bodyTimeout: 120_000, headersTimeout: 120_000 });
    const res = await request('http://localhost/v1/control', { method: 'POST', body: body(), dispatcher: agent,
      headers: { 'content-type': 'application/json', 'content-length': String(head.length + statSync(file).size) } });
    process.stdout.write(res.statusCode + ' ' + (await res.body.text()).slice(0, 100));
    await agent.close();`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, head, file, socketPath], { stdio: ['ignore', 'pipe', 'inherit'], cwd: new URL('..', import.meta.url) });
  let text = '';
  child.stdout.on('data', (d) => (text += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return code === 0 ? text : `uploader exited ${code}: ${text}`;
}

async function main(): Promise<void> {
  process.env.HIL_TARGET ??= 'sim';
  // Built as `hil run` builds it (one bundle, no TypeScript loader in the process or its workers): the
  // loader's modules tripled the core worker's heap, and with it the collections the core makes.
  const built = process.env[PREBUILT_ENV] ? undefined : await prebuildReference();
  if (built) process.env[PREBUILT_ENV] = built.dir;
  const target = await openTarget();
  try {
    const client = target.client();
    const d = (await client.describe()).reply.data as unknown as { binding: BindingInput; max_cycle_lateness_ns?: bigint };
    const maxLateNs = Number(d.max_cycle_lateness_ns ?? 500_000n);
    const cell = new Cell(client, d.binding);
    const hold = (await readStatus(client)).axes.map((a) => Number(a.position));
    process.stdout.write(`stack: ${target.name} (${target.driver}); body ${BODY_LIMIT} bytes, ${POINTS} points; overrun = lateness above ${maxLateNs / 1000} us\n`);
    process.stdout.write(`phase      secs  cycles overruns  late_p50  late_p99  late_max  status  st_p50ms  st_p99ms  st_maxms  rn_p99ms\n`);
    const phases: Phase[] = [];
    // One grant for the run, renewed by the phases' renewer (a refused renewal ends the benchmark).
    // A controller renewing its lease every 100 ms (a fifth of the 500 ms LAN ceiling), as Cell.hold does.
    // The points of the body, written before the grant (a quarter of a GB takes seconds on a loaded machine);
    // the head, which names the grant, goes to the uploader with the file.
    const dir = await mkdtemp(join(tmpdir(), 'hil-upload-impact-'));
    const bodyFile = join(dir, 'points.json');
    const sample = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${'0'.repeat(64)}","generation":18446744073709551615,"axis_mask":${(1 << hold.length) - 1},"points":[`;
    const out = createWriteStream(bodyFile);
    let first = true;
    for (const chunk of body(sample, hold)) {
      if (first) { first = false; continue; } // the head is sent by the uploader
      if (!out.write(chunk)) await once(out, 'drain');
    }
    out.end();
    await once(out, 'finish');
    const s = await cell.grant({ requested_lease_ms: 10_000n });
    const head = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${s.session}","generation":${s.generation},"axis_mask":${(1 << hold.length) - 1},"points":[`;
    // Pad the head to the sample's length, so the body is exactly the maximum whatever the token and generation.
    const paddedHead = head + ' '.repeat(sample.length - head.length);
    let renewing = true;
    const renewer = (async () => {
      while (renewing) {
        const t = performance.now();
        const r = await cell.fenced('renew', s);
        if (r.status !== 200) throw new Error(`renewal refused: ${r.status} ${r.reply.error}`);
        renewals.push(performance.now() - t);
        await new Promise((res) => setTimeout(res, 100));
      }
    })();
    for (let round = 0; round < uploads; round++) {
      const idle = await phase('idle', client, maxLateNs, () => new Promise((r) => setTimeout(() => r(undefined), idleSeconds * 1000)));
      process.stdout.write(row(idle) + '\n');
      const loaded = await phase('upload', client, maxLateNs, () => uploadFrom(paddedHead, bodyFile, target.address));
      process.stdout.write(row(loaded) + '\n');
      phases.push(idle, loaded);
    }
    renewing = false;
    await renewer;
    await rm(dir, { recursive: true, force: true });
    await cell.cleanup();
    const all = (name: string) => {
      const ps = phases.filter((p) => p.name === name);
      return { late: ps.flatMap((p) => p.lateUs), status: ps.flatMap((p) => p.statusMs), renew: ps.flatMap((p) => p.renewMs), overruns: ps.reduce((a, p) => a + p.overruns, 0), cycles: ps.reduce((a, p) => a + p.lateUs.length, 0) };
    };
    const i = all('idle');
    const u = all('upload');
    const r = (a: number, b: number) => (a / b).toFixed(2);
    process.stdout.write(`\nupload/idle, all rounds: cycle lateness p99 ${r(quantile(u.late, 0.99), quantile(i.late, 0.99))}x (goal <= 1.5), overruns per 1000 cycles ${((1000 * u.overruns) / u.cycles).toFixed(2)} vs ${((1000 * i.overruns) / i.cycles).toFixed(2)}; GET /v1/status p99 ${r(quantile(u.status, 0.99), quantile(i.status, 0.99))}x, p50 ${r(quantile(u.status, 0.5), quantile(i.status, 0.5))}x\n`);
    // Goals: status and renew p99 <= 2x idle (a controller renewing its lease and a UI polling status must
    // not notice an upload); late_max <= 2x idle late_max.
    process.stdout.write(
      `upload/idle ratios: status p99 ${r(quantile(u.status, 0.99), quantile(i.status, 0.99))}x, renew p99 ${r(quantile(u.renew, 0.99), quantile(i.renew, 0.99))}x (goals <= 2); ` +
        `late_max ${r(Math.max(...u.late), Math.max(...i.late))}x (goal <= 2; ${Math.max(...u.late).toFixed(0)} vs ${Math.max(...i.late).toFixed(0)} us)\n`,
    );
  } finally {
    await target.close();
    await built?.remove();
  }
}

await main();
