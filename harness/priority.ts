// The scheduling priority (nice value) each conformance file runs at, and how a process gets there.
//
// One conformance project runs every suite file (vitest.config.ts), in one pool of workers that each run
// many files (isolate: false). A worker takes the nice value of the file it is about to run as the file
// starts (harness/nice.ts), and the stacks, planners and helpers it starts from then on inherit it:
//
// - the quiet files (nice 0): their checks are about real-time behaviour of the stack (the telemetry
//   stream's ~20 ms flushes and blocked-write bound, idle and keepalive timers, a torn ring header held for
//   1.5 s, the remote listener's HTTP timeouts: at nice 10 on a host loaded by CI's side-by-side rows its
//   listener once closed a connection whose request had been waiting whole, its 2 s header timer run first). They mostly wait; when they wake, the kernel runs them ahead of everything niced, so the busy
//   files beside them do not make their timers late.
// - jog (nice 5): jog steps its core as fast as it can, and its input age and the session's input deadline
//   are host monotonic time even on the stepped clock: a neighbour that slows the stepping between two
//   frames expires the jog. Ahead of the busy files, behind the quiet ones (at equal priority it once
//   starved the stream file: one stream batch in 400 ms). The remote jog lanes too: the harness feeds each
//   lane within the input age (250 ms on a LAN cell, document 1 part 8 "Remote jog idle") from its own
//   event loop, which at nice 10 beside an external service's real-time core at nice 0 went 300-475 ms
//   without running on a loaded host.
// - the rest (nice 10). Much of it waits for documented timeouts (the planner's kill grace, the OLP
//   server's heartbeat), which more workers than cores overlap with real work.
//
// harness/sequencer.ts hands the pool the quiet files first, then jog, then the rest, and each worker takes
// the next file in that order when it is free: a worker's nice value only ever goes up, which needs no
// privilege. Going down (a selection run in another order) needs it (root, CAP_SYS_NICE or RLIMIT_NICE):
// where it is refused the worker stays where it is and says so (takeNice), and the file's timing checks run
// at the worker's value; the harness's lateness figures (harness/lateness.ts) still judge them.
//
// On Linux a nice value is a thread's own (setpriority with PRIO_PROCESS and a thread id sets that thread
// only; pid 0 is the calling thread). A new thread or process starts at its creator's value.

import { readdirSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { niceErrorCode } from './thread-nice.mjs';

/** The quiet files (nice QUIET_NICE). */
export const QUIET_FILES = ['suites/telemetry/stream.test.ts', 'suites/telemetry/busy.test.ts', 'suites/observation/keepalive.test.ts', 'suites/remote/timeouts.test.ts'];
/** The jog files (nice JOG_NICE). */
export const JOG_FILES = ['suites/jog/jog.test.ts', 'suites/jog/generations.test.ts', 'suites/remote/jog.test.ts'];

export const QUIET_NICE = 0;
export const JOG_NICE = 5;
export const BUSY_NICE = 10;

/**
 * What the conformance workers' HIL_NICE is (harness/nice.ts): each file its own value (`file`), except on a
 * replayed run (HIL_RECORDINGS) and on a shared target (`sharedTarget`: external, rig), where every file runs
 * at the worker's value. The values above keep live cores and live clocks in time beside busy files run
 * side by side. A replayed test's outcomes come from its recording (the core follows the recorded frames and
 * is held at each recorded read, docs/recording.md), so there they would only put the whole replay behind
 * everything else on the host: with one busy loop beside it, a replay at nice 10 ran at 0.9-1.6x the
 * recorded speed, at the worker's value 2.0-2.4x. A shared target runs one file at a time, with no busy
 * file beside it to make room for: at nice 10 its one worker (the jog frames, the requests it times, and then
 * the bench box's heartbeat, since moved to a thread of its own) only lost the host to everything else on it:
 * beside three busy loops its event loop ran 1.2-1.5 s late at the 99th percentile, and the box's 500 ms
 * heartbeat watchdog opened the E-stop chain.
 */
export function niceSpec(env: NodeJS.ProcessEnv = process.env, sharedTarget = false): string {
  return env.HIL_RECORDINGS || sharedTarget ? '0' : 'file';
}

/** The nice value a conformance file (its path from the checkout's root, `/`-separated) runs at. */
export function fileNice(file: string): number {
  if (QUIET_FILES.includes(file)) return QUIET_NICE;
  if (JOG_FILES.includes(file)) return JOG_NICE;
  return BUSY_NICE;
}

/** What takeNice did: the value the thread had, the one it has, and why the wanted one was refused. */
export interface NiceTaken {
  from: number;
  nice: number;
  error?: string;
}

/** The calling thread's nice value, or 0 where it cannot be read. */
export function niceNow(): number {
  try {
    return getPriority();
  } catch {
    return 0;
  }
}

/** The calling thread's nice value when takeNice first ran in this process: the run's own (`nice hil run`). */
let startNice: number | undefined;

/**
 * Take the calling thread to `wanted`, or to the value it started at when that is higher (a run started
 * niced stays at least that niced); the stacks it starts afterwards inherit it. Lowering the priority (a
 * higher value) is always permitted; raising it back may be refused (EACCES without privilege): the
 * thread then stays where it was and `error` says why.
 */
export function takeNice(wanted: number): NiceTaken {
  const from = niceNow();
  startNice ??= from;
  const to = Math.max(startNice, wanted);
  if (from === to) return { from, nice: from };
  try {
    setPriority(to);
    return { from, nice: niceNow() };
  } catch (e) {
    return { from, nice: niceNow(), error: niceErrorCode(e) };
  }
}

// A thread that keeps time for the test's thread raises itself (harness/thread-nice.mjs, plain JavaScript: the
// grant keeper's thread runs it without the test runner's TypeScript loader).
export { raiseThreadNice, type ThreadNiceTaken } from './thread-nice.mjs';

/**
 * Move a process that was started at nice `from` to nice `to`, as if it had been started at `to`: on Linux
 * every thread of it still at `from` (the ones it inherited that value in); a thread that set its own
 * priority (a core thread's raised one, a decoder's lowered one: sims/thread-priority.ts) keeps it.
 * Elsewhere the process as a whole. Throws when any change is refused (raising a priority without privilege):
 * the process may then be partly moved, and the caller must not use it as a process at `to`.
 */
export function reniceProcess(pid: number, from: number, to: number): void {
  if (from === to) return;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    if (process.platform === 'linux') throw new Error(`process ${pid} is gone`);
    setPriority(pid, to);
    return;
  }
  for (const tid of tids) {
    let nice: number;
    try {
      nice = getPriority(Number(tid));
    } catch {
      continue; // the thread ended meanwhile
    }
    if (nice === from) setPriority(Number(tid), to);
  }
}
