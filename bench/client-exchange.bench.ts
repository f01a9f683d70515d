// The client side of one small HTTP exchange: harness/clients/exchange.ts (what the control client, the
// stepped clock's steps and the evidence reads use) against undici's request() + body.arrayBuffer() (what
// they used before), the same requests to the same server, alternating round by round. Printed: the
// client's CPU per exchange (process.cpuUsage, user + system) of each and the ratio, its median over the
// rounds. The server is a bare node:http server in a process of its own on a Unix socket answering a
// renewal-sized reply, so only the client's own work is counted. The first round is the cold one (a
// conformance worker's code is mostly not yet optimised). Nothing is asserted.
//
//   node --import tsx bench/client-exchange.bench.ts [exchanges] [rounds]

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { exchange } from '../harness/clients/exchange.ts';
import { median } from './baseline.ts';

const N = Number(process.argv[2] ?? 3000);
const ROUNDS = Number(process.argv[3] ?? 5);

const SERVER = `
const reply = Buffer.from(JSON.stringify({ schema: 'svc.rt-control.response.v1', operation: 'renew', ok: true, data: { session: 'a'.repeat(64), generation: 3, lease_ms: 500, deadline_host_ns: 123456789012345 } }));
require('node:http').createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': reply.length }).end(reply));
}).listen(process.argv[1], () => process.stdout.write('ready\\n'));
`;

const dir = mkdtempSync(join(tmpdir(), 'hil-exchange-bench-'));
const sock = join(dir, 's.sock');
const server = spawn(process.execPath, ['-e', SERVER, sock], { stdio: ['ignore', 'pipe', 'inherit'] });
try {
  await new Promise<void>((resolve, reject) => {
    server.stdout!.once('data', () => resolve());
    server.once('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
  const body = JSON.stringify({ schema: 'svc.rt-control.request.v1', operation: 'renew', session: 'a'.repeat(64), generation: 3 });
  const headers = { 'content-type': 'application/json' };
  const agent = new Agent({ connect: { socketPath: sock }, connections: 4, keepAliveTimeout: 4_000 });
  const baseline = async () => {
    const res = await request('http://localhost/v1/control', { method: 'POST', dispatcher: agent, body, headers });
    return new Uint8Array(await res.body.arrayBuffer()).length;
  };
  const candidate = async () => (await exchange(agent, 'http://localhost/v1/control', { method: 'POST', body, headers })).body.length;
  const cpuPer = async (f: () => Promise<number>) => {
    const c0 = process.cpuUsage();
    for (let i = 0; i < N; i++) await f();
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / N;
  };
  console.log(`client CPU per exchange, ${N} exchanges per round, ${ROUNDS} rounds (us)`);
  console.log('round  request()  exchange()  ratio');
  const ratios: number[] = [];
  for (let k = 0; k < ROUNDS; k++) {
    // Alternate which goes first, so neither always gets the warmer process.
    const [a, b] = k % 2 === 0 ? [await cpuPer(baseline), await cpuPer(candidate)] : (([y, x]) => [x, y])([await cpuPer(candidate), await cpuPer(baseline)]);
    ratios.push(b! / a!);
    console.log(`${String(k + 1).padStart(5)}  ${a!.toFixed(1).padStart(9)}  ${b!.toFixed(1).padStart(10)}  ${(b! / a!).toFixed(2)}x`);
  }
  console.log(`exchange() / request(): ${median(ratios).toFixed(2)}x (median of ${ROUNDS} rounds)`);
  await agent.close();
} finally {
  server.kill();
  rmSync(dir, { recursive: true, force: true });
}
