// The replay run's speed line: the replayed tests' wall time against the same tests' when recorded.

import { expect, test } from 'vitest';
import { replaySpeedLine } from './reporter.ts';
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
