// Jog in the control service (document 1 part 1 transports: jog.sock; part 2 Request jog fields,
// Response native_jog_result; part 4 begin_jog, end_jog, jog, update_jog, GET /v1/jog/clock, GET /v1/jog,
// GET /v1/jog/ingress). The service checks what the request itself says (clock incarnation, deadline
// after origin, masks, the legacy velocity array and timeout), submits one native command, and maps the
// native receipt to catalogue labels. jog.sock is a Unix datagram socket (unix-dgram, a native module:
// node:dgram does UDP only) carrying `local_jog_update` frames; every frame is checked here, counted in
// the ingress observation, and forwarded to the core only when it passes. Layout, reasons and labels:
// docs/profile.md "Jog".

import { motionLabel } from './native-labels.ts';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { chmod, rm } from 'node:fs/promises';
import { SOCKET_MODE } from './socket-dir.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { JogCmd, JogStatus } from '../core/protocol.ts';
import { JOG_REASON, jogReasonName, jogReasonOf, jogSessionStale, NATIVE_REASON } from '../core/reasons.ts';
import type { Authority, Grant, Reply } from './authority.ts';
import { CoreUnavailable, type CoreLink, type NativeReply } from './core-link.ts';
import { Refusal, refuse, type Request } from './envelope.ts';

/** local_jog_update frame (little-endian; docs/profile.md "Jog"). */
export const JOG_FRAME = {
  magic: 0x474f4a4c, // bytes "LJOG"
  version: 1,
  headerBytes: 80,
  maxBytes: 4096,
  off: { magic: 0, version: 4, axisCount: 6, session: 8, generation: 40, jogGeneration: 48, sourceSequence: 56, captureHostNs: 64, reserved: 72, velocity: 80 },
} as const;

/** Legacy jog timeout_ms bounds (document 1 part 8). */
export const LEGACY_TIMEOUT_MS = { min: 1, max: 250 } as const;

interface DgramSocket {
  on(ev: 'message', f: (buf: Buffer) => void): void;
  on(ev: 'error', f: (e: Error) => void): void;
  bind(path: string): void;
  close(): void;
}
interface UnixDgram {
  createSocket(type: 'unix_dgram', listener?: (buf: Buffer) => void): DgramSocket;
}

/** Load unix-dgram (native); a missing or unbuilt module gives a clear message instead of a crash. */
export function loadUnixDgram(name = 'unix-dgram'): { mod?: UnixDgram; error?: string } {
  try {
    return { mod: createRequire(import.meta.url)(name) as UnixDgram };
  } catch (e) {
    return { error: `JOG_SOCKET_MODULE_MISSING: ${name} could not be loaded (${(e as Error).message.split('\n')[0]}); run \`npm ci\` with a C++ toolchain so node-gyp can build it` };
  }
}


const hostNow = () => process.hrtime.bigint();

/** How a remote WebSocket frame's capture field (the source's clock) maps to host time (sims/service/remote-jog.ts). */
export interface RemoteCapture {
  /** All three remote jog clock flags are nonzero (document 1 part 5 item 6). */
  qualified: boolean;
  /** The begin sample's source time: input captured before it is refused (part 5 "Remote jog WebSocket"). */
  originSourceNs?: bigint;
  /** The host time of a capture and the earliest it may have been, or a jog reason refusing it. */
  map(capture: bigint, now: bigint): { host: bigint; earliest: bigint } | number;
}

export class JogOps {
  /** The local jog clock's incarnation: host monotonic time as this service process reads it. */
  readonly clockIncarnation = randomBytes(16).toString('hex');
  private socket?: DgramSocket;
  /** Why jog.sock is not served (empty while it is). */
  unavailable = 'jog.sock not started';
  private shuttingDown = false;
  readonly counts = { received: 0n, accepted: 0n, refused: 0n, remote: 0n };
  readonly refusedBy = new Map<string, bigint>();
  lastReason = 0;
  lastAcceptedSequence = 0n;
  /** Highest source sequence accepted for the jog generation `seqGeneration`. */
  private seqGeneration = 0n;

