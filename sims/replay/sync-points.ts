// Sync points of a paced replay (docs/recording.md "The replay target"): each
// place where the recorded run met the live side is a typed point read from the recording once, here, and
// the pacer holds the replayed core at it until the live side has done the same. A hold that cannot be
// kept (the live side never came within the bound) is a lost hold: counted by kind, and the harness ends
// the test in ERROR (HIL_ERR_REPLAY_UNHELD, harness/errors.ts) rather than judging the target on an order
// the replay did not keep.
//
// Kinds held by the core's pacer (sims/replay/pacer.ts):
//   request         a recorded request to the core (a command, a grant, a step): unbounded, the test sends it;
//   status_read     a GET /v1/status the recorded service served from the publication of `published`;
//   telemetry_poll  a GET /v1/telemetry the recorded service served (and the live one is served only once the
//                   core has reached it: pacer.ts pollTurn);
//   watch           a stream (GET /v1/telemetry/stream, GET /v1/events/stream) the recorded service opened:
//                   held until the live one opens its own, and the span until it closed is paced to the
//                   recorded wall time in the default pace (modes.ts WatchedMode);
//   lease_expiry    a request the recorded service sent because a lease ran out (cued to the live service);
//   crash           the end of an incarnation's recording before a simulated crash (run flat out to it).
// Kinds held by the live service and reported back as lost (a 'hold_lost' service note):
//   fence           a fence decision held to the recorded order (sims/service/replay-timing.ts FenceOrder);
//   commit          a preparation's place in the commit queue (trajectory or program), which numbers the
//                   handles of two racing preparations, held to the recorded order the same way
//                   (sims/service/handles.ts serialise, sims/service/replay-timing.ts commitOrder);
//   publication     a status read waiting for the publication its recording was served from;
//   lease_expiry    a fence decision the recorded service refused because the lease had run out, while the
//                   live service still holds the grant: held until the cued expiry (sims/service/replay-timing.ts);
//                   and a status read the recorded service served after it had let a lease run out, until
//                   the live service has let as many run out (statusTurn: the read's `expiries`);
//   session_end     a fence decision the recorded service took on a session that had already ended (a stop's
//                   drain revoked it, its lease ran out), while the live service still holds it: held until it
//                   ends there too (sims/service/replay-timing.ts expiryTurn);
//   core_wait       a timed wait on the core (a native receipt, a publication, a fault injection's reply)
//                   that was answered when recorded but ran out on the replay (sims/service/replay-timing.ts CoreWaits).

import type { RecordingNote } from '../../drivers/replay/format.ts';
import type { LeaseNotice } from '../../drivers/replay/tap.ts';
import type { HttpReply } from './match.ts';
import { collapseRepeats } from './match.ts';
import type { PacingScan } from './scan.ts';
import type { WatchWindow } from './modes.ts';

/** Origin of the requests a service sends when a lease runs out (sims/service/service.ts). */
export const ORIGIN_LEASE_EXPIRED = 'lease_expired';

/**
 * How long a bounded hold waits for the live side (wall ms) before it is given up as lost. As long as the
 * service's replayed waits on the core (REPLAY_WAIT_MS, sims/service/replay-timing.ts): what the live
 * side does before it makes the read or poll takes its recorded time divided by the replay's speed, and
 * on a loaded machine that speed fell to 0.34 (suites/machine/startup.test.ts "anchors saved by another
 * pair ...": the harness's telemetry poll of the first stack, 0.76 s after its release when recorded,
 * came after the second stack's part of the test, more than 2 s later). A longer bound only delays the
 * ERROR of a read the live side never makes; it never turns one into a pass.
 */
export const HOLD_BOUND_MS = 10_000;

export type SyncPoint =
  | { kind: 'request'; cycle: number; index: number; note: RecordingNote; renewal: boolean }
  /** `lateNs`: how long after the grant's last recorded deadline the recorded service ended its lease. */
  | { kind: 'lease_expiry'; cycle: number; index: number; note: RecordingNote; renewal: boolean; lateNs?: bigint }
  /** `expiries`: how many leases the recorded service had let run out before it served the read. */
  | { kind: 'status_read'; cycle: number; published: number; seen?: number; expiries: number }
  | { kind: 'telemetry_poll'; cycle: number }
  /** `polled`: a repeat of a refused request the test polled on the wall clock (fenceDecisions): not held to. */
  | { kind: 'fence'; op: string; outcome: string; polled?: true; seen?: string }
  | { kind: 'commit'; op: string }
  | { kind: 'core_wait'; wait: string; outcome: string }
  | { kind: 'reply'; cycle: number; reply: HttpReply; note: RecordingNote };

/** Kinds of hold whose loss the verdict reports (see above). */
export type HoldKind = 'status_read' | 'telemetry_poll' | 'watch' | 'fence' | 'commit' | 'publication' | 'core_wait' | 'lease_expiry' | 'session_end';

