// The idle close of a kept connection, judged one way for both listeners: the local socket (document 1
// part 1 "Transports", limit idle_connection_s) and the remote one (part 8 "Remote HTTP timeouts", limit
// remote_idle_timeout_s); the bound is the catalogue's figure of the limit judged. The server's idle timer
// starts once it has written its reply, after the request was sent, so a correct server cannot close the
// connection the bound after the send or sooner. An idle close is one timer per connection: half a second
// after the bound is late (a server keeping Node's habit of closing a second after keepAliveTimeout closes
// a second late, a deadline extended), judged under hostBound (a harness or a target the host kept from
// running that long is the host's ERROR, not the target's FAIL).

import { expect } from 'vitest';
import { limit } from './catalogue/index.ts';
import type { KeptReply } from './clients/rawhttp.ts';
import { hostBound } from './lateness.ts';

/** How late after the bound a close still keeps it, ms. */
const IDLE_SLACK_MS = 500;

/**
 * Assert that the connection of `k`, left idle after its reply, was closed at the bound of the catalogue
 * limit `name` (in seconds): not before, not later than the slack after, and with no byte more.
 */
export async function expectIdleClose(k: KeptReply, name: 'idle_connection_s' | 'remote_idle_timeout_s'): Promise<void> {
  const boundMs = Number(limit(name).value) * 1000;
  const rule = `limit:${name}`;
  let closedAt = NaN;
  await hostBound({ rule: `${rule}: closed within ${IDLE_SLACK_MS / 1000} s after ${boundMs / 1000} s idle`, marginMs: IDLE_SLACK_MS, since: k.replied, targetOnHost: true }, async () => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<number>((r) => (timer = setTimeout(() => r(NaN), k.replied + boundMs + IDLE_SLACK_MS - performance.now())));
    closedAt = await Promise.race([k.closed, late]);
    clearTimeout(timer);
    expect(Number.isNaN(closedAt), `the idle connection was still open ${(boundMs + IDLE_SLACK_MS) / 1000} s after its reply`).toBe(false);
  });
  expect(closedAt - k.sent, `closed before ${boundMs / 1000} s idle`).toBeGreaterThanOrEqual(boundMs);
  expect(k.extra(), 'no byte after the reply').toBe(0);
}
