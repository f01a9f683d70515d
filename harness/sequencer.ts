// The order in which vitest hands conformance files to its workers (one pool, vitest.config.ts); a free
// worker takes the next file in this order:
//
// 1. the quiet files, then jog: they run at a higher priority than the rest (harness/priority.ts) and must
//    be the first ones on a worker of their own, before the busy files fill the pool; a worker's nice value
//    then only goes up from file to file, which needs no privilege;
// 2. the other files, longest first. Vitest's own order puts the longest file first only once a run has
//    cached durations, so a fresh clone (CI, a newcomer) starts with an arbitrary order and can leave the
//    31 s remote timeouts file for last, alone on one worker. Longest first is the classic greedy schedule
//    for a fixed pool; the durations are figures from a run on the sim target (ms, 2-core machine),
//    rounded. A file missing here keeps vitest's order after the listed ones; a figure that has gone stale
//    costs only some overlap, never a result;
// 3. LAST_FILES (the 222 MB upload), when the quiet files are long done: in a whole run, beside the last
//    LAST_BESIDE short files rather than alone after them.

import { readdirSync, readFileSync } from 'node:fs';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { JOG_FILES, QUIET_FILES } from './priority.ts';
import { longTierOn } from './long-tier.ts';

export { JOG_FILES, QUIET_FILES };
/** Files handed out last. */
export const LAST_FILES = ['suites/trajectory/upload.test.ts'];

export const DURATION_MS: Readonly<Record<string, number>> = {
  // The median of eleven whole runs on main 07f2e04 (2026-11-30, 55-69 s each: this machine was slower than
  // on a quiet day, but about evenly for every file; some of the runs under perf or a V8 profiler, or with
  // V8 flags being measured), files of 2.5 s or more, rounded to 0.1 s. Progress
  // (harness/report/progress.ts) scales them by the run's own pace; the order only needs them relative.
  'suites/remote/timeouts.test.ts': 33_100,
  'suites/olp/execution.test.ts': 32_500,
  'suites/remote/jog.test.ts': 19_600,
  'suites/trajectory/trajectory.test.ts': 4_600,
  'suites/machine/machine.test.ts': 5_700,
  'suites/olp/weldplan.test.ts': 10_500,
  'suites/config/digests.test.ts': 7_800,
  'suites/telemetry/stream.test.ts': 7_700,
  'suites/observation/keepalive.test.ts': 7_000,
  'suites/planner/cancel.test.ts': 6_600,
  'suites/config/refusals.test.ts': 6_500,
  'suites/planner/program.test.ts': 5_900,
  'suites/telemetry/telemetry.test.ts': 5_800,
  'suites/trajectory/handles.test.ts': 5_800,
  'suites/remote/handshake.test.ts': 5_600,
  'suites/olp/targets.test.ts': 5_500,
  'suites/jog/jog.test.ts': 5_500,
  'suites/olp/browser-guard.test.ts': 5_500,
  'suites/envelope/envelope.test.ts': 5_400,
  'suites/olp/authoring.test.ts': 4_800,
  'suites/olp/service.test.ts': 4_800,
  'suites/remote/startup.test.ts': 4_700,
  'suites/events/events.test.ts': 4_600,
  'suites/machine/anchors.test.ts': 4_500,
  'suites/telemetry/busy.test.ts': 4_500,
  'suites/olp/workers.test.ts': 4_300,
  'suites/trajectory/upload.test.ts': 4_000,
  'suites/planner/api.test.ts': 4_000,
  'suites/planner/dense-errors.test.ts': 3_900,
  'suites/trajectory/start-gate.test.ts': 3_700,
  'suites/planner/hostile.test.ts': 3_500,
  'suites/observation/units.test.ts': 3_400,
  // Split out of units.test.ts on 2026-12-01 (alone 3.4-4.2 s, as units.test.ts was).
  'suites/observation/units-move.test.ts': 3_400,
  'suites/trajectory/admission.test.ts': 3_400,
  'suites/program/execution.test.ts': 3_300,
  'suites/config/config.test.ts': 3_200,
  'suites/grant/grant.test.ts': 3_100,
  'suites/olp/heartbeat-lost.test.ts': 2_800,
  'suites/machine/home-bound.test.ts': 2_800,
  'suites/envelope/uint64.test.ts': 2_700,
  'suites/program/renew-during-upload.test.ts': 2_600,
};

/**
 * The files whose long-tier tests (harness/fixture.ts longTier) make them last this long with --long:
 * each waits out a 90 s idle close beside its other tests (90.7 and 90.4 s, 2026-11-30).
 */
