// The control round trip: renew over the control Unix socket of a reference stack
// against a bare node:http server on a Unix socket in the same process, answering a reply of the same
// size, measured alternately in the same run. What the service adds to a renewal is the ratio: the
// envelope, the fence, the core's acknowledgement and the reply, over what HTTP on a Unix socket costs
// anyway. Goal: p50 <= 1.3x bare and throughput >= 0.8x bare.
//
//   node --import tsx bench/control-roundtrip.bench.ts [requests] [connections] [rounds]
//
// The stack is started the way `hil run` starts it (harness/targets/sim.ts); nothing is asserted.

import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { Cell } from '../harness/clients/cell.ts';
import { ControlClient } from '../harness/clients/control.ts';
import { stringifyExact } from '../harness/oracle/json.ts';
import { startStack } from '../harness/targets/sim.ts';

const REQUESTS = Number(process.argv[2] ?? 3000);
const CONNECTIONS = Number(process.argv[3] ?? 8);
const ROUNDS = Number(process.argv[4] ?? 3);

/** The baseline: node:http on a Unix socket, reading the body and answering the same bytes. */
const BARE_SERVER = `
const [sock, b64] = process.argv.slice(1);
const reply = Buffer.from(b64, 'base64');
require('node:http').createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': reply.length }).end(reply));
}).listen(sock, () => process.stdout.write('ready\\n'));
`;

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

interface Figures {
  p50: number;
  p99: number;
  perSecond: number;
}

/** REQUESTS POSTs of `body` spread over CONNECTIONS keep-alive connections; latency per request in µs. */
async function load(socketPath: string, body: () => string): Promise<Figures> {
  const agent = new Agent({ connect: { socketPath }, connections: CONNECTIONS, pipelining: 1 });
  const us: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < REQUESTS) {
      next++;
      const t0 = process.hrtime.bigint();
      const r = await request('http://localhost/v1/control', { method: 'POST', dispatcher: agent, body: body(), headers: { 'content-type': 'application/json' } });
      await r.body.arrayBuffer();
      if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}`);
      us.push(Number(process.hrtime.bigint() - t0) / 1e3);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  const secs = (performance.now() - t0) / 1e3;
  await agent.close();
  return { p50: quantile(us, 0.5), p99: quantile(us, 0.99), perSecond: us.length / secs };
}

const stack = await startStack({ args: [] });
const dir = await mkdtemp(join(tmpdir(), 'hil-bare-'));
const bareSock = join(dir, 'bare.sock');
try {
  const client = new ControlClient(stack.ready.control);
  const cell = new Cell(client, ((await client.describe()).reply.data as { binding: never }).binding);
  // Held (renewed in the background) so that a pause between rounds never lets the lease run out.
  const s = await cell.hold();
  const renew = stringifyExact({ schema: 'svc.rt-control.request.v1', operation: 'renew', session: s.session, generation: s.generation });
  // The bare server answers with a reply of the size the service's renewal reply has.
  const sample = await request('http://localhost/v1/control', { method: 'POST', dispatcher: new Agent({ connect: { socketPath: stack.ready.control } }), body: renew, headers: { 'content-type': 'application/json' } });
  const reply = Buffer.from(await sample.body.arrayBuffer());
  // A process of its own, like the stack, so neither shares the load generator's event loop.
  const bare = spawn(process.execPath, ['-e', BARE_SERVER, bareSock, reply.toString('base64')], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    bare.stdout!.once('data', () => resolve());
    bare.once('exit', (code) => reject(new Error(`bare server exited ${code}`)));
  });

  console.log(`control round trip: ${REQUESTS} renewals over ${CONNECTIONS} connections, ${ROUNDS} alternating rounds; reply ${reply.length} bytes`);
  console.log('round  target   p50_us   p99_us   per_s');
  const ratios: Array<{ p50: number; tput: number }> = [];
  for (let k = 0; k < ROUNDS; k++) {
    const b = await load(bareSock, () => renew);
    const c = await load(stack.ready.control, () => renew);
    for (const [name, f] of [['bare', b], ['service', c]] as const) console.log(`${String(k + 1).padStart(5)}  ${name.padEnd(7)} ${f.p50.toFixed(0).padStart(7)} ${f.p99.toFixed(0).padStart(8)} ${f.perSecond.toFixed(0).padStart(7)}`);
    ratios.push({ p50: c.p50 / b.p50, tput: c.perSecond / b.perSecond });
  }
  const med = (xs: number[]) => quantile(xs, 0.5);
  console.log(`ratio service/bare: p50 ${med(ratios.map((r) => r.p50)).toFixed(2)}x (goal <= 1.3x), throughput ${med(ratios.map((r) => r.tput)).toFixed(2)}x (goal >= 0.8x) [median of ${ROUNDS} rounds]`);
  await cell.cleanup();
  await client.close();
  bare.kill();
} finally {
  await stack.stop();
  await rm(dir, { recursive: true, force: true });
}
