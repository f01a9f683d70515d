// The service's side of the private core channel: starts the core in a worker thread, correlates native
// commands with their replies, keeps the latest published status, and reports a core exit so the service
// can revoke authority and start a new daemon incarnation.

import { EventEmitter } from 'node:events';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import type { CompiledMachine } from '../config/types.ts';
import { FenceOrder, UNORDERED } from './fence-order.ts';
import { CoreWaits } from './core-waits.ts';
import { workerEntry } from '../paths.ts';
import { reportedClockMode, type CommandResult, type CoreStartOptions, type CoreStatus, type FromCore, type NativeOpName, type PostStamp, type ToCore } from '../core/protocol.ts';
import { incarnationFile } from '../../fixtures/contract/recording-files.ts';

export interface NativeReply {
  result: CommandResult;
  detail?: string;
  extra?: Record<string, unknown>;
}

export class CoreUnavailable extends Error {
  readonly code = 'core_unavailable';
}

export class CoreLink extends EventEmitter {
  private worker?: Worker;
  private port?: MessagePort;
  private nextId = 1;
  private pending = new Map<number, { resolve: (r: NativeReply) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  status?: CoreStatus;
  incarnation = '';
  startupNotes: string[] = [];
  mappingMismatchMask = 0;
  /**
   * The current incarnation's telemetry capture ring (read it with sims/core/capture/reader.ts CaptureReader);
   * undefined while no incarnation is ready or when capture is off. A core restart brings a new ring.
   */
  captureBuffer?: SharedArrayBuffer;
  private stopping = false;
  /** Why the current incarnation gave up, from its 'fatal' message (used in the exit reason). */
  private fatal = '';
  /** The current incarnation reported ready (only then is its exit a core failure to recover from). */
  private live = false;

  constructor(
    private readonly machine: CompiledMachine,
    private readonly options: Omit<CoreStartOptions, 'machine'>,
  ) {
    super();
  }

  /** Start a core incarnation and resolve when it has brought its bus up. */
  start(): Promise<void> {
    const { port1, port2 } = new MessageChannel();
    // Drives keep their state when the master restarts: a driver that can say what it was hands it over.
    const driverState = this.status?.driver_state;
    const options: CoreStartOptions = { ...this.options, machine: this.machine, ...(driverState !== undefined ? { driverState } : {}), ...incarnationFiles(this.options, ++this.starts) };
    this.fatal = '';
    this.status = undefined;
    this.captureBuffer = undefined;
    const worker = new Worker(workerEntry('core'), {
      workerData: { port: port2, options },
      transferList: [port2],
    });
    this.worker = worker;
    this.port = port1;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new CoreUnavailable('core did not start within 20 s')), 20_000);
      port1.on('message', (m: FromCore) => {
        // A message the previous incarnation's port delivers after this one started (a loaded host can
        // deliver them late) belongs to a core that is gone: its status would be served as this one's.
        if (this.port !== port1) return;
        if (m.t === 'ready') {
          clearTimeout(timer);
          this.live = true;
          this.incarnation = m.incarnation;
          this.startupNotes = m.startupNotes;
          this.mappingMismatchMask = m.mappingMismatchMask;
          this.captureBuffer = m.capture;
          resolve();
          this.emit('ready', m.incarnation);
        }
        this.onMessage(m);
      });
      worker.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
        this.onExit(`core error: ${e.message}`);
      });
      worker.once('exit', (code) => {
        clearTimeout(timer);
        const why = this.fatal ? `core failed: ${this.fatal}` : `core exited with code ${code}`;
        if (!this.live) reject(new CoreUnavailable(why));
        this.onExit(why);
      });
    });
  }

  private onMessage(m: FromCore): void {
    switch (m.t) {
      case 'status':
        this.seen(m.status.now_ns);
        this.status = m.status;
        this.emit('status', m.status);
        return;
      case 'reply': {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        clearTimeout(p.timer);
        p.resolve({ result: m.result, detail: m.detail, extra: m.extra });
        return;
      }
      case 'stop_drained':
        this.emit('stop_drained', m.sequence);
        return;
      case 'event':
        if (m.time_ns !== undefined) this.seen(m.time_ns);
        this.emit('core_event', m.type, m.payload, m.time_ns);
        return;
      case 'home_done':
        this.emit('home_done', m);
        return;
      case 'fatal':
        this.fatal = m.message;
        this.emit('fatal', m.message);
        return;
      case 'record_flushed': {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        clearTimeout(p.timer);
        p.resolve({ result: { Sequence: 0n, Handle: 0n, Generation: 0n, Operation: 0, Result: 0, Reason: 0, AxisMask: 0 } });
        return;
      }
      case 'stepped': {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        clearTimeout(p.timer);
        this.seen(m.nowNs);
        p.resolve({ result: { Sequence: 0n, Handle: 0n, Generation: 0n, Operation: 0, Result: 0, Reason: 0, AxisMask: 0 }, extra: { now_ns: m.nowNs, cycles: m.cycles, answered: m.answered } });
        return;
      }
      case 'replay_service':
        this.replayed(m);
        return;
      case 'ready':
        return;
    }
  }

  /**
   * The service's clock on a paced replay of a format 2 recording: the recorded service time the replay has
   * reached (set by the pacer, never moving back), else null and the host clock is used. Every read moves
   * it on by at least a nanosecond, as a monotonic clock does, so two reads never give the same deadline.
   */
  private replayClock: bigint | null = null;
  private replayHostClock = false;
  /** The recorded service decisions to take (lease expiry), set by the service; see replayed(). */
  onReplayedExpiry?: (generation: bigint) => void;

  /** The order of fence decisions: noted into a recording, held to the recorded order on a replay. */
  readonly fenceOrder = new FenceOrder(
    (data) => {
      if (this.options.record) this.port?.postMessage({ t: 'service_note', data } satisfies ToCore);
    },
    (op) => this.noteHoldLost('fence', op),
  );
  /** The service's timed waits on the core: noted into a recording, bounded by the recorded outcome on a replay. */
  readonly coreWaits = new CoreWaits(
    (data) => {
      if (this.options.record) this.port?.postMessage({ t: 'service_note', data } satisfies ToCore);
    },
    (kind) => this.noteHoldLost('core_wait', kind),
  );

  /**
   * A paced replay's hold the service kept in vain (a fence decision, a status read's publication): told
   * to the pacer, which reports it in the verdict as a lost hold (sims/replay/sync-points.ts) so the harness
   * ends the test in ERROR rather than judging the target on an order the replay did not keep.
   */
  noteHoldLost(kind: 'fence' | 'publication' | 'core_wait' | 'lease_expiry', detail: string): void {
    if (this.replayClock === null) return;
    this.port?.postMessage({ t: 'service_note', data: { t: 'hold_lost', kind, detail } } satisfies ToCore);
  }

  /**
   * Status reads as sync points (docs/recording.md "Status reads"): a recording notes the publication
   * cycle each GET /v1/status served; a paced replay gets that list, serves read k from the publication of
   * the same cycle (the paced core holds there until the read is noted), and notes every read it serves.
   */
  private statusReads: bigint[] = [];
  /** Format 3: the service's clock each recorded status read showed (its now_host_ns), by read. */
  private statusReadClocks: bigint[] = [];
  private statusReadsTaken = 0;
  /**
   * Paced replay: the publication cycle the recorded service served its next status read from, if any.
   * A format 3 recording also says what its clock showed then: the service's clock is moved on to it, so
   * the read shows the recorded time (a deadline read earlier lies as far ahead of it as it did).
   */
  nextStatusReadCycle(): bigint | undefined {
    // A read served before the core published anything (a stepped core before its first step) is not noted
    // when recorded (noteStatusRead has no cycle to note): it is no sync point on a replay either, and must
    // not take the next recorded read, which a later read of the test made.
    if (this.status === undefined) return undefined;
    const k = this.statusReadsTaken;
    if (k >= this.statusReads.length) return undefined;
    this.statusReadsTaken++;
    const clock = this.statusReadClocks[k];
    // serviceNow() moves on by a nanosecond before it answers: the read then shows the recorded value.
    if (clock !== undefined && this.replayClock !== null && clock - 1n > this.replayClock) this.replayClock = clock - 1n;
    return this.statusReads[k];
  }
  /** Resolve once a publication of at least `cycle` has arrived (true), or after `ms` of wall time (false). */
  async statusFrom(cycle: bigint, ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!(this.status && this.status.cycle >= cycle)) {
      const left = deadline - Date.now();
      if (left <= 0 || !this.worker) return false;
      await this.nextStatus(Math.min(left, 50), null);
    }
    return true;
  }
  /**
   * A status read was served from the publication of `cycle`, showing the service's clock at `nowNs`:
   * noted into a recording, told to a paced replay.
   */
  noteStatusRead(cycle: bigint | undefined, nowNs?: bigint): void {
    if (cycle === undefined || !(this.options.record || this.statusReads.length)) return;
    this.port?.postMessage({ t: 'service_note', data: { t: 'status_read', cycle: cycle.toString(), ...(nowNs !== undefined ? { now_ns: nowNs.toString() } : {}) } } satisfies ToCore);
  }

  /**
   * The service's answer to a control or program request (its operation, HTTP status and leading reason
   * label): noted into a recording, and told to a paced replay, which compares it with the recorded one
   * (docs/recording.md "The service's replies"). Renewals and jog updates are left out: a controller sends
   * them on its own wall-clock timer, so a replay sees another number of them.
   */
  noteReply(reply: { status: number; body: Record<string, unknown> }): void {
    if (!(this.options.record || this.replayClock !== null)) return;
    const op = typeof reply.body.operation === 'string' ? reply.body.operation : 'unknown';
    if (UNORDERED.has(op)) return;
    const error = reply.body.error;
    const label = typeof error === 'string' ? (error.split(':')[0] ?? '').trim() : '';
    this.port?.postMessage({ t: 'service_note', data: { t: 'http_reply', op, status: reply.status, label } } satisfies ToCore);
  }

  /**
   * A telemetry poll was served: noted into a recording (the paced replay then holds the core where the
   * recorded poll was noted until the live one is), and told to a paced replay.
   */
  noteTelemetryRead(): void {
    if (!(this.options.record || this.replayClock !== null)) return;
    this.port?.postMessage({ t: 'service_note', data: { t: 'telemetry_read' } } satisfies ToCore);
  }

  /** Paced replay: the lease deadlines the recorded service gave its acquires, in order (taken one by one). */
  private acquireDeadlines: bigint[] = [];
  /** The recorded deadline of the next acquire on a paced replay, or undefined (then: now + lease). */
  recordedAcquireDeadline(): bigint | undefined {
    return this.acquireDeadlines.shift();
  }

  private replayed(m: Extract<FromCore, { t: 'replay_service' }>): void {
    if (m.fences) {
      // A pacer's first cue (each core incarnation of a replay has its own recording and pacer): what the
      // recorded service did during that incarnation, from its start.
      this.fenceOrder.load(m.fences, m.fenceOutcomes);
      this.acquireDeadlines = [...(m.acquires ?? [])];
      this.statusReads = [...(m.statusReads ?? [])];
      this.statusReadClocks = [...(m.statusReadClocks ?? [])];
      this.statusReadsTaken = 0;
      this.coreWaits.load(m.coreWaits ?? []);
    }
    this.replayHostClock = m.hostClock;
    if (this.replayClock === null || m.clockNs > this.replayClock) this.replayClock = m.clockNs;
    if (m.expire) this.onReplayedExpiry?.(m.expire.generation);
  }

  /** True when the service's time and its own timed decisions come from a recording (paced replay, format 2). */
  get replaying(): boolean {
    return this.replayClock !== null;
  }

  /** The service's clock: host monotonic ns, or on a paced replay the recorded service time reached. */
  serviceNow(): bigint {
    if (this.replayClock === null) return process.hrtime.bigint();
    return ++this.replayClock;
  }

  /** Post with the service's stamp (its clock, and why when it sent the message of its own accord). */
  private postStamped(m: ToCore, origin?: string, transfer?: ArrayBuffer[]): void {
    const stamp: PostStamp = { sentNs: this.serviceNow(), ...(origin ? { origin } : {}) };
    this.port?.postMessage({ ...m, ...stamp }, transfer ?? []);
  }

  private onExit(why: string): void {
    const wasLive = this.worker !== undefined && this.live;
    this.worker = undefined;
    this.live = false;
    for (const [, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new CoreUnavailable(why));
    }
    this.pending.clear();
    if (wasLive && !this.stopping) this.emit('exit', why);
  }

  /** The bus driver the core runs on (registry name). */
  get driverName(): string {
    return this.options.driver;
  }
  get clockMode(): string {
    return reportedClockMode(this.options.clock);
  }

  private lastCoreNs = 0n;
  private seen(t: bigint): void {
    if (t > this.lastCoreNs) this.lastCoreNs = t;
  }

  /**
   * The core's clock as the service knows it, for events the service publishes itself. On the real-time
   * clock the core's time is the host monotonic clock, read here directly; on the fast and stepped clocks
   * it is the latest core time the service has seen (status, an event, a step).
   */
  coreNow(): bigint {
    // A paced replay of a recording made on the host clock: the core's time was the service's clock.
    if (this.replayClock !== null && this.replayHostClock) return this.serviceNow();
    return this.options.clock.mode === 'realtime' ? process.hrtime.bigint() : this.lastCoreNs;
  }

  get running(): boolean {
    return this.worker !== undefined;
  }

  /** Post a message to the core; `origin` names a message the service sends of its own accord (lease_expired). */
  post(m: ToCore, origin?: string): void {
    this.postStamped(m, origin);
  }

  /** Send a native command and wait for its CommandResult. */
  command(op: NativeOpName, generation: bigint, axisMask = 0, extra: { label?: string; handle?: bigint } = {}, timeoutMs = 1000): Promise<NativeReply> {
    if (!this.worker || !this.port) return Promise.reject(new CoreUnavailable('core not running'));
    const id = this.nextId++;
    const wait = this.coreWaits.begin(UNORDERED.has(op) ? null : `cmd:${op}`, timeoutMs);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        wait.done('timeout');
        reject(new CoreUnavailable(`no native receipt for ${op} within ${timeoutMs} ms`));
      }, wait.ms);
      this.pending.set(id, { resolve: (r) => (wait.done('ok'), resolve(r)), reject, timer });
      this.postStamped({ t: 'cmd', id, op, generation, axisMask, ...extra } satisfies ToCore);
    });
  }

  /** Hand a checked point list to the core's plan slot (its typed arrays are transferred, not copied). */
  prepare(m: Omit<Extract<ToCore, { t: 'prepare' }>, 't' | 'id'>, timeoutMs = 5000): Promise<NativeReply> {
    if (!this.worker || !this.port) return Promise.reject(new CoreUnavailable('core not running'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new CoreUnavailable(`no native receipt for prepare within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      const transfer = [m.timeNs.buffer, m.position.buffer, m.velocity.buffer, m.hasVelocity.buffer, m.ioMask.buffer, m.ioValues.buffer].filter(
        (b, i, all): b is ArrayBuffer => b instanceof ArrayBuffer && all.indexOf(b) === i,
      );
      this.postStamped({ t: 'prepare', id, ...m } satisfies ToCore, undefined, transfer);
    });
  }

  /** Out-of-band fault injection (private test channel). */
  inject(fault: Extract<ToCore, { t: 'inject' }>['fault']): Promise<NativeReply> {
    if (!this.worker || !this.port) return Promise.reject(new CoreUnavailable('core not running'));
    const id = this.nextId++;
    const wait = this.coreWaits.begin('inject', 1000);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        wait.done('timeout');
        reject(new CoreUnavailable('no reply to fault injection within 1 s'));
      }, wait.ms);
      this.pending.set(id, { resolve: (r) => (wait.done('ok'), resolve(r)), reject, timer });
      this.postStamped({ t: 'inject', id, fault } satisfies ToCore);
    });
  }

  /** Stepped clock: run `cycles` cycles now (private test channel). Resolves with the core's time after them. */
  step(cycles: number): Promise<NativeReply> {
    if (!this.worker || !this.port) return Promise.reject(new CoreUnavailable('core not running'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      // generous: a step runs flat out, about 100 000 cycles per second on this machine
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new CoreUnavailable(`no answer to a step of ${cycles} cycles`));
      }, 10_000 + cycles / 10);
      this.pending.set(id, { resolve, reject, timer });
      // Stamped like every request: a stepped core's recording keeps the steps (the replay matches them).
      this.postStamped({ t: 'step', id, cycles } satisfies ToCore);
    });
  }

  /**
   * Wait for the next status publication (or the current one when fresh enough). `kind`: the wait as a
   * recorded decision (core-waits.ts), null for the service's own polling waits.
   */
  nextStatus(timeoutMs: number, kind: string | null = 'status'): Promise<CoreStatus | undefined> {
    const wait = this.coreWaits.begin(kind, timeoutMs);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.off('status', on);
        wait.done('timeout');
        resolve(undefined);
      }, wait.ms);
      const on = (s: CoreStatus) => {
        clearTimeout(timer);
        wait.done('ok');
        resolve(s);
      };
      this.once('status', on);
    });
  }

  async shutdown(): Promise<void> {
    this.stopping = true;
    const w = this.worker;
    if (!w) return;
    this.post({ t: 'shutdown' });
    const exited = new Promise<void>((r) => w.once('exit', () => r()));
    const timer = setTimeout(() => void w.terminate(), 2000);
    await exited;
    clearTimeout(timer);
    this.port?.close();
  }

  /** Incarnations started so far (the first is 1). */
  private starts = 0;

  /**
   * Kill the current incarnation as a crash would (crash-isolation tests). The service sees the exit,
   * revokes authority and starts a new incarnation; this resolves when that one is ready.
   */
  async crash(): Promise<string> {
    const w = this.worker;
    if (!w) throw new CoreUnavailable('core not running');
    // A recorded core writes out its recording first: the session up to the crash is what a replay plays
    // (the writer otherwise keeps up to 250 cycles in memory, and a short session would leave nothing). A
    // paced replay runs to the end of its recording and writes its verdict: that is where the recorded core died.
    if ((this.options.record || this.options.replayPace) && this.port) {
      const id = this.nextId++;
      await new Promise<unknown>((resolve, reject) => {
        const timer = setTimeout(() => {
          this.pending.delete(id);
          resolve(undefined); // a core too busy to answer is killed all the same
        }, 2_000);
        this.pending.set(id, { resolve, reject, timer });
        this.port!.postMessage({ t: 'flush_record', id } satisfies ToCore);
      });
    }
    const ready = new Promise<string>((resolve) => this.once('ready', resolve));
    await w.terminate();
    return ready;
  }
}

/**
 * A recording is one core incarnation (docs/recording.md "Core restarts"): the n-th incarnation of a
 * recorded session records into `<file>.core-<n>.hilrec`, and the n-th of a replayed one plays that file
 * and writes its verdict beside the first's as `<verdict>.core-<n>.json`. The first keeps the names given;
 * the name is fixtures/contract/recording-files.ts's, which the harness reads them by.
 */
export function incarnationFiles(o: Pick<CoreStartOptions, 'record' | 'driverParams' | 'replayPace'>, n: number): Partial<CoreStartOptions> {
  if (n <= 1) return {};
  const nth = (path: string, ext: 'hilrec' | 'json') => incarnationFile(path, n, ext);
  const file = o.driverParams?.file;
  return {
    ...(o.record ? { record: { ...o.record, path: nth(o.record.path, 'hilrec') } } : {}),
    ...(typeof file === 'string' ? { driverParams: { ...o.driverParams, file: nth(file, 'hilrec') } } : {}),
    ...(o.replayPace ? { replayPace: { ...o.replayPace, verdictFile: nth(o.replayPace.verdictFile, 'json') } } : {}),
  };
}
