// Starts the clean-room weld planner (harness/cleanroom/planner/) and OLP server (harness/cleanroom/olp/) as
// their authors run them: each its own process under tsx's loader, reached only by the URL of the
// `ready {...}` line it prints, as the harness would reach another team's server. Both were written from the
// documents alone by people who had read neither the suites, docs/profile.md nor the reference servers. The
// planner runs each admitted plan in a fresh child process of its own (document 2 part 4), which is why it
// needs tsx in node's own flags rather than the in-process loader `hil` uses.
//
// The clean-room control service (harness/cleanroom/service.ts) runs the same way when its remote listener
// is wanted: `hil cleanroom serve` in a node of its own, whose OpenSSL configuration keeps TLS session
// tickets off (startCleanroomService).
//
// The clean-room check (startCleanroomPlanner) starts the planner built to JavaScript instead: its server
// and its planning process bundled with esbuild (they import node's modules only), so that none of the
// run's planning processes, one per admitted plan, pays tsx's start-up. Same code, same processes.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
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
  /** Its process id on this host (the run's --service-pid: harness/targets/external.ts). */
  pid: number | undefined;
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

/** Where `hil cleanroom serve` listens: its control socket and its remote listener's `host:port`. */
export interface CleanroomServiceProcess {
  control: string;
  remote: string;
  /** Its process id on this host (the run's --service-pid: harness/targets/external.ts). */
  pid: number | undefined;
  close(): Promise<void>;
}

/**
 * The clean-room control service (harness/cleanroom/service.ts) as `hil cleanroom serve` with a remote
 * listener on 127.0.0.1 and a free port, serving the files of `pair`, its log in the file `log`; node runs
 * it with the OpenSSL configuration its listener needs (harness/cleanroom/remote.ts), and its stdin is its
 * lifeline.
 */
export async function startCleanroomService(o: { socketDir: string; pair: { ca: string; cert: string; key: string; crl: string }; pairId: string; log: string }): Promise<CleanroomServiceProcess> {
  const { NO_TICKETS_CNF } = await import('./remote.ts');
  const argv = [
    `--openssl-config=${NO_TICKETS_CNF}`, join(ROOT, 'harness', 'bin', 'hil.mjs'), 'cleanroom', 'serve', '--socket-dir', o.socketDir,
    ...['--remote-listen', '127.0.0.1:0', '--remote-ca', o.pair.ca, '--remote-cert', o.pair.cert, '--remote-key', o.pair.key, '--remote-crl', o.pair.crl],
    ...['--pair-id', o.pairId, '--log-file', o.log, '--lifeline-stdin'],
  ];
  const p = await spawnReady<{ control: string; remote: string }>('the clean-room service', argv, process.env, 60_000);
  return { control: p.ready.control, remote: p.ready.remote, pid: p.child?.pid, close: () => p.stop() };
}

/** Neither server watches a lifeline on stdin: SIGTERM is their orderly stop (the OLP server stops a held lease). */
async function start(what: string, argv: string[], key: 'planner' | 'olp', env: NodeJS.ProcessEnv): Promise<CleanroomProcess> {
  const p = await spawnReady<Record<string, unknown>>(what, argv, env, 60_000);
  return {
    url: String(p.ready[key]),
    pid: p.child?.pid,
    async close() {
      p.child?.kill('SIGTERM');
      await p.stop();
    },
  };
}

/** The clean-room planner's server and planning process bundled into a fresh directory (server.mjs, worker.mjs). */
async function buildPlanner(): Promise<{ server: string; remove: () => Promise<void> }> {
  const { build } = await import('esbuild');
  const dir = await mkdtemp(join(tmpdir(), 'hil-cleanroom-planner-build-'));
  try {
    const src = join(ROOT, 'harness', 'cleanroom', 'planner');
    await build({
      entryPoints: { server: join(src, 'server.ts'), worker: join(src, 'worker.ts') },
      outdir: dir,
      outExtension: { '.js': '.mjs' },
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      logLevel: 'error',
    });
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
  return { server: join(dir, 'server.mjs'), remove: () => rm(dir, { recursive: true, force: true }) };
}

/** The clean-room planner built to JavaScript (see the top of this file), on a port of its own; close() removes the build. */
export async function startCleanroomPlanner(o: { storeDir: string; port?: number; env?: NodeJS.ProcessEnv }): Promise<CleanroomProcess> {
  const built = await buildPlanner();
  try {
    const p = await start('the clean-room planner', [built.server, ...plannerArgv(o).slice(3)], 'planner', o.env ?? process.env);
    return {
      url: p.url,
      pid: p.pid,
      async close() {
        await p.close();
        await built.remove();
      },
    };
  } catch (e) {
    await built.remove();
    throw e;
  }
}

export function startCleanroomOlp(o: { cellsFile: string; plannerUrl?: string; robotStore?: string; env?: NodeJS.ProcessEnv }): Promise<CleanroomProcess> {
  return start('the clean-room OLP server', olpArgv(o), 'olp', o.env ?? process.env);
}
