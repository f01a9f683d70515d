// The offline programming server (document 3): routes under /api/offline-programming/v1 on
// 127.0.0.1:8794 by default (part 1), the conventions and error shapes of parts 2 and 7 (./http.ts),
// service routes, cells and target selection with fencing (part 2 "Target fencing"), dense execution on
// the selected cell (./execution.ts) and weld planning through the planner of document 2 (./weldplan.ts).
// /cadquery/topology and /seam forward to worker processes (./workers.ts; the reference worker on STEP
// geometry is ./worker.ts), Cartesian jog and moves use the robot store's kinematics (./cartesian.ts),
// /local-simulator/* runs a loopback stack (./localsim.ts) and /programs* a program store (./programs.ts).

import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cellView, parseCell, readCatalogue, type CatalogueCell } from './cells.ts';
import { ControlLink, LinkError, type ControlAddress } from './control.ts';
import { CartesianSession } from './cartesian.ts';
import { CellSession, HEARTBEAT_MS, type Describe } from './execution.ts';
import { chainOf } from './kinematics.ts';
import { LOCAL_CELL_ID, LocalSimulator } from './localsim.ts';
import { ProgramStore } from './programs.ts';
import {
  bool, CAD_SEAM_BODY_BYTES, decodeBody, DENSE_EXECUTION_BODY_BYTES, objectBody, OlpError, pathParam, readBody, sendBytes, sendError, sendJson, str, WELD_PLAN_BODY_BYTES, type Shape,
} from './http.ts';
import { encodeJson, JsonObject } from '../json.ts';
import { LocalGuard } from '../local-guard.ts';
import { closeAfterReply } from '../primitives.ts';
import { readStore, robotView, StoreUnreadable } from './robots.ts';
import { DEFAULT_POOL_SIZE, DEFAULT_WORKER_TIMEOUT_MS, WorkerPool, type WorkerRoute } from './workers.ts';
import { fetchDense, pack, planWeldplan, readWeldPlanRequest, WELD_PLAN_MINUTES, weldplanSha256 } from './weldplan.ts';

export const BASE = '/api/offline-programming/v1';
export const DEFAULT_LISTEN = '127.0.0.1:8794';
export const HEALTH_SCHEMA = 'offline-programming.health.v1';
export const CAPABILITIES_SCHEMA = 'offline-programming.capabilities.v1';
/** Part 2: POSTs under /dense-execution/ that need no target fence. */
export const FENCE_EXEMPT = new Set(['/stop', '/pause', '/heartbeat', '/target', '/cells', '/jog/stop', '/jog/end']);
const SHA_PREFIXED = /^sha256:[0-9a-f]{64}$/;

export interface OlpOptions {
  host: string;
  port: number;
  /** Cell catalogue file; without one, the single target below (no selection, no fencing). */
  catalogue?: string;
  /** The single target when there is no catalogue. */
  control?: ControlAddress;
  /** The single target's identity (model and description), when it can say which robot it is. */
  singleModel?: { model_id: string; robot_description_sha256?: string };
  robotStore?: string;
  plannerUrl?: string;
  heartbeatMs?: number;
  leaseMs?: number;
  weldPlanTimeoutMs?: number;
  /** How long a cell probe (Describe) may take before the cell counts as unreachable. */
  probeTimeoutMs?: number;
  /** The CAD worker's command (argv); without it /cadquery/topology answers seam_worker_unavailable. */
  cadWorker?: readonly string[];
  /** The seam worker's command (argv); without it /seam answers seam_worker_unavailable. */
  seamWorker?: readonly string[];
  /** Workers per route (default DEFAULT_POOL_SIZE). */
  workerPool?: number;
  /** Time limit of one worker request (default DEFAULT_WORKER_TIMEOUT_MS). */
  workerTimeoutMs?: number;
  /** The local simulator: the machine configuration it runs and its robot model. */
  localSimulator?: { machine: string; model_id: string; robot_description_sha256?: string };
  /** The program catalogue's store directory. */
  programStore?: string;
  /** Host names this server answers besides the loopback names and its listen address (--allowed-host; sims/local-guard.ts). */
  allowedHosts?: readonly string[];
  log?: (line: string) => void;
}

export class OlpServer {
  private readonly server: Server;
  private catalogue: CatalogueCell[] = [];
  private selected: CellSession | null = null;
  private selectionGeneration = 0;
  private switching = false;
  private planning: AbortController | null = null;
  private readonly pools: Partial<Record<WorkerRoute, WorkerPool>> = {};
  private readonly cartesians = new WeakMap<CellSession, CartesianSession>();
  private readonly local: LocalSimulator | undefined;
  private readonly programs: ProgramStore | undefined;
  private readonly heartbeatMs: number;
  private readonly log: (l: string) => void;
  private readonly guard: LocalGuard;
  url = '';

