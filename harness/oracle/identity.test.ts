import { codeOf } from './errors.ts';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { expect, test } from 'vitest';
import fc from 'fast-check';
import { OracleError } from './errors.ts';
import { digestClass, formatG17, identityDigest, identityText, identityValue, identityValueKind, parseIdentity } from './identity.ts';
import { propertyRun } from '../property.ts';

/** C99 hex float (as printf's %a writes it) to the double it denotes, exactly. */
function fromHex(h: string): number {
  const m = /^(-?)0x([01])\.([0-9a-f]{13})p(-?[0-9]+)$/.exec(h);
  if (!m) throw new Error(`bad hex float ${h}`);
  const mant = (BigInt(m[2]!) << 52n) | BigInt(`0x${m[3]}`);
  const v = Number(mant) * 2 ** (Number(m[4]) - 52); // both factors and the product are exact
  return m[1] ? -v : v;
}

/** The hex float of a double, the exact input /usr/bin/printf reads with strtold. */
function toHex(x: number): string {
  const b = new DataView(new ArrayBuffer(8));
  b.setFloat64(0, x);
  const bits = b.getBigUint64(0);
  const sign = bits >> 63n ? '-' : '';
  const e = Number((bits >> 52n) & 0x7ffn);
  const f = (bits & ((1n << 52n) - 1n)).toString(16).padStart(13, '0');
  return e === 0 ? `${sign}0x0.${f}p-1022` : `${sign}0x1.${f}p${e - 1023}`;
}

// Expectations produced by `/usr/bin/printf '%.17g\n' <hex float>` (glibc), one per row.
const KNOWN: Array<[string, string]> = [
  ['0x1.999999999999ap-4', '0.10000000000000001'], // 0.1
  ['0x1.199999999999ap1', '2.2000000000000002'], // 2.2
  ['-0x1.7333333333333p1', '-2.8999999999999999'], // -2.9
  ['0x1.5555555555555p-2', '0.33333333333333331'], // 1/3
  ['0x1.0000000000000p-25', '2.9802322387695312e-08'], // 2^-25: exact tie, C rounds to even, toPrecision up
  ['0x1.0000800000000p0', '1.0000076293945312'], // 1 + 2^-17: tie to even (down)
  ['0x1.0001800000000p0', '1.0000228881835938'], // 1 + 3*2^-17: tie to even (up)
  ['0x0.0000000000001p-1022', '4.9406564584124654e-324'], // smallest subnormal
  ['0x1.fffffffffffffp1023', '1.7976931348623157e+308'], // largest double
  ['0x1.b1ae4d6e2ef50p69', '1e+21'],
  ['0x1.1c37937e08000p53', '10000000000000000'], // 1e16: still fixed notation (exponent 16 < 17)
  ['0x1.6345785d8a000p56', '1e+17'], // 1e17: exponent 17 switches to e-notation
  ['0x1.a36e2eb1c432dp-14', '0.0001'], // exponent -4: fixed
  ['0x1.4f8b588e368f1p-17', '1.0000000000000001e-05'], // exponent -5: e-notation
  ['0x1.02c9dedbc309dp-13', '0.00012339999999999999'],
  ['0x1.b69b4ba630f35p56', '1.2345678901234568e+17'],
  ['0x1.7700000000000p11', '3000'],
  ['0x1.e400000000000p6', '121'],
  ['0x1.999999999999ap-5', '0.050000000000000003'],
  ['0x1.0624dd2f1a9fcp-10', '0.001'],
  ['0x1.0000000000000p53', '9007199254740992'],
  ['0x1.0000000000001p53', '9007199254740994'],
  ['-0x1.0000000000000p-10', '-0.0009765625'],
  ['0x1.fe185ca57c517p78', '6.0221407599999999e+23'],
  ['0x1.0000000000000p-1022', '2.2250738585072014e-308'], // smallest normal
  ['0x1.921fb54442d18p1', '3.1415926535897931'],
  ['0x1.8000000000000p0', '1.5'],
  ['0x1.9000000000000p6', '100'],
  ['0x1.81cd6c8b43958p13', '12345.678'],
  ['0x1.52d02c7e14af6p76', '9.9999999999999992e+22'], // 1e23
  ['0x1.3333333333334p-2', '0.30000000000000004'],
];

test('%.17g matches glibc printf on known values', () => {
  for (const [h, want] of KNOWN) expect(formatG17(fromHex(h)), h).toBe(want);
  expect(formatG17(0)).toBe('0');
  expect(formatG17(-0)).toBe('-0');
  expect(formatG17(Infinity)).toBe('inf');
  expect(formatG17(NaN)).toBe('nan');
});

test('the hex helpers are inverse on every double', () => {
  fc.assert(fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (x) => Object.is(fromHex(toHex(x)), x)));
});

const PRINTF = '/usr/bin/printf';

