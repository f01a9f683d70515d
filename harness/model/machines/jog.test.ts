// The jog machine on its own (part 3 "Jog session"; part 4 begin_jog, end_jog, jog; PROFILE "Jog").

import { describe, expect, test } from 'vitest';
import type { Spec } from '../model.ts';
import { apply, config, labels, ready, req } from './test-kit.ts';

describe('jog (part 3 "Jog session"; PROFILE "Jog")', () => {
  const c = config();
  const t = { sendMs: 0, recvMs: 0 };
  const begin: Spec = { op: 'begin_jog', mask: 'traj', clock: 'ok', deadline: 'ok', s: 'current', g: 'current' };
  test('begin_jog opens generation jogMax + 1; its checks in order: clock, mask, deadline; not armed is not_ready', () => {
    const m = ready();
    m.jogMax = 3n;
    expect(labels(c, m, req(begin), t)).toEqual([200]);
    apply(c, m, req(begin), { handle: 4n }, t);
    expect(m.jog?.n).toBe(4n);
    expect(labels(c, ready(), req({ ...begin, clock: 'empty', mask: 'zero' }), t)).toEqual(['jog_clock_incarnation_mismatch']);
    expect(labels(c, ready(), req({ ...begin, mask: 'zero', deadline: 'before' }), t)).toEqual(['invalid_axis_mask']);
    expect(labels(c, ready(), req({ ...begin, deadline: 'before' }), t)).toEqual(['jog_clock_deadline_invalid']);
    const unarmed = ready();
    unarmed.armed = false;
    expect(labels(c, unarmed, req(begin), t)).toEqual(['not_ready']);
  });
  test('end_jog takes the exact current generation: an older one is jog_session_stale; the legacy jog timeout 251 is invalid_request_envelope', () => {
    const m = ready();
    m.jog = { n: 4n, mode: 'independent', bit: 1, until: { lo: 10_000, hi: 10_010 } };
    m.jogMax = 4n;
    const end: Spec = { op: 'end_jog', jg: 'current', s: 'current', g: 'current' };
    expect(labels(c, m, req(end, 5n, { jogGeneration: 3n }), t)).toEqual(['jog_session_stale']);
    expect(labels(c, m, req(end, 5n, { jogGeneration: 4n }), t)).toEqual([200]);
    expect(labels(c, ready(), req({ op: 'jog', timeout: 251, s: 'current', g: 'current' }), t)).toEqual(['invalid_request_envelope']);
    expect(labels(c, ready(), req({ op: 'jog', timeout: 250, s: 'current', g: 'current' }), t)).toEqual([200]);
  });
});
