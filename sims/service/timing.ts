// The service's clock and its timed decisions: a clock and one decision-log port (docs/recording.md "The
// service side"). Every part of the service that reads time asks the clock (ServiceClock); every decision a
// paced replay must retake where the recording took it (the order of fence decisions, a lease expiry, the
// publication a status read is served from, how long a wait on the core may take) goes through the port
// (DecisionLog: turn before it, took after it). The composition root (sims/main.ts) picks the implementation
// once: LiveTiming here (host clock, every decision taken at once, notes when recording) or ReplayedTiming
// (replay-timing.ts: the recorded decisions the pacer cues through the core link). Adding a new kind of hold
// is one new case of Turn or Taken, its arm in TimingBase's dispatch, its two implementations and their
// tests: no flag in the service or the core (docs/recording.md "Adding a hold").

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
  /** The pacer's cues (the tap's, drivers/replay/tap.ts) as the link receives them: a replay's log listens. */
  on?(event: 'cue', listener: (m: TimingCue) => void): unknown;
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

/** The service's clock, and where the core's time bases differ from it (a paced replay's). */
export interface ServiceClock {
  /** The service's clock (monotonic ns): every read moves on by at least a nanosecond. */
  now(): bigint;
  /** True when the core's time is the service's clock (a replay of a recording made on the host clock). */
  readonly coreOnServiceClock: boolean;
  /** The core's host times in the service's time base, when they differ (a paced replay); else null. */
  readonly hostTimes: HostTimes | null;
}

/**
 * A decision of the service's own that a replay may have to put off to where the recording took it
 * (DecisionLog.turn): a fence decision of `op`; one the recording refused because the request's session had
 * already ended (its lease ran out, a stop's drain revoked it, ...) while the live grant still holds it (it
 * waits until the live session ends too); a preparation's place in the commit queue (handles.ts serialise,
 * whose order numbers the handles); the publication a status read is served from; a telemetry poll's turn.
 */
export type Turn =
  | { t: 'fence'; op: string }
  | { t: 'session_end'; op: string; session: string | undefined; generation: bigint | undefined; authority: SessionView }
  | { t: 'commit'; kind: string }
  | { t: 'status_read' }
  | { t: 'telemetry_poll' };

/**
 * A decision the service took, or something it served, for the log (DecisionLog.took): a fence decision
 * ('ok' or the refusal label, and what it saw of the request's session: authority.ts sessionState, which a
 * label alone does not say), a preparation's place in the commit queue, a status read served from the
 * publication of `cycle` showing the service's clock at `nowNs`, a telemetry poll served, the answer to a
 * control or program request, a stream opened or closed (a test watching the core over wall time: a replay
 * runs flat out outside them, sims/replay/modes.ts WatchedMode, and holds the core at an open until the live
 * stream opens), and a grant ended by the authority (a decision held for a session's end looks again).
 */
export type Taken =
  | { t: 'fence'; op: string; outcome: string; seen?: string }
  | { t: 'commit'; kind: string }
  | { t: 'status_read'; cycle: bigint | undefined; nowNs?: bigint }
  | { t: 'telemetry_read' }
  | { t: 'http_reply'; reply: { status: number; body: Record<string, unknown> } }
  | { t: 'watch'; stream: 'telemetry' | 'events'; open: boolean }
  | { t: 'grant_ended' };

/**
 * What the log may say instead of the service's clock (DecisionLog.recorded): whether the lease ran out at
 * this very fence check (end it first), and what to do with the core's native_lease_expired notice (the
 * next of them, sync-points.ts leaseNotices; undefined: decide on the clock).
 */
export interface Recorded {
  expired_at_fence: { q: { op: string }; a: boolean };
  lease_notice: { q: Record<string, never>; a: LeaseNotice | undefined };
}

/**
 * The one port through which the service's own decisions are logged and, on a paced replay, retaken where
 * the recording took them. The live implementation (LiveTiming) takes every decision at once and logs
 * nothing; a recorded run's notes each decision into the recording; a replay's (ReplayedTiming,
 * replay-timing.ts) holds them to the recorded order. The service's parts call it at the point of each
 * decision and hold no replay state or flag of their own.
 */
