// Exact integers in the request (document 1 part 1 "Transports": JSON integers are exact uint64 and must
// be parsed without floating point; part 2 "Request" field types). What the service does with an
// integer it decoded is observable only through what it does next, so:
//   - source_sequence is "accepted and ignored by /v1/control dispatch": in range it is admitted;
//   - a decoded but wrong generation or binding revision gets an authority label (the fence's or the
//     binding's), while an undecodable one gets invalid_request_envelope (profile: field types);
//   - two payloads that differ only beyond float64 precision are different decoded payloads, so under
//     one request_id the second is a request_id_conflict (part 4 "Envelope rules").

import { REQUEST_SCHEMA } from '../../harness/clients/control.ts';
import type { Session } from '../../harness/clients/cell.ts';
import { stringifyExact } from '../../harness/oracle/json.ts';
import { checkGrant, type CheckedReply } from '../../harness/oracle/reply.ts';
import { covers, cycleFree, describe, expect, profile, test } from '../../harness/fixture.ts';
import { served, unservedReason, vehicle } from '../../harness/served.ts';

// No test here needs the file's cell to cycle on its own (harness/fixture.ts cycleFree).
cycleFree();

const S = REQUEST_SCHEMA;
const U64_MAX = (1n << 64n) - 1n;
const U32_MAX = (1n << 32n) - 1n;
const P53 = 1n << 53n;

type Fence = Pick<Session, 'session' | 'generation'>;

const fencedReq = (operation: string, s: Fence, fields: Record<string, unknown> = {}) => ({ schema: S, operation, session: s.session, generation: s.generation, ...fields });

/** The JSON text of `obj` with the value of `key` replaced by the literal text `literal` (key order kept). */
function withLiteral(obj: Record<string, unknown>, key: string, literal: string): string {
  const marker = '\u0000literal\u0000';
  const quoted = JSON.stringify(marker);
  const text = stringifyExact({ ...obj, [key]: marker });
  if (!text.includes(quoted)) throw new Error('marker lost');
  return text.replace(quoted, () => literal);
}

function expectRefusal(r: CheckedReply, status: 409 | 413, label: string, note?: string): void {
  expect({ status: r.status, label: r.label }, note).toEqual({ status, label });
}

function expectOk(r: CheckedReply, note?: string): void {
  expect({ status: r.status, label: r.label }, note).toEqual({ status: 200, label: undefined });
}

/** In-range uint64 literals, written as plain decimal integers. */
const IN_RANGE: readonly bigint[] = [0n, 1n, U32_MAX, U32_MAX + 1n, P53 - 1n, P53, P53 + 1n, 1n << 63n, U64_MAX - 1n, U64_MAX];

/** Literals that are not a uint64 written as a plain decimal integer. */
const NOT_UINT64: ReadonlyArray<readonly [string, string]> = [
  ['2^64', '18446744073709551616'],
  ['2^64 + 1', '18446744073709551617'],
  ['2^65', '36893488355328161792'],
  ['23 digits', '99999999999999999999999'],
  ['-1', '-1'],
  ['-0', '-0'],
  ['-(2^64 - 1)', '-18446744073709551615'],
  ['1.0', '1.0'],
  ['0.5', '0.5'],
  ['1e3', '1e3'],
  ['1E3', '1E3'],
  ['1e0', '1e0'],
  ['2^64 - 1 with a fraction', '18446744073709551615.0'],
  ['2^64 - 1 as float', '1.8446744073709552e19'],
  ['string "5"', '"5"'],
  ['string of 2^64 - 1', '"18446744073709551615"'],
  ['leading zero 01', '01'],
  ['00', '00'],
  ['+1', '+1'],
  ['hex', '0x10'],
  ['Infinity', 'Infinity'],
  ['null', 'null'],
  ['true', 'true'],
  ['array', '[1]'],
  ['object', '{}'],
];

// ---------------------------------------------------------------------------------------------

describe('source_sequence: accepted and ignored by /v1/control dispatch', () => {
  test('every uint64 value, 0 .. 2^64 - 1, is admitted on renew', covers('rule:envelope.source_sequence_ignored', 'field:Request.source_sequence', 'rule:transport.exact_uint64'), async ({ client, cell }) => {
    const s = await cell.hold();
    for (const v of IN_RANGE) expectOk(await client.control(withLiteral(fencedReq('renew', s), 'source_sequence', v.toString()), 'renew'), v.toString());
  });

  test('2^64 - 1 is admitted on mark_telemetry too', covers('rule:envelope.source_sequence_ignored', 'field:Request.source_sequence', 'rule:transport.exact_uint64'), async ({ client, cell, description, skip }) => {
    const reason = unservedReason(description, 'mark_telemetry');
    if (reason) skip(reason);
    const s = await cell.hold();
    const r = await client.control(fencedReq('mark_telemetry', s, { label: 'u64', source_sequence: U64_MAX }), 'mark_telemetry');
    expectOk(r);
  });

  test('2^64 is refused with invalid_request_envelope', profile('profile:envelope.field_type', 'field:Request.source_sequence', 'rule:transport.exact_uint64'), async ({ client, cell }) => {
    const s = await cell.hold();
    expectRefusal(await client.control(withLiteral(fencedReq('renew', s), 'source_sequence', '18446744073709551616'), 'renew'), 409, 'invalid_request_envelope');
    expectOk(await cell.fenced('renew', s));
  });
});

