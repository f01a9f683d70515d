// Keeping a held grant alive off the test's event loop (DESIGN.md rule 6). A test that holds a grant while
// it works (Cell.hold) is not about the lease: its renewals go from a worker thread of their own
// (harness/clients/keeper-worker.mjs), so a stall of the test's loop cannot make the grant expire. Each
// renewal comes back with when it was due, sent and answered; when one is refused `expired` (document 1
// part 4: the lease ran out), the figures decide whose doing that was:
//
//   the latest accepted renewal (or the acquire) was sent at s_j, so the service set its deadline no
//   earlier than s_j + lease_ms (renewals are pipelined, so "latest" is by send time among every accepted
//   one, answered before or after the refusal); the refused one was sent at s_k and answered within rtt_k, so the service
//   saw it no later than s_k + rtt_k. If (s_k - s_j) + rtt_k <= lease_ms, the service expired a grant that
//   was renewed in time: the target broke the rule (the test's failure stands, FAIL). Otherwise the harness
//   cannot prove the target wrong (its renewal left late or took too long to arrive): what failed after it
//   is ERROR HIL_ERR_HOST_TOO_SLOW with these figures.

import { Worker } from 'node:worker_threads';
import type { ControlClient } from './control.ts';
import { REQUEST_SCHEMA } from './control.ts';
import { lapses, type Lapse } from './lapses.ts';
import { QUIET_NICE, type ThreadNiceTaken } from '../priority.ts';

export interface RenewalRecord {
  /** Epoch ms (performance.timeOrigin + performance.now()). */
  due: number;
  sent: number;
  answered: number;
  status: number;
  label: string;
  error: string;
}

export const epochNow = (): number => performance.timeOrigin + performance.now();

/** Whose doing a refused renewal was, from the figures (the rule in the file's header). */
export interface GrantLoss {
  /** The target expired a grant that the harness provably renewed in time. */
  target: boolean;
  text: string;
}

/**
 * Judge a kept grant's renewals: undefined while none was refused `expired`. Renewals may have been in
 * flight together (keepGrant's inFlight), so the records are in the order they were answered, not sent;
 * every renewal accepted was admitted before the grant ended (an ended grant is never renewed again), so
 * the latest send among all accepted ones, whenever answered, bounds the deadline from below.
 */
export function judgeRenewals(startSent: number, leaseMs: number, records: readonly RenewalRecord[]): GrantLoss | undefined {
  const r = records.find((x) => x.status !== 200);
  if (!r) return undefined;
  if (r.label !== 'expired') return undefined; // stale or another refusal: the test ended the grant itself
  const lastAccepted = Math.max(startSent, ...records.filter((x) => x.status === 200).map((x) => x.sent));
  const gap = r.sent - lastAccepted;
  const rtt = r.answered - r.sent;
  const late = r.sent - r.due;
  const f = (x: number) => Math.round(x * 10) / 10;
  const when = gap >= 0 ? `${f(gap)} ms after the last accepted one` : `${f(-gap)} ms before the last accepted one (in flight together)`;
  const figures = `renewal sent ${when} (${f(Math.max(0, late))} ms after it was due), answered in ${f(rtt)} ms; lease ${leaseMs} ms`;
  if (gap + rtt <= leaseMs) return { target: true, text: `the target expired a grant renewed in time: ${figures} (${f(gap + rtt)} ms <= lease): ${r.error}` };
  return { target: false, text: `the harness's keeper lost the grant to the host's lateness: ${figures}; ${f(gap + rtt)} ms > lease, so the renewal may have reached the service after the deadline the previous one set (document 1 part 3, renew): ${r.error}` };
}

interface Kept {
  startSent: number;
  leaseMs: number;
  records: RenewalRecord[];
  /** Epoch ms when the keeper was stopped (undefined while it renews). */
  stoppedAt?: number;
  grant: KeptGrant;
  /** The test judges these renewals itself (KeepOptions.judgedByTest). */
  judgedByTest?: boolean;
}

/**
 * The keeper thread's nice value: the quiet files' (harness/priority.ts), whatever the worker that starts it
 * runs at, so that renewals leave when due beside busy files (harness/thread-nice.mjs raiseThreadNice).
 */
export const KEEPER_NICE = QUIET_NICE;

/** Where the keeper thread runs (harness/thread-nice.mjs raiseThreadNice): its thread id, the nice value it started at and the one it has, and why KEEPER_NICE was refused if it was. */
export type KeeperPriority = ThreadNiceTaken;

