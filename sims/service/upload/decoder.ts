// Streaming strict decoder of prepare_trajectory bodies (document 1 part 2 "Request" and "Point", part 4
// "Envelope rules" and "prepare_trajectory", part 8 limits).
//
// `TrajectoryDecoder` takes the body in chunks of any size and writes points straight into typed arrays:
// no string of the body, no object per point. It is exactly as strict as `decodeRequest` (envelope.ts) and
// gives the same leading label on every body both decode (a property test holds them together):
//
// - JSON errors (syntax, invalid UTF-8, lone surrogates, a repeated key anywhere, trailing data) are
//   fatal at once: the first one in byte order is the first one decodeRequest's decodeJson meets.
// - Type errors, unknown fields, a bad request_id and missing point fields are recorded (the first one in
//   document order) and reported only at the end, after schema, operation and capability, as
//   decodeRequest does after parsing the whole body.
//
// Values other than points (the envelope members, and anything of an unexpected type) are delimited by a
// small resumable scanner and then decoded by json.ts `decodeJson` itself, so nesting, escapes and UTF-8
// follow the same code. Points take a fast path: keys are matched as bytes, numbers are converted from
// their bytes (exact uint32/int64 without floating point; float64 by the exact fast path when the digits
// allow it, else by `Number` of the literal, which is what JSON.parse computes for finite values).
//
// This file is the state machine; its parts by job: tokenizer.ts (byte classes, strings, a token cut by a
// chunk boundary, the scanner of other values), number-token.ts (number literals), fields.ts (root members
// typed, and the order a body is refused in), point-store.ts (the arrays points are written to),
// types.ts (what the decoder gives and refuses).

import type { Refusal } from '../envelope.ts';
import { JsonDecodeError, type JsonValue } from '../../json.ts';
import type { SlotStorage } from '../../core/plan-arena.ts';
import { NumberToken } from './number-token.ts';
import { EnvelopeFields } from './fields.ts';
import { PointStore } from './point-store.ts';
import {
  B,
  Carry,
  CLASS,
  DELIM,
  K_IO_VALUES,
  K_POSITION,
  K_TIME,
  K_VELOCITY,
  keyName,
  keyText,
  matchPointKey,
  POINT_KEYS,
  skipWhitespace,
  stringEnd,
  toBuffer,
  ValueScanner,
} from './tokenizer.ts';
import { MAX_POINTS, UploadRefusal, type MemberInfo, type TrajectoryBody, type UploadCode } from './types.ts';

export {
  MAX_POINTS,
  minPointBytes,
  pointsArraysDigest,
  sameValue,
  TRAJECTORY_BODY_LIMIT,
  UploadRefusal,
  type Envelope,
  type MemberInfo,
  type PointArrays,
  type TrajectoryBody,
  type UploadCode,
} from './types.ts';

// ---- states ----

const enum S {
  Root, // before the root value
  ObjOpen, // after "{" of the root object: a key or "}"
  Key, // at the opening quote of a root key
  Colon,
  Value,
  ObjNext, // after a root member: "," or "}"
  ObjKey, // after ",": a key
  AfterRoot, // whitespace only
  PtsOpen, // after "[" of points
  PtsElem, // a point expected
  PtsNext, // after a point: "," or "]"
  PtOpen, // after "{" of a point
  PtKey, // at the opening quote of a point key
  PtColon,
  PtValue,
  PtNext,
  PtKeyExpect,
  ArrOpen, // after "[" of position or velocity
  ArrElem,
  ArrNext,
  Generic, // inside a value delimited by the generic scanner
  Done,
}

/** Where a generically scanned value belongs, to convert it and resume. */
const enum G {
  Root,
  Member,
  PointsValue,
  PointElement,
  PointValue,
  ArrayElement,
}

class Fatal {
  constructor(readonly refusal: UploadRefusal, readonly offset: number) {}
}

export interface DecoderOptions {
  /** The machine's axis count: every position (and every non-empty velocity) has exactly this many entries. */
  axes: number;
  /** The body length when known (Content-Length), to size the arrays once. */
  expectedBytes?: number;
  /** Stop at the root key "points" (the prefix scan); members before it are decoded, nothing after. */
  stopAtPoints?: boolean;
  /**
   * Write the points here instead of arrays of the decoder's own (a plan arena slot, at least MAX_POINTS
   * long: sims/core/plan-arena.ts). Every element of an accepted point is written (point-store.ts begin,
   * end), so what the slot held before never shows.
   */
  storage?: SlotStorage;
}

