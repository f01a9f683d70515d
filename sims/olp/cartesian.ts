// Cartesian jog and moves on the selected cell (document 3 part 4 /dense-execution/cartesian/*; part 1:
// checked against joint limits only, no collisions; part 2: /cartesian/stop and /cartesian/halt are
// fenced). The robot's kinematics come from its description in the robot store (./kinematics.ts). A
// Cartesian jog turns the operator's intent (a twist) into joint velocities by damped least squares at
// every update interval and streams them to the control service's jog lane (the legacy jog, as joint
// jog does); a Cartesian move becomes a joint trajectory (inverse kinematics along the straight line,
// cosine-timed) through prepare_trajectory and start_trajectory. Bodies are ours: docs/profile.md "OLP
// server: Cartesian jog and moves".

import type { CellSession } from './execution.ts';
import { OlpError } from './http.ts';
import { dls, forward, interpolate, inverse, jacobian, poseError, poseOf, sigmaMin, SINGULAR_SIGMA, xyzRpy, type Chain, type M4, type V3 } from './kinematics.ts';

export const CART_UPDATE_MS = 50;
/** Each streamed jog command holds for this long (the jog lane stops by itself after it). */
export const CART_HOLD_MS = 150;
/** An intent older than this is no intent: the tool stops. */
export const CART_INTENT_MAX_AGE_MS = 250;
export const CART_LINEAR_M_S = 0.05;
export const CART_ANGULAR_RAD_S = 0.25;
export const MOVE_LINEAR_M_S = 0.1;
export const MOVE_ANGULAR_RAD_S = 0.5;
/** Joint speed ceiling of a Cartesian move's trajectory (unit/s), as joint moves (MOVE_SPEED). */
export const MOVE_JOINT_SPEED = 0.3;

interface Intent {
  revision: number;
  linear: V3;
  angular: V3;
  at: number;
}

const vec3 = (v: unknown, what: string, lo: number, hi: number): V3 => {
  if (!Array.isArray(v) || v.length !== 3 || !v.every((x) => typeof x === 'number' && Number.isFinite(x) && x >= lo && x <= hi)) {
    throw new OlpError(400, 'invalid_request', `${what} must be three numbers ${lo}..${hi}`);
  }
  return v as V3;
};

export class CartesianSession {
  private session: { id: string; frame: 'world' | 'tool'; intent: Intent | null } | null = null;
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private lastSent: 'moving' | 'still' = 'still';
  stoppedReason = '';
  private stoppedDetail = '';
  ticks = 0;

  constructor(
    readonly cell: CellSession,
    readonly chain: Chain,
    private readonly log: (l: string) => void,
  ) {
    const ids = cell.describe.axes.map((a) => a.id);
    const missing = chain.movable.filter((n) => !ids.includes(n));
    if (missing.length) throw new OlpError(409, 'cartesian_unavailable', `the robot's joints ${missing.join(', ')} are not axes of cell ${cell.cell.cell_id}`);
  }

  private joints(q: number[]): Record<string, number> {
    const out: Record<string, number> = {};
    this.cell.describe.axes.forEach((a, i) => (out[a.id] = q[i]!));
    return out;
  }

  private axisIndex(name: string): number {
    return this.cell.describe.axes.findIndex((a) => a.id === name);
  }

  async state(): Promise<Record<string, unknown>> {
    const q = this.joints(await this.cell.positions());
    const { pose } = forward(this.chain, q);
    const s = this.session;
    return {
      active: s !== null,
      session_id: s?.id ?? '',
      frame: s?.frame ?? 'world',
      revision: s?.intent?.revision ?? 0,
      stopped_reason: this.stoppedReason,
      tool_link: 'tool0',
      tool_pose: xyzRpy(pose),
      sigma_min: sigmaMin(jacobian(this.chain, q)),
      active_joints: this.chain.active,
      update_interval_ms: CART_UPDATE_MS,
      hold_ms: CART_HOLD_MS,
      linear_speed_m_s: CART_LINEAR_M_S,
      angular_speed_rad_s: CART_ANGULAR_RAD_S,
    };
  }

  private needLease(what: string): void {
    if (!this.cell.lease) throw new OlpError(409, 'not_armed', `${what} needs the lease: arm first`);
    if (this.cell.playing) throw new OlpError(409, 'program_already_executing', 'a program is playing');
  }