describe('exact decoding seen through the retry cache', () => {
  // Pairs that float64 cannot tell apart but uint64 can.
  const pairs: ReadonlyArray<readonly [bigint, bigint]> = [
    [P53 + 1n, P53],
    [U64_MAX, U64_MAX - 1n],
    [(1n << 63n) + 1n, 1n << 63n],
  ];
  for (const [a, b] of pairs) {
    test(`source_sequence ${a} and ${b} are different payloads under one request_id`, covers('rule:transport.exact_uint64', 'rule:idempotency.conflict', 'rule:idempotency.join_or_replay'), async ({ client, cell }) => {
      const s = await cell.hold();
      const id = `exact-${a}`;
      const first = await client.control(withLiteral(fencedReq('renew', s, { request_id: id }), 'source_sequence', a.toString()), 'renew');
      expectOk(first);
      // The same literal replays (the same grant deadline: not renewed again) ...
      const replay = await client.control(withLiteral(fencedReq('renew', s, { request_id: id }), 'source_sequence', a.toString()), 'renew');
      expect(replay.reply).toEqual(first.reply);
      // ... the neighbouring integer is a changed payload.
      const other = await client.control(withLiteral(fencedReq('renew', s, { request_id: id }), 'source_sequence', b.toString()), 'renew');
      expectRefusal(other, 409, 'request_id_conflict');
    });
  }

  test('a uint64 field is compared as an integer, not as text: an escaped label is the same payload but a different integer is not', covers('rule:transport.exact_uint64', 'rule:idempotency.conflict'), async ({ client, cell, description }) => {
    // Through mark_telemetry, or renew where the target does not serve it (harness/served.ts).
    const v = vehicle(description);
    const s = await cell.hold();
    const base = v.req(s, 'exact', { request_id: 'exact-int', source_sequence: P53 + 1n });
    const first = await client.control(base, v.op);
    expectOk(first);
    expect(v.witness(await client.control(base, v.op))).toBe(v.witness(first));
    expectRefusal(await client.control({ ...base, source_sequence: P53 + 3n }, v.op), 409, 'request_id_conflict');
  });
});

// ---------------------------------------------------------------------------------------------