export interface DecisionLog {
  /** Called once by the core link the log is given to (its notes go there, the pacer's cues come from it). */
  attach(link: TimingLink): void;
  /** Before decision `d`: a promise to await first, or null to take it now. */
  turn(d: Turn): Promise<unknown> | null;
  /** A decision taken, or a read served. */
  took(d: Taken): void;
  /** What the recording says of a decision the service's clock would otherwise take. */
  recorded<K extends keyof Recorded>(k: K, q: Recorded[K]['q']): Recorded[K]['a'];
  /**
   * Start a timed wait of `kind` on the core with its own bound `ms` (kind null: a poll, never noted nor
   * held): the bound to use and the function to call with the outcome, exactly once.
   */
  wait(kind: string | null, ms: number): CoreWait;
  /** True when a lease runs out by the service's own clock and timer; false when a recording says where. */
  readonly leaseOnClock: boolean;
  /**
   * Where the recording let the lease of `generation` run out, the service ends it (set once): now, or with
   * `lateNs`, not before that long after its deadline on the service's clock (authority.ts expireGeneration).
   */
  onExpiry(listener: (generation: bigint, lateNs?: bigint) => void): void;
}

/**
 * The service's time: a clock and the one decision-log port, picked once by the composition root
 * (sims/main.ts) and given to the core link, from which every part of the service takes it.
 */
export interface ServiceTiming {
  readonly clock: ServiceClock;
  readonly log: DecisionLog;
}

/**
 * The named decisions both implementations have, and the port's dispatch to them (DecisionLog): one switch
 * here, so an implementation is its named methods and a new kind of hold is one case more.
 */
export abstract class TimingBase implements ServiceTiming, ServiceClock, DecisionLog {
  get clock(): ServiceClock {
    return this;
  }
  get log(): DecisionLog {
    return this;
  }
  abstract attach(link: TimingLink): void;
  abstract now(): bigint;
  abstract readonly coreOnServiceClock: boolean;
  abstract readonly hostTimes: HostTimes | null;
  abstract readonly leaseOnClock: boolean;
  abstract onExpiry(listener: (generation: bigint, lateNs?: bigint) => void): void;
  abstract fenceTurn(op: string): Promise<void> | null;
  abstract fenced(op: string, outcome: string, seen?: string): void;
  abstract commitTurn(kind: string): Promise<void> | null;
  abstract committing(kind: string): void;
  abstract expiredAtFence(op: string): boolean;
  abstract expiryTurn(op: string, session: string | undefined, generation: bigint | undefined, authority: SessionView): Promise<void> | null;
  abstract grantEnded(): void;
  abstract statusTurn(): Promise<unknown> | undefined;
  abstract statusRead(cycle: bigint | undefined, nowNs?: bigint): void;
  abstract replied(reply: { status: number; body: Record<string, unknown> }): void;
  abstract leaseNotice(): LeaseNotice | undefined;
  abstract telemetryTurn(): Promise<void> | undefined;
  abstract telemetryRead(): void;
  abstract watching(stream: 'telemetry' | 'events', open: boolean): void;
  abstract coreWait(kind: string | null, ms: number): CoreWait;

  turn(d: Turn): Promise<unknown> | null {
    switch (d.t) {
      case 'fence':
        return this.fenceTurn(d.op);
      case 'session_end':
        return this.expiryTurn(d.op, d.session, d.generation, d.authority);
      case 'commit':
        return this.commitTurn(d.kind);
      case 'status_read':
        return this.statusTurn() ?? null;
      case 'telemetry_poll':
        return this.telemetryTurn() ?? null;
    }
  }
  took(d: Taken): void {
    switch (d.t) {
      case 'fence':
        return this.fenced(d.op, d.outcome, d.seen);
      case 'commit':
        return this.committing(d.kind);
      case 'status_read':
        return this.statusRead(d.cycle, d.nowNs);
      case 'telemetry_read':
        return this.telemetryRead();
      case 'http_reply':
        return this.replied(d.reply);
      case 'watch':
        return this.watching(d.stream, d.open);
      case 'grant_ended':
        return this.grantEnded();
    }
  }
  recorded<K extends keyof Recorded>(k: K, q: Recorded[K]['q']): Recorded[K]['a'] {
    const a: Recorded[keyof Recorded]['a'] = k === 'expired_at_fence' ? this.expiredAtFence((q as Recorded['expired_at_fence']['q']).op) : this.leaseNotice();
    return a as Recorded[K]['a'];
  }
  wait(kind: string | null, ms: number): CoreWait {
    return this.coreWait(kind, ms);
  }
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
 * run (`record`) it notes the decisions a replay retakes. No method awaits, and none allocates beyond the
 * decision the caller describes, on a run that does not record (the request path;
 * bench/control-roundtrip.bench.ts measures it).
 */
export class LiveTiming extends TimingBase {
  private link?: TimingLink;
  readonly coreOnServiceClock = false;
  readonly leaseOnClock = true;
  readonly hostTimes = null;

  constructor(private readonly record = false) {
    super();
  }

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
}
