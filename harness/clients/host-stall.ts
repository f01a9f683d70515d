// The bus-stall judgement (harness/clients/bus-stalls.ts) on a live cell: its events read since the start,
// the faults latched since `startNs`, and the harness's own event-loop stalls (harness/lateness.ts) around
// each latch. One entry for the fixture's judgement of a failed test and for the OLP local simulator's.

import { judgeBusStall, latchedDuring, STALL_WINDOW_AFTER_MS } from './bus-stalls.ts';
import { eventsSince } from './events.ts';
import type { ControlClient } from './control.ts';
import { lateness } from '../lateness.ts';

/**
 * Why a cell's latched faults since `startNs` were the host's stall, or undefined: nothing latched, the
 * evidence could not be read (the stack went away), or the judgement leaves the failure standing. The
 * caller has checked that the cell's bus is simulated on this host and shares the harness's clock.
 */
export async function hostBusStall(client: ControlClient, startNs: bigint, injections: readonly { kind: string; at_ns: bigint }[]): Promise<string | undefined> {
  try {
    const events = await eventsSince(client, 0n);
    const latched = latchedDuring(events, startNs);
    if (latched === 0n) return undefined;
    return judgeBusStall({
      latched,
      events,
      injections,
      stallAround(tNs, beforeMs) {
        const tMs = performance.now() - Number(process.hrtime.bigint() - tNs) / 1e6;
        const w = lateness.window(tMs - beforeMs, tMs + STALL_WINDOW_AFTER_MS);
        return w.samples ? w.max_ms : undefined;
      },
    });
  } catch {
    return undefined;
  }
}
