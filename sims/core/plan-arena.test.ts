// The plan arena (plan-arena.ts): slots claimed by the service, adopted by the core with a prepare, given
// back when the core lets the plan go; plans written in place build exactly as plans sent as arrays, and
// are recorded the same way (docs/recording.md: a recording keeps the arrays, never workspace memory).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { RecordingReader } from '../../drivers/replay/format.ts';
import type { CompiledMachine } from '../config/types.ts';
import { CoreLink } from '../service/core-link.ts';
import { TrajectoryDecoder } from '../service/upload/decoder.ts';
import { CoreHost } from './host.ts';
import { PLAN_ARENA_SLOTS, PLAN_MAX_POINTS, PlanArena, PlanLease } from './plan-arena.ts';
import type { CoreStartOptions, FromCore, PlanArrays, PlanWorkspace, ToCore } from './protocol.ts';
import { NATIVE_REASON } from './reasons.ts';
import { nineAxisMachine } from './test-machine.ts';

const MACHINE: CompiledMachine = nineAxisMachine();
const N = MACHINE.axes.length;
const ALL = (1 << N) - 1;
const FOREVER = 1n << 62n;

test('slots: claimed lowest first until none is free, given back by the service only while it holds them, by the core only when no plan keeps them', () => {
  const a = PlanArena.create(N);
  expect(a.slots).toBe(PLAN_ARENA_SLOTS);
  expect(a.maxPoints).toBe(PLAN_MAX_POINTS);
  expect(a.free).toBe(2);
  expect(a.claim()).toBe(0);
  expect(a.claim()).toBe(1);
  expect(a.claim()).toBe(-1); // every slot in use: the caller takes the path of arrays of its own
  a.release(1);
  expect(a.state(1)).toBe('free');
  expect(a.claim()).toBe(1);
  // The core adopts slot 0 with a prepare: the service can no longer give it back.
  a.adopt(0);
  a.release(0);
  expect(a.state(0)).toBe('core');
  // keep() frees only what the core holds and no plan names; a slot the service holds is never touched.
  a.keep(0, undefined, undefined);
  expect(a.state(0)).toBe('core');
  expect(a.state(1)).toBe('held');
  a.keep(undefined, undefined, undefined);
  expect(a.state(0)).toBe('free');
  expect(a.state(1)).toBe('held');
  // The other thread's view of the same memory sees the same states.
  const b = PlanArena.attach(a.buffer);
  expect([b.axes, b.maxPoints, b.slots, b.state(1)]).toEqual([N, PLAN_MAX_POINTS, 2, 'held']);
  expect(() => PlanArena.attach(new SharedArrayBuffer(64))).toThrow(RangeError);
});

test('a lease is released once, and never after it was handed to the core', () => {
  const a = PlanArena.create(2, { slots: 1, maxPoints: 8 });
  const l = new PlanLease(a, a.claim());
  l.handOver();
  l.release();
  expect(a.state(0)).toBe('held'); // the core's to give back now (it adopts it on receipt)
  a.release(0);
  const m = new PlanLease(a, a.claim());
  m.release();
  m.release();
  expect(a.free).toBe(1);
  expect(a.claim()).toBe(0);
});

test('slots do not overlap, and a plan larger than a slot does not fit', () => {
  const a = PlanArena.create(3, { slots: 2, maxPoints: 10 });
  const s0 = a.storage(0);
  const s1 = a.storage(1);
  const w0 = a.workspace(0, 10);
  const w1 = a.workspace(1, 10);
  const all = [s0.timeNs, s0.position, s0.velocity, s0.hasVelocity, s0.ioMask, s0.ioValues, s0.ioFlags, w0.t, w0.q, w0.qd, s1.timeNs, s1.position, s1.velocity, s1.hasVelocity, s1.ioMask, s1.ioValues, s1.ioFlags, w1.t, w1.q, w1.qd];
  const spans = all.map((x) => [x.byteOffset, x.byteOffset + x.byteLength] as const).sort((p, q) => p[0] - q[0]);
  for (let i = 1; i < spans.length; i++) expect(spans[i]![0]).toBeGreaterThanOrEqual(spans[i - 1]![1]);
  expect(spans.at(-1)![1]).toBeLessThanOrEqual(a.buffer.byteLength);
  expect(() => a.workspace(0, 11)).toThrow(RangeError);
  expect(() => a.plan(0, 11, true)).toThrow(RangeError);
  expect(() => a.storage(2)).toThrow(RangeError);
  // A plan without velocities carries none (protocol.ts PlanArrays).
  expect(a.plan(0, 4, false).velocity.length).toBe(0);
  expect(a.plan(0, 4, true).velocity.length).toBe(12);
});

