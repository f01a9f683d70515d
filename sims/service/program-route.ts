// POST /v1/program: prepare_program, and start_program (document 1 part 4; document 2 "Admission by the
// control service"). prepare_program order: declared body size (413), the two headers
// (invalid_control_generation), the fence (the service's own check), one upload at a time (busy,
// native_result.Reason 5), no program executing (program_already_executing), the body read up to its
// limit, the file decoded in a worker thread, the live-machine checks of programs.ts, then the executed
// points handed to the core's plan slot under a new program handle. start_program finds the prepared
// program by its complete identity and starts it through the same start gate as start_trajectory.

import type { IncomingMessage } from 'node:http';
import type { CompiledMachine } from '../config/types.ts';
import { NATIVE_OP } from '../core/protocol.ts';
import { PLAN_ARENA_MIN_BYTES, PlanLease } from '../core/plan-arena.ts';
import { RECORD } from '../dense/codec.ts';
import type { PlanArrays, PlanWorkspace } from '../core/protocol.ts';
import type { Grant, Reply } from './authority.ts';
import { CoreUnavailable, type CoreLink, type NativeReply } from './core-link.ts';
import { Refusal, refuse, type Request } from './envelope.ts';
import { STATE_REASON, type HandleRecord, type HandleTable } from './handles.ts';
import { motionRefusal } from './native-labels.ts';
import { workerEntry } from '../paths.ts';
import { WarmWorker } from '../warm-worker.ts';
import type { AdmitAnswer, AdmitJob, AdmittedProgram, ProgramAxis, ProgramOutput } from './programs.ts';
import { sameIdentity, type TrajectoryOps } from './trajectories.ts';
import { parseNonzeroU64, readBoundedBody } from '../primitives.ts';

/** Document 1 part 8: 1048580 + 250000 x 153. */
export const PROGRAM_BODY_LIMIT = 39298580;
export const PROGRAM_HEADER_LIMIT = 1048576;
const OP = 'prepare_program';
const WORKER = workerEntry('dense-decode');
/** Native command reason 5: capacity (document 1 part 7). */
const CAPACITY = 5;

export interface ProgramRouteOptions {
  /** The service's fence check for prepare_program; throws a Refusal. */
  fence: (session: string, generation: bigint, owner: string) => Grant;
  /** The grant still current and not stopping (checked again after every wait). */
  current: (g: Grant) => boolean;
  machine: CompiledMachine;
  /** The pair revision the service was started with (`--pair-revision`, Describe binding.revision). */
  manifestRevision: bigint;
  core: CoreLink;
  handles: HandleTable;
  trajectories: TrajectoryOps;
}

export class ProgramUploads {
  private uploading = false;
  private readonly axes: ProgramAxis[];
  private readonly outputs: ProgramOutput[];

  constructor(private readonly o: ProgramRouteOptions) {
    this.axes = o.machine.axes.map((a) => ({
      id: a.id, rad: a.position_unit === 'rad', min: a.min_position, max: a.max_position, maxVelocity: a.max_velocity,
      ...(a.max_acceleration !== undefined ? { maxAcceleration: a.max_acceleration } : {}), countsPerUnit: a.counts_per_unit, sign: a.sign,
    }));
    this.outputs = (o.machine.io?.outputs ?? []).map((x) => ({ name: x.name, torch: x.torch }));
    // The decode thread starts with the first upload, not with the service: most stacks never take a
    // program, and a thread costs every stack start about 40 ms of processor time.
  }

  /** A program handle is executing (its Start acknowledged, its end not yet reported). */
  private executing(): HandleRecord | undefined {
    return this.o.handles.all().find((h) => h.kind === 'program' && h.state === 'started');
  }

