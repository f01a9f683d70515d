// The service's timing on a paced replay (timing.ts ServiceTiming; docs/recording.md "The service side"):
// the live host clock and the recorded decisions, built from the pacer's cues the core link relays
// (the tap's cues, drivers/replay/tap.ts, sent by sims/replay/pacer.ts). The clock is the live one because a client compares
// the service's host times with its own (document 1: deadline_host_ns is a host monotonic time); the
// replayed core runs on the recorded clock, and host times are translated where they cross between the two
// (sims/replay/pacer.ts `outward`, docs/recording.md "Two clocks"). Until the first cue (and on a recording
// without one, format 1) nothing is held, as LiveTiming. A hold it keeps in vain is told to the pacer as a
// lost hold (sims/replay/sync-points.ts), so the harness ends the test in ERROR rather than judging the
// target on an order the replay did not keep.

import { replyNote, statusReadNote, UNORDERED, type CoreWait, type DecisionLog, type HostTimes, type Recorded, type ServiceClock, type ServiceTiming, type SessionView, type Takens, type TimingCue, type TimingLink, type Turns, type WaitOutcome } from './timing.ts';
import type { LeaseNotice } from '../../drivers/replay/tap.ts';

/** How long a status read waits for the publication its recording was served from (wall ms). */
const STATUS_READ_WAIT_MS = 3_000;
/** How long a telemetry poll waits for the core to reach the recorded poll (wall ms): the pacer's hold bound. */
const POLL_TURN_WAIT_MS = 10_000;
/**
 * Labels of a recorded fence decision that found the session's grant already gone (lease expiry taken), on
 * a recording that does not say what the decision saw of the session.
 */
const GRANT_GONE: ReadonlySet<string> = new Set(['no_grant', 'control_session_stale']);
/** What a fence decision saw of a session that had ended (authority.ts SessionEnd). */
const SESSION_ENDED: ReadonlySet<string> = new Set(['released', 'expired', 'revoked', 'superseded', 'retired', 'daemon_restarted']);
/** What a fence decision sees of a session that still holds the grant (authority.ts sessionState). */
const SESSION_HOLDS: ReadonlySet<string> = new Set(['current', 'stopping']);

export type HoldKind = 'fence' | 'commit' | 'publication' | 'core_wait' | 'lease_expiry' | 'session_end' | 'telemetry_poll';

export class ReplayedTiming implements ServiceTiming, ServiceClock, DecisionLog {
  private link?: TimingLink;
  /** A cue came: the service's own timed decisions come from the recording (its clock stays the host's). */
  private cued = false;
  private hostClock = false;
  private expired?: (generation: bigint, lateNs?: bigint) => void;
  /** Decisions waiting for a cued lease expiry: each looks again when a grant ends. */
  private expiryWaiters = new Set<() => void>();

  /** The order of fence decisions: noted into a recording, held to the recorded order on a replay. */
  readonly fenceOrder: FenceOrder;
  /**
   * The order in which preparations took their place in the commit queue (handles.ts serialise), which
   * numbers their handles: held to the recorded order the same way (suites/trajectory/handles.test.ts
   * "prepare_program and prepare_trajectory committed while both wait on the core": the program's upload
   * decoded first on the replay and took the number the trajectory had when recorded).
   */
  readonly commitOrder: FenceOrder;
  /** The service's timed waits on the core: noted into a recording, bounded by the recorded outcome. */
  readonly coreWaits: CoreWaits;
  /**
   * Status reads as sync points (docs/recording.md "Status reads"): the publication cycle each recorded
   * GET /v1/status served; read k is served from the publication of the same cycle (the paced core holds
   * there until the read is noted).
   */
  private statusReads: bigint[] = [];
  private statusReadsTaken = 0;
  /**
   * For each recorded status read, how many leases the recorded service had let run out before it served it
   * (the pacer's first cue, sims/replay/sync-points.ts), and how many this service has let run out since that
   * cue (took 'grant_ended' with 'expired'): see statusTurn.
   */
  private statusReadExpiries: number[] = [];
  private expiriesTaken = 0;
  /**
   * The recording notes every read, one served before any publication too (its cycle -1 in statusReads):
   * each live read takes the next recorded one. Recordings before that noted only reads served from a
   * publication, and a live read before any publication is taken for such an unnoted one.
   */
  private allReads = false;