export class TrajectoryDecoder {
  readonly axes: number;
  private readonly stopAtPoints: boolean;
  private state = S.Root;
  private fatal: Fatal | undefined;
  /** First recorded non-JSON problem in document order (reported at finish, after JSON validity). */
  private semantic: UploadRefusal | undefined;
  private finished = false;

  // position in the stream
  private bufBase = 0; // absolute offset of buf[0] of the current run
  private total = 0; // bytes pushed
  private readonly carry = new Carry();

  // root object
  private readonly fields = new EnvelopeFields();
  private key = '';
  private sawPoints = false;

  // values read by decodeJson
  private readonly scanner = new ValueScanner();
  private gCtx = G.Member;

  // points
  private readonly store: PointStore;
  private ptSeen = 0;
  private ptUnknown: Set<string> | undefined;
  private ptKey = 0; // K_* of the value being read, 0 for an unknown key
  private arrIndex = 0;
  private arrIsVel = false;
  private elemIndex = 0; // index of the current element of points

  /** The last number literal (number-token.ts); its syntax errors are the decoder's. */
  private readonly num = new NumberToken((what, p) => {
    this.syntax(what, this.bufBase + p);
    return -2;
  });
  private readonly onSyntax = (what: string, offset: number): void => this.syntax(what, offset);

  constructor(o: DecoderOptions) {
    if (!Number.isInteger(o.axes) || o.axes < 1 || o.axes > 64) throw new RangeError('axes must be 1..64');
    this.axes = o.axes;
    this.stopAtPoints = o.stopAtPoints === true;
    this.store = new PointStore(o.axes, o.storage, o.expectedBytes);
  }

  /** The refusal when the body already failed (a JSON error), else undefined. */
  get failed(): UploadRefusal | undefined {
    return this.fatal?.refusal;
  }
  get failedAt(): number {
    return this.fatal?.offset ?? -1;
  }
  get bytes(): number {
    return this.total;
  }
  /** True once stopAtPoints met the "points" key. */
  get reachedPoints(): boolean {
    return this.sawPoints;
  }
  /** Where each root member read so far ends. */
  get memberInfo(): readonly MemberInfo[] {
    return this.fields.memberInfo;
  }
  /** Offset of the root key "points" (its opening quote), -1 until read. */
  get pointsKeyAt(): number {
    return this.fields.pointsKeyAt;
  }
  /** Envelope members converted so far (in the prefix scan: those before points). */
  envelope(): Record<string, unknown> {
    return this.fields.env;
  }
  /** The raw JSON values of schema and operation, when read. */
  rawEnvelope(): { schema: JsonValue | undefined; operation: JsonValue | undefined } {
    return { schema: this.fields.rawSchema, operation: this.fields.rawOperation };
  }
  /** True while a number or literal value is open at the end of the bytes pushed (its end is not known yet). */
  get pendingScalar(): boolean {
    return this.state === S.Generic && this.scanner.scalar;
  }
  /** The first recorded field problem so far. */
  get fieldProblem(): UploadRefusal | undefined {
    return this.semantic;
  }

  push(chunk: Uint8Array): void {
    if (this.fatal || this.finished || this.state === S.Done) return;
    const b = toBuffer(chunk);
    const chunkAbs = this.total;
    this.total += b.length;
    let off = 0;
    const carry = this.carry;
    while (carry.len > 0) {
      if (off >= b.length) return;
      let d = off;
      while (d < b.length && DELIM[b[d]!] === 0) d++;
      const end = Math.min(b.length, d + 1);
      carry.append(b, off, end);
      off = end;
      if (carry.len < carry.retryAt && off < b.length) continue;
      if (carry.len < carry.retryAt) return;
      const n = carry.len;
      carry.len = 0;
      this.run(carry.buf, 0, n, carry.abs, false);
      if (this.fatal || this.isDone()) return;
    }
    if (off < b.length) this.run(b, off, b.length, chunkAbs, false);
  }

  private isDone(): boolean {
    return this.state === S.Done;
  }

