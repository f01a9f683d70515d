// hostBound (harness/lateness.ts): a failure inside a timing-sensitive exchange is HIL_ERR_HOST_TOO_SLOW
// (ERROR) only when the harness itself was late inside it past the rule's margin; within the margin the
// failure stands, and a harness error is never turned into anything else.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { HarnessError, verdictOfError } from './errors.ts';
import { hostBound, lateness, timeoutByHost } from './lateness.ts';

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

test('window total_ms: a stall counts only for the part of it inside the window, and every stall in it adds up', async () => {
  lateness.start();
  await lateness.settle();
  const b = performance.now();
  block(100);
  await lateness.settle();
  // The sample that fired after the block was late from at most one period into it to its end: the 30 ms in the middle all count, nothing outside them.
  expect(lateness.window(b + 40, b + 70).total_ms).toBeCloseTo(30, 0);
  const c = performance.now();
  block(60);
  await lateness.settle();
  block(60);
  await lateness.settle();
  const both = lateness.window(c, performance.now()).total_ms;
  expect(both).toBeGreaterThanOrEqual(2 * (60 - 10));
  expect(both).toBeGreaterThan(lateness.window(c, performance.now()).max_ms);
});

test('timeoutByHost: a test out of its time is the host\'s when the loop lost a tenth of that time or more; less, or another error, it is not', async () => {
  lateness.start();
  await lateness.settle();
  const from = performance.now();
  block(150);
  await lateness.settle();
  const to = performance.now();
  const timedOut = (ms: number) => [{ message: `Error: Test timed out in ${ms}ms.\nIf this is a long-running test, pass a timeout value as the last argument or configure it globally with "testTimeout".` }];
  // 150 ms lost of a 1000 ms time: past a tenth.
  const slow = await timeoutByHost(timedOut(1000), from, to);
  expect(slow).toMatch(/^the test ran out of its 1000 ms while the host kept the harness's event loop from running for \d+(\.\d)? ms of it \(its longest stall \d+(\.\d)? ms\): a tenth of the test's time or more/);
  // The same stall against a 10 s time is within a tenth of it; so is any 50 ms window against 5 s.
  expect(await timeoutByHost(timedOut(10_000), from, to)).toBeUndefined();
  const quiet = performance.now();
  await new Promise((r) => setTimeout(r, 50));
  expect(await timeoutByHost(timedOut(5_000), quiet, performance.now())).toBeUndefined();
  // Not a timeout: nothing to say, however late the loop was.
  expect(await timeoutByHost([{ message: 'AssertionError: expected 409 to be 200' }], from, to)).toBeUndefined();
  expect(await timeoutByHost(undefined, from, to)).toBeUndefined();
  // The message as a string too (a run record's errors).
  expect(await timeoutByHost(['Error: Test timed out in 1000ms.'], from, to)).toBe(slow);
});

// targetOnHost: the run-queue wait of a process this harness watches (a stack it started on this host). Two
// busy processes pinned to one core, the watched one at nice 19: the kernel keeps it waiting nearly all the
// time, while the harness's own loop keeps time. A sleeping watched process waits for nothing.
const linuxWithTaskset = process.platform === 'linux' && existsSync('/usr/bin/taskset');
// Each says when it has started (a process at nice 19 on a busy core may take a while to), then spins or sleeps.
// For 20 s, though the tests kill them sooner: on a loaded host the hog's own start took long enough that a
// target spinning 5 s had ended before the exchange, and its wait was nobody's figure.
const spin = 'process.stdout.write("up\\n"); const t = Date.now() + 20000; while (Date.now() < t) {}';
const sleep = 'process.stdout.write("up\\n", () => setTimeout(() => {}, 20000))';

function pinned(code: string, nice: number): ChildProcess {
  return spawn('taskset', ['-c', '0', 'nice', '-n', String(nice), process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'ignore'] });
}

