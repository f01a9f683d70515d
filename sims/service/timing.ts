// The service's clock and its timed decisions, behind one interface (docs/recording.md "The
// service side"). Every part of the service that reads time or takes a
// decision a paced replay must retake where the recording took it asks a ServiceTiming: the clock, the
// order of fence decisions, a lease expiry, the publication a status read
// is served from, how long a wait on the core may take. The composition root (sims/main.ts) picks the
// implementation once: LiveTiming here (host clock, every decision taken at once, notes when recording) or
// ReplayedTiming (replay-timing.ts: the recorded clock and decisions the pacer cues through the core link).
// Adding a new kind of hold is one new method here, its two implementations and their tests: no flag in
// the service or the core (docs/recording.md "Adding a hold").

import type { CoreStatus } from '../core/protocol.ts';
import type { LeaseNotice, ServiceCue } from '../../drivers/replay/tap.ts';

/**
 * Operations a controller sends on its own wall-clock timer, so a replay sees another number of them: their
 * fence decisions and waits are neither recorded nor held, nor their answers compared (the replay target
 * replays the recorded renewals to the core itself).
 */
export const UNORDERED: ReadonlySet<string> = new Set(['renew', 'update_jog']);

/** What the service notes into a recording (the core writes it as a service note; sims/replay reads it). */
export type ServiceNote = Record<string, unknown>;

/** What a timing needs of the core link: its latest publication, a bounded wait for one, and the note channel. */
export interface TimingLink {
  readonly status?: CoreStatus;
  /**
   * The core's outputs (replies, events, Home and stop outcomes) this incarnation has delivered so far: what
   * the service's state is built from besides the publication (a status read notes it, `seen`).
   */
  readonly outputsSeen?: number;
  statusFrom(cycle: bigint, ms: number): Promise<boolean>;
  /** Paced replay: resolves true once the pacer answers a poll turn (drivers/replay/tap.ts 'poll_turn'), false after `ms`. */
  pollTurn(ms: number): Promise<boolean>;
  note(data: ServiceNote): void;
}

/** The cue the pacer sends the service through the core link (the tap's, drivers/replay/tap.ts). */
export type TimingCue = ServiceCue;

/** The outcome of one of the service's timed waits on the core. */
export type WaitOutcome = 'ok' | 'timeout';

/** A timed wait on the core as the service starts it (timing.ts ServiceTiming.coreWait). */
export interface CoreWait {
  /** The bound to use (wall ms). */
  ms: number;
  /** Call exactly once with the outcome, and for a wait for a status publication the cycle it got. */
  done: (outcome: WaitOutcome, cycle?: bigint) => void;
  /**
   * Replay, a wait for a fresh status publication: the recorded wait got the publication of this cycle, so
   * any publication of at least this cycle ends it, even one that came before the wait began (the core ran
   * ahead of the live service), and none older does (docs/recording.md "The service side").
   */
  atLeast?: bigint;
}


/** A grant as a hold on a lease expiry needs to see it (authority.ts Grant). */
interface HeldGrant {
  session: string;
  generation: bigint;
  stopping: boolean;
}

/** The authority as a hold on a session's end sees it (authority.ts Authority). */
export interface SessionView {
  readonly current: HeldGrant | null;
  /** What a fence decision would see of `session` now (authority.ts sessionState). */
  sessionState?(session: string): string;
}

/**
 * Host times of a replayed core in the live service's time base (docs/recording.md "Two clocks"): what the
 * service serves without the core's messages in between, the telemetry capture ring, is translated here.
 */
export interface HostTimes {
  /**
   * The live host time recorded host time `t` stands for (0 stays 0). `past`: a time the core has already
   * reached (a record's time), never later than the live clock; else a deadline, which may lie ahead.
   */
  live(t: bigint, past: boolean): bigint;
  /** The core's own time is host time (a recording made on the host clock); else it is simulated. */
  readonly coreTimeIsHost: boolean;
}