test.skipIf(!existsSync(PRINTF))('%.17g matches printf on random doubles, dyadic ties included (one printf call)', () => {
  const any = fc.double({ noNaN: true, noDefaultInfinity: true });
  // k / 2^n with few significant bits: exact decimal expansions of 18 digits, i.e. ties at 17, are common.
  const dyadic = fc.tuple(fc.integer({ min: 1, max: 2 ** 24 }), fc.integer({ min: 0, max: 70 }), fc.integer({ min: -40, max: 40 })).map(([k, n, s]) => (k / 2 ** n) * 2 ** s);
  const xs = [...fc.sample(any, { seed: 17, numRuns: 1500 }), ...fc.sample(dyadic, { seed: 18, numRuns: 1500 })];
  const out = execFileSync(PRINTF, ['%.17g\\n', ...xs.map(toHex)], { encoding: 'utf8' }).split('\n');
  const wrong = xs.map((x, i) => [toHex(x), formatG17(x), out[i]] as const).filter(([, got, want]) => got !== want);
  expect(wrong.slice(0, 10)).toEqual([]);
});

test('%.17g text reads back as the same double and classifies as a canonical double', () => {
  fc.assert(
    fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (x) => {
      const s = formatG17(x);
      expect(Object.is(Number(s), x) || (x === 0 && Number(s) === 0)).toBe(true);
      expect(identityValueKind(s)).toBe(/^(0|-?[1-9][0-9]*)$/.test(s) ? 'integer' : 'double');
    }),
    propertyRun('identity.test.ts:95', 2000),
  );
});

test('a canonical identity text parses into its lines', () => {
  const text = 'axes.0.limits.max=2.8999999999999999\naxes.10.name="J11"\naxes.2.sign=-1\naxes.length=12\nbackend="simulation"\nbus.unused_slaves.length=0\nio.outputs.0.torch=true\n';
  const lines = parseIdentity(new TextEncoder().encode(text));
  expect(lines.map((l) => [l.key, l.kind])).toEqual([
    ['axes.0.limits.max', 'double'],
    ['axes.10.name', 'string'],
    ['axes.2.sign', 'integer'],
    ['axes.length', 'integer'],
    ['backend', 'string'],
    ['bus.unused_slaves.length', 'integer'],
    ['io.outputs.0.torch', 'boolean'],
  ]);
  expect(identityText(lines)).toBe(text);
  expect(parseIdentity('')).toEqual([]);
});

test('non-canonical identity texts are refused with their code', () => {
  const cases: Array<[string | Uint8Array, string]> = [
    ['a=1', 'identity_final_newline'],
    ['a=1\n\nb=2\n', 'identity_line_syntax'],
    ['a\n', 'identity_line_syntax'],
    ['=1\n', 'identity_line_syntax'],
    ['a..b=1\n', 'identity_line_syntax'],
    ['b=1\na=1\n', 'identity_unsorted'],
    ['axes.2.x=1\naxes.10.x=1\n', 'identity_unsorted'], // byte order, not numeric
    ['a=1\na=2\n', 'identity_duplicate_key'],
    ['a=2.2\n', 'identity_value'], // %.17g of 2.2 is 2.2000000000000002
    ['a=1.0\n', 'identity_value'],
    ['a=1e-05\n', 'identity_value'],
    ['a=+1\n', 'identity_value'],
    ['a=007\n', 'identity_value'],
    ['a=-0\n', 'no error'], // %.17g of -0.0 (a double, not an integer form)
    ['a=0x10\n', 'identity_value'],
    ['a=Infinity\n', 'identity_value'],
    ['a=simulation\n', 'identity_value'],
    ["a='x'\n", 'identity_value'],
    ['a="\\u0041"\n', 'identity_value'], // JSON literal, but not as ECMAScript writes "A"
    ['a=True\n', 'identity_value'],
    ['a=1\r\n', 'identity_value'],
    ['a= 1\n', 'identity_value'],
    [Uint8Array.from([0x61, 0x3d, 0x22, 0xff, 0x22, 0x0a]), 'identity_invalid_utf8'],
  ];
  for (const [text, code] of cases) expect(codeOf(() => parseIdentity(text)), JSON.stringify(typeof text === 'string' ? text : [...text])).toBe(code);
});

test('identity values of JSON leaves and the identity digest', () => {
  expect(identityValue(18446744073709551615n)).toBe('18446744073709551615');
  expect(identityValue(0.05)).toBe('0.050000000000000003');
  expect(identityValue(-0)).toBe('0');
  expect(identityValue('a "b"\n')).toBe('"a \\"b\\"\\n"');
  expect(identityValue(false)).toBe('false');
  // sha256 of the empty text and of "a=1\n" (sha256sum).
  expect(identityDigest('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  expect(identityDigest(new TextEncoder().encode('a=1\n'))).toBe(identityDigest('a=1\n'));
});

test('digest split by key (docs/profile.md "Digest split")', () => {
  const deployment = ['runtime.cpu', 'runtime.telemetry.directory', 'cell.label', 'axes.3.diagnostics.extended', 'robot.joints.0.min_source', 'axes.0.limits.following_error_unverified', 'bus.unknown_slaves_note', 'robot.description'];
  const machine = ['schema_version', 'backend', 'cycle_ns', 'axes.0.limits.min', 'axes.0.drive.vendor_id', 'axes.length', 'drives.x.dc_quantum_ns', 'control.max_grant_lease_ns', 'bus.unknown_slaves', 'bus.unused_slaves.length', 'bus_bringup.no_dc', 'io.outputs.0.torch', 'robot.model_id', 'robot.description_sha256', 'robot.joints.0.min'];
  for (const k of deployment) expect(digestClass(k), k).toBe('deployment');
  for (const k of machine) expect(digestClass(k), k).toBe('machine');
});
