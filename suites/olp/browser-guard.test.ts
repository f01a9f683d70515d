// What a web page open in a browser on the cell's host can make the OLP server do (document 3 parts 1
// and 5: same-host use, no authentication; docs/profile.md "Local servers: browser guard"): nothing. The
// server answers only a Host that names it, refuses a state-changing request another site sends (Origin,
// Sec-Fetch-Site), and takes JSON bodies only as application/json, a type no page can send across origins
// without a preflight, which is refused. Each rule is tried on its own, at both sides; then a real
// headless Chromium page on another loopback origin, and one under a rebinding name, try to arm, home and
// move the cell, and the control service shows that nothing happened.

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readStatus, type StatusView } from '../../harness/clients/status.ts';
import { eventCursor, eventsSince } from '../../harness/clients/events.ts';
import { rawRequest, type RawReply } from '../../harness/clients/rawhttp.ts';
import { cycleFree, profile, describe, expect, needsMotion } from '../../harness/fixture.ts';
import { chromiumPath, visits, type PageVisit } from '../../harness/report/browser.ts';
import { BASE, cellStatus, olpTest as test, useOlp, type Olp } from './toolkit.ts';

// No test here needs the file's cell to cycle on its own (harness/fixture.ts cycleFree).
cycleFree();

const MODEL = 'sim-nine-axis';

/** The server's port and its URL's authority. */
function portOf(o: Olp): number {
  return Number(new URL(o.endpoint.url).port);
}

function machineRefusal(r: RawReply, status: number, label: string): void {
  const why = `${r.status} ${r.text.slice(0, 300)}`;
  expect(r.status, why).toBe(status);
  expect(r.json?.error, why).toBe(label);
  expect(typeof r.json?.detail, why).toBe('string');
  expect(r.json?.ok, why).toBeUndefined();
}

function authoringRefusal(r: RawReply, status: number, label: string): void {
  const why = `${r.status} ${r.text.slice(0, 300)}`;
  expect(r.status, why).toBe(status);
  expect([r.json?.ok, r.json?.code], why).toEqual([false, label]);
  expect(typeof r.json?.error, why).toBe('string');
}

/** No header of the reply lets another origin read it or send more (CORS). */
function noCors(r: RawReply): void {
  expect(Object.keys(r.headers).filter((h) => h.startsWith('access-control-')), JSON.stringify(r.headers)).toEqual([]);
}

const JSON_TYPE = { 'content-type': 'application/json' };

