// Entry point of the weld planner stub (`hil planner serve`): a separate process from the control service,
// as on a real cell. Prints one line beginning with "ready " (JSON: planner URL, pid, store directory) when
// it answers; stops on SIGINT/SIGTERM and, with --lifeline-stdin, when its parent closes stdin (the same
// start-up and stop as every server program: sims/primitives.ts parseProgramArgs, runUntilStopped).

import { resolve } from 'node:path';
import { encodeJson } from '../json.ts';
import { validAllowedHost } from '../local-guard.ts';
import { parseProgramArgs, runUntilStopped } from '../primitives.ts';
import { runSessions, type Runner } from '../sessions.ts';
import { DEFAULT_HOST, DEFAULT_PORT, PlannerService, STORE_ENV, storeDirectory } from './server.ts';

const USAGE = `usage: hil planner serve [--host H] [--port P] [--allowed-host NAME]... [--dense-store-dir DIR] [--lifeline-stdin]
       hil planner sessions

Starts the weld planner stub (document 2): GET /api/motion/health, GET /api/motion/progress,
POST /api/motion/plan, GET /api/motion/dense/{trajectory_digest}.

  --host H              interface to listen on (default ${DEFAULT_HOST}; use 127.0.0.1 unless other hosts
                        must reach it: anyone who reaches the port can queue plans and download trajectories)
  --allowed-host NAME   a further Host name (with the port) this planner answers, repeatable; it always
                        answers localhost, 127.0.0.1, [::1] and its --host (any IP address when that is
                        0.0.0.0 or ::), and refuses other Hosts, cross-site POSTs and plan bodies not sent
                        as application/octet-stream (docs/profile.md "Local servers: browser guard")
  --port P              TCP port (default ${DEFAULT_PORT}; 0 picks a free port, printed in the ready line)
  --dense-store-dir DIR where dense trajectories are stored (default $${STORE_ENV}, else
                        $XDG_CACHE_HOME/weld-planner/dense or ~/.cache/weld-planner/dense)
  --lifeline-stdin      exit when standard input closes (used by targets that start the planner)

"hil planner sessions" is a program host (sims/sessions.ts): it reads JSON commands on standard input and
serves one "serve ARGS" session after another in this process; the sim target's planners are its sessions.
`;

export async function main(argv: string[], runner: Runner = runUntilStopped): Promise<number> {
  if (argv[0] === 'sessions' && runner === runUntilStopped) return runSessions((args, sessionRunner) => main(args, sessionRunner), { name: 'hil planner sessions' });
  if (argv[0] !== 'serve') {
    process.stderr.write(USAGE);
    return argv[0] === '--help' || argv[0] === '-h' ? 0 : 2;
  }
  const parsed = parseProgramArgs(
    {
      args: argv.slice(1),
      options: { host: { type: 'string' }, 'allowed-host': { type: 'string', multiple: true }, port: { type: 'string' }, 'dense-store-dir': { type: 'string' }, 'lifeline-stdin': { type: 'boolean' } },
    },
    USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const a = parsed.values;
  const port = a.port ?? String(DEFAULT_PORT);
  if (!/^(0|[1-9][0-9]{0,4})$/.test(port) || Number(port) > 65535) {
    process.stderr.write('--port must be an integer 0..65535\n');
    return 2;
  }
  const bad = (a['allowed-host'] ?? []).find((h) => !validAllowedHost(h));
  if (bad !== undefined) {
    process.stderr.write(`--allowed-host must be a host name or address without port, not ${JSON.stringify(bad)}\n`);
    return 2;
  }
  const storeDir = resolve(storeDirectory(a['dense-store-dir']));
  let service: PlannerService;
  let url: string;
  try {
    service = new PlannerService({ host: a.host ?? DEFAULT_HOST, port: Number(port), storeDir, ...(a['allowed-host'] ? { allowedHosts: a['allowed-host'] } : {}), log: (l) => process.stderr.write(`${l}\n`) });
    url = await service.start();
  } catch (e) {
    process.stderr.write(`hil planner: cannot start: ${(e as Error).message}\n`);
    return 1;
  }
  runner(() => service.stop(), { name: 'hil planner', lifeline: a['lifeline-stdin'] ?? false }).ready(encodeJson({ planner: url, pid: process.pid, store: storeDir }));
  return -1;
}

const code = await main(process.argv.slice(2));
if (code >= 0) process.exit(code);
