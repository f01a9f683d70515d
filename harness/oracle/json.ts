// Exact JSON for a client of the control service (document 1 part 1 "Transports": JSON integers are
// exact uint64 and must be parsed without floating point) and document 3's canonical JSON (part 2
// "Digests": keys sorted at every level, no whitespace, non-finite numbers refused).
//
// Model: an integer literal (no fraction, no exponent) is a `bigint`; any other number is a `number`;
// objects are null-prototype plain objects, so `__proto__`, `constructor` and friends are ordinary own
// keys and can never reach Object.prototype. Decisions are in docs/profile.md "Harness oracle".

import { createHash } from 'node:crypto';
import { fail } from './errors.ts';

export type JsonExact = null | boolean | number | bigint | string | JsonExact[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonExact;
}

export const JSON_MAX_DEPTH = 256;

export const JSON_CODES = [
  'json_syntax',
  'json_trailing_data',
  'json_duplicate_key',
  'json_invalid_utf8',
  'json_depth_exceeded',
  'json_number_range',
  'json_nonfinite',
  'json_unsupported_value',
] as const;
export type JsonCode = (typeof JSON_CODES)[number];

// ignoreBOM keeps a leading U+FEFF in the text so that it is refused as a syntax error: RFC 8259 §8.1
// forbids emitting one and a strict peer gains nothing from accepting it.
const UTF8_STRICT = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const UTF8_ENCODER = new TextEncoder();

export function encodeUtf8(text: string): Uint8Array {
  assertWellFormed(text, 'string');
  return UTF8_ENCODER.encode(text);
}

export function decodeUtf8Strict(bytes: Uint8Array): string {
  try {
    return UTF8_STRICT.decode(bytes);
  } catch (cause) {
    return fail('json_invalid_utf8', 'input is not valid UTF-8', {}, cause);
  }
}

export function sha256Hex(bytes: Uint8Array | string): string {
  const h = createHash('sha256');
  h.update(typeof bytes === 'string' ? encodeUtf8(bytes) : bytes);
  return h.digest('hex');
}

export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

// ---------------------------------------------------------------------------------------------
// Parser: an explicit recursive-descent state machine over the decoded text.

export interface ParseOptions {
  /** Maximum nesting of arrays and objects; a top-level container is depth 1. Default 256. */
  maxDepth?: number;
}

export function parseExact(text: string | Uint8Array, options: ParseOptions = {}): JsonExact {
  const source = typeof text === 'string' ? text : decodeUtf8Strict(text);
  const p = new Parser(source, options.maxDepth ?? JSON_MAX_DEPTH);
  p.skipWs();
  const value = p.value(0);
  p.skipWs();
  if (p.i < source.length) fail('json_trailing_data', `non-whitespace after the value at ${p.i}`, { offset: p.i });
  return value;
}

const Ch = {
  Tab: 0x09, Lf: 0x0a, Cr: 0x0d, Space: 0x20, Quote: 0x22, Plus: 0x2b, Comma: 0x2c, Minus: 0x2d,
  Dot: 0x2e, D0: 0x30, D1: 0x31, D9: 0x39, Colon: 0x3a, UpperE: 0x45,
  LBracket: 0x5b, Backslash: 0x5c, RBracket: 0x5d, LowerE: 0x65, LBrace: 0x7b, RBrace: 0x7d,
} as const;

const ESCAPES: Readonly<Record<string, string>> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

class Parser {
  i = 0;
  constructor(readonly s: string, readonly maxDepth: number) {}

  syntax(what: string): never {
    const found = this.i < this.s.length ? JSON.stringify(this.s[this.i]) : 'end of input';
    return fail('json_syntax', `${what} at offset ${this.i}, found ${found}`, { offset: this.i });
  }

  skipWs(): void {
    const s = this.s;
    let i = this.i;
    for (;;) {
      const c = s.charCodeAt(i);
      if (c === Ch.Space || c === Ch.Lf || c === Ch.Cr || c === Ch.Tab) i++;
      else break;
    }
    this.i = i;
  }

  value(depth: number): JsonExact {
    const c = this.s.charCodeAt(this.i);
    switch (c) {
      case Ch.LBrace: return this.object(depth + 1);
      case Ch.LBracket: return this.array(depth + 1);
      case Ch.Quote: return this.string();
      case 0x74: return this.literal('true', true);
      case 0x66: return this.literal('false', false);
      case 0x6e: return this.literal('null', null);
      default:
        if (c === Ch.Minus || (c >= Ch.D0 && c <= Ch.D9)) return this.number();
        return this.syntax('expected a value');
    }
  }

