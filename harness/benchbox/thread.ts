// The bench box client in a worker thread of its own, and its proxy in the test's thread. The box opens the
// E-stop chain when it hears no heartbeat for its timeout (500 ms on a rig, docs/benchbox.md "Protocol");
// written from the test worker's thread, the beats waited behind whatever held that thread (a long decode, a
// loaded host) and the chain opened mid-test. In a thread of its own (harness/benchbox/thread-worker.ts,
// started through thread-entry.mjs) the client's port and heartbeat timer, and with `--bench sim` the
// simulated box and its deliveries to the stack's test channel, keep time while the test's thread is held,
// as the grant keeper's renewals do (harness/clients/keeper.ts).
//
// The proxy has the client's API. What the client records arrives as it happens and is kept here, so the
// synchronous reads (events, silenceBefore, heartbeatError, rebooted, malformed) need no round trip; times
// come as epoch ms and are kept on this thread's performance.now() base. A thread that fails or exits
// unasked is never silent: heartbeatError becomes BENCH_CLOSED, and every request after it fails with it.

import { Worker } from 'node:worker_threads';
import { QUIET_NICE, type ThreadNiceTaken } from '../priority.ts';
import { BEATS_KEPT, BenchBoxError, silenceIn, type BenchErrorCode, type BoxEvent } from './client.ts';
import type { BoxStatus } from './protocol.ts';
import type { CallMethod, Closed, FromThread, OpenData, SimBoxSnapshot, ThreadData, ToThread, WireError } from './thread-worker.ts';

export type { SimBoxSnapshot } from './thread-worker.ts';

/**
 * The heartbeat thread's nice value: the quiet files' (harness/priority.ts), whatever the worker that starts
 * it runs at, so that its beats leave in time beside busy processes (raiseThreadNice; the keeper's likewise).
 */
export const BENCH_NICE = QUIET_NICE;

/** How long close waits for the thread to close the port before it is stopped anyway. */
const CLOSE_WAIT_MS = 5_000;

export interface BenchThreadOptions {
  /** The serial port's path (the mock port's with `mock` or `sim`). */
  path: string;
  /** Use @serialport/binding-mock instead of the real serial driver. */
  mock?: boolean;
  /** How long a reply may take (default 500 ms). */
  replyTimeoutMs?: number;
  /**
   * A simulated box (harness/benchbox/simbox.ts) on a mock port at `path`, in the thread; its chain and power
   * go to the stack's test channel at `testChannel` (a unix socket) when given. `buttonPressed`: an E-stop
   * button in the chain is pressed.
   */
  sim?: { testChannel?: string; buttonPressed?: boolean };
}

/** The simulated box, as a test reaches it across the thread. */
export interface SimBoxHandle {
  /** Its state now; after close, as close left it. */
  model(): Promise<SimBoxSnapshot>;
  /**
   * Run its heartbeat watchdog at `atMs` (this thread's performance.now()) and send the host what the
   * watchdog says; resolves to those lines. A time past its timeout is a box whose clock ran ahead.
   */
  tick(atMs: number): Promise<string[]>;
  /** Stop answering (a box gone silent) or answer again. */
  setSilent(silent: boolean): Promise<void>;
  /** Resolves once its chain and power changes so far have reached the stack: the first failed delivery, if any. */
  drain(): Promise<string | undefined>;
  /** Make the thread fail (its tests): a thread that dies. */
  crash(): void;
}

let warnedPriority = false;

/** A request to the thread before its id is given (each form of it: Omit alone would merge them). */
type Unnumbered<T> = T extends { id: number } ? Omit<T, 'id'> : never;

function unwire(w: WireError): Error {
  if (w.code !== undefined) return new BenchBoxError(w.code as BenchErrorCode, w.message, w.detail ?? {});
  const e = new Error(w.message);
  e.name = w.name;
  return e;
}