  /** `record`: this replay is itself recorded (its decisions noted as RecordingTiming's are). */
  constructor(private readonly record = false) {
    this.fenceOrder = new FenceOrder(
      (data) => {
        if (this.record) this.link?.note(data);
      },
      (op) => this.holdLost('fence', op),
    );
    this.commitOrder = new FenceOrder(
      (data) => {
        if (this.record) this.link?.note(data);
      },
      (kind) => this.holdLost('commit', kind),
      'commit',
    );
    this.coreWaits = new CoreWaits(
      (data) => {
        if (this.record) this.link?.note(data);
      },
      (kind) => this.holdLost('core_wait', kind),
    );
  }

  attach(link: TimingLink): void {
    this.link = link;
    // The pacer's cues, relayed by the core link as they come (core-link.ts onTap).
    link.on?.('cue', (m) => this.cue(m));
  }

  get clock(): ServiceClock {
    return this;
  }
  get log(): DecisionLog {
    return this;
  }

  turn<K extends keyof Turns>(k: K, ...facts: Turns[K]): Promise<unknown> | null {
    const f = facts as unknown[];
    switch (k) {
      case 'fence':
        return this.fenceOrder.gate(f[0] as string);
      case 'session_end':
        return this.expiryTurn(...(facts as Turns['session_end']));
      case 'commit':
        return this.commitOrder.gate(f[0] as string);
      case 'status_read':
        return this.statusTurn() ?? null;
      case 'telemetry_poll':
        return this.telemetryTurn() ?? null;
    }
    return null;
  }

  took<K extends keyof Takens>(k: K, ...facts: Takens[K]): void {
    const f = facts as unknown[];
    switch (k) {
      case 'fence':
        return this.fenceOrder.passed(...(facts as Takens['fence']));
      case 'commit':
        return this.commitOrder.passed(f[0] as string, 'ok');
      case 'status_read':
        return this.statusRead(...(facts as Takens['status_read']));
      case 'telemetry_read':
        // Told to the pacer, which holds the core where the recorded poll was noted until the live one is.
        if (this.record || this.cued) this.link?.note({ t: 'telemetry_read' });
        return;
      case 'http_reply':
        return this.replied((facts as Takens['http_reply'])[0]);
      case 'watch':
        // Told to the pacer: an open serves its hold at the recorded open; a close is only noted when recording.
        if (this.record || (this.cued && f[1] === true)) this.link?.note({ t: 'watch', stream: f[0], open: f[1] });
        return;
      case 'grant_ended':
        if (f[0] === 'expired') this.expiriesTaken++;
        for (const look of [...this.expiryWaiters]) look();
        return;
    }
  }

  recorded<K extends keyof Recorded>(k: K, ...q: Recorded[K]['q']): Recorded[K]['a'] {
    // The recorded service found the lease run out at this very decision (its lazy check; its timer had not
    // fired); and what it did with each of the core's lease notices, in order.
    const a = k === 'expired_at_fence' ? this.cued && this.fenceOrder.recordedOutcome(q[0] as string) === 'expired' : this.cued ? this.leaseNotices.shift() : undefined;
    return a as Recorded[K]['a'];
  }

  wait(kind: string | null, ms: number): CoreWait {
    return this.coreWaits.begin(kind, ms);
  }

  /** True once a cue came: the service's time and its own timed decisions come from the recording. */
  get replaying(): boolean {
    return this.cued;
  }

