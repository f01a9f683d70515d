// The harness's client for the rig's bench box (test equipment beside the rig: E-stop relay and chain,
// drive power, output readback, inputs, heartbeat), over a serial port with serialport 13. The harness, not
// the stack, talks to test equipment (DESIGN.md layout). Protocol: docs/benchbox.md, protocol.ts.
//
// One request is outstanding at a time (replies come back in order); every failure has a stable code:
// BENCH_TIMEOUT (the box stayed silent), BENCH_MALFORMED (a line that is not protocol, or a reply to another
// request), BENCH_REFUSED (the box answered ERR), BENCH_REBOOTED (the box announced BOOT while a request was
// outstanding: its state is reset), BENCH_CLOSED, BENCH_PORT (the port cannot be opened), BENCH_PROTOCOL
// (another protocol version). serialport is imported only when a bench box is used; SerialPort.list() is
// never called (it fails where udevadm is missing).

import { decodeStatus, formatRequest, LineError, MAX_LINE, parseHex16, parseReply, PROTOCOL_VERSION, type BoxStatus, type Reply, type Request } from './protocol.ts';

export type BenchErrorCode = 'BENCH_TIMEOUT' | 'BENCH_MALFORMED' | 'BENCH_REFUSED' | 'BENCH_REBOOTED' | 'BENCH_CLOSED' | 'BENCH_PORT' | 'BENCH_PROTOCOL';

export class BenchBoxError extends Error {
  constructor(
    readonly code: BenchErrorCode,
    message: string,
    readonly detail: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'BenchBoxError';
  }
}

export interface BoxEvent {
  event: string;
  fields: Record<string, string>;
  atMs: number;
}

export interface BenchBoxOptions {
  path: string;
  baudRate?: number;
  /** Use @serialport/binding-mock (tests and the simulated box) instead of the real serial driver. */
  mock?: boolean;
  /** How long a reply may take (default 500 ms). */
  replyTimeoutMs?: number;
  onEvent?(e: BoxEvent): void;
  /** Called with the binding's port once it is open, before HELLO (the simulated box attaches here). */
  attach?(bindingPort: unknown): void;
  /**
   * Told what the client records as it happens, for a client that runs in a thread of its own
   * (harness/benchbox/thread.ts mirrors it into the test's thread): each heartbeat as it is written
   * (performance.now()), each line that is not protocol, each failure of the heartbeat timer.
   */
  onBeatWritten?(atMs: number): void;
  onMalformed?(m: { line: string; why: string }): void;
  onHeartbeatError?(e: BenchBoxError): void;
}

interface Port {
  write(data: string, cb?: (err?: Error | null) => void): boolean;
  on(ev: 'data', fn: (chunk: Buffer) => void): unknown;
  on(ev: 'error' | 'close', fn: (e?: Error) => void): unknown;
  close(cb?: (err?: Error | null) => void): void;
  readonly isOpen: boolean;
  /** The binding's port (a MockPortBinding with the mock). */
  readonly port?: unknown;
}

/** The port binding of @serialport/binding-mock, as the client and the simulated box use it. */
export interface MockPortBinding {
  write(buffer: Buffer): Promise<void>;
  emitData(data: Buffer | string): void;
  readonly isOpen: boolean;
  /** Every byte written (when the port was created with record: true). */
  readonly recording: Buffer;
}

/** How many heartbeat write times the client keeps: at a beat every 100 ms, the last 25 s or so. */
export const BEATS_KEPT = 256;

/**
 * The longest silence toward the box before `atMs`, from the times heartbeats were written (oldest first,
 * on the same clock as `atMs`): the largest gap between two of them in the `windowMs` before it, or from the
 * last one to `atMs`. Undefined when none was written before `atMs`.
 */
