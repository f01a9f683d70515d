// A controller's view of the cell: acquire a grant, send fenced commands, and always leave the cell
// stopped and released. On any unknown outcome it stops the grant and reconciles from status, as
// document 1 part 4 asks of every client.

import { HarnessError } from '../errors.ts';
import { checkGrant, type CheckedReply, type Grant } from '../oracle/reply.ts';
import { REQUEST_SCHEMA, type BindingInput, type ControlClient } from './control.ts';
import { epochNow, keepGrant, type GrantLoss, type KeptGrant } from './keeper.ts';
import { lateness } from '../lateness.ts';
import { currentTest } from '../targets/pertest.ts';
import { readStatus, waitStatus, type StatusView } from './status.ts';

/**
 * How the cell's time moves on while the harness waits on it: a stepped cell is stepped, a real-time one
 * is waited for (harness/clients/stepped.ts driverOf gives one for a target). Without one, real time.
 */
export interface Pace {
  /** The reply to `p`: stepped `chunk` cycles at a time until it comes (stepped.ts settle), or awaited. */
  answer<T>(p: Promise<T>, chunk?: number): Promise<T>;
  /**
   * Status once `pred` holds, or the last one read after `ms` milliseconds: of cell time on the stepped
   * clock (stepped 10 to 100 ms of it at a time), of wall time otherwise (waitStatus, with the host's stalls
   * added back). For conditions that hold once reached: a stepped cell may pass a passing state unseen.
   */
  status(pred: (s: StatusView) => boolean, ms: number): Promise<StatusView>;
  /**
   * The reply to `p`, the cell's time moving on meanwhile as a real-time cell's does: on the stepped clock
   * stepped as `status` steps it, with a moment's look for the reply after each step, until the reply comes
   * or `ms` of cell time passed, then awaited; awaited otherwise. For a request the service answers from an
   * observation of the cell newer than the request rather than from a core receipt (document 1 part 4
   * reset_fault, recovery_status, restore_anchor: within 1 s), which `answer` does not step for (the core
   * owes nothing meanwhile), and for a long one (a Home, its receipt long before its reply), where `answer`
   * waits for the receipt's reply before stepping on. How many steps it takes follows the host's timing:
   * not for a stepped recording replayed step by step (docs/recording.md "The stepped clock").
   */
  answerWithin<T>(p: Promise<T>, ms: number): Promise<T>;
}

/** A real-time cell's pace: replies are awaited, status is polled (waitStatus). */
const realTime = (client: ControlClient): Pace => ({ answer: (p) => p, answerWithin: (p) => p, status: (pred, ms) => waitStatus(client, pred, ms) });

/** How long a cleanup waits for a stop's drain to end, of the cell's time (ms): the harness's patience. */
export const DRAIN_MS = 5_000;

/**
 * A stop still draining, as status shows it (docs/profile.md "ProcessStatus": `grant.stopping` while the
 * stopping grant is held, `grant.draining` after it was released too); a target whose status has neither
 * field shows none.
 */
export const draining = (s: StatusView): boolean => {
  const g = (s as unknown as { grant?: { stopping?: unknown; draining?: unknown } }).grant;
  return g?.stopping === true || g?.draining === true;
};

/** A grant's last known deadline on the host monotonic clock, and when (performance.now()) the harness learnt it. */
interface KnownDeadline {
  deadline: bigint;
  at: number;
}

export interface Session {
  session: string;
  generation: bigint;
  grant: Grant;
}

export class Cell {
  private held: Session[] = [];
  private keepers: KeptGrant[] = [];
  private finished: KeptGrant[] = [];
  private counter = 0;
  /** Sessions this cell acquired and does not keep: their deadlines, for judging an expiry (judgeExpiry). */
  private deadlines = new Map<string, KnownDeadline>();
  /** This cell's exchanges (performance.now() sent, ms taken), for judging an expiry. */
  private exchanges: { at: number; ms: number }[] = [];
  private losses: GrantLoss[] = [];

  constructor(
    readonly client: ControlClient,
    readonly binding: BindingInput,
    /**
     * The target's host monotonic clock is this process's (the reference stack on this host: sim, replay,
     * rig): a grant's deadline_host_ns can then be compared with when the harness sent a request.
     */
    readonly sameClock = false,
    /** How the harness moves the cell's time on while it waits at cleanup (a stepped cell must be stepped). */
    private readonly pace?: Pace,
  ) {}

  /** A stop went to the cell from this Cell (a test's or a cleanup's): its drain may outlast the test. */
  private stopSent = false;

  /** acquire with the configured binding unless overridden; returns the checked reply. */
  acquire(fields: Record<string, unknown> = {}): Promise<CheckedReply> {
    const at = performance.now();
    return this.client
      .control({ schema: REQUEST_SCHEMA, operation: 'acquire', controller: `hil-${process.pid}-${++this.counter}`, binding: this.binding, ...fields }, 'acquire')
      .then((r) => {
        this.exchanges.push({ at, ms: performance.now() - at });
        if (r.status === 200) {
          const g = checkGrant(r.reply.data);
          this.held.push({ session: g.session, generation: g.generation, grant: g });
          this.deadlines.set(g.session, { deadline: g.deadline_host_ns, at: performance.now() });
        }
        return r;
      });
  }

