// A replayed preparation is handed over with the cycle the recorded core answered it in (scan.ts answerCycleOf,
// drivers/replay/session.ts answerCycles): on the real-time clock how many cycles a large plan took was a
// decision of the wall clock (sims/core/core.ts prepare), which a replay takes from the recording.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { RecordingWriter, slotLayout, type RecordingNote } from '../../drivers/replay/format.ts';
import { answerCycles } from '../../drivers/replay/session.ts';
import { answerCycleOf, scanForPacing } from './scan.ts';

const DIR = mkdtempSync(join(tmpdir(), 'hil-scan-'));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));

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

test('each service note keeps how many requests the recording holds before it, also within one cycle (the order the core host wrote them in)', () => {
  const path = join(DIR, 'order.hilrec');
  const w = new RecordingWriter(path, { driver: 'sim', cycle_ns: '1000000', setup_sha256: 'x'.repeat(64), axisCount: 1 });
  const v = new Float64Array(slotLayout(1).count);
  w.frame(v, 0, 1_000_000n);
  w.note({ cycle: 1, kind: 'service', data: { t: 'status_read', cycle: '1' } });
  w.note({ cycle: 1, kind: 'request', data: { t: 'cancel_home' }, sent_ns: '5', origin: 'lease_expired' });
  w.note({ cycle: 1, kind: 'event', data: { t: 'event', type: 'jog_end' } });
  w.note({ cycle: 1, kind: 'request', data: { t: 'grant', generation: '1', deadlineNs: '0', active: false, axisMask: 0 }, sent_ns: '6', origin: 'lease_expired' });
  w.note({ cycle: 1, kind: 'service', data: { t: 'status_read', cycle: '1' } });
  w.frame(v, 0, 2_000_000n);
  w.note({ cycle: 2, kind: 'service', data: { t: 'telemetry_read' } });
  w.close();
  const scan = scanForPacing(path);
  expect(scan.service.map((n) => n.cycle)).toEqual([1, 1, 2]);
  expect(scan.serviceAt).toEqual([0, 2, 2]);
});
