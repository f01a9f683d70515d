// The service's strict decoder against JSON.parse on valid input, and its refusals by code.

import fc from 'fast-check';
import { expect, test } from 'vitest';
import { decodeJson, JsonDecodeError, JsonNumber, JsonObject, toInteger, toUint64, type JsonValue } from './json.ts';
import { U64_MAX } from './primitives.ts';

const enc = (s: string) => new TextEncoder().encode(s);

/** Decoded tree back to plain JS, numbers through Number(), for comparison with JSON.parse. */
function plain(v: JsonValue): unknown {
  if (v instanceof JsonNumber) return Number(v.text);
  if (v instanceof JsonObject) return Object.fromEntries([...v.fields].map(([k, x]) => [k, plain(x)]));
  if (Array.isArray(v)) return v.map(plain);
  return v;
}

test('agrees with JSON.parse on every valid document without repeated keys', () => {
  fc.assert(
    fc.property(fc.jsonValue(), (value) => {
      const text = JSON.stringify(value);
      expect(plain(decodeJson(enc(text)))).toEqual(JSON.parse(text));
    }),
    { numRuns: 300 },
  );
});

test('integers are kept exactly as their literal', () => {
  const v = decodeJson(enc('{"a":18446744073709551615,"b":9007199254740993,"c":-5}')) as JsonObject;
  expect(toUint64(v.get('a') as JsonNumber)).toBe(U64_MAX);
  expect(toUint64(v.get('b') as JsonNumber)).toBe(9007199254740993n);
  expect(toUint64(v.get('c') as JsonNumber)).toBeUndefined();
  expect(toInteger(v.get('c') as JsonNumber, -10n, 10n)).toBe(-5n);
  for (const bad of ['18446744073709551616', '1.0', '1e3', '-0']) expect(toUint64(new JsonNumber(bad))).toBeUndefined();
});

const refusals: Array<[string, string]> = [
  ['{"a":1,"a":2}', 'json_duplicate_key'],
  ['{"x":{"a":1,"a":1}}', 'json_duplicate_key'],
  ['{"a":1} x', 'json_trailing_data'],
  ['{"a":1}{}', 'json_trailing_data'],
  ['', 'json_empty'],
  ['   ', 'json_empty'],
  ['{"a":01}', 'json_syntax'],
  ['{"a":1,}', 'json_syntax'],
  ['{a:1}', 'json_syntax'],
  ['{"a":"\\ud800"}', 'json_invalid_utf8'],
  ['{"a":"\\udc00x"}', 'json_invalid_utf8'],
  ['[' .repeat(80) + ']'.repeat(80), 'json_depth'],
  ['{"a":tru}', 'json_syntax'],
  ['{"a":"x\ny"}', 'json_syntax'],
];

test.each(refusals)('%s is refused with %s', (text, code) => {
  try {
    decodeJson(enc(text));
    expect.unreachable();
  } catch (e) {
    expect(e).toBeInstanceOf(JsonDecodeError);
    expect((e as JsonDecodeError).code).toBe(code);
  }
});

test('invalid UTF-8 bytes inside a string are refused', () => {
  const bytes = new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]);
  expect(() => decodeJson(bytes)).toThrow(JsonDecodeError);
});

test('escapes and multibyte text decode as JSON.parse does', () => {
  const text = '{"s":"\\u00e9\\ud83d\\ude00 \\"q\\" \\\\ \\/ \\n é😀"}';
  expect(plain(decodeJson(enc(text)))).toEqual(JSON.parse(text));
});

test('long ASCII strings and numbers decode whole, from a view into a larger buffer too', () => {
  // Strings of 256 bytes and more take the native slice; a view that starts inside its buffer must read
  // from its own offset.
  for (const n of [255, 256, 257, 9000, 70_000]) {
    const s = Array.from({ length: n }, (_, i) => String.fromCharCode(32 + ((i * 7) % 90)).replace(/["\\]/, 'x')).join('');
    const num = `1${'0'.repeat(n)}`;
    const text = `{"s":"${s}","n":${num}}`;
    const body = enc(text);
    const framed = new Uint8Array(body.length + 13);
    framed.set(body, 7);
    for (const bytes of [body, framed.subarray(7, 7 + body.length), Buffer.from(body)]) {
      const v = decodeJson(bytes) as JsonObject;
      expect(v.get('s')).toBe(s);
      expect((v.get('n') as JsonNumber).text).toBe(num);
    }
  }
});
