// The worker bridge of the OLP server (document 3 part 4 POST /cadquery/topology and /seam, part 7 the
// worker codes), reached from a real HTTP client: every code of the bridge is provoked with a
// fault-injecting worker (suites/olp/fault-worker.mjs, test equipment the server starts as its worker):
// a refusal (invalid_request), a body over 12 MiB (payload_too_large), no worker free (busy), the client
// going away (canceled) and a worker over its time limit (timeout), each of the last two with the
// worker process shown stopped by the operating system, a missing worker environment (unavailable), a
// crash (worker_failed) and answers that are not the documented frame (invalid_response). The servers
// are configured by the harness (a worker command of the suite's own): against an external OLP server
// these tests skip with that reason.

import { readFileSync, existsSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { covers, describe, expect, inProfile, profile, scratchDir } from '../../harness/fixture.ts';
import { stringifyExact } from '../../harness/oracle/json.ts';
import type { OlpSpec } from '../../harness/targets/index.ts';
import { BASE, expectAuthoringError, needsConfigured, olpTest as test, useOlp, type Olp } from './toolkit.ts';

const FAULT_WORKER = fileURLToPath(new URL('./fault-worker.mjs', import.meta.url));
const ledger = scratchDir('hil-olp-ledger');
/** The fault server's limit: far above any held request of the busy test. */
const TIMEOUT_MS = 20_000;
/** The short server's limit, for the timeout test. */
const SHORT_MS = 300;
const POOL = 2;
const MiB = 1024 * 1024;

const fault = (...flags: string[]) => [process.execPath, FAULT_WORKER, '--ledger', ledger, ...flags];

type Pools = { open: (n: string, s: () => OlpSpec) => Promise<Olp | undefined> };

/** A CAD worker without its environment, and a seam worker with a short time limit. */
const SHORT = (): OlpSpec => ({ planner: 'none', workers: { cad: fault('--unavailable'), seam: fault(), pool: 1, timeoutMs: SHORT_MS } });

async function faulty(olps: Pools, skip: (c: boolean, n?: string) => void): Promise<Olp> {
  const o = await anyWorker(olps, skip);
  needsConfigured({ skip }, o, 'a fault-injecting worker (the reference worker bridge runs a command of the suite\'s own)');
  void olps.open('short', SHORT); // started beside the first server: later tests need it
  return o;
}

/**
 * The fault server on the sim target; on someone else's server, that server with whatever workers its
 * owner gave it (the tests that need a fault of the suite's own call `faulty`, which skips there).
 */
async function anyWorker(olps: Pools, skip: (c: boolean, n?: string) => void): Promise<Olp> {
  return useOlp({ skip }, await olps.open('fault', () => ({ planner: 'none', workers: { cad: fault(), seam: fault(), pool: POOL, timeoutMs: TIMEOUT_MS } })));
}

/** A STEP fixture a real STEP worker can read. */
const STEP = readFileSync(new URL('../../fixtures/step/butt-joint.step', import.meta.url)).toString('base64');

/** Skip unless someone else's server has a worker on `route` (a route without one answers 503, part 7). */
async function workerOn(o: Olp, skip: (c: boolean, n?: string) => void, route: string): Promise<void> {
  if (o.endpoint.configured) return;
  const r = await o.client.post(route, { operation: 'detect_joints', step_base64: STEP });
  skip(r.status === 503, `the server has no worker on ${route} (${r.text.slice(0, 120)})`);
}

/** The pid the fault worker wrote for a ledger token (it writes it when the request reaches it). */
async function pidOf(token: string): Promise<number> {
  const f = join(ledger, token);
  // A cold worker on a loaded machine; the file is read only once it holds a whole pid (never 0: a kill
  // of pid 0 would ask about this process group and always find it alive).
  const read = () => (existsSync(f) ? Number(readFileSync(f, 'utf8')) : 0);
  let pid = read();
  for (let i = 0; i < 800 && !(Number.isInteger(pid) && pid > 0); i++) {
    await new Promise((r) => setTimeout(r, 25));
    pid = read();
  }
  expect(Number.isInteger(pid) && pid > 0, `the fault worker wrote no pid for ${token}`).toBe(true);
  return pid;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw e;
  }
}

/** The process is gone (killed and reaped by the server) within a few seconds. */
async function expectStopped(pid: number): Promise<void> {
  for (let i = 0; i < 200 && alive(pid); i++) await new Promise((r) => setTimeout(r, 25));
  expect(alive(pid), `worker ${pid} still runs`).toBe(false);
}

