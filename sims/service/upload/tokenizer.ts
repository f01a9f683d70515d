// The upload decoder's tokens (RFC 8259 grammar as sims/json.ts reads it): byte classes, strings and keys,
// the tail of a token cut by a chunk boundary, and the resumable scanner that delimits any value the
// decoder does not read itself, for json.ts `decodeJson` to decode. Number literals are number-token.ts.
// The state machine that strings these together is decoder.ts.

import { latin1Slice } from './number-token.ts';
// B: the JSON grammar's bytes, sims/json.ts `Ch` (one table for both decoders).
import { Ch, decodeJson, JsonDecodeError, type JsonValue } from '../../json.ts';

// Bound once (sims/json.ts Ch): an imported binding read in a hot loop costs a getter call per read when run from source.
const B = Ch;

export { B };

/** A syntax error: what, at which absolute byte offset of the body. */
export type SyntaxSink = (what: string, offset: number) => void;

// ---- byte classes ----

/** 1: whitespace; 2: a byte that may continue a number literal; 4: a byte that may continue a literal word. */
export const CLASS = new Uint8Array(256);
CLASS[B.Space] = CLASS[B.Tab] = CLASS[B.Lf] = CLASS[B.Cr] = 1;
for (const c of '0123456789+-.eE') CLASS[c.charCodeAt(0)] |= 2;
for (let c = 0x61; c <= 0x7a; c++) CLASS[c] |= 4;
// A body may be padded with whitespace up to its documented size (document 1 part 4 prepare_trajectory: up
// to 222516384 bytes): runs of spaces are compared a block at a time (Buffer.compare is a memcmp) instead of
// classed byte by byte, which took a core about 1.5 s for a body of that size.
const SPACE_BLOCK = 4096;
const SPACES = Buffer.alloc(SPACE_BLOCK, 0x20);

/** The first index in [i, n) of `b` that is not JSON whitespace, or n. */
export function skipWhitespace(b: Buffer, i: number, n: number): number {
  if (n - i >= SPACE_BLOCK && b[i] === 0x20) {
    while (n - i >= SPACE_BLOCK && b.compare(SPACES, 0, SPACE_BLOCK, i, i + SPACE_BLOCK) === 0) i += SPACE_BLOCK;
  }
  while (i < n && CLASS[b[i]!] === 1) i++;
  return i;
}
/** Bytes that may end a pending token: where a carried tail is worth re-parsing. */
export const DELIM = new Uint8Array(256);
for (const c of ' \t\r\n,:]}"') DELIM[c.charCodeAt(0)] = 1;

// ---- point keys (document 1 part 2 "Point") ----

export const K_TIME = 1;
export const K_POSITION = 2;
export const K_VELOCITY = 4;
export const K_IO_MASK = 8;
export const K_IO_VALUES = 16;
export const POINT_KEYS: Record<string, number> = { time_ns: K_TIME, position: K_POSITION, velocity: K_VELOCITY, io_mask: K_IO_MASK, io_values: K_IO_VALUES };

const KEY_BYTES: [number, Uint8Array][] = Object.entries(POINT_KEYS).map(([k, v]) => [v, Buffer.from(k, 'latin1')]);

/** The K_* of a plain key b[s..e) (without quotes), or -1 when it is not one of the point keys as plain bytes. */
export function matchPointKey(b: Uint8Array, s: number, e: number): number {
  const len = e - s;
  for (const [k, bytes] of KEY_BYTES) {
    if (bytes.length !== len) continue;
    let j = 0;
    while (j < len && b[s + j] === bytes[j]) j++;
    if (j === len) return k;
  }
  return -1;
}

export function keyName(k: number): string {
  for (const [name, v] of Object.entries(POINT_KEYS)) if (v === k) return name;
  return '?';
}

