// The worker bridge's pieces that the suites cannot reach through a server: frame splitting across
// chunks and the oversize bound, a worker command that cannot be started at all (unavailable), a worker
// the bridge killed (never reused), and the reference STEP worker's reply channel kept clean of what
// OpenCascade prints (docs/profile.md "OLP server: worker bridge").

import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { programArgs } from '../paths.ts';
import { OlpError } from './http.ts';
import { frame, FrameReader, WorkerPool } from './workers.ts';

describe('worker bridge', () => {
  test('frames split across chunks and several in one chunk come out whole; an oversize length stops the reader', () => {
    const got: string[] = [];
    let over = 0;
    const r = new FrameReader(16, (f) => got.push(f.toString()), (n) => (over = n));
    const bytes = Buffer.concat([frame('{"a":1}'), frame(''), frame('0123456789abcdef')]);
    for (let i = 0; i < bytes.length; i += 3) r.push(bytes.subarray(i, i + 3));
    expect(got).toEqual(['{"a":1}', '', '0123456789abcdef']);
    r.push(frame('0123456789abcdefg'));
    expect(over).toBe(17);
    r.push(frame('x'));
    expect(got.length).toBe(3);
  });

  test('a worker that ends before its ready frame is 503 unavailable', async () => {
    const pool = new WorkerPool({ label: 'seam', command: [process.execPath, '-e', 'process.exit(3)'], size: 1, timeoutMs: 5_000, log: () => undefined });
    const e = await pool.run('seam', Buffer.from('{}'), new AbortController().signal).catch((x: unknown) => x);
    expect([(e as OlpError).status, (e as OlpError).code]).toEqual([503, 'unavailable']);
    expect((e as OlpError).detail).toMatch(/ended before it was ready \(exit code 3\)/);
    pool.close();
  });

  test('a worker command that cannot be started is 503 unavailable, and the pool keeps no worker', async () => {
    const pool = new WorkerPool({ label: 'CAD', command: ['/nonexistent/hil-worker'], size: 1, timeoutMs: 5_000, log: () => undefined });
    const e = await pool.run('cadquery/topology', Buffer.from('{}'), new AbortController().signal).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OlpError);
    expect([(e as OlpError).status, (e as OlpError).code]).toEqual([503, 'unavailable']);
    expect(pool.pids()).toEqual([]);
    pool.close();
  });
});

// A worker that answers its first request with text on its reply channel (as OpenCascade printing
// "**** ERR StepFile" on standard output would) and stays alive, then answers every later request.
const STRAY_TEXT_WORKER = `
const frame = (v) => { const b = Buffer.from(JSON.stringify(v)); const h = Buffer.alloc(4); h.writeUInt32BE(b.length); process.stdout.write(Buffer.concat([h, b])); };
frame({ schema: 'offline-programming.worker.v1', ready: true, pid: process.pid, operations: ['*'] });
let buf = Buffer.alloc(0);
process.stdin.on('data', (c) => {
  buf = Buffer.concat([buf, c]);
  while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
    const req = JSON.parse(buf.subarray(4, 4 + buf.readUInt32BE(0)).toString());
    buf = buf.subarray(4 + buf.readUInt32BE(0));
    if (req.body.stray) process.stdout.write('**** ERR StepFile : Undefined Parsing ****\\n');
    else frame({ id: req.id, ok: true, result: { pid: process.pid }, part: 'none' });
  }
});
setInterval(() => undefined, 1000);
`;

describe('a worker the bridge killed', () => {
  test('is never handed the next request: the next request gets a fresh worker and its answer', async () => {
    const pool = new WorkerPool({ label: 'CAD', command: [process.execPath, '-e', STRAY_TEXT_WORKER], size: 1, timeoutMs: 20_000, log: () => undefined });
    try {
      const live = new AbortController().signal;
      const first = await pool.run('cadquery/topology', Buffer.from('{"stray":true}'), live).catch((x: unknown) => x);
      expect([(first as OlpError).status, (first as OlpError).code]).toEqual([502, 'invalid_response']);
      // "**** " read as a frame length is 707406378 bytes: the stray text, not a frame.
      expect((first as OlpError).detail).toContain('707406378');
      expect(pool.pids()).toEqual([]);
      const next = await pool.run('cadquery/topology', Buffer.from('{}'), live);
      expect(next.result).toEqual({ pid: next.pid });
      expect(pool.pids()).toEqual([next.pid]);
    } finally {
      pool.close();
    }
  });
});

describe('the reference STEP worker (hil olp worker) behind the bridge', () => {
  const FILLET = readFileSync(new URL('../../fixtures/step/fillet-joint.step', import.meta.url));
  const body = (step: Buffer) => Buffer.from(JSON.stringify({ operation: 'extract_topology', step_base64: step.toString('base64') }));

  test('malformed STEP files are refused 400 invalid_request on a clean reply channel, and the same worker then reads a valid file', async () => {
    const pool = new WorkerPool({ label: 'CAD', command: [process.execPath, ...programArgs('olp'), 'worker'], size: 1, timeoutMs: 60_000, log: () => undefined });
    try {
      const live = new AbortController().signal;
      const malformed: Array<[string, Buffer]> = [
        ['random bytes', Buffer.from(Array.from({ length: 4096 }, (_x, i) => (i * 2654435761) % 251))],
        ['a truncated fixture', FILLET.subarray(0, Math.floor(FILLET.length / 2))],
        ['text', Buffer.from('this is not a STEP file\n')],
      ];
      let pid: number | undefined;
      for (const [what, bytes] of malformed) {
        const e = await pool.run('cadquery/topology', body(bytes), live).then(
          (r) => r,
          (x: unknown) => x,
        );
        expect(e, what).toBeInstanceOf(OlpError);
        expect([(e as OlpError).status, (e as OlpError).code], `${what}: ${(e as OlpError).detail}`).toEqual([400, 'invalid_request']);
        pid ??= pool.pids()[0];
        expect(pool.pids(), what).toEqual([pid]);
      }
      const ok = await pool.run('cadquery/topology', body(FILLET), live);
      expect(ok.pid).toBe(pid);
      expect((ok.result as { solids: Array<{ id: string; faces: unknown[] }> }).solids.map((x) => [x.id, x.faces.length])).toEqual([['solid-0', 6], ['solid-1', 6]]);
    } finally {
      pool.close();
    }
  }, 120_000);
});
