// The exchanges of a model run besides a control request: POST /v1/program (part 4 prepare_program), an
// upload held open mid-body and the probe that shows its slot taken (part 8 "Upload slots"), and a
// local_jog_update datagram judged from the ingress counters (PROFILE "Jog").

import { contentType } from '../clients/control.ts';
import { readJogIngress, waitIngress } from '../clients/jog.ts';
import { HarnessError } from '../errors.ts';
import { checkReply, type CheckedReply } from '../oracle/reply.ts';
import { fail, hit, type RunContext } from './context.ts';
import { endGrant, leaseAt } from './machines/grant.ts';
import type { Request } from './model.ts';
import { points, programFile } from './requests.ts';
import { applyRenewals } from './observe.ts';
import type { EventExp } from './state.ts';
import { HeldUpload, RealCell } from './system.ts';

/** The probe that shows whether the upload slot of `kind` is taken: a body refused after admission (one point; 16 bytes that are no dense file), so an admitted probe changes nothing. */
function probeSlot(x: RunContext, kind: 'trajectory' | 'program', f: { session: string; generation: bigint }): Promise<CheckedReply> {
  return probeSlotOf(x.real, kind, f, { count: x.c.axisCount, traj: x.c.trajAxis });
}

export async function probeSlotOf(real: RealCell, kind: 'trajectory' | 'program', f: { session: string; generation: bigint }, axes: { count: number; traj: number }): Promise<CheckedReply> {
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
export async function holdUpload(x: RunContext, kind: 'trajectory' | 'program'): Promise<void> {
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
    // Refused for a session whose lease may have run out before the upload was checked (the keep-alive
    // renewals came too late on a busy host): the grant ended by expiry, as the model allows any request
    // sent then; nothing is held, and the expiry's event is owed. With the lease surely running, a refusal
    // is a mismatch.
    if (early && !(early instanceof Error) && lapsedRefusal(early)) {
      applyRenewals(x);
      if (m.grant && leaseAt(m.grant, held.sentMs, performance.now()) !== 'alive') {
        const evs: EventExp[] = [];
        const gen = m.grant.generation;
        endGrant(c, m, 'expired', evs, 'lease expiry before a held upload');
        m.owed.push({ type: 'grant_expired', where: { generation: gen }, why: 'the lease ran out before the held upload was checked' }, ...evs);
        hit(x, 'transition:grant:owned->no_grant:lease_expiry');
        x.held = undefined;
        x.trace.push(`hold_upload ${kind} -> ${early.status} ${early.label} (the lease ran out first)`);
        return;
      }
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

/** A refusal that says the session's lease ran out (document 1 part 7: expired; a fenced call on an expired session: control_session_stale). */
function lapsedRefusal(r: CheckedReply): boolean {
  return r.label === 'expired' || (r.label === 'control_session_stale' && /expired/.test(r.reply.error ?? ''));
}

/** abandon_upload: the held upload goes away; the run waits until its slot is free again (the probe is no longer busy). */
export async function abandonUpload(x: RunContext): Promise<void> {
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
export function postProgram(real: RealCell, req: Request): Promise<CheckedReply> {
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
export async function jogFrame(x: RunContext, frame: Uint8Array): Promise<{ reply: CheckedReply; sendMs: number; recvMs: number }> {
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
