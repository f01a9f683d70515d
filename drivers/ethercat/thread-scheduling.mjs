// The calling thread's scheduling, read from /proc and changed with chrt, for the fake master's cycle
// thread (fake-worker.ts). Plain JavaScript so that the thread's entry shim (fake-worker-entry.mjs) can
// give back an inherited real-time policy before it registers the TypeScript loader. A new thread takes its
// creator's policy (sched(7): inherited across fork(2); pthread_attr_setinheritsched(3): PTHREAD_INHERIT_SCHED
// is the default), and Node's worker threads do: the loader's hooks thread, started by register(), would
// otherwise run at SCHED_FIFO 40 for the cycle thread's whole life.
// drivers/ must not import sims/ (harness/import-rule.test.ts), so this is the fake's own small copy of
// what sims/core/host.ts does for the core's thread (raiseThreadPriority, lowerThreadPriority).

import { execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/** Policy numbers as /proc shows them (linux/sched.h). */
const POLICY = ['SCHED_OTHER', 'SCHED_FIFO', 'SCHED_RR', 'SCHED_BATCH', 'SCHED_ISO', 'SCHED_IDLE', 'SCHED_DEADLINE'];

/**
 * A thread's scheduling from its stat file (proc(5): field 19 nice, 40 rt_priority, 41 policy):
 * 'SCHED_FIFO 49' for a real-time policy, 'SCHED_OTHER nice 0' for a normal one; undefined when it
 * cannot be read (not Linux, or the thread has ended).
 */
export function schedulingOf(statPath = '/proc/thread-self/stat') {
  let stat;
  try {
    stat = readFileSync(statPath, 'utf8');
  } catch {
    return undefined;
  }
  // Fields after the command name, which may hold spaces: the first of them is field 3.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const policy = POLICY[Number(f[38])] ?? `policy ${f[38]}`;
  return policy === 'SCHED_FIFO' || policy === 'SCHED_RR' ? `${policy} ${f[37]}` : `${policy} nice ${f[16]}`;
}

function ownThreadId() {
  return readlinkSync('/proc/thread-self').split('/').pop() ?? '';
}

/**
 * SCHED_FIFO at `priority` for the calling thread where permitted (root or CAP_SYS_NICE). Returns the
 * thread's scheduling afterwards; unchanged when refused or not on Linux.
 */
export function raiseToFifo(priority) {
  if (process.platform !== 'linux') return 'none (not Linux)';
  try {
    execFileSync('chrt', ['-f', '-p', String(priority), ownThreadId()], { stdio: 'ignore', timeout: 2000 });
  } catch {
    /* not permitted: normal priority */
  }
  return schedulingOf() ?? 'unknown';
}

/**
 * The calling thread back to normal scheduling (SCHED_OTHER) at the nice value it has, when it is under a
 * real-time policy; nothing otherwise (a read of /proc, no process started). Giving a real-time policy
 * back needs no privilege. Returns the thread's scheduling afterwards; a failure leaves the thread as it
 * was, says so on standard error, and the returned value shows it.
 */
export function toNormalScheduling() {
  const now = schedulingOf();
  if (!now || now.startsWith('SCHED_OTHER')) return now ?? 'none (not Linux)';
  try {
    const nice = getPriority(0); // pid 0: the calling thread on Linux; kept under a real-time policy
    execFileSync('chrt', ['-o', '-p', '0', ownThreadId()], { stdio: 'ignore', timeout: 2000 });
    if (getPriority(0) !== nice) setPriority(0, nice);
  } catch (e) {
    process.stderr.write(`warning: the fake master's cycle thread keeps its ${now} scheduling: ${e.message}\n`);
  }
  return schedulingOf() ?? 'unknown';
}
