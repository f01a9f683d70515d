// Running the model against a target: one command at a time, its reply matched against the outcomes the
// model allows (harness/model/model.ts), then status and the event log checked against the model's state
// (harness/model/observe.ts). A run opens on a cell brought to a known state and leaves it released.
// The run's other parts: context.ts (what a run carries, how it fails), cell.ts (Describe to the model's
// configuration), requests.ts (the bodies sent), channels.ts (program uploads, held uploads, jog datagrams).

import { HarnessError } from '../errors.ts';
import type { CheckedReply } from '../oracle/reply.ts';
import type { Target } from '../targets/types.ts';
import { configFrom, type Description } from './cell.ts';
import { abandonUpload, holdUpload, jogFrame, postProgram, probeSlotOf } from './channels.ts';
import { fail, hit, specText, type ModelStats, type RunContext } from './context.ts';
import { describeOutcome, endGrant, findLast, initialState, leaseAt, matches, outcomes, type EventExp, type Outcome, type Request, type Rules, type Spec } from './model.ts';
import { applyRenewals, reconcile, stopCollected } from './observe.ts';
import { requestOf } from './requests.ts';
import { RealCell } from './system.ts';
import { withBinding } from '../targets/binding.ts';

export { configFrom, programUnfit, type Description } from './cell.ts';
export { ModelMismatch, newStats, type ModelStats, type RunContext } from './context.ts';
export { programCycles, programFile } from './requests.ts';

/**
 * Open a model run on a target: read Describe, bring the cell to a known state (released, disabled,
 * disarmed, outputs disarmed) and start the model from what status then says.
 */
export async function openRun(target: Target, rules: Rules, stats: ModelStats): Promise<RunContext> {
  const client = target.client();
  const dr = await client.describe();
  if (dr.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `describe answered ${dr.status}`);
  const d = withBinding(dr.reply.data as Record<string, unknown>) as unknown as Description;
  const c = configFrom(d, rules);
  const real = new RealCell(target, client, typeof target.stepReport === 'function', c.cycleNs);
  await real.begin();
  await resetCell(real, d.binding, c.leaseCeilingMs, { count: c.axisCount, traj: c.trajAxis });
  const st = await real.status();
  const handles = st.execution?.handles ?? [];
  const baseHandle = handles.reduce((a, h) => (h.handle > a ? h.handle : a), 0n);
  const m = initialState({ baseHandle, homeMask: Number(st.core?.home_valid_mask ?? 0n), lastGeneration: st.grant.generation > 0n ? st.grant.generation : undefined });
  await real.events(); // the reset's events are not the run's
  stats.sequences++;
  const clock = await client.get('/v1/jog/clock', 'jog_clock');
  const jogClock = clock.status === 200 ? String((clock.reply.data as { incarnation?: string })?.incarnation ?? '') : '';
  const rad = d.axes.filter((a) => a.position_unit === 'rad').length;
  m.outputs = Number(st.core?.io_output_word ?? 0n);
  m.faultLatched = (st.core?.execution_fault_reasons ?? 0n) !== 0n;
  m.markerLate = ((st.core?.execution_fault_reasons ?? 0n) & 1024n) !== 0n;
  return { c, m, real, binding: d.binding, trace: [], stats, lastSendMs: 0, jogClock, revision: BigInt((d.binding.revision as bigint) ?? 0n), rad };
}

