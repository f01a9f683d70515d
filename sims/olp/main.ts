// Entry point of the offline programming server (`hil olp serve`, document 3): a process of its own, as
// on a real cell. Prints one line beginning with "ready " (JSON: its base URL, pid) when it answers; stops
// on SIGINT/SIGTERM and, with --lifeline-stdin, when its parent closes stdin (the same start-up and stop
// as every server program: sims/primitives.ts parseProgramArgs, runUntilStopped).

import { resolve } from 'node:path';
import { encodeJson } from '../json.ts';
import { validAllowedHost } from '../local-guard.ts';
import { programArgs } from '../paths.ts';
import { parseProgramArgs, runUntilStopped } from '../primitives.ts';
import { runSessions, type Runner } from '../sessions.ts';
import { HEARTBEAT_MS } from './execution.ts';
import { DEFAULT_POOL_SIZE, DEFAULT_WORKER_TIMEOUT_MS } from './workers.ts';
import { BASE, DEFAULT_LISTEN, OlpServer } from './server.ts';

const USAGE = `usage: hil olp serve [--listen HOST:PORT] [--allowed-host NAME]... [--catalogue FILE | --control-socket PATH] [--robot-store DIR]
                     [--planner-url URL] [--heartbeat-ms N] [--lease-ms N] [--weld-plan-timeout-ms N] [--lifeline-stdin]
                     [--cad-worker CMD] [--seam-worker CMD] [--worker-pool N] [--worker-timeout-ms N]
                     [--local-simulator FILE [--local-simulator-model ID[@SHA]]] [--program-store DIR]
       hil olp worker
       hil olp sessions

Starts the offline programming server (document 3), every route under ${BASE}.

  --listen HOST:PORT       where to listen (default ${DEFAULT_LISTEN}; same-host use only: the server has no
                           authentication, document 3 part 5); port 0 picks a free port (the ready line's URL)
  --allowed-host NAME      a further Host name (with the listen port) this server answers, repeatable; it
                           always answers localhost, 127.0.0.1, [::1] and its listen address, and refuses
                           other Hosts, cross-site POSTs and bodies not sent as application/json
                           (docs/profile.md "Local servers: browser guard")
  --catalogue FILE         cell catalogue (docs/profile.md "OLP server: cell catalogue"): several cells, target
                           selection and fencing; without it the server has a single target and no fencing
  --control-socket PATH    the single target's control socket (no catalogue)
  --single-model ID[@SHA]  the single target's robot model (and description digest) for the identity check
  --robot-store DIR        directory of URDF robot descriptions (GET /robots)
  --planner-url URL        the weld planner (document 2), for /weld-plan and /dense-execution/load
  --heartbeat-ms N         UI heartbeat timeout while the lease is held (default ${HEARTBEAT_MS}, document 3 part 4)
  --lease-ms N             grant lease asked of the control service (default: the service's)
  --weld-plan-timeout-ms N how long one weld plan may run (default 30 minutes, document 3 part 8)
  --cad-worker CMD         the CAD worker of /cadquery/topology: "builtin" (this server's STEP worker, hil olp
                           worker) or a JSON array of argv (docs/profile.md "OLP server: worker bridge");
                           without it the route answers 503 seam_worker_unavailable
  --seam-worker CMD        the seam worker of /seam, the same way
  --worker-pool N          worker processes per route (default ${DEFAULT_POOL_SIZE}); more requests at once: 429 busy
  --worker-timeout-ms N    time limit of one worker request (default ${DEFAULT_WORKER_TIMEOUT_MS}); past it: 504 timeout
  --local-simulator FILE   serve /local-simulator/*: the reference stack on the sim driver with this machine
                           configuration, started on POST /local-simulator/start (docs/profile.md)
  --local-simulator-model ID[@SHA]  the local simulator's robot model (and description digest)
  --program-store DIR      serve /programs*: the program catalogue over this directory
  --lifeline-stdin         exit when standard input closes (used by targets that start the server)

"hil olp worker" runs the reference STEP worker on standard input and output (the bridge's frames).
"hil olp sessions" is a program host (sims/sessions.ts): it reads JSON commands on standard input and serves
one "serve ARGS" session after another in this process; the sim target's OLP servers are its sessions.
`;

const INT = /^[1-9][0-9]{0,9}$/;

/** A worker command: "builtin" (this program's worker subcommand) or a JSON array of strings. */
function workerCommand(v: string): string[] | undefined {
  if (v === 'builtin') return [process.execPath, ...programArgs('olp'), 'worker'];
  try {
    const a = JSON.parse(v) as unknown;
    if (Array.isArray(a) && a.length > 0 && a.every((x) => typeof x === 'string' && x !== '')) return a as string[];
  } catch {
    /* below */
  }
  return undefined;
}

function localSim(machine: string, model: string): { machine: string; model_id: string; robot_description_sha256?: string } {
  const [id, sha] = model.split('@');
  return { machine, model_id: id ?? '', ...(sha ? { robot_description_sha256: sha } : {}) };
}

