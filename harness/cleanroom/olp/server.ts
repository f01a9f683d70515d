/*
 * blind-olp: an offline programming (OLP) server written from document 3 alone ("clean room"), driving
 * document 1's control service as a client and calling document 2's planner.
 *
 * DECISIONS (where document 3 says "not shown" or leaves the detail open). "D3" = document 3.
 *
 * | # | Topic | Decision |
 * |---|-------|----------|
 * | 1 | Catalogue | The `cells` given to the constructor / `--cells FILE.json` are the catalogue. A non-empty catalogue turns on selection and fencing. With `catalogue: false` (CLI `--no-catalogue`) and exactly one cell, that cell is the single implicit target: no selection, no fencing, POST /targets/select and /dense-execution/target answer 503 cell_catalogue_unavailable. An empty catalogue also answers 503 cell_catalogue_unavailable. |
 * | 2 | Cell file format | JSON `{ "cells": [BlindCell...] }` or a bare array. BlindCell: cell_id, control_socket, model_id, optional robot_description_sha256, robot_description_file (URDF; its sha256 pins the description), configuration_sha256 (expected Describe value), backend (expected Describe backend: simulation or live), execution_mode (simulation, dry_run, production), requested_lease_ms. |
 * | 3 | Selection generation | One integer per server, starting at 0, +1 on every accepted selection or clear (also re-selecting the same cell). Any accepted selection or clear first stops a held lease (control `stop`) and forgets the loaded program and jog session. status.target = {cell_id, selection_generation, model_id}. |
 * | 4 | Fence failures | Missing or malformed X-RT-Target-* headers are treated like a stale fence: 409 target_changed (nothing reaches the robot). A fenced route with nothing selected: 409 no_target_selected. |
 * | 5 | Selection refusals | unknown id -> cell_id_unknown; model_id given and != cell model_id -> cell_model_mismatch; another selection/arm in progress -> cell_switch_busy; selected cell executing -> cell_switch_while_playing; Describe fails -> cell_unreachable; Describe backend not simulation/live -> cell_backend_unavailable; configured backend != Describe backend -> cell_backend_mismatch; configured configuration_sha256 != Describe -> cell_configuration_mismatch; execution_mode production on a simulated backend (or simulation on a live one) -> cell_mode_mismatch; robot_description_file unreadable or its sha256 != robot_description_sha256 -> cell_description_invalid; stopping the previous cell's lease failed -> cell_previous_stop_failed. All 409. Reply {ok:true, selected, target}. |
 * | 6 | Registry | POST /dense-execution/cells body = a BlindCell; refusals 409 cell_binding_pinned (id already in use, catalogue or registered), 409 cell_not_commissioned (control service reachable but Describe names no binding pair), 400 invalid_request (missing fields). Unreachable sockets are accepted (listed as unreachable). DELETE only for registered cells: catalogue cell -> 409 cell_binding_pinned, unknown -> 404 cell_id_unknown. Deleting the selected cell stops its lease and clears the selection. |
 * | 7 | Targets list | GET /targets -> {ok, catalogue, selected, selection_generation, targets:[{cell_id, model_id, robot_description_sha256, registered, selected, backend:{reachable, reason?, kind, simulated, pair_id, revision, configuration_sha256, machine_sha256, deployment_sha256}}]}. |
 * | 8 | Lease | Arm, Home and Load acquire the control-service grant when none is held (controller "blind-olp", requested_lease_ms default 500 capped by the cell) and renew it every lease/5 ms (at most two renewals in flight, each waiting up to 2 s; a slow reply is not a loss, a refusal is), and once more right before each upload. The UI heartbeat (POST /heartbeat) must arrive within heartbeatMs (default 5000) while the lease is held, otherwise the server sends `stop` and records last_stop_reason ui_heartbeat_lost. A renewal failure records last_stop_reason lease_lost:<label>. |
 * | 9 | Arm | {armed:true}: if the disarmed cell has latched execution faults, acquire, reset_fault (retires that session); then acquire if needed, enable every described axis, arm. {armed:false}: control `stop` (outputs off, drives inhibited, lease released). Reply {ok:true, armed}. |
 * | 10 | Home | Acquire if needed; home every axis whose Describe entry has native_home; if the cell was armed before, enable and arm again afterwards (home leaves axes disabled). Reply {ok:true, home_valid_mask, armed}. |
 * | 11 | home_required | Play, move and jog begin answer 409 home_required when status core.home_valid_mask lacks a described axis. No lease -> 409 not_armed. |
 * | 12 | Load | Body {trajectory_digest} (fetched from the planner; 409 dense_blob_not_found when the planner no longer holds it) or {dense_blob_base64} (only for blobs small enough for the 64 KiB dense-execution body bound). robot_cell check of D2 before acquiring: robot_cell_missing / robot_cell_mismatch / robot_cell_unavailable (409); a different machine_configuration_sha256 only adds a note. Then prepare_program. Reply {ok:true, identity, program, notes}. |
 * | 13 | Play / pause / stop | Play: start_program with the loaded identity (409 program_not_loaded without one). Pause: halt (keeps lease). Stop: control stop, releases the lease; 200 even when nothing is held. |
 * | 14 | Joint jog | Bodies {target_id (= selected cell id), session_id (client string), revision (integer, strictly increasing per session), axis ("J1".. or 0-based index), direction (+1/-1), fraction 0..1}. Motion uses the control service's legacy `jog` (velocity = direction*fraction*reduced speed, see 15; timeout_ms 250) because the jog.sock frame layout is "not shown" in D1. A missing update stops motion within 250 ms. Refusals: 409 jog_target_mismatch, jog_session_mismatch, jog_revision_stale, jog_not_active, 400 invalid_request. /jog/end and /jog/stop send a zero-velocity jog and close the session. |
 * | 15 | Joint move | Body {positions_rad: number[axis count], speed_scale? (0,1], default 1} scaling the reduced speed min(10 % of Describe max_velocity, 0.1 rad/s), acceleration at most 0.5 rad/s^2 x speed_scale. Checked against Describe limits only (409 joint_limit_exceeded with limit_violation). Quintic profile sampled every 10 ms from the current status position, sent with prepare_trajectory + start_trajectory. |
 * | 16 | Not offered | Cartesian routes, go-home, local simulator, program catalogue, CAD and seam workers: 503 unavailable (machine routes as {error:"unavailable"}, authoring routes as {ok:false, code:"unavailable"/"seam_worker_unavailable"}). Fencing is still checked first on fenced routes. |
 * | 17 | Weld-plan container | Zip (stored) with manifest.json {schema weldplan.manifest.v1, entries [{name, sha256 "sha256:<hex>", bytes}]}, program.json, tooling.json, the STEP file (name step_filename or workpiece.step) and machine_planning_calibration.bin (only when no cell is connected). Planner options: run_weld_trajopt, run_connecting_trajopt, verify, dense all true; program_id, manifest_revision, plan_revision, free_space_backend forwarded. |
 * | 18 | Weld-plan mapping | Planner 4xx/unreachable -> 502 motion_plan_failed; non-JSON -> 502 motion_plan_invalid_response; a seam with crossed false -> 502 motion_plan_seam_refused; connecting_trajectories_error -> 502 motion_plan_unjoined; dense_error -> 502 motion_plan_no_trajectory {dense_error}; dense fetch 404 -> 502 dense_blob_not_found; other fetch failure 502 dense_blob_unreachable. Program refused by the structural check -> 400 weld_plan_invalid with `problems`. |
 * | 19 | Success replies | Machine routes: {ok:true, ...}. Errors: machine routes {error, detail[, limit_violation]}; authoring routes {ok:false, code, error}. Control-service refusals keep the control label as `error`, HTTP 409. |
 * | 20 | Security | Listen host must be loopback (constructor throws otherwise). Host header must be 127.0.0.1/localhost/[::1] with our port, Origin (when sent) http(s)://the same -> else 403 forbidden_host / forbidden_origin. Bodies bounded (64 KiB dense-execution and other small routes, 12 MiB topology/seam, 24 MiB weld-plan) -> 413 payload_too_large. Non-JSON or trailing data -> 400 invalid_json. |
 * | 21 | Robots | GET /robots reads *.urdf in robotStoreDir: model_id = file name without .urdf, sha256 of the file bytes, frames = link names, axes.driven = non-fixed joint names, held = [], reset_pose = zeros. No store configured -> empty list. Unreadable directory -> 500 robot_store_unreadable. capture-model: model and digest must match a stored robot -> {ok, urdf, identity:{model_id, robot_description_sha256, machine_planning_calibration_sha256?}}; else 400 invalid_request. |
 * | 22 | Telemetry window | GET /dense-execution/telemetry/window?after=N -> JSON summary of one control-service batch: {first_sequence, last_sequence, dropped, record_count, records:[{seq, t_ns, armed, positions[]}]} (last 64 records, positions converted with counts_per_unit and sign). |
 */