/** One hold the replay could not keep. */
export interface LostHold {
  kind: HoldKind;
  /** The core's cycle when it was given up. */
  cycle: number;
  /** What was waited for (the recorded read's publication cycle, the fence's operation). */
  detail?: string;
}

type GrantKey = { generation: string; active: unknown; axisMask: unknown };
export const grantKey = (d: unknown): GrantKey | null => {
  const g = d as { t?: string; generation?: unknown; active?: unknown; axisMask?: unknown };
  return g && g.t === 'grant' ? { generation: String(g.generation), active: g.active, axisMask: g.axisMask } : null;
};
export const sameGrant = (a: GrantKey | null, b: GrantKey | null) => a !== null && b !== null && a.generation === b.generation && a.active === b.active && a.axisMask === b.axisMask;

/** Every sync point of a recording, by kind, in recorded order. */
export interface SyncPoints {
  /** Requests to the core (lease renewals flagged: the pacer replays those itself). */
  requests: Array<Extract<SyncPoint, { kind: 'request' | 'lease_expiry' }>>;
  statusReads: Array<Extract<SyncPoint, { kind: 'status_read' }>>;
  telemetryPolls: Array<Extract<SyncPoint, { kind: 'telemetry_poll' }>>;
  /** The cycles at which the recorded service opened a stream (held as telemetry polls are). */
  watchOpens: number[];
  /**
   * The spans during which at least one stream was open, ascending and disjoint; null for a recording that
   * does not note streams (made before they were noted: header `watch_notes`), which is paced throughout.
   */
  watches: WatchWindow[] | null;
  fences: Array<Extract<SyncPoint, { kind: 'fence' }>>;
  /** The order in which preparations took their place in the commit queue ('trajectory', 'program'). */
  commits: Array<Extract<SyncPoint, { kind: 'commit' }>>;
  /** The recorded service's timed waits on the core and how each ended, in order. */
  coreWaits: Array<{ kind: string; outcome: string; cycle?: bigint }>;
  /** Format 3: the service's answers, repeats collapsed (collapseRepeats); compared only with a live service. */
  replies: Array<Extract<SyncPoint, { kind: 'reply' }>>;
  /** A recording made on the stepped clock with the test's steps among its requests. */
  steps: boolean;
  /** Format 2 and later: every request carries the service's post stamp (its clock and decisions follow). */
  serviceLog: boolean;
}

const tOf = (n: RecordingNote) => (n.data as { t?: string } | null)?.t;

/**
 * Read the sync points of `scan`. `withService`: the live service takes part (the replay target); without
 * it (a core driven in-process) the service's points are left out, since nobody would serve them.
 */