test('the workspace is written once per slot up to the most points it held, not again for a smaller or equal plan', () => {
  const a = PlanArena.create(2, { slots: 1, maxPoints: 100 });
  const w = a.workspace(0, 50);
  w.q.fill(7);
  // Written before (50 points): left as the last plan left it; the core overwrites every element it reads.
  expect(a.workspace(0, 50).q[0]).toBe(7);
  const bigger = a.workspace(0, 80);
  expect(bigger.q[99]).toBe(7);
  expect(bigger.q[100]).toBe(0);
});

test('the upload decoder writes into a used slot exactly what it writes into arrays of its own, and refuses the 250001st point inside it', () => {
  const axes = 2;
  const a = PlanArena.create(axes, { slots: 1 });
  const s = a.storage(0);
  // What an earlier plan left behind.
  for (const x of [s.timeNs, s.position, s.velocity, s.hasVelocity, s.ioMask, s.ioValues, s.ioFlags]) new Uint8Array(x.buffer, x.byteOffset, x.byteLength).fill(0xa5);
  const body = Buffer.from(
    JSON.stringify({
      schema: 'svc.rt-control.request.v1', operation: 'prepare_trajectory', session: '1', generation: 1, axis_mask: 3,
      points: [{ time_ns: 0, position: [1, 2] }, { time_ns: 5, position: [3, 4], velocity: [0.5, -0.5], io_mask: 1, io_values: 1 }, { time_ns: 9, position: [5, 6], velocity: [] }],
    }),
  );
  const own = new TrajectoryDecoder({ axes });
  own.push(body);
  const inSlot = new TrajectoryDecoder({ axes, storage: s });
  inSlot.push(body);
  const p = own.finish().points;
  const q = inSlot.finish().points;
  expect(q.timeNs.buffer).toBe(a.buffer);
  for (const k of ['timeNs', 'position', 'hasVelocity', 'ioMask', 'ioValues', 'ioFlags'] as const) expect([...q[k]], k).toEqual([...p[k]]);
  expect([...q.velocity].map(String)).toEqual([...p.velocity].map(String)); // NaN rows where a point has none
  // More than the documented maximum: the decoder's own refusal, nothing written past the slot.
  const over = new TrajectoryDecoder({ axes, storage: a.storage(0) });
  over.push(Buffer.from('{"schema":"svc.rt-control.request.v1","operation":"prepare_trajectory","session":"1","generation":1,"axis_mask":3,"points":['));
  const point = Buffer.from('{"time_ns":1,"position":[0,0]},');
  const chunk = Buffer.concat(Array.from({ length: 1000 }, () => point));
  for (let k = 0; k <= PLAN_MAX_POINTS / 1000; k++) over.push(chunk);
  over.push(Buffer.from('{"time_ns":1,"position":[0,0]}]}'));
  expect(() => over.finish()).toThrow(expect.objectContaining({ code: 'point_count', label: 'invalid_request_envelope' }));
});

// ---- the core's side ----

async function steppedHost(extra: Partial<CoreStartOptions> = {}) {
  const sent: FromCore[] = [];
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, ...extra }, (m) => sent.push(m));
  host.handle({ t: 'grant', generation: 7n, deadlineNs: FOREVER, active: true, axisMask: ALL });
  const ready = sent.find((m) => m.t === 'ready') as Extract<FromCore, { t: 'ready' }>;
  // The service's view of the arena, as the core link attaches it from 'ready'.
  const arena = ready.planArena ? PlanArena.attach(ready.planArena) : undefined;
  const reply = (id: number) => sent.find((m): m is Extract<FromCore, { t: 'reply' }> => m.t === 'reply' && m.id === id);
  let cmdId = 10_000;
  const cmd = (op: Extract<ToCore, { t: 'cmd' }>['op'], axisMask = 0, handle?: bigint) => {
    const id = cmdId++;
    host.handle({ t: 'cmd', id, op, generation: 7n, axisMask, ...(handle !== undefined ? { handle } : {}) });
    return reply(id)!;
  };
  const stepUntil = (done: () => boolean, limit: number) => {
    for (let k = 0; k < limit && !done(); k++) host.cycle();
    expect(done()).toBe(true);
  };
  return { host, sent, arena, reply, cmd, stepUntil };
}

