// Child process of upload-rss.bench.ts: a loopback HTTP server that admits one prepare_trajectory upload
// through uploadBody (sims/service/upload) and reports its own memory and event-loop delay.
//
// Protocol on stdout: "port N" once listening; after the upload, one JSON line with the figures.

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { uploadBody, uploadWorker } from '../sims/service/upload/index.ts';

const mode = process.argv[2] ?? 'stream';

async function settle(): Promise<number> {
  for (let k = 0; k < 3; k++) {
    (globalThis as { gc?: () => void }).gc?.();
    await new Promise((r) => setTimeout(r, 50));
  }
  return process.memoryUsage().rss;
}

// Warm up: the worker thread exists before the idle figure is taken (it is kept warm in the service).
await uploadWorker().inspect();
const idle = await settle();
let peak = idle;
const sampler = setInterval(() => {
  const r = process.memoryUsage().rss;
  if (r > peak) peak = r;
}, 2);
const delay = monitorEventLoopDelay({ resolution: 10 });

const server = createServer((req, res) => {
  delay.enable();
  const t0 = process.hrtime.bigint();
  const done = (summary: Record<string, unknown>) => {
    delay.disable();
    clearInterval(sampler);
    const r = process.memoryUsage().rss;
    if (r > peak) peak = r;
    res.writeHead(200, { connection: 'close' }).end('ok');
    console.log(
      JSON.stringify({
        mode,
        idle,
        peak,
        bytes: Number(req.headers['content-length']),
        seconds: Number(process.hrtime.bigint() - t0) / 1e9,
        loopDelayP99Ms: delay.percentile(99) / 1e6,
        loopDelayMaxMs: delay.max / 1e6,
        ...summary,
      }),
    );
    server.close();
    void uploadWorker().close();
  };
  if (mode === 'json') {
    // Baseline: what the ordinary path would do with such a body: gather it, then JSON.parse it.
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const t = process.hrtime.bigint();
      const v = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { points: unknown[] };
      const blockedMs = Number(process.hrtime.bigint() - t) / 1e6;
      const r = process.memoryUsage().rss;
      if (r > peak) peak = r;
      done({ count: v.points.length, blockedMs });
    });
    return;
  }
  void uploadBody(req, { axes: 9, admit: () => undefined }).then((out) => {
    done({ outcome: out.kind, count: out.kind === 'trajectory' ? out.body.points.count : undefined, label: out.kind === 'refused' ? out.refusal.label : undefined });
  });
});
server.listen(0, '127.0.0.1', () => console.log(`port ${(server.address() as AddressInfo).port}`));