async function waitedFor(child: ChildProcess): Promise<number> {
  // taskset and nice exec node in place, so the pid is node's; it has started once it said so.
  await new Promise<void>((r, j) => {
    child.stdout!.once('data', () => r());
    child.once('exit', (code) => j(new Error(`exited ${code} before it started`)));
  });
  await new Promise((r) => setTimeout(r, 50)); // the sleeper's write callback, then its timer
  return child.pid!;
}

/**
 * Until `pid`'s main thread sleeps and its run-queue wait stays put between two looks 20 ms apart: a process
 * at nice 19 on a busy core goes on finishing its start (its write's callback, its timer) long after it said
 * it had started, waiting on the run queue all the while, which is not the sleeper's wait the test means.
 */
async function asleep(pid: number): Promise<void> {
  let last = -1;
  for (let i = 0; i < 1_000; i++) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
    const waited = runQueueWaitMs(pid);
    if (state === 'S' && waited === last) return;
    last = waited;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`process ${pid} did not settle asleep in 20 s`);
}

/** The run-queue wait the kernel has counted for `pid` so far, ms (/proc/<pid>/task/<pid>/schedstat, second field). */
function runQueueWaitMs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
}

test.runIf(linuxWithTaskset)('targetOnHost: a failure while the target\'s process waited on the run queue past the margin is HOST_TOO_SLOW with its wait; without targetOnHost it stands', async ({ skip }) => {
  lateness.start();
  // The watched one first: at nice 19 beside a spinning hog it would hardly get to start.
  const target = pinned(spin, 19);
  let hog: ChildProcess | undefined;
  try {
    const pid = await waitedFor(target);
    hog = pinned(spin, 0);
    await waitedFor(hog);
    const unwatch = lateness.watch(() => pid);
    try {
      const exchange = async () => {
        await new Promise((r) => setTimeout(r, 400));
        failing();
      };
      // The set-up is the host's to give: in one loaded CI rehearsal the exchange was judged without the
      // target's wait (cause not found; the test did not then read the wait itself). Its wait in the window,
      // read here from the kernel directly, must be past the margin for the window to test anything. Then the exchange is tried again (up to 5 times); a
      // window where the kernel did count the wait must be HOST_TOO_SLOW with it.
      let e: unknown;
      const seen: number[] = [];
      for (let attempt = 0; attempt < 5; attempt++) {
        const w0 = runQueueWaitMs(pid);
        e = await hostBound({ rule: 'document 1 part 3: a renewal admitted within the lease', marginMs: 150, targetOnHost: true }, exchange).catch((x: unknown) => x);
        seen.push(Math.round(runQueueWaitMs(pid) - w0));
        if (seen.at(-1)! > 250) break;
      }
      if (seen.at(-1)! <= 250) skip(true, `the host never kept the watched process waiting through an exchange (run-queue waits ${seen.join(', ')} ms over 400 ms windows)`);
      expect((e as HarnessError).code).toBe('HIL_ERR_HOST_TOO_SLOW');
      expect(Number((e as HarnessError).detail.target_wait_ms)).toBeGreaterThan(150);
      expect((e as HarnessError).detail.target_pid).toBe(pid);
      expect((e as HarnessError).message).toMatch(/the target's process on this host waited at least \d+(\.\d)? ms on the run queue/);
      // The same wait is not the host's excuse for a rule the target breaks by acting early or late on purpose
      // (on a loaded host the harness's own loop may still make it ERROR, never with the target's wait).
      const strict = await hostBound({ rule: 'r', marginMs: 150 }, exchange).catch((x: unknown) => x);
      expect((strict as HarnessError).detail?.target_wait_ms).toBeUndefined();
      if ((strict as HarnessError).code !== 'HIL_ERR_TARGET_REFUSED') expect(Number((strict as HarnessError).detail.loop_late_ms)).toBeGreaterThan(150);
    } finally {
      unwatch();
    }
    // Unwatched: its wait is nobody's figure any more.
    const after = await hostBound({ rule: 'r', marginMs: 150, targetOnHost: true }, async () => {
      await new Promise((r) => setTimeout(r, 400));
      failing();
    }).catch((x: unknown) => x);
    expect((after as HarnessError).detail?.target_wait_ms).toBeUndefined();
    if ((after as HarnessError).code !== 'HIL_ERR_TARGET_REFUSED') expect(Number((after as HarnessError).detail.loop_late_ms)).toBeGreaterThan(150);
  } finally {
    hog?.kill('SIGKILL');
    target.kill('SIGKILL');
  }
});

test.runIf(linuxWithTaskset)('targetOnHost: a watched process that sleeps waits for nothing, so the failure stands', async () => {
  lateness.start();
  const target = pinned(sleep, 19);
  try {
    const pid = await waitedFor(target);
    await asleep(pid);
    const unwatch = lateness.watch(() => pid);
    try {
      const e = await hostBound({ rule: 'r', marginMs: 150, targetOnHost: true }, async () => {
        await new Promise((r) => setTimeout(r, 400));
        failing();
      }).catch((x: unknown) => x);
      // Stands, unless this host stalled the harness's own loop past the margin meanwhile.
      if ((e as HarnessError).code !== 'HIL_ERR_TARGET_REFUSED') expect(Number((e as HarnessError).detail.loop_late_ms)).toBeGreaterThan(150);
      expect(Number((e as HarnessError).detail?.target_wait_ms ?? 0)).toBeLessThan(50);
      expect(lateness.targetWait(0, performance.now())!.pid).toBe(pid);
      expect(lateness.targetWait(0, performance.now())!.ms).toBeLessThan(50);
    } finally {
      unwatch();
    }
  } finally {
    target.kill('SIGKILL');
  }
});

test('coreLate: the target\'s own record of a late core counts only while a target process on this host is watched; at the margin or without one the failure stands (stalls: none, the harness\'s loop plays no part)', async () => {
  const late = () => ({ ms: 31.1, what: 'the latest-running cycle of the execution' });
  const rule = 'document 3 part 2 limits.following_error';
  // No target of this host watched (an external target): its core's lateness is its own.
  expect(lateness.targetOnHost()).toBe(false);
  const own = await hostBound({ rule, marginMs: 0.5, stalls: 'none', coreLate: late }, async () => failing()).catch((x: unknown) => x);
  expect((own as HarnessError).code).toBe('HIL_ERR_TARGET_REFUSED');
  // An open target with no process here (an external service whose process was not named) is watched in
  // vain: still not on this host, its core's lateness still its own.
  const unknown = lateness.watch(() => undefined);
  try {
    expect(lateness.targetOnHost()).toBe(false);
    expect(((await hostBound({ rule, marginMs: 0.5, stalls: 'none', coreLate: late }, async () => failing()).catch((x: unknown) => x)) as HarnessError).code).toBe('HIL_ERR_TARGET_REFUSED');
  } finally {
    unknown();
  }
  const unwatch = lateness.watch(() => process.pid);
  try {
    expect(lateness.targetOnHost()).toBe(process.platform === 'linux');
    const e = await hostBound({ rule, marginMs: 0.5, stalls: 'none', coreLate: late }, async () => failing()).catch((x: unknown) => x);
    if (process.platform !== 'linux') return;
    expect((e as HarnessError).code).toBe('HIL_ERR_HOST_TOO_SLOW');
    expect((e as HarnessError).message).toContain("the target's real-time core on this host ran the latest-running cycle of the execution 31.1 ms late against a margin of 0.5 ms");
    expect((e as HarnessError).detail.core_late_ms).toBe(31.1);
    expect((e as HarnessError).detail.loop_late_ms).toBe(0);
    const within = await hostBound({ rule, marginMs: 0.5, stalls: 'none', coreLate: () => ({ ms: 0.5, what: 'x' }) }, async () => {
      block(20); // a stall of the harness's own loop: no part of records already written
      failing();
    }).catch((x: unknown) => x);
    expect((within as HarnessError).code).toBe('HIL_ERR_TARGET_REFUSED');
  } finally {
    unwatch();
  }
});