/** J1 from `from` to `to` over `ms`, every other axis holding `hold`: a plan's arrays of its own. */
function ramp(hold: number[], from: number, to: number, ms: number, n = 3): PlanArrays {
  const timeNs = new BigInt64Array(n);
  const position = new Float64Array(n * N);
  for (let k = 0; k < n; k++) {
    timeNs[k] = (BigInt(ms) * 1_000_000n * BigInt(k)) / BigInt(n - 1);
    for (let i = 0; i < N; i++) position[k * N + i] = hold[i]!;
    position[k * N] = from + ((to - from) * k) / (n - 1);
  }
  return { timeNs, position, velocity: new Float64Array(0), hasVelocity: new Uint8Array(n), ioMask: new Uint32Array(n), ioValues: new Uint32Array(n) };
}

/** The same plan written into a slot, as the upload worker does: views of the slot and its workspace. */
function written(arena: PlanArena, slot: number, p: PlanArrays): PlanArrays & { workspace: PlanWorkspace; slot: number } {
  const n = p.timeNs.length;
  const v = arena.plan(slot, n, p.velocity.length > 0);
  v.timeNs.set(p.timeNs);
  v.position.set(p.position);
  v.velocity.set(p.velocity);
  v.hasVelocity.set(p.hasVelocity);
  v.ioMask.set(p.ioMask);
  v.ioValues.set(p.ioValues);
  const { ioFlags: _f, ...arrays } = v;
  return { ...arrays, workspace: arena.workspace(slot, n), slot };
}

const prepare = (id: number, handle: bigint, p: PlanArrays, axisMask = 1) => ({ t: 'prepare' as const, id, generation: 7n, handle, axisMask, ...p });

test('a plan in a slot builds the plan arrays build, in the slot; a refused, superseded or discarded plan gives its slot back at once', async () => {
  const { host, arena, reply, cmd } = await steppedHost();
  const core = host.core;
  expect(arena).toBeDefined();
  const hold = core.status(core.now).axes.map((x) => x.position);
  const plan = ramp(hold, hold[0]!, hold[0]! + 0.01, 1000);
  const s = arena!.claim();
  host.handle({ ...prepare(1, 5n, written(arena!, s, plan)) });
  expect(reply(1)!.result).toMatchObject({ Result: 2, Handle: 5n });
  expect(arena!.state(s)).toBe('core');
  expect(core.preparedPlan!.slot).toBe(s);
  expect(core.preparedPlan!.q.buffer).toBe(core.planArena!.buffer); // built in the slot's workspace
  const inSlot = { t: [...core.preparedPlan!.t], q: [...core.preparedPlan!.q], qd: [...core.preparedPlan!.qd] };
  // The same plan as arrays of its own: the same plan.
  host.handle(prepare(2, 6n, ramp(hold, hold[0]!, hold[0]! + 0.01, 1000)));
  expect(reply(2)!.result).toMatchObject({ Result: 2, Handle: 6n });
  expect({ t: [...core.preparedPlan!.t], q: [...core.preparedPlan!.q], qd: [...core.preparedPlan!.qd] }).toEqual(inSlot);
  // Superseded by handle 6 (arrays): the slot is free again without a cycle.
  expect(arena!.state(s)).toBe('free');
  // Refused at prepare (outside limits): the slot comes back with the refusal.
  const r = arena!.claim();
  const a = MACHINE.axes[0]!;
  host.handle(prepare(3, 7n, written(arena!, r, ramp(hold, hold[0]!, a.max_position + 0.001, 1000))));
  expect(reply(3)!.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.outside_limits_outward });
  expect(arena!.state(r)).toBe('free');
  // Discarded: free, and claimed again by the next plan, which builds as if the slot were new.
  const d = arena!.claim();
  host.handle(prepare(4, 8n, written(arena!, d, plan)));
  expect(reply(4)!.result.Result).toBe(2);
  expect(cmd('discard', 0, 8n).result).toMatchObject({ Result: 0 });
  expect(arena!.state(d)).toBe('free');
  expect(arena!.claim()).toBe(d);
  host.handle(prepare(5, 9n, written(arena!, d, ramp(hold, hold[0]!, hold[0]! + 0.01, 1000))));
  expect(reply(5)!.result.Result).toBe(2);
  expect({ t: [...core.preparedPlan!.t], q: [...core.preparedPlan!.q], qd: [...core.preparedPlan!.qd] }).toEqual(inSlot);
});

