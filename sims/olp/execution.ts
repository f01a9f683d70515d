// Dense execution on the selected cell (document 3 part 4 /dense-execution/*): the OLP server holds the
// cell's grant for the UI (arm acquires it and keeps it renewed; stop and disarm release it), demands a
// UI heartbeat at least every 5 s while it holds the lease and otherwise stops the machine with
// ui_heartbeat_lost, loads a planned dense trajectory into POST /v1/program after the robot and cell
// identity check of document 2 part 2, plays it with start_program, and offers joint jog, joint moves
// (joint limits only, part 1) and a telemetry window decoded from the control service's binary
// telemetry. Request and reply bodies the document leaves "not shown" are in docs/profile.md
// "OLP server: dense execution".

import { decode, DenseFormatError } from '../dense/codec.ts';
import { ControlLink, decodeBatch, type Fence, type Reply, type WindowSample } from './control.ts';
import type { CatalogueCell } from './cells.ts';
import { OlpError, plain } from './http.ts';
import { JsonObject } from '../json.ts';

export const HEARTBEAT_MS = 5_000;
/** Joint jog speed at fraction 1 (rad/s or m/s): a profile value, well under every fixture axis's ceiling. */
export const JOG_SPEED = 0.25;
/** A jog update keeps the motion alive this long (the legacy jog timeout, document 1 part 4 jog: 1..250 ms). */
export const JOG_HOLD_MS = 150;
/** Joint moves run at this share of the move speed ceiling below. */
export const MOVE_SPEED = 0.3;
const WINDOW_EVERY = 10; // keep every 10th capture record (100 Hz at a 1 ms cycle)
/**
 * telemetry_busy (document 1 part 7: the ring header was torn while it was read; "Retry-After 1; retry same
 * cursor") is asked again with the same cursor after the second it names, this many times, before the
 * window is answered telemetry_unavailable.
 */
export const TELEMETRY_BUSY_RETRIES = 3;
export const TELEMETRY_BUSY_RETRY_MS = 1_000;

export interface Describe {
  backend: string;
  configuration_sha256: string;
  binding: { pair_id: string; revision: number | bigint; configuration_sha256: string; machine_sha256?: string };
  cycle_ns: number | bigint;
  axes: Array<{ id: string; position_unit: string; min_position: number; max_position: number; native_home: boolean; counts_per_unit: number; sign: number }>;
  capabilities: Array<{ name: string; state: string }>;
}

export interface Loaded {
  blob: Uint8Array;
  header: { plan_id: string; program_id: string; program_digest: string; trajectory_digest: string; samples: number; segments: number; robot_cell: Record<string, unknown> | null };
  notes: string[];
  identity?: Record<string, unknown>;
}

/** A control service refusal kept as the OLP error code (part 7). */
function refused(op: string, r: Reply): OlpError {
  const code = (r.error ?? 'control_refused').split(/[:\s]/)[0]!;
  const extra: Record<string, unknown> = {};
  if (r.data && typeof r.data === 'object' && r.data.limit_violation) extra.limit_violation = r.data.limit_violation;
  return new OlpError(r.status === 413 ? 413 : 409, code, `${op}: ${r.error ?? `HTTP ${r.status}`}`, extra);
}

/**
 * Refusals of stop by which the cell says the grant no longer holds it (document 1 part 3 fence table,
 * docs/profile.md "Fence checks"): it ran out, a newer session or core incarnation replaced it, it was
 * never this service's. The stop is then confirmed; any other refusal, or no answer, is not.
 */
const GRANT_GONE = new Set(['expired', 'control_session_stale', 'fence', 'daemon_restarted', 'no_grant']);

function linkDown(e: unknown): OlpError {
  return new OlpError(502, 'cell_unreachable', `control service: ${(e as Error).message}`);
}

export class CellSession {
  lease: (Fence & { lease_ms: number }) | null = null;
  armed = false;
  playing = false;
  stoppedReason = '';
  loaded: Loaded | null = null;
  private renewTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private playGeneration = 0n;
  private cursor = 0n;
  private jog: { target_id: string; session_id: string; revision: number; axis: string; direction: number; fraction: number } | null = null;
  private closed = false;
  /** A lease lost because the cell stopped answering: its stop is not confirmed until the cell answers again. */
  private unconfirmed: Fence | null = null;

