// The grant machine on its own (part 2 Fence; part 3 grant table; PROFILE "Fence checks", "Grant
// generation and stop").

import { describe, expect, test } from 'vitest';
import { fenceCheck, type ModelState, type Spec } from '../model.ts';
import { apply, config, labels, owned, req, S } from './test-kit.ts';

describe('fence (part 2 Fence; PROFILE "Fence checks")', () => {
  const c = config();
  test.each([
    ['renew', 4n, 'ok'],
    ['stop', 4n, 'ok'],
    ['release', 4n, 'control_session_stale'],
    ['halt', 4n, 'wrong_generation'],
    ['enable', 4n, 'control_session_stale'],
    ['renew', 6n, 'control_session_stale'],
    ['prepare_trajectory', 6n, 'wrong_generation'],
    ['renew', 0n, 'control_session_stale'],
  ] as const)('%s with generation %s of a current grant at 5: %s', (op, g, want) => {
    expect(fenceCheck(c, owned(), op, { session: S, generation: g }, false)).toBe(want);
  });
  test('a lapsed lease: renew expired, halt no_grant, enable control_session_stale; a session never issued: fence', () => {
    expect(fenceCheck(c, owned(), 'renew', { session: S, generation: 5n }, true)).toBe('expired');
    expect(fenceCheck(c, owned(), 'halt', { session: S, generation: 5n }, true)).toBe('no_grant');
    expect(fenceCheck(c, owned(), 'enable', { session: S, generation: 5n }, true)).toBe('control_session_stale');
    expect(fenceCheck(c, owned(), 'renew', { session: 'b2'.repeat(32), generation: 5n }, false)).toBe('fence');
  });
});

describe('grant lifecycle (part 3 grant table)', () => {
  const c = config();
  test('acquire while owned is control_already_owned; a stop takes the next generation and refuses other fenced calls while it drains', () => {
    const acquire: Spec = { op: 'acquire', binding: 'ok', controller: 'ok' };
    expect(labels(c, owned(), { spec: acquire, payload: '{}' })).toEqual(['control_already_owned']);
    const m = owned();
    apply(c, m, req({ op: 'stop', s: 'current', g: 'current', drain: false }));
    expect(m.grant?.generation).toBe(6n);
    expect(m.grant?.stopping).toBe(true);
    // Part 7 control_session_stale "a Stop in flight"; native-fenced operations answer inhibited (PROFILE "Fence checks").
    expect(labels(c, m, req({ op: 'enable', mask: 'traj', s: 'current', g: 'current' }, 6n, { mask: 1 }))).toEqual(['control_session_stale']);
    expect(labels(c, m, req({ op: 'halt', s: 'current', g: 'current' }, 6n))).toEqual(['inhibited']);
    expect(labels(c, m, { spec: acquire, payload: '{}' })).toEqual(['control_session_stale']);
  });
  test('acquire gives min(requested lease, ceiling) and the next generation; a lease over 10000 is invalid_requested_lease', () => {
    const m = owned();
    m.grant = undefined;
    const os = labels(c, m, { spec: { op: 'acquire', lease: 10_000, binding: 'ok', controller: 'ok' }, payload: '{}' });
    expect(os).toEqual([200]);
    expect(labels(c, m, { spec: { op: 'acquire', lease: 10_001, binding: 'ok', controller: 'ok' }, payload: '{}' })).toEqual(['invalid_requested_lease']);
    apply(c, m, { spec: { op: 'acquire', lease: 10_000, binding: 'ok', controller: 'ok' }, payload: '{}' }, { data: { session: 'c3'.repeat(32), generation: 6n, stopping: false, lease_ms: 500n, controller: 'model-controller' } });
    const g = (m as ModelState).grant;
    expect(g?.leaseMs).toBe(500);
    expect(g?.generation).toBe(6n);
  });
});
