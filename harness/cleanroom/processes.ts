// Starts the clean-room weld planner (harness/cleanroom/planner/) and OLP server (harness/cleanroom/olp/) as
// their authors run them: each its own process under tsx's loader, reached only by the URL of the
// `ready {...}` line it prints, as the harness would reach another team's server. Both were written from the
// documents alone by people who had read neither the suites, docs/profile.md nor the reference servers. The
// planner runs each admitted plan in a fresh child process of its own (document 2 part 4), which is why it
// needs tsx in node's own flags rather than the in-process loader `hil` uses.

import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnReady } from '../targets/spawn.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PLANNER_ENTRY = join(ROOT, 'harness', 'cleanroom', 'planner', 'server.ts');
const OLP_ENTRY = join(ROOT, 'harness', 'cleanroom', 'olp', 'main.ts');

/** One cell of the OLP server's cells file, in its authors' format (harness/cleanroom/olp/README.md "Cells file"). */
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

export interface CleanroomProcess {
  url: string;
  close(): Promise<void>;
}

/** The argv that starts the clean-room planner (node's own flags first). */
export function plannerArgv(o: { storeDir: string; port?: number }): string[] {
  return ['--import', 'tsx', PLANNER_ENTRY, '--port', String(o.port ?? 0), '--dense-store-dir', o.storeDir];
}

function olpArgv(o: { cellsFile: string; plannerUrl?: string; robotStore?: string }): string[] {
  return [
    '--import', 'tsx', OLP_ENTRY, '--listen', '127.0.0.1:0', '--cells', o.cellsFile,
    ...(o.plannerUrl ? ['--planner-url', o.plannerUrl] : []),
    ...(o.robotStore ? ['--robot-store', o.robotStore] : []),
  ];
}

/** Neither server watches a lifeline on stdin: SIGTERM is their orderly stop (the OLP server stops a held lease). */
async function start(what: string, argv: string[], key: 'planner' | 'olp', env: NodeJS.ProcessEnv): Promise<CleanroomProcess> {
  const p = await spawnReady<Record<string, unknown>>(what, argv, env, 60_000);
  return {
    url: String(p.ready[key]),
    async close() {
      p.child?.kill('SIGTERM');
      await p.stop();
    },
  };
}

export function startCleanroomPlanner(o: { storeDir: string; port?: number; env?: NodeJS.ProcessEnv }): Promise<CleanroomProcess> {
  return start('the clean-room planner', plannerArgv(o), 'planner', o.env ?? process.env);
}

export function startCleanroomOlp(o: { cellsFile: string; plannerUrl?: string; robotStore?: string; env?: NodeJS.ProcessEnv }): Promise<CleanroomProcess> {
  return start('the clean-room OLP server', olpArgv(o), 'olp', o.env ?? process.env);
}
