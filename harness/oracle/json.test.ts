import { codeOf } from './errors.ts';
import { test, expect } from 'vitest';
import fc from 'fast-check';
import { canonicalJson, parseExact, sha256Hex, stringifyExact } from './json.ts';
import type { JsonExact, JsonObject } from './json.ts';
import { OracleError } from './errors.ts';
import { propertyRun } from '../property.ts';

const bytes = (...b: number[]) => Uint8Array.from(b);
const utf8 = (s: string) => new TextEncoder().encode(s);

test('integer literals are exact bigints, other numbers are float64', () => {
  const v = parseExact('{"a":18446744073709551615,"b":-9007199254740993,"c":1.5,"d":1e2,"e":1.0,"f":-0,"g":0}') as JsonObject;
  expect(v.a).toBe(18446744073709551615n);
  expect(v.b).toBe(-9007199254740993n);
  expect(v.c).toBe(1.5);
  expect(v.d).toBe(100);
  expect(v.e).toBe(1);
  expect(v.f).toBe(0n);
  expect(v.g).toBe(0n);
});

test('strings, escapes and surrogate pairs decode; bytes and text agree', () => {
  const text = '["a\\"\\\\\\/\\b\\f\\n\\r\\t", "\\u00e9\\ud83d\\ude00", "é😀", true, false, null, [], {}]';
  const expected = ['a"\\/\b\f\n\r\t', 'é😀', 'é😀', true, false, null, [], {}];
  expect(parseExact(text)).toEqual(expected);
  expect(parseExact(utf8(text))).toEqual(expected);
});

test('objects have a null prototype; __proto__ is an ordinary own key', () => {
  const v = parseExact('{"__proto__":{"polluted":1},"constructor":2}') as JsonObject;
  expect(Object.getPrototypeOf(v)).toBe(null);
  expect(Object.keys(v)).toEqual(['__proto__', 'constructor']);
  expect((v['__proto__'] as JsonObject).polluted).toBe(1n);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  expect(stringifyExact(v)).toBe('{"__proto__":{"polluted":1},"constructor":2}');
});

const PARSE_ERRORS: Array<[string, string | Uint8Array, string]> = [
  ['duplicate key', '{"a":1,"a":2}', 'json_duplicate_key'],
  ['duplicate key after escape', '{"a":1,"\\u0061":2}', 'json_duplicate_key'],
  ['duplicate __proto__', '{"__proto__":1,"__proto__":2}', 'json_duplicate_key'],
  ['trailing value', '{} {}', 'json_trailing_data'],
  ['trailing garbage', '1 x', 'json_trailing_data'],
  ['empty input', '', 'json_syntax'],
  ['whitespace only', ' \n', 'json_syntax'],
  ['leading zero', '01', 'json_syntax'],
  ['bare minus', '-', 'json_syntax'],
  ['dot without digits', '1.', 'json_syntax'],
  ['exponent without digits', '1e+', 'json_syntax'],
  ['plus sign', '+1', 'json_syntax'],
  ['NaN literal', 'NaN', 'json_syntax'],
  ['single quotes', "'a'", 'json_syntax'],
  ['trailing comma in array', '[1,]', 'json_syntax'],
  ['trailing comma in object', '{"a":1,}', 'json_syntax'],
  ['unquoted key', '{a:1}', 'json_syntax'],
  ['raw control character', '"a\u0001"', 'json_syntax'],
  ['bad escape', '"\\x41"', 'json_syntax'],
  ['short unicode escape', '"\\u12"', 'json_syntax'],
  ['unterminated string', '"abc', 'json_syntax'],
  ['comment', '[1]//', 'json_trailing_data'],
  ['byte order mark', bytes(0xef, 0xbb, 0xbf, 0x31), 'json_syntax'],
  ['non-JSON whitespace', '\u00a01', 'json_syntax'],
  ['float overflow', '1e400', 'json_number_range'],
  ['invalid UTF-8 byte', bytes(0x22, 0xff, 0x22), 'json_invalid_utf8'],
  ['overlong encoding', bytes(0x22, 0xc0, 0xaf, 0x22), 'json_invalid_utf8'],
  ['encoded surrogate (CESU-8)', bytes(0x22, 0xed, 0xa0, 0x80, 0x22), 'json_invalid_utf8'],
  ['truncated sequence', bytes(0x22, 0xe2, 0x82, 0x22), 'json_invalid_utf8'],
  ['lone high surrogate escape', '"\\ud800"', 'json_invalid_utf8'],
  ['lone low surrogate escape', '"\\udc00x"', 'json_invalid_utf8'],
  ['high surrogate then non-low escape', '"\\ud800\\u0041"', 'json_invalid_utf8'],
  ['lone surrogate in string input', '"\ud800"', 'json_invalid_utf8'],
];

test.each(PARSE_ERRORS)('parseExact refuses %s', (_name, input, code) => {
  expect(codeOf(() => parseExact(input))).toBe(code);
});

