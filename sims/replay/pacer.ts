// Paced replay: a recording played back under a live client (the replay target of `hil run --target
// replay`, docs/recording.md "The replay target"). The core runs on the replay driver with the recording's
// own frame times, cycles back to back without sleeping, up to the cycle at which the next recorded request
// arrived; there it waits for the live request, matches it with the recorded one and hands the live one to
// the core at exactly that cycle. Replies and events the core sends are compared with the recorded ones in
// order. So a suite run against the replay target drives the same core through the same cycles as the
// recorded run, and everything it asserts is checked again on the replayed bus.
//
// Matching (docs/recording.md "The replay target"): same message type and operation, same fields, except
//   - fences (generations, handles, message ids, jog generations) are rewritten consistently: the first
//     time a recorded value meets a live one the pair is fixed, and every later use must agree both ways;
//   - host times (lease and jog deadlines, capture times: any field whose name ends in ns/Ns that carries a
//     host monotonic time) are not compared, since they belong to the wall clock of the run that sent them.
// The first mismatch (request, reply or event) is the divergence; the core then runs free to the end of the
// recording (requests handled as they come), so the test finishes and the verdict says what differed.
// Matching is match.ts; reading the recording, scan.ts.

import type { BusDriver } from '../../drivers/bus.ts';
import type { DivergenceReport } from '../../drivers/replay/driver.ts';
import type { RecordingNote } from '../../drivers/replay/format.ts';
import { compareNote, FenceMap, normalise, PAYLOAD_HOST_TIME_FIELDS, PROTOCOL_HOST_TIME_FIELDS, unstamped, withRecordedTimes, type HttpReply, type Mismatch } from './match.ts';
import { isOutput } from '../core/protocol.ts';
import { paceMode, RunToCrash, type ModeCore, type PaceMode } from './modes.ts';
import { answerCycleOf, type PacingScan } from './scan.ts';
import { answerCycles } from '../../drivers/replay/session.ts';
import type { ServiceCue } from '../../drivers/replay/tap.ts';
import { writeVerdictFile } from './verdict-file.ts';
import type { PacedDivergence, PacedVerdict } from './verdict.ts';
import { BoundedHold, grantKey, leaseNotices, readSyncPoints, sameGrant, type HoldKind, type LostHold, type SyncPoints } from './sync-points.ts';

/** The parts of CoreHost (sims/core/host.ts) the pacer drives. */
export interface PacedCore {
  /** `answerAtCycle`: a prepare's recorded answer cycle (CoreHost.handle). */
  handle(msg: never, answerAtCycle?: number): boolean;
  cycle(): void;
  /** The recorded clock: `at` is the host time the core reads while a request is handed over (format 2). */
  readonly clock?: object;
  readonly core: { readonly cycleCount: number; publish(nowNs: bigint): void; readonly now: bigint };
  readonly driverHost: { readonly driver: BusDriver };
  /** A step the test asked for is done (the stepped clock's reply, with the answers its cycles produced). */
  stepped?(id: number, answered: number): void;
  /** Answers the core has sent so far (CoreHost.answers). */
  readonly answers?: number;
}


export type { PacedDivergence, PacedVerdict } from './verdict.ts';

/** An answer's identity for repeats: operation, status and leading label. */
const replyKey = (r: HttpReply): string => `${r.op}\u0000${r.status}\u0000${r.label}`;

type Driverish = BusDriver & { divergence?(): DivergenceReport | null };

/** How many of the next unmatched recorded requests a live one may be matched with (arrival order races). */
const LOOKAHEAD = 16;


/** Host times of a jog session the core reports (its status's `jog`), in the time base of whoever sent them. */
const JOG_STATUS_TIMES = ['SourceOriginHostNs', 'DeadlineHostNs', 'InputDeadlineHostNs'] as const;
/** The parts of a status publication that carry host times (outward). */
type CoreStatusTimes = { now_ns: bigint; grant_observation?: Record<string, unknown>; jog?: Record<string, unknown> };
/** How many recorded-to-live host time pairs a replay keeps (a jog producer sends one per frame). */
const HOST_PAIRS_KEPT = 4096;

/** What the pacer tells the live service: the tap's cue (drivers/replay/tap.ts). */
export type { ServiceCue };


export { ORIGIN_LEASE_EXPIRED } from './sync-points.ts';

export class ReplayPacer {
  /** The recorded answer cycle of each recorded request id (scan.ts answerCycles), read at the first handover. */
  private answers: Map<number, number> | undefined;
  /** Live messages assigned to recorded requests (by index), waiting for their cycle. */
  private assigned = new Map<number, unknown>();
  /** Live messages to hand over at once (after a divergence, or unmatched). */
  private immediate: unknown[] = [];
  private nextRequest = 0;
  private nextOutput = 0;
  private matched = 0;
  private outputsMatched = 0;
  private extra = 0;
  private renewalsReplayed = 0;
  private liveRenewals = 0;
  private first: PacedDivergence | null = null;
  fences = new FenceMap();
  private readonly t0 = performance.now();
  private finished = false;
  /** Per recorded request: a lease renewal (same generation, activity and axes as the grant before it). */
  private readonly renewal: boolean[];
  private lastLiveGrant: ReturnType<typeof grantKey> = null;
  /** Format 2: the service's timed decisions follow the recording (see syncService); its clock is the live one. */
  private readonly serviceLog: boolean;
  private readonly hostClock: boolean;
  private cueNs = -1n;
  /** Recorded requests whose expiry cue has been given to the service (by index). */
  private cued = new Set<number>();
  private expiries = 0;

