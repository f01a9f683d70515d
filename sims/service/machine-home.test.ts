// The service's side of Home (document 1 part 4 home: "waits up to 60 s"): the bound is the core's, in
// core time, so the service waits for the core's result however long the wall clock takes to get there.

import { EventEmitter } from 'node:events';
import { afterEach, expect, test, vi } from 'vitest';
import { MachineOps } from './machine.ts';
import type { Authority, Grant } from './authority.ts';
import type { CoreLink } from './core-link.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { Request } from './envelope.ts';
import { NATIVE_REASON } from '../core/reasons.ts';

afterEach(() => {
  vi.useRealTimers();
});

function setup() {
  const core = new EventEmitter() as EventEmitter & { command: CoreLink['command'] };
  let sequence = 40n;
  core.command = (async (op: string, generation: bigint, axisMask: number) => ({
    result: { Sequence: ++sequence, Handle: 0n, Generation: generation, Operation: 7, Result: 0, Reason: 0, AxisMask: axisMask },
  })) as unknown as CoreLink['command'];
  const machine = { axes: [{ id: 'J1', index: 0, native_home: true }, { id: 'J2', index: 1, native_home: true }] } as unknown as CompiledMachine;
  const stops: Grant[] = [];
  const ops = new MachineOps(core as unknown as CoreLink, {} as Authority, machine, {} as never, undefined, async (g) => void stops.push(g));
  const grant = { session: 's', generation: 3n } as Grant;
  const home = (mask: number) => ops.home({ schema: 's', operation: 'home', axis_mask: mask } as unknown as Request, grant);
  return { core, ops, stops, home, waiters: () => (ops as unknown as { homeWaiters: Map<bigint, unknown> }).homeWaiters.size };
}

test('a Home the core finishes after 61 s of wall time (a core clock at half speed) succeeds: the service sets no wall-clock bound', async () => {
  vi.useFakeTimers();
  const { core, home, stops, waiters } = setup();
  let settled: { status?: number; label?: string } | undefined;
  const pending = home(0b11).then((r) => (settled = { status: r.status }), (e: { label?: string }) => (settled = { label: e.label }));
  await vi.advanceTimersByTimeAsync(0);
  expect(waiters()).toBe(1);
  // 120 s of wall time: 60 s of core time at --speed 0.5.
  await vi.advanceTimersByTimeAsync(119_000);
  expect(settled).toBeUndefined();
  expect(stops).toEqual([]);
  core.emit('home_done', { sequence: 41n, ok: true, detail: 'homed', reason: NATIVE_REASON.none });
  await pending;
  expect(settled).toEqual({ status: 200 });
  expect(waiters()).toBe(0);
});

test("the core's own 60 s timeout (core time) is the failure: native_rejected with homing_failed, then a stop; no waiter is left", async () => {
  const { core, home, stops, waiters } = setup();
  const pending = home(0b01).catch((e: unknown) => e);
  await new Promise((r) => setImmediate(r));
  core.emit('home_done', { sequence: 41n, ok: false, detail: 'no homing result within 60 s', reason: NATIVE_REASON.homing_failed });
  const e = (await pending) as { label: string; extra?: { native_result?: { Reason: number } } };
  expect(e.label).toBe('native_rejected');
  expect(e.extra?.native_result?.Reason).toBe(NATIVE_REASON.homing_failed);
  expect(stops).toHaveLength(1);
  expect(waiters()).toBe(0);
});
