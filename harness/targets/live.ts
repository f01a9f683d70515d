// The targets open in this worker (the file's, a variant, a file's shared variant), so that a failed test can
// be judged against each stack it may have used (harness/fixture.ts: a cell faulted by a stalled host).

import type { Target } from './types.ts';

const open = new Set<Target>();

/** Registers `t` until its close. */
export function tracked<T extends Target>(t: T): T {
  open.add(t);
  const close = t.close.bind(t);
  t.close = async () => {
    open.delete(t);
    await close();
  };
  return t;
}

/** The targets open now. */
export function liveTargets(): readonly Target[] {
  return [...open];
}
