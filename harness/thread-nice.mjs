// Raise the calling thread's scheduling priority, for a thread that keeps time for a test's thread: the grant
// keeper's (harness/clients/keeper-worker.mjs) and the bench box's heartbeat thread
// (harness/benchbox/thread-worker.ts). Plain JavaScript: the keeper's thread starts without the test
// runner's TypeScript loader, and both import this one function. Its types: harness/thread-nice.d.mts.
//
// A thread starts at its creator's nice value, and the conformance workers run niced (harness/priority.ts:
// nice 10 for the busy files, 5 for jog; harness/nice.ts) so that the real-time-sensitive files run first: a
// keeper or a heartbeat left there waits behind every busy neighbour (a renewal once left 423 ms after it
// was due beside niced workers). On Linux a nice value is a thread's own (setpriority with PRIO_PROCESS and a
// thread id sets that thread only), so such a thread raises itself without raising the test's thread or the
// stacks it starts. Raising needs privilege (CAP_SYS_NICE, or RLIMIT_NICE): when refused, the thread stays
// where it started and `error` says why (EACCES). Never lowers: a thread already better than the value keeps
// its own. Elsewhere than Linux pid 0 is the whole process, which this must not raise: nothing is changed.

import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

export function raiseThreadNice(wanted) {
  let tid;
  try {
    // "<pid>/task/<tid>": this thread's id as the kernel knows it (Linux only).
    tid = process.platform === 'linux' ? Number(readlinkSync('/proc/thread-self').split('/').pop()) : undefined;
  } catch {
    tid = undefined;
  }
  if (tid === undefined) {
    const from = getPriority();
    return { tid: null, from, nice: from, error: 'no per-thread priority on this platform' };
  }
  const from = getPriority(tid);
  if (from <= wanted) return { tid, from, nice: from };
  try {
    setPriority(tid, wanted);
    return { tid, from, nice: getPriority(tid) };
  } catch (e) {
    return { tid, from, nice: getPriority(tid), error: niceErrorCode(e) };
  }
}

/** Why setpriority refused: the system error's code (EACCES), else the message. */
export function niceErrorCode(e) {
  return String(e?.info?.code ?? e?.code ?? e?.message ?? e);
}