export function silenceIn(beatsWritten: readonly number[], atMs: number, windowMs: number): number | undefined {
  const before = beatsWritten.filter((t) => t <= atMs);
  if (before.length === 0) return undefined;
  let gap = atMs - before[before.length - 1]!;
  for (let i = before.length - 1; i > 0 && before[i]! >= atMs - windowMs; i--) gap = Math.max(gap, before[i]! - before[i - 1]!);
  return gap;
}

/**
 * The mock binding the client uses with `mock: true`. Take it from here: @serialport/binding-mock's ESM and
 * CommonJS builds are two separate instances with separate port tables, and the client uses the ESM one.
 */
type MockBindingApi = { createPort(path: string, o?: { echo?: boolean; record?: boolean }): void; reset(): void };

/** @serialport/binding-mock's ESM build (its package exports hide its type declarations from TypeScript). */
async function importMock(): Promise<{ MockBinding: MockBindingApi }> {
  return (await import('@serialport/binding-mock' as string)) as { MockBinding: MockBindingApi };
}

export async function mockBinding(): Promise<{ createPort(path: string, o?: { echo?: boolean; record?: boolean }): void; reset(): void }> {
  return (await importMock()).MockBinding;
}

export class BenchBoxClient {
  private nextId = 1;
  private buf = '';
  private discarding = false;
  private waiting?: { id: number; resolve: (r: Reply) => void; reject: (e: BenchBoxError) => void; timer: NodeJS.Timeout };
  private queue: Promise<unknown> = Promise.resolve();
  private beat?: NodeJS.Timeout;
  private closed = false;
  /** Unsolicited events (BOOT, ESTOP) in arrival order. */
  readonly events: BoxEvent[] = [];
  /** Lines that were not protocol, with why. */
  readonly malformed: Array<{ line: string; why: string }> = [];
  /** Set when the box announced BOOT after open: whatever the run set up on it is gone. */
  rebooted = false;
  /** The last heartbeat failure, when the heartbeat timer could not reach the box. */
  heartbeatError?: BenchBoxError;
  /** When each of the last heartbeats was written to the port (performance.now()), oldest first. */
  private readonly beatsWritten: number[] = [];

  private constructor(
    private readonly port: Port,
    private readonly o: BenchBoxOptions,
  ) {
    port.on('data', (chunk) => this.onData(chunk));
    port.on('close', () => this.fail(new BenchBoxError('BENCH_CLOSED', `the bench box port ${o.path} closed`)));
    port.on('error', (e) => this.fail(new BenchBoxError('BENCH_PORT', `bench box port ${o.path}: ${e?.message ?? 'error'}`)));
  }

  /** Opens the port and greets the box (HELLO); refuses a box that speaks another protocol version. */
  static async open(o: BenchBoxOptions): Promise<BenchBoxClient> {
    // The mock needs nothing native (@serialport/stream over @serialport/binding-mock); a real port loads
    // serialport, whose native binding is a prebuilt addon.
    let Ctor: new (o: { path: string; baudRate: number; autoOpen: boolean; binding?: unknown }) => unknown;
    let binding: unknown;
    try {
      if (o.mock) {
        Ctor = (await import('@serialport/stream')).SerialPortStream as never;
        binding = (await importMock()).MockBinding;
      } else Ctor = (await import('serialport')).SerialPort as never;
    } catch (e) {
      throw new BenchBoxError('BENCH_PORT', `the bench box needs the package serialport, which does not load here: ${(e as Error).message}`);
    }
    const port = await new Promise<Port>((resolve, reject) => {
      const p = new Ctor({ path: o.path, baudRate: o.baudRate ?? 115200, autoOpen: false, ...(binding ? { binding } : {}) }) as unknown as Port & { open(cb: (e?: Error | null) => void): void };
      p.open((e) => (e ? reject(new BenchBoxError('BENCH_PORT', `cannot open the bench box port ${o.path}: ${e.message}`)) : resolve(p)));
    });
    const c = new BenchBoxClient(port, o);
    o.attach?.(port.port);
    try {
      const hello = await c.hello();
      if (hello.proto !== String(PROTOCOL_VERSION)) throw new BenchBoxError('BENCH_PROTOCOL', `the bench box speaks protocol ${hello.proto}, this harness ${PROTOCOL_VERSION}`, { proto: hello.proto });
    } catch (e) {
      await c.close();
      throw e;
    }
    return c;
  }

