// Request envelope (document 1 part 2 "Request", part 4 "Envelope rules for every POST /v1/control",
// part 7 "Envelope and transport", part 8 "Limits"). Strict decoding, the 16384-byte limit, every
// envelope reason label, the check order (a profile decision), request_id validity and idempotent
// retries. Everything goes through the harness's clients; the reply envelope itself (schema string,
// zero fields omitted, error exactly on refusal) is checked by the oracle on every reply.

import { Readable } from 'node:stream';
import { request } from 'undici';
import { ControlClient, REQUEST_SCHEMA, contentType, json } from '../../harness/clients/control.ts';
import type { Session } from '../../harness/clients/cell.ts';
import { stringifyExact } from '../../harness/oracle/json.ts';
import { checkGrant, checkReply, type CheckedReply } from '../../harness/oracle/reply.ts';
import { catalogue } from '../../harness/catalogue/index.ts';
import type { CapabilityEntry } from '../../harness/catalogue/types.ts';
import { covers, cycleFree, describe, expect, inProfile, profile, test } from '../../harness/fixture.ts';
import { served, unservedReason, vehicle } from '../../harness/served.ts';

// No test here needs the file's cell to cycle on its own (harness/fixture.ts cycleFree).
cycleFree();

const S = REQUEST_SCHEMA;
/** Document 1 part 8: ordinary command body. */
const LIMIT = 16384;
const CAPS = catalogue.filter((e): e is CapabilityEntry => e.family === 'capability');
const KNOWN_OPS = new Set(CAPS.map((c) => c.name));
/** Operations POST /v1/control dispatches (part 4 table), the reserved ones included. */
const CONTROL_OPS = CAPS.filter((c) => c.transport === 'POST /v1/control' || c.state === 'unimplemented').map((c) => c.name);
const RESERVED_OPS = CAPS.filter((c) => c.state === 'unimplemented').map((c) => c.name);
/** Operations the service offers elsewhere: POST /v1/control does not dispatch them. */
const NON_CONTROL_OPS = CAPS.filter((c) => !CONTROL_OPS.includes(c.name)).map((c) => c.name);

type Fence = Pick<Session, 'session' | 'generation'>;

const fencedReq = (operation: string, s: Fence, fields: Record<string, unknown> = {}) => ({ schema: S, operation, session: s.session, generation: s.generation, ...fields });

/** The JSON text of `obj` with the value of `key` replaced by the literal text `literal` (key order kept). */
function withLiteral(obj: Record<string, unknown>, key: string, literal: string): string {
  const marker = '\u0000literal\u0000';
  const text = stringifyExact({ ...obj, [key]: marker });
  const quoted = JSON.stringify(marker);
  if (!text.includes(quoted)) throw new Error('marker lost');
  return text.replace(quoted, () => literal);
}

/** The JSON text of an object given as ordered [key, literal JSON text] pairs (duplicates allowed). */
function objectText(pairs: ReadonlyArray<readonly [string, string]>): string {
  return '{' + pairs.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',') + '}';
}

const lit = (v: unknown) => stringifyExact(v);
const bytesOf = (text: string) => new TextEncoder().encode(text);

function expectRefusal(r: CheckedReply, status: 409 | 413, label: string, note?: string): void {
  expect({ status: r.status, label: r.label }, note).toEqual({ status, label });
}

/**
 * The `operation` a refusal names where the request did not decode far enough to have one, or named none
 * the service dispatches: document 1 part 2 says only "the operation answered"; `unknown` or the requested
 * name is our decision (docs/profile.md "Reply envelope"), so it is checked as a profile detail.
 */
async function expectRefusalOperation(r: CheckedReply, op: string): Promise<void> {
  await inProfile('profile:envelope.refusal_operation', () => expect(r.reply.operation, 'operation of the refusal').toBe(op));
}

function expectOk(r: CheckedReply, note?: string): void {
  expect({ status: r.status, label: r.label }, note).toEqual({ status: 200, label: undefined });
}

/** Pad `text` with trailing whitespace (allowed after the value) to exactly `size` bytes. */
function padTo(text: string, size: number, ws = ' '): string {
  const n = size - bytesOf(text).length;
  if (n < 0) throw new Error(`request already ${bytesOf(text).length} bytes`);
  return text + ws.repeat(n);
}

// ---------------------------------------------------------------------------------------------

