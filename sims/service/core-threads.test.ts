// Which core incarnations share a kept worker thread (core-threads.ts): a thread back at normal scheduling
// serves any clock of its loop on the simulated bus; one that still holds a raised priority only the same
// real-time request; never one for a real bus master, and each incarnation starts from fresh core state.

import { readdirSync, readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { schedulingOf } from '../../drivers/thread-scheduling.ts';
import { compileMachine } from '../config/compile.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { CoreStartOptions } from '../core/protocol.ts';
import { CoreLink } from './core-link.ts';
import { IdleThreads, keepable, raisedKey, warmThread } from './core-threads.ts';

const MACHINE: CompiledMachine = {
  ...compileMachine(readFileSync(new URL('../../fixtures/machines/bench-two-axis.json', import.meta.url), 'utf8')).machine,
  dir: '',
};

const opts = (o: Partial<CoreStartOptions>): CoreStartOptions => ({ driver: 'sim', clock: { mode: 'stepped' }, ...o }) as CoreStartOptions;

test('only the simulated bus and the paced replay keep their threads; a thread holding a raised priority is kept by loop, clock and priority request', () => {
  expect(keepable(opts({}))).toBe(true);
  expect(keepable(opts({ clock: { mode: 'realtime', spinNs: 0 } }))).toBe(true);
  expect(keepable(opts({ clock: { mode: 'fast', speed: 2 } }))).toBe(true);
  expect(keepable(opts({ driver: 'ethercat-fake' }))).toBe(false);
  expect(keepable(opts({ driver: 'ethercat', clock: { mode: 'realtime', spinNs: 0 } }))).toBe(false);
  expect(keepable(opts({ driver: 'replay', clock: { mode: 'recorded', steps: true } } as Partial<CoreStartOptions>))).toBe(true);
  const rt = (priority?: CoreStartOptions['priority']) => raisedKey('core', opts({ clock: { mode: 'realtime', spinNs: 0 }, ...(priority ? { priority } : {}) }));
  // No priority request is 'auto' (host.ts raiseThreadPriority).
  expect(rt()).toBe(rt('auto'));
  expect(rt('none')).not.toBe(rt('auto'));
  expect(rt('rt')).not.toBe(rt('auto'));
  expect(raisedKey('core', opts({}))).not.toBe(rt('none'));
  expect(raisedKey('core', opts({ clock: { mode: 'fast', speed: 2 } }))).not.toBe(raisedKey('core', opts({})));
  expect(raisedKey('replay-core', opts({ clock: { mode: 'realtime', spinNs: 0 } }))).not.toBe(rt());
});

test('a thread at normal scheduling serves any clock of its loop; one still holding a raised priority only the same real-time request, and that one first', () => {
  const realtime = (priority?: CoreStartOptions['priority']) => opts({ clock: { mode: 'realtime', spinNs: 0 }, ...(priority ? { priority } : {}) });
  const stepped = opts({});
  const fast = opts({ clock: { mode: 'fast', speed: 2 } });

  // Normal threads: whatever clock ended on them, any clock of the loop takes them; another loop does not.
  const a = new IdleThreads<string>();
  expect(a.put('core', 'after-realtime')).toBe(true);
  expect(a.take('replay-core', stepped)).toBeUndefined();
  expect(a.take('core', stepped)).toBe('after-realtime');
  expect(a.take('core', stepped)).toBeUndefined();
  expect(a.put('core', 'after-stepped')).toBe(true);
  expect(a.take('core', realtime('rt'))).toBe('after-stepped');
  expect(a.put('core', 'after-fast')).toBe(true);
  expect(a.normal('core')).toBe(1);
  expect(a.take('core', realtime())).toBe('after-fast');

  // A thread that kept its raised priority: never to a stepped or fast core, nor to another request.
  const b = new IdleThreads<string>();
  expect(b.put('core', 'raised', realtime('auto'))).toBe(true);
  expect(b.normal('core')).toBe(0);
  expect(b.take('core', stepped)).toBeUndefined();
  expect(b.take('core', fast)).toBeUndefined();
  expect(b.take('core', realtime('rt'))).toBeUndefined();
  expect(b.take('core', realtime('none'))).toBeUndefined();
  // The same request (no request is 'auto') takes it, before a normal thread.
  expect(b.put('core', 'normal')).toBe(true);
  expect(b.take('core', realtime())).toBe('raised');
  expect(b.take('core', realtime())).toBe('normal');

  // At most two wait in each list; a third is refused (its thread ends).
  const c = new IdleThreads<number>();
  expect([1, 2, 3].map((n) => c.put('core', n))).toEqual([true, true, false]);
  expect([4, 5, 6].map((n) => c.put('core', n, realtime()))).toEqual([true, true, false]);
});

test('a stepped core\'s thread serves the next stepped incarnation with fresh core state, then a real-time one, then a stepped one again', async () => {
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

  // Real time, asking for no priority raise (so the test changes nothing of the host's scheduling): the same
  // thread, cycling on its own from a fresh core.
  const r = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'realtime', spinNs: 0 }, priority: 'none', captureRetentionMs: 0 });
  await r.start();
  expect(r.threadId).toBe(first);
  expect(await r.statusFrom(3n, 5_000)).toBe(true);
  expect(r.status!.clock.mode).toBe('realtime');
  await r.shutdown();

  // And back to a stepped core, which cycles only when stepped.
  const c = await stepped();
  expect(c.threadId).toBe(first);
  await c.step(2);
  expect(await c.statusFrom(2n, 2_000)).toBe(true);
  expect(c.status!.cycle).toBe(2n);
  await c.shutdown();
});

test('a thread made ahead of any incarnation (a stack host about to serve them) serves the first one, from its start; none is made while one waits', async () => {
  // The tests before left a kept thread waiting: no thread is made while it waits. A stepped core takes it.
  const busy = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0 });
  await busy.start();
  try {
    const warmed = warmThread('fast');
    expect(warmed).toBeTypeOf('number');
    expect(warmed).not.toBe(busy.threadId);
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
  } finally {
    await busy.shutdown();
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
