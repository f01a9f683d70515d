// Remote listener stacks (document 1 part 5): a reference stack with `--remote-listen` and a pair of
// certificates made for it, which the remote suites start themselves (they need flags no file target has),
// or someone else's listener that the run reaches. The kind of target decides which: the sim target starts
// one, on a recorded run recording it as one of the current test's variants; the replay target replays it
// from that recording with a fresh pair (the certificates live in the service, which runs live; the
// recording is the core's); the external target reaches the listener its owner started on the files of a
// pair directory made by `hil certs create-pair` (TargetDescriptor.remoteListener), as it runs; a test that
// needs the service started with flags of its own (`started`: the remote jog clock flags, document 1 part 5
// item 6) gets someone else's service started by the run's --serve-command on a fresh pair, in real time (no
// clock or machine of the test's choosing); a rig cannot, and the suites skip with the reason.

import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { makeTempDir, removeTempDir } from './exit-cleanup.ts';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { ControlClient } from '../clients/control.ts';
import type { PairFiles } from '../certs.ts';
import { HarnessError } from '../errors.ts';
import { lateness } from '../lateness.ts';
import { stringifyExact } from '../oracle/json.ts';
import { targetFromEnv } from './index.ts';
import { referenceCommand, referenceEnv, ROOT } from './reference.ts';
import { stackOptionsJson } from './recording-store.ts';
import { variantStart, type StackProcess } from './sim.ts';
import type { RemoteListener, TestStack } from './types.ts';
import { describeVariant, parseVariant, type VariantOptions } from './variant.ts';

/**
 * A service with a remote listener (document 1 part 5): a reference stack on 127.0.0.1, an ephemeral port
 * and a fresh pair, or someone else's service at the address and with the pair the run names.
 */
export interface RemoteStack {
  pair: PairFiles & { pair_id: string };
  host: string;
  port: number;
  /** https://127.0.0.1:<port> */
  origin: string;
  /** Issue a client certificate for a principal of this pair (once per principal) and return an HTTPS client. */
  client(principal: string): Promise<ControlClient>;
  /** The TLS material of a principal (issued on first use), for clients other than the control client. */
  creds(principal: string): Promise<{ host: string; port: number; cert: string; key: string; ca: string }>;
  /** A control client on the stack's Unix socket (the local transport). */
  local(): ControlClient;
  /** Its core runs on the stepped clock and `step` runs its cycles; false: its cycles run in real time. */
  readonly stepped: boolean;
  /** Run cycles on the stepped clock (the private test channel); returns the core's now in ns. */
  step(cycles: number): Promise<bigint>;
  /** The service's log since the stack was opened ('' when the run cannot read it: `logged`). */
  stderr(): string;
  /** The service's log can be read: a stack this harness started, or a log file the run named. */
  readonly logged: boolean;
  /** Stop it (someone else's: close the clients only). */
  stop(opts?: { keepDir?: boolean }): Promise<void>;
  /** Begin the orderly stop, as closing the stack's lifeline does (a stack this harness started). */
  beginStop(): void;
  /** Bytes someone else's listener serves as a compiled resource, when the run named the file (RemoteListener.resource). */
  readonly knownResource?: Buffer;
}

export interface RemoteOptions {
  /** The binding's pair id (default cell-remote-01). */
  pairId?: string;
  /** More `hil serve` arguments (a machine, a configuration cache, the remote jog clock flags). */
  args?: string[];
  /** More environment for the stack (not part of what is recorded). */
  env?: Record<string, string>;
  /** Variant options among the flags (the stepped clock, a machine...): the file needs them. */
  variant?: VariantOptions;
  /**
   * The file's tests need no cycle of the stack's core (its listener's handshakes, sessions, resources and
   * HTTP bounds): a stack this harness starts runs on the stepped clock and costs no CPU while the file
   * runs; someone else's listener is taken as it runs.
   */
  cycleFree?: boolean;
  /** The cell's link profile (document 3 control.link_profile), when the test judges a bound it decides. */
  linkProfile?: 'lan' | 'internet';
  /**
   * The service must run with exactly `args` (its remote jog clock flags, say), not be a listener the run
   * reaches as its owner configured it: on the external target it is started through --serve-command.
   */
  started?: boolean;
}