export class BenchBoxThread {
  /** Unsolicited events (BOOT, ESTOP) in arrival order, atMs on this thread's performance.now(). */
  readonly events: BoxEvent[] = [];
  /** Lines that were not protocol, with why. */
  readonly malformed: Array<{ line: string; why: string }> = [];
  /** Set when the box announced BOOT after open: whatever the run set up on it is gone. */
  rebooted = false;
  /** The last heartbeat failure, or the thread's death (BENCH_CLOSED). */
  heartbeatError?: BenchBoxError;
  /** Where the thread's nice value went (BENCH_NICE): set once the thread has come up. */
  priority?: ThreadNiceTaken;
  /** The simulated box (`sim`), for tests. */
  sim?: SimBoxHandle;
  /** When each of the last heartbeats was written to the port (this thread's performance.now()), oldest first. */
  private readonly beats: number[] = [];
  private readonly calls = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  private nextId = 1;
  /** Why requests fail now: the thread died, or the client was closed. */
  private ended?: BenchBoxError;
  private closing?: Promise<void>;
  private closedWith?: Closed;
  /** The port's path once openPort was called. */
  private path = '(not opened)';
  private opening?: { resolve(): void; reject(e: Error): void };
  private readonly worker: Worker;

  private constructor() {
    // Plain Node options, as the keeper's: the entry registers the TypeScript loader itself.
    const data: ThreadData = { nice: BENCH_NICE };
    this.worker = new Worker(new URL('./thread-entry.mjs', import.meta.url), { execArgv: [], workerData: data });
    this.worker.unref(); // never what keeps a process alive
    this.worker.on('message', (m: FromThread) => {
      if ('opened' in m) this.opening?.resolve();
      else if ('openFailed' in m) this.opening?.reject(unwire(m.openFailed));
      else this.onMessage(m);
    });
    this.worker.on('error', (e) => this.die(`the bench box thread failed: ${e.message}`));
    this.worker.on('exit', (code) => this.die(`the bench box thread exited (code ${code})`));
  }

  /**
   * Starts the thread; openPort opens the port in it. A thread takes a second or so to come up on a loaded
   * host (its TypeScript loader, the serial modules): a caller that knows it will need one starts it early.
   */
  static start(): BenchBoxThread {
    return new BenchBoxThread();
  }

  /** Starts the thread, opens the port there and greets the box (HELLO); refuses one of another protocol version. */
  static open(o: BenchThreadOptions): Promise<BenchBoxThread> {
    return BenchBoxThread.start().openPort(o);
  }

  /**
   * Opens the port in the thread and greets the box; refuses a box of another protocol version. On failure
   * the thread is stopped and the error (a BenchBoxError with the client's code) thrown.
   */
  async openPort(o: BenchThreadOptions): Promise<this> {
    this.path = o.path;
    const data: OpenData = { path: o.path, ...(o.mock ? { mock: true } : {}), ...(o.replyTimeoutMs ? { replyTimeoutMs: o.replyTimeoutMs } : {}), ...(o.sim ? { sim: o.sim } : {}) };
    try {
      if (this.ended) throw this.ended;
      await new Promise<void>((resolve, reject) => {
        this.opening = { resolve, reject };
        this.worker.postMessage({ op: 'open', data } satisfies ToThread);
      });
    } catch (e) {
      await this.stop();
      throw e;
    } finally {
      this.opening = undefined;
    }
    if (o.sim) {
      this.sim = {
        model: () => (this.closedWith?.model ? Promise.resolve(this.closedWith.model) : (this.request({ op: 'sim', what: 'model' }) as Promise<SimBoxSnapshot>)),
        tick: (atMs) => this.request({ op: 'sim', what: 'tick', at: performance.timeOrigin + atMs }) as Promise<string[]>,
        setSilent: async (silent) => void (await this.request({ op: 'sim', what: 'silent', silent })),
        drain: () => (this.closedWith ? Promise.resolve(this.closedWith.injectError) : (this.request({ op: 'sim', what: 'drain' }) as Promise<string | undefined>)),
        crash: () => this.worker.postMessage({ op: 'crash' } satisfies ToThread),
      };
    }
    return this;
  }

  /** Ends a thread that has no open port to close (one that failed to open, or was never asked to). */
  async stop(): Promise<void> {
    this.closing ??= Promise.resolve();
    this.ended ??= new BenchBoxError('BENCH_CLOSED', 'the bench box client was closed');
    await this.worker.terminate();
  }

