// The reply watch on real loopback sockets and a clock of the test's own: a reply the client stops
// reading is closed exactly when the bound has passed since it last moved, not a check before; reading
// moves it again; a reply that ends is no longer watched.

import { EventEmitter, once } from 'node:events';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { ReplyWatch } from './reply-watch.ts';

const BIG = Buffer.alloc(32 * 1024 * 1024, 7);
let server: Server | undefined;
/** Bytes of `s` that libuv still holds for the kernel (what the watch reads). */
const queued = (s: Socket): number => (s as unknown as { _handle: { writeQueueSize: number } })._handle.writeQueueSize;
const clients: Socket[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  if (server) await new Promise((r) => server!.close(r));
  server = undefined;
});

/** A server socket writing 32 MiB to a client that reads nothing; resolves once the write is stuck. */
async function stuckReply(): Promise<{ s: Socket; client: Socket }> {
  const accepted = new Promise<Socket>((resolve) => {
    server = createServer((s) => {
      s.on('error', () => undefined);
      resolve(s);
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const port = (server!.address() as { port: number }).port;
  const client = connect({ host: '127.0.0.1', port });
  client.on('error', () => undefined);
  client.pause();
  clients.push(client);
  const s = await accepted;
  s.write(BIG);
  // Stuck when libuv's queue stops shrinking: the kernel's buffers are full.
  let last = -1;
  for (let i = 0; i < 200 && queued(s) !== last; i++) {
    last = queued(s);
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(queued(s), 'the reply waits in the write queue').toBeGreaterThan(0);
  return { s, client };
}

test('a stuck reply is closed when the bound has passed since it last moved, not one check before', async () => {
  const { s } = await stuckReply();
  let now = 0;
  const closed: number[] = [];
  const w = new ReplyWatch(65_000, 250, (_s, ms) => closed.push(ms), () => now);
  const reply = new EventEmitter();
  w.watch(s, undefined, reply);
  now = 64_999;
  w.check();
  expect(s.destroyed).toBe(false);
  expect(closed).toEqual([]);
  now = 65_000;
  w.check();
  expect(closed).toEqual([65_000]);
  expect(s.destroyed).toBe(true);
  expect(w.size).toBe(0);
  w.stop();
});

test('a reply that moves is not closed: reading starts the bound again', async () => {
  const { s, client } = await stuckReply();
  let now = 0;
  const closed: number[] = [];
  const w = new ReplyWatch(65_000, 250, (_s, ms) => closed.push(ms), () => now);
  w.watch(s, undefined, new EventEmitter());
  now = 60_000;
  w.check();
  // The client reads a little: the write queue shrinks.
  const before = queued(s);
  client.resume();
  for (let i = 0; i < 200 && queued(s) === before; i++) await new Promise((r) => setTimeout(r, 5));
  client.pause();
  expect(queued(s)).toBeLessThan(before);
  now = 70_000;
  w.check(); // moved since the last look: the bound starts again at 70 s
  expect(closed).toEqual([]);
  now = 134_999;
  w.check();
  expect(s.destroyed).toBe(false);
  now = 135_000;
  w.check();
  expect(closed).toEqual([65_000]);
  w.stop();
});

test('a reply that closes is no longer watched, and the interval ends with the last one', async () => {
  const { s } = await stuckReply();
  let now = 0;
  const w = new ReplyWatch(1_000, 250, () => undefined, () => now);
  const reply = new EventEmitter();
  w.watch(s, undefined, reply);
  expect(w.size).toBe(1);
  reply.emit('close');
  expect(w.size).toBe(0);
  now = 5_000;
  w.check();
  expect(s.destroyed).toBe(false);
  // The connection going away forgets it too.
  w.watch(s, undefined, new EventEmitter());
  s.destroy();
  await once(s, 'close');
  expect(w.size).toBe(0);
  w.stop();
});

test('bytes the service keeps adding to a reply nobody reads are no progress: the connection is still closed', async () => {
  const { s } = await stuckReply();
  let now = 0;
  const closed: number[] = [];
  const w = new ReplyWatch(65_000, 250, (_s, ms) => closed.push(ms), () => now);
  w.watch(s, undefined, new EventEmitter());
  // A stream's keep-alive every 15 s: written, never taken.
  for (now = 15_000; now < 65_000; now += 15_000) {
    s.write(': keepalive\n');
    w.check();
  }
  now = 65_000;
  w.check();
  expect(closed).toEqual([65_000]);
  expect(s.destroyed).toBe(true);
  w.stop();
});

test('a kept-alive connection answering many requests gets one close listener, not one per request', async () => {
  const { s } = await stuckReply();
  const w = new ReplyWatch(65_000, 250, () => undefined, () => 0);
  const before = s.listenerCount('close');
  for (let i = 0; i < 20; i++) {
    const reply = new EventEmitter();
    w.watch(s, undefined, reply);
    reply.emit('close');
  }
  expect(s.listenerCount('close')).toBe(before + 1);
  expect(w.size).toBe(0);
  w.stop();
});