  /** End of the body: the decoded request or a refusal (thrown). */
  finish(): TrajectoryBody {
    if (!this.finished) {
      this.finished = true;
      if (!this.fatal) {
        const carry = this.carry;
        if (carry.len > 0) {
          const n = carry.len;
          carry.len = 0;
          this.run(carry.buf, 0, n, carry.abs, true);
        } else {
          this.run(carry.buf, 0, 0, this.total, true);
        }
      }
      if (!this.fatal && this.state === S.Generic) this.genericIncomplete();
      if (!this.fatal && this.state !== S.AfterRoot) {
        this.fail('json', 'invalid_request_envelope', this.total === 0 ? 'empty body' : `unexpected end of input at byte ${this.total}`, this.total);
      }
    }
    if (this.fatal) throw this.fatal.refusal;
    this.fields.judge(this.semantic, this.sawPoints);
    return { request: this.fields.env as unknown as TrajectoryBody['request'], points: this.store.arrays() };
  }

  /** Bytes of memory the decoder holds (arrays and buffers), for the worker's bookkeeping. */
  heldBytes(): number {
    return this.store.heldBytes() + this.carry.buf.length + this.scanner.heldBytes;
  }

  /** Drop everything held (a client went away). */
  reset(): void {
    this.fatal = new Fatal(new UploadRefusal('json', 409, 'invalid_request_envelope', 'upload abandoned'), this.total);
    this.store.release();
    this.carry.release();
    this.scanner.release();
  }

  // ---- failures ----

  private fail(code: UploadCode, label: string, detail: string, offset: number): void {
    if (this.fatal) return;
    // A member repeated outside the prefix came first: a body that then breaks never shows that member's
    // value whole, so the repeat is what is refused (as decodeRequest, which refuses repeats as it parses).
    const repeat = this.fields.firstRepeat();
    if (repeat) {
      label = 'duplicate_request_field';
      code = 'json';
      detail = `field "${repeat.key}" repeated at byte ${repeat.at}`;
      offset = repeat.at;
    }
    const r = new UploadRefusal(code, 409, label, detail);
    if (typeof this.fields.rawOperation === 'string') r.operation = this.fields.rawOperation;
    this.fatal = new Fatal(r, offset);
    this.state = S.Done;
  }
  private syntax(what: string, offset: number): void {
    this.fail('json', 'invalid_request_envelope', `${what} at byte ${offset}`, offset);
  }
  private note(r: Refusal | UploadRefusal, code: UploadCode = 'envelope'): void {
    if (this.semantic) return;
    this.semantic = r instanceof UploadRefusal ? r : UploadRefusal.from(code, r);
  }
  private readonly onNote = (r: Refusal): void => this.note(r);
  private noteBad(detail: string, code: UploadCode = 'envelope'): void {
    if (!this.semantic) this.semantic = new UploadRefusal(code, 409, 'invalid_request_envelope', detail);
  }

  // ---- the machine ----

