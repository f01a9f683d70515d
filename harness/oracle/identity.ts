// Canonical identity text of a compiled machine configuration, written from document 3 part 2
// ("Canonical identity text: sorted keys, one key=value per line, %.17g doubles, decimal integers") and
// docs/profile.md "Machine configuration" (line and value forms, the digest split). Independent of the
// compiler in sims/ (DESIGN.md rule 1): the %.17g formatter here starts from ECMAScript's correctly
// rounded Number.prototype.toPrecision(17) and fixes up its one difference from glibc, the rounding of
// exact ties, with an exact rational comparison; the compiler expands the binary value digit by digit.

import { OracleError, fail } from './errors.ts';
import { decodeUtf8Strict, encodeUtf8, parseExact, sha256Hex } from './json.ts';

// ---------------------------------------------------------------------------------------------------
// %.17g

const P = 17;

/** The exact value of a finite nonzero |x| as m * 2^q with m a positive integer. */
function binaryOf(a: number): { m: bigint; q: number } {
  const b = new DataView(new ArrayBuffer(8));
  b.setFloat64(0, a);
  const bits = b.getBigUint64(0);
  const expField = Number((bits >> 52n) & 0x7ffn);
  const frac = bits & ((1n << 52n) - 1n);
  return expField === 0 ? { m: frac, q: -1074 } : { m: frac | (1n << 52n), q: expField - 1075 };
}

/** True when m * 2^q == n * 10^e / 2 exactly (n odd-or-even integer, e any integer). */
function equalsHalfDecimal(m: bigint, q: number, n: bigint, e: number): boolean {
  // Compare 2 * m * 2^q with n * 10^e, moving negative powers to the other side.
  let left = 2n * m;
  let right = n;
  if (q >= 0) left <<= BigInt(q);
  else right <<= BigInt(-q);
  if (e >= 0) right *= 10n ** BigInt(e);
  else left *= 10n ** BigInt(-e);
  return left === right;
}

/**
 * C `printf("%.17g", x)` as glibc prints it (round-half-even on the exact binary value).
 * Non-finite values print as C does (`inf`, `-inf`, `nan`), though identity texts never hold them.
 */
export function formatG17(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  const sign = x < 0 || Object.is(x, -0) ? '-' : '';
  const a = Math.abs(x);
  if (a === Infinity) return `${sign}inf`;
  if (a === 0) return `${sign}0`;

  // toPrecision gives the 17 significant digits nearest to the exact value; on an exact tie it picks
  // the larger, where C picks the even one. Digits D, decimal exponent X of the leading digit.
  const t = a.toPrecision(P);
  const [mant, ex] = t.split('e') as [string, string | undefined];
  let digits = mant.replace('.', '');
  let X = ex !== undefined ? Number(ex) : mant.indexOf('.') === -1 ? mant.length - 1 : mant.indexOf('.') - 1;
  if (ex === undefined && /^0\./.test(mant)) {
    // toPrecision writes small numbers as 0.000ddd: strip the leading zeros.
    const lead = digits.match(/^0+/)![0].length;
    digits = digits.slice(lead);
    X = -lead;
  }
  let D = BigInt(digits);
  if ((D & 1n) === 1n) {
    // Was it a tie between D-1 and D? Then the exact value is (2D-1)/2 * 10^(X-16).
    const { m, q } = binaryOf(a);
    if (equalsHalfDecimal(m, q, 2n * D - 1n, X - (P - 1))) D -= 1n; // D odd, so D-1 keeps 17 digits
  }
  const s = D.toString();

  let body: string;
  if (X < -4 || X >= P) {
    const frac = s.slice(1).replace(/0+$/, '');
    body = `${s[0]}${frac ? `.${frac}` : ''}e${X < 0 ? '-' : '+'}${String(Math.abs(X)).padStart(2, '0')}`;
  } else if (X >= 0) {
    const frac = s.slice(X + 1).replace(/0+$/, '');
    body = s.slice(0, X + 1) + (frac ? `.${frac}` : '');
  } else {
    body = `0.${'0'.repeat(-X - 1)}${s.replace(/0+$/, '')}`;
  }
  return sign + body;
}

// ---------------------------------------------------------------------------------------------------
// Identity text

export type IdentityKind = 'integer' | 'double' | 'string' | 'boolean';

export interface IdentityLine {
  key: string;
  /** The value text exactly as written. */
  value: string;
  /** How the value reads: an integer-looking value is `integer` (a double such as 3000 prints the same). */
  kind: IdentityKind;
}

export const IDENTITY_CODES = [
  'identity_invalid_utf8',
  'identity_final_newline', // nonempty text not ending in LF
  'identity_line_syntax', // empty line, no '=', empty key or key segment
  'identity_unsorted', // keys not in ascending byte order
  'identity_duplicate_key',
  'identity_value', // value is no canonical integer, %.17g double, JSON string literal or boolean
] as const;