  constructor(
    readonly cell: CatalogueCell,
    readonly link: ControlLink,
    readonly describe: Describe,
    private readonly o: { heartbeatMs: number; leaseMs: number; log: (l: string) => void },
  ) {
  }

  private get allMask(): number {
    return (1 << this.describe.axes.length) - 1;
  }

  private async op(op: string, fields: Record<string, unknown> = {}): Promise<Reply> {
    if (!this.lease) throw new OlpError(409, 'not_armed', `${op} needs the lease: arm first`);
    try {
      return await this.link.op(op, this.lease, fields);
    } catch (e) {
      throw linkDown(e);
    }
  }

  private async must(op: string, fields: Record<string, unknown> = {}): Promise<Reply> {
    const r = await this.op(op, fields);
    if (r.status !== 200) throw refused(op, r);
    return r;
  }

  // ---- lease, heartbeat ----

  async arm(): Promise<Record<string, unknown>> {
    if (!this.lease) {
      let r: Reply;
      try {
        r = await this.link.op('acquire', undefined, { controller: `olp-${process.pid}`, binding: this.describe.binding, ...(this.o.leaseMs ? { requested_lease_ms: this.o.leaseMs } : {}) });
      } catch (e) {
        throw linkDown(e);
      }
      if (r.status !== 200) throw refused('acquire', r);
      const g = r.data as { session: string; generation: number | bigint; lease_ms: number };
      this.lease = { session: g.session, generation: g.generation, lease_ms: Number(g.lease_ms) };
      this.stoppedReason = '';
      const every = Math.max(20, Math.floor(this.lease.lease_ms / 4));
      this.renewTimer = setInterval(() => void this.renew(), every);
    }
    this.heartbeat();
    try {
      await this.energise();
      if (this.loaded) await this.prepare(this.loaded);
    } catch (e) {
      await this.stop('arm_failed').catch(() => undefined);
      throw e;
    }
    this.armed = true;
    return this.view();
  }

  private async energise(): Promise<void> {
    await this.must('enable', { axis_mask: this.allMask });
    await this.must('arm');
  }

  private async renew(): Promise<void> {
    const l = this.lease;
    if (!l) return;
    try {
      const r = await this.link.op('renew', l);
      if (r.status !== 200 && this.lease === l) this.dropLease(`lease_lost: ${r.error ?? r.status}`);
    } catch (e) {
      if (this.lease === l) {
        this.dropLease(`lease_lost: ${(e as Error).message}`);
        this.unconfirmed = l;
      }
    }
  }

  private dropLease(reason: string): void {
    clearInterval(this.renewTimer);
    clearTimeout(this.heartbeatTimer);
    this.lease = null;
    this.armed = false;
    this.playing = false;
    this.jog = null;
    if (this.loaded) delete this.loaded.identity;
    if (reason) this.stoppedReason = reason;
  }

  /** The UI is alive: another heartbeat period before the machine is stopped. */
  heartbeat(): Record<string, unknown> {
    clearTimeout(this.heartbeatTimer);
    if (this.lease) {
      this.heartbeatTimer = setTimeout(() => {
        this.o.log(`olp: no UI heartbeat for ${this.o.heartbeatMs} ms: stopping ${this.cell.cell_id}`);
        void this.stop('ui_heartbeat_lost').catch(() => undefined);
      }, this.o.heartbeatMs);
    }
    return { ok: true, armed: this.lease !== null, heartbeat_timeout_ms: this.o.heartbeatMs };
  }

  /**
   * Stop the machine and release the lease (no fence, always answers; part 2 and part 4 /stop). The grant
   * stopped is the one held, or one whose stop is not confirmed yet (a stop that failed, a lease lost when
   * the cell stopped answering): until the cell confirms it, `stopped` is false, the mark stays and a cell
   * switch is refused with cell_previous_stop_failed (part 4 targets, part 7).
   */
  async stop(reason = 'stopped'): Promise<Record<string, unknown>> {
    const l = this.lease ?? this.unconfirmed;
    this.dropLease(reason);
    let stopped = true;
    let detail = '';
    if (l) {
      try {
        // A stop ends the grant by itself: stopping, then revoked once the core has drained (document 1
        // part 3). No release after it: one sent during the drain ended the grant as released before the
        // revocation, so whether the cell's log said grant_revoked depended on timing.
        const s = await this.link.op('stop', l);
        if (s.status !== 200) {
          detail = s.error ?? '';
          stopped = GRANT_GONE.has(detail.split(/[:\s]/)[0]!);
        }
      } catch (e) {
        stopped = false;
        detail = (e as Error).message;
      }
      this.unconfirmed = stopped ? null : l;
    }
    return { ...this.view(), stopped, ...(detail ? { stop_detail: detail } : {}) };
  }