/**
 * The machine of a stack this harness starts on a link profile: the fixture cell, whose control.link_profile
 * is lan, and the same cell on internet (whichever machine the run names otherwise).
 */
const PROFILE_MACHINE = {
  lan: new URL('../../fixtures/machines/nine-axis.json', import.meta.url).pathname,
  internet: new URL('../../fixtures/machines/nine-axis-internet.json', import.meta.url).pathname,
};

/** The options of a reference stack that meets `o` (its flags, with the variant a cycle-free file may take). */
function ownOptions(o: RemoteOptions): RemoteOptions {
  const variant = o.variant ?? (o.cycleFree ? { clock: 'stepped' as const } : undefined);
  const args = [...(o.linkProfile ? ['--machine', PROFILE_MACHINE[o.linkProfile]] : []), ...(o.args ?? [])];
  return { ...(o.pairId ? { pairId: o.pairId } : {}), ...(args.length ? { args } : {}), ...(o.env ? { env: o.env } : {}), ...(variant ? { variant } : {}) };
}

/** The TestStack of a remote stack, without its pair's files (made only when it starts). */
function remoteTestStack(o: RemoteOptions): Pick<TestStack, 'options' | 'variant'> {
  const variant = o.variant ? parseVariant(o.variant) : undefined;
  return { options: stackOptionsJson('remote', { pairId: o.pairId ?? 'cell-remote-01', args: o.args, variant }), ...(variant ? { variant } : {}) };
}

/** The target the environment names starts stacks of the reference system, so a test can start its own. */
export function startsStacks(env: NodeJS.ProcessEnv = process.env): boolean {
  return targetFromEnv(env).abilities.testStacks;
}

/**
 * A stack with `hil serve` flags of the test's own and nothing else (the listener of a pair that the
 * certificate tooling made, the default remote port), through the target the environment names: recorded
 * as one of the test's variants on a recorded run, replayed from it on the replay target.
 */
export async function startOwnStack(args: string[]): Promise<StackProcess> {
  const t = targetFromEnv();
  const s: TestStack = { start: { args }, options: stackOptionsJson('stack', { args }) };
  const why = t.startStack && t.cannotStartStack ? t.cannotStartStack(s) : `target ${t.name} cannot start a stack of the reference system`;
  if (why !== undefined) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', why);
  return t.startStack!(s);
}

/** A word of a POSIX shell command line: single-quoted, its own quotes escaped. */
export const shellWord = (s: string): string => `'${s.replaceAll("'", "'\\''")}'`;

/** How a test runs the service with flags of its own until it exits (the start-up checks, document 1 part 5 item 6). */
export interface ServiceStart {
  /** The process to spawn for these flags, its sockets in `socketDir`; spawn it detached and stop its group. */
  spawn(socketDir: string, args: readonly string[]): { file: string; args: string[]; env: NodeJS.ProcessEnv; cwd: string };
}

/**
 * How the target the environment names starts the service with flags of a test's choosing, or why it
 * cannot (a skip reason): the reference stack where the target starts stacks; on the external target the
 * shell command of `--serve-command`, `{socket_dir}` replaced, the test's flags appended.
 */
