// Remote listener stacks (document 1 part 5): a reference stack with `--remote-listen` and a pair of
// certificates made for it, which the remote suites start themselves (they need flags no file target has).
// The kind of target decides how (TargetDescriptor.startStack): the sim target starts it, on a recorded run
// recording it as one of the current test's variants; the replay target replays it from that recording
// with a fresh pair (the certificates live in the service, which runs live; the recording is the core's);
// an external target or a rig cannot start one, and the suites skip with its reason.

import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { ControlClient } from '../clients/control.ts';
import type { PairFiles } from '../certs.ts';
import { HarnessError } from '../errors.ts';
import { lateness } from '../lateness.ts';
import { stringifyExact } from '../oracle/json.ts';
import { targetFromEnv } from './index.ts';
import { stackOptionsJson } from './recording-store.ts';
import { variantStart, type StackProcess } from './sim.ts';
import type { TestStack } from './types.ts';
import { parseVariant, type VariantOptions } from './variant.ts';

/** A stack with a remote listener (document 1 part 5) on 127.0.0.1, an ephemeral port and a fresh pair. */
export interface RemoteStack extends StackProcess {
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
  /** Run cycles on the stepped clock (the private test channel); returns the core's now in ns. */
  step(cycles: number): Promise<bigint>;
}

export interface RemoteOptions {
  /** The binding's pair id (default cell-remote-01). */
  pairId?: string;
  /** More `hil serve` arguments (a machine, a configuration cache, the remote jog clock flags). */
  args?: string[];
  /** More environment for the stack (not part of what is recorded). */
  env?: Record<string, string>;
  /** Variant options among the flags (the stepped clock, a machine...). */
  variant?: VariantOptions;
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

/** Why the target the environment names cannot start this remote stack (a skip reason), or undefined. */
export function cannotStartRemote(o: RemoteOptions = {}, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const t = targetFromEnv(env);
  if (!t.startStack || !t.cannotStartStack) return `target ${t.name} cannot start a stack with a remote listener and its own fresh certificates: only a target that starts the reference stack can`;
  return t.cannotStartStack({ start: { args: [] }, ...remoteTestStack(o) });
}

/**
 * Start a stack with `--remote-listen 127.0.0.1:0` and a pair made by the certificate tooling in
 * `<dir>/pair` (the stack's own temporary directory, removed when it stops), through the target the
 * environment names (see the head of this file). Self-contained: the stack's other options come from `args`
 * and, when given, a variant's options. Rejects with HIL_ERR_VARIANT_UNSUPPORTED and the reason when the
 * target cannot start it (cannotStartRemote).
 */
export async function startRemoteStack(o: RemoteOptions = {}): Promise<RemoteStack> {
  const why = cannotStartRemote(o);
  if (why !== undefined) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', why);
  const target = targetFromEnv();
  const pairId = o.pairId ?? 'cell-remote-01';
  const dir = await mkdtemp(join(tmpdir(), 'hil-sim-'));
  let pair: PairFiles & { pair_id: string };
  let stack: StackProcess;
  // Loaded here, not at the top: the certificate library is a few hundred modules every worker would
  // load, and only the remote suites start a remote stack.
  const { clientFiles, createPair, issueClient } = await import('../certs.ts');
  try {
    pair = await createPair({ dir: join(dir, 'pair'), pairId });
    const t = remoteTestStack(o);
    const v = t.variant ? variantStart(t.variant) : { args: [] as string[], env: undefined };
    const args = [
      ...['--test-channel', '--remote-listen', '127.0.0.1:0', '--remote-ca', pair.ca, '--remote-cert', pair.cert, '--remote-key', pair.key, '--remote-crl', pair.crl, '--pair-id', pairId],
      ...v.args,
      ...(o.args ?? []),
    ];
    stack = await target.startStack!({ ...t, start: { args, reuseDir: dir, env: async (d) => ({ ...((await v.env?.(d)) ?? {}), ...(o.env ?? {}) }) } });
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
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
  const origin = `https://${host}:${port}`;
  const clients: ControlClient[] = [];
  const issued = new Set<string>();
  const testAgent = new Agent({ connect: { socketPath: stack.ready.test_channel } });
  let stopped = false;
  const creds = async (principal: string) => {
    if (!issued.has(principal)) {
      await issueClient({ dir: pair.dir, principal });
      issued.add(principal);
    }
    const f = clientFiles(pair.dir, principal);
    return { host, port, cert: readFileSync(f.cert, 'utf8'), key: readFileSync(f.key, 'utf8'), ca: readFileSync(pair.ca, 'utf8') };
  };
  return {
    ...stack,
    pair,
    host,
    port,
    origin,
    async client(principal) {
      const t = await creds(principal);
      const c = ControlClient.https({ origin, cert: t.cert, key: t.key, ca: t.ca });
      clients.push(c);
      return c;
    },
    creds,
    local() {
      const c = new ControlClient(stack.ready.control);
      clients.push(c);
      return c;
    },
    async step(cycles) {
      const res = await request('http://localhost/step', { method: 'POST', dispatcher: testAgent, body: stringifyExact({ cycles }), headers: { 'content-type': 'application/json' } });
      const text = await res.body.text();
      const m = /"now_ns":(\d+)/.exec(text);
      if (res.statusCode !== 200 || !m) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `test channel /step: ${res.statusCode} ${text}`, { detail: { status: res.statusCode } });
      return BigInt(m[1]!);
    },
    async stop(opts) {
      // Idempotent: a test may stop its stack (a cell that dies) before the file's cleanup stops it again.
      if (stopped) return;
      stopped = true;
      unwatch();
      await Promise.all(clients.splice(0).map((c) => c.close()));
      await testAgent.close();
      await stack.stop(opts);
    },
  };
}
