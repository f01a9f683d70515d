// The machine operations on their own (part 4 enable, arm, home, halt, reset_fault; PROFILE "Machine operations").

import { describe, expect, test } from 'vitest';
import { apply, config, labels, owned, ready, req } from './test-kit.ts';

describe('machine operations (part 4)', () => {
  const c = config();
  const f = { s: 'current', g: 'current' } as const;
  test('arm needs an enabled axis; halt needs the cell armed; home refuses an axis mask outside the cell', () => {
    expect(labels(c, owned(), req({ op: 'arm', ...f }))).toEqual(['not_ready|native_rejected']);
    expect(labels(c, owned(), req({ op: 'halt', ...f }))).toEqual(['inhibited']);
    expect(labels(c, owned(), req({ op: 'home', mask: 'outside', ...f }, 5n, { mask: 0b1000 }))).toEqual(['invalid_axis_mask']);
    expect(labels(c, owned(), req({ op: 'home', mask: 'zero', ...f }, 5n, { mask: 0 }))).toEqual(['invalid_axis_mask']);
  });
  test('enable 0 disables and disarms; Home leaves its axes disabled, homed and the cell disarmed', () => {
    const m = ready();
    apply(c, m, req({ op: 'enable', mask: 'zero', ...f }, 5n, { mask: 0 }));
    expect([m.enableMask, m.armed]).toEqual([0, false]);
    const h = owned();
    h.homeMask = 0;
    h.enableMask = 0b001;
    apply(c, h, req({ op: 'home', mask: 'traj', ...f }, 5n, { mask: 1 }));
    expect([h.homeMask, h.enableMask, h.armed, h.epoch]).toEqual([1, 0, false, 1]);
    // Another axis enabled: the anchor capture (part 4 home) may refuse anchor_source_invalid, or Home succeeds.
    const other = owned();
    other.enableMask = 0b010;
    expect(labels(c, other, req({ op: 'home', mask: 'traj', ...f }, 5n, { mask: 1 }))).toEqual(['anchor_source_invalid', 200]);
  });
  test('reset_fault needs an inhibited idle machine; an admitted one retires the session', () => {
    expect(labels(c, ready(), req({ op: 'reset_fault', ...f }))).toEqual(['reset_requires_inhibited']);
    const m = owned();
    m.faultLatched = true;
    apply(c, m, req({ op: 'reset_fault', ...f }), { sequence: 3n, data: { reset_sequence: 3n, reason: '' } });
    expect(m.grant).toBeUndefined();
    expect(m.ended.at(-1)?.how).toBe('retired');
    expect(m.faultLatched).toBe(false);
  });
});