describe('body size limit (part 4 "Envelope rules", part 8: 16384 bytes, 413 beyond)', () => {
  test('a body of exactly 16384 bytes is decoded (trailing whitespace padding)', covers('rule:envelope.body_limit', 'limit:ordinary_body_bytes'), async ({ client, cell }) => {
    const s = await cell.hold();
    const body = padTo(stringifyExact(fencedReq('renew', s)), LIMIT);
    expect(bytesOf(body).length).toBe(LIMIT);
    expectOk(await client.control(body, 'renew'));
  });

  test('a body of exactly 16384 bytes is decoded (whitespace between tokens)', covers('rule:envelope.body_limit', 'limit:ordinary_body_bytes'), async ({ client, cell, description }) => {
    const s = await cell.hold();
    const v = vehicle(description);
    const compact = stringifyExact(v.req(s, 'padded'));
    const filler = LIMIT - bytesOf(compact).length;
    const ws = ' \t\r\n';
    const spread = Array.from({ length: filler }, (_, i) => ws[i % ws.length]).join('');
    const half = Math.floor(filler / 2);
    // Whitespace after "{" and before the first ":" of the object, both allowed by JSON.
    const body = '{' + spread.slice(0, half) + compact.slice(1).replace(':', spread.slice(half) + ':');
    expect(bytesOf(body).length).toBe(LIMIT);
    const r = await client.control(body, v.op);
    expectOk(r);
    expect(typeof v.witness(r)).toBe('bigint');
  });

  test('a body of 16385 bytes gets HTTP 413 body_too_large and the connection keeps working', covers('rule:envelope.body_limit', 'limit:ordinary_body_bytes', 'reason:body_too_large'), async ({ target, cell }) => {
    const s = await cell.hold();
    // One connection, so the follow-up request travels on the connection that carried the 413.
    const one = new ControlClient(target.address, { connections: 1 });
    try {
      const body = padTo(stringifyExact(fencedReq('renew', s)), LIMIT + 1);
      expectRefusal(await one.control(body), 413, 'body_too_large');
      expectOk(await one.control(fencedReq('renew', s), 'renew'));
      expectRefusal(await one.control(padTo('{}', LIMIT + 1)), 413, 'body_too_large');
      expect((await one.describe()).status).toBe(200);
    } finally {
      await one.close();
    }
  });

  test('the limit counts bytes, not characters (multi-byte UTF-8 label)', covers('rule:envelope.body_limit', 'limit:ordinary_body_bytes', 'reason:body_too_large'), async ({ client, cell, description }) => {
    // A string field of the request holding "é" (2 bytes): mark_telemetry's label, or acquire's controller
    // when the target does not serve mark_telemetry.
    const mark = served(description, 'mark_telemetry');
    const compact = mark ? stringifyExact(fencedReq('mark_telemetry', await cell.hold(), { label: 'éé' })) : stringifyExact({ schema: S, operation: 'acquire', controller: 'éé', binding: description.binding });
    const op = mark ? 'mark_telemetry' : 'acquire';
    // A body of LIMIT - 1 characters but LIMIT + 1 bytes.
    const body = padTo(compact, LIMIT - 1);
    expect(body.length).toBeLessThan(LIMIT);
    const exact = body + ' ';
    expect(bytesOf(exact).length).toBe(LIMIT);
    const r = await client.control(exact, op);
    if (!mark && r.status === 200) await releaseFromAcquireReply(client, r);
    expectOk(r);
    expectRefusal(await client.control(exact + ' '), 413, 'body_too_large');
  });

  test('without Content-Length (chunked) the same limit holds', covers('rule:envelope.body_limit', 'limit:ordinary_body_bytes', 'reason:body_too_large'), async ({ client, cell }) => {
    const s = await cell.hold();
    const send = async (text: string) => {
      const b = bytesOf(text);
      const chunks = [b.subarray(0, 1000), b.subarray(1000, 9000), b.subarray(9000)];
      const res = await request('http://localhost/v1/control', {
        method: 'POST',
        dispatcher: client.agent,
        headers: { 'content-type': 'application/json' },
        body: Readable.from(chunks.map((c) => Buffer.from(c))),
      });
      const body = new Uint8Array(await res.body.arrayBuffer());
      return checkReply(res.statusCode, contentType({ status: res.statusCode, headers: res.headers, body }), body);
    };
    expectOk(await send(padTo(stringifyExact(fencedReq('renew', s)), LIMIT)));
    expectRefusal(await send(padTo(stringifyExact(fencedReq('renew', s)), LIMIT + 1)), 413, 'body_too_large');
  });

  test('a 1 MiB body gets 413 body_too_large and the service keeps answering', covers('rule:envelope.body_limit', 'reason:body_too_large'), async ({ client }) => {
    const body = padTo(stringifyExact({ schema: S, operation: 'renew' }), 1 << 20);
    expectRefusal(await client.control(body), 413, 'body_too_large');
    expect((await client.describe()).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------

describe('envelope reasons (part 4 "Envelope rules", part 7 "Envelope and transport")', () => {
  test('envelope refusals are Response envelopes: 409 (413 for size) with error led by the label, no zero or empty fields', covers('rule:http.status_codes', 'rule:response.error_leading_label', 'rule:response.omit_zero_empty', 'rule:versioning.response_schema', 'field:Response.schema', 'field:Response.operation', 'field:Response.error'), async ({ client }) => {
    const bodies: Array<[string | Uint8Array, number, string]> = [
      ['[]', 409, 'invalid_request_envelope'],
      [`{"schema":"${S}","schema":"${S}"}`, 409, 'duplicate_request_field'],
      [`{"schema":"nope","operation":"renew"}`, 409, 'schema_mismatch'],
      [`{"schema":"${S}","operation":"frobnicate"}`, 409, 'unknown_operation'],
      [`{"schema":"${S}","operation":"renew"} 1`, 409, 'trailing_request_data'],
      [`{"schema":"${S}","operation":"renew","request_id":""}`, 409, 'invalid_request_id'],
      [padTo('{}', LIMIT + 1), 413, 'body_too_large'],
    ];
    for (const [body, status, label] of bodies) {
      const raw = await client.raw('POST', '/v1/control', body);
      const r = checkReply(raw.status, contentType(raw), raw.body);
      expectRefusal(r, status as 409 | 413, label);
      const obj = json(raw) as Record<string, unknown>;
      expect(obj.schema).toBe('svc.rt-control.response.v1');
      expect(typeof obj.operation === 'string' && obj.operation !== '').toBe(true);
      expect(String(obj.error).startsWith(label)).toBe(true);
      for (const [k, v] of Object.entries(obj)) expect(v === '' || v === 0n || v === null, `${label}: ${k} is zero or empty`).toBe(false);
    }
  });

  const nonObjects: Array<[string, string]> = [
    ['array', `["${S}","renew"]`],
    ['string', '"renew"'],
    ['number', '42'],
    ['null', 'null'],
    ['true', 'true'],
    ['empty array', '[]'],
  ];
  for (const [name, body] of nonObjects) {
    test(`a non-object body (${name}) gives invalid_request_envelope`, covers('rule:envelope.non_object', 'reason:invalid_request_envelope'), async ({ client }) => {
      expectRefusal(await client.control(body), 409, 'invalid_request_envelope');
    });
  }

  const nonStringKeys: Array<[string, string]> = [
    ['bare word key', `{schema:"${S}","operation":"renew"}`],
    ['number key', `{"schema":"${S}","operation":"renew",1:2}`],
    ['null key', `{"schema":"${S}",null:"renew"}`],
    ['single-quoted key', `{'schema':"${S}","operation":"renew"}`],
  ];
  for (const [name, body] of nonStringKeys) {
    test(`a non-string key (${name}) gives invalid_request_envelope`, covers('rule:envelope.non_object', 'reason:invalid_request_envelope'), async ({ client }) => {
      expectRefusal(await client.control(body), 409, 'invalid_request_envelope');
    });
  }

  const notJson: Array<[string, string | Uint8Array]> = [
    ['empty body', ''],
    ['whitespace only', ' \r\n\t '],
    ['truncated object', `{"schema":"${S}","operation":"renew"`],
    ['trailing comma', `{"schema":"${S}","operation":"renew",}`],
    ['missing colon', `{"schema" "${S}"}`],
    ['unterminated string', `{"schema":"${S}`],
    ['control character in a string', `{"schema":"${S}","operation":"re\u0001new"}`],
    ['invalid escape', `{"schema":"${S}","operation":"re\\qnew"}`],
    ['leading zero', `{"schema":"${S}","operation":"renew","generation":01}`],
    ['NaN literal', `{"schema":"${S}","operation":"renew","generation":NaN}`],
    ['byte order mark', `\ufeff{"schema":"${S}","operation":"renew"}`],
    ['invalid UTF-8 in a string', Uint8Array.from([...bytesOf(`{"schema":"${S}","operation":"mark_telemetry","label":"`), 0xff, 0xfe, ...bytesOf('"}')])],
    ['lone surrogate escape', `{"schema":"${S}","operation":"mark_telemetry","label":"\\ud800"}`],
  ];
  for (const [name, body] of notJson) {
    test(`a body that is not JSON (${name}) gives invalid_request_envelope`, profile('profile:envelope.check_order', 'reason:invalid_request_envelope'), async ({ client }) => {
      expectRefusal(await client.control(body), 409, 'invalid_request_envelope');
    });
  }

  test('a repeated top-level field gives duplicate_request_field', covers('rule:envelope.duplicate_field', 'rule:envelope.strict_decoding', 'reason:duplicate_request_field'), async ({ client, cell }) => {
    const s = await cell.hold();
    const base: Array<[string, string]> = [
      ['schema', lit(S)],
      ['operation', lit('renew')],
      ['session', lit(s.session)],
      ['generation', lit(s.generation)],
    ];
    for (let i = 0; i < base.length; i++) {
      // The same field twice with the same value, right after itself and at the end.
      const adjacent = [...base.slice(0, i + 1), base[i]!, ...base.slice(i + 1)];
      expectRefusal(await client.control(objectText(adjacent)), 409, 'duplicate_request_field', `${base[i]![0]} repeated adjacent`);
      const atEnd = [...base, base[i]!];
      expectRefusal(await client.control(objectText(atEnd)), 409, 'duplicate_request_field', `${base[i]![0]} repeated at the end`);
    }
    expectRefusal(await client.control(objectText([...base, ['request_id', lit('a')], ['request_id', lit('b')]])), 409, 'duplicate_request_field', 'request_id repeated');
    // The decoded name repeats even though the raw text differs.
    expectRefusal(await client.control(objectText(base).replace(/}$/, `,"sch\\u0065ma":${lit(S)}}`)), 409, 'duplicate_request_field', 'escaped duplicate');
    // Nothing was executed: the grant is untouched and the plain request still works.
    expectOk(await client.control(objectText(base), 'renew'));
  });

  test('a repeated field inside a nested object gives duplicate_request_field', profile('profile:envelope.check_order', 'reason:duplicate_request_field'), async ({ client, description }) => {
    const b = description.binding;
    const binding = objectText([
      ['pair_id', lit(b.pair_id)],
      ['pair_id', lit(b.pair_id)],
      ['revision', lit(b.revision)],
      ['configuration_sha256', lit(b.configuration_sha256)],
    ]);
    const body = objectText([['schema', lit(S)], ['operation', lit('acquire')], ['controller', lit('dup-nested')], ['binding', binding]]);
    const r = await client.control(body);
    if (r.status === 200) await releaseFromAcquireReply(client, r);
    expectRefusal(r, 409, 'duplicate_request_field');
  });

  const schemas: Array<[string, string]> = [
    ['next version', lit('svc.rt-control.request.v2')],
    ['response schema', lit('svc.rt-control.response.v1')],
    ['upper case', lit(S.toUpperCase())],
    ['trailing space', lit(S + ' ')],
    ['empty', lit('')],
    ['number', '1'],
    ['null', 'null'],
    ['array', lit([S])],
  ];
  for (const [name, value] of schemas) {
    test(`schema ${name} gives schema_mismatch`, covers('rule:envelope.schema_mismatch', 'field:Request.schema', 'rule:versioning.request_schema', 'reason:schema_mismatch'), async ({ client, cell }) => {
      const s = await cell.hold();
      const body = objectText([['schema', value], ['operation', lit('renew')], ['session', lit(s.session)], ['generation', lit(s.generation)]]);
      expectRefusal(await client.control(body, 'renew'), 409, 'schema_mismatch');
    });
  }

  test('an absent schema gives schema_mismatch', profile('profile:envelope.missing_schema', 'reason:schema_mismatch'), async ({ client, cell }) => {
    const s = await cell.hold();
    const { schema: _omit, ...rest } = fencedReq('renew', s);
    expectRefusal(await client.control(rest, 'renew'), 409, 'schema_mismatch');
  });

  const unknownOps = ['frobnicate', 'Renew', 'renew ', ' renew', 'RENEW', '', 'renew\u0000', 'v1/control', 'mark-telemetry'];
  for (const op of unknownOps) {
    test(`operation ${JSON.stringify(op)} gives unknown_operation`, covers('rule:envelope.unknown_operation', 'field:Request.operation', 'reason:unknown_operation', 'profile:envelope.refusal_operation'), async ({ client, cell }) => {
      const s = await cell.hold();
      const r = await client.control(fencedReq(op, s));
      expectRefusal(r, 409, 'unknown_operation');
      await expectRefusalOperation(r, 'unknown');
    });
  }

  for (const op of NON_CONTROL_OPS) {
    test(`operation ${op} (not dispatched by POST /v1/control) gives unknown_operation`, profile('profile:envelope.missing_operation', 'profile:envelope.refusal_operation', 'reason:unknown_operation'), async ({ client, cell }) => {
      const s = await cell.hold();
      const r = await client.control(fencedReq(op, s), op);
      expectRefusal(r, 409, 'unknown_operation');
    });
  }

  const badOperationValues: Array<[string, string | undefined]> = [
    ['absent', undefined],
    ['a number', '7'],
    ['null', 'null'],
    ['an array', lit(['renew'])],
    ['an object', lit({ name: 'renew' })],
    ['true', 'true'],
  ];
  for (const [name, value] of badOperationValues) {
    test(`an operation that is ${name} gives unknown_operation`, profile('profile:envelope.missing_operation', 'profile:envelope.refusal_operation', 'reason:unknown_operation'), async ({ client, cell }) => {
      const s = await cell.hold();
      const pairs: Array<[string, string]> = [['schema', lit(S)], ['session', lit(s.session)], ['generation', lit(s.generation)]];
      if (value !== undefined) pairs.splice(1, 0, ['operation', value]);
      expectRefusal(await client.control(objectText(pairs), 'unknown'), 409, 'unknown_operation');
    });
  }

  const trailing: Array<[string, string | Uint8Array]> = [
    ['a second object', '{}'],
    ['a second request', '\n' + stringifyExact({ schema: S, operation: 'renew' })],
    ['a word', ' x'],
    ['a comma', ','],
    ['a closing brace', '}'],
    ['a NUL byte', '\u0000'],
    ['a number after whitespace', '\r\n 1'],
    ['an invalid UTF-8 byte', Uint8Array.of(0xff)],
  ];
  for (const [name, tail] of trailing) {
    test(`data after the request object (${name}) gives trailing_request_data`, covers('rule:envelope.trailing_data', 'rule:envelope.strict_decoding', 'reason:trailing_request_data', 'profile:envelope.refusal_operation'), async ({ client, cell }) => {
      const s = await cell.hold();
      const head = bytesOf(stringifyExact(fencedReq('renew', s)));
      const tailBytes = typeof tail === 'string' ? bytesOf(tail) : tail;
      const body = new Uint8Array(head.length + tailBytes.length);
      body.set(head);
      body.set(tailBytes, head.length);
      const r = await client.control(body);
      expectRefusal(r, 409, 'trailing_request_data');
      await expectRefusalOperation(r, 'renew');
    });
  }

  test('whitespace after the request object is not trailing data', covers('rule:envelope.trailing_data'), async ({ client, cell }) => {
    const s = await cell.hold();
    expectOk(await client.control(stringifyExact(fencedReq('renew', s)) + ' \t\r\n\n ', 'renew'));
    expectOk(await client.control(' \n\t' + stringifyExact(fencedReq('renew', s)), 'renew'));
  });

  const unknownEndpoints: Array<['GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH' | 'OPTIONS', string]> = [
    ['GET', '/v1/control'],
    ['PUT', '/v1/control'],
    ['DELETE', '/v1/control'],
    ['PATCH', '/v1/control'],
    ['OPTIONS', '/v1/control'],
    ['POST', '/v1/describe'],
    ['POST', '/v1/status'],
    ['GET', '/nope'],
    ['GET', '/'],
    ['POST', '/v1/controls'],
    ['POST', '/v2/control'],
    ['POST', '/V1/CONTROL'],
    ['GET', '/v1/describe/extra'],
  ];
  for (const [method, path] of unknownEndpoints) {
    test(`${method} ${path} gives unknown_endpoint`, covers('rule:observation.unknown_endpoint', 'reason:unknown_endpoint'), async ({ client, cell }) => {
      const s = await cell.hold();
      const body = method === 'GET' || method === 'OPTIONS' ? undefined : stringifyExact(fencedReq('renew', s));
      const raw = await client.raw(method, path, body);
      const r = checkReply(raw.status, contentType(raw), raw.body);
      expectRefusal(r, 409, 'unknown_endpoint');
      // Nothing was dispatched: the connection and the grant still work.
      expectOk(await client.control(fencedReq('renew', s), 'renew'));
    });
  }
});

// ---------------------------------------------------------------------------------------------

describe('check order (profile: size, JSON, schema, operation, reserved, fields, request_id, required, fence)', () => {
  interface Row {
    name: string;
    body: (s: Fence) => string | Uint8Array;
    status: 409 | 413;
    label: string;
    /** The operation the refusal must name; omitted where the body is not decodable. */
    op?: string;
  }
  const fenceText = (s: Fence): Array<[string, string]> => [['session', lit(s.session)], ['generation', lit(s.generation)]];
  const rows: Row[] = [
    { name: 'size before JSON syntax', body: () => '{' + 'x'.repeat(LIMIT), status: 413, label: 'body_too_large' },
    { name: 'size before schema', body: () => padTo(stringifyExact({ schema: 'nope', operation: 'renew' }), LIMIT + 1), status: 413, label: 'body_too_large' },
    { name: 'JSON syntax before schema', body: () => `{"schema":"nope","operation":"renew",}`, status: 409, label: 'invalid_request_envelope' },
    { name: 'duplicate field before schema', body: () => `{"schema":"nope","schema":"nope"}`, status: 409, label: 'duplicate_request_field' },
    { name: 'trailing data before schema', body: () => `{"schema":"nope"} {}`, status: 409, label: 'trailing_request_data' },
    { name: 'non-object before schema', body: () => `[{"schema":"nope"}]`, status: 409, label: 'invalid_request_envelope' },
    { name: 'schema before operation', body: () => `{"operation":"frobnicate"}`, status: 409, label: 'schema_mismatch', op: 'unknown' },
    { name: 'schema before the reserved operations', body: () => `{"schema":"nope","operation":"abort"}`, status: 409, label: 'schema_mismatch', op: 'abort' },
    { name: 'operation before unknown fields and request_id', body: () => objectText([['schema', lit(S)], ['operation', lit('frobnicate')], ['bogus', '1'], ['request_id', lit('')]]), status: 409, label: 'unknown_operation', op: 'unknown' },
    { name: 'non-control operation before unknown fields', body: () => objectText([['schema', lit(S)], ['operation', lit('status')], ['bogus', '1']]), status: 409, label: 'unknown_operation', op: 'status' },
    { name: 'reserved operation before unknown fields and request_id', body: () => objectText([['schema', lit(S)], ['operation', lit('abort')], ['bogus', '1'], ['request_id', lit('')]]), status: 409, label: 'capability_unimplemented', op: 'abort' },
    { name: 'reserved operation before field types and the fence', body: () => objectText([['schema', lit(S)], ['operation', lit('readiness')], ['session', lit('x')], ['generation', lit('0')]]), status: 409, label: 'capability_unimplemented', op: 'readiness' },
    { name: 'fields in order: unknown field before invalid request_id', body: (s) => objectText([['schema', lit(S)], ['operation', lit('renew')], ...fenceText(s), ['bogus', '1'], ['request_id', lit('')]]), status: 409, label: 'invalid_request_envelope', op: 'renew' },
    { name: 'fields in order: invalid request_id before unknown field', body: (s) => objectText([['schema', lit(S)], ['operation', lit('renew')], ...fenceText(s), ['request_id', lit('')], ['bogus', '1']]), status: 409, label: 'invalid_request_id', op: 'renew' },
    { name: 'fields in order: wrong type before invalid request_id', body: (s) => objectText([['schema', lit(S)], ['operation', lit('renew')], ['session', lit(s.session)], ['generation', lit(String(s.generation))], ['request_id', lit('')]]), status: 409, label: 'invalid_request_envelope', op: 'renew' },
    { name: 'fields in order: invalid request_id before wrong type', body: (s) => objectText([['schema', lit(S)], ['operation', lit('renew')], ['request_id', lit('')], ['session', lit(s.session)], ['generation', lit(String(s.generation))]]), status: 409, label: 'invalid_request_id', op: 'renew' },
    { name: 'invalid request_id before missing required fields', body: () => objectText([['schema', lit(S)], ['operation', lit('renew')], ['request_id', lit('')]]), status: 409, label: 'invalid_request_id', op: 'renew' },
    { name: 'missing required field before the fence', body: () => objectText([['schema', lit(S)], ['operation', lit('renew')], ['session', lit('x')]]), status: 409, label: 'invalid_request_envelope', op: 'renew' },
    { name: 'unknown field before the fence', body: () => objectText([['schema', lit(S)], ['operation', lit('renew')], ['session', lit('x')], ['generation', '0'], ['bogus', 'true']]), status: 409, label: 'invalid_request_envelope', op: 'renew' },
    { name: 'missing label before the operation check', body: (s) => objectText([['schema', lit(S)], ['operation', lit('mark_telemetry')], ...fenceText(s)]), status: 409, label: 'invalid_request_envelope', op: 'mark_telemetry' },
    { name: 'the fence after a decoded envelope', body: () => objectText([['schema', lit(S)], ['operation', lit('renew')], ['session', lit('x')], ['generation', '1'], ['request_id', lit('order-1')]]), status: 409, label: 'control_session_stale', op: 'renew' },
  ];
  for (const row of rows) {
    test(row.name, profile('profile:envelope.check_order', 'profile:envelope.refusal_operation', `reason:${row.label}`), async ({ client, cell, description, skip }) => {
      // A row about an operation the target does not serve (mark_telemetry) cannot show its order there.
      if (row.op !== undefined && KNOWN_OPS.has(row.op) && !RESERVED_OPS.includes(row.op) && CONTROL_OPS.includes(row.op)) {
        const reason = unservedReason(description, row.op);
        if (reason) skip(reason);
      }
      const s = await cell.hold();
      const r = await client.control(row.body(s), row.op);
      expectRefusal(r, row.status, row.label);
      if (row.op !== undefined) expect(r.reply.operation).toBe(row.op);
      // Whatever was refused, the grant is intact.
      expectOk(await cell.fenced('renew', s));
    });
  }
});

// ---------------------------------------------------------------------------------------------

describe('refusal replies name the operation (profile)', () => {
  const cases: Array<[string, (s: Fence) => Record<string, unknown> | string, string, string]> = [
    ['schema mismatch on renew', (s) => ({ ...fencedReq('renew', s), schema: 'nope' }), 'schema_mismatch', 'renew'],
    ['unknown field on mark_telemetry', (s) => fencedReq('mark_telemetry', s, { label: 'x', bogus: 1 }), 'invalid_request_envelope', 'mark_telemetry'],
    ['invalid request_id on release', (s) => fencedReq('release', s, { request_id: '' }), 'invalid_request_id', 'release'],
    ['a stale fence on stop', (s) => fencedReq('stop', { session: s.session, generation: s.generation + 1n }), 'control_session_stale', 'stop'],
    ['a known non-control name', (s) => fencedReq('describe', s), 'unknown_operation', 'describe'],
    ['an unknown name', (s) => fencedReq('frobnicate', s), 'unknown_operation', 'unknown'],
    ['a missing name', () => ({ schema: S }), 'unknown_operation', 'unknown'],
    ['a reserved name', () => ({ schema: S, operation: 'abort' }), 'capability_unimplemented', 'abort'],
  ];
  for (const [name, build, label, op] of cases) {
    test(`${name}: operation ${op}`, profile('profile:envelope.refusal_operation'), async ({ client, cell }) => {
      const s = await cell.hold();
      const r = await client.control(build(s), op);
      expectRefusal(r, 409, label);
      expect(r.reply.operation).toBe(op);
      expect(KNOWN_OPS.has(op) || op === 'unknown').toBe(true);
    });
  }
});

// ---------------------------------------------------------------------------------------------

describe('refusal replies name the operation however the request spells it (profile)', () => {
  test('an operation name written with escapes is the decoded name', profile('profile:envelope.refusal_operation'), async ({ client, cell }) => {
    const s = await cell.hold();
    const body = stringifyExact(fencedReq('renew', s, { bogus: 1 })).replace('"operation":"renew"', '"operation":"re\\u006eew"');
    const r = await client.control(body);
    expectRefusal(r, 409, 'invalid_request_envelope');
    expect(r.reply.operation).toBe('renew');
  });

  test('an operation named after 4 KiB of whitespace is still named', profile('profile:envelope.refusal_operation'), async ({ client, cell }) => {
    const s = await cell.hold();
    const body = '{' + ' '.repeat(8192) + stringifyExact({ ...fencedReq('renew', s), schema: 'nope' }).slice(1);
    expect(bytesOf(body).length).toBeLessThanOrEqual(LIMIT);
    const r = await client.control(body);
    expectRefusal(r, 409, 'schema_mismatch');
    expect(r.reply.operation).toBe('renew');
  });

  test('an operation named inside a nested object is not the requested operation', profile('profile:envelope.refusal_operation'), async ({ client, cell }) => {
    const s = await cell.hold();
    const body = objectText([['schema', lit(S)], ['data', lit({ operation: 'stop' })], ['operation', lit('renew')], ['session', lit(s.session)], ['generation', lit(s.generation)]]);
    const r = await client.control(body);
    expectRefusal(r, 409, 'invalid_request_envelope');
    expect(r.reply.operation).toBe('renew');
  });
});

describe('fields (part 2 "Request")', () => {
  // A strict decoder never alters text (part 2 "Decoding is strict"): a key or value beginning with U+FEFF
  // keeps it. Regression case found by the envelope property test (seed 657998050).
  test('a key spelled U+FEFF + "operation" is an unknown field, never the operation', covers('rule:envelope.strict_decoding', 'reason:invalid_request_envelope', 'profile:envelope.check_order'), async ({ client, description }) => {
    const b = stringifyExact(description.binding);
    const bom = '\uFEFF';
    // Beside a real operation it is an unknown field.
    const both = `{"schema":${lit(S)},"operation":"acquire","${bom}operation":"acquire","controller":"bom","binding":${b}}`;
    const r1 = await client.control(Buffer.from(both, 'utf8'));
    if (r1.status === 200) await releaseFromAcquireReply(client, r1);
    expectRefusal(r1, 409, 'invalid_request_envelope', 'BOM key beside operation');
    // Alone, the request names no operation and carries an unknown field: refused, never acquired. Which of
    // the two labels answers is the check order (docs/profile.md): no operation first.
    const alone = `{"schema":${lit(S)},"${bom}operation":"acquire","controller":"bom","binding":${b}}`;
    const r2 = await client.control(Buffer.from(alone, 'utf8'));
    if (r2.status === 200) await releaseFromAcquireReply(client, r2);
    expect(r2.status, 'BOM key alone').toBe(409);
    expect(['unknown_operation', 'invalid_request_envelope'], 'BOM key alone').toContain(r2.label);
    await inProfile('profile:envelope.check_order', () => expectRefusal(r2, 409, 'unknown_operation', 'BOM key alone'));
  });

  test('a controller beginning with U+FEFF is kept byte for byte (4 bytes, not "x")', covers('rule:envelope.strict_decoding', 'field:Request.controller'), async ({ client, description }) => {
    const body = `{"schema":${lit(S)},"operation":"acquire","controller":"\uFEFFx","binding":${stringifyExact(description.binding)}}`;
    const r = await client.control(Buffer.from(body, 'utf8'), 'acquire');
    expectOk(r);
    const g = checkGrant(r.reply.data);
    await client.op('release', { session: g.session, generation: g.generation });
    expect(Buffer.from(g.controller, 'utf8')).toEqual(Buffer.from([0xef, 0xbb, 0xbf, 0x78]));
  });

  // session is "absent on acquire" (part 2 "Request"): an acquire carrying it is refused.
  test('an acquire carrying session is refused with invalid_request_envelope and grants nothing', covers('field:Request.session', 'reason:invalid_request_envelope'), async ({ cell }) => {
    const r = await cell.acquire({ session: 'a'.repeat(64) });
    expectRefusal(r, 409, 'invalid_request_envelope');
    expectOk(await cell.acquire());
  });
  // Part 2 says nothing of generation on acquire ("fields an operation does not use may be omitted"):
  // refusing it is our decision, informative on another service; either way the acquire that follows
  // is served (a refusal granted nothing, an accepted one is replaced by taking the grant again).
  test('an acquire carrying generation is refused with invalid_request_envelope (profile) and grants nothing', covers('field:Request.generation', 'profile:envelope.acquire_generation'), async ({ cell, client }) => {
    const r = await cell.acquire({ generation: 1n });
    if (r.status === 200) {
      // Accepted and ignored: a grant like any other, given back.
      const g = checkGrant(r.reply.data);
      await client.op('release', { session: g.session, generation: g.generation });
    }
    await inProfile('profile:envelope.acquire_generation', async () => {
      expectRefusal(r, 409, 'invalid_request_envelope');
      expectOk(await cell.acquire());
    });
  });

  test('fields an operation does not use may be omitted: minimal fenced requests are admitted', covers('rule:envelope.unused_fields_optional', 'rule:envelope.fence_top_level', 'field:Request.session', 'field:Request.generation'), async ({ client, cell, description }) => {
    const s = await cell.hold();
    expectOk(await client.control(fencedReq('renew', s), 'renew'));
    if (served(description, 'mark_telemetry')) expectOk(await client.control(fencedReq('mark_telemetry', s, { label: 'minimal' }), 'mark_telemetry'));
    expectOk(await client.control(fencedReq('release', s), 'release'));
  });

  test('a minimal acquire (controller and binding only) is admitted', covers('rule:envelope.unused_fields_optional', 'field:Request.controller', 'field:Request.binding'), async ({ cell }) => {
    const r = await cell.acquire();
    expectOk(r);
  });

  test('key order does not matter', covers('rule:envelope.fence_top_level'), async ({ client, cell }) => {
    const s = await cell.hold();
    const body = objectText([['generation', lit(s.generation)], ['session', lit(s.session)], ['operation', lit('renew')], ['schema', lit(S)]]);
    expectOk(await client.control(body, 'renew'));
  });

  test('a fence nested in an object is an unknown field: invalid_request_envelope', profile('profile:envelope.unknown_field', 'rule:envelope.fence_top_level'), async ({ client, cell }) => {
    const s = await cell.hold();
    const r = await client.control({ schema: S, operation: 'renew', fence: { session: s.session, generation: s.generation } }, 'renew');
    expectRefusal(r, 409, 'invalid_request_envelope');
  });

  const unknownFields: Array<[string, unknown]> = [
    ['bogus', 1],
    ['Schema', S],
    ['Operation', 'renew'],
    ['sequence', 1],
    ['error', 'x'],
    ['data', {}],
    ['', ''],
    ['request_id ', 'x'],
    ['__proto__', {}],
    ['session_id', 'x'],
  ];
  for (const [key, value] of unknownFields) {
    test(`an unknown field ${JSON.stringify(key)} gives invalid_request_envelope`, profile('profile:envelope.unknown_field', 'rule:envelope.strict_decoding', 'reason:invalid_request_envelope'), async ({ client, cell }) => {
      const s = await cell.hold();
      const body = objectText([['schema', lit(S)], ['operation', lit('renew')], ['session', lit(s.session)], ['generation', lit(s.generation)], [key, lit(value)]]);
      expectRefusal(await client.control(body, 'renew'), 409, 'invalid_request_envelope');
    });
  }

  test('an unknown field inside binding gives invalid_request_envelope', profile('profile:envelope.unknown_field', 'rule:envelope.strict_decoding'), async ({ client, description }) => {
    const r = await client.control({ schema: S, operation: 'acquire', controller: 'nested-unknown', binding: { ...description.binding, extra: 1 } }, 'acquire');
    if (r.status === 200) await releaseFromAcquireReply(client, r);
    expectRefusal(r, 409, 'invalid_request_envelope');
  });

  // Every field of part 2 "Request" given a value of the wrong JSON type, on an otherwise valid renew
  // (renew uses none of them, so only decoding can refuse).
  const wrongTypes: Array<[string, unknown[]]> = [
    ['session', [5, null, true, [], {}]],
    ['label', [5, null, false, ['x'], { x: 1 }]],
    ['controller', [5, null, ['x']]],
    ['binding', ['x', 5, null, [], true]],
    ['axis_mask', ['1', -1, 1.5, null, [1], 4294967296n]],
    ['velocity', ['x', 1, null, ['a'], [null], { a: 1 }]],
    ['timeout_ms', ['1', -1, 1.5, null, 4294967296n]],
    ['handle', ['5', -1, 1.5, null, true]],
    ['points', ['x', 1, null, {}, [1], ['p']]],
    ['identity', ['x', 1, null, []]],
    ['jog_generation', ['5', -1, 1.5, null]],
    ['source_sequence', ['5', -1, 1.5, null, []]],
    ['source_origin_host_ns', ['5', -1, 2.5, null]],
    ['deadline_host_ns', ['5', -1, 2.5, null]],
    ['clock_incarnation', [1, null, true, []]],
    ['requested_lease_ms', ['500', 1.5, null, [500]]],
  ];
  for (const [field, values] of wrongTypes) {
    test(`${field} of the wrong type gives invalid_request_envelope`, profile('profile:envelope.field_type', 'reason:invalid_request_envelope'), async ({ client, cell }) => {
      const s = await cell.hold();
      for (const v of values) {
        const r = await client.control(fencedReq('renew', s, { [field]: v }), 'renew');
        expectRefusal(r, 409, 'invalid_request_envelope', `${field}: ${lit(v)}`);
      }
      expectOk(await cell.fenced('renew', s));
    });
  }

  test('wrongly typed fence fields give invalid_request_envelope, not a fence refusal', profile('profile:envelope.field_type', 'field:Request.session', 'field:Request.generation'), async ({ client, cell }) => {
    const s = await cell.hold();
    for (const [session, generation] of [[5, s.generation], [s.session, String(s.generation)], [null, s.generation], [s.session, null], [s.session, [s.generation]]] as const) {
      const r = await client.control({ schema: S, operation: 'renew', session, generation }, 'renew');
      expectRefusal(r, 409, 'invalid_request_envelope', `${lit(session)} ${lit(generation)}`);
    }
  });

  const missing: Array<[string, string, (s: Fence, binding: unknown) => Record<string, unknown>]> = [
    ['renew', 'session', (s) => ({ schema: S, operation: 'renew', generation: s.generation })],
    ['renew', 'generation', (s) => ({ schema: S, operation: 'renew', session: s.session })],
    ['renew', 'session and generation', () => ({ schema: S, operation: 'renew' })],
    ['release', 'generation', (s) => ({ schema: S, operation: 'release', session: s.session })],
    ['stop', 'session', (s) => ({ schema: S, operation: 'stop', generation: s.generation })],
    ['mark_telemetry', 'label', (s) => fencedReq('mark_telemetry', s)],
    ['acquire', 'controller', (_s, binding) => ({ schema: S, operation: 'acquire', binding })],
    ['acquire', 'binding', () => ({ schema: S, operation: 'acquire', controller: 'missing-binding' })],
  ];
  for (const [op, field, build] of missing) {
    test(`${op} without ${field} gives invalid_request_envelope`, profile('profile:envelope.missing_field', 'reason:invalid_request_envelope'), async ({ client, cell, description, skip }) => {
      const reason = unservedReason(description, op);
      if (reason) skip(reason);
      const s = await cell.hold();
      const r = await client.control(build(s, description.binding), op);
      expectRefusal(r, 409, 'invalid_request_envelope');
      expectOk(await cell.fenced('renew', s));
    });
  }

  test('binding without a required field gives invalid_request_envelope', profile('profile:envelope.missing_field'), async ({ client, description }) => {
    for (const drop of ['pair_id', 'revision', 'configuration_sha256']) {
      const binding: Record<string, unknown> = { ...description.binding };
      delete binding[drop];
      const r = await client.control({ schema: S, operation: 'acquire', controller: 'missing-binding-field', binding }, 'acquire');
      if (r.status === 200) await releaseFromAcquireReply(client, r);
      expectRefusal(r, 409, 'invalid_request_envelope', drop);
    }
  });

  test('controller outside 1..63 bytes gives invalid_request_envelope; 63 bytes is admitted', profile('profile:envelope.controller_range', 'limit:controller_bytes', 'field:Request.controller'), async ({ cell }) => {
    for (const controller of ['', 'x'.repeat(64), 'é'.repeat(32)]) {
      expectRefusal(await cell.acquire({ controller }), 409, 'invalid_request_envelope', `${bytesOf(controller).length} bytes`);
    }
    expectOk(await cell.acquire({ controller: 'é'.repeat(31) + 'x' }));
  });
});

// ---------------------------------------------------------------------------------------------

describe('request_id (part 2 "Request", part 4 "Envelope rules", part 8)', () => {
  const invalid: Array<[string, unknown]> = [
    ['empty', ''],
    ['65 bytes', 'x'.repeat(65)],
    ['null', null],
    ['a number', 7],
    ['true', true],
    ['an array', ['a']],
    ['an object', { id: 'a' }],
    ['a tab (0x09)', 'a\tb'],
    ['a newline (0x0a)', 'a\nb'],
    ['0x1f', 'a\u001fb'],
    ['DEL (0x7f)', 'a\u007fb'],
    ['NUL', '\u0000'],
    ['non-ASCII (é)', 'é'],
    ['non-ASCII of 64 bytes (32 x é)', 'é'.repeat(32)],
    ['non-ASCII emoji', '\u{1F600}'],
  ];
  for (const [name, id] of invalid) {
    test(`request_id ${name} gives invalid_request_id`, covers('rule:idempotency.invalid_id', 'field:Request.request_id', 'limit:request_id_bytes', 'reason:invalid_request_id'), async ({ client, cell, description }) => {
      const s = await cell.hold();
      expectRefusal(await client.control(fencedReq('renew', s, { request_id: id }), 'renew'), 409, 'invalid_request_id');
      if (served(description, 'mark_telemetry')) expectRefusal(await client.control(fencedReq('mark_telemetry', s, { label: 'id', request_id: id }), 'mark_telemetry'), 409, 'invalid_request_id');
    });
  }

  test('request_id of 1..64 printable ASCII bytes (0x20..0x7e) is admitted', covers('rule:idempotency.invalid_id', 'field:Request.request_id', 'limit:request_id_bytes'), async ({ client, cell }) => {
    const s = await cell.hold();
    const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i)).join('');
    const ids = ['a', ' ', '~', 'x'.repeat(64), printable.slice(0, 64), printable.slice(-64), '"\\/{}[]:,', '   '];
    for (const id of new Set(ids)) {
      expect(bytesOf(id).length).toBeGreaterThanOrEqual(1);
      expect(bytesOf(id).length).toBeLessThanOrEqual(64);
      expectOk(await client.control(fencedReq('renew', s, { request_id: id }), 'renew'), JSON.stringify(id));
    }
  });
});

describe('idempotent retries (part 4 "Envelope rules")', () => {
  // The rules are reached through a fenced operation that executes anew each time and says so: mark_telemetry
  // (a new native sequence) or, on a target that does not serve it, renew (a new deadline; harness/served.ts).

  test('same id and same payload replays the reply without executing again', covers('rule:idempotency.join_or_replay', 'field:Request.request_id'), async ({ client, cell, description }) => {
    const v = vehicle(description);
    const s = await cell.hold();
    const first = await client.control(v.req(s, 'replay', { request_id: 'replay-1' }), v.op);
    expectOk(first);
    const again = await client.control(v.req(s, 'replay', { request_id: 'replay-1' }), v.op);
    expectOk(again);
    expect(again.reply).toEqual(first.reply);
    // A fresh id executes: a new, larger native sequence (a later deadline).
    const fresh = await client.control(v.req(s, 'replay', { request_id: 'replay-2' }), v.op);
    expectOk(fresh);
    expect(v.witness(fresh)).toBeGreaterThan(v.witness(first));
    // And the first id still replays its own reply.
    expect((await client.control(v.req(s, 'replay', { request_id: 'replay-1' }), v.op)).reply).toEqual(first.reply);
  });

  test('the same decoded payload replays whatever the key order and whitespace', covers('rule:idempotency.join_or_replay'), async ({ client, cell, description }) => {
    const v = vehicle(description);
    const s = await cell.hold();
    const req = v.req(s, 'text', { request_id: 'text-1' });
    const first = await client.control(req, v.op);
    expectOk(first);
    const reordered = objectText(Object.entries(req).reverse().map(([k, x]) => [k, lit(x)] as const)).replace(/,/g, ' ,\n\t');
    const again = await client.control(reordered, v.op);
    expectOk(again);
    expect(v.witness(again)).toBe(v.witness(first));
    // An escaped but equal string is the same decoded payload too.
    const escaped = stringifyExact(req).replace('"text-1"', '"t\\u0065xt-1"');
    expect(escaped).not.toBe(stringifyExact(req));
    expect(v.witness(await client.control(escaped, v.op))).toBe(v.witness(first));
  });

  test('a renewal with a reused id replays the old grant; a fresh id renews', covers('rule:idempotency.fresh_id', 'rule:idempotency.join_or_replay'), async ({ client, cell }) => {
    const s = await cell.hold();
    const first = await client.control(fencedReq('renew', s, { request_id: 'renew-1' }), 'renew');
    expectOk(first);
    const replay = await client.control(fencedReq('renew', s, { request_id: 'renew-1' }), 'renew');
    expect(replay.reply).toEqual(first.reply);
    const d1 = checkGrant(first.reply.data).deadline_host_ns;
    // Host monotonic ns moves on between requests; a fresh renewal is computed anew.
    let fresh: CheckedReply;
    let n = 0;
    do fresh = await client.control(fencedReq('renew', s, { request_id: `renew-fresh-${++n}` }), 'renew');
    while (fresh.status === 200 && checkGrant(fresh.reply.data).deadline_host_ns === d1 && n < 50);
    expectOk(fresh);
    expect(checkGrant(fresh.reply.data).deadline_host_ns).toBeGreaterThan(d1);
  });

  test('concurrent identical requests with one id are executed once', covers('rule:idempotency.join_or_replay'), async ({ target, cell, description }) => {
    const v = vehicle(description);
    const s = await cell.hold();
    const clients = [target.client(), target.client(), target.client()];
    const body = stringifyExact(v.req(s, 'join', { request_id: 'join-1' }));
    const replies = await Promise.all(clients.flatMap((c) => [c.control(body, v.op), c.control(body, v.op)]));
    for (const r of replies) expectOk(r);
    expect(new Set(replies.map((r) => v.witness(r))).size).toBe(1);
  });

  test('same id with a changed payload gives request_id_conflict; the original still replays', covers('rule:idempotency.conflict', 'reason:request_id_conflict'), async ({ client, cell, description }) => {
    const v = vehicle(description);
    const s = await cell.hold();
    const first = await client.control(v.req(s, 'original', { request_id: 'conflict-1' }), v.op);
    expectOk(first);
    expectRefusal(await client.control(v.req(s, 'changed', { request_id: 'conflict-1' }), v.op), 409, 'request_id_conflict');
    // A different operation under the same id is a changed payload too.
    const other = v.op === 'renew' ? 'release' : 'renew';
    expectRefusal(await client.control(fencedReq(other, s, { request_id: 'conflict-1' }), other), 409, 'request_id_conflict');
    // An added optional field changes the payload.
    expectRefusal(await client.control(v.req(s, 'original', { request_id: 'conflict-1', source_sequence: 1n }), v.op), 409, 'request_id_conflict');
    const again = await client.control(v.req(s, 'original', { request_id: 'conflict-1' }), v.op);
    expect(again.reply).toEqual(first.reply);
  });

  test('a refused outcome is remembered: correcting it needs a fresh id', covers('rule:idempotency.fresh_id', 'rule:idempotency.join_or_replay', 'rule:idempotency.conflict'), async ({ client, cell, description, skip }) => {
    // Reached through an operation's own refusal of a decoded request (mark_telemetry's label); renew has
    // none that the session's retry cache is documented to hold (a fence refusal may be decided before it).
    const reason = unservedReason(description, 'mark_telemetry');
    if (reason) skip(reason);
    const mark = (s: Fence, label: string, request_id: string) => fencedReq('mark_telemetry', s, { label, request_id });
    const s = await cell.hold();
    // label of 129 bytes: decoded by the envelope, refused by the operation (telemetry_label_invalid).
    const refused = await client.control(mark(s, 'x'.repeat(129), 'fix-1'), 'mark_telemetry');
    expectRefusal(refused, 409, 'telemetry_label_invalid');
    const replay = await client.control(mark(s, 'x'.repeat(129), 'fix-1'), 'mark_telemetry');
    expect(replay.reply).toEqual(refused.reply);
    expectRefusal(await client.control(mark(s, 'fixed', 'fix-1'), 'mark_telemetry'), 409, 'request_id_conflict');
    expectOk(await client.control(mark(s, 'fixed', 'fix-2'), 'mark_telemetry'));
  });

  test('release drops the cache: the id is free in the next session', covers('rule:idempotency.cache_dropped'), async ({ client, cell, description }) => {
    const v = vehicle(description);
    const a = await cell.hold();
    const first = await client.control(v.req(a, 'before release', { request_id: 'drop-1' }), v.op);
    expectOk(first);
    expectOk(await cell.fenced('release', a));
    const b = await cell.hold();
    // Same id, changed payload: accepted as new.
    expectOk(await client.control(v.req(b, 'after release', { request_id: 'drop-1' }), v.op));
    // Same id and the same tag as before: executed again, not replayed.
    const c = await client.control(v.req(b, 'before release', { request_id: 'drop-2' }), v.op);
    expectOk(c);
    expect(v.witness(c)).toBeGreaterThan(v.witness(first));
  });

  test('the cache belongs to the session: the old session cannot replay after release', covers('rule:idempotency.cache_dropped', 'rule:idempotency.remember_outcomes'), async ({ client, cell, description }) => {
    const v = vehicle(description);
    const a = await cell.hold();
    expectOk(await client.control(v.req(a, 'old', { request_id: 'session-1' }), v.op));
    expectOk(await cell.fenced('release', a));
    const b = await cell.hold();
    const r = await client.control(v.req(b, 'old', { request_id: 'session-1' }), v.op);
    expectOk(r);
    // The released session's retry is refused by the fence, not replayed.
    const stale = await client.control(v.req(a, 'old', { request_id: 'session-1' }), v.op);
    expect(stale.status).toBe(409);
    expect(stale.label).not.toBe('request_id_conflict');
  });

  test('lease expiry drops the cache', covers('rule:idempotency.cache_dropped'), async ({ client, cell, description }) => {
    const v = vehicle(description);
    const a = await cell.grant();
    expectOk(await client.control(v.req(a, 'before expiry', { request_id: 'expiry-1' }), v.op));
    // Do not renew; acquire again as soon as the lease has run out (bounded wait, no timing asserted).
    const bound = Date.now() + 10 * a.grant.lease_ms + 5_000;
    let r = await cell.acquire();
    while (r.status !== 200 && r.label === 'control_already_owned' && Date.now() < bound) {
      await new Promise((res) => setTimeout(res, 50));
      r = await cell.acquire();
    }
    expectOk(r);
    const g = checkGrant(r.reply.data);
    expect(g.session).not.toBe(a.session);
    expectOk(await client.control(v.req(g, 'after expiry', { request_id: 'expiry-1' }), v.op));
  });

  /** Send `n` successful outcomes under fresh ids (renewals, so the lease stays alive). */
  async function outcomes(client: ControlClient, s: Fence, prefix: string, n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const r = await client.control(fencedReq('renew', s, { request_id: `${prefix}-${i}` }), 'renew');
      expectOk(r, `${prefix}-${i}`);
    }
  }

  test('the last 256 outcomes are remembered: after 255 others the id still conflicts', covers('rule:idempotency.remember_outcomes', 'limit:request_id_outcomes', 'rule:idempotency.conflict'), async ({ client, cell, description }) => {
    const v = vehicle(description);
    const s = await cell.hold();
    const first = await client.control(v.req(s, 'first', { request_id: 'window-x' }), v.op);
    expectOk(first);
    await outcomes(client, s, 'window-255', 255);
    expectRefusal(await client.control(v.req(s, 'changed', { request_id: 'window-x' }), v.op), 409, 'request_id_conflict');
    expect((await client.control(v.req(s, 'first', { request_id: 'window-x' }), v.op)).reply).toEqual(first.reply);
  });

  test('the last 256 outcomes are remembered: after 256 others the id is forgotten', covers('rule:idempotency.remember_outcomes', 'limit:request_id_outcomes'), async ({ client, cell, description }) => {
    const v = vehicle(description);
    const s = await cell.hold();
    const first = await client.control(v.req(s, 'first', { request_id: 'window-y' }), v.op);
    expectOk(first);
    await outcomes(client, s, 'window-256', 256);
    const r = await client.control(v.req(s, 'changed', { request_id: 'window-y' }), v.op);
    expectOk(r);
    expect(v.witness(r)).toBeGreaterThan(v.witness(first));
  });
});

describe('envelope reasons apply to every POST /v1/control operation (part 7 "Common sets")', () => {
  test('every dispatched operation refuses a wrong schema, a duplicate field, trailing data and an invalid request_id before doing anything', covers('rule:common_sets.envelope', 'profile:envelope.refusal_operation'), async ({ client, cell, description }) => {
    // Dispatched: what Describe reports as not unimplemented (a target answers capability_unimplemented first otherwise).
    const unimplemented = description.capabilities.filter((c) => c.state === 'unimplemented').map((c) => c.name);
    const dispatched = CONTROL_OPS.filter((op) => !RESERVED_OPS.includes(op) && !unimplemented.includes(op));
    // At least the grant operations; which others are served is Describe's to say (part 1).
    expect(dispatched).toEqual(expect.arrayContaining(['renew', 'release', 'stop']));
    const s = await cell.hold(); // renewed in the background: the loop takes longer than one lease
    for (const op of dispatched) {
      const base = fencedReq(op, s);
      expectRefusal(await client.control({ ...base, schema: 'svc.rt-control.request.v0' }, op), 409, 'schema_mismatch', op);
      // A body that does not decode as JSON names its operation only as we decide (docs/profile.md "Reply envelope").
      const duplicate = await client.control(stringifyExact(base).replace(/}$/, `,"operation":${lit(op)}}`));
      expectRefusal(duplicate, 409, 'duplicate_request_field', op);
      await expectRefusalOperation(duplicate, op);
      const trailing = await client.control(stringifyExact(base) + '{}');
      expectRefusal(trailing, 409, 'trailing_request_data', op);
      await expectRefusalOperation(trailing, op);
      expectRefusal(await client.control({ ...base, request_id: '' }, op), 409, 'invalid_request_id', op);
      // prepare_trajectory bodies may be far larger (222516384 bytes: suites/trajectory checks that limit)
      if (op !== 'prepare_trajectory') expectRefusal(await client.control(padTo(stringifyExact(base), LIMIT + 1)), 413, 'body_too_large', op);
    }
    // None of them reached the cell: the grant is the same one.
    expectOk(await cell.fenced('renew', s));
  });
});

async function releaseFromAcquireReply(client: ControlClient, r: CheckedReply): Promise<void> {
  const g = checkGrant(r.reply.data);
  await client.op('release', { session: g.session, generation: g.generation });
}
