// A bus fault the host caused (DESIGN.md rule 6: a slow host is not a broken target). The reference stack on
// the sim target simulates its bus on the harness's own host: the fake EtherCAT master cycles in a thread of
// the stack, and when the host gives that thread no CPU for a few cycles the core sees its feedback go stale
// and latches pdo_stale, or a working counter short of the expected one (docs/profile.md "Execution fault
// bits": both latch within a few cycles of a stalled bus); a core left without CPU for tens of cycles jumps
// its setpoints and its simulated drive trips on following error. That is the stack doing what it must with
// a bus or a cycle that stalled; the stall was the host's. A test that then fails because the cell is faulted (an enable
// refused not_ready: latched faults) says nothing about the target.
//
// judgeBusStall decides it from evidence only: every fault the test had to do with (held when it began or
// latched while it ran) is one of those, no injected condition was in force when it latched (the last
// injection before it was a clear), and the harness's own event loop (harness/lateness.ts) was stalled
// around the moment it latched, past the window in which the stack latches and past a quiet host's
// hiccups. Otherwise the failure stands: a stack that latches such a fault on a quiet host, or any other
// fault, still FAILs.

import type { CellEvent } from './events.ts';

/**
 * Whether a failure on this target may be judged at all as a stall of its bus by this host: only a bus this
 * host simulates (the sim target's, or a rig rehearsal's fake master; a real rig's bus and its stalls are the
 * target's), on a stack whose host time is this process's clock (so its event times compare with the
 * harness's own lateness), cycling on that clock (Describe clock "realtime"). A stepped or fast core runs a
 * bus cycle per step whatever the host does, and stamps its events with its own time, which lags the host's:
 * read as host time, a fault a planted sluggish drive latched looked latched before the plant, beside a stall
 * of the harness, and a true FAIL became HIL_ERR_HOST_TOO_SLOW.
 */
export function hostMayStallBus(t: { name: string; driver: string; sharesHostClock: boolean; clock: unknown }): boolean {
  return simulatesBusHere(t) && t.sharesHostClock && t.clock === 'realtime';
}

/** The sim target's bus, or a rig rehearsal's fake master: a bus this host simulates. */
export function simulatesBusHere(t: { name: string; driver: string }): boolean {
  return t.name === 'sim' || (t.name === 'rig' && t.driver === 'ethercat-fake');
}

/**
 * Fault names a stall on this host latches, each with how long before the latch the stall may have been, ms:
 * a stalled simulated bus latches pdo_stale or working_counter within a few cycles (docs/profile.md
 * "Execution fault bits"); a core late by tens of cycles jumps its setpoints, and the simulated drive's
 * following error (document 1 fault bit 5) latches once it has stayed past the limit for the axis's
 * following_error_timeout_ms (50-100 ms in the fixtures).
 */
export const HOST_STALL_FAULTS: ReadonlyMap<string, number> = new Map([
  ['pdo_stale', 100],
  ['working_counter', 100],
  ['following_error', 300],
]);

/**
 * How long a stall must last for the stack to latch, ms: the fake master counts its inputs stale after 3 cycles without an exchange and the core latches pdo_stale after
 * 5 stale cycles, 8 ms at the 1 ms cycle.
 */
export const BUS_STALL_MS = 8;
/**
 * The harness's own stall around the latch that shows the host stalled, ms: above the 8 ms the stack needs,
 * and above the hiccups of a quiet host's event loop (a collection, a compile: up to about 10 ms here), so
 * that a stack latching such a fault on a quiet host still FAILs.
 */
export const HOST_STALL_EVIDENCE_MS = 25;
/** How long after the latch a stall still counts (the latch itself may have waited for the CPU), ms. */
export const STALL_WINDOW_AFTER_MS = 20;

export interface BusStallEvidence {
  /** The fault bits (values) in question: held when the test began or latched while it ran (latchedDuring). */
  latched: bigint;
  /** The cell's events (fault_latched among them), any order. */
  events: readonly CellEvent[];
  /** What the run injected into this target through its test channel, in order, with the host time of each. */
  injections: readonly { kind: string; at_ns: bigint }[];
  /** The harness's worst event-loop stall in [t - beforeMs, t + STALL_WINDOW_AFTER_MS] around a host time t (ns), ms; undefined when not sampled. */
  stallAround(tNs: bigint, beforeMs: number): number | undefined;
}

interface FaultPayload {
  bit?: unknown;
  name?: unknown;
  axis_mask?: unknown;
}

/**
 * The fault bits (values) a test had to do with, from the cell's events: those held when it began (latched
 * and not cleared before `startNs`) and those latched since. Read from events, not Status, because a
 * file's own recovery may have reset them before the failure is judged.
 */
export function latchedDuring(events: readonly CellEvent[], startNs: bigint): bigint {
  let held = 0n;
  let since = 0n;
  for (const x of [...events].sort((a, b) => (a.sequence < b.sequence ? -1 : a.sequence > b.sequence ? 1 : 0))) {
    const bit = (x.fault as FaultPayload | undefined)?.bit;
    if (typeof bit !== 'bigint') continue;
    if (x.time_ns < startNs) {
      if (x.type === 'fault_latched') held |= bit;
      else if (x.type === 'fault_cleared') held &= ~bit;
    } else if (x.type === 'fault_latched') since |= bit;
  }
  return held | since;
}

/** The figures when the host, not the target, latched every fault the test had to do with; else undefined. */
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
    const before = last ? HOST_STALL_FAULTS.get(last.f.name as string) : undefined;
    if (!last || before === undefined) return undefined;
    // An injected condition still in force when it latched (not cleared since) makes it the injection's.
    const injected = e.injections.filter((i) => i.at_ns <= last.at);
    if (injected.length > 0 && injected[injected.length - 1]!.kind !== 'clear') return undefined;
    const stall = e.stallAround(last.at, before);
    if (stall === undefined || stall < HOST_STALL_EVIDENCE_MS) return undefined;
    parts.push(`${last.f.name as string} (axes ${typeof last.f.axis_mask === 'bigint' ? `0x${last.f.axis_mask.toString(16)}` : '?'}) while the harness's own event loop was stalled ${stall} ms`);
  }
  return `the reference stack simulates its bus on this host and latched ${parts.join(', ')} around that moment (a stall of ${BUS_STALL_MS} ms latches it; no injected condition was in force): the host was too slow for the simulated cell, so what failed because the cell was faulted says nothing about the target`;
}
