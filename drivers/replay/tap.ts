// The record/replay tap: messages that travel on the core's port beside the core's own protocol
// (sims/core/protocol.ts ToCore, FromCore) but are never the core's business (docs/recording.md "The tap").
// They share the port so they keep their order with the requests (a service note is recorded where it falls
// among them, and a paced replay's cues reach the service in order with the core's replies), and they are
// told apart by their own discriminator, `tap`, so the core's message types know nothing of them: the core
// host (sims/core/host.ts) or the paced replay's loop (sims/replay/worker-loop.ts) takes them off the port
// before the core sees a message.
//
// Defined here, beside the recorder (recorder.ts), because the three parties that speak it may all import
// drivers/: the service (sims/service/core-link.ts), the core host and the paced replay (sims/replay/).

/**
 * What the recorded service did with a core's native_lease_expired notice (sims/replay/sync-points.ts
 * leaseNotices): ended the grant ('expired'), told the core the grant again because a renewal had crossed
 * the notice ('retold'), or neither ('none').
 */
export type LeaseNotice = 'expired' | 'retold' | 'none';

/**
 * What the service adds to every request it posts to the core, for a recording (format 2, docs/recording.md
 * "Making one"): its own clock when it posted the request, and for a request the service sent of its own
 * accord, why (lease_expired). The core host records both beside the request and strips them before the core
 * sees it; a paced replay strips them before matching.
 */
export interface RecordStamp {
  sentNs?: bigint;
  origin?: string;
}

/** The service's side of the tap (sims/service/core-link.ts posts them). */
export type ToTap =
  /** A note of the service's own for the recording (format 2: its fence decisions, reads, replies); not a request. */
  | { tap: 'note'; data: Record<string, unknown> }
  /**
   * Stepped clock: how many answers the core owes now (CoreHost.owed), without a cycle; answered 'owed'. A
   * question to the host, not a request: never recorded (harness/clients/stepped.ts settle steps on only
   * while the core owes an answer, so a replay steps as recorded).
   */
  | { tap: 'owed'; id: number }
  /**
   * Paced replay: a live telemetry poll asks to be served; answered 'poll_turn' once the replayed core has
   * reached the cycle at which the recorded service served its poll (sims/replay/pacer.ts pollTurn), at once
   * where no recorded poll is left. The service asks only on a replay.
   */
  | { tap: 'poll_turn'; id: number }
  /**
   * A recorded core: write out what the recording holds now (before a simulated crash kills the thread); a
   * paced replay runs to the end of its recording instead. Answered 'flushed'.
   */
  | { tap: 'flush'; id: number };

/**
 * What the pacer tells the live service (sims/replay/pacer.ts syncService; docs/recording.md "The service
 * side"): the recorded clock the replay has reached (`clockNs`, never moving back; informative: the service
 * runs on the live host clock, docs/recording.md "Two clocks"), whether the recorded core ran on the host
 * clock (`hostClock`: then the core's time is host time, which reaches the service translated into its
 * own), and a recorded decision of the service's own to take now (`expire`: the lease of that recorded
 * generation ran out here). `anchors` and `pairs`: recorded host times and the live ones they stand for
 * (sims/service/replay-timing.ts HostTimeMap).
 */
export interface ServiceCue {
  tap: 'cue';
  clockNs: bigint;
  hostClock: boolean;
  /** `lateNs`: end it not before that long after its live deadline (a host-clock recording); absent: now. */
  expire?: { generation: bigint; lateNs?: bigint };
  fences?: string[];
  /** At start: how each of those decisions went ('ok' or the refusal label). */
  fenceOutcomes?: string[];
  /** At start: which of those decisions were a polled request's (taken in order, never held for). */
  fencePolled?: boolean[];
  /**
   * At start: what each of those decisions saw of its session ('' where the recording does not say:
   * sync-points.ts fenceDecisions); absent when no decision says.
   */
  fenceSeen?: string[];
  /** At start: the order in which the recorded service's preparations took their place in the commit queue. */
  commits?: string[];
  /** At start: the publication cycle each recorded status read was served from, in order (-1: none yet). */
  statusReads?: bigint[];
  /**
   * At start: for each of those reads, how many leases the recorded service had let run out before it served
   * it; absent when none had (sims/service/replay-timing.ts statusTurn).
   */
  statusReadExpiries?: number[];
  /** At start: the recording notes every status read, one served before any publication too (header status_reads). */
  statusReadsAll?: boolean;
  /** At start: what the recorded service did with each of the core's lease notices. */
  leaseNotices?: LeaseNotice[];
  /** At start: how each of the recorded service's timed waits on the core ended (sims/service/replay-timing.ts CoreWaits). */
  coreWaits?: Array<{ kind: string; outcome: string; cycle?: bigint }>;
  /** Where the replay met the live side: the recorded host time the core had reached, at which live time. */
  anchors?: Array<{ recordedNs: bigint; liveNs: bigint }>;
  /** Recorded host times and the live ones the live side sent for them. */
  pairs?: Array<[recorded: bigint, live: bigint]>;
}

/** The host's and the pacer's side of the tap (to the service). */
export type FromTap = { tap: 'owed'; id: number; n: number } | { tap: 'poll_turn'; id: number } | { tap: 'flushed'; id: number } | ServiceCue;

/** Whether a message on the core's port is the tap's rather than the core's. */
export function isTap(m: object): m is ToTap | FromTap {
  return typeof (m as { tap?: unknown }).tap === 'string';
}
