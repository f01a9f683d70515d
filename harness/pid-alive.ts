// Whether a process is still there, for tests that check that what they started has ended.

import { existsSync, readFileSync } from 'node:fs';

/** Whether `pid` runs: a zombie counts as gone (it runs nothing and holds nothing); without /proc, whether it can be signalled. */
export function pidAlive(pid: number): boolean {
  if (!existsSync('/proc/self')) {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
  try {
    return existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}
