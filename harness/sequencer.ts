// The order in which vitest hands conformance files to its workers. The three conformance projects share
// one pool (vitest.config.ts); files go out in this order:
//
// 1. the quiet files, then jog: they run at a higher priority than the rest and must be the first ones
//    on a worker of their own, before the busy files fill the pool;
// 2. the other files, longest first. Vitest's own order puts the longest file first only once a run has
//    cached durations, so a fresh clone (CI, a newcomer) starts with an arbitrary order and can leave the
//    31 s remote timeouts file for last, alone on one worker. Longest first is the classic greedy schedule
//    for a fixed pool; the durations are figures from a run on the sim target (ms, 2-core machine),
//    rounded. A file missing here keeps vitest's order after the listed ones; a figure that has gone stale
//    costs only some overlap, never a result;
// 3. LAST_FILES (the 222 MB upload), when the quiet files are long done: in a whole run, beside the last
//    LAST_BESIDE short files rather than alone after them.

import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** The conformance-quiet project's files (vitest.config.ts). */
export const QUIET_FILES = ['suites/telemetry/stream.test.ts', 'suites/telemetry/busy.test.ts', 'suites/observation/keepalive.test.ts'];
/** The conformance-jog project's files. */
export const JOG_FILES = ['suites/jog/jog.test.ts', 'suites/jog/generations.test.ts'];
/** Files handed out last. */
export const LAST_FILES = ['suites/trajectory/upload.test.ts'];

export const DURATION_MS: Readonly<Record<string, number>> = {
  // Two whole runs on main 46cb04b (2026-11-27, 60-64 s each), the mean of the two, files of 2.5 s or more.
  'suites/remote/timeouts.test.ts': 32_600,
  'suites/olp/execution.test.ts': 26_800,
  'suites/remote/jog.test.ts': 22_600,
  'suites/planner/cancel.test.ts': 13_100,
  'suites/config/digests.test.ts': 10_900,
  'suites/trajectory/trajectory.test.ts': 10_700,
  'suites/remote/tooling.test.ts': 10_400,
  'suites/envelope/envelope.test.ts': 8_700,
  'suites/olp/weldplan.test.ts': 8_000,
  'suites/machine/machine.test.ts': 7_500,
  'suites/planner/dense-errors.test.ts': 7_400,
  'suites/telemetry/stream.test.ts': 7_300,
  'suites/observation/keepalive.test.ts': 6_700,
  'suites/jog/jog.test.ts': 6_600,
  'suites/remote/startup.test.ts': 6_400,
  'suites/machine/startup.test.ts': 6_300,
  'suites/olp/targets.test.ts': 5_800,
  'suites/events/events.test.ts': 5_700,
  'suites/planner/e2e.test.ts': 5_600,
  'suites/remote/handshake.test.ts': 5_500,
  'suites/program/admission.test.ts': 5_500,
  'suites/telemetry/telemetry.test.ts': 5_300,
  'suites/planner/api.test.ts': 5_200,
  'suites/olp/authoring.test.ts': 5_000,
  'suites/olp/workers.test.ts': 4_500,
  'suites/trajectory/handles.test.ts': 4_300,
  'suites/planner/program.test.ts': 4_200,
  'suites/grant/grant.test.ts': 3_800,
  'suites/telemetry/busy.test.ts': 3_800,
  'suites/machine/anchors.test.ts': 3_500,
  'suites/config/config.test.ts': 3_300,
  'suites/config/refusals.test.ts': 3_300,
  'suites/dense-format/rules.test.ts': 3_300,
  'suites/olp/service.test.ts': 3_000,
  'suites/machine/home-bound.test.ts': 2_900,
  'suites/capabilities/capabilities.test.ts': 2_900,
  'suites/observation/base-url.test.ts': 2_900,
  'suites/envelope/property.test.ts': 2_800,
  'suites/trajectory/start-gate.test.ts': 2_600,
  'suites/dense-format/planner-file.test.ts': 2_500,
};

/** Where a file goes: 0 quiet, 1 jog, 2 the rest, 3 last. */
function band(file: string): number {
  if (QUIET_FILES.includes(file)) return 0;
  if (JOG_FILES.includes(file)) return 1;
  if (LAST_FILES.includes(file)) return 3;
  return 2;
}

/**
 * In a whole run the last files start when this many files of the rest are still to be handed out: the
 * upload's 2 s then overlap the short files at the end, where it used to run alone after them, and the
 * quiet files are done long before. A selection with fewer than three times as many files of the rest
 * keeps them last.
 */
export const LAST_BESIDE = 10;

/** Vitest's order re-sorted: quiet, jog, the rest heaviest first, last (see LAST_BESIDE); ties keep vitest's order. */
export function longestFirst<T extends { moduleId: string; project: { config: { root: string } } }>(base: readonly T[]): T[] {
  const rank = new Map(base.map((f, i) => [f, i]));
  const rel = (f: T) => f.moduleId.slice(f.project.config.root.length + 1);
  const weight = (f: T) => DURATION_MS[rel(f)] ?? 0;
  const sorted = [...base].sort((a, b) => band(rel(a)) - band(rel(b)) || weight(b) - weight(a) || rank.get(a)! - rank.get(b)!);
  const last = sorted.filter((f) => band(rel(f)) === 3);
  const rest = sorted.filter((f) => band(rel(f)) === 2).length;
  if (last.length === 0 || rest < 3 * LAST_BESIDE) return sorted;
  const others = sorted.filter((f) => band(rel(f)) !== 3);
  const at = others.length - LAST_BESIDE;
  return [...others.slice(0, at), ...last, ...others.slice(at)];
}

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return longestFirst(await super.sort(files));
  }
}

/**
 * How many workers a conformance run gets on this host (README "Verdicts": the run fits its host). Three
 * per core on an idle host: the files mostly wait for documented timeouts, and 6 workers on the 2-core
 * machine the durations above were measured on overlap those waits. A host already busy (the 1-minute
 * load average when the run starts, other people's work included) gets fewer, in proportion to what is left
 * of its cores, down to a third of that: every worker more than the host can run makes the harness late for
 * its own renewals and frames. Never fewer than 2 (the quiet files need a worker beside the rest).
 * `hil run --workers N` (HIL_WORKERS) overrides it.
 */
export function workersForHost(cores: number, load1: number): number {
  const idle = 3 * Math.max(1, cores);
  const left = Math.max(1 / 3, 1 - Math.max(0, load1) / (2 * Math.max(1, cores)));
  return Math.max(2, Math.min(idle, Math.round(idle * left)));
}
