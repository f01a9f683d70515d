// Digests over canonical JSON (document 3 part 2 "Digests") on the reference side. The writer is
// sims/json.ts canonicalJson (keys sorted by UTF-16 code units, no whitespace, one number rule: see
// there and docs/profile.md "Weld planner: canonical JSON"). Written separately from the harness's
// oracle (harness/oracle/json.ts canonicalJson); the suites hold the two to the same digests.

import { createHash } from 'node:crypto';
import { canonicalJson, JsonObject, type JsonValue } from '../json.ts';

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
