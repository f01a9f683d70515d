// The grant authority (document 1 part 3 "Grant lifecycle", part 2 Fence/Grant, part 5 item 7).
// One controller at a time holds a grant; every fenced call is checked here. The fence refusal table is a
// profile decision where the documents give several candidate labels (docs/profile.md "Fence checks").

import { randomBytes } from 'node:crypto';
import { refuse, type Binding, type Request } from './envelope.ts';
import { U64_MAX } from '../primitives.ts';
import { LiveTiming, type DecisionLog } from './timing.ts';

export const DEFAULT_LEASE_MS = 500n;
export const MAX_REQUESTED_LEASE_MS = 10_000n;
export const RETRY_OUTCOMES = 256;
/** Retry caches of ended sessions kept for replay (stop, retirement, revocation). */
export const ENDED_CACHES = 8;

export type SessionEnd = 'released' | 'expired' | 'revoked' | 'superseded' | 'retired' | 'daemon_restarted';
/** A session as a fence decision saw it (Authority.sessionState). */
export type SessionState = SessionEnd | 'current' | 'stopping' | 'unknown';

export interface Reply {
  status: 200 | 409 | 413 | 404;
  body: Record<string, unknown>;
}

/** The request_id cache of one session (last 256 outcomes; joins in-flight requests). */
export class RetryCache {
  private entries = new Map<string, { key: string; reply: Promise<Reply> }>();
  lookup(id: string, key: string): Promise<Reply> | 'conflict' | undefined {
    const e = this.entries.get(id);
    if (!e) return undefined;
    return e.key === key ? e.reply : 'conflict';
  }
  remember(id: string, key: string, reply: Promise<Reply>): void {
    this.entries.delete(id);
    this.entries.set(id, { key, reply });
    while (this.entries.size > RETRY_OUTCOMES) this.entries.delete(this.entries.keys().next().value!);
  }
  get size(): number {
    return this.entries.size;
  }
}

export interface Grant {
  session: string;
  generation: bigint;
  controller: string;
  binding: Required<Binding>;
  leaseMs: bigint;
  deadlineNs: bigint;
  stopping: boolean;
  daemonIncarnation: string;
  cache: RetryCache;
  /** The acquire that created this grant, for idempotent acquire retries. */
  acquire?: { requestId: string; key: string; reply: Reply };
}

/** Operations whose reason lists name no_grant / wrong_generation / inhibited (document 1 part 4). */
const NATIVE_FENCE_OPS = new Set(['halt', 'io_arm', 'io_disarm', 'prepare_trajectory']);
/** Operations that accept an older nonzero generation of the same session. */
const OLDER_GENERATION_OK = new Set(['renew', 'stop']);
/** Operations that name `expired` among their fence reasons. */
const EXPIRED_OPS = new Set(['renew', 'release', 'stop']);

const SESSION_RE = /^[0-9a-f]{64}$/;

/**
 * Planted defects (HIL_STACK_DEFECT, a comma-separated list; README "Verdicts"): this stack breaking one
 * documented timing rule on purpose, so that a run on a loaded host can show the suites still FAIL a wrong
 * stack, and that HIL_ERR_HOST_TOO_SLOW only takes what the harness's own lateness explains. Never set
 * otherwise.
 *   deadline_extended  renew moves the deadline half a lease further than the lease (document 1 part 3:
 *                      "renew: owned, lease_ms preserved"; the deadline is the renewal plus the lease)
 *   lease_ignored      a grant lives 10 s whatever lease it was given (document 1 part 4: the lease runs out
 *                      at the deadline, grant_expired)
 *   drain_skipped      a stop revokes the grant at once, without waiting for the core's drain (document 1
 *                      part 4 stop: revocation follows the drain)
 *
 * Read when an authority is made (one per service), from the environment the stack was started with: a
 * stack host (sims/sessions.ts) sets each session's environment over its own for the session's life, so a
 * session given a defect has it and the next one, given none, does not.
 */
export function stackDefects(env: NodeJS.ProcessEnv = process.env): ReadonlySet<string> {
  return new Set((env.HIL_STACK_DEFECT ?? '').split(',').filter(Boolean));
}

/** What the authority asks of the service's timing (timing.ts). */
export type AuthorityTiming = Pick<DecisionLog, 'leaseOnClock' | 'took' | 'recorded'>;

