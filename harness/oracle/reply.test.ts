import { codeOf } from './errors.ts';
import { test, expect } from 'vitest';
import fc from 'fast-check';
import { checkCommandResult, checkGrant, checkReply, leadingLabel } from './reply.ts';
import { OracleError } from './errors.ts';

const JSON_CT = 'application/json';
const enc = (s: string) => new TextEncoder().encode(s);

const SESSION = 'a'.repeat(64);
const BINDING = '{"pair_id":"cell-a","revision":3,"configuration_sha256":"sha256:' + 'b'.repeat(64) + '"}';
const GRANT = `{"stopping":false,"deadline_host_ns":123456789012,"session":"${SESSION}","generation":7,"controller":"ci","binding":${BINDING},"lease_ms":500}`;
const COMMAND_RESULT = '{"Sequence":9,"Handle":0,"Generation":7,"Operation":4,"Result":1,"Reason":2,"AxisMask":63}';

test('an admitted reply with every field kind', () => {
  const body = `{"schema":"svc.rt-control.response.v1","operation":"enable","sequence":18446744073709551615,"handle":5,"data":{"x":1},"native_result":${COMMAND_RESULT},"native_jog_result":{"StateReason":0}}`;
  const r = checkReply(200, 'application/json; charset=utf-8', enc(body), 'enable');
  expect(r.status).toBe(200);
  expect(r.label).toBeUndefined();
  expect(r.reply.sequence).toBe(18446744073709551615n);
  expect(r.reply.handle).toBe(5n);
  expect(r.reply.native_result).toEqual({ Sequence: 9n, Handle: 0n, Generation: 7n, Operation: 4, Result: 1, Reason: 2, AxisMask: 63 });
});

test('refusals yield the leading label', () => {
  const cases: Array<[number, string, string]> = [
    [409, 'control_session_stale', 'control_session_stale'],
    [409, 'native_limit_exceeded: segment=1 sample=2 axis=j1', 'native_limit_exceeded'],
    [409, 'unmapped_dense_axis j9', 'unmapped_dense_axis'],
    [413, 'body_too_large', 'body_too_large'],
    [404, 'resource_unknown', 'resource_unknown'],
  ];
  for (const [status, error, label] of cases) {
    const body = `{"schema":"svc.rt-control.response.v1","operation":"acquire","error":${JSON.stringify(error)}}`;
    expect(checkReply(status, JSON_CT, enc(body)).label).toBe(label);
  }
  expect(leadingLabel('busy:\tx')).toBe('busy');
});

