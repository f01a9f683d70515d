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

import { CAPABILITY, capabilityInfo } from '../capabilities.ts';
import { convertField, REQUEST_FIELDS, REQUEST_SCHEMA, REQUIRED, Refusal, refuse, validRequestId, type Kind, type Request } from '../envelope.ts';
import { latin1Slice, NumberToken } from './number-token.ts';
// B: the JSON grammar's bytes, sims/json.ts `Ch` (one table for both decoders).
import { Ch as B, decodeJson, JsonDecodeError, JsonNumber, toInteger, type JsonValue } from '../../json.ts';
import { REQUEST_PREFIX_BYTES } from '../../primitives.ts';
import { createHash } from 'node:crypto';
import type { PlanArrays, PlanWorkspace } from '../../core/protocol.ts';
import type { PlanLease, SlotStorage } from '../../core/plan-arena.ts';

/** Most points a trajectory may carry (document 1 part 8); the decoder refuses more, to bound memory. */
export const MAX_POINTS = 250_000;
/** Largest prepare_trajectory body (document 1 part 8). */
export const TRAJECTORY_BODY_LIMIT = 222_516_384;

/** The plan's arrays (sims/core/protocol.ts PlanArrays) with their counts, as the decoder fills them. */
export interface PointArrays extends PlanArrays {
  count: number;
  axes: number;
  /** bit0 io_mask present, bit1 io_values present. */
  ioFlags: Uint8Array;
  /** Memory the core builds the plan in, faulted in off the core thread (upload/worker.ts; core protocol.ts PlanWorkspace). */
  workspace?: PlanWorkspace;
  /** SHA-256 of the arrays (pointsArraysDigest), taken by the upload worker so the main loop need not. */
  digest?: string;
  /**
   * The plan arena slot the arrays and workspace are views of (sims/core/plan-arena.ts), held by the
   * service until the prepare carrying it is posted; absent when the arrays are the points' own.
   */
  lease?: PlanLease;
}

/**
 * SHA-256 over a point list's arrays: the request_id cache key of an uploaded prepare_trajectory (document 1
 * part 3 "request_id": the same id with another payload is a conflict). A maximum upload's arrays are 40 MB,
 * about 80 ms of hashing: the upload worker takes it (worker.ts), not the service's main loop.
 */
export function pointsArraysDigest(p: PointArrays): string {
  const h = createHash('sha256');
  for (const a of [p.timeNs, p.position, p.velocity, p.hasVelocity, p.ioMask, p.ioValues, p.ioFlags]) h.update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  return h.digest('hex');
}

export type Envelope = Omit<Request, 'points'>;

export interface TrajectoryBody {
  request: Envelope;
  points: PointArrays;
}

/**
 * Stable codes of the decoder's refusals, for the service to map. The label each carries is written in
 * docs/profile.md "Envelope check order".
 */
export type UploadCode =
  | 'json' // a JSON error (label invalid_request_envelope, duplicate_request_field or trailing_request_data)
  | 'envelope' // schema_mismatch, unknown_operation, capability_unimplemented, invalid_request_id, invalid_request_envelope
  | 'axis_count' // a position or velocity array whose length is not the machine's axis count
  | 'point_count' // more than 250000 points
  | 'not_trajectory' // a valid request for another operation
  | 'fence_outside_prefix' // schema, operation, session or generation not within the first 16384 bytes
  | 'envelope_changed' // the full decode differs from the admitted prefix
  | 'too_large'; // more than 222516384 bytes

export class UploadRefusal extends Refusal {
  constructor(
    readonly code: UploadCode,
    status: 409 | 413,
    label: string,
    detail?: string,
    data?: unknown,
  ) {
    super(status, label, detail, data);
  }
  static from(code: UploadCode, r: Refusal): UploadRefusal {
    const u = new UploadRefusal(code, r.status as 409 | 413, r.label, r.detail, r.data);
    u.operation = r.operation;
    return u;
  }
}

const bad = (detail: string) => refuse('invalid_request_envelope', detail);

// ---- byte classes ----

