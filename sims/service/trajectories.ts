// prepare_trajectory, start_trajectory, discard_trajectory (document 1 part 4; part 2 Point, HandleRecord;
// part 3 handle states). The service checks the request's own rules (point count, times, arity, finite
// values, output intents against the configured outputs), reserves the one upload slot, and hands the
// points to the core's plan slot as typed arrays; the core checks native limits and, at Start, the start
// gate. Refusal labels for rules the documents leave open are in docs/profile.md "Trajectories".

import type { CompiledMachine } from '../config/types.ts';
import { NATIVE_REASON } from '../core/reasons.ts';
import type { Authority, Grant, Reply } from './authority.ts';
import { CoreUnavailable, type CoreLink, type NativeReply } from './core-link.ts';
import { Refusal, refuse, type Identity, type Request } from './envelope.ts';
import { STATE_REASON, type HandleRecord, type HandleTable } from './handles.ts';
import { motionRefusal } from './native-labels.ts';
import type { PointArrays } from './upload/decoder.ts';
import { LITTLE_ENDIAN } from '../primitives.ts';

export const MIN_POINTS = 2;
export const MAX_POINTS = 250_000;
/** Point.io_mask and io_values are eight-bit (document 1 part 2 Point). */
const IO_BITS = 0xff;
/**
 * Points checked between turns of the event loop: a maximum upload's checks (250000 points, nine axes) held
 * the service's loop for 7 to 40 ms at once, while status readers and lease renewals waited
 * (bench/upload-impact.bench.ts).
 */
const CHECK_SLICE = 16384;
const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));
/** Points as typed arrays: the streaming decoder's output (small bodies are converted to it). */
export type { PointArrays } from './upload/decoder.ts';

/** Request.points (decoded objects, small bodies) as PointArrays; arity is checked in `checkPoints`. */
export function pointArrays(points: NonNullable<Request['points']>, axes: number): PointArrays | Refusal {
  const n = points.length;
  const out: PointArrays = {
    count: n,
    axes,
    timeNs: new BigInt64Array(n),
    position: new Float64Array(n * axes),
    velocity: new Float64Array(n * axes).fill(Number.NaN),
    hasVelocity: new Uint8Array(n),
    ioMask: new Uint32Array(n),
    ioValues: new Uint32Array(n),
    ioFlags: new Uint8Array(n),
  };
  for (let k = 0; k < n; k++) {
    const p = points[k]!;
    if (p.time_ns < -(1n << 63n) || p.time_ns >= 1n << 63n) return refuse('invalid_request_envelope', `points[${k}].time_ns is not an int64`);
    out.timeNs[k] = p.time_ns;
    if (p.position.length !== axes) return refuse('invalid_request_envelope', `points[${k}].position has ${p.position.length} values for ${axes} axes`);
    for (let i = 0; i < axes; i++) out.position[k * axes + i] = p.position[i]!;
    if (p.velocity && p.velocity.length > 0) {
      if (p.velocity.length !== axes) return refuse('invalid_request_envelope', `points[${k}].velocity has ${p.velocity.length} values for ${axes} axes`);
      out.hasVelocity[k] = 1;
      for (let i = 0; i < axes; i++) out.velocity[k * axes + i] = p.velocity[i]!;
    }
    if (p.io_mask !== undefined) {
      out.ioMask[k] = p.io_mask;
      out.ioFlags[k]! |= 1;
    }
    if (p.io_values !== undefined) {
      out.ioValues[k] = p.io_values;
      out.ioFlags[k]! |= 2;
    }
  }
  return out;
}

export class TrajectoryOps {
  /** One upload of this kind at a time (document 1 part 8 "Upload slots"). */
  private uploading = false;
  /**
   * Called when a Start's native receipt did not arrive: the core may still start it, so the outcome is
   * unknown and the service stops the grant (document 1 part 4: on an unknown outcome stop producing motion
   * and issue a stop). Set by the service.
   */
  onUncertainStart: (g: Grant) => void = () => undefined;

  constructor(
    private readonly core: CoreLink,
    private readonly authority: Authority,
    private readonly machine: CompiledMachine,
    private readonly handles: HandleTable,
  ) {}

  private get all(): number {
    return this.machine.axes.length >= 32 ? 0xffffffff : (1 << this.machine.axes.length) - 1;
  }

  /** Reserve the upload slot (busy when another prepare_trajectory is being received). */
  reserve(): () => void {
    if (this.uploading) throw refuse('busy', 'another trajectory upload is in progress');
    this.uploading = true;
    let released = false;
    return () => {
      if (!released) this.uploading = false;
      released = true;
    };
  }

