// What the weld planner refuses from a browser page and from garbage bytes (document 2 parts 1, 4, 5, 7;
// docs/profile.md "Local servers: browser guard", "Weld planner: query and body", "Weld planner: the
// .weldplan container"): a Host that does not name it, a cross-site POST, a plan body not sent as
// application/octet-stream; a body over the limit is answered as soon as it is declared; a container entry
// that lies about its size is refused while it inflates, and a small plan queued behind it is planned.

import { deflateRawSync, constants } from 'node:zlib';
import { heldBody, rawRequest, type RawReply } from '../../harness/clients/rawhttp.ts';
import { writeZip } from '../../harness/clients/weldplan.ts';
import { describe, expect, profile } from '../../harness/fixture.ts';
import { errorOf, needsStub, plannerTest as test, RESULT_SCHEMA, usePlanner, weldplan } from './toolkit.ts';

const MiB = 1024 * 1024;
const OCTETS = { 'content-type': 'application/octet-stream' };

function refused(r: RawReply | undefined, status: number, label: string): void {
  const why = r ? `${r.status} ${r.text.slice(0, 300)}` : 'no reply';
  expect(r?.status, why).toBe(status);
  expect(String(r?.json?.error ?? ''), why).toMatch(new RegExp(`^${label}: `));
  expect(Object.keys(r?.headers ?? {}).filter((h) => h.startsWith('access-control-')), why).toEqual([]);
}

describe('browser guard (profile)', () => {
  test(
    'the planner answers a Host naming it with its port; another name or port is 403 host_not_allowed',
    profile('profile:planner.browser_guard'),
    async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      needsStub({ skip }, p, 'the Host allow-list of a planner listening on 127.0.0.1');
      const port = Number(new URL(p.url).port);
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) expect((await rawRequest(p.url, 'GET', '/api/motion/health', { host })).status, host).toBe(200);
      for (const host of [`evil.example:${port}`, `127.0.0.1:${port + 1}`, '127.0.0.1', `10.0.0.1:${port}`]) refused(await rawRequest(p.url, 'GET', '/api/motion/health', { host }), 403, 'host_not_allowed');
      refused(await rawRequest(p.url, 'GET', `/api/motion/dense/sha256:${'0'.repeat(64)}`, { host: `evil.example:${port}` }), 403, 'host_not_allowed');
    },
  );

  test(
    'a plan POST from another site or not sent as application/octet-stream is refused before it is queued; the same container sent properly is planned',
    profile('profile:planner.browser_guard'),
    async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      const port = Number(new URL(p.url).port);
      const container = weldplan();
      const post = (headers: Record<string, string>) => rawRequest(p.url, 'POST', '/api/motion/plan', headers, container);
      const crossSite: Record<string, string>[] = [
        { ...OCTETS, origin: 'http://evil.example' },
        { ...OCTETS, origin: `http://127.0.0.1:${port + 1}` },
        { ...OCTETS, origin: 'null' },
        { ...OCTETS, 'sec-fetch-site': 'cross-site' },
        { ...OCTETS, 'sec-fetch-site': 'same-site' },
      ];
      for (const h of crossSite) refused(await post(h), 403, 'cross_site_request');
      const wrongType: Record<string, string>[] = [{ 'content-type': 'text/plain' }, { 'content-type': 'application/x-www-form-urlencoded' }, { 'content-type': 'multipart/form-data; boundary=x' }, { 'content-type': 'application/json' }, {}];
      for (const h of wrongType) refused(await post(h), 415, 'unsupported_content_type');
      refused(await rawRequest(p.url, 'OPTIONS', '/api/motion/plan', { origin: 'http://evil.example', 'access-control-request-method': 'POST' }), 403, 'cross_site_request');
      // Nothing of the above was queued; the container itself is fine.
      expect((await p.client.progress()).json).toEqual({ stage: null });
      for (const h of [OCTETS, { ...OCTETS, origin: `http://127.0.0.1:${port}`, 'sec-fetch-site': 'same-origin' }]) {
        const ok = await post(h);
        expect(ok.status, ok.text.slice(0, 300)).toBe(200);
        expect(ok.json.schema).toBe(RESULT_SCHEMA);
      }
    },
  );
});