export function serviceStart(env: NodeJS.ProcessEnv = process.env): ServiceStart | string {
  const t = targetFromEnv(env);
  if (t.abilities.testStacks) {
    return { spawn: (dir, args) => ({ file: process.execPath, args: [...referenceCommand('stack'), '--socket-dir', dir, '--lifeline-stdin', ...args], env: referenceEnv(), cwd: ROOT }) };
  }
  const c = t.serviceCommand?.();
  if (c === undefined) return `target ${t.name} cannot start a service with flags of a test's choosing`;
  if (typeof c !== 'string') return c.why;
  return { spawn: (dir, args) => ({ file: '/bin/sh', args: ['-c', `${c.replaceAll('{socket_dir}', shellWord(dir))} "$@"`, 'sh', ...args], env: { ...process.env }, cwd: process.cwd() }) };
}

/** Why the target the environment names cannot start this remote stack, or reach one like it (a skip reason), or undefined. */
export function cannotStartRemote(o: RemoteOptions = {}, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const t = targetFromEnv(env);
  if (o.started && !t.abilities.testStacks && t.serviceCommand) return cannotServe(t.name, o, env);
  if (t.remoteListener) {
    const l = t.remoteListener();
    return typeof l === 'string' ? l : cannotReach(t.name, l, o);
  }
  if (!t.startStack || !t.cannotStartStack) return `target ${t.name} cannot start a stack with a remote listener and its own fresh certificates: only a target that starts the reference stack can`;
  return t.cannotStartStack({ start: { args: [] }, ...remoteTestStack(ownOptions(o)) });
}

/** Why someone else's listener is not the stack `o` asks for (what the test would have started), or undefined. */
function cannotReach(target: string, l: RemoteListener, o: RemoteOptions): string | undefined {
  const asked = [...(o.args?.length ? [`hil serve flags ${o.args.join(' ')}`] : []), ...beyondFlags(o)];
  if (o.pairId !== undefined && o.pairId !== pairIdOf(l.pairDir)) asked.push(`pair id ${o.pairId}`);
  if (asked.length) return `target ${target} reaches a remote listener someone else started: it cannot start one with ${asked.join(' and ')}`;
  if (o.linkProfile !== undefined && o.linkProfile !== l.linkProfile) return `target ${target}'s remote listener serves a cell on the ${l.linkProfile} link profile (--remote-link-profile), not ${o.linkProfile}`;
  return undefined;
}

/** What `o` asks of a service beyond its flags (a variant, an environment), which someone else's cannot be given, in words. */
function beyondFlags(o: RemoteOptions): string[] {
  return [...(o.variant ? [describeVariant(parseVariant(o.variant))] : []), ...(o.env && Object.keys(o.env).length ? [`environment ${Object.keys(o.env).join(', ')}`] : [])];
}

/** Why the run's --serve-command cannot start the service `o` asks for (someone else's, in real time), or undefined. */
function cannotServe(target: string, o: RemoteOptions, env: NodeJS.ProcessEnv): string | undefined {
  const how = serviceStart(env);
  if (typeof how === 'string') return how;
  const asked = beyondFlags(o);
  if (asked.length) return `target ${target} starts someone else's service through --serve-command: it cannot give it ${asked.join(' and ')}`;
  return undefined;
}

/** The pair id a pair directory's pair.json names (harness/certs.ts layout). */
function pairIdOf(dir: string): string {
  const file = join(dir, 'pair.json');
  const state = JSON.parse(readFileSync(file, 'utf8')) as { pair_id?: unknown };
  if (typeof state.pair_id !== 'string') throw new HarnessError('HIL_ERR_TARGET_OPTION', `${file} names no pair_id: make the pair directory with hil certs create-pair`);
  return state.pair_id;
}

/**
 * Start a stack with `--remote-listen 127.0.0.1:0` and a pair made by the certificate tooling in
 * `<dir>/pair` (the stack's own temporary directory, removed when it stops), through the target the
 * environment names (see the head of this file); on the external target, the listener the run names instead.
 * Self-contained: the stack's other options come from `args` and, when given, a variant's options. Rejects
 * with HIL_ERR_VARIANT_UNSUPPORTED and the reason when the target cannot start it (cannotStartRemote).
 */