  constructor(
    private readonly core: CoreLink,
    private readonly authority: Authority,
    private readonly machine: CompiledMachine,
    readonly socketPath: string,
  ) {
    // A new core incarnation numbers its jog generations from 1 again: forget the old sequence order.
    core.on('ready', () => {
      this.seqGeneration = 0n;
      this.lastAcceptedSequence = 0n;
    });
    core.on('core_event', (type: string, payload: Record<string, unknown>) => {
      // A frame the core refused after the service forwarded it (generation raced, limit outward).
      if (type === 'native_jog_update') {
        this.counts.accepted--;
        this.count(payload.reason as number);
      }
    });
  }

  private get n(): number {
    return this.machine.axes.length;
  }
  private get all(): number {
    return this.n >= 32 ? 0xffffffff : (1 << this.n) - 1;
  }
  get served(): boolean {
    return this.socket !== undefined && !this.shuttingDown;
  }

  async start(): Promise<void> {
    const { mod, error } = loadUnixDgram();
    if (!mod) {
      this.unavailable = error!;
      process.stderr.write(`hil serve: jog.sock not served: ${error}\n`);
      return;
    }
    await rm(this.socketPath, { force: true });
    const s = mod.createSocket('unix_dgram', (buf) => this.onFrame(buf));
    await new Promise<void>((resolve, reject) => {
      s.on('error', (e) => reject(e));
      (s as unknown as { once(ev: string, f: () => void): void }).once('listening', () => resolve());
      s.bind(this.socketPath);
    });
    s.on('error', (e) => process.stderr.write(`jog.sock: ${e.message}\n`));
    // Sending a datagram needs write permission on the socket file: the group allowed on control.sock may
    // jog too, nobody else, whatever the umask made of it (docs/profile.md "Sockets").
    await chmod(this.socketPath, SOCKET_MODE);
    this.socket = s;
    this.unavailable = '';
  }

  /** `removeFile`: the socket file is ours to remove (not when another service holds the directory). */
  async stop(removeFile = true): Promise<void> {
    this.shuttingDown = true;
    this.unavailable = 'shutting down';
    this.socket?.close();
    this.socket = undefined;
    if (removeFile) await rm(this.socketPath, { force: true });
  }

  private count(reason: number): void {
    const label = jogReasonName(reason);
    this.counts.refused++;
    this.refusedBy.set(label, (this.refusedBy.get(label) ?? 0n) + 1n);
    this.lastReason = reason;
  }

  private jogStatus(): JogStatus | undefined {
    return this.core.status?.jog;
  }

  // ---- jog.sock frames ----

  /** Check one datagram; forward it to the core or count its refusal. Never throws. */
  onFrame(buf: Buffer): void {
    this.onInput(buf);
  }

  /**
   * One local_jog_update frame from either ingress (jog.sock, or the remote WebSocket lane with its clock
   * mapping); forwarded to the core or counted as refused. Returns the jog reason (0 accepted).
   */
  onInput(buf: Buffer, remote?: RemoteCapture): number {
    this.counts.received++;
    if (remote) this.counts.remote++;
    const reason = this.checkFrame(buf, remote);
    if (reason !== 0) {
      this.count(reason);
      return reason;
    }
    this.counts.accepted++;
    return 0;
  }