export const LONG_TIER_MS: Readonly<Record<string, number>> = {
  'suites/remote/timeouts.test.ts': 91_000,
  'suites/observation/keepalive.test.ts': 91_000,
};

/** The durations a run orders its files and estimates its time left by: with the long tier (HIL_LONG=1) its files' own. */
export function durations(env: NodeJS.ProcessEnv = process.env): Readonly<Record<string, number>> {
  return longTierOn(env) ? { ...DURATION_MS, ...LONG_TIER_MS } : DURATION_MS;
}

/** Where a file goes: 0 quiet, 1 jog, 2 the rest, 3 last. */
function band(file: string): number {
  if (QUIET_FILES.includes(file)) return 0;
  if (JOG_FILES.includes(file)) return 1;
  if (LAST_FILES.includes(file)) return 3;
  return 2;
}

/**
 * In a whole run the last files start when this many files of the rest are still to be handed out: the
 * upload's 3.5-4 s then overlap the short files at the end, where it used to run alone after them, and the
 * quiet files are done long before. Ten had left it running alone for the last 1.5 s of a whole run (the
 * ten files beside it take 0.2-0.7 s each); twenty leave it about 0.5 s. A selection with fewer than three
 * times as many files of the rest keeps them last.
 */
export const LAST_BESIDE = 20;

