// Bad bytes get an early answer from the OLP server (document 3 part 2 body limits, part 7
// payload_too_large; docs/profile.md "OLP server: labels"): a body over its route's limit is answered 413
// as soon as Content-Length declares it, or as soon as the bytes read pass the limit, without the rest
// being read, and the connection is closed after the answer; a malformed percent escape in a path
// parameter is the client's error, 400 invalid_request, never a failure of the server.

import { heldBody, rawRequest, type RawReply } from '../../harness/clients/rawhttp.ts';
import { describe, expect, profile } from '../../harness/fixture.ts';
import { BASE, olpTest as test, useOlp } from './toolkit.ts';

const MiB = 1024 * 1024;
const JSON_TYPE = { 'content-type': 'application/json' };

function refusal(r: RawReply | undefined, shape: 'machine' | 'authoring', status: number, label: string): void {
  const why = r ? `${r.status} ${r.text.slice(0, 300)}` : 'no reply';
  expect(r?.status, why).toBe(status);
  if (shape === 'machine') expect([r?.json?.error, typeof r?.json?.detail], why).toEqual([label, 'string']);
  else expect([r?.json?.ok, r?.json?.code, typeof r?.json?.error], why).toEqual([false, label, 'string']);
}

describe('over-limit bodies (profile)', () => {
  test(
    'a declared Content-Length over the limit is answered 413 while the body is still being sent, and the connection is closed',
    profile('profile:olp.early_answers'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('early', () => ({ planner: 'none' })));
      // 64 KiB route (machine shape) declaring 100 MB; the 24 MiB /weld-plan route (authoring shape) declaring 24 MiB + 1.
      const cases: Array<[string, number, 'machine' | 'authoring']> = [
        ['/dense-execution/heartbeat', 100_000_000, 'machine'],
        ['/weld-plan', 24 * MiB + 1, 'authoring'],
      ];
      for (const [route, declared, shape] of cases) {
        // The client never finishes its body: a server that reads to the end before answering answers nothing.
        const out = await heldBody(o.endpoint.url, `${BASE}${route}`, JSON_TYPE, { declared, capBytes: Math.min(declared - 1, 64 * MiB) });
        refusal(out.reply, shape, 413, 'payload_too_large');
        expect(out.reply?.headers.connection, route).toBe('close');
        expect(out.writtenAtReply, route).toBeLessThan(declared);
        expect(out.closedByServer, `${route}: the server kept reading (${out.writtenAtClose} bytes written)`).toBe(true);
      }
    },
  );

  test(
    'a chunked body is answered 413 once it passes the limit, and the server stops reading: an endless body is not read to its end',
    profile('profile:olp.early_answers'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('early', () => ({ planner: 'none' })));
      const cap = 96 * MiB;
      const out = await heldBody(o.endpoint.url, `${BASE}/dense-execution/heartbeat`, JSON_TYPE, { capBytes: cap });
      refusal(out.reply, 'machine', 413, 'payload_too_large');
      expect(out.reply?.headers.connection).toBe('close');
      // Answered after the limit was crossed (64 KiB), long before the client stopped.
      expect(out.writtenAtReply).toBeGreaterThan(64 * 1024);
      expect(out.writtenAtReply).toBeLessThan(cap);
      // Closed by the server after a bounded linger: what the client managed to write is the limit, the
      // linger (1 MiB) and what the two sockets buffer, not the 96 MiB it would have sent.
      expect(out.closedByServer, `${out.writtenAtClose} bytes written`).toBe(true);
      expect(out.writtenAtClose).toBeLessThan(32 * MiB);
    },
  );
});

describe('path parameters (profile)', () => {
  const BAD = ['%ZZ', '%', 'ab%2', '%E2%82', '%c0%ae', '%ff', 'a%00%'];

  test(
    'a malformed percent escape in /programs/{id} or DELETE /dense-execution/cells/{id} is 400 invalid_request; a well-formed one is looked up',
    profile('profile:olp.path_escapes'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('early', () => ({ planner: 'none' })));
      const caps = (await rawRequest(o.endpoint.url, 'GET', `${BASE}/capabilities`)).json;
      skip(caps?.features?.program_catalog !== true, 'the OLP server has no program catalogue');
      for (const id of BAD) {
        refusal(await rawRequest(o.endpoint.url, 'GET', `${BASE}/programs/${id}`), 'authoring', 400, 'invalid_request');
        refusal(await rawRequest(o.endpoint.url, 'PUT', `${BASE}/programs/${id}`, JSON_TYPE, '{}'), 'authoring', 400, 'invalid_request');
        refusal(await rawRequest(o.endpoint.url, 'DELETE', `${BASE}/dense-execution/cells/${id}`), 'machine', 400, 'invalid_request');
      }
      // Well-formed escapes are decoded and looked up.
      refusal(await rawRequest(o.endpoint.url, 'GET', `${BASE}/programs/no%2Dsuch%2Eprogram`), 'authoring', 404, 'program_not_found');
      // The server is still up and answering.
      expect((await rawRequest(o.endpoint.url, 'GET', `${BASE}/health`)).status).toBe(200);
    },
  );
});