  private checkFrame(buf: Buffer, remote?: RemoteCapture): number {
    const F = JOG_FRAME;
    // Document 1 part 5 item 6: unless all three remote jog clock flags are nonzero, every remote frame.
    if (remote && !remote.qualified) return JOG_REASON.jog_clock_unqualified;
    // unix-dgram reads into a 64 KiB buffer and truncates silently: anything above 4096 bytes is oversize.
    if (buf.length > F.maxBytes) return JOG_REASON.frame_oversize;
    if (buf.length < 8 || buf.readUInt32LE(F.off.magic) !== F.magic) return JOG_REASON.frame_malformed;
    if (buf.readUInt16LE(F.off.version) !== F.version) return JOG_REASON.frame_version;
    const axes = buf.readUInt16LE(F.off.axisCount);
    if (axes !== this.n || buf.length !== F.headerBytes + 8 * axes || buf.readBigUInt64LE(F.off.reserved) !== 0n) return JOG_REASON.frame_malformed;
    const session = buf.subarray(F.off.session, F.off.session + 32).toString('hex');
    const generation = buf.readBigUInt64LE(F.off.generation);
    const jogGeneration = buf.readBigUInt64LE(F.off.jogGeneration);
    const sequence = buf.readBigUInt64LE(F.off.sourceSequence);
    const capture = buf.readBigUInt64LE(F.off.captureHostNs);
    // The fence: the current grant, exactly its generation, not stopping, lease not expired.
    this.authority.checkExpiry();
    const g = this.authority.current;
    if (!g || g.stopping || g.session !== session || g.generation !== generation) return JOG_REASON.control_session_stale;
    const j = this.jogStatus();
    if (!j || jogSessionStale({ open: j.SessionOpen === 1, independent: j.Mode === 1, generation: j.JogGeneration }, jogGeneration)) return JOG_REASON.jog_session_stale;
    if (this.seqGeneration !== jogGeneration) {
      this.seqGeneration = jogGeneration;
      this.lastAcceptedSequence = 0n;
    }
    if (sequence <= this.lastAcceptedSequence) return JOG_REASON.out_of_order;
    const now = hostNow();
    // The capture time in host monotonic ns, and how early it may have been (remote clocks are mapped
    // through their calibration, with its uncertainty; local producers stamp the host clock itself).
    let hostCapture = capture;
    let earliest = capture;
    if (remote) {
      if (remote.originSourceNs !== undefined && capture < remote.originSourceNs) return JOG_REASON.capture_before_origin;
      const m = remote.map(capture, now);
      if (typeof m === 'number') return m;
      hostCapture = m.host;
      earliest = m.earliest;
    }
    if (earliest > now) return JOG_REASON.jog_clock_input_future;
    const maxAge = this.machine.control.max_jog_input_age_ns;
    if (earliest + maxAge < now) return JOG_REASON.jog_clock_input_stale;
    if (hostCapture < j.SourceOriginHostNs) return JOG_REASON.capture_before_origin;
    // docs/profile.md "Jog" checks in order: every velocity's validity (jog_velocity_invalid) before any
    // axis outside the session (jog_axis_outside_session), whichever axis comes first.
    const velocity: number[] = [];
    for (let i = 0; i < axes; i++) {
      const v = buf.readDoubleLE(F.off.velocity + 8 * i);
      if (!Number.isFinite(v) || Math.abs(v) > this.machine.axes[i]!.max_velocity) return JOG_REASON.velocity_invalid;
      velocity.push(v);
    }
    for (let i = 0; i < axes; i++) if (velocity[i] !== 0 && !((j.AxisMask >>> i) & 1)) return JOG_REASON.axis_outside_session;
    this.lastAcceptedSequence = sequence;
    this.lastAccepted = { sequence, capture: hostCapture };
    // The input expires max_jog_input_age_ns after the earliest time it may have been captured.
    this.core.post({ t: 'jog_update', generation, jogGeneration, sequence, captureNs: hostCapture, inputDeadlineNs: earliest + maxAge, velocity });
    return 0;
  }
  lastAccepted = { sequence: 0n, capture: 0n };
  /** Open remote jog WebSocket connections (sims/service/remote-jog.ts keeps it). */
  remoteConnections = 0;

  // ---- control operations ----

  private async native(op: 'begin_jog' | 'end_jog' | 'jog', g: Grant, axisMask: number, jog?: JogCmd, handle?: bigint): Promise<NativeReply> {
    try {
      return await this.core.command(op, g.generation, axisMask, { ...(jog ? { jog } : {}), ...(handle !== undefined ? { handle } : {}) });
    } catch (e) {
      if (e instanceof CoreUnavailable) throw refuse('native_rejected', `no native receipt: ${e.message}`);
      throw e;
    }
  }