// Each row: a minimal mutation of a valid reply and the code it must raise.
const OK_409 = '{"schema":"svc.rt-control.response.v1","operation":"renew","error":"expired"}';
const REPLY_ERRORS: Array<[string, number, string | undefined, string, string]> = [
  ['status 500', 500, JSON_CT, OK_409, 'reply_status'],
  ['status 400', 400, JSON_CT, OK_409, 'reply_status'],
  ['missing content type', 409, undefined, OK_409, 'reply_content_type'],
  ['text/plain', 409, 'text/plain', OK_409, 'reply_content_type'],
  ['odd charset', 409, 'application/json; charset=latin1', OK_409, 'reply_content_type'],
  ['not JSON', 409, JSON_CT, 'expired', 'reply_json'],
  ['duplicate field', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","error":"expired","error":"x"}', 'reply_json'],
  ['trailing data', 409, JSON_CT, OK_409 + '\n{}', 'reply_json'],
  ['array body', 409, JSON_CT, '[]', 'reply_not_object'],
  ['unknown field', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","error":"expired","detail":"x"}', 'reply_unknown_field'],
  ['case-variant field', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","Error":"expired"}', 'reply_unknown_field'],
  ['missing schema', 409, JSON_CT, '{"operation":"renew","error":"expired"}', 'reply_schema'],
  ['request schema', 409, JSON_CT, '{"schema":"svc.rt-control.request.v1","operation":"renew","error":"expired"}', 'reply_schema'],
  ['missing operation', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","error":"expired"}', 'reply_operation'],
  ['empty operation', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"","error":"expired"}', 'reply_operation'],
  ['sequence 0', 200, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","sequence":0}', 'reply_sequence'],
  ['sequence negative', 200, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","sequence":-1}', 'reply_sequence'],
  ['sequence 2^64', 200, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","sequence":18446744073709551616}', 'reply_sequence'],
  ['sequence float', 200, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","sequence":1.0}', 'reply_sequence'],
  ['sequence string', 200, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","sequence":"1"}', 'reply_sequence'],
  ['handle 0', 200, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","handle":0}', 'reply_handle'],
  ['handle exponent', 200, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","handle":1e3}', 'reply_handle'],
  ['data null', 200, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","data":null}', 'reply_data'],
  ['native_result not object', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"halt","native_result":1,"error":"native_rejected"}', 'reply_command_result_not_object'],
  ['native_jog_result array', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"end_jog","native_jog_result":[],"error":"native_rejected"}', 'reply_native_jog_result'],
  ['error empty', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","error":""}', 'reply_error'],
  ['error not string', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","error":5}', 'reply_error'],
  ['error on 200', 200, JSON_CT, OK_409, 'reply_error'],
  ['no error on 409', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew"}', 'reply_error'],
  ['error without label', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","error":": x"}', 'reply_error'],
  ['413 with other label', 413, JSON_CT, OK_409, 'reply_status_label'],
  ['body_too_large with 409', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"renew","error":"body_too_large"}', 'reply_status_label'],
  ['404 with other label', 404, JSON_CT, OK_409, 'reply_status_label'],
  ['resource_unknown with 409', 409, JSON_CT, '{"schema":"svc.rt-control.response.v1","operation":"resource","error":"resource_unknown"}', 'reply_status_label'],
];

test.each(REPLY_ERRORS)('checkReply refuses %s', (_name, status, ct, body, code) => {
  expect(codeOf(() => checkReply(status, ct, enc(body)))).toBe(code);
});

test('expectOperation mismatch is reply_operation', () => {
  expect(codeOf(() => checkReply(409, JSON_CT, enc(OK_409), 'stop'))).toBe('reply_operation');
  expect(checkReply(409, JSON_CT, enc(OK_409), 'renew').label).toBe('expired');
});

test('reply_json keeps the JSON code in detail', () => {
  try {
    checkReply(409, JSON_CT, Uint8Array.from([0x7b, 0xff]));
    expect.unreachable();
  } catch (e) {
    expect((e as OracleError).code).toBe('reply_json');
    expect((e as OracleError).detail.json_code).toBe('json_invalid_utf8');
  }
});

const crBig = (text: string) => checkCommandResult(parseExactForTest(text));
function parseExactForTest(text: string): unknown {
  // CommandResult arrives inside a reply; go through the exact parser so integers are bigints.
  return checkReplyData(`{"schema":"svc.rt-control.response.v1","operation":"x","data":${text}}`);
}
function checkReplyData(body: string): unknown {
  return checkReply(200, JSON_CT, enc(body)).reply.data;
}

const COMMAND_RESULT_ERRORS: Array<[string, string, string]> = [
  ['missing Reason', '{"Sequence":9,"Handle":0,"Generation":7,"Operation":4,"Result":1,"AxisMask":63}', 'reply_command_result_reason'],
  ['lowercase name', '{"sequence":9,"Handle":0,"Generation":7,"Operation":4,"Result":1,"Reason":2,"AxisMask":63}', 'reply_command_result_unknown_field'],
  ['extra field', COMMAND_RESULT.replace('}', ',"Extra":1}'), 'reply_command_result_unknown_field'],
  ['Result 3', COMMAND_RESULT.replace('"Result":1', '"Result":3'), 'reply_command_result_result'],
  ['Reason above uint32', COMMAND_RESULT.replace('"Reason":2', '"Reason":4294967296'), 'reply_command_result_reason'],
  ['AxisMask negative', COMMAND_RESULT.replace('"AxisMask":63', '"AxisMask":-1'), 'reply_command_result_axis_mask'],
  ['Sequence float', COMMAND_RESULT.replace('"Sequence":9', '"Sequence":9.5'), 'reply_command_result_sequence'],
  ['Handle bool', COMMAND_RESULT.replace('"Handle":0', '"Handle":true'), 'reply_command_result_handle'],
  ['Generation above uint64', COMMAND_RESULT.replace('"Generation":7', '"Generation":18446744073709551616'), 'reply_command_result_generation'],
  ['Operation string', COMMAND_RESULT.replace('"Operation":4', '"Operation":"4"'), 'reply_command_result_operation'],
  ['not an object', '[1]', 'reply_command_result_not_object'],
];

test.each(COMMAND_RESULT_ERRORS)('checkCommandResult refuses %s', (_name, text, code) => {
  expect(codeOf(() => crBig(text))).toBe(code);
});

test('checkCommandResult can read omitted fields as zero when asked', () => {
  const obj = parseExactForTest('{"Result":2}');
  expect(codeOf(() => checkCommandResult(obj))).toBe('reply_command_result_sequence');
  expect(checkCommandResult(obj, { allowOmittedZero: true })).toEqual({ Sequence: 0n, Handle: 0n, Generation: 0n, Operation: 0, Result: 2, Reason: 0, AxisMask: 0 });
});

test('checkGrant reads a full grant and a released one', () => {
  const g = checkGrant(parseExactForTest(GRANT));
  expect(g).toEqual({
    stopping: false,
    deadline_host_ns: 123456789012n,
    session: SESSION,
    generation: 7n,
    controller: 'ci',
    binding: { pair_id: 'cell-a', revision: 3n, configuration_sha256: 'sha256:' + 'b'.repeat(64) },
    lease_ms: 500,
  });
  const released = checkGrant(parseExactForTest(`{"generation":7,"controller":"ci","binding":${BINDING},"lease_ms":500}`));
  expect(released.session).toBe('');
  expect(released.stopping).toBe(false);
});

const g = (from: string, to: string) => GRANT.replace(from, to);
const GRANT_ERRORS: Array<[string, string, string]> = [
  ['not an object', '"x"', 'reply_grant_not_object'],
  ['unknown field', GRANT.replace(/}$/, ',"owner":"x"}'), 'reply_grant_unknown_field'],
  ['stopping as 0', g('"stopping":false', '"stopping":0'), 'reply_grant_stopping'],
  ['deadline negative', g('123456789012', '-1'), 'reply_grant_deadline_host_ns'],
  ['deadline float', g('123456789012', '1.5e11'), 'reply_grant_deadline_host_ns'],
  ['session uppercase', g(SESSION, 'A'.repeat(64)), 'reply_grant_session'],
  ['session short', g(SESSION, 'a'.repeat(63)), 'reply_grant_session'],
  ['generation string', g('"generation":7', '"generation":"7"'), 'reply_grant_generation'],
  ['controller too long', g('"controller":"ci"', `"controller":"${'c'.repeat(64)}"`), 'reply_grant_controller'],
  ['controller number', g('"controller":"ci"', '"controller":1'), 'reply_grant_controller'],
  ['binding missing', `{"session":"${SESSION}","generation":7,"lease_ms":500}`, 'reply_grant_binding_not_object'],
  ['binding pair_id empty', g('"pair_id":"cell-a"', '"pair_id":""'), 'reply_grant_binding_pair_id'],
  ['binding revision 0', g('"revision":3', '"revision":0'), 'reply_grant_binding_revision'],
  ['binding configuration missing', g(`,"configuration_sha256":"sha256:${'b'.repeat(64)}"`, ''), 'reply_grant_binding_configuration_sha256'],
  ['binding machine_sha256 number', g('"revision":3', '"revision":3,"machine_sha256":1'), 'reply_grant_binding_machine_sha256'],
  ['binding extra', g('"revision":3', '"revision":3,"deployment_sha256":"x"'), 'reply_grant_binding_unknown_field'],
  ['lease_ms negative', g('"lease_ms":500', '"lease_ms":-5'), 'reply_grant_lease_ms'],
  ['lease_ms fraction', g('"lease_ms":500', '"lease_ms":500.5'), 'reply_grant_lease_ms'],
];

test.each(GRANT_ERRORS)('checkGrant refuses %s', (_name, text, code) => {
  expect(codeOf(() => checkGrant(parseExactForTest(text)))).toBe(code);
});

test('property: any uint64 sequence round-trips; zero is refused', () => {
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), (n) => {
      const body = enc(`{"schema":"svc.rt-control.response.v1","operation":"arm","sequence":${n}}`);
      if (n === 0n) expect(codeOf(() => checkReply(200, JSON_CT, body))).toBe('reply_sequence');
      else expect(checkReply(200, JSON_CT, body).reply.sequence).toBe(n);
    }),
  );
});
