// Matching a live message with a recorded one (paced replay, docs/recording.md "The replay target"): the
// same message type and operation and the same fields, except
//   - fences (generations, handles, message ids, jog generations) are rewritten consistently: the first
//     time a recorded value meets a live one the pair is fixed, and every later use must agree both ways;
//   - host times (lease and jog deadlines, capture times) are not compared, since they belong to the wall
//     clock of the run that sent them.

import { noteValue, typedFromNote } from '../../drivers/replay/format.ts';
import type { FromCore, ToCore } from '../core/protocol.ts';

/** Every field name of the core protocol's typed messages, at any depth (the marks below are checked against it). */
type FieldsOf<T, D extends unknown[] = []> = D['length'] extends 6
  ? never
  : T extends bigint | string | number | boolean | null | undefined | ArrayBufferView | ((...a: never[]) => unknown)
    ? never
    : T extends readonly (infer E)[]
      ? FieldsOf<E, [...D, 0]>
      : T extends object
        ? { [K in keyof T & string]-?: (string extends K ? never : K) | FieldsOf<T[K], [...D, 0]> }[keyof T & string]
        : never;
type ChannelField = FieldsOf<ToCore | FromCore>;

/**
 * The replay's marks on the core protocol (sims/core/protocol.ts): the fields that carry a fence (a
 * generation, handle, jog generation or message id: compared through a consistent recorded->live mapping),
 * and those that carry a host monotonic time of the run that sent them (never compared). Checked against the
 * protocol's types: a renamed field fails to compile.
 */
export const PROTOCOL_FENCE_FIELDS = ['id', 'generation', 'Generation', 'handle', 'Handle', 'jogGeneration', 'JogGeneration', 'active_handle'] as const satisfies readonly ChannelField[];
export const PROTOCOL_HOST_TIME_FIELDS = ['deadlineNs', 'originNs', 'captureNs', 'inputDeadlineNs', 'SourceOriginHostNs', 'DeadlineHostNs', 'InputDeadlineHostNs', 'nowNs'] as const satisfies readonly ChannelField[];
/**
 * The same marks for fields of untyped parts: event payloads (Record<string, unknown>: `jog_generation`,
 * `deadline_ns`, `host_ns`) and the service's notes (`now_ns` of a status read).
 */
const PAYLOAD_FENCE_FIELDS = ['jog_generation'] as const;
export const PAYLOAD_HOST_TIME_FIELDS = ['deadline_ns', 'host_ns', 'now_ns'] as const;

/** Fields that are fences: compared through a consistent recorded->live mapping (marked in the protocol). */
export const FENCE_FIELDS: ReadonlySet<string> = new Set<string>([...PROTOCOL_FENCE_FIELDS, ...PAYLOAD_FENCE_FIELDS]);
/** Fields that carry host monotonic times of the run that sent them (never compared; marked in the protocol). */
export const HOST_TIME_FIELDS: ReadonlySet<string> = new Set<string>([...PROTOCOL_HOST_TIME_FIELDS, ...PAYLOAD_HOST_TIME_FIELDS]);

/** What a note's data looks like after the recorder's JSON (bigints as decimal strings, typed arrays as their bytes: format.ts noteValue). */
export function normalise(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v, noteValue) ?? 'null');
}

/** A typed array as recordings before noteValue wrote it: an object with one key per element. */
function perElement(v: unknown): unknown {
  const t = typedFromNote(v);
  return t ? JSON.parse(JSON.stringify(t, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x))) : v;
}

export interface Mismatch {
  /** Dotted path of the first differing field ('' for the whole value). */
  path: string;
  expected: unknown;
  actual: unknown;
}

/** Consistent recorded->live rewriting of fence values, both ways. */
export class FenceMap {
  private fwd = new Map<string, string>();
  private back = new Map<string, string>();
  /** True when recorded `r` may stand for live `l` (fixing the pair the first time either is seen). */
  agree(field: string, r: unknown, l: unknown): boolean {
    const rk = `${fenceFamily(field)}:${String(r)}`;
    const lk = `${fenceFamily(field)}:${String(l)}`;
    const f = this.fwd.get(rk);
    const b = this.back.get(lk);
    if (f === undefined && b === undefined) {
      this.fwd.set(rk, lk);
      this.back.set(lk, rk);
      return true;
    }
    return f === lk && b === rk;
  }
  get size(): number {
    return this.fwd.size;
  }
  clone(): FenceMap {
    const f = new FenceMap();
    f.fwd = new Map(this.fwd);
    f.back = new Map(this.back);
    return f;
  }
  /** The live value a recorded fence stands for, when known. */
  live(field: string, recorded: unknown): string | undefined {
    const v = this.fwd.get(`${fenceFamily(field)}:${String(recorded)}`);
    return v === undefined ? undefined : v.slice(v.indexOf(':') + 1);
  }
}

