// Admission from the prefix (prefix.ts): the boundary at exactly 16384 bytes, the check order, and the
// request_envelope_changed comparison.

import { describe, expect, test } from 'vitest';
import { SCHEMA, SESSION, enc } from './bodies.ts';
import { decodeTrajectory } from './decoder.ts';
import { checkSameEnvelope, scanPrefix } from './prefix.ts';
import { REQUEST_PREFIX_BYTES } from '../../primitives.ts';

const POINTS = ',"axis_mask":3,"points":[{"time_ns":0,"position":[1]},{"time_ns":1,"position":[2]}]}';

/** A body whose `last` member (text after a padding label) ends exactly `shift` bytes past byte 16384. */
function boundaryBody(before: string, last: string, shift: number): Uint8Array {
  const head = `{"schema":"${SCHEMA}","operation":"prepare_trajectory",${before}"label":"`;
  const tail = `",${last}`;
  const pad = REQUEST_PREFIX_BYTES + shift - head.length - tail.length;
  const text = head + 'p'.repeat(pad) + tail;
  expect(text.length).toBe(REQUEST_PREFIX_BYTES + shift);
  return enc(text + POINTS);
}

describe('the prefix boundary (document 1 part 4 "prepare_trajectory": fence fields within the first 16384 bytes)', () => {
  const sessionLast = (shift: number) => boundaryBody('"generation":7,', `"session":"${SESSION}"`, shift);
  const generationLast = (shift: number) => boundaryBody(`"session":"${SESSION}",`, '"generation":12', shift);

  test('a session string ending exactly at byte 16384 is admitted', () => {
    const scan = scanPrefix(sessionLast(0));
    expect(scan.kind).toBe('trajectory');
    if (scan.kind !== 'trajectory') return;
    expect(scan.prefix.envelope.session).toBe(SESSION);
    expect(scan.prefix.envelope.generation).toBe(7n);
    expect(scan.prefix.pointsAt).toBe(-1); // points lie beyond the prefix
  });

  test('a session string ending at byte 16385 is refused: fence_outside_prefix, invalid_request_envelope', () => {
    const scan = scanPrefix(sessionLast(1));
    expect(scan.kind).toBe('refused');
    if (scan.kind !== 'refused') return;
    expect([scan.refusal.label, scan.refusal.code]).toEqual(['invalid_request_envelope', 'fence_outside_prefix']);
    expect(scan.refusal.detail).toBe('session must appear within the first 16384 bytes, before points');
  });

  test('a generation number ending exactly at byte 16384 is admitted (one byte of look-ahead ends it)', () => {
    const scan = scanPrefix(generationLast(0));
    expect(scan.kind).toBe('trajectory');
    if (scan.kind === 'trajectory') expect(scan.prefix.envelope.generation).toBe(12n);
  });

  test('a generation number ending at byte 16385 is refused', () => {
    const scan = scanPrefix(generationLast(1));
    expect(scan.kind === 'refused' && scan.refusal.code).toBe('fence_outside_prefix');
  });

  test('the scan reads nothing past byte 16385: garbage there does not matter', () => {
    const body = sessionLast(0);
    const broken = Uint8Array.from([...body.subarray(0, REQUEST_PREFIX_BYTES + 1), ...enc('}}}}\xff not json')]);
    expect(scanPrefix(broken).kind).toBe('trajectory');
    expect(scanPrefix(body.subarray(0, REQUEST_PREFIX_BYTES + 1)).kind).toBe('trajectory');
  });

  test('a small body decodes to the same envelope the prefix admitted', () => {
    const body = enc(`{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${SESSION}","generation":7,"request_id":"a"${POINTS}`);
    const scan = scanPrefix(body);
    expect(scan.kind).toBe('trajectory');
    if (scan.kind !== 'trajectory') return;
    expect(scan.prefix.pointsAt).toBe(Buffer.from(body).indexOf('"points"'));
    const full = decodeTrajectory(body, 1);
    expect(() => checkSameEnvelope(scan.prefix, full.request)).not.toThrow();
    expect({ ...scan.prefix.envelope }).toEqual({ schema: SCHEMA, operation: 'prepare_trajectory', session: SESSION, generation: 7n, request_id: 'a', axis_mask: 3 });
  });
});

