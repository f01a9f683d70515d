// waitStatus (harness/clients/status.ts): its timeout is the harness's patience, and time the host took
// from the harness does not use it up: a change that comes after a stall longer than the timeout is seen,
// while a change that never comes still ends the wait.

import { expect, test } from 'vitest';
import { lateness } from '../lateness.ts';
import type { ControlClient } from './control.ts';
import { waitStatus } from './status.ts';

/** A client whose Status reports axis_enable_mask 1 once `flipAt` (performance.now()) has passed. */
function fakeClient(flipAt: () => number): ControlClient {
  const reply = (mask: bigint) => ({ status: 200, label: '', reply: { data: { core: { axis_enable_mask: mask } } } });
  return { status: async () => reply(performance.now() >= flipAt() ? 1n : 0n) } as unknown as ControlClient;
}

const block = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

test('a stall of the harness longer than the timeout is added back: the change that came after it is seen', async () => {
  lateness.start();
  await new Promise((r) => setTimeout(r, 30));
  let flip = Infinity;
  const client = fakeClient(() => flip);
  const waiting = waitStatus(client, (s) => s.core!.axis_enable_mask === 1n, 150);
  // The first poll has gone out; the loop now stalls for 400 ms, and the change comes 60 ms after that.
  await new Promise((r) => setImmediate(r));
  block(400);
  flip = performance.now() + 60;
  const s = await waiting;
  expect(s.core!.axis_enable_mask).toBe(1n);
});

test('a change that never comes ends the wait with the last status read', async () => {
  lateness.start();
  const s = await waitStatus(fakeClient(() => Infinity), (x) => x.core!.axis_enable_mask === 1n, 100);
  expect(s.core!.axis_enable_mask).toBe(0n);
});
