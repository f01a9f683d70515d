// Replies of any control client of this process that said the caller's grant had ended by its lease
// (epoch ms when answered, and the reason). The grant keeper (harness/clients/keeper.ts) judges a kept
// grant from them when the test's own request saw the lapse before the keeper's next renewal could (the
// test ended, and its keeper with it). A module of its own so that the control client can note them
// without importing the keeper.

export interface Lapse {
  answered: number;
  error: string;
  /** Epoch ms when the refused request was sent, when the client said. */
  sent?: number;
}

export const lapses: Lapse[] = [];

/**
 * Reasons that say the caller's grant ended by its lease: expired (renew, stop, release),
 * control_session_stale with "session expired" or "the grant ended" (other fenced calls and an upload cut
 * short), no_grant (halt, io_arm, io_disarm, prepare_trajectory): document 1 part 4 and docs/profile.md,
 * the table of ended sessions.
 */
const LAPSED = /^(expired\b|control_session_stale: (session expired|the grant ended)|no_grant\b)/;

/** Note a refusal (the control client calls this with every 409); only lapses are kept. */
export function noteRefusal(status: number, error: string | undefined, sent?: number): void {
  if (status !== 409 || !error || !LAPSED.test(error)) return;
  lapses.push({ answered: performance.timeOrigin + performance.now(), error, ...(sent !== undefined ? { sent } : {}) });
  if (lapses.length > 512) lapses.splice(0, 256);
}