  /** The request's own rules on its points, with the first broken one named. */
  async checkPoints(p: PointArrays, axisMask: number): Promise<void> {
    if (axisMask === 0 || (axisMask & ~this.all) !== 0) throw refuse('invalid_axis_mask', 'axis_mask must be a nonzero mask of configured axes');
    if (p.count < MIN_POINTS || p.count > MAX_POINTS) throw refuse('invalid_request_envelope', `points must hold ${MIN_POINTS}..${MAX_POINTS} records (got ${p.count})`);
    if (p.axes !== this.machine.axes.length) throw refuse('invalid_request_envelope', `points carry ${p.axes} axes, the cell has ${this.machine.axes.length}`);
    if (p.timeNs[0] !== 0n) throw refuse('invalid_request_envelope', 'points[0].time_ns must be 0');
    // Compared as (signed high, unsigned low) 32-bit halves: reading a BigInt64Array element allocates a
    // bigint, 500000 of them for a maximum upload.
    const w = LITTLE_ENDIAN ? new Int32Array(p.timeNs.buffer, p.timeNs.byteOffset, p.count * 2) : undefined;
    for (let k = 1; k < p.count; k++) {
      if (k % CHECK_SLICE === 0) await nextTurn();
      const later = w
        ? w[2 * k + 1]! > w[2 * k - 1]! || (w[2 * k + 1] === w[2 * k - 1] && w[2 * k]! >>> 0 > w[2 * k - 2]! >>> 0)
        : p.timeNs[k]! > p.timeNs[k - 1]!;
      if (!later) throw refuse('invalid_request_envelope', `points[${k}].time_ns must be greater than points[${k - 1}].time_ns`);
    }
    const N = p.axes;
    for (let k = 0; k < p.count; k++) {
      if (k % CHECK_SLICE === CHECK_SLICE - 1) await nextTurn();
      for (let i = 0; i < N; i++) {
        if (!Number.isFinite(p.position[k * N + i]!)) throw refuse('invalid_request_envelope', `points[${k}].position[${i}] is not finite`);
        if (p.hasVelocity[k] && !Number.isFinite(p.velocity[k * N + i]!)) throw refuse('invalid_request_envelope', `points[${k}].velocity[${i}] is not finite`);
      }
    }
    const outputs = this.machine.io?.outputs ?? [];
    let configured = 0;
    let torch = 0;
    outputs.forEach((o, i) => {
      configured |= 1 << i;
      if (o.torch) torch |= 1 << i;
    });
    for (let k = 0; k < p.count; k++) {
      if (k % CHECK_SLICE === CHECK_SLICE - 1) await nextTurn();
      const m = p.ioMask[k]!;
      const v = p.ioValues[k]!;
      if ((m | v) & ~IO_BITS) throw refuse('invalid_request_envelope', `points[${k}]: io_mask and io_values are eight-bit`);
      if (v & ~m) throw refuse('invalid_request_envelope', `points[${k}].io_values sets bits outside io_mask`);
      if (m & ~configured) throw refuse('io_not_configured', `points[${k}].io_mask names outputs that are not configured`);
      if (m & torch) throw refuse('io_torch_unqualified', `points[${k}].io_mask names a torch-class output`);
    }
  }

  async prepare(r: Request, g: Grant, p: PointArrays): Promise<Reply> {
    await this.checkPoints(p, r.axis_mask ?? 0);
    return this.handles.serialise('trajectory', () => this.commit(r, g, p));
  }

  private async commit(r: Request, g: Grant, p: PointArrays): Promise<Reply> {
    const handle = this.handles.peekNext();
    let n: NativeReply;
    try {
      n = await this.core.prepare({
        generation: g.generation,
        handle,
        axisMask: r.axis_mask!,
        timeNs: p.timeNs,
        position: p.position,
        velocity: p.velocity,
        hasVelocity: p.hasVelocity,
        ioMask: p.ioMask,
        ioValues: p.ioValues,
      }, p.workspace, p.lease);
    } catch (e) {
      if (e instanceof CoreUnavailable) throw refuse('native_rejected', `no native receipt: ${e.message}`);
      throw e;
    }
    if (n.result.Result !== 2) throw this.rejected(n);
    // The fence must still hold when the preparation is committed (a grant that ended meanwhile retired it).
    if (this.authority.current !== g || g.stopping) throw refuse('control_session_stale', 'the grant ended while the trajectory was being prepared');
    const rec = this.handles.create('trajectory', g.generation, this.core.incarnation, r.identity);
    return { status: 200, body: { operation: 'prepare_trajectory', handle: rec.handle } };
  }

