// Trajectory and program handles on their own (part 3 handle table; PROFILE "Trajectories" Handles).

import { describe, expect, test } from 'vitest';
import type { Spec } from '../model.ts';
import { apply, config, labels, ready, req } from './test-kit.ts';

describe('handles (part 3 handle table)', () => {
  const c = config();
  const start: Spec = { op: 'start_trajectory', h: 'prepared', s: 'current', g: 'current' };
  test('terminal handles answer their state; a started one handle_started (start) and handle_active (discard)', () => {
    const m = ready();
    m.handles.get('1')!.state = 'superseded';
    expect(labels(c, m, req(start, 5n, { handle: 1n }))).toEqual(['handle_superseded']);
    m.handles.get('1')!.state = 'started';
    expect(labels(c, m, req(start, 5n, { handle: 1n }))).toEqual(['handle_started']);
    expect(labels(c, m, req({ op: 'discard_trajectory', h: 'started', s: 'current', g: 'current' }, 5n, { handle: 1n }))).toEqual(['handle_active']);
    expect(labels(c, m, req(start, 5n, { handle: 9n }))).toEqual(['unknown_handle']);
  });
  test('a newer preparation supersedes the prepared handle and takes the next number; a held upload of the same kind is busy', () => {
    const m = ready();
    apply(c, m, req({ op: 'prepare_trajectory', io: 'none', s: 'current', g: 'current' }), { handle: 2n });
    expect(m.handles.get('1')!.state).toBe('superseded');
    expect(m.handles.get('2')!.state).toBe('prepared');
    expect(m.owed.map((e) => `${e.type} ${e.where?.to}`)).toEqual(['handle_transition superseded']);
    m.upload = { kind: 'trajectory', session: m.grant!.session, generation: 5n };
    expect(labels(c, m, req({ op: 'prepare_trajectory', io: 'none', s: 'current', g: 'current' }))).toEqual(['busy']);
    m.upload = { kind: 'program', session: m.grant!.session, generation: 5n };
    expect(labels(c, m, req({ op: 'prepare_trajectory', io: 'none', s: 'current', g: 'current' }))).toEqual([200]);
  });
});