  /** The binding's port object (a MockPortBinding when mock). */
  get bindingPort(): unknown {
    return this.port.port;
  }

  private onData(chunk: Buffer): void {
    this.buf += chunk.toString('latin1');
    let nl: number;
    while ((nl = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + 1);
      if (this.discarding) {
        this.discarding = false; // the rest of an overlong line
        continue;
      }
      this.onLine(line);
    }
    if (this.buf.length > MAX_LINE + 1) {
      // An overlong line: report it once and drop the rest of it up to its newline.
      this.onMalformed(this.buf.slice(0, 40) + '...', new LineError('line_too_long', `more than ${MAX_LINE} bytes without a newline`));
      this.buf = '';
      this.discarding = true;
    }
  }

  private onLine(line: string): void {
    let r: Reply;
    try {
      r = parseReply(line);
    } catch (e) {
      this.onMalformed(line, e as LineError);
      return;
    }
    if (r.kind === 'event') {
      const ev = { event: r.event, fields: r.fields, atMs: performance.now() };
      this.events.push(ev);
      if (r.event === 'BOOT') {
        this.rebooted = true;
        const w = this.waiting;
        if (w) this.settle(w.id)?.reject(new BenchBoxError('BENCH_REBOOTED', 'the bench box restarted while a request was outstanding; its relay is open and its power cut', { boot: r.fields }));
      }
      this.o.onEvent?.(ev);
      return;
    }
    const w = this.waiting;
    if (!w) {
      this.noteMalformed({ line, why: 'a reply to no outstanding request' });
      return;
    }
    if (r.id !== w.id) {
      this.settle(w.id)?.reject(new BenchBoxError('BENCH_MALFORMED', `the bench box answered request ${r.id} while ${w.id} was outstanding`, { line }));
      return;
    }
    this.settle(w.id)?.resolve(r);
  }

  private onMalformed(line: string, e: LineError): void {
    this.noteMalformed({ line, why: e.message });
    const w = this.waiting;
    if (w) this.settle(w.id)?.reject(new BenchBoxError('BENCH_MALFORMED', `the bench box sent a line that is not protocol (${e.code}): ${JSON.stringify(line.slice(0, 60))}`, { line, why: e.code }));
  }

  private noteMalformed(m: { line: string; why: string }): void {
    this.malformed.push(m);
    this.o.onMalformed?.(m);
  }

  private settle(id: number) {
    const w = this.waiting;
    if (!w || w.id !== id) return undefined;
    clearTimeout(w.timer);
    this.waiting = undefined;
    return w;
  }

  private fail(e: BenchBoxError): void {
    this.closed = true;
    this.stopHeartbeat();
    const w = this.waiting;
    if (w) this.settle(w.id)?.reject(e);
  }