  /**
   * The live host clock, as LiveTiming's: what a client compares the service's host times with (a renewed
   * deadline between its own readings before and after the call). The recorded core's times reach the
   * service already translated into this clock (pacer.ts `outward`).
   */
  now(): bigint {
    return process.hrtime.bigint();
  }
  /** On a recording made on the host clock the core's time is host time: the service's, once translated. */
  get coreOnServiceClock(): boolean {
    return this.cued && this.hostClock;
  }
  /** Filled from the pacer's cues (anchors and pairs). */
  private readonly times = new HostTimeMap();
  /** The core's host times in the live time base (the telemetry ring: docs/recording.md "Two clocks"). */
  get hostTimes(): HostTimes | null {
    return this.cued ? this.times : null;
  }
  /**
   * The lease runs out where the recording says (onExpiry), never by the service's clock: the core, held
   * and paced on the recorded clock, must see the expiry at its recorded cycle.
   */
  get leaseOnClock(): boolean {
    return !this.cued;
  }

  /**
   * A lease_expiry or session_end sync point on the service's side (sims/replay/sync-points.ts): the
   * recorded service took this decision on a session that had already ended, but the live service still
   * holds it. The decision waits until the live session ends too (took 'grant_ended', told by the authority
   * whenever it ends a grant), at most REPLAY_WAIT_MS, then goes on as a lost hold (ERROR, not a divergence the target
   * is blamed for). 'expired' is retaken at the decision itself (recorded 'expired_at_fence'), not waited for.
   *
   * A recording that notes what each decision saw of its session (`seen`, authority.ts sessionState) says
   * which refusals to hold: control_session_stale is the answer both for a session a stop's drain revoked
   * and for a generation that differs (suites/grant/grant.test.ts "stop advances the application
   * generation": the cleanup's second stop of the old generation found the session revoked when recorded,
   * and the live one, decided before the replayed core's drain came, found the grant still stopping and was
   * answered 200). A decision that saw the session end is held whatever its label; one that saw it current
   * or stopping is never held. Older recordings do not say: there only a no_grant or control_session_stale
   * refusal that the live grant would let pass (its session, its generation, not stopping) is held, for the
   * cued lease expiry, as before.
   */
  private expiryTurn(op: string, session: string | undefined, generation: bigint | undefined, authority: SessionView): Promise<void> | null {
    if (!this.cued || session === undefined) return null;
    const recorded = this.fenceOrder.recordedOutcome(op);
    if (recorded === undefined || recorded === 'ok' || recorded === 'expired') return null;
    const seen = this.fenceOrder.recordedSeen(op);
    let holds: () => boolean;
    let kind: HoldKind;
    if (seen !== undefined && authority.sessionState) {
      if (!SESSION_ENDED.has(seen)) return null;
      const state = authority.sessionState.bind(authority);
      holds = () => SESSION_HOLDS.has(state(session));
      kind = seen === 'expired' ? 'lease_expiry' : 'session_end';
    } else {
      const g = authority.current;
      if (!g || g.session !== session || g.generation !== generation || g.stopping || !GRANT_GONE.has(recorded)) return null;
      holds = () => authority.current?.session === session;
      kind = 'lease_expiry';
    }
    if (!holds()) return null;
    return new Promise<void>((resolve) => {
      const look = () => {
        if (holds()) return;
        clearTimeout(timer);
        this.expiryWaiters.delete(look);
        resolve();
      };
      const timer = setTimeout(() => {
        this.expiryWaiters.delete(look);
        this.holdLost(kind, op);
        resolve();
      }, REPLAY_WAIT_MS);
      timer.unref();
      this.expiryWaiters.add(look);
    });
  }
  onExpiry(listener: (generation: bigint, lateNs?: bigint) => void): void {
    this.expired = listener;
  }

