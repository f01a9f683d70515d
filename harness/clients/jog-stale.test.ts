// The judgement of a jog's stale frames from the harness's own inputs (harness/clients/jog-stale.ts).

import { expect, test } from 'vitest';
import { staleByHost } from './jog-stale.ts';
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
