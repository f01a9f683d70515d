// The reference system's one strict JSON stack: the control service's requests (document 1 part 2
// "Request": decoding is strict; part 1: JSON integers are exact uint64 and are parsed without floating
// point), prepare_trajectory uploads (around their typed-array point reader) and machine configuration
// files (document 3 part 2; sims/config/json.ts maps its errors to configuration refusals).
//
// The decoder is an explicit state machine over bytes. It keeps numbers as their literal text so the
// schema-aware layer can convert them exactly (bigint for integers), refuses duplicate keys, invalid UTF-8,
// lone surrogates and trailing data, and reports the byte offset of the first problem.

import { parseU64 } from './primitives.ts';

export type JsonValue = JsonObject | JsonValue[] | string | JsonNumber | boolean | null;

/** An object with its keys in document order; duplicates are refused while decoding. */
export class JsonObject {
  readonly fields = new Map<string, JsonValue>();
  get(key: string): JsonValue | undefined {
    return this.fields.get(key);
  }
  has(key: string): boolean {
    return this.fields.has(key);
  }
  keys(): IterableIterator<string> {
    return this.fields.keys();
  }
}

/** A number kept as its literal text; converted by the consumer according to the field's type. */
export class JsonNumber {
  constructor(readonly text: string) {}
  /** True when the literal has no fraction and no exponent. */
  get isIntegerLiteral(): boolean {
    return !/[.eE]/.test(this.text);
  }
  toFloat(): number {
    return Number(this.text);
  }
}

export type JsonErrorCode =
  | 'json_syntax'
  | 'json_duplicate_key'
  | 'json_trailing_data'
  | 'json_invalid_utf8'
  | 'json_depth'
  | 'json_empty';

export class JsonDecodeError extends Error {
  /**
   * Where in the document the problem is: object keys and array indices from the root down to the
   * value being decoded (for a repeated key, the key itself is last). Filled in as the error leaves each
   * enclosing value, so decoding pays nothing for it unless it fails.
   */
  readonly path: Array<string | number> = [];
  constructor(
    readonly code: JsonErrorCode,
    readonly offset: number,
    message: string,
    readonly key?: string,
  ) {
    super(message);
    if (key !== undefined) this.path.push(key);
  }
}

const MAX_DEPTH = 64;

/**
 * The bytes the JSON grammar names (RFC 8259); the upload decoder (service/upload/decoder.ts) reads them too.
 * A plain object, not a const enum: a module run from source (tsx, vitest) reads an imported binding through
 * a getter on every access, and the upload tokenizer's hot loops spent about 60 % of decoding a 103 MB body
 * in those getters (7.7 of 12.3 s); an importer binds the object once to a local name instead.
 */
export const Ch = {
  Tab: 0x09,
  Lf: 0x0a,
  Cr: 0x0d,
  Space: 0x20,
  Quote: 0x22,
  Plus: 0x2b,
  Comma: 0x2c,
  Minus: 0x2d,
  Dot: 0x2e,
  Zero: 0x30,
  Nine: 0x39,
  Colon: 0x3a,
  UpperE: 0x45,
  LBracket: 0x5b,
  Backslash: 0x5c,
  RBracket: 0x5d,
  LowerE: 0x65,
  LBrace: 0x7b,
  RBrace: 0x7d,
} as const;

// ignoreBOM: a strict decoder never alters text; a leading U+FEFF inside a string stays (document 1 part 2).
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Decode one JSON value occupying the whole input (whitespace around it allowed). */
export function decodeJson(bytes: Uint8Array): JsonValue {
  const p = new Parser(bytes);
  p.ws();
  if (p.pos >= bytes.length) throw new JsonDecodeError('json_empty', 0, 'empty body');
  const value = p.value(0);
  p.ws();
  if (p.pos < bytes.length) {
    throw new JsonDecodeError('json_trailing_data', p.pos, `trailing data at byte ${p.pos}`);
  }
  return value;
}

class Parser {
  pos = 0;
  constructor(private readonly b: Uint8Array) {}

  fail(message: string, code: JsonErrorCode = 'json_syntax'): never {
    throw new JsonDecodeError(code, this.pos, `${message} at byte ${this.pos}`);
  }