export function toBuffer(u: Uint8Array): Buffer {
  return Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

// ---- strings ----

/**
 * Index just past the closing quote of the string starting at b[i], -1 if not in the buffer, -2 after a
 * control character (reported to `syntax`; `base` is the body offset of b[0]).
 */
export function stringEnd(b: Buffer, i: number, n: number, base: number, syntax: SyntaxSink): number {
  let j = i + 1;
  while (j < n) {
    const c = b[j]!;
    if (c === B.Quote) return j + 1;
    if (c === B.Backslash) {
      j += 2;
      continue;
    }
    if (c < 0x20) {
      syntax('control character in string', base + j);
      return -2;
    }
    j++;
  }
  return -1;
}

/** The text of the key b[i..e) (quotes included), decoded as decodeJson does; undefined after a syntax error. */
export function keyText(b: Buffer, i: number, e: number, base: number, syntax: SyntaxSink): string | undefined {
  let plain = true;
  for (let j = i + 1; j < e - 1; j++) {
    const c = b[j]!;
    if (c === B.Backslash || c >= 0x80) {
      plain = false;
      break;
    }
  }
  if (plain) return latin1Slice(b, i + 1, e - 1);
  try {
    return decodeJson(b.subarray(i, e)) as string;
  } catch (err) {
    if (err instanceof JsonDecodeError) {
      syntax(err.message.replace(/ at byte \d+$/, ''), base + i + err.offset);
      return undefined;
    }
    throw err;
  }
}

// ---- a token cut by a chunk boundary ----

/** Appends b[from..to) to a holder's buffer, doubling it when full (the carried tail and the scanned value). */
function appendGrowing(h: { buf: Buffer; len: number }, b: Uint8Array, from: number, to: number): void {
  const need = h.len + (to - from);
  if (need > h.buf.length) {
    const next = Buffer.allocUnsafeSlow(Math.max(need, h.buf.length * 2));
    h.buf.copy(next, 0, 0, h.len);
    h.buf = next;
  }
  h.buf.set(b.subarray(from, to), h.len);
  h.len = need;
}

/** The tail of an incomplete token, kept until enough of the next chunks arrived to read it whole. */
export class Carry {
  buf: Buffer = Buffer.allocUnsafeSlow(256);
  len = 0;
  /** Body offset of buf[0]. */
  abs = 0;
  /** Length at which re-reading the tail is worth it (twice what failed last time). */
  retryAt = 0;

  append(b: Uint8Array, from: number, to: number): void {
    appendGrowing(this, b, from, to);
  }

  /** Keep buf[from..end) for the next push; `base` is the body offset of buf[0]. */
  keep(buf: Buffer, from: number, end: number, base: number): void {
    const len = end - from;
    if (buf === this.buf) {
      this.buf.copyWithin(0, from, end);
      this.len = len;
    } else {
      this.len = 0;
      this.append(buf, from, end);
    }
    this.abs = base + from;
    this.retryAt = Math.max(len * 2, len + 1);
  }

  release(): void {
    this.buf = Buffer.alloc(0);
    this.len = 0;
  }
}

// ---- values read by decodeJson ----

/**
 * Delimits one JSON value across chunks (strings, nesting, or a number/literal word that ends at the first
 * byte that cannot continue it), then decodes it with decodeJson so nesting, escapes and UTF-8 follow the
 * same code as the tree decoder.
 */
export class ValueScanner {
  buf: Buffer = Buffer.allocUnsafeSlow(256);
  len = 0;
  private depth = 0;
  private str = false;
  private esc = false;
  /** A number or literal word: ends at the first byte that cannot continue it. */
  scalar = false;
  /** Depth of the value in the document, for decodeJson's nesting limit. */
  private nest = 1;
  /** Body offset of the value's first byte. */
  private start = 0;

  /** Start at byte c (not whitespace) at body offset `at`. False when c cannot start a value. */
  begin(c: number, at: number, nest: number): boolean {
    this.nest = nest;
    this.len = 0;
    this.depth = 0;
    this.str = false;
    this.esc = false;
    this.scalar = false;
    this.start = at;
    if (c === B.LBrace || c === B.LBracket || c === B.Quote) {
      // the scan consumes the opening byte itself
    } else if (c === B.Minus || (c >= B.Zero && c <= B.Nine) || (c >= 0x61 && c <= 0x7a)) {
      this.scalar = true;
    } else return false;
    return true;
  }

  /** Scan from b[i]: the index just past the value when it is complete, else -1 (all of b[i..n) taken). */
  scan(b: Buffer, i: number, n: number): number {
    const from = i;
    if (this.scalar) {
      while (i < n && (CLASS[b[i]!]! & 6) !== 0) i++;
      this.append(b, from, i);
      return i >= n ? -1 : i;
    }
    let depth = this.depth;
    let str = this.str;
    let esc = this.esc;
    while (i < n) {
      const c = b[i++]!;
      if (str) {
        if (esc) esc = false;
        else if (c === B.Backslash) esc = true;
        else if (c === B.Quote) {
          str = false;
          if (depth === 0) break;
        }
      } else if (c === B.Quote) str = true;
      else if (c === B.LBrace || c === B.LBracket) depth++;
      else if (c === B.RBrace || c === B.RBracket) {
        depth--;
        if (depth <= 0) break;
      }
    }
    this.append(b, from, i);
    this.depth = depth;
    this.str = str;
    this.esc = esc;
    const complete = !str && depth <= 0 && this.len > 0;
    return complete ? i : -1;
  }

  /** The complete value, decoded (throws decodeJson's JsonDecodeError, the scanned bytes kept for errorAt). */
  decode(): JsonValue {
    const nest = this.nest;
    // decodeJson applies its nesting limit from the value's real depth: wrap it in as many arrays.
    const wrapped = Buffer.allocUnsafe(this.len + 2 * nest);
    wrapped.fill(B.LBracket, 0, nest);
    this.buf.copy(wrapped, nest, 0, this.len);
    wrapped.fill(B.RBracket, nest + this.len);
    let w = decodeJson(wrapped);
    for (let k = 0; k < nest; k++) w = (w as JsonValue[])[0]!;
    if (this.len > 4096) this.buf = Buffer.allocUnsafeSlow(256);
    this.len = 0;
    return w;
  }

  /** The body ended inside the value: decodeJson's first error on what there is, undefined if none. */
  incomplete(): JsonDecodeError | undefined {
    const nest = this.nest;
    const partial = Buffer.allocUnsafe(this.len + nest);
    partial.fill(B.LBracket, 0, nest);
    this.buf.copy(partial, nest, 0, this.len);
    try {
      decodeJson(partial);
    } catch (err) {
      if (err instanceof JsonDecodeError) return err;
      throw err;
    }
    return undefined;
  }

  /** Body offset of a decodeJson error on the scanned value. */
  errorAt(err: JsonDecodeError): number {
    return this.start + Math.max(0, Math.min(err.offset - this.nest, this.len));
  }

  get heldBytes(): number {
    return this.buf.length;
  }

  release(): void {
    this.buf = Buffer.alloc(0);
    this.len = 0;
  }

  private append(b: Uint8Array, from: number, to: number): void {
    appendGrowing(this, b, from, to);
  }
}
