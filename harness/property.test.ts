// Property parameters and recordings: a recorded test keeps the seed and volume each of its properties
// drew; replaying the test draws the recorded ones whatever the environment says; outside a test, or for
// a property the recording does not name, the environment (or a fresh seed) decides as before.

import { afterEach, expect, test } from 'vitest';
import { propertyRun, windowAttempts } from './property.ts';
import { enterTest, leaveTest } from './targets/pertest.ts';

afterEach(() => leaveTest());

test('a test\'s drawn seed and volume are kept for its recording, and reset for the next test', () => {
  const a = enterTest('suites/x.test.ts > a');
  const p = propertyRun('x', 7, { HIL_PROPERTY_SEED: '1234' });
  expect(p).toEqual({ numRuns: 7, seed: 1234 });
  expect(a.drawnProperties()).toEqual({ x: { seed: 1234, numRuns: 7 } });
  // entered again (a beforeEach hook entered it first): the same test, what it drew is kept
  expect(enterTest('suites/x.test.ts > a')).toBe(a);
  expect(enterTest('suites/x.test.ts > b').drawnProperties()).toEqual({});
});

test('replaying a recorded test draws the recorded seed and volume, not the environment\'s or a fresh one', () => {
  const a = enterTest('suites/x.test.ts > a');
  a.useRecordedProperties({ test: 'suites/x.test.ts > a', properties: { x: { seed: 99, numRuns: 3 }, bad: { seed: 'no', numRuns: 1 } } });
  expect(propertyRun('x', 150, {})).toEqual({ numRuns: 3, seed: 99 });
  expect(propertyRun('x', 150, { HIL_PROPERTY_SEED: '5', HIL_PROPERTY_RUNS: '8' })).toEqual({ numRuns: 3, seed: 99 });
  // A malformed entry is ignored; a property the recording does not name decides as usual.
  expect(propertyRun('bad', 2, { HIL_PROPERTY_SEED: '5' })).toEqual({ numRuns: 2, seed: 5 });
  expect(propertyRun('other', 4, { HIL_PROPERTY_SEED: '6' })).toEqual({ numRuns: 4, seed: 6 });
});

test('outside a test nothing is kept and nothing recorded is used', () => {
  const a = enterTest('suites/x.test.ts > a');
  a.useRecordedProperties({ properties: { x: { seed: 99, numRuns: 3 } } });
  leaveTest();
  expect(propertyRun('x', 2, { HIL_PROPERTY_SEED: '5' })).toEqual({ numRuns: 2, seed: 5 });
  expect(a.drawnProperties()).toEqual({});
});

test('a wall-clock retry count is kept with a recording and given back on its replay (windowAttempts): the replay makes as many attempts as the recording, whatever its own host\'s timing', () => {
  const recorded = enterTest('suite > retries');
  expect(windowAttempts('window').recorded()).toBeUndefined(); // not a replay: the test decides by its own timing
  windowAttempts('window').made(2);
  expect(recorded.drawnProperties()).toEqual({ 'attempts:window': { seed: 0, numRuns: 2 } });
  leaveTest();
  // The replay reads the sidecar the recording wrote (harness/targets/replay.ts replayFixture, useRecordedProperties).
  const replayed = enterTest('suite > retries');
  replayed.useRecordedProperties({ properties: recorded.drawnProperties() });
  expect(windowAttempts('window').recorded()).toBe(2);
  expect(windowAttempts('another').recorded()).toBeUndefined();
});
