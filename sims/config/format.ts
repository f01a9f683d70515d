// Canonical identity text (document 3 part 2): "sorted keys, one key=value per line, %.17g doubles,
// decimal integers". Doubles are formatted from their exact binary value with BigInt arithmetic and
// round-half-even, as glibc's printf does; Number.prototype.toExponential rounds ties away from zero
// and would differ on values such as 2^-25.

/** A canonical configuration value: exact integers are bigint, doubles are number. */
export type CanonValue = bigint | number | string | boolean | CanonValue[] | CanonObject;
export interface CanonObject {
  [key: string]: CanonValue;
}

const SIG = 17;

/** C `printf("%.17g", x)` for a finite double. */
export function formatG17(x: number): string {
  if (!Number.isFinite(x)) throw new RangeError(`not a finite double: ${x}`);
  const neg = x < 0 || Object.is(x, -0);
  const a = Math.abs(x);
  if (a === 0) return neg ? '-0' : '0';

  // Exact value a = mant * 2^e2.
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, a);
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const biased = (hi >>> 20) & 0x7ff;
  let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let e2: number;
  if (biased === 0) e2 = -1074;
  else {
    mant |= 1n << 52n;
    e2 = biased - 1075;
  }
  // Exact decimal: a = digitsInt * 10^e10.
  let digitsInt: bigint;
  let e10: number;
  if (e2 >= 0) {
    digitsInt = mant << BigInt(e2);
    e10 = 0;
  } else {
    digitsInt = mant * 5n ** BigInt(-e2);
    e10 = e2;
  }
  let s = digitsInt.toString();
  let exp = s.length - 1 + e10; // decimal exponent of the leading digit
  if (s.length > SIG) {
    const drop = BigInt(s.length - SIG);
    const p = 10n ** drop;
    let q = digitsInt / p;
    const r = digitsInt % p;
    const half = p / 2n;
    if (r > half || (r === half && (q & 1n) === 1n)) q += 1n;
    s = q.toString();
    if (s.length > SIG) {
      // carried into a new leading digit (999.. -> 1000..)
      s = s.slice(0, SIG);
      exp += 1;
    }
  } else {
    s = s.padEnd(SIG, '0');
  }

  let body: string;
  if (exp < -4 || exp >= SIG) {
    const frac = s.slice(1).replace(/0+$/, '');
    const es = Math.abs(exp).toString().padStart(2, '0');
    body = `${s[0]}${frac ? `.${frac}` : ''}e${exp < 0 ? '-' : '+'}${es}`;
  } else if (exp >= 0) {
    const intPart = s.slice(0, exp + 1);
    const frac = s.slice(exp + 1).replace(/0+$/, '');
    body = frac ? `${intPart}.${frac}` : intPart;
  } else {
    const frac = ('0'.repeat(-exp - 1) + s).replace(/0+$/, '');
    body = `0.${frac}`;
  }
  return neg ? `-${body}` : body;
}

/** Value text of one identity line. Strings are JSON string literals so that they can hold any character. */
export function identityValue(v: bigint | number | string | boolean): string {
  switch (typeof v) {
    case 'bigint':
      return v.toString();
    case 'number':
      return formatG17(v);
    case 'string':
      return JSON.stringify(v);
    default:
      return v ? 'true' : 'false';
  }
}

/**
 * Flatten a canonical tree into `key=value` pairs: nested keys joined with dots, array elements by
 * decimal index, and every array also gives `<key>.length` so that an empty list is visible.
 */
export function flatten(tree: CanonObject): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const walk = (prefix: string, v: CanonValue) => {
    if (Array.isArray(v)) {
      out.push([`${prefix}.length`, String(v.length)]);
      v.forEach((item, i) => walk(`${prefix}.${i}`, item));
    } else if (typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) walk(prefix ? `${prefix}.${k}` : k, child);
    } else {
      out.push([prefix, identityValue(v)]);
    }
  };
  walk('', tree);
  return out;
}

/** Identity text: pairs sorted by key (UTF-16 code unit order; keys are ASCII), one per line, final newline. */
export function identityText(pairs: Array<[string, string]>): string {
  const sorted = [...pairs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted.map(([k, v]) => `${k}=${v}\n`).join('');
}
