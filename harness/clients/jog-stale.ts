// Whose doing a jog's refused frames were, from the harness's own inputs (DESIGN.md rule 6: a slow host is
// not a broken target). A jog test on the stepped clock still keeps its input fresh in host time (document
// 1 part 3 "Jog session": input expiry when host time passes the input deadline), so on a loaded host the
// harness can send its next frame too late and the jog expires, correctly; the frames after it are refused
// jog_session_stale. The cell's jog_expired event says when the jog expired and against which deadline
// (suites/jog/jog.test.ts hostJogExpiry); when the event log lost it (its ring wrapped), this judges from
// what the harness gave and sent alone.

import { HarnessError, verdictOfError } from '../errors.ts';

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

/** A remote jog lane's timing as the harness saw it (harness/clients/jog.ts RemoteJogSocket), host ns. */
export interface RemoteLaneTiming {
  openedNs: bigint;
  /** When each message the harness sent on the lane left. */
  inputsNs: readonly bigint[];
  /** Moments the test needed the lane alive without sending on it. */
  needsNs: readonly bigint[];
  /** When the frames phase began (begun received, or the lane opened on an existing jog generation). */
  framesFromNs?: bigint;
  /** When the service's jog_stream_idle (its message or its close) reached the harness. */
  idleNs?: bigint;
}

/**
 * Whose doing a remote jog lane that ended jog_stream_idle was, when the test failed (document 1 part 8
 * "Remote jog idle": no complete frame within the input-age ceiling ends the jog, 5 s during setup). The
 * lane must stay alive at each moment the test sent on it or said it needed it; at each such moment the
 * harness's gap since its previous input on the lane (or the opening) is measured against the bound of
 * the phase the lane was in:
 *
 * - a gap past the bound: the harness itself left the lane idle that long (its frame loop was late), and a
 *   correct receiver may have ended it: HIL_ERR_HOST_TOO_SLOW with the figures.
 * - every gap within the bound: the service ended a lane the harness kept fed (a gap measured from sends
 *   is never shorter than the one the service saw between arrivals and its close), so the failure stands;
 *   a send the closed lane refused ("WebSocket is not open") is the target's failure too (FAIL).
 *
 * Undefined when no lane ended jog_stream_idle, or the failure stands as it was.
 */
export function remoteIdleByHost(lanes: readonly RemoteLaneTiming[], bounds: { inputAgeNs: bigint; setupNs: bigint }, e: unknown): HarnessError | undefined {
  const ms = (ns: bigint) => Math.round(Number(ns) / 1e5) / 10;
  const what = String((e as Error)?.message ?? e).split('\n')[0];
  let kept: { gap: bigint; bound: bigint } | undefined;
  for (const l of lanes) {
    if (l.idleNs === undefined) continue;
    const inputs = [...l.inputsNs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const needs = [...inputs, ...l.needsNs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (const p of needs) {
      const prev = inputs.filter((x) => x < p).reduce((m, x) => (x > m ? x : m), l.openedNs);
      const frames = l.framesFromNs !== undefined && l.framesFromNs < p;
      const bound = frames ? bounds.inputAgeNs : bounds.setupNs;
      const gap = p - prev;
      if (gap > bound) {
        return new HarnessError(
          'HIL_ERR_HOST_TOO_SLOW',
          `document 1 part 8 "Remote jog idle": the harness gave its remote jog lane no input for ${ms(gap)} ms (${frames ? 'frames phase, input age' : 'setup, bound'} ${ms(bound)} ms) before it next sent on it or needed it, and the service ended the lane jog_stream_idle ${l.idleNs >= prev ? `${ms(l.idleNs - prev)} ms after that last input` : 'meanwhile'}: a correct receiver ends such a lane, a slow host, not a verdict on the target; the check that failed: ${what}`,
          { cause: e, detail: { rule: 'remote jog idle', gap_ms: ms(gap), bound_ms: ms(bound) } },
        );
      }
      if (!kept || gap > kept.gap) kept = { gap, bound };
    }
  }
  if (!kept || verdictOfError(e) === 'fail' || !/WebSocket is not open/.test(what)) return undefined;
  return new HarnessError(
    'HIL_ERR_TARGET_REFUSED',
    `document 1 part 8 "Remote jog idle": the service ended the remote jog lane jog_stream_idle although the harness gave it input at most ${ms(kept.gap)} ms apart (bound ${ms(kept.bound)} ms), and a send on the closed lane failed: ${what}`,
    { cause: e, detail: { rule: 'remote jog idle', gap_ms: ms(kept.gap), bound_ms: ms(kept.bound) } },
  );
}