  ws(): void {
    const b = this.b;
    let i = this.pos;
    while (i < b.length) {
      const c = b[i]!;
      if (c === Ch.Space || c === Ch.Lf || c === Ch.Cr || c === Ch.Tab) i++;
      else break;
    }
    this.pos = i;
  }

  value(depth: number): JsonValue {
    if (depth > MAX_DEPTH) this.fail('nesting too deep', 'json_depth');
    const c = this.b[this.pos];
    switch (c) {
      case Ch.LBrace:
        return this.object(depth);
      case Ch.LBracket:
        return this.array(depth);
      case Ch.Quote:
        return this.string();
      case 0x74: // t
        return this.literal('true', true);
      case 0x66: // f
        return this.literal('false', false);
      case 0x6e: // n
        return this.literal('null', null);
      default:
        if (c === Ch.Minus || (c !== undefined && c >= Ch.Zero && c <= Ch.Nine)) return this.number();
        return this.fail(c === undefined ? 'unexpected end of input' : 'unexpected character');
    }
  }

  literal<T>(word: string, v: T): T {
    for (let i = 0; i < word.length; i++) {
      if (this.b[this.pos + i] !== word.charCodeAt(i)) this.fail('invalid literal');
    }
    this.pos += word.length;
    return v;
  }

  object(depth: number): JsonObject {
    const obj = new JsonObject();
    this.pos++; // {
    this.ws();
    if (this.b[this.pos] === Ch.RBrace) {
      this.pos++;
      return obj;
    }
    for (;;) {
      this.ws();
      if (this.b[this.pos] !== Ch.Quote) this.fail('object key must be a string');
      const keyAt = this.pos;
      const key = this.string();
      if (obj.fields.has(key)) {
        throw new JsonDecodeError('json_duplicate_key', keyAt, `duplicate field "${key}" at byte ${keyAt}`, key);
      }
      this.ws();
      if (this.b[this.pos] !== Ch.Colon) this.fail('expected ":"');
      this.pos++;
      this.ws();
      let v: JsonValue;
      try {
        v = this.value(depth + 1);
      } catch (e) {
        if (e instanceof JsonDecodeError) e.path.unshift(key);
        throw e;
      }
      obj.fields.set(key, v);
      this.ws();
      const c = this.b[this.pos];
      if (c === Ch.Comma) {
        this.pos++;
        continue;
      }
      if (c === Ch.RBrace) {
        this.pos++;
        return obj;
      }
      this.fail('expected "," or "}"');
    }
  }

  array(depth: number): JsonValue[] {
    const out: JsonValue[] = [];
    this.pos++; // [
    this.ws();
    if (this.b[this.pos] === Ch.RBracket) {
      this.pos++;
      return out;
    }
    for (;;) {
      this.ws();
      try {
        out.push(this.value(depth + 1));
      } catch (e) {
        if (e instanceof JsonDecodeError) e.path.unshift(out.length);
        throw e;
      }
      this.ws();
      const c = this.b[this.pos];
      if (c === Ch.Comma) {
        this.pos++;
        continue;
      }
      if (c === Ch.RBracket) {
        this.pos++;
        return out;
      }
      this.fail('expected "," or "]"');
    }
  }

  number(): JsonNumber {
    const b = this.b;
    const start = this.pos;
    let i = start;
    if (b[i] === Ch.Minus) i++;
    if (b[i] === Ch.Zero) {
      i++;
      if (b[i] !== undefined && b[i]! >= Ch.Zero && b[i]! <= Ch.Nine) {
        this.pos = i;
        this.fail('leading zero in number');
      }
    } else if (b[i] !== undefined && b[i]! >= 0x31 && b[i]! <= Ch.Nine) {
      while (b[i] !== undefined && b[i]! >= Ch.Zero && b[i]! <= Ch.Nine) i++;
    } else {
      this.pos = i;
      this.fail('invalid number');
    }
    if (b[i] === Ch.Dot) {
      i++;
      const d = i;
      while (b[i] !== undefined && b[i]! >= Ch.Zero && b[i]! <= Ch.Nine) i++;
      if (i === d) {
        this.pos = i;
        this.fail('digit expected after "."');
      }
    }
    if (b[i] === Ch.LowerE || b[i] === Ch.UpperE) {
      i++;
      if (b[i] === Ch.Plus || b[i] === Ch.Minus) i++;
      const d = i;
      while (b[i] !== undefined && b[i]! >= Ch.Zero && b[i]! <= Ch.Nine) i++;
      if (i === d) {
        this.pos = i;
        this.fail('digit expected in exponent');
      }
    }
    this.pos = i;
    return new JsonNumber(latin1(b, start, i));
  }

