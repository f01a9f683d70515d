// Entry point of the reference stack process (`hil serve`): compiles the machine configuration, starts the
// real-time core in its worker thread, and serves the control service on {socket_dir}/control.sock.
// Prints exactly one line beginning with "ready " when it answers, stops cleanly on SIGINT/SIGTERM (and,
// with --lifeline-stdin, when its parent closes stdin), removing its sockets.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadMachine } from './config/compile.ts';
import { CoreLink } from './service/core-link.ts';
import { LiveTiming } from './service/timing.ts';
import { RecordingTiming } from './service/recording-timing.ts';
import { ReplayedTiming } from './service/replay-timing.ts';
import { ControlService } from './service/service.ts';
import { encodeJson } from './json.ts';
import { programArgs, ROOT } from './paths.ts';
import type { ClockSpec, PriorityRequest } from './core/protocol.ts';
import { DRIVERS, driverNames } from '../drivers/index.ts';
import { replayRecording } from './replay/standalone.ts';
import { RecordingReader } from '../drivers/replay/format.ts';
import { CoreHost } from './core/host.ts';
import { loadCredentials, parseListen, RemoteStartupError, type RemoteFiles } from './service/remote.ts';
import type { RemoteJogFlags } from './service/remote-jog.ts';
import { doctorMain } from './doctor.ts';
import { runSessions, type Runner } from './sessions.ts';
import { warmThread } from './service/core-threads.ts';
import { parseNonzeroU64, parseProgramArgs, parseU64, runUntilStopped } from './primitives.ts';

const DEFAULT_MACHINE = join(ROOT, 'fixtures', 'machines', 'nine-axis.json');
/** The OpenSSL configuration that disables TLS session tickets (read at process start). */
const TLS_NO_TICKETS = join(ROOT, 'sims', 'service', 'tls-no-tickets.cnf');

/** Whether this process was started with TLS_NO_TICKETS (the flag, or OPENSSL_CONF naming it). */
function ticketsDisabled(): boolean {
  const flag = [...process.execArgv].reverse().find((a) => a.startsWith('--openssl-config='));
  const file = flag ? flag.slice('--openssl-config='.length) : process.env.OPENSSL_CONF;
  return file !== undefined && resolve(file) === TLS_NO_TICKETS;
}

/** The flags of `hil olp serve` that `hil serve --olp-port` passes through as --olp-<flag>. */
const OLP_FLAGS = ['program-store', 'robot-store', 'local-simulator', 'local-simulator-model', 'single-model', 'cad-worker', 'seam-worker', 'worker-pool', 'worker-timeout-ms', 'heartbeat-ms', 'lease-ms', 'weld-plan-timeout-ms', 'allowed-host'] as const;
const OLP_OPTIONS = Object.fromEntries(OLP_FLAGS.map((f) => [`olp-${f}`, { type: 'string' }])) as { [K in (typeof OLP_FLAGS)[number] as `olp-${K}`]: { type: 'string' } };