let priority: KeeperPriority | undefined;
const priorityWaiters: Array<(p: KeeperPriority) => void> = [];

/** The keeper thread's priority once it has come up (starting it if need be). */
export function keeperPriority(): Promise<KeeperPriority> {
  keeperWorker();
  if (priority) return Promise.resolve(priority);
  return new Promise((resolve) => priorityWaiters.push(resolve));
}

/** Renewals of one grant outstanding at once at most (the keeper thread opens as many connections). */
const MAX_IN_FLIGHT = 8;

let worker: Worker | undefined;
let warnedPriority = false;
const kept = new Map<number, Kept>();
let ids = 0;
const flushes = new Map<number, () => void>();

/**
 * The process's keeper thread, started on first use; `startKeeper` starts it ahead of the first held grant
 * (a thread takes a few hundred ms to come up on a loaded host, longer than a renewal period). Plain Node
 * options (no inherited loader hooks of the test runner): the worker file is JavaScript.
 */
export function startKeeper(): void {
  keeperWorker();
}

function keeperWorker(): Worker {
  if (worker) return worker;
  const w = new Worker(new URL('./keeper-worker.mjs', import.meta.url), { execArgv: [], workerData: { nice: KEEPER_NICE } });
  w.unref();
  priority = undefined;
  w.on('message', (m: (RenewalRecord & { id: number }) | { flushed: number } | { priority: KeeperPriority }) => {
    if ('priority' in m) {
      priority = m.priority;
      // Not fatal: the renewals are judged as ever, but beside busy neighbours they may leave late, and
      // then a test ends in HIL_ERR_HOST_TOO_SLOW where a keeper at the quiet priority would have kept time.
      if (m.priority.error && m.priority.from !== null && m.priority.from > KEEPER_NICE && !warnedPriority) {
        warnedPriority = true;
        process.stderr.write(`warning: the grant keeper's thread stays at nice ${m.priority.nice} (raising it to ${KEEPER_NICE} was refused: ${m.priority.error}); its renewals may leave late beside busy processes\n`);
      }
      for (const f of priorityWaiters.splice(0)) f(m.priority);
    } else if ('flushed' in m) {
      flushes.get(m.flushed)?.();
      flushes.delete(m.flushed);
    } else kept.get(m.id)?.records.push(m);
  });
  w.on('error', (e) => process.stderr.write(`warning: the grant keeper's thread failed: ${e.message}\n`));
  w.on('exit', () => {
    for (const f of priorityWaiters.splice(0)) f({ tid: null, from: null, nice: null, error: 'the keeper thread exited' });
    if (worker === w) worker = undefined;
  });
  worker = w;
  return w;
}

/** A grant kept alive by the keeper's thread; `stop` ends its renewals (its records stay readable). */
export interface KeptGrant {
  readonly session: string;
  stop(): void;
  /**
   * Wait until the renewals in flight (if any) have been answered and their records have arrived, at most
   * `ms`: a failure is judged on whole records, not on a renewal still on its way back from the thread.
   */
  settle(ms?: number): Promise<void>;
  loss(): GrantLoss | undefined;
  readonly records: readonly RenewalRecord[];
}

export interface KeepOptions {
  /**
   * The renewals are what the test checks (a renewal answered within its lease, document 1 part 3), judged
   * by the test against the harness's measured lateness (harness/lateness.ts hostBound): keptLoss leaves
   * this grant out, since its rule (the round trip counted against the harness) would turn every renewal
   * the target held past its lease into the host's doing.
   */
  judgedByTest?: boolean;
  /**
   * Renewals outstanding at once (default: as many as are due within one lease, at least 1). 1 sends each
   * renewal only after the previous one was answered (a test whose judgement counts the keeper's lateness
   * from the previous answer).
   */
  inFlight?: number;
}

/**
 * Renew `session` every `everyMs` from the keeper's thread, starting from `startSent` (epoch ms, just
 * before the acquire was sent), until stopped or a renewal is refused.
 */
