// The rig target's safety gating, on the fake master with the simulated bench box (no rig here): no motion
// without --allow-motion and a closed E-stop chain; a lost heartbeat opens the chain and the stack sees it;
// a test that leaves the cell granted, enabled and armed (an unknown outcome) is settled to stopped; close
// leaves the relay open and the power cut.

import { fileURLToPath } from 'node:url';
import { afterEach, expect, test, vi } from 'vitest';
import { Cell } from '../clients/cell.ts';
import { readStatus, waitStatus } from '../clients/status.ts';
import { BenchBoxError } from '../benchbox/client.ts';
import { openRig, RIG_HEARTBEAT_EVERY_MS, RIG_HEARTBEAT_TIMEOUT_MS } from './rig.ts';

const MACHINE = fileURLToPath(new URL('../../fixtures/machines/bench-two-axis.json', import.meta.url));
const rigs: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const r of rigs.splice(0)) await r.close();
});

async function rig(allowMotion: boolean, simButtonPressed = false) {
  const r = await openRig({ machine: MACHINE, bench: 'sim', allowMotion, driver: 'ethercat-fake', simButtonPressed });
  rigs.push(r);
  const client = r.client();
  const d = await client.describe();
  const cell = new Cell(client, (d.reply.data as { binding: never }).binding);
  return { r, client, cell };
}

test('without --allow-motion: no motion, the reason stated, the chain kept open and drive power cut; the stack reads the chain open', async () => {
  const { r, client } = await rig(false);
  expect(r.abilities.motion).toBe(false);
  expect(r.motionRefusal).toBe('motion is not allowed on target rig: run with --allow-motion (the bench box keeps the E-stop chain open)');
  expect(await r.bench.status()).toMatchObject({ chain: 'open', relay: 'open', power: 'off', heartbeat: 'armed', timeoutMs: RIG_HEARTBEAT_TIMEOUT_MS });
  const st = await waitStatus(client, (s) => s.core !== null && s.core.safety_fault_mask !== 0n);
  expect(st.core!.safety_fault_mask).toBe(3n);
  expect(r.driver).toBe('ethercat-fake');
  await expect(r.inject({ kind: 'wkc_drop' })).rejects.toMatchObject({ code: 'HIL_ERR_TARGET_NO_ABILITY' });
});

test('--allow-motion with an E-stop button pressed: no motion, the bench box reading named', async () => {
  const { r } = await rig(true, true);
  expect(r.abilities.motion).toBe(false);
  expect(r.motionRefusal).toBe('motion is not allowed on target rig: the bench box reads the E-stop chain open with its relay closed (an E-stop button is pressed or the chain is broken)');
  expect((await r.bench.status()).power).toBe('off');
});

test('--allow-motion with the chain closed: motion allowed and possible; a lost heartbeat opens the chain within the box timeout and the cell stops', async () => {
  const { r, client, cell } = await rig(true);
  expect(r.motionRefusal).toBeUndefined();
  expect(r.abilities.motion).toBe(true);
  const st0 = await readStatus(client);
  expect(st0.core).toMatchObject({ safety_fault_mask: 0n, execution_fault_reasons: 0n });
  const s = await cell.hold();
  expect((await cell.fenced('enable', s, { axis_mask: 3 })).status).toBe(200);
  expect((await waitStatus(client, (x) => x.core!.axis_enable_mask === 3n)).core!.axis_enable_mask).toBe(3n);
  // the run dies: nobody beats any more
  r.bench.stopHeartbeat();
  const t0 = performance.now();
  const st = await waitStatus(client, (x) => x.core!.safety_fault_mask !== 0n && x.core!.axis_enable_mask === 0n, 5_000);
  const ms = performance.now() - t0;
  expect(st.core!.safety_fault_mask).toBe(3n);
  expect(st.core!.axis_enable_mask).toBe(0n);
  expect(ms).toBeGreaterThanOrEqual(RIG_HEARTBEAT_TIMEOUT_MS - 150); // not before the box's timeout (less the last beat's age)
  // The box's event crossed from its thread by now or very soon (the stack heard of it first).
  await vi.waitFor(() => expect(r.bench.events.map((e) => [e.event, e.fields.reason])).toEqual([['ESTOP', 'heartbeat_timeout']]), { timeout: 1_000 });
  expect((await r.simBox!.model()).relay).toBe('open');
  await cell.cleanup();
});

