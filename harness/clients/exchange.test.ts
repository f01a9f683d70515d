// exchange() (harness/clients/exchange.ts) against undici's request() + body.arrayBuffer(), which it
// replaces in the harness's clients: for each server behaviour, the same status, headers and bytes, the same
// path on the wire, and the same undici error code when the reply breaks off.

import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Agent, request } from 'undici';
import { exchange } from './exchange.ts';

const dir = mkdtempSync(join(tmpdir(), 'hil-exchange-'));
const sock = join(dir, 's.sock');
let server: Server;
const seen: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      switch (req.url) {
        case '/early':
          res.writeEarlyHints({ link: '</x>; rel=preload' });
          res.writeHead(200, { 'content-type': 'text/plain' }).end('after hints');
          return;
        case '/chunks':
          res.writeHead(201, [['set-cookie', 'a=1'], ['set-cookie', 'b=2'], ['X-Mixed-Case', 'v'], ['content-type', 'application/json']]);
          res.write('{"part":');
          setTimeout(() => res.end(`${JSON.stringify(body)}}`), 5);
          return;
        case '/broken':
          res.writeHead(200, { 'content-length': '100' });
          res.write('only part');
          setTimeout(() => res.socket?.destroy(), 5);
          return;
        case '/empty':
          res.writeHead(204).end();
          return;
        default:
          res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ url: req.url, body }));
      }
    });
  });
  await new Promise<void>((r) => server.listen(sock, r));
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

async function viaRequest(agent: Agent, path: string, method: 'GET' | 'POST', body?: string) {
  const res = await request(`http://localhost${path}`, { method, dispatcher: agent, body, headers: body !== undefined ? { 'content-type': 'application/json' } : {} });
  return { status: res.statusCode, headers: res.headers, body: new Uint8Array(await res.body.arrayBuffer()) };
}

const codeOf = (p: Promise<unknown>) => p.then(() => 'resolved', (e: { code?: string }) => e.code ?? String(e));

test('the same status, parsed headers (repeated ones as arrays, 1xx skipped), bytes and path as request(); the body a Uint8Array of its own', async () => {
  const agent = new Agent({ connect: { socketPath: sock } });
  try {
    for (const [path, method, body] of [
      ['/chunks', 'POST', '{"x":1}'],
      ['/early', 'GET', undefined],
      ['/empty', 'GET', undefined],
      ['/a/../b/%7e?q=1&r=%20', 'GET', undefined],
      ['/x?', 'POST', ''],
    ] as const) {
      seen.length = 0;
      const a = await viaRequest(agent, path, method, body);
      const b = await exchange(agent, `http://localhost${path}`, { method, ...(body !== undefined ? { body, headers: { 'content-type': 'application/json' } } : {}) });
      expect(seen[0], path).toBe(seen[1]);
      // The path as undici's URL handling leaves it: dot segments resolved, escapes kept.
      if (path.startsWith('/a/')) expect(seen[1]).toBe('GET /b/%7e?q=1&r=%20');
      const strip = (h: Record<string, unknown>) => Object.fromEntries(Object.entries(h).filter(([k]) => k !== 'date'));
      expect({ status: b.status, headers: strip(b.headers), body: Buffer.from(b.body).toString() }, path).toEqual({ status: a.status, headers: strip(a.headers), body: Buffer.from(a.body).toString() });
      expect(Object.getPrototypeOf(b.body)).toBe(Uint8Array.prototype);
      expect(b.body.byteOffset === 0 && b.body.buffer.byteLength === b.body.length).toBe(true);
    }
  } finally {
    await agent.close();
  }
});

test('a reply cut short and a socket nobody listens on fail with the undici codes request() gives', async () => {
  const agent = new Agent({ connect: { socketPath: sock } });
  const none = new Agent({ connect: { socketPath: join(dir, 'none.sock') } });
  try {
    const broken = await codeOf(exchange(agent, 'http://localhost/broken', { method: 'GET' }));
    expect(broken).toBe(await codeOf(viaRequest(agent, '/broken', 'GET')));
    expect(broken).toMatch(/^UND_ERR_/);
    const refused = await codeOf(exchange(none, 'http://localhost/v1/status', { method: 'GET' }));
    expect(refused).toBe(await codeOf(viaRequest(none, '/v1/status', 'GET')));
    expect(refused).toBe('ENOENT');
    expect(await codeOf(exchange(agent, 'not a url', { method: 'GET' }))).toBe('ERR_INVALID_URL');
  } finally {
    await agent.close();
    await none.close();
  }
});
