// After each command of a model run: the held stop's reply, status against the model's state (narrowing
// where timing allowed several outcomes), then the event log against the events the model owes; and the
// keep-alive renewals a controller sends meanwhile.

import type { CellEvent } from '../clients/events.ts';
import { fail, hit, type RunContext } from './context.ts';
import { drained, endGrant, findLast, leaseAt, matches, type EventExp } from './model.ts';
import type { StatusObs } from './system.ts';

/** Event types whose every occurrence the model must have predicted; the others (machine events) are observed. */
const STRICT = new Set(['grant_acquired', 'grant_renewed', 'grant_released', 'grant_expired', 'grant_revoked', 'handle_transition', 'execution_started', 'execution_completed', 'execution_aborted', 'execution_faulted', 'telemetry_mark', 'daemon_incarnation_changed']);
const EVENT_TTL = 6;

/** Keep-alive renewals that came: the lease window moves on, and each owes a grant_renewed event. */
export function applyRenewals(x: RunContext): void {
  const { m, real } = x;
  for (const r of real.renewals.splice(0)) {
    const g = m.grant;
    if (!g || g.session !== r.session) continue;
    g.lease = { lo: Math.max(g.lease.lo, r.sendMs + g.leaseMs), hi: Math.max(g.lease.hi, r.recvMs + g.leaseMs) };
    m.owed.push({ type: 'grant_renewed', where: { generation: r.generation }, why: 'a keep-alive renewal', may: true, ttl: 8 });
    hit(x, 'keep-alive renewal');
  }
}

/** Keep the model's grant alive the way a controller does, unless its lease is one a run lets run out. */
function keepAlive(x: RunContext): void {
  const g = x.m.grant;
  x.real.keepAlive(g && g.leaseMs >= 400 ? { session: g.session, generation: g.generation, leaseMs: g.leaseMs } : undefined);
}

/** The held stop answered: check it against the outcome admitted, then the grant is revoked. */
export async function stopCollected(x: RunContext): Promise<void> {
  const r = x.real.takeStopReply();
  if (!r) return;
  const o = x.pendingStop;
  x.pendingStop = undefined;
  if (o) {
    const miss = matches(o, r);
    if (miss) fail(x, `the held stop answered ${r.status} ${r.label ?? ''}: ${miss}`);
  }
  x.trace.push(`   (the held stop answered ${r.status})`);
}

const payloadOf = (e: CellEvent): Record<string, unknown> => {
  for (const k of ['grant', 'handle', 'execution', 'mark', 'incarnation', 'jog', 'enable', 'fault', 'epoch']) {
    const v = e[k];
    if (v && typeof v === 'object') return v as Record<string, unknown>;
  }
  return {};
};

function eventMatches(e: CellEvent, x: EventExp): boolean {
  if (e.type !== x.type && !x.alt?.includes(e.type)) return false;
  const p = payloadOf(e);
  const w = x.where ?? {};
  if (w.generation !== undefined && p.generation !== w.generation) return false;
  if (w.stopping !== undefined && p.stopping !== w.stopping) return false;
  if (w.handle !== undefined && p.handle !== w.handle) return false;
  if (w.from !== undefined && p.from !== w.from) return false;
  if (w.to !== undefined && p.to !== w.to) return false;
  if (w.label !== undefined && p.label !== w.label) return false;
  if (w.jogGeneration !== undefined && p.jog_generation !== w.jogGeneration) return false;
  return true;
}

/**
 * After each command: the held stop's reply, status against the model's state (narrowing where timing
 * allowed several), then the event log against the events the model owes.
 */
