// The requests a model command sends: its fields resolved against the model (fence, handle, jog
// generation, identity) and the bodies it carries: a trajectory's points, a program's dense file, a jog
// datagram.

import { DENSE_AXES, encodeDense } from '../oracle/dense.ts';
import { encodeJogFrame } from '../clients/jog.ts';
import type { RunContext } from './context.ts';
import { findLast, JOG_DEADLINE_MS, NEVER_SESSION, RID, U64_MAX, big, controllerText, labelText, planBit, resolveFence, resolveJogGeneration, type FencedSpec, type ModelConfig, type ModelState, type ProgRef, type Request, type Spec } from './model.ts';
import { RealCell } from './system.ts';

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

/** Request fields of a fenced spec, resolved against the model. */
export function requestOf(x: RunContext, spec: Spec, hold: number[]): Request {
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
export function points(c: ModelConfig, hold: number[], io: string): unknown[] {
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