/** 1: whitespace; 2: a byte that may continue a number literal; 4: a byte that may continue a literal word. */
const CLASS = new Uint8Array(256);
CLASS[B.Space] = CLASS[B.Tab] = CLASS[B.Lf] = CLASS[B.Cr] = 1;
for (const c of '0123456789+-.eE') CLASS[c.charCodeAt(0)] |= 2;
for (let c = 0x61; c <= 0x7a; c++) CLASS[c] |= 4;
/** Bytes that may end a pending token: where a carried tail is worth re-parsing. */
const DELIM = new Uint8Array(256);
for (const c of ' \t\r\n,:]}"') DELIM[c.charCodeAt(0)] = 1;

const TWO32 = 4294967296;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

// Point keys.
const K_TIME = 1;
const K_POSITION = 2;
const K_VELOCITY = 4;
const K_IO_MASK = 8;
const K_IO_VALUES = 16;
const POINT_KEYS: Record<string, number> = { time_ns: K_TIME, position: K_POSITION, velocity: K_VELOCITY, io_mask: K_IO_MASK, io_values: K_IO_VALUES };

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
   * long: sims/core/plan-arena.ts). Every element of an accepted point is written (pointStart, pointEnd),
   * so what the slot held before never shows.
   */
  storage?: SlotStorage;
}

export interface MemberInfo {
  key: string;
  /** Offset just past the member's value. */
  end: number;
}

/** Smallest bytes a point can take with `axes` positions: {"time_ns":0,"position":[0,...]} plus a comma. */
export function minPointBytes(axes: number): number {
  return '{"time_ns":0,"position":[]},'.length + Math.max(1, 2 * axes - 1);
}

export class TrajectoryDecoder {
  readonly axes: number;
  private readonly stopAtPoints: boolean;
  private rootNotObject = false;
  private state = S.Root;
  private fatal: Fatal | undefined;
  /** First recorded non-JSON problem in document order (reported at finish, after JSON validity). */
  private semantic: UploadRefusal | undefined;
  private finished = false;

  // position in the stream
  private bufBase = 0; // absolute offset of buf[0] of the current run
  private total = 0; // bytes pushed

  // carried tail of an incomplete token
  private carry: Buffer = Buffer.allocUnsafeSlow(256);
  private carryLen = 0;
  private carryAbs = 0;
  private retryAt = 0;

  // root object
  private readonly rootKeys = new Set<string>();
  /** Root members repeated outside the prefix: where the repeat starts and the first value. */
  private readonly redeclared = new Map<string, { at: number; first: unknown }>();
  private key = '';
  readonly memberInfo: MemberInfo[] = [];
  private readonly env: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  private rawSchema: JsonValue | undefined;
  private rawOperation: JsonValue | undefined;
  private sawPoints = false;
  /** Offset of the root key "points" (its opening quote), when read. */
  pointsKeyAt = -1;

  // generic scanner
  private gBuf: Buffer = Buffer.allocUnsafeSlow(256);
  private gLen = 0;
  private gDepth = 0;
  private gStr = false;
  private gEsc = false;
  private gScalar = false; // number or literal word: ends at the first byte that cannot continue it
  private gCtx = G.Member;
  private gNest = 1; // depth of the value in the document, for decodeJson's nesting limit
  private gStart = 0;

  // points
  private cap = 0;
  private count = 0;
  private row = 0; // row written by the current point
  private ptSeen = 0;
  private ptUnknown: Set<string> | undefined;
  private ptKey = 0; // K_* of the value being read, 0 for an unknown key
  private ptKeyName = '';
  private arrIndex = 0;
  private arrIsVel = false;
  private elemIndex = 0; // index of the current element of points
  // Of their own, or views of a plan arena slot (DecoderOptions.storage).
  private timeNs: BigInt64Array = new BigInt64Array(0);
  private timeWords: Uint32Array = new Uint32Array(0);
  private position: Float64Array = new Float64Array(0);
  private velocity: Float64Array = new Float64Array(0);
  private hasVelocity: Uint8Array = new Uint8Array(0);
  private ioMask: Uint32Array = new Uint32Array(0);
  private ioValues: Uint32Array = new Uint32Array(0);
  private ioFlags: Uint8Array = new Uint8Array(0);