export interface AuthorityHooks {
  now(): bigint;
  daemonIncarnation(): string;
  /** Publish a grant event (payload never contains the session token). */
  event(type: string, grant: Grant | null, final?: Partial<Record<string, unknown>>): void;
  /** Tell the core the application grant changed (`why`: the session ended, and how). */
  nativeGrant(g: Grant | null, why?: SessionEnd): void;
  /**
   * The service's decision log (timing.ts DecisionLog): whether a lease runs out by the service's
   * own clock, every fence decision in order. Omitted: the live ones, which record nothing.
   */
  timing?: AuthorityTiming;
  /** Planted defects (stackDefects); omitted: read from process.env when the authority is made. */
  defects?: ReadonlySet<string>;
}

export class Authority {
  current: Grant | null = null;
  private generation = 0n;
  private sessions = new Map<string, SessionEnd | 'current'>();
  /** Who acquired each session: 'local' or 'principal:<id>' (document 1 part 5 items 1 and 3). */
  private owners = new Map<string, string>();
  private expiryTimer?: NodeJS.Timeout;
  /** The grant and deadline the pending expiry timer was armed for. */
  private expiryFor?: { grant: Grant; deadlineNs: bigint };
  /** True from an admitted stop until the core reports the drain finished. */
  draining = false;
  private readonly timing: AuthorityTiming;
  private readonly defects: ReadonlySet<string>;

  constructor(
    readonly binding: Required<Binding>,
    readonly ceilingMs: bigint,
    private readonly hooks: AuthorityHooks,
    initialGeneration = 0n,
  ) {
    this.generation = initialGeneration;
    this.timing = hooks.timing ?? new LiveTiming().log;
    this.defects = hooks.defects ?? stackDefects();
  }

  get lastGeneration(): bigint {
    return this.generation;
  }

  grantData(g: Grant | null, ended = false): Record<string, unknown> {
    if (!g) {
      return { stopping: false, deadline_host_ns: 0n, session: '', generation: this.generation, controller: '', binding: this.binding, lease_ms: 0n };
    }
    return {
      stopping: g.stopping,
      deadline_host_ns: g.deadlineNs,
      session: ended ? '' : g.session,
      generation: g.generation,
      controller: g.controller,
      binding: g.binding,
      lease_ms: g.leaseMs,
    };
  }

  /** End the current grant if its lease ran out. Called lazily on every request and by a timer. */
  checkExpiry(): void {
    const g = this.current;
    if (!g || !this.timing.leaseOnClock) return;
    if (this.hooks.now() >= g.deadlineNs) this.end('expired', 'grant_expired');
    else this.armExpiry(); // a timer may fire a little before the monotonic deadline
  }

  private armExpiry(): void {
    const g = this.current;
    // A renewal only moves the deadline later: a timer pending for an earlier deadline of the same grant
    // stays, and checkExpiry re-arms it when it fires (one timer per lease, not one per renewal).
    const f = this.expiryFor;
    if (g && f && f.grant === g && f.deadlineNs <= g.deadlineNs && this.timing.leaseOnClock) return;
    this.disarmExpiry();
    if (!g || !this.timing.leaseOnClock) return;
    const ms = Number((g.deadlineNs - this.hooks.now()) / 1_000_000n) + 1;
    this.expiryFor = { grant: g, deadlineNs: g.deadlineNs };
    this.expiryTimer = setTimeout(() => {
      this.expiryFor = undefined;
      this.checkExpiry();
    }, Math.max(0, ms));
    this.expiryTimer.unref();
  }

  private disarmExpiry(): void {
    clearTimeout(this.expiryTimer);
    this.expiryFor = undefined;
  }

  /**
   * End the current grant: the session is recorded with why. Only release, lease expiry and a service
   * restart drop the retry cache (document 1 part 4 "Envelope rules"); after a stop, a reset retirement or
   * a revocation the cache stays, so a client whose reply was lost can still replay it.
   */
  end(why: SessionEnd, eventType: string | null): void {
    const g = this.current;
    if (!g) return;
    this.current = null;
    this.leaseRanOut = null;
    this.disarmExpiry();
    this.sessions.set(g.session, why);
    if (why !== 'released' && why !== 'expired') this.keepCache(g);
    if (eventType) this.hooks.event(eventType, g, { session: '' });
    this.hooks.nativeGrant(null, why);
    this.timing.took('grant_ended', why);
  }

