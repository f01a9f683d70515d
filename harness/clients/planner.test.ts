// The planner client's one retry (harness/clients/planner.ts raw): a request whose connection closed before
// any of its reply came is sent once more on a fresh connection, never a third time, and never when part of
// the reply had come. Against fake planners on loopback that close connections on purpose.

import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import { PlannerClient } from './planner.ts';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

/** A fake planner: `answer(n, socket)` is called with the connection's number once its request's headers are in. */
async function fake(answer: (n: number, socket: Socket) => void): Promise<{ url: string; connections: () => number }> {
  let n = 0;
  const server = createServer((socket) => {
    const k = ++n;
    let head = '';
    socket.setEncoding('latin1').on('data', (d: string) => {
      if (head.includes('\r\n\r\n')) return;
      head += d;
      if (head.includes('\r\n\r\n')) answer(k, socket);
    });
    socket.on('error', () => undefined);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, connections: () => n };
}

const HEALTH = '{"cuda":false,"device":null}';
const OK = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${HEALTH.length}\r\nConnection: close\r\n\r\n${HEALTH}`;

test('a connection closed before any reply is tried once more on a fresh one, and the answer there is the reply', async () => {
  const f = await fake((n, s) => (n === 1 ? s.destroy() : s.end(OK)));
  const c = new PlannerClient(f.url);
  try {
    const r = await c.health();
    expect([r.status, r.json]).toEqual([200, { cuda: false, device: null }]);
    expect(f.connections()).toBe(2);
  } finally {
    await c.close();
  }
});

test('a planner that closes every connection before replying fails the request after the second try, with both errors', async () => {
  const f = await fake((_, s) => s.destroy());
  const c = new PlannerClient(f.url);
  try {
    await expect(c.plan(new Uint8Array([1, 2, 3]))).rejects.toThrow(/closed the connection before any reply, twice/);
    expect(f.connections()).toBe(2);
  } finally {
    await c.close();
  }
});

test('a reply cut short after its status line is the planner\'s: not sent again', async () => {
  const f = await fake((_, s) => {
    s.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"cuda":');
    setTimeout(() => s.destroy(), 20);
  });
  const c = new PlannerClient(f.url);
  try {
    await expect(c.health()).rejects.toThrow();
    expect(f.connections()).toBe(1);
  } finally {
    await c.close();
  }
});