describe('early answers (profile)', () => {
  test(
    'a plan body declaring more than 64 MiB is answered 413 while it is still being sent, and the connection is closed',
    profile('profile:planner.early_answers'),
    async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      needsStub({ skip }, p, 'the stub\'s 64 MiB body limit');
      const declared = 64 * MiB + 1;
      const out = await heldBody(p.url, '/api/motion/plan', OCTETS, { declared, capBytes: 32 * MiB });
      const why = out.reply ? `${out.reply.status} ${out.reply.text.slice(0, 200)}` : 'no reply';
      expect(out.reply?.status, why).toBe(413);
      expect(typeof out.reply?.json?.error, why).toBe('string');
      expect(out.reply?.headers.connection).toBe('close');
      expect(out.closedByServer, `${out.writtenAtClose} bytes written`).toBe(true);
    },
  );

  test(
    'a chunked plan body is answered 413 once it passes 64 MiB, and the server stops reading: an endless body is not read to its end',
    profile('profile:planner.early_answers'),
    async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      needsStub({ skip }, p, 'the stub\'s 64 MiB body limit');
      // No Content-Length: only counting the bytes tells the limit is passed. A server that reads a chunked
      // body to its end answers only when the client stops (here at 256 MiB).
      const cap = 256 * MiB;
      const out = await heldBody(p.url, '/api/motion/plan', OCTETS, { capBytes: cap });
      const why = out.reply ? `${out.reply.status} ${out.reply.text.slice(0, 200)}` : 'no reply';
      expect(out.reply?.status, why).toBe(413);
      expect(typeof out.reply?.json?.error, why).toBe('string');
      expect(out.reply?.headers.connection, why).toBe('close');
      // Answered after the limit was crossed, long before the client stopped.
      expect(out.writtenAtReply, why).toBeGreaterThan(64 * MiB);
      expect(out.writtenAtReply, why).toBeLessThan(cap);
      // Closed by the server: what the client wrote is the limit, what the server throws away after its
      // reply (at most the limit again) and what the sockets buffer, not the 256 MiB it would have sent.
      expect(out.closedByServer, `${out.writtenAtClose} bytes written`).toBe(true);
      expect(out.writtenAtClose).toBeLessThan(192 * MiB);
      expect((await p.client.health()).status).toBe(200);
    },
  );

  test(
    'an entry declaring 100 bytes that inflates to 1 GiB (a 1 MiB body) is refused BadZipFile as it crosses 100 bytes, and a plan queued behind it is planned',
    profile('profile:planner.inflate_bounded', 'profile:planner.container'),
    async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      // 1 GiB of zeros as raw deflate data without holding it: one MiB sync-flushed (non-final blocks ending
      // on a byte) repeated 1024 times, then a final empty block.
      const one = deflateRawSync(Buffer.alloc(MiB), { finishFlush: constants.Z_SYNC_FLUSH });
      const bomb = Buffer.concat([...Array.from({ length: 1024 }, () => one), deflateRawSync(Buffer.alloc(0))]);
      const container = writeZip([{ name: 'workpiece.step', data: new Uint8Array(0), deflated: bomb, declaredSize: 100 }]);
      expect(container.length).toBeLessThan(2 * MiB);
      const first = p.client.plan(container);
      const behind = p.client.plan(weldplan());
      const r = await first;
      expect([r.status, errorOf(r)]).toEqual([422, 'BadZipFile: entry "workpiece.step" inflates past its declared size of 100 bytes']);
      const ok = await behind;
      expect(ok.status, ok.text.slice(0, 300)).toBe(200);
      expect((await p.client.health()).status).toBe(200);
    },
  );
});

describe('path parameters (profile)', () => {
  test(
    'a digest with a malformed percent escape is a malformed digest, 422 with the expected form, and the planner stays up; a well-formed escape is decoded',
    profile('profile:planner.path_escapes'),
    async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      for (const raw of ['%ZZ', '%', `sha256:${'0'.repeat(63)}%`, `sha256%3${'0'.repeat(64)}`, `sha256:${'0'.repeat(62)}%E2%82`, `sha256:${'0'.repeat(62)}%c0%ae`]) {
        const r = await rawRequest(p.url, 'GET', `/api/motion/dense/${raw}`);
        expect([raw, r.status], r.text.slice(0, 200)).toEqual([raw, 422]);
        expect(r.text, raw).toContain('sha256:<64 hex>');
      }
      // The same digest with its colon escaped, and with a hex digit escaped, is looked up (nobody stored it).
      for (const raw of [`sha256%3A${'0'.repeat(64)}`, `sha256:%30${'0'.repeat(63)}`]) expect([raw, (await rawRequest(p.url, 'GET', `/api/motion/dense/${raw}`)).status]).toEqual([raw, 404]);
      expect((await p.client.health()).status).toBe(200);
    },
  );
});