/** Generations in grants, commands and events are one family; handles another; message ids a third. */
function fenceFamily(field: string): string {
  const f = field.toLowerCase();
  if (f === 'id') return 'id';
  if (f.includes('jog')) return 'jog';
  if (f.includes('handle')) return 'handle';
  return 'generation';
}

/**
 * Compare a recorded value (note data) with a live one (already normalised), fences through `fences`.
 * Returns the first mismatch or null.
 */
export function compareNote(expected: unknown, actual: unknown, fences: FenceMap, path = ''): Mismatch | null {
  // A typed array written per element (older recordings) against one written as its bytes: compare per element.
  const te = typedFromNote(expected) !== null;
  const ta = typedFromNote(actual) !== null;
  if (te !== ta) return compareNote(perElement(expected), perElement(actual), fences, path);
  if (expected !== null && actual !== null && typeof expected === 'object' && typeof actual === 'object') {
    if (Array.isArray(expected) !== Array.isArray(actual)) return { path, expected, actual };
    const e = expected as Record<string, unknown>;
    const a = actual as Record<string, unknown>;
    const keys = new Set([...Object.keys(e), ...Object.keys(a)]);
    for (const k of keys) {
      const p = path ? `${path}.${k}` : k;
      if (HOST_TIME_FIELDS.has(k)) continue;
      if (!(k in e) || !(k in a)) return { path: p, expected: e[k], actual: a[k] };
      if (FENCE_FIELDS.has(k) && (typeof e[k] === 'string' || typeof e[k] === 'number') && (typeof a[k] === 'string' || typeof a[k] === 'number')) {
        if (!fences.agree(k, e[k], a[k])) return { path: p, expected: e[k], actual: a[k] };
        continue;
      }
      const m = compareNote(e[k], a[k], fences, p);
      if (m) return m;
    }
    return null;
  }
  return Object.is(expected, actual) ? null : { path, expected, actual };
}


/**
 * The live message with every host time replaced by the recorded one (bigints revived); `pair` is told each
 * recorded time and the live one it stands for.
 */
export function withRecordedTimes(live: unknown, recorded: unknown, pair: (recorded: bigint, live: bigint) => void): unknown {
  if (live === null || typeof live !== 'object' || recorded === null || typeof recorded !== 'object' || ArrayBuffer.isView(live)) return live;
  const out: Record<string, unknown> = { ...(live as Record<string, unknown>) };
  const r = recorded as Record<string, unknown>;
  for (const k of Object.keys(out)) {
    if (!(k in r)) continue;
    if (HOST_TIME_FIELDS.has(k) && typeof out[k] === 'bigint' && typeof r[k] === 'string') {
      const rec = BigInt(r[k] as string);
      pair(rec, out[k] as bigint);
      out[k] = rec;
    } else if (out[k] !== null && typeof out[k] === 'object') out[k] = withRecordedTimes(out[k], r[k], pair);
  }
  return out;
}


/**
 * A live message without the service's record stamp (drivers/replay/tap.ts RecordStamp: recorded beside a
 * request, not in it) and a prepare's attachment (core protocol.ts PlanAttachment: never recorded, and the
 * replayed core builds the same plan without it).
 */
export function unstamped(msg: unknown): unknown {
  if (msg === null || typeof msg !== 'object' || !('sentNs' in msg || 'origin' in msg || 'workspace' in msg || 'slot' in msg)) return msg;
  const { sentNs: _s, origin: _o, workspace: _w, slot: _l, ...rest } = msg as Record<string, unknown>;
  return rest;
}

/** What the service notes of its answer to a control or program request (sims/service/core-link.ts noteReply). */
export interface HttpReply {
  t: 'http_reply';
  op: string;
  status: number;
  label: string;
}

/**
 * The service's answers with repeats dropped: an answer equal (status and label) to the previous answer of
 * the same operation. A test that polls until an answer changes (an upload slot still busy, a program not
 * yet prepared) makes as many requests as the wall clock gave it time for, which differs from run to run;
 * what it observed is the sequence of distinct answers. The cost: a second identical answer to the same
 * operation is not checked on its own (one that reaches the core is, as a request).
 */
export function collapseRepeats<T>(xs: readonly T[], reply: (x: T) => HttpReply): T[] {
  const last = new Map<string, HttpReply>();
  return xs.filter((x) => {
    const r = reply(x);
    const prev = last.get(r.op);
    last.set(r.op, r);
    return !(prev && prev.status === r.status && prev.label === r.label);
  });
}