  /** A refusal carrying the jog lane's observation (Response native_jog_result). */
  private jogRefusal(label: string, detail: string, controlReason: number, n?: NativeReply): Refusal {
    return new Refusal(409, label, detail, undefined, {
      ...(n ? { native_result: n.result } : {}),
      native_jog_result: { ...this.observation(), ControlReason: controlReason },
    });
  }

  private rejected(n: NativeReply): Refusal {
    const label = motionLabel(n.result.Reason);
    const reason = jogReasonOf(label) ?? JOG_REASON.none;
    return this.jogRefusal(label, n.detail ?? `native reason ${n.result.Reason}`, reason, n);
  }

  private checkMask(mask: number): void {
    if (mask === 0 || (mask & ~this.all) !== 0) throw refuse('invalid_axis_mask', 'axis_mask must be a nonzero mask of configured axes');
  }

  async begin(r: Request, g: Grant): Promise<Reply> {
    // The clock first: a producer stamping input in another clock must not get any further.
    if (!r.clock_incarnation || r.clock_incarnation !== this.clockIncarnation) {
      throw this.jogRefusal('jog_clock_incarnation_mismatch', 'clock_incarnation is empty or not the current GET /v1/jog/clock incarnation', JOG_REASON.jog_clock_incarnation_mismatch);
    }
    if (!this.served) throw this.jogRefusal('independent_jog_unavailable', `no independent jog lane: ${this.unavailable}`, JOG_REASON.independent_jog_unavailable);
    const mask = r.axis_mask ?? 0;
    this.checkMask(mask);
    const origin = r.source_origin_host_ns!;
    const deadline = r.deadline_host_ns!;
    if (deadline <= origin) throw this.jogRefusal('jog_clock_deadline_invalid', 'deadline_host_ns must be after source_origin_host_ns', JOG_REASON.jog_clock_deadline_invalid);
    const now = hostNow();
    if (origin > now) throw this.jogRefusal('jog_clock_input_future', 'source_origin_host_ns is in the future of the host monotonic clock', JOG_REASON.jog_clock_input_future);
    if (deadline <= now) throw this.jogRefusal('jog_clock_input_stale', 'deadline_host_ns has already passed', JOG_REASON.jog_clock_input_stale);
    // Never extended: the producer's deadline stands, shortened to the configured input age at most.
    const bounded = origin + this.machine.control.max_jog_input_age_ns;
    const n = await this.native('begin_jog', g, mask, { originNs: origin, deadlineNs: deadline < bounded ? deadline : bounded });
    if (n.result.Result !== 0) throw this.rejected(n);
    return { status: 200, body: { operation: 'begin_jog', handle: n.result.Handle } };
  }

  async end(r: Request, g: Grant): Promise<Reply> {
    const jg = r.jog_generation ?? 0n;
    const n = await this.native('end_jog', g, 0, undefined, jg);
    if (n.result.Result !== 0) throw this.rejected(n);
    return { status: 200, body: { operation: 'end_jog', handle: n.result.Handle } };
  }

  /**
   * The remote lane lost its producer (connection closed, idle, second connection): end that jog
   * generation now if it is still the open one under a current grant; nothing to do otherwise.
   */
  async endFromLane(jogGeneration: bigint): Promise<void> {
    const g = this.authority.current;
    const j = this.jogStatus();
    if (!g || g.stopping || !j?.SessionOpen || j.JogGeneration !== jogGeneration) return;
    // Two lanes of one jog closing together (a second remote connection closes both) end it once: the
    // core's status may not show the first end_jog yet when the second lane goes.
    const key = `${this.core.incarnation}:${jogGeneration}`; // generations start again with a new core
    if (this.endedFromLane === key) return;
    this.endedFromLane = key;
    try {
      await this.native('end_jog', g, 0, undefined, jogGeneration);
    } catch {
      // no native receipt: the core ended every lane already (authority lost), or will at the input deadline
    }
  }

  /** The jog generation a closed lane last ended (endFromLane). */
  private endedFromLane = '';