  /**
   * How recorded time passes (modes.ts): flat out, paced to the recorded wall time at `speed`, or the
   * stepped clock's steps; chosen once from the recording and the speed.
   */
  private mode: PaceMode;
  private readonly wallMs: () => number;
  /** The live host monotonic clock (the live service's: ReplayedTiming.now), injectable for tests. */
  private readonly hostNs: () => bigint;
  /** The core as the mode sees it (its cycle count and the answers it has sent). */
  private readonly modeCore: ModeCore = ((p: ReplayPacer) => ({
    get cycleCount(): number {
      return p.host.core.cycleCount;
    },
    get answers(): number {
      return p.host.answers ?? 0;
    },
  }))(this);
  /** After 'pace': how long (ms of wall time) until the next cycle is due. */
  pauseMs = 0;
  /**
   * Status reads (format 2 recordings that note them): for each recorded GET /v1/status, the cycle of the
   * publication it was served from (p) and the cycle at which the core noted it (a, the read arrived
   * between cycles a - 1 and a). The paced core publishes at every p, publishes nothing else while a read
   * is pending between its p and its a, and holds at a until the live service has served the read (its
   * note arrives through offer): the live test reads what it read when recorded, the publication of the
   * same cycle. A read the live test never makes is a lost hold (sync-points.ts BoundedHold).
   */
  private readonly reads: BoundedHold;
  /**
   * Telemetry polls (GET /v1/telemetry): the cycles at which the recorded service noted them. The paced core
   * holds at each until the live service has served one more poll (bounded as status reads), so a test
   * polling telemetry without any request in between never finds the core run out of recorded frames
   * because it started later than when recorded. The ring itself is live (no publication to gate).
   */
  private readonly polls: BoundedHold;
  /** Streams (sync-points.ts `watch`): held at each recorded open until the live service opens one. */
  private readonly watchOpens: BoundedHold;
  private readonly publishAt: Set<number>;
  /** The sync points of the recording (sync-points.ts), read once. */
  readonly points: SyncPoints;
  /** Holds the replay could not keep, in order (the core's and the live service's). */
  private readonly lostHolds: LostHold[] = [];
  /** Format 3: the recorded service's answers (see PacedVerdict.service_replies) and which the live one gave. */
  private readonly replies: SyncPoints['replies'];
  private readonly replyTaken: boolean[];
  private replyCursor = 0;
  private repliesMatched = 0;
  /** The recorded answers matched so far (replyKey): a live answer equal to one of them is a repeat. */
  private readonly matchedReplies = new Set<string>();

  constructor(
    private readonly host: PacedCore,
    readonly scan: PacingScan,
    private readonly o: { file: string; mode: string; reportFile?: string; toService?: (m: ServiceCue) => void; speed?: number | null; watched?: boolean; wallMs?: () => number; hostNs?: () => bigint },
  ) {
    this.wallMs = o.wallMs ?? (() => performance.now());
    this.hostNs = o.hostNs ?? (() => process.hrtime.bigint());
    const points = (this.points = readSyncPoints(scan, o.toService !== undefined));
    const lost = (h: LostHold) => this.lostHolds.push(h);
    this.reads = new BoundedHold('status_read', points.statusReads.map((r) => r.cycle), this.wallMs, lost);
    this.polls = new BoundedHold('telemetry_poll', points.telemetryPolls.map((r) => r.cycle), this.wallMs, lost);
    this.watchOpens = new BoundedHold('watch', points.watchOpens, this.wallMs, lost);
    this.publishAt = new Set(points.statusReads.map((r) => r.published));
    this.serviceLog = points.serviceLog;
    this.hostClock = scan.header.clock === 'realtime';
    this.replies = points.replies;
    this.replyTaken = this.replies.map(() => false);
    this.mode = paceMode({ steps: points.steps, speed: o.speed ?? null, watched: o.watched, watches: points.watches, times: scan.times, wallMs: this.wallMs });
    this.renewal = points.requests.map((r) => r.renewal);
    if (this.serviceLog && o.toService) {
      // The first cue: the recorded order of the service's fences, its status reads and waits, and where the
      // recorded clock starts (the first message's time, or the core's first frame on a host-clock recording
      // if that is earlier; informative, the service runs on the live clock: docs/recording.md "Two clocks").
      const first = scan.requests.length ? BigInt(scan.requests[0]!.sent_ns!) : BigInt(scan.header.t0_ns);
      const t0 = BigInt(scan.header.t0_ns);
      this.cueNs = this.hostClock && t0 < first ? t0 : first;
      const reads = points.statusReads;
      const notices = leaseNotices(scan);
      o.toService({
        tap: 'cue',
        clockNs: this.cueNs,
        hostClock: this.hostClock,
        fences: points.fences.map((f) => f.op),
        fenceOutcomes: points.fences.map((f) => f.outcome),
        // Decisions of a polled request: taken in order, never held for (sync-points.ts fenceDecisions).
        ...(points.fences.some((f) => f.polled) ? { fencePolled: points.fences.map((f) => f.polled === true) } : {}),
        // What each decision saw of its session, when the recording says (replay-timing.ts expiryTurn).
        ...(points.fences.some((f) => f.seen !== undefined) ? { fenceSeen: points.fences.map((f) => f.seen ?? '') } : {}),
        ...(points.commits.length ? { commits: points.commits.map((c) => c.op) } : {}),
        ...(reads.length ? { statusReads: reads.map((r) => BigInt(r.published)) } : {}),
        ...(reads.some((r) => r.expiries > 0) ? { statusReadExpiries: reads.map((r) => r.expiries) } : {}),
        ...(scan.header.status_reads === 'all' ? { statusReadsAll: true } : {}),
        ...(notices.length ? { leaseNotices: notices } : {}),
        ...(points.coreWaits.length ? { coreWaits: points.coreWaits.map(({ kind, outcome, cycle }) => ({ kind, outcome, ...(cycle !== undefined ? { cycle } : {}) })) } : {}),
      });
      // The start is where the replay first meets the live side (the pacing counts from it).
      this.anchorHere();
    }
  }