  /**
   * The service's timing says the lease of generation `generation` ran out (timing.ts DecisionLog.onExpiry). `lateNs`
   * undefined: end it now (a recording on the stepped or fast clock: the expiry is tied to the test's
   * steps, not to the live clock). Else not before `lateNs` after its deadline on the service's clock (as
   * renewals moved it): a recorded service ends a lease at or after its deadline, and on a replay of a
   * host-clock recording the deadline is on the live clock while the cue comes where the recorded core was,
   * which can be a little earlier (the replayed core got the acquire sooner after the service took it than
   * the recorded one did); ending it then would publish grant_expired before deadline_host_ns (document 1
   * part 4: the lease runs out at the deadline). A cue given before the core reached the expiry carries how
   * long after its deadline the recorded service ended it, so the grant ends that long after, however far
   * behind the replayed core is. The replayed core waits at the recorded expiry until the service sends it
   * (docs/recording.md "Two clocks").
   */
  expireGeneration(generation: bigint, lateNs?: bigint): boolean {
    const g = this.current;
    if (g?.generation !== generation) return false;
    const expire = (): void => {
      if (this.current !== g) return;
      const early = lateNs === undefined ? 0n : g.deadlineNs + lateNs - this.hooks.now();
      // a timer may fire a little before the monotonic deadline: look again
      if (early > 0n) setTimeout(expire, Number((early + 999_999n) / 1_000_000n)).unref();
      else this.end('expired', 'grant_expired');
    };
    expire();
    return true;
  }

  acquire(req: Request, requestKey: string, owner = 'local'): Reply {
    this.checkExpiry();
    const controller = req.controller!;
    const bytes = Buffer.byteLength(controller, 'utf8');
    if (bytes < 1 || bytes > 63) throw refuse('invalid_request_envelope', 'controller must be 1..63 bytes');
    const requested = req.requested_lease_ms ?? 0n;
    if (requested < 0n || requested > MAX_REQUESTED_LEASE_MS) {
      throw refuse('invalid_requested_lease', `requested_lease_ms must be 1..${MAX_REQUESTED_LEASE_MS} (0 or omitted for the default)`);
    }
    const b = req.binding!;
    const mismatch = [
      b.pair_id !== this.binding.pair_id && 'pair_id',
      b.revision !== this.binding.revision && 'revision',
      b.configuration_sha256 !== this.binding.configuration_sha256 && 'configuration_sha256',
      b.machine_sha256 !== undefined && b.machine_sha256 !== this.binding.machine_sha256 && 'machine_sha256',
    ].filter(Boolean);
    if (mismatch.length) throw refuse('authority_binding_mismatch', `binding differs in ${mismatch.join(', ')}`);

    const g = this.current;
    if (g && req.request_id !== undefined && g.acquire?.requestId === req.request_id) {
      // A replay would hand the session token to another owner (docs/profile.md "Session ownership").
      if (this.owners.get(g.session) !== owner) throw refuse('session_principal_mismatch', 'the acquire with this request_id belongs to another principal');
      if (g.acquire.key === requestKey) return g.acquire.reply;
      throw refuse('request_id_conflict', 'request_id reused with a different acquire payload');
    }
    if (this.draining) throw refuse('control_session_stale', 'a stop is still draining');
    if (g) throw refuse('control_already_owned', `owned by ${JSON.stringify(g.controller)}`);
    if (this.generation >= U64_MAX) throw refuse('application_generation_exhausted');

    const lease = (requested === 0n ? DEFAULT_LEASE_MS : requested) < this.ceilingMs ? (requested === 0n ? DEFAULT_LEASE_MS : requested) : this.ceilingMs;
    const now = this.hooks.now();
    const grant: Grant = {
      session: randomBytes(32).toString('hex'),
      generation: ++this.generation,
      controller,
      binding: this.binding,
      leaseMs: lease,
      deadlineNs: now + (this.defects.has('lease_ignored') ? 10_000n : lease) * 1_000_000n,
      stopping: false,
      daemonIncarnation: this.hooks.daemonIncarnation(),
      cache: new RetryCache(),
    };
    this.current = grant;
    this.sessions.set(grant.session, 'current');
    this.owners.set(grant.session, owner);
    this.armExpiry();
    const reply: Reply = { status: 200, body: { operation: 'acquire', data: this.grantData(grant) } };
    if (req.request_id !== undefined) grant.acquire = { requestId: req.request_id, key: requestKey, reply };
    this.hooks.event('grant_acquired', grant);
    this.hooks.nativeGrant(grant);
    return reply;
  }