describe('browser guard (profile)', () => {
  test(
    'Host: the loopback names and an --allowed-host name with the server\'s port are answered; another name, another port or no port is 403 host_not_allowed',
    profile('profile:olp.browser_guard'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('guard', () => ({ planner: 'none', allowedHosts: ['cell-7.example'] })));
      // The --allowed-host name only where the harness configured it; someone else's server is judged on
      // the loopback names and the refusals, which hold whatever further names its owner allowed.
      const port = portOf(o);
      const extra = o.endpoint.configured ? [`cell-7.example:${port}`] : [];
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`, ...extra]) {
        const r = await rawRequest(o.endpoint.url, 'GET', `${BASE}/health`, { host });
        expect([host, r.status, r.json?.ok]).toEqual([host, 200, true]);
      }
      for (const host of [`evil.example:${port}`, `127.0.0.1:${port + 1}`, `localhost:${port - 1}`, '127.0.0.1', 'localhost', `cell-7.example.evil:${port}`, `localhost.:${port}`, `127.0.0.1:${port}@evil`]) {
        const r = await rawRequest(o.endpoint.url, 'GET', `${BASE}/health`, { host });
        authoringRefusal(r, 403, 'host_not_allowed');
        noCors(r);
      }
      // A machine-control route answers in its own shape (part 7).
      machineRefusal(await rawRequest(o.endpoint.url, 'GET', `${BASE}/dense-execution/status`, { host: `evil.example:${port}` }), 403, 'host_not_allowed');
      machineRefusal(await rawRequest(o.endpoint.url, 'POST', `${BASE}/dense-execution/stop`, { host: `evil.example:${port}`, ...JSON_TYPE }, '{}'), 403, 'host_not_allowed');
    },
  );

  test(
    'Origin and Sec-Fetch-Site: a POST from the server\'s own origin or with none is served; from another origin, port, scheme, a null origin or another site is 403 cross_site_request',
    profile('profile:olp.browser_guard'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('guard', () => ({ planner: 'none', allowedHosts: ['cell-7.example'] })));
      const port = portOf(o);
      // capture-model of an unknown model: 400 invalid_request once past the guard.
      const body = '{"model_id":"no-such-robot","robot_description_sha256":"sha256:' + '0'.repeat(64) + '"}';
      const post = (headers: Record<string, string>) => rawRequest(o.endpoint.url, 'POST', `${BASE}/robots/capture-model`, { ...JSON_TYPE, ...headers }, body);
      const served: Record<string, string>[] = [{}, { origin: `http://127.0.0.1:${port}` }, { origin: `http://localhost:${port}` }, { 'sec-fetch-site': 'same-origin' }, { 'sec-fetch-site': 'none' }, { origin: `http://127.0.0.1:${port}`, 'sec-fetch-site': 'same-origin' }];
      for (const ok of served) authoringRefusal(await post(ok), 400, 'invalid_request');
      const refused: Record<string, string>[] = [
        { origin: 'http://evil.example' },
        { origin: `http://evil.example:${port}` },
        { origin: `http://127.0.0.1:${port + 1}` },
        { origin: `https://127.0.0.1:${port}` },
        { origin: 'null' },
        { 'sec-fetch-site': 'cross-site' },
        { 'sec-fetch-site': 'same-site' },
        { origin: `http://127.0.0.1:${port}`, 'sec-fetch-site': 'same-site' },
      ];
      for (const bad of refused) {
        const r = await post(bad);
        authoringRefusal(r, 403, 'cross_site_request');
        noCors(r);
      }
      // A preflight from another origin is refused and allows nothing.
      const pre = await rawRequest(o.endpoint.url, 'OPTIONS', `${BASE}/dense-execution/arm`, { origin: 'http://127.0.0.1:9', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' });
      machineRefusal(pre, 403, 'cross_site_request');
      noCors(pre);
      // Reading is not state-changing: a GET that names another Origin is still answered (the browser
      // keeps its reply from the page: no CORS header allows it).
      const get = await rawRequest(o.endpoint.url, 'GET', `${BASE}/health`, { origin: 'http://evil.example' });
      expect(get.status).toBe(200);
      noCors(get);
    },
  );

  test(
    'Content-Type: a JSON body is read as application/json (any case, with parameters); text/plain, a form, multipart or no type is 415 unsupported_content_type',
    profile('profile:olp.browser_guard'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('guard', () => ({ planner: 'none', allowedHosts: ['cell-7.example'] })));
      const body = '{"model_id":"no-such-robot","robot_description_sha256":"sha256:' + '0'.repeat(64) + '"}';
      const post = (headers: Record<string, string>, path = '/robots/capture-model') => rawRequest(o.endpoint.url, 'POST', `${BASE}${path}`, headers, body);
      for (const type of ['application/json', 'application/json; charset=utf-8', 'Application/JSON']) authoringRefusal(await post({ 'content-type': type }), 400, 'invalid_request');
      for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', 'text/json']) {
        authoringRefusal(await post({ 'content-type': type }), 415, 'unsupported_content_type');
      }
      authoringRefusal(await post({}), 415, 'unsupported_content_type');
      // On a machine-control route, in its shape, before anything else is looked at (no target here).
      machineRefusal(await post({ 'content-type': 'text/plain' }, '/dense-execution/arm'), 415, 'unsupported_content_type');
      // PUT of the program catalogue too.
      authoringRefusal(await rawRequest(o.endpoint.url, 'PUT', `${BASE}/programs/p1`, { 'content-type': 'text/plain' }, '{}'), 415, 'unsupported_content_type');
    },
  );
});

/** What a move of the cell would change, from the control service's Status. */
function motionState(s: StatusView): unknown {
  return { core: s.core && { armed: s.core.armed, home_valid_mask: s.core.home_valid_mask, home_epoch: s.core.home_epoch, axis_enable_mask: s.core.axis_enable_mask }, positions: s.axes.map((a) => String(a.position)) };
}

/** The attack, run in the page: every way a page can send a state-changing request to `base` without reading it. */
const ATTACK = `async (base) => {
  const out = {};
  const send = (path, init) => fetch(base + path, { method: 'POST', mode: 'no-cors', ...init }).then((r) => 'sent (' + r.type + ')', (e) => 'failed: ' + e.message);
  out.arm_text = await send('/dense-execution/arm', { body: '{"armed":true}' });
  out.home_text = await send('/dense-execution/home', { body: '{}' });
  out.move_text = await send('/dense-execution/move', { body: JSON.stringify({ points: [[0.05, 0, 0, 0, 0, 0, 0, 0, 0]] }) });
  out.arm_form = await send('/dense-execution/arm', { body: new URLSearchParams({ armed: 'true' }) });
  out.arm_json_cors = await fetch(base + '/dense-execution/arm', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"armed":true}' }).then((r) => 'status ' + r.status, (e) => 'blocked: ' + e.message);
  return out;
}`;

