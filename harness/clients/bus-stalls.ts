// A bus fault the host caused (DESIGN.md rule 6: a slow host is not a broken target). The reference stack on
// the sim target simulates its bus on the harness's own host: the fake EtherCAT master cycles in a thread of
// the stack, and when the host gives that thread no CPU for a few cycles the core sees its feedback go stale
// and latches pdo_stale, or a working counter short of the expected one (docs/profile.md "Execution fault
// bits": both latch within a few cycles of a stalled bus). That is the stack doing what it must with a bus
// that stalled; the stall was the host's. A test that then fails because the cell is faulted (an enable
// refused not_ready: latched faults) says nothing about the target.
//
// judgeBusStall decides it from evidence only: every fault latched when the test failed is one of those two,
// no injected condition was in force when it latched (the last injection before it was a clear), and the harness's own event loop (harness/lateness.ts) was
// stalled around the moment it latched, past the window in which the stack latches. Otherwise the failure
// stands: a stack that latches such a fault on a quiet host, or any other fault, still FAILs.

import type { CellEvent } from './events.ts';

/** Profile fault names a stalled simulated bus latches (docs/profile.md "Execution fault bits"). */
export const BUS_STALL_FAULTS: ReadonlySet<string> = new Set(['pdo_stale', 'working_counter']);

/**
 * How long the harness's loop must have stalled around the latch for the host to take the blame, ms: the
 * fake master counts its inputs stale after 3 cycles without an exchange and the core latches pdo_stale after
 * 5 stale cycles, 8 ms at the 1 ms cycle.
 */
export const BUS_STALL_MS = 8;
/** The window around the latch in which the harness's stall is looked for, ms before and after it. */
export const STALL_WINDOW_BEFORE_MS = 100;
export const STALL_WINDOW_AFTER_MS = 20;

export interface BusStallEvidence {
  /** execution_fault_reasons read right after the failure (latched bit values). */
  latched: bigint;
  /** The cell's events (fault_latched among them), any order. */
  events: readonly CellEvent[];
  /** What the run injected into this target through its test channel, in order, with the host time of each. */
  injections: readonly { kind: string; at_ns: bigint }[];
  /** The harness's worst event-loop stall in [t - before, t + after] around a host time t (ns), ms; undefined when not sampled. */
  stallAround(tNs: bigint): number | undefined;
}

interface FaultPayload {
  bit?: unknown;
  name?: unknown;
  axis_mask?: unknown;
}

/** The figures when the host, not the target, latched every fault the cell held at the failure; else undefined. */
export function judgeBusStall(e: BusStallEvidence): string | undefined {
  if (e.latched === 0n) return undefined;
  const latches = e.events
    .filter((x) => x.type === 'fault_latched')
    .map((x) => ({ at: x.time_ns, f: (x.fault ?? {}) as FaultPayload }))
    .filter((x) => typeof x.f.bit === 'bigint' && typeof x.f.name === 'string');
  const parts: string[] = [];
  for (let bits = e.latched; bits !== 0n; bits &= bits - 1n) {
    const value = bits & -bits;
    // The latest latch of this bit is the one still held.
    const last = latches.filter((x) => x.f.bit === value).reduce<(typeof latches)[number] | undefined>((a, x) => (!a || x.at > a.at ? x : a), undefined);
    if (!last || !BUS_STALL_FAULTS.has(last.f.name as string)) return undefined;
    // An injected condition still in force when it latched (not cleared since) makes it the injection's.
    const before = e.injections.filter((i) => i.at_ns <= last.at);
    if (before.length > 0 && before[before.length - 1]!.kind !== 'clear') return undefined;
    const stall = e.stallAround(last.at);
    if (stall === undefined || stall < BUS_STALL_MS) return undefined;
    parts.push(`${last.f.name as string} (axes ${typeof last.f.axis_mask === 'bigint' ? `0x${last.f.axis_mask.toString(16)}` : '?'}) while the harness's own event loop was stalled ${stall} ms`);
  }
  return `the reference stack simulates its bus on this host and latched ${parts.join(', ')} around that moment (a stalled bus latches within ${BUS_STALL_MS} ms; no injected condition was in force): the host was too slow for the bus, so what failed because the cell was faulted says nothing about the target`;
}