export async function reconcile(x: RunContext, cyclesRan: boolean): Promise<void> {
  const { c, m, real } = x;
  applyRenewals(x);
  await stopCollected(x);
  // Events first, then status: a lease that runs out in between (the service's lease timer is host time)
  // shows in status, and its event is owed to the next read.
  const evs = await real.events();
  const st = await real.status();
  if (!st.grant.draining) m.draining = false;
  // A grant end observed now (expiry, drain) reaches the machine on the core's next cycle: its effects are checked after the next command.
  const ended = checkGrant(x, st, evs);
  checkHandles(x, st, ended);
  if (cyclesRan && !ended && !m.grant?.stopping && st.core) checkMachine(x, st);
  if (st.core) {
    m.homeMask = Number(st.core.home_valid_mask);
    // Latched fault bits are observed (a fault the run injected, or one the stack raised): the gate uses them.
    m.faultLatched = st.core.execution_fault_reasons !== 0n;
    // Fault bit 10 io_marker_late (PROFILE fault bit table, value 1024) is the model's to predict: set by a
    // Start whose first cycle reached an intent late, cleared by reset_fault and a core restart.
    const lateBit = (st.core.execution_fault_reasons & 1024n) !== 0n;
    if (lateBit !== !!m.markerLate) fail(x, `status core.execution_fault_reasons ${st.core.execution_fault_reasons}: bit 10 io_marker_late ${lateBit ? 'latched' : 'clear'}, the model ${m.markerLate ? 'latched' : 'clear'}`);
  }
  for (const e of evs) {
    if (e.type === 'grant_revoked' || e.type === 'grant_expired' || e.type === 'grant_released') {
      m.endsSeen = [...(m.endsSeen ?? []).slice(-16), String(payloadOf(e).generation)];
      const ended = findLast(m.ended, (y) => y.generation === payloadOf(e).generation && !!y.maybeExpired);
      if (ended) {
        ended.maybeExpired = undefined;
        if (e.type === 'grant_expired') {
          ended.how = 'expired';
          ended.cache = undefined; // lease expiry drops the retry cache (part 4 Envelope rules)
        }
      }
    }
    // The reset's own grant (controller model-reset) is not the run's: its events may come late.
    if (payloadOf(e).controller === 'model-reset') continue;
    // The jog's input expired (host time, seen by a core cycle): the jog generation is closed.
    if (e.type === 'jog_expired' && m.jog && payloadOf(e).jog_generation === m.jog.n) m.jog = undefined;
    // An event settles a must-event before a may-event of the same shape (a keep-alive renewal's may-entry
    // must not take the event an explicit renew owes).
    let i = m.owed.findIndex((o) => !o.may && eventMatches(e, o));
    if (i < 0) i = m.owed.findIndex((o) => eventMatches(e, o));
    if (i >= 0) {
      m.owed.splice(i, 1);
      continue;
    }
    // A keep-alive renewal whose event came before its reply (the service logs it first).
    if (e.type === 'grant_renewed' && (payloadOf(e).generation === m.grant?.generation || m.ended.some((x) => x.generation === payloadOf(e).generation))) continue;
    // An expiry event for a grant the model already ended by expiry (its owed entry may have been dropped),
    // or for the current grant whose lease may have run out (status will say so at the next read).
    if (e.type === 'grant_expired' && m.ended.some((x) => x.how === 'expired' && x.generation === payloadOf(e).generation)) continue;
    if (e.type === 'grant_expired' && m.grant && payloadOf(e).generation === m.grant.generation && leaseAt(m.grant, x.lastSendMs, performance.now()) !== 'alive') continue;
    if (STRICT.has(e.type)) {
      const p = JSON.stringify(payloadOf(e), (_k, v) => (typeof v === 'bigint' ? Number(v) : v));
      fail(x, `event ${e.type} ${p} (sequence ${e.sequence}) was not predicted; the model owed: ${m.owed.map((o) => `${o.type}${o.may ? '?' : ''}`).join(', ') || 'nothing'}`);
    }
  }
  for (const o of m.owed) o.ttl = (o.ttl ?? EVENT_TTL) - 1;
  const late = m.owed.find((o) => !o.may && o.ttl! <= 0);
  if (late) fail(x, `event ${late.type} ${JSON.stringify(late.where ?? {}, (_k, v) => (typeof v === 'bigint' ? Number(v) : v))} never came (${late.why})`);
  m.owed = m.owed.filter((o) => o.ttl! > 0);
  keepAlive(x);
  void c;
}

function checkGrant(x: RunContext, st: StatusObs, evs: readonly CellEvent[]): boolean {
  const { c, m } = x;
  const g = m.grant;
  // A lease that ran out while a stop drained ends the grant by expiry, not revocation: the event says which.
  const expiredNow = g && evs.some((e) => e.type === 'grant_expired' && payloadOf(e).generation === g.generation);
  if (g?.stopping && !st.grant.active && !expiredNow) {
    // The drain finished: revoked (part 3 "stopping, then revoked"); a lease that ran out during the drain
    // may have ended it first (grant_expired), possibly told in an earlier read of the log.
    const gen = g.generation;
    const lapsedMaybe = leaseAt(g, x.lastSendMs, performance.now()) !== 'alive';
    drained(c, m);
    // The lease may have run out during the drain: the session then ended by expiry (its fence answers
    // expired), which the grant_expired event, read after the next command, tells.
    if (lapsedMaybe) {
      const e = findLast(m.ended, (y) => y.generation === gen);
      if (e) e.maybeExpired = true;
    }
    if (!m.endsSeen?.includes(String(gen))) m.owed.push({ type: 'grant_revoked', alt: ['grant_expired'], where: { generation: gen }, why: 'the stop drained' });
    return true;
  }
  if (g && !st.grant.active) {
    const lease = leaseAt(g, x.lastSendMs, performance.now());
    if (lease === 'alive') fail(x, `status shows no active grant; the model holds generation ${g.generation} with its lease surely running`);
    // The lease ran out and the target noticed: narrow to expiry.
    hit(x, 'transition:grant:owned->no_grant:lease_expiry');
    const evs: EventExp[] = [];
    endGrant(c, m, 'expired', evs, 'lease expiry (observed)');
    m.owed.push({ type: 'grant_expired', where: { generation: g.generation }, why: 'the lease ran out (status shows no grant)' }, ...evs);
    return true;
  }
  if (!g && st.grant.active) fail(x, `status shows an active grant (generation ${st.grant.generation}); the model holds none`);
  if (g && st.grant.active) {
    if (st.grant.generation !== g.generation) fail(x, `status grant generation ${st.grant.generation}, model ${g.generation}`);
    if (st.grant.stopping !== g.stopping) fail(x, `status grant stopping ${st.grant.stopping}, model ${g.stopping}`);
  }
  return false;
}

