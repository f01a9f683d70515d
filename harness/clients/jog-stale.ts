// Whose doing a jog's refused frames were, from the harness's own inputs (DESIGN.md rule 6: a slow host is
// not a broken target). A jog test on the stepped clock still keeps its input fresh in host time (document
// 1 part 3 "Jog session": input expiry when host time passes the input deadline), so on a loaded host the
// harness can send its next frame too late and the jog expires, correctly; the frames after it are refused
// jog_session_stale. The cell's jog_expired event says when the jog expired and against which deadline
// (suites/jog/jog.test.ts hostJogExpiry); when the event log lost it (its ring wrapped), this judges from
// what the harness gave and sent alone.

import { HarnessError } from '../errors.ts';

export interface JogInputs {
  /** Input deadlines the harness gave (host ns): each begin's and each accepted frame's, with when it was built and counted accepted. */
  inputs: readonly { sent: bigint; deadline: bigint; acked?: bigint }[];
  /** Frames counted refused: when each was built (its capture, host ns) and the reason the ingress counted. */
  refused: readonly { sent: bigint; reason: string }[];
  /** The cell's input age (ns), for the figures. */
  maxAgeNs: bigint;
}

/**
 * HIL_ERR_HOST_TOO_SLOW when the first frame refused jog_session_stale was built at host time past the
 * freshest input deadline the harness's inputs accepted before it had given the jog: a correct target may
 * have expired the jog by then. Undefined (the failure stands) when that frame was built within the
 * deadline (the target ended the jog early), or when no frame was refused so.
 */
export function staleByHost(j: JogInputs, e: unknown): HarnessError | undefined {
  const first = j.refused.find((x) => x.reason === 'jog_session_stale');
  if (!first) return undefined;
  const before = j.inputs.filter((x) => (x.acked ?? x.sent) <= first.sent);
  const given = before.reduce((m, x) => (x.deadline > m ? x.deadline : m), 0n);
  if (given === 0n || first.sent <= given) return undefined;
  const last = before.reduce((m, x) => (x.sent > m ? x.sent : m), 0n);
  const ms = (ns: bigint) => Math.round(Number(ns) / 1e5) / 10;
  const what = String((e as Error)?.message ?? e).split('\n')[0];
  return new HarnessError(
    'HIL_ERR_HOST_TOO_SLOW',
    `document 1 part 3 "Jog session" (input deadline): the harness built its next frame ${ms(first.sent - given)} ms after the input deadline its freshest accepted input gave the jog (${ms(first.sent - last)} ms after that input was built, input age ${ms(j.maxAgeNs)} ms), and it was refused jog_session_stale; no jog_expired event says when the jog ended (the event log lost this test's events): a correct target may have expired it, a slow host, not a verdict on the target; the check that failed: ${what}`,
    { cause: e, detail: { rule: 'jog input deadline', late_ms: ms(first.sent - given), last_input_ms_before: ms(first.sent - last) } },
  );
}