  string(): string {
    const b = this.b;
    let i = ++this.pos; // opening quote
    // Fast path: plain ASCII without escapes.
    let ascii = true;
    for (;;) {
      const c = b[i];
      if (c === undefined) {
        this.pos = i;
        this.fail('unterminated string');
      }
      if (c === Ch.Quote) break;
      if (c === Ch.Backslash) {
        ascii = false;
        i += 2;
        continue;
      }
      if (c < 0x20) {
        this.pos = i;
        this.fail('control character in string');
      }
      if (c >= 0x80) ascii = false;
      i++;
    }
    const end = i;
    const start = this.pos;
    this.pos = end + 1;
    if (ascii) return latin1(b, start, end);
    return this.slowString(start, end);
  }

  private slowString(start: number, end: number): string {
    const b = this.b;
    let out = '';
    let run = start;
    let i = start;
    const flush = (to: number) => {
      if (to > run) {
        try {
          out += utf8.decode(b.subarray(run, to));
        } catch {
          throw new JsonDecodeError('json_invalid_utf8', run, `invalid UTF-8 in string at byte ${run}`);
        }
      }
    };
    while (i < end) {
      if (b[i] !== Ch.Backslash) {
        i++;
        continue;
      }
      flush(i);
      const e = b[i + 1];
      i += 2;
      switch (e) {
        case 0x22: out += '"'; break;
        case 0x5c: out += '\\'; break;
        case 0x2f: out += '/'; break;
        case 0x62: out += '\b'; break;
        case 0x66: out += '\f'; break;
        case 0x6e: out += '\n'; break;
        case 0x72: out += '\r'; break;
        case 0x74: out += '\t'; break;
        case 0x75: {
          const u = this.hex4(i);
          i += 4;
          if (u >= 0xd800 && u <= 0xdbff) {
            if (b[i] !== Ch.Backslash || b[i + 1] !== 0x75) {
              throw new JsonDecodeError('json_invalid_utf8', i, `lone surrogate escape at byte ${i - 6}`);
            }
            const lo = this.hex4(i + 2);
            if (lo < 0xdc00 || lo > 0xdfff) {
              throw new JsonDecodeError('json_invalid_utf8', i, `lone surrogate escape at byte ${i - 6}`);
            }
            i += 6;
            out += String.fromCharCode(u, lo);
          } else if (u >= 0xdc00 && u <= 0xdfff) {
            throw new JsonDecodeError('json_invalid_utf8', i - 6, `lone surrogate escape at byte ${i - 6}`);
          } else {
            out += String.fromCharCode(u);
          }
          break;
        }
        default:
          throw new JsonDecodeError('json_syntax', i - 1, `invalid escape at byte ${i - 1}`);
      }
      run = i;
    }
    flush(end);
    return out;
  }

  private hex4(at: number): number {
    let v = 0;
    for (let k = 0; k < 4; k++) {
      const c = this.b[at + k];
      let d: number;
      if (c === undefined) d = -1;
      else if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) d = c - 0x57;
      else if (c >= 0x41 && c <= 0x46) d = c - 0x37;
      else d = -1;
      if (d < 0) throw new JsonDecodeError('json_syntax', at + k, `invalid \\u escape at byte ${at + k}`);
      v = v * 16 + d;
    }
    return v;
  }
}

function latin1(b: Uint8Array, start: number, end: number): string {
  // Only called on pure ASCII ranges. A short one (a number literal, a label) as char codes; a long one (a
  // string member holding a file, as the OLP server's weld-plan bodies do) through Buffer's native slice,
  // about eight times faster per byte than char codes in 8 KiB chunks.
  if (end - start < 256) return String.fromCharCode.apply(null, b.subarray(start, end) as unknown as number[]);
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1', start, end);
}

// ---- exact conversions used by the schema layer ----

/** Parse an unsigned integer literal exactly; undefined when the literal is not a uint64. */
export function toUint64(n: JsonNumber): bigint | undefined {
  return parseU64(n.text);
}

