// A begin_jog that must be admitted, judged against the harness's own timing (shared by the local and the
// remote jog suites).

import { hostNs } from '../../harness/clients/jog.ts';
import { expect, hostBound } from '../../harness/fixture.ts';
import type { CheckedReply } from '../../harness/oracle/reply.ts';

/**
 * `send` runs begin_jog with this origin and deadline. It must be admitted while its deadline has not
 * passed when the service checks it (document 1 part 4 begin_jog, jog_clock_input_stale); refused after the
 * harness took longer than the deadline's distance from the origin to get it answered, it says nothing:
 * HIL_ERR_HOST_TOO_SLOW with the figures (harness/lateness.ts hostBound).
 */
export function beginInTime(f: { source_origin_host_ns: bigint; deadline_host_ns: bigint }, send: () => Promise<CheckedReply>): Promise<CheckedReply> {
  return hostBound(
    {
      rule: 'document 1 part 4 begin_jog: a deadline not yet passed',
      marginMs: Number(f.deadline_host_ns - f.source_origin_host_ns) / 1e6,
      measured: () => ({ ms: Number(hostNs() - f.source_origin_host_ns) / 1e6, what: 'from the origin to the answer' }),
    },
    async () => {
      const r = await send();
      expect(r.status, r.reply.error).toBe(200);
      return r;
    },
  );
}
