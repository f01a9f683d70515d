// The targets open in this worker (the file's, a variant, a file's shared variant), so that a failed test can
// be judged against each stack it may have used (harness/fixture.ts: a cell faulted by a stalled host).

import { lateness } from '../lateness.ts';
import type { Target } from './types.ts';

const open = new Set<Target>();

/**
 * Registers `t` until its close; a target that is a process on this host (its `pid`) has its run-queue
 * wait sampled meanwhile (harness/lateness.ts), so a timing rule it must keep can be judged against the
 * host's share.
 */
export function tracked<T extends Target>(t: T): T {
  open.add(t);
  // A target of several processes on this host (an external service named with --service-pid and its OLP
  // server) has each watched; the judgment takes the longest wait among them.
  const more = t.pidsOnHost?.slice(1) ?? [];
  const unwatches = [lateness.watch(() => t.pid), ...more.map((pid) => lateness.watch(() => pid))];
  const unwatch = () => unwatches.forEach((u) => u());
  const close = t.close.bind(t);
  t.close = async () => {
    open.delete(t);
    unwatch();
    await close();
  };
  return t;
}

/** The targets open now. */
export function liveTargets(): readonly Target[] {
  return [...open];
}
