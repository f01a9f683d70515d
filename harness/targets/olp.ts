// The offline programming server of a target (document 3). On the sim target the harness starts the
// reference server (`hil olp serve`) as a session of an OLP host this worker keeps (program-host.ts),
// configured as the suite asks (the cells of its catalogue, the planner, the heartbeat and weld-plan
// bounds), and stops it afterwards: a program started as a process is the only link (DESIGN.md rule 1).
// The catalogue file it writes is the reference server's format (docs/profile.md "OLP server: cell
// catalogue"). On the external target the server is someone else's, reached at --olp-url (HIL_OLP_URL) as
// it was configured by its owner.

import { writeFile } from 'node:fs/promises';
import { makeTempDir, removeTempDir } from './exit-cleanup.ts';
import { join } from 'node:path';
import { lateness } from '../lateness.ts';
import { ROOT } from './reference.ts';
import { openStubPlanner, startServer } from './spawn.ts';
import type { OlpCellSpec, OlpSpec, OpenedOlp } from './types.ts';

export const ROBOT_FIXTURES = join(ROOT, 'fixtures', 'robots');

/** Start the reference OLP server with this configuration (and a planner stub unless told otherwise). */
export async function startReferenceOlp(spec: OlpSpec = {}): Promise<OpenedOlp> {
  const dir = await makeTempDir('hil-olp-');
  let planner: { endpoint: { url: string }; close(): Promise<void> } | undefined;
  try {
    const args = ['serve', '--listen', spec.defaultListen ? '127.0.0.1:8794' : '127.0.0.1:0', '--lifeline-stdin'];
    for (const h of spec.allowedHosts ?? []) args.push('--allowed-host', h);
    const store = spec.robotStore ?? 'fixture';
    args.push('--robot-store', store === 'missing' ? join(dir, 'no-such-store') : store === 'fixture' ? ROBOT_FIXTURES : store.dir);
    if (spec.planner === undefined || spec.planner === 'stub') {
      planner = await openStubPlanner();
      args.push('--planner-url', planner.endpoint.url);
    } else if (spec.planner !== 'none') args.push('--planner-url', spec.planner.url);
    if (spec.heartbeatMs !== undefined) args.push('--heartbeat-ms', String(spec.heartbeatMs));
    if (spec.leaseMs !== undefined) args.push('--lease-ms', String(spec.leaseMs));
    if (spec.weldPlanTimeoutMs !== undefined) args.push('--weld-plan-timeout-ms', String(spec.weldPlanTimeoutMs));
    const w = spec.workers;
    if (w?.cad) args.push('--cad-worker', w.cad === 'builtin' ? 'builtin' : JSON.stringify(w.cad));
    if (w?.seam) args.push('--seam-worker', w.seam === 'builtin' ? 'builtin' : JSON.stringify(w.seam));
    if (w?.pool !== undefined) args.push('--worker-pool', String(w.pool));
    if (w?.timeoutMs !== undefined) args.push('--worker-timeout-ms', String(w.timeoutMs));
    // The internet link profile's 3 s lease ceiling lets the local simulator's grant ride out a loaded machine.
    if (spec.localSimulator) args.push('--local-simulator', join(ROOT, 'fixtures', 'machines', 'nine-axis-internet.json'), '--local-simulator-model', 'sim-nine-axis');
    const programs = spec.programStore ?? 'temp';
    if (programs !== 'none') args.push('--program-store', programs === 'temp' ? join(dir, 'programs') : programs.dir);
    if (spec.cells) args.push('--catalogue', await writeCatalogue(dir, spec.cells));
    else if (spec.single) {
      args.push('--control-socket', spec.single.socket);
      if (spec.single.model_id) args.push('--single-model', spec.single.model_id + (spec.single.robot_description_sha256 ? `@${spec.single.robot_description_sha256}` : ''));
    }
    const p = await spawnOlp(args);
    // Its process's run-queue wait, for the timing checks a slow host may explain (lateness.ts hostBound targetOnHost).
    const unwatch = lateness.watch(() => p.pid);
    return {
      endpoint: { url: p.url, pid: p.pid, configured: true, ...(planner ? { plannerUrl: planner.endpoint.url } : {}) },
      stderr: p.stderr,
      async close() {
        unwatch();
        await p.stop();
        await planner?.close();
        await removeTempDir(dir);
      },
    };
  } catch (e) {
    await planner?.close();
    await removeTempDir(dir);
    throw e;
  }
}

async function writeCatalogue(dir: string, cells: OlpCellSpec[]): Promise<string> {
  const out = [];
  for (const [i, c] of cells.entries()) {
    const { control, calibration, ...rest } = c;
    let ctl: Record<string, string>;
    if ('socket' in control) ctl = { socket: control.socket };
    else {
      for (const [k, v] of [['cert', control.cert], ['key', control.key], ['ca', control.ca]] as const) await writeFile(join(dir, `cell${i}.${k}.pem`), v, { mode: 0o600 });
      ctl = { url: control.url, cert: `cell${i}.cert.pem`, key: `cell${i}.key.pem`, ca: `cell${i}.ca.pem` };
    }
    let cal: Record<string, string> = {};
    if (calibration) {
      await writeFile(join(dir, `cell${i}.calibration`), calibration);
      cal = { machine_planning_calibration_file: `cell${i}.calibration` };
    }
    out.push({ ...rest, control: ctl, ...cal });
  }
  const file = join(dir, 'cells.json');
  await writeFile(file, JSON.stringify({ cells: out }, null, 2));
  return file;
}

/** The server as a session of an OLP host this worker keeps (program-host.ts), or with HIL_STACK_HOST=off a process of its own. */
async function spawnOlp(args: string[], timeoutMs = 30_000): Promise<{ url: string; pid: number; stderr: () => string; stop(): Promise<void> }> {
  const p = await startServer<{ olp: string; pid: number }>('olp', 'OLP server', args, { timeoutMs });
  return { url: p.ready.olp, pid: p.ready.pid, stderr: p.stderr, stop: () => p.stop() };
}