  private run(b: Buffer, i: number, n: number, base: number, final: boolean): void {
    this.bufBase = base;
    const axes = this.axes;
    while (true) {
      // Whitespace is skipped in every state but Generic, Key and PtKey (which start at a quote).
      if (this.state !== S.Generic) i = skipWhitespace(b, i, n);
      if (i >= n) {
        if (final && this.state === S.Generic && this.scanner.scalar) {
          this.genericDone(n);
          if (this.fatal) return;
          continue;
        }
        return;
      }
      let c = b[i]!;
      switch (this.state) {
        case S.Root:
          if (c === B.LBrace) {
            i++;
            this.state = S.ObjOpen;
          } else {
            if (!this.genericStart(b, i, G.Root, 0)) return;
          }
          break;
        case S.ObjOpen:
          if (c === B.RBrace) {
            i++;
            this.state = S.AfterRoot;
            break;
          }
          if (c !== B.Quote) return this.syntax('object key must be a string', base + i);
          this.state = S.Key;
          break;
        case S.ObjKey:
          if (c !== B.Quote) return this.syntax('object key must be a string', base + i);
          this.state = S.Key;
          break;
        case S.Key: {
          const e = stringEnd(b, i, n, base, this.onSyntax);
          if (e === -2) return;
          if (e === -1) {
            if (final) return this.syntax('unterminated string', base + n);
            return this.carry.keep(b, i, n, base);
          }
          const key = keyText(b, i, e, base, this.onSyntax);
          if (key === undefined) return;
          if (!this.fields.key(key, base + i)) {
            this.fail('json', 'duplicate_request_field', `field "${key}" repeated at byte ${base + i}`, base + i);
            return;
          }
          this.key = key;
          i = e;
          this.state = S.Colon;
          break;
        }
        case S.Colon:
          if (c !== B.Colon) return this.syntax('expected ":"', base + i);
          i++;
          if (this.key === 'points') {
            if (this.stopAtPoints) {
              this.sawPoints = true;
              this.state = S.Done;
              return;
            }
          }
          this.state = S.Value;
          break;
        case S.Value:
          if (this.key === 'points') {
            this.sawPoints = true;
            if (c === B.LBracket) {
              i++;
              this.state = S.PtsOpen;
              break;
            }
            if (!this.genericStart(b, i, G.PointsValue, 1)) return;
            break;
          }
          if (!this.genericStart(b, i, G.Member, 1)) return;
          break;
        case S.ObjNext:
          if (c === B.Comma) {
            i++;
            this.state = S.ObjKey;
          } else if (c === B.RBrace) {
            i++;
            this.state = S.AfterRoot;
          } else return this.syntax('expected "," or "}"', base + i);
          break;
        case S.AfterRoot:
          this.fail('json', 'trailing_request_data', `data after the request object at byte ${base + i}`, base + i);
          return;
        case S.PtsOpen:
          if (c === B.RBracket) {
            i++;
            this.fields.memberDone('points', base + i);
            this.state = S.ObjNext;
            break;
          }
          this.state = S.PtsElem;
          break;
        case S.PtsElem:
          if (c === B.LBrace) {
            i++;
            this.pointStart();
            this.state = S.PtOpen;
          } else if (!this.genericStart(b, i, G.PointElement, 2)) return;
          break;
        case S.PtsNext:
          if (c === B.Comma) {
            i++;
            this.elemIndex++;
            this.state = S.PtsElem;
          } else if (c === B.RBracket) {
            i++;
            this.fields.memberDone('points', base + i);
            this.state = S.ObjNext;
          } else return this.syntax('expected "," or "]"', base + i);
          break;
        case S.PtOpen:
          if (c === B.RBrace) {
            i++;
            this.pointEnd();
            this.state = S.PtsNext;
            break;
          }
          if (c !== B.Quote) return this.syntax('object key must be a string', base + i);
          this.state = S.PtKey;
          break;
        case S.PtKeyExpect:
          if (c !== B.Quote) return this.syntax('object key must be a string', base + i);
          this.state = S.PtKey;
          break;
        case S.PtKey: {
          const e = stringEnd(b, i, n, base, this.onSyntax);
          if (e === -2) return;
          if (e === -1) {
            if (final) return this.syntax('unterminated string', base + n);
            return this.carry.keep(b, i, n, base);
          }
          let k = matchPointKey(b, i + 1, e - 1);
          let name = '';
          if (k < 0) {
            // Escapes, non-ASCII or an unknown name: decode the key exactly as decodeJson does.
            const text = keyText(b, i, e, base, this.onSyntax);
            if (text === undefined) return;
            k = Object.hasOwn(POINT_KEYS, text) ? POINT_KEYS[text]! : 0;
            name = text;
          }
          if (k !== 0) {
            if (this.ptSeen & k) {
              const nm = name || keyName(k);
              this.fail('json', 'duplicate_request_field', `field "${nm}" repeated at byte ${base + i}`, base + i);
              return;
            }
            this.ptSeen |= k;
          } else {
            const set = (this.ptUnknown ??= new Set());
            if (set.has(name)) {
              this.fail('json', 'duplicate_request_field', `field "${name}" repeated at byte ${base + i}`, base + i);
              return;
            }
            set.add(name);
            this.noteBad(`unknown field points[${this.elemIndex}].${JSON.stringify(name).slice(0, 80)}`);
          }
          this.ptKey = k;
          i = e;
          this.state = S.PtColon;
          break;
        }
        case S.PtColon:
          if (c !== B.Colon) return this.syntax('expected ":"', base + i);
          i++;
          this.state = S.PtValue;
          break;
        case S.PtValue: {
          const k = this.ptKey;
          if (k === K_POSITION || k === K_VELOCITY) {
            if (c === B.LBracket) {
              i++;
              this.arrIsVel = k === K_VELOCITY;
              this.arrIndex = 0;
              this.state = S.ArrOpen;
              break;
            }
          } else if (k !== 0 && (c === B.Minus || (c >= B.Zero && c <= B.Nine))) {
            const e = this.num.scan(b, i, n, final);
            if (e === -2) return;
            if (e === -1) return this.carry.keep(b, i, n, base);
            i = e;
            if (k === K_TIME) {
              if (!this.store.time(this.num, b)) this.noteBad(`field points[${this.elemIndex}].time_ns must be a signed 64-bit integer`);
            } else if (!this.store.io(this.num, k === K_IO_VALUES)) {
              this.noteBad(`field points[${this.elemIndex}].${keyName(k)} must be an unsigned 32-bit integer`);
            }
            this.state = S.PtNext;
            break;
          }
          if (!this.genericStart(b, i, G.PointValue, 3)) return;
          break;
        }
        case S.PtNext:
          if (c === B.Comma) {
            i++;
            this.state = S.PtKeyExpect;
          } else if (c === B.RBrace) {
            i++;
            this.pointEnd();
            this.state = S.PtsNext;
          } else return this.syntax('expected "," or "}"', base + i);
          break;
        case S.ArrOpen:
          if (c === B.RBracket) {
            i++;
            this.arrayEnd();
            this.state = S.PtNext;
            break;
          }
          this.state = S.ArrElem;
          break;
        case S.ArrElem: {
          // Tight loop over "number , number ... ]": the hot path of a trajectory body.
          const arr = this.arrIsVel ? this.store.velocity : this.store.position;
          const rowBase = this.store.row * axes;
          for (;;) {
            if (!(c === B.Minus || (c >= B.Zero && c <= B.Nine))) {
              if (!this.genericStart(b, i, G.ArrayElement, 4)) return;
              break;
            }
            const e = this.num.scan(b, i, n, final);
            if (e === -2) return;
            if (e === -1) return this.carry.keep(b, i, n, base);
            i = e;
            const f = this.num.float(b);
            const k = this.arrIndex++;
            if (f - f !== 0) {
              this.noteBad(`field points[${this.elemIndex}].${this.arrIsVel ? 'velocity' : 'position'}[${k}] must be a finite number`);
            } else if (k < axes) arr[rowBase + k] = f;
            while (i < n && CLASS[b[i]!] === 1) i++;
            if (i >= n) {
              this.state = S.ArrNext;
              break;
            }
            c = b[i]!;
            if (c === B.Comma) {
              i++;
              while (i < n && CLASS[b[i]!] === 1) i++;
              if (i >= n) break; // state stays ArrElem
              c = b[i]!;
              continue;
            }
            if (c === B.RBracket) {
              i++;
              this.arrayEnd();
              this.state = S.PtNext;
              break;
            }
            return this.syntax('expected "," or "]"', base + i);
          }
          break;
        }
        case S.ArrNext:
          if (c === B.Comma) {
            i++;
            this.state = S.ArrElem;
          } else if (c === B.RBracket) {
            i++;
            this.arrayEnd();
            this.state = S.PtNext;
          } else return this.syntax('expected "," or "]"', base + i);
          break;
        case S.Generic:
          i = this.generic(b, i, n);
          if (i < 0) return;
          break;
        case S.Done:
          return;
      }
      if (this.fatal) return;
    }
  }