import http from "node:http";
import fs from "node:fs";
import { ControlClient, ControlError } from "./control.js";
import { readDenseHeader, sha256Hex } from "./program.js";
import { HttpError, isLoopback, isObj, parseJson, readBody, send, tryJson } from "./http.js";
import { captureModel, robots } from "./robots.js";
import { WeldPlanning } from "./weldplan.js";

export interface BlindCell {
  cell_id: string;
  control_socket: string;
  model_id: string;
  robot_description_sha256?: string | undefined;
  robot_description_file?: string | undefined;
  configuration_sha256?: string | undefined;
  backend?: "simulation" | "live" | undefined;
  execution_mode?: "simulation" | "dry_run" | "production" | undefined;
  requested_lease_ms?: number | undefined;
}

export interface BlindOlpOptions {
  cells: BlindCell[];
  plannerUrl?: string | undefined;
  robotStoreDir?: string | undefined;
  host?: string | undefined;
  port?: number | undefined;
  heartbeatMs?: number | undefined;
  /** false: the single configured cell is the implicit target (no catalogue, no selection, no fencing). */
  catalogue?: boolean | undefined;
}

const PREFIX = "/api/offline-programming/v1";
const KIB = 1024;
const MIB = 1024 * 1024;
// Reduced (manual) speed for jog and joint moves: 10 % of the axis ceiling, never above 0.1 rad/s.
// (The reference simulator faults with following_error near 0.35 rad/s; document 1 does not describe that bound.)
const REDUCED_FRACTION_OF_MAX = 0.1;
const REDUCED_CAP = 0.1;
const MOVE_ACCEL_RAD_S2 = 0.5;
function reducedSpeed(a: Record<string, unknown>): number {
  return Math.min(REDUCED_FRACTION_OF_MAX * Number(a["max_velocity"] ?? 1), REDUCED_CAP);
}
const FENCE_EXEMPT = new Set(["/stop", "/pause", "/heartbeat", "/target", "/cells", "/jog/stop", "/jog/end"]);

interface CellEntry { cell: BlindCell; registered: boolean; client: ControlClient }
interface Lease {
  cellId: string;
  client: ControlClient;
  session: string;
  generation: number;
  leaseMs: number;
  renew: NodeJS.Timeout;
  lastHeartbeat: number;
  armed: boolean;
  renewing: number;
  renewedAt: number;
}
interface JogSession { session_id: string; target_id: string; revision: number; axis: number; direction: number; fraction: number; since: number }

export class BlindOlp {
  private readonly cells = new Map<string, CellEntry>();
  private readonly catalogue: boolean;
  private readonly plannerUrl: string | undefined;
  private readonly robotStoreDir: string | undefined;
  private readonly host: string;
  private readonly port: number;
  private readonly heartbeatMs: number;
  private server: http.Server | null = null;
  private boundPort = 0;
  private selected: string | null = null;
  private selectionGeneration = 0;
  private switching = false;
  private lease: Lease | null = null;
  private leaseBusy: Promise<unknown> = Promise.resolve();
  private watchdog: NodeJS.Timeout | null = null;
  private lastStopReason = "";
  private loaded: { cellId: string; identity: Record<string, unknown>; program: Record<string, unknown> } | null = null;
  private jog: JogSession | null = null;
  private readonly weld: WeldPlanning;

  constructor(o: BlindOlpOptions) {
    this.catalogue = o.catalogue !== false;
    this.plannerUrl = o.plannerUrl?.replace(/\/+$/, "");
    this.weld = new WeldPlanning(this.plannerUrl);
    this.robotStoreDir = o.robotStoreDir;
    this.host = o.host ?? "127.0.0.1";
    this.port = o.port ?? 8794;
    this.heartbeatMs = o.heartbeatMs ?? 5000;
    if (!isLoopback(this.host)) throw new Error(`refusing to listen on ${this.host}: the OLP server is for same-host use only`);
    for (const c of o.cells) {
      checkCell(c);
      if (this.cells.has(c.cell_id)) throw new Error(`duplicate cell_id ${c.cell_id}`);
      this.cells.set(c.cell_id, { cell: c, registered: false, client: new ControlClient(c.control_socket) });
    }
    if (!this.catalogue) {
      if (o.cells.length !== 1) throw new Error("without a catalogue exactly one cell is the target");
      this.selected = o.cells[0]!.cell_id;
    }
  }

  listen(): Promise<string> {
    return new Promise((resolve, reject) => {
      const s = http.createServer((req, res) => { void this.handle(req, res); });
      s.keepAliveTimeout = 5000;
      s.headersTimeout = 10000;
      s.requestTimeout = 35 * 60 * 1000;
      s.on("error", reject);
      s.listen(this.port, this.host, () => {
        const a = s.address();
        this.boundPort = typeof a === "object" && a ? a.port : this.port;
        this.server = s;
        this.watchdog = setInterval(() => { void this.checkHeartbeat(); }, 100);
        const h = this.host.includes(":") ? `[${this.host}]` : this.host;
        resolve(`http://${h}:${this.boundPort}`);
      });
    });
  }