  /**
   * A note of the live service's own (drivers/replay/tap.ts 'note'): its answer to a request (compared with
   * the recorded one), a hold it gave up, or a sync point it reached (a telemetry poll served, a stream
   * opened, a status read served), where the replay meets the live side.
   */
  note(data: Record<string, unknown>): void {
    const note = data as { t?: string; kind?: HoldKind; detail?: string; open?: unknown };
    if (note.t === 'http_reply') return this.matchReply(data as unknown as HttpReply);
    // The live service gave up a hold of its own (a fence decision, a status read's publication).
    if (note.t === 'hold_lost' && note.kind) this.lostHolds.push({ kind: note.kind, cycle: this.host.core.cycleCount, ...(note.detail ? { detail: note.detail } : {}) });
    if (note.t === 'telemetry_read') {
      this.polls.serve();
      this.meet();
    }
    if (note.t === 'watch' && note.open === true) {
      // The live test opened a stream: the recorded open is done, and the replay met the live side.
      this.watchOpens.serve();
      this.meet();
    }
    if (note.t === 'status_read') {
      // The live service served a status read: the next recorded one is done, and the replay met the live side.
      this.reads.serve();
      this.meet();
    }
  }

  /**
   * A live message for the core (everything but step and shutdown, which the caller handles, and the tap's).
   *
   * Lease renewals are the service's own timing (a renewal extends the deadline of the grant the core
   * already has): the recorded renewals are replayed at their cycles with their recorded deadlines, and a
   * live renewal is not handed to the core. Every other message is matched with the earliest of the next
   * LOOKAHEAD unmatched recorded requests it agrees with (two independent senders, a test's command and
   * the service's own messages, may arrive in either order), and handed to the core at that request's cycle,
   * with the recorded host times.
   */
  offer(stamped: unknown): void {
    const msg = unstamped(stamped);
    const live = normalise(msg);
    const g = grantKey(live);
    if (g) {
      const renewal = sameGrant(g, this.lastLiveGrant);
      this.lastLiveGrant = g;
      if (renewal && !this.first) {
        this.liveRenewals++;
        return;
      }
    }
    if (this.first) {
      this.immediate.push(msg);
      return;
    }
    const reqs = this.scan.requests;
    let firstOpen = -1;
    let firstMismatch: Mismatch | null = null;
    for (let j = this.nextRequest, seen = 0; j < reqs.length && seen < LOOKAHEAD; j++) {
      if (this.renewal[j] || this.assigned.has(j)) continue;
      seen++;
      const trial = this.fences.clone();
      const m = compareNote(reqs[j]!.data, live, trial);
      if (firstOpen < 0) {
        firstOpen = j;
        firstMismatch = m;
      }
      if (!m) {
        this.fences = trial;
        this.assigned.set(j, withRecordedTimes(msg, reqs[j]!.data, (rec, liveNs) => this.pairHostTime(rec, liveNs)));
        this.matched++;
        return;
      }
    }
    const c = this.host.core.cycleCount;
    if (firstOpen < 0) this.extra++;
    this.diverge({ kind: 'request', cycle: c, expected: firstOpen < 0 ? null : reqs[firstOpen], actual: { cycle: c, kind: 'request', data: live }, ...(firstMismatch ? { path: firstMismatch.path } : {}) });
    this.immediate.push(msg);
  }

  /**
   * Host times the live side sent (a jog session's origin and deadlines, a frame's capture and input
   * deadline) reach the core as the recorded ones, so that it decides as it did when recorded. What the core
   * reports of them goes back to the live side in its own time base: the live service compares a frame's
   * capture time with the session's origin in the core's status, and a test compares the input deadline the
   * core reports with the capture time it stamped. Recorded -> live, by value (host times are unique ns).
   */
  private readonly liveHostTimes = new Map<bigint, bigint>();
  private pairHostTime(recorded: bigint, live: bigint): void {
    if (recorded === live) return;
    if (this.liveHostTimes.size >= HOST_PAIRS_KEPT) this.liveHostTimes.delete(this.liveHostTimes.keys().next().value!);
    this.liveHostTimes.set(recorded, live);
    if (this.pendingPairs.length < HOST_PAIRS_KEPT) this.pendingPairs.push([recorded, live]);
  }

  /**
   * The live host time a host time of the replayed core stands for (docs/recording.md "Two clocks"). The
   * replaying service runs on the live host clock, the core on the recorded one: a time the live side sent
   * goes back as the one it sent (the pairs above: an acquire's deadline, a jog session's times); any other
   * is moved by as much as the live clock is ahead of the recorded host time the core has reached now, so
   * the core's "now" is the live time at which the replayed core did it. A time later than that (a deadline
   * the recording gave, a recorded renewal's) is kept as first translated, so it reads the same every time.
   * 0 (no deadline) stays 0.
   */
  private liveNs(t: bigint): bigint {
    if (t === 0n) return 0n;
    const paired = this.liveHostTimes.get(t);
    if (paired !== undefined) return paired;
    const recordedNow = this.recordedHostNs();
    const live = t + (this.hostNs() - recordedNow);
    if (t > recordedNow) this.pairHostTime(t, live);
    return live;
  }

  /** The recorded host time the core has reached (RecordedClock.hostNs; the core's time without one). */
  private recordedHostNs(): bigint {
    const clock = this.host.clock as { hostNs?: unknown } | undefined;
    return typeof clock?.hostNs === 'bigint' ? clock.hostNs : this.host.core.now;
  }