const USAGE = `usage: hil serve --socket-dir DIR [options]
       hil serve sessions

Starts the reference cell stack (control service + real-time core on the sim driver).
\`hil serve sessions\` is a stack host: it reads JSON commands on standard input and serves one stack
session after another in this process ({"t":"start","args":[...],"env":{...}} answers the session's ready
line, {"t":"stop"} answers "stopped", after "left [...]" when the session left resources running;
sims/sessions.ts). The sim and replay targets start their stacks in hosts (a recorded stack excepted).

  --socket-dir DIR        directory for control.sock, public/control.sock, jog.sock (required)
  --socket PATH           control socket path (default DIR/control.sock)
  --machine FILE          machine configuration JSON (default fixtures/machines/nine-axis.json)
  --config-cache DIR      where compiled configurations are kept (default $TMPDIR/cell-hil-config)
  --pair-id ID            pair id of the binding (default cell-sim-01)
  --pair-revision N       pair revision of the binding (default 1)
  --driver NAME           bus driver by registry name: sim (default), replay, ethercat, ethercat-fake
                          (the ethercat driver over a fake master: its own cycle thread on the realtime
                          clock, one bus cycle per core cycle on the fast and stepped clocks)
  --clock MODE            realtime (default), fast (with --speed), stepped (cycles run only when the
                          test channel asks: POST /step {"cycles": N})
  --speed X               fast clock: simulated time runs X times faster than the wall (X > 0)
  --spin-ns N             realtime clock: spin this long before each cycle deadline (default 0)
  --core-priority P       realtime clock: auto (default: SCHED_FIFO where permitted, else nice), rt,
                          nice, none
  --control-idle-timeout-ms N  idle connection timeout reported by Describe (default 90000; test hook)
  --sim-homing-ms N       sim and ethercat-fake drivers: duration of one native homing run (default 200; test hook)
  --arm-settle-ms N       how long an arm waits for enabled axes to reach operation enabled (default 500)
  --initial-generation N  start the application generation counter at N (test hook, default 0)
  --sim-fault KIND:AXIS   sim and ethercat-fake drivers: start with an injected fault (pdo_mapping_mismatch:AXIS), repeatable
  --capture-retention-ms N  telemetry capture retention (default the machine's; 0 turns capture off)
  --jog-socket on|off     serve DIR/jog.sock, the independent jog lane's datagram ingress (default on)
  --record FILE           record the session at the bus boundary into FILE (docs/recording.md)
  --record-run NAME       the run name written in the recording's header
  --replay-file FILE      --driver replay: the recording to play
  --replay-mode MODE      --driver replay: strict (default), closed-loop, open-loop or verify
  --replay-paced FILE     --driver replay: follow the recording (the replay target): the core runs on the
                          recorded frame times up to each recorded request and waits for the live one,
                          matches requests, replies and events, and writes its verdict to FILE as JSON
  --replay-speed X        with --replay-paced: auto (default): flat out to the next sync point, except
                          while the recorded test had a stream open (telemetry or events), where a cycle
                          never runs before its recorded wall time counted from where the replay last met
                          the live side; a number X: so paced throughout, the wall time divided by X
                          (1: what a test measures over wall time is what it measured when recorded); max:
                          flat out throughout
  --test-channel          expose the private test channel DIR/private/test.sock (fault injection)
  --planner-port P        also start the weld planner stub (document 2) as its own process on port P
                          (0 picks a free port; its URL is the ready line's "planner")
  --planner-host H        interface for that planner (default 127.0.0.1)
  --planner-store-dir DIR its dense store (default DIR/planner-store)
  --planner-allowed-host NAME  a further Host name that planner answers (hil planner serve --allowed-host),
                          repeatable
  --olp-port P            also start the offline programming server (document 3, hil olp serve) on
                          127.0.0.1:P, the whole of it: this stack as its single target, the planner above
                          (if any) for /weld-plan, the reference STEP worker for /cadquery/topology and /seam,
                          the local simulator (/local-simulator/*) and a program store (/programs*).
                          0 picks a free port; its URL is the ready line's "olp", its store "olp_programs"
  --olp-cells N           a cell catalogue of N cells (cell-a, cell-b, ...), every one this stack, pinned to
                          its binding and configuration (docs/profile.md "OLP server: cell catalogue"):
                          selection and fencing, as a deployment with several cells has them (default 1:
                          this stack as the single target, no catalogue)
  --olp-program-store DIR the OLP server's program store (default: a new temporary directory, removed
                          when the stack stops; give a directory to keep the programs)
  --olp-robot-store DIR   its robot descriptions (default fixtures/robots)
  --olp-local-simulator FILE  the local simulator's machine configuration (default this stack's --machine)
  --olp-local-simulator-model ID[@SHA], --olp-single-model ID[@SHA]
                          the local simulator's and this stack's robot model (default the machine
                          configuration's robot binding, if it has one)
  --olp-cad-worker CMD, --olp-seam-worker CMD (default builtin), --olp-worker-pool N,
  --olp-worker-timeout-ms N, --olp-heartbeat-ms N, --olp-lease-ms N, --olp-weld-plan-timeout-ms N,
  --olp-allowed-host NAME
                          passed to the OLP server as the same flags without "olp-" (hil olp serve --help)
  --lifeline-stdin        exit when standard input closes (used by targets that start the stack)
  --lifeline-fd N         stop the orderly way when descriptor N (a pipe from the parent) reaches end of
                          file: hil serve passes one, so the stack, its planner and its OLP server end with
                          hil serve however it ends (kill -9 included)
  --remote-listen HOST:PORT  also serve HTTPS with mutual TLS 1.3 there (port 0: any free port); needs
                          --remote-ca FILE (exactly one self-signed CA), --remote-cert FILE, --remote-key FILE,
                          --remote-crl FILE and --pair-id (make them with hil certs create-pair)
  --remote-jog-max-uncertainty-ns N, --remote-jog-drift-ppb N, --remote-jog-calibration-max-age-ns N
                          remote jog clock qualification (default 0; unless all three are nonzero every
                          remote jog frame is refused with jog_clock_unqualified)
  -h, --help              this text
`;

