import { defineConfig } from 'vitest/config';
import { availableParallelism, loadavg } from 'node:os';
import LongestFirst, { workersForHost } from './harness/sequencer.ts';
import { isShared } from './harness/targets/shared.ts';
import { niceSpec } from './harness/priority.ts';
import { LONG_TAG } from './harness/long-tier.ts';
import { TIER_UP_ARGS } from './harness/targets/reference.ts';

// `unit` tests the harness's own code and the reference implementation from the inside; `conformance` runs
// the suites against whichever target HIL_TARGET names (sim by default). One project, so that a worker
// runs file after file in one process: vitest ends a worker whenever the next file belongs to another
// project, and with it the worker's module graph and its pool of stack hosts (harness/targets/program-host.ts).
//
// The files differ in scheduling priority: each worker takes the nice value of the file it is about to run
// (harness/nice.ts, HIL_NICE=file; the values and why each file has its own are in harness/priority.ts:
// the real-time-sensitive files at nice 0, jog at 5, the rest at 10), and the stacks and planners it starts
// from then inherit it; a stack host it keeps idle is moved to the worker's value before it serves again.
// harness/sequencer.ts hands the pool the quiet files first, then jog, then the rest longest first, and the
// 222 MB upload (it loads the machine) last, long after the quiet files are done; each worker takes the next
// file in that order, so its nice value only ever goes up, which needs no privilege.
//
// The conformance project starts stacks from a bundle built once per run (harness/targets/prebuild-setup.ts)
// and shares one module graph per worker (isolate: false; the harness keeps no test's state at module level:
// what it keeps there is the worker's, its pool of stack hosts, harness/targets/program-host.ts).
// A shared target (external, rig: one service for the whole run, one grant, one bus) runs its conformance
// files one at a time and the tests of a file one at a time: every test that takes the grant would
// otherwise meet another file's test holding it (control_already_owned), and observers would see other
// tests' events. Files that never reach the cell (the planner's) could run beside them, but one worker
// keeps the order of every request to the service plain to read in a transcript.
const SHARED_TARGET = isShared(process.env.HIL_TARGET ?? 'sim');
// The figure fits the host: from its cores and its load when the run starts (harness/sequencer.ts
// workersForHost: 4 on this 2-core machine when it is idle, fewer when it is busy). HIL_WORKERS (hil run
// --workers N) overrides it.
const WORKERS = SHARED_TARGET ? 1 : workersFromEnv(process.env.HIL_WORKERS, workersForHost(availableParallelism(), loadavg()[0]!));

function workersFromEnv(text: string | undefined, fallback: number): number {
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`HIL_WORKERS must be an integer 1..64, got ${JSON.stringify(text)}`);
  return n;
}

// A recorded or replayed run (hil run --record / --target replay) starts a stack per test
// (harness/targets/pertest.ts): tests of a file marked concurrent would stop each other's stacks, so
// there they run one at a time.
const PER_TEST_STACKS = Boolean(process.env.HIL_RECORD_DIR || process.env.HIL_RECORDINGS);

export default defineConfig({
  test: {
    // Vitest keeps each module's transform on disk (node_modules/.experimental-vitest-cache), keyed by the
    // module's content, vitest's version and this configuration: a run after the first skips transforming the
    // harness and the suites again (about 0.7 s of CPU for a one-file run here, more for the whole run).
    // HIL_VITEST_CACHE=off turns it off (a suspected stale transform: delete the directory).
    experimental: { fsModuleCache: process.env.HIL_VITEST_CACHE !== 'off' },
    sequence: { sequencer: LongestFirst },
    // The long tier (harness/long-tier.ts): a test waiting out a documented bound of more than a minute.
    // It skips unless the run asks for it (hil run --long, hil nightly).
    tags: [{ name: LONG_TAG, description: 'waits out a documented bound of more than a minute (hil run --long, hil nightly)', timeout: 150_000 }],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['harness/**/*.test.ts', 'sims/**/*.test.ts', 'drivers/**/*.test.ts'],
          exclude: ['harness/model/**/*.model.test.ts'],
          testTimeout: 30_000,
          // Only allure's error serializer gets a JSON form for bigints here (harness/allure-bigint.ts says why).
          setupFiles: ['harness/worker-lifeline.ts', 'harness/allure-bigint.ts'],
          // Two at a time: many of these files wait on processes they start (hil runs, stacks, planners), so
          // one worker left a core idle and made the project's time the sum of its files.
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          name: 'conformance',
          include: ['suites/**/*.test.ts'],
          ...(PER_TEST_STACKS || SHARED_TARGET ? { maxConcurrency: 1 } : {}),
          globalSetup: ['harness/targets/prebuild-setup.ts'],
          setupFiles: ['harness/worker-lifeline.ts', 'harness/nice.ts', 'harness/targets/warm-setup.ts', 'harness/bigint-json.ts', 'harness/evidence-setup.ts'],
          // Each file's own value, or on a replayed run and a shared target the worker's (harness/priority.ts
          // niceSpec says why).
          env: { HIL_NICE: niceSpec(process.env, SHARED_TARGET) },
          isolate: false,
          // V8's tier-up budget of a simulated run's stacks (harness/targets/reference.ts TIER_UP_ARGS says why).
          // HIL_WORKER_CPU_PROF=DIR: each worker writes a V8 CPU profile there when it exits (bench/worker-profile.ts reads them).
          execArgv: [...TIER_UP_ARGS, ...(process.env.HIL_WORKER_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.HIL_WORKER_CPU_PROF}`] : [])],
          maxWorkers: WORKERS,
          testTimeout: 60_000,
          hookTimeout: 120_000,
          sequence: { groupOrder: 1 },
        },
      },
      // `model`: the documented state machines as an executable model run against the target by fast-check
      // commands (harness/model/). Its own group, after the conformance project, so it never takes the
      // conformance run's workers or time (hil test runs it; hil run does not; hil fuzz runs it longer).
      {
        test: {
          name: 'model',
          include: ['harness/model/**/*.model.test.ts'],
          globalSetup: ['harness/targets/prebuild-setup.ts'],
          setupFiles: ['harness/worker-lifeline.ts', 'harness/nice.ts', 'harness/bigint-json.ts'],
          env: { HIL_NICE: '5' },
          maxWorkers: 2,
          testTimeout: 180_000,
          hookTimeout: 120_000,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