  /** `fields` of `o` that hold host times, translated (liveNs); `o` itself when none is. */
  private liveFields<T extends Record<string, unknown>>(o: T, fields: readonly string[]): T {
    let out: T | null = null;
    for (const k of fields) {
      const v = o[k];
      if (typeof v !== 'bigint') continue;
      const live = this.liveNs(v);
      if (live === v) continue;
      out ??= { ...o };
      (out as Record<string, unknown>)[k] = live;
    }
    return out ?? o;
  }

  /**
   * A message of the core's on its way to the live service, with its host times in the live service's
   * time base (liveNs): a status publication's time (on a recording made on the host clock, where the
   * core's time is host time), its grant receipt's deadline and its jog session's times; an event's time
   * and the host times in its payload. A jog_expired event's `host_ns` (the core's time at expiry) moves
   * by as much as its input deadline: after the deadline when recorded, after it on the live side too.
   * Everything else goes as the core sent it. A stepped or fast recording's core time is simulated, not
   * host time: it stays as recorded (the step replies carry the same).
   */
  outward<M>(m: M): M {
    const msg = m as { t?: string; status?: CoreStatusTimes; type?: string; payload?: Record<string, unknown>; time_ns?: bigint };
    if (msg.t === 'status' && msg.status) {
      const st = msg.status;
      const now = this.hostClock ? this.liveNs(st.now_ns) : st.now_ns;
      const grant = st.grant_observation ? this.liveFields(st.grant_observation, PROTOCOL_HOST_TIME_FIELDS) : st.grant_observation;
      const jog = st.jog ? this.liveFields(st.jog, JOG_STATUS_TIMES) : st.jog;
      if (now === st.now_ns && grant === st.grant_observation && jog === st.jog) return m;
      return { ...msg, status: { ...st, now_ns: now, grant_observation: grant, jog } } as M;
    }
    if (msg.t !== 'event') return m;
    const time = this.hostClock && typeof msg.time_ns === 'bigint' ? this.liveNs(msg.time_ns) : msg.time_ns;
    let payload = msg.payload;
    if (payload && msg.type === 'jog_expired' && typeof payload.input_deadline_host_ns === 'bigint') {
      const rec = payload.input_deadline_host_ns;
      const live = this.liveNs(rec);
      payload = { ...payload, input_deadline_host_ns: live, ...(typeof payload.host_ns === 'bigint' ? { host_ns: payload.host_ns + (live - rec) } : {}) };
    } else if (payload) payload = this.liveFields(payload, PAYLOAD_HOST_TIME_FIELDS);
    if (time === msg.time_ns && payload === msg.payload) return m;
    return { ...msg, ...(time !== undefined ? { time_ns: time } : {}), ...(payload ? { payload } : {}) } as M;
  }

  /**
   * The live service answered a control or program request: matched with the earliest of the next
   * LOOKAHEAD unmatched recorded answers of the same operation that agrees in status and label (concurrent
   * requests may be answered in either order). An answer equal to a recorded answer of that operation
   * already matched is a repeat (below). An answer of that operation that differs, or one the recording does
   * not have, is the divergence. Recordings before format 3 have none: nothing is compared.
   */
  private matchReply(live: HttpReply): void {
    if (this.first || this.o.toService === undefined || this.scan.header.format < 3) return;
    let sameOp = -1;
    for (let k = this.replyCursor, seen = 0; k < this.replies.length && seen < LOOKAHEAD; k++) {
      if (this.replyTaken[k]) continue;
      seen++;
      const r = this.replies[k]!.reply;
      if (r.op !== live.op) continue;
      if (r.status === live.status && r.label === live.label) {
        this.replyTaken[k] = true;
        this.repliesMatched++;
        this.matchedReplies.add(replyKey(live));
        while (this.replyCursor < this.replies.length && this.replyTaken[this.replyCursor]) this.replyCursor++;
        return;
      }
      if (sameOp < 0) sameOp = k;
    }
    // A repeat: the recorded answers are collapsed (collapseRepeats: a request polled until its answer
    // changes is answered as often as the wall clock had it), and whether two answers of one operation are
    // neighbours depends on the order in which the answers of concurrent requests came, which a replay does
    // not keep: the core answers a stop whose HTTP reply the test does not wait for as soon as its worker
    // gets to it, and the test's next stop may be answered first (suites/grant/drain.test.ts). So the live
    // side is not collapsed by its own order; an answer the recorded service also gave, already matched, is
    // that answer again, whatever came between.
    if (this.matchedReplies.has(replyKey(live))) return;
    const c = this.host.core.cycleCount;
    const expected = sameOp < 0 ? null : this.replies[sameOp]!.note;
    const path = expected === null ? undefined : (expected.data as HttpReply).status !== live.status ? 'status' : 'label';
    this.diverge({ kind: 'service', cycle: c, expected, actual: { cycle: c, kind: 'service', data: live }, ...(path ? { path } : {}) });
  }