  async close(): Promise<void> {
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = null;
    await this.dropLease("server_closed", true);
    const s = this.server;
    this.server = null;
    if (s) {
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    }
  }

  // ------------------------------------------------------------------ HTTP plumbing

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const p = url.pathname;
    const machine = p.startsWith(`${PREFIX}/dense-execution/`) || p === `${PREFIX}/targets/select`;
    try {
      this.checkOrigin(req);
      if (!p.startsWith(`${PREFIX}/`)) throw new HttpError(404, "not_found", `no route ${p}`);
      const route = p.slice(PREFIX.length);
      const limit = route === "/weld-plan" || route === "/weld-plan/export" ? 24 * MIB
        : route === "/cadquery/topology" || route === "/seam" ? 12 * MIB : 64 * KIB;
      const raw = req.method === "POST" || req.method === "PUT" || req.method === "DELETE" ? await readBody(req, limit) : Buffer.alloc(0);
      const reply = await this.route(req, res, req.method ?? "GET", route, url, raw);
      if (reply !== undefined) send(req, res, 200, reply);
    } catch (e) {
      if (res.headersSent) { res.destroy(); return; }
      const he = e instanceof HttpError ? e
        : e instanceof ControlError ? new HttpError(e.code === "cell_unreachable" ? 503 : 409, e.code, e.detail, controlEvidence(e))
        : new HttpError(500, "internal_error", (e as Error).message);
      const body = machine || p === `${PREFIX}/targets`
        ? { error: he.code, detail: he.detail, ...he.extra }
        : { ok: false, code: he.code, error: he.detail, ...he.extra };
      send(req, res, he.status, body);
    }
  }

  private checkOrigin(req: http.IncomingMessage): void {
    const hostHeader = req.headers.host ?? "";
    const allowed = [`127.0.0.1:${this.boundPort}`, `localhost:${this.boundPort}`, `[::1]:${this.boundPort}`];
    if (!allowed.includes(hostHeader.toLowerCase())) throw new HttpError(403, "forbidden_host", `Host ${JSON.stringify(hostHeader)} is not this server`);
    const origin = req.headers.origin;
    if (origin !== undefined) {
      const ok = allowed.some((a) => origin.toLowerCase() === `http://${a}` || origin.toLowerCase() === `https://${a}`);
      if (!ok) throw new HttpError(403, "forbidden_origin", `Origin ${JSON.stringify(origin)} is not allowed`);
    }
  }

  private async route(req: http.IncomingMessage, res: http.ServerResponse, method: string, r: string, url: URL, raw: Buffer): Promise<unknown> {
    // Changed after integration: document 3 part 7 names the code for a /weld-plan body that is not JSON:
    // weld_plan_invalid 400 ("invalid JSON or missing STEP").
    const body = (): Record<string, unknown> => {
      if (!r.startsWith("/weld-plan")) return parseJson(raw);
      try { return parseJson(raw); } catch (e) {
        if (e instanceof HttpError && e.code === "invalid_json") throw new HttpError(400, "weld_plan_invalid", e.detail);
        throw e;
      }
    };
    if (method === "GET") {
      switch (r) {
        case "/health": return this.health();
        case "/capabilities": return this.capabilities();
        case "/robots": return robots(this.robotStoreDir);
        case "/targets": return this.targets();
        case "/dense-execution/cells": return { ok: true, cells: [...this.cells.values()].map((c) => ({ ...c.cell, registered: c.registered })) };
        case "/dense-execution/capabilities": return this.denseCapabilities();
        case "/dense-execution/status": return this.status();
        case "/dense-execution/cell": return this.cellView();
        case "/dense-execution/telemetry/window": return this.telemetryWindow(url);
        case "/dense-execution/jog/state": return { ok: true, active: this.jog !== null, jog: this.jog };
        case "/dense-execution/cartesian/state": return { ok: true, available: false, active: false };
      }
      if (r.startsWith("/local-simulator/") || r.startsWith("/programs")) throw new HttpError(503, "unavailable", "this deployment has no local simulator or program catalogue");
      throw new HttpError(404, "not_found", `no route GET ${r}`);
    }
    if (method === "DELETE") {
      const m = /^\/dense-execution\/cells\/([^/]+)$/.exec(r);
      if (m) return this.unregister(decodeURIComponent(m[1]!));
      throw new HttpError(404, "not_found", `no route DELETE ${r}`);
    }
    if (method !== "POST") throw new HttpError(405, "method_not_allowed", `${method} not allowed`);

    if (r.startsWith("/dense-execution/")) {
      const sub = r.slice("/dense-execution".length);
      const exempt = FENCE_EXEMPT.has(sub) || (sub === "/arm" && isObj(tryJson(raw)) && (tryJson(raw) as Record<string, unknown>)["armed"] === false);
      if (!exempt) this.checkFence(req);
      switch (sub) {
        case "/cells": return this.register(body());
        case "/target": { const b = body(); return this.select(typeof b["cell"] === "string" ? b["cell"] : "", undefined, true); }
        case "/heartbeat": return this.heartbeat();
        case "/stop": return this.stop();
        case "/pause": return this.pause();
        case "/arm": return this.arm(body());
        case "/home": return this.home();
        case "/load": return this.load(body());
        case "/play": return this.play();
        case "/move": return this.move(body());
        case "/jog/begin": return this.jogBegin(body());
        case "/jog/update": return this.jogUpdate(body());
        case "/jog/end": case "/jog/stop": return this.jogEnd(raw.length ? body() : {});
        case "/go-home": throw new HttpError(503, "unavailable", "go-home is not available on the core backend");
      }
      if (sub.startsWith("/cartesian/")) throw new HttpError(503, "unavailable", "Cartesian jog and moves are not offered by this deployment");
      throw new HttpError(404, "not_found", `no route POST ${r}`);
    }
    switch (r) {
      case "/targets/select": {
        const b = body();
        if (typeof b["cell_id"] !== "string") throw new HttpError(400, "invalid_request", "cell_id (string) is required");
        return this.select(b["cell_id"], typeof b["model_id"] === "string" ? b["model_id"] : undefined, false);
      }
      case "/robots/capture-model": return captureModel(this.robotStoreDir, body());
      case "/cadquery/topology": throw new HttpError(503, "unavailable", "no CAD worker is configured");
      case "/seam": throw new HttpError(503, "seam_worker_unavailable", "no seam worker is configured");
      case "/weld-plan": return this.weld.weldPlan(res, body(), false, this.selected !== null && this.lease !== null);
      case "/weld-plan/export": return this.weld.weldPlan(res, body(), true, this.selected !== null && this.lease !== null);
    }
    if (r.startsWith("/local-simulator/") || r.startsWith("/programs")) throw new HttpError(503, "unavailable", "this deployment has no local simulator or program catalogue");
    throw new HttpError(404, "not_found", `no route POST ${r}`);
  }

  // ------------------------------------------------------------------ selection and fencing

  private checkFence(req: http.IncomingMessage): void {
    if (!this.catalogue) return;
    const g = req.headers["x-rt-target-generation"];
    const c = req.headers["x-rt-target-cell"];
    if (typeof g !== "string" || !/^\d+$/.test(g) || typeof c !== "string") throw new HttpError(409, "target_changed", "X-RT-Target-Generation and X-RT-Target-Cell are required on this route");
    if (Number(g) !== this.selectionGeneration || c !== (this.selected ?? "")) {
      throw new HttpError(409, "target_changed", `selection is now ${JSON.stringify(this.selected ?? "")} generation ${this.selectionGeneration}`);
    }
  }

  private target(): CellEntry {
    if (this.selected === null) throw new HttpError(409, "no_target_selected", "no cell is selected");
    const e = this.cells.get(this.selected);
    if (!e) throw new HttpError(409, "no_target_selected", "the selected cell is no longer registered");
    return e;
  }

  private async select(cellId: string, modelId: string | undefined, viaTarget: boolean): Promise<unknown> {
    if (!this.catalogue || this.cells.size === 0) throw new HttpError(503, "cell_catalogue_unavailable", "no cell catalogue is configured");
    if (this.switching) throw new HttpError(409, "cell_switch_busy", "another selection is in progress");
    this.switching = true;
    try {
      if (viaTarget && cellId === "") {
        await this.leaveCurrent();
        this.selected = null;
        this.selectionGeneration++;
        return { ok: true, selected: null, target: this.targetView() };
      }
      const e = this.cells.get(cellId);
      if (!e) throw new HttpError(409, "cell_id_unknown", `no cell ${JSON.stringify(cellId)} in the catalogue`);
      if (modelId !== undefined && modelId !== e.cell.model_id) throw new HttpError(409, "cell_model_mismatch", `cell ${cellId} holds model ${e.cell.model_id}, not ${modelId}`);
      await this.vetCell(e);
      await this.leaveCurrent();
      this.selected = cellId;
      this.selectionGeneration++;
      return { ok: true, selected: cellId, target: this.targetView() };
    } finally {
      this.switching = false;
    }
  }

  /** Checks a cell before selection (document 3 part 7 selection refusals). */
  private async vetCell(e: CellEntry): Promise<Record<string, unknown>> {
    let d: Record<string, unknown>;
    try { d = await e.client.observe("/v1/describe", 3000); } catch (err) {
      throw new HttpError(409, "cell_unreachable", `control service of ${e.cell.cell_id}: ${(err as Error).message}`);
    }
    const backend = d["backend"];
    if (backend !== "simulation" && backend !== "live") throw new HttpError(409, "cell_backend_unavailable", `Describe backend ${JSON.stringify(backend)}`);
    if (e.cell.backend && e.cell.backend !== backend) throw new HttpError(409, "cell_backend_mismatch", `cell configured for ${e.cell.backend}, control service reports ${String(backend)}`);
    if (e.cell.configuration_sha256 && stripSha(e.cell.configuration_sha256) !== stripSha(String(d["configuration_sha256"] ?? ""))) {
      throw new HttpError(409, "cell_configuration_mismatch", `configured ${e.cell.configuration_sha256}, control service reports ${String(d["configuration_sha256"])}`);
    }
    const mode = e.cell.execution_mode;
    if ((mode === "production" && backend === "simulation") || (mode === "simulation" && backend === "live")) {
      throw new HttpError(409, "cell_mode_mismatch", `execution_mode ${mode} on a ${String(backend)} backend`);
    }
    if (e.cell.robot_description_file) {
      let bytes: Buffer;
      try { bytes = fs.readFileSync(e.cell.robot_description_file); } catch (err) {
        throw new HttpError(409, "cell_description_invalid", `robot description unreadable: ${(err as Error).message}`);
      }
      if (!bytes.toString("utf8").includes("<robot")) throw new HttpError(409, "cell_description_invalid", "robot description is not a URDF");
      const sha = `sha256:${sha256Hex(bytes)}`;
      if (e.cell.robot_description_sha256 && e.cell.robot_description_sha256 !== sha) throw new HttpError(409, "cell_description_invalid", `description digest ${sha} differs from configured ${e.cell.robot_description_sha256}`);
    } else if (e.cell.robot_description_sha256 !== undefined && !/^sha256:[0-9a-f]{64}$/.test(e.cell.robot_description_sha256)) {
      throw new HttpError(409, "cell_description_invalid", "robot_description_sha256 is not sha256:<64 hex>");
    }
    return d;
  }

  private async leaveCurrent(): Promise<void> {
    if (this.selected === null) return;
    const e = this.cells.get(this.selected);
    if (e) {
      let executing = false;
      try {
        const s = await e.client.observe("/v1/status", 2000);
        const ex = s["execution"];
        executing = isObj(ex) && ex["state"] === "executing";
      } catch { /* unreachable: nothing is playing that we could see */ }
      if (executing) throw new HttpError(409, "cell_switch_while_playing", `cell ${this.selected} is executing a program`);
    }
    if (this.lease) {
      try { await this.dropLease("cell_switched", false); } catch (err) {
        throw new HttpError(409, "cell_previous_stop_failed", `stopping ${this.lease?.cellId ?? ""} failed: ${(err as Error).message}`);
      }
    }
    this.loaded = null;
    this.jog = null;
  }

  private targetView(): Record<string, unknown> | null {
    if (this.selected === null) return this.catalogue ? { cell_id: "", selection_generation: this.selectionGeneration, model_id: "" } : null;
    const e = this.cells.get(this.selected);
    return { cell_id: this.selected, selection_generation: this.selectionGeneration, model_id: e?.cell.model_id ?? "", robot_description_sha256: e?.cell.robot_description_sha256 ?? null };
  }

  private async targets(): Promise<unknown> {
    const list = await Promise.all([...this.cells.values()].map((e) => this.describeEntry(e)));
    return { ok: true, catalogue: this.catalogue, selected: this.selected, selection_generation: this.selectionGeneration, targets: list };
  }

  private async describeEntry(e: CellEntry): Promise<Record<string, unknown>> {
    const base = { cell_id: e.cell.cell_id, model_id: e.cell.model_id, robot_description_sha256: e.cell.robot_description_sha256 ?? null, registered: e.registered, selected: this.selected === e.cell.cell_id };
    try {
      const d = await e.client.observe("/v1/describe", 2000);
      const b = isObj(d["binding"]) ? d["binding"] : {};
      const backend: Record<string, unknown> = {
        reachable: true, kind: d["backend"], simulated: d["simulated"] ?? null,
        pair_id: b["pair_id"] ?? null, revision: b["revision"] ?? null,
        configuration_sha256: d["configuration_sha256"] ?? null, machine_sha256: d["machine_sha256"] ?? null, deployment_sha256: d["deployment_sha256"] ?? null,
      };
      if (e.cell.configuration_sha256 && stripSha(e.cell.configuration_sha256) !== stripSha(String(d["configuration_sha256"] ?? ""))) {
        backend["reachable"] = false; backend["reason"] = "cell_configuration_mismatch";
      } else if ((e.cell.execution_mode === "production" && d["backend"] === "simulation") || (e.cell.execution_mode === "simulation" && d["backend"] === "live")) {
        backend["reachable"] = false; backend["reason"] = "cell_mode_mismatch";
      } else if (!b["pair_id"]) {
        backend["reachable"] = false; backend["reason"] = "cell_configuration_missing";
      }
      return { ...base, backend };
    } catch (err) {
      return { ...base, backend: { reachable: false, reason: "cell_unreachable", detail: (err as Error).message } };
    }
  }

  private async register(b: Record<string, unknown>): Promise<unknown> {
    const c = b as unknown as BlindCell;
    try { checkCell(c); } catch (err) { throw new HttpError(400, "invalid_request", (err as Error).message); }
    if (this.cells.has(c.cell_id)) throw new HttpError(409, "cell_binding_pinned", `cell id ${c.cell_id} is already bound`);
    const client = new ControlClient(c.control_socket);
    try {
      const d = await client.observe("/v1/describe", 2000);
      if (!isObj(d["binding"]) || !d["binding"]["pair_id"]) throw new HttpError(409, "cell_not_commissioned", "the control service names no binding pair");
    } catch (err) {
      if (err instanceof HttpError) throw err; // unreachable cells are accepted and listed as unreachable
    }
    const cell: BlindCell = { cell_id: c.cell_id, control_socket: c.control_socket, model_id: c.model_id };
    for (const k of ["robot_description_sha256", "robot_description_file", "configuration_sha256", "backend", "execution_mode", "requested_lease_ms"] as const) {
      if (b[k] !== undefined) (cell as unknown as Record<string, unknown>)[k] = b[k];
    }
    this.cells.set(c.cell_id, { cell, registered: true, client });
    return { ok: true, cell: { ...cell, registered: true } };
  }

  private async unregister(id: string): Promise<unknown> {
    const e = this.cells.get(id);
    if (!e) throw new HttpError(404, "cell_id_unknown", `no cell ${JSON.stringify(id)}`);
    if (!e.registered) throw new HttpError(409, "cell_binding_pinned", `cell ${id} comes from the catalogue`);
    if (this.selected === id) {
      await this.dropLease("cell_removed", true);
      this.selected = null;
      this.selectionGeneration++;
      this.loaded = null;
      this.jog = null;
    }
    this.cells.delete(id);
    return { ok: true, removed: id };
  }

  // ------------------------------------------------------------------ lease, heartbeat

  private async ensureLease(e: CellEntry): Promise<Lease> {
    if (this.lease && this.lease.cellId === e.cell.cell_id) return this.lease;
    if (this.lease) await this.dropLease("cell_switched", true);
    const d = await e.client.observe("/v1/describe", 3000);
    const b = isObj(d["binding"]) ? d["binding"] : {};
    const binding = { pair_id: b["pair_id"], revision: b["revision"], configuration_sha256: b["configuration_sha256"] ?? d["configuration_sha256"] };
    const r = await e.client.control("acquire", { controller: "blind-olp", binding, requested_lease_ms: e.cell.requested_lease_ms ?? 500 });
    const g = r["data"] as Record<string, unknown>;
    const leaseMs = typeof g["lease_ms"] === "number" && g["lease_ms"] > 0 ? g["lease_ms"] : 500;
    const lease: Lease = {
      cellId: e.cell.cell_id, client: e.client, session: String(g["session"]), generation: Number(g["generation"]), leaseMs,
      renew: setInterval(() => { void this.renew(lease); }, Math.max(50, Math.floor(leaseMs / 5))),
      lastHeartbeat: Date.now(), armed: false, renewing: 0, renewedAt: Date.now(),
    };
    this.lease = lease;
    this.lastStopReason = "";
    return lease;
  }

  private async renew(l: Lease): Promise<void> {
    if (this.lease !== l || l.renewing >= 2) return; // at most two renewals in flight: one slow reply does not starve the lease
    l.renewing++;
    try {
      const t0 = Date.now();
      await l.client.control("renew", { session: l.session, generation: l.generation }, 2000);
      l.renewedAt = Date.now();
      if (process.env["BLIND_OLP_DEBUG"] && l.renewedAt - t0 > 100) process.stderr.write(`renew took ${l.renewedAt - t0} ms\n`);
    } catch (err) {
      if (this.lease !== l) return;
      if (process.env["BLIND_OLP_DEBUG"]) process.stderr.write(`renew failed after ${Date.now() - l.renewedAt} ms: ${(err as Error).message}\n`);
      // A slow or lost reply is retried on the next tick while the lease can still be alive; a refusal ends it.
      // Only a refusal (expired, control_session_stale, ...) or a silent service for 4 leases ends it here.
      if (err instanceof ControlError && err.code === "cell_unreachable" && Date.now() - l.renewedAt < 4 * l.leaseMs) return;
      clearInterval(l.renew);
      this.lease = null;
      this.jog = null;
      this.lastStopReason = `lease_lost:${err instanceof ControlError ? err.code : (err as Error).message}`;
      try { await l.client.control("stop", { session: l.session, generation: l.generation }, 2000); } catch { /* already gone */ }
    } finally {
      l.renewing--;
    }
  }

  private async renewNow(l: Lease): Promise<void> {
    await l.client.control("renew", { session: l.session, generation: l.generation }, 2000);
    l.renewedAt = Date.now();
  }

  private async checkHeartbeat(): Promise<void> {
    const l = this.lease;
    if (!l || Date.now() - l.lastHeartbeat <= this.heartbeatMs) return;
    try { await this.dropLease("ui_heartbeat_lost", true); } catch { /* recorded */ }
  }

  /** Stops the control service under the held fence and forgets the lease. */
  private async dropLease(reason: string, swallow: boolean): Promise<void> {
    const l = this.lease;
    if (!l) return;
    clearInterval(l.renew);
    this.lease = null;
    this.jog = null;
    this.loaded = null; // Stop retires prepared handles: load again
    this.lastStopReason = reason;
    try {
      await l.client.control("stop", { session: l.session, generation: l.generation }, 3000);
    } catch (err) {
      const benign = err instanceof ControlError && ["expired", "control_session_stale", "no_grant"].includes(err.code);
      if (!benign && !swallow) throw err;
    }
  }

  private heartbeat(): unknown {
    if (this.lease) this.lease.lastHeartbeat = Date.now();
    return { ok: true, lease_held: this.lease !== null, timeout_ms: this.heartbeatMs };
  }

  // ------------------------------------------------------------------ observation

  private async health(): Promise<unknown> {
    let connected = false;
    let connectedTargets = 0;
    await Promise.all([...this.cells.values()].map(async (e) => {
      try {
        await e.client.observe("/v1/describe", 1000);
        connectedTargets++;
        if (e.cell.cell_id === this.selected) connected = true;
      } catch { /* not connected */ }
    }));
    return {
      ok: true, schema: "offline-programming.health.v1", mode: this.catalogue ? "catalogue" : "single_target",
      network_required: false, connected, connected_targets: connectedTargets, local_simulator: false, local_ready: false,
      execution_enabled: this.cells.size > 0, target_planning: this.plannerUrl !== undefined, teleop_enabled: this.cells.size > 0,
      program_catalog: false,
    };
  }

  private capabilities(): unknown {
    return {
      ok: true, schema: "offline-programming.capabilities.v1",
      catalogue: this.catalogue, fencing: this.catalogue, cad_worker: false, seam_worker: false,
      weld_plan: this.plannerUrl !== undefined, weld_plan_export: true, robot_store: this.robotStoreDir !== undefined,
      joint_jog: true, joint_move: true, cartesian_jog: false, cartesian_move: false, go_home: false,
      local_simulator: false, program_catalog: false, heartbeat_timeout_ms: this.heartbeatMs,
    };
  }

  private async denseCapabilities(): Promise<unknown> {
    const e = this.target();
    const d = await e.client.observe("/v1/describe", 3000);
    return { ok: true, cell_id: e.cell.cell_id, joint_jog: true, joint_move: true, cartesian: false, go_home: false, control_capabilities: d["capabilities"] ?? [] };
  }

  private async cellView(): Promise<unknown> {
    const e = this.target();
    return { ok: true, ...(await this.describeEntry(e)) };
  }

  private async status(): Promise<unknown> {
    const out: Record<string, unknown> = {
      ok: true, target: this.targetView(),
      lease: this.lease ? { held: true, cell_id: this.lease.cellId, generation: this.lease.generation, lease_ms: this.lease.leaseMs, armed: this.lease.armed, heartbeat_age_ms: Date.now() - this.lease.lastHeartbeat } : { held: false },
      heartbeat_timeout_ms: this.heartbeatMs, last_stop_reason: this.lastStopReason,
      loaded: this.loaded ? { cell_id: this.loaded.cellId, identity: this.loaded.identity } : null,
      jog: this.jog, control: null,
    };
    if (this.selected !== null) {
      const e = this.cells.get(this.selected);
      if (e) {
        try { out["control"] = await e.client.observe("/v1/status", 3000); } catch (err) { out["control_error"] = (err as Error).message; }
      }
    }
    return out;
  }

  private async telemetryWindow(url: URL): Promise<unknown> {
    const e = this.target();
    const after = Number(url.searchParams.get("after") ?? "0");
    if (!Number.isSafeInteger(after) || after < 0) throw new HttpError(400, "invalid_request", "after must be an unsigned integer");
    const d = await e.client.observe("/v1/describe", 3000);
    const axes = Array.isArray(d["axes"]) ? (d["axes"] as Record<string, unknown>[]) : [];
    const b = await e.client.telemetry(after);
    if (b.length < 312 || b.readUInt32LE(0) !== 0x31425452) throw new HttpError(502, "telemetry_invalid", "batch header is not a telemetry batch");
    const recordBytes = b.readUInt32LE(272);
    const count = b.readUInt32LE(268);
    const records: unknown[] = [];
    for (let i = Math.max(0, count - 64); i < count; i++) {
      const o = 312 + i * recordBytes;
      if (o + recordBytes > b.length) break;
      const positions = axes.map((a, k) => {
        const counts = b.readInt32LE(o + 272 + k * 320);
        const cpu = Number(a["counts_per_unit"] ?? 1) || 1;
        return (counts / cpu) * (Number(a["sign"] ?? 1) || 1);
      });
      records.push({ seq: Number(b.readBigUInt64LE(o + 8)), t_ns: Number(b.readBigUInt64LE(o)), armed: b.readUInt32LE(o + 136), positions });
    }
    return {
      ok: true, first_sequence: Number(b.readBigUInt64LE(240)), last_sequence: Number(b.readBigUInt64LE(248)),
      dropped: Number(b.readBigUInt64LE(256)), record_count: count, axis_count: b.readUInt32LE(264), records,
    };
  }

  // ------------------------------------------------------------------ machine control

  private fenceOf(l: Lease): { session: string; generation: number } {
    return { session: l.session, generation: l.generation };
  }

  private requireLease(e: CellEntry): Lease {
    if (!this.lease || this.lease.cellId !== e.cell.cell_id) throw new HttpError(409, "not_armed", "no control lease is held on the selected cell: arm first");
    return this.lease;
  }

  private async axisMask(e: CellEntry, homeOnly: boolean): Promise<{ mask: number; axes: Record<string, unknown>[] }> {
    const d = await e.client.observe("/v1/describe", 3000);
    const axes = Array.isArray(d["axes"]) ? (d["axes"] as Record<string, unknown>[]) : [];
    let mask = 0;
    axes.forEach((a, i) => { if (!homeOnly || a["native_home"] === true) mask |= 1 << i; });
    return { mask: mask >>> 0, axes };
  }

  private async requireHome(e: CellEntry): Promise<Record<string, unknown>> {
    const { mask } = await this.axisMask(e, false);
    const s = await e.client.observe("/v1/status", 3000);
    const core = isObj(s["core"]) ? s["core"] : {};
    const hv = Number(core["home_valid_mask"] ?? 0);
    if ((hv & mask) !== mask) throw new HttpError(409, "home_required", `home evidence 0x${hv.toString(16)} does not cover axes 0x${mask.toString(16)}`);
    return s;
  }

  private serial<T>(f: () => Promise<T>): Promise<T> {
    const next = this.leaseBusy.then(f, f);
    this.leaseBusy = next.catch(() => undefined);
    return next;
  }

  private async arm(b: Record<string, unknown>): Promise<unknown> {
    if (typeof b["armed"] !== "boolean") throw new HttpError(400, "invalid_request", "armed (boolean) is required");
    if (b["armed"] === false) {
      await this.serial(() => this.dropLease("disarmed", false));
      return { ok: true, armed: false };
    }
    const e = this.target();
    if (this.switching) throw new HttpError(409, "cell_switch_busy", "a selection is in progress");
    return this.serial(async () => {
      await this.resetLatchedFaults(e);
      const l = await this.ensureLease(e);
      const { mask } = await this.axisMask(e, false);
      await e.client.control("enable", { ...this.fenceOf(l), axis_mask: mask });
      await e.client.control("arm", this.fenceOf(l));
      l.armed = true;
      return { ok: true, armed: true, cell_id: e.cell.cell_id, lease_ms: l.leaseMs };
    });
  }

  /** A latched execution fault (e.g. following_error) on a disarmed machine is reset before arming; reset_fault retires the session. */
  private async resetLatchedFaults(e: CellEntry): Promise<void> {
    const s = await e.client.observe("/v1/status", 3000);
    const core = isObj(s["core"]) ? s["core"] : {};
    if (Number(core["execution_fault_reasons"] ?? 0) === 0 || Number(core["armed"] ?? 0) !== 0) return;
    const l = await this.ensureLease(e);
    try {
      await e.client.control("reset_fault", { ...this.fenceOf(l), axis_mask: 0 }, 5000);
    } finally {
      clearInterval(l.renew);
      if (this.lease === l) this.lease = null;
    }
  }

  private async home(): Promise<unknown> {
    const e = this.target();
    return this.serial(async () => {
      const l = await this.ensureLease(e);
      const { mask } = await this.axisMask(e, true);
      if (mask === 0) throw new HttpError(409, "home_unavailable", "no described axis has native_home");
      await e.client.control("home", { ...this.fenceOf(l), axis_mask: mask }, 65000);
      if (l.armed) {
        const all = await this.axisMask(e, false);
        await e.client.control("enable", { ...this.fenceOf(l), axis_mask: all.mask });
        await e.client.control("arm", this.fenceOf(l));
      }
      const s = await e.client.observe("/v1/status", 3000);
      const core = isObj(s["core"]) ? s["core"] : {};
      return { ok: true, home_valid_mask: core["home_valid_mask"] ?? 0, home_epoch: core["home_epoch"] ?? 0, armed: l.armed };
    });
  }

  private async load(b: Record<string, unknown>): Promise<unknown> {
    const e = this.target();
    let blob: Buffer;
    if (typeof b["dense_blob_base64"] === "string" && b["dense_blob_base64"].length > 0) {
      blob = Buffer.from(b["dense_blob_base64"], "base64");
    } else if (typeof b["trajectory_digest"] === "string") {
      blob = await this.weld.fetchDense(b["trajectory_digest"], (code, detail) => new HttpError(code === "dense_blob_not_found" ? 409 : 502, code, detail));
    } else {
      throw new HttpError(400, "invalid_request", "dense_blob_base64 or trajectory_digest is required");
    }
    let header: Record<string, unknown>;
    try { header = readDenseHeader(blob); } catch (err) { throw new HttpError(409, (err as Error).message, "dense trajectory header could not be read"); }
    const notes: string[] = [];
    const rc = header["robot_cell"];
    if (!isObj(rc)) throw new HttpError(409, "robot_cell_missing", "the trajectory has no robot_cell block");
    if (!e.cell.model_id) throw new HttpError(409, "robot_cell_unavailable", "the selected cell cannot say which robot it is");
    if (rc["model_id"] !== e.cell.model_id) throw new HttpError(409, "robot_cell_mismatch", `trajectory is for model ${String(rc["model_id"])}, cell holds ${e.cell.model_id}`);
    const want = e.cell.robot_description_sha256;
    const have = rc["robot_description_sha256"];
    if (want && typeof have === "string" && have !== "" && stripSha(have) !== stripSha(want)) throw new HttpError(409, "robot_cell_mismatch", `trajectory pins description ${have}, cell has ${want}`);
    return this.serial(async () => {
      const d = await e.client.observe("/v1/describe", 3000);
      if (typeof rc["machine_configuration_sha256"] === "string" && rc["machine_configuration_sha256"] !== "" &&
          stripSha(rc["machine_configuration_sha256"]) !== stripSha(String(d["configuration_sha256"] ?? ""))) {
        notes.push(`machine_configuration_sha256 ${rc["machine_configuration_sha256"]} differs from the cell's ${String(d["configuration_sha256"])}`);
      }
      const l = await this.ensureLease(e);
      const t0 = Date.now();
      await this.renewNow(l); // uploads hold the control service for a while: start them with a full lease
      const t1 = Date.now();
      const r = await e.client.prepareProgram(blob, l.session, l.generation).finally(() => {
        if (process.env["BLIND_OLP_DEBUG"]) process.stderr.write(`load: renew ${t1 - t0} ms, prepare ${Date.now() - t1} ms, ${blob.length} bytes\n`);
      });
      const program = (r["data"] ?? {}) as Record<string, unknown>;
      const identity = (program["identity"] ?? {}) as Record<string, unknown>;
      this.loaded = { cellId: e.cell.cell_id, identity, program };
      return { ok: true, identity, program, notes };
    });
  }

  private async play(): Promise<unknown> {
    const e = this.target();
    const l = this.requireLease(e);
    if (!this.loaded || this.loaded.cellId !== e.cell.cell_id) throw new HttpError(409, "program_not_loaded", "load a program first");
    await this.requireHome(e);
    const r = await e.client.control("start_program", { ...this.fenceOf(l), identity: this.loaded.identity });
    return { ok: true, started: true, sequence: r["sequence"] ?? 0, identity: this.loaded.identity };
  }

  private async pause(): Promise<unknown> {
    if (!this.lease) return { ok: true, paused: false, lease_held: false };
    const l = this.lease;
    const r = await l.client.control("halt", this.fenceOf(l));
    this.jog = null;
    return { ok: true, paused: true, sequence: r["sequence"] ?? 0 };
  }

  private async stop(): Promise<unknown> {
    const held = this.lease !== null;
    await this.serial(() => this.dropLease("stopped", false));
    return { ok: true, stopped: held, lease_held: false };
  }

  private async move(b: Record<string, unknown>): Promise<unknown> {
    const e = this.target();
    const l = this.requireLease(e);
    const { mask, axes } = await this.axisMask(e, false);
    const pos = b["positions_rad"];
    if (!Array.isArray(pos) || pos.length !== axes.length || !pos.every((x) => typeof x === "number" && Number.isFinite(x))) {
      throw new HttpError(400, "invalid_request", `positions_rad must hold ${axes.length} finite numbers`);
    }
    const scale = b["speed_scale"] === undefined ? 1 : b["speed_scale"];
    if (typeof scale !== "number" || !(scale > 0 && scale <= 1)) throw new HttpError(400, "invalid_request", "speed_scale must be in (0,1]");
    const target = pos as number[];
    target.forEach((q, i) => {
      const a = axes[i]!;
      const lo = Number(a["min_position"]); const hi = Number(a["max_position"]);
      if (q < lo || q > hi) {
        throw new HttpError(409, "joint_limit_exceeded", `${String(a["id"])} target ${q} outside [${lo}, ${hi}]`, {
          limit_violation: { kind: "position", segment: 0, sample: 0, axis: String(a["id"]), value: q, limit: q < lo ? lo : hi, unit: String(a["position_unit"] ?? "rad") },
        });
      }
    });
    const s = await this.requireHome(e);
    const sAxes = Array.isArray(s["axes"]) ? (s["axes"] as Record<string, unknown>[]) : [];
    const start = axes.map((_, i) => Number(sAxes[i]?.["position"] ?? 0));
    // Quintic profile: peak velocity 1.875*dq/T, peak acceleration 5.774*dq/T^2 (MOVE_ACCEL_RAD_S2 * scale at most).
    let T = 0.5;
    target.forEach((q, i) => {
      const dq = Math.abs(q - start[i]!);
      const vmax = reducedSpeed(axes[i]!) * scale;
      T = Math.max(T, (1.875 * dq) / vmax, Math.sqrt((5.774 * dq) / (MOVE_ACCEL_RAD_S2 * scale)));
    });
    const dt = 0.01;
    const n = Math.ceil(T / dt);
    T = n * dt;
    const points: Array<{ time_ns: number; position: number[]; velocity: number[] }> = [];
    for (let k = 0; k <= n; k++) {
      const tau = k / n;
      const sPos = 10 * tau ** 3 - 15 * tau ** 4 + 6 * tau ** 5;
      const sVel = (30 * tau ** 2 - 60 * tau ** 3 + 30 * tau ** 4) / T;
      points.push({
        time_ns: Math.round(k * dt * 1e9),
        position: start.map((q0, i) => q0 + (target[i]! - q0) * sPos),
        velocity: start.map((q0, i) => (target[i]! - q0) * sVel),
      });
    }
    return this.serial(async () => {
      await this.renewNow(l);
      const prep = await e.client.control("prepare_trajectory", { ...this.fenceOf(l), axis_mask: mask, points }, 30000);
      const handle = prep["handle"];
      const r = await e.client.control("start_trajectory", { ...this.fenceOf(l), handle });
      return { ok: true, handle, sequence: r["sequence"] ?? 0, duration_s: T, samples: points.length };
    });
  }

  private parseJog(b: Record<string, unknown>, axes: Record<string, unknown>[]): Omit<JogSession, "since"> {
    if (typeof b["target_id"] !== "string" || typeof b["session_id"] !== "string" || b["session_id"] === "") throw new HttpError(400, "invalid_request", "target_id and session_id (strings) are required");
    if (!Number.isSafeInteger(b["revision"]) || (b["revision"] as number) < 0) throw new HttpError(400, "invalid_request", "revision must be an unsigned integer");
    let axis = -1;
    if (typeof b["axis"] === "number" && Number.isInteger(b["axis"])) axis = b["axis"];
    else if (typeof b["axis"] === "string") axis = axes.findIndex((a) => a["id"] === b["axis"]);
    if (axis < 0 || axis >= axes.length) throw new HttpError(400, "invalid_request", "axis must name a described axis (id or 0-based index)");
    const dir = b["direction"] === "positive" ? 1 : b["direction"] === "negative" ? -1 : b["direction"];
    if (dir !== 1 && dir !== -1) throw new HttpError(400, "invalid_request", "direction must be +1 or -1");
    const fraction = b["fraction"];
    if (typeof fraction !== "number" || !(fraction >= 0 && fraction <= 1)) throw new HttpError(400, "invalid_request", "fraction must be in [0,1]");
    return { target_id: b["target_id"], session_id: b["session_id"], revision: b["revision"] as number, axis, direction: dir, fraction };
  }

  private async sendJog(e: CellEntry, l: Lease, j: Omit<JogSession, "since">, axes: Record<string, unknown>[]): Promise<unknown> {
    const velocity = axes.map((a, i) => (i === j.axis ? j.direction * j.fraction * reducedSpeed(a) : 0));
    return e.client.control("jog", { ...this.fenceOf(l), axis_mask: 1 << j.axis, velocity, timeout_ms: 250 });
  }

  private async jogBegin(b: Record<string, unknown>): Promise<unknown> {
    const e = this.target();
    const { axes } = await this.axisMask(e, false);
    const j = this.parseJog(b, axes);
    if (j.target_id !== e.cell.cell_id) throw new HttpError(409, "jog_target_mismatch", `target_id ${j.target_id} is not the selected cell ${e.cell.cell_id}`);
    const l = this.requireLease(e);
    await this.requireHome(e);
    await this.sendJog(e, l, j, axes);
    this.jog = { ...j, since: Date.now() };
    return { ok: true, jog: this.jog };
  }

  private async jogUpdate(b: Record<string, unknown>): Promise<unknown> {
    const e = this.target();
    const { axes } = await this.axisMask(e, false);
    const j = this.parseJog(b, axes);
    const cur = this.jog;
    if (!cur) throw new HttpError(409, "jog_not_active", "no jog session: begin first");
    if (j.target_id !== cur.target_id) throw new HttpError(409, "jog_target_mismatch", "target_id differs from the jog session");
    if (j.session_id !== cur.session_id) throw new HttpError(409, "jog_session_mismatch", "session_id differs from the open jog session");
    if (j.revision <= cur.revision) throw new HttpError(409, "jog_revision_stale", `revision ${j.revision} is not after ${cur.revision}`);
    const l = this.requireLease(e);
    await this.sendJog(e, l, j, axes);
    this.jog = { ...j, since: cur.since };
    return { ok: true, jog: this.jog };
  }

  private async jogEnd(b: Record<string, unknown>): Promise<unknown> {
    const cur = this.jog;
    this.jog = null;
    if (cur && typeof b["session_id"] === "string" && b["session_id"] !== cur.session_id) {
      this.jog = cur;
      throw new HttpError(409, "jog_session_mismatch", "session_id differs from the open jog session");
    }
    if (cur && this.lease && this.selected !== null) {
      const e = this.cells.get(this.selected);
      if (e) {
        const { axes } = await this.axisMask(e, false);
        try { await this.sendJog(e, this.lease, { ...cur, fraction: 0 }, axes); } catch { /* the 250 ms jog timeout stops the axis anyway */ }
      }
    }
    return { ok: true, ended: cur !== null };
  }



}

