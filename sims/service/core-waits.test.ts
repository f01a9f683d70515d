// The service's timed waits on the core as recorded decisions (replay-timing.ts CoreWaits): noted in order on a recorded
// run; on a replay a wait answered when recorded gets the replay bound and, run out all the same, is a lost
// hold; a wait that ran out when recorded keeps its own bound; polling waits are neither noted nor held.

import { expect, test } from 'vitest';
import { CoreWaits, REPLAY_WAIT_MS } from './replay-timing.ts';

test('recorded: every wait of a kind is noted with its outcome, in order; a polling wait (null) is not', () => {
  const notes: string[] = [];
  const w = new CoreWaits((d) => notes.push(`${d.kind}:${d.outcome}${d.cycle !== undefined ? `@${d.cycle}` : ''}`));
  const a = w.begin('cmd:enable', 1000);
  const b = w.begin('status', 1000);
  const poll = w.begin(null, 50);
  const c = w.begin('status', 1000);
  expect([a.ms, b.ms, poll.ms]).toEqual([1000, 1000, 50]);
  b.done('timeout');
  a.done('ok');
  poll.done('timeout');
  c.done('ok', 125n); // a status wait notes the publication it got
  expect(notes).toEqual(['status:timeout', 'cmd:enable:ok', 'status:ok@125']);
});

test('replayed: an answered wait gets the replay bound and is a lost hold if it runs out; one that ran out keeps its bound', () => {
  const lost: string[] = [];
  const notes: string[] = [];
  const w = new CoreWaits((d) => notes.push(d.kind), (k) => lost.push(k));
  w.load([
    { kind: 'status', outcome: 'ok' },
    { kind: 'cmd:recovery_status', outcome: 'timeout' },
    { kind: 'status', outcome: 'timeout' },
  ]);
  const s1 = w.begin('status', 1000);
  expect(s1.ms).toBe(REPLAY_WAIT_MS);
  const r = w.begin('cmd:recovery_status', 1000);
  expect(r.ms).toBe(1000);
  const s2 = w.begin('status', 1000);
  expect(s2.ms).toBe(1000); // the second status wait ran out when recorded
  const extra = w.begin('status', 1000); // more waits than recorded: their own bound
  expect(extra.ms).toBe(1000);
  r.done('timeout');
  s2.done('timeout');
  extra.done('timeout');
  expect(lost).toEqual([]);
  s1.done('timeout');
  expect(lost).toEqual(['status']);
  expect(notes).toEqual([]); // a replay notes nothing into a recording
  // the bound never shrinks: a wait longer than the replay bound keeps its own
  w.load([{ kind: 'cmd:home', outcome: 'ok' }]);
  expect(w.begin('cmd:home', 60_000).ms).toBe(60_000);
});

test('replayed: a status wait whose recording got publication P is ended by a publication of at least P, not an older one', () => {
  const w = new CoreWaits();
  w.load([{ kind: 'status', outcome: 'ok', cycle: 125n }, { kind: 'status', outcome: 'timeout' }, { kind: 'status', outcome: 'ok' }]);
  expect(w.begin('status', 1000).atLeast).toBe(125n);
  expect(w.begin('status', 1000).atLeast).toBeUndefined(); // ran out when recorded
  expect(w.begin('status', 1000).atLeast).toBeUndefined(); // recorded before the cycle was noted
});
