// `hil cleanroom check --planner`: the planner suites against an independent reading of document 2
// (harness/cleanroom/planner/), as CI runs it. It starts the clean-room planner and, for the suites that
// hand the planner's files to a control service (dense-format, planner e2e), the reference stack through
// `hil serve`; runs suites/planner and the planner file of suites/dense-format through `hil run --target external
// --planner-url`, and holds the outcome to the same two statements as the document 1 check (check.ts):
// the verdict is PASS, and the profile differences are exactly fixtures/expectations/
// cleanroom-planner-informative.json.
//
// The clean-room planner's cell is its own six-axis robot (HIL_PLANNER_CELL, `blind-six-axis`), so the suites also show
// that they read the cell from the planner rather than assuming the stub's nine axes.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runAndPin } from './check.ts';
import { startCleanroomPlanner, type CleanroomProcess } from './processes.ts';
import { CELL } from './planner/server.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HIL = join(ROOT, 'harness', 'bin', 'hil.mjs');

/**
 * The suites whose subject is the weld planner (document 2): suites/planner, and of suites/dense-format the
 * file that reads a planner-written file (the other two hand harness-made files to the control service and
 * never reach the planner, so they would only run the reference stack again).
 */
export const PLANNER_SUITES = ['suites/planner', 'suites/dense-format/planner-file.test.ts'];

export const PLANNER_EXPECTED_FILE = join(ROOT, 'fixtures', 'expectations', 'cleanroom-planner-informative.json');

export interface PlannerCheckOptions {
  update?: boolean;
  suites?: string[];
  log?: (line: string) => void;
}

export async function checkCleanroomPlanner(o: PlannerCheckOptions = {}): Promise<number> {
  const log = o.log ?? ((l: string) => process.stdout.write(`${l}\n`));
  const dir = mkdtempSync(join(tmpdir(), 'hil-cleanroom-planner-'));
  const reports = join(dir, 'reports');
  const storeDir = join(dir, 'store');
  let planner: CleanroomProcess | undefined;
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('VITEST') || k.startsWith('HIL_')) delete env[k];
  // The reference control service, for the suites that admit the planner's files.
  const sock = join(dir, 'sock');
  const serve = spawn(process.execPath, [HIL, 'serve', '--socket-dir', sock], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  try {
    planner = await startCleanroomPlanner({ storeDir, env });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const t = setTimeout(() => reject(new Error(`hil serve did not report ready in 60 s: ${out.slice(-500)}`)), 60_000);
      serve.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (/^ready /m.test(out)) {
          clearTimeout(t);
          resolve();
        }
      });
      serve.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      serve.on('exit', (c) => reject(new Error(`hil serve exited ${c}: ${out.slice(-500)}`)));
    });
    const runEnv: NodeJS.ProcessEnv = { ...env, HIL_REPORTS_DIR: reports, HIL_PLANNER_CELL: CELL, HIL_PLANNER_STORE_DIR: storeDir };
    return await runAndPin({
      name: 'cleanroom planner check', env: runEnv, reports, expectedFile: PLANNER_EXPECTED_FILE, update: o.update, log,
      args: ['run', '--target', 'external', '--socket', join(sock, 'control.sock'), '--planner-url', planner.url, '--no-report', ...(o.suites ?? PLANNER_SUITES)],
      notPass: 'the run against the clean-room planner is not PASS: a suite asks for more than document 2 says, or the clean-room planner broke it',
    });
  } finally {
    serve.kill('SIGTERM');
    await new Promise((r) => (serve.exitCode !== null ? r(undefined) : serve.once('exit', r)));
    await planner?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