  /** The publication cycle the recorded service served its next status read from, if any. */
  nextStatusReadCycle(): bigint | undefined {
    // Recordings that note only reads served from a publication: a read served before the core published
    // anything (a stepped core before its first step) was not noted, so a live read before any publication is
    // taken for one and must not take the next recorded read, which a later read of the test made. That guess
    // fails after a core restart on the host clock: the recorded core had published by the test's first read,
    // the replayed one, held for the test's acquire, not yet (suites/trajectory/handles.test.ts
    // "unknown_handle ... of an earlier core incarnation": Status with core null, 2 replays in 5). A
    // recording that notes every read (allReads) says which read was which.
    if (!this.allReads && this.link?.status === undefined) return undefined;
    const k = this.statusReadsTaken;
    if (k >= this.statusReads.length) return undefined;
    this.statusReadsTaken++;
    return this.statusReads[k];
  }
  private statusTurn(): Promise<unknown> | undefined {
    const k = this.statusReadsTaken;
    const want = this.nextStatusReadCycle();
    if (want === undefined || !this.link) return undefined;
    const expiry = this.statusTaken(k) ? null : this.expiriesTurn(this.statusReadExpiries[k]!, k);
    // -1: the recorded read was served before the core had published anything: served now, as then.
    if (want < 0n) return expiry ?? undefined;
    const link = this.link;
    const publication = () =>
      link.statusFrom(want, STATUS_READ_WAIT_MS).then((came) => {
        if (!came) this.holdLost('publication', `publication of cycle ${want}`);
      });
    return expiry ? expiry.then(publication) : publication();
  }
  /** Whether read `k` may be served as far as lease expiries go: this service let as many leases run out as the recorded one had. */
  private statusTaken(k: number): boolean {
    return k >= this.statusReadExpiries.length || this.expiriesTaken >= this.statusReadExpiries[k]!;
  }
  /**
   * Read `k` was served by the recorded service after it had let `n` leases run out, and this service has
   * let fewer run out: it waits until the next one runs out here (each grant end looks again), at most
   * REPLAY_WAIT_MS, then goes on as a lost hold (kind lease_expiry). The recorded read showed the grant gone,
   * and what the test does with it follows: suites/jog/jog.test.ts "lease lost during a jog ..." reads the
   * core's grant observation after the expiry, sends one more jog frame the recorded service refused (its
   * grant gone) and stops; a replay faster than its recording reached that read while the live deadline,
   * which the live service keeps (docs/recording.md "Two clocks"), was still ahead, and the frame went on to
   * the core held at the recorded expiry, an extra request (a divergence).
   */
  private expiriesTurn(n: number, k: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const look = () => {
        if (this.expiriesTaken < n) return;
        clearTimeout(timer);
        this.expiryWaiters.delete(look);
        resolve();
      };
      const timer = setTimeout(() => {
        this.expiryWaiters.delete(look);
        this.holdLost('lease_expiry', `status read ${k + 1} after lease expiry ${n}`);
        resolve();
      }, REPLAY_WAIT_MS);
      timer.unref();
      this.expiryWaiters.add(look);
    });
  }
  private statusRead(cycle: bigint | undefined, nowNs?: bigint): void {
    if (!(this.record || this.statusReads.length)) return;
    // A read before any publication is noted when this replay is recorded, or told to the pacer when the
    // recording noted such reads (it holds for them); otherwise it is no sync point (nextStatusReadCycle).
    if (cycle === undefined && !(this.record || this.allReads)) return;
    this.link?.note(statusReadNote(cycle, nowNs, this.link.outputsSeen));
  }
  /** Told to the pacer, which compares it with the recorded answer (docs/recording.md "The service's replies"). */
  private replied(reply: { status: number; body: Record<string, unknown> }): void {
    if (!(this.record || this.cued)) return;
    const note = replyNote(reply);
    if (note) this.link?.note(note);
  }
  /** The recorded service's decisions on the core's lease notices, in order (recorded 'lease_notice'). */
  private leaseNotices: LeaseNotice[] = [];
  /**
   * A live poll is served once the replayed core has reached the place where the recorded one was: served
   * at once from a core still running towards it, it showed fewer records than when recorded, and a test
   * that polls until records come polled again, a poll the recording never had (suites/telemetry/
   * telemetry.test.ts "after=0 starts at sequence 1 ...": no records for 10 s, a FAIL). A core that never
   * gets there within the hold bound is a lost hold (ERROR), not a poll served early.
   */
  private telemetryTurn(): Promise<void> | undefined {
    if (!this.cued || !this.link) return undefined;
    return this.link.pollTurn(POLL_TURN_WAIT_MS).then((came) => {
      if (!came) this.holdLost('telemetry_poll', 'the recorded poll\'s cycle');
    });
  }
  cue(m: TimingCue): void {
    if (m.fences) {
      // A pacer's first cue (each core incarnation of a replay has its own recording and pacer): what the
      // recorded service did during that incarnation, from its start.
      this.fenceOrder.load(m.fences, m.fenceOutcomes, m.fencePolled, m.fenceSeen);
      this.commitOrder.load(m.commits ?? []);
      this.statusReads = [...(m.statusReads ?? [])];
      this.statusReadsTaken = 0;
      // Counted from this incarnation's start, as its recording counts them.
      this.statusReadExpiries = [...(m.statusReadExpiries ?? [])];
      this.expiriesTaken = 0;
      this.allReads = m.statusReadsAll === true;
      this.coreWaits.load(m.coreWaits ?? []);
      this.leaseNotices = [...(m.leaseNotices ?? [])];
    }
    this.cued = true;
    this.hostClock = m.hostClock;
    this.times.coreTimeIsHost = m.hostClock;
    for (const a of m.anchors ?? []) this.times.anchor(a.recordedNs, a.liveNs);
    for (const [rec, live] of m.pairs ?? []) this.times.pair(rec, live);
    if (m.expire) this.expired?.(m.expire.generation, m.expire.lateNs);
  }

  /** A hold kept in vain, told to the pacer (only once a cue came: a live run holds nothing). */
  holdLost(kind: HoldKind, detail: string): void {
    if (!this.cued) return;
    this.link?.note({ t: 'hold_lost', kind, detail });
  }
}