  /** A message the core sent (reply, event, home_done, stop_drained), compared with the recorded ones in order. */
  observe(msg: { t: string }): void {
    if (msg.t === 'status') this.lastPublished = this.host.core.cycleCount;
    if (!isOutput(msg)) return;
    const cycle = this.host.core.cycleCount;
    const kind = msg.t === 'reply' ? 'reply' : 'event';
    const want = this.scan.outputs[this.nextOutput];
    if (this.first) return; // after the first divergence the rest is not compared (it cannot agree)
    if (!want) {
      this.diverge({ kind, cycle, expected: null, actual: normalise(msg) });
      return;
    }
    this.nextOutput++;
    const live = normalise(msg);
    // An event of bring-up (cycle 0, before the first frame) carries the host time of the run that started
    // the core, not a recorded frame time: everything else about it is compared.
    if (cycle === 0 && want.cycle === 0 && kind === 'event') {
      const w = want.data as Record<string, unknown>;
      if (w && typeof w === 'object' && 'time_ns' in w && live && typeof live === 'object') (live as Record<string, unknown>).time_ns = w.time_ns;
    }
    const m = want.kind !== kind || want.cycle !== cycle ? { path: want.cycle !== cycle ? '(cycle)' : '(kind)', expected: want.cycle, actual: cycle } : compareNote(want.data, live, this.fences);
    if (m) this.diverge({ kind, cycle, expected: want, actual: { cycle, kind, data: live }, path: m.path });
    else this.outputsMatched++;
  }

  /**
   * A recording made on the stepped clock (format 3, which records the test's steps as requests): the worker
   * hands the test's steps here, where each is matched with a recorded one and runs its cycles.
   */
  get steps(): boolean {
    return this.mode.kind === 'stepped';
  }

  get diverged(): PacedDivergence | null {
    return this.first;
  }

  private diverge(d: PacedDivergence): void {
    if (this.first) return;
    this.first = d;
    // What was matched but not yet due is handed over as it comes from now on.
    for (const j of [...this.assigned.keys()].sort((a, b) => a - b)) this.immediate.push(this.assigned.get(j));
    this.assigned.clear();
    this.writeVerdict();
  }

  private busDivergence(): void {
    const d = (this.host.driverHost.driver as Driverish).divergence?.();
    if (d && d.kind === 'diverged' && !this.first) this.diverge({ kind: 'bus', cycle: d.cycle, bus: d });
  }

  /** A recorded renewal as the core gets it: the live generation the recorded one stands for, the recorded deadline. */
  private renewalMessage(data: unknown): unknown {
    const d = data as Record<string, unknown>;
    const gen = this.fences.live('generation', d.generation);
    return { t: 'grant', generation: BigInt(gen ?? String(d.generation)), deadlineNs: BigInt(String(d.deadlineNs)), active: d.active, axisMask: d.axisMask };
  }

  /**
   * Run as far as the recording and the live requests allow, at most `budget` cycles. 'more': call again
   * soon (let messages in first); 'wait': blocked on a live request; 'end': at the last recorded frame;
   * 'pace' (paced replay only): the next cycle is due in `pauseMs` of wall time.
   */
  advance(budget: number): 'more' | 'wait' | 'end' | 'pace' {
    const s = this.run(budget);
    this.timesCue();
    this.cueExpiry();
    return s;
  }

  /** Where the replay met the live side since the last cue (meet), one per recorded host time. */
  private pendingAnchors: Array<{ recordedNs: bigint; liveNs: bigint }> = [];
  /** Pairs (recorded, live) not yet cued. */
  private pendingPairs: Array<[bigint, bigint]> = [];

  /**
   * The replay met the live side (modes.ts `met`: from here recorded and wall time run together again), and
   * the live service is told where: the recorded host time the core has reached, at which live time (an
   * anchor, docs/recording.md "Two clocks"). Between two meetings a paced core (wall pace, or inside a
   * stream's span in the default pace) keeps recorded and live time together by construction, so the
   * service moves a record's time by the last anchor's difference and the times between records stay the
   * recorded ones. Flat out (the default pace outside streams) the core runs ahead of the live clock: its
   * times keep the recorded spacing and are held back to the live clock where they would pass it
   * (HostTimeMap.live `past`); no stream shows them while they are ahead, and a read or poll is a meeting.
   */
  private meet(): void {
    this.mode.met();
    this.anchorHere();
  }

  private anchorHere(): void {
    const a = { recordedNs: this.recordedHostNs(), liveNs: this.hostNs() };
    const last = this.pendingAnchors.at(-1);
    // Met again without a cycle in between (held, then the request handed over): the last one counts.
    if (last && last.recordedNs === a.recordedNs) last.liveNs = a.liveNs;
    else this.pendingAnchors.push(a);
  }

  /**
   * Cue the live service the anchor and the pairs made since the last cue (it translates the telemetry ring
   * with them: sims/service/replay-timing.ts HostTimeMap). Format 2 and later with a live service only (a
   * format 1 replay cues nothing).
   */
  private timesCue(): void {
    if (!this.serviceLog || !this.o.toService) return;
    if (!this.pendingAnchors.length && !this.pendingPairs.length) return;
    const pairs = this.pendingPairs;
    const anchors = this.pendingAnchors;
    this.pendingPairs = [];
    this.pendingAnchors = [];
    this.o.toService({ tap: 'cue', clockNs: this.cueNs, hostClock: this.hostClock, ...(anchors.length ? { anchors } : {}), ...(pairs.length ? { pairs } : {}) });
  }