/** Release what an earlier sequence may have left: acquire, disable, disarm outputs, release. */
async function resetCell(real: RealCell, binding: Record<string, unknown>, ceilingMs: number, axes: { count: number; traj: number }): Promise<void> {
  const until = performance.now() + ceilingMs + 1_000;
  for (;;) {
    const a = await real.send('acquire', RealCell.body('acquire', { controller: 'model-reset', binding, requested_lease_ms: 10_000n }), { quiet: false });
    if (a.reply.status !== 200) {
      // Someone holds it (an earlier sequence's grant still in its lease) or a stop drains: step on, and let
      // a leftover lease run out (host time).
      if (performance.now() > until) break;
      await real.step(20);
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    const g = a.reply.reply.data as { session: string; generation: bigint };
    const f = { session: g.session, generation: g.generation };
    // An upload an earlier sequence held and abandoned frees its slot when the service notices the client
    // went away: wait until neither slot answers busy (a probe is refused after admission, changing nothing).
    for (const kind of ['trajectory', 'program'] as const) {
      for (let i = 0; i < 200; i++) {
        const p = await probeSlotOf(real, kind, f, axes);
        if (p.label !== 'busy') break;
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    await real.send('io_disarm', RealCell.body('io_disarm', f), { quiet: false });
    await real.send('enable', RealCell.body('enable', { ...f, axis_mask: 0n }), { quiet: false });
    // A fault bit an earlier sequence latched (io_marker_late stays latched until a reset): the machine is
    // inhibited and idle now, so reset_fault clears it; a submitted reset retires the session (part 4), so no release follows.
    if ((await real.status()).core?.execution_fault_reasons) {
      const r = await real.send('reset_fault', RealCell.body('reset_fault', f), { quiet: false, after: 5 });
      if (r.reply.status === 200) return;
    }
    await real.send('release', RealCell.body('release', f), { quiet: false, after: 5 });
    return;
  }
  throw new HarnessError('HIL_ERR_TARGET_REFUSED', 'model run: the cell could not be acquired for its reset (another controller holds it)');
}

/** Leave the cell released (every run ends stopped and released, DESIGN.md rule 5). */
export async function closeRun(x: RunContext): Promise<void> {
  // The transitions the model's own bookkeeping reached (supersede, drain, ...) join the run's figures.
  for (const [k, n] of x.m.hits) x.stats.hits[k] = (x.stats.hits[k] ?? 0) + n;
  x.m.hits.clear();
  x.real.keepAlive(undefined);
  x.held?.abandon();
  x.held = undefined;
  x.real.closeExtras();
  try {
    if (x.real.pendingStop) await x.real.drain();
    // Every grant the target gave (the model may not know one a mismatch cut short): stop and release it.
    for (const g of x.real.granted) {
      const r = await x.real.send('stop', RealCell.body('stop', { session: g.session, generation: g.generation }), { quiet: false });
      if (r.reply.status === 200) {
        const d = r.reply.reply.data as { generation: bigint };
        await x.real.drain();
        await x.real.send('release', RealCell.body('release', { session: g.session, generation: d.generation }), { quiet: false });
      }
    }
  } catch {
    // Unknown outcome: the next run's reset reconciles.
  }
}

/** Run one command against the target and the model; throws ModelMismatch when they disagree. */
export async function runSpec(x: RunContext, spec: Spec): Promise<void> {
  const { c, m, real } = x;
  x.stats.commands++;
  const line = specText(spec);
  const stopping = !!m.grant?.stopping || real.pendingStop !== undefined;
  switch (spec.op) {
    case 'step':
      if (stopping) hit(x, 'drain by stepping');
      await real.step(spec.cycles);
      x.trace.push(`${line}`);
      break;
    case 'drain':
      await real.drain();
      x.trace.push(line);
      break;
    case 'wait_lease': {
      const g = m.grant;
      if (g) {
        // Lease expiry by waiting: the lease is host time, on the stepped clock too (short leases only).
        const ms = g.lease.hi + 15 - performance.now();
        if (ms > 0) await new Promise((r) => setTimeout(r, ms));
      }
      x.trace.push(line);
      break;
    }
    case 'restart_core': {
      if (real.pendingStop) await real.drain();
      await stopCollected(x);
      await real.restartCore();
      hit(x, 'core restart');
      const evs: EventExp[] = [];
      const g = m.grant;
      // A session of the previous core incarnation answers daemon_restarted (part 7); its handles are unknown now.
      if (g) {
        // A lease that may have run out before the restart may end the grant by expiry instead (its event,
        // and the fence answers for an expired session too).
        const lapsedMaybe = leaseAt(g, x.lastSendMs, performance.now()) !== 'alive';
        endGrant(c, m, 'restarted', evs, 'core restart');
        evs.push({ type: 'grant_revoked', why: 'authority lost with the core', may: true, ...(lapsedMaybe ? { alt: ['grant_expired'] } : {}) });
        if (lapsedMaybe) {
          const e = findLast(m.ended, (y) => y.generation === g.generation);
          if (e) e.alsoExpired = true;
        }
      }
      m.core++;
      m.epoch++;
      m.outputs = 'unknown';
      m.jog = undefined;
      m.jogMax = undefined;
      m.legacyJog = undefined;
      m.faultLatched = false;
      m.markerLate = false;
      m.owed.push(...evs.map((e) => ({ ...e, may: true })), { type: 'daemon_incarnation_changed', why: 'core restarted' });
      x.trace.push(line);
      break;
    }
    case 'fault': {
      // A following error on the plan's axis (PROFILE fault bit 5), its condition cleared at once: the bit
      // stays latched until a reset_fault. A latched bit disarms and disables the cell and retires a
      // started handle with execution_faulted (part 3).
      if (real.pendingStop) await real.drain();
      await stopCollected(x);
      await real.target.inject({ kind: 'following_error', axis: c.trajAxis });
      await real.step(20);
      await real.target.inject({ kind: 'clear' });
      await real.step(10);
      // A following error needs a drive that follows: on an axis left disabled (a bring-up without it) the
      // injection latches nothing, and nothing follows from it (status decides; hil fuzz seed 760984788).
      if (((await real.status()).core?.execution_fault_reasons ?? 0n) === 0n && (m.enableMask & (1 << c.trajAxis)) === 0) {
        hit(x, 'fault injected on a disabled axis: nothing latched');
        x.trace.push(`${line} (nothing latched: the axis is disabled)`);
        break;
      }
      hit(x, 'fault injected');
      for (const h of m.handles.values()) {
        if (h.state === 'started' && h.core === m.core) {
          h.state = 'retired';
          m.owed.push({ type: 'handle_transition', where: { handle: h.n, from: 'started', to: 'retired' }, why: `fault retired ${h.n}`, may: true }, { type: 'execution_faulted', alt: ['execution_aborted'], where: { handle: h.n }, why: `fault retired ${h.n}`, may: true });
          // (The fault reaction may end the authority first: the execution is then aborted, "authority ended".)
        }
      }
      if (m.jog) m.jog = undefined;
      m.outputs = 0; // PROFILE "Trajectories" Output intents: a fault turns every output OFF
      m.faultLatched = true;
      m.adopt = true;
      x.trace.push(line);
      break;
    }
    // Like every command (RealCell.send's `after`), a few core cycles follow, so the status read after it
    // shows what the core made of the commands before (a release's disable reaches the drives on a cycle).
    case 'hold_upload':
      await holdUpload(x, spec.kind);
      await real.step(5);
      x.trace.push(line);
      break;
    case 'abandon_upload':
      await abandonUpload(x);
      await real.step(5);
      x.trace.push(line);
      break;
    case 'finish_upload': {
      const held = x.held!;
      const up = m.upload!;
      x.held = undefined;
      // The held upload is the one in the slot: its own outcome is a preparation's.
      m.upload = undefined;
      const sub: Spec = held.op === 'prepare_program' ? { op: 'prepare_program', prog: 'a', s: 'current', g: 'current' } : { op: 'prepare_trajectory', io: 'none', s: 'current', g: 'current' };
      const req: Request = { spec: sub, payload: 'held upload', resolved: { session: up.session, generation: up.generation } };
      const ex = await real.send(held.op, () => held.finish(), { quiet: false, after: 5 });
      applyRenewals(x);
      judgeReply(x, sub, req, ex);
      // Its handle number: the program's came with the upload (the file of programFile 'a').
      if (held.op === 'prepare_program' && ex.reply.status === 200) hit(x, 'limit:upload_slots_per_kind:program_finished');
      break;
    }
    case 'replan': {
      x.trace.push(line);
      const f = { s: 'current' as const, g: 'current' as const };
      for (const sub of [{ op: 'prepare_trajectory', io: 'none', ...f }, { op: 'start_trajectory', h: 'prepared', ...f }] as Spec[]) await runSpec(x, sub);
      return;
    }
    case 'ready': {
      x.trace.push(line);
      for (const sub of bringUp(x, spec)) await runSpec(x, sub);
      return;
    }
    case 'burst': {
      x.trace.push(`burst ${spec.family}:`);
      hit(x, `family:${spec.family}`);
      for (const sub of spec.steps) {
        if (x.allow && !x.allow(x.m, sub)) {
          x.trace.push(`  (skipped: not allowed now) ${specText(sub)}`);
          continue;
        }
        await runSpec(x, sub);
      }
      return;
    }
    default:
      await control(x, spec, stopping);
  }
  await reconcile(x, !stopping || spec.op === 'step' || spec.op === 'drain' || spec.op === 'restart_core');
}

/** The commands of a bring-up from the model's state (each one checked like any other). */
function bringUp(x: RunContext, r: Extract<Spec, { op: 'ready' }>): Spec[] {
  const { c, m } = x;
  const f = { s: 'current' as const, g: 'current' as const };
  const out: Spec[] = [];
  if (m.grant?.stopping) out.push({ op: 'drain' });
  if (!m.grant || m.grant.stopping) out.push({ op: 'acquire', lease: 10_000, binding: 'ok', controller: 'ok' });
  else out.push({ op: 'renew', ...f });
  const bit = 1 << c.trajAxis;
  if ((m.homeMask & bit) === 0 && (c.nativeHomeMask & bit) !== 0) {
    if (m.armed || m.enableMask !== 0) out.push({ op: 'enable', mask: 'zero', ...f });
    out.push({ op: 'home', mask: 'traj', ...f });
  }
  // The plan's axis left out of the enable mask: the first native-home axis ('others'), or for a plan on
  // the last one, every axis but it is not expressible as a MaskRef, so the first is left out (and planned).
  // Arm left out: disarm first (enable 0 disarms, PROFILE enable), so the plan meets an unarmed core.
  if (r.omit === 'arm' && m.armed) out.push({ op: 'enable', mask: 'zero', ...f });
  out.push({ op: 'enable', mask: r.omit === 'axis' ? 'others' : 'all', ...f });
  if (r.omit !== 'arm') out.push({ op: 'arm', ...f });
  if (r.plan === 'program' || r.plan === 'program_on') out.push({ op: 'prepare_program', prog: r.plan === 'program_on' ? 'on' : 'a', ...f });
  else out.push({ op: 'prepare_trajectory', io: r.plan ?? 'none', ...(r.axis && r.omit !== 'axis' ? { axis: r.axis } : {}), ...f });
  return out;
}

async function control(x: RunContext, spec: Exclude<Spec, { op: 'step' | 'drain' | 'wait_lease' | 'restart_core' | 'hold_upload' | 'finish_upload' | 'abandon_upload' }>, stopping: boolean): Promise<void> {
  const { c, m, real } = x;
  let hold: number[] = [];
  if (spec.op === 'prepare_trajectory' || spec.op === 'prepare_program') hold = (await real.status()).axes.map((a) => Number(a.position));
  const req = requestOf(x, spec, hold);
  const line = `${specText(spec)}`;
  // A stop to hold open (stepped clock): only when the model admits it, so the service answers it at the drain.
  // Not with a request_id: its reply, remembered by the retry cache, is not there until the drain (a second
  // stop under the same id would replay a reply the model has not seen: hil fuzz seed 1436463885).
  if (spec.op === 'stop' && !spec.drain && real.stepped && !stopping && m.grant && spec.rid === undefined) {
    const lease = leaseAt(m.grant, performance.now(), performance.now());
    const os = lease === 'alive' ? outcomes(c, m, req, 'alive', real.cycles) : [];
    if (os.length === 1 && os[0]!.status === 200 && !os[0]!.replay) {
      const { sendMs } = await real.stopUndrained(req.payload);
      x.lastSendMs = sendMs;
      os[0]!.next?.(m, undefined as unknown as CheckedReply);
      for (const [k] of [[os[0]!.rule]]) hit(x, k!);
      x.pendingStop = os[0];
      x.trace.push(`${line} -> (stop admitted, draining)`);
      return;
    }
  }
  const drainToo = spec.op === 'stop' && spec.drain;
  // Out of band, just before the Start: the next core cycle (the first that runs the plan) wakes late.
  if (spec.op === 'start_trajectory' && spec.late) await real.target.inject({ kind: 'late_wake', ns: Number(spec.late === 'cycle' ? c.cycleNs : c.cycleNs - 1n) });
  const ex =
    spec.op === 'update_jog'
      ? await jogFrame(x, req.bytes!)
      : spec.op === 'prepare_program'
        ? await real.send(spec.op, () => postProgram(real, req), { quiet: stopping, after: 5 })
        : await real.send(spec.op, req.payload, { quiet: stopping && !drainToo, after: 5 });
  applyRenewals(x);
  // A stop to drain: step until the drain is over (a held one drains with it).
  if (drainToo && ex.reply.status === 200) await real.drain();
  judgeReply(x, spec, req, ex);
}

/** Match a reply against the outcomes the model allows, and apply the one that fits (or fail). */
function judgeReply(x: RunContext, spec: Spec, req: Request, ex: { reply: CheckedReply; sendMs: number; recvMs: number }): void {
  const { c, m, real } = x;
  const line = specText(spec);
  x.lastSendMs = ex.sendMs;
  const lease = m.grant ? leaseAt(m.grant, ex.sendMs, ex.recvMs) : 'alive';
  const os = outcomes(c, m, req, lease, real.cycles, { sendMs: ex.sendMs, recvMs: ex.recvMs });
  const r = ex.reply;
  const got = `${r.status}${r.label ? ` ${r.label}` : ''}`;
  let chosen: Outcome | undefined;
  const why: string[] = [];
  for (const o of os) {
    const miss = matches(o, r);
    if (miss === undefined) {
      chosen = o;
      break;
    }
    why.push(`${describeOutcome(o)}: ${miss}`);
  }
  x.trace.push(`${line} -> ${got}`);
  // A reply the model explains only by timing (a lease, a jog input or a plan that ran out first) is
  // marked: two sides may differ there without either being wrong.
  x.replies?.push(chosen && /ran out|expired first|completed first/.test(chosen.rule) ? `${got} (timing: ${chosen.rule})` : got);
  if (!chosen) fail(x, `${spec.op}: the reply ${got} ${r.reply.error ? JSON.stringify(r.reply.error) : ''} is not one the model allows:\n  ${why.join('\n  ')}`);
  hit(x, chosen.rule);
  const before = m.grant;
  chosen.next?.(m, r);
  // A successful acquire or renew (not a replay) moves the lease window on.
  if (r.status === 200 && !chosen.replay && (spec.op === 'acquire' || spec.op === 'renew') && m.grant) {
    m.grant.lease = { lo: ex.sendMs + m.grant.leaseMs, hi: ex.recvMs + m.grant.leaseMs };
  }
  if (spec.op === 'release' && before?.stopping && r.status === 200) m.owed.push({ type: 'grant_revoked', why: 'the stop that was draining', may: true });
  for (const e of chosen.events ?? []) m.owed.push({ ...e });
}

export { describeOutcome };