// The order of the service's fence decisions, recorded and replayed (format 2, docs/recording.md "The
// service side"). A race between two requests of one controller (reset_fault and release sent together) is
// decided by which of them passes its fence first; that can turn on a status publication arriving a
// millisecond earlier. A recorded service notes every fence decision in order; a replaying service holds a
// request at its fence until the decisions recorded before it have been taken, so the race ends as recorded.
//
// Renewals and jog updates are left out (UNORDERED in timing.ts).

/** How far ahead of the next recorded decision a live one is looked for. */
const LOOKAHEAD = 8;
/** A live decision is held at most this long for the recorded ones before it (then those are skipped). */
export const FENCE_HOLD_MS = 2000;

export class FenceOrder {
  private log: string[] | null = null;
  /** The recorded outcome of each decision in `log` ('ok' or the refusal label), when the recording has them. */
  private outcomes: string[] = [];
  /** What each decision in `log` saw of its session ('' or absent: the recording does not say). */
  private seen: string[] = [];
  private taken: boolean[] = [];
  /**
   * Decisions of a request the test polled on the wall clock (sims/replay/sync-points.ts fenceDecisions):
   * a live decision still takes them in order, but none is held for them (the live side may make fewer).
   */
  private optional: boolean[] = [];
  /** The first recorded decision not taken that a live one is held for (optional ones are skipped). */
  private cursor = 0;
  /** The first recorded decision not taken (where a live decision is looked for). */
  private first = 0;
  private waiters: Array<{ at: number; go: () => void }> = [];
  /**
   * Decisions taken after every recorded one of the loaded log was taken: they belong to the next core
   * incarnation's log, which the next pacer cues only once its core is up (load). A test's cleanup after a
   * simulated crash (release, stop) can be decided in between; its recording has them first.
   */
  private beyond: string[] = [];
  /** Fence decisions held (replay) and held until the timeout (a live run that differs from the recording). */
  held = 0;
  timedOut = 0;