export async function startRemoteStack(o: RemoteOptions = {}): Promise<RemoteStack> {
  const why = cannotStartRemote(o);
  if (why !== undefined) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', why);
  const target = targetFromEnv();
  if (o.started && !target.abilities.testStacks) return startServedRemote(o);
  const listener = target.remoteListener?.();
  return typeof listener === 'object' ? reachRemote(listener) : startOwnRemote(ownOptions(o));
}

/** The remote listener's start-up flags on a pair's files (document 1 part 5 item 6). */
function listenerFlags(listen: string, pair: PairFiles, pairId: string): string[] {
  return ['--remote-listen', listen, '--remote-ca', pair.ca, '--remote-cert', pair.cert, '--remote-key', pair.key, '--remote-crl', pair.crl, '--pair-id', pairId];
}

/** A TCP port nobody on 127.0.0.1 listens on now (the service is told it: document 1 gives no way to ask). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** A process of the group is still there (signal 0 reaches it; a zombie left unreaped counts until reaped). */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** How long someone else's service may take to answer on its remote listener after its start. */
const SERVED_START_MS = 30_000;

/**
 * Someone else's service started through the run's --serve-command with a remote listener on 127.0.0.1 and
 * a fresh pair (document 1 part 5 item 6: the listener, credential and pair flags, then `o.args`), its
 * control socket {socket_dir}/control.sock (part 1). Ready once a client of the pair gets Describe; its
 * output is its log. Stopped with SIGTERM to its process group (SIGKILL 5 s later).
 */
