// hostBound (harness/lateness.ts): a failure inside a timing-sensitive exchange is HIL_ERR_HOST_TOO_SLOW
// (ERROR) only when the harness itself was late inside it past the rule's margin; within the margin the
// failure stands, and a harness error is never turned into anything else.

import { expect, test } from 'vitest';
import { HarnessError, verdictOfError } from './errors.ts';
import { hostBound, lateness } from './lateness.ts';

const block = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};
const failing = () => {
  throw new HarnessError('HIL_ERR_TARGET_REFUSED', 'renew refused: 409 expired');
};

test('a failure while the event loop stalled past the margin is HOST_TOO_SLOW with the figures and the failure as cause', async () => {
  lateness.start();
  await new Promise((r) => setTimeout(r, 30));
  const e = await hostBound({ rule: 'document 1 part 3: renew before the lease runs out', marginMs: 50 }, async () => {
    await new Promise((r) => setTimeout(r, 15));
    block(200);
    await new Promise((r) => setTimeout(r, 15));
    failing();
  }).catch((x: unknown) => x);
  expect((e as HarnessError).code).toBe('HIL_ERR_HOST_TOO_SLOW');
  expect(verdictOfError(e)).toBe('error');
  expect((e as HarnessError).message).toMatch(/document 1 part 3: renew before the lease runs out: the harness was late by \d+(\.\d)? ms .* against a margin of 50 ms/);
  expect(Number((e as HarnessError).detail.loop_late_ms)).toBeGreaterThan(150);
  expect(((e as HarnessError).cause as HarnessError).code).toBe('HIL_ERR_TARGET_REFUSED');
});

test('a failure while the harness kept within the margin stands as it was (a target that extends a deadline is still caught)', async () => {
  const e = await hostBound({ rule: 'r', marginMs: 1_000 }, async () => {
    await new Promise((r) => setTimeout(r, 20));
    block(100);
    failing();
  }).catch((x: unknown) => x);
  expect((e as HarnessError).code).toBe('HIL_ERR_TARGET_REFUSED');
});

test('lateness the exchange measured itself (a request sent after it was due) counts against the margin', async () => {
  const e = await hostBound({ rule: 'r', marginMs: 100, measured: () => ({ ms: 140, what: 'frame sent after it was due' }) }, async () => failing()).catch((x: unknown) => x);
  expect((e as HarnessError).code).toBe('HIL_ERR_HOST_TOO_SLOW');
  expect((e as HarnessError).message).toMatch(/frame sent after it was due 140 ms/);
  const within = await hostBound({ rule: 'r', marginMs: 100, measured: () => ({ ms: 100, what: 'x' }) }, async () => failing()).catch((x: unknown) => x);
  expect((within as HarnessError).code).toBe('HIL_ERR_TARGET_REFUSED');
});

test('a harness error inside is never reclassified, and a success passes its value through', async () => {
  const e = await hostBound({ rule: 'r', marginMs: 0 }, async () => {
    block(100);
    throw new TypeError('a bug of the suite');
  }).catch((x: unknown) => x);
  expect(e).toBeInstanceOf(TypeError);
  expect(await hostBound({ rule: 'r', marginMs: 0 }, async () => 7)).toBe(7);
});

test('since: a stall during a wait done before the check counts, so a late expiry seen after it is the host\'s', async () => {
  lateness.start();
  const since = performance.now();
  await new Promise((r) => setTimeout(r, 15));
  block(150);
  await new Promise((r) => setTimeout(r, 15));
  const e = await hostBound({ rule: 'r', marginMs: 60, since }, async () => failing()).catch((x: unknown) => x);
  expect((e as HarnessError).code).toBe('HIL_ERR_HOST_TOO_SLOW');
  const without = await hostBound({ rule: 'r', marginMs: 60 }, async () => failing()).catch((x: unknown) => x);
  expect((without as HarnessError).code).toBe('HIL_ERR_TARGET_REFUSED');
});

test('stalls: total sums every stall inside the exchange against the margin (three of 60 ms against 100 ms: the longest alone is within it)', async () => {
  const failing = async () => {
    // Three stalls of 60 ms: the longest is within a margin of 100 ms, their sum is not.
    for (let i = 0; i < 3; i++) {
      const until = performance.now() + 60;
      while (performance.now() < until);
      await new Promise((r) => setTimeout(r, 30));
    }
    expect(1).toBe(2);
  };
  const total = await hostBound({ rule: 'telemetry batches in a window', marginMs: 100, stalls: 'total' }, failing).catch((x: unknown) => x);
  expect((total as { code?: string }).code).toBe('HIL_ERR_HOST_TOO_SLOW');
  expect(String((total as Error).message)).toMatch(/^HIL_ERR_HOST_TOO_SLOW: telemetry batches in a window: the harness was late by \d+(\.\d)? ms \(event loop stalls totalling \d+(\.\d)? ms\) against a margin of 100 ms/);
});