  /** The last number literal (number-token.ts); its syntax errors are the decoder's. */
  private readonly num = new NumberToken((what, p) => {
    this.syntax(what, this.bufBase + p);
    return -2;
  });

  constructor(o: DecoderOptions) {
    if (!Number.isInteger(o.axes) || o.axes < 1 || o.axes > 64) throw new RangeError('axes must be 1..64');
    this.axes = o.axes;
    this.stopAtPoints = o.stopAtPoints === true;
    if (o.storage) {
      const st = o.storage;
      if (st.timeNs.length < MAX_POINTS || st.position.length < MAX_POINTS * o.axes) throw new RangeError('storage must hold MAX_POINTS points of the decoder axes');
      this.timeNs = st.timeNs;
      this.timeWords = new Uint32Array(st.timeNs.buffer, st.timeNs.byteOffset, st.timeNs.length * 2);
      this.position = st.position;
      this.velocity = st.velocity;
      this.hasVelocity = st.hasVelocity;
      this.ioMask = st.ioMask;
      this.ioValues = st.ioValues;
      this.ioFlags = st.ioFlags;
      this.cap = MAX_POINTS;
      return;
    }
    const pre = o.expectedBytes ? Math.min(MAX_POINTS, Math.ceil(o.expectedBytes / minPointBytes(o.axes))) : 64;
    this.grow(Math.max(2, pre));
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
  /** Envelope members converted so far (in the prefix scan: those before points). */
  envelope(): Record<string, unknown> {
    return this.env;
  }
  /** The raw JSON values of schema and operation, when read. */
  rawEnvelope(): { schema: JsonValue | undefined; operation: JsonValue | undefined } {
    return { schema: this.rawSchema, operation: this.rawOperation };
  }
  /** True while a number or literal value is open at the end of the bytes pushed (its end is not known yet). */
  get pendingScalar(): boolean {
    return this.state === S.Generic && this.gScalar;
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
    while (this.carryLen > 0) {
      if (off >= b.length) return;
      let d = off;
      while (d < b.length && DELIM[b[d]!] === 0) d++;
      const end = Math.min(b.length, d + 1);
      this.appendCarry(b, off, end);
      off = end;
      if (this.carryLen < this.retryAt && off < b.length) continue;
      if (this.carryLen < this.retryAt) return;
      const n = this.carryLen;
      this.carryLen = 0;
      this.run(this.carry, 0, n, this.carryAbs, false);
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
        if (this.carryLen > 0) {
          const n = this.carryLen;
          this.carryLen = 0;
          this.run(this.carry, 0, n, this.carryAbs, true);
        } else {
          this.run(this.carry, 0, 0, this.total, true);
        }
      }
      if (!this.fatal && this.state === S.Generic) this.genericIncomplete();
      if (!this.fatal && this.state !== S.AfterRoot) {
        this.fail('json', 'invalid_request_envelope', this.total === 0 ? 'empty body' : `unexpected end of input at byte ${this.total}`, this.total);
      }
    }
    if (this.fatal) throw this.fatal.refusal;
    return this.result();
  }

  /** Bytes of memory the decoder holds (arrays and buffers), for the worker's bookkeeping. */
  heldBytes(): number {
    return (
      this.timeNs.byteLength + this.position.byteLength + this.velocity.byteLength + this.hasVelocity.byteLength +
      this.ioMask.byteLength + this.ioValues.byteLength + this.ioFlags.byteLength + this.carry.length + this.gBuf.length
    );
  }

  /** Drop everything held (a client went away). */
  reset(): void {
    this.fatal = new Fatal(new UploadRefusal('json', 409, 'invalid_request_envelope', 'upload abandoned'), this.total);
    this.timeNs = new BigInt64Array(0);
    this.timeWords = new Uint32Array(0);
    this.position = this.velocity = new Float64Array(0);
    this.hasVelocity = this.ioFlags = new Uint8Array(0);
    this.ioMask = this.ioValues = new Uint32Array(0);
    this.carry = this.gBuf = Buffer.alloc(0);
    this.carryLen = this.gLen = 0;
  }

