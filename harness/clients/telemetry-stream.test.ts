// readStream (harness/clients/telemetry.ts) in its two reading modes against a stream served here: batches
// split by their headers whatever the HTTP chunks, each decoded by the oracle either as it arrives or, with
// decodeAfter, once the read has ended: the same batches, the same failures, arrival times taken as the
// bytes came either way.

import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { Agent } from 'undici';
import { encodeBatch, type RecordInput } from '../oracle/telemetry.ts';
import type { ControlClient } from './control.ts';
import { readStream } from './telemetry.ts';

const open: Array<{ server: Server; agent: Agent; dir: string }> = [];
afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.agent.close();
    await new Promise((r) => o.server.close(r));
    rmSync(o.dir, { recursive: true, force: true });
  }
});

const records = (from: bigint, n: number): RecordInput[] => Array.from({ length: n }, (_, k) => ({ seq: from + BigInt(k), cycle: from + BigInt(k), ax: [{ position: k }] }));
const batch = (from: bigint, n: number) => encodeBatch({ records: records(from, n) });

/**
 * A control socket of a stream: GET /v1/telemetry/stream answers 200 octet-stream and writes `chunks`, one
 * every 30 ms, then ends. A client whose agent reaches it.
 */
async function streaming(chunks: Uint8Array[]): Promise<ControlClient> {
  const dir = mkdtempSync(join(tmpdir(), 'hil-stream-'));
  const socketPath = join(dir, 'control.sock');
  const server = createServer((req, res) => {
    expect(req.url).toBe('/v1/telemetry/stream?after=40');
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    let k = 0;
    const next = () => {
      if (k === chunks.length) return res.end();
      res.write(chunks[k++]);
      setTimeout(next, 30);
    };
    next();
  });
  await new Promise<void>((r) => server.listen(socketPath, r));
  const agent = new Agent({ connect: { socketPath } });
  open.push({ server, agent, dir });
  return { agent } as unknown as ControlClient;
}

/** Three batches (2, 1 and 3 records from sequence 41), the second cut across two chunks with the third's first bytes. */
function threeBatches(): { chunks: Uint8Array[]; bytes: Uint8Array[] } {
  const bytes = [batch(41n, 2), batch(43n, 1), batch(44n, 3)];
  const tail = Buffer.concat([bytes[1]!, bytes[2]!]);
  const cut = 100;
  return { bytes, chunks: [bytes[0]!, tail.subarray(0, cut), tail.subarray(cut, bytes[1]!.length + 17), tail.subarray(bytes[1]!.length + 17)] };
}

test('as they arrive: until and onBatch see each batch decoded when it completes', async () => {
  const { chunks } = threeBatches();
  const seen: number[][] = [];
  const onBatch: bigint[] = [];
  const got = await readStream(await streaming(chunks), 40n, 5_000, {
    onBatch: (b) => onBatch.push(b.header.last_sequence),
    until: (bs) => (seen.push(bs.map((x) => x.batch.records.length)), false),
  });
  expect(got.status).toBe(200);
  expect(got.ended).toBe(true);
  expect(seen).toEqual([[2], [2, 1], [2, 1, 3]]);
  expect(onBatch).toEqual([42n, 43n, 46n]);
  expect(got.batches.map((b) => b.batch.records.map((r) => r.seq))).toEqual([[41n, 42n], [43n], [44n, 45n, 46n]]);
});

test('decodeAfter: until sees each checked header with no records yet; every batch is decoded once the read ends, onBatch in order, the arrival times kept', async () => {
  const { chunks } = threeBatches();
  const seen: Array<Array<[bigint, number]>> = [];
  const onBatch: bigint[] = [];
  const got = await readStream(await streaming(chunks), 40n, 5_000, {
    decodeAfter: true,
    onBatch: (b) => onBatch.push(b.header.last_sequence),
    until: (bs) => (seen.push(bs.map((x) => [x.batch.header.last_sequence, x.batch.records.length])), onBatch.length !== 0),
  });
  // Nothing decoded, and onBatch not called, while the stream was read.
  expect(seen).toEqual([[[42n, 0]], [[42n, 0], [43n, 0]], [[42n, 0], [43n, 0], [46n, 0]]]);
  expect(got.ended).toBe(true);
  expect(onBatch).toEqual([42n, 43n, 46n]);
  expect(got.batches.map((b) => b.batch.records.map((r) => r.seq))).toEqual([[41n, 42n], [43n], [44n, 45n, 46n]]);
  // Each batch's time is its arrival's: the chunks came 30 ms apart, the decoding after all of them.
  const at = got.batches.map((b) => b.at);
  expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(25);
  expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(25);
});

test('a batch whose header passes but whose records do not (a sequence out of order) fails the read in both modes, with the same label', async () => {
  const bad = encodeBatch({ header: { first_sequence: 43n, last_sequence: 44n }, records: [{ seq: 43n }, { seq: 45n }] });
  const chunks = [batch(41n, 2), bad];
  const errorOf = async (decodeAfter: boolean) => (await readStream(await streaming(chunks), 40n, 5_000, { decodeAfter }).then(() => undefined, (e: unknown) => e)) as { code?: string; detail?: { record?: number } } | undefined;
  const now = await errorOf(false);
  const after = await errorOf(true);
  expect(now?.code).toBe('telemetry_sequence');
  expect(after?.code).toBe('telemetry_sequence');
  // The same record named (the oracle's codes and evidence, never its wording: DESIGN.md).
  expect([now?.detail?.record, after?.detail?.record]).toEqual([1, 1]);
});
