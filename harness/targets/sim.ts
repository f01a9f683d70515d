// The sim target: starts the reference stack (`hil serve` semantics) as a separate process in a fresh
// temporary directory, with the private test channel, and stops it afterwards. Starting a process is the
// only link between the harness and the implementation (DESIGN.md rule 1).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { ControlClient } from '../clients/control.ts';
import { stringifyExact } from '../oracle/json.ts';
import { TargetError, type Target, type TargetDescriptor, type TargetOptions } from './types.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The stack's entry point, started as a process, never imported. */
export const STACK_ENTRY = join(ROOT, 'sims', 'main.ts');
const TSX = import.meta.resolve('tsx');

export interface StackProcess {
  child: ChildProcess;
  dir: string;
  ready: { control: string; public: string; test_channel: string; pid: number; driver?: string; clock?: string };
  stderr: () => string;
  /** Stop the process; the temporary directory goes too unless keepDir (a restart reuses it). */
  stop(opts?: { keepDir?: boolean }): Promise<void>;
}

/** Start `sims/main.ts` with the given arguments and wait for its ready line. */
export async function startStack(args: string[], timeoutMs = 30_000, env: Record<string, string> = {}, reuseDir?: string): Promise<StackProcess> {
  const dir = reuseDir ?? (await mkdtemp(join(tmpdir(), 'hil-sim-')));
  const child = spawn(process.execPath, ['--import', TSX, STACK_ENTRY, '--socket-dir', dir, '--lifeline-stdin', ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    cwd: ROOT,
    // Anchors live in the stack's own temporary directory (the service writes, the core reads).
    env: { ...process.env, CELL_ANCHOR_DIR: join(dir, 'anchors'), ...env },
  });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err = (err + d).slice(-64 * 1024);
  });
  const ready = await new Promise<StackProcess['ready']>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new TargetError('target_start_failed', `stack did not report ready within ${timeoutMs} ms\n${err}`));
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
      reject(new TargetError('target_start_failed', `stack exited with code ${code} before ready\n${err}`));
    });
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
    private readonly args: string[],
  ) {
    this.testAgent = new Agent({ connect: { socketPath: stack.ready.test_channel } });
  }

  /** Stop the service process and start a new one on the same socket directory (new adapter incarnation). */
  async restartService(): Promise<void> {
    await this.stack.stop({ keepDir: true });
    this.stack = await startStack(this.args, 30_000, {}, this.stack.dir);
  }

  get address(): string {
    return this.stack.ready.control;
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
    if (res.statusCode !== 200) throw new Error(`test channel ${path}: ${res.statusCode} ${text}`);
    return text;
  }

  async step(cycles: number): Promise<bigint> {
    const text = await this.test('/step', { cycles });
    const m = /"now_ns":(\d+)/.exec(text);
    if (!m) throw new Error(`test channel /step: no now_ns in ${text}`);
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
    const args = ['--test-channel', ...(o.machine ? ['--machine', o.machine] : []), ...(o.serveArgs ?? [])];
    return new SimTarget(await startStack(args), args);
  },
};
