// The rig target's safety gating, on the fake master with the simulated bench box (no rig here): no motion
// without --allow-motion and a closed E-stop chain; a lost heartbeat opens the chain and the stack sees it;
// a test that leaves the cell granted, enabled and armed (an unknown outcome) is settled to stopped; close
// leaves the relay open and the power cut.

import { fileURLToPath } from 'node:url';
import { afterEach, expect, test } from 'vitest';
import { Cell } from '../clients/cell.ts';
import { readStatus, waitStatus } from '../clients/status.ts';
import { openRig, RIG_HEARTBEAT_TIMEOUT_MS } from './rig.ts';

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
  expect(r.bench.events.map((e) => [e.event, e.fields.reason])).toEqual([['ESTOP', 'heartbeat_timeout']]);
  expect(r.simBox!.model.relay).toBe('open');
  await cell.cleanup();
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
  const box = r.simBox!.model;
  expect(box.relay).toBe('closed');
  expect(box.power).toBe('on');
  await r.close();
  expect(box.relay).toBe('open');
  expect(box.power).toBe('off');
});
