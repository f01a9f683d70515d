// Cell.cleanup (harness/clients/cell.ts) leaves the cell so that the next test can take it: a stop's drain
// has ended (document 1 part 3: an acquire needs "no Stop draining"), and after a failed test the faults it
// left latched are reset (else every later test meets not_ready for them). On a stack on the stepped clock
// nothing drains unless stepped, so the cleanup must move the cell's time on itself (its Pace).

import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Cell } from './cell.ts';
import { readStatus } from './status.ts';
import { driverOf, readyStepped, settle } from './stepped.ts';
import { variantsFromEnv, type Target } from '../targets/index.ts';
import type { ControlClient } from './control.ts';
import type { Description } from '../fixture.ts';

let target: Target;
let client: ControlClient;
let description: Description;

beforeAll(async () => {
  target = await variantsFromEnv({ ...process.env, HIL_TARGET: 'sim' }).open({ clock: 'stepped' });
  client = target.client();
  description = (await client.describe()).reply.data as unknown as Description;
});
afterAll(async () => {
  await target?.close();
});

const cellOf = () => new Cell(client, description.binding, false, driverOf(target, client, description));
const grant = (s: Awaited<ReturnType<typeof readStatus>>) => (s as unknown as { grant: { active: boolean; stopping: boolean; draining: boolean } }).grant;

describe('Cell.cleanup on a stepped cell', () => {
  test('after a stop the cleanup steps the drain to its end: the next acquire is granted, not control_session_stale', async () => {
    const cell = cellOf();
    const { s } = await readyStepped(target, cell, client, { axes: description.axes.length });
    const stop = await settle(target, cell.fenced('stop', s), 1);
    expect(stop.status).toBe(200);
    // The stop is admitted and still draining: nothing has stepped the core since its receipt.
    expect(grant(await readStatus(client))).toMatchObject({ stopping: true, draining: true });
    await cell.cleanup();
    expect(grant(await readStatus(client))).toMatchObject({ active: false, draining: false });
    const next = cellOf();
    const r = await next.acquire();
    expect({ status: r.status, label: r.label }).toEqual({ status: 200, label: undefined });
    await next.cleanup();
  });

  test('a failed test\'s latched fault is reset by its cleanup; a passed test\'s cleanup leaves the cell as it is', async () => {
    const cell = cellOf();
    await readyStepped(target, cell, client, { axes: description.axes.length });
    await target.inject({ kind: 'following_error', axis: 0 });
    await target.step!(20);
    // The condition is gone (as a real following error's is once the axis stops); the fault stays latched.
    await target.inject({ kind: 'clear' });
    await target.step!(20);
    expect((await readStatus(client)).axes[0]!.fault).toBe(true);
    await cell.cleanup();
    expect((await readStatus(client)).axes[0]!.fault).toBe(true);
    const failed = cellOf();
    await failed.cleanup({ resetFaults: true });
    const after = await readStatus(client);
    expect({ faults: after.axes.filter((a) => a.fault).map((a) => a.id), grant: grant(after).active }).toEqual({ faults: [], grant: false });
    // The cell is usable again: ready (Home kept or redone, enable, arm) succeeds.
    const again = cellOf();
    await readyStepped(target, again, client, { axes: description.axes.length });
    await again.cleanup();
  });
});
