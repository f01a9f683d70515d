// A replayed preparation is handed over with the cycle the recorded core answered it in (scan.ts answerCycleOf,
// drivers/replay/session.ts answerCycles): on the real-time clock how many cycles a large plan took was a
// decision of the wall clock (sims/core/core.ts prepare), which a replay takes from the recording.

import { expect, test } from 'vitest';
import type { RecordingNote } from '../../drivers/replay/format.ts';
import { answerCycles } from '../../drivers/replay/session.ts';
import { answerCycleOf } from './scan.ts';

const note = (cycle: number, kind: RecordingNote['kind'], data: Record<string, unknown>): RecordingNote => ({ cycle, kind, data });

test('each request id is answered at the cycle of its first reply; events and other ids do not count', () => {
  const notes = [
    note(10, 'event', { t: 'event', id: 4 }),
    note(11, 'reply', { t: 'reply', id: 3 }),
    note(12, 'reply', { t: 'reply', id: 4 }),
    note(40, 'reply', { t: 'reply', id: 4 }),
    note(41, 'reply', { t: 'home_done', id: 5 }),
  ];
  expect([...answerCycles(notes)]).toEqual([[3, 11], [4, 12]]);
});

test('only a preparation gets its recorded answer cycle, under the recorded id', () => {
  const answers = new Map([[7, 300], [9, 500]]);
  expect(answerCycleOf(note(100, 'request', { t: 'prepare', id: 7 }), answers)).toBe(300);
  expect(answerCycleOf(note(100, 'request', { t: 'cmd', id: 7 }), answers)).toBeUndefined();
  // A preparation the recording never answered (it ended first): handed over without one.
  expect(answerCycleOf(note(100, 'request', { t: 'prepare', id: 8 }), answers)).toBeUndefined();
});
