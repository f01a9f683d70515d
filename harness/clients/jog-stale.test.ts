// The judgement of a jog's stale frames from the harness's own inputs (harness/clients/jog-stale.ts).

import { expect, test } from 'vitest';
import { remoteIdleByHost, staleByHost, type RemoteLaneTiming } from './jog-stale.ts';
import { verdictOfError } from '../errors.ts';

const MS = 1_000_000n;
const AGE = 250n * MS;
const failure = new Error('expected [] to have a length of 1 but got +0');
// A begin at 0 (deadline 200 ms) and a frame built at 10 ms, counted accepted at 30 ms (deadline 260 ms).
const inputs = [
  { sent: 0n, deadline: 200n * MS },
  { sent: 10n * MS, deadline: 10n * MS + AGE, acked: 30n * MS },
];

test('a frame built after the freshest deadline the harness gave and refused jog_session_stale: the host was too slow (ERROR with the figures)', () => {
  const e = staleByHost({ inputs, refused: [{ sent: 400n * MS, reason: 'jog_session_stale' }], maxAgeNs: AGE }, failure);
  expect(e?.code).toBe('HIL_ERR_HOST_TOO_SLOW');
  expect(verdictOfError(e)).toBe('error');
  expect(e?.message).toMatch(/built its next frame 140 ms after the input deadline .* \(390 ms after that input was built, input age 250 ms\).*the check that failed: expected \[\] to have a length of 1/);
});

test('at the deadline itself the jog may not have expired yet: refused then is the target\'s (the failure stands); one ns later the host\'s', () => {
  expect(staleByHost({ inputs, refused: [{ sent: 260n * MS, reason: 'jog_session_stale' }], maxAgeNs: AGE }, failure)).toBeUndefined();
  expect(staleByHost({ inputs, refused: [{ sent: 260n * MS + 1n, reason: 'jog_session_stale' }], maxAgeNs: AGE }, failure)?.code).toBe('HIL_ERR_HOST_TOO_SLOW');
});

test('only an accepted input counted before the refused frame gives a deadline; other refusals and no input say nothing', () => {
  // The second input was counted accepted only after the refused frame was built: the begin's 200 ms deadline is the freshest.
  const late = [inputs[0]!, { sent: 10n * MS, deadline: 10n * MS + AGE, acked: 300n * MS }];
  expect(staleByHost({ inputs: late, refused: [{ sent: 220n * MS, reason: 'jog_session_stale' }], maxAgeNs: AGE }, failure)?.code).toBe('HIL_ERR_HOST_TOO_SLOW');
  expect(staleByHost({ inputs, refused: [{ sent: 400n * MS, reason: 'jog_frame_stale' }], maxAgeNs: AGE }, failure)).toBeUndefined();
  expect(staleByHost({ inputs: [], refused: [{ sent: 400n * MS, reason: 'jog_session_stale' }], maxAgeNs: AGE }, failure)).toBeUndefined();
  expect(staleByHost({ inputs, refused: [], maxAgeNs: AGE }, failure)).toBeUndefined();
});

// Remote jog lanes (remoteIdleByHost): input age 750 ms (the internet profile), setup bound 5 s.
const BOUNDS = { inputAgeNs: 750n * MS, setupNs: 5_000n * MS };
/** Opened at 0, set up (three messages), begun at 100 ms, then frames at the given ms; jog_stream_idle seen at `idle` ms. */
const lane = (frames: number[], idle?: number, needs: number[] = []): RemoteLaneTiming => ({
  openedNs: 0n,
  inputsNs: [10n, 40n, 70n, ...frames.map(BigInt)].map((x) => x * MS),
  needsNs: needs.map((x) => BigInt(x) * MS),
  framesFromNs: 100n * MS,
  ...(idle !== undefined ? { idleNs: BigInt(idle) * MS } : {}),
});

test('a remote lane the harness left without input past the input age, ended jog_stream_idle: the host was too slow (ERROR with the gap); at the bound itself the failure stands', () => {
  const e = remoteIdleByHost([lane([150, 300, 1_100], 1_060)], BOUNDS, failure);
  expect(e?.code).toBe('HIL_ERR_HOST_TOO_SLOW');
  expect(verdictOfError(e)).toBe('error');
  expect(e?.message).toMatch(/no input for 800 ms \(frames phase, input age 750 ms\).*jog_stream_idle 760 ms after that last input.*the check that failed: expected \[\] to have a length of 1/);
  expect(e?.detail).toMatchObject({ gap_ms: 800, bound_ms: 750 });
  // 750 ms apart is within the bound: the service ended a lane the harness kept fed.
  expect(remoteIdleByHost([lane([150, 300, 1_050], 1_040)], BOUNDS, failure)).toBeUndefined();
  expect(remoteIdleByHost([lane([150, 300, 1_051], 1_040)], BOUNDS, failure)?.code).toBe('HIL_ERR_HOST_TOO_SLOW');
});

test('a remote lane kept fed that the service ended jog_stream_idle: an assertion stands, a send refused by the closed lane is the target\'s failure (FAIL); without an idle end nothing is said', () => {
  expect(remoteIdleByHost([lane([150, 300, 450], 500)], BOUNDS, failure)).toBeUndefined();
  const notOpen = new Error('WebSocket is not open: readyState 3 (CLOSED)');
  const e = remoteIdleByHost([lane([150, 300, 450], 500)], BOUNDS, notOpen);
  expect(e?.code).toBe('HIL_ERR_TARGET_REFUSED');
  expect(verdictOfError(e)).toBe('fail');
  expect(e?.message).toMatch(/input at most 150 ms apart \(bound 750 ms\)/);
  // Another harness error is left as it was; so is any failure when no lane ended jog_stream_idle, whatever its gaps.
  expect(remoteIdleByHost([lane([150, 300, 450], 500)], BOUNDS, new Error('no pong'))).toBeUndefined();
  expect(remoteIdleByHost([lane([150, 3_000])], BOUNDS, failure)).toBeUndefined();
  expect(remoteIdleByHost([lane([150, 3_000])], BOUNDS, notOpen)).toBeUndefined();
});

test('during setup the bound is 5 s, from the frames phase on the input age; a moment the test needed the lane without sending on it counts like a send', () => {
  // 4 s between two setup messages (before begun) is allowed; 5.1 s is not.
  const setup = (gapMs: number): RemoteLaneTiming => ({ openedNs: 0n, inputsNs: [10n * MS, BigInt(10 + gapMs) * MS], needsNs: [], idleNs: BigInt(20 + gapMs) * MS });
  expect(remoteIdleByHost([setup(4_000)], BOUNDS, failure)).toBeUndefined();
  expect(remoteIdleByHost([setup(5_100)], BOUNDS, failure)?.message).toMatch(/no input for 5100 ms \(setup, bound 5000 ms\)/);
  // The lane needed alive 900 ms after its last frame (a second connection admitted): the harness's gap.
  expect(remoteIdleByHost([lane([150], 950, [1_050])], BOUNDS, failure)?.message).toMatch(/no input for 900 ms \(frames phase/);
  expect(remoteIdleByHost([lane([150], 950, [600])], BOUNDS, failure)).toBeUndefined();
});