function checkHandles(x: RunContext, st: StatusObs, grantJustEnded = false): void {
  const { c, m, real } = x;
  const seen = new Map((st.execution?.handles ?? []).map((h) => [String(h.handle), h.state]));
  for (const h of m.handles.values()) {
    if (h.core !== m.core) continue;
    const s = seen.get(String(h.n));
    if (s === undefined) continue; // out of the status window (PROFILE: the last 64 are kept)
    if (h.state === 'started') {
      const ran = real.cycles - (h.startCycle ?? real.cycles);
      const plan = h.cycles ?? c.planCycles;
      // Plan time runs from the cycle the core took the Start, which lies within the reply's last chunk.
      const early = BigInt(plan) - 25n;
      const late = BigInt(plan) + (real.stepped ? 40n : 400n);
      if (s === 'consumed') {
        if (ran < early) fail(x, `handle ${h.n} consumed after ${ran} cycles of a ${plan}-cycle plan`);
        h.state = 'consumed';
        hit(x, `transition:handle:started->consumed:completion${h.kind ? ' (program)' : ''}`);
        // PROFILE "Trajectories" Output intents: completion leaves the outputs as the last intent set them
        // (an intent acts while io is armed; the first point's too).
        if (h.ioOn || h.ioOff) {
          const applied = h.ioOn && (!h.ioAt0 || c.rules.firstPointIntentApplied);
          const bit = c.plainOutput >= 0 ? 1 << c.plainOutput : 0;
          m.outputs = !m.ioArmed ? 0 : applied ? bit : 0;
          if (h.ioOn) hit(x, `rule:output_intent.applied${h.ioAt0 ? ' (first point)' : ''}`);
        }
        m.owed.push({ type: 'handle_transition', where: { handle: h.n, from: 'started', to: 'consumed' }, why: `${h.n} completed` }, { type: 'execution_completed', where: { handle: h.n }, why: `${h.n} completed` });
        continue;
      }
      if (s === 'started') {
        if (ran > late) fail(x, `handle ${h.n} still started after ${ran} cycles of a ${plan}-cycle plan`);
        continue;
      }
    }
    // A started handle retired by a Stop may still show started until the drain reaches it; one retired
    // by a grant end this very status read showed (a short lease ran out) until the core's next cycle
    // takes the end in (the machine effects are checked after the next command for the same reason).
    if (h.state === 'retired' && s === 'started' && (m.grant?.stopping || grantJustEnded)) continue;
    if (s !== h.state) fail(x, `status shows handle ${h.n} ${s}, the model ${h.state}`);
  }
}

/** core.io_output_word against the model's outputs; unknown ones are read (when no plan with intents runs). */
function checkOutputs(x: RunContext, st: StatusObs): void {
  const { m } = x;
  const word = Number(st.core?.io_output_word ?? 0n);
  if (m.outputs === 'unknown') {
    if (![...m.handles.values()].some((h) => h.state === 'started' && h.core === m.core && (h.ioOn || h.ioOff))) m.outputs = word;
    return;
  }
  if (word !== m.outputs) fail(x, `status core.io_output_word ${word}, model ${m.outputs}`);
}

function checkMachine(x: RunContext, st: StatusObs): void {
  const { m } = x;
  const core = st.core!;
  if (m.adopt) {
    m.armed = core.armed === 1n;
    m.enableMask = Number(core.axis_enable_mask);
    m.ioArmed = core.io_armed === 1n;
    m.adopt = false;
    checkOutputs(x, st);
    return;
  }
  const armed = core.armed === 1n;
  if (armed !== m.armed) fail(x, `status core.armed ${core.armed}, model ${m.armed ? 1 : 0}`);
  checkOutputs(x, st);
  if (Number(core.axis_enable_mask) !== m.enableMask) fail(x, `status core.axis_enable_mask ${core.axis_enable_mask}, model ${m.enableMask}`);
  if ((core.io_armed === 1n) !== m.ioArmed) fail(x, `status core.io_armed ${core.io_armed}, model ${m.ioArmed ? 1 : 0}`);
}
