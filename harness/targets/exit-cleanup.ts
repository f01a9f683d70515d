// What a process leaves behind when it exits before its orderly stops ran: the temporary directories it
// made for what it started (a stack's socket directory, a planner's or an OLP server's store) and the
// program hosts serving those (harness/targets/program-host.ts). The orderly path removes each directory
// when its stack or server stops. A run ended by Ctrl-C or SIGTERM never takes it: its workers exit as the
// run's IPC channel closes (harness/worker-lifeline.ts) with their stacks still up, and every such run left
// its stacks' directories, sockets and pair keys in the system's temporary directory. At exit the hosts go
// first (SIGKILL): a stack still starting in one would make its socket directory again after its removal.

import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

interface Left {
  dirs: Set<string>;
  children: Set<ChildProcess>;
}

// One record and one exit listener per process: a module graph evaluated again (a unit test file of its
// own under vitest's isolation) finds them where the first left them.
const KEY = Symbol.for('cell-hil.exit-cleanup');
const state = globalThis as { [KEY]?: Left };

function left(): Left {
  let l = state[KEY];
  if (!l) {
    const made: Left = { dirs: new Set(), children: new Set() };
    l = made;
    state[KEY] = made;
    process.once('exit', () => {
      for (const c of made.children) {
        if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      }
      for (const d of made.dirs) {
        try {
          rmSync(d, { recursive: true, force: true });
        } catch {
          // Nothing more can be done while the process exits: the directory stays, as it did before.
        }
      }
    });
  }
  return l;
}

/** A fresh directory `<system temp>/<prefix>XXXXXX`, removed at this process's exit unless removeTempDir removed it before. */
export async function makeTempDir(prefix: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), prefix));
  left().dirs.add(d);
  return d;
}

/** Remove a directory (made by makeTempDir or not) and forget it. */
export async function removeTempDir(dir: string, o: { maxRetries?: number } = {}): Promise<void> {
  await rm(dir, { recursive: true, force: true, ...(o.maxRetries ? { maxRetries: o.maxRetries } : {}) });
  left().dirs.delete(dir);
}

/** A child process killed at this process's exit if it is still running then (forgotten once it exits). */
export function killAtExit(child: ChildProcess): void {
  const l = left();
  l.children.add(child);
  child.once('exit', () => l.children.delete(child));
}

/** The directories made here and not yet removed, and the children still to be killed at exit (for tests). */
export function leftAtExit(): { dirs: string[]; children: number } {
  const l = left();
  return { dirs: [...l.dirs], children: l.children.size };
}
