// The service's clock and its timed decisions: a clock and one decision-log port (docs/recording.md "The
// service side"). Every part of the service that reads time asks the clock (ServiceClock); every decision a
// paced replay must retake where the recording took it (the order of fence decisions, a lease expiry, the
// publication a status read is served from, how long a wait on the core may take) goes through the port
// (DecisionLog: turn before it, took after it), named by its kind with its facts as arguments, so that a
// live run builds nothing to ask. The composition root (sims/main.ts) picks the implementation once:
// LiveTiming here (host clock, every decision taken at once, nothing noted), RecordingTiming
// (recording-timing.ts: the same, each decision noted into the recording) or ReplayedTiming
// (replay-timing.ts: the recorded decisions the pacer cues through the core link). Adding a new kind of
// hold is one new entry of Turns or Takens and its case in the recording and replay implementations: no flag
// in the service or the core (docs/recording.md "Adding a hold").

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

/** A timed wait on the core as the service starts it (DecisionLog.wait). */
export interface CoreWait {
  /** A bound to use instead of the caller's (wall ms: a replay's held core); absent: the caller's. */
  ms?: number;
  /** Call exactly once with the outcome, and for a wait for a status publication the cycle it got. */
  done: (outcome: WaitOutcome, cycle?: bigint) => void;
  /**
   * Replay, a wait for a fresh status publication: the recorded wait got the publication of this cycle, so
   * any publication of at least this cycle ends it, even one that came before the wait began (the core ran
   * ahead of the live service), and none older does (docs/recording.md "The service side").
   */
  atLeast?: bigint;
  /**
   * Replay: the recorded wait ran out (its outcome `timeout`): it runs out now, as recorded, instead of on the
   * live clock (the replayed core answers at its recorded cycle whatever the wall clock; a live timer would
   * only add its bound to the test's time).
   */
  timedOut?: true;
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
 * Decisions of the service's own that a replay may have to put off to where the recording took it
 * (DecisionLog.turn), each with its facts: a fence decision of `op`; one the recording refused because the
 * request's session had already ended (its lease ran out, a stop's drain revoked it, ...) while the live grant
 * still holds it (it waits until the live session ends too); a preparation's place in the commit queue
 * (handles.ts serialise, whose order numbers the handles); the publication a status read is served from; a
 * telemetry poll's turn.
 */
export interface Turns {
  fence: [op: string];
  session_end: [op: string, session: string | undefined, generation: bigint | undefined, authority: SessionView];
  commit: [kind: string];
  status_read: [];
  telemetry_poll: [];
}

/**
 * Decisions the service took, or what it served, for the log (DecisionLog.took): a fence decision ('ok' or
 * the refusal label, and what it saw of the request's session: authority.ts sessionState, which a label alone
 * does not say), a preparation's place in the commit queue, a status read served from the publication of
 * `cycle` showing the service's clock at `nowNs`, a telemetry poll served, the answer to a control or program
 * request, a stream opened or closed (a test watching the core over wall time: a replay runs flat out outside
 * them, sims/replay/modes.ts WatchedMode, and holds the core at an open until the live stream opens), and a
 * grant ended by the authority and why (authority.ts SessionEnd: a decision held for a session's end looks
 * again; a status read held for a lease expiry counts it).
 */
export interface Takens {
  fence: [op: string, outcome: string, seen?: string];
  commit: [kind: string];
  status_read: [cycle: bigint | undefined, nowNs?: bigint];
  telemetry_read: [];
  http_reply: [reply: { status: number; body: Record<string, unknown> }];
  watch: [stream: 'telemetry' | 'events', open: boolean];
  grant_ended: [why: string];
}

/**
 * What the log may say instead of the service's clock (DecisionLog.recorded): whether the lease ran out at
 * this very fence check of `op` (end it first), and what to do with the core's native_lease_expired notice
 * (the next of them, sync-points.ts leaseNotices; undefined: decide on the clock).
 */
export interface Recorded {
  expired_at_fence: { q: [op: string]; a: boolean };
  lease_notice: { q: []; a: LeaseNotice | undefined };
}

/**
 * The one port through which the service's own decisions are logged and, on a paced replay, retaken where
 * the recording took them. The live implementation (LiveTiming) takes every decision at once and logs
 * nothing; a recorded run's (RecordingTiming, recording-timing.ts) notes each decision into the recording; a
 * replay's (ReplayedTiming, replay-timing.ts) holds them to the recorded order. The service's parts call it at the point of each
 * decision and hold no replay state or flag of their own.
 */
export interface DecisionLog {
  /** Called once by the core link the log is given to (its notes go there, the pacer's cues come from it). */
  attach(link: TimingLink): void;
  /** Before decision `k`: a promise to await first, or null to take it now. */
  turn<K extends keyof Turns>(k: K, ...facts: Turns[K]): Promise<unknown> | null;
  /** A decision taken, or a read served. */
  took<K extends keyof Takens>(k: K, ...facts: Takens[K]): void;
  /** What the recording says of a decision the service's clock would otherwise take. */
  recorded<K extends keyof Recorded>(k: K, ...q: Recorded[K]['q']): Recorded[K]['a'];
  /**
   * Start a timed wait of `kind` on the core with its own bound `ms` (kind null: a poll, never noted nor
   * held): a longer bound to use, if any, and the function to call with the outcome, exactly once.
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

/** The wait of a live run: the caller's bound, an outcome nobody keeps (one object for every wait). */
const LIVE_WAIT: CoreWait = Object.freeze({ done: (): void => undefined });

/**
 * The live service: the host monotonic clock, every decision taken at once, nothing held and nothing noted.
 * No method awaits, reads its arguments or allocates (the request path; bench/control-roundtrip.bench.ts
 * measures it).
 */
export class LiveTiming implements ServiceTiming, ServiceClock, DecisionLog {
  readonly coreOnServiceClock = false;
  readonly leaseOnClock = true;
  readonly hostTimes = null;
  get clock(): ServiceClock {
    return this;
  }
  get log(): DecisionLog {
    return this;
  }
  attach(link: TimingLink): void;
  attach(): void {}
  now(): bigint {
    return process.hrtime.bigint();
  }
  turn<K extends keyof Turns>(k: K, ...facts: Turns[K]): Promise<unknown> | null;
  turn(): null {
    return null;
  }
  took<K extends keyof Takens>(k: K, ...facts: Takens[K]): void;
  took(): void {}
  recorded<K extends keyof Recorded>(k: K, ...q: Recorded[K]['q']): Recorded[K]['a'];
  recorded(k: keyof Recorded): Recorded[keyof Recorded]['a'] {
    // The clock decides: no expiry at a fence check, no say on a lease notice.
    return k === 'expired_at_fence' ? false : undefined;
  }
  wait(kind: string | null, ms: number): CoreWait;
  wait(): CoreWait {
    return LIVE_WAIT;
  }
  onExpiry(): void {}
}