export function keepGrant(client: ControlClient, s: { session: string; generation: bigint }, leaseMs: number, everyMs: number, startSent: number, o: KeepOptions = {}): KeptGrant {
  const id = ++ids;
  const k = { startSent, leaseMs, records: [], ...(o.judgedByTest ? { judgedByTest: true } : {}) } as unknown as Kept;
  // The records stay while the test may still read them; a minute after the stop they go.
  kept.set(id, k);
  const connection = client.https ? { https: client.https } : { socketPath: client.socketPath };
  keeperWorker().postMessage({ op: 'add', id, connection, schema: REQUEST_SCHEMA, session: s.session, generation: String(s.generation), start: epochNow(), every: everyMs, inFlight: o.inFlight ?? Math.min(MAX_IN_FLIGHT, Math.max(1, Math.ceil(leaseMs / everyMs))) });
  let stopped = false;
  k.grant = {
    stop() {
      if (stopped) return;
      stopped = true;
      k.stoppedAt = epochNow();
      worker?.postMessage({ op: 'remove', id });
      setTimeout(() => kept.delete(id), 60_000).unref();
    },
    settle(ms = 5_000) {
      const w = worker;
      if (!w) return Promise.resolve();
      const token = ++ids;
      return new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          flushes.delete(token);
          resolve();
        }, ms);
        flushes.set(token, () => {
          clearTimeout(t);
          resolve();
        });
        w.postMessage({ op: 'flush', id, token });
      });
    },
    loss: () => judgeKept(k.startSent, k.leaseMs, k.records, lapses, k.stoppedAt),
    session: s.session,
    records: k.records,
  };
  return k.grant;
}

/**
 * Judge a kept grant: from its own refused renewal (judgeRenewals) when it has one; otherwise from a
 * request of the test refused because a grant ended, answered while the keeper was kept:
 *
 *   every renewal accepted after it was sent at s_j set a deadline no earlier than s_j + lease_ms. A
 *   refusal answered at a no later than the newest such deadline contradicts the lease (or is about
 *   another grant): nothing is said, the failure stands. One answered later means the keeper got no
 *   renewal through for a whole lease (five renewal periods): its renewals left late or took too long,
 *   so the grant may have lapsed by the host's doing: HIL_ERR_HOST_TOO_SLOW with the figures.
 */
export function judgeKept(startSent: number, leaseMs: number, records: readonly RenewalRecord[], seen: readonly Lapse[], stoppedAt?: number): GrantLoss | undefined {
  if (records.some((r) => r.status !== 200)) return judgeRenewals(startSent, leaseMs, records);
  const f = (x: number) => Math.round(x * 10) / 10;
  for (const l of seen) {
    if (l.answered < startSent || (stoppedAt !== undefined && l.answered > stoppedAt + leaseMs)) continue;
    // The core's own fence (`no_grant: lease expired`, docs/profile.md "Native receipts") judged the request
    // when it executed it, against the deadline the renewals it had by then set: the service hands the core
    // its admissions in order, so a renewal sent after the request may reach the core behind it. Only the
    // renewals sent before the request count for such a refusal.
    const native = l.sent !== undefined && /^no_grant: lease expired/.test(l.error);
    const accepted = [startSent, ...records.filter((r) => r.answered <= l.answered && (!native || r.sent <= l.sent!)).map((r) => r.sent)];
    const last = Math.max(...accepted);
    if (last + leaseMs >= l.answered) continue;
    const after = records.find((r) => r.sent > last);
    const next = after ? `the keeper's next renewal was sent ${f(after.sent - last)} ms after it (${f(Math.max(0, after.sent - after.due))} ms after it was due) and answered in ${f(after.answered - after.sent)} ms` : `the keeper sent no renewal after it before the refusal`;
    return {
      target: false,
      text: `the harness's keeper got no renewal through for longer than the lease: a request was refused (${l.error}) ${f(l.answered - last)} ms after the last accepted renewal was sent, against a lease of ${leaseMs} ms; ${next}: the grant lapsed on a slow host (document 1 part 3, renew), not by the target's doing`,
    };
  }
  return undefined;
}

/**
 * The kept grants whose keeping overlapped [fromEpoch, now], settled (their renewals in flight answered),
 * judged: the host's loss first, since it makes what failed after it say nothing about the target. For a
 * test's failure (harness/fixture.ts) and a set-up hook's (hostJudged), whichever client kept the grant.
 */
export async function keptLoss(fromEpoch: number): Promise<GrantLoss | undefined> {
  // A keeper ends at its stop or at its first refusal (its thread renews no more): one that ended before
  // the test began is another test's.
  const ended = (k: Kept) => k.stoppedAt ?? k.records.find((r) => r.status !== 200)?.answered ?? Infinity;
  const ks = [...kept.values()].filter((k) => !k.judgedByTest && ended(k) >= fromEpoch);
  await Promise.all(ks.map((k) => k.grant.settle(3_000)));
  const losses = ks.map((k) => judgeKept(k.startSent, k.leaseMs, k.records, lapses, k.stoppedAt)).filter((l): l is GrantLoss => l !== undefined);
  return losses.find((l) => !l.target) ?? losses[0];
}