  // ---- result ----

  /** A root member's value as decoded (schema and operation raw, the others converted). */
  private memberValue(key: string): unknown {
    return key === 'schema' ? this.rawSchema : key === 'operation' ? this.rawOperation : this.env[key];
  }

  /**
   * Members repeated outside the prefix: the first that is a plain duplicate (not a member of the admitted
   * prefix, or repeated with the same value), and the admitted members whose value changed.
   */
  private changedPrefixMembers(): { duplicate?: [string, number]; changed: string[] } {
    const changed: string[] = [];
    for (const [key, r] of this.redeclared) {
      const first = this.memberInfo.find((m) => m.key === key)!;
      const admitted = first.end <= REQUEST_PREFIX_BYTES && (this.pointsKeyAt < 0 || first.end <= this.pointsKeyAt);
      if (!admitted || sameValue(r.first, this.memberValue(key))) return { duplicate: [key, r.at], changed };
      changed.push(key);
    }
    return { changed };
  }

  private result(): TrajectoryBody {
    const named = this.rawOperation;
    const repeats = this.changedPrefixMembers();
    if (repeats.duplicate) {
      const [key, at] = repeats.duplicate;
      const u = new UploadRefusal('json', 409, 'duplicate_request_field', `field "${key}" repeated at byte ${at}`);
      if (typeof named === 'string') u.operation = named;
      throw u;
    }
    try {
      if (this.rootNotObject) throw bad('body must be a JSON object');
      // Document 1 part 4 "Envelope rules": the fully decoded request differs from the admitted prefix.
      // Judged first: the admitted prefix was a valid envelope, so a changed member is the change, whatever
      // its new value (a repeated operation with an unknown name is still request_envelope_changed).
      if (repeats.changed.length > 0) {
        throw new UploadRefusal('envelope_changed', 409, 'request_envelope_changed', `field ${repeats.changed[0]} differs from the admitted prefix`);
      }
      const schema = this.rawSchema;
      if (schema !== REQUEST_SCHEMA) {
        throw refuse('schema_mismatch', schema === undefined ? 'schema missing' : `schema must be ${REQUEST_SCHEMA}`);
      }
      const operation = this.rawOperation;
      const cap = typeof operation === 'string' ? CAPABILITY.get(operation) : undefined;
      if (!cap || !cap.control) {
        throw refuse(
          'unknown_operation',
          typeof operation === 'string' ? `operation ${JSON.stringify(operation).slice(0, 80)} is not dispatched by /v1/control` : 'operation missing',
        );
      }
      if (cap.state === 'unimplemented') throw refuse('capability_unimplemented', `${cap.name} is reserved`, capabilityInfo(cap));
      if (this.semantic) throw this.semantic;
      const required = [...(cap.fenced ? ['session', 'generation'] : []), ...(REQUIRED[cap.name] ?? [])];
      for (const f of required) {
        if (f === 'points' ? !this.sawPoints : !(f in this.env)) throw bad(`missing field ${f} for operation ${cap.name}`);
      }
      if (cap.name !== 'prepare_trajectory') {
        throw new UploadRefusal('not_trajectory', 409, 'invalid_request_envelope', `operation ${cap.name} is not prepare_trajectory`);
      }
    } catch (e) {
      if (e instanceof Refusal) {
        const u = e instanceof UploadRefusal ? e : UploadRefusal.from('envelope', e);
        if (typeof named === 'string') u.operation = named;
        throw u;
      }
      throw e;
    }
    const n = this.count;
    const a = this.axes;
    return {
      request: this.env as unknown as Envelope,
      points: {
        count: n,
        axes: a,
        timeNs: this.timeNs.subarray(0, n),
        position: this.position.subarray(0, n * a),
        velocity: this.velocity.subarray(0, n * a),
        hasVelocity: this.hasVelocity.subarray(0, n),
        ioMask: this.ioMask.subarray(0, n),
        ioValues: this.ioValues.subarray(0, n),
        ioFlags: this.ioFlags.subarray(0, n),
      },
    };
  }

