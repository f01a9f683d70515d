// The pace modes of a paced replay (modes.ts), each on its own with a fake wall clock and a fake core: what
// the scheduler (pacer.ts) asks of them. The pacer's own tests (pacer.test.ts, pacer-steps.test.ts) drive
// them through whole recordings.

import { expect, test } from 'vitest';
import { FlatMode, paceMode, RunToCrash, SteppedMode, WallMode, WatchedMode, type ModeCore, type PaceMode } from './modes.ts';

/** Frames 1 ms apart, recorded time ns from the first frame. */
const TIMES = Float64Array.from({ length: 10 }, (_, i) => i * 1_000_000);

test('wall: the first cycle anchors recorded to wall time; frame k is due at its recorded time from there, divided by the speed; ahead or past the recording it is due now; met() anchors again', () => {
  let now = 100;
  const m = new WallMode(2, TIMES, () => now);
  expect(m.pause(0, false)).toBe(0); // anchors frame 0 at wall 100
  expect(m.pause(4, false)).toBeCloseTo(2, 9); // 4 recorded ms at speed 2: due at 102
  now = 101.5;
  expect(m.pause(4, false)).toBeCloseTo(0.5, 9);
  expect(m.pause(4, true)).toBe(0); // a live request already waits: catch up flat out
  now = 103;
  expect(m.pause(4, false)).toBe(0); // late: due now, no sleeping
  expect(m.pause(TIMES.length, false)).toBe(0);
  m.met();
  expect(m.pause(6, false)).toBe(0); // anchored again at frame 6
  expect(m.pause(8, false)).toBeCloseTo(1, 9);
  expect(m.verdict()).toEqual({ pace: 2 });
  expect(m.runs() && m.holdsApply && m.publishesWhileHeld).toBe(true);
  expect(m.take()).toBe(false);
  expect(() => new WallMode(0, TIMES, () => 0)).toThrow(RangeError);
  expect(() => new WallMode(Number.NaN, TIMES, () => 0)).toThrow(RangeError);
});

test('flat: always due, holds apply, no steps of its own', () => {
  const m = new FlatMode();
  expect([m.runs(), m.pause(), m.holdsApply, m.publishesWhileHeld, m.take(), m.stepDone()]).toEqual([true, 0, true, true, false, null]);
  expect(m.verdict()).toEqual({ pace: null });
});

test('stepped: no cycle runs until the test steps; a step runs its cycles and is answered at its last with the answers they produced; holds wait for the step\'s end', () => {
  const core = { cycleCount: 3, answers: 5 } satisfies ModeCore;
  const m = new SteppedMode(1);
  expect(m.runs()).toBe(false);
  expect(m.publishesWhileHeld).toBe(false);
  expect(m.take({ t: 'cmd' }, core)).toBe(false); // not a step: the core's
  expect(m.take({ t: 'step', id: 9, cycles: 4 }, core)).toBe(true);
  expect(m.runs()).toBe(true);
  expect(m.holdsApply).toBe(false);
  expect(m.stepDone(6, core)).toBeNull();
  core.answers = 7;
  expect(m.stepDone(7, { ...core, cycleCount: 7 })).toEqual({ id: 9, answered: 2 });
  expect(m.runs()).toBe(false);
  expect(m.holdsApply).toBe(true);
  expect(m.stepDone(7, core)).toBeNull(); // answered once
  // a step of no cycles is done where it starts
  expect(m.take({ t: 'step', id: 10, cycles: 0 }, core)).toBe(true);
  expect(m.stepDone(3, core)).toEqual({ id: 10, answered: 0 });
  expect(m.verdict()).toEqual({ pace: 1, steps: 2 });
});

test('run to a crash: flat out and no holds, but a stepped recording still runs only its steps', () => {
  let now = 0;
  const wall: PaceMode = new RunToCrash(new WallMode(1, TIMES, () => now));
  wall.pause(0, false);
  now = 0;
  expect(wall.pause(9, false)).toBe(0);
  expect(wall.holdsApply).toBe(false);
  expect(wall.verdict()).toEqual({ pace: 1 });
  const stepped: PaceMode = new RunToCrash(new SteppedMode(null));
  expect(stepped.kind).toBe('stepped');
  expect(stepped.runs()).toBe(false);
  expect(stepped.take({ t: 'step', id: 1, cycles: 2 }, { cycleCount: 0, answers: 0 })).toBe(true);
  expect(stepped.runs()).toBe(true);
  expect(stepped.holdsApply).toBe(false);
});

test('watched: due at once outside the windows; inside one paced as wall, anchored afresh where the core enters it; speed and windows both count', () => {
  let now = 0;
  const m = new WatchedMode(2, [{ from: 2, to: 5 }, { from: 7, to: Number.POSITIVE_INFINITY }], TIMES, () => now);
  expect(m.pause(0, false)).toBe(0);
  expect(m.pause(1, false)).toBe(0);
  now = 50; // the core reaches the first window at wall 50: frame 2 anchors there
  expect(m.pause(2, false)).toBe(0);
  expect(m.pause(4, false)).toBeCloseTo(1, 9); // 2 recorded ms at speed 2
  expect(m.pause(4, true)).toBe(0); // a live request already waits: caught up flat out
  expect(m.pause(5, false)).toBe(0); // the window ended: flat out, whatever the wall clock says
  expect(m.pause(6, false)).toBe(0);
  now = 80; // the second window anchors afresh, not from the first one's anchor
  expect(m.pause(7, false)).toBe(0);
  expect(m.pause(9, false)).toBeCloseTo(1, 9);
  m.met();
  expect(m.pause(9, false)).toBe(0); // met: anchored again
  expect(m.verdict()).toEqual({ pace: 2, flat_between_watches: true });
  expect([m.kind, m.runs(), m.holdsApply, m.publishesWhileHeld, m.take(), m.stepDone()]).toEqual(['watched', true, true, true, false, null]);
});

test('paceMode: stepped when the recording has the test\'s steps, else flat without a speed; with one watched when asked and the recording notes its streams, else wall-paced', () => {
  const wallMs = () => 0;
  expect(paceMode({ steps: true, speed: 1, watched: true, watches: [], times: TIMES, wallMs }).kind).toBe('stepped');
  expect(paceMode({ steps: false, speed: 1, times: TIMES, wallMs }).kind).toBe('wall');
  expect(paceMode({ steps: false, speed: null, times: TIMES, wallMs }).kind).toBe('flat');
  expect(paceMode({ steps: false, speed: null, watched: true, watches: [], times: TIMES, wallMs }).kind).toBe('flat');
  expect(paceMode({ steps: false, speed: 1, watched: true, watches: [], times: TIMES, wallMs }).kind).toBe('watched');
  expect(paceMode({ steps: false, speed: 1, watched: true, watches: null, times: TIMES, wallMs }).kind).toBe('wall');
  expect(paceMode({ steps: false, speed: 1, watched: false, watches: [], times: TIMES, wallMs }).kind).toBe('wall');
});
