// The request_id outcome cache (document 1 part 4 "Envelope rules"): the same id and payload replays the
// remembered reply, a changed payload is request_id_conflict; release and lease expiry drop the cache
// (PROFILE "Grant generation and stop": a revocation or a reset_fault retirement keeps it).

import { RID, type FencedSpec, type Request } from '../spec.ts';
import { findLast, reason, type CacheEntry, type ModelConfig, type ModelState, type Outcome } from '../state.ts';

// The rules this machine applies, each a documented (or PROFILE) rule; a wrong-model variant
// (harness/model/variants.ts) flips one, and the reference stack must then refute the model.
export interface CacheRules {
  /** Part 4 Envelope rules: "Release, lease expiry and a service restart drop the cache". */
  releaseDropsCache: boolean;
  /** Part 4 Envelope rules: "Changed payload under the same id: request_id_conflict". */
  conflictOnChangedPayload: boolean;
}

export const CACHE_RULES: Readonly<CacheRules> = Object.freeze({
  releaseDropsCache: true,
  conflictOnChangedPayload: true,
});

/** The retry cache of a session: the current grant's, or an ended session's kept one. */
export function cacheOf(m: ModelState, session: string): Map<string, CacheEntry> | undefined {
  if (m.grant?.session === session) return m.grant.cache;
  return findLast(m.ended, (x) => x.session === session)?.cache;
}

/**
 * The cache's answer for a fenced request whose fence check gave `fence`, or undefined when the cache does
 * not answer (the fence refusal or the operation then does). PROFILE "Grant generation and stop": for the
 * current session the fence is checked first; an ended session whose cache is kept answers from it.
 */
export function cachedOutcomes(c: ModelConfig, m: ModelState, req: Request, fence: string, lapsed: boolean): Outcome[] | undefined {
  const spec = req.spec as FencedSpec;
  const rid = 'rid' in spec ? spec.rid : undefined;
  const f = req.resolved!;
  const cache = rid !== undefined ? cacheOf(m, f.session) : undefined;
  const entry = rid !== undefined ? cache?.get(RID[rid]) : undefined;
  const current = m.grant?.session === f.session && !lapsed;
  // PROFILE "prepare_trajectory uploads": an upload is admitted on its prefix (the fence) before the rest
  // is read, so the retry cache, which compares whole payloads, comes after the fence for it.
  const fenceFirst = current || spec.op === 'prepare_trajectory';
  if (entry && (fenceFirst ? fence.startsWith('ok') : true)) {
    if (entry.payload === req.payload) {
      const alts: Outcome[] = [{ rule: 'idempotency.join_or_replay', status: entry.reply.status as 200 | 409, replay: entry.reply }];
      return alts;
    }
    if (c.rules.conflictOnChangedPayload) return [reason('idempotency.conflict', 'request_id_conflict')];
  }
  if (entry && current && spec.op !== 'prepare_trajectory' && !fence.startsWith('ok') && entry.payload === req.payload) {
    // A retry whose fence no longer holds (the session is stopping now): the fence refusal or the replay.
    return [reason(`fence:${spec.op}`, fence), { rule: 'idempotency.join_or_replay', status: entry.reply.status as 200 | 409, replay: entry.reply }];
  }
  return undefined;
}

/** The outcome, remembering its reply under the request's id on the session the request was made on. */
export function remember(req: Request, o: Outcome): Outcome {
  const spec = req.spec as FencedSpec;
  const rid = 'rid' in spec ? spec.rid : undefined;
  const f = req.resolved!;
  if (rid === undefined) return o;
  const base = o.next;
  return {
    ...o,
    next: (s, r) => {
      // Remember on the session the request was made on (a stop keeps its session while it drains).
      const cc = cacheOf(s, f.session) ?? (s.grant?.session === f.session ? s.grant.cache : undefined);
      base?.(s, r);
      const after = cacheOf(s, f.session) ?? cc;
      after?.set(RID[rid], { payload: req.payload, reply: r });
    },
  };
}