  /** acquire and insist on success. */
  async grant(fields: Record<string, unknown> = {}): Promise<Session> {
    const r = await this.acquire(fields);
    if (r.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `acquire refused: ${r.status} ${r.reply.error}`, { detail: { status: r.status, label: r.label } });
    const g = checkGrant(r.reply.data);
    return this.held.find((s) => s.session === g.session)!;
  }

  /**
   * acquire at the cell's lease ceiling (unless fields ask otherwise) and keep the lease alive with renewals every fifth of lease_ms, as a controller does while it
   * works; the renewals go from the grant keeper's own thread (harness/clients/keeper.ts), so a busy test
   * loop cannot let the lease run out, and stop at cleanup or when a renewal is refused.
   */
  async hold(fields: Record<string, unknown> = {}): Promise<Session> {
    const startSent = epochNow();
    // The longest lease the cell allows unless the test asks for another (document 1 part 2,
    // requested_lease_ms: 1..10000, the result min(request, cell ceiling)): a held grant is not what the
    // test checks, so host stalls shorter than the ceiling cannot reach it.
    const s = await this.grant({ requested_lease_ms: 10_000n, ...fields });
    // A fifth of the lease: a renewal may be late by most of the lease on a loaded machine and still arrive.
    const every = Math.max(20, Math.floor(s.grant.lease_ms / 5));
    this.deadlines.delete(s.session); // the keeper's renewals move it; the keeper judges a loss itself
    this.keepers.push(keepGrant(this.client, s, s.grant.lease_ms, every, startSent));
    return s;
  }

  /**
   * Stop renewing a held session for a while (a test that needs no renewal to reach the target meanwhile);
   * the keeper's records stay for judging a loss. resumeKeeping starts renewing it again.
   */
  pauseKeeping(s: Pick<Session, 'session'>): void {
    for (const k of this.keepers.filter((x) => x.session === s.session)) {
      k.stop();
      this.finished.push(k);
    }
    this.keepers = this.keepers.filter((x) => x.session !== s.session);
  }

  /** Renew a held session again from the keeper's thread, its lease counted from `startSent` (epoch ms: the last renewal's send). */
  resumeKeeping(s: Session, startSent: number): void {
    this.keepers.push(keepGrant(this.client, s, s.grant.lease_ms, Math.max(20, Math.floor(s.grant.lease_ms / 5)), startSent));
  }

  /**
   * A held grant the keeper lost (a renewal refused `expired`), with whose doing it was (harness/clients/keeper.ts):
   * the host's first, since it makes what failed after it say nothing about the target.
   */
  grantLoss(): GrantLoss | undefined {
    const losses = [...[...this.finished, ...this.keepers].map((k) => k.loss()).filter((l): l is GrantLoss => l !== undefined), ...this.losses];
    return losses.find((l) => !l.target) ?? losses[0];
  }

  /**
   * A try the test may throw away (it takes the exchange again on a fresh grant when the host made this one
   * say nothing): losses noted from now on are forgotten by `drop()`, so an abandoned try's lapsed grant
   * does not make the try that counts ERROR.
   */
  attempt(): { drop(): void } {
    const n = this.losses.length;
    return {
      drop: () => {
        this.losses.splice(n);
        // A recorded test that took an exchange again: its recording is of the host's trouble (recorder.ts precheck).
        currentTest()?.noteDroppedTry();
      },
    };
  }

  /** A fenced operation with the session's fence (overridable through fields). */
  async fenced(op: string, s: Pick<Session, 'session' | 'generation'>, fields: Record<string, unknown> = {}): Promise<CheckedReply> {
    const at = performance.now();
    const sent = process.hrtime.bigint();
    if (op === 'stop') this.stopSent = true;
    const r = await this.client.control({ schema: REQUEST_SCHEMA, operation: op, session: s.session, generation: s.generation, ...fields }, op);
    const answered = process.hrtime.bigint();
    this.exchanges.push({ at, ms: performance.now() - at });
    if (this.exchanges.length > 4096) this.exchanges.splice(0, 2048);
    const known = this.deadlines.get(s.session);
    if (known && r.status === 200 && op === 'renew') {
      const g = checkGrant(r.reply.data);
      this.deadlines.set(s.session, { deadline: g.deadline_host_ns, at: performance.now() });
    } else if (known && this.sameClock && (r.label === 'expired' || (r.label === 'control_session_stale' && /expired/.test(r.reply.error ?? '')))) {
      const loss = this.judgeExpiry(known, sent, answered, at, r.reply.error ?? '');
      if (loss) this.losses.push(loss);
    }
    return r;
  }