  /** Legacy jog (test_only): axis_mask, velocity in described axis order, timeout_ms 1..250. */
  async legacy(r: Request, g: Grant): Promise<Reply> {
    const mask = r.axis_mask ?? 0;
    const t = r.timeout_ms!;
    if (!Number.isInteger(t) || t < LEGACY_TIMEOUT_MS.min || t > LEGACY_TIMEOUT_MS.max) throw refuse('invalid_request_envelope', `timeout_ms must be ${LEGACY_TIMEOUT_MS.min}..${LEGACY_TIMEOUT_MS.max}`);
    const v = r.velocity!;
    if (v.length !== this.n) throw refuse('invalid_request_envelope', `velocity has ${v.length} values for ${this.n} axes`);
    this.checkMask(mask);
    for (let i = 0; i < v.length; i++) {
      if (!Number.isFinite(v[i]!)) throw refuse('invalid_request_envelope', `velocity[${i}] is not finite`);
      if (Math.abs(v[i]!) > this.machine.axes[i]!.max_velocity) throw refuse('invalid_request_envelope', `velocity[${i}] exceeds max_velocity ${this.machine.axes[i]!.max_velocity}`);
      if (v[i] !== 0 && !((mask >>> i) & 1)) throw refuse('invalid_axis_mask', `velocity[${i}] is nonzero but axis ${i} is not in axis_mask`);
    }
    const n = await this.native('jog', g, mask, { velocity: v, timeoutNs: BigInt(t) * 1_000_000n });
    if (n.result.Result !== 0) throw this.rejected(n);
    return { status: 200, body: { operation: 'jog', sequence: n.result.Sequence, handle: n.result.Handle } };
  }

  // ---- observations ----

  clock(): Record<string, unknown> {
    return {
      incarnation: this.clockIncarnation,
      clock: 'CLOCK_MONOTONIC',
      now_host_ns: hostNow(),
      resolution_ns: 1n,
      max_input_age_ns: this.machine.control.max_jog_input_age_ns,
      frame_version: JOG_FRAME.version,
      max_frame_bytes: JOG_FRAME.maxBytes,
      socket: this.served ? 'jog.sock' : '',
    };
  }

  observation(): Record<string, unknown> {
    const j = this.jogStatus();
    return {
      JogGeneration: j?.JogGeneration ?? 0n,
      Mode: j?.Mode ?? 0,
      SessionOpen: j?.SessionOpen ?? 0,
      HasInput: j?.HasInput ?? 0,
      Ramping: j?.Ramping ?? 0,
      Active: j?.Active ?? 0,
      AxisMask: j?.AxisMask ?? 0,
      LimitedAxisMask: j?.LimitedAxisMask ?? 0,
      SourceSequence: j?.SourceSequence ?? 0n,
      SourceOriginHostNs: j?.SourceOriginHostNs ?? 0n,
      DeadlineHostNs: j?.DeadlineHostNs ?? 0n,
      InputDeadlineHostNs: j?.InputDeadlineHostNs ?? 0n,
      NowHostNs: hostNow(),
      StateReason: j?.StateReason ?? 0,
      ControlReason: j?.ControlReason ?? 0,
      UpdateReason: j?.UpdateReason ?? 0,
      IndependentAvailable: this.served ? 1 : 0,
      CommandedVelocity: j?.CommandedVelocity ?? new Array<number>(this.n).fill(0),
      TargetVelocity: j?.TargetVelocity ?? new Array<number>(this.n).fill(0),
    };
  }

  ingress(): Record<string, unknown> {
    return {
      served: this.served,
      reason: this.unavailable,
      socket: this.served ? 'jog.sock' : '',
      max_frame_bytes: JOG_FRAME.maxBytes,
      received: this.counts.received,
      accepted: this.counts.accepted,
      refused: this.counts.refused,
      refused_by_reason: Object.fromEntries([...this.refusedBy].sort(([a], [b]) => (a < b ? -1 : 1))),
      last_reason: this.lastReason,
      last_accepted_sequence: this.lastAccepted.sequence,
      last_accepted_capture_host_ns: this.lastAccepted.capture,
      remote_received: this.counts.remote,
      remote_connections: this.remoteConnections,
    };
  }
}
