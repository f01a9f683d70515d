// The core host: everything around Core that is not cycle logic. It creates the bus driver by registry
// name inside a DriverHost, sizes the telemetry capture ring, asks for the scheduling priority the clock
// deserves, and runs cycles on the chosen clock (clock.ts). It also owns the driver's optional facets:
// fault injection and the drive state handed to the next incarnation. The worker thread (worker.ts) is a
// thin adapter around it; tests and replay use it in-process with the stepped clock.

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { getPriority, setPriority } from 'node:os';
import { hrtime } from 'node:process';
import { createDriver } from '../../drivers/index.ts';
import { lowerThread, ownThreadId } from '../../drivers/thread-scheduling.ts';
import { parseFaultSpec, FaultSpecError } from '../../drivers/faults.ts';
import { DriverHost } from '../../drivers/host.ts';
import { RecordingDriver } from '../../drivers/replay/recorder.ts';
import { isTap, type FromTap, type RecordStamp, type ToTap } from '../../drivers/replay/tap.ts';
import { provenance } from '../paths.ts';
import { CaptureRing } from './capture/ring.ts';
import { PlanArena } from './plan-arena.ts';
import { makeClock, RecordedClock, type CycleClock, type RecordedTimes } from './clock.ts';
import { Core } from './core.ts';
import { isOutput, reportedClockMode, type CommandResult, type CoreStartOptions, type FromCore, type PlanAttachment, type PriorityRequest, type ToCore } from './protocol.ts';

const OK: CommandResult = { Sequence: 0n, Handle: 0n, Generation: 0n, Operation: 0, Result: 0, Reason: 0, AxisMask: 0 };
const REFUSED: CommandResult = { ...OK, Result: 1 };

/**
 * Ask for real-time scheduling for the calling thread: SCHED_FIFO through chrt on this thread's id when
 * permitted (root or CAP_SYS_NICE), else the highest nice value permitted, else nothing. Returns what was
 * obtained, for status. Linux only; elsewhere 'none'.
 */
export function raiseThreadPriority(req: PriorityRequest): string {
  if (req === 'none' || process.platform !== 'linux') return 'none';
  let tid = '';
  try {
    tid = ownThreadId();
  } catch {
    return 'none';
  }
  try {
    niceBeforeRaise = getPriority(0);
  } catch {
    niceBeforeRaise = 0;
  }
  if (req === 'auto' || req === 'rt') {
    try {
      execFileSync('chrt', ['-f', '-p', '40', tid], { stdio: 'ignore', timeout: 2000 });
      return 'SCHED_FIFO 40';
    } catch {
      if (req === 'rt') return 'none (SCHED_FIFO refused)';
    }
  }
  for (const nice of [-15, -10, -5]) {
    try {
      setPriority(0, nice); // pid 0: the calling thread on Linux
      return `nice ${nice}`;
    } catch {
      /* not permitted: try a smaller raise */
    }
  }
  return 'none (not permitted)';
}

/** The calling thread's nice value before raiseThreadPriority raised it (module state is per worker thread). */
let niceBeforeRaise = 0;

/**
 * Give back what raiseThreadPriority obtained (its return value): the thread goes back to normal scheduling
 * at the nice value it had. Called when a core incarnation's cycling ends (sims/core/worker.ts), before
 * anything else runs on the thread, which a stack host may keep for the next incarnation
 * (sims/service/core-threads.ts): what the thread does until then (the ended incarnation's stop,
 * the collection of its heap, waiting) is not real-time work, and at SCHED_FIFO it ran ahead of every other
 * thread on the host. A whole conformance run showed two kept threads each taking a core for 950 ms after
 * their stacks stopped (what the kernel's real-time throttling allows per second), the harness's
 * threads, the other stacks' services and their lease renewals stalled behind them. The next real-time
 * incarnation raises the priority again. Returning to normal scheduling and to a higher nice value needs no
 * privilege; a failure leaves the thread as it was and is said on standard error. Returns whether the thread
 * is back at normal scheduling (also when nothing was raised): only such a thread may serve an incarnation
 * of another clock or priority request (sims/service/core-threads.ts).
 */
