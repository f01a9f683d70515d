// Peak RSS above idle of the service process while it admits and decodes a maximum prepare_trajectory
// upload (222516384 bytes, 250000 nine-axis points) through uploadBody, against the body size
// (goal: <= 1.0x). The server runs in a child process (upload-rss-server.ts) so the body this
// script generates and sends does not count; the body is generated on the fly, never held whole.
// Also printed: the server's event-loop delay during the upload (observations must keep answering).
//
//   node --import tsx bench/upload-rss.bench.ts [--baseline]
//
// --baseline also runs the same upload against a server that gathers the body and JSON.parses it.

import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { createInterface } from 'node:readline';
import { envelopeText, pointText, samplePoint } from '../sims/service/upload/bodies.ts';

const TARGET = 222_516_384; // document 1 part 8
const POINTS = 250_000;

/** The body in pieces: points padded with whitespace (valid JSON) so the total is exactly TARGET bytes. */
function* bodyPieces(): Generator<Buffer> {
  const head = envelopeText() + ',"points":[';
  const texts = (n: number) => (n ? ',' : '') + pointText(samplePoint(n));
  let plain = head.length + 2;
  for (let n = 0; n < POINTS; n++) plain += texts(n).length;
  const spare = TARGET - plain;
  if (spare < 0) throw new Error('points alone exceed the target');
  const per = Math.floor(spare / POINTS);
  const rest = spare - per * POINTS;
  const pad = ' '.repeat(per);
  yield Buffer.from(head, 'latin1');
  let batch: string[] = [];
  for (let n = 0; n < POINTS; n++) {
    batch.push(pad + texts(n));
    if (batch.length === 500) {
      yield Buffer.from(batch.join(''), 'latin1');
      batch = [];
    }
  }
  yield Buffer.from(batch.join('') + ' '.repeat(rest) + ']}', 'latin1');
}

interface Figures {
  mode: string;
  idle: number;
  peak: number;
  bytes: number;
  seconds: number;
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  outcome?: string;
  count?: number;
  blockedMs?: number;
}

async function run(mode: string): Promise<Figures> {
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', new URL('./upload-rss-server.ts', import.meta.url).pathname, mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! });
  const it = lines[Symbol.asyncIterator]();
  const first = (await it.next()).value as string;
  const port = Number(/^port (\d+)$/.exec(first)![1]);
  const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/control', headers: { 'content-length': TARGET, 'content-type': 'application/json' } });
  req.on('response', (res) => res.resume());
  let sent = 0;
  for (const piece of bodyPieces()) {
    sent += piece.length;
    if (!req.write(piece)) await new Promise((r) => req.once('drain', r));
  }
  req.end();
  if (sent !== TARGET) throw new Error(`sent ${sent} bytes`);
  const result = JSON.parse((await it.next()).value as string) as Figures;
  await new Promise((r) => child.once('exit', r));
  return result;
}

const MB = (b: number) => `${(b / 1e6).toFixed(1)} MB`;
function report(f: Figures): void {
  const above = f.peak - f.idle;
  console.log(
    `${f.mode.padEnd(7)} body ${MB(f.bytes)}  idle RSS ${MB(f.idle)}  peak RSS ${MB(f.peak)}  peak above idle ${MB(above)}  ` +
      `ratio to body ${(above / f.bytes).toFixed(2)}x${f.mode === 'stream' ? ' (goal <= 1.0x)' : ''}  ` +
      `${f.seconds.toFixed(1)} s  ` +
      (f.blockedMs !== undefined
        ? `main loop blocked ${f.blockedMs.toFixed(0)} ms by JSON.parse  `
        : `main loop delay p99 ${f.loopDelayP99Ms.toFixed(1)} ms max ${f.loopDelayMaxMs.toFixed(1)} ms  `) +
      `${f.outcome ? `outcome ${f.outcome} ` : ''}points ${f.count}`,
  );
}

report(await run('stream'));
if (process.argv.includes('--baseline')) report(await run('json'));