  // ---- points ----

  private pointStart(): void {
    if (!this.store.begin() && !this.semantic) {
      this.semantic = new UploadRefusal('point_count', 409, 'invalid_request_envelope', `more than ${MAX_POINTS} points`);
    }
    this.ptSeen = 0;
    this.ptUnknown = undefined;
  }

  private pointEnd(): void {
    const s = this.ptSeen;
    if (!(s & K_TIME)) this.noteBad(`missing field points[${this.elemIndex}].time_ns`);
    else if (!(s & K_POSITION)) this.noteBad(`missing field points[${this.elemIndex}].position`);
    this.store.end();
  }

  private arrayEnd(): void {
    const len = this.arrIndex;
    const name = this.arrIsVel ? 'velocity' : 'position';
    if (this.arrIsVel && len === 0) return; // empty velocity omits feedforward (document 1 part 2 "Point")
    if (len !== this.axes) {
      if (!this.semantic) {
        this.semantic = new UploadRefusal(
          'axis_count',
          409,
          'invalid_request_envelope',
          `field points[${this.elemIndex}].${name} has ${len} entries; the machine has ${this.axes} axes`,
        );
      }
      return;
    }
    if (this.arrIsVel) this.store.velocityComplete();
  }

  // ---- values read by decodeJson ----