  literal<T extends JsonExact>(word: string, v: T): T {
    if (!this.s.startsWith(word, this.i)) this.syntax(`expected ${word}`);
    this.i += word.length;
    return v;
  }

  enter(depth: number): void {
    if (depth > this.maxDepth) fail('json_depth_exceeded', `nesting deeper than ${this.maxDepth}`, { offset: this.i });
  }

  object(depth: number): JsonObject {
    this.enter(depth);
    const out: JsonObject = Object.create(null) as JsonObject;
    this.i++;
    this.skipWs();
    if (this.s.charCodeAt(this.i) === Ch.RBrace) {
      this.i++;
      return out;
    }
    for (;;) {
      if (this.s.charCodeAt(this.i) !== Ch.Quote) this.syntax('expected a string key');
      const keyAt = this.i;
      const key = this.string();
      if (Object.hasOwn(out, key)) fail('json_duplicate_key', `duplicate key ${JSON.stringify(key)} at offset ${keyAt}`, { offset: keyAt, key });
      this.skipWs();
      if (this.s.charCodeAt(this.i) !== Ch.Colon) this.syntax("expected ':'");
      this.i++;
      this.skipWs();
      // Null prototype: assigning "__proto__" creates an own data property, never a prototype change.
      out[key] = this.value(depth);
      this.skipWs();
      const c = this.s.charCodeAt(this.i);
      if (c === Ch.Comma) {
        this.i++;
        this.skipWs();
        continue;
      }
      if (c === Ch.RBrace) {
        this.i++;
        return out;
      }
      this.syntax("expected ',' or '}'");
    }
  }

  array(depth: number): JsonExact[] {
    this.enter(depth);
    const out: JsonExact[] = [];
    this.i++;
    this.skipWs();
    if (this.s.charCodeAt(this.i) === Ch.RBracket) {
      this.i++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth));
      this.skipWs();
      const c = this.s.charCodeAt(this.i);
      if (c === Ch.Comma) {
        this.i++;
        this.skipWs();
        continue;
      }
      if (c === Ch.RBracket) {
        this.i++;
        return out;
      }
      this.syntax("expected ',' or ']'");
    }
  }

  string(): string {
    const s = this.s;
    let i = this.i + 1;
    let out = '';
    let runStart = i;
    for (;;) {
      if (i >= s.length) {
        this.i = i;
        this.syntax('unterminated string');
      }
      const c = s.charCodeAt(i);
      if (c === Ch.Quote) {
        out += s.slice(runStart, i);
        this.i = i + 1;
        return out;
      }
      if (c < 0x20) {
        this.i = i;
        this.syntax('control character in string');
      }
      if (c >= 0xd800 && c <= 0xdfff) {
        // Only reachable for string input: strict UTF-8 decoding never yields a lone surrogate.
        const next = s.charCodeAt(i + 1);
        if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          i += 2;
          continue;
        }
        fail('json_invalid_utf8', `lone surrogate in string at offset ${i}`, { offset: i });
      }
      if (c !== Ch.Backslash) {
        i++;
        continue;
      }
      out += s.slice(runStart, i);
      const e = s[i + 1];
      if (e === 'u') {
        const unit = this.hex4(i + 2);
        i += 6;
        if (unit >= 0xd800 && unit <= 0xdbff) {
          const low = s.startsWith('\\u', i) ? this.hex4(i + 2) : -1;
          if (low < 0xdc00 || low > 0xdfff) fail('json_invalid_utf8', `lone high surrogate escape at offset ${i - 6}`, { offset: i - 6 });
          out += String.fromCharCode(unit, low);
          i += 6;
        } else if (unit >= 0xdc00 && unit <= 0xdfff) {
          fail('json_invalid_utf8', `lone low surrogate escape at offset ${i - 6}`, { offset: i - 6 });
        } else {
          out += String.fromCharCode(unit);
        }
      } else if (e !== undefined && Object.hasOwn(ESCAPES, e)) {
        out += ESCAPES[e];
        i += 2;
      } else {
        this.i = i;
        this.syntax('invalid escape');
      }
      runStart = i;
    }
  }

  hex4(at: number): number {
    const h = this.s.slice(at, at + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(h)) {
      this.i = at;
      this.syntax('expected four hex digits');
    }
    return parseInt(h, 16);
  }

  number(): number | bigint {
    const s = this.s;
    const start = this.i;
    let i = start;
    if (s.charCodeAt(i) === Ch.Minus) i++;
    const first = s.charCodeAt(i);
    if (first === Ch.D0) {
      i++;
      const c = s.charCodeAt(i);
      if (c >= Ch.D0 && c <= Ch.D9) {
        this.i = i;
        this.syntax('leading zero in number');
      }
    } else if (first >= Ch.D1 && first <= Ch.D9) {
      i = digits(s, i);
    } else {
      this.i = i;
      this.syntax('expected a digit');
    }
    let integer = true;
    if (s.charCodeAt(i) === Ch.Dot) {
      integer = false;
      const after = digits(s, i + 1);
      if (after === i + 1) {
        this.i = after;
        this.syntax('expected a digit after the decimal point');
      }
      i = after;
    }
    const e = s.charCodeAt(i);
    if (e === Ch.LowerE || e === Ch.UpperE) {
      integer = false;
      i++;
      const sign = s.charCodeAt(i);
      if (sign === Ch.Plus || sign === Ch.Minus) i++;
      const after = digits(s, i);
      if (after === i) {
        this.i = after;
        this.syntax('expected a digit in the exponent');
      }
      i = after;
    }
    this.i = i;
    const literal = s.slice(start, i);
    if (integer) return BigInt(literal);
    const n = Number(literal);
    if (!Number.isFinite(n)) fail('json_number_range', `number ${literal} is outside the float64 range`, { offset: start });
    return n;
  }
}

