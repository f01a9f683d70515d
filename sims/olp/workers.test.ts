// The worker bridge's pieces that the suites cannot reach through a server: frame splitting across
// chunks and the oversize bound, and a worker command that cannot be started at all (unavailable).

import { describe, expect, test } from 'vitest';
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