  /**
   * The record of a request's handle. start_trajectory starts trajectories only; discard_trajectory takes
   * either kind (document 1 part 3: the handle table is for "trajectory and program handles", and
   * prepared -> discarded by discard_trajectory is one of its rows).
   */
  private lookup(r: Request, g: Grant, kinds: readonly string[] = ['trajectory']) {
    const h = r.handle ?? 0n;
    const rec = h === 0n ? undefined : this.handles.get(h);
    // A handle is owned by the core incarnation that holds its plan (document 1 part 2 Request.handle). A
    // handle of an earlier grant is never prepared any more (grant end retires it): its state answers.
    if (!rec || !kinds.includes(rec.kind) || rec.incarnation !== this.core.incarnation) {
      throw refuse('unknown_handle', `handle ${h} is not a ${kinds.join(' or ')} handle of this core incarnation`);
    }
    if (rec.state === 'prepared' && rec.generation !== g.generation) throw refuse('unknown_handle', `handle ${h} belongs to another grant`);
    return rec;
  }

  async start(r: Request, g: Grant): Promise<Reply> {
    const rec = this.lookup(r, g);
    if (rec.state !== 'prepared') throw refuse(STATE_REASON[rec.state], `handle ${rec.handle} is ${rec.state}`);
    if (!sameIdentity(rec.identity, r.identity)) throw refuse('trajectory_identity_mismatch', 'the identity given at Start differs from the one given at prepare');
    return this.startRecord(rec, g, 'start_trajectory');
  }

  /**
   * The Start of a prepared handle, trajectory or program (document 1 part 4: the same start gate for
   * both): the core checks the gate; mode_conflict and not_ready keep the handle prepared, a fence
   * failure while starting retires it (document 1 part 3).
   */
  async startRecord(rec: HandleRecord, g: Grant, operation: string): Promise<Reply> {
    let n: NativeReply;
    try {
      n = await this.core.command('start', g.generation, 0, { handle: rec.handle });
    } catch (e) {
      if (e instanceof CoreUnavailable) {
        this.handles.move(rec, 'retired');
        this.onUncertainStart(g);
        throw refuse('fence', `uncertain Start: ${e.message}; the grant is stopped`);
      }
      throw e;
    }
    if (n.result.Result !== 0) {
      const reason = n.result.Reason;
      // authority revoked while starting: the handle is retired (document 1 part 3, reason fence)
      if (reason === NATIVE_REASON.no_grant || reason === NATIVE_REASON.wrong_generation || this.authority.current !== g) {
        this.handles.move(rec, 'retired');
        throw new Refusal(409, 'fence', n.detail ?? 'authority revoked during Start', undefined, { native_result: n.result });
      }
      if (reason === NATIVE_REASON.unknown_handle) this.handles.move(rec, 'retired');
      throw this.rejected(n); // mode_conflict and not_ready keep the handle prepared
    }
    this.handles.started_(rec, n.result.Sequence);
    return { status: 200, body: { operation, sequence: n.result.Sequence } };
  }

  async discard(r: Request, g: Grant): Promise<Reply> {
    const rec = this.lookup(r, g, ['trajectory', 'program']);
    if (rec.state === 'started') throw refuse('handle_active', `handle ${rec.handle} is executing`);
    if (rec.state !== 'prepared') throw refuse(STATE_REASON[rec.state], `handle ${rec.handle} is ${rec.state}`);
    let n: NativeReply;
    try {
      n = await this.core.command('discard', g.generation, 0, { handle: rec.handle });
    } catch (e) {
      if (e instanceof CoreUnavailable) throw refuse('native_rejected', `no native receipt: ${e.message}`);
      throw e;
    }
    if (n.result.Result !== 0 && n.result.Reason !== NATIVE_REASON.unknown_handle) throw this.rejected(n);
    this.handles.move(rec, 'discarded');
    return { status: 200, body: { operation: 'discard_trajectory', sequence: n.result.Sequence } };
  }

  private rejected(n: NativeReply): Refusal {
    return motionRefusal(n);
  }
}

export function sameIdentity(a: Identity | undefined, b: Identity | undefined): boolean {
  if (!a && !b) return true;
  if (!a || !b) return false;
  return (
    a.plan_id === b.plan_id &&
    a.program_id === b.program_id &&
    a.program_digest === b.program_digest &&
    a.trajectory_digest === b.trajectory_digest &&
    a.source_digest === b.source_digest &&
    a.normalised_digest === b.normalised_digest &&
    a.manifest_revision === b.manifest_revision &&
    a.plan_revision === b.plan_revision
  );
}