export interface ServiceTiming {
  /** Called once by the core link this timing is given to. */
  attach(link: TimingLink): void;
  /** The service's clock (monotonic ns): every read moves on by at least a nanosecond. */
  now(): bigint;
  /** True when the core's time is the service's clock (a replay of a recording made on the host clock). */
  readonly coreOnServiceClock: boolean;
  /** True when a lease runs out by the service's own clock and timer; false when a recording says where. */
  readonly leaseOnClock: boolean;
  /** The core's host times in the service's time base, when they differ (a paced replay); else null. */
  readonly hostTimes: HostTimes | null;
  /** Before a fence decision of `op`: a promise to await first, or null to decide at once. */
  fenceTurn(op: string): Promise<void> | null;
  /**
   * After a fence decision of `op`: 'ok' or the refusal label, and what the decision saw of the request's
   * session (`seen`: authority.ts sessionState), which a refusal label alone does not say.
   */
  fenced(op: string, outcome: string, seen?: string): void;
  /**
   * Before a preparation of `kind` ('trajectory', 'program') takes its place in the commit queue
   * (handles.ts serialise), whose order numbers the handles: a promise to await first, or null to go on now.
   */
  commitTurn(kind: string): Promise<void> | null;
  /** A preparation of `kind` took its place in the commit queue. */
  committing(kind: string): void;
  /** True when the recording found this decision's lease run out at this very check (end it first). */
  expiredAtFence(op: string): boolean;
  /**
   * Before a decision the recording refused because the session had already ended (its lease ran out, a
   * stop's drain revoked it, ...) while the live grant still holds it: a promise that resolves when the live
   * session ends too (or the hold is given up), else null.
   */
  expiryTurn(op: string, session: string | undefined, generation: bigint | undefined, authority: SessionView): Promise<void> | null;
  /** The authority ended its grant (a hold on a session's end looks again). */
  grantEnded(): void;
  /**
   * Where the recording let the lease of `generation` run out, the service ends it (set once): now, or with
   * `lateNs`, not before that long after its deadline on the service's clock (authority.ts expireGeneration).
   */
  onExpiry(listener: (generation: bigint, lateNs?: bigint) => void): void;
  /** Before a status read: a promise to await for the publication to serve it from, or undefined. */
  statusTurn(): Promise<unknown> | undefined;
  /** A status read was served from the publication of `cycle`, showing the service's clock at `nowNs`. */
  statusRead(cycle: bigint | undefined, nowNs?: bigint): void;
  /** The service's answer to a control or program request. */
  replied(reply: { status: number; body: Record<string, unknown> }): void;
  /**
   * The core said the lease ran out (native_lease_expired): on a paced replay what the recorded service did
   * with this notice (the next of them, sync-points.ts leaseNotices), else undefined (decide on the clock).
   */
  leaseNotice(): LeaseNotice | undefined;
  /** Before a telemetry poll: a promise to await for the core to reach the recorded poll's place, or undefined. */
  telemetryTurn(): Promise<void> | undefined;
  /** A telemetry poll was served. */
  telemetryRead(): void;
  /**
   * A stream opened (`open`) or closed: a test watching the core over wall time. A recording notes both, so a
   * replay runs flat out outside them (sims/replay/modes.ts WatchedMode) and holds the core at an open until
   * the live stream opens.
   */
  watching(stream: 'telemetry' | 'events', open: boolean): void;
  /**
   * Start a timed wait of `kind` on the core with its own bound `ms` (kind null: a poll, never noted nor
   * held): the bound to use and the function to call with the outcome, exactly once.
   */
  coreWait(kind: string | null, ms: number): CoreWait;
  /** A cue from the pacer, relayed by the core link. */
  cue(m: TimingCue): void;
}

/** The note of a reply: operation, status and leading label; null for the unordered operations (UNORDERED). */
export function replyNote(reply: { status: number; body: Record<string, unknown> }): ServiceNote | null {
  const op = typeof reply.body.operation === 'string' ? reply.body.operation : 'unknown';
  if (UNORDERED.has(op)) return null;
  const error = reply.body.error;
  const label = typeof error === 'string' ? (error.split(':')[0] ?? '').trim() : '';
  return { t: 'http_reply', op, status: reply.status, label };
}

/**
 * The note of a status read: the cycle of the publication it was served from, or 'none' when the core had
 * published nothing yet (a stepped core before its first step, a restarted core before its first cycles), so
 * that a replay knows which of its live reads that was (recording header `status_reads: 'all'`).
 */
export function statusReadNote(cycle: bigint | undefined, nowNs?: bigint, seen?: number): ServiceNote {
  return { t: 'status_read', cycle: cycle === undefined ? 'none' : cycle.toString(), ...(nowNs !== undefined ? { now_ns: nowNs.toString() } : {}), ...(seen !== undefined ? { seen } : {}) };
}

const NOOP = (): void => undefined;

/**
 * The live service: the host monotonic clock, every decision taken at once, nothing held. On a recorded
 * run (`record`) it notes the decisions a replay retakes. No method allocates or awaits on a run that does
 * not record, beyond what the wait on the core allocated before (the request path;
 * bench/control-roundtrip.bench.ts measures it).
 */
export class LiveTiming implements ServiceTiming {
  private link?: TimingLink;
  readonly coreOnServiceClock = false;
  readonly leaseOnClock = true;
  readonly hostTimes = null;

  constructor(private readonly record = false) {}

  attach(link: TimingLink): void {
    this.link = link;
  }
  now(): bigint {
    return process.hrtime.bigint();
  }
  fenceTurn(): null {
    return null;
  }
  fenced(op: string, outcome: string, seen?: string): void {
    if (this.record && !UNORDERED.has(op)) this.link?.note({ t: 'fence', op, outcome, ...(seen !== undefined ? { seen } : {}) });
  }
  commitTurn(): null {
    return null;
  }
  committing(kind: string): void {
    if (this.record) this.link?.note({ t: 'commit', op: kind });
  }
  expiredAtFence(): boolean {
    return false;
  }
  expiryTurn(): null {
    return null;
  }
  grantEnded(): void {}
  onExpiry(): void {}
  statusTurn(): undefined {
    return undefined;
  }
  statusRead(cycle: bigint | undefined, nowNs?: bigint): void {
    if (!this.record) return;
    this.link?.note(statusReadNote(cycle, nowNs, this.link.outputsSeen));
  }
  replied(reply: { status: number; body: Record<string, unknown> }): void {
    if (!this.record) return;
    const note = replyNote(reply);
    if (note) this.link?.note(note);
  }
  leaseNotice(): undefined {
    return undefined;
  }
  telemetryTurn(): undefined {
    return undefined;
  }
  telemetryRead(): void {
    if (this.record) this.link?.note({ t: 'telemetry_read' });
  }
  watching(stream: 'telemetry' | 'events', open: boolean): void {
    if (this.record) this.link?.note({ t: 'watch', stream, open });
  }
  coreWait(kind: string | null, ms: number): CoreWait {
    if (kind === null || !this.record) return { ms, done: NOOP };
    // A status wait notes the publication it got: a replay ends the wait with that one (CoreWait.atLeast).
    return { ms, done: (outcome, cycle) => this.link?.note({ t: 'core_wait', kind, outcome, ...(cycle !== undefined ? { cycle: cycle.toString() } : {}) }) };
  }
  cue(): void {}
}
