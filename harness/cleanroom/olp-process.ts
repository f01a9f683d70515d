// Starts the clean-room OLP server (harness/cleanroom/olp/) as its authors run it: its own process under
// tsx's loader (`node --import tsx server.ts --listen 127.0.0.1:0 --cells FILE --planner-url URL
// --robot-store DIR`), reading the `ready {"olp": URL}` line it prints. The server was written from the
// documents alone by someone who had read neither the suites, docs/profile.md nor the reference OLP server:
// the harness reaches it only through that URL, as it would another team's server.

import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const OLP_ENTRY = join(ROOT, 'harness', 'cleanroom', 'olp', 'server.ts');

/** One cell of the server's cells file, in its authors' format (harness/cleanroom/olp/README.md "Cells file"). */
export interface CleanroomOlpCell {
  cell_id: string;
  control_socket: string;
  model_id: string;
  robot_description_sha256?: string;
  robot_description_file?: string;
  configuration_sha256?: string;
  backend?: 'simulation' | 'live';
  execution_mode?: 'simulation' | 'dry_run' | 'production';
  requested_lease_ms?: number;
}

export interface OlpProcess {
  url: string;
  child: ChildProcess;
  close(): Promise<void>;
}

/** The argv that starts the clean-room OLP server (node's own flags first). */
export function olpArgv(o: { cellsFile: string; plannerUrl?: string; robotStore?: string }): string[] {
  return [
    '--import', 'tsx', OLP_ENTRY, '--listen', '127.0.0.1:0', '--cells', o.cellsFile,
    ...(o.plannerUrl ? ['--planner-url', o.plannerUrl] : []),
    ...(o.robotStore ? ['--robot-store', o.robotStore] : []),
  ];
}

export async function startCleanroomOlp(o: { cellsFile: string; plannerUrl?: string; robotStore?: string; env?: NodeJS.ProcessEnv }): Promise<OlpProcess> {
  const child = spawn(process.execPath, olpArgv(o), { cwd: ROOT, env: o.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-4000)));
  const close = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((r) => child.once('exit', () => r()));
    // SIGTERM: the server stops a held lease (control `stop`) and exits; SIGKILL only if it hangs.
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await gone;
    clearTimeout(t);
  };
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the clean-room OLP server did not print ready in 60 s: ${err.slice(-500)}`));
    }, 60_000);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('ready '));
      if (line) {
        clearTimeout(t);
        resolve(String(JSON.parse(line.slice(6)).olp));
      }
    });
    child.once('exit', (c, s) => {
      clearTimeout(t);
      reject(new Error(`the clean-room OLP server exited (${c ?? s}) before ready: ${err.slice(-500)}`));
    });
  });
  return { url, child, close };
}