  /** `owner`: the transport and principal the request came from (docs/profile.md "Session ownership"). */
  async prepare(req: IncomingMessage, owner: string): Promise<Reply> {
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (declared > PROGRAM_BODY_LIMIT) return this.tooLarge(req);
    const session = String(req.headers['x-control-session'] ?? '');
    const genText = String(req.headers['x-control-generation'] ?? '');
    if (parseNonzeroU64(genText) === undefined) {
      req.resume();
      return fail(409, 'invalid_control_generation', 'X-Control-Generation is not a nonzero decimal uint64');
    }
    let g: Grant;
    try {
      g = this.o.fence(session, BigInt(genText), owner);
    } catch (e) {
      req.resume();
      if (e instanceof Refusal) return fail(e.status, e.label, e.detail, e.data);
      throw e;
    }
    if (this.uploading) {
      req.resume();
      const native_result = { Sequence: 0n, Handle: 0n, Generation: g.generation, Operation: NATIVE_OP.prepare, Result: 1, Reason: CAPACITY, AxisMask: 0 };
      return { status: 409, body: { operation: OP, error: 'busy: another program upload is in progress', native_result } };
    }
    const running = this.executing();
    if (running) {
      req.resume();
      return fail(409, 'program_already_executing', `program handle ${running.handle} is executing`);
    }
    this.uploading = true;
    let lease: PlanLease | undefined;
    try {
      const body = await readBoundedBody(req, { limit: PROGRAM_BODY_LIMIT, refuse: 'counted' });
      if (body === 'too_large') return fail(413, 'body_too_large', `a program is at most ${PROGRAM_BODY_LIMIT} bytes`);
      // Nobody is left to answer; the slot is freed below and nothing was prepared.
      if (body === 'gone') return fail(409, 'invalid_request_envelope', 'the client went away before the body ended');
      // Decoded, checked and turned into the core's plan in the decode worker (sims/dense/decode-worker.ts):
      // nothing of it runs here, so renewals, status and events keep their answers while a large program
      // is admitted (document 1 part 3). The worker writes a large plan straight into a plan arena slot,
      // claimed now and given back below when the plan did not go there or never reaches the core.
      // Only a body that can hold a plan large enough for the arena claims a slot (a sample is RECORD bytes
      // of the file, document 2 part 2): a small program leaves the slots to the uploads they are for.
      const N = this.o.machine.axes.length;
      const arena = Math.floor(body.length / RECORD) * N * 8 >= PLAN_ARENA_MIN_BYTES ? this.o.core.planArena : undefined;
      const slot = arena ? arena.claim() : -1;
      lease = arena && slot >= 0 ? new PlanLease(arena, slot) : undefined;
      const a = await admitOffLoop({
        bytes: body, maxHeaderBytes: PROGRAM_HEADER_LIMIT, axes: this.axes, outputs: this.outputs, manifestRevision: this.o.manifestRevision,
        ...(lease ? { arena: { buffer: lease.arena.buffer, slot: lease.slot } } : {}),
      });
      if ('reason' in a) return fail(409, a.reason, a.message.slice(a.reason.length + 2));
      if ('refusal' in a) {
        const e = a.refusal;
        return { status: 409, body: { operation: OP, error: e.text, data: e.limitViolation ? { limit_violation: e.limitViolation } : undefined } };
      }
      if (!a.inSlot) {
        lease?.release();
        lease = undefined;
      }
      const p: Admitted = { ...a.admitted, plan: a.inSlot ? undefined : a.plan, lease };
      // The fence must still hold after the upload (document 1 part 3: grant loss retires what is prepared).
      if (!this.o.current(g)) return fail(409, 'control_session_stale', 'the grant ended while the program was being received');
      const again = this.executing();
      if (again) return fail(409, 'program_already_executing', `program handle ${again.handle} is executing`);
      return await this.commit(g, p);
    } catch (e) {
      if (e instanceof Refusal) return fail(e.status, e.label, e.detail, e.data);
      throw e;
    } finally {
      // Only when the prepare was never posted (the core holds the slot after: PlanLease.handOver).
      lease?.release();
      this.uploading = false;
    }
  }

  /** Hand the plan to the core and record the program handle. */
  private commit(g: Grant, p: Admitted): Promise<Reply> {
    return this.o.handles.serialise('program', () => this.commitNow(g, p));
  }