  /** Start scanning a value at b[i] (not whitespace). False after a syntax error. */
  private genericStart(b: Buffer, i: number, ctx: G, nest: number): boolean {
    this.gCtx = ctx;
    if (!this.scanner.begin(b[i]!, this.bufBase + i, nest)) {
      this.syntax('unexpected character', this.bufBase + i);
      return false;
    }
    this.state = S.Generic;
    return true;
  }

  /** Scan the generic value from b[i]; returns the index after it (state updated) or -1 at the buffer's end. */
  private generic(b: Buffer, i: number, n: number): number {
    const e = this.scanner.scan(b, i, n);
    if (e < 0) return -1;
    this.genericDone(e);
    return this.fatal ? -1 : e;
  }

  /** The scanned value is complete (ends before buffer index `i`): decode, convert, resume. */
  private genericDone(i: number): void {
    let v: JsonValue;
    try {
      v = this.scanner.decode();
    } catch (err) {
      if (!(err instanceof JsonDecodeError)) throw err;
      return this.genericError(err);
    }
    const end = this.bufBase + i;
    switch (this.gCtx) {
      case G.Root:
        this.fields.rootNotObject = true;
        this.state = S.AfterRoot;
        return;
      case G.Member:
        this.fields.member(this.key, v, end, this.onNote);
        this.state = S.ObjNext;
        return;
      case G.PointsValue:
        this.noteBad('field points must be an array of points');
        this.fields.memberDone('points', end);
        this.state = S.ObjNext;
        return;
      case G.PointElement:
        this.noteBad(`field points[${this.elemIndex}] must be an object`);
        this.state = S.PtsNext;
        return;
      case G.PointValue: {
        const k = this.ptKey;
        if (k === K_POSITION || k === K_VELOCITY) {
          this.noteBad(`field points[${this.elemIndex}].${keyName(k)} must be an array of numbers`);
        } else if (k === K_TIME) {
          this.noteBad(`field points[${this.elemIndex}].time_ns must be a signed 64-bit integer`);
        } else if (k !== 0) {
          this.noteBad(`field points[${this.elemIndex}].${keyName(k)} must be an unsigned 32-bit integer`);
        }
        // unknown keys were noted when read
        this.state = S.PtNext;
        return;
      }
      case G.ArrayElement: {
        const k = this.arrIndex++;
        this.noteBad(`field points[${this.elemIndex}].${this.arrIsVel ? 'velocity' : 'position'}[${k}] must be a finite number`);
        this.state = S.ArrNext;
        return;
      }
    }
  }

  /** Map decodeJson's error on the scanned value to the refusal decodeRequest would give. */
  private genericError(err: JsonDecodeError): void {
    const at = this.scanner.errorAt(err);
    if (err.code === 'json_duplicate_key') {
      this.fail('json', 'duplicate_request_field', `field "${err.key}" repeated at byte ${at}`, at);
    } else if (err.code === 'json_trailing_data') {
      // Only a bare root scalar can show this (a scanned "5e5e5" is the number 5e5 and then data).
      this.fail('json', 'trailing_request_data', `data after the request value at byte ${at}`, at);
    } else {
      this.syntax(err.message.replace(/ at byte \d+$/, ''), at);
    }
  }

  /**
   * The body ended inside a scanned value (a string or container never closed, perhaps because of an
   * earlier error in it): decodeJson on what there is finds the first problem, as it would in the body.
   */
  private genericIncomplete(): void {
    const err = this.scanner.incomplete();
    if (err) return this.genericError(err);
    this.syntax('unexpected end of input', this.total);
  }
}

/** Decode a whole body at once (tests, small bodies). */
export function decodeTrajectory(body: Uint8Array, axes: number): TrajectoryBody {
  const d = createDecoder({ axes, expectedBytes: body.length });
  d.push(body);
  return d.finish();
}

export function createDecoder(o: DecoderOptions): TrajectoryDecoder {
  return new TrajectoryDecoder(o);
}
