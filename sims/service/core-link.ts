// The service's side of the private core channel: starts the core in a worker thread, correlates native
// commands with their replies, keeps the latest published status, and reports a core exit so the service
// can revoke authority and start a new daemon incarnation.

import { EventEmitter } from 'node:events';
import { deserialize } from 'node:v8';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import type { CompiledMachine } from '../config/types.ts';
import { LiveTiming, UNORDERED, type ServiceNote, type ServiceTiming } from './timing.ts';
import { RecordingTiming } from './recording-timing.ts';
import { runIncarnation, type CoreThread } from './core-threads.ts';
import { isOutput, reportedClockMode, type PackedStatus, type CommandResult, type CoreStartOptions, type CoreStatus, type FromCore, type NativeOpName, type PlanAttachment, type PlanWorkspace, type ToCore } from '../core/protocol.ts';
import { PlanArena, type PlanLease } from '../core/plan-arena.ts';
import { ringFits, writtenBytes } from '../core/capture/reader.ts';
import { incarnationFile } from '../../fixtures/contract/recording-files.ts';
import { isTap, type FromTap, type RecordStamp, type ToTap } from '../../drivers/replay/tap.ts';

/** The result of a message the core answers without a native receipt (a step, a flush, what it owes). */
const noResult = (): NativeReply['result'] => ({ Sequence: 0n, Handle: 0n, Generation: 0n, Operation: 0, Result: 0, Reason: 0, AxisMask: 0 });
/** How long the service waits for the core to answer a fault injection (the private test channel), ms. */
const INJECT_PATIENCE_MS = 5000;

/**
 * Capture ring buffers of incarnations that are over and that their link no longer reads: a link lets go of
 * its ring when it starts the next incarnation or has shut its core down (its service has closed its
 * listeners by then, sims/service/service.ts stop), never while the ring can still be read. The next
 * incarnation of this process whose ring has the same size writes one of them again
 * (CoreStartOptions.captureReuse): at a 1 ms cycle a fresh ring faults in a zero page every 1.3 records for
 * as long as the retention (100 s in the fixtures) is not full, which was about a tenth of an idle core
 * thread's CPU. A spare keeps the pages its earlier incarnations wrote: at most KEEP_SPARE_RINGS are
 * kept, none that was written past SPARE_RING_MAX_BYTES.
 */
const spareRings: SharedArrayBuffer[] = [];
const KEEP_SPARE_RINGS = 2;
/**
 * A ring whose incarnations wrote more than this many bytes is let go (the collector frees it as before):
 * a spare holds every page it was ever written in, and a long session's ring holds hundreds of MB. 64 MB
 * is about 20 s of records of the nine-axis fixture, longer than a test session.
 */
const SPARE_RING_MAX_BYTES = 64 * 1024 * 1024;

function releaseRing(buffer: SharedArrayBuffer): void {
  let written: number;
  try {
    written = writtenBytes(buffer);
  } catch {
    return; // not a ring any more: nothing to keep
  }
  if (written > SPARE_RING_MAX_BYTES) return;
  spareRings.push(buffer);
  if (spareRings.length > KEEP_SPARE_RINGS) spareRings.shift();
}

/** A spare ring buffer the next incarnation of `machine` writes again (capture/reader.ts ringFits), taken out of the spares. */
function takeRing(machine: CompiledMachine, retentionMs: number): SharedArrayBuffer | undefined {
  if (!(retentionMs > 0)) return undefined;
  const i = spareRings.findIndex((b) => ringFits(b, machine.axes.length, machine.cycle_ns, retentionMs));
  return i < 0 ? undefined : spareRings.splice(i, 1)[0];
}

export interface NativeReply {
  result: CommandResult;
  detail?: string;
  extra?: Record<string, unknown>;
}

export class CoreUnavailable extends Error {
  readonly code = 'core_unavailable';
}