  private async commitNow(g: Grant, p: Admitted): Promise<Reply> {
    const m = p.count;
    // The worker wrote a large plan into the arena slot (views of it taken here: no copy), a smaller one
    // into arrays of its own that came transferred.
    const lease = p.lease;
    const inSlot = lease ? lease.arena.plan(lease.slot, m, true) : undefined;
    const plan = inSlot ?? p.plan!;
    const { timeNs, position, velocity, hasVelocity, ioMask, ioValues } = plan;
    // The worker wrote the workspace's pages already (PlanArena.workspace keeps how far): nothing to fault in.
    const workspace = lease ? lease.arena.workspace(lease.slot, m) : p.plan!.workspace;
    const handle = this.o.handles.peekNext();
    let n: NativeReply;
    try {
      n = await this.o.core.prepare({
        generation: g.generation, handle, axisMask: p.axisMask, timeNs, position, velocity, hasVelocity,
        ioMask, ioValues, recovery: true,
      }, workspace, lease);
    } catch (e) {
      if (e instanceof CoreUnavailable) throw refuse('native_rejected', `no native receipt: ${e.message}`);
      throw e;
    } finally {
      lease?.release(); // only when the prepare was never posted (the core holds the slot after)
    }
    if (n.result.Result !== 2) throw motionRefusal(n);
    if (!this.o.current(g)) throw refuse('control_session_stale', 'the grant ended while the program was being prepared');
    const rec = this.o.handles.create('program', g.generation, this.o.core.incarnation, p.identity);
    rec.segmentOf = p.segment;
    return {
      status: 200,
      body: {
        operation: OP,
        data: {
          process_markers: p.markers, identity: p.identity, requires_process_io: p.requiresProcessIo, segments: p.segments, samples: p.samples,
          normalised_samples: m, axis_mask: p.axisMask,
        },
      },
    };
  }

  /**
   * start_program (document 1 part 4): the complete Identity from prepare_program, every field equal.
   * The newest program handle of this core incarnation with that identity is the one started; docs/profile.md
   * "Programs" gives the order of the refusals.
   */
  async start(r: Request, g: Grant): Promise<Reply> {
    const want = r.identity!;
    const programs = this.o.handles.all().filter((h) => h.kind === 'program');
    let match: HandleRecord | undefined;
    for (const h of programs) if (sameIdentity(h.identity, want)) match = h;
    if (match?.state === 'started') throw refuse('handle_started', `program handle ${match.handle} is already executing`);
    const running = this.executing();
    if (running) throw refuse('program_already_executing', `program handle ${running.handle} is executing`);
    if (!match) throw refuse('program_identity_mismatch', programs.length ? 'no prepared program has this identity' : 'no program is prepared');
    if (match.incarnation !== this.o.core.incarnation) throw refuse('unknown_handle', `program handle ${match.handle} belongs to another core incarnation`);
    if (match.state !== 'prepared') throw refuse(STATE_REASON[match.state], `program handle ${match.handle} is ${match.state}`);
    if (match.generation !== g.generation) throw refuse('unknown_handle', `program handle ${match.handle} belongs to another grant`);
    return this.o.trajectories.startRecord(match, g, 'start_program');
  }

  private tooLarge(req: IncomingMessage): Reply {
    let seen = 0;
    req.on('data', (c: Buffer) => {
      seen += c.length;
      if (seen > 64 * 1024 * 1024) req.socket.destroy();
    });
    req.resume();
    return fail(413, 'body_too_large', `a program is at most ${PROGRAM_BODY_LIMIT} bytes`);
  }
}

function fail(status: 409 | 413 | 404, label: string, detail?: string, data?: unknown): Reply {
  return { status, body: { operation: OP, error: detail ? `${label}: ${detail}` : label, data } };
}

/** An admitted program as the worker answered it, with its plan and the arena slot it may be in. */
type Admitted = AdmittedProgram & { plan: (PlanArrays & { workspace: PlanWorkspace }) | undefined; lease: PlanLease | undefined };

/** The decoder and admission, a worker kept warm between uploads (sims/warm-worker.ts). */
const decoder = new WarmWorker<AdmitAnswer>(WORKER, 'dense decode');

async function admitOffLoop(job: Omit<AdmitJob, 'id' | 'bytes'> & { bytes: Buffer }): Promise<Exclude<AdmitAnswer, { defect: string }>> {
  const { bytes, ...fields } = job;
  // The body is not needed here after: handed over, not copied.
  const m = await decoder.ask(bytes, fields, { transfer: true });
  if ('defect' in m) throw new Error(`dense decoder: ${m.defect}`);
  return m;
}