  /**
   * `note`: a recorded service notes each decision; `lost`: a replaying service reports a decision it held
   * in vain (FENCE_HOLD_MS passed), a lost hold of kind 'fence' (sims/replay/sync-points.ts).
   */
  constructor(
    private readonly note?: (data: { t: 'fence' | 'commit'; op: string; outcome?: string; seen?: string }) => void,
    private readonly lost?: (op: string) => void,
    /** What the notes are: fence decisions (with their outcome), or places in the commit queue (ReplayedTiming.commitOrder). */
    private readonly tag: 'fence' | 'commit' = 'fence',
  ) {}

  /**
   * Replay: the recorded fence decisions, in order, with their outcomes when given (same length), and which
   * are a polled request's (`polled`, same length when given: taken in order, never held for), and what each
   * saw of its session (`seen`, same length when given; '' where the recording does not say).
   */
  load(ops: readonly string[], outcomes?: readonly string[], polled?: readonly boolean[], seen?: readonly string[]): void {
    const keep = ops.map((op) => !UNORDERED.has(op));
    this.log = ops.filter((_, i) => keep[i]);
    this.outcomes = outcomes && outcomes.length === ops.length ? outcomes.filter((_, i) => keep[i]) : [];
    this.seen = seen && seen.length === ops.length ? seen.filter((_, i) => keep[i]) : [];
    this.optional = polled && polled.length === ops.length ? polled.filter((_, i) => keep[i]) : this.log.map(() => false);
    this.taken = this.log.map(() => false);
    this.cursor = 0;
    this.first = 0;
    this.advance();
    // What was decided since the previous log ran out is this log's first decisions (each matched in order
    // within the look-ahead, as passed() would have): without this the next decision waited for them in
    // vain (suites/machine/home-bound.test.ts "transport loss ...": stop held 2 s for the release before it).
    const early = this.beyond;
    this.beyond = [];
    for (const op of early) this.passed(op, '');
  }

  /** Replay: how the recorded service decided the next decision of `op` (undefined: not recorded). */
  recordedOutcome(op: string): string | undefined {
    if (!this.log || UNORDERED.has(op)) return undefined;
    const k = this.find(op);
    return k < 0 ? undefined : this.outcomes[k];
  }

  /** Replay: what the next recorded decision of `op` saw of its session (undefined: the recording does not say). */
  recordedSeen(op: string): string | undefined {
    if (!this.log || UNORDERED.has(op)) return undefined;
    const k = this.find(op);
    return k < 0 ? undefined : this.seen[k] || undefined;
  }

  get replaying(): boolean {
    return this.log !== null;
  }

  /**
   * The recorded decision a live decision of `op` takes: the first untaken one of `op` within the look-ahead.
   * When that one is a polled request's, the live decision may be the one after the polls (the live side
   * polled fewer times): within the run of `op`'s decisions from there, the first not polled whose outcome
   * is the live one, else the first whose outcome is the live one (a refusal repeated on purpose keeps its
   * place), else the first. `outcome` undefined (before the decision): the first.
   */
  private find(op: string, outcome?: string): number {
    const log = this.log!;
    let k0 = -1;
    for (let k = this.first, seen = 0; k < log.length && seen < LOOKAHEAD; k++) {
      if (this.taken[k]) continue;
      seen++;
      if (log[k] === op) {
        k0 = k;
        break;
      }
    }
    if (k0 < 0 || !this.optional[k0] || outcome === undefined) return k0;
    const same = (k: number) => !this.outcomes.length || this.outcomes[k] === outcome;
    let sameOutcome = -1;
    for (let k = k0; k < log.length && log[k] === op; k++) {
      if (this.taken[k]) continue;
      if (same(k) && !this.optional[k]) return k;
      if (same(k) && sameOutcome < 0) sameOutcome = k;
    }
    return sameOutcome >= 0 ? sameOutcome : k0;
  }