  private run(budget: number): 'more' | 'wait' | 'end' | 'pace' {
    const reqs = this.scan.requests;
    for (let n = 0; ; n++) {
      const c = this.host.core.cycleCount;
      while (this.immediate.length) this.deliver(this.immediate.shift());
      // A step's answer comes before anything recorded at its last cycle: the test may wait for it first.
      this.stepDone(c);
      while (this.nextRequest < reqs.length && reqs[this.nextRequest]!.cycle <= c) {
        const j = this.nextRequest;
        if (this.renewal[j]) {
          this.handOver(reqs[j]!, this.renewalMessage(reqs[j]!.data));
          this.renewalsReplayed++;
        } else if (this.assigned.has(j)) {
          this.handOver(reqs[j]!, this.assigned.get(j));
          this.assigned.delete(j);
          // The replay met the live side here: the recorded time from now on is counted from this point.
          this.meet();
        } else if (!this.first) {
          this.syncService(j);
          if (this.mayPublish()) this.host.core.publish(this.host.core.now);
          // Held for the live side: recorded and wall time line up again when it arrives.
          this.meet();
          return 'wait';
        }
        this.nextRequest++;
      }
      this.stepDone(c); // a step of no cycles
      if (this.bounded(c)) {
        this.syncService(null);
        return 'wait';
      }
      if (!this.mode.runs()) {
        // The stepped clock between steps: time stands still until the test asks for cycles.
        this.syncService(null);
        return c >= this.scan.frames ? 'end' : 'wait';
      }
      if (c >= this.scan.frames && this.mode.kind !== 'stepped') {
        this.syncService(null);
        if (this.mayPublish()) this.host.core.publish(this.host.core.now);
        return 'end';
      }
      if (n >= budget) {
        this.syncService(null);
        return 'more';
      }
      // Ahead: a live request matched and waiting for its cycle (the test already did what came before it).
      const pause = this.mode.pause(c, this.assigned.size > 0);
      if (pause > 0) {
        this.pauseMs = pause;
        this.syncService(null);
        return 'pace';
      }
      this.host.cycle();
      this.busDivergence();
      // A recorded status read was served from this cycle's publication: the core publishes it whatever its
      // own publication rules say (what is newer than a pending read's is kept back: publication()).
      const ran = this.host.core.cycleCount;
      if (!this.first && this.publishAt.has(ran) && this.lastPublished !== ran) this.host.core.publish(this.host.core.now);
    }
  }

  /**
   * The bounded holds at cycle c (sync-points.ts BoundedHold, one rule for every kind): true while the core
   * must stay at c for the live side. None after a divergence, when running flat out to a crash, or
   * during a step's cycles.
   */
  private bounded(c: number): boolean {
    if (this.first || !this.mode.holdsApply) return false;
    const reads = this.points.statusReads;
    return this.reads.holds(c, (k) => `publication of cycle ${reads[k]!.published}`) || this.polls.holds(c) || this.watchOpens.holds(c);
  }

  /** A status read is pending whose publication is behind the core: publish nothing newer now. */
  private readPending(c: number): boolean {
    if (this.first) return false;
    const r = this.points.statusReads[this.reads.next];
    return r !== undefined && r.published <= c && c <= r.cycle;
  }

  /** Live telemetry polls waiting for their turn (pollTurn). */
  private readonly pollTurns: number[] = [];

  /**
   * A live telemetry poll asks to be served (drivers/replay/tap.ts 'poll_turn'): its turn comes once the core has
   * reached the cycle at which the recorded service noted its next poll, so the live poll shows the records
   * the recorded one showed at least (sims/service/replay-timing.ts telemetryTurn). At once when no recorded
   * poll is left, after a divergence, or while holds do not apply.
   */
  pollTurn(id: number): void {
    this.pollTurns.push(id);
  }
  /** The polls whose turn has come (and forget them): the worker answers them after every message and slice. */
  takePollTurns(): number[] {
    if (!this.pollTurns.length) return [];
    const next = this.points.telemetryPolls[this.polls.next];
    const come = this.finished || this.first || !this.mode.holdsApply || !next || this.host.core.cycleCount >= next.cycle;
    return come ? this.pollTurns.splice(0) : [];
  }

  /** The cycle of the core's last publication (observe). */
  private lastPublished = -1;
  /**
   * Publications newer than the one a pending status read was served from when recorded, kept until then, in
   * order: each one a later recorded read was served from (publishAt), and of the others only the newest.
   */
  private deferred: Array<{ t: 'status'; status: { cycle: bigint } }> = [];

  /**
   * A status publication on its way to the live service: null when it must wait (kept, see
   * takePublication). The recorded service served read k from publication P_k although the core had already
   * published a newer one P' (the read k + 1's), still on its way to the service; the replayed core publishes
   * P' at its cycle too (forced, for read k + 1), and the live service would serve read k from P' if it had
   * it. So a publication newer than the pending read's reaches the service only once that read is served (or
   * given up): read k sees what it saw when recorded, read k + 1 what it saw (machine.test.ts reset_fault
   * after the condition cleared: enabled in the first read instead of the second).
   */
  publication<M extends { t?: string }>(m: M): M | null {
    if (isOutput(m)) {
      if (this.keptOutputs.length || this.outputsHeld()) {
        this.keptOutputs.push(m);
        return null;
      }
      this.outputsOut++;
      return m;
    }
    if (m.t !== 'status' || !this.olderReadPending((m as unknown as { status: { cycle: bigint } }).status.cycle)) return m;
    // The newest kept one gives way to this one unless a later read was served from it: read k held at its
    // arrival with publication P_k+1 (forced for read k + 1) and newer ones kept behind it; with one place only,
    // a newer publication took P_k+1's, and read k + 1 waited for a publication it never got
    // (suites/machine/home.test.ts "a Home whose HTTP reply is lost ...": HIL_ERR_REPLAY_UNHELD, publication
    // of cycle 205 with the core held at 238).
    const last = this.deferred.at(-1);
    if (last && !this.publishAt.has(Number(last.status.cycle))) this.deferred.pop();
    this.deferred.push(m as unknown as { t: 'status'; status: { cycle: bigint } });
    return null;
  }

  /**
   * What was kept back and may go now, in order (then it is the worker's to send): the outputs a served (or
   * given up) read no longer holds, then the kept publications, in order, each once no pending read needs an older one.
   */
  takePublications(): unknown[] {
    const out: unknown[] = [];
    while (this.keptOutputs.length && !this.outputsHeld()) {
      out.push(this.keptOutputs.shift());
      this.outputsOut++;
    }
    while (this.deferred.length && !this.olderReadPending(this.deferred[0]!.status.cycle)) out.push(this.deferred.shift());
    return out;
  }