  /** Whether a grant of this session may still hold the cell: held, or its stop not confirmed. */
  get holdsOrUnconfirmed(): boolean {
    return this.lease !== null || this.unconfirmed !== null;
  }

  // ---- program ----

  /** Stage a dense file after the robot and cell identity check (document 2 part 2); prepare it when armed. */
  async load(blob: Uint8Array): Promise<Record<string, unknown>> {
    let x;
    try {
      x = decode(blob, { order: 'digest_first', schemaReason: 'dense_schema_mismatch' });
    } catch (e) {
      if (e instanceof DenseFormatError) throw new OlpError(409, e.reason, `dense trajectory: ${e.message}`);
      throw e;
    }
    if (this.playing) throw new OlpError(409, 'program_already_executing', 'a program is playing: stop it first');
    const rc = x.robotCell instanceof JsonObject ? (plain(x.robotCell) as Record<string, unknown>) : null;
    const notes: string[] = [];
    if (rc === null) throw new OlpError(409, 'robot_cell_missing', 'the trajectory has no robot_cell block');
    if (!this.cell.robot_description_sha256) throw new OlpError(409, 'robot_cell_unavailable', `cell ${this.cell.cell_id} cannot say which robot it is (no robot description)`);
    if (rc.model_id !== this.cell.model_id || rc.robot_description_sha256 !== this.cell.robot_description_sha256) {
      throw new OlpError(409, 'robot_cell_mismatch', `trajectory is for ${String(rc.model_id)} ${String(rc.robot_description_sha256)}, cell ${this.cell.cell_id} is ${this.cell.model_id} ${this.cell.robot_description_sha256}`);
    }
    const mc = rc.machine_configuration_sha256;
    if (typeof mc === 'string' && mc !== '' && mc.replace(/^sha256:/, '') !== this.describe.configuration_sha256) {
      notes.push(`machine_configuration_sha256 ${mc} differs from the cell's ${this.describe.configuration_sha256} (recorded only)`);
    }
    const loaded: Loaded = {
      blob,
      header: { plan_id: x.planId ?? '', program_id: x.programId ?? '', program_digest: x.programDigest ?? '', trajectory_digest: x.digest, samples: x.t.length, segments: x.segments.length, robot_cell: rc },
      notes,
    };
    if (this.lease) await this.prepare(loaded);
    this.loaded = loaded;
    return { loaded: this.loadedView(), notes };
  }

  private async prepare(l: Loaded): Promise<void> {
    let r: Reply;
    try {
      r = await this.link.program(l.blob, this.lease!);
    } catch (e) {
      throw linkDown(e);
    }
    if (r.status !== 200) throw refused('prepare_program', r);
    l.identity = (r.data as { identity: Record<string, unknown> }).identity;
  }

  async play(): Promise<Record<string, unknown>> {
    if (!this.lease) throw new OlpError(409, 'not_armed', 'play needs the lease: arm first');
    if (!this.loaded) throw new OlpError(409, 'program_not_loaded', 'nothing loaded');
    const st = await this.status();
    const homeMask = this.describe.axes.reduce((m, a, i) => (a.native_home ? m | (1 << i) : m), 0);
    if ((Number(st.core?.home_valid_mask ?? 0) & homeMask) !== homeMask) throw new OlpError(409, 'home_required', 'every native-home axis must be homed before play');
    if (!this.loaded.identity) await this.prepare(this.loaded);
    this.playGeneration = BigInt(st.execution?.generation ?? 0);
    await this.must('start_program', { identity: this.loaded.identity });
    this.playing = true;
    return this.view();
  }

  async pause(): Promise<Record<string, unknown>> {
    // Halt: controlled deceleration to an enabled hold (document 1 part 4 halt); the program's handle is
    // retired, so play after pause prepares the program again.
    if (this.lease) {
      const r = await this.op('halt');
      if (r.status !== 200) throw refused('halt', r);
    }
    this.playing = false;
    if (this.loaded) delete this.loaded.identity;
    return this.view();
  }

