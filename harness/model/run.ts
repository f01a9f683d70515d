// Running the model against a target: one command at a time, its reply matched against the outcomes the
// model allows, then status and the event log checked against the model's state (harness/model/model.ts).
// A mismatch is a ModelMismatch naming the command, what the model allowed and what came.

import { REQUEST_SCHEMA } from '../clients/control.ts';
import type { CellEvent } from '../clients/events.ts';
import { HarnessError } from '../errors.ts';
import { checkReply, type CheckedReply } from '../oracle/reply.ts';
import { contentType } from '../clients/control.ts';
import { readJogIngress, waitIngress } from '../clients/jog.ts';
import type { Target } from '../targets/types.ts';
import {
  REFERENCE_RULES,
  RID,
  U64_MAX,
  controllerText,
  describeOutcome,
  findLast,
  drained,
  endGrant,
  initialState,
  labelText,
  leaseAt,
  matches,
  outcomes,
  planBit,
  resolveJogGeneration,
  JOG_DEADLINE_MS,
  NEVER_SESSION,
  big,
  resolveFence,
  type EventExp,
  type FencedSpec,
  type ModelConfig,
  type ModelState,
  type Outcome,
  type Request,
  type Rules,
  type Spec,
  type ProgRef,
} from './model.ts';
import { HeldUpload, RealCell, type StatusObs } from './system.ts';
import { DENSE_AXES, encodeDense } from '../oracle/dense.ts';
import { encodeJogFrame } from '../clients/jog.ts';

export class ModelMismatch extends Error {
  override name = 'ModelMismatch';
}

/** Figures of a run: sequences, commands, and how often each rule or transition was reached. */
export interface ModelStats {
  sequences: number;
  commands: number;
  hits: Record<string, number>;
}

export function newStats(): ModelStats {
  return { sequences: 0, commands: 0, hits: {} };
}

export interface Description {
  binding: Record<string, unknown>;
  axes: Array<{ id: string; native_home?: boolean; position_unit?: string }>;
  cycle_ns: bigint;
  max_grant_lease_ms?: bigint | number;
  max_jog_input_age_ns?: bigint | number;
  io?: { outputs: Array<{ name: string; torch: boolean }> } | null;
}

/** What the model knows of the cell, from Describe (portable: axes, limits and outputs as described). */
export function configFrom(d: Description, rules: Rules = REFERENCE_RULES): ModelConfig {
  const axisCount = d.axes.length;
  let nativeHomeMask = 0;
  d.axes.forEach((a, i) => {
    if (a.native_home) nativeHomeMask |= 1 << i;
  });
  const trajAxis = Math.max(0, d.axes.findIndex((a) => a.native_home));
  const outputs = d.io?.outputs ?? [];
  return {
    axisCount,
    nativeHomeMask,
    trajAxis,
    leaseCeilingMs: Number(d.max_grant_lease_ms ?? 500n),
    // Part 8: "omitted or 0 keeps the 500 ms default", capped by the ceiling.
    defaultLeaseMs: 500,
    cycleNs: BigInt(d.cycle_ns),
    plainOutput: outputs.findIndex((o) => !o.torch),
    torchOutput: outputs.findIndex((o) => o.torch),
    outputCount: outputs.length,
    planCycles: 400,
    jogInputAgeMs: Number(BigInt(d.max_jog_input_age_ns ?? 250_000_000n) / 1_000_000n),
    ...(outputs.find((o) => !o.torch) ? { plainOutputName: outputs.find((o) => !o.torch)!.name } : {}),
    ...(programUnfit(d, trajAxis) ? { programUnfit: programUnfit(d, trajAxis)! } : {}),
    rules,
  };
}

/**
 * Why the model's program files do not fit the cell: a dense file's columns map in order to the axes in
 * rad (document 2 part 7, PROFILE "Program admission" Axis map), so those must be the cell's first one to
 * nine axes, and the plan's axis one of them. Undefined when they fit.
 */
