// The start gate on its own (part 4 start_trajectory; PROFILE "Trajectories": its preconditions and order).

import { describe, expect, test } from 'vitest';
import { cloneState, type Spec } from '../model.ts';
import { config, labels, ready, req } from './test-kit.ts';

describe('start gate (part 4; PROFILE "Trajectories")', () => {
  const c = config();
  const start: Spec = { op: 'start_trajectory', h: 'prepared', s: 'current', g: 'current' };
  const r = req(start, 5n, { handle: 1n });
  test('each precondition refuses on its own with the handle kept', () => {
    const m = ready();
    expect(labels(c, m, r)).toEqual([200]);
    const notArmed = cloneState(m);
    notArmed.armed = false;
    expect(labels(c, notArmed, r)).toEqual(['not_ready']);
    const notEnabled = cloneState(m);
    notEnabled.enableMask = 0b110;
    expect(labels(c, notEnabled, r)).toEqual(['not_ready']);
    const notHomed = cloneState(m);
    notHomed.homeMask = 0;
    expect(labels(c, notHomed, r)).toEqual(['not_ready']);
    const on = cloneState(m);
    on.handles.get('1')!.ioOn = true;
    expect(labels(c, on, r)).toEqual(['io_not_armed']);
  });
  test('an open jog on the plan axis is mode_conflict while its input surely holds; a latched fault is not_ready', () => {
    const m = ready();
    m.jog = { n: 1n, mode: 'independent', bit: 1, until: { lo: 1_000, hi: 1_010 } };
    expect(labels(c, m, r, { sendMs: 0, recvMs: 0 })).toEqual(['mode_conflict']);
    const faulted = ready();
    faulted.faultLatched = true;
    expect(labels(c, faulted, r)).toEqual(['not_ready']);
  });
});