  async home(): Promise<Record<string, unknown>> {
    const mask = this.describe.axes.reduce((m, a, i) => (a.native_home ? m | (1 << i) : m), 0);
    if (mask === 0) return { ...this.view(), homed_mask: 0 };
    await this.must('home', { axis_mask: mask });
    // Home leaves the axes disabled and the cell disarmed (document 1 part 4 home): energise again.
    await this.energise();
    if (this.loaded) await this.prepare(this.loaded);
    return { ...this.view(), homed_mask: mask };
  }

  // ---- jog and moves (joint limits only: part 1) ----

  private axisIndex(axis: unknown): number {
    const i = this.describe.axes.findIndex((a) => a.id === axis);
    if (i < 0) throw new OlpError(400, 'invalid_request', `axis must be one of ${this.describe.axes.map((a) => a.id).join(', ')}`);
    return i;
  }

  jogState(): Record<string, unknown> {
    return { active: this.jog !== null, ...(this.jog ?? {}), speed_at_full_fraction: JOG_SPEED, hold_ms: JOG_HOLD_MS };
  }

  async jogBegin(b: { target_id: string; session_id: string; revision: number; axis: string; direction: number; fraction: number }): Promise<Record<string, unknown>> {
    this.axisIndex(b.axis);
    if (!this.lease) throw new OlpError(409, 'not_armed', 'jog needs the lease: arm first');
    if (b.target_id !== this.cell.cell_id) throw new OlpError(409, 'target_changed', `jog target ${b.target_id} is not the selected cell ${this.cell.cell_id}`);
    if (this.playing) throw new OlpError(409, 'program_already_executing', 'a program is playing');
    this.jog = { ...b };
    await this.jogSend();
    return this.jogState();
  }

  async jogUpdate(b: { target_id: string; session_id: string; revision: number; axis: string; direction: number; fraction: number }): Promise<Record<string, unknown>> {
    this.axisIndex(b.axis);
    const j = this.jog;
    if (!j || j.session_id !== b.session_id || j.target_id !== b.target_id) throw new OlpError(409, 'jog_session_unknown', 'no jog session with this target_id and session_id: begin first');
    if (b.revision <= j.revision) throw new OlpError(409, 'jog_revision_stale', `revision ${b.revision} is not after ${j.revision}`);
    Object.assign(j, { revision: b.revision, axis: b.axis, direction: b.direction, fraction: b.fraction });
    await this.jogSend();
    return this.jogState();
  }

  async jogEnd(b: { session_id?: string }): Promise<Record<string, unknown>> {
    const j = this.jog;
    this.jog = null;
    if (j && this.lease && (b.session_id === undefined || b.session_id === j.session_id)) {
      const r = await this.op('jog', { axis_mask: this.allMask, velocity: this.describe.axes.map(() => 0), timeout_ms: 1 });
      if (r.status !== 200) throw refused('jog', r);
    }
    return this.jogState();
  }

  /** One legacy jog command for the session's axis (docs/profile.md: the OLP's jog lane). */
  private async jogSend(): Promise<void> {
    const j = this.jog!;
    const i = this.axisIndex(j.axis);
    const a = this.describe.axes[i]!;
    const v = j.direction * j.fraction * JOG_SPEED;
    const st = await this.status();
    const q = Number(st.axes?.[i]?.position ?? 0);
    // Joint limits only (part 1): no jog further towards a limit from within one hold of it.
    const reach = q + v * (JOG_HOLD_MS / 1000);
    if ((v > 0 && reach > a.max_position) || (v < 0 && reach < a.min_position)) {
      throw new OlpError(409, 'joint_limit', `${a.id} at ${q} would pass its limit ${v > 0 ? a.max_position : a.min_position}`, {
        limit_violation: { kind: 'position', segment: 0, sample: 0, axis: a.id, value: reach, limit: v > 0 ? a.max_position : a.min_position, unit: a.position_unit },
      });
    }
    const velocity = this.describe.axes.map((_x, k) => (k === i ? v : 0));
    const r = await this.op('jog', { axis_mask: this.allMask, velocity, timeout_ms: JOG_HOLD_MS });
    if (r.status !== 200) throw refused('jog', r);
  }