const REPLAY_USAGE = `usage: hil replay FILE [--mode strict|closed-loop|open-loop|verify] [--machine FILE] [--config-cache DIR]

Replays one recording (docs/recording.md) on a fresh core on the recording's own clock: the recorded requests at
their recorded cycles, the bus from the recording. Prints the divergence report as JSON; exit status 0 when
the whole recording replayed without divergence, 1 on a divergence, 2 on a usage or recording error.
closed-loop adds "closed_loop": the plants identified from the recording (delay, gain, wn, zeta, fit) and
the peak following error per axis, recorded and replayed.
`;

async function replayMain(argv: string[]): Promise<number> {
  const a = parseProgramArgs({ args: argv, allowPositionals: true, options: { mode: { type: 'string' }, machine: { type: 'string' }, 'config-cache': { type: 'string' } } }, REPLAY_USAGE);
  if (typeof a === 'number') return a;
  if (a.positionals.length !== 1) {
    process.stderr.write(REPLAY_USAGE);
    return 2;
  }
  const file = resolve(a.positionals[0]!);
  try {
    const machine = await loadMachine(resolve(a.values.machine ?? DEFAULT_MACHINE), resolve(a.values['config-cache'] ?? join(tmpdir(), 'cell-hil-config')));
    const { scan, out, closedLoop } = await replayRecording(file, machine, a.values.mode ?? 'strict');
    process.stdout.write(
      JSON.stringify(
        { file, mode: a.values.mode ?? 'strict', recorded: { driver: scan.header.driver, run: scan.header.run ?? null, frames: scan.frames, complete: scan.complete }, cycles: out.cycles, wall_ms: Math.round(out.wallMs), speedup: Number(out.speedup.toFixed(1)), divergence: out.divergence, ...(closedLoop ? { closed_loop: closedLoop } : {}) },
        null,
        2,
      ) + '\n',
    );
    return out.divergence?.kind === 'diverged' ? 1 : 0;
  } catch (e) {
    const err = e as Error & { code?: string; cause?: { code?: string; message?: string } };
    const code = err.cause?.code ?? err.code ?? err.name;
    process.stderr.write(`hil replay: ${code}: ${err.cause?.message ?? err.message}\n`);
    return 2;
  }
}

