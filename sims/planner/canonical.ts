// Canonical JSON of document 3 part 2 "Digests" on the reference side: keys sorted at every level (by
// UTF-16 code units, RFC 8785 order), no whitespace, non-finite numbers refused. Numbers: an integer
// literal is written as its exact decimal value; any other literal as ECMAScript Number::toString of its
// float64 value (docs/profile.md "Weld planner: canonical JSON"). Written separately from the harness's
// oracle (harness/oracle/json.ts canonicalJson); the suites hold the two to the same digests.

import { createHash } from 'node:crypto';
import { JsonNumber, JsonObject, type JsonValue } from '../json.ts';

export class CanonicalError extends Error {
  constructor(readonly path: string, message: string) {
    super(message);
    this.name = 'CanonicalError';
  }
}

const INT = /^-?(0|[1-9][0-9]*)$/;

function numberText(n: JsonNumber, path: string): string {
  if (INT.test(n.text)) return BigInt(n.text).toString();
  const x = Number(n.text);
  if (!Number.isFinite(x)) throw new CanonicalError(path, `non-finite number ${n.text}`);
  return Object.is(x, -0) ? '0' : String(x);
}

export function canonicalJson(v: JsonValue, path = '$'): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'string') return JSON.stringify(v);
  if (v instanceof JsonNumber) return numberText(v, path);
  if (Array.isArray(v)) return '[' + v.map((x, i) => canonicalJson(x, `${path}[${i}]`)).join(',') + ']';
  const keys = [...v.fields.keys()].sort();
  return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonicalJson(v.fields.get(k)!, `${path}.${k}`)).join(',') + '}';
}

/** The object without one key (a shallow copy; values shared). */
export function without(o: JsonObject, key: string): JsonObject {
  const c = new JsonObject();
  for (const [k, x] of o.fields) if (k !== key) c.fields.set(k, x);
  return c;
}

export function sha256Text(text: string | Uint8Array): string {
  return 'sha256:' + createHash('sha256').update(text).digest('hex');
}

/** `sha256:` + hex over the canonical JSON of the value. */
export function canonicalDigest(v: JsonValue): string {
  return sha256Text(canonicalJson(v));
}