/** Parse a signed integer literal exactly within [min, max]. */
export function toInteger(n: JsonNumber, min: bigint, max: bigint): bigint | undefined {
  if (!/^-?(0|[1-9][0-9]*)$/.test(n.text) || n.text === '-0') return undefined;
  if (n.text.length > 21) return undefined;
  const v = BigInt(n.text);
  return v >= min && v <= max ? v : undefined;
}

/** Serialise a value with exact bigint integers (used for replies). Plain objects keep insertion order. */
export function encodeJson(value: unknown): string {
  switch (typeof value) {
    case 'bigint':
      return value.toString();
    case 'number':
      if (!Number.isFinite(value)) throw new Error('non-finite number in reply');
      return JSON.stringify(value);
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      // Concatenation, not arrays joined: every reply passes here (the control round trip,
      // bench/control-roundtrip.bench.ts).
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) out += (i ? ',' : '') + encodeJson(value[i]);
        return out + ']';
      }
      let out = '{';
      let first = true;
      for (const k of Object.keys(value)) {
        const v = (value as Record<string, unknown>)[k];
        if (v === undefined) continue;
        out += (first ? '' : ',') + JSON.stringify(k) + ':' + encodeJson(v);
        first = false;
      }
      return out + '}';
    }
    default:
      throw new Error(`cannot encode ${typeof value}`);
  }
}

/** A value canonicalJson writes: a decoded value, or plain data (bigint, number, arrays, plain objects). */
export type CanonicalInput = JsonValue | bigint | number | CanonicalInput[] | { readonly [key: string]: CanonicalInput | undefined };

/** A number canonicalJson cannot write (non-finite), with the path of the value. */
export class CanonicalError extends RangeError {
  constructor(readonly path: string, message: string) {
    super(message);
    this.name = 'CanonicalError';
  }
}

const INTEGER_LITERAL = /^-?(0|[1-9][0-9]*)$/;

/**
 * Canonical JSON, the one writer of the reference system (document 3 part 2 "Digests"; docs/profile.md
 * "Weld planner: canonical JSON" and the configuration files): keys sorted by UTF-16 code units at every
 * level, members whose value is undefined left out, strings with ECMAScript JSON quoting. One number
 * rule: an integer (a bigint, or an integer literal) is its exact decimal value; any other number is
 * ECMAScript Number::toString of its float64 value, `-0` as `0`; a non-finite number is a CanonicalError.
 * `indent` > 0 writes one member or element a line (the configuration compiler's files).
 */
export function canonicalJson(v: CanonicalInput, indent = 0, path = '$'): string {
  const pad = (n: number) => (indent ? `\n${' '.repeat(indent * n)}` : '');
  const sep = indent ? ': ' : ':';
  const go = (x: CanonicalInput, level: number, at: string): string => {
    if (x === null) return 'null';
    switch (typeof x) {
      case 'bigint':
        return x.toString();
      case 'number':
        if (!Number.isFinite(x)) throw new CanonicalError(at, `non-finite number ${x}`);
        return Object.is(x, -0) ? '0' : String(x);
      case 'string':
        return JSON.stringify(x);
      case 'boolean':
        return x ? 'true' : 'false';
    }
    if (x instanceof JsonNumber) {
      if (INTEGER_LITERAL.test(x.text)) return BigInt(x.text).toString();
      const f = Number(x.text);
      if (!Number.isFinite(f)) throw new CanonicalError(at, `non-finite number ${x.text}`);
      return go(f, level, at);
    }
    if (Array.isArray(x)) {
      if (x.length === 0) return '[]';
      return `[${x.map((e, i) => pad(level + 1) + go(e, level + 1, `${at}[${i}]`)).join(',')}${pad(level)}]`;
    }
    const entries: [string, CanonicalInput][] =
      x instanceof JsonObject ? [...x.fields] : Object.entries(x as Record<string, CanonicalInput | undefined>).filter((e): e is [string, CanonicalInput] => e[1] !== undefined);
    if (entries.length === 0) return '{}';
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, e]) => `${pad(level + 1)}${JSON.stringify(k)}${sep}${go(e, level + 1, `${at}.${k}`)}`).join(',')}${pad(level)}}`;
  };
  return go(v, 0, path);
}
