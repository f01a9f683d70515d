import { describe, expect, it } from 'vitest';
import { HOST_STALL_EVIDENCE_MS, hostMayStallBus, judgeBusStall, latchedDuring, type BusStallEvidence } from './bus-stalls.ts';
import type { CellEvent } from './events.ts';

const PDO_STALE = 4n;
const WORKING_COUNTER = 16n;
const FOLLOWING_ERROR = 32n;

function latch(seq: number, at: bigint, bit: bigint, name: string, axis_mask = 1n): CellEvent {
  return { sequence: BigInt(seq), time_ns: at, type: 'fault_latched', daemon_incarnation: 'd', adapter_incarnation: 'a', fault: { bit, name, axis_mask, recovery: 'reset_after_condition_clears' } };
}

function evidence(o: Partial<BusStallEvidence> & { stall?: number | undefined }): BusStallEvidence {
  return {
    latched: o.latched ?? PDO_STALE,
    events: o.events ?? [latch(3, 1_000_000n, PDO_STALE, 'pdo_stale')],
    injections: o.injections ?? [],
    stallAround: o.stallAround ?? (() => ('stall' in o ? o.stall : 40)),
  };
}

describe('a bus fault the host caused (judgeBusStall)', () => {
  it('pdo_stale latched, nothing injected, the harness stalled around it: the host\'s, with the figures', () => {
    const text = judgeBusStall(evidence({}));
    expect(text).toMatch(/latched pdo_stale \(axes 0x1\) while the harness's own event loop was stalled 40 ms/);
  });

  it('the stall is judged from both sides of the stale window', () => {
    expect(judgeBusStall(evidence({ stall: HOST_STALL_EVIDENCE_MS }))).toBeDefined();
    expect(judgeBusStall(evidence({ stall: HOST_STALL_EVIDENCE_MS - 0.1 }))).toBeUndefined();
    expect(judgeBusStall(evidence({ stall: undefined }))).toBeUndefined();
  });

  it('a working counter short of the expected one counts too; both together need a stall at each', () => {
    const events = [latch(3, 1_000n, PDO_STALE, 'pdo_stale'), latch(4, 9_000_000_000n, WORKING_COUNTER, 'working_counter', 3n)];
    expect(judgeBusStall(evidence({ latched: PDO_STALE | WORKING_COUNTER, events }))).toMatch(/pdo_stale .*working_counter \(axes 0x3\)/);
    expect(judgeBusStall(evidence({ latched: PDO_STALE | WORKING_COUNTER, events, stallAround: (t) => (t === 1_000n ? 40 : 2) }))).toBeUndefined();
  });

  it('a following error a stalled core caused counts, looked for further back (its timeout); any other fault held beside them leaves the failure standing', () => {
    const fe = [latch(4, 2_000n, FOLLOWING_ERROR, 'following_error')];
    const windows: number[] = [];
    expect(judgeBusStall(evidence({ latched: FOLLOWING_ERROR, events: fe, stallAround: (_t, before) => (windows.push(before), 40) }))).toMatch(/following_error/);
    expect(windows).toEqual([300]);
    const events = [latch(3, 1_000n, PDO_STALE, 'pdo_stale'), latch(4, 2_000n, 1n, 'drive_fault')];
    expect(judgeBusStall(evidence({ latched: PDO_STALE | 1n, events }))).toBeUndefined();
    expect(judgeBusStall(evidence({ latched: 1n, events }))).toBeUndefined();
  });

  it('a condition injected and still in force when it latched makes it the injection\'s; one cleared before, or injected after, does not', () => {
    expect(judgeBusStall(evidence({ injections: [{ kind: 'stale', at_ns: 999_999n }] }))).toBeUndefined();
    expect(judgeBusStall(evidence({ injections: [{ kind: 'wkc_drop', at_ns: 1_000_000n }] }))).toBeUndefined();
    expect(judgeBusStall(evidence({ injections: [{ kind: 'clear', at_ns: 10n }, { kind: 'wkc_drop', at_ns: 20n }] }))).toBeUndefined();
    expect(judgeBusStall(evidence({ injections: [{ kind: 'wkc_drop', at_ns: 10n }, { kind: 'clear', at_ns: 20n }] }))).toBeDefined();
    expect(judgeBusStall(evidence({ injections: [{ kind: 'clear', at_ns: 10n }] }))).toBeDefined();
    expect(judgeBusStall(evidence({ injections: [{ kind: 'stale', at_ns: 1_000_001n }] }))).toBeDefined();
  });

  it('the latest latch of a bit is the one judged; a held bit with no latch event, or nothing held, is no evidence', () => {
    const events = [latch(3, 1_000n, PDO_STALE, 'pdo_stale'), latch(9, 5_000n, PDO_STALE, 'pdo_stale')];
    expect(judgeBusStall(evidence({ events, stallAround: (t) => (t === 1_000n ? 40 : 1) }))).toBeUndefined();
    expect(judgeBusStall(evidence({ events, stallAround: (t) => (t === 5_000n ? 40 : 1) }))).toBeDefined();
    expect(judgeBusStall(evidence({ events: [] }))).toBeUndefined();
    expect(judgeBusStall(evidence({ latched: 0n }))).toBeUndefined();
  });

  it('the faults a test had to do with: held when it began (latched, not cleared since) or latched while it ran', () => {
    const ev = (seq: number, at: bigint, type: string, bit: bigint): CellEvent => ({ ...latch(seq, at, bit, 'x'), type });
    const events = [ev(1, 10n, 'fault_latched', PDO_STALE), ev(2, 20n, 'fault_latched', WORKING_COUNTER), ev(3, 30n, 'fault_cleared', WORKING_COUNTER), ev(5, 60n, 'fault_latched', FOLLOWING_ERROR), ev(6, 70n, 'fault_cleared', FOLLOWING_ERROR)];
    expect(latchedDuring(events, 50n)).toBe(PDO_STALE | FOLLOWING_ERROR);
    expect(latchedDuring(events, 25n)).toBe(PDO_STALE | WORKING_COUNTER | FOLLOWING_ERROR);
    expect(latchedDuring([...events].reverse(), 50n)).toBe(PDO_STALE | FOLLOWING_ERROR);
    expect(latchedDuring(events, 80n)).toBe(PDO_STALE);
    expect(latchedDuring([], 0n)).toBe(0n);
  });
});

describe('which targets a bus stall may be judged on at all (hostMayStallBus)', () => {
  const live = { sharesHostClock: true, clock: 'realtime' };
  it('the sim target and a rig rehearsal over the fake master, on the host clock and cycling on it', () => {
    expect(hostMayStallBus({ name: 'sim', driver: 'sim', ...live })).toBe(true);
    expect(hostMayStallBus({ name: 'sim', driver: 'ethercat-fake', ...live })).toBe(true);
    expect(hostMayStallBus({ name: 'rig', driver: 'ethercat-fake', ...live })).toBe(true);
  });
  it('never a bus that is the target\'s own: a real rig, an external target, a replay', () => {
    expect(hostMayStallBus({ name: 'rig', driver: 'ethercat', ...live })).toBe(false);
    expect(hostMayStallBus({ name: 'external', driver: 'external', ...live })).toBe(false);
    expect(hostMayStallBus({ name: 'replay', driver: 'sim', ...live })).toBe(false);
  });
  it('never a core on a stepped or fast clock (its event times are its own, not the host\'s), nor one whose host time is another clock', () => {
    expect(hostMayStallBus({ name: 'sim', driver: 'sim', sharesHostClock: true, clock: 'stepped' })).toBe(false);
    expect(hostMayStallBus({ name: 'sim', driver: 'sim', sharesHostClock: true, clock: 'fast' })).toBe(false);
    expect(hostMayStallBus({ name: 'sim', driver: 'sim', sharesHostClock: true, clock: undefined })).toBe(false);
    expect(hostMayStallBus({ name: 'rig', driver: 'ethercat-fake', sharesHostClock: false, clock: 'realtime' })).toBe(false);
  });
});