  // ---- failures ----

  private fail(code: UploadCode, label: string, detail: string, offset: number): void {
    if (this.fatal) return;
    // A member repeated outside the prefix came first: a body that then breaks never shows that member's
    // value whole, so the repeat is what is refused (as decodeRequest, which refuses repeats as it parses).
    const repeat = this.redeclared.entries().next().value;
    if (repeat) {
      const [key, { at }] = repeat;
      label = 'duplicate_request_field';
      code = 'json';
      detail = `field "${key}" repeated at byte ${at}`;
      offset = at;
    }
    const r = new UploadRefusal(code, 409, label, detail);
    if (typeof this.rawOperation === 'string') r.operation = this.rawOperation;
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
  private noteBad(detail: string, code: UploadCode = 'envelope'): void {
    if (!this.semantic) this.semantic = new UploadRefusal(code, 409, 'invalid_request_envelope', detail);
  }

  // ---- storage ----

  private grow(min: number): void {
    const cap = Math.min(MAX_POINTS, Math.max(min, this.cap * 2, 64));
    if (cap <= this.cap) return;
    const a = this.axes;
    const n = this.count;
    const t = new BigInt64Array(cap);
    t.set(this.timeNs.subarray(0, n));
    this.timeNs = t;
    this.timeWords = new Uint32Array(t.buffer);
    const p = new Float64Array(cap * a);
    p.set(this.position.subarray(0, n * a));
    this.position = p;
    const v = new Float64Array(cap * a);
    v.set(this.velocity.subarray(0, n * a));
    this.velocity = v;
    const hv = new Uint8Array(cap);
    hv.set(this.hasVelocity.subarray(0, n));
    this.hasVelocity = hv;
    const im = new Uint32Array(cap);
    im.set(this.ioMask.subarray(0, n));
    this.ioMask = im;
    const iv = new Uint32Array(cap);
    iv.set(this.ioValues.subarray(0, n));
    this.ioValues = iv;
    const f = new Uint8Array(cap);
    f.set(this.ioFlags.subarray(0, n));
    this.ioFlags = f;
    this.cap = cap;
  }

  private appendCarry(b: Uint8Array, from: number, to: number): void {
    const need = this.carryLen + (to - from);
    if (need > this.carry.length) {
      const next = Buffer.allocUnsafeSlow(Math.max(need, this.carry.length * 2));
      this.carry.copy(next, 0, 0, this.carryLen);
      this.carry = next;
    }
    this.carry.set(b.subarray(from, to), this.carryLen);
    this.carryLen = need;
  }

  /** Keep buf[from..end) for the next push (an incomplete token). */
  private keep(buf: Buffer, from: number, end: number, base: number): void {
    const len = end - from;
    if (buf === this.carry) {
      this.carry.copyWithin(0, from, end);
      this.carryLen = len;
    } else {
      this.carryLen = 0;
      this.appendCarry(buf, from, end);
    }
    this.carryAbs = base + from;
    this.retryAt = Math.max(len * 2, len + 1);
  }

  private gAppend(b: Uint8Array, from: number, to: number): void {
    const need = this.gLen + (to - from);
    if (need > this.gBuf.length) {
      const next = Buffer.allocUnsafeSlow(Math.max(need, this.gBuf.length * 2));
      this.gBuf.copy(next, 0, 0, this.gLen);
      this.gBuf = next;
    }
    this.gBuf.set(b.subarray(from, to), this.gLen);
    this.gLen = need;
  }

  // ---- the machine ----

  private run(b: Buffer, i: number, n: number, base: number, final: boolean): void {
    this.bufBase = base;
    const axes = this.axes;
    while (true) {
      // Whitespace is skipped in every state but Generic, Key and PtKey (which start at a quote).
      if (this.state !== S.Generic) {
        while (i < n && CLASS[b[i]!] === 1) i++;
      }
      if (i >= n) {
        if (final && this.state === S.Generic && this.gScalar) {
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
          const e = this.stringEnd(b, i, n);
          if (e === -2) return;
          if (e === -1) {
            if (final) return this.syntax('unterminated string', base + n);
            return this.keep(b, i, n, base);
          }
          const key = this.keyText(b, i, e);
          if (key === undefined) return;
          if (this.rootKeys.has(key)) {
            // A member repeated outside the prefix (past byte 16384 or after points) is judged when the
            // body ends: a member of the admitted prefix whose value changed is request_envelope_changed,
            // any other repeat duplicate_request_field (docs/profile.md "prepare_trajectory uploads").
            const outside = base + i >= REQUEST_PREFIX_BYTES || this.pointsKeyAt >= 0;
            if (!outside || key === 'points' || this.redeclared.has(key)) {
              this.fail('json', 'duplicate_request_field', `field "${key}" repeated at byte ${base + i}`, base + i);
              return;
            }
            this.redeclared.set(key, { at: base + i, first: this.memberValue(key) });
          }
          this.rootKeys.add(key);
          this.key = key;
          if (key === 'points' && this.pointsKeyAt < 0) this.pointsKeyAt = base + i;
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
            this.memberDone('points', base + i);
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
            this.memberDone('points', base + i);
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
          const e = this.stringEnd(b, i, n);
          if (e === -2) return;
          if (e === -1) {
            if (final) return this.syntax('unterminated string', base + n);
            return this.keep(b, i, n, base);
          }
          let k = matchPointKey(b, i + 1, e - 1);
          let name = '';
          if (k < 0) {
            // Escapes, non-ASCII or an unknown name: decode the key exactly as decodeJson does.
            const text = this.keyText(b, i, e);
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
          this.ptKeyName = name;
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
            if (e === -1) return this.keep(b, i, n, base);
            i = e;
            if (k === K_TIME) this.storeTime(b);
            else this.storeIo(b, k);
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
          const arr = this.arrIsVel ? this.velocity : this.position;
          const rowBase = this.row * axes;
          for (;;) {
            if (!(c === B.Minus || (c >= B.Zero && c <= B.Nine))) {
              if (!this.genericStart(b, i, G.ArrayElement, 4)) return;
              break;
            }
            const e = this.num.scan(b, i, n, final);
            if (e === -2) return;
            if (e === -1) return this.keep(b, i, n, base);
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


  // ---- strings ----

  /** Index just past the closing quote of the string starting at b[i], -1 if not in the buffer, -2 on error. */
  private stringEnd(b: Buffer, i: number, n: number): number {
    let j = i + 1;
    while (j < n) {
      const c = b[j]!;
      if (c === B.Quote) return j + 1;
      if (c === B.Backslash) {
        j += 2;
        continue;
      }
      if (c < 0x20) {
        this.syntax('control character in string', this.bufBase + j);
        return -2;
      }
      j++;
    }
    return -1;
  }

  /** The text of the key b[i..e) (quotes included), decoded as decodeJson does; undefined after a failure. */
  private keyText(b: Buffer, i: number, e: number): string | undefined {
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
        this.syntax(err.message.replace(/ at byte \d+$/, ''), this.bufBase + i + err.offset);
        return undefined;
      }
      throw err;
    }
  }

  private storeTime(b: Buffer): void {
    const r = this.row;
    // int64: a plain integer literal, not "-0" (json.ts toInteger).
    if (this.num.frac || (this.num.neg && this.num.a === 0 && this.num.digits === 0)) {
      this.noteBad(`field points[${this.elemIndex}].time_ns must be a signed 64-bit integer`);
      return;
    }
    if (this.num.digits <= 15 && LITTLE_ENDIAN) {
      // Exact integer arithmetic below 2^53: the 64-bit pattern written as two 32-bit words.
      const v = this.num.neg ? -this.num.a : this.num.a;
      const w = this.timeWords;
      w[2 * r] = v >>> 0;
      w[2 * r + 1] = Math.floor(v / TWO32) >>> 0;
      return;
    }
    const text = latin1Slice(b, this.num.start, this.num.end);
    const v = toInteger(new JsonNumber(text), -(1n << 63n), (1n << 63n) - 1n);
    if (v === undefined) {
      this.noteBad(`field points[${this.elemIndex}].time_ns must be a signed 64-bit integer`);
      return;
    }
    this.timeNs[r] = v;
  }

  private storeIo(b: Buffer, k: number): void {
    const name = k === K_IO_MASK ? 'io_mask' : 'io_values';
    if (this.num.frac || this.num.neg || this.num.digits > 10 || this.num.a > 0xffffffff) {
      void b;
      this.noteBad(`field points[${this.elemIndex}].${name} must be an unsigned 32-bit integer`);
      return;
    }
    const r = this.row;
    if (k === K_IO_MASK) {
      this.ioMask[r] = this.num.a;
      this.ioFlags[r]! |= 1;
    } else {
      this.ioValues[r] = this.num.a;
      this.ioFlags[r]! |= 2;
    }
  }

  // ---- points ----

  private pointStart(): void {
    const idx = this.count;
    if (idx >= MAX_POINTS) {
      if (!this.semantic) {
        this.semantic = new UploadRefusal('point_count', 409, 'invalid_request_envelope', `more than ${MAX_POINTS} points`);
      }
      this.row = MAX_POINTS - 1; // overwritten harmlessly: the body is refused
    } else {
      if (idx >= this.cap) this.grow(idx + 1);
      this.row = idx;
    }
    this.ptSeen = 0;
    this.ptUnknown = undefined;
    this.ioFlags[this.row] = 0;
    this.ioMask[this.row] = 0;
    this.ioValues[this.row] = 0;
    this.hasVelocity[this.row] = 0;
  }

  private pointEnd(): void {
    const s = this.ptSeen;
    if (!(s & K_TIME)) this.noteBad(`missing field points[${this.elemIndex}].time_ns`);
    else if (!(s & K_POSITION)) this.noteBad(`missing field points[${this.elemIndex}].position`);
    if (!this.hasVelocity[this.row]) this.velocity.fill(NaN, this.row * this.axes, (this.row + 1) * this.axes);
    this.count++;
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
    if (this.arrIsVel) this.hasVelocity[this.row] = 1;
  }

  // ---- generic values ----

  /** Start scanning a value at b[i] (not whitespace). False after a syntax error. */
  private genericStart(b: Buffer, i: number, ctx: G, nest: number): boolean {
    const c = b[i]!;
    this.gCtx = ctx;
    this.gNest = nest;
    this.gLen = 0;
    this.gDepth = 0;
    this.gStr = false;
    this.gEsc = false;
    this.gScalar = false;
    this.gStart = this.bufBase + i;
    if (c === B.LBrace || c === B.LBracket || c === B.Quote) {
      // the scanner consumes the opening byte itself
    } else if (c === B.Minus || (c >= B.Zero && c <= B.Nine) || (c >= 0x61 && c <= 0x7a)) {
      this.gScalar = true;
    } else {
      this.syntax(c >= 0x80 ? 'unexpected character' : 'unexpected character', this.bufBase + i);
      return false;
    }
    this.state = S.Generic;
    return true;
  }

  /** Scan the generic value from b[i]; returns the index after it (state updated) or -1 at the buffer's end. */
  private generic(b: Buffer, i: number, n: number): number {
    const from = i;
    if (this.gScalar) {
      while (i < n && (CLASS[b[i]!]! & 6) !== 0) i++;
      this.gAppend(b, from, i);
      if (i >= n) return -1;
      this.genericDone(i);
      return this.fatal ? -1 : i;
    }
    let depth = this.gDepth;
    let str = this.gStr;
    let esc = this.gEsc;
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
    this.gAppend(b, from, i);
    this.gDepth = depth;
    this.gStr = str;
    this.gEsc = esc;
    const complete = !str && depth <= 0 && this.gLen > 0;
    if (!complete) return -1;
    this.genericDone(i);
    return this.fatal ? -1 : i;
  }

  /** The scanned value is complete (ends before buffer index `i`): decode, convert, resume. */
  private genericDone(i: number): void {
    const nest = this.gNest;
    // decodeJson applies its nesting limit from the value's real depth: wrap it in as many arrays.
    const wrapped = Buffer.allocUnsafe(this.gLen + 2 * nest);
    wrapped.fill(B.LBracket, 0, nest);
    this.gBuf.copy(wrapped, nest, 0, this.gLen);
    wrapped.fill(B.RBracket, nest + this.gLen);
    let v: JsonValue;
    try {
      let w = decodeJson(wrapped);
      for (let k = 0; k < nest; k++) w = (w as JsonValue[])[0]!;
      v = w;
    } catch (err) {
      return this.genericError(err, nest);
    }
    if (this.gLen > 4096) this.gBuf = Buffer.allocUnsafeSlow(256);
    this.gLen = 0;
    const end = this.bufBase + i;
    switch (this.gCtx) {
      case G.Root:
        this.rootNotObject = true;
        this.state = S.AfterRoot;
        return;
      case G.Member:
        this.member(this.key, v, end);
        this.state = S.ObjNext;
        return;
      case G.PointsValue:
        this.noteBad('field points must be an array of points');
        this.memberDone('points', end);
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
  private genericError(err: unknown, nest: number): void {
    if (!(err instanceof JsonDecodeError)) throw err;
    const at = this.gStart + Math.max(0, Math.min(err.offset - nest, this.gLen));
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
    const nest = this.gNest;
    const partial = Buffer.allocUnsafe(this.gLen + nest);
    partial.fill(B.LBracket, 0, nest);
    this.gBuf.copy(partial, nest, 0, this.gLen);
    try {
      decodeJson(partial);
    } catch (err) {
      return this.genericError(err, nest);
    }
    this.syntax('unexpected end of input', this.total);
  }

  private member(key: string, v: JsonValue, end: number): void {
    if (key === 'schema') this.rawSchema = v;
    if (key === 'operation') this.rawOperation = v;
    this.memberDone(key, end);
    // Own keys only: "__proto__" and friends are unknown fields like any other (envelope.ts).
    const kind = Object.hasOwn(REQUEST_FIELDS, key) ? REQUEST_FIELDS[key] : undefined;
    if (!kind) {
      this.noteBad(`unknown field ${JSON.stringify(key).slice(0, 80)}`);
      return;
    }
    if (key === 'request_id') {
      if (!validRequestId(v)) this.note(refuse('invalid_request_id', 'request_id must be 1..64 printable ASCII bytes'));
      else this.env[key] = v;
      return;
    }
    try {
      this.env[key] = convertField(kind, v, key);
    } catch (e) {
      if (e instanceof Refusal) this.note(e);
      else throw e;
    }
  }

  private memberDone(key: string, end: number): void {
    this.memberInfo.push({ key, end });
  }
}

/** Equality of decoded member values (bigint, string, boolean, null, arrays and objects of them). */
export function sameValue(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return Object.is(a, b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

function toBuffer(u: Uint8Array): Buffer {
  return Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

const KEY_BYTES: [number, Uint8Array][] = Object.entries(POINT_KEYS).map(([k, v]) => [v, Buffer.from(k, 'latin1')]);

/** The K_* of a plain key b[s..e) (without quotes), or -1 when it is not one of the point keys as plain bytes. */
function matchPointKey(b: Uint8Array, s: number, e: number): number {
  const len = e - s;
  for (const [k, bytes] of KEY_BYTES) {
    if (bytes.length !== len) continue;
    let j = 0;
    while (j < len && b[s + j] === bytes[j]) j++;
    if (j === len) return k;
  }
  return -1;
}

function keyName(k: number): string {
  for (const [name, v] of Object.entries(POINT_KEYS)) if (v === k) return name;
  return '?';
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
