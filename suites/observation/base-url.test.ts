// The base address (document 1 part 1 Transports: "{base_url}: http://localhost over the Unix socket (use
// localhost as host name), https://{host}:{port} remotely"; part 4: every path of the endpoint table is
// `{base_url}` followed by it, and "any other method and path: unknown_endpoint"). Every documented
// endpoint of the catalogue answers at exactly base + path on both transports; the same paths under any
// other prefix, or without their /v1, are not endpoints.

import { request } from 'undici';
import { catalogue, reason } from '../../harness/catalogue/index.ts';
import type { ControlClient } from '../../harness/clients/control.ts';
import { covers, cycleFree, describe, expect, remoteStacks, test } from '../../harness/fixture.ts';
import { cannotStartRemote } from '../../harness/targets/remote.ts';

// No test here needs the file's cell to cycle on its own (harness/fixture.ts cycleFree).
cycleFree();

const UNKNOWN = reason('unknown_endpoint').label;
const SCHEMA = 'svc.rt-control.request.v1';

/** Every "METHOD /path" of the catalogue's endpoint table, with `<...>` placeholders filled in. */
const ENDPOINTS = catalogue
  .filter((e) => e.family === 'endpoint' && e.doc === 1)
  .map((e) => {
    const [method, path] = e.id.slice('endpoint:'.length).split(' ') as ['GET' | 'POST', string];
    return { method, path: path.replace('<sha256>', '0'.repeat(64)) };
  });

if (ENDPOINTS.length < 12) throw new Error('the catalogue lost document 1 endpoints');

/** What a request needs so that the endpoint itself answers (a body, a cursor). */
function requestFor(method: string, path: string): { path: string; body?: string } {
  if (method === 'POST' && path === '/v1/control') return { path, body: JSON.stringify({ schema: SCHEMA, operation: 'abort' }) };
  if (method === 'POST') return { path, body: '' };
  if (/^\/v1\/(events|telemetry)(\/stream)?$/.test(path)) return { path: `${path}?after=0` };
  return { path };
}

interface Answer {
  status: number;
  label: string | undefined;
}

/** One exchange at client.origin + path; a stream is judged by its headers (then dropped). */
async function answer(client: ControlClient, method: 'GET' | 'POST', path: string, body?: string): Promise<Answer> {
  const abort = new AbortController();
  const res = await request(`${client.origin}${path}`, {
    method,
    dispatcher: client.agent,
    signal: abort.signal,
    body,
    headers: body !== undefined ? { 'content-type': 'application/json' } : {},
  });
  res.body.on('error', () => undefined);
  const type = String(res.headers['content-type'] ?? '');
  if (!type.startsWith('application/json')) {
    abort.abort();
    return { status: res.statusCode, label: undefined };
  }
  const text = await res.body.text();
  const error = (JSON.parse(text) as { error?: string }).error;
  return { status: res.statusCode, label: error?.split(/[:\s]/)[0] };
}

/** Wrong bases for a documented path: another prefix, the path without /v1, a doubled /v1. */
const misplaced = (path: string) => [`/api${path}`, path.replace(/^\/v1/, ''), `/v1${path}`, `/v2${path.slice(3)}`];

async function checkBase(client: ControlClient, served: (e: { method: string; path: string }) => boolean): Promise<void> {
  for (const e of ENDPOINTS) {
    const r = requestFor(e.method, e.path);
    const a = await answer(client, e.method as 'GET' | 'POST', r.path, r.body);
    if (served(e)) {
      expect({ at: `${e.method} ${client.origin}${r.path}`, label: a.label === UNKNOWN ? UNKNOWN : 'an answer of the endpoint' }).toEqual({ at: `${e.method} ${client.origin}${r.path}`, label: 'an answer of the endpoint' });
      expect([200, 404, 409, 413]).toContain(a.status);
    }
    for (const wrong of misplaced(r.path)) {
      const w = await answer(client, e.method as 'GET' | 'POST', wrong, r.body);
      expect({ at: `${e.method} ${client.origin}${wrong}`, status: w.status, label: w.label }).toEqual({ at: `${e.method} ${client.origin}${wrong}`, status: 409, label: UNKNOWN });
    }
  }
}

describe('base address', () => {
  test(
    'over the Unix socket every documented endpoint answers at http://localhost + its path, and nowhere else',
    covers('rule:transport.base_url', 'rule:observation.unknown_endpoint'),
    async ({ client }) => {
      expect(client.origin).toBe('http://localhost');
      // /v1/resources is served by the remote listener only (part 4 resource: "remote mutual TLS required").
      await checkBase(client, (e) => !e.path.startsWith('/v1/resources/'));
    },
  );

  const remote = remoteStacks();
  test(
    'over the remote listener every documented endpoint answers at https://{host}:{port} + its path, and nowhere else',
    covers('rule:transport.base_url'),
    async ({ skip }) => {
      const why = cannotStartRemote();
      skip(why !== undefined, why);
      const stack = await remote();
      const client = await stack.client('base-url');
      expect(client.origin).toBe(`https://${stack.host}:${stack.port}`);
      // GET /v1/jog is always a WebSocket upgrade remotely (part 5): a plain GET is answered by the endpoint as a bad upgrade.
      await checkBase(client, (e) => e.path !== '/v1/jog');
      const resource = await answer(client, 'GET', `/v1/resources/${'0'.repeat(64)}`);
      expect(resource).toEqual({ status: 404, label: 'resource_unknown' });
    },
  );
});
