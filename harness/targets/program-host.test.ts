// The OLP server and the planner stub as sessions of hosts (stack-host.ts with `hil olp sessions` and
// `hil planner sessions`, sims/sessions.ts): a server opened after another was closed runs in the same
// process, as a server of its own (the closed one no longer answers, the new one does, on its own port);
// a refused start says why with its status and leaves the host serving; with HIL_STACK_HOST=off each is a
// process of its own.

import { request } from 'undici';
import { afterEach, expect, test } from 'vitest';
import { HarnessError } from '../errors.ts';
import { startReferenceOlp } from './olp.ts';
import { openStubPlanner, startReferenceProgram } from './spawn.ts';

const BASE = '/api/offline-programming/v1';
const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((c) => c()));
  delete process.env.HIL_STACK_HOST;
});

async function answers(url: string): Promise<number | undefined> {
  try {
    const r = await request(url, { headersTimeout: 5_000, bodyTimeout: 5_000 });
    await r.body.dump();
    return r.statusCode;
  } catch {
    return undefined;
  }
}

test('an OLP server opened after another was closed is a session of the same host, a server of its own', { timeout: 60_000 }, async () => {
  const a = await startReferenceOlp({ planner: 'none' });
  expect(await answers(`${a.endpoint.url}${BASE}/health`)).toBe(200);
  await a.close();
  expect(await answers(`${a.endpoint.url}${BASE}/health`)).toBeUndefined();
  const b = await startReferenceOlp({ planner: 'none' });
  closing.push(() => b.close());
  expect(b.endpoint.pid).toBe(a.endpoint.pid);
  expect(b.endpoint.url).not.toBe(a.endpoint.url);
  expect(await answers(`${b.endpoint.url}${BASE}/health`)).toBe(200);
});

test('two OLP servers open at once run in two hosts', { timeout: 60_000 }, async () => {
  const [a, b] = await Promise.all([startReferenceOlp({ planner: 'none' }), startReferenceOlp({ planner: 'none' })]);
  closing.push(() => a.close(), () => b.close());
  expect(a.endpoint.pid).not.toBe(b.endpoint.pid);
  expect(await answers(`${a.endpoint.url}${BASE}/health`)).toBe(200);
  expect(await answers(`${b.endpoint.url}${BASE}/health`)).toBe(200);
});

test('a refused OLP start rejects with its status and its reason, and the host serves the next server', { timeout: 60_000 }, async () => {
  const first = await startReferenceOlp({ planner: 'none' });
  await first.close();
  const refused = await startReferenceProgram('olp', 'OLP server', ['serve', '--listen', 'nowhere'], 30_000).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(refused).toBeInstanceOf(HarnessError);
  expect((refused as HarnessError).code).toBe('HIL_ERR_TARGET_START');
  expect((refused as HarnessError).detail).toMatchObject({ exit_code: 2 });
  expect((refused as HarnessError).message).toMatch(/^HIL_ERR_TARGET_START: OLP server exited with code 2 before ready/);
  expect((refused as HarnessError).message).toContain('--listen must be HOST:PORT');
  const next = await startReferenceOlp({ planner: 'none' });
  closing.push(() => next.close());
  expect(next.endpoint.pid).toBe(first.endpoint.pid);
});

test('a planner stub opened after another was closed is a session of the same host, with a store of its own', { timeout: 60_000 }, async () => {
  const a = await openStubPlanner();
  expect(await answers(`${a.endpoint.url}/api/motion/health`)).toBe(200);
  await a.close();
  expect(await answers(`${a.endpoint.url}/api/motion/health`)).toBeUndefined();
  const b = await openStubPlanner();
  closing.push(() => b.close());
  expect(b.endpoint.pid).toBe(a.endpoint.pid);
  expect(b.endpoint.storeDir).not.toBe(a.endpoint.storeDir);
  expect(await answers(`${b.endpoint.url}/api/motion/health`)).toBe(200);
});

test('HIL_STACK_HOST=off: each OLP server and planner is a process of its own', { timeout: 60_000 }, async () => {
  process.env.HIL_STACK_HOST = 'off';
  const a = await startReferenceOlp({ planner: 'none' });
  await a.close();
  const b = await startReferenceOlp({ planner: 'none' });
  closing.push(() => b.close());
  expect(b.endpoint.pid).not.toBe(a.endpoint.pid);
  const p = await openStubPlanner();
  closing.push(() => p.close());
  expect([a.endpoint.pid, b.endpoint.pid]).not.toContain(p.endpoint.pid);
  expect(await answers(`${p.endpoint.url}/api/motion/health`)).toBe(200);
});