export class CoreLink extends EventEmitter {
  private worker?: CoreThread;
  private port?: MessagePort;
  private nextId = 1;
  private pending = new Map<number, { resolve: (r: NativeReply) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  /** The latest status publication as it came: an object, or the bytes of one not read yet (protocol.ts PackedStatus). */
  private latest?: CoreStatus;
  private latestBytes?: Uint8Array;
  /** The latest status the core published (undefined before the first of an incarnation). */
  get status(): CoreStatus | undefined {
    if (this.latestBytes !== undefined) {
      this.latest = deserialize(this.latestBytes) as CoreStatus;
      this.latestBytes = undefined;
    }
    return this.latest;
  }
  set status(s: CoreStatus | undefined) {
    this.latest = s;
    this.latestBytes = undefined;
  }
  incarnation = '';
  startupNotes: string[] = [];
  mappingMismatchMask = 0;
  /**
   * The current incarnation's telemetry capture ring (read it with sims/core/capture/reader.ts CaptureReader);
   * undefined while no incarnation is ready or when capture is off. A core restart brings a new ring.
   */
  captureBuffer?: SharedArrayBuffer;
  /**
   * The current incarnation's plan arena (sims/core/plan-arena.ts): uploads and programs claim a slot of it
   * and write the plan in place. Undefined while no incarnation is ready and on a paced replay; a core
   * restart brings a new one (a slot of the old one is never sent to the new core: prepare).
   */
  planArena?: PlanArena;
  private stopping = false;
  /** Why the current incarnation gave up, from its 'fatal' message (used in the exit reason). */
  private fatal = '';
  /** The current incarnation reported ready (only then is its exit a core failure to recover from). */
  private live = false;

  /**
   * `timing`: the service's clock and timed decisions (timing.ts), chosen by the composition root
   * (sims/main.ts); the link relays the pacer's cues to it and carries its notes to the core.
   */
  constructor(
    private readonly machine: CompiledMachine,
    private readonly options: Omit<CoreStartOptions, 'machine'>,
    readonly timing: ServiceTiming = options.record !== undefined ? new RecordingTiming() : new LiveTiming(),
  ) {
    super();
    timing.log.attach(this);
  }

  /** Start a core incarnation and resolve when it has brought its bus up. */
  start(): Promise<void> {
    const { port1, port2 } = new MessageChannel();
    // Drives keep their state when the master restarts: a driver that can say what it was hands it over.
    const driverState = this.status?.driver_state;
    // The previous incarnation is over (its thread ended it or exited): its ring is nobody's any more.
    if (this.captureBuffer && this.worker === undefined) releaseRing(this.captureBuffer);
    const spare = takeRing(this.machine, this.options.captureRetentionMs ?? this.machine.runtime.telemetry.retention_ms);
    const options: CoreStartOptions = {
      ...this.options,
      machine: this.machine,
      ...(driverState !== undefined ? { driverState } : {}),
      ...incarnationFiles(this.options, ++this.starts),
      ...(spare ? { captureReuse: spare } : {}),
    };
    this.fatal = '';
    this.status = undefined;
    this.outputsSeen = 0;
    this.captureBuffer = undefined;
    this.planArena = undefined;
    const worker = runIncarnation(port2, options);
    this.worker = worker;
    this.port = port1;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new CoreUnavailable('core did not start within 20 s')), 20_000);
      port1.on('message', (m: FromCore | FromTap | PackedStatus) => {
        // A message the previous incarnation's port delivers after this one started (a loaded host can
        // deliver them late) belongs to a core that is gone: its status would be served as this one's.
        if (this.port !== port1) return;
        if (!isTap(m) && m.t === 'ready') {
          clearTimeout(timer);
          this.live = true;
          this.incarnation = m.incarnation;
          this.startupNotes = m.startupNotes;
          this.mappingMismatchMask = m.mappingMismatchMask;
          this.captureBuffer = m.capture;
          this.planArena = m.planArena ? PlanArena.attach(m.planArena) : undefined;
          resolve();
          this.emit('ready', m.incarnation);
        }
        this.onMessage(m);
      });
      worker.onError((e) => {
        clearTimeout(timer);
        reject(e);
        this.onExit(`core error: ${e.message}`);
      });
      worker.onEnd((code) => {
        clearTimeout(timer);
        const why = this.fatal ? `core failed: ${this.fatal}` : `core exited with code ${code}`;
        if (!this.live) reject(new CoreUnavailable(why));
        this.onExit(why);
      });
    });
  }

  /** The core answered message `id` (a late answer to a wait already given up is dropped). */
  private answer(id: number, r: NativeReply): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    p.resolve(r);
  }

  /** The core's outputs this incarnation delivered (TimingLink.outputsSeen): what a recording numbers as outputs. */
  outputsSeen = 0;

  private onMessage(m: FromCore | FromTap | PackedStatus): void {
    if (isTap(m)) return this.onTap(m);
    if (m.t === 'status_packed') {
      this.seen(m.now_ns);
      this.latest = undefined;
      this.latestBytes = m.bytes;
      // Taken apart now only for those waiting for it (nextStatus); otherwise when read.
      if (this.listenerCount('status') > 0) this.emit('status', this.status);
      return;
    }
    if (isOutput(m)) this.outputsSeen++;
    switch (m.t) {
      case 'status':
        this.seen(m.status.now_ns);
        this.status = m.status;
        this.emit('status', m.status);
        return;
      case 'reply':
        return this.answer(m.id, { result: m.result, detail: m.detail, extra: m.extra });
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
      case 'stepped':
        if (this.pending.has(m.id)) this.seen(m.nowNs);
        return this.answer(m.id, { result: noResult(), extra: { now_ns: m.nowNs, cycles: m.cycles, answered: m.answered, ...(m.owed !== undefined ? { owed: m.owed } : {}) } });
      case 'ready':
        return;
    }
  }

  /** The tap's messages (drivers/replay/tap.ts): the host's and the pacer's answers, the pacer's cues. */
  private onTap(m: FromTap): void {
    switch (m.tap) {
      case 'flushed':
        return this.answer(m.id, { result: noResult() });
      case 'owed':
        return this.answer(m.id, { result: noResult(), extra: { owed: m.n } });
      case 'poll_turn':
        return this.answer(m.id, { result: noResult() });
      case 'cue':
        // For the decision log of a paced replay (replay-timing.ts attach): the live one does not listen.
        this.emit('cue', m);
        return;
    }
  }

  /** Post a message of the tap (never stamped: none is a request). */
  private postTap(m: ToTap): void {
    this.port?.postMessage(m);
  }

  /** A service note for the core to write into its recording (or to tell the pacer); see timing.ts. */
  note(data: ServiceNote): void {
    this.postTap({ tap: 'note', data });
  }

  /**
   * Resolve once a publication of at least `cycle` has arrived (true), or when `ms` of wall time passed
   * without a publication newer than the last (false): a replayed core that a loaded host runs slowly
   * towards the cycle still gets there, while one held elsewhere (it publishes its unchanged status) does not.
   */
  async statusFrom(cycle: bigint, ms: number): Promise<boolean> {
    let deadline = Date.now() + ms;
    let reached = this.status?.cycle ?? -1n;
    while (!(this.status && this.status.cycle >= cycle)) {
      if (this.status && this.status.cycle > reached) {
        reached = this.status.cycle;
        deadline = Date.now() + ms;
      }
      const left = deadline - Date.now();
      if (left <= 0 || !this.worker) return false;
      await this.nextStatus(Math.min(left, 50), null);
    }
    return true;
  }
  /** The service's clock: the timing's (timing.ts ServiceClock.now). */
  serviceNow(): bigint {
    return this.timing.clock.now();
  }

  /** Post with the service's stamp (its clock, and why when it sent the message of its own accord). */
  private postStamped(m: ToCore, origin?: string, transfer?: ArrayBuffer[], workspace?: PlanWorkspace, slot?: number): void {
    const stamp: RecordStamp & PlanAttachment = { sentNs: this.serviceNow(), ...(origin ? { origin } : {}), ...(workspace ? { workspace } : {}), ...(slot !== undefined ? { slot } : {}) };
    this.port?.postMessage({ ...m, ...stamp }, transfer ?? []);
  }

  private onExit(why: string): void {
    const wasLive = this.worker !== undefined && this.live;
    this.worker = undefined;
    this.live = false;
    // The arena went with the incarnation: no slot of it is claimed for a new upload (prepare copies out one held already).
    this.planArena = undefined;
    for (const [, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new CoreUnavailable(why));
    }
    this.pending.clear();
    if (wasLive && !this.stopping) this.emit('exit', why);
  }

  /** The worker thread the current incarnation runs in (core-threads.ts: a paced replay's is kept for the next). */
  get threadId(): number | undefined {
    return this.worker?.threadId;
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
    // The timing says the core's time is the service's clock (timing.ts ServiceClock.coreOnServiceClock).
    if (this.timing.clock.coreOnServiceClock) return this.timing.clock.now();
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
    const wait = this.timing.log.wait(UNORDERED.has(op) ? null : `cmd:${op}`, timeoutMs);
    const ms = wait.ms ?? timeoutMs;
    return new Promise((resolve, reject) => {
      const expire = () => {
        this.pending.delete(id);
        wait.done('timeout');
        reject(new CoreUnavailable(`no native receipt for ${op} within ${ms} ms`));
      };
      const timer = setTimeout(expire, ms);
      this.pending.set(id, { resolve: (r) => (wait.done('ok'), resolve(r)), reject, timer });
      this.postStamped({ t: 'cmd', id, op, generation, axisMask, ...extra } satisfies ToCore);
      // A replay of a wait that ran out when recorded runs out now (timing.ts CoreWait.timedOut).
      if (wait.timedOut) {
        clearTimeout(timer);
        expire();
      }
    });
  }

  /**
   * Hand a checked point list to the core's plan slot (its typed arrays are transferred, not copied), with
   * the memory to build the plan in when the caller has it (protocol.ts PlanWorkspace). With `lease`, the
   * arrays and the workspace are views of a plan arena slot (sims/core/plan-arena.ts): nothing is
   * transferred, the slot's number goes with them and the core holds the slot from then on. A slot of an
   * arena that is not this incarnation's (the core restarted during the upload) is copied out into arrays
   * of their own and given back: the new core never sees the old arena.
   */
  prepare(m: Omit<Extract<ToCore, { t: 'prepare' }>, 't' | 'id'>, workspace?: PlanWorkspace, lease?: PlanLease, timeoutMs = 5000): Promise<NativeReply> {
    if (!this.worker || !this.port) {
      lease?.release();
      return Promise.reject(new CoreUnavailable('core not running'));
    }
    let slot: number | undefined;
    if (lease && lease.arena === this.planArena) slot = lease.slot;
    else if (lease) {
      m = { ...m, timeNs: m.timeNs.slice(), position: m.position.slice(), velocity: m.velocity.slice(), hasVelocity: m.hasVelocity.slice(), ioMask: m.ioMask.slice(), ioValues: m.ioValues.slice() };
      workspace = undefined;
      lease.release();
    }
    const id = this.nextId++;
    // A timed wait on the core like a command's (timing.ts DecisionLog.wait): a replay whose core is held elsewhere
    // waits as long as it may, and a receipt that then never comes is a lost hold (ERROR), not a refusal the
    // test is judged on (suites/trajectory/handles.test.ts "unknown_handle ...": held at a status read the
    // replayed test never made, the prepare ran out after 5 s and was answered 409).
    const wait = this.timing.log.wait('cmd:prepare', timeoutMs);
    const ms = wait.ms ?? timeoutMs;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        wait.done('timeout');
        reject(new CoreUnavailable(`no native receipt for prepare within ${ms} ms`));
      }, ms);
      this.pending.set(id, { resolve: (r) => (wait.done('ok'), resolve(r)), reject, timer });
      const buffers = [m.timeNs.buffer, m.position.buffer, m.velocity.buffer, m.hasVelocity.buffer, m.ioMask.buffer, m.ioValues.buffer];
      if (workspace) buffers.push(workspace.t.buffer, workspace.q.buffer, workspace.qd.buffer);
      // Views of the arena are shared, not transferred (a SharedArrayBuffer cannot be): only plain buffers move.
      const transfer = buffers.filter((b, i, all): b is ArrayBuffer => b instanceof ArrayBuffer && all.indexOf(b) === i);
      this.postStamped({ t: 'prepare', id, ...m } satisfies ToCore, undefined, transfer, workspace, slot);
      if (slot !== undefined) lease!.handOver();
    });
  }

  /** Out-of-band fault injection (private test channel). */
  inject(fault: Extract<ToCore, { t: 'inject' }>['fault']): Promise<NativeReply> {
    if (!this.worker || !this.port) return Promise.reject(new CoreUnavailable('core not running'));
    const id = this.nextId++;
    // The private test channel has no documented bound: this is patience, not a rule. The core answers
    // at its next cycle; 5 s only keeps a host that starved the core thread for a second (seen at load 8-12
    // on 2 cores) from turning a test's set-up into an error.
    const wait = this.timing.log.wait('inject', INJECT_PATIENCE_MS);
    const ms = wait.ms ?? INJECT_PATIENCE_MS;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        wait.done('timeout');
        // The bound the wait used (a replay's may be longer than 1 s: timing.ts CoreWait.ms).
        reject(new CoreUnavailable(`no reply to fault injection within ${ms} ms`));
      }, ms);
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
   * Stepped clock: the answers the core owes now (CoreHost.owed: receipts not given yet, Homes under way),
   * without a cycle (private test channel /core-waits; harness/clients/stepped.ts settle).
   */
  owed(): Promise<number> {
    return this.query('owed', 10_000, 'no answer to a query of what the core owes').then((r) => Number(r.extra?.owed ?? 0));
  }

  /** Paced replay: true once the pacer says a live telemetry poll may be served (drivers/replay/tap.ts 'poll_turn'), false after `ms` or without a core. */
  pollTurn(ms: number): Promise<boolean> {
    return this.query('poll_turn', ms, 'no poll turn').then(
      () => true,
      () => false,
    );
  }

  /** A question to the core that is no request (never recorded, unstamped): its answer, or CoreUnavailable after `ms`. */
  private query(t: 'owed' | 'poll_turn', ms: number, what: string): Promise<NativeReply> {
    if (!this.worker || !this.port) return Promise.reject(new CoreUnavailable('core not running'));
    const id = this.nextId++;
    return new Promise<NativeReply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new CoreUnavailable(`${what} within ${ms} ms`));
      }, ms);
      this.pending.set(id, { resolve, reject, timer });
      this.postTap({ tap: t, id });
    });
  }

  /**
   * Wait for the next status publication (or the current one when fresh enough). `kind`: the wait as a
   * recorded decision (timing.ts DecisionLog.wait), null for the service's own polling waits.
   */
  nextStatus(timeoutMs: number, kind: string | null = 'status'): Promise<CoreStatus | undefined> {
    const wait = this.timing.log.wait(kind, timeoutMs);
    // A replay of a wait that ran out when recorded runs out now (timing.ts CoreWait.timedOut).
    if (wait.timedOut) {
      wait.done('timeout');
      return Promise.resolve(undefined);
    }
    const at = wait.atLeast;
    // A replay whose recorded wait got a publication this link already has (the replayed core ran ahead of
    // the live service): that one, as when recorded (timing.ts CoreWait.atLeast).
    if (at !== undefined && this.status && this.status.cycle >= at) {
      wait.done('ok', this.status.cycle);
      return Promise.resolve(this.status);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.off('status', on);
        wait.done('timeout');
        resolve(undefined);
      }, wait.ms ?? timeoutMs);
      const on = (s: CoreStatus) => {
        if (at !== undefined && s.cycle < at) return; // older than the one the recorded wait got
        this.off('status', on);
        clearTimeout(timer);
        wait.done('ok', s.cycle);
        resolve(s);
      };
      this.on('status', on);
    });
  }

  async shutdown(): Promise<void> {
    this.stopping = true;
    const w = this.worker;
    if (!w) return;
    this.post({ t: 'shutdown' });
    const exited = new Promise<void>((r) => w.onEnd(() => r()));
    const timer = setTimeout(() => void w.terminate(), 2000);
    await exited;
    clearTimeout(timer);
    this.port?.close();
    // The incarnation is over and the service that read its ring has stopped: the ring is a spare now.
    if (this.captureBuffer) releaseRing(this.captureBuffer);
    this.captureBuffer = undefined;
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
        this.postTap({ tap: 'flush', id });
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
