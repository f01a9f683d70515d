// What the target serves, from Describe's capability list (document 1 part 1: "The Describe observation
// returns the capability list at run time"; an `unimplemented` capability answers capability_unimplemented).
// A suite testing a rule through an operation asks here first: it uses an operation the target serves when
// one can reach the rule, and skips with the reason when none can (a target that declares mark_telemetry
// unimplemented has not broken the envelope rules a test happens to reach through mark_telemetry).

import { createHash } from 'node:crypto';
import type { CheckedReply } from './oracle/reply.ts';
import { checkGrant } from './oracle/reply.ts';

interface Described {
  capabilities: ReadonlyArray<{ name: string; state: string }>;
}

/** Describe reports the capability in a state other than unimplemented (implemented, interim, test_only). */
export function served(d: Described, name: string): boolean {
  const c = d.capabilities.find((x) => x.name === name);
  return c !== undefined && c.state !== 'unimplemented';
}

/** The skip reason when Describe reports one of `names` unimplemented (or absent), else undefined. */
export function unservedReason(d: Described, ...names: string[]): string | undefined {
  const missing = names.filter((n) => !served(d, n));
  if (missing.length === 0) return undefined;
  return `Describe reports ${missing.join(', ')} unimplemented (document 1 part 1): the test reaches its rule only through ${missing.length === 1 ? 'it' : 'them'}`;
}

/** The names among `names` that Describe reports served. */
export function servedOf(d: Described, names: readonly string[]): string[] {
  return names.filter((n) => served(d, n));
}

/**
 * A fenced operation that changes nothing but leaves a trace, to reach the envelope rules (request_id
 * retries, the body limit) through: mark_telemetry (a `label`, answered with a new native `sequence`) when
 * the target serves it, else renew (answered with a Grant whose deadline_host_ns moves on with every
 * execution), carrying the tag in `source_sequence`, which every /v1/control dispatch accepts and ignores
 * (document 1 part 2 "Request").
 */
export interface Vehicle {
  op: 'mark_telemetry' | 'renew';
  /** The request for session `s` tagged `tag` (a different tag is a different payload), with more fields. */
  req(s: { session: string; generation: bigint }, tag: string, fields?: Record<string, unknown>): Record<string, unknown>;
  /** What each execution makes anew: the native sequence of a mark, the deadline of a renewal. */
  witness(r: CheckedReply): bigint;
}

const SCHEMA = 'svc.rt-control.request.v1';

export function vehicle(d: Described): Vehicle {
  if (served(d, 'mark_telemetry')) {
    return {
      op: 'mark_telemetry',
      req: (s, tag, fields = {}) => ({ schema: SCHEMA, operation: 'mark_telemetry', session: s.session, generation: s.generation, label: tag, ...fields }),
      witness: (r) => r.reply.sequence ?? 0n,
    };
  }
  return {
    op: 'renew',
    req: (s, tag, fields = {}) => ({ schema: SCHEMA, operation: 'renew', session: s.session, generation: s.generation, source_sequence: tagNumber(tag), ...fields }),
    witness: (r) => checkGrant(r.reply.data).deadline_host_ns,
  };
}

function tagNumber(tag: string): bigint {
  return BigInt('0x' + createHash('sha256').update(tag).digest('hex').slice(0, 12));
}