  /**
   * Before a fence check of `op`: null to go on now, or a promise that resolves when the recorded decisions
   * before this one have been taken (or after FENCE_HOLD_MS). Null outside a replay, so a live run never
   * yields here.
   */
  gate(op: string): Promise<void> | null {
    if (!this.log || UNORDERED.has(op)) return null;
    const k = this.find(op);
    if (k <= this.cursor) return null;
    this.held++;
    return new Promise<void>((resolve) => {
      const w = {
        at: k,
        go: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.timedOut++;
        this.lost?.(op);
        this.waiters = this.waiters.filter((x) => x !== w);
        for (let i = this.cursor; i < k; i++) this.taken[i] = true;
        this.advance();
        resolve();
      }, FENCE_HOLD_MS);
      timer.unref();
      this.waiters.push(w);
    });
  }

  /**
   * After a fence check of `op` (outcome 'ok' or the refusal label; `seen`, what it saw of the session):
   * recorded, or taken off the replayed log.
   */
  passed(op: string, outcome: string, seen?: string): void {
    if (UNORDERED.has(op)) return;
    if (!this.log) {
      this.note?.(this.tag === 'fence' ? { t: 'fence', op, outcome, ...(seen !== undefined ? { seen } : {}) } : { t: this.tag, op });
      return;
    }
    if (this.first >= this.log.length) {
      if (this.beyond.length < LOOKAHEAD) this.beyond.push(op);
      return;
    }
    const k = this.find(op, outcome);
    if (k < 0) return;
    this.taken[k] = true;
    this.advance();
  }

  private advance(): void {
    while (this.first < this.taken.length && this.taken[this.first]) this.first++;
    this.cursor = this.first;
    while (this.cursor < this.taken.length && (this.taken[this.cursor] || this.optional[this.cursor])) this.cursor++;
    const ready = this.waiters.filter((w) => w.at <= this.cursor);
    this.waiters = this.waiters.filter((w) => w.at > this.cursor);
    for (const w of ready) w.go();
  }
}

// The service's timed waits on the core as recorded decisions (docs/recording.md "The service side"). The
// service waits a bounded wall time for the core: a native receipt, the next status publication, a fault
// injection's reply. On a recorded run each wait's outcome is noted ('ok' or 'timeout', per kind of wait, in
// order). On a paced replay the core is held at recorded sync points and runs in bursts, so a wait that was
// answered when recorded may find the core held: a wait the recording says was answered gets REPLAY_WAIT_MS
// instead of its own bound, and if it still runs out the replay could not hold the recorded order (a lost
// hold of kind 'core_wait', reported to the pacer). A wait that ran out when recorded keeps its own bound.
// Recordings without these notes: bounds unchanged.

/** How long a replayed wait the recording says was answered may take (wall ms): a held core, not a slow one. */
export const REPLAY_WAIT_MS = 10_000;

export class CoreWaits {
  private recorded: Map<string, Array<{ outcome: WaitOutcome; cycle?: bigint }>> | null = null;

  /**
   * `note`: a recorded service notes each outcome; `lost`: a replaying service reports a wait that ran out
   * although the recorded one was answered.
   */
  constructor(
    private readonly note?: (data: { t: 'core_wait'; kind: string; outcome: WaitOutcome; cycle?: string }) => void,
    private readonly lost?: (kind: string) => void,
  ) {}

  /** Replay: the recorded outcomes, in order (kind and outcome per wait, and the publication a status wait got). */
  load(waits: ReadonlyArray<{ kind: string; outcome: string; cycle?: bigint }>): void {
    this.recorded = new Map();
    for (const w of waits) {
      const q = this.recorded.get(w.kind) ?? [];
      q.push({ outcome: w.outcome === 'timeout' ? 'timeout' : 'ok', ...(w.cycle !== undefined ? { cycle: w.cycle } : {}) });
      this.recorded.set(w.kind, q);
    }
  }

