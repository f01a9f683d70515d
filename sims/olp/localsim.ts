// The OLP server's local simulator (document 3 part 4 "/local-simulator/*": a loopback simulator with
// preview jog; docs/profile.md "OLP server: local simulator"): the reference stack (`hil serve`, control
// service and core on the sim driver) started by the OLP server as a process of its own in a temporary
// directory, reached as a client through its control socket like any cell, and jogged for preview
// through the same joint jog as a selected cell (the legacy jog lane). It is not a catalogue cell: no
// selection, no fence, and no UI heartbeat (nothing real moves).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { programArgs } from '../paths.ts';
import { ControlLink } from './control.ts';
import { CellSession, type Describe } from './execution.ts';
import { OlpError } from './http.ts';

export const LOCAL_CELL_ID = 'local-simulator';
/** setTimeout's ceiling: the local simulator's lease needs no UI heartbeat. */
const NO_HEARTBEAT_MS = 2_147_483_647;

export interface LocalSimulatorOptions {
  machine: string;
  model_id: string;
  robot_description_sha256?: string;
  startTimeoutMs?: number;
  log: (l: string) => void;
}

export class LocalSimulator {
  private child: ChildProcess | null = null;
  private dir = '';
  private starting: Promise<void> | null = null;
  ready: { control: string; pid: number; configuration_sha256: string } | null = null;
  session: CellSession | null = null;

  constructor(readonly o: LocalSimulatorOptions) {}

  status(): Record<string, unknown> {
    return {
      ok: true,
      configured: true,
      running: this.child !== null,
      ready: this.session !== null,
      cell_id: LOCAL_CELL_ID,
      model_id: this.o.model_id,
      machine: this.o.machine,
      control_socket: this.ready?.control ?? '',
      pid: this.ready?.pid ?? 0,
      configuration_sha256: this.ready?.configuration_sha256 ?? '',
      preview: this.session ? { ...this.session.view(), jog: this.session.jogState() } : null,
    };
  }

  async start(): Promise<Record<string, unknown>> {
    if (!this.session) {
      this.starting ??= this.launch().finally(() => (this.starting = null));
      await this.starting;
    }
    return this.status();
  }

  private async launch(): Promise<void> {
    this.dir = mkdtempSync(join(tmpdir(), 'hil-olp-local-'));
    const child = spawn(process.execPath, [...programArgs('stack'), '--socket-dir', this.dir, '--machine', this.o.machine, '--lifeline-stdin'], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-4000)));
    child.once('exit', () => {
      if (this.child === child) {
        this.child = null;
        this.ready = null;
        const s = this.session;
        this.session = null;
        void s?.close(false);
      }
    });
    try {
      this.ready = await new Promise((resolve, reject) => {
        let out = '';
        const timer = setTimeout(() => reject(new Error(`not ready within ${this.o.startTimeoutMs ?? 60_000} ms`)), this.o.startTimeoutMs ?? 60_000);
        child.stdout!.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          const line = out.split('\n').find((l) => l.startsWith('ready '));
          if (line) {
            clearTimeout(timer);
            resolve(JSON.parse(line.slice(6)));
          }
        });
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`the stack exited with code ${code} before it was ready: ${err.trim().split('\n').slice(-2).join(' | ')}`));
        });
      });
      const link = new ControlLink({ socket: this.ready!.control });
      const d = await link.describe();
      if (d.status !== 200) throw new Error(`describe answered ${d.status}`);
      this.session = new CellSession(
        { cell_id: LOCAL_CELL_ID, model_id: this.o.model_id, ...(this.o.robot_description_sha256 ? { robot_description_sha256: this.o.robot_description_sha256 } : {}), mode: 'simulation', backend: 'core', control: { socket: this.ready!.control } },
        link,
        d.data as Describe,
        { heartbeatMs: NO_HEARTBEAT_MS, leaseMs: 0, log: this.o.log },
      );
    } catch (e) {
      await this.stop();
      throw new OlpError(503, 'local_simulator_unavailable', `the local simulator cannot start: ${(e as Error).message}`);
    }
  }

  /** The session, armed for preview (arming acquires the local simulator's grant). */
  async preview(): Promise<CellSession> {
    const s = this.session;
    if (!s) throw new OlpError(409, 'local_simulator_not_running', 'the local simulator is not running: POST /local-simulator/start first');
    if (!s.lease) await s.arm();
    return s;
  }

  async stop(): Promise<Record<string, unknown>> {
    const s = this.session;
    this.session = null;
    if (s) await s.close(true).catch(() => undefined);
    const c = this.child;
    this.child = null;
    this.ready = null;
    if (c && c.exitCode === null) {
      const exited = new Promise<void>((r) => c.once('exit', () => r()));
      c.stdin!.end();
      const k = setTimeout(() => c.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(k);
    }
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
    this.dir = '';
    return this.status();
  }
}
