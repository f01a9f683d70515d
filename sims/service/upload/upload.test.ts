// uploadBody (index.ts) over a real loopback HTTP server: admission before the rest is read, streaming
// through the warm worker, the body limit, refusals, and a client that goes away mid-upload.

import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, test } from 'vitest';
import { refuse } from '../envelope.ts';
import { SCHEMA, SESSION, enc, envelopeText, pointText, samplePoint, sampleBody } from './bodies.ts';
import { BatchPool, uploadBody, UploadWorker, type UploadOptions, type UploadOutcome } from './index.ts';
import type { AdmittedPrefix } from './prefix.ts';
import { pointsArraysDigest } from './decoder.ts';
import { REQUEST_PREFIX_BYTES } from '../../primitives.ts';
import { PLAN_ARENA_MIN_BYTES, PlanArena } from '../../core/plan-arena.ts';

const worker = new UploadWorker();
afterAll(() => worker.close());

interface Observed {
  outcome: Promise<UploadOutcome>;
  admitted: AdmittedPrefix[];
  /** Bytes the server had taken from the socket when admit ran. */
  readAtAdmit: number[];
  released: number;
}

/** A server whose one request goes through uploadBody; replies with the outcome's kind and label. */
async function serve(o: Partial<UploadOptions> & { admitGate?: Promise<void> } = {}): Promise<{ port: number; seen: Observed; server: Server }> {
  let resolveOutcome!: (o: UploadOutcome) => void;
  const seen: Observed = { outcome: new Promise((r) => (resolveOutcome = r)), admitted: [], readAtAdmit: [], released: 0 };
  const server = createServer((req, res) => {
    void uploadBody(req, {
      axes: 9,
      worker,
      ...o,
      admit: async (prefix) => {
        seen.admitted.push(prefix);
        seen.readAtAdmit.push(req.socket.bytesRead);
        if (o.admitGate) await o.admitGate;
        await o.admit?.(prefix);
      },
      release: () => seen.released++,
    }).then((out) => {
      resolveOutcome(out);
      const status = out.kind === 'refused' ? out.refusal.status : 200;
      const body = JSON.stringify({ kind: out.kind, label: out.kind === 'refused' ? out.refusal.label : undefined });
      if (!res.destroyed) res.writeHead(status, { 'content-type': 'application/json', connection: 'close' }).end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, seen, server };
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((r) => server.close(() => r()));
}

/** Send `parts` one after another (awaiting `between[i]` before part i+1); resolve with the reply. */
function send(
  port: number,
  parts: Uint8Array[],
  o: { contentLength?: number; between?: Array<(() => Promise<void>) | undefined>; destroyAfter?: number } = {},
): Promise<{ status: number; body: string } | 'destroyed'> {
  return new Promise((resolve) => {
    const headers: Record<string, string | number> = { 'content-type': 'application/json' };
    if (o.contentLength !== undefined) headers['content-length'] = o.contentLength;
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/control', headers });
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', () => resolve('destroyed'));
    void (async () => {
      for (let i = 0; i < parts.length; i++) {
        if (o.destroyAfter === i) {
          req.destroy();
          resolve('destroyed');
          return;
        }
        if (!req.write(parts[i])) await new Promise((r) => req.once('drain', r));
        await o.between?.[i]?.();
      }
      req.end();
    })();
  });
}

function split(b: Uint8Array, size: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let o = 0; o < b.length; o += size) out.push(b.subarray(o, Math.min(b.length, o + size)));
  return out;
}

test('a started upload worker holds no reference to the process: a stack host\'s session that started it left nothing running (sims/sessions.ts)', async () => {
  const { leftBehind } = await import('../../sessions.ts');
  const own = new UploadWorker();
  const before = process.getActiveResourcesInfo();
  try {
    expect(await own.inspect()).toEqual({ active: 0, heldBytes: 0 });
    expect(leftBehind(before)).toEqual([]);
  } finally {
    await own.close();
  }
});

describe('uploadBody', () => {
  test('a large body: admit runs on the prefix before the rest is sent, then the worker decodes it exactly', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const { port, seen, server } = await serve({ admitGate: gate });
    try {
      const body = sampleBody(20_000); // about 8 MB
      const first = body.subarray(0, 20_000);
      const sending = send(port, [first, ...split(body.subarray(20_000), 256 * 1024)], {
        contentLength: body.length,
        between: [
          async () => {
            // The client holds the rest back until the service admitted the prefix.
            while (seen.admitted.length === 0) await new Promise((r) => setTimeout(r, 5));
            open();
          },
        ],
      });
      const reply = await sending;
      expect(reply).toEqual({ status: 200, body: '{"kind":"trajectory"}' });
      expect(seen.admitted.length).toBe(1);
      expect(seen.readAtAdmit[0]).toBeLessThan(20_000 + 1024); // the headers and the first part only
      expect(seen.admitted[0]!.envelope).toMatchObject({ schema: SCHEMA, session: SESSION, generation: 7n });
      const out = await seen.outcome;
      if (out.kind !== 'trajectory') throw new Error(out.kind);
      const p = out.body.points;
      expect(p.count).toBe(20_000);
      for (const n of [0, 4999, 19_999]) {
        const ref = JSON.parse(pointText(samplePoint(n))) as { position: number[]; velocity: number[] };
        expect([...p.position.subarray(n * 9, n * 9 + 9)]).toEqual(ref.position);
        expect([...p.velocity.subarray(n * 9, n * 9 + 9)]).toEqual(ref.velocity);
        expect(p.timeNs[n]).toBe(BigInt(n * 1_000_000));
      }
      expect(seen.released).toBe(0);
      expect(await worker.inspect()).toEqual({ active: 0, heldBytes: 0 });
    } finally {
      await close(server);
    }
  });

  test('with a plan arena, a large upload is decoded into a free slot (views of it, held by the lease); a small one, a refused one, and one with no slot free are not', async () => {
    const arena = PlanArena.create(9, { slots: 1 });
    const upload = async (body: Uint8Array, o: { contentLength?: number } = { contentLength: body.length }) => {
      const { port, seen, server } = await serve({ arena: () => arena });
      try {
        await send(port, split(body, 256 * 1024), o);
        return await seen.outcome;
      } finally {
        await close(server);
      }
    };
    const large = sampleBody(5000); // about 2 MB
    expect(large.length).toBeGreaterThan(PLAN_ARENA_MIN_BYTES);
    const out = await upload(large);
    if (out.kind !== 'trajectory') throw new Error(out.kind);
    const p = out.body.points;
    expect(p.lease?.slot).toBe(0);
    expect(arena.state(0)).toBe('held');
    expect(p.position.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(p.workspace!.q.buffer).toBeInstanceOf(SharedArrayBuffer);
    const ref = JSON.parse(pointText(samplePoint(4999))) as { position: number[]; velocity: number[] };
    expect([...p.position.subarray(4999 * 9, 5000 * 9)]).toEqual(ref.position);
    expect([...p.velocity.subarray(4999 * 9, 5000 * 9)]).toEqual(ref.velocity);
    // No slot free: the next large upload decodes into arrays of its own, as before the arena.
    const second = await upload(large);
    if (second.kind !== 'trajectory') throw new Error(second.kind);
    expect(second.body.points.lease).toBeUndefined();
    expect(second.body.points.position.buffer).toBeInstanceOf(ArrayBuffer);
    p.lease!.release();
    expect(arena.free).toBe(1);
    // Declared small: arrays of its own, the slot stays free.
    const small = await upload(sampleBody(100));
    expect(small.kind === 'trajectory' && small.body.points.lease).toBeUndefined();
    expect(arena.free).toBe(1);
    // Refused at the end of the decode (a point without a position): the slot comes back with the refusal.
    const broken = Buffer.concat([large.subarray(0, large.length - 2), Buffer.from(',{"time_ns":1}]}')]);
    const refused = await upload(broken);
    expect(refused.kind === 'refused' && refused.refusal.label).toBe('invalid_request_envelope');
    expect(arena.free).toBe(1);
    // No Content-Length (chunked): a slot is used, since the size is unknown until the end.
    const chunked = await upload(large, {});
    if (chunked.kind !== 'trajectory') throw new Error(chunked.kind);
    expect(chunked.body.points.lease?.slot).toBe(0);
    chunked.body.points.lease!.release();
    expect(await worker.inspect()).toEqual({ active: 0, heldBytes: 0 });
    // Over the limit while streaming: refused at once, the slot given back once the worker has read the abort.
    const { port, seen, server } = await serve({ arena: () => arena, limit: large.length - 1 });
    try {
      expect(await send(port, split(large, 64 * 1024))).toEqual({ status: 413, body: '{"kind":"refused","label":"body_too_large"}' });
      await seen.outcome;
      expect(await worker.inspect()).toEqual({ active: 0, heldBytes: 0 });
      expect(arena.free).toBe(1);
    } finally {
      await close(server);
    }
  });

  test('a small body is decoded in place; chunked transfer (no Content-Length) works', async () => {
    const { port, seen, server } = await serve({ axes: 2 });
    try {
      const text = envelopeText() + ',"points":[{"time_ns":0,"position":[1,2]},{"time_ns":5,"position":[3,4],"io_mask":1}]}';
      expect(await send(port, split(enc(text), 10))).toEqual({ status: 200, body: '{"kind":"trajectory"}' });
      const out = await seen.outcome;
      if (out.kind !== 'trajectory') throw new Error(out.kind);
      expect([...out.body.points.position]).toEqual([1, 2, 3, 4]);
      expect(out.body.request.axis_mask).toBe(511);
    } finally {
      await close(server);
    }
  });

  test('admit refuses (busy): the refusal is the outcome, release is not called, the rest is not decoded', async () => {
    const { port, seen, server } = await serve({ admit: () => Promise.reject(refuse('busy', 'an upload is in progress')) });
    try {
      const body = sampleBody(5000);
      const reply = await send(port, [body.subarray(0, 20_000)], { contentLength: body.length });
      expect(reply).toEqual({ status: 409, body: '{"kind":"refused","label":"busy"}' });
      const out = await seen.outcome;
      expect(out.kind === 'refused' && [out.admitted, out.refusal.operation]).toEqual([false, 'prepare_trajectory']);
      expect(seen.released).toBe(0);
      expect(worker.waiting).toBe(0);
    } finally {
      await close(server);
    }
  });

  test('Content-Length above the limit: 413 body_too_large before anything is read or admitted', async () => {
    const { port, seen, server } = await serve({ limit: 100_000 });
    try {
      const reply = await send(port, [enc(envelopeText())], { contentLength: 100_001 });
      expect(reply).toEqual({ status: 413, body: '{"kind":"refused","label":"body_too_large"}' });
      expect(seen.admitted.length).toBe(0);
    } finally {
      await close(server);
    }
  });

  test('a chunked body one byte over the limit: 413 after admission; the slot is released and the worker holds nothing', async () => {
    const { port, seen, server } = await serve({ limit: 100_000 });
    try {
      const body = sampleBody(1000).subarray(0, 100_001);
      const reply = await send(port, split(body, 4096));
      expect(reply).toEqual({ status: 413, body: '{"kind":"refused","label":"body_too_large"}' });
      const out = await seen.outcome;
      expect(out.kind === 'refused' && out.admitted).toBe(true);
      expect(seen.released).toBe(1);
      expect(await worker.inspect()).toEqual({ active: 0, heldBytes: 0 });
    } finally {
      await close(server);
    }
  });

  test('the batches the worker hands back carry the next uploads, and every value decodes as sent', async () => {
    const body = (from: number, count: number) =>
      Buffer.from(envelopeText() + ',"points":[' + Array.from({ length: count }, (_, n) => (n ? ',' : '') + pointText({ ...samplePoint(from + n), time_ns: n * 1_000_000 })).join('') + ']}', 'latin1');
    const decode = async (b: Buffer) => {
      const { port, seen, server } = await serve({ limit: b.length });
      try {
        expect(await send(port, split(b, 65536))).toEqual({ status: 200, body: '{"kind":"trajectory"}' });
        const out = await seen.outcome;
        if (out.kind !== 'trajectory') throw new Error(out.kind);
        return out.body.points;
      } finally {
        await close(server);
      }
    };
    const expectPoints = (p: { position: Float64Array; count: number }, from: number, count: number) => {
      expect(p.count).toBe(count);
      const want = new Float64Array(count * 9);
      for (let n = 0; n < count; n++) want.set(samplePoint(from + n).position, n * 9);
      expect(Buffer.from(p.position.buffer, p.position.byteOffset, p.position.byteLength).equals(Buffer.from(want.buffer))).toBe(true);
    };
    const first = body(0, 9000); // about 3.7 MB: three whole batches and a part
    expectPoints(await decode(first), 0, 9000);
    const kept = worker.batches.size;
    expect(kept).toBeGreaterThanOrEqual(3);
    // The next upload takes those batches (holding the first body's bytes) and must decode only its own.
    expectPoints(await decode(body(777, 8000)), 777, 8000);
    expect(worker.batches.size).toBeGreaterThanOrEqual(kept);
    // Velocities travel only when a point has one (core protocol.ts PlanArrays): given on every point here,
    // on none of these.
    const withV = await decode(body(0, 4000));
    expect(withV.velocity.length).toBe(4000 * 9);
    expect(withV.velocity[9 * 17 + 4]).toBe(samplePoint(17).velocity![4]);
    const bare = Buffer.from(envelopeText() + ',"points":[' + Array.from({ length: 4000 }, (_, n) => (n ? ',' : '') + pointText({ time_ns: n * 1_000_000, position: samplePoint(n).position })).join('') + ']}', 'latin1');
    const noV = await decode(bare);
    // With a request_id the key is hashed in the worker, over the arrays the main loop receives.
    const keyed = await decode(Buffer.from(envelopeText(',"request_id":"r-1"') + bare.toString('latin1').slice(envelopeText().length), 'latin1'));
    expect(keyed.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(keyed.digest).toBe(pointsArraysDigest({ ...keyed, digest: undefined }));
    expect(keyed.digest).not.toBe(pointsArraysDigest({ ...withV, digest: undefined }));
    expect([noV.count, noV.velocity.length, noV.hasVelocity.includes(1)]).toEqual([4000, 0, false]);
    expectPoints(noV, 0, 4000);
    // The pool itself: a whole batch given back is the next one taken; any other size is not kept.
    const pool = new BatchPool();
    const whole = new ArrayBuffer(1024 * 1024);
    pool.give(new ArrayBuffer(4096));
    pool.give(whole);
    expect(pool.size).toBe(1);
    expect(pool.take().buffer).toBe(whole);
    expect(pool.take().byteLength).toBe(1024 * 1024);
    for (let k = 0; k < BatchPool.KEEP + 3; k++) pool.give(new ArrayBuffer(1024 * 1024));
    expect(pool.size).toBe(BatchPool.KEEP);
  });

  test('exactly at the limit the body is read to its end (and decoded)', async () => {
    const body = sampleBody(300);
    const { port, seen, server } = await serve({ limit: body.length });
    try {
      expect(await send(port, split(body, 8192))).toEqual({ status: 200, body: '{"kind":"trajectory"}' });
      const out = await seen.outcome;
      expect(out.kind === 'trajectory' && out.body.points.count).toBe(300);
      // The plan's memory comes with it, of the plan's sizes, written (so faulted in) off the core thread.
      const p = out.kind === 'trajectory' ? out.body.points : undefined;
      const ws = p?.workspace;
      expect([ws?.t.length, ws?.q.length, ws?.qd.length]).toEqual([300, 300 * p!.axes, 300 * p!.axes]);
      expect(new Set([ws!.t.buffer, ws!.q.buffer, ws!.qd.buffer, p!.position.buffer]).size).toBe(4);
      // No request_id: no key to hash (the service asks for one only with a request_id).
      expect(p!.digest).toBeUndefined();
    } finally {
      await close(server);
    }
  });

  test('a JSON error in the streamed part: refused with its label as soon as the worker meets it; slot released', async () => {
    const { port, seen, server } = await serve();
    try {
      const body = Buffer.from(sampleBody(3000));
      body[100_000] = 0x7d; // "}" in the middle of the points
      const reply = await send(port, split(body, 65536), { contentLength: body.length });
      expect(reply).toEqual({ status: 409, body: '{"kind":"refused","label":"invalid_request_envelope"}' });
      expect(seen.released).toBe(1);
      expect(await worker.inspect()).toEqual({ active: 0, heldBytes: 0 });
    } finally {
      await close(server);
    }
  });

  test('a client that disconnects mid-upload: aborted, the slot is released once, nothing is left in the worker', async () => {
    const { port, seen, server } = await serve();
    try {
      const body = sampleBody(20_000);
      const parts = split(body, 512 * 1024);
      const reply = await send(port, parts, { contentLength: body.length, destroyAfter: 6 });
      expect(reply).toBe('destroyed');
      const out = await seen.outcome;
      expect(out).toEqual({ kind: 'aborted', admitted: true });
      expect(seen.released).toBe(1);
      expect(worker.waiting).toBe(0);
      expect(await worker.inspect()).toEqual({ active: 0, heldBytes: 0 });
    } finally {
      await close(server);
    }
  });

  test('a client that disconnects while admit is pending: aborted once admit returns; the slot is released', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const { port, seen, server } = await serve({ admitGate: gate });
    try {
      const body = sampleBody(2000);
      const sending = send(port, [body.subarray(0, 30_000), body.subarray(30_000)], {
        contentLength: body.length,
        destroyAfter: 1,
        between: [
          async () => {
            while (seen.admitted.length === 0) await new Promise((r) => setTimeout(r, 5));
          },
        ],
      });
      expect(await sending).toBe('destroyed');
      await new Promise((r) => setTimeout(r, 50));
      open();
      expect(await seen.outcome).toEqual({ kind: 'aborted', admitted: true });
      expect(seen.released).toBe(1);
      expect(await worker.inspect()).toEqual({ active: 0, heldBytes: 0 });
    } finally {
      await close(server);
    }
  });

  test('an ordinary command is handed back as bytes; a different operation over 16384 bytes is 413', async () => {
    const stop = enc(`{"schema":"${SCHEMA}","operation":"stop","session":"${SESSION}","generation":7}`);
    let s = await serve();
    try {
      expect(await send(s.port, [stop])).toEqual({ status: 200, body: '{"kind":"ordinary"}' });
      const out = await s.seen.outcome;
      expect(out.kind === 'ordinary' && Buffer.from(out.body).equals(Buffer.from(stop))).toBe(true);
    } finally {
      await close(s.server);
    }
    s = await serve();
    try {
      const big = enc(`{"schema":"${SCHEMA}","operation":"stop","label":"${'x'.repeat(REQUEST_PREFIX_BYTES)}"}`);
      expect(await send(s.port, [big])).toEqual({ status: 413, body: '{"kind":"refused","label":"body_too_large"}' });
      expect(s.seen.admitted.length).toBe(0);
    } finally {
      await close(s.server);
    }
  });

  test('a small prepare_trajectory body with its operation after points: refused, not handed back as ordinary', async () => {
    const { port, seen, server } = await serve({ axes: 1 });
    try {
      const text = `{"schema":"${SCHEMA}","session":"${SESSION}","generation":7,"axis_mask":1,"points":[{"time_ns":0,"position":[1]}],"operation":"prepare_trajectory"}`;
      expect(await send(port, [enc(text)])).toEqual({ status: 409, body: '{"kind":"refused","label":"invalid_request_envelope"}' });
      const out = await seen.outcome;
      expect(out.kind === 'refused' && (out.refusal as { code?: string }).code).toBe('fence_outside_prefix');
      expect(seen.admitted.length).toBe(0);
    } finally {
      await close(server);
    }
  });

  test('fence fields past the prefix: refused without admission', async () => {
    const { port, seen, server } = await serve();
    try {
      const text = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","label":"${'x'.repeat(REQUEST_PREFIX_BYTES)}","session":"${SESSION}","generation":7,"points":[]}`;
      expect(await send(port, split(enc(text), 4096))).toEqual({ status: 409, body: '{"kind":"refused","label":"invalid_request_envelope"}' });
      expect(seen.admitted.length).toBe(0);
    } finally {
      await close(server);
    }
  });
});