  /**
   * Joint move through a list of points (each a full joint vector in Describe order), planned here: each leg
   * a smooth (cosine) profile at MOVE_SPEED of its axis speed, checked against joint limits only.
   */
  async move(points: number[][]): Promise<Record<string, unknown>> {
    if (!this.lease) throw new OlpError(409, 'not_armed', 'move needs the lease: arm first');
    if (this.playing) throw new OlpError(409, 'program_already_executing', 'a program is playing');
    const n = this.describe.axes.length;
    points.forEach((p, k) => {
      if (!Array.isArray(p) || p.length !== n || !p.every((x) => typeof x === 'number' && Number.isFinite(x))) throw new OlpError(400, 'invalid_request', `points[${k}] must be ${n} finite numbers`);
      p.forEach((x, i) => {
        const a = this.describe.axes[i]!;
        if (x < a.min_position || x > a.max_position) {
          throw new OlpError(409, 'joint_limit', `points[${k}] ${a.id} ${x} is outside ${a.min_position}..${a.max_position}`, {
            limit_violation: { kind: 'position', segment: k, sample: 0, axis: a.id, value: x, limit: x < a.min_position ? a.min_position : a.max_position, unit: a.position_unit },
          });
        }
      });
    });
    const st = await this.status();
    const start = this.describe.axes.map((_a, i) => Number(st.axes?.[i]?.position ?? 0));
    const cycle = Number(this.describe.cycle_ns);
    const out: Array<{ time_ns: number; position: number[]; velocity: number[] }> = [{ time_ns: 0, position: start, velocity: start.map(() => 0) }];
    let from = start;
    let t0 = 0;
    for (const to of points) {
      const d = Math.max(...to.map((x, i) => Math.abs(x - from[i]!)));
      const dur = Math.max(0.2, (Math.PI / 2) * (d / MOVE_SPEED));
      const steps = Math.max(2, Math.ceil((dur * 1e9) / (cycle * 10)));
      for (let s = 1; s <= steps; s++) {
        const u = s / steps;
        const w = (1 - Math.cos(Math.PI * u)) / 2;
        const dw = (Math.PI / 2) * Math.sin(Math.PI * u) / dur;
        out.push({
          time_ns: Math.round(t0 + u * dur * 1e9),
          position: from.map((x, i) => x + (to[i]! - x) * w),
          velocity: from.map((x, i) => (s === steps ? 0 : (to[i]! - x) * dw)),
        });
      }
      t0 += dur * 1e9;
      from = to;
    }
    // A newer preparation supersedes the prepared program (document 1 part 3): play prepares it again.
    if (this.loaded) delete this.loaded.identity;
    const p = await this.must('prepare_trajectory', { axis_mask: this.allMask, points: out });
    await this.must('start_trajectory', { handle: p.body.handle });
    return { ...this.view(), move: { points: out.length, duration_s: t0 / 1e9 } };
  }

  /** A control operation under the lease; a refusal keeps the control service's reason (part 7). */
  async command(op: string, fields: Record<string, unknown> = {}): Promise<Reply> {
    return this.must(op, fields);
  }

  /** Joint positions of every Describe axis, from the control service's Status. */
  async positions(): Promise<number[]> {
    const st = await this.status();
    return this.describe.axes.map((_a, i) => Number(st.axes?.[i]?.position ?? 0));
  }

  /** Prepare and start a joint trajectory (points in Describe axis order); retires the prepared program. */
  async trajectory(points: Array<{ time_ns: number; position: number[]; velocity: number[] }>): Promise<void> {
    if (this.loaded) delete this.loaded.identity;
    const p = await this.must('prepare_trajectory', { axis_mask: this.allMask, points });
    await this.must('start_trajectory', { handle: p.body.handle });
  }

  // ---- observation ----

  async status(): Promise<Record<string, any>> {
    let r: Reply;
    try {
      r = await this.link.status();
    } catch (e) {
      throw linkDown(e);
    }
    if (r.status !== 200) throw refused('status', r);
    const d = r.data as Record<string, any>;
    if (this.playing) {
      const e = d.execution ?? {};
      const g = BigInt(e.generation ?? 0);
      if (g > this.playGeneration && e.state !== 'executing' && e.state !== 'prepared' && e.state !== '') this.playing = false;
    }
    return d;
  }

