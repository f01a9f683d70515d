// Cell I/O on its own (part 4 io_arm, io_disarm; PROFILE "Trajectories" Output intents).

import { describe, expect, test } from 'vitest';
import type { Spec } from '../model.ts';
import { apply, config, labels, ready, req } from './test-kit.ts';

describe('cell I/O (part 4 io_arm, io_disarm)', () => {
  const ioArm: Spec = { op: 'io_arm', s: 'current', g: 'current' };
  test('io_arm arms; io_disarm disarms and turns every output OFF; a latched io_marker_late refuses io_arm', () => {
    const c = config();
    const m = ready();
    apply(c, m, req(ioArm));
    expect(m.ioArmed).toBe(true);
    m.outputs = 2;
    apply(c, m, req({ op: 'io_disarm', s: 'current', g: 'current' }));
    expect(m.ioArmed).toBe(false);
    expect(m.outputs).toBe(0);
    m.markerLate = true;
    expect(labels(c, m, req(ioArm))).toEqual(['io_marker_late']);
  });
  test('a cell without a plain output: io_arm and a plan with an ON intent are io_not_configured; a torch intent io_torch_unqualified', () => {
    const c = { ...config(), plainOutput: -1 };
    expect(labels(c, ready(), req(ioArm))).toEqual(['io_not_configured']);
    expect(labels(c, ready(), req({ op: 'prepare_trajectory', io: 'on', s: 'current', g: 'current' }))).toEqual(['io_not_configured']);
    expect(labels(config(), ready(), req({ op: 'prepare_trajectory', io: 'torch', s: 'current', g: 'current' }))).toEqual(['io_torch_unqualified']);
  });
});
