// The model on its own (no target): the fence table, the request_id cache and the start gate give the
// outcomes docs/profile.md and document 1 name, and every wrong-model variant changes some prediction.

import { describe, expect, test } from 'vitest';
import { REFERENCE_RULES, cloneState, fenceCheck, initialState, outcomes, type ModelConfig, type ModelState, type Request, type Spec } from './model.ts';
import { WRONG_MODELS, rulesOf } from './variants.ts';

const S = 'a1'.repeat(32);
const config = (rules = REFERENCE_RULES): ModelConfig => ({ axisCount: 3, nativeHomeMask: 0b111, trajAxis: 0, leaseCeilingMs: 500, defaultLeaseMs: 500, cycleNs: 1_000_000n, plainOutput: 1, torchOutput: 0, outputCount: 3, planCycles: 400, jogInputAgeMs: 250, rules });

function owned(generation = 5n): ModelState {
  const m = initialState({ baseHandle: 0n, homeMask: 1, lastGeneration: generation });
  m.grant = { session: S, generation, acquired: generation, stopping: false, leaseMs: 500, controller: 'c', lease: { lo: 0, hi: 0 }, cache: new Map() };
  return m;
}

const req = (spec: Spec, generation = 5n, handle?: bigint): Request => ({ spec, payload: JSON.stringify(spec), resolved: { session: S, generation, ...(handle !== undefined ? { handle } : {}) } });
const labels = (c: ModelConfig, m: ModelState, r: Request) => outcomes(c, m, r, 'alive', 0n).map((o) => (o.status === 200 ? 200 : o.labels!.join('|')));

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

describe('start gate (part 4; PROFILE "Trajectories")', () => {
  const c = config();
  const start: Spec = { op: 'start_trajectory', h: 'prepared', s: 'current', g: 'current' };
  function prepared(): ModelState {
    const m = owned();
    m.handles.set('1', { n: 1n, state: 'prepared', core: 0, session: S, ioOn: false, epoch: 0, bit: 1 });
    return m;
  }
  test('each precondition refuses on its own with the handle kept', () => {
    const ready = prepared();
    ready.armed = true;
    ready.enableMask = 0b111;
    expect(labels(c, ready, req(start, 5n, 1n))).toEqual([200]);
    const notArmed = cloneState(ready);
    notArmed.armed = false;
    expect(labels(c, notArmed, req(start, 5n, 1n))).toEqual(['not_ready']);
    const notEnabled = cloneState(ready);
    notEnabled.enableMask = 0b110;
    expect(labels(c, notEnabled, req(start, 5n, 1n))).toEqual(['not_ready']);
    const notHomed = cloneState(ready);
    notHomed.homeMask = 0;
    expect(labels(c, notHomed, req(start, 5n, 1n))).toEqual(['not_ready']);
    const on = cloneState(ready);
    on.handles.get('1')!.ioOn = true;
    expect(labels(c, on, req(start, 5n, 1n))).toEqual(['io_not_armed']);
  });
  test('terminal handles answer their state; a started one handle_started (start) and handle_active (discard)', () => {
    const m = prepared();
    m.handles.get('1')!.state = 'superseded';
    expect(labels(c, m, req(start, 5n, 1n))).toEqual(['handle_superseded']);
    m.handles.get('1')!.state = 'started';
    expect(labels(c, m, req(start, 5n, 1n))).toEqual(['handle_started']);
    expect(labels(c, m, req({ op: 'discard_trajectory', h: 'started', s: 'current', g: 'current' }, 5n, 1n))).toEqual(['handle_active']);
    expect(labels(c, m, req(start, 5n, 9n))).toEqual(['unknown_handle']);
  });
});

describe('request_id cache (part 4 Envelope rules)', () => {
  const c = config();
  test('same id and payload replays; a changed payload is request_id_conflict; an invalid id is refused first', () => {
    const m = owned();
    const spec: Spec = { op: 'mark_telemetry', label: 'ok', s: 'current', g: 'current', rid: 'a' };
    const remembered = { status: 200 as const, reply: { schema: 'svc.rt-control.response.v1' as const, operation: 'mark_telemetry', sequence: 7n }, label: undefined };
    m.grant!.cache.set('model-a', { payload: JSON.stringify(spec), reply: remembered });
    expect(outcomes(c, m, req(spec), 'alive', 0n)[0]!.replay).toBe(remembered);
    expect(labels(c, m, req({ ...spec, label: 'other' }))).toEqual(['request_id_conflict']);
    expect(labels(c, m, req({ ...spec, rid: 'long65' }))).toEqual(['invalid_request_id']);
  });
});

describe('wrong-model variants (harness/model/variants.ts)', () => {
  test('each names a rule that exists and differs from the reference', () => {
    for (const w of WRONG_MODELS) {
      const r = rulesOf(w);
      const changed = Object.keys(w.patch).filter((k) => r[k as keyof typeof r] !== REFERENCE_RULES[k as keyof typeof r]);
      expect(changed.length, w.name).toBeGreaterThan(0);
      expect(w.skip !== undefined || w.covers.length > 0, `${w.name} covers something unless skipped`).toBe(true);
    }
  });
});