async function startServedRemote(o: RemoteOptions): Promise<RemoteStack> {
  const how = serviceStart();
  if (typeof how === 'string') throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', how);
  const pairId = o.pairId ?? 'cell-remote-01';
  const dir = await makeTempDir('hil-served-');
  const socketDir = join(dir, 'sock');
  const { createPair } = await import('../certs.ts');
  let log = '';
  let child: ReturnType<typeof spawn> | undefined;
  let exited: number | null | undefined;
  let exit: Promise<void> = Promise.resolve();
  const gone = () => removeTempDir(dir);
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child!.pid!, signal);
    } catch {
      // already gone
    }
  };
  let c: Awaited<ReturnType<typeof clientsOf>> | undefined;
  try {
    const pair = { ...(await createPair({ dir: join(dir, 'pair'), pairId })), pair_id: pairId };
    await mkdir(socketDir);
    const port = await freePort();
    const args = [...listenerFlags(`127.0.0.1:${port}`, pair, pairId), ...(o.args ?? [])];
    const sp = how.spawn(socketDir, args);
    // Detached: its own process group, so that a stop reaches whatever the command started.
    child = spawn(sp.file, sp.args, { cwd: sp.cwd, env: sp.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    for (const stream of [child.stdout!, child.stderr!]) stream.setEncoding('utf8').on('data', (d: string) => (log += d));
    exit = new Promise<void>((r) => child!.once('exit', (code) => ((exited = code), r())));
    c = await clientsOf(pair, '127.0.0.1', port);
    const probe = await c.client('hil-reach');
    const control = join(socketDir, 'control.sock');
    const until = Date.now() + SERVED_START_MS;
    for (;;) {
      if (exited !== undefined) throw new HarnessError('HIL_ERR_TARGET_START', `--serve-command with a remote listener exited with status ${exited} before it answered: ${log.trim().split('\n').slice(-3).join(' | ')}`);
      const up = existsSync(control) && (await probe.describe().then((d) => d.status === 200, () => false));
      if (up) break;
      if (Date.now() > until) throw new HarnessError('HIL_ERR_TARGET_START', `--serve-command with a remote listener on 127.0.0.1:${port}: no Describe on it and its control socket within ${SERVED_START_MS / 1000} s: ${log.trim().split('\n').slice(-3).join(' | ')}`);
      await Promise.race([exit, new Promise((r) => setTimeout(r, 100))]);
    }
    const clients = c;
    let stopped = false;
    return {
      ...clients,
      pair,
      host: '127.0.0.1',
      port,
      stepped: false,
      logged: true,
      stderr: () => log,
      local: () => clients.add(new ControlClient(control)),
      step: () => Promise.reject(new HarnessError('HIL_ERR_TARGET_NO_ABILITY', 'a service started through --serve-command has no stepped clock: it runs in real time')),
      beginStop: () => killGroup('SIGTERM'),
      async stop() {
        if (stopped) return;
        stopped = true;
        await clients.close();
        // The command's shell may end before the service it started has: stopped is when the whole process
        // group is gone (its listener closed), SIGKILL 5 s after SIGTERM.
        // A zombie nobody reaps answers signal 0 too: the wait ends a second after the SIGKILL whatever remains.
        killGroup('SIGTERM');
        const started = Date.now();
        let killed = false;
        while (groupAlive(child!.pid!) && Date.now() - started < 6_000) {
          if (!killed && Date.now() - started > 5_000) {
            killGroup('SIGKILL');
            killed = true;
          }
          await new Promise((r) => setTimeout(r, 20));
        }
        await exit;
        await gone();
      },
    };
  } catch (e) {
    await c?.close();
    if (child && exited === undefined) {
      killGroup('SIGKILL');
      await exit;
    }
    await gone();
    throw e;
  }
}

/** Issues client credentials of a pair on first use and hands out HTTPS clients, closed with the stack. */
async function clientsOf(pair: PairFiles, host: string, port: number): Promise<Pick<RemoteStack, 'client' | 'creds' | 'origin'> & { close(): Promise<void>; add(c: ControlClient): ControlClient }> {
  // Loaded here, not at the top: the certificate library is a few hundred modules every worker would
  // load, and only the remote suites open a remote stack.
  const { clientFiles, issueClient } = await import('../certs.ts');
  const origin = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const clients: ControlClient[] = [];
  const issued = new Set<string>();
  const creds = async (principal: string) => {
    if (!issued.has(principal)) {
      await issueClient({ dir: pair.dir, principal });
      issued.add(principal);
    }
    const f = clientFiles(pair.dir, principal);
    return { host, port, cert: readFileSync(f.cert, 'utf8'), key: readFileSync(f.key, 'utf8'), ca: readFileSync(pair.ca, 'utf8') };
  };
  const add = (c: ControlClient) => (clients.push(c), c);
  return {
    origin,
    creds,
    async client(principal) {
      const t = await creds(principal);
      return add(ControlClient.https({ origin, cert: t.cert, key: t.key, ca: t.ca }));
    },
    add,
    close: async () => void (await Promise.all(clients.splice(0).map((c) => c.close()))),
  };
}

/**
 * Someone else's listener (TargetDescriptor.remoteListener): its pair directory's files, its control socket
 * for the local transport, and its log file's lines written since it was opened, when the run named one.
 */
async function reachRemote(l: RemoteListener): Promise<RemoteStack> {
  const { pairFiles } = await import('../certs.ts');
  const pair = { ...pairFiles(l.pairDir), pair_id: pairIdOf(l.pairDir) };
  const u = new URL(l.url);
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(u.port || 443);
  const c = await clientsOf(pair, host, port);
  const size = (f: string) => {
    try {
      return statSync(f).size;
    } catch {
      return 0;
    }
  };
  const logFrom = l.log ? size(l.log) : 0;
  // A listener that does not answer a client of its pair would pass every refusal a suite checks (no HTTP
  // byte comes back from a closed port either): it is the run's error, said once, before any test.
  const probe = await c.client('hil-reach');
  try {
    const d = await probe.describe();
    if (d.status !== 200) throw new HarnessError('HIL_ERR_TARGET_START', `HTTP ${d.status}`);
  } catch (e) {
    await c.close();
    throw new HarnessError('HIL_ERR_TARGET_START', `no remote listener answers GET /v1/describe at ${l.url} for a client certificate of pair ${pair.pair_id} (${l.pairDir}): ${(e as Error).message}`, { cause: e });
  }
  const noAbility = (what: string) => new HarnessError('HIL_ERR_TARGET_NO_ABILITY', `the external target's remote listener ${what}: it is a service someone else started`);
  return {
    ...c,
    ...(l.resource !== undefined ? { knownResource: readFileSync(l.resource) } : {}),
    pair,
    host,
    port,
    stepped: false,
    logged: l.log !== undefined,
    local: () => c.add(new ControlClient(l.socket)),
    step: () => Promise.reject(noAbility('has no stepped clock')),
    stderr: () => {
      if (!l.log) return '';
      try {
        return readFileSync(l.log).subarray(logFrom).toString('utf8');
      } catch {
        return '';
      }
    },
    stop: () => c.close(),
    beginStop: () => {
      throw noAbility('cannot be stopped by the harness');
    },
  };
}

/** A reference stack with a remote listener and a fresh pair, started through the target (see startRemoteStack). */
async function startOwnRemote(o: RemoteOptions): Promise<RemoteStack> {
  const target = targetFromEnv();
  const pairId = o.pairId ?? 'cell-remote-01';
  const dir = await makeTempDir('hil-sim-');
  let pair: PairFiles & { pair_id: string };
  let stack: StackProcess;
  const { createPair } = await import('../certs.ts');
  try {
    pair = await createPair({ dir: join(dir, 'pair'), pairId });
    const t = remoteTestStack(o);
    const v = t.variant ? variantStart(t.variant) : { args: [] as string[], env: undefined };
    const args = [
      '--test-channel',
      ...listenerFlags('127.0.0.1:0', pair, pairId),
      ...v.args,
      ...(o.args ?? []),
    ];
    stack = await target.startStack!({ ...t, start: { args, reuseDir: dir, env: async (d) => ({ ...((await v.env?.(d)) ?? {}), ...(o.env ?? {}) }) } });
  } catch (e) {
    await removeTempDir(dir);
    throw e;
  }
  const m = /^(.*):([0-9]+)$/.exec(stack.ready.remote ?? '');
  if (!m) {
    await stack.stop();
    throw new HarnessError('HIL_ERR_TARGET_START', `stack reported no remote listener in its ready line (${JSON.stringify(stack.ready.remote)})`);
  }
  const [host, port] = [m[1]!, Number(m[2])];
  // Its process's run-queue wait, for the timing checks a slow host may explain (lateness.ts hostBound targetOnHost).
  const unwatch = lateness.watch(() => stack.ready.pid);
  const c = await clientsOf(pair, host, port);
  const testAgent = new Agent({ connect: { socketPath: stack.ready.test_channel } });
  let stopped = false;
  return {
    ...c,
    pair,
    host,
    port,
    stepped: stack.ready.clock === 'stepped',
    logged: true,
    stderr: () => stack.stderr(),
    local: () => c.add(new ControlClient(stack.ready.control)),
    async step(cycles) {
      const res = await request('http://localhost/step', { method: 'POST', dispatcher: testAgent, body: stringifyExact({ cycles }), headers: { 'content-type': 'application/json' } });
      const text = await res.body.text();
      const m = /"now_ns":(\d+)/.exec(text);
      if (res.statusCode !== 200 || !m) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `test channel /step: ${res.statusCode} ${text}`, { detail: { status: res.statusCode } });
      return BigInt(m[1]!);
    },
    beginStop: () => stack.beginStop(),
    async stop(opts) {
      // Idempotent: a test may stop its stack (a cell that dies) before the file's cleanup stops it again.
      if (stopped) return;
      stopped = true;
      unwatch();
      await c.close();
      await testAgent.close();
      await stack.stop(opts);
    },
  };
}