export function readSyncPoints(scan: PacingScan, withService: boolean): SyncPoints {
  let last: GrantKey | null = null;
  const requests = scan.requests.map((note, index): SyncPoints['requests'][number] => {
    const g = grantKey(note.data);
    const renewal = g !== null && sameGrant(g, last);
    if (g) last = g;
    return note.origin === ORIGIN_LEASE_EXPIRED && note.sent_ns !== undefined ? { kind: 'lease_expiry', cycle: note.cycle, index, note, renewal } : { kind: 'request', cycle: note.cycle, index, note, renewal };
  });
  const service = withService ? scan.service : [];
  // How many leases the recorded service had let run out before each of its notes, in the recording's one
  // order (scan.ts serviceAt; a scan made by hand: the requests of earlier cycles).
  const expiredBefore = leaseExpiriesBefore(scan);
  const reads = service.flatMap((n, i) => (tOf(n) === 'status_read' ? [{ n, expiries: expiredBefore(n, i) }] : []));
  // The service's clock a read showed (`now_ns`, format 3) is kept in the recording but not replayed: the
  // replaying service runs on the live host clock (docs/recording.md "Two clocks").
  // A read served before the core had published anything is noted with cycle 'none' (published -1): held
  // for at its arrival like any other, with no publication to force.
  // `seen`: how many of the core's outputs the recorded service had taken in when it served the read
  // (recordings made since 2026-11-28): the replay lets no later one through before the read is served.
  // `expiries`: a read the recorded service served after it had let a lease run out showed the grant gone
  // (its Status, the core's grant observation, a jog frame refused at the service after it); the live service
  // serves it only once it has let as many run out (sims/service/replay-timing.ts statusTurn), which it does
  // not before its own deadline (docs/recording.md "Two clocks").
  const statusReads = reads.map(({ n, expiries }) => {
    const { cycle: c, seen } = n.data as { cycle?: unknown; seen?: unknown };
    return { kind: 'status_read' as const, cycle: n.cycle, published: c === 'none' ? -1 : Number(c), ...(Number.isInteger(seen) ? { seen: seen as number } : {}), expiries };
  });
  const telemetryPolls = service.filter((n) => tOf(n) === 'telemetry_read').map((n) => ({ kind: 'telemetry_poll' as const, cycle: n.cycle }));
  const { opens: watchOpens, windows } = watchWindows(service);
  const fences = fenceDecisions(scan.service);
  const commits = scan.service.filter((n) => tOf(n) === 'commit').map((n) => ({ kind: 'commit' as const, op: String((n.data as { op?: unknown }).op) }));
  const coreWaits = scan.service
    .filter((n) => tOf(n) === 'core_wait')
    .map((n) => {
      const d = n.data as { kind?: unknown; outcome?: unknown; cycle?: unknown };
      return { kind: String(d.kind), outcome: String(d.outcome), ...(d.cycle !== undefined ? { cycle: BigInt(String(d.cycle)) } : {}) };
    });
  const replies =
    scan.header.format >= 3
      ? collapseRepeats(
          scan.service.filter((n) => tOf(n) === 'http_reply').map((n) => ({ kind: 'reply' as const, cycle: n.cycle, reply: n.data as HttpReply, note: n })),
          (x) => x.reply,
        )
      : [];
  // How long after the grant's last recorded deadline each recorded lease expiry came (its messages'
  // sent_ns): the live service ends the lease as long after its own deadline (pacer.ts cueExpiry).
  let deadline = 0n;
  for (const r of requests) {
    const d = r.note.data as { t?: string; active?: unknown; deadlineNs?: unknown };
    if (d.t === 'grant' && d.active === true && r.kind === 'request') deadline = BigInt(String(d.deadlineNs ?? '0'));
    if (r.kind === 'lease_expiry' && deadline > 0n) {
      const late = BigInt(r.note.sent_ns!) - deadline;
      r.lateNs = late > 0n ? late : 0n;
    }
  }
  return {
    requests,
    statusReads,
    telemetryPolls,
    watchOpens,
    watches: scan.header.watch_notes === true ? windows : null,
    fences,
    commits,
    coreWaits,
    replies,
    // A core driven in-process (tests, benches) runs cycles without step messages: nothing to wait for then.
    steps: scan.header.clock === 'stepped' && scan.header.format >= 3 && scan.requests.some((n) => tOf(n) === 'step'),
    serviceLog: scan.header.format >= 2 && scan.requests.every((n) => n.sent_ns !== undefined),
  };
}

/**
 * How many leases the recorded service had let run out before its `i`-th note `n`: the grant messages it sent
 * because a lease ran out (origin lease_expired, one per expiry beside its cancel_home) among the requests
 * written before the note (scan.ts serviceAt), or, in a scan without that order, among those of earlier cycles.
 */
function leaseExpiriesBefore(scan: PacingScan): (n: RecordingNote, i: number) => number {
  const upTo: number[] = [0];
  for (const r of scan.requests) upTo.push(upTo.at(-1)! + (r.origin === ORIGIN_LEASE_EXPIRED && tOf(r) === 'grant' ? 1 : 0));
  return (n, i) => upTo[scan.serviceAt?.[i] ?? scan.requests.filter((r) => r.cycle < n.cycle).length]!;
}

/**
 * What the recorded service did with each native_lease_expired notice of the core, in order (protocol.ts
 * LeaseNotice): its first grant message for the notice's generation after it says. The lease_expired one:
 * it ended the grant (its clock had passed the deadline); one that keeps the grant active: a renewal had
 * crossed the notice and it told the core again; none, or another: neither. The live service takes these
 * decisions from here (authority.ts nativeLeaseExpired), since its clock is not the recorded one: a flat-out
 * core brings the notice long before the live deadline.
 */
export function leaseNotices(scan: PacingScan): LeaseNotice[] {
  const out: LeaseNotice[] = [];
  for (const n of scan.outputs) {
    const d = n.data as { t?: string; type?: string; payload?: { generation?: unknown } } | null;
    if (n.kind !== 'event' || d?.type !== 'native_lease_expired') continue;
    const gen = String(d.payload?.generation);
    const next = scan.requests.find((r) => r.cycle >= n.cycle && tOf(r) === 'grant' && String((r.data as { generation?: unknown }).generation) === gen);
    const active = (next?.data as { active?: unknown } | undefined)?.active === true;
    out.push(next?.origin === ORIGIN_LEASE_EXPIRED ? 'expired' : next && active ? 'retold' : 'none');
  }
  return out;
}

/**
 * The recorded service's stream notes ({t: 'watch', open}) as the cycles of the opens and the spans with
 * at least one stream open (a stream still open at the end of the recording runs to its end).
 */