  async start(b: Record<string, unknown>): Promise<Record<string, unknown>> {
    const id = b.session_id;
    if (typeof id !== 'string' || id === '') throw new OlpError(400, 'invalid_request', 'session_id must be a nonempty string');
    const frame = b.frame ?? 'world';
    if (frame !== 'world' && frame !== 'tool') throw new OlpError(400, 'invalid_request', 'frame must be world or tool');
    this.needLease('Cartesian jog');
    this.session = { id, frame, intent: null };
    this.stoppedReason = '';
    this.stoppedDetail = '';
    clearInterval(this.timer);
    this.timer = setInterval(() => void this.tick(), CART_UPDATE_MS);
    return this.state();
  }

  intent(b: Record<string, unknown>): Promise<Record<string, unknown>> {
    const s = this.session;
    if (!s || s.id !== b.session_id) {
      if (this.stoppedReason === 'singularity' || this.stoppedReason === 'joint_limit') throw new OlpError(409, this.stoppedReason, `the Cartesian jog stopped: ${this.stoppedDetail}`);
      throw new OlpError(409, 'cartesian_session_unknown', 'no Cartesian jog session with this session_id: start first');
    }
    const revision = b.revision;
    if (typeof revision !== 'number' || !Number.isInteger(revision) || revision < 0) throw new OlpError(400, 'invalid_request', 'revision must be an integer >= 0');
    if (s.intent && revision <= s.intent.revision) throw new OlpError(409, 'cartesian_revision_stale', `revision ${revision} is not after ${s.intent.revision}`);
    s.intent = { revision, linear: vec3(b.linear ?? [0, 0, 0], 'linear', -1, 1), angular: vec3(b.angular ?? [0, 0, 0], 'angular', -1, 1), at: Date.now() };
    return this.state();
  }