export function lowerThreadPriority(obtained: string): boolean {
  if (process.platform !== 'linux' || !(obtained.startsWith('SCHED_FIFO') || obtained.startsWith('nice '))) return true;
  try {
    if (obtained.startsWith('SCHED_FIFO') && !lowerThread(ownThreadId())) throw new Error('chrt -o refused');
    setPriority(0, niceBeforeRaise);
    return true;
  } catch (e) {
    process.stderr.write(`warning: the core thread keeps its ${obtained} scheduling after its incarnation: ${(e as Error).message}\n`);
    return false;
  }
}

// Bound once: the global `process` is an accessor property, read through a getter every time.
const hrtimeBigint = hrtime.bigint;

/** Clocks whose time is the core's own, not the host's: their cycles read one host time each (format 3). */
const ownTime = (mode: CycleClock['mode']): boolean => mode === 'stepped' || mode === 'fast';

export class CoreHost {
  readonly core: Core;
  readonly clock: CycleClock;
  /** Freeze the whole cycle for this many ms on the next native command (a core that goes silent). */
  private stallNextMs = 0;

  private constructor(
    readonly options: CoreStartOptions,
    readonly driverHost: DriverHost,
    readonly incarnation: string,
    private readonly send: (m: FromCore) => void,
    /** Where the host answers the tap's questions (drivers/replay/tap.ts): the same port as the core's messages. */
    private readonly sendTap: (m: FromTap) => void,
    scheduling: string,
    recorded?: RecordedTimes,
  ) {
    const machine = options.machine;
    this.clock = makeClock(options.clock, machine.cycle_ns, recorded);
    // A new ring per incarnation: the incarnation owns its sequence numbers (document 1 part 2). The
    // buffer is mapped lazily by the OS, so resident memory grows with the records actually written; a
    // buffer an ended incarnation left (options.captureReuse) is written again instead, its pages mapped.
    const retentionMs = options.captureRetentionMs ?? machine.runtime.telemetry.retention_ms;
    const capture = retentionMs > 0 ? new CaptureRing({ axisCount: machine.axes.length, cycleNs: machine.cycle_ns, retentionMs, incarnation, reuse: options.captureReuse }) : undefined;
    const counted = (m: FromCore) => {
      if (m.t === 'reply' || m.t === 'home_done' || m.t === 'stop_drained') this.answers++;
      if (m.t === 'reply') {
        // A Home the core took on owes its outcome (home_done) besides its receipt.
        if (this.owedIds.get(m.id) === 'home' && m.result.Result === 0) this.homes++;
        this.owedIds.delete(m.id);
      }
      if (m.t === 'home_done' && this.homes > 0) this.homes--;
      send(m);
    };
    this.core = new Core(machine, driverHost, incarnation, counted, {
      capture,
      // Plan memory the service writes in place (plan-arena.ts), fresh for every incarnation. Not on a paced
      // replay: the recorded prepares carry their arrays, and the live ones are matched with them as arrays.
      ...(options.planArena !== false && options.clock.mode !== 'recorded' ? { planArena: PlanArena.create(machine.axes.length) } : {}),
      armSettleNs: options.armSettleNs,
      clockMode: reportedClockMode(options.clock),
      scheduling,
      publishByWall: options.clock.mode !== 'realtime',
      // Paced replay: lease and jog deadlines are judged on the recorded time too (the recorded requests
      // carry the recorded deadlines), so a lease runs out at the cycle it ran out when recorded.
      // A format 2 recording also gives the host time each request was handled at (RecordedClock.at).
      ...(this.clock instanceof RecordedClock ? { hostClock: (c => () => c.hostNs)(this.clock) } : {}),
      // A stepped or fast core's own time is not the host's: within a cycle it reads one host time, taken
      // when the cycle starts, so that the value it judges deadlines on is the one a recording keeps.
      ...(ownTime(this.clock.mode) ? { hostClock: () => (this.inCycle ? this.cycleHostNs : hrtimeBigint()) } : {}),
    });
  }