export function programUnfit(d: Description, trajAxis: number): string | undefined {
  const rad = d.axes.map((a, i) => (a.position_unit === 'rad' ? i : -1)).filter((i) => i >= 0);
  if (rad.length === 0 || rad.length > 9 || !rad.every((a, i) => a === i)) return `the cell's axes in rad are not its first one to nine axes (the dense columns map to them in order)`;
  if (!rad.includes(trajAxis)) return `the plan's axis ${d.axes[trajAxis]?.id} is not in rad`;
  return undefined;
}

/** The model's program files (document 2 dense file, written by the harness's own encoder): a still plan at the held positions. */
export function programFile(c: ModelConfig, d: { revision: bigint; rad: number }, hold: number[], prog: ProgRef): Uint8Array {
  const planNs = Number(BigInt(c.planCycles) * c.cycleNs);
  const n = Math.max(2, Math.round(planNs / 1e7) + 1);
  const q = Array.from({ length: DENSE_AXES }, (_, j) => (j < d.rad ? hold[j] ?? 0 : 0));
  const samples = Array.from({ length: n }, (_, i) => ({ t: i * 0.01, q, qd: new Array(DENSE_AXES).fill(0) }));
  return encodeDense({
    planId: 'plan:model',
    programId: prog === 'no_id' ? '' : `model-${prog}`,
    programDigest: `sha256:${'d'.repeat(64)}`,
    manifestRevision: d.revision,
    planRevision: 1n,
    axisMask: 1 << c.trajAxis,
    dtS: 0.01,
    maxAbsQd: [2, 2, 2, 4, 4, 5, 1, 1.5, 1],
    segments: [{ kind: 'dwell', sourceId: 'model-dwell', samples }],
    // PROFILE "Program admission" Process markers: the ON marker on sample 0 (the first executed point).
    ...(prog === 'on' && c.plainOutputName ? { processMarkers: [{ segment: 0n, sample: 0n, action: c.plainOutputName, value: true }] } : {}),
  });
}

/** A program's plan length in core cycles (the samples at 10 ms of programFile). */
export function programCycles(c: ModelConfig): number {
  const n = Math.max(2, Math.round(Number(BigInt(c.planCycles) * c.cycleNs) / 1e7) + 1);
  return Math.round(((n - 1) * 1e7) / Number(c.cycleNs));
}

/** Event types whose every occurrence the model must have predicted; the others (machine events) are observed. */
const STRICT = new Set(['grant_acquired', 'grant_renewed', 'grant_released', 'grant_expired', 'grant_revoked', 'handle_transition', 'execution_started', 'execution_completed', 'execution_aborted', 'execution_faulted', 'telemetry_mark', 'daemon_incarnation_changed']);
const EVENT_TTL = 6;

export interface RunContext {
  c: ModelConfig;
  m: ModelState;
  real: RealCell;
  binding: Record<string, unknown>;
  /** What happened so far, one line per command (the failure text). */
  trace: string[];
  stats: ModelStats;
  pendingStop?: Outcome;
  lastSendMs: number;
  /** The jog clock's incarnation (GET /v1/jog/clock), for begin_jog. */
  jogClock: string;
  /** When set, each judged reply's status and leading label, in order (the differential mode compares them). */
  replies?: string[];
  /** The upload held open (hold_upload), if any. */
  held?: HeldUpload;
  /** Describe binding.revision (a program file's manifest_revision) and the number of axes in rad (mapped dense columns). */
  revision: bigint;
  rad: number;
  /**
   * The generator's preconditions (harness/model/commands.ts `allowed`) for the run's abilities, set by
   * whoever runs the sequence: a burst's steps after its first are checked against it as they come.
   */
  allow?: (m: ModelState, spec: Spec) => boolean;
}

/**
 * Open a model run on a target: read Describe, bring the cell to a known state (released, disabled,
 * disarmed, outputs disarmed) and start the model from what status then says.
 */