test('two plans at once keep their slots (one executing, one prepared); a third comes as arrays; completion gives the slot back', async () => {
  const { host, sent, arena, reply, cmd, stepUntil } = await steppedHost();
  const core = host.core;
  expect(cmd('home', 1).result.Result).toBe(0);
  stepUntil(() => sent.some((m) => m.t === 'home_done'), 2_000);
  cmd('enable', ALL);
  stepUntil(() => core.status(core.now).enable_mask === ALL, 30);
  expect(cmd('arm').result.Result).toBe(0);
  const hold = core.status(core.now).axes.map((x) => x.position);
  const a = arena!.claim();
  host.handle(prepare(1, 11n, written(arena!, a, ramp(hold, hold[0]!, hold[0]! + 0.01, 200))));
  expect(reply(1)!.result.Result).toBe(2);
  expect(cmd('start', 0, 11n).result, 'start').toMatchObject({ Result: 0, Handle: 11n });
  const b = arena!.claim();
  host.handle(prepare(2, 12n, written(arena!, b, ramp(hold, hold[0]! + 0.01, hold[0]!, 200))));
  expect(reply(2)!.result.Result).toBe(2);
  host.cycle();
  expect([arena!.state(a), arena!.state(b)]).toEqual(['core', 'core']);
  // No slot left: the service's orderly fallback is a plan of arrays, which supersedes the prepared one.
  expect(arena!.claim()).toBe(-1);
  host.handle(prepare(3, 13n, ramp(hold, hold[0]! + 0.01, hold[0]!, 200)));
  expect(reply(3)!.result.Result).toBe(2);
  expect(arena!.state(b)).toBe('free');
  expect(arena!.state(a)).toBe('core'); // still executing
  stepUntil(() => sent.some((m) => m.t === 'event' && m.type === 'native_execution'), 1_000);
  host.cycle();
  expect(arena!.state(a)).toBe('free');
  await host.close();
});

test('a recorded plan written in a slot is recorded as the same plan sent as arrays: its arrays, no workspace, no slot', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'arena-rec-'));
  try {
    const notesOf = async (inSlot: boolean) => {
      const path = join(dir, `${inSlot}.hilrec`);
      const { host, arena, reply } = await steppedHost({ record: { path } });
      const hold = host.core.status(host.core.now).axes.map((x) => x.position);
      host.cycle();
      const plan = ramp(hold, hold[0]!, hold[0]! + 0.01, 1000, 5);
      host.handle(prepare(1, 5n, inSlot ? written(arena!, arena!.claim(), plan) : plan));
      expect(reply(1)!.result.Result).toBe(2);
      host.cycle();
      await host.close();
      const r = RecordingReader.open(path);
      const notes: unknown[] = [];
      while (r.next()) notes.push(...r.takeNotes());
      return notes.filter((n) => (n as { kind: string }).kind === 'request').map((n) => (n as { data: unknown }).data);
    };
    const arrays = await notesOf(false);
    const slot = await notesOf(true);
    expect(slot).toEqual(arrays);
    const recorded = JSON.stringify(slot);
    expect(recorded).toContain('"timeNs"');
    expect(recorded).not.toMatch(/workspace|"slot"/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('every core incarnation has an arena of its own, all free; a paced replay and planArena false have none', async () => {
  const first = await steppedHost();
  const second = await steppedHost();
  expect(first.arena!.claim()).toBe(0);
  expect(second.arena!.buffer).not.toBe(first.arena!.buffer);
  expect(second.arena!.free).toBe(PLAN_ARENA_SLOTS);
  const off = await steppedHost({ planArena: false });
  expect(off.arena).toBeUndefined();
  expect(off.host.core.planArena).toBeNull();
  for (const h of [first, second, off]) await h.host.close();
});

test('a core restart during an upload: the slot of the old arena reaches the new core as arrays of their own, and the old slot is given back', async () => {
  const link = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0 });
  await link.start();
  try {
    const old = link.planArena!;
    const lease = new PlanLease(old, old.claim());
    // The stepped core publishes in its steps: one, for the hold positions.
    await link.step(1);
    const hold = link.status!.axes.map((x) => x.position);
    const p = written(old, lease.slot, ramp(hold, hold[0]!, hold[0]! + 0.01, 1000));
    // The service starts the next incarnation when the core exits (as sims/service/core-link.test.ts does).
    link.on('exit', () => void link.start());
    await link.crash();
    expect(link.planArena).toBeDefined();
    expect(link.planArena!.buffer).not.toBe(old.buffer);
    link.post({ t: 'grant', generation: 7n, deadlineNs: FOREVER, active: true, axisMask: ALL });
    const { workspace, slot: _s, ...arrays } = p;
    const n = await link.prepare({ generation: 7n, handle: 3n, axisMask: 1, ...arrays }, workspace, lease);
    expect(n.result).toMatchObject({ Result: 2, Handle: 3n });
    expect(old.state(lease.slot)).toBe('free');
    expect(link.planArena!.free).toBe(PLAN_ARENA_SLOTS); // the new core built it in memory of its own
  } finally {
    await link.shutdown();
  }
});
