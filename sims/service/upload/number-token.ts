// The number literals of an upload body (document 1 part 1: numbers are float64, time_ns an int64): one
// pass over the literal's bytes checks the JSON grammar and gathers its digits for the exact converters
// (number.ts digitsToFloat; the decoder's int64 and uint32 fields read the same digits). The decoder
// (decoder.ts) keeps one token and reads its fields after each scan.

import { Ch } from '../../json.ts';
import { digitsToFloat } from './number.ts';

// Bound once (sims/json.ts Ch): an imported binding read in a hot loop costs a getter call per read when run from source.
const B = Ch;

/** Buffer#latin1Slice (not in the type declarations): the fastest way to a short ASCII string. */
export function latin1Slice(b: Buffer, s: number, e: number): string {
  return (b as unknown as { latin1Slice(s: number, e: number): string }).latin1Slice(s, e);
}

export class NumberToken {
  start = 0;
  end = 0;
  neg = false;
  /** Has a fraction or an exponent. */
  frac = false;
  /** The first 15 significant digits. */
  a = 0;
  /** Up to 4 more, `nb` of them. */
  b = 0;
  nb = 0;
  /** More than 19 significant digits. */
  long = false;
  e10 = 0;
  /** Digits of the integer part. */
  digits = 0;

  /** `fail(what, p)`: a syntax error at buffer index `p`; returns what `scan` returns then (-2). */
  constructor(private readonly fail: (what: string, p: number) => number) {}

  /**
   * Validate the number literal at b[i] (JSON grammar) in one pass, gathering its digits for the exact
   * converters. Returns the index past it, -1 when it may continue past the buffer, -2 after a syntax error.
   * A byte that cannot follow the literal is left to the caller's next state (a syntax error there too).
   */
  scan(b: Buffer, i: number, n: number, final: boolean): number {
    let p = i;
    const neg = b[p] === B.Minus;
    if (neg) p++;
    let A = 0;
    let Bv = 0;
    let nb = 0;
    let sig = 0;
    let long = false;
    let e10 = 0;
    let intDigits = 0;
    let frac = false;
    if (p >= n) return final ? this.fail('invalid number', p) : -1;
    let c = b[p]!;
    if (c === B.Zero) {
      p++;
      if (p < n && b[p]! >= B.Zero && b[p]! <= B.Nine) return this.fail('leading zero in number', p);
    } else if (c >= 0x31 && c <= B.Nine) {
      while (p < n) {
        c = b[p]!;
        if (c < B.Zero || c > B.Nine) break;
        const d = c - B.Zero;
        if (sig < 15) A = A * 10 + d;
        else if (sig < 19) {
          Bv = Bv * 10 + d;
          nb++;
        } else long = true;
        sig++;
        intDigits++;
        p++;
      }
    } else return this.fail('invalid number', p);
    if (p >= n && !final) return -1;
    if (p < n && b[p] === B.Dot) {
      frac = true;
      p++;
      const d0 = p;
      while (p < n) {
        c = b[p]!;
        if (c < B.Zero || c > B.Nine) break;
        const d = c - B.Zero;
        if (sig === 0 && d === 0) {
          e10--;
        } else if (sig < 15) {
          A = A * 10 + d;
          e10--;
          sig++;
        } else if (sig < 19) {
          Bv = Bv * 10 + d;
          nb++;
          e10--;
          sig++;
        } else long = true;
        p++;
      }
      if (p >= n && !final) return -1;
      if (p === d0) return this.fail('digit expected after "."', p);
    }
    if (p < n && (b[p] === B.LowerE || b[p] === B.UpperE)) {
      frac = true;
      p++;
      if (p >= n && !final) return -1;
      let eneg = false;
      if (p < n && (b[p] === B.Plus || b[p] === B.Minus)) {
        eneg = b[p] === B.Minus;
        p++;
      }
      const d0 = p;
      let x = 0;
      while (p < n) {
        c = b[p]!;
        if (c < B.Zero || c > B.Nine) break;
        if (x < 1e6) x = x * 10 + (c - B.Zero);
        p++;
      }
      if (p >= n && !final) return -1;
      if (p === d0) return this.fail('digit expected in exponent', p);
      e10 += eneg ? -x : x;
    }
    this.start = i;
    this.end = p;
    this.neg = neg;
    this.frac = frac;
    this.a = A;
    this.b = Bv;
    this.nb = nb;
    this.e10 = e10;
    this.long = long;
    this.digits = intDigits;
    return p;
  }

  /** The float64 of the last literal: exact digit arithmetic when it decides, else Number() of the text. */
  float(b: Buffer): number {
    let v = this.long ? NaN : digitsToFloat(this.a, this.b, this.nb, this.e10);
    if (v !== v) return Number(latin1Slice(b, this.start, this.end));
    return this.neg ? -v : v;
  }
}
