// Where recording and paced replay reach the control service (docs/recording.md): every hold and note on
// the service's side, in one module, so the service's own code reads without them. Behaviour is the
// core link's (core-link.ts) and the pacer's (sims/replay/pacer.ts); these functions only name the
// points where the service calls them.

import type { Authority } from './authority.ts';
import type { CoreLink } from './core-link.ts';
import { REPLAY_WAIT_MS } from './core-waits.ts';

type AuthorityHooks = ConstructorParameters<typeof Authority>[2];

/** Paced replay: how long a status read waits for the publication its recording was served from. */
const STATUS_READ_WAIT_MS = 3_000;

/** The authority's replay hooks: a replayed clock and acquire deadline, and the recorded fence order. */
export function authorityReplayHooks(core: CoreLink): Pick<AuthorityHooks, 'replaying' | 'acquireDeadline' | 'fenced' | 'recordedFence'> {
  return {
    replaying: () => core.replaying,
    acquireDeadline: () => core.recordedAcquireDeadline(),
    fenced: (op, outcome) => core.fenceOrder.passed(op, outcome),
    recordedFence: (op) => core.fenceOrder.recordedOutcome(op),
  };
}

/**
 * A replay holds this fence decision until the ones recorded before it are taken (fence-order.ts): the
 * promise to await, or null when nothing holds it (the caller then goes on without yielding).
 */
export function fenceTurn(core: CoreLink, operation: string): Promise<void> | null {
  return core.fenceOrder.gate(operation);
}

/** Labels of a recorded fence decision that found the session's grant already gone (lease expiry taken). */
const GRANT_GONE: ReadonlySet<string> = new Set(['no_grant', 'control_session_stale']);
/** How often a decision waiting for a recorded lease expiry looks again (wall ms). */
const EXPIRY_POLL_MS = 5;

/**
 * A lease_expiry sync point on the service's side (sims/replay/sync-points.ts): the recorded service
 * refused this decision because the session's lease had already run out, but the live service still holds
 * the grant (the test's wall-clock wait for the expiry ended before the paced core reached the recorded
 * expiry, which the pacer cues). The decision waits for that cue, at most REPLAY_WAIT_MS; the promise to
 * await, or null when nothing holds it. Only a decision the live grant would let pass is held (its session,
 * its generation, not stopping): one refused for another reason (an older generation, a stop in flight) is
 * refused as recorded without waiting. Never held outside a replay.
 */
export function recordedExpiryTurn(core: CoreLink, authority: Pick<Authority, 'current'>, operation: string, session: string | undefined, generation: bigint | undefined): Promise<void> | null {
  const g = authority.current;
  if (!core.replaying || session === undefined || !g || g.session !== session || g.generation !== generation || g.stopping) return null;
  const recorded = core.fenceOrder.recordedOutcome(operation);
  if (recorded === undefined || !GRANT_GONE.has(recorded)) return null;
  const until = Date.now() + REPLAY_WAIT_MS;
  return new Promise<void>((resolve) => {
    const look = () => {
      if (authority.current?.session !== session) return resolve();
      if (Date.now() >= until) {
        core.noteHoldLost('lease_expiry', operation);
        return resolve();
      }
      setTimeout(look, EXPIRY_POLL_MS).unref();
    };
    look();
  });
}

/**
 * A paced replay serves each status read from the publication the recorded read was served from: the
 * promise to await, or undefined when nothing holds the read.
 */
export function statusReadTurn(core: CoreLink): Promise<unknown> | undefined {
  const want = core.nextStatusReadCycle();
  if (want === undefined) return undefined;
  return core.statusFrom(want, STATUS_READ_WAIT_MS).then((came) => {
    if (!came) core.noteHoldLost('publication', `publication of cycle ${want}`);
  });
}

/** The status read just served (noted into a recording, told to a paced replay). */
export function statusRead(core: CoreLink, nowHostNs: bigint): void {
  core.noteStatusRead(core.status?.cycle, nowHostNs);
}

/** A reply the service sent (noted into a recording, matched by a paced replay). */
export function replySent(core: CoreLink, reply: { status: number; body: Record<string, unknown> }): void {
  core.noteReply(reply);
}

/** A telemetry poll was served. */
export function telemetryRead(core: CoreLink): void {
  core.noteTelemetryRead();
}

/** A paced replay retakes a lease expiry where the recording took it. */
export function onReplayedExpiry(core: CoreLink, authority: Authority): void {
  core.onReplayedExpiry = (generation) => void authority.expireReplayed(generation);
}