  /**
   * Start a wait of `kind` with its own bound `ms`: returns the bound to use, the function to call with the
   * outcome (exactly once) and, on a replay of a status wait, the publication cycle that ends it.
   */
  begin(kind: string | null, ms: number): CoreWait {
    // Waits a client makes on its own wall-clock timer (renewals, jog updates) and the service's own polls
    // come in another number on every run: neither noted nor held (as timing.ts UNORDERED).
    if (kind === null) return { ms, done: () => undefined };
    if (!this.recorded) return { ms, done: (outcome, cycle) => this.note?.({ t: 'core_wait', kind, outcome, ...(cycle !== undefined ? { cycle: cycle.toString() } : {}) }) };
    const want = this.recorded.get(kind)?.shift();
    return {
      ms: want?.outcome === 'ok' ? Math.max(ms, REPLAY_WAIT_MS) : ms,
      done: (outcome) => {
        if (want?.outcome === 'ok' && outcome === 'timeout') this.lost?.(kind);
      },
      ...(want?.outcome === 'ok' && want.cycle !== undefined ? { atLeast: want.cycle } : {}),
      ...(want?.outcome === 'timeout' ? { timedOut: true as const } : {}),
    };
  }
}

// Recorded host times to live ones on the service's side (docs/recording.md "Two clocks"), for what the
// service serves without the core's messages in between: the telemetry capture ring. The pacer
// (sims/replay/pacer.ts) cues where the replay met the live side, the recorded host time the core had
// reached and the live time then (anchors: between two meetings a paced core keeps both clocks together; one
// run flat out runs ahead, and a time it reached is held back to the live clock: `live` with `past`),
// and each recorded host time the live side sent, with the live one (pairs: an acquire's deadline).

/** Anchors kept (one per meeting of the replay with the live side: a request handed over, a read served). */
const ANCHORS_KEPT = 65_536;
/** Pairs kept (the pacer sends one per live host time it replaced: a jog producer's frames). */
const PAIRS_KEPT = 4096;

export class HostTimeMap implements HostTimes {
  coreTimeIsHost = false;
  private recorded: bigint[] = [];
  private liveAt: bigint[] = [];
  private readonly pairs = new Map<bigint, bigint>();

  /** The replay met the live side with the core at recorded host time `recordedNs`, at live time `liveNs`. */
  anchor(recordedNs: bigint, liveNs: bigint): void {
    const n = this.recorded.length;
    // Met again without running a cycle (a read served, then a request handed over): the last one counts.
    if (n > 0 && this.recorded[n - 1] === recordedNs) {
      this.liveAt[n - 1] = liveNs;
      return;
    }
    if (n >= ANCHORS_KEPT) {
      this.recorded.splice(0, n / 2);
      this.liveAt.splice(0, n / 2);
    }
    this.recorded.push(recordedNs);
    this.liveAt.push(liveNs);
  }

  pair(recordedNs: bigint, liveNs: bigint): void {
    if (this.pairs.size >= PAIRS_KEPT) this.pairs.delete(this.pairs.keys().next().value!);
    this.pairs.set(recordedNs, liveNs);
  }

  /**
   * A time the live side sent: the one it sent. Otherwise moved by the difference of the last meeting
   * before it (the first one's for a time before any): what the core did after a meeting it did paced
   * from there, so the times between two records stay exactly the recorded ones (a test evaluates a
   * trajectory at the records' times); the cycle a hold stood at belongs to the stretch before the hold.
   * A time the core has reached (`past`) is never later than the live clock.
   */
  live(t: bigint, past: boolean): bigint {
    if (t === 0n) return 0n;
    const paired = this.pairs.get(t);
    if (paired !== undefined) return paired;
    const R = this.recorded;
    const n = R.length;
    if (n === 0) return t;
    // j: the first anchor at or after t (anchors are in recorded order); the one before it is in force
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (R[mid]! < t) lo = mid + 1;
      else hi = mid;
    }
    const i = lo === 0 ? 0 : lo - 1;
    let v = t + (this.liveAt[i]! - R[i]!);
    if (past) {
      const now = process.hrtime.bigint();
      if (v > now) v = now;
    }
    return v;
  }
}
