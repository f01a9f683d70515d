// The reference system's entry points. The harness starts them as processes and never imports them
// (DESIGN.md rule 1); this module is the only place outside sims/ that names them.
//
// Two ways to start them. From source, through tsx's loader: nothing to build, but every process (and
// every worker thread in it) pays the loader's start-up, about half a second here. Prebuilt: a
// conformance run bundles sims/ once with esbuild (global setup of the conformance project) and every
// stack of the run starts from the bundle. `HIL_STACK_PREBUILT` names the bundle directory; without it,
// or with HIL_STACK_PREBUILT=off, stacks start from source.

import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Plugin } from 'esbuild';

const execFileAsync = promisify(execFile);

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The reference stack (`hil serve`): control service and core on a bus driver. */
export const STACK_ENTRY = join(ROOT, 'sims', 'main.ts');
/** The machine configuration compiler (`hil config`, document 3 part 2). */
export const CONFIG_ENTRY = join(ROOT, 'sims', 'config', 'main.ts');
/** The weld planner stub (`hil planner serve`, document 2), a process of its own as on a real cell. */
export const PLANNER_ENTRY = join(ROOT, 'sims', 'planner', 'main.ts');
/**
 * Node arguments the reference stack process starts with, before its entry point: the OpenSSL
 * configuration that disables TLS session tickets on its remote listener (document 1 part 5; the file
 * says why it must be read at process start). `hil serve` and every target use it.
 */
export const STACK_NODE_ARGS: readonly string[] = [`--openssl-config=${join(ROOT, 'sims', 'service', 'tls-no-tickets.cnf')}`];
/**
 * 16 times V8's tier-up budget (a function is optimised by TurboFan only after 16 times as much of its
 * bytecode has run), for the stacks of a simulated run (the sim and replay targets) and the conformance
 * workers (vitest.config.ts). Most of their code (a test's body, a request's route) runs a few hundred times
 * a run, and TurboFan compiling it was about 15 % of a whole run's CPU (bench/README.md, perf of a whole
 * run). Not for `hil serve` or a rig's stack: there the core's cycle, many small functions called once a
 * cycle, would run as baseline code for tens of seconds (bench/cycle.bench.ts work_p50 about 12 us against
 * 3 us; the lateness alike). No behaviour changes: only when V8 optimises.
 */
export const TIER_UP_ARGS: readonly string[] = ['--interrupt-budget=1081344'];
/** Whether the stacks `env` starts are a simulated run's (TIER_UP_ARGS). */
const simulatedRun = (env: NodeJS.ProcessEnv): boolean => env.HIL_TARGET === 'sim' || env.HIL_TARGET === 'replay';
/** The offline programming server (`hil olp serve`, document 3), a process of its own. */
export const OLP_ENTRY = join(ROOT, 'sims', 'olp', 'main.ts');
/** Node arguments that run a TypeScript entry point (tsx, no build step). */
export const TS_NODE_ARGS: readonly string[] = ['--import', resolveTsx()];

/** tsx's loader as a URL, so a stack starts from any working directory; vitest's module runner (global setup) cannot resolve. */
function resolveTsx(): string {
  try {
    return import.meta.resolve('tsx');
  } catch {
    return 'tsx';
  }
}
/**
 * The environment a reference program is started in by the harness: the caller's, less NODE_EXTRA_CA_CERTS.
 * Node reads that file and builds its whole root store when a process starts, before any of the program
 * runs (about 36 ms of CPU per start with a 144-certificate bundle, more than an empty `node -e 0` costs
 * otherwise), and a run starts a few hundred such processes: stacks, stack hosts, planners and each plan's
 * child, OLP servers and their workers, the configuration compiler. None of them ever trusts a public CA:
 * they talk over Unix sockets and loopback HTTP, and every TLS peer they have is checked against the CA
 * the harness hands it (the remote listener's pair, document 1 part 5; an OLP catalogue's cell).
 */