  private end(reason: string, detail = ''): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.session = null;
    if (reason) {
      this.stoppedReason = reason;
      this.stoppedDetail = detail;
    }
  }

  /** One update: joint velocities for the intent's twist, streamed to the jog lane. */
  private async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const s = this.session;
      if (!s) return;
      if (!this.cell.lease) return this.end('lease_lost');
      const n = this.cell.describe.axes.length;
      const zero = new Array<number>(n).fill(0);
      const i = s.intent;
      if (!i || Date.now() - i.at > CART_INTENT_MAX_AGE_MS || [...i.linear, ...i.angular].every((x) => x === 0)) {
        if (this.lastSent === 'moving') await this.send(zero, 1);
        this.lastSent = 'still';
        return;
      }
      const q = this.joints(await this.cell.positions());
      const { pose } = forward(this.chain, q);
      let v: V3 = i.linear.map((x) => x * CART_LINEAR_M_S) as V3;
      let w: V3 = i.angular.map((x) => x * CART_ANGULAR_RAD_S) as V3;
      if (s.frame === 'tool') {
        const rot = (a: V3): V3 => [0, 1, 2].map((r) => pose[4 * r]! * a[0] + pose[4 * r + 1]! * a[1] + pose[4 * r + 2]! * a[2]) as V3;
        v = rot(v);
        w = rot(w);
      }
      const J = jacobian(this.chain, q);
      const sigma = sigmaMin(J);
      if (sigma < SINGULAR_SIGMA) {
        await this.send(zero, 1);
        this.lastSent = 'still';
        return this.end('singularity', `the Jacobian's smallest singular value is ${sigma.toExponential(3)} (under ${SINGULAR_SIGMA}): not driven through`);
      }
      const qd = dls(J, [...v, ...w], 0.01);
      const velocity = [...zero];
      for (const [k, name] of this.chain.active.entries()) {
        const ax = this.axisIndex(name);
        const a = this.cell.describe.axes[ax]!;
        const reach = q[name]! + qd[k]! * (CART_HOLD_MS / 1000);
        if (reach > a.max_position || reach < a.min_position) {
          await this.send(zero, 1);
          this.lastSent = 'still';
          return this.end('joint_limit', `${name} at ${q[name]} would pass its limit ${reach > a.max_position ? a.max_position : a.min_position}`);
        }
        velocity[ax] = qd[k]!;
      }
      await this.send(velocity, CART_HOLD_MS);
      this.lastSent = 'moving';
      this.ticks++;
    } catch (e) {
      this.log(`olp: Cartesian jog update failed: ${(e as Error).message}`);
      this.end('jog_refused', (e as Error).message);
    } finally {
      this.ticking = false;
    }
  }

  private async send(velocity: number[], timeoutMs: number): Promise<void> {
    if (!this.cell.lease) return;
    await this.cell.command('jog', { axis_mask: (1 << velocity.length) - 1, velocity, timeout_ms: timeoutMs });
  }

  async stop(): Promise<Record<string, unknown>> {
    const was = this.session !== null;
    this.end('stopped');
    if (was && this.cell.lease) await this.send(new Array<number>(this.cell.describe.axes.length).fill(0), 1);
    this.lastSent = 'still';
    return this.state();
  }

  async halt(): Promise<Record<string, unknown>> {
    this.end('halted');
    if (this.cell.lease) await this.cell.command('halt');
    this.lastSent = 'still';
    return this.state();
  }

  /**
   * A Cartesian move to {xyz_m, rpy_rad} of tool0 in the world frame: the straight line (rotation along
   * the geodesic) sampled every ten cycles on a cosine profile, inverse kinematics at every sample seeded
   * from the one before; a sample past a joint limit, at a singularity or unreachable refuses the move
   * before anything moves.
   */
  async move(b: Record<string, unknown>): Promise<Record<string, unknown>> {
    const pose = b.pose as Record<string, unknown> | undefined;
    if (!pose || typeof pose !== 'object') throw new OlpError(400, 'invalid_request', 'pose {xyz_m, rpy_rad} is required');
    const xyz = vec3(pose.xyz_m, 'pose.xyz_m', -100, 100);
    const rpy = vec3(pose.rpy_rad, 'pose.rpy_rad', -2 * Math.PI, 2 * Math.PI);
    this.needLease('a Cartesian move');
    if (this.session) throw new OlpError(409, 'cartesian_jog_active', 'a Cartesian jog session is active: stop it first');
    const q0v = await this.cell.positions();
    const q0 = this.joints(q0v);
    const T0 = forward(this.chain, q0).pose;
    const T1: M4 = poseOf(xyz, rpy);
    const refuse = (r: Exclude<ReturnType<typeof inverse>, { ok: true }>, sample: number): OlpError => {
      if (r.reason === 'joint_limit') {
        const a = this.cell.describe.axes[this.axisIndex(r.joint!)]!;
        return new OlpError(409, 'joint_limit', `sample ${sample}: ${r.detail}`, { limit_violation: { kind: 'position', segment: 0, sample, axis: a.id, value: r.value, limit: r.limit, unit: a.position_unit } });
      }
      return new OlpError(409, r.reason, `sample ${sample}: ${r.detail}`);
    };
    const end = inverse(this.chain, T1, q0);
    if (!end.ok) throw refuse(end, -1);
    const e = poseError(T0, T1);
    const dist = Math.hypot(e[0]!, e[1]!, e[2]!);
    const ang = Math.hypot(e[3]!, e[4]!, e[5]!);
    const jointSpan = Math.max(...this.chain.active.map((n) => Math.abs(end.q[n]! - q0[n]!)));
    const dur = Math.max(0.3, (Math.PI / 2) * Math.max(dist / MOVE_LINEAR_M_S, ang / MOVE_ANGULAR_RAD_S, jointSpan / MOVE_JOINT_SPEED));
    const cycle = Number(this.cell.describe.cycle_ns);
    const steps = Math.max(2, Math.ceil((dur * 1e9) / (cycle * 10)));
    const qs: number[][] = [q0v];
    let seed = q0;
    for (let k = 1; k <= steps; k++) {
      const u = (1 - Math.cos((Math.PI * k) / steps)) / 2;
      const r = inverse(this.chain, interpolate(T0, T1, u), seed, 50);
      if (!r.ok) throw refuse(r, k);
      seed = r.q;
      qs.push(this.cell.describe.axes.map((a, i) => (a.id in r.q && this.chain.active.includes(a.id) ? r.q[a.id]! : q0v[i]!)));
    }
    const dt = dur / steps;
    const points = qs.map((p, k) => ({
      time_ns: Math.round(k * dt * 1e9),
      position: p,
      velocity: p.map((_x, i) => (k === 0 || k === steps ? 0 : (qs[k + 1]![i]! - qs[k - 1]![i]!) / (2 * dt))),
    }));
    await this.cell.trajectory(points);
    return { move: { points: points.length, duration_s: dur, target: { xyz_m: xyz, rpy_rad: rpy }, joints: this.joints(qs.at(-1)!) } };
  }

  close(): void {
    this.end('');
  }
}