export async function main(argv: string[], runner: Runner = runUntilStopped): Promise<number> {
  if (argv[0] === 'sessions' && runner === runUntilStopped) return runSessions((args, sessionRunner) => main(args, sessionRunner), { name: 'hil olp sessions' });
  if (argv[0] === 'worker') {
    const { runWorker } = await import('./worker.ts');
    await runWorker();
    return -1;
  }
  if (argv[0] !== 'serve') {
    process.stderr.write(USAGE);
    return argv[0] === '--help' || argv[0] === '-h' ? 0 : 2;
  }
  const parsed = parseProgramArgs(
    {
      args: argv.slice(1),
      options: {
        listen: { type: 'string' },
        'allowed-host': { type: 'string', multiple: true },
        catalogue: { type: 'string' },
        'control-socket': { type: 'string' },
        'single-model': { type: 'string' },
        'robot-store': { type: 'string' },
        'planner-url': { type: 'string' },
        'heartbeat-ms': { type: 'string' },
        'lease-ms': { type: 'string' },
        'weld-plan-timeout-ms': { type: 'string' },
        'lifeline-stdin': { type: 'boolean' },
        'cad-worker': { type: 'string' },
        'seam-worker': { type: 'string' },
        'worker-pool': { type: 'string' },
        'worker-timeout-ms': { type: 'string' },
        'local-simulator': { type: 'string' },
        'local-simulator-model': { type: 'string' },
        'program-store': { type: 'string' },
      },
    },
    USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const a = parsed.values;
  const listen = /^(.+):(0|[1-9][0-9]{0,4})$/.exec(a.listen ?? DEFAULT_LISTEN);
  if (!listen || Number(listen[2]) > 65535) {
    process.stderr.write('--listen must be HOST:PORT with a port 0..65535\n');
    return 2;
  }
  for (const k of ['heartbeat-ms', 'lease-ms', 'weld-plan-timeout-ms', 'worker-pool', 'worker-timeout-ms'] as const) {
    if (a[k] !== undefined && !INT.test(a[k]!)) {
      process.stderr.write(`--${k} must be a positive integer\n`);
      return 2;
    }
  }
  const bad = (a['allowed-host'] ?? []).find((h) => !validAllowedHost(h));
  if (bad !== undefined) {
    process.stderr.write(`--allowed-host must be a host name or address without port, not ${JSON.stringify(bad)}\n`);
    return 2;
  }
  if (a.catalogue && a['control-socket']) {
    process.stderr.write('--catalogue and --control-socket exclude each other (a catalogue names every cell)\n');
    return 2;
  }
  const workers: { cadWorker?: string[]; seamWorker?: string[] } = {};
  for (const [flag, key] of [['cad-worker', 'cadWorker'], ['seam-worker', 'seamWorker']] as const) {
    if (a[flag] === undefined) continue;
    const c = workerCommand(a[flag]!);
    if (!c) {
      process.stderr.write(`--${flag} must be "builtin" or a JSON array of nonempty strings\n`);
      return 2;
    }
    workers[key] = c;
  }
  const [model, sha] = (a['single-model'] ?? '').split('@');
  const server = new OlpServer({
    host: listen[1]!.replace(/^\[(.*)\]$/, '$1'),
    port: Number(listen[2]),
    ...(a['allowed-host'] ? { allowedHosts: a['allowed-host'] } : {}),
    ...(a.catalogue ? { catalogue: resolve(a.catalogue) } : {}),
    ...(a['control-socket'] ? { control: { socket: resolve(a['control-socket']) } } : {}),
    ...(model ? { singleModel: { model_id: model, ...(sha ? { robot_description_sha256: sha } : {}) } } : {}),
    ...(a['robot-store'] ? { robotStore: resolve(a['robot-store']) } : {}),
    ...(a['planner-url'] ? { plannerUrl: a['planner-url'].replace(/\/+$/, '') } : {}),
    ...(a['heartbeat-ms'] ? { heartbeatMs: Number(a['heartbeat-ms']) } : {}),
    ...(a['lease-ms'] ? { leaseMs: Number(a['lease-ms']) } : {}),
    ...(a['weld-plan-timeout-ms'] ? { weldPlanTimeoutMs: Number(a['weld-plan-timeout-ms']) } : {}),
    ...workers,
    ...(a['local-simulator'] ? { localSimulator: localSim(resolve(a['local-simulator']), a['local-simulator-model'] ?? '') } : {}),
    ...(a['program-store'] ? { programStore: resolve(a['program-store']) } : {}),
    ...(a['worker-pool'] ? { workerPool: Number(a['worker-pool']) } : {}),
    ...(a['worker-timeout-ms'] ? { workerTimeoutMs: Number(a['worker-timeout-ms']) } : {}),
    log: (l) => process.stderr.write(`${l}\n`),
  });
  let url: string;
  try {
    url = await server.start();
  } catch (e) {
    process.stderr.write(`hil olp: cannot start: ${(e as Error).message}\n`);
    return 1;
  }
  runner(() => server.stop(), { name: 'hil olp', lifeline: a['lifeline-stdin'] ?? false }).ready(encodeJson({ olp: url, base: BASE, pid: process.pid }));
  return -1;
}

const code = await main(process.argv.slice(2));
if (code >= 0) process.exit(code);