  /** Answers the core has sent (command receipts, Home and stop outcomes): a step says how many it produced. */
  answers = 0;

  /** Commands and preparations received and not yet answered (id -> operation), and Homes under way. */
  private readonly owedIds = new Map<number, string>();
  private homes = 0;
  /**
   * The answers the core owes now: a receipt for a command or preparation it has received and not answered
   * yet, and the outcome of a Home it took on. Computed by the core, so a paced replay, which hands each
   * request over at its recorded place, gives the same figure at the same place: a client stepping until its
   * request is answered steps on only while the core owes an answer, which then needs cycles, and otherwise
   * waits for the answer (a command the core answered at once, a refusal the service gave alone), so the
   * number of its steps follows the core (harness/clients/stepped.ts settle; docs/recording.md "The stepped
   * clock").
   */
  get owed(): number {
    return this.owedIds.size + this.homes;
  }

  /** Stepped and fast clocks: the host time read at the start of the running cycle (see the constructor). */
  private cycleHostNs = 0n;
  private inCycle = false;

  /** Create the driver by name, open the bus, and announce 'ready'. */
  static async create(options: CoreStartOptions, send: (m: FromCore) => void, scheduling = 'none', recorded?: RecordedTimes, sendTap?: (m: FromTap) => void): Promise<CoreHost> {
    // By default the tap's answers go where the core's messages go (the same port: sims/core/worker.ts).
    const tapOut = sendTap ?? (send as (m: FromCore | FromTap) => void);
    let driver = await createDriver(options.driver, { params: options.driverParams, persisted: options.driverState });
    let recorder: RecordingDriver | undefined;
    let made: CoreHost | undefined;
    if (options.record) {
      // Recording hook (docs/recording.md): wrap the driver; note requests, replies and events by cycle.
      const m = options.machine;
      driver = recorder = new RecordingDriver(driver, options.record.path, {
        machine_sha256: m.machine_sha256,
        configuration_sha256: m.configuration_sha256,
        deployment_sha256: m.deployment_sha256,
        ...provenance(),
        clock: options.clock.mode,
        // The core's time is not the host's: each frame keeps the host time the cycle read (format 3).
        ...(ownTime(options.clock.mode) ? { host_times: true as const } : {}),
        // This build's service notes its streams (sims/service/timing.ts DecisionLog 'watch'): a replay may run flat
        // out outside them.
        watch_notes: true as const,
        // The service notes every status read it serves, one before any publication too (sims/service/timing.ts DecisionLog 'status_read').
        status_reads: 'all' as const,
        ...(options.record.run ? { run: options.record.run } : {}),
        ...(options.driverParams ? { driver_params: JSON.parse(JSON.stringify(options.driverParams, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))) as Record<string, unknown> } : {}),
      });
      const inner = send;
      send = (msg) => {
        if (isOutput(msg)) recorder!.note({ cycle: made?.core.cycleCount ?? 0, kind: msg.t === 'reply' ? 'reply' : 'event', data: msg });
        inner(msg);
      };
    }
    const host: CoreHost = new CoreHost(options, new DriverHost(driver), randomBytes(16).toString('hex'), send, tapOut, scheduling, recorded);
    host.recorder = recorder;
    if (recorder) {
      recorder.hostTime = () => host.cycleHostNs;
      recorder.firstFrameNs = () => host.clock.originNs + options.machine.cycle_ns;
      recorder.clockOrigin = () => host.clock.originNs;
    }
    made = host;
    await host.core.start(host.clock.originNs);
    return host;
  }

  /** The recording wrapper when the session is recorded. */
  recorder?: RecordingDriver;

  /**
   * Handle one message of the core's port: the core's own protocol (protocol.ts ToCore), or the tap's
   * (drivers/replay/tap.ts), which the host takes off before the core sees anything. A request comes with
   * the service's record stamp (tap.ts RecordStamp: recorded beside it) and a prepare with its attachment
   * (protocol.ts PlanAttachment), both taken off here; a replay's edge may say in which cycle to answer a
   * prepare (`answerAtCycle`: the recorded core's, plan-intake.ts PlanBeside). Returns false on shutdown.
   */
  handle(stamped: (ToCore & RecordStamp & PlanAttachment) | ToTap, answerAtCycle?: number): boolean {
    if (isTap(stamped)) {
      this.tap(stamped);
      return true;
    }
    const { sentNs, origin, workspace, slot, ...rest } = stamped;
    const msg = rest as ToCore;
    if (msg.t === 'cmd' && this.stallNextMs > 0) {
      // Before the note: the host time recorded with the command is the one the core judged it at.
      this.clock.stall(this.stallNextMs);
      this.stallNextMs = 0;
    }
    // A step is the test's request on the stepped clock: recorded there, so a replay runs the same cycles when
    // the test asks for them (format 3). Elsewhere it is refused and not the core's business.
    // One host clock reading for the message: noted with it and judged on (Core.atHostTime).
    const hostNs = this.core.hostNow();
    if (this.recorder && msg.t !== 'shutdown' && (msg.t !== 'step' || this.clock.mode === 'stepped')) {
      this.recorder.note({
        cycle: this.core.cycleCount,
        kind: 'request',
        data: msg,
        host_ns: hostNs.toString(),
        ...(sentNs !== undefined ? { sent_ns: sentNs.toString() } : {}),
        ...(origin ? { origin } : {}),
      });
    }
    this.core.noteActivity();
    switch (msg.t) {
      case 'shutdown':
        return false;
      case 'step':
        // Runs cycles, each on its own host time.
        this.stepMessage(msg);
        return true;
      case 'inject':
        this.core.atHostTime(hostNs, () => this.inject(msg));
        return true;
      case 'cmd':
        this.owedIds.set(msg.id, msg.op);
        this.core.atHostTime(hostNs, () => this.core.handle(msg));
        return true;
      default:
        if (msg.t === 'prepare') this.owedIds.set(msg.id, 'prepare');
        if (msg.t !== 'prepare') this.core.atHostTime(hostNs, () => this.core.handle(msg));
        else this.core.atHostTime(hostNs, () => this.core.handle(msg, { workspace, slot, answerAtCycle }));
        return true;
    }
  }

  /**
   * The tap's messages for the host (drivers/replay/tap.ts): none is a request, none is recorded as one.
   * A paced replay's loop takes its own (poll turns, the crash's flush) before they reach here.
   */
  private tap(msg: ToTap): void {
    switch (msg.tap) {
      case 'note':
        // The service's own log (format 2): recorded beside the requests, in their order, never handed to the core.
        this.recorder?.note({ cycle: this.core.cycleCount, kind: 'service', data: msg.data });
        return;
      case 'owed':
        // A query of the harness's stepping, not a request: never recorded, never the core's business.
        this.sendTap({ tap: 'owed', id: msg.id, n: this.owed });
        return;
      case 'poll_turn':
        // A core that is not paced has no recorded poll to wait for.
        this.sendTap({ tap: 'poll_turn', id: msg.id });
        return;
      case 'flush':
        // The harness's crash keeps the session recorded so far.
        this.recorder?.flush();
        this.sendTap({ tap: 'flushed', id: msg.id });
        return;
    }
  }

  /** Run one cycle on the clock (real time and fast clocks wait until it is due). */
  cycle(): void {
    const t = this.clock.next();
    if (ownTime(this.clock.mode)) {
      this.cycleHostNs = hrtimeBigint();
      this.inCycle = true;
      try {
        this.core.cycle(t.nowNs, t.scheduledNs);
      } finally {
        this.inCycle = false;
      }
    } else this.core.cycle(t.nowNs, t.scheduledNs);
  }

  /** Stepped clock: run `cycles` cycles back to back, calling `between` before each (message drain). */
  step(cycles: number, between?: () => void): void {
    for (let k = 0; k < cycles; k++) {
      between?.();
      this.cycle();
    }
    this.core.publish(this.core.now);
  }

  private stepMessage(msg: Extract<ToCore, { t: 'step' }>): void {
    if (this.clock.mode !== 'stepped') {
      this.send({ t: 'reply', id: msg.id, result: REFUSED, detail: `step needs the stepped clock (this core runs ${this.clock.mode})` });
      return;
    }
    // The worker drains messages between steps (commands sent while stepping are admitted in order).
    const before = this.answers;
    this.stepper?.(msg.cycles);
    this.stepped(msg.id, this.answers - before);
  }

  /**
   * A step is done: say so with the core's time, its cycle count and how many answers the step's cycles
   * produced (a client waiting for a reply knows whether to wait for it rather than step on). A paced replay
   * calls this at the step's last cycle.
   */
  stepped(id: number, answered: number): void {
    this.send({ t: 'stepped', id, nowNs: this.core.now, cycles: BigInt(this.core.cycleCount), answered, owed: this.owed });
  }

  /** Set by the worker: how a 'step' runs (with message draining between cycles). */
  stepper?: (cycles: number) => void;

  private inject(msg: Extract<ToCore, { t: 'inject' }>): void {
    const f = msg.fault;
    if (f.kind === 'hold_capture_write') {
      this.core.holds.holdCaptureWrite((f as { ms: number }).ms);
      this.send({ t: 'reply', id: msg.id, result: OK });
      return;
    }
    if (f.kind === 'late_wake') {
      const ns = (f as { ns: unknown }).ns;
      if (typeof ns !== 'number' || !Number.isInteger(ns) || ns < 0 || ns > 10_000_000_000) {
        this.send({ t: 'reply', id: msg.id, result: REFUSED, detail: 'FAULT_BAD_FIELD: late_wake: field ns must be an integer 0..10000000000' });
        return;
      }
      this.core.holds.lateWake(ns);
      this.send({ t: 'reply', id: msg.id, result: OK });
      return;
    }
    if (f.kind === 'hold_event_publisher') {
      this.core.holds.holdEventPublisher((f as { ms: number }).ms);
      this.send({ t: 'reply', id: msg.id, result: OK });
      return;
    }
    if (f.kind === 'stall_next_command') {
      this.stallNextMs = (f as { ms: number }).ms;
      this.send({ t: 'reply', id: msg.id, result: OK });
      return;
    }
    const facet = this.driverHost.faults;
    if (!facet && (this.driverHost.driver as { faultsAreRecorded?: boolean }).faultsAreRecorded) {
      // Replay: the fault is already in the recorded inputs; validate the request and change nothing.
      try {
        if (f.kind !== 'clear') parseFaultSpec(f);
        this.send({ t: 'reply', id: msg.id, result: OK });
      } catch (e) {
        const code = e instanceof FaultSpecError ? `${e.code}: ` : '';
        this.send({ t: 'reply', id: msg.id, result: REFUSED, detail: `${code}${(e as Error).message}` });
      }
      return;
    }
    if (!facet) {
      this.send({ t: 'reply', id: msg.id, result: REFUSED, detail: `the ${this.driverHost.name} driver cannot inject faults` });
      return;
    }
    try {
      if (f.kind === 'clear') facet.clear();
      else {
        const spec = parseFaultSpec(f);
        if (!facet.kinds.includes(spec.kind)) throw new FaultSpecError('FAULT_NOT_SUPPORTED', `the ${this.driverHost.name} driver cannot inject ${spec.kind}`);
        facet.inject(spec);
      }
      this.send({ t: 'reply', id: msg.id, result: OK });
    } catch (e) {
      const code = e instanceof FaultSpecError ? `${e.code}: ` : '';
      this.send({ t: 'reply', id: msg.id, result: REFUSED, detail: `${code}${(e as Error).message}` });
    }
  }

  async close(): Promise<void> {
    await this.driverHost.close();
  }
}