  /** One request, after the previous ones (replies come back in order). */
  request(req: Request): Promise<Record<string, string>> {
    const run = async () => {
      if (this.closed) throw new BenchBoxError('BENCH_CLOSED', `the bench box port ${this.o.path} is closed`);
      const id = this.nextId;
      this.nextId = this.nextId >= 65535 ? 1 : this.nextId + 1;
      const timeoutMs = this.o.replyTimeoutMs ?? 500;
      const reply = await new Promise<Reply>((resolve, reject) => {
        const timer = setTimeout(() => {
          if (this.settle(id)) reject(new BenchBoxError('BENCH_TIMEOUT', `the bench box did not answer ${req.verb} within ${timeoutMs} ms`, { verb: req.verb }));
        }, timeoutMs);
        this.waiting = { id, resolve, reject, timer };
        if (req.verb === 'HB') {
          const at = performance.now();
          this.beatsWritten.push(at);
          if (this.beatsWritten.length > BEATS_KEPT) this.beatsWritten.shift();
          this.o.onBeatWritten?.(at);
        }
        this.port.write(formatRequest(id, req), (err) => {
          if (err && this.settle(id)) reject(new BenchBoxError('BENCH_PORT', `writing to the bench box failed: ${err.message}`));
        });
      });
      if (reply.kind === 'err') throw new BenchBoxError('BENCH_REFUSED', `the bench box refused ${req.verb}: ${reply.code}${reply.text ? ` (${reply.text})` : ''}`, { box_code: reply.code });
      return (reply as Extract<Reply, { kind: 'ok' }>).fields;
    };
    const p = this.queue.then(run, run);
    this.queue = p.catch(() => undefined);
    return p;
  }

  hello(): Promise<Record<string, string>> {
    return this.request({ verb: 'HELLO' });
  }

  async status(): Promise<BoxStatus> {
    const f = await this.request({ verb: 'STATUS' });
    const s = decodeStatus(f);
    if ('bad' in s) throw new BenchBoxError('BENCH_MALFORMED', `the bench box STATUS reply has no valid ${s.bad}`, { fields: f });
    return s;
  }

  relay(state: 'OPEN' | 'CLOSE'): Promise<Record<string, string>> {
    return this.request({ verb: 'RELAY', state });
  }

  power(state: 'CUT' | 'RESTORE'): Promise<Record<string, string>> {
    return this.request({ verb: 'POWER', state });
  }

  async outputs(): Promise<number> {
    const f = await this.request({ verb: 'OUTPUTS' });
    const v = parseHex16(f.outputs);
    if (v === undefined) throw new BenchBoxError('BENCH_MALFORMED', 'the bench box OUTPUTS reply has no valid outputs', { fields: f });
    return v;
  }

  async setInputs(mask: number, value: number): Promise<number> {
    const f = await this.request({ verb: 'INPUTS', mask, value });
    const v = parseHex16(f.inputs);
    if (v === undefined) throw new BenchBoxError('BENCH_MALFORMED', 'the bench box INPUTS reply has no valid inputs', { fields: f });
    return v;
  }

  heartbeat(): Promise<Record<string, string>> {
    return this.request({ verb: 'HB' });
  }

  setTimeoutMs(ms: number): Promise<Record<string, string>> {
    return this.request({ verb: 'TIMEOUT', ms });
  }

  /**
   * The harness's longest silence toward the box before `atMs` (performance.now()): the largest gap between
   * two heartbeats written in the `windowMs` before it, or from the last one written to `atMs`. Written, not
   * queued: a beat that waited behind a slow request reached the box as late as it was written. Undefined
   * when no heartbeat was written before `atMs`.
   */
  silenceBefore(atMs: number, windowMs: number): number | undefined {
    return silenceIn(this.beatsWritten, atMs, windowMs);
  }

  /** Beat every intervalMs (well inside the box's timeout) until stopHeartbeat or close. */
  startHeartbeat(intervalMs: number): void {
    this.stopHeartbeat();
    this.beat = setInterval(() => {
      this.heartbeat().catch((e: BenchBoxError) => {
        this.heartbeatError = e;
        this.o.onHeartbeatError?.(e);
      });
    }, intervalMs);
    this.beat.unref();
  }

  stopHeartbeat(): void {
    if (this.beat) clearInterval(this.beat);
    this.beat = undefined;
  }

  async close(): Promise<void> {
    this.stopHeartbeat();
    this.closed = true;
    const w = this.waiting;
    if (w) this.settle(w.id)?.reject(new BenchBoxError('BENCH_CLOSED', 'the bench box client was closed'));
    if (this.port.isOpen) await new Promise<void>((r) => this.port.close(() => r()));
  }
}