export function watchWindows(service: readonly RecordingNote[]): { opens: number[]; windows: WatchWindow[] } {
  const opens: number[] = [];
  const windows: WatchWindow[] = [];
  let depth = 0;
  let from = 0;
  for (const n of service) {
    if (tOf(n) !== 'watch') continue;
    if ((n.data as { open?: unknown }).open === true) {
      opens.push(n.cycle);
      if (depth++ === 0) from = n.cycle;
    } else if (depth > 0 && --depth === 0) {
      const last = windows.at(-1);
      // Two spans that meet (a stream closed and another opened in one cycle) are one.
      if (last && last.to >= from) last.to = Math.max(last.to, n.cycle);
      else windows.push({ from, to: n.cycle });
    }
  }
  if (depth > 0) windows.push({ from, to: Number.POSITIVE_INFINITY });
  return { opens, windows };
}

/**
 * The recorded fence decisions in order. A request the test polls until its answer changes (an upload slot
 * still busy: suites/trajectory/upload.test.ts "one upload at a time" polls every 20 ms until the first
 * client's slot is free) makes as many decisions as the wall clock gave it time for, which differs from run
 * to run, as its answers do (match.ts collapseRepeats). So the decisions of a request answered with the same
 * refusal as the request of that operation before it, with the same decisions, are marked `polled`: the
 * replay does not hold to them (a replay that polled fewer times held the test's release after them 2 s in
 * vain, HIL_ERR_REPLAY_UNHELD), and so are those of a request refused `busy` (an upload slot still taken).
 * A request's decisions are those of its operation since that operation's
 * previous answer (a reset_fault checks its fence twice, around its wait for a publication: one request,
 * both decisions held to, since its answer is not a repeated refusal).
 */
function fenceDecisions(service: readonly RecordingNote[]): SyncPoints['fences'] {
  const fences: SyncPoints['fences'] = [];
  const open = new Map<string, number[]>();
  const previous = new Map<string, string>();
  for (const n of service) {
    const t = tOf(n);
    if (t === 'fence') {
      const d = n.data as { op?: unknown; outcome?: unknown; seen?: unknown };
      const op = String(d.op);
      const list = open.get(op) ?? [];
      list.push(fences.length);
      open.set(op, list);
      // `seen`: what the decision saw of its session (sims/service/authority.ts sessionState); recordings
      // made before it was noted do not say.
      fences.push({ kind: 'fence', op, outcome: String(d.outcome), ...(typeof d.seen === 'string' ? { seen: d.seen } : {}) });
    } else if (t === 'http_reply') {
      const r = n.data as HttpReply;
      const mine = open.get(r.op) ?? [];
      open.delete(r.op);
      if (!mine.length) continue;
      const key = `${mine.map((k) => fences[k]!.outcome).join(',')}|${r.status}|${r.label}`;
      // A busy slot is the wall clock's too: whether an upload's slot is still taken depends on when the
      // service noticed its client go away (suites/program/admission.test.ts "a client that goes away
      // mid-upload ...": the replay's first post after the abort was admitted where the recorded one was
      // refused busy, and the test's release was held 2 s for the recorded busy decision).
      if ((r.status !== 200 && previous.get(r.op) === key) || r.label === 'busy') for (const k of mine) fences[k]!.polled = true;
      previous.set(r.op, key);
    }
  }
  return fences;
}

/**
 * A bounded hold over one kind of sync point noted at cycles `at` (ascending): the core may not run past
 * cycle c until the live side has served as many as were noted by c. One rule for every bounded kind:
 * held at most `boundMs` of wall time, then every point due is given up as lost (reported to `lost`).
 */
export class BoundedHold {
  served = 0;
  lostCount = 0;
  private heldSince: number | null = null;
  private due = 0;

  constructor(
    readonly kind: HoldKind,
    readonly at: readonly number[],
    private readonly wallMs: () => number,
    private readonly lost: (h: LostHold) => void,
    private readonly boundMs = HOLD_BOUND_MS,
  ) {}

  /** The index of the next point not yet served or given up. */
  get next(): number {
    return this.served + this.lostCount;
  }

  /** The live side served one more. */
  serve(): void {
    this.served++;
    this.heldSince = null;
  }

  /** True while the core must stay at cycle `c` for this kind. */
  holds(c: number, detail?: (k: number) => string): boolean {
    while (this.due < this.at.length && this.at[this.due]! <= c) this.due++;
    if (this.next >= this.due) return false;
    const now = this.wallMs();
    if (this.heldSince === null) this.heldSince = now;
    if (now - this.heldSince < this.boundMs) return true;
    for (let k = this.next; k < this.due; k++) this.lost({ kind: this.kind, cycle: c, ...(detail ? { detail: detail(k) } : {}) });
    this.lostCount = this.due - this.served;
    this.heldSince = null;
    return false;
  }
}
