// Unit tests of the remote listener's pure parts: the --remote-listen address and the certificate identity.

import { expect, test } from 'vitest';
import { createPair, issueClient } from '../../harness/certs.ts';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { X509Certificate } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { identityOf, parseListen, RemoteStartupError } from './remote.ts';

test('--remote-listen: host:port, defaults 127.0.0.1 and 8443 (document 1 part 1), bad values refused', () => {
  expect(parseListen('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
  expect(parseListen('10.0.0.7:9443')).toEqual({ host: '10.0.0.7', port: 9443 });
  expect(parseListen('127.0.0.1')).toEqual({ host: '127.0.0.1', port: 8443 });
  expect(parseListen(':8500')).toEqual({ host: '127.0.0.1', port: 8500 });
  expect(parseListen('[::1]:8443')).toEqual({ host: '::1', port: 8443 });
  for (const bad of ['127.0.0.1:65536', '127.0.0.1:x', 'a b:1', '127.0.0.1:123456']) expect(() => parseListen(bad), bad).toThrow(RemoteStartupError);
});

test('identity: exactly one svc-principal and one svc-pair URI, tokens, pair equal to --pair-id', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'remote-unit-'));
  try {
    await createPair({ dir, pairId: 'cell-a' });
    const raw = async (name: string, uris?: string[]) => {
      const c = await issueClient({ dir, principal: 'p-1', uris, name });
      return new X509Certificate(await readFile(c.cert)).raw;
    };
    expect(identityOf(await raw('ok'), 'cell-a')).toEqual({ principal: 'p-1' });
    expect(identityOf(await raw('ok2'), 'cell-b')).toEqual({ refused: 'svc-pair cell-a differs from --pair-id cell-b' });
    // Other URIs beside the two are ignored.
    expect(identityOf(await raw('extra', ['https://example.invalid/x', 'svc-principal:p-1', 'svc-pair:cell-a']), 'cell-a')).toEqual({ principal: 'p-1' });
    expect(identityOf(await raw('np', ['svc-pair:cell-a']), 'cell-a')).toMatchObject({ refused: expect.stringMatching(/0 svc-principal/) });
    expect(identityOf(await raw('tp', ['svc-principal:a', 'svc-principal:b', 'svc-pair:cell-a']), 'cell-a')).toMatchObject({ refused: expect.stringMatching(/2 svc-principal/) });
    expect(identityOf(await raw('nopair', ['svc-principal:a']), 'cell-a')).toMatchObject({ refused: expect.stringMatching(/0 svc-pair/) });
    expect(identityOf(await raw('tok', ['svc-principal:a/b', 'svc-pair:cell-a']), 'cell-a')).toMatchObject({ refused: expect.stringMatching(/not a token/) });
    expect(identityOf(await raw('empty', ['svc-principal:', 'svc-pair:cell-a']), 'cell-a')).toMatchObject({ refused: expect.stringMatching(/not a token/) });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a request a browser sends for a web page (Origin, or Sec-Fetch-Site other than none) is refused 403 cross_site_request before it is routed; the same request from a client is routed', { timeout: 30_000 }, async () => {
  const { request } = await import('node:https');
  const { RemoteListener } = await import('./remote.ts');
  const dir = await mkdtemp(join(tmpdir(), 'remote-browser-'));
  const routed: string[] = [];
  const upgraded: string[] = [];
  let listener: InstanceType<typeof RemoteListener> | undefined;
  try {
    const pair = await createPair({ dir, pairId: 'cell-a' });
    const client = await issueClient({ dir, principal: 'p-1' });
    listener = new RemoteListener({
      host: '127.0.0.1',
      port: 0,
      files: { ca: pair.ca, cert: pair.cert, key: pair.key, crl: pair.crl },
      pairId: 'cell-a',
      linkProfile: 'lan',
      log: () => {},
      handle: (req, res, principal) => {
        routed.push(`${req.method} ${req.url} ${principal}`);
        req.resume();
        res.end('routed\n');
      },
      upgrade: (req, socket, _head, principal) => {
        upgraded.push(`${req.url} ${principal}`);
        socket.end('HTTP/1.1 101 Switching Protocols\r\nConnection: close\r\n\r\n');
      },
    });
    const { port } = await listener.start();
    const [ca, cert, key] = await Promise.all([readFile(pair.ca), readFile(client.cert), readFile(client.key)]);
    const send = (method: string, path: string, headers: Record<string, string>) =>
      new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
        const r = request({ host: '127.0.0.1', port, method, path, headers, ca, cert, key, servername: 'localhost', agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body }));
        });
        r.on('upgrade', (res, socket) => {
          socket.destroy();
          resolve({ status: res.statusCode!, type: '', body: '' });
        });
        r.on('error', reject);
        r.end(method === 'POST' ? '{}' : undefined);
      });
    const refusedJson = (detail: string) => ({ status: 403, type: 'application/json', body: `${JSON.stringify({ schema: 'svc.rt-control.response.v1', operation: 'unknown', error: `cross_site_request: ${detail}` })}\n` });
    // A page's simple POST (text/plain: no preflight) and a CORS one: refused, whatever the origin names.
    expect(await send('POST', '/v1/control', { origin: 'https://evil.example', 'content-type': 'text/plain' })).toEqual(refusedJson('Origin "https://evil.example": the remote listener answers no web page'));
    expect(await send('POST', '/v1/control', { origin: 'https://127.0.0.1:' + port, 'content-type': 'application/json' })).toEqual(refusedJson(`Origin "https://127.0.0.1:${port}": the remote listener answers no web page`));
    expect(await send('POST', '/v1/control', { origin: 'null' })).toEqual(refusedJson('Origin "null": the remote listener answers no web page'));
    // No Origin but a browser's fetch metadata (an <img> or a navigation from another site).
    expect(await send('GET', '/v1/status', { 'sec-fetch-site': 'cross-site' })).toEqual(refusedJson('Sec-Fetch-Site "cross-site": the remote listener answers no web page'));
    expect(await send('GET', '/v1/status', { 'sec-fetch-site': 'same-site' })).toEqual(refusedJson('Sec-Fetch-Site "same-site": the remote listener answers no web page'));
    expect(routed).toEqual([]);
    // The jog WebSocket from a page (browsers apply no CORS to upgrades): the documented pre-upgrade form, text/plain, label first.
    const wsHeaders = { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' };
    expect(await send('GET', '/v1/jog?session=s&generation=1&jog_generation=0', { ...wsHeaders, origin: 'https://evil.example' })).toEqual({ status: 403, type: 'text/plain; charset=utf-8', body: 'cross_site_request: Origin "https://evil.example": the remote listener answers no web page\n' });
    expect(upgraded).toEqual([]);
    // The same requests from a client that is no browser page are routed; a user's own navigation (none) too.
    expect(await send('POST', '/v1/control', { 'content-type': 'application/json' })).toMatchObject({ status: 200, body: 'routed\n' });
    expect(await send('GET', '/v1/status', { 'sec-fetch-site': 'none' })).toMatchObject({ status: 200, body: 'routed\n' });
    expect(await send('GET', '/v1/jog?session=s&generation=1&jog_generation=0', wsHeaders)).toMatchObject({ status: 101 });
    expect(routed).toEqual(['POST /v1/control p-1', 'GET /v1/status p-1']);
    expect(upgraded).toEqual(['/v1/jog?session=s&generation=1&jog_generation=0 p-1']);
  } finally {
    await listener?.stop();
    await rm(dir, { recursive: true, force: true });
  }
});