  constructor(readonly o: OlpOptions) {
    this.heartbeatMs = o.heartbeatMs ?? HEARTBEAT_MS;
    this.log = o.log ?? (() => undefined);
    this.guard = new LocalGuard(o.host, o.allowedHosts ?? []);
    this.server = createServer((req, res) => void this.route(req, res));
    const pool = (label: string, command: readonly string[] | undefined) =>
      command ? new WorkerPool({ label, command, size: o.workerPool ?? DEFAULT_POOL_SIZE, timeoutMs: o.workerTimeoutMs ?? DEFAULT_WORKER_TIMEOUT_MS, log: this.log }) : undefined;
    const cad = pool('CAD', o.cadWorker);
    const seam = pool('seam', o.seamWorker);
    if (cad) this.pools['cadquery/topology'] = cad;
    if (seam) this.pools.seam = seam;
    if (o.localSimulator) this.local = new LocalSimulator({ ...o.localSimulator, log: this.log });
    if (o.programStore) this.programs = new ProgramStore(o.programStore);
    (this.server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  }

  get catalogued(): boolean {
    return this.o.catalogue !== undefined;
  }

  async start(): Promise<string> {
    if (this.o.catalogue) this.catalogue = readCatalogue(this.o.catalogue);
    else if (this.o.control) {
      // The single target is selected for good; it is probed now and connected on first use.
      this.catalogue = [{ cell_id: 'default', model_id: this.o.singleModel?.model_id ?? '', ...(this.o.singleModel?.robot_description_sha256 ? { robot_description_sha256: this.o.singleModel.robot_description_sha256 } : {}), mode: 'simulation', backend: 'core', control: this.o.control }];
    }
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.o.port, this.o.host, () => resolve());
    });
    const a = this.server.address() as AddressInfo;
    this.guard.listening(a.port);
    this.url = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.planning?.abort();
    for (const p of Object.values(this.pools)) p.close();
    await this.local?.stop().catch(() => undefined);
    const s = this.selected;
    this.selected = null;
    if (s) await s.close(true).catch(() => undefined);
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  // ---- routing ----

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      return sendError(req, res, 'authoring', new OlpError(400, 'invalid_request', 'the request target is not a URL path'));
    }
    const path = url.pathname.startsWith(BASE) ? url.pathname.slice(BASE.length) : null;
    const shape: Shape = path !== null && (path.startsWith('/dense-execution/') || path === '/targets/select') ? 'machine' : 'authoring';
    // A browser on this host must not reach the routes (sims/local-guard.ts): checked before anything else.
    const refused = this.guard.check(req);
    if (refused) {
      this.log(`olp: ${refused.label} on ${req.method} ${url.pathname}: ${refused.detail}`);
      closeAfterReply(req, res);
      return sendError(req, res, shape, new OlpError(refused.status, refused.label, refused.detail));
    }
    try {
      if (path === null) throw new OlpError(404, 'not_found', `every route is under ${BASE}`);
      const value = await this.dispatch(req, res, req.method ?? 'GET', path, url);
      if (value !== undefined && !res.headersSent) sendJson(req, res, 200, value);
    } catch (e) {
      if (res.headersSent || res.destroyed) return;
      if (e instanceof OlpError) return sendError(req, res, shape, e);
      // An unrecognised failure is a defect of this server: still a labelled reply, never a stack trace.
      this.log(`olp: defect on ${req.method} ${url.pathname}: ${(e as Error).stack ?? e}`);
      sendError(req, res, shape, new OlpError(500, 'internal_defect', 'the server failed to handle the request'));
    }
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse, method: string, path: string, url: URL): Promise<unknown> {
    const body = (limit = DENSE_EXECUTION_BODY_BYTES) => readBody(req, limit, res);
    const allow = (m: string) => {
      if (method !== m) throw new OlpError(405, 'method_not_allowed', `${path} answers ${m}`);
    };
    switch (path) {
      case '/health':
        allow('GET');
        return this.health();
      case '/capabilities':
        allow('GET');
        return this.capabilities();
      case '/robots':
        allow('GET');
        return this.robots();
      case '/robots/capture-model':
        allow('POST');
        return this.captureModel(objectBody(await body()));
      case '/cadquery/topology':
      case '/seam':
        allow('POST');
        return this.worker(req, res, path === '/seam' ? 'seam' : 'cadquery/topology', await body(CAD_SEAM_BODY_BYTES));
      case '/weld-plan':
      case '/weld-plan/export':
        allow('POST');
        return this.weldPlan(req, res, await body(WELD_PLAN_BODY_BYTES), path === '/weld-plan/export');
      case '/targets':
        allow('GET');
        return this.targets();
      case '/targets/select': {
        allow('POST');
        const b = objectBody(await body());
        return this.select(str(b, 'cell_id')!, str(b, 'model_id'));
      }
    }
    if (path.startsWith('/dense-execution/')) return this.denseExecution(req, method, path.slice('/dense-execution'.length), url, body);
    if (path.startsWith('/local-simulator/')) return this.localSimulator(method, path.slice('/local-simulator'.length), body);
    if (path === '/programs' || path.startsWith('/programs/')) return this.programCatalogue(req, res, method, path, body);
    throw new OlpError(404, 'not_found', `no route ${path}`);
  }

  // ---- service routes ----

  private health(): Record<string, unknown> {
    const s = this.selected;
    return {
      ok: true,
      schema: HEALTH_SCHEMA,
      mode: this.catalogued ? 'catalogue' : this.catalogue.length ? 'single_target' : 'offline',
      network_required: false,
      connected: s !== null,
      connected_targets: s ? [s.cell.cell_id] : [],
      local_simulator: this.local !== undefined,
      local_ready: this.local?.session != null,
      execution_enabled: this.catalogue.length > 0,
      target_planning: this.o.plannerUrl !== undefined,
      teleop_enabled: this.catalogue.length > 0,
      program_catalog: this.programs !== undefined,
    };
  }

  private capabilities(): Record<string, unknown> {
    return {
      schema: CAPABILITIES_SCHEMA,
      features: {
        robots: this.o.robotStore !== undefined,
        weld_plan: this.o.plannerUrl !== undefined,
        cell_catalogue: this.catalogued,
        target_fencing: this.catalogued,
        dense_execution: this.catalogue.length > 0,
        joint_jog: this.catalogue.length > 0,
        joint_move: this.catalogue.length > 0,
        cartesian: this.catalogue.length > 0 && this.o.robotStore !== undefined,
        go_home: false,
        cad_worker: this.pools['cadquery/topology'] !== undefined,
        seam_worker: this.pools.seam !== undefined,
        local_simulator: this.local !== undefined,
        program_catalog: this.programs !== undefined,
      },
      limits: {
        dense_execution_body_bytes: DENSE_EXECUTION_BODY_BYTES,
        cad_seam_body_bytes: CAD_SEAM_BODY_BYTES,
        weld_plan_body_bytes: WELD_PLAN_BODY_BYTES,
        weld_plan_timeout_s: (this.o.weldPlanTimeoutMs ?? WELD_PLAN_MINUTES * 60_000) / 1000,
        concurrent_weld_plans: 1,
        heartbeat_timeout_ms: this.heartbeatMs,
        jog_update_interval_ms: 50,
        worker_pool_size: this.o.workerPool ?? DEFAULT_POOL_SIZE,
        worker_timeout_ms: this.o.workerTimeoutMs ?? DEFAULT_WORKER_TIMEOUT_MS,
      },
    };
  }

  private store() {
    try {
      return readStore(this.o.robotStore);
    } catch (e) {
      if (e instanceof StoreUnreadable) throw new OlpError(500, 'robot_store_unreadable', e.message);
      throw e;
    }
  }

  private robots(): Record<string, unknown> {
    const s = this.store();
    return { ok: true, robots: s.robots.map(robotView), problems: s.problems };
  }

  private captureModel(b: Record<string, unknown>): Record<string, unknown> {
    const bad = (why: string) => new OlpError(400, 'invalid_request', why);
    const model = b.model_id;
    const digest = b.robot_description_sha256;
    if (typeof model !== 'string' || model === '') throw bad('model_id is required');
    if (typeof digest !== 'string' || !SHA_PREFIXED.test(digest)) throw bad('robot_description_sha256 must be sha256:<64 hex>');
    const cal = b.machine_planning_calibration_base64;
    if (cal !== undefined && (typeof cal !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(cal) || cal.length % 4 !== 0)) throw bad('machine_planning_calibration_base64 is not base64');
    const r = this.store().robots.find((x) => x.model_id === model);
    if (!r) throw bad(`no robot ${model} in the robot store`);
    if (r.robot_description_sha256 !== digest) throw bad(`robot ${model} is described by ${r.robot_description_sha256}, not ${digest}`);
    const calBytes = typeof cal === 'string' && cal !== '' ? Buffer.from(cal, 'base64') : undefined;
    return {
      ok: true,
      urdf: r.urdf,
      identity: {
        model_id: r.model_id,
        robot_description_sha256: r.robot_description_sha256,
        machine_planning_calibration_sha256: calBytes ? 'sha256:' + createHash('sha256').update(calBytes).digest('hex') : '',
        machine_planning_calibration_source: '',
      },
    };
  }

  // ---- CAD and seam workers ----

  /** Forward a /cadquery/topology or /seam body to a worker of the route (./workers.ts). */
  private async worker(req: IncomingMessage, res: ServerResponse, route: WorkerRoute, bytes: Buffer): Promise<undefined> {
    const pool = this.pools[route];
    if (!pool) throw new OlpError(503, 'seam_worker_unavailable', `no ${route === 'seam' ? 'seam' : 'CAD'} worker is configured on this server`);
    const v = decodeBody(bytes);
    if (!(v instanceof JsonObject)) throw new OlpError(400, 'invalid_request', 'body is not a JSON object');
    const op = v.fields.get('operation');
    const gone = clientGone(req, res);
    try {
      const r = await pool.run(route, bytes, gone.signal);
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (route === 'seam') headers['x-offline-seam-part'] = r.part;
      sendBytes(req, res, 200, Buffer.from(encodeJson({ ok: true, operation: typeof op === 'string' ? op : null, part: r.part, result: r.result })), headers);
      return undefined;
    } catch (e) {
      if (e instanceof OlpError && e.code === 'canceled') this.log(`olp: ${route} canceled: the client went away`);
      throw e;
    } finally {
      gone.dispose();
    }
  }

  // ---- local simulator and program catalogue ----

  private async localSimulator(method: string, route: string, body: (limit?: number) => Promise<Buffer>): Promise<unknown> {
    const l = this.local;
    if (!l) throw new OlpError(503, 'local_simulator_unavailable', 'no local simulator is configured on this server (--local-simulator)');
    if (method === 'GET') {
      if (route === '/status') return l.status();
      if (route === '/state') {
        const s = l.session;
        if (!s) throw new OlpError(409, 'local_simulator_not_running', 'the local simulator is not running');
        return { ok: true, cell_id: s.cell.cell_id, axes: s.describe.axes.map((a, i) => ({ id: a.id, unit: a.position_unit })), positions: await s.positions() };
      }
      throw new OlpError(404, 'not_found', `no route GET /local-simulator${route}`);
    }
    if (method !== 'POST') throw new OlpError(405, 'method_not_allowed', `/local-simulator${route} answers POST`);
    const b = objectBody(await body(DENSE_EXECUTION_BODY_BYTES));
    switch (route) {
      case '/start':
        return l.start();
      case '/stop':
        return l.stop();
      case '/jog/begin':
      case '/jog/update': {
        const s = await l.preview();
        const j = jogBody({ ...b, target_id: LOCAL_CELL_ID });
        return route === '/jog/begin' ? s.jogBegin(j) : s.jogUpdate(j);
      }
      case '/jog/end':
        return l.session ? l.session.jogEnd({ ...(typeof b.session_id === 'string' ? { session_id: b.session_id } : {}) }) : { active: false };
    }
    throw new OlpError(404, 'not_found', `no route POST /local-simulator${route}`);
  }

  private async programCatalogue(req: IncomingMessage, res: ServerResponse, method: string, path: string, body: (limit?: number) => Promise<Buffer>): Promise<unknown> {
    const p = this.programs;
    if (!p) throw new OlpError(503, 'program_catalog_unavailable', 'no program store is configured on this server (--program-store)');
    if (path === '/programs') {
      if (method !== 'GET') throw new OlpError(405, 'method_not_allowed', '/programs answers GET');
      return { ok: true, ...p.list() };
    }
    const id = pathParam(path.slice('/programs/'.length), 'program id');
    if (method === 'GET') {
      sendBytes(req, res, 200, p.get(id), { 'content-type': 'application/json' });
      return undefined;
    }
    if (method === 'PUT') return p.put(id, await body(CAD_SEAM_BODY_BYTES));
    throw new OlpError(405, 'method_not_allowed', '/programs/{id} answers GET and PUT');
  }

  // ---- cells and targets ----

  private async probe(c: CatalogueCell): Promise<{ link: ControlLink; describe: Describe }> {
    const link = new ControlLink(c.control, this.o.probeTimeoutMs ?? 5_000);
    try {
      const signal = AbortSignal.timeout(this.o.probeTimeoutMs ?? 5_000);
      const r = await link.describe(signal);
      if (r.status !== 200) throw new LinkError(`describe answered ${r.status} ${r.error ?? ''}`);
      return { link, describe: r.data as Describe };
    } catch (e) {
      await link.close();
      throw new OlpError(409, 'cell_unreachable', `cell ${c.cell_id}: ${(e as Error).message}`);
    }
  }

  /** Why a reachable cell's control service is not the cell the catalogue describes, or undefined. */
  private mismatch(c: CatalogueCell, d: Describe): OlpError | undefined {
    if (d.backend !== c.mode) return new OlpError(409, 'cell_mode_mismatch', `cell ${c.cell_id} is catalogued ${c.mode}, its control service runs ${d.backend}`);
    if (c.pair_id !== undefined && d.binding?.pair_id !== c.pair_id) return new OlpError(409, 'cell_backend_mismatch', `cell ${c.cell_id} expects pair ${c.pair_id}, its control service is pair ${d.binding?.pair_id}`);
    if (c.configuration_sha256 === undefined) return new OlpError(409, 'cell_configuration_mismatch', `cell ${c.cell_id} pins no configuration_sha256 (not commissioned)`);
    if (d.configuration_sha256 !== c.configuration_sha256) return new OlpError(409, 'cell_configuration_mismatch', `cell ${c.cell_id} pins configuration ${c.configuration_sha256}, its control service runs ${d.configuration_sha256}`);
    return undefined;
  }

  private async targets(): Promise<Record<string, unknown>> {
    const rows = await Promise.all(
      this.catalogue.map(async (c) => {
        const view = { ...cellView(c), selected: this.selected?.cell.cell_id === c.cell_id };
        if (c.backend !== 'core') return { ...view, reachable: false, reason: 'cell_backend_unavailable' };
        if (this.catalogued && c.configuration_sha256 === undefined) return { ...view, reachable: false, reason: 'cell_configuration_missing' };
        try {
          const p = await this.probe(c);
          await p.link.close();
          if (p.describe.backend !== c.mode) return { ...view, reachable: false, reason: 'cell_mode_mismatch', detail: `control service runs ${p.describe.backend}` };
          return { ...view, reachable: true };
        } catch (e) {
          return { ...view, reachable: false, reason: 'cell_unreachable', detail: (e as OlpError).detail };
        }
      }),
    );
    return { ok: true, catalogue: this.catalogued, selected: this.selectedView(), targets: rows };
  }

  private selectedView(): Record<string, unknown> {
    return { cell_id: this.selected?.cell.cell_id ?? '', selection_generation: this.selectionGeneration };
  }

  /** POST /targets/select and /dense-execution/target: every refusal of part 7, in this order. */
  private async select(cellId: string, modelId: string | undefined, clearAllowed = false): Promise<Record<string, unknown>> {
    if (!this.catalogued) throw new OlpError(503, 'cell_catalogue_unavailable', 'no cell catalogue is configured (single target: nothing to select)');
    if (this.switching) throw new OlpError(409, 'cell_switch_busy', 'another target selection is in progress');
    const current = this.selected;
    if (clearAllowed && cellId === '') {
      if (current?.playing) throw new OlpError(409, 'cell_switch_while_playing', `cell ${current.cell.cell_id} is playing a program: stop it first`);
      this.switching = true;
      try {
        if (current && !(await current.close(true))) throw new OlpError(409, 'cell_previous_stop_failed', `cell ${current.cell.cell_id} could not be stopped`);
        this.selected = null;
        this.selectionGeneration++;
      } finally {
        this.switching = false;
      }
      return { ok: true, selected: this.selectedView(), target: null };
    }
    const c = this.catalogue.find((x) => x.cell_id === cellId);
    if (!c) throw new OlpError(409, 'cell_id_unknown', `no cell ${cellId} in the catalogue`);
    if (modelId !== undefined && modelId !== c.model_id) throw new OlpError(409, 'cell_model_mismatch', `cell ${cellId} has robot model ${c.model_id}, not ${modelId}`);
    if (c.backend !== 'core') throw new OlpError(409, 'cell_backend_unavailable', `cell ${cellId} needs backend ${c.backend}; this server drives the core backend only`);
    if (c.robot_description_sha256 !== undefined && this.o.robotStore !== undefined) {
      const r = this.store().robots.find((x) => x.model_id === c.model_id);
      if (!r || r.robot_description_sha256 !== c.robot_description_sha256) {
        throw new OlpError(409, 'cell_description_invalid', `cell ${cellId}'s robot description ${c.robot_description_sha256} is not in the robot store${r ? ` (the store has ${r.robot_description_sha256})` : ''}`);
      }
    }
    if (current && current.cell.cell_id === cellId) return { ok: true, selected: this.selectedView(), target: this.targetView(current) };
    if (current?.playing) throw new OlpError(409, 'cell_switch_while_playing', `cell ${current.cell.cell_id} is playing a program: stop it first`);
    this.switching = true;
    try {
      const p = await this.probe(c);
      const why = this.mismatch(c, p.describe);
      if (why) {
        await p.link.close();
        throw why;
      }
      if (current && !(await current.close(true))) {
        await p.link.close();
        throw new OlpError(409, 'cell_previous_stop_failed', `cell ${current.cell.cell_id} could not be stopped; selection unchanged`);
      }
      this.selected = new CellSession(c, p.link, p.describe, { heartbeatMs: this.heartbeatMs, leaseMs: this.o.leaseMs ?? 0, log: this.log });
      this.selectionGeneration++;
    } finally {
      this.switching = false;
    }
    return { ok: true, selected: this.selectedView(), target: this.targetView(this.selected!) };
  }

  private targetView(s: CellSession): Record<string, unknown> {
    return { ...cellView(s.cell), configuration_sha256: s.describe.configuration_sha256, pair_id: s.describe.binding?.pair_id, axes: s.describe.axes.map((a) => a.id) };
  }

  /** The session of the selected (or single) target, connecting the single target on first use. */
  private async session(): Promise<CellSession> {
    if (this.selected) return this.selected;
    if (!this.catalogued && this.catalogue[0]) {
      const c = this.catalogue[0];
      const p = await this.probe(c);
      if (!this.selected) this.selected = new CellSession(c, p.link, p.describe, { heartbeatMs: this.heartbeatMs, leaseMs: this.o.leaseMs ?? 0, log: this.log });
      else await p.link.close();
      return this.selected!;
    }
    throw new OlpError(409, 'target_not_selected', this.catalogued ? 'no cell is selected: POST /targets/select first' : 'this server has no target (start it with --control-socket or --catalogue)');
  }

  /** The Cartesian jog and moves of the selected cell, with its robot's kinematics from the robot store. */
  private async cartesian(): Promise<CartesianSession> {
    const s = await this.session();
    let c = this.cartesians.get(s);
    if (!c) {
      if (this.o.robotStore === undefined) throw new OlpError(409, 'cartesian_unavailable', 'no robot store is configured (--robot-store): no kinematics');
      const r = this.store().robots.find((x) => x.model_id === s.cell.model_id);
      if (!r) throw new OlpError(409, 'cartesian_unavailable', `no robot description of model ${s.cell.model_id} in the robot store`);
      let chain;
      try {
        chain = chainOf(r.urdf);
      } catch (e) {
        throw new OlpError(409, 'cartesian_unavailable', `robot ${r.model_id}: ${(e as Error).message}`);
      }
      c = new CartesianSession(s, chain, this.log);
      this.cartesians.set(s, c);
    }
    return c;
  }

  // ---- dense execution ----

  private checkFence(req: IncomingMessage, route: string, b: Record<string, unknown>): void {
    if (!this.catalogued) return; // single target: no fencing (part 2)
    if (FENCE_EXEMPT.has(route) || route.startsWith('/cells/') || (route === '/arm' && b.armed === false)) return;
    const g = req.headers['x-rt-target-generation'];
    const c = req.headers['x-rt-target-cell'];
    if (typeof g !== 'string' || !/^(0|[1-9][0-9]{0,15})$/.test(g) || typeof c !== 'string') {
      throw new OlpError(428, 'target_fence_required', 'POST under /dense-execution/ needs X-RT-Target-Generation (decimal) and X-RT-Target-Cell');
    }
    const cur = this.selected?.cell.cell_id ?? '';
    if (Number(g) !== this.selectionGeneration || c !== cur) {
      throw new OlpError(409, 'target_changed', `the selection is cell "${cur}" generation ${this.selectionGeneration}, the request was fenced to cell "${c}" generation ${g}`);
    }
  }

  private async denseExecution(req: IncomingMessage, method: string, route: string, url: URL, body: (limit?: number) => Promise<Buffer>): Promise<unknown> {
    if (method === 'GET') {
      switch (route) {
        case '/status': {
          const s = this.selected ?? (!this.catalogued && this.catalogue.length ? await this.session() : null);
          if (!s) return { target: this.selectedView(), connected: false, armed: false, lease_held: false, playing: false, stopped_reason: '', heartbeat_timeout_ms: this.heartbeatMs, loaded: null };
          let st: Record<string, any>;
          try {
            st = await s.status();
          } catch (e) {
            // The selected cell does not answer: the status still says what this server knows.
            if (!(e instanceof OlpError)) throw e;
            return { target: this.selectedView(), connected: false, ...s.view(), cell_error: { error: e.code, detail: e.detail } };
          }
          return {
            target: this.selectedView(),
            connected: true,
            ...s.view(),
            core: { armed: st.core?.armed === 1, home_valid_mask: st.core?.home_valid_mask ?? 0, axis_enable_mask: st.core?.axis_enable_mask ?? 0 },
            execution: { state: st.execution?.state ?? '', generation: st.execution?.generation ?? 0, ...(st.execution?.error ? { error: st.execution.error } : {}) },
            grant: { active: st.grant?.active === true, stopping: st.grant?.stopping === true },
            axes: (st.axes ?? []).map((a: Record<string, unknown>) => ({ id: a.id, position: a.position, enabled: a.enabled, ready: a.ready })),
          };
        }
        case '/cell': {
          const s = await this.session();
          return { ...this.targetView(s), selection_generation: this.selectionGeneration };
        }
        case '/capabilities': {
          const s = await this.session();
          return { cell_id: s.cell.cell_id, capabilities: s.describe.capabilities, axes: s.describe.axes, cycle_ns: s.describe.cycle_ns };
        }
        case '/telemetry/window': {
          const s = await this.session();
          const w = Number(url.searchParams.get('window_ms') ?? '2000');
          if (!Number.isInteger(w) || w < 1 || w > 10_000) throw new OlpError(400, 'invalid_request', 'window_ms must be an integer 1..10000');
          return s.telemetryWindow(w);
        }
        case '/cells':
          return { ok: true, cells: this.catalogue.map(cellView) };
        case '/jog/state':
          return (await this.session()).jogState();
        case '/cartesian/state':
          return (await this.cartesian()).state();
      }
      throw new OlpError(404, 'not_found', `no route GET /dense-execution${route}`);
    }
    if (method === 'DELETE' && route.startsWith('/cells/')) {
      await body();
      return this.deleteCell(pathParam(route.slice('/cells/'.length), 'cell id'));
    }
    if (method !== 'POST') throw new OlpError(405, 'method_not_allowed', `${route} answers POST`);
    const b = objectBody(await body(DENSE_EXECUTION_BODY_BYTES));
    this.checkFence(req, route, b);
    switch (route) {
      case '/target':
        return this.select(str(b, 'cell')!, undefined, true);
      case '/cells':
        return this.registerCell(b);
      case '/stop': {
        const s = this.selected;
        return s ? { target: this.selectedView(), ...(await s.stop()) } : { target: this.selectedView(), stopped: true };
      }
      case '/heartbeat':
        return (await this.session()).heartbeat();
      case '/arm': {
        const armed = bool(b, 'armed');
        const s = await this.session();
        return armed ? s.arm() : s.stop('disarmed');
      }
      case '/home':
        return (await this.session()).home();
      case '/load': {
        const digest = str(b, 'trajectory_digest')!;
        if (!SHA_PREFIXED.test(digest)) throw new OlpError(400, 'invalid_request', 'trajectory_digest must be sha256:<64 hex>');
        if (!this.o.plannerUrl) throw new OlpError(503, 'motion_origin_unavailable', 'no weld planner is configured (--planner-url)');
        const s = await this.session();
        return s.load(await fetchDense(this.o.plannerUrl, digest));
      }
      case '/play':
        return (await this.session()).play();
      case '/pause':
        return this.selected ? this.selected.pause() : { playing: false };
      case '/jog/begin':
      case '/jog/update':
        return (await this.session())[route === '/jog/begin' ? 'jogBegin' : 'jogUpdate'](jogBody(b));
      case '/jog/end':
      case '/jog/stop':
        return this.selected ? this.selected.jogEnd({ ...(typeof b.session_id === 'string' ? { session_id: b.session_id } : {}) }) : { active: false };
      case '/move': {
        const pts = b.points;
        if (!Array.isArray(pts) || pts.length < 1 || pts.length > 64) throw new OlpError(400, 'invalid_request', 'points must be 1..64 joint vectors');
        return (await this.session()).move(pts as number[][]);
      }
      case '/go-home':
        throw new OlpError(409, 'go_home_unavailable', 'go-home is not available on the core backend');
      case '/cartesian/start':
        return (await this.cartesian()).start(b);
      case '/cartesian/intent':
        return (await this.cartesian()).intent(b);
      case '/cartesian/stop':
        return (await this.cartesian()).stop();
      case '/cartesian/halt':
        return (await this.cartesian()).halt();
      case '/cartesian/move':
        return (await this.cartesian()).move(b);
    }
    throw new OlpError(404, 'not_found', `no route POST /dense-execution${route}`);
  }

  private registerCell(b: Record<string, unknown>): Record<string, unknown> {
    if (!this.catalogued) throw new OlpError(503, 'cell_catalogue_unavailable', 'no cell catalogue is configured');
    const c = parseCell(b, process.cwd(), 'cell');
    if (c.configuration_sha256 === undefined) throw new OlpError(409, 'cell_not_commissioned', `cell ${c.cell_id} has no configuration_sha256 pin: commission it first`);
    const old = this.catalogue.find((x) => x.cell_id === c.cell_id);
    if (old) {
      if (old.configuration_sha256 !== c.configuration_sha256 || old.pair_id !== c.pair_id || old.model_id !== c.model_id) {
        throw new OlpError(409, 'cell_binding_pinned', `cell ${c.cell_id} is pinned to ${old.model_id} ${old.pair_id ?? ''} ${old.configuration_sha256}: delete it first`);
      }
      return { ok: true, cell: cellView(old), created: false };
    }
    c.registered = true;
    this.catalogue.push(c);
    return { ok: true, cell: cellView(c), created: true };
  }

  private async deleteCell(id: string): Promise<Record<string, unknown>> {
    if (!this.catalogued) throw new OlpError(503, 'cell_catalogue_unavailable', 'no cell catalogue is configured');
    const i = this.catalogue.findIndex((x) => x.cell_id === id);
    if (i < 0) throw new OlpError(404, 'cell_id_unknown', `no cell ${id}`);
    const c = this.catalogue[i]!;
    if (!c.registered) throw new OlpError(409, 'cell_binding_pinned', `cell ${id} comes from the catalogue file and cannot be deleted`);
    if (this.selected?.cell.cell_id === id) throw new OlpError(409, 'cell_switch_busy', `cell ${id} is selected: select another cell first`);
    this.catalogue.splice(i, 1);
    return { ok: true, deleted: id };
  }

  // ---- weld planning ----

  private async weldPlan(req: IncomingMessage, res: ServerResponse, bytes: Buffer, exportOnly: boolean): Promise<unknown> {
    const r = readWeldPlanRequest(decodeBody(bytes, 'weld_plan_invalid'));
    const container = pack(r);
    const weldplan_sha256 = weldplanSha256(container);
    if (exportOnly) {
      const name = (r.programId || 'program').replace(/[^A-Za-z0-9._-]/g, '_');
      sendBytes(req, res, 200, container, { 'content-type': 'application/zip', 'content-disposition': `attachment; filename="${name}.weldplan"`, 'x-weldplan-sha256': weldplan_sha256 });
      return undefined;
    }
    if (!this.o.plannerUrl) throw new OlpError(503, 'motion_origin_unavailable', 'no weld planner is configured (--planner-url)');
    if (this.planning) throw new OlpError(429, 'busy', 'a weld plan is already running (one at a time)');
    // Calibration: the connected cell's when one is connected; the request's only when none is (part 4).
    const connected = this.selected;
    const calibration = connected ? connected.cell.calibration : r.calibration;
    const ac = new AbortController();
    this.planning = ac;
    const timeoutMs = this.o.weldPlanTimeoutMs ?? WELD_PLAN_MINUTES * 60_000;
    let why: 'canceled' | 'timeout' | undefined;
    const timer = setTimeout(() => {
      why = 'timeout';
      ac.abort();
    }, timeoutMs);
    const gone = clientGone(req, res);
    gone.signal.addEventListener('abort', () => {
      why ??= 'canceled';
      ac.abort();
    });
    try {
      const { result, blob } = await planWeldplan(this.o.plannerUrl, r, container, ac.signal);
      const d = result.dense as Record<string, any>;
      return {
        ok: true,
        result,
        weldplan_sha256,
        program_digest: r.programDigest ?? '',
        dense: { digest: d.trajectory_digest, plan_id: d.plan_id, samples: d.total_sample_count, segments: d.segments, robot_cell: d.robot_cell ?? null },
        dense_blob_base64: blob.toString('base64'),
        planning_calibration: calibration
          ? { sha256: 'sha256:' + createHash('sha256').update(calibration).digest('hex'), source: connected ? 'target' : '' }
          : { sha256: '', source: '' },
      };
    } catch (e) {
      if (ac.signal.aborted) {
        if (why === 'timeout') throw new OlpError(504, 'timeout', `the weld plan ran longer than ${timeoutMs} ms`);
        this.log('olp: weld plan canceled: the client went away');
        throw new OlpError(408, 'canceled', 'the client went away');
      }
      throw e;
    } finally {
      clearTimeout(timer);
      gone.dispose();
      this.planning = null;
    }
  }
}