/** The rebinding page: the server's own URL under a foreign name; same-origin reads and posts. */
const REBOUND = `(async () => {
  const out = { document: document.body ? document.body.innerText.slice(0, 200) : '' };
  out.status = await fetch('${BASE}/dense-execution/status').then((r) => r.status, (e) => 'failed: ' + e.message);
  out.arm = await fetch('${BASE}/dense-execution/arm', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"armed":true}' }).then((r) => r.status, (e) => 'failed: ' + e.message);
  out.home = await fetch('${BASE}/dense-execution/home', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }).then((r) => r.status, (e) => 'failed: ' + e.message);
  return out;
})()`;

describe('a web page on the same host (headless Chromium)', () => {
  test(
    'a page on another loopback origin and a page under a rebinding name cannot arm, home or move the cell: every request is refused 403 and the control service shows nothing moved',
    { ...profile('profile:olp.browser_guard'), timeout: 180_000 },
    async ({ olps, skip, target }) => {
      const bin = chromiumPath();
      skip(bin === undefined, 'no Chromium is installed (/usr/bin/chromium, Debian package chromium): the browser test cannot run here; .ci/run installs it');
      needsMotion({ skip }, target);
      const o = useOlp({ skip }, await olps.open('browser', () => ({ single: { socket: target.address, model_id: MODEL }, planner: 'none' })));
      // The page's requests need no selection or fence only on a server with a single target, and that
      // target must be this run's control service, which shows what moved: on someone else's deployment,
      // its bare server (the facts file's bare_olp_url, whose single target is the run's control service).
      skip(!o.endpoint.configured && !o.endpoint.bare, 'the browser test needs a server whose single target is this run\'s control service (the OLP facts file\'s bare_olp_url), whose Status shows what moved');
      const client = target.client();
      const before = motionState(await readStatus(client));
      const grantBefore = (await cellStatus(client)).grant;
      const cursor = await eventCursor(client);
      const olpBase = `${o.endpoint.url}${BASE}`;
      const port = portOf(o);

      // The attacker's page, served from another loopback origin.
      const page = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end('<!doctype html><title>a page</title><p>nothing to see</p>');
      });
      await new Promise<void>((r) => page.listen(0, '127.0.0.1', () => r()));
      // One Chromium for both pages (starting it is most of the test's time): the attacker's page, then the
      // rebinding, where the browser resolves a foreign name to 127.0.0.1 and opens the server under it.
      let attack: PageVisit;
      let rebound: PageVisit;
      try {
        [attack, rebound] = (await visits(
          [
            { url: `http://127.0.0.1:${(page.address() as AddressInfo).port}/`, expressions: { sent: `(${ATTACK})(${JSON.stringify(olpBase)})` } },
            { url: `http://rebind.example:${port}${BASE}/health`, expressions: { sent: REBOUND } },
          ],
          undefined,
          { chromiumArgs: ['--host-resolver-rules=MAP rebind.example 127.0.0.1', '--disable-features=HttpsUpgrades'] },
        )) as [PageVisit, PageVisit];
      } finally {
        page.close();
      }

      // Nothing moved: no grant, no arm, no home, no execution, the same positions.
      const after = motionState(await readStatus(client));
      expect(after).toEqual(before);
      expect((await cellStatus(client)).grant).toEqual(grantBefore);
      const events = (await eventsSince(client, cursor)).map((e) => e.type);
      for (const t of ['grant_acquired', 'arm_changed', 'home_epoch_changed', 'execution_started', 'execution_completed']) expect(events, t).not.toContain(t);

      // The page's requests reached the server and were refused there (not lost on the way).
      const posts = attack.responses.filter((r) => r.url.startsWith(olpBase) && r.method === 'POST');
      expect(posts.map((r) => [r.url.slice(olpBase.length), r.status]), JSON.stringify(attack.values)).toEqual([
        ['/dense-execution/arm', 403],
        ['/dense-execution/home', 403],
        ['/dense-execution/move', 403],
        ['/dense-execution/arm', 403],
      ]);
      const sent = attack.values.sent as Record<string, string>;
      expect(sent.arm_json_cors, JSON.stringify(sent)).toMatch(/^blocked: /);
      const r = rebound.values.sent as Record<string, unknown>;
      expect(rebound.responses.find((x) => x.url === `http://rebind.example:${port}${BASE}/health`)?.status, JSON.stringify(r)).toBe(403);
      expect([r.status, r.arm, r.home], JSON.stringify(r)).toEqual([403, 403, 403]);
      expect(String(r.document)).toContain('host_not_allowed');
    },
  );
});