export function referenceEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const { NODE_EXTRA_CA_CERTS: _extra, ...rest } = env;
  return rest;
}
/** Environment variable through which the reference stack finds its anchor store. */
export const ANCHOR_DIR_ENV = 'CELL_ANCHOR_DIR';
/** Environment variable naming the directory of a prebuilt stack (see prebuildReference). */
export const PREBUILT_ENV = 'HIL_STACK_PREBUILT';

/**
 * What a prebuilt stack is made of: bundle name → source module relative to sims/. The worker bundles are
 * found by the stack itself beside its main bundle (sims/paths.ts workerEntry, drivers/ethercat/fake-master.ts).
 */
const BUNDLES: Record<string, string> = {
  main: 'main.ts',
  config: 'config/main.ts',
  'core-worker': 'core/worker.ts',
  'replay-core-worker': 'replay/worker.ts',
  'upload-worker': 'service/upload/worker.ts',
  'dense-decode-worker': 'dense/decode-worker.ts',
  'planner-intake-worker': 'planner/intake-worker.ts',
  'ethercat-fake-worker': '../drivers/ethercat/fake-worker.ts',
  planner: 'planner/main.ts',
  olp: 'olp/main.ts',
};
/** Built separately, as CommonJS (planner-child.cjs). */
const PLANNER_CHILD = 'planner/child.ts';
/**
 * Pure JavaScript packages (ws, fflate) go into the bundles: each of the run's hundred stack starts and
 * two hundred planning processes would otherwise resolve and parse them from node_modules. Native,
 * optional and loader packages stay outside, and so do the certificate library and unix-dgram, which
 * the stack loads with require on first use.
 */
const EXTERNAL = ['node-ethercat', 'tsx', 'tsx/*', 'esbuild', 'bufferutil', 'utf-8-validate', '@peculiar/x509', 'reflect-metadata', 'unix-dgram'];

export type ReferenceProgram = 'stack' | 'config' | 'planner' | 'olp';

/**
 * HIL_STACK_CPU_PROF=DIR: every stack (a stack host or a stack process) writes a V8 CPU profile of each of its
 * threads into DIR when it exits, to be read with bench/worker-profile.ts (where the stacks' CPU goes in a run).
 */
