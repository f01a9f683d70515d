// The replay run's speed line: the replayed tests' wall time against the same tests' when recorded.

import { expect, test } from 'vitest';
import { errorText, hostLine, hostTooSlowOf, replaySpeedLine, stealOver } from './reporter.ts';
import { HarnessError } from '../errors.ts';
import { stealSeconds } from '../sequencer.ts';
import type { RunRecord } from './run-types.ts';

const run = (tests: NonNullable<RunRecord['target']['replay']>['tests'] | null): Pick<RunRecord, 'target'> =>
  ({ target: { name: 'replay', driver: 'replay', ...(tests ? { replay: { recordings: '/r', mode: 'strict', tests } } : {}) } }) as unknown as Pick<RunRecord, 'target'>;

test('only tests with both wall times count; the ratio is recorded over replayed', () => {
  const line = replaySpeedLine(
    run([
      { test: 'a', recording: 'a.hilrec', recorded_wall_ms: 3_000, wall_ms: 1_000 },
      { test: 'b', recording: 'b.hilrec', recorded_wall_ms: 1_000, wall_ms: 1_000 },
      { test: 'c', recording: 'c.hilrec', wall_ms: 5_000 }, // recorded before the sidecar kept its wall time
    ]),
  );
  expect(line).toBe('replay: 2 tests took 2.0 s, 4.0 s when recorded: 2.00 times the recorded speed');
});

test('no line for a run that is not a replay, or whose tests have no recorded wall time', () => {
  expect(replaySpeedLine(run(null))).toBeNull();
  expect(replaySpeedLine(run([{ test: 'c', recording: 'c.hilrec', wall_ms: 5_000 }]))).toBeNull();
});

test("the host line says how much CPU the hypervisor took over the run, from /proc/stat's steal counter", () => {
  const stat = (steal: number) => `cpu  6710500 3135975 1712863 2913085 8024 0 10489 ${steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n`;
  // The eighth field of the aggregate line, in jiffies of 10 ms.
  expect(stealSeconds(stat(15193))).toBe(151.93);
  expect(stealSeconds('cpu  1 2 3 4 5 6 7\n')).toBeUndefined();
  expect(stealSeconds('intr 1\n')).toBeUndefined();
  expect(stealOver(151.93, 153.18)).toEqual({ steal_s: 1.25 });
  expect(stealOver(undefined, 153.18)).toEqual({});
  expect(stealOver(153.18, 151.93)).toEqual({});
  const host = { cores: 2, workers: 6, load1: { start: 1, mean: 2, max: 3, samples: 4 } };
  expect(hostLine({ ...host, steal_s: 1.25 })).toBe('host: 2 cores, 6 workers, load average 1 at the start, mean 2, max 3; CPU taken by the hypervisor 1.25 s');
  expect(hostLine({ ...host, steal_s: 0 })).toBe('host: 2 cores, 6 workers, load average 1 at the start, mean 2, max 3');
});

test('a test a set-up hook kept from running is host-too-slow when the hook threw HIL_ERR_HOST_TOO_SLOW, from the error as thrown (the run.json text is prefixed with the set-up)', () => {
  const thrown = errorText(new HarnessError('HIL_ERR_HOST_TOO_SLOW', 'the keeper lost the grant to the host\'s lateness'));
  expect(hostTooSlowOf(undefined, [thrown])).toBe(thrown.split('\n')[0]);
  // The prefixed text alone (what the reporter matched before) is not recognised: the caller passes the errors as thrown.
  expect(hostTooSlowOf(undefined, [`set-up of "block" failed: ${thrown}`])).toBeUndefined();
  expect(hostTooSlowOf(undefined, [errorText(new Error('expected 409 to be 200'))])).toBeUndefined();
  expect(hostTooSlowOf('a renewal came late', [])).toBe('a renewal came late');
});

test('a thrown value that is not an Error, or an Error with no message, is shown by its own fields, never as an empty error', () => {
  // vitest serializes a rejection with a plain object as that object's fields (no message, no stack).
  expect(errorText({ status: 409, contentType: 'text/plain', body: 'jog_session_stale: the jog generation ended' } as never)).toBe(
    'a thrown value with no message: {"status":409,"contentType":"text/plain","body":"jog_session_stale: the jog generation ended"}',
  );
  expect(errorText({ message: '', stack: '' })).toBe('(an error with no message)');
  expect(errorText({ message: 'expected 409 to be 200', stack: '' })).toBe('expected 409 to be 200');
  expect(errorText({ count: 12n } as never)).toBe('a thrown value with no message: {"count":"12n"}');
});