test("the test's thread held for 1.2 s (a long synchronous decode, a loaded host): the heartbeat beats from its own thread and the box's watchdog keeps the chain closed", async () => {
  const { r, client } = await rig(true);
  expect(r.abilities.motion).toBe(true);
  const held = performance.now();
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1_200);
  const after = performance.now();
  expect(after - held).toBeGreaterThanOrEqual(1_150);
  // A request to the box: what the box said while this thread was held has arrived by its answer.
  const st = await r.bench.status();
  expect(r.bench.events.filter((e) => e.event === 'ESTOP')).toEqual([]);
  expect(st).toMatchObject({ chain: 'closed', relay: 'closed', power: 'on', heartbeat: 'armed' });
  // The beats were written while this thread was held: no silence toward the box near its timeout.
  expect(r.bench.silenceBefore(after, 2_000)).toBeLessThan(RIG_HEARTBEAT_TIMEOUT_MS - RIG_HEARTBEAT_EVERY_MS);
  expect(r.bench.heartbeatError).toBeUndefined();
  expect(r.benchLoss(held)).toBeUndefined();
  expect((await readStatus(client)).core).toMatchObject({ safety_fault_mask: 0n });
});

test("a heartbeat that fails in the box's thread reaches the target: heartbeatError, and settle refuses to go on", async () => {
  const { r } = await rig(true);
  await r.simBox!.setSilent(true); // the box stops answering: the thread's next beat times out
  await vi.waitFor(() => expect(r.bench.heartbeatError).toMatchObject({ code: 'BENCH_TIMEOUT', message: 'the bench box did not answer HB within 500 ms' }), { timeout: 3_000, interval: 20 });
  expect(r.bench.heartbeatError).toBeInstanceOf(BenchBoxError);
  await r.simBox!.setSilent(false);
  await expect(r.settle()).rejects.toMatchObject({ code: 'HIL_ERR_TARGET_START', message: expect.stringMatching(/^HIL_ERR_TARGET_START: the bench box heartbeat failed: BENCH_TIMEOUT: /) });
});