  /**
   * Check the fence of a fenced operation and return the current grant. Throws the refusal the profile's
   * fence table gives (docs/profile.md).
   */
  fence(op: string, session: string, generation: bigint, owner = 'local'): Grant {
    let g: Grant;
    try {
      g = this.check(op, session, generation, owner);
    } catch (e) {
      this.timing.took('fence', op, (e as { label?: string }).label ?? 'error', this.sessionState(session));
      throw e;
    }
    this.timing.took('fence', op, 'ok', this.sessionState(session));
    return g;
  }

  /**
   * What a fence decision saw of `session` (noted with it into a recording: docs/recording.md "The service
   * side"): 'current' or 'stopping' while it holds the grant, how it ended once it did, 'unknown' for a token
   * this service never issued. One refusal label stands for several of these (control_session_stale for a
   * revoked session and for a generation that differs), and a replay must know which to hold for.
   */
  sessionState(session: string): SessionState {
    const known = this.sessions.get(session);
    if (known === undefined) return 'unknown';
    if (known !== 'current') return known;
    return this.current?.session === session && this.current.stopping ? 'stopping' : 'current';
  }

  private check(op: string, session: string, generation: bigint, owner: string): Grant {
    this.checkExpiry();
    // The timing says this session's lease ran out at this very decision (the lazy check on a request; its
    // timer had not fired yet): take that expiry here (timing.ts Recorded 'expired_at_fence').
    if (this.current?.session === session && this.timing.recorded('expired_at_fence', op)) this.end('expired', 'grant_expired');
    if (!SESSION_RE.test(session)) throw refuse('control_session_stale', 'session is not a 64-character lowercase hex token');
    if (generation === 0n) throw refuse('control_session_stale', 'generation must be nonzero');
    const known = this.sessions.get(session);
    if (known === undefined) throw refuse('fence', 'session was never issued by this adapter');
    // Ownership before any state of the session is disclosed (docs/profile.md "Session ownership").
    if (this.owners.get(session) !== owner) throw refuse('session_principal_mismatch', 'the session belongs to another principal or transport');
    if (known === 'daemon_restarted') throw refuse('daemon_restarted', 'session belongs to a previous core incarnation');
    if (known !== 'current') {
      if (known === 'expired') {
        if (EXPIRED_OPS.has(op)) throw refuse('expired', 'the lease of this session expired');
        if (NATIVE_FENCE_OPS.has(op)) throw refuse('no_grant', 'the lease of this session expired');
      }
      if (NATIVE_FENCE_OPS.has(op) && !this.current) throw refuse('no_grant', `session ${known}`);
      throw refuse('control_session_stale', `session ${known}`);
    }
    const g = this.current!;
    if (OLDER_GENERATION_OK.has(op)) {
      if (generation > g.generation) throw refuse('control_session_stale', `generation ${generation} is newer than ${g.generation}`);
    } else if (generation !== g.generation) {
      if (NATIVE_FENCE_OPS.has(op)) throw refuse('wrong_generation', `generation ${generation} differs from ${g.generation}`);
      throw refuse('control_session_stale', `generation ${generation} differs from ${g.generation}`);
    }
    if (g.stopping && !OLDER_GENERATION_OK.has(op) && op !== 'release') {
      if (NATIVE_FENCE_OPS.has(op)) throw refuse('inhibited', 'a stop is in flight');
      throw refuse('control_session_stale', 'a stop is in flight');
    }
    return g;
  }

  /** Who acquired a session ('local' or 'principal:<id>'); a re-check of a fence already passed uses it. */
  ownerOf(session: string): string | undefined {
    return this.owners.get(session);
  }

  renew(g: Grant): Reply {
    g.deadlineNs = this.hooks.now() + (this.defects.has('lease_ignored') ? 10_000n : this.defects.has('deadline_extended') ? g.leaseMs + g.leaseMs / 2n : g.leaseMs) * 1_000_000n;
    this.armExpiry();
    this.hooks.event('grant_renewed', g);
    this.hooks.nativeGrant(g);
    return { status: 200, body: { operation: 'renew', data: this.grantData(g) } };
  }