  private onMessage(m: FromThread): void {
    const local = (epochMs: number) => epochMs - performance.timeOrigin;
    if ('reply' in m) {
      const c = this.calls.get(m.reply);
      this.calls.delete(m.reply);
      if (m.error) c?.reject(unwire(m.error));
      else c?.resolve(m.value);
    } else if ('event' in m) {
      this.events.push({ event: m.event.event, fields: m.event.fields, atMs: local(m.event.at) });
      if (m.event.event === 'BOOT') this.rebooted = true;
    } else if ('beat' in m) {
      this.beats.push(local(m.beat));
      if (this.beats.length > BEATS_KEPT) this.beats.shift();
    } else if ('malformed' in m) this.malformed.push(m.malformed);
    else if ('heartbeatError' in m) this.heartbeatError = unwire(m.heartbeatError) as BenchBoxError;
    else if ('priority' in m) {
      this.priority = m.priority;
      // Not fatal: the beats still leave from their own thread, but at the starting worker's nice value,
      // behind busy neighbours on a loaded host.
      if (m.priority.error && m.priority.from !== null && m.priority.from > BENCH_NICE && !warnedPriority) {
        warnedPriority = true;
        process.stderr.write(`warning: the bench box thread stays at nice ${m.priority.nice} (raising it to ${BENCH_NICE} was refused: ${m.priority.error}); its heartbeats may leave late beside busy processes\n`);
      }
    }
  }

  /** The thread is gone unasked: say so where the target looks (heartbeatError) and fail every request. */
  private die(why: string): void {
    if (this.ended) return;
    const e = new BenchBoxError('BENCH_CLOSED', `${why}: no heartbeat reaches the bench box ${this.path} any more`);
    this.ended = e;
    this.opening?.reject(e);
    if (!this.closing) {
      this.heartbeatError = e;
      process.stderr.write(`warning: ${e.message}\n`);
    }
    for (const c of this.calls.values()) c.reject(e);
    this.calls.clear();
  }

  private request(m: Unnumbered<ToThread>): Promise<unknown> {
    if (this.ended) return Promise.reject(this.ended);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.calls.set(id, { resolve, reject });
      this.worker.postMessage({ ...m, id } as ToThread);
    });
  }

  private call<T>(method: CallMethod, ...args: unknown[]): Promise<T> {
    return this.request({ op: 'call', method, args }) as Promise<T>;
  }

  hello(): Promise<Record<string, string>> {
    return this.call('hello');
  }
  status(): Promise<BoxStatus> {
    return this.call('status');
  }
  relay(state: 'OPEN' | 'CLOSE'): Promise<Record<string, string>> {
    return this.call('relay', state);
  }
  power(state: 'CUT' | 'RESTORE'): Promise<Record<string, string>> {
    return this.call('power', state);
  }
  outputs(): Promise<number> {
    return this.call('outputs');
  }
  setInputs(mask: number, value: number): Promise<number> {
    return this.call('setInputs', mask, value);
  }
  heartbeat(): Promise<Record<string, string>> {
    return this.call('heartbeat');
  }
  setTimeoutMs(ms: number): Promise<Record<string, string>> {
    return this.call('setTimeoutMs', ms);
  }

  /** Resolves once everything the thread sent before it (events, beats, failures) has been taken in here. */
  async sync(): Promise<void> {
    await this.request({ op: 'sync' });
  }

  /** As BenchBoxClient.silenceBefore, from the beats' write times as the thread reported them. */
  silenceBefore(atMs: number, windowMs: number): number | undefined {
    return silenceIn(this.beats, atMs, windowMs);
  }

  /** Beat every intervalMs from the thread until stopHeartbeat or close. */
  startHeartbeat(intervalMs: number): void {
    if (this.ended) {
      this.heartbeatError = this.ended;
      return;
    }
    this.worker.postMessage({ op: 'startHeartbeat', ms: intervalMs } satisfies ToThread);
  }

  stopHeartbeat(): void {
    if (!this.ended) this.worker.postMessage({ op: 'stopHeartbeat' } satisfies ToThread);
  }

  /** Stops the beats, closes the port (and the simulated box, its deliveries drained), then ends the thread. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (!this.ended) {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), CLOSE_WAIT_MS)));
        try {
          const closed = await Promise.race([this.request({ op: 'close' }) as Promise<Closed>, late]);
          if (closed) this.closedWith = closed;
        } catch {
          // The thread died while closing: its port went with it.
        } finally {
          clearTimeout(timer);
        }
      }
      this.ended ??= new BenchBoxError('BENCH_CLOSED', 'the bench box client was closed');
      for (const c of this.calls.values()) c.reject(this.ended);
      this.calls.clear();
      await this.worker.terminate();
    })();
    return this.closing;
  }
}
