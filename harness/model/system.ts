// The target side of a model run: sends one command the way a client would (POST /v1/control over the
// target's socket), steps the stepped clock until the reply comes (never sleeping through real time on
// a stepped target), and observes status and the event log after it. Knows the documents' interface
// only (harness/clients), never the implementation.

import type { ControlClient } from '../clients/control.ts';
import { REQUEST_SCHEMA } from '../clients/control.ts';
import { pollEvents, type CellEvent } from '../clients/events.ts';
import { HarnessError } from '../errors.ts';
import { stringifyExact } from '../oracle/json.ts';
import { checkReply, type CheckedReply } from '../oracle/reply.ts';
import { createConnection, type Socket } from 'node:net';
import type { Target } from '../targets/types.ts';
import { JogSender } from '../clients/jog.ts';

export interface Exchange {
  reply: CheckedReply;
  sendMs: number;
  recvMs: number;
}

export interface StatusObs {
  grant: { active: boolean; stopping: boolean; draining?: boolean; generation: bigint; lease_ms: bigint | number };
  core: { armed: bigint; axis_enable_mask: bigint; home_valid_mask: bigint; io_armed: bigint; io_output_word: bigint; execution_fault_reasons: bigint; safety_fault_mask: bigint } | null;
  daemon_incarnation: string;
  axes: Array<{ position: number | bigint }>;
  execution: { handles: Array<{ handle: bigint; state: string; generation: bigint }>; state: string } | undefined;
}

const now = () => performance.now();

export class RealCell {
  /** Core cycles run since the cell was opened (stepped clock: exact; real time: estimated from wall time). */
  cycles = 0n;
  private cursor = 0n;
  private opened = now();
  /** A stop admitted but not yet answered (its drain is held open on the stepped clock). */
  pendingStop: Promise<CheckedReply> | undefined;
  /** The pending stop's reply once it came, for the runner to check. */
  stopReply: CheckedReply | undefined;
  private stopErr: unknown;

  /**
   * Keep-alive renewals, as every controller sends them (a fifth of the lease; harness/clients/cell.ts
   * hold does the same): on while the runner names a session here. Each admitted renewal is kept for the
   * runner, which moves the model's lease window on and expects its grant_renewed event.
   */
  private keep: { session: string; generation: bigint; everyMs: number } | undefined;
  private keepTimer: NodeJS.Timeout | undefined;
  private keepBusy = false;
  readonly renewals: Array<{ session: string; generation: bigint; sendMs: number; recvMs: number; stopping: boolean }> = [];

  keepAlive(k: { session: string; generation: bigint; leaseMs: number } | undefined): void {
    this.keep = k ? { session: k.session, generation: k.generation, everyMs: Math.max(20, Math.floor(k.leaseMs / 5)) } : undefined;
    if (!this.keep) {
      if (this.keepTimer) clearInterval(this.keepTimer);
      this.keepTimer = undefined;
      return;
    }
    if (this.keepTimer) clearInterval(this.keepTimer);
    this.keepTimer = setInterval(() => void this.renewOnce(), this.keep.everyMs);
    this.keepTimer.unref();
  }

  private async renewOnce(): Promise<void> {
    const k = this.keep;
    if (!k || this.keepBusy) return;
    this.keepBusy = true;
    try {
      const sendMs = now();
      const r = await this.client.control(RealCell.body('renew', { session: k.session, generation: k.generation }), 'renew');
      if (r.status === 200) {
        const d = r.reply.data as { stopping?: boolean };
        this.renewals.push({ session: k.session, generation: k.generation, sendMs, recvMs: now(), stopping: d.stopping === true });
      }
    } catch {
      // A closed client at the run's end: nothing to keep.
    } finally {
      this.keepBusy = false;
    }
  }

  constructor(
    readonly target: Target,
    readonly client: ControlClient,
    readonly stepped: boolean,
    readonly cycleNs: bigint,
  ) {}

  /** Read the event cursor: events before now are not this run's. */
  async begin(): Promise<void> {
    this.cursor = (await pollEvents(this.client, 0n)).latest_sequence;
    if (this.stepped) await this.step(20);
  }