  release(g: Grant): Reply {
    const data = this.grantData(g, true);
    data.stopping = false;
    this.end('released', 'grant_released');
    return { status: 200, body: { operation: 'release', data } };
  }

  /**
   * Admit a stop: the grant turns stopping with a new generation; revocation follows the drain. Stop must
   * always be able to inhibit (document 1 part 4 stop lists only the fence reasons and expired): at the last
   * generation 2^64-1 the counter cannot advance, so the stopping grant keeps 2^64-1 (docs/profile.md).
   */
  beginStop(g: Grant): { first: boolean } {
    if (g.stopping) return { first: false };
    g.stopping = true;
    if (this.generation < U64_MAX) g.generation = ++this.generation;
    this.draining = true;
    this.hooks.nativeGrant(g);
    if (this.defects.has('drain_skipped')) this.drained();
    return { first: true };
  }

  /**
   * The grant whose lease the core found run out while the service's timing put its end off to a later
   * point (timing.ts Recorded 'lease_notice' says 'expired': it ends at expireGeneration). Until then it is as good as ended:
   * nothing else ends it (holdsLease).
   */
  private leaseRanOut: Grant | null = null;

  /**
   * Whether `g` is the current grant and its lease has not run out at the core: the service's own stop after
   * a failure (service.ts stopAfterFailure) is for such a grant only.
   */
  holdsLease(g: Grant): boolean {
    return this.current === g && this.leaseRanOut !== g;
  }

  /** The core finished draining the stop: revoke the stopping grant. */
  drained(): void {
    this.draining = false;
    if (this.current?.stopping) this.end('revoked', 'grant_revoked');
  }

  /**
   * The core stopped the cell because the lease deadline passed before a renewal reached it (the core
   * enforces the lease on its own, so a stalled service cannot extend it). The grant of that generation
   * expires here too; a newer grant (a renewal that crossed the notice) is left alone.
   */
  nativeLeaseExpired(generation: bigint): void {
    // A paced replay takes the recorded service's decision (its clock is not the recorded one: a core run
    // flat out brings the notice long before the live deadline), in the order the notices come.
    const recorded = this.timing.recorded('lease_notice');
    const g = this.current;
    if (!g || g.generation !== generation) return;
    if (recorded === 'expired') {
      // Ended by the expiry the replay cues at its recorded place (expireGeneration, not before the deadline);
      // meanwhile it is as good as ended (suites/machine/home.test.ts "lease expiry during Home cancels it":
      // the failed Home would otherwise stop the grant the recorded service had let expire).
      this.leaseRanOut = g;
      return;
    }
    if (recorded === 'none') return;
    if (recorded === undefined && this.hooks.now() >= g.deadlineNs) this.end('expired', 'grant_expired');
    else this.hooks.nativeGrant(g); // the renewal crossed the notice: tell the core again
  }

  /** Retry caches of sessions that ended without dropping them (newest last, a few kept). */
  private endedCaches = new Map<string, RetryCache>();

  private keepCache(g: Grant): void {
    this.endedCaches.delete(g.session);
    this.endedCaches.set(g.session, g.cache);
    while (this.endedCaches.size > ENDED_CACHES) this.endedCaches.delete(this.endedCaches.keys().next().value!);
  }

  /**
   * A retried request of a session that ended with its cache kept: the remembered reply for the same id and
   * payload, 'conflict' for a changed payload, undefined when nothing is remembered.
   */
  replayEnded(session: string, id: string, key: string): Promise<Reply> | 'conflict' | undefined {
    return this.endedCaches.get(session)?.lookup(id, key);
  }

  /** Native or transport failure (the core went away): revoke authority. */
  coreLost(): void {
    this.draining = false;
    for (const [s, v] of this.sessions) if (v === 'current') this.sessions.set(s, 'daemon_restarted');
    const g = this.current;
    if (g) {
      this.current = null;
      this.disarmExpiry();
      this.keepCache(g);
      this.hooks.event('grant_revoked', g, { session: '' });
      this.timing.took('grant_ended', 'daemon_restarted');
    }
  }

  /** reset_fault retires the session whatever the core answers (document 1 part 3). */
  retire(g: Grant): void {
    if (this.current === g) this.end('retired', 'grant_revoked');
  }

  close(): void {
    this.disarmExpiry();
  }
}
