// Starts the clean-room weld planner (harness/cleanroom/planner/) as its authors run it: its own process
// under tsx's loader (`node --import tsx server.ts --port P --dense-store-dir DIR`), so that each admitted plan
// runs in a fresh child process of its own (document 2 part 4) and cancel can end it. The planner was written
// from document 2 alone by someone who had read neither the suites nor the reference planner: the harness
// reaches it only by the URL its ready line names, as it would another team's planner.

import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const PLANNER_ENTRY = join(ROOT, 'harness', 'cleanroom', 'planner', 'server.ts');

export interface PlannerProcess {
  url: string;
  child: ChildProcess;
  close(): Promise<void>;
}

/** The argv that starts the clean-room planner (node's own flags first). */
export function plannerArgv(o: { storeDir: string; port?: number }): string[] {
  return ['--import', 'tsx', PLANNER_ENTRY, '--port', String(o.port ?? 0), '--dense-store-dir', o.storeDir];
}

export async function startCleanroomPlanner(o: { storeDir: string; port?: number; env?: NodeJS.ProcessEnv }): Promise<PlannerProcess> {
  // detached: the planner's plan processes are its children; close() ends the whole group.
  const child = spawn(process.execPath, plannerArgv(o), { cwd: ROOT, env: o.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const close = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const t = setTimeout(() => { try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* gone */ } }, 5_000);
    await gone;
    clearTimeout(t);
    try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* the group is gone */ }
  };
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    const t = setTimeout(() => reject(new Error(`the clean-room planner did not print ready in 60 s: ${err.slice(-500)}`)), 60_000);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('ready '));
      if (line) {
        clearTimeout(t);
        resolve(String(JSON.parse(line.slice(6)).planner));
      }
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.once('exit', (c, s) => {
      clearTimeout(t);
      reject(new Error(`the clean-room planner exited (${c ?? s}) before ready: ${err.slice(-500)}`));
    });
  });
  return { url, child, close };
}