export async function main(argv: string[], runner: Runner = runUntilStopped): Promise<number> {
  if (argv[0] === 'replay') return replayMain(argv.slice(1));
  // A stack host (sims/sessions.ts): `hil serve` sessions one after another in this process.
  if (argv[0] === 'sessions' && runner === runUntilStopped) {
    // A host started to serve paced replays (harness/targets/program-host.ts warmHosts, the replay target): the
    // replayed core's thread is made now, while the harness has no session waiting, not in the first session.
    const prepare = () => {
      if (process.env.HIL_WARM_CORE === 'recorded') warmThread('recorded');
    };
    return runSessions((args, sessionRunner) => main(args, sessionRunner), { name: 'hil serve sessions', prepare });
  }
  if (argv[0] === 'doctor') return doctorMain(argv.slice(1), DEFAULT_MACHINE);
  const parsed = parseProgramArgs(
    {
      args: argv,
      options: {
        'socket-dir': { type: 'string' },
        socket: { type: 'string' },
        machine: { type: 'string' },
        'config-cache': { type: 'string' },
        'pair-id': { type: 'string' },
        'pair-revision': { type: 'string' },
        driver: { type: 'string' },
        speed: { type: 'string' },
        clock: { type: 'string' },
        'core-priority': { type: 'string' },
        'arm-settle-ms': { type: 'string' },
        'sim-homing-ms': { type: 'string' },
        'control-idle-timeout-ms': { type: 'string' },
        'spin-ns': { type: 'string' },
        'test-channel': { type: 'boolean' },
        'jog-socket': { type: 'string' },
        'initial-generation': { type: 'string' },
        'sim-fault': { type: 'string', multiple: true },
        'lifeline-stdin': { type: 'boolean' },
        'lifeline-fd': { type: 'string' },
        'capture-retention-ms': { type: 'string' },
        record: { type: 'string' },
        'record-run': { type: 'string' },
        'replay-file': { type: 'string' },
        'replay-mode': { type: 'string' },
        'remote-listen': { type: 'string' },
        'remote-ca': { type: 'string' },
        'remote-cert': { type: 'string' },
        'remote-key': { type: 'string' },
        'remote-crl': { type: 'string' },
        'remote-jog-max-uncertainty-ns': { type: 'string' },
        'remote-jog-drift-ppb': { type: 'string' },
        'remote-jog-calibration-max-age-ns': { type: 'string' },
        'replay-paced': { type: 'string' },
        'replay-speed': { type: 'string' },
        'planner-port': { type: 'string' },
        'planner-host': { type: 'string' },
        'planner-store-dir': { type: 'string' },
        'planner-allowed-host': { type: 'string', multiple: true },
        'olp-port': { type: 'string' },
        'olp-cells': { type: 'string' },
        ...OLP_OPTIONS,
      },
    },
    USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const args = parsed.values;
  const dir = args['socket-dir'];
  if (!dir) {
    process.stderr.write(`--socket-dir is required\n${USAGE}`);
    return 2;
  }
  const lifelineFd = args['lifeline-fd'];
  if (lifelineFd !== undefined && !/^([3-9]|[1-9][0-9]{1,3})$/.test(lifelineFd)) {
    process.stderr.write('--lifeline-fd must be a descriptor number 3..9999\n');
    return 2;
  }
  const revision = args['pair-revision'] ?? '1';
  if (parseNonzeroU64(revision) === undefined) {
    process.stderr.write('--pair-revision must be a nonzero uint64\n');
    return 2;
  }
  const initial = args['initial-generation'] ?? '0';
  if (parseU64(initial) === undefined) {
    process.stderr.write('--initial-generation must be a uint64\n');
    return 2;
  }
  const driver = args.driver ?? 'sim';
  if (!Object.hasOwn(DRIVERS, driver)) {
    process.stderr.write(`--driver ${driver}: no such bus driver; known: ${driverNames().join(', ')}\n`);
    return 2;
  }
  try {
    await DRIVERS[driver]!.load(); // an absent optional module is reported now, plainly, not by a dead core
  } catch (e) {
    const err = e as Error & { code?: string };
    process.stderr.write(`--driver ${driver}: ${err.code ?? err.name}: ${err.message}\n`);
    return 2;
  }
  const clockMode = args.clock ?? (args.speed !== undefined ? 'fast' : 'realtime');
  const speed = Number(args.speed ?? '1');
  const spinNs = Number(args['spin-ns'] ?? '0');
  let clock: ClockSpec;
  if (clockMode === 'realtime') {
    if (args.speed !== undefined && speed !== 1) {
      process.stderr.write('--speed needs --clock fast\n');
      return 2;
    }
    clock = { mode: 'realtime', spinNs };
  } else if (clockMode === 'fast') {
    if (!(speed > 0) || !Number.isFinite(speed)) {
      process.stderr.write('--speed must be a finite number > 0 (stepped is its own mode: --clock stepped)\n');
      return 2;
    }
    clock = { mode: 'fast', speed };
  } else if (clockMode === 'stepped') clock = { mode: 'stepped' };
  else {
    process.stderr.write(`--clock ${clockMode}: expected realtime, fast or stepped\n`);
    return 2;
  }
  if (!(spinNs >= 0) || !Number.isSafeInteger(spinNs)) {
    process.stderr.write('--spin-ns must be an integer >= 0\n');
    return 2;
  }
  const priority = args['core-priority'] ?? 'auto';
  if (!['auto', 'rt', 'nice', 'none'].includes(priority)) {
    process.stderr.write(`--core-priority ${priority}: expected auto, rt, nice or none\n`);
    return 2;
  }
  if (args['jog-socket'] !== undefined && !['on', 'off'].includes(args['jog-socket'])) {
    process.stderr.write(`--jog-socket ${args['jog-socket']}: expected on or off\n`);
    return 2;
  }
  const armSettle = args['arm-settle-ms'] ?? '500';
  if (!/^(0|[1-9][0-9]{0,5})$/.test(armSettle)) {
    process.stderr.write('--arm-settle-ms must be an integer 0..999999\n');
    return 2;
  }

  const homingMs = args['sim-homing-ms'];
  if (homingMs !== undefined && !/^[1-9][0-9]{0,8}$/.test(homingMs)) {
    process.stderr.write('--sim-homing-ms must be an integer 1..999999999\n');
    return 2;
  }

  const idleMs = args['control-idle-timeout-ms'];
  if (idleMs !== undefined && !/^[1-9][0-9]{0,8}$/.test(idleMs)) {
    process.stderr.write('--control-idle-timeout-ms must be an integer 1..999999999\n');
    return 2;
  }

  const retention = args['capture-retention-ms'];
  if (retention !== undefined && !/^(0|[1-9][0-9]{0,8})$/.test(retention)) {
    process.stderr.write('--capture-retention-ms must be an integer 0..999999999\n');
    return 2;
  }

  // Remote listener start-up checks (document 1 part 5 item 6): all required together, exit status 2.
  let remote: { host: string; port: number; files: RemoteFiles; jog: RemoteJogFlags } | undefined;
  const remoteFlags = ['remote-ca', 'remote-cert', 'remote-key', 'remote-crl', 'remote-jog-max-uncertainty-ns', 'remote-jog-drift-ppb', 'remote-jog-calibration-max-age-ns'] as const;
  const jogFlag = (f: 'remote-jog-max-uncertainty-ns' | 'remote-jog-drift-ppb' | 'remote-jog-calibration-max-age-ns'): bigint | string => {
    const v = args[f] ?? '0';
    return parseU64(v) ?? `--${f} must be a decimal uint64`;
  };
  if (args['remote-listen'] === undefined) {
    const stray = remoteFlags.find((f) => args[f] !== undefined);
    if (stray) {
      process.stderr.write(`hil serve: --${stray} needs --remote-listen\n`);
      return 2;
    }
  } else {
    const missing = [...remoteFlags.slice(0, 4), 'pair-id' as const].filter((f) => args[f] === undefined);
    if (missing.length) {
      process.stderr.write(`hil serve: --remote-listen needs ${missing.map((f) => `--${f}`).join(', ')}\n`);
      return 2;
    }
    // Document 1 part 5: TLS session tickets are disabled. Only an OpenSSL configuration read when the
    // process starts can stop TLS 1.3 tickets in Node 20 (sims/service/tls-no-tickets.cnf says why): a
    // listener in a process started without it would send them, so it is not started.
    if (!ticketsDisabled()) {
      process.stderr.write(`hil serve: --remote-listen needs the process started with node --openssl-config=${TLS_NO_TICKETS} (hil serve does this)\n`);
      return 2;
    }
    try {
      const files: RemoteFiles = { ca: resolve(args['remote-ca']!), cert: resolve(args['remote-cert']!), key: resolve(args['remote-key']!), crl: resolve(args['remote-crl']!) };
      const jog = [jogFlag('remote-jog-max-uncertainty-ns'), jogFlag('remote-jog-drift-ppb'), jogFlag('remote-jog-calibration-max-age-ns')];
      const badJog = jog.find((x) => typeof x === 'string');
      if (badJog !== undefined) throw new RemoteStartupError(badJog as string);
      const [maxUncertaintyNs, driftPpb, calibrationMaxAgeNs] = jog as bigint[];
      remote = { ...parseListen(args['remote-listen']), files, jog: { maxUncertaintyNs: maxUncertaintyNs!, driftPpb: driftPpb!, calibrationMaxAgeNs: calibrationMaxAgeNs! } };
      loadCredentials(files);
    } catch (e) {
      if (!(e instanceof RemoteStartupError)) throw e;
      process.stderr.write(`hil serve: remote listener: ${e.message}\n`);
      return 2;
    }
  }

  let machine;
  try {
    machine = await loadMachine(resolve(args.machine ?? DEFAULT_MACHINE), resolve(args['config-cache'] ?? join(tmpdir(), 'cell-hil-config')));
  } catch (e) {
    const err = e as Error & { code?: string; path?: string };
    process.stderr.write(`machine configuration refused: ${err.code ?? 'error'}: ${err.message}\n`);
    return 2;
  }

  const startFaults: Array<{ kind: 'pdo_mapping_mismatch'; axis: number }> = [];
  for (const f of args['sim-fault'] ?? []) {
    const m = /^pdo_mapping_mismatch:(\d+)$/.exec(f);
    if (!m || Number(m[1]) >= machine.axes.length) {
      process.stderr.write(`--sim-fault ${f}: expected pdo_mapping_mismatch:<axis index>\n`);
      return 2;
    }
    startFaults.push({ kind: 'pdo_mapping_mismatch', axis: Number(m[1]) });
  }
  if (driver === 'replay' && !args['replay-file']) {
    process.stderr.write('--driver replay needs --replay-file FILE (the recording to play)\n');
    return 2;
  }
  if (args['replay-paced'] !== undefined) {
    if (driver !== 'replay') {
      process.stderr.write('--replay-paced needs --driver replay\n');
      return 2;
    }
    if (args.clock !== undefined || args.speed !== undefined) {
      process.stderr.write('--replay-paced runs on the recorded frame times: no --clock or --speed\n');
      return 2;
    }
    clock = { mode: 'recorded', ...(recordedOnSteps(resolve(args['replay-file']!)) ? { steps: true } : {}) };
  }
  const replaySpeed = args['replay-speed'] ?? 'auto';
  if (args['replay-speed'] !== undefined && args['replay-paced'] === undefined) {
    process.stderr.write('--replay-speed needs --replay-paced\n');
    return 2;
  }
  if (replaySpeed !== 'max' && replaySpeed !== 'auto' && !(/^[0-9]+(\.[0-9]+)?$/.test(replaySpeed) && Number(replaySpeed) > 0)) {
    process.stderr.write(`--replay-speed must be auto, a positive number or max, got ${replaySpeed}\n`);
    return 2;
  }
  const plannerPort = args['planner-port'];
  if (plannerPort !== undefined && (!/^(0|[1-9][0-9]{0,4})$/.test(plannerPort) || Number(plannerPort) > 65535)) {
    process.stderr.write('--planner-port must be an integer 0..65535\n');
    return 2;
  }
  const plannerHosts = args['planner-allowed-host'] ?? [];
  if (plannerHosts.length && plannerPort === undefined) {
    process.stderr.write('hil serve: --planner-allowed-host needs --planner-port\n');
    return 2;
  }
  const olpPort = args['olp-port'];
  if (olpPort !== undefined && (!/^(0|[1-9][0-9]{0,4})$/.test(olpPort) || Number(olpPort) > 65535)) {
    process.stderr.write('--olp-port must be an integer 0..65535\n');
    return 2;
  }
  const olpCells = args['olp-cells'] === undefined ? 1 : Number(args['olp-cells']);
  if (!Number.isInteger(olpCells) || olpCells < 1 || olpCells > 26 || (args['olp-cells'] !== undefined && !/^[1-9][0-9]?$/.test(args['olp-cells']))) {
    process.stderr.write('--olp-cells must be an integer 1..26\n');
    return 2;
  }
  const strayOlp = [...OLP_FLAGS, 'cells' as const].find((f) => args[`olp-${f}`] !== undefined);
  if (olpPort === undefined && strayOlp) {
    process.stderr.write(`hil serve: --olp-${strayOlp} needs --olp-port\n`);
    return 2;
  }
  // The service's clock and timed decisions (sims/service/timing.ts), picked here once: on a paced replay
  // the recorded ones the pacer cues, else the host clock with every decision taken at once.
  const timing = args['replay-paced'] !== undefined ? new ReplayedTiming(Boolean(args.record)) : args.record ? new RecordingTiming() : new LiveTiming();
  const core = new CoreLink(machine, {
    driver,
    ...(driver === 'sim' ? { driverParams: { startFaults, ...(homingMs !== undefined ? { homingNs: BigInt(homingMs) * 1_000_000n } : {}) } } : {}),
    ...(driver === 'ethercat-fake'
      ? { driverParams: { cycle: clock.mode === 'realtime' ? 'thread' : 'lockstep', startFaults, ...(homingMs !== undefined ? { homingNs: BigInt(homingMs) * 1_000_000n } : {}) } }
      : {}),
    ...(driver === 'replay'
      ? { driverParams: { file: resolve(args['replay-file'] ?? ''), mode: args['replay-mode'] ?? 'strict', machine_sha256: machine.machine_sha256, configuration_sha256: machine.configuration_sha256 } }
      : {}),
    ...(args['replay-paced'] !== undefined ? { replayPace: { verdictFile: resolve(args['replay-paced']), ...(replaySpeed === 'max' ? {} : replaySpeed === 'auto' ? { speed: 1, watched: true } : { speed: Number(replaySpeed) }) } } : {}),
    ...(args.record ? { record: { path: resolve(args.record), ...(args['record-run'] ? { run: args['record-run'] } : {}) } } : {}),
    clock,
    priority: priority as PriorityRequest,
    armSettleNs: BigInt(armSettle) * 1_000_000n,
    ...(retention !== undefined ? { captureRetentionMs: Number(retention) } : {}),
  }, timing);
  const service = new ControlService({
    socketDir: resolve(dir),
    socketPath: args.socket ? resolve(args.socket) : undefined,
    machine,
    pairId: args['pair-id'] ?? 'cell-sim-01',
    pairRevision: BigInt(revision),
    core,
    testChannel: args['test-channel'] ?? false,
    jogSocket: (args['jog-socket'] ?? 'on') === 'on',
    initialGeneration: BigInt(initial),
    ...(idleMs !== undefined ? { controlIdleTimeoutNs: BigInt(idleMs) * 1_000_000n } : {}),
    remote,
  });

  let planner: PlannerChild | undefined;
  let olp: PlannerChild | undefined;
  let olpStore = '';
  let olpTempStore: string | undefined;
  let olpCatalogue: string | undefined;
  // Signals (the burst, the second and the third) and the lifeline: sims/primitives.ts runUntilStopped.
  const run = runner(
    (why) =>
      Promise.all([olp?.stop(), service.stop(), planner?.stop()])
        .then(() => undefined)
        .catch((e: Error) => process.stderr.write(`shutdown: ${e.message}\n`))
        .then(() => (olpTempStore ? rm(olpTempStore, { recursive: true, force: true }) : undefined))
        .then(() => (olpCatalogue ? rm(olpCatalogue, { recursive: true, force: true }) : undefined))
        .then(() => {
          process.stderr.write(`hil serve: stopped (${why})\n`);
        }),
    { name: 'hil serve', lifeline: args['lifeline-stdin'] ?? false, ...(lifelineFd !== undefined ? { lifelineFd: Number(lifelineFd) } : {}) },
  );

  try {
    await service.start();
    if (plannerPort !== undefined) planner = await startPlanner(args['planner-host'] ?? '127.0.0.1', plannerPort, resolve(args['planner-store-dir'] ?? join(resolve(dir), 'planner-store')), plannerHosts);
    if (olpPort !== undefined) {
      if (args['olp-program-store'] === undefined) olpTempStore = await mkdtemp(join(tmpdir(), 'hil-olp-programs-'));
      // The whole OLP server (document 3): workers, local simulator and program store by default; the user's
      // --olp-<flag> wins over each default, and the OLP server checks every value as hil olp serve does.
      const robot = machine.robot ? `${machine.robot.model_id}${machine.robot.description_sha256 ? `@${machine.robot.description_sha256}` : ''}` : undefined;
      const given: Partial<Record<(typeof OLP_FLAGS)[number], string>> = {
        'program-store': olpTempStore,
        'robot-store': join(ROOT, 'fixtures', 'robots'),
        'local-simulator': resolve(args.machine ?? DEFAULT_MACHINE),
        'local-simulator-model': robot,
        'single-model': robot,
        'cad-worker': 'builtin',
        'seam-worker': 'builtin',
      };
      for (const f of OLP_FLAGS) given[f] = args[`olp-${f}`] ?? given[f];
      let target = ['--control-socket', service.socketPath];
      if (olpCells > 1) {
        // A catalogue of this stack under several names, pinned to its own binding: a deployment with
        // cells to select and fence, for running the OLP suites against this server as someone else's.
        const [model, sha] = (given['single-model'] ?? `sim-nine-axis@sha256:${createHash('sha256').update(readFileSync(join(ROOT, 'fixtures', 'robots', 'sim-nine-axis.urdf'))).digest('hex')}`).split('@');
        const cells = Array.from({ length: olpCells }, (_x, i) => ({
          cell_id: `cell-${String.fromCharCode(97 + i)}`,
          model_id: model,
          ...(sha ? { robot_description_sha256: sha } : {}),
          mode: machine.backend,
          backend: 'core',
          pair_id: args['pair-id'] ?? 'cell-sim-01',
          configuration_sha256: machine.configuration_sha256,
          control: { socket: service.socketPath },
        }));
        olpCatalogue = await mkdtemp(join(tmpdir(), 'hil-olp-catalogue-'));
        await writeFile(join(olpCatalogue, 'cells.json'), JSON.stringify({ cells }, null, 2));
        target = ['--catalogue', join(olpCatalogue, 'cells.json')];
        delete given['single-model'];
      }
      const olpArgs = ['serve', '--listen', `127.0.0.1:${olpPort}`, ...target, ...(planner ? ['--planner-url', planner.url] : [])];
      for (const f of OLP_FLAGS) if (given[f] !== undefined) olpArgs.push(`--${f}`, given[f]!);
      olp = await startChild('olp', olpArgs, (r) => String(r.olp));
      olpStore = given['program-store']!;
    }
  } catch (e) {
    process.stderr.write(`hil serve: cannot start: ${(e as Error).message}\n`);
    await run.stop('start failed');
    // A flag the OLP server refused is a usage error, as it is for hil olp serve; a socket directory another
    // service holds (or others may write) is 3 (sims/service/socket-dir.ts).
    const exitCode = (e as { exitCode?: number }).exitCode;
    return exitCode === 2 || exitCode === 3 ? exitCode : 1;
  }
  run.ready(
    encodeJson({
        control: service.socketPath,
        public: service.publicLink,
        test_channel: args['test-channel'] ? service.testSocketPath : '',
        jog: service.jog.served ? service.jog.socketPath : '',
        pid: process.pid,
        adapter_incarnation: service.adapterIncarnation,
        driver: core.driverName,
        clock: core.clockMode,
        machine_sha256: machine.machine_sha256,
        configuration_sha256: machine.configuration_sha256,
        remote: service.remoteAddress ? `${service.remoteAddress.host}:${service.remoteAddress.port}` : '',
        ...(planner ? { planner: planner.url, planner_pid: planner.pid } : {}),
        ...(olp ? { olp: olp.url, olp_pid: olp.pid, olp_programs: olpStore } : {}),
      }),
  );
  return -1; // keep running
}

interface PlannerChild {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** The weld planner stub as its own process (document 2: separate from the control service). */
function startPlanner(host: string, port: string, storeDir: string, allowedHosts: readonly string[]): Promise<PlannerChild> {
  return startChild('planner', ['serve', '--host', host, '--port', port, '--dense-store-dir', storeDir, ...allowedHosts.flatMap((h) => ['--allowed-host', h])], (r) => String(r.planner));
}

/** A reference program as its own process with a lifeline, once it printed its ready line. */
function startChild(name: 'planner' | 'olp', argv: string[], urlOf: (ready: Record<string, unknown>) => string): Promise<PlannerChild> {
  const child = spawn(process.execPath, [...programArgs(name), ...argv, '--lifeline-stdin'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('ready '));
      if (!line) return;
      const r = JSON.parse(line.slice(6)) as Record<string, unknown> & { pid: number };
      resolve({
        url: urlOf(r),
        pid: r.pid,
        async stop() {
          child.stdin!.end();
          const k = setTimeout(() => child.kill('SIGKILL'), 5_000);
          await exited;
          clearTimeout(k);
        },
      });
    });
    void exited.then((code) => reject(Object.assign(new Error(`the ${name === 'olp' ? 'OLP server' : 'weld planner'} exited before it was ready (status ${code})`), { exitCode: code })));
  });
}

const code = await main(process.argv.slice(2));
if (code >= 0) process.exit(code);

/** Whether a recording was made on the stepped clock with its steps (format 3); an unreadable one is the driver's to report. */
function recordedOnSteps(file: string): boolean {
  try {
    const h = RecordingReader.header(file);
    return h.clock === 'stepped' && h.format >= 3;
  } catch {
    return false;
  }
}
