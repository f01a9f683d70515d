// The sim target: starts the reference stack (`hil serve` semantics) as a separate process in a fresh
// temporary directory, with the private test channel, and stops it afterwards. Starting a process is the
// only link between the harness and the implementation (DESIGN.md rule 1).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { ControlClient } from '../clients/control.ts';
import { HarnessError } from '../errors.ts';
import { stringifyExact } from '../oracle/json.ts';
import { ANCHOR_DIR_ENV, ROOT, STACK_ENTRY, TS_NODE_ARGS } from './reference.ts';
import type { Target, TargetDescriptor, TargetOptions } from './types.ts';
import { machineFile, parseVariant, type VariantOptions } from './variant.ts';

export interface StackProcess {
  child: ChildProcess;
  dir: string;
  ready: { control: string; public: string; test_channel: string; pid: number; driver?: string; clock?: string };
  stderr: () => string;
  /** Stop the process; the temporary directory goes too unless keepDir (a restart reuses it). */
  stop(opts?: { keepDir?: boolean }): Promise<void>;
}

export interface StackStart {
  /** `hil serve` arguments after --socket-dir and --lifeline-stdin. */
  args: readonly string[];
  /** Extra environment, computed once the stack's directory exists (a variant's anchor store lives there). */
  env?: (dir: string) => Promise<Record<string, string>> | Record<string, string>;
  timeoutMs?: number;
  /** Reuse this socket directory (a service restart keeps sockets' directory and anchors). */
  reuseDir?: string;
}