test('depth limit is 256 nested containers', () => {
  expect(() => parseExact('['.repeat(256) + ']'.repeat(256))).not.toThrow();
  expect(codeOf(() => parseExact('['.repeat(257) + ']'.repeat(257)))).toBe('json_depth_exceeded');
  expect(codeOf(() => parseExact('{"a":'.repeat(257) + '1' + '}'.repeat(257)))).toBe('json_depth_exceeded');
  expect(codeOf(() => parseExact('[[1]]', { maxDepth: 1 }))).toBe('json_depth_exceeded');
});

test('stringifyExact writes insertion order, exact bigints and shortest float64', () => {
  expect(stringifyExact({ z: 18446744073709551615n, a: [0.1, -1.5e-7, 1e21, 2, -0], s: 'é\n"' })).toBe(
    '{"z":18446744073709551615,"a":[0.1,-1.5e-7,1e+21,2,0],"s":"é\\n\\""}',
  );
  expect(stringifyExact(null)).toBe('null');
  expect(stringifyExact('\u2028\u0000')).toBe('"\u2028\\u0000"');
});

const WRITE_ERRORS: Array<[string, unknown, string]> = [
  ['NaN', NaN, 'json_nonfinite'],
  ['Infinity', [Infinity], 'json_nonfinite'],
  ['-Infinity', { a: -Infinity }, 'json_nonfinite'],
  ['undefined member', { a: undefined }, 'json_unsupported_value'],
  ['undefined', undefined, 'json_unsupported_value'],
  ['function', () => 1, 'json_unsupported_value'],
  ['symbol', Symbol('x'), 'json_unsupported_value'],
  ['Date', new Date(0), 'json_unsupported_value'],
  ['Map', new Map(), 'json_unsupported_value'],
  ['lone surrogate in value', '\ud800', 'json_invalid_utf8'],
  ['lone surrogate in key', { '\udc00': 1 }, 'json_invalid_utf8'],
];

test.each(WRITE_ERRORS)('stringifyExact and canonicalJson refuse %s', (_name, value, code) => {
  expect(codeOf(() => stringifyExact(value))).toBe(code);
  expect(codeOf(() => canonicalJson(value))).toBe(code);
});

test('a cycle is refused by the depth limit, not a stack overflow', () => {
  const a: unknown[] = [];
  a.push(a);
  expect(codeOf(() => stringifyExact(a))).toBe('json_depth_exceeded');
});

test('canonicalJson sorts keys at every level by UTF-16 code units, no whitespace', () => {
  expect(canonicalJson({ b: 1n, a: [1.5, 'x', null, true, { d: 0n, c: {} }] })).toBe(
    '{"a":[1.5,"x",null,true,{"c":{},"d":0}],"b":1}',
  );
  // U+10000 is the surrogate pair D800 DC00, which sorts before U+FFFF in UTF-16 code unit order
  // (code point order would put it after).
  expect(canonicalJson({ '\uffff': 1n, '\u{10000}': 2n, B: 3n, a: 4n, '': 5n })).toBe(
    '{"":5,"B":3,"a":4,"\u{10000}":2,"\uffff":1}',
  );
});

test('sha256Hex', () => {
  expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  expect(sha256Hex(new Uint8Array())).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
});

// Arbitrary exact JSON: integers are bigints, other numbers are non-integral finite doubles (an
// integral double prints without a fraction and therefore parses back as a bigint, by design).
const { json: exactJson } = fc.letrec<{ json: JsonExact }>((tie) => ({
  json: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }),
    fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isInteger(d)),
    fc.string({ unit: 'grapheme' }),
    fc.array(tie('json')),
    fc.dictionary(fc.string({ unit: 'grapheme' }), tie('json'), { noNullPrototype: false }),
  ),
}));

test('property: parseExact(stringifyExact(x)) equals x', () => {
  fc.assert(
    fc.property(exactJson, (x) => {
      expect(parseExact(stringifyExact(x))).toEqual(x);
      expect(parseExact(canonicalJson(x))).toEqual(x);
    }),
    propertyRun('json.test.ts:155', 300),
  );
});

/** Whether any object inside v has a key JavaScript treats as an array index. */
function hasIndexKey(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(hasIndexKey);
  if (v === null || typeof v !== 'object') return false;
  return Object.entries(v).some(([k, w]) => (/^(0|[1-9]\d*)$/.test(k) && Number(k) < 2 ** 32 - 1) || hasIndexKey(w));
}

test('property: canonicalJson is a fixed point and ignores insertion order', () => {
  fc.assert(
    fc.property(exactJson, (x) => {
      const c = canonicalJson(x);
      expect(canonicalJson(parseExact(c))).toBe(c);
      // A parsed object keeps the text's key order, except that JavaScript iterates array-index keys ("0",
      // "9", "10") first and in numeric order, whatever their place in the text: only objects without them
      // print back in the canonical order (seed 33074098 found {"":null,"0":null}).
      if (!hasIndexKey(x)) expect(stringifyExact(parseExact(c))).toBe(c);
    }),
    propertyRun('json.test.ts:166', 300),
  );
});