// ------------------------------------------------------------------ helpers

function checkCell(c: BlindCell): void {
  if (!isObj(c)) throw new Error("a cell is an object");
  if (typeof c.cell_id !== "string" || !/^[A-Za-z0-9._:-]{1,128}$/.test(c.cell_id)) throw new Error("cell_id must be 1..128 of [A-Za-z0-9._:-]");
  if (typeof c.control_socket !== "string" || c.control_socket === "") throw new Error("control_socket (path) is required");
  if (typeof c.model_id !== "string") throw new Error("model_id (string) is required");
  if (c.backend !== undefined && c.backend !== "simulation" && c.backend !== "live") throw new Error("backend must be simulation or live");
  if (c.execution_mode !== undefined && !["simulation", "dry_run", "production"].includes(c.execution_mode)) throw new Error("execution_mode must be simulation, dry_run or production");
  if (c.requested_lease_ms !== undefined && !(Number.isInteger(c.requested_lease_ms) && c.requested_lease_ms >= 1 && c.requested_lease_ms <= 10000)) throw new Error("requested_lease_ms must be 1..10000");
}

function stripSha(s: string): string {
  return s.startsWith("sha256:") ? s.slice(7) : s;
}

function controlEvidence(e: ControlError): Record<string, unknown> {
  const data = e.reply?.["data"];
  const out: Record<string, unknown> = {};
  if (isObj(data) && isObj(data["limit_violation"])) out["limit_violation"] = data["limit_violation"];
  if (e.reply?.["native_result"] !== undefined) out["native_result"] = e.reply["native_result"];
  return out;
}