const INTEGER = /^(0|-?[1-9][0-9]*)$/;
const KEY = /^[^=\n]+$/;

/** Classify one value text, or null when it is in no canonical form. */
export function identityValueKind(v: string): IdentityKind | null {
  if (INTEGER.test(v)) return 'integer';
  if (v === 'true' || v === 'false') return 'boolean';
  if (v.startsWith('"')) {
    try {
      const s = parseExact(v);
      return typeof s === 'string' && JSON.stringify(s) === v ? 'string' : null;
    } catch {
      return null;
    }
  }
  // A double: the text C's %.17g gives for the double it denotes. Number() accepts more than C prints
  // (hex, "Infinity", whitespace), so the round trip through formatG17 is the whole check.
  if (!/^-?[0-9]/.test(v)) return null;
  const x = Number(v);
  return Number.isFinite(x) && formatG17(x) === v ? 'double' : null;
}

function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * Read an identity text and check it is canonical: `key=value\n` lines (the text ends with LF; the
 * empty text is the empty identity), keys strictly ascending in byte order, each value a decimal
 * integer, a %.17g double, a JSON string literal or true/false. Throws OracleError with an IDENTITY_CODES code.
 */
export function parseIdentity(input: Uint8Array | string): IdentityLine[] {
  let text: string;
  if (typeof input === 'string') text = input;
  else {
    try {
      text = decodeUtf8Strict(input);
    } catch (e) {
      fail('identity_invalid_utf8', 'identity text is not UTF-8', {}, e);
    }
  }
  if (text === '') return [];
  if (!text.endsWith('\n')) fail('identity_final_newline', 'identity text must end with a newline');
  const lines: IdentityLine[] = [];
  const raw = text.slice(0, -1).split('\n');
  raw.forEach((line, i) => {
    const eq = line.indexOf('=');
    if (eq <= 0) fail('identity_line_syntax', `line ${i + 1} is not key=value`, { line: i + 1 });
    const key = line.slice(0, eq);
    const value = line.slice(eq + 1);
    if (!KEY.test(key) || key.split('.').some((s) => s === '')) fail('identity_line_syntax', `line ${i + 1}: bad key ${JSON.stringify(key)}`, { line: i + 1, key });
    const prev = lines[lines.length - 1];
    if (prev) {
      const c = compareBytes(prev.key, key);
      if (c === 0) fail('identity_duplicate_key', `line ${i + 1}: key ${key} repeated`, { line: i + 1, key });
      if (c > 0) fail('identity_unsorted', `line ${i + 1}: ${key} sorts before ${prev.key}`, { line: i + 1, key, previous: prev.key });
    }
    const kind = identityValueKind(value);
    if (kind === null) fail('identity_value', `line ${i + 1}: ${key} has no canonical value form: ${JSON.stringify(value)}`, { line: i + 1, key, value });
    lines.push({ key, value, kind });
  });
  return lines;
}

/** Write lines as an identity text (sorted by key in byte order, one per line, final newline). */
export function identityText(lines: ReadonlyArray<{ key: string; value: string }>): string {
  return [...lines]
    .sort((a, b) => compareBytes(a.key, b.key))
    .map((l) => `${l.key}=${l.value}\n`)
    .join('');
}

/** The value text of a JSON leaf read by parseExact: bigint decimal, number %.17g, string as JSON literal. */
export function identityValue(v: bigint | number | string | boolean): string {
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') return formatG17(Object.is(v, -0) ? 0 : v);
  if (typeof v === 'string') return JSON.stringify(v);
  return v ? 'true' : 'false';
}

/** Each digest is the lowercase hex SHA-256 of the identity file's bytes (docs/profile.md). */
export function identityDigest(bytes: Uint8Array | string): string {
  return sha256Hex(typeof bytes === 'string' ? encodeUtf8(bytes) : bytes);
}

/**
 * Which of machine_sha256 and deployment_sha256 a configuration line feeds (docs/profile.md "Digest
 * split"): runtime placement, cell metadata, provenance strings, per-axis diagnostics, the bus hold note
 * and the robot description's file name are deployment; everything else alters motion or drive behaviour.
 */
export function digestClass(key: string): 'machine' | 'deployment' {
  const seg = key.split('.');
  const last = seg[seg.length - 1]!;
  if (seg[0] === 'runtime' || seg[0] === 'cell') return 'deployment';
  if (/_(source|unverified)$/.test(last)) return 'deployment';
  if (seg[0] === 'axes' && /^[0-9]+$/.test(seg[1] ?? '') && seg[2] === 'diagnostics') return 'deployment';
  if (key === 'bus.unknown_slaves_note' || key === 'robot.description') return 'deployment';
  return 'machine';
}

export { OracleError };