  async step(n: number): Promise<void> {
    if (this.stepped) {
      const r = await this.target.stepReport!(n);
      this.cycles = r.cycles;
    } else {
      await new Promise((res) => setTimeout(res, Math.ceil((n * Number(this.cycleNs)) / 1e6)));
      this.updateWallCycles();
    }
  }

  private updateWallCycles(): void {
    if (!this.stepped) this.cycles = BigInt(Math.floor(((now() - this.opened) * 1e6) / Number(this.cycleNs)));
  }

  /** Body of a request, exactly as sent (its text is the payload the request_id cache compares). */
  static body(op: string, fields: Record<string, unknown>): string {
    return stringifyExact({ schema: REQUEST_SCHEMA, operation: op, ...fields });
  }

  /**
   * Send a control request. `quiet`: a stop drains and the model expects the service to answer alone, so
   * no cycle runs unless the reply does not come within a second (then the core is stepped until it does).
   */
  async send(op: string, body: string | (() => Promise<CheckedReply>), o: { quiet: boolean; after?: number }): Promise<Exchange> {
    const sendMs = now();
    let done = false;
    const p = (typeof body === 'string' ? this.client.control(body, op) : body()).finally(() => (done = true));
    if (!this.stepped) {
      const reply = await p;
      const recvMs = now();
      this.noteGrant(op, reply);
      this.updateWallCycles();
      await this.collectStop();
      return { reply, sendMs, recvMs };
    }
    if (o.quiet) {
      await Promise.race([p.catch(() => undefined), new Promise((r) => setTimeout(r, 1_000).unref())]);
    }
    for (let i = 0; i < 2000 && !done; i++) {
      const r = await this.target.stepReport!(10);
      this.cycles = r.cycles;
      if (r.answered > 0 && !done) await Promise.race([p.catch(() => undefined), new Promise((res) => setTimeout(res, 2_000).unref())]);
    }
    const reply = await p;
    const recvMs = now();
    this.noteGrant(op, reply);
    if (!o.quiet && o.after) await this.step(o.after);
    await this.collectStop();
    return { reply, sendMs, recvMs };
  }

  /** Every grant the target gave in this cell (the run's end releases whatever is still held). */
  readonly granted: Array<{ session: string; generation: bigint }> = [];

  private noteGrant(op: string, r: CheckedReply): void {
    if (op !== 'acquire' || r.status !== 200) return;
    const d = r.reply.data as { session?: string; generation?: bigint } | undefined;
    if (d?.session && d.generation !== undefined && !this.granted.some((g) => g.session === d.session)) this.granted.push({ session: d.session, generation: d.generation });
  }

