// Where recording and paced replay reach the control service (docs/recording.md): every hold and note on
// the service's side, in one module, so the service's own code reads without them. Behaviour is the
// core link's (core-link.ts) and the pacer's (sims/replay/pacer.ts); these functions only name the
// points where the service calls them.

import type { Authority } from './authority.ts';
import type { CoreLink } from './core-link.ts';

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