  loadedView(): Record<string, unknown> | null {
    return this.loaded ? { ...this.loaded.header, prepared: this.loaded.identity !== undefined, notes: this.loaded.notes } : null;
  }

  view(): Record<string, unknown> {
    return { armed: this.armed, lease_held: this.lease !== null, lease_ms: this.lease?.lease_ms ?? 0, playing: this.playing, stopped_reason: this.stoppedReason, heartbeat_timeout_ms: this.o.heartbeatMs, loaded: this.loadedView() };
  }

  /**
   * The last `windowMs` of telemetry, read on demand (a continuous poll would copy every 5392-byte record,
   * 5 MB/s at 1 kHz, whether anyone looks or not): Status core.cycle hints where the newest record is
   * (one capture record per cycle on the reference stack; a hint ahead of the ring, 409, falls back to
   * the last cursor read). Every 10th record is kept; positions in each axis's unit (counts x sign /
   * counts_per_unit).
   */
  async telemetryWindow(windowMs: number): Promise<Record<string, unknown>> {
    const axes = this.describe.axes;
    const per = BigInt(Math.ceil((windowMs * 1e6) / Number(this.describe.cycle_ns)));
    let after = this.cursor;
    try {
      const cycle = (await this.link.status()).data?.core?.cycle;
      if (typeof cycle === 'number' || typeof cycle === 'bigint') {
        const hint = BigInt(cycle) - per - 16n;
        if (hint > after) after = hint;
      }
    } catch (e) {
      throw linkDown(e);
    }
    const records: WindowSample[] = [];
    let busy = 0;
    for (let i = 0; i < 64; i++) {
      let bytes: Buffer;
      try {
        const r = await this.link.raw('GET', `/v1/telemetry?after=${after}`);
        if (r.status === 409 && errorLabel(r.bytes) === 'telemetry_busy' && busy < TELEMETRY_BUSY_RETRIES) {
          busy++;
          await new Promise((resolve) => setTimeout(resolve, TELEMETRY_BUSY_RETRY_MS));
          continue; // the same cursor again
        }
        if (r.status === 409 && after !== this.cursor) {
          after = this.cursor; // the hint was ahead of the ring
          continue;
        }
        if (r.status !== 200) throw new OlpError(409, 'telemetry_unavailable', `telemetry: HTTP ${r.status} ${r.bytes.toString('utf8').slice(0, 200)}`);
        bytes = r.bytes;
      } catch (e) {
        if (e instanceof OlpError) throw e;
        throw linkDown(e);
      }
      const b = decodeBatch(bytes);
      for (const x of b.records) if (x.seq % BigInt(WINDOW_EVERY) === 0n) records.push(x);
      if (b.last > this.cursor) this.cursor = b.last;
      if (b.records.length < 4096 || b.last === after) break;
      after = b.last;
    }
    const newest = records.at(-1)?.t_ns ?? 0n;
    const from = newest - BigInt(Math.round(windowMs)) * 1_000_000n;
    return {
      cell_id: this.cell.cell_id,
      window_ms: windowMs,
      period_ns: Number(this.describe.cycle_ns) * WINDOW_EVERY,
      axes: axes.map((a) => ({ id: a.id, unit: a.position_unit })),
      samples: records
        .filter((x) => x.t_ns >= from)
        .map((x) => ({ t_ns: x.t_ns, seq: x.seq, armed: x.armed === 1, active_mode: x.active_mode, motion_state: x.motion_state, position: x.position_counts.map((c, i) => (c * Number(axes[i]?.sign ?? 1)) / Number(axes[i]?.counts_per_unit ?? 1)) })),
    };
  }

  async close(stopFirst: boolean): Promise<boolean> {
    // The lease, or a grant whose stop is unconfirmed, is stopped first; a stop the cell does not confirm
    // keeps this session selected (the caller answers cell_previous_stop_failed).
    if (stopFirst && this.holdsOrUnconfirmed && (await this.stop('target_switched')).stopped !== true) return false;
    this.dropLease('');
    this.closed = true;
    await this.link.close();
    return true;
  }
}

/** The reason label a control service's JSON error reply leads with (document 1 part 2 `error`), if any. */
function errorLabel(body: Buffer): string | undefined {
  return /"error"\s*:\s*"([a-z_]+)/.exec(body.subarray(0, 4096).toString('utf8'))?.[1];
}