describe('worker bridge', () => {
  test(
    'a worker reply is forwarded on both routes: 200 {ok, operation, part, result}; /seam names the part in X-Offline-Seam-Part',
    covers('olp:route.cadquery_topology', 'olp:route.seam', 'profile:olp.worker_bridge'),
    async ({ olps, skip }) => {
      const o = await anyWorker(olps, skip);
      await workerOn(o, skip, '/seam');
      await workerOn(o, skip, '/cadquery/topology');
      const cad = await o.client.post('/cadquery/topology', { operation: 'extract_topology', part: 'cad-part-1', step_base64: STEP, unknown_field: 1 });
      expect(cad.status, cad.text.slice(0, 300)).toBe(200);
      const seam = await o.client.post('/seam', { operation: 'detect_joints', part: 'seam-part-7', step_base64: STEP });
      expect(seam.status, seam.text.slice(0, 300)).toBe(200);
      // Part 4: /seam answers with the X-Offline-Seam-Part header; what it holds and the bodies are ours.
      expect(typeof seam.headers['x-offline-seam-part'], 'X-Offline-Seam-Part').toBe('string');
      if (o.endpoint.configured) {
        await inProfile('profile:olp.worker_bridge', () => {
          expect(cad.json).toMatchObject({ ok: true, operation: 'extract_topology', part: 'cad-part-1', result: { route: 'cadquery/topology', operation: 'extract_topology' } });
          expect(cad.headers['x-offline-seam-part']).toBeUndefined();
          expect(seam.json).toMatchObject({ ok: true, operation: 'detect_joints', result: { route: 'seam' } });
          expect(seam.headers['x-offline-seam-part']).toBe('seam-part-7');
        });
      }
    },
  );

  test('a worker that refuses the request: 400 invalid_request with its reason', covers('olp:error.invalid_request', 'olp:errors.authoring_shape'), async ({ olps, skip }) => {
    const o = await anyWorker(olps, skip);
    await workerOn(o, skip, '/seam');
    if (o.endpoint.configured) {
      const r = await o.client.post('/seam', { operation: 'check_torch_fits', fault: 'refuse' });
      expectAuthoringError(r, 400, 'invalid_request');
      expect(r.json?.error).toBe('fault worker refuses check_torch_fits');
    } else {
      // Someone else's worker: a STEP that is no STEP is refused by it, the fixture (the valid twin) is read.
      const r = await o.client.post('/seam', { operation: 'detect_joints', step_base64: Buffer.from('not a STEP file').toString('base64') });
      expectAuthoringError(r, 400, 'invalid_request');
      expect((await o.client.post('/seam', { operation: 'detect_joints', step_base64: STEP })).status).toBe(200);
    }
    // A body that is not a JSON object never reaches a worker.
    expectAuthoringError(await o.client.post('/seam', '[1]'), 400, 'invalid_request');
  });

  test('a body over 12 MiB is refused 413 before any worker sees it', covers('olp:error.payload_too_large', 'limit:olp_cad_seam_body_bytes'), async ({ olps, skip }) => {
    const o = await anyWorker(olps, skip);
    await workerOn(o, skip, '/cadquery/topology');
    const head = '{"ledger":"oversize","operation":"tessellate","pad":"';
    const big = head + 'a'.repeat(12 * MiB + 1 - head.length - 2) + '"}';
    expect(big.length).toBe(12 * MiB + 1);
    expectAuthoringError(await o.client.post('/cadquery/topology', big), 413, 'payload_too_large');
    // No worker saw it: the fault worker writes its ledger entry when a request reaches it (the harness's own worker only).
    if (o.endpoint.configured) expect(existsSync(join(ledger, 'oversize'))).toBe(false);
  });

  test(
    'with every worker of the pool busy a request is 429 busy; one fewer is admitted, and so is the next once one is free',
    covers('olp:error.busy'),
    async ({ olps, skip }) => {
      const o = await faulty(olps, skip);
      expect(Number((await o.client.get('/capabilities')).json?.limits?.worker_pool_size)).toBe(POOL);
      // POOL - 1 held requests: one more is admitted; POOL held: the next is refused.
      const held = Array.from({ length: POOL - 1 }, (_x, i) => o.client.post('/cadquery/topology', { operation: 'tessellate', fault: 'hold', ledger: `busy-${i}` }));
      for (let i = 0; i < POOL - 1; i++) await pidOf(`busy-${i}`);
      const last = POOL - 1;
      held.push(o.client.post('/cadquery/topology', { operation: 'tessellate', fault: 'hold', ledger: `busy-${last}` }));
      await pidOf(`busy-${last}`); // it reached a worker: admitted, and now the pool is full
      expectAuthoringError(await o.client.post('/cadquery/topology', { operation: 'tessellate' }), 429, 'busy');
      // The other route has a pool of its own.
      expect((await o.client.post('/seam', { operation: 'detect_joints' })).status).toBe(200);
      for (let i = 0; i < POOL; i++) writeFileSync(join(ledger, `busy-${i}.release`), '');
      for (const r of await Promise.all(held)) expect(r.status, r.text).toBe(200);
      expect((await o.client.post('/cadquery/topology', { operation: 'tessellate' })).status).toBe(200);
    },
  );

  test(
    'a client that goes away: the worker process is stopped; a client that half-closes reads 408 canceled',
    covers('olp:error.canceled'),
    async ({ olps, skip }) => {
      const o = await faulty(olps, skip);
      // undici aborts the request (the connection closes).
      const ac = new AbortController();
      const pending = o.client.post('/seam', { operation: 'sample_seam_frames', fault: 'hang', ledger: 'cancel-abort' }, {}, ac.signal).catch((e: Error) => e);
      const pid = await pidOf('cancel-abort');
      expect(alive(pid)).toBe(true);
      ac.abort();
      expect(await pending).toBeInstanceOf(Error);
      await expectStopped(pid);
      // A half-close: the server still answers on the open half.
      const body = Buffer.from(stringifyExact({ operation: 'sample_seam_frames', fault: 'hang', ledger: 'cancel-half' }));
      const u = new URL(o.endpoint.url);
      let pid2 = 0;
      const reply = await new Promise<string>((resolve, reject) => {
        const s = connect(Number(u.port), u.hostname, () => {
          s.write(`POST ${BASE}/seam HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
          s.write(body);
          void pidOf('cancel-half').then((p) => {
            pid2 = p;
            s.end();
          }, reject);
        });
        let text = '';
        s.setEncoding('utf8').on('data', (d: string) => (text += d));
        s.on('close', () => resolve(text));
        s.on('error', reject);
      });
      expect(reply.split('\r\n')[0], reply.replace(/\r\n/g, ' ')).toBe('HTTP/1.1 408 Request Timeout');
      expect(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4))).toMatchObject({ ok: false, code: 'canceled' });
      await expectStopped(pid2);
      // The pool is whole again.
      expect((await o.client.post('/seam', { operation: 'detect_joints' })).status).toBe(200);
    },
  );

  test('a worker over its time limit: 504 timeout, the worker process is stopped; the limit is the configured one', covers('olp:error.timeout'), async ({ olps, skip }) => {
    await faulty(olps, skip);
    const o = useOlp({ skip }, await olps.open('short', SHORT));
    expect(Number((await o.client.get('/capabilities')).json?.limits?.worker_timeout_ms)).toBe(SHORT_MS);
    const t0 = process.hrtime.bigint();
    const r = o.client.post('/seam', { operation: 'detect_joints', fault: 'hang', ledger: 'timeout' });
    const pid = await pidOf('timeout');
    const reply = await r;
    const waited = Number(process.hrtime.bigint() - t0) / 1e6;
    expectAuthoringError(reply, 504, 'timeout');
    expect(waited).toBeGreaterThanOrEqual(SHORT_MS - 5); // not answered before the limit (no upper bound: DESIGN.md)
    await expectStopped(pid);
    // Inside the limit a worker answers (a new one: its start is not counted against the request).
    expect((await o.client.post('/seam', { operation: 'detect_joints' })).status).toBe(200);
  });

  test('a worker that crashes while it holds the request: 502 worker_failed; the next request gets a new worker', covers('olp:error.worker_failed'), async ({ olps, skip }) => {
    const o = await faulty(olps, skip);
    const r = o.client.post('/seam', { operation: 'detect_joints', fault: 'crash', ledger: 'crash' });
    const pid = await pidOf('crash');
    expectAuthoringError(await r, 502, 'worker_failed');
    await expectStopped(pid);
    const next = await o.client.post('/seam', { operation: 'detect_joints' });
    expect(next.status).toBe(200);
    expect(Number(next.json?.result?.pid)).not.toBe(pid);
  });

  test.for(['garbage', 'wrong_shape', 'wrong_id'] as const)(
    'a worker that answers something other than the documented frame (%s): 502 invalid_response, and that worker is stopped',
    covers('olp:error.invalid_response'),
    async (kind, { olps, skip }) => {
      const o = await faulty(olps, skip);
      const r = o.client.post('/cadquery/topology', { operation: 'tessellate', fault: kind, ledger: `invalid-${kind}` });
      const pid = await pidOf(`invalid-${kind}`);
      expectAuthoringError(await r, 502, 'invalid_response');
      await expectStopped(pid);
    },
  );

  test('a worker whose environment is missing: 503 unavailable, every time', covers('olp:error.unavailable'), async ({ olps, skip }) => {
    await faulty(olps, skip);
    const o = useOlp({ skip }, await olps.open('short', SHORT));
    const cad = await o.client.post('/cadquery/topology', { operation: 'tessellate' });
    expectAuthoringError(cad, 503, 'unavailable');
    expect(cad.json?.error).toMatch(/told to report its environment missing/);
    // Still no worker next time (nothing is left running in the pool of one).
    expectAuthoringError(await o.client.post('/cadquery/topology', { operation: 'tessellate' }), 503, 'unavailable');
  });

  test('the bridge is as docs/profile.md says: pool size and time limit in /capabilities, features cad_worker and seam_worker', profile('profile:olp.worker_bridge'), async ({ olps, skip }) => {
    const o = await faulty(olps, skip);
    const c = (await o.client.get('/capabilities')).json;
    expect([c.features.cad_worker, c.features.seam_worker, Number(c.limits.worker_pool_size), Number(c.limits.worker_timeout_ms)]).toEqual([true, true, POOL, TIMEOUT_MS]);
  });
});

