// Cell's judgement of a lease that ran out (harness/clients/cell.ts judgeExpiry), against a scripted
// service on the harness's own clock: answered before the deadline is the target's doing; sent late because
// the harness's event loop stalled is the host's; a wait the test chose says nothing.

import { expect, test } from 'vitest';
import type { CheckedReply } from '../oracle/reply.ts';
import { lateness } from '../lateness.ts';
import { Cell } from './cell.ts';
import type { ControlClient } from './control.ts';

const SESSION = 'ab'.repeat(32);
const block = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

/** A service whose grants last `leaseMs` on this process's monotonic clock and that refuses as told. */
function scripted(leaseMs: number, answer: (op: string, deadline: bigint) => CheckedReply | undefined) {
  let deadline = 0n;
  const client = {
    async control(req: { operation: string }): Promise<CheckedReply> {
      if (req.operation === 'acquire') {
        deadline = process.hrtime.bigint() + BigInt(leaseMs) * 1_000_000n;
        const data = { session: SESSION, generation: 1n, controller: 'c', lease_ms: BigInt(leaseMs), deadline_host_ns: deadline, binding: { pair_id: 'p', revision: 1n, configuration_sha256: 'x' } };
        return { status: 200, label: undefined, reply: { schema: 'svc.rt-control.response.v1', operation: 'acquire', data } } as unknown as CheckedReply;
      }
      const r = answer(req.operation, deadline);
      if (r) return r;
      const expired = process.hrtime.bigint() > deadline;
      return (expired ? { status: 409, label: 'control_session_stale', reply: { operation: req.operation, error: 'control_session_stale: session expired' } } : { status: 200, label: undefined, reply: { operation: req.operation } }) as unknown as CheckedReply;
    },
  } as unknown as ControlClient;
  return new Cell(client, { pair_id: 'p', revision: 1n, configuration_sha256: 'x' }, true);
}

// The sampler sees a stall from the moment its next sample was due (up to SAMPLE_MS after the stall began),
// and the waits around the stalls are no stall: the lease (100 ms) outlasts those waits and that part of
// each stall, so the stalls alone explain the lateness however the host schedules the waits.
test('a lease that ran out while the harness\'s event loop stalled is the host\'s doing', async () => {
  lateness.start();
  const cell = scripted(100, () => undefined);
  const s = await cell.grant();
  await new Promise((r) => setTimeout(r, 12));
  block(150);
  await new Promise((r) => setTimeout(r, 12));
  expect((await cell.fenced('enable', s)).label).toBe('control_session_stale');
  const loss = cell.grantLoss();
  expect(loss?.target).toBe(false);
  expect(loss?.text).toMatch(/^the harness sent a request \d+ ms after the grant's deadline; since it learnt that deadline its event loop stalled \d+(\.\d)? ms/);
});

test('stalls are summed: two, each shorter than the lateness they explain together, make the lapse the host\'s', async () => {
  lateness.start();
  // Sent about 96 ms late (3 waits of 12 and 2 stalls of 80 against a lease of 100): each stall alone is short of it.
  const cell = scripted(100, () => undefined);
  const s = await cell.grant();
  for (let i = 0; i < 2; i++) {
    await new Promise((r) => setTimeout(r, 12));
    block(80);
  }
  await new Promise((r) => setTimeout(r, 12));
  expect((await cell.fenced('enable', s)).label).toBe('control_session_stale');
  expect(cell.grantLoss()).toMatchObject({ target: false, text: expect.stringMatching(/^the harness sent a request \d+ ms after the grant's deadline; since it learnt that deadline its event loop stalled/) });
});

test('a lease the test let run out on purpose (a wait, no stall) is nobody\'s loss', async () => {
  lateness.start();
  const cell = scripted(30, () => undefined);
  const s = await cell.grant();
  await new Promise((r) => setTimeout(r, 200));
  expect((await cell.fenced('enable', s)).label).toBe('control_session_stale');
  expect(cell.grantLoss()).toBeUndefined();
});

test('expired answered before the deadline is the target ending the lease early (the failure stands)', async () => {
  const cell = scripted(60_000, (op) => (op === 'renew' ? ({ status: 409, label: 'expired', reply: { operation: op, error: 'expired: the lease of this session expired' } } as unknown as CheckedReply) : undefined));
  const s = await cell.grant();
  expect((await cell.fenced('renew', s)).label).toBe('expired');
  expect(cell.grantLoss()).toMatchObject({ target: true, text: expect.stringMatching(/^the target ended a lease before its deadline/) });
});

test('another host\'s clock: nothing is judged', async () => {
  lateness.start();
  const cell = scripted(50, () => undefined);
  (cell as unknown as { sameClock: boolean }).sameClock = false;
  const s = await cell.grant();
  await new Promise((r) => setTimeout(r, 12));
  block(150);
  await cell.fenced('enable', s);
  expect(cell.grantLoss()).toBeUndefined();
});
