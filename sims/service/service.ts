// The control service (document 1): HTTP/1.1 over a Unix socket, the envelope, the grant authority, the
// observation endpoints, and the bridge to the real-time core. Every refusal carries a catalogue label
// first; an unexpected exception is answered as `internal_defect` (a label of ours that the suites flag as
// a defect) and never as a stack trace.

import { randomBytes } from 'node:crypto';
import { mkdir, rm, rmdir, symlink, chmod, lstat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { dirname, join, relative } from 'node:path';
import { Authority, type Grant, type Reply } from './authority.ts';
import { CAPABILITY, capabilityInfo } from './capabilities.ts';
import { describeData, statusData, type ViewSource } from './views.ts';
import { CoreLink, CoreUnavailable } from './core-link.ts';
import { HandleTable } from './handles.ts';
import { JogOps } from './jog.ts';
import { DIR_MODE, SOCKET_MODE, takeSocketDir } from './socket-dir.ts';
import { pointArrays, TrajectoryOps, type PointArrays } from './trajectories.ts';
import { pointsArraysDigest } from './upload/decoder.ts';
import { uploadBody } from './upload/index.ts';
import {
  decodeRequest,
  payloadKey,
  Refusal,
  refuse,
  RESPONSE_SCHEMA,
  type Binding,
  type Request,
} from './envelope.ts';
import { EventLog, EVENTS_PER_POLL, streamEvents } from './events.ts';
import { ANCHOR_DIR_ENV, MachineOps } from './machine.ts';
import { PROGRAM_BODY_LIMIT, ProgramUploads } from './program-route.ts';
import { encodeJson } from '../json.ts';
import { TelemetryEndpoints } from './telemetry.ts';
import { LOCAL_OWNER, ownerOfPrincipal, RemoteListener, type RemoteFiles } from './remote.ts';
import { Resources } from './resources.ts';
import { RemoteJogLane, SHUTDOWN_GRACE_MS, type RemoteJogFlags } from './remote-jog.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { CoreStatus } from '../core/protocol.ts';
import { closeAfterReply, discardBody, NODE_KEEP_ALIVE_BUFFER_MS } from '../primitives.ts';
import { testChannelRoute } from './test-channel.ts';

export const CONTROL_IDLE_TIMEOUT_NS = 90_000_000_000n;

export interface ServiceOptions {
  socketDir: string;
  socketPath?: string;
  machine: CompiledMachine;
  pairId: string;
  pairRevision: bigint;
  core: CoreLink;
  /** Expose the private test channel (fault injection, core restart) on {socket_dir}/private/test.sock. */
  testChannel: boolean;
  /** Start the application generation counter here (test hook for application_generation_exhausted). */
  initialGeneration?: bigint;
  /** Serve jog.sock (default true); without it there is no independent jog lane (docs/profile.md "Jog"). */
  jogSocket?: boolean;
  /** Idle connection timeout (default 90 s, part 8); Describe reports it as control_idle_timeout_ns. */
  controlIdleTimeoutNs?: bigint;
  /** The remote listener (document 1 part 5): address and credential files; absent: Unix socket only. */
  remote?: { host: string; port: number; files: RemoteFiles; jog?: RemoteJogFlags };
}


export class ControlService {
  readonly adapterIncarnation = randomBytes(16).toString('hex');
  readonly binding: Required<Binding>;
  readonly authority: Authority;
  readonly events: EventLog;
  private server?: Server;
  private testServer?: Server;
  readonly socketPath: string;
  readonly publicLink: string;
  readonly testSocketPath: string;
  private daemonIncarnation = '';
  readonly machineOps: MachineOps;
  /** prepare_program (POST /v1/program); sims/service/program-route.ts. */
  readonly programs: ProgramUploads;
  readonly telemetry: TelemetryEndpoints;
  readonly handles: HandleTable;
  private readonly trajectories: TrajectoryOps;
  readonly jog: JogOps;
  private remote?: RemoteListener;
  private remoteJog?: RemoteJogLane;
  private readonly resources: Resources;
  /** What the Describe and Status views read (views.ts). */
  private readonly views: ViewSource;
  /** The socket directory's lock (socket-dir.ts), once taken: only then are the sockets here ours to remove. */
  private dirLock?: { release(): Promise<void> };

  constructor(private readonly o: ServiceOptions) {
    const m = o.machine;
    this.socketPath = o.socketPath ?? join(o.socketDir, 'control.sock');
    this.publicLink = join(o.socketDir, 'public', 'control.sock');
    this.testSocketPath = join(o.socketDir, 'private', 'test.sock');
    this.binding = {
      pair_id: o.pairId,
      revision: o.pairRevision,
      configuration_sha256: m.configuration_sha256,
      machine_sha256: m.machine_sha256,
    };
    this.events = new EventLog(this.adapterIncarnation, () => this.daemonIncarnation, () => o.core.coreNow());
    // The service's clock and timed decisions, one object (timing.ts): the core link was given it by the
    // composition root (sims/main.ts), live or replayed; the parts that decide on time get it from here.
    const timing = o.core.timing;
    this.authority = new Authority(this.binding, m.control.max_grant_lease_ns / 1_000_000n, {
      now: () => timing.clock.now(),
      timing: timing.log,
      daemonIncarnation: () => this.daemonIncarnation,
      event: (type, g) => this.events.publish(type, g ? this.grantPayload(g, type) : {}),
      nativeGrant: (g, why) => {
        // A lease that ran out is the service's own decision (a recording marks it; timing.ts DecisionLog.onExpiry retakes it).
        const origin = why === 'expired' ? 'lease_expired' : undefined;
        // Stop, lease expiry or transport loss cancel a running Home (document 1 part 4 home).
        if (!g) o.core.post({ t: 'cancel_home' }, origin);
        // Stop or grant loss retires prepared handles (document 1 part 3: prepare again).
        if (!g || g.stopping) this.handles.retirePrepared();
        o.core.post({
          t: 'grant',
          generation: g?.generation ?? this.authority.lastGeneration,
          deadlineNs: g?.deadlineNs ?? 0n,
          active: g !== null && !g.stopping,
          axisMask: g ? (1 << m.axes.length) - 1 : 0,
          ...(g?.stopping ? { stopping: true } : {}),
        }, origin);
        // A remote jog connection lives only as long as its grant (part 7: control_session_stale, then close).
        this.remoteJog?.grantChanged(g);
      },
    }, o.initialGeneration ?? 0n);
    this.handles = new HandleTable((type, payload) => this.events.publish(type, payload), timing.log);
    this.trajectories = new TrajectoryOps(o.core, this.authority, m, this.handles);
    this.trajectories.onUncertainStart = (g) => void this.stopAfterFailure(g).catch(() => undefined);
    this.jog = new JogOps(o.core, this.authority, m, join(o.socketDir, 'jog.sock'));
    this.programs = new ProgramUploads({
      fence: (session, generation, owner) => this.authority.fence('prepare_program', session, generation, owner),
      current: (g) => this.authority.current === g && !g.stopping,
      machine: m,
      // document 1 part 2 Identity: manifest_revision equals the pair revision the service was started with
      manifestRevision: o.pairRevision,
      core: o.core,
      handles: this.handles,
      trajectories: this.trajectories,
    });
    this.machineOps = new MachineOps(o.core, this.authority, m, this.binding, process.env[ANCHOR_DIR_ENV] || undefined, (g) => this.stopAfterFailure(g));
    this.machineOps.programExecuting = () => this.handles.all().some((h) => h.kind === 'program' && h.state === 'started');
    this.telemetry = new TelemetryEndpoints({
      core: o.core,
      machine: m,
      adapterIncarnation: this.adapterIncarnation,
      daemonIncarnation: () => this.daemonIncarnation,
      refuse: (res, e) => this.send(res, refusal(e, 'telemetry')),
    });
    this.resources = new Resources(m.dir);
    o.core.on('core_event', (type: string, payload: Record<string, unknown>, timeNs: bigint | undefined) =>
      this.events.at(timeNs, () => {
        // The core stopped on its own because the lease ran out before a renewal reached it: the grant
        // expires here too (the event log shows grant_expired, never the core's private notice).
        if (type === 'native_lease_expired') return this.authority.nativeLeaseExpired(payload.generation as bigint);
        if (type === 'native_execution') {
          const e = payload as { handle: bigint; outcome: 'completed' | 'aborted' | 'faulted'; fault_bits: number; recovery?: string[]; why: string; point_index: number };
          const rec = this.handles.get(e.handle);
          if (rec?.segmentOf && rec.state === 'started' && this.handles.execution.handle === e.handle) {
            const at = e.outcome === 'completed' ? rec.segmentOf.length - 1 : Math.min(e.point_index + 1, rec.segmentOf.length - 1);
            this.handles.execution = { ...this.handles.execution, segment: rec.segmentOf[at]! };
          }
          return this.handles.ended(e.handle, e.outcome, e.fault_bits, e.recovery ?? [], e.why);
        }
        // Other `native_` notices are the core's private replies to one lane (native_jog_update goes to
        // the jog ingress counts); they never enter the public event log.
        if (type.startsWith('native_')) return;
        try {
          this.events.publish(type, payload);
        } catch (e) {
          // A relaying defect is logged where a person looks; it never takes the service down.
          process.stderr.write(`internal defect: core event ${type} not published: ${(e as Error).message}\n`);
        }
      }),
    );
    o.core.on('stop_drained', () => this.authority.drained());
    timing.log.onExpiry((generation, lateNs) => void this.authority.expireGeneration(generation, lateNs));
    o.core.on('exit', (why: string) => this.onCoreExit(why));
    this.views = {
      machine: m,
      core: o.core,
      binding: this.binding,
      adapterIncarnation: this.adapterIncarnation,
      daemonIncarnation: () => this.daemonIncarnation,
      idleTimeoutNs: this.idleTimeoutNs,
      authority: this.authority,
      handles: this.handles,
      jogServed: () => this.jog.served,
      remoteListening: () => this.remote !== undefined,
    };
  }

  get idleTimeoutNs(): bigint {
    return this.o.controlIdleTimeoutNs ?? CONTROL_IDLE_TIMEOUT_NS;
  }

  private grantPayload(g: Grant, type: string): Record<string, unknown> {
    const ended = type === 'grant_released' || type === 'grant_expired' || type === 'grant_revoked';
    return {
      generation: g.generation,
      stopping: ended ? false : g.stopping,
      controller: g.controller,
      lease_ms: g.leaseMs,
      deadline_host_ns: g.deadlineNs,
    };
  }

  private onCoreExit(why: string): void {
    const previous = this.daemonIncarnation;
    process.stderr.write(`hil serve: core incarnation ${previous} ended (${why}); authority revoked, starting a new incarnation\n`);
    this.authority.coreLost();
    this.remoteJog?.grantChanged(null);
    this.handles.coreLost();
    void this.o.core
      .start()
      .then(() => {
        this.daemonIncarnation = this.o.core.incarnation;
        this.events.publish('daemon_incarnation_changed', { previous, current: this.daemonIncarnation, reason: why });
      })
      .catch((e: Error) => process.stderr.write(`core restart failed: ${e.message}\n`));
  }

  async start(): Promise<void> {
    // One service per socket directory, before anything in it is touched (socket-dir.ts).
    this.dirLock = await takeSocketDir(this.o.socketDir);
    const core = this.o.core;
    if (!core.running) await core.start();
    this.daemonIncarnation = core.incarnation;
    this.events.publish('adapter_incarnation_changed', { previous: '', current: this.adapterIncarnation });
    this.events.publish('daemon_incarnation_changed', { previous: '', current: this.daemonIncarnation });

    await mkdir(dirname(this.publicLink), { recursive: true, mode: DIR_MODE });
    await chmod(dirname(this.publicLink), DIR_MODE);
    await rmIfSocket(this.socketPath);
    // Node's server closes an idle connection 1000 ms after keepAliveTimeout (its keep-alive buffer for
    // clients that honour the Keep-Alive hint), so the documented idle timeout is reached by subtracting it.
    const idleMs = Math.max(1, Number(this.idleTimeoutNs / 1_000_000n) - NODE_KEEP_ALIVE_BUFFER_MS);
    const server = createServer({ keepAliveTimeout: idleMs }, (req, res) => {
      void this.route(req, res);
    });
    server.keepAliveTimeout = idleMs;
    await listen(server, this.socketPath);
    await chmod(this.socketPath, SOCKET_MODE);
    await rm(this.publicLink, { force: true });
    await symlink(relative(dirname(this.publicLink), this.socketPath), this.publicLink);
    this.server = server;
    if (this.o.jogSocket ?? true) await this.jog.start();
    else this.jog.unavailable = 'jog.sock disabled (hil serve --jog-socket off)';

    if (this.o.testChannel) {
      await mkdir(dirname(this.testSocketPath), { recursive: true, mode: 0o700 });
      await chmod(dirname(this.testSocketPath), 0o700);
      await rmIfSocket(this.testSocketPath);
      const channel = { core: this.o.core, telemetry: this.telemetry, daemonIncarnation: () => this.daemonIncarnation };
      const t = createServer((req, res) => void testChannelRoute(channel, req, res));
      await listen(t, this.testSocketPath);
      await chmod(this.testSocketPath, 0o600);
      this.testServer = t;
    }

    if (this.o.remote) {
      // Sessions acquired here belong to the certificate's principal (document 1 part 5 item 3).
      const log = (line: string) => process.stderr.write(`${line}\n`);
      const jog = new RemoteJogLane({
        jog: this.jog,
        authority: this.authority,
        machine: this.o.machine,
        flags: this.o.remote.jog ?? { maxUncertaintyNs: 0n, driftPpb: 0n, calibrationMaxAgeNs: 0n },
        log,
      });
      this.remoteJog = jog;
      this.remote = new RemoteListener({
        ...this.o.remote,
        upgrade: (req, socket, head, principal) => jog.upgrade(req, socket, head, ownerOfPrincipal(principal)),
        pairId: this.o.pairId,
        linkProfile: this.o.machine.control.link_profile,
        log: (line) => process.stderr.write(`${line}\n`),
        handle: (req, res, principal) => void this.route(req, res, ownerOfPrincipal(principal)),
      });
      await this.remote.start();
    }
  }

  /** Where the remote listener is bound (after start), for the ready line. */
  get remoteAddress(): { host: string; port: number } | undefined {
    return this.remote?.address;
  }

  async stop(): Promise<void> {
    this.authority.close();
    // Open remote jog connections close first (1001); the listener then keeps serving a moment, so a
    // producer reconnecting learns that the service is going away (503) rather than meeting a dead port.
    const hadRemoteJog = (await this.remoteJog?.shutdown()) ?? false;
    await this.remote?.stop(hadRemoteJog ? SHUTDOWN_GRACE_MS : 0);
    // A service refused the directory (another one serves it) removes nothing there: those are the other's.
    const owned = this.dirLock !== undefined;
    await this.jog.stop(owned);
    for (const s of [this.server, this.testServer]) {
      if (!s) continue;
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    }
    if (owned) {
      await rm(this.publicLink, { force: true });
      await rm(this.socketPath, { force: true });
      if (this.o.testChannel) await rm(this.testSocketPath, { force: true });
      // The folders we created for the link and the private channel go too when empty.
      for (const d of [dirname(this.publicLink), dirname(this.testSocketPath)]) await rmdir(d).catch(() => undefined);
    }
    await this.o.core.shutdown();
    await this.dirLock?.release();
    this.dirLock = undefined;
  }

  // ---- HTTP ----

  /** `owner` is the transport and principal of the request: LOCAL_OWNER or ownerOfPrincipal(id). */
  private async route(req: IncomingMessage, res: ServerResponse, owner: string = LOCAL_OWNER): Promise<void> {
    try {
      // The control route, the one on every round trip, is told without building a URL (the path as sent
      // is already the URL's pathname); every other request is parsed.
      if (req.url === '/v1/control' && req.method === 'POST') return await this.controlRoute(req, res, owner);
      const url = new URL(req.url ?? '/', 'http://localhost');
      const key = `${req.method} ${url.pathname}`;
      // On the remote listener GET /v1/jog is always a WebSocket upgrade (part 5); upgrades go to
      // RemoteJogLane, so a request reaching here lacks the upgrade headers.
      if (owner !== LOCAL_OWNER && url.pathname === '/v1/jog') {
        const text = 'invalid websocket upgrade: GET /v1/jog on the remote listener needs Connection: Upgrade and Upgrade: websocket\n';
        req.resume();
        res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      // Resources are served on the remote listener only (document 1 part 4 "Observation endpoints").
      if (owner !== LOCAL_OWNER && req.method === 'GET' && url.pathname.startsWith('/v1/resources/')) {
        return await this.resources.serve(res, url.pathname.slice('/v1/resources/'.length), (e) => this.send(res, refusal(e, 'resource')));
      }
      switch (key) {
        case 'POST /v1/control':
          return await this.controlRoute(req, res, owner);
        case 'POST /v1/program': {
          const reply = await this.programs.prepare(req, owner);
          this.o.core.timing.log.took('http_reply', reply);
          // An over-limit body is not read on after its 413: the connection closes (docs/profile.md "Sockets").
          if (reply.status === 413) closeAfterReply(req, res, PROGRAM_BODY_LIMIT);
          return this.send(res, reply);
        }
        case 'GET /v1/describe':
          return this.send(res, { status: 200, body: { operation: 'describe', data: describeData(this.views) } });
        case 'GET /v1/status': {
          const turn = this.o.core.timing.log.turn('status_read');
          if (turn) await turn;
          const data = statusData(this.views);
          this.o.core.timing.log.took('status_read', this.o.core.status?.cycle, data.now_host_ns as bigint);
          return this.send(res, { status: 200, body: { operation: 'status', data } });
        }
        case 'GET /v1/events':
        case 'GET /v1/events/stream':
          try {
            if (key === 'GET /v1/events') return this.send(res, this.pollEvents(url));
            return streamEvents(this.events, req, res, url, (open) => this.o.core.timing.log.took('watch', 'events', open));
          } catch (e) {
            // Cursor refusals name the capability they answer (document 1 part 4 subscribe_events).
            if (e instanceof Refusal && !res.headersSent) return this.send(res, refusal(e, 'subscribe_events'));
            throw e;
          }
        case 'GET /v1/jog/clock':
          return this.send(res, { status: 200, body: { operation: 'jog_clock', data: this.jog.clock() } });
        case 'GET /v1/jog':
          return this.send(res, { status: 200, body: { operation: 'jog_status', data: this.jog.observation() } });
        case 'GET /v1/jog/ingress':
          return this.send(res, { status: 200, body: { operation: 'jog_ingress', data: this.jog.ingress() } });
        case 'GET /v1/telemetry':
          try {
            const turn = this.o.core.timing.log.turn('telemetry_poll');
            if (turn) await turn;
            return await this.telemetry.poll(req, res, url);
          } finally {
            this.o.core.timing.log.took('telemetry_read');
          }
        case 'GET /v1/telemetry/stream':
          return this.telemetry.stream(req, res, url);
        default:
          discardBody(req);
          return this.send(res, refusal(new Refusal(409, 'unknown_endpoint', `${req.method} ${url.pathname}`)));
      }
    } catch (e) {
      this.defect(res, e);
    }
  }

  private async controlRoute(req: IncomingMessage, res: ServerResponse, owner: string): Promise<void> {
    const reply = await this.control(req, owner);
    if (!reply) return undefined;
    this.o.core.timing.log.took('http_reply', reply);
    return this.send(res, reply);
  }

  private defect(res: ServerResponse, e: unknown): void {
    if (e instanceof Refusal) return this.send(res, refusal(e));
    process.stderr.write(`internal defect: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    if (!res.headersSent) this.send(res, refusal(new Refusal(409, 'internal_defect', 'unrecognised failure inside the service')));
    else res.destroy();
  }

  private send(res: ServerResponse, reply: Reply): void {
    const body = Buffer.from(encodeJson(envelope(reply.body)) + '\n');
    res.writeHead(reply.status, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  }

  /**
   * POST /v1/control. Every body goes through uploadBody: an ordinary command (at most 16384 bytes) comes
   * back whole and is decoded as always; a prepare_trajectory body is admitted on its first 16384 bytes
   * (fence checked, upload slot reserved) before the rest is read, then streamed into typed arrays off
   * this thread (document 1 part 4 prepare_trajectory). Undefined: the client went away, nothing to send.
   */
  private async control(req: IncomingMessage, owner: string): Promise<Reply | undefined> {
    let release: (() => void) | undefined;
    const out = await uploadBody(req, {
      axes: this.o.machine.axes.length,
      admit: (prefix) => {
        const env = prefix.envelope;
        this.authority.fence('prepare_trajectory', env.session!, env.generation!, owner);
        release = this.trajectories.reserve();
      },
      release: () => release?.(),
      arena: () => this.o.core.planArena,
    });
    switch (out.kind) {
      case 'aborted':
        return undefined;
      case 'refused':
        return refusal(out.refusal, out.refusal.operation ?? 'prepare_trajectory');
      case 'trajectory':
        try {
          const r = out.body.request as Request;
          return await this.dispatch(r, owner, out.body.points).catch((e: unknown) => {
            if (e instanceof Refusal) return refusal(e, r.operation);
            throw e;
          });
        } finally {
          release?.();
          // The arena slot, unless the prepare took it to the core (a refusal before, a request_id answered from the cache).
          out.body.points.lease?.release();
        }
      case 'ordinary':
        break;
    }
    const body = out.body;
    let request: Request;
    try {
      request = decodeRequest(body);
    } catch (e) {
      if (e instanceof Refusal) return refusal(e, e.operation ?? operationOf(body));
      throw e;
    }
    try {
      return await this.dispatch(request, owner);
    } catch (e) {
      if (e instanceof Refusal) return refusal(e, request.operation);
      throw e;
    }
  }

  private async dispatch(r: Request, owner: string, points?: PointArrays): Promise<Reply> {
    if (r.operation === 'acquire') return this.authority.acquire(r, payloadKey(r), owner);
    // An uploaded point list is part of the payload a request_id names: keyed by its digest, not its text.
    const keyOf = (x: Request) => (points ? `${payloadKey(x)}#points:${pointsDigest(points)}` : payloadKey(x));
    let g: Grant;
    // Null unless the decision log holds the decision (timing.ts DecisionLog.turn): a live run never yields here.
    const held = this.o.core.timing.log.turn('fence', r.operation);
    if (held) await held;
    const expiry = this.o.core.timing.log.turn('session_end', r.operation, r.session, r.generation, this.authority);
    if (expiry) await expiry;
    try {
      g = this.authority.fence(r.operation, r.session!, r.generation!, owner);
    } catch (e) {
      // A lost reply to a stop or reset_fault can still be replayed after the grant ended that way
      // (document 1 part 4: only release, lease expiry and a service restart drop the cache).
      // Never for another owner: the cache of an ended session is that owner's (docs/profile.md "Session ownership").
      if (!(e instanceof Refusal) || e.label === 'session_principal_mismatch' || r.request_id === undefined) throw e;
      const hit = this.authority.replayEnded(r.session!, r.request_id, keyOf(r));
      if (hit === 'conflict') throw refuse('request_id_conflict', `request_id ${JSON.stringify(r.request_id)} was used with a different payload`);
      if (hit) return hit;
      throw e;
    }
    if (r.request_id === undefined) return this.operate(r, g, points);
    const key = keyOf(r);
    const hit = g.cache.lookup(r.request_id, key);
    if (hit === 'conflict') throw refuse('request_id_conflict', `request_id ${JSON.stringify(r.request_id)} was used with a different payload`);
    if (hit) return hit;
    const outcome = this.operate(r, g, points).catch((e: unknown) => {
      if (e instanceof Refusal) return refusal(e, r.operation);
      throw e;
    });
    g.cache.remember(r.request_id, key, outcome);
    return outcome;
  }

  private async operate(r: Request, g: Grant, points?: PointArrays): Promise<Reply> {
    const a = this.authority;
    switch (r.operation) {
      case 'renew':
        return a.renew(g);
      case 'release':
        return a.release(g);
      case 'stop':
        await this.stopGrant(g);
        return { status: 200, body: { operation: 'stop', data: a.grantData(g) } };
      case 'enable':
      case 'arm':
      case 'halt':
      case 'io_arm':
      case 'io_disarm':
        return this.machineOps.simple(r.operation, r, g);
      case 'home':
        return this.machineOps.home(r, g);
      case 'reset_fault':
        return this.machineOps.resetFault(r, g);
      case 'recovery_status':
        return this.machineOps.recoveryStatus(g);
      case 'restore_anchor':
        return this.machineOps.restoreAnchor(r, g);
      case 'mark_telemetry': {
        const bytes = Buffer.byteLength(r.label!, 'utf8');
        if (bytes < 1 || bytes > 128) throw refuse('telemetry_label_invalid', 'label must be 1..128 bytes of UTF-8');
        const n = await this.native('mark', g, 0, { label: r.label });
        this.events.publish('telemetry_mark', { label: r.label, sequence: n.result.Sequence, generation: g.generation });
        return { status: 200, body: { operation: r.operation, sequence: n.result.Sequence } };
      }
      case 'prepare_trajectory': {
        if (points) return await this.trajectories.prepare(r, g, points); // the upload path reserved the slot
        const release = this.trajectories.reserve();
        try {
          const p = pointArrays(r.points!, this.o.machine.axes.length);
          if (p instanceof Refusal) throw p;
          return await this.trajectories.prepare(r, g, p);
        } finally {
          release();
        }
      }
      case 'start_trajectory':
        return this.trajectories.start(r, g);
      case 'discard_trajectory':
        return this.trajectories.discard(r, g);
      case 'start_program':
        return this.programs.start(r, g);
      case 'begin_jog':
        return this.jog.begin(r, g);
      case 'end_jog':
        return this.jog.end(r, g);
      case 'jog':
        return this.jog.legacy(r, g);
      default:
        // Unreachable while capabilities.ts SERVED lists only operations handled above: the envelope answers
        // capability_unimplemented for the others, as Describe reports them.
        throw refuse('capability_unimplemented', `${r.operation} is not served by this build`, capabilityInfo(CAPABILITY.get(r.operation)!));
    }
  }

  /** Admit a stop on the grant: stopping now, revoked when the core reports the drain finished. */
  /**
   * The service's own stop after a failure (a failed Home, an uncertain Start): of the grant still current
   * only, and not of one whose lease the core found run out and whose end the timing put off
   * (authority.ts holdsLease).
   */
  private stopAfterFailure(g: Grant): Promise<void> {
    return this.authority.holdsLease(g) ? this.stopGrant(g) : Promise.resolve();
  }

  private async stopGrant(g: Grant): Promise<void> {
    const { first } = this.authority.beginStop(g);
    if (!first) return;
    try {
      await this.o.core.command('stop', g.generation, 0);
    } catch (e) {
      if (!(e instanceof CoreUnavailable)) throw e;
      this.authority.drained(); // no core: nothing left to drain
    }
  }

  private async native(op: Parameters<CoreLink['command']>[0], g: Grant, axisMask: number, extra: { label?: string } = {}) {
    try {
      return await this.o.core.command(op, g.generation, axisMask, extra);
    } catch (e) {
      if (e instanceof CoreUnavailable) throw refuse('native_rejected', `core unavailable: ${e.message}`);
      throw e;
    }
  }

  private pollEvents(url: URL): Reply {
    const after = EventLog.cursor(url.searchParams);
    const events = this.events.read(after, EVENTS_PER_POLL);
    const next = events.length ? events[events.length - 1]!.sequence : after;
    return {
      status: 200,
      body: { operation: 'subscribe_events', data: { events, next_sequence: next, latest_sequence: this.events.latestSequence } },
    };
  }
}

function envelope(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { schema: RESPONSE_SCHEMA };
  for (const k of ['operation', 'sequence', 'handle', 'data', 'native_result', 'native_jog_result', 'error']) {
    const v = body[k];
    if (v === undefined || v === null || v === '' || v === 0n || v === 0) continue;
    out[k] = v;
  }
  return out;
}

/** A refusal reply. `operation` names the requested operation when it is a known one, else "unknown". */
function refusal(e: Refusal, operation?: string): Reply {
  const op = operation !== undefined && CAPABILITY.has(operation) ? operation : 'unknown';
  return { status: e.status, body: { operation: op, error: e.error, data: e.data, ...e.extra } };
}

/** Best effort: the operation a refused body named, for the reply envelope. */
function operationOf(body: Uint8Array): string | undefined {
  const m = /"operation"\s*:\s*"([a-z_]{1,40})"/.exec(Buffer.from(body.subarray(0, 4096)).toString('latin1'));
  return m?.[1];
}

function listen(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function rmIfSocket(path: string): Promise<void> {
  try {
    const st = await lstat(path);
    if (st.isSocket()) await rm(path);
    else throw new Error(`${path} exists and is not a socket`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}

/** The request_id cache key of an uploaded point list: the upload worker's digest when it took one. */
function pointsDigest(p: PointArrays): string {
  return p.digest ?? pointsArraysDigest(p);
}

/** Identity with every field empty or zero (document 1 part 2 Identity), for an execution that has none. */