/**
 * A signal that fires when the client goes away before its reply is written: its connection closed, or
 * its side half-closed (its socket stays writable for the 408; the planner of document 2 treats a
 * half-close the same way).
 */
function clientGone(req: IncomingMessage, res: ServerResponse): { signal: AbortSignal; dispose: () => void } {
  const ac = new AbortController();
  const gone = () => {
    if (!res.writableFinished) ac.abort();
  };
  res.on('close', gone);
  req.socket.once('end', gone);
  return {
    signal: ac.signal,
    dispose: () => {
      res.off('close', gone);
      req.socket.off('end', gone);
    },
  };
}

function jogBody(b: Record<string, unknown>): { target_id: string; session_id: string; revision: number; axis: string; direction: number; fraction: number } {
  const bad = (why: string) => new OlpError(400, 'invalid_request', why);
  const s = (k: string) => {
    if (typeof b[k] !== 'string' || b[k] === '') throw bad(`${k} must be a nonempty string`);
    return b[k] as string;
  };
  const revision = b.revision;
  if (typeof revision !== 'number' || !Number.isInteger(revision) || revision < 0) throw bad('revision must be an integer >= 0');
  const direction = b.direction;
  if (direction !== 1 && direction !== -1) throw bad('direction must be 1 or -1');
  const fraction = b.fraction;
  if (typeof fraction !== 'number' || !(fraction >= 0 && fraction <= 1)) throw bad('fraction must be a number 0..1');
  return { target_id: s('target_id'), session_id: s('session_id'), revision, axis: s('axis'), direction, fraction };
}