  /** The core's outputs let through to the live service, and those kept back behind a pending read (outputsHeld). */
  private outputsOut = 0;
  private readonly keptOutputs: unknown[] = [];

  /**
   * Whether the next output must wait: the recorded service served the pending status read having taken in
   * `seen` of the core's outputs (replies, events, Home and stop outcomes), and as many have gone to the live
   * one. What the service shows besides the publication (a trajectory's execution state, a handle's) is built
   * from them: let one more through and the live read shows what the recorded one did not, and a test that
   * waits on status stops a read earlier than when recorded, a read the replay then holds for in vain
   * (suites/trajectory/handles.test.ts "discard_trajectory of a program handle": the completion taken in
   * before the read instead of after). A read never made is given up at its bound, and the outputs go on.
   */
  private outputsHeld(): boolean {
    if (this.first) return false;
    const r = this.points.statusReads[this.reads.next];
    return r?.seen !== undefined && this.outputsOut >= r.seen;
  }

  private olderReadPending(cycle: bigint): boolean {
    if (this.first) return false;
    const r = this.points.statusReads[this.reads.next];
    return r !== undefined && BigInt(r.published) < cycle && r.published <= this.host.core.cycleCount;
  }

  /** Whether the worker may publish the held core's status now (not while a read waits for an older one). */
  mayPublish(): boolean {
    // A stepped core publishes in its cycles and after each step, never while it stands between steps.
    if (!this.mode.publishesWhileHeld) return false;
    return !this.readPending(this.host.core.cycleCount) || this.publishAt.has(this.host.core.cycleCount);
  }

  /**
   * The live side is about to kill this core (a simulated crash; the next incarnation has a recording of
   * its own): run flat out, holding for nothing but live requests, to where the recorded core was killed.
   */
  runToEnd(): void {
    this.mode = new RunToCrash(this.mode);
    while (this.advance(100_000) === 'more');
    this.writeVerdict();
  }

  /** A live message for the core now; on a stepped recording a step starts its cycles instead. */
  private deliver(msg: unknown, answerAtCycle?: number): void {
    if (this.mode.take(msg as { t?: string }, this.modeCore)) return;
    this.host.handle(msg as never, answerAtCycle);
  }

  /** The step under way has run its cycles: publish (as the stepped clock does after a step) and answer it. */
  private stepDone(c: number): void {
    const s = this.mode.stepDone(c, this.modeCore);
    if (!s) return;
    this.host.core.publish(this.host.core.now);
    this.host.stepped?.(s.id, s.answered);
  }

  /** Hand a request to the core, with the host time the recorded core read while handling it (format 2). */
  private handOver(note: RecordingNote, msg: unknown): void {
    const clock = this.host.clock && 'at' in this.host.clock ? (this.host.clock as { at: bigint | null }) : null;
    if (clock && note.host_ns !== undefined) clock.at = BigInt(note.host_ns);
    try {
      this.deliver(msg, answerCycleOf(note, (this.answers ??= answerCycles(this.scan.outputs))));
    } finally {
      if (clock) clock.at = null;
    }
  }

  /**
   * Format 2: retake the recorded service's timed decisions: a request the recorded service sent because a
   * lease ran out is cued (the live service ends that grant now, not before its live deadline, and sends
   * the same requests). The cue also says where the recorded clock is (waiting at recorded request
   * `waitingFor`, the time the recorded service sent it; else, on a recording with host times, the
   * recorded host time of the core's last cycle; never moving back): informative, since the service runs
   * on the live host clock (docs/recording.md "Two clocks").
   */
  private syncService(waitingFor: number | null): void {
    if (!this.serviceLog || !this.o.toService) return;
    const points = this.points.requests;
    let clock = -1n;
    let expire: { generation: bigint } | undefined;
    if (waitingFor !== null) {
      const p = points[waitingFor]!;
      clock = BigInt(p.note.sent_ns!);
      // A lease_expiry sync point: cue the live service to take the recorded service's decision here.
      if (p.kind === 'lease_expiry' && !this.cued.has(waitingFor)) {
        for (let k = waitingFor; k < points.length && points[k]!.kind === 'lease_expiry' && points[k]!.cycle === p.cycle; k++) this.cued.add(k);
        // On a host-clock recording not before the live deadline (lateNs 0); on a stepped or fast one now.
        expire = { ...this.expiryOf(waitingFor), ...(this.hostClock ? { lateNs: 0n } : {}) };
        if (!this.soon.has(waitingFor)) this.expiries++;
      }
    } else if (this.hostClock || this.scan.hostTimes) {
      // The recorded host time of the core's last cycle: its frame time on the host clock, else kept beside it.
      const c = this.host.core.cycleCount;
      const host = this.scan.hostTimes ?? this.scan.times;
      if (c > 0 && c <= this.scan.frames) clock = BigInt(this.scan.header.t0_ns) + BigInt(host[c - 1]!);
    }
    if (clock <= this.cueNs && !expire) return;
    if (clock > this.cueNs) this.cueNs = clock;
    this.o.toService({ tap: 'cue', clockNs: this.cueNs, hostClock: this.hostClock, ...(expire ? { expire } : {}) });
  }

  /** The live generation whose lease the recorded expiry at request `j` ended (its grant message's). */
  private expiryOf(j: number): { generation: bigint } {
    const points = this.points.requests;
    const g = points.slice(j).find((x) => x.kind === 'lease_expiry' && (x.note.data as { t?: string }).t === 'grant')?.note;
    const recorded = String((g?.data as { generation?: unknown } | undefined)?.generation ?? '0');
    return { generation: BigInt(this.fences.live('generation', recorded) ?? recorded) };
  }