export async function openRun(target: Target, rules: Rules, stats: ModelStats): Promise<RunContext> {
  const client = target.client();
  const dr = await client.describe();
  if (dr.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `describe answered ${dr.status}`);
  const d = dr.reply.data as unknown as Description;
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

function fail(x: RunContext, what: string): never {
  // HIL_MODEL_TRACE=all: the whole sequence's trace, not its last twelve lines.
  throw new ModelMismatch(`${what}\n  after:\n    ${x.trace.slice(process.env.HIL_MODEL_TRACE === 'all' ? 0 : -12).join('\n    ')}`);
}

function hit(x: RunContext, rule: string): void {
  x.stats.hits[rule] = (x.stats.hits[rule] ?? 0) + 1;
}

/** Request fields of a fenced spec, resolved against the model. */
function requestOf(x: RunContext, spec: Spec, hold: number[]): Request {
  const { c, m } = x;
  if (spec.op === 'acquire') {
    const binding = spec.binding === 'ok' ? x.binding : { ...x.binding, revision: BigInt((x.binding.revision as bigint) ?? 1n) + 1n };
    const fields: Record<string, unknown> = { controller: controllerText(spec.controller), binding };
    if (spec.lease !== undefined) fields.requested_lease_ms = BigInt(spec.lease);
    if (spec.rid !== undefined) fields.request_id = RID[spec.rid];
    return { spec, payload: RealCell.body('acquire', fields) };
  }
  const fs = spec as FencedSpec;
  const resolved = resolveFence(m, fs);
  const fields: Record<string, unknown> = { session: resolved.session, generation: resolved.generation };
  const rid = 'rid' in fs ? fs.rid : undefined;
  if (rid !== undefined) fields.request_id = RID[rid];
  if (fs.op === 'prepare_program') {
    const bytes = programFile(c, { revision: x.revision, rad: x.rad }, hold, fs.prog);
    return { spec, payload: `program ${fs.prog}`, resolved, bytes };
  }
  if (fs.op === 'start_program') {
    const identity = identityRef(m, fs.id);
    resolved.ident = JSON.stringify(identity, big);
    fields.identity = identity;
  }
  if (fs.op === 'update_jog') {
    resolved.jogGeneration = resolveJogGeneration(m, fs.jg);
    const last = m.jogSeq ?? 0n;
    resolved.sourceSequence = fs.seq === 'same' && m.jogSeq !== undefined ? last : last + 1n;
    const now = process.hrtime.bigint();
    const ageNs = BigInt(c.jogInputAgeMs) * 1_000_000n;
    const capture = fs.capture === 'stale' ? now - ageNs - 50_000_000n : fs.capture === 'before_origin' ? (m.jog?.originNs ?? now) - 1_000_000n : now;
    const frame = encodeJogFrame({ session: /^[0-9a-fA-F]{64}$/.test(resolved.session) ? resolved.session : NEVER_SESSION, generation: resolved.generation, jogGeneration: resolved.jogGeneration, sourceSequence: resolved.sourceSequence, captureHostNs: capture, velocity: new Array(c.axisCount).fill(0) });
    return { spec, payload: 'update_jog', resolved, bytes: frame };
  }
  const bit = 1 << c.trajAxis;
  if (fs.op === 'enable' || fs.op === 'home') {
    const all = c.axisCount >= 32 ? 0xffffffff : (1 << c.axisCount) - 1;
    const nonHome = all & ~c.nativeHomeMask;
    const masks = { traj: bit, all, others: all & ~bit || bit, zero: 0, outside: c.axisCount < 32 ? 1 << c.axisCount : 0, non_home: nonHome || bit };
    resolved.mask = masks[fs.mask] >>> 0;
    fields.axis_mask = BigInt(resolved.mask);
  }
  if (fs.op === 'mark_telemetry') fields.label = labelText(fs.label);
  if (fs.op === 'prepare_trajectory') {
    fields.axis_mask = BigInt(planBit(c, fs.axis));
    fields.points = points(c, hold, fs.io);
  }
  if (fs.op === 'begin_jog') {
    // Host monotonic ns (PROFILE "Jog" clock: CLOCK_MONOTONIC, shared by every process on the host).
    const now = process.hrtime.bigint();
    const origin = fs.deadline === 'stale' ? now - 1_000_000_000n : now;
    fields.axis_mask = BigInt({ traj: bit, zero: 0, outside: c.axisCount < 32 ? 1 << c.axisCount : 0 }[fs.mask] >>> 0);
    fields.source_origin_host_ns = origin;
    resolved.originNs = origin;
    fields.deadline_host_ns = fs.deadline === 'before' ? origin : fs.deadline === 'stale' ? origin + 10_000_000n : origin + BigInt(JOG_DEADLINE_MS) * 1_000_000n;
    fields.clock_incarnation = fs.clock === 'ok' ? x.jogClock : fs.clock === 'empty' ? '' : '0'.repeat(31) + '1';
  }
  if (fs.op === 'end_jog') {
    resolved.jogGeneration = resolveJogGeneration(m, fs.jg);
    fields.jog_generation = resolved.jogGeneration;
  }
  if (fs.op === 'jog') {
    fields.axis_mask = BigInt(bit);
    fields.velocity = Array.from({ length: c.axisCount }, () => 0);
    fields.timeout_ms = BigInt(fs.timeout);
  }
  if (fs.op === 'start_trajectory' || fs.op === 'discard_trajectory') {
    resolved.handle = handleRef(m, fs.h);
    fields.handle = resolved.handle;
  }
  return { spec, payload: RealCell.body(fs.op, fields), resolved };
}

/** The identity a start_program sends: the newest program's, another program file's, or the newest with plan_revision changed. */
function identityRef(m: ModelState, ref: 'current' | 'other' | 'changed'): Record<string, unknown> {
  const ids = m.identities;
  const newest = ids[ids.length - 1];
  // Nothing prepared yet: an identity no program has (program_identity_mismatch).
  const none = { plan_id: 'plan:model', program_id: 'model-none', program_digest: `sha256:${'d'.repeat(64)}`, trajectory_digest: `sha256:${'0'.repeat(64)}`, source_digest: `sha256:${'0'.repeat(64)}`, normalised_digest: `sha256:${'0'.repeat(64)}`, manifest_revision: 1n, plan_revision: 1n };
  if (!newest) return none;
  if (ref === 'current') return newest.identity;
  if (ref === 'other') {
    const other = findLast(ids, (x) => x.key !== newest.key);
    if (other) return other.identity;
  }
  return { ...newest.identity, plan_revision: BigInt(newest.identity.plan_revision as bigint) + 1n };
}

function handleRef(m: ModelState, ref: string): bigint {
  const hs = [...m.handles.values()];
  const cur = hs.filter((h) => h.core === m.core);
  const pick = {
    program: findLast(cur, (h) => h.kind === 'program'),
    prepared: findLast(cur, (h) => h.state === 'prepared'),
    started: findLast(cur, (h) => h.state === 'started'),
    last: hs[hs.length - 1],
    terminal: findLast(hs, (h) => h.state !== 'prepared' && h.state !== 'started'),
    other_core: findLast(hs, (h) => h.core !== m.core),
  }[ref as 'prepared'];
  if (pick) return pick.n;
  if (ref === 'zero') return 0n;
  if (ref === 'max') return U64_MAX;
  // Absent kinds fall back to the next number, never issued yet (unknown_handle).
  return m.maxHandle + 1n;
}

/** A stationary plan at the held positions (PROFILE start gate: a Start begins at the held target). */
function points(c: ModelConfig, hold: number[], io: string): unknown[] {
  const planNs = BigInt(c.planCycles) * c.cycleNs;
  const bitOf = { on: c.plainOutput, on0: c.plainOutput, off: c.plainOutput, torch: c.torchOutput, unconfigured: c.outputCount, none: -1 }[io] ?? -1;
  const pts: Array<Record<string, unknown>> = [0n, planNs / 2n, planNs].map((t) => ({ time_ns: t, position: hold }));
  if (bitOf >= 0 && bitOf < 8) {
    const b = BigInt(1 << bitOf);
    // 'on0': the intent on the first point (docs/profile.md "Trajectories" Output intents: an intent on
    // point 0 is applied too).
    const at = io === 'on0' ? 0 : 1;
    pts[at] = { ...pts[at], io_mask: b, io_values: io === 'off' ? 0n : b };
  }
  return pts;
}

const specText = (s: Spec) => JSON.stringify(s);

/** Keep-alive renewals that came: the lease window moves on, and each owes a grant_renewed event. */
function applyRenewals(x: RunContext): void {
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

/** The probe that shows whether the upload slot of `kind` is taken: a body refused after admission (one point; 16 bytes that are no dense file), so an admitted probe changes nothing. */
function probeSlot(x: RunContext, kind: 'trajectory' | 'program', f: { session: string; generation: bigint }): Promise<CheckedReply> {
  return probeSlotOf(x.real, kind, f, { count: x.c.axisCount, traj: x.c.trajAxis });
}

async function probeSlotOf(real: RealCell, kind: 'trajectory' | 'program', f: { session: string; generation: bigint }, axes: { count: number; traj: number }): Promise<CheckedReply> {
  if (kind === 'program') {
    return real.client
      .raw('POST', '/v1/program', new Uint8Array(16), { 'content-type': 'application/octet-stream', 'x-control-session': f.session, 'x-control-generation': String(f.generation) })
      .then((r) => checkReply(r.status, contentType(r), r.body, 'prepare_program'));
  }
  const hold = new Array(axes.count).fill(0);
  return real.client.control(RealCell.body('prepare_trajectory', { session: f.session, generation: f.generation, axis_mask: BigInt(1 << axes.traj), points: [{ time_ns: 0n, position: hold }] }), 'prepare_trajectory');
}

/**
 * hold_upload: an upload of `kind` sends its admitted part and holds the rest (part 8 "Upload slots").
 * The run waits until the slot shows taken (a probe of the same kind answers busy): a harness step, not a
 * checked command; a slot that never shows taken, or a held upload answered early, is a mismatch.
 */
async function holdUpload(x: RunContext, kind: 'trajectory' | 'program'): Promise<void> {
  const { c, m, real } = x;
  const g = m.grant!;
  const f = { session: g.session, generation: g.generation };
  const hold = (await real.status()).axes.map((a) => Number(a.position));
  const reopen = (): HeldUpload => {
    if (kind === 'program') {
      const bytes = programFile(c, { revision: x.revision, rad: x.rad }, hold, 'a');
      return new HeldUpload(real.target.address, 'prepare_program', '/v1/program', { 'Content-Type': 'application/octet-stream', 'X-Control-Session': f.session, 'X-Control-Generation': String(f.generation) }, bytes.subarray(0, 100), bytes.subarray(100));
    }
    const text = RealCell.body('prepare_trajectory', { ...f, axis_mask: BigInt(1 << c.trajAxis), points: points(c, hold, 'none') });
    const at = text.indexOf('"points":[') + '"points":['.length;
    // PROFILE "prepare_trajectory uploads": past the 16384-byte prefix the fence is admitted and the slot taken.
    const head = Buffer.from(text.slice(0, at) + ' '.repeat(16_400));
    return new HeldUpload(real.target.address, 'prepare_trajectory', '/v1/control', { 'Content-Type': 'application/json' }, head, Buffer.from(text.slice(at)));
  };
  let held = reopen();
  x.held = held;
  for (let i = 0, busyTries = 0; i < 100; i++) {
    const early = held.answered;
    // Busy: the slot was still held by the probe or an upload that just ended (it is freed as its reply
    // goes out): open it again, a few times.
    if (early && !(early instanceof Error) && early.label === 'busy' && busyTries++ < 10) {
      held = x.held = reopen();
      await new Promise((r) => setTimeout(r, 10));
      continue;
    }
    if (early) fail(x, `hold_upload ${kind}: the held upload was answered before its body ended: ${early instanceof Error ? early.message : `${early.status} ${early.label}`}`);
    const p = await probeSlot(x, kind, f);
    if (p.label === 'busy') {
      m.upload = { kind, ...f };
      hit(x, `limit:upload_slots_per_kind:held ${kind}`);
      return;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  fail(x, `hold_upload ${kind}: a second ${kind} upload was never refused busy while the first was held (part 8: one upload of the same kind at a time)`);
}

/** abandon_upload: the held upload goes away; the run waits until its slot is free again (the probe is no longer busy). */
async function abandonUpload(x: RunContext): Promise<void> {
  const { m } = x;
  const held = x.held;
  const up = m.upload;
  x.held = undefined;
  m.upload = undefined;
  if (!held || !up) return;
  held.abandon();
  // The probe sees the slot only past the fence: under the grant now held (the upload's own fence may have
  // ended since, and a probe under it is refused at the fence whatever the slot's state).
  const g = m.grant;
  const fence = g && !g.stopping ? { session: g.session, generation: g.generation } : up;
  for (let i = 0; i < 200; i++) {
    const p = await probeSlot(x, up.kind, fence);
    if (p.label !== 'busy') return;
    await new Promise((r) => setTimeout(r, 10));
  }
  fail(x, `abandon_upload: the ${up.kind} upload slot stayed busy 2 s after its client went away (docs/profile.md: a client that disconnects releases the slot)`);
}

/** POST /v1/program as a client sends it (part 4 prepare_program: the fence in headers), the reply strictly checked. */
function postProgram(real: RealCell, req: Request): Promise<CheckedReply> {
  const f = req.resolved!;
  return real.client
    .raw('POST', '/v1/program', req.bytes!, { 'content-type': 'application/octet-stream', 'x-control-session': f.session, 'x-control-generation': String(f.generation) })
    .then((r) => checkReply(r.status, contentType(r), r.body, 'prepare_program'));
}

/**
 * One local_jog_update datagram (no reply on the socket): its outcome is what GET /v1/jog/ingress counted
 * for it, read once the ingress has received it and the core has run a few cycles (the core's own re-check
 * may move a frame from accepted to refused, PROFILE "Jog"). Given as a reply: 200 accepted, 409 and the label.
 */
async function jogFrame(x: RunContext, frame: Uint8Array): Promise<{ reply: CheckedReply; sendMs: number; recvMs: number }> {
  const { real } = x;
  const before = await readJogIngress(real.client);
  const sendMs = performance.now();
  await real.jogSender().send(Buffer.from(frame));
  const seen = await waitIngress(real.client, (before.received as bigint) + 1n);
  const recvMs = performance.now();
  if ((seen.received as bigint) <= (before.received as bigint)) throw new HarnessError('HIL_ERR_TARGET_REFUSED', 'update_jog: the ingress never counted the datagram (GET /v1/jog/ingress received did not move within 3 s)');
  await real.step(3);
  const after = await readJogIngress(real.client);
  const accepted = (after.accepted as bigint) > (before.accepted as bigint);
  let label: string | undefined;
  if (!accepted) {
    const b = (before.refused_by_reason ?? {}) as Record<string, bigint>;
    const a = (after.refused_by_reason ?? {}) as Record<string, bigint>;
    label = Object.keys(a).find((k) => (a[k] ?? 0n) > (b[k] ?? 0n)) ?? 'refused (no label counted)';
  }
  const reply: CheckedReply = { status: accepted ? 200 : 409, label, reply: { schema: 'svc.rt-control.response.v1', operation: 'update_jog', ...(label ? { error: label } : {}) } as CheckedReply['reply'] };
  return { reply, sendMs, recvMs };
}

/** The held stop answered: check it against the outcome admitted, then the grant is revoked. */
async function stopCollected(x: RunContext): Promise<void> {
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
async function reconcile(x: RunContext, cyclesRan: boolean): Promise<void> {
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

export { describeOutcome };
