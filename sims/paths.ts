// Where the reference stack finds its checkout and its worker entry points. Run from source (tsx), the
// worker entries are small .mjs shims that register the TypeScript loader in the worker before importing
// the worker module (Node 20 workers do not inherit the parent's loader). In a prebuilt stack (the sim
// target bundles sims/ once per run with esbuild to save the loader's start-up in every stack process),
// every entry is a sibling .js bundle and the build defines HIL_PREBUILT with the checkout root.

import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

declare const HIL_PREBUILT: { root: string } | undefined;

const PREBUILT: { root: string } | undefined = typeof HIL_PREBUILT === 'undefined' ? undefined : HIL_PREBUILT;

/** The checkout root (fixtures, package.json, .git). */
export const ROOT: string = PREBUILT?.root ?? fileURLToPath(new URL('..', import.meta.url));

/** The stack's worker threads, by name. */
export type WorkerName = 'core' | 'replay-core' | 'upload' | 'dense-decode' | 'planner-intake';

const SOURCE_ENTRY: Record<WorkerName, string> = {
  core: 'core/worker-entry.mjs',
  'replay-core': 'replay/worker-entry.mjs',
  upload: 'service/upload/worker-entry.mjs',
  'dense-decode': 'dense/decode-worker.mjs',
  'planner-intake': 'planner/intake-worker.mjs',
};

/** The module a worker thread of this name starts from. */
export function workerEntry(name: WorkerName): URL {
  return PREBUILT ? new URL(`./${name}-worker.js`, import.meta.url) : new URL(SOURCE_ENTRY[name], new URL('./', import.meta.url));
}


/** The stack's other programs, started as processes of their own. */
export type ProgramName = 'planner' | 'planner-child' | 'olp' | 'stack';

const SOURCE_PROGRAM: Record<ProgramName, string> = {
  stack: 'main.ts',
  planner: 'planner/main.ts',
  'planner-child': 'planner/child.ts',
  olp: 'olp/main.ts',
};

/** Whether the prebuilt planning process starts from its startup snapshot (looked up once; see refuseChildSnapshot). */
let childSnapshot: boolean | undefined;

/** Whether the planning processes this process starts now start from the startup snapshot. */
export function childSnapshotInUse(): boolean {
  return programArgs('planner-child')[0] === '--snapshot-blob';
}

/**
 * Start planning processes from their bundle from now on: one started from the snapshot could not load it.
 * Node refuses a snapshot built under other V8 flags (a NODE_OPTIONS that differs between the run that
 * built it and the planner, say) and exits with CHILD_SNAPSHOT_REFUSED before any of the program runs.
 */
export function refuseChildSnapshot(): void {
  childSnapshot = false;
}

/** Node's exit code for a startup snapshot it cannot load (ExitCode::kStartupSnapshotFailure). */
export const CHILD_SNAPSHOT_REFUSED = 14;

/** Node arguments that start a program of the reference system (before its own arguments). */
export function programArgs(name: ProgramName): string[] {
  // The planning process is bundled as CommonJS, and starts from the startup snapshot of that bundle when
  // the build made one (harness/targets/reference.ts buildChildSnapshot, sims/planner/child.ts).
  if (PREBUILT && name === 'planner-child') {
    const blob = fileURLToPath(new URL('./planner-child.blob', import.meta.url));
    childSnapshot ??= existsSync(blob);
    return childSnapshot ? ['--snapshot-blob', blob] : [fileURLToPath(new URL('./planner-child.cjs', import.meta.url))];
  }
  if (PREBUILT) return [fileURLToPath(new URL(`./${name === 'stack' ? 'main' : name}.js`, import.meta.url))];
  return ['--import', import.meta.resolve('tsx'), fileURLToPath(new URL(SOURCE_PROGRAM[name], new URL('./', import.meta.url)))];
}

/** The package version and git revision of this checkout, where they can be had (never in the cycle). */
export function provenance(): { package_version?: string; git_revision?: string } {
  const out: { package_version?: string; git_revision?: string } = {};
  try {
    out.package_version = (JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')) as { version?: string }).version;
  } catch {
    /* not in a checkout */
  }
  try {
    out.git_revision = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8', timeout: 2000, stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    /* no git here */
  }
  return out;
}