  /** Recorded lease expiries cued before the core reached them (cueExpiry), by request index. */
  private readonly soon = new Set<number>();

  /**
   * A recorded lease expiry that nothing the live side sends comes before any more (every request recorded
   * before it has been matched) is cued at once, with how long after the grant's deadline the recorded
   * service ended it (`lateNs`, sync-points.ts): the live service ends the grant then on its own clock,
   * never before its deadline, instead of where the replayed core reaches it, which a loaded machine can
   * delay (suites/grant/grant.test.ts "a lease left to run out ...": 51 ms after a 40 ms lease's deadline
   * where the test allows a few round trips). Not before: on a replay slower than its recording the live
   * deadline passes before the test has sent what was recorded before the expiry (suites/jog/jog.test.ts
   * "lease lost during a jog ...": its jog frames and steps), which must reach the core first. The
   * lease_expired messages then come early and are handed over at their recorded cycle. On a stepped or
   * fast recording the expiry is tied to the test's steps, not to the live clock: the cue ends it at once
   * (its live deadline may still lie ahead when the live test steps faster than the recorded one:
   * suites/jog/jog.test.ts "lease lost during a jog ..." sent one more jog frame than recorded, waiting).
   */
  private cueExpiry(): void {
    if (this.first || !this.serviceLog || !this.o.toService) return;
    const points = this.points.requests;
    let j = this.nextRequest;
    while (j < points.length && (this.renewal[j] || this.assigned.has(j))) j++;
    const p = points[j];
    if (!p || p.kind !== 'lease_expiry' || p.lateNs === undefined || this.cued.has(j) || this.soon.has(j)) return;
    for (let k = j; k < points.length && points[k]!.kind === 'lease_expiry' && points[k]!.cycle === p.cycle; k++) this.soon.add(k);
    this.expiries++;
    // A stepped or fast recording's expiry is tied to the test's steps, not to the live clock: ended now.
    this.o.toService({ tap: 'cue', clockNs: this.cueNs, hostClock: this.hostClock, expire: { ...this.expiryOf(j), ...(this.hostClock ? { lateNs: p.lateNs } : {}) } });
  }

  verdict(): PacedVerdict {
    const s = this.scan;
    const d = this.host.driverHost.driver as Driverish;
    const report = d.divergence?.() ?? null;
    const cycleNs = Number(BigInt(s.header.cycle_ns));
    return {
      file: this.o.file,
      mode: this.o.mode,
      run: s.header.run ?? null,
      recorded: { frames: s.frames, complete: s.complete, requests: s.requests.length, outputs: s.outputs.length, machine_sha256: s.header.machine_sha256, configuration_sha256: s.header.configuration_sha256 },
      cycles: this.host.core.cycleCount,
      requests_matched: this.matched,
      outputs_matched: this.outputsMatched,
      requests_unsent: s.requests.slice(this.nextRequest).filter((_, i) => !this.renewal[this.nextRequest + i] && !this.assigned.has(this.nextRequest + i)).length,
      first_unsent: s.requests.find((_, j) => j >= this.nextRequest && !this.renewal[j] && !this.assigned.has(j)) ?? null,
      renewals_replayed: this.renewalsReplayed,
      live_renewals: this.liveRenewals,
      service_clock: this.serviceLog && this.o.toService ? 'recorded' : 'live',
      expiries_replayed: this.expiries,
      requests_extra: this.extra,
      outputs_missing: this.first ? 0 : s.outputs.filter((n, i) => i >= this.nextOutput && n.cycle <= this.host.core.cycleCount).length,
      ...this.mode.verdict(),
      status_reads: { recorded: this.points.statusReads.length, served: this.reads.served, missed: this.reads.lostCount },
      telemetry_reads: { recorded: this.points.telemetryPolls.length, served: this.polls.served, missed: this.polls.lostCount },
      ...(this.points.watches ? { watches: { recorded: this.points.watchOpens.length, served: this.watchOpens.served, missed: this.watchOpens.lostCount } } : {}),
      holds_lost: this.lostHolds,
      ...(this.replies.length || (this.o.toService && s.header.format >= 3)
        ? { service_replies: { recorded: this.replies.length, matched: this.repliesMatched, first_missing: this.replies.find((_, k) => !this.replyTaken[k])?.note ?? null } }
        : {}),
      divergence: this.first,
      end: report && report.kind === 'end' ? report : null,
      wall_ms: Math.round(performance.now() - this.t0),
      recorded_ms: s.frames ? (s.times[s.frames - 1]! + cycleNs) / 1e6 : 0,
    };
  }

  /** The verdict last written, without its wall time (writeVerdict `ifChanged`). */
  private written = '';

  /**
   * Write the verdict (JSON) where the target reads it: on divergence, before a simulated crash and at
   * shutdown, and while the core stands held with nothing coming in (`ifChanged`: only when something in it
   * but the wall time changed since the last write; the worker loop says when: worker-loop.ts). A stack
   * killed outright leaves the last one.
   */
  writeVerdict(ifChanged = false): void {
    if (!this.o.reportFile) return;
    const v = this.verdict();
    if (ifChanged) {
      const key = JSON.stringify({ ...v, wall_ms: 0 }, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));
      if (key === this.written) return;
      this.written = key;
    }
    try {
      writeVerdictFile(this.o.reportFile, v);
    } catch {
      /* the verdict is a report: a read-only directory must not crash the core */
    }
  }

  finish(): PacedVerdict {
    this.finished = true;
    this.writeVerdict();
    return this.verdict();
  }

  get done(): boolean {
    return this.finished;
  }
}
