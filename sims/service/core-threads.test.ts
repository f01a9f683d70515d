// Which core incarnations share a kept worker thread (core-threads.ts): the same loop, clock and
// scheduling request on the simulated bus; never a thread of another clock or priority request, never one
// for a real bus master, and each incarnation starts from fresh core state.

import { readdirSync, readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { schedulingOf } from '../../drivers/thread-scheduling.ts';
import { compileMachine } from '../config/compile.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { CoreStartOptions } from '../core/protocol.ts';
import { CoreLink } from './core-link.ts';
import { idleKey, keepable, warmThread } from './core-threads.ts';

const MACHINE: CompiledMachine = {
  ...compileMachine(readFileSync(new URL('../../fixtures/machines/bench-two-axis.json', import.meta.url), 'utf8')).machine,
  dir: '',
};

const opts = (o: Partial<CoreStartOptions>): CoreStartOptions => ({ driver: 'sim', clock: { mode: 'stepped' }, ...o }) as CoreStartOptions;

test('only the simulated bus and the paced replay keep their threads; the kind a thread serves is its loop, clock and (real time) priority request', () => {
  expect(keepable(opts({}))).toBe(true);
  expect(keepable(opts({ clock: { mode: 'realtime', spinNs: 0 } }))).toBe(true);
  expect(keepable(opts({ clock: { mode: 'fast', speed: 2 } }))).toBe(true);
  expect(keepable(opts({ driver: 'ethercat-fake' }))).toBe(false);
  expect(keepable(opts({ driver: 'ethercat', clock: { mode: 'realtime', spinNs: 0 } }))).toBe(false);
  expect(keepable(opts({ driver: 'replay', clock: { mode: 'recorded', steps: true } } as Partial<CoreStartOptions>))).toBe(true);
  const rt = (priority?: CoreStartOptions['priority']) => idleKey('core', opts({ clock: { mode: 'realtime', spinNs: 0 }, ...(priority ? { priority } : {}) }));
  // No priority request is 'auto' (host.ts raiseThreadPriority).
  expect(rt()).toBe(rt('auto'));
  expect(rt('none')).not.toBe(rt('auto'));
  expect(rt('rt')).not.toBe(rt('auto'));
  expect(idleKey('core', opts({}))).not.toBe(rt('none'));
  expect(idleKey('core', opts({ clock: { mode: 'fast', speed: 2 } }))).not.toBe(idleKey('core', opts({})));
});

test('a stepped core\'s thread serves the next stepped incarnation with fresh core state; a real-time incarnation gets a thread of its own, and its own again next time', async () => {
  const stepped = async () => {
    const l = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0 });
    await l.start();
    return l;
  };
  const a = await stepped();
  const first = a.threadId;
  await a.step(5);
  expect(await a.statusFrom(5n, 2_000)).toBe(true);
  await a.shutdown();

  const b = await stepped();
  expect(b.threadId).toBe(first);
  // Fresh state: the kept thread's new core starts again from cycle 0 (one step: its status says cycle 1).
  await b.step(1);
  expect(await b.statusFrom(1n, 2_000)).toBe(true);
  expect(b.status!.cycle).toBe(1n);
  await b.shutdown();

  // Real time, asking for no priority raise (so the test changes nothing of the host's scheduling): not the stepped thread.
  const realtime = async () => {
    const l = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'realtime', spinNs: 0 }, priority: 'none', captureRetentionMs: 0 });
    await l.start();
    return l;
  };
  const r1 = await realtime();
  const rtThread = r1.threadId;
  expect(rtThread).not.toBe(first);
  await r1.shutdown();
  const r2 = await realtime();
  expect(r2.threadId).toBe(rtThread);
  await r2.shutdown();

  // The stepped thread is still there for a stepped core.
  const c = await stepped();
  expect(c.threadId).toBe(first);
  await c.shutdown();
});

test('a thread made ahead of any incarnation (a stack host about to serve them) serves the first one of its clock, from its start', async () => {
  const warmed = warmThread('fast');
  expect(warmed).toBeTypeOf('number');
  // One is enough: a second call makes none while the first waits.
  expect(warmThread('fast')).toBeUndefined();
  const l = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'fast', speed: 50 }, captureRetentionMs: 0 });
  await l.start();
  try {
    expect(l.threadId).toBe(warmed);
    expect(await l.statusFrom(5n, 5_000)).toBe(true);
  } finally {
    await l.shutdown();
  }
});

/** The threads of this process under SCHED_FIFO (a thread that ended while we looked reads as none). */
function fifoThreads(): string[] {
  return readdirSync('/proc/self/task').filter((tid) => schedulingOf(`/proc/self/task/${tid}/stat`)?.startsWith('SCHED_FIFO'));
}

test('a real-time core\'s kept thread gives its SCHED_FIFO back when its incarnation ends, and takes it again for the next', async ({ skip }) => {
  skip(process.platform !== 'linux', 'thread scheduling is read from /proc (Linux)');
  const before = fifoThreads();
  const rt = async () => {
    const l = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'realtime', spinNs: 0 }, priority: 'rt', captureRetentionMs: 0 });
    await l.start();
    expect(await l.statusFrom(2n, 5_000)).toBe(true);
    return l;
  };
  const a = await rt();
  if (a.status!.clock.scheduling !== 'SCHED_FIFO 40') {
    await a.shutdown();
    skip(true, `SCHED_FIFO is not permitted here (${a.status!.clock.scheduling}): nothing to give back`);
  }
  const fifo = fifoThreads().filter((t) => !before.includes(t));
  expect(fifo, 'the cycling thread runs at SCHED_FIFO').toHaveLength(1);
  const thread = a.threadId;
  await a.shutdown();
  // The thread is kept for the next incarnation (same kind); while it waits it is back at normal scheduling.
  // It gives the priority back as its cycling ends, before the incarnation's end reaches this thread.
  expect(fifoThreads().filter((t) => !before.includes(t)), 'no thread left at SCHED_FIFO after the incarnation').toEqual([]);
  const b = await rt();
  try {
    expect(b.threadId).toBe(thread);
    expect(b.status!.clock.scheduling).toBe('SCHED_FIFO 40');
    expect(fifoThreads().filter((t) => !before.includes(t))).toEqual(fifo);
  } finally {
    await b.shutdown();
  }
  expect(fifoThreads().filter((t) => !before.includes(t))).toEqual([]);
});