/** Vitest's order re-sorted: quiet, jog, the rest heaviest first, last (see LAST_BESIDE); ties keep vitest's order. */
export function longestFirst<T extends { moduleId: string; project: { config: { root: string } } }>(base: readonly T[]): T[] {
  const rank = new Map(base.map((f, i) => [f, i]));
  const rel = (f: T) => f.moduleId.slice(f.project.config.root.length + 1);
  const table = durations();
  const weight = (f: T) => table[rel(f)] ?? 0;
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
 * How many workers a conformance run gets on this host (README "Verdicts": the run fits its host). Two
 * per core on an idle host. Three per core overlapped the files' waits for documented timeouts when most
 * files waited; since most of the suites step their cores, a whole run is bound by its CPU, and workers past
 * two per core only add CPU: on the 2-core machine, whole runs in one hour (2026-12-01, a slow spell) took
 * 110-113 s wall and 215-221 core-seconds with 6 workers, 99.5 s and 179 with 4, 96-103 s and 150-164 with
 * 3 (a core idle in the waits at the start), 124 s with 2. A host already busy (the 1-minute
 * load average when the run starts, other people's work included) gets fewer, in proportion to what is left
 * of its cores, down to a third of that: every worker more than the host can run makes the harness late for
 * its own renewals and frames. Never fewer than 2 (the quiet files need a worker beside the rest).
 * `hil run --workers N` (HIL_WORKERS) overrides it.
 */
export function workersForHost(cores: number, load1: number): number {
  const idle = 2 * Math.max(1, cores);
  const left = Math.max(1 / 3, 1 - Math.max(0, load1) / (2 * Math.max(1, cores)));
  return Math.max(2, Math.min(idle, Math.round(idle * left)));
}

/** Busy and total jiffies of the aggregate `cpu` line of /proc/stat (idle and iowait count as not busy). */
export function cpuJiffies(procStat: string): { busy: number; total: number } | undefined {
  const f = cpuFields(procStat);
  if (!f || f.length < 5) return undefined;
  // user nice system idle iowait irq softirq steal (guest time is already inside user and nice).
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - f[3]! - f[4]!, total };
}

/**
 * The aggregate `cpu` line's steal counter of /proc/stat, in seconds: time the hypervisor ran something else
 * while this virtual machine's cores had work (USER_HZ = 100 jiffies a second, as on every Linux x86 and
 * arm64 build), or undefined when the line or the field is missing.
 */
export function stealSeconds(procStat: string): number | undefined {
  const f = cpuFields(procStat);
  return f && f.length >= 8 ? f[7]! / 100 : undefined;
}

/** The numbers of /proc/stat's aggregate `cpu` line, or undefined when it is missing or not all numbers. */
function cpuFields(procStat: string): number[] | undefined {
  const line = procStat.split('\n').find((l) => l.startsWith('cpu '));
  const f = line?.trim().split(/\s+/).slice(1).map(Number);
  return f && f.every((x) => Number.isFinite(x)) ? f : undefined;
}

/** How many cores were busy between two /proc/stat readings, or undefined when they cannot say. */
export function busyCores(before: string, after: string, cores: number): number | undefined {
  const a = cpuJiffies(before);
  const b = cpuJiffies(after);
  if (!a || !b || b.total <= a.total) return undefined;
  return ((b.busy - a.busy) / (b.total - a.total)) * Math.max(1, cores);
}

/**
 * The CPU of process `pid`'s children, s: the ones it has waited for (its own cutime and cstime) and the ones
 * still running (each one's utime, stime, cutime and cstime), from Linux's /proc (`proc`); 0 where it cannot
 * be read. Clock ticks of USER_HZ = 100 a second, as on every Linux x86 and arm64 build.
 */
export function childrenCpuSeconds(pid: number = process.pid, proc = '/proc'): number {
  // The fields after the command's closing parenthesis: [1] ppid, [11] utime, [12] stime, [13] cutime, [14] cstime.
  const fields = (stat: string) => stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const sum = (f: string[], from: number, to: number) => f.slice(from, to + 1).reduce((a, x) => a + (Number(x) || 0), 0);
  let ticks: number;
  try {
    ticks = sum(fields(readFileSync(`${proc}/${pid}/stat`, 'utf8')), 13, 14);
  } catch {
    return 0;
  }
  for (const entry of readdirSync(proc)) {
    if (!/^\d+$/.test(entry)) continue;
    let f: string[];
    try {
      f = fields(readFileSync(`${proc}/${entry}/stat`, 'utf8'));
    } catch {
      continue; // gone meanwhile
    }
    if (Number(f[1]) === pid) ticks += sum(f, 11, 14);
  }
  return ticks / 100;
}

/** The CPU counters `harness/bin/hil.mjs` read as the command started, before it loaded anything. */
export interface StartSample {
  /** /proc/stat then. */
  stat: string;
  /** performance.now() then. */
  at: number;
  /** process.cpuUsage() then. */
  own: { user: number; system: number };
  /** childrenCpuSeconds() then; absent: none yet (hil.mjs samples before the command starts any). */
  children?: number;
}

/** Where hil.mjs leaves its StartSample for the command it starts (a global: the command is a bundle of its own). */
export const START_SAMPLE = Symbol.for('cell-hil.start-sample');

/**
 * The host's load as the run starts: the cores busy (Linux /proc/stat) over at least `ms`, else the 1-minute
 * load average. The load average still carries work that has just ended (CI's typecheck right before
 * `hil test`, the previous matrix row) for a minute after it ended, and would take workers from a host that
 * is idle now; what is busy now is what the run's workers will share the cores with.
 *
 * The window starts when the command started (`start`, read by harness/bin/hil.mjs before the command's
 * code loaded), so the run waits only for what is left of `ms` after its own start-up; the command's own
 * CPU over the window (process.cpuUsage: loading its code is a core's work) is taken out. Without a start
 * sample it waits the whole `ms`.
 */
export function hostLoadNow(cores: number, load1: number, ms = 400, start: StartSample | undefined = (globalThis as { [START_SAMPLE]?: StartSample })[START_SAMPLE], children: () => number = childrenCpuSeconds): number {
  try {
    // A start sample taken by harness/bin/hil.mjs comes before the command has any child process.
    const { stat: before, own, at, children: kidsBefore } = start ?? { stat: readFileSync('/proc/stat', 'utf8'), own: process.cpuUsage(), at: performance.now(), children: children() };
    const left = ms - (performance.now() - at);
    if (left > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, left);
    const after = readFileSync('/proc/stat', 'utf8');
    const used = process.cpuUsage(own);
    // The command's own children are its own work too: the esbuild service that bundles `hil` after a source
    // changed (harness/bin/cli-cache.mjs) took most of a core over this window, and counted as the host's it
    // gave the run 5 workers instead of 6 (bench/README.md).
    const kids = Math.max(0, children() - (kidsBefore ?? 0));
    return othersBusy(before, after, cores, (used.user + used.system) / 1e6 + kids, (performance.now() - at) / 1000) ?? load1;
  } catch {
    return load1;
  }
}

/**
 * The cores others kept busy between two /proc/stat readings `seconds` apart, while this process used
 * `ownSeconds` of CPU in them; undefined when the readings cannot say.
 */
export function othersBusy(before: string, after: string, cores: number, ownSeconds: number, seconds: number): number | undefined {
  const busy = busyCores(before, after, cores);
  if (busy === undefined || !(seconds > 0)) return undefined;
  return Math.max(0, busy - ownSeconds / seconds);
}