function digits(s: string, i: number): number {
  for (;;) {
    const c = s.charCodeAt(i);
    if (c >= Ch.D0 && c <= Ch.D9) i++;
    else return i;
  }
}

// ---------------------------------------------------------------------------------------------
// Serialisers.

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function assertWellFormed(text: string, where: string): void {
  if (LONE_SURROGATE.test(text)) fail('json_invalid_utf8', `lone surrogate in ${where}`);
}

function quote(text: string): string {
  assertWellFormed(text, 'string');
  // JSON.stringify of a well-formed string is ECMAScript QuoteJSONString: the escapes RFC 8785 uses.
  return JSON.stringify(text);
}

function formatNumber(n: number): string {
  if (!Number.isFinite(n)) fail('json_nonfinite', `non-finite number ${String(n)} cannot be written as JSON`);
  // ECMAScript Number::toString: shortest round-trip form; -0 prints as 0 (as in RFC 8785).
  return String(n);
}

function isPlainObject(v: object): boolean {
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === null || proto === Object.prototype;
}

function write(value: unknown, sortKeys: boolean, depth: number): string {
  switch (typeof value) {
    case 'bigint': return value.toString();
    case 'number': return formatNumber(value);
    case 'string': return quote(value);
    case 'boolean': return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (depth >= JSON_MAX_DEPTH) fail('json_depth_exceeded', `nesting deeper than ${JSON_MAX_DEPTH} (or a cycle)`);
      if (Array.isArray(value)) {
        const parts: string[] = [];
        for (let k = 0; k < value.length; k++) parts.push(write(value[k], sortKeys, depth + 1));
        return `[${parts.join(',')}]`;
      }
      if (!isPlainObject(value)) fail('json_unsupported_value', `cannot write a ${value.constructor?.name ?? 'non-plain object'} as JSON`);
      const keys = Object.keys(value);
      // Default sort compares UTF-16 code units, which is RFC 8785's key order.
      if (sortKeys) keys.sort();
      const rec = value as Record<string, unknown>;
      const parts: string[] = [];
      for (const key of keys) {
        const v = rec[key];
        if (v === undefined) fail('json_unsupported_value', `key ${JSON.stringify(key)} is undefined`, { key });
        parts.push(`${quote(key)}:${write(v, sortKeys, depth + 1)}`);
      }
      return `{${parts.join(',')}}`;
    }
    default:
      return fail('json_unsupported_value', `cannot write a ${typeof value} as JSON`);
  }
}

/** Compact JSON in insertion (property enumeration) order; bigint exact; non-finite numbers refused. */
export function stringifyExact(value: unknown): string {
  return write(value, false, 0);
}

/** Document 3 canonical JSON: stringifyExact with keys sorted by UTF-16 code units at every level. */
export function canonicalJson(value: unknown): string {
  return write(value, true, 0);
}

export function canonicalJsonBytes(value: unknown): Uint8Array {
  return UTF8_ENCODER.encode(canonicalJson(value));
}