  /**
   * A request refused because the grant's lease ran out (document 1 part 4: expired; a fenced call on an
   * expired session: control_session_stale), judged from the clock the target shares with the harness:
   *   answered before the deadline: the target ended the lease early (its doing, the failure stands);
   *   sent before the deadline, answered after it: in flight at the deadline, the harness cannot tell: the host's;
   *   sent after the deadline: the host's when the harness's event-loop stalls (all of them, summed) and
   *   its waits for the target's answers since it learnt the deadline explain the lateness; otherwise the test let the lease
   *   run out (a wait it chose), and nothing is said.
   */
  private judgeExpiry(known: KnownDeadline, sent: bigint, answered: bigint, at: number, error: string): GrantLoss | undefined {
    const ms = (ns: bigint) => Math.round(Number(ns) / 1e5) / 10;
    if (answered <= known.deadline) return { target: true, text: `the target ended a lease before its deadline: answered ${ms(known.deadline - answered)} ms before deadline_host_ns: ${error}` };
    if (sent <= known.deadline) return { target: false, text: `a request sent ${ms(known.deadline - sent)} ms before the grant's deadline was answered ${ms(answered - known.deadline)} ms after it (round trip ${ms(answered - sent)} ms): the host was too slow to tell whether the target ended the lease in time: ${error}` };
    const late = Number(sent - known.deadline) / 1e6;
    const stalled = lateness.window(known.at, at).total_ms;
    const waited = this.exchanges.filter((x) => x.at >= known.at && x.at < at).reduce((a, x) => a + x.ms, 0);
    if (stalled + waited < late) return undefined;
    return { target: false, text: `the harness sent a request ${Math.round(late)} ms after the grant's deadline; since it learnt that deadline its event loop stalled ${stalled} ms and it waited ${Math.round(waited)} ms for the target's answers: the lease ran out on a slow host (document 1 part 4), not by the target's doing: ${error}` };
  }

  /**
   * Release or stop everything this cell acquired, and let a stop's drain end, so the next test can acquire
   * (document 1 part 3: an acquire needs "no Stop draining"; on a cell of a long cycle a drain
   * outlasts the way to the next test). After a failed test (`resetFaults`), also clear faults it left
   * latched: a test that failed midway skipped its own reset, and every later test on the cell would meet
   * `not_ready` for it. Never throws (cleanup must not mask the test result).
   */
  async cleanup(o: { resetFaults?: boolean } = {}): Promise<void> {
    for (const k of this.keepers.splice(0)) {
      k.stop();
      this.finished.push(k);
    }
    for (const s of this.held.splice(0)) await leaveSession(this.client, s, () => (this.stopSent = true));
    try {
      if (this.stopSent) await this.drained();
      if (o.resetFaults) await this.resetLatched();
    } catch {
      // An unreadable status or a refused request: the next test meets the cell as it is and says so.
    }
    this.stopSent = false;
  }

  private async drained(): Promise<StatusView> {
    return (this.pace ?? realTime(this.client)).status((s) => !draining(s), DRAIN_MS);
  }

  /**
   * Clear latched faults (status: an axis `fault`, or `core.safety_fault_mask`): a stop inhibits the cell
   * (reset_fault needs an inhibited idle machine, document 1 part 4), then a new grant submits reset_fault
   * for every axis, which retires that session. A fault whose condition persists stays (fault_persists)
   * for the next test to meet: a condition the test injected is the fixture's to clear first.
   */
  private async resetLatched(): Promise<void> {
    const pace = this.pace ?? realTime(this.client);
    const st = await readStatus(this.client);
    if (!st.axes.some((a) => a.fault) && !(st.core && BigInt(st.core.safety_fault_mask) !== 0n)) return;
    const grant = () => this.grant({ requested_lease_ms: 2_000n }).catch(() => undefined);
    const a = await grant();
    if (!a) return;
    const stop = await pace.answer(this.fenced('stop', a), 5);
    this.held = this.held.filter((x) => x !== a);
    if (stop.status !== 200) await leaveSession(this.client, a);
    await this.drained();
    const b = await grant();
    if (!b) return;
    // Answered from an observation newer than the request (document 1 part 4 reset_fault).
    await pace.answerWithin(this.fenced('reset_fault', b, { axis_mask: 0 }), 1_000);
    // A submitted reset retired the session; one refused before it was submitted is released.
    for (const s of this.held.splice(0)) await leaveSession(this.client, s);
  }
}

/**
 * Release a session's grant, or stop it and release the generation the stop answered (a renewal or a
 * stop may have moved the generation on); true when the grant is known to have ended. Never throws: an
 * unknown outcome leaves only reconciliation at the next acquire, or the lease running out.
 */
export async function leaveSession(client: ControlClient, s: Pick<Session, 'session' | 'generation'>, onStop?: () => void): Promise<boolean> {
  const fenced = (op: string, generation: bigint) => client.control({ schema: REQUEST_SCHEMA, operation: op, session: s.session, generation }, op);
  try {
    const r = await fenced('release', s.generation);
    // expired: the lease ran out, so the grant has ended (document 1 part 4, release and stop reasons).
    if (r.status === 200 || r.label === 'expired') return true;
    onStop?.();
    const st = await fenced('stop', s.generation);
    if (st.label === 'expired') return true;
    if (st.status !== 200) return false;
    const g = checkGrant(st.reply.data);
    return (await fenced('release', g.generation)).status === 200;
  } catch {
    return false;
  }
}
