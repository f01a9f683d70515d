// The machine configuration compiler client: the compiler behind `hil config ...` run as a process, the
// way a deployment script would (prebuilt during a conformance run, harness/targets/reference.ts) (document 3 part 2; DESIGN.md rule 1: the harness never imports sims/). Its output is one
// JSON line per compiled or refused file.

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HarnessError } from '../errors.ts';
import { referenceCommand, referenceEnv } from '../targets/reference.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The machine configurations shipped as fixtures. */
export const MACHINES = join(ROOT, 'fixtures', 'machines');

export interface Compiled {
  file?: string;
  dir: string;
  configuration_sha256: string;
  machine_sha256: string;
  deployment_sha256: string;
}
export interface Refused {
  file?: string;
  error: string;
  path: string;
  message: string;
}
export type Outcome = Compiled | Refused;
export const isRefused = (o: Outcome): o is Refused => 'error' in o;

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The harness ended the compiler at its own time bound (timeoutMs), ms it had run; undefined when it ended by itself. */
  killedAfterMs?: number;
}

/** `hil config ...args` (the compiler program itself), collecting its output. */
export function hilConfig(args: string[], timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...referenceCommand('config'), ...args], { cwd: ROOT, env: referenceEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const started = performance.now();
    let killedAfterMs: number | undefined;
    const timer = setTimeout(() => {
      killedAfterMs = Math.round(performance.now() - started);
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (e) => reject(new HarnessError('HIL_ERR_TOOL_FAILED', `cannot run hil config: ${e.message}`, { cause: e })));
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ...(killedAfterMs !== undefined ? { killedAfterMs } : {}) });
    });
  });
}

/** Parse the compiler's stdout: one JSON object per line. */
export function outcomes(stdout: string): Outcome[] {
  return stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      try {
        return JSON.parse(l) as Outcome;
      } catch (e) {
        throw new HarnessError('HIL_ERR_TARGET_MALFORMED', `hil config printed a line that is not JSON: ${l.slice(0, 200)}`, { cause: e });
      }
    });
}

/**
 * `hil config compile-many --out OUT FILE...`: one outcome per file, in order. Checks the batch contract
 * (one line per file naming it, exit 1 exactly when one was refused) so callers can trust the list; a
 * compiler that breaks it is the system under test failing (HIL_ERR_TARGET_MALFORMED).
 */
export async function compileMany(files: string[], out: string, timeoutMs = 60_000): Promise<Outcome[]> {
  const r = await hilConfig(['compile-many', '--out', out, ...files], timeoutMs);
  // The documents give the compiler no time limit: one the harness ended at its own bound (a loaded host)
  // broke no contract, and its cut-off output says nothing about the target.
  if (r.killedAfterMs !== undefined) {
    const done = r.stdout.split('\n').filter((l) => l !== '').length;
    throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `hil config compile-many was ended by the harness after ${r.killedAfterMs} ms (its own bound, no documented limit) with ${done} of ${files.length} files done: a slow host, not a verdict on the compiler`, { detail: { killed_after_ms: r.killedAfterMs, done, files: files.length } });
  }
  const list = outcomes(r.stdout);
  if (list.length !== files.length || list.some((o, i) => o.file !== files[i])) {
    throw new HarnessError('HIL_ERR_TARGET_MALFORMED', `compile-many gave ${list.length} lines for ${files.length} files (exit ${r.code})\n${r.stderr}`);
  }
  const want = list.some(isRefused) ? 1 : 0;
  if (r.code !== want) throw new HarnessError('HIL_ERR_TARGET_MALFORMED', `compile-many exited ${r.code}, expected ${want}\n${r.stderr}`);
  return list;
}