  /** Send a stop and leave it draining (stepped clock): resolves once status shows the grant stopping. */
  async stopUndrained(body: string): Promise<{ sendMs: number }> {
    const sendMs = now();
    this.stopReply = undefined;
    this.stopErr = undefined;
    const p = this.client.control(body, 'stop');
    this.pendingStop = p;
    p.then(
      (r) => (this.stopReply = r),
      (e) => (this.stopErr = e ?? new Error('stop failed')),
    );
    for (let i = 0; i < 200; i++) {
      if (this.stopReply || this.stopErr) break;
      const st = await this.status();
      if (st.grant.stopping) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    return { sendMs };
  }

  /** Step until no stop drains any more (status shows the grant not stopping) and a held stop has answered. */
  async drain(): Promise<void> {
    for (let i = 0; i < 300; i++) {
      const st = await this.status();
      if (!st.grant.stopping && (!this.pendingStop || this.stopReply || this.stopErr)) return;
      if (this.stepped) {
        const r = await this.target.stepReport!(10);
        this.cycles = r.cycles;
        if (r.answered > 0 && this.pendingStop) await Promise.race([this.pendingStop.catch(() => undefined), new Promise((res) => setTimeout(res, 200).unref())]);
      } else await new Promise((res) => setTimeout(res, 20));
    }
  }

  private async collectStop(): Promise<void> {
    if (this.stopErr) {
      const e = this.stopErr;
      this.stopErr = undefined;
      this.pendingStop = undefined;
      throw e;
    }
  }

  /** The pending stop's reply, if it has come; clears it. */
  takeStopReply(): CheckedReply | undefined {
    const r = this.stopReply;
    if (r) {
      this.stopReply = undefined;
      this.pendingStop = undefined;
    }
    return r;
  }

  async status(): Promise<StatusObs> {
    const r = await this.client.status();
    if (r.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `status refused: ${r.status} ${r.reply.error}`);
    return r.reply.data as unknown as StatusObs;
  }

  /** Events published since the last call. */
  async events(): Promise<CellEvent[]> {
    const out: CellEvent[] = [];
    for (let i = 0; i < 64; i++) {
      const b = await pollEvents(this.client, this.cursor);
      out.push(...b.events);
      if (!b.events.length) break;
      this.cursor = b.next_sequence;
      if (b.next_sequence >= b.latest_sequence) break;
    }
    return out;
  }

  private sender: JogSender | undefined;
  /** A datagram sender to jog.sock beside the control socket (part 1 "Jog datagrams"). */
  jogSender(): JogSender {
    this.sender ??= new JogSender(this.target.address);
    return this.sender;
  }

  /** Close what the cell opened besides the client (the jog datagram socket, a held upload). */
  closeExtras(): void {
    this.sender?.close();
    this.sender = undefined;
  }

  async restartCore(): Promise<void> {
    await this.target.restartCore();
    if (this.stepped) await this.step(20);
  }
}

/**
 * An upload held open mid-body (part 8 "Upload slots"): the request line, headers and the body's first
 * part are written on a connection of its own (for prepare_trajectory past the 16384-byte prefix, so the
 * service has admitted the fence and reserved the slot), the rest held back until finish() or abandon().
 */
export class HeldUpload {
  private readonly sock: Socket;
  private answer = Buffer.alloc(0);
  private settled: ((r: CheckedReply | Error) => void) | undefined;
  private result: CheckedReply | Error | undefined;
  /** When its head was written (performance.now()): the fence is checked after this. */
  readonly sentMs = performance.now();

  constructor(
    address: string,
    readonly op: 'prepare_trajectory' | 'prepare_program',
    path: string,
    headers: Record<string, string>,
    private readonly head: Uint8Array,
    private readonly rest: Uint8Array,
  ) {
    this.sock = createConnection(address);
    const lines = [`POST ${path} HTTP/1.1`, 'Host: localhost', `Content-Length: ${head.length + rest.length}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', ''];
    this.sock.write(lines.join('\r\n'));
    this.sock.write(head);
    this.sock.on('data', (c: Buffer) => {
      this.answer = Buffer.concat([this.answer, c]);
      this.parse();
    });
    this.sock.on('error', (e) => this.done(e));
    this.sock.on('close', () => this.done(new Error('the connection closed without a reply')));
  }

  private done(r: CheckedReply | Error): void {
    if (this.result) return;
    this.result = r;
    this.settled?.(r);
  }

  private parse(): void {
    const end = this.answer.indexOf('\r\n\r\n');
    if (end < 0) return;
    const headText = this.answer.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(headText[0]!.split(' ')[1]);
    const header = (name: string) => headText.find((l) => l.toLowerCase().startsWith(`${name}:`))?.slice(name.length + 1).trim();
    const length = Number(header('content-length') ?? 0);
    const body = this.answer.subarray(end + 4);
    if (body.length < length) return;
    try {
      this.done(checkReply(status, header('content-type'), body.subarray(0, length), this.op));
    } catch (e) {
      this.done(e as Error);
    }
  }

  /** The reply came already (the upload was answered before its body ended). */
  get answered(): CheckedReply | Error | undefined {
    return this.result;
  }

  /** Send the rest of the body and wait for the reply. */
  finish(): Promise<CheckedReply> {
    this.sock.write(this.rest);
    return new Promise<CheckedReply>((resolve, reject) => {
      const take = (r: CheckedReply | Error) => (r instanceof Error ? reject(r) : resolve(r));
      if (this.result) take(this.result);
      else this.settled = take;
    }).finally(() => this.sock.destroy());
  }

  /** Go away mid-body (the service frees the slot; nothing is prepared or answered). */
  abandon(): void {
    this.sock.destroy();
  }
}