test("the harness's heartbeat lapsing under a test: benchLoss blames the harness's silence, not the cell; settle closes the chain again and the next test meets a cell that enables", async () => {
  const { r, client, cell } = await rig(true);
  const started = performance.now();
  expect(r.benchLoss(started)).toBeUndefined();
  const s = await cell.hold();
  expect((await cell.fenced('enable', s, { axis_mask: 3 })).status).toBe(200);
  r.bench.stopHeartbeat(); // the harness's process held up: no beat reaches the box
  await waitStatus(client, (x) => x.core!.safety_fault_mask !== 0n && x.core!.axis_enable_mask === 0n, 5_000);
  const refused = await cell.fenced('enable', s, { axis_mask: 3 });
  expect([refused.status, refused.reply.error]).toEqual([409, expect.stringMatching(/^native_rejected\b/)]);
  await cell.cleanup();
  const loss = r.benchLoss(started);
  expect(loss).toEqual({ hostTooSlow: expect.stringMatching(/^the bench box's heartbeat watchdog \(timeout 500 ms\) opened the E-stop chain: the harness had written it no heartbeat for \d+ ms \(it beats every 100 ms\)/) });
  expect(Number(/for (\d+) ms/.exec(loss!.hostTooSlow!)![1])).toBeGreaterThanOrEqual(RIG_HEARTBEAT_TIMEOUT_MS - 100);
  // A test that began after the opening, before the harness closed the chain again, met it too.
  expect(r.benchLoss(performance.now())).toEqual(loss);
  await r.settle();
  expect(await r.simBox!.model()).toMatchObject({ relay: 'closed', power: 'on', heartbeat: 'armed' });
  expect((await readStatus(client)).core).toMatchObject({ safety_fault_mask: 0n, execution_fault_reasons: 0n });
  // The next test: nothing of it, and its cell enables.
  expect(r.benchLoss(performance.now())).toBeUndefined();
  expect(r.benchLoss(started)).toEqual(loss);
  const s2 = await cell.hold();
  expect((await cell.fenced('enable', s2, { axis_mask: 3 })).status).toBe(200);
  await cell.cleanup();
});

test('a bench box whose watchdog opens the chain although the harness beat in time: benchLoss names the box (equipment), never the cell or the host', async () => {
  const { r, client } = await rig(true);
  const started = performance.now();
  // The box's clock runs ahead of the beats it received (a box that fails): its watchdog fires now, and
  // what it says reaches the host.
  const lines = await r.simBox!.tick(performance.now() + 10_000);
  expect(lines).toEqual(['* ESTOP chain=open reason=heartbeat_timeout relay=opened\n']);
  await waitStatus(client, (x) => x.core!.safety_fault_mask !== 0n, 5_000);
  await vi.waitFor(() => expect(r.bench.events.length).toBe(1));
  expect(r.benchLoss(started)).toEqual({ equipment: expect.stringMatching(/^the bench box's heartbeat watchdog \(timeout 500 ms\) opened the E-stop chain although the harness had written it a heartbeat \d+ ms before: the bench box or its serial link failed, not the cell$/) });
  await r.settle();
  expect((await readStatus(client)).core).toMatchObject({ safety_fault_mask: 0n, execution_fault_reasons: 0n });
});

test('an unknown outcome (a test that timed out holding an armed grant): settle waits for the lease to stop the cell and checks it', async () => {
  const { r, client, cell } = await rig(true);
  const s = await cell.grant();
  expect((await cell.fenced('enable', s, { axis_mask: 3 })).status).toBe(200);
  await waitStatus(client, (x) => x.core!.axis_enable_mask === 3n);
  expect((await cell.fenced('arm', s)).status).toBe(200);
  expect((await readStatus(client)).core!.armed).toBe(1n);
  // The test ends without release or stop (its connection is gone): the target settles the cell.
  await r.settle();
  const st = await readStatus(client);
  expect(st.core).toMatchObject({ armed: 0n, axis_enable_mask: 0n, io_armed: 0n });
});

test('a cell kept armed by a live controller does not settle: the target says so instead of moving on', async () => {
  const { r, client, cell } = await rig(true);
  const s = await cell.hold(); // renewed: the lease never ends
  expect((await cell.fenced('enable', s, { axis_mask: 1 })).status).toBe(200);
  await waitStatus(client, (x) => x.core!.axis_enable_mask === 1n);
  await expect(r.settle(800)).rejects.toMatchObject({ code: 'HIL_ERR_TARGET_START', message: expect.stringContaining('did not settle within 800 ms') });
  await cell.cleanup();
  await r.settle();
});

test('--bench sim needs a simulated bus: on the real EtherCAT driver it is refused before anything starts', async () => {
  await expect(openRig({ machine: MACHINE, bench: 'sim', allowMotion: true, driver: 'ethercat' })).rejects.toMatchObject({ code: 'HIL_ERR_TARGET_OPTION' });
});

test('close leaves the relay open and drive power cut', async () => {
  const { r } = await rig(true);
  const box = r.simBox!;
  expect(await box.model()).toMatchObject({ relay: 'closed', power: 'on' });
  await r.close();
  // As close left the box (its thread is gone).
  expect(await box.model()).toMatchObject({ relay: 'open', power: 'off' });
});