describe('check order of the prefix (docs/profile.md "Envelope check order")', () => {
  const op = '"operation":"prepare_trajectory"';
  const fence = `"session":"${SESSION}","generation":7`;
  const cases: Array<[string, string, string | 'other' | 'trajectory', string?]> = [
    ['another operation', `{"schema":"${SCHEMA}","operation":"stop",${fence}${POINTS}`, 'other'],
    ['a JSON error before the operation member', `{"schema":"${SCHEMA}",,${op},${fence}${POINTS}`, 'other'],
    ['a body that is not an object', `[${op}]`, 'other'],
    ['no operation before points', `{"schema":"${SCHEMA}",${fence}${POINTS.slice(0, -1)},${op}}`, 'other'],
    ['a JSON error after the operation member', `{"schema":"${SCHEMA}",${op},"session":"${SESSION}" "generation":7${POINTS}`, 'invalid_request_envelope', 'json'],
    ['a repeated member', `{"schema":"${SCHEMA}",${op},${fence},"session":"x"${POINTS}`, 'duplicate_request_field', 'json'],
    ['a wrong schema', `{"schema":"v0",${op},${fence}${POINTS}`, 'schema_mismatch', 'envelope'],
    ['a wrong schema after a field problem still says schema_mismatch', `{${op},"x":1,"schema":"v0",${fence}${POINTS}`, 'schema_mismatch', 'envelope'],
    ['an unknown member', `{"schema":"${SCHEMA}",${op},"x":1,${fence}${POINTS}`, 'invalid_request_envelope', 'envelope'],
    ['a bad request_id', `{"schema":"${SCHEMA}",${op},"request_id":"\\n",${fence}${POINTS}`, 'invalid_request_id', 'envelope'],
    ['generation as a string', `{"schema":"${SCHEMA}",${op},"session":"${SESSION}","generation":"7"${POINTS}`, 'invalid_request_envelope', 'envelope'],
    ['session after points', `{"schema":"${SCHEMA}",${op},"generation":7${POINTS.slice(0, -1)},"session":"${SESSION}"}`, 'invalid_request_envelope', 'fence_outside_prefix'],
    ['schema missing', `{${op},${fence}${POINTS}`, 'invalid_request_envelope', 'fence_outside_prefix'],
    ['generation 0 is left to the fence check', `{"schema":"${SCHEMA}",${op},"session":"${SESSION}","generation":0${POINTS}`, 'trajectory'],
    ['a problem after points is not the prefix\'s business', `{"schema":"${SCHEMA}",${op},${fence}${POINTS.slice(0, -1)},"x":1}`, 'trajectory'],
  ];
  test.each(cases)('%s', (_what, text, expected, code) => {
    const scan = scanPrefix(enc(text));
    if (expected === 'other' || expected === 'trajectory') {
      expect(scan.kind).toBe(expected);
      return;
    }
    expect(scan.kind).toBe('refused');
    if (scan.kind !== 'refused') return;
    expect(scan.refusal.label).toBe(expected);
    expect(scan.refusal.code).toBe(code);
    expect(scan.refusal.operation).toBe('prepare_trajectory');
  });
});

test('request_envelope_changed when a full decode differs from the admitted prefix (document 1 part 4)', () => {
  const body = enc(`{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${SESSION}","generation":7${POINTS.slice(0, -1)},"request_id":"r"}`);
  const scan = scanPrefix(body);
  if (scan.kind !== 'trajectory') throw new Error('expected admission');
  const full = decodeTrajectory(body, 1).request;
  for (const changed of [{ ...full, generation: 8n }, { ...full, session: 'x' }, { ...full, generation: undefined }]) {
    let label = '';
    try {
      checkSameEnvelope(scan.prefix, changed);
    } catch (e) {
      label = (e as { label: string }).label;
    }
    expect(label).toBe('request_envelope_changed');
  }
  expect(() => checkSameEnvelope(scan.prefix, full)).not.toThrow();
  // Members after points (here request_id) are not part of the admitted prefix.
  expect(() => checkSameEnvelope(scan.prefix, { ...full, request_id: 'other' })).not.toThrow();
});

describe('a member of the admitted prefix repeated outside it (document 1 part 4 "Envelope rules")', () => {
  const head = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${SESSION}","generation":7,"axis_mask":1,"points":[{"time_ns":0,"position":[1]},{"time_ns":1,"position":[2]}]`;
  const outcome = (text: string) => {
    try {
      const b = decodeTrajectory(enc(text), 1);
      return { ok: b.request.generation };
    } catch (e) {
      return { label: (e as { label: string }).label, code: (e as { code: string }).code };
    }
  };

  test('generation repeated after points with another value: the full decode differs from the admitted prefix', () => {
    const body = `${head},"generation":8}`;
    const scan = scanPrefix(enc(body));
    expect(scan.kind).toBe('trajectory');
    if (scan.kind === 'trajectory') expect(scan.prefix.envelope.generation).toBe(7n);
    expect(outcome(body)).toEqual({ label: 'request_envelope_changed', code: 'envelope_changed' });
    expect(outcome(`${head},"session":"other-session-token"}`)).toEqual({ label: 'request_envelope_changed', code: 'envelope_changed' });
  });

  test('the same value repeated, a member first seen after points repeated, points repeated, a repeat inside the prefix: duplicate_request_field', () => {
    expect(outcome(`${head},"generation":7}`).label).toBe('duplicate_request_field');
    expect(outcome(`${head},"request_id":"a","request_id":"b"}`).label).toBe('duplicate_request_field');
    expect(outcome(`${head},"points":[]}`).label).toBe('duplicate_request_field');
    const inside = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${SESSION}","generation":7,"generation":8,"axis_mask":1,"points":[{"time_ns":0,"position":[1]},{"time_ns":1,"position":[2]}]}`;
    const scan = scanPrefix(enc(inside));
    expect(scan.kind === 'refused' && scan.refusal.label).toBe('duplicate_request_field');
  });

  test('a repeat past byte 16384 before points counts as outside the prefix too', () => {
    const pad = 'p'.repeat(REQUEST_PREFIX_BYTES);
    const body = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${SESSION}","generation":7,"label":"${pad}","generation":9,"axis_mask":1,"points":[{"time_ns":0,"position":[1]},{"time_ns":1,"position":[2]}]}`;
    expect(outcome(body)).toEqual({ label: 'request_envelope_changed', code: 'envelope_changed' });
  });

  test('without repeats the body decodes', () => {
    expect(outcome(`${head}}`)).toEqual({ ok: 7n });
  });
});
