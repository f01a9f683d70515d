// A thread's scheduling, read from /proc and changed with chrt: the fake master's cycle thread
// (drivers/ethercat/fake-worker.ts) and the core's thread (sims/core/host.ts raiseThreadPriority,
// lowerThreadPriority). Here, below both, because drivers/ must not import sims/ (harness/import-rule.test.ts).
//
// A new thread takes its creator's policy (sched(7): inherited across fork(2); pthread_attr_setinheritsched(3):
// PTHREAD_INHERIT_SCHED is the default), and a Node worker's thread does: made by the real-time core's
// thread, the cycle thread was born at SCHED_FIFO 40 and ran its start-up there (Node's worker bootstrap, the
// bundle's loading, the bus's set-up: in a whole run under perf sched, a median 39 ms on a CPU per start, up
// to 75 ms, in stretches up to 31 ms), above every harness and service thread; from source, the TypeScript
// loader's hooks thread it starts inherited it in turn, for its whole life.

import { execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/** Policy numbers as /proc shows them (linux/sched.h). */
const POLICY = ['SCHED_OTHER', 'SCHED_FIFO', 'SCHED_RR', 'SCHED_BATCH', 'SCHED_ISO', 'SCHED_IDLE', 'SCHED_DEADLINE'];

/**
 * A thread's scheduling from its stat file (proc(5): field 19 nice, 40 rt_priority, 41 policy):
 * 'SCHED_FIFO 49' under a real-time policy, 'SCHED_OTHER nice 0' under a normal one; undefined when it
 * cannot be read (not Linux, or the thread has ended).
 */
export function schedulingOf(statPath = '/proc/thread-self/stat'): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(statPath, 'utf8');
  } catch {
    return undefined;
  }
  // The fields after the command name, which may hold spaces: the first of them is field 3.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const policy = POLICY[Number(f[38])] ?? `policy ${f[38]}`;
  return policy === 'SCHED_FIFO' || policy === 'SCHED_RR' ? `${policy} ${f[37]}` : `${policy} nice ${f[16]}`;
}

/** The calling thread's id as the kernel knows it (chrt's argument). */
export function ownThreadId(): string {
  return readlinkSync('/proc/thread-self').split('/').pop() ?? '';
}

function chrt(args: string[], tid = ownThreadId()): void {
  execFileSync('chrt', [...args, tid], { stdio: 'ignore', timeout: 2000 });
}

/**
 * `make()` with the threads and processes it creates born at normal scheduling, the calling thread keeping
 * its own: a real-time caller sets SCHED_RESET_ON_FORK on itself around it (sched(7)), same policy and
 * priority, and clears it after (/proc does not show the flag, and asking chrt would be one more fork at
 * real-time priority: a caller that had it set loses it; the core's thread has none, sims/core/host.ts).
 * Each chrt is a fork of the process in the calling thread (a core thread's ran a median 0.7 ms, p90 5.5 ms,
 * on a CPU up to its fork, in a run); the thread born at SCHED_FIFO 40 had spent a median 39 ms there. A
 * caller at normal scheduling, or off Linux, just calls `make`.
 */
export function bornAtNormalScheduling<T>(make: () => T): T {
  const m = /^SCHED_(FIFO|RR) (\d+)$/.exec(schedulingOf() ?? '');
  if (!m) return make();
  const policy = m[1] === 'FIFO' ? '-f' : '-r';
  let reset = false;
  try {
    chrt([policy, '-R', '-p', m[2]!]);
    reset = true;
  } catch {
    /* refused: the child inherits the policy, and gives it back itself (fake-worker.ts) */
  }
  try {
    return make();
  } finally {
    try {
      if (reset) chrt([policy, '-p', m[2]!]);
    } catch (e) {
      process.stderr.write(`warning: a thread keeps SCHED_RESET_ON_FORK after starting the fake master's cycle thread: ${(e as Error).message}\n`);
    }
  }
}

/**
 * SCHED_FIFO at `priority` for the calling thread where permitted (root or CAP_SYS_NICE), with
 * SCHED_RESET_ON_FORK so that what it starts (its own chrt, should it have to give the priority back) runs at normal
 * scheduling. Returns the thread's scheduling afterwards; unchanged when refused or not on Linux.
 */
export function raiseToFifo(priority: number): string {
  if (process.platform !== 'linux') return 'none (not Linux)';
  try {
    chrt(['-f', '-R', '-p', String(priority)]);
  } catch {
    /* not permitted: normal priority */
  }
  return schedulingOf() ?? 'unknown';
}

/**
 * Thread `tid` of this process back to normal scheduling (SCHED_OTHER; chrt keeps its nice value). Best
 * asked by another thread: starting chrt forks the whole process, and in a whole run under perf sched the
 * cycle thread that lowered itself so ran up to 11 ms at a stretch at its SCHED_FIFO 49, most of it in the
 * fork (the core's thread still lowers itself at the end of its cycling: nothing else runs JavaScript
 * there, sims/core/host.ts lowerThreadPriority). Returns whether chrt succeeded.
 */
export function lowerThread(tid: string): boolean {
  try {
    chrt(['-o', '-p', '0'], tid);
    return true;
  } catch {
    return false;
  }
}

/**
 * The calling thread back to normal scheduling (SCHED_OTHER) at the nice value it has, when it is under a
 * real-time policy; nothing otherwise (a read of /proc, no process started). Giving a real-time policy
 * back needs no privilege. Returns the thread's scheduling afterwards; a failure leaves the thread as it
 * was, says so on standard error, and the returned value shows it.
 */
export function toNormalScheduling(): string {
  const now = schedulingOf();
  if (!now || now.startsWith('SCHED_OTHER')) return now ?? 'none (not Linux)';
  try {
    const nice = getPriority(0); // pid 0: the calling thread on Linux; kept under a real-time policy
    chrt(['-o', '-p', '0']);
    if (getPriority(0) !== nice) setPriority(0, nice);
  } catch (e) {
    process.stderr.write(`warning: the fake master's cycle thread keeps its ${now} scheduling: ${(e as Error).message}\n`);
  }
  return schedulingOf() ?? 'unknown';
}
