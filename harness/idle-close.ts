// The idle close of a kept connection, judged one way for both listeners: the local socket (document 1
// part 1 "Transports", control_idle_timeout_ns) and the remote one (part 8 "Remote HTTP timeouts"), both
// 90 s. The server's idle timer starts once it has written its reply, after the request was sent, so a
// correct server cannot close the connection 90 s after the send or sooner. An idle close is one timer per
// connection: half a second after the bound is late (a server keeping Node's habit of closing a second
// after keepAliveTimeout = 90 s closes at 91 s, a deadline extended), judged under hostBound (a harness or
// a target the host kept from running that long is the host's ERROR, not the target's FAIL).

import { expect } from 'vitest';
import type { KeptReply } from './clients/rawhttp.ts';
import { hostBound } from './lateness.ts';

/** The documented idle bound (document 1 part 8: 90 s), ms. */
export const IDLE_CLOSE_MS = 90_000;
/** How late after it a close still keeps the bound, ms. */
export const IDLE_SLACK_MS = 500;

/** Assert that the connection of `k`, left idle after its reply, was closed at the bound: not before, not later than the slack after, and with no byte more. */
export async function expectIdleClose(k: KeptReply, rule: string): Promise<void> {
  let closedAt = NaN;
  await hostBound({ rule: `${rule}: closed within ${IDLE_SLACK_MS / 1000} s after 90 s idle`, marginMs: IDLE_SLACK_MS, since: k.replied, targetOnHost: true }, async () => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<number>((r) => (timer = setTimeout(() => r(NaN), k.replied + IDLE_CLOSE_MS + IDLE_SLACK_MS - performance.now())));
    closedAt = await Promise.race([k.closed, late]);
    clearTimeout(timer);
    expect(Number.isNaN(closedAt), `the idle connection was still open ${(IDLE_CLOSE_MS + IDLE_SLACK_MS) / 1000} s after its reply`).toBe(false);
  });
  expect(closedAt - k.sent, 'closed before 90 s idle').toBeGreaterThanOrEqual(IDLE_CLOSE_MS);
  expect(k.extra(), 'no byte after the reply').toBe(0);
}
