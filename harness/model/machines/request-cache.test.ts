// The request_id outcome cache on its own (part 4 Envelope rules).

import { describe, expect, test } from 'vitest';
import { outcomes, type Spec } from '../model.ts';
import { apply, config, labels, owned, req } from './test-kit.ts';

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
  test('an accepted request is remembered under its id; a release drops the cache with the session', () => {
    const m = owned();
    const spec: Spec = { op: 'mark_telemetry', label: 'ok', s: 'current', g: 'current', rid: 'b' };
    apply(c, m, req(spec), { sequence: 9n });
    expect(m.grant!.cache.get('model-b')?.payload).toBe(JSON.stringify(spec));
    apply(c, m, req({ op: 'release', s: 'current', g: 'current' }), { data: { session: '', generation: 5n, lease_ms: 500n, stopping: false } });
    expect(m.grant).toBeUndefined();
    expect(m.ended.at(-1)?.cache).toBeUndefined();
  });
});
