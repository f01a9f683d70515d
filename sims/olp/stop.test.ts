// The OLP server's stop of the selected cell (document 3 part 4 /dense-execution/stop, part 7
// cell_previous_stop_failed), from the inside with a scripted control link: a stop the cell did not
// confirm leaves its grant marked, the next stop sends it again, and a cell switch is refused until one is
// confirmed; a lease lost to a silent cell is never reported stopped without asking the cell.

import { afterEach, expect, test, vi } from 'vitest';
import { session } from './test-session.ts';
import type { ControlLink, Fence, Reply } from './control.ts';

afterEach(() => {
  vi.useRealTimers();
});

/** A control link whose answers the test sets: `down` throws as a dead socket does; `refuse` answers 409. */
function scriptedLink() {
  const sent: Array<{ op: string; fence?: Fence }> = [];
  const s = {
    down: false,
    refuse: undefined as string | undefined,
    sent,
    link: {
      async op(op: string, fence: Fence | undefined): Promise<Reply> {
        sent.push({ op, ...(fence ? { fence } : {}) });
        if (s.down) throw new Error('connect ECONNREFUSED control.sock');
        if (op === 'acquire') return { status: 200, body: {}, data: { session: 'ab'.repeat(32), generation: 7n, lease_ms: 400 } } as Reply;
        if (op === 'stop' && s.refuse) return { status: 409, body: {}, error: `${s.refuse}: refused` } as Reply;
        return { status: 200, body: {} } as Reply;
      },
      async close() {},
    } as unknown as ControlLink,
  };
  return s;
}

const stops = (s: ReturnType<typeof scriptedLink>) => s.sent.filter((x) => x.op === 'stop').map((x) => x.fence);
const FENCE = { session: 'ab'.repeat(32), generation: 7n, lease_ms: 400 };

test('a stop the cell does not answer is stopped: false and keeps its grant marked: the next stop sends it again, and a switch is refused until a stop is confirmed', async () => {
  const s = scriptedLink();
  const c = session(s.link);
  await c.arm();
  s.down = true;
  const first = await c.stop();
  expect([first.stopped, first.lease_held]).toEqual([false, false]);
  expect(first.stop_detail).toMatch(/ECONNREFUSED/);
  // A switch away stops it first: still no answer, so the selection must stay (cell_previous_stop_failed).
  expect(await c.close(true)).toBe(false);
  expect(stops(s)).toEqual([FENCE, FENCE]);
  // The cell answers again: the same grant's stop is sent and confirmed; the switch may go ahead.
  s.down = false;
  expect((await c.stop()).stopped).toBe(true);
  expect(stops(s)).toEqual([FENCE, FENCE, FENCE]);
  expect(await c.close(true)).toBe(true);
  expect(stops(s)).toHaveLength(3); // nothing left to stop
});

test('a stop refused for another reason than the grant being gone is not confirmed; expired (the grant ran out) is', async () => {
  const s = scriptedLink();
  const c = session(s.link);
  await c.arm();
  s.refuse = 'invalid_request_envelope';
  expect((await c.stop()).stopped).toBe(false);
  expect(await c.close(true)).toBe(false);
  s.refuse = 'expired';
  expect(await c.close(true)).toBe(true);
  expect(stops(s)).toEqual([FENCE, FENCE, FENCE]);
});

test('after a renewal lost the lease to a silent cell, stop asks the cell and answers stopped: false while it stays silent', async () => {
  vi.useFakeTimers();
  const s = scriptedLink();
  const c = session(s.link);
  await c.arm();
  s.down = true;
  await vi.advanceTimersByTimeAsync(150); // a renewal every quarter lease (100 ms) fails
  expect(c.view().lease_held).toBe(false);
  expect(String(c.view().stopped_reason)).toMatch(/^lease_lost: /);
  const r = await c.stop();
  expect(r.stopped).toBe(false);
  expect(stops(s)).toEqual([FENCE]);
  s.down = false;
  expect((await c.stop()).stopped).toBe(true);
  expect(stops(s)).toEqual([FENCE, FENCE]);
  await c.close(false);
});

test('with nothing held or marked, stop answers stopped: true without asking the cell', async () => {
  const s = scriptedLink();
  const c = session(s.link);
  expect((await c.stop()).stopped).toBe(true);
  expect(s.sent).toEqual([]);
});