describe('uint64 fields refuse anything but a plain decimal integer in 0 .. 2^64 - 1', () => {
  const fields = ['source_sequence', 'handle', 'jog_generation', 'source_origin_host_ns', 'deadline_host_ns'] as const;

  for (const field of fields) {
    test(`${field}: in-range values are decoded (renew does not use it)`, profile('profile:envelope.field_type', `field:Request.${field}`, 'rule:transport.exact_uint64'), async ({ client, cell }) => {
      const s = await cell.hold();
      for (const v of IN_RANGE) expectOk(await client.control(withLiteral(fencedReq('renew', s), field, v.toString()), 'renew'), `${field} ${v}`);
    });

    test(`${field}: out-of-range and non-integer literals give invalid_request_envelope`, profile('profile:envelope.field_type', `field:Request.${field}`, 'reason:invalid_request_envelope'), async ({ client, cell }) => {
      const s = await cell.hold();
      for (const [name, text] of NOT_UINT64) {
        expectRefusal(await client.control(withLiteral(fencedReq('renew', s), field, text), 'renew'), 409, 'invalid_request_envelope', `${field} ${name}`);
      }
      expectOk(await cell.fenced('renew', s));
    });
  }

  test('generation: undecodable literals give invalid_request_envelope, never a fence label', profile('profile:envelope.field_type', 'field:Request.generation', 'reason:invalid_request_envelope'), async ({ client, cell, description }) => {
    const s = await cell.hold();
    const literals: Array<readonly [string, string]> = [
      ...NOT_UINT64,
      ['current generation as a string', JSON.stringify(s.generation.toString())],
      ['current generation with a fraction', `${s.generation}.0`],
      ['current generation in exponent form', `${s.generation}e0`],
    ];
    for (const [name, text] of literals) {
      for (const op of ['renew', ...(served(description, 'mark_telemetry') ? ['mark_telemetry'] : [])]) {
        const req = op === 'renew' ? fencedReq('renew', s) : fencedReq('mark_telemetry', s, { label: 'g' });
        expectRefusal(await client.control(withLiteral(req, 'generation', text), op), 409, 'invalid_request_envelope', `${op} generation ${name}`);
      }
    }
    expectOk(await cell.fenced('renew', s));
  });

  test('generation: current + 2^64 is undecodable, not the current generation modulo 2^64', profile('profile:envelope.field_type', 'rule:transport.exact_uint64', 'field:Request.generation'), async ({ client, cell, description }) => {
    // Through mark_telemetry (exact generation), or renew where the target does not serve it.
    const v = vehicle(description);
    const s = await cell.hold();
    const wrapped = (s.generation + (1n << 64n)).toString();
    const r = await client.control(withLiteral(v.req(s, 'wrap'), 'generation', wrapped), v.op);
    expectRefusal(r, 409, 'invalid_request_envelope');
    expectOk(await client.control(v.req(s, 'exact'), v.op));
  });

  test('generation: decoded but wrong values get the fence label control_session_stale', covers('rule:transport.exact_uint64', 'field:Request.generation', 'field:Fence.generation', 'reason:control_session_stale'), async ({ client, cell, description }) => {
    const s = await cell.hold();
    const g = s.generation;
    const mark = served(description, 'mark_telemetry');
    // Larger than the current generation: refused by renew (older-or-equal only) and mark_telemetry (exact).
    const wrong = [g + 1n, g + (1n << 32n), g + P53, g + P53 + 1n, 1n << 63n, U64_MAX];
    for (const v of wrong) {
      expectRefusal(await client.control(withLiteral(fencedReq('renew', s), 'generation', v.toString()), 'renew'), 409, 'control_session_stale', `renew generation ${v}`);
      if (mark) expectRefusal(await client.control(withLiteral(fencedReq('mark_telemetry', s, { label: 'g' }), 'generation', v.toString()), 'mark_telemetry'), 409, 'control_session_stale', `mark_telemetry generation ${v}`);
    }
    // The exact value is still admitted: nothing above changed the grant.
    if (mark) expectOk(await client.control(fencedReq('mark_telemetry', s, { label: 'g' }), 'mark_telemetry'));
    expectOk(await client.control(fencedReq('release', s), 'release'));
  });

  test('generation 0 gives control_session_stale', profile('profile:fence.table', 'field:Request.generation', 'reason:control_session_stale'), async ({ client, cell, description }) => {
    const s = await cell.hold();
    expectRefusal(await client.control(fencedReq('renew', s, { generation: 0n }), 'renew'), 409, 'control_session_stale');
    if (served(description, 'mark_telemetry')) expectRefusal(await client.control(fencedReq('mark_telemetry', s, { label: 'zero', generation: 0n }), 'mark_telemetry'), 409, 'control_session_stale');
    expectOk(await cell.fenced('renew', s));
  });
});

describe('binding.revision (uint64) on acquire', () => {
  test('decoded but different revisions give authority_binding_mismatch', covers('field:Binding.revision', 'reason:authority_binding_mismatch', 'rule:transport.exact_uint64'), async ({ cell, description }) => {
    const rev = description.binding.revision;
    const others = [0n, rev + 1n, rev + P53, rev + (1n << 32n), U64_MAX].filter((v) => v !== rev);
    for (const revision of others) {
      const r = await cell.acquire({ binding: { ...description.binding, revision } });
      expectRefusal(r, 409, 'authority_binding_mismatch', `revision ${revision}`);
    }
  });

  test('undecodable revisions give invalid_request_envelope', profile('profile:envelope.field_type', 'field:Binding.revision', 'reason:invalid_request_envelope'), async ({ client, description }) => {
    const rev = description.binding.revision;
    const literals: Array<readonly [string, string]> = [
      ...NOT_UINT64,
      ['configured revision + 2^64', (rev + (1n << 64n)).toString()],
      ['configured revision as a string', JSON.stringify(rev.toString())],
      ['configured revision with a fraction', `${rev}.0`],
    ];
    for (const [name, text] of literals) {
      const binding = withLiteral({ ...description.binding }, 'revision', text);
      const body = `{"schema":${JSON.stringify(S)},"operation":"acquire","controller":"u64-revision","binding":${binding}}`;
      const r = await client.control(body, 'acquire');
      if (r.status === 200) {
        const g = checkGrant(r.reply.data);
        await client.op('release', { session: g.session, generation: g.generation });
      }
      expectRefusal(r, 409, 'invalid_request_envelope', `revision ${name}`);
    }
  });
});

describe('uint32 fields', () => {
  for (const field of ['axis_mask', 'timeout_ms'] as const) {
    test(`${field}: 0 .. 2^32 - 1 is decoded, 2^32 and beyond give invalid_request_envelope`, profile('profile:envelope.field_type', `field:Request.${field}`), async ({ client, cell }) => {
      const s = await cell.hold();
      for (const v of [0n, 1n, U32_MAX]) expectOk(await client.control(withLiteral(fencedReq('renew', s), field, v.toString()), 'renew'), `${field} ${v}`);
      for (const text of ['4294967296', '18446744073709551615', '-1', '1.0', '"1"']) {
        expectRefusal(await client.control(withLiteral(fencedReq('renew', s), field, text), 'renew'), 409, 'invalid_request_envelope', `${field} ${text}`);
      }
    });
  }
});
