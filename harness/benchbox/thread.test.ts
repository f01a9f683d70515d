// The bench box client in its own thread (harness/benchbox/thread.ts), with the simulated box beside it and
// no stack: requests and the client's error codes across the thread, events and beat times on this
// thread's clock, beats that keep going while this thread is held, a thread that dies, close.

import { afterEach, expect, test, vi } from 'vitest';
import { BenchBoxError } from './client.ts';
import { BenchBoxThread } from './thread.ts';

const threads: BenchBoxThread[] = [];
afterEach(async () => {
  for (const t of threads.splice(0)) await t.close();
});

async function open(): Promise<BenchBoxThread> {
  const t = await BenchBoxThread.open({ path: `/dev/ttyTHREAD${threads.length}`, mock: true, replyTimeoutMs: 300, sim: {} });
  threads.push(t);
  return t;
}

test("requests cross to the thread and back with the client's codes; events arrive with atMs on this thread's clock", async () => {
  const t = await open();
  expect(await t.hello()).toEqual({ proto: '1', fw: 'sim-1.0', timeout_ms: '500' });
  const refused = await t.relay('CLOSE').catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(BenchBoxError);
  expect(refused).toMatchObject({ code: 'BENCH_REFUSED', detail: { box_code: 'hb_not_armed' } });
  await t.heartbeat();
  expect(await t.relay('CLOSE')).toEqual({ relay: 'closed', chain: 'closed' });
  expect(await t.setInputs(0x00ff, 0x0a0b)).toBe(0x000b);
  const before = performance.now();
  expect(await t.sim!.tick(before + 10_000)).toEqual(['* ESTOP chain=open reason=heartbeat_timeout relay=opened\n']);
  await vi.waitFor(() => expect(t.events.length).toBe(1));
  const [ev] = t.events;
  expect(ev).toMatchObject({ event: 'ESTOP', fields: { chain: 'open', reason: 'heartbeat_timeout', relay: 'opened' } });
  expect(ev!.atMs).toBeGreaterThanOrEqual(before - 1);
  expect(ev!.atMs).toBeLessThanOrEqual(performance.now() + 1);
  expect(await t.sim!.model()).toMatchObject({ relay: 'open', power: 'off', heartbeat: 'expired', chain: 'open' });
  expect(t.priority).toMatchObject({ nice: expect.any(Number) });
});

test('the beats leave from the thread while this one is held, and their write times reach silenceBefore here', async () => {
  const t = await open();
  await t.setTimeoutMs(500);
  await t.heartbeat();
  t.startHeartbeat(100);
  await t.relay('CLOSE');
  const held = performance.now();
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 900);
  const after = performance.now();
  expect(await t.status()).toMatchObject({ chain: 'closed', heartbeat: 'armed' });
  expect(t.events).toEqual([]);
  const silence = t.silenceBefore(after, after - held);
  expect(silence).toBeDefined();
  expect(silence!).toBeLessThan(400); // the box's timeout less one beat: what benchLoss would call the host's lateness
  expect(t.silenceBefore(held - 10_000, 1_000)).toBeUndefined();
  t.stopHeartbeat();
  await vi.waitFor(() => expect(t.events.map((e) => e.fields.reason)).toEqual(['heartbeat_timeout']), { timeout: 3_000 });
  expect(t.heartbeatError).toBeUndefined();
});

test('a thread that dies is never silent: heartbeatError is BENCH_CLOSED, and every request after it fails with it', async () => {
  const t = await open();
  await t.heartbeat();
  t.startHeartbeat(100);
  const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    t.sim!.crash();
    await vi.waitFor(() => expect(t.heartbeatError).toMatchObject({ code: 'BENCH_CLOSED', message: expect.stringMatching(/^the bench box thread failed: the bench box thread was made to fail: no heartbeat reaches the bench box/) }), { timeout: 3_000 });
    expect(stderr).toHaveBeenCalledWith(expect.stringMatching(/^warning: the bench box thread failed/));
  } finally {
    stderr.mockRestore();
  }
  await expect(t.status()).rejects.toMatchObject({ code: 'BENCH_CLOSED' });
  t.startHeartbeat(100);
  expect(t.heartbeatError?.code).toBe('BENCH_CLOSED');
});

test('close closes the port and ends the thread: requests after it fail BENCH_CLOSED, the simulated box reads as close left it', async () => {
  const t = await open();
  await t.heartbeat();
  await t.relay('CLOSE');
  await t.power('RESTORE');
  await t.power('CUT');
  await t.relay('OPEN');
  await t.close();
  await expect(t.heartbeat()).rejects.toMatchObject({ code: 'BENCH_CLOSED' });
  expect(await t.sim!.model()).toMatchObject({ relay: 'open', power: 'off' });
  expect(t.heartbeatError).toBeUndefined();
});

test('a port that cannot be opened fails the open with the client code, and the thread ends', async () => {
  await expect(BenchBoxThread.open({ path: '/nonexistent/ttyNOPE' })).rejects.toMatchObject({ code: 'BENCH_PORT' });
});