/** Start `sims/main.ts` as a process and wait for its ready line. Internal to harness/targets/. */
export async function startStack(o: StackStart): Promise<StackProcess> {
  const timeoutMs = o.timeoutMs ?? 30_000;
  const dir = o.reuseDir ?? (await mkdtemp(join(tmpdir(), 'hil-sim-')));
  const extra = (await o.env?.(dir)) ?? {};
  const child = spawn(process.execPath, [...TS_NODE_ARGS, STACK_ENTRY, '--socket-dir', dir, '--lifeline-stdin', ...o.args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    cwd: ROOT,
    // Anchors live in the stack's own temporary directory unless a variant says otherwise.
    env: { ...process.env, [ANCHOR_DIR_ENV]: join(dir, 'anchors'), ...extra },
  });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err = (err + d).slice(-64 * 1024);
  });
  const ready = await new Promise<StackProcess['ready']>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new HarnessError('HIL_ERR_TARGET_START', `stack did not report ready within ${timeoutMs} ms\n${err}`));
    }, timeoutMs);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('ready '));
      if (line) {
        clearTimeout(timer);
        resolve(JSON.parse(line.slice(6)) as StackProcess['ready']);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new HarnessError('HIL_ERR_TARGET_START', `stack exited with code ${code} before ready\n${err}`, { detail: { exit_code: code ?? undefined } }));
    });
  }).catch(async (e: unknown) => {
    if (!o.reuseDir) await rm(dir, { recursive: true, force: true });
    throw e;
  });
  child.removeAllListeners('exit');
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child,
    dir,
    ready,
    stderr: () => err,
    async stop(opts) {
      child.stdin!.end();
      const t = setTimeout(() => child.kill('SIGTERM'), 5_000);
      const k = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
      clearTimeout(k);
      if (!opts?.keepDir) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** How the reference stack provides each variant option: `hil serve` flags and environment. */
export function variantStart(o: VariantOptions): Pick<StackStart, 'args' | 'env'> {
  const args: string[] = [];
  if (o.telemetry === 'off') args.push('--capture-retention-ms', '0');
  if (o.initialGeneration !== undefined) args.push('--initial-generation', String(o.initialGeneration));
  if (o.machine !== undefined) args.push('--machine', machineFile(o.machine));
  if (o.pairId !== undefined) args.push('--pair-id', o.pairId);
  if (o.controlSocket !== undefined) args.push('--socket', o.controlSocket);
  for (const f of o.bringUpFaults ?? []) args.push('--sim-fault', `${f.kind}:${f.axis}`);
  if (o.clock === 'stepped') args.push('--clock', 'stepped');
  if (o.armSettleMs !== undefined) args.push('--arm-settle-ms', String(o.armSettleMs));
  const store = o.anchorStore;
  if (!store) return { args };
  return {
    args,
    env: async (dir) => {
      if (store.kind === 'directory') return { [ANCHOR_DIR_ENV]: store.dir };
      // A path below a regular file can be neither created nor read, even by root.
      await writeFile(join(dir, 'not-a-directory'), 'x');
      return { [ANCHOR_DIR_ENV]: join(dir, 'not-a-directory', 'anchors') };
    },
  };
}

function baseStart(o: TargetOptions): StackStart {
  return { args: ['--test-channel', ...(o.machine ? ['--machine', o.machine] : []), ...(o.serveArgs ?? [])] };
}

async function startVariant(o: VariantOptions, base: StackStart): Promise<Target> {
  const v = variantStart(o);
  // The file target's own arguments first, so that a variant's --machine is the one that counts.
  const start: StackStart = { args: [...base.args, ...v.args], env: v.env };
  return new SimTarget(await startStack(start), start);
}

class SimTarget implements Target {
  readonly name = 'sim' as const;
  /** The bus driver the stack reports it attached (its ready line), not what was asked for. */
  get driver(): string {
    return this.stack.ready.driver ?? 'unknown';
  }
  readonly abilities = { faultInjection: true, coreRestart: true, serviceRestart: true, motion: true };
  private clients: ControlClient[] = [];
  private testAgent: Agent;

  constructor(
    private stack: StackProcess,
    private readonly start: StackStart,
  ) {
    this.testAgent = new Agent({ connect: { socketPath: stack.ready.test_channel } });
  }

  /** Stop the service process and start a new one on the same socket directory (new adapter incarnation). */
  async restartService(): Promise<void> {
    await this.stack.stop({ keepDir: true });
    this.stack = await startStack({ ...this.start, reuseDir: this.stack.dir });
  }

  get address(): string {
    return this.stack.ready.control;
  }

  get publicAddress(): string {
    return this.stack.ready.public;
  }

  cannotProvide(): string | undefined {
    return undefined; // the reference stack provides every variant option
  }

  variant(options: VariantOptions): Promise<Target> {
    return startVariant(parseVariant(options), this.start);
  }

  client(): ControlClient {
    const c = new ControlClient(this.address);
    this.clients.push(c);
    return c;
  }

  private async test(path: string, body: unknown): Promise<string> {
    const res = await request(`http://localhost${path}`, {
      method: 'POST',
      dispatcher: this.testAgent,
      body: stringifyExact(body),
      headers: { 'content-type': 'application/json' },
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `test channel ${path}: ${res.statusCode} ${text}`, { detail: { status: res.statusCode } });
    return text;
  }

  async step(cycles: number): Promise<bigint> {
    const text = await this.test('/step', { cycles });
    const m = /"now_ns":(\d+)/.exec(text);
    if (!m) throw new HarnessError('HIL_ERR_TEST_CHANNEL', `test channel /step: no now_ns in ${text}`);
    return BigInt(m[1]!);
  }

  async inject(fault: Record<string, unknown>): Promise<void> {
    await this.test('/inject', fault);
  }

  async restartCore(): Promise<void> {
    await this.test('/restart-core', {});
  }

  diagnostics(): string {
    return this.stack.stderr();
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map((c) => c.close()));
    await this.testAgent.close();
    await this.stack.stop();
  }
}

export const simTarget: TargetDescriptor = {
  name: 'sim',
  summary: 'the reference stack on the simulator driver, started per test file in a temporary directory',
  options: { HIL_MACHINE: 'machine configuration file (default fixtures/machines/nine-axis.json)', HIL_SERVE_ARGS: 'extra hil serve arguments' },
  async open(o: TargetOptions): Promise<Target> {
    const start = baseStart(o);
    return new SimTarget(await startStack(start), start);
  },
  cannotProvide: () => undefined,
  openVariant: (variant, o) => startVariant(variant, baseStart(o)),
};