export function stackProfileArgs(env: NodeJS.ProcessEnv = process.env): string[] {
  const dir = env.HIL_STACK_CPU_PROF;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

/** Node arguments (before the program's own) that start a reference program, prebuilt when a bundle is named. */
export function referenceCommand(program: ReferenceProgram, env: NodeJS.ProcessEnv = process.env): string[] {
  const prebuilt = env[PREBUILT_ENV];
  const bundle = { stack: 'main.js', config: 'config.js', planner: 'planner.js', olp: 'olp.js' }[program];
  const node = program === 'stack' ? [...STACK_NODE_ARGS, ...(simulatedRun(env) ? TIER_UP_ARGS : []), ...stackProfileArgs(env)] : [];
  if (prebuilt && prebuilt !== 'off') return [...node, join(prebuilt, bundle)];
  return [...node, ...TS_NODE_ARGS, { stack: STACK_ENTRY, config: CONFIG_ENTRY, planner: PLANNER_ENTRY, olp: OLP_ENTRY }[program]];
}

/** A bundle being built (or built), as prebuildReference returns it. */
export type Prebuilt = { dir: string; remove: () => Promise<void> };

/**
 * A bundle started by `hil run`/`hil test` before vitest starts, so esbuild works while vitest loads its
 * configuration and projects (about 0.8 s of the run's start here). It is kept on globalThis because the
 * global setup that takes it (prebuild-setup.ts) is loaded by vitest's module runner, a second instance of
 * this module in the same process.
 */
const EARLY = Symbol.for('cell-hil.early-prebuild');
type EarlyHolder = { [EARLY]?: Promise<Prebuilt> };

/** Start bundling now (see EARLY); returns a function that waits for the build and removes its directory. */
export function startEarlyPrebuild(): () => Promise<void> {
  const p = prebuildReference();
  p.catch(() => undefined); // a failed build is reported by the global setup that awaits it
  (globalThis as EarlyHolder)[EARLY] = p;
  return async () => {
    delete (globalThis as EarlyHolder)[EARLY];
    const built = await p.catch(() => undefined);
    await built?.remove();
  };
}

/** The early bundle, when the command that started vitest began one in this process. */
export function earlyPrebuild(): Promise<Prebuilt> | undefined {
  return (globalThis as EarlyHolder)[EARLY];
}

/**
 * Bundle the reference programs into a fresh directory under node_modules/.cache (inside the checkout, so
 * that the bundles resolve the packages they leave external from the project's node_modules). Returns the
 * directory and a function that removes it. Runs in well under a second.
 */
export async function prebuildReference(): Promise<Prebuilt> {
  const { build } = await import('esbuild');
  const parent = join(ROOT, 'node_modules', '.cache', 'hil-stack');
  await mkdir(parent, { recursive: true });
  await pruneBundles(parent);
  const dir = await mkdtemp(join(parent, 'run-'));
  await writeFile(join(dir, OWNER), `${process.pid}\n`);
  // The bundles sit below node_modules, where node stops looking for a package.json: without one of their
  // own, every process and worker thread that loads one would parse it twice, first as CommonJS to detect
  // its module syntax (about 5 ms of a stack's start, 15-20 ms of an OLP server's, bench/process-start.bench.ts).
  await writeFile(join(dir, 'package.json'), BUNDLE_PACKAGE);
  const common = {
    bundle: true,
    platform: 'node' as const,
    target: 'node20',
    sourcemap: 'linked' as const,
    logLevel: 'error' as const,
    // sims/paths.ts: the checkout root, and worker entries as sibling bundles.
    define: { HIL_PREBUILT: JSON.stringify({ root: ROOT }) },
    external: EXTERNAL,
  };
  // The planning process starts once per plan (two hundred times a run): as CommonJS it skips the ES
  // module loader's set-up, about 10 ms of every start. It uses no import.meta.
  // For its startup snapshot (buildChildSnapshot): a banner gives it a `module` where the snapshot's builder
  // runs it, which passes a script only require, __filename and __dirname (loaded as CommonJS, the wrapper's
  // own is kept); fflate's build without worker_threads, which fflate's Node build loads as it loads and
  // whose handles a snapshot cannot hold (the planner uses only fflate's synchronous inflate and unzip,
  // the same code in both builds); and fflate without its load-time probe (FFLATE_PROBE).
  await build({
    ...common,
    entryPoints: { 'planner-child': join(ROOT, 'sims', PLANNER_CHILD) },
    outdir: dir,
    format: 'cjs',
    outExtension: { '.js': '.cjs' },
    alias: { fflate: 'fflate/browser' },
    plugins: [FFLATE_PROBE],
    banner: { js: "var module = typeof module === 'undefined' ? { exports: {} } : module;" },
  });
  const snapshot = buildChildSnapshot(dir);
  await build({
    ...common,
    entryPoints: Object.fromEntries(Object.entries(BUNDLES).map(([name, src]) => [name, join(ROOT, 'sims', src)])),
    outdir: dir,
    splitting: false,
    format: 'esm',
    // A bundled CommonJS package requires node's own modules: give the ES module bundle a require.
    banner: { js: "import { createRequire as __hilRequire } from 'node:module'; const require = __hilRequire(import.meta.url);" },
  });
  await snapshot;
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * fflate asks, as it loads, whether TextDecoder can decode a stream: it decodes an empty array with
 * `{ stream: true }` and keeps the answer. That call gives the decoder a native converter, and a startup
 * snapshot cannot hold one (V8 stops the build). Node's TextDecoder always can, so the probe is replaced by
 * its answer; fflate's own decoder is kept and gets its converter in the planning process on first use.
 * Where a later fflate words the probe otherwise the text stays as it is, the snapshot's build fails and the
 * planning processes start from the bundle (buildChildSnapshot).
 */
const FFLATE_PROBE: Plugin = {
  name: 'fflate-stream-probe',
  setup(b) {
    b.onLoad({ filter: /[\\/]fflate[\\/]esm[\\/]browser\.js$/ }, async (a) => {
      const text = await readFile(a.path, 'utf8');
      return { contents: text.replace(/try \{\s*td\.decode\(et, \{ stream: true \}\);\s*tds = 1;\s*\}\s*catch \(e\) \{ \}/, 'tds = td ? 1 : 0;'), loader: 'js' };
    });
  },
};

/** The planning process's startup snapshot, beside its bundle (sims/paths.ts programArgs starts from it when it is there). */
export const CHILD_SNAPSHOT = 'planner-child.blob';

/**
 * Build the planning process's V8 startup snapshot from its bundle in `dir` (sims/planner/child.ts says what
 * it holds): about 0.5 s of CPU once a run, against some 25 ms of each of the run's hundred planning
 * processes (bench/README.md). A build that fails leaves no snapshot and the processes start from the
 * bundle as before; what Node said goes to planner-child.blob.log for whoever wonders why.
 */
async function buildChildSnapshot(dir: string): Promise<void> {
  const blob = join(dir, CHILD_SNAPSHOT);
  // A Node without process.getBuiltinModule (before 20.16) could not start a plan's helper from a snapshot.
  if (typeof process.getBuiltinModule !== 'function') return;
  let log: string;
  try {
    const r = await execFileAsync(process.execPath, ['--snapshot-blob', `${blob}.tmp`, '--build-snapshot', join(dir, 'planner-child.cjs')], { cwd: dir, env: referenceEnv() });
    await rename(`${blob}.tmp`, blob);
    log = r.stdout + r.stderr;
  } catch (e) {
    const x = e as Error & { code?: unknown; signal?: unknown; stdout?: string; stderr?: string };
    log = `exit ${String(x.signal ?? x.code)}\n${x.stdout ?? ''}${x.stderr ?? x.message}`;
  }
  if (log) await writeFile(`${blob}.log`, log).catch(() => undefined);
}

/** The bundle a test's processes start from: the one HIL_STACK_PREBUILT names (kept), or one built now (removed by `remove`). */
export async function namedOrBuiltBundle(env: NodeJS.ProcessEnv = process.env): Promise<Prebuilt> {
  const named = env[PREBUILT_ENV];
  if (named && named !== 'off') return { dir: named, remove: async () => undefined };
  return prebuildReference();
}

/** The package.json of a bundle directory: its .js bundles are ES modules (planner-child.cjs says CommonJS itself). */
export const BUNDLE_PACKAGE = '{ "type": "module" }\n';

/** The file in a bundle directory that names the process that built it (prebuildReference). */
const OWNER = 'owner.pid';
/** A bundle directory without an owner file is left alone this long (one being made right now has none yet). */
const UNOWNED_MS = 3_600_000;

/**
 * Remove the bundle directories under `parent` whose run has gone: a run ended by Ctrl-C (vitest exits at
 * once on the signal), by SIGKILL or by a crash removes nothing itself, and each directory is about 11 MB.
 * A directory goes when the process its owner file names is not running; one without a pid in an owner file
 * (made before owners were written, or being made now) when it is older than an hour. A directory whose owner
 * is running (another run beside this one, a nightly) is kept. Returns the names removed.
 */
export async function pruneBundles(parent: string, now = Date.now()): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(parent).catch(() => [] as string[])) {
    if (!name.startsWith('run-')) continue;
    const dir = join(parent, name);
    // An owner file not (yet) holding a pid counts as none: one being written now reads empty.
    const pid = Number((await readFile(join(dir, OWNER), 'utf8').catch(() => '')).trim());
    const gone = Number.isInteger(pid) && pid > 0 ? !running(pid) : await stat(dir).then((st) => now - st.mtimeMs > UNOWNED_MS, () => false);
    if (gone) {
      await rm(dir, { recursive: true, force: true });
      removed.push(name);
    }
  }
  return removed;
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: a process of another user has that pid; it is running.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
