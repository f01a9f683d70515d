// Blind (clean-room) weld planner: HTTP service of document 2, written from document 2 alone.
//
// Decisions where document 2 leaves things open ("not shown" or silent); the same table is in README.md.
// | open point | decision |
// |---|---|
// | the cell | one built-in six-axis cell `blind-six-axis`; `axis_mask` 0x3f; columns J7..J9 hold 0 rad at 0 rad/s; their header ceiling is 1.0 rad/s (must be finite positive) |
// | `.weldplan` container | ZIP (stored or deflate, no ZIP64). Program from `program.json`, else the single `*.json` entry whose `schema` is `robot.v4.program.v2`. Optional `manifest.json` `{"files": {name: sha256 hex (with or without "sha256:")}}`: every listed entry is checked → `DigestMismatch`. Optional `machine_planning_calibration.json` → `robot_cell.machine_planning_calibration_sha256`, source `target`; otherwise both empty strings. Other entries (tooling, STEP, fixtures) are ignored |
// | “missing cell meshes” | a program whose `placement.cell_id` is not `CELL` → 422 `FileNotFoundError: no cell meshes for cell "…"` |
// | program checks by the planner | schema, 1..4096 nodes, unique ids, known ops, `placement.cell_id == robot.model_id`, a nonzero `robot_description_sha256` must equal the cell's, motion grammar `home? approach weld (transit weld)* retract home?` over enabled nodes ignoring dwell/io/move → 422 `ValueError: …`. **Not** checked: `program_digest`, `row_hash`, forbidden keys (the OLP server's job; the fixture with only its cell replaced must plan) |
// | error `<type>` names | `BadZipFile`, `DigestMismatch`, `ValueError`, `FileNotFoundError`, `NotImplementedError`; unexpected crash → 500 `{error}` |
// | request digest | SHA-256 of the raw body bytes (options not included). `plan_id` = `<program_id>:<first 12 hex>`, dense `program_digest` = `sha256:<request digest>` |
// | program_id | only from the query (default empty); no fallback to the document's `program_id`, so `dense=true` needs `program_id=…`; identifier rule `^[A-Za-z0-9._:-]+$`, ≤ 120 |
// | `request.more` | read as “more fields”: `source_program_id`, `manifest_revision`, `plan_revision`, `weldplan_bytes` |
// | query parsing | booleans `true/false/1/0/yes/no/on/off` (any case); `samples_per_seam` `null` or empty = null; repeated parameter: last wins; unknown parameters ignored |
// | 422 bodies | items `{detail: [{loc: ["query", name], msg, type, input}]}`; the backend is checked after the items: `{detail: "unknown free_space_backend \"x\"; expected bspline, curobo or legacy"}`; malformed dense digest `{detail: "expected sha256:<64 hex>"}`; 404 `{detail}` |
// | check order on POST | query (422) → body read (> 64 MiB: 413 `{error: "body too large"}`) → empty (400) → queue → plan |
// | backends | `bspline` and `legacy` use the same joint-space router (legacy adds `warnings: ["free_space_backend legacy is deprecated"]`); `curobo` is “not installed”: `connecting_trajectories_error` `{type: "BackendUnavailable", message}` → dense `motion_join_failed` |
// | lattice | `samples_per_seam` points evenly by arc length; null: one knot per 0.2 s of travel (fixture: 11 knots, 5 mm) |
// | candidates | IK of the seam start from 8 fixed seeds, deduplicated, each propagated along the lattice (joint jump > 0.5 rad = `configuration_flip`; limits = `joint_limit`; no IK = `unreachable`; screened pose under the margin = `collision`). `cost_deg` = ‖q_start − home‖ + Σ‖Δq‖ (degrees, Euclidean); `joints_deg` = lattice rows; best `k_best` kept. `frontier` = `{index, s, xyz_m}` of the furthest lattice point reached, `frontier_causes` = causes there |
// | `held` | `{}` (the cell has no held axes) |
// | trajectories | `knots_deg`/`knot_velocity_deg_s` rows have one value per `axis_names` entry (six). Every trajectory starts and ends at rest; weld interior velocities Catmull-Rom; connecting moves stop at each via knot. Sampled speeds ≤ 0.6 × ceiling; every duration is a whole number of 0.01 s |
// | weld timing | knot times from `travel_speed_mm_s`, first and last interval 1.5× longer (ends at rest) |
// | standoffs | `torch_axis`: back along the torch axis; `workpiece_z`: along workpiece +z; 3-vector: in the workpiece frame, pointing from the seam to the via pose. Absent or 0 mm: no via pose |
// | connecting routes | direct joint path through the via poses; when screening, detours lifted 0.15 m and 0.3 m, then through home; none clear → `connecting_trajectories_error` `{type: "JoinError"}` |
// | home nodes | the plan starts at home; a retract followed by home ends at home; otherwise a home node away from home is a `move` |
// | taught moves | kind `move` in `connecting_trajectories` (from/to null, `node_id`); `joint` motion (joint or Cartesian target) and `linear` motion (5 mm IK lattice, `speed_mm_s`, default 100 mm/s) are planned; `circular` is not (→ `motion_not_planned`). `program_order` = ids of enabled nodes |
// | dwell / io nodes | dwell → `dwell` segment at the current pose, duration rounded up to 0.01 s, at least one step (2 samples). io → `process_markers` entry `{node_id, channel, state, segment_index, sample_index}` on the last sample so far |
// | torch bit | never set (document 1 refuses any set torch bit) |
// | speed scale | program `speed_scale`, else `defaults.speed_scale`; below 1: times stretched, `speed_scale` reported |
// | frames | workpiece frame = translation `anchor_xyz_m + offset_xyz_m`, rotation `rpy_rad`; weld `frame_id` is the workpiece frame or `world` |
// | verifier | samples every 0.01 s: `limit_violations` = samples outside position limits or above a ceiling; `collisions` = samples with clearance < `verify_margin_mm`; `penetrating` = clearance < 0. Verdicts: PASS, FAIL (a count nonzero), REFUSED (non-finite trajectory), NOT_RUN (`verify=false`; `unverifiable` 1) |
// | tracking | distance of the TCP from the seam's TCP polyline; tolerance 0.5 mm; `sampled_tracking_mm` at knots and interval midpoints; `worst_seen_mm` over 2.5 ms samples; `bound_mm` = worst + ½ × 1.5 × max TCP speed × step per interval; `segments_out` = intervals with worst > tol, `undecided` = worst ≤ tol < bound |
// | `dense_error` order | `result_empty` (stages) → `identity_invalid` → `seam_not_planned` → `motion_join_failed` → `motion_result_invalid` → `motion_not_planned` → `result_empty` (nothing playable) → `motion_not_verified` → format reasons from decoding the built file. `segment_index` = index of the dense segment concerned, else null |
// | dense summary extras | `axis_mask` is added to the plan result's `dense` block; the header's `axes` carries `axis_names` J1..J9 (decoders ignore unknown keys) |
// | decoder order | header and layout rules in the table order, block digests, `total_sample_count_mismatch`, `sample_count_overflow` (sum of segments), then per segment: reserved flags, non-finite, time grid, qd limit, torch, q step (1.25 × header ceiling × dt), boundary velocity, boundary join, duration; the content digest last |
// | store | `--dense-store-dir`, else `$WELD_PLANNER_DENSE_STORE_DIR`, else `$XDG_CACHE_HOME` (or `~/.cache`)`/blind-weld-planner/dense`; files `sha256-<hex>.rdt`, written to `.tmp-*` by the planning process and renamed only when the client is still connected |
// | refused directory | `<store>/refused/<UTC stamp>-<12 hex>-<rand>/request.weldplan` and `result.json`; newest 5 kept |
// | progress stages | `starting`, `sweep`, `weldseam`, `freespace seed`, `optimize`, `verify`, `dense`; null when idle |
// | queue and cancel | FIFO, unbounded, no wait timeout; a request whose client leaves while waiting is dropped and never starts; a running plan's process group gets SIGTERM, SIGKILL after 2 s; 499 `{error: "Planning cancelled"}` is written (the client is gone) |
// | default host | 127.0.0.1 (document: 0.0.0.0; its own advice is to bind to localhost) — `--host 0.0.0.0` restores the documented default |
// | wrong method / unknown path | 405 `{detail}` / 404 `{detail: "Not Found"}` |
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { homedir, tmpdir } from "node:os";
import { dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CELL_ID } from "./cell.js";
import { PlanFailure, plan, type PlanOptions } from "./plan.js";
import { U64_MARK, u64Json, type Revision } from "./dense.js";

export const CELL: string = CELL_ID;
export const DEFAULT_PORT = 8796;
export const MAX_BODY = 64 * 1024 * 1024;
export const KILL_GRACE_MS = 2000;
export const REFUSED_KEEP = 5;

const DIGEST_PATH_RE = /^sha256:([0-9a-f]{64})$/;

// ---------------------------------------------------------------- query options
interface DetailItem { loc: string[]; msg: string; type: string; input: string }

export function parseOptions(q: URLSearchParams): { options: PlanOptions } | { status: 422; body: { detail: DetailItem[] | string } } {
  const items: DetailItem[] = [];
  const get = (k: string): string | null => { const all = q.getAll(k); return all.length ? all[all.length - 1] : null; };
  const bad = (k: string, v: string, msg: string, type: string): void => { items.push({ loc: ["query", k], msg, type, input: v }); };
  const bool = (k: string, d: boolean): boolean => {
    const v = get(k); if (v === null) return d;
    const s = v.trim().toLowerCase();
    if (["true", "1", "yes", "on"].includes(s)) return true;
    if (["false", "0", "no", "off"].includes(s)) return false;
    bad(k, v, "Input should be a valid boolean", "bool_parsing"); return d;
  };
  const int = (k: string, d: number, lo: number, hi: number): number => {
    const v = get(k); if (v === null) return d;
    if (!/^\s*[+-]?\d+\s*$/.test(v) || !Number.isSafeInteger(Number(v))) { bad(k, v, "Input should be a valid integer", "int_parsing"); return d; }
    const n = Number(v);
    if (n < lo) { bad(k, v, `Input should be greater than or equal to ${lo}`, "greater_than_equal"); return d; }
    if (n > hi) { bad(k, v, `Input should be less than or equal to ${hi}`, "less_than_equal"); return d; }
    return n;
  };
  const k_best = int("k_best", 5, 1, 16);
  const screen_collisions = bool("screen_collisions", true);
  let samples_per_seam: number | null = null;
  const sps = get("samples_per_seam");
  if (sps !== null && sps.trim() !== "" && sps.trim().toLowerCase() !== "null") samples_per_seam = int("samples_per_seam", 0, 2, 512);
  const run_weld_trajopt = bool("run_weld_trajopt", false);
  const run_connecting_trajopt = bool("run_connecting_trajopt", true);
  const verify = bool("verify", true);
  let verify_margin_mm = 2.0;
  const vm = get("verify_margin_mm");
  if (vm !== null) {
    const n = vm.trim() === "" ? NaN : Number(vm);
    if (!Number.isFinite(n)) bad("verify_margin_mm", vm, "Input should be a valid number", "float_parsing");
    else if (n < 0) bad("verify_margin_mm", vm, "Input should be greater than or equal to 0", "greater_than_equal");
    else if (n > 50) bad("verify_margin_mm", vm, "Input should be less than or equal to 50", "less_than_equal");
    else verify_margin_mm = n;
  }
  const order_seams = bool("order_seams", false);
  const dense = bool("dense", false);
  const program_id = get("program_id") ?? "";
  if (program_id.length > 120) bad("program_id", program_id, "String should have at most 120 characters", "string_too_long");
  // Changed after integration: the revisions are u64 (document 2 part 2 header fields), so 1..2^64-1 are admitted.
  const u64 = (k: string): Revision => {
    const v = get(k); if (v === null) return 1;
    if (!/^\s*[+-]?\d+\s*$/.test(v)) { bad(k, v, "Input should be a valid integer", "int_parsing"); return 1; }
    const n = BigInt(v.trim());
    if (n < 1n) { bad(k, v, "Input should be greater than or equal to 1", "greater_than_equal"); return 1; }
    if (n > 18446744073709551615n) { bad(k, v, "Input should be less than or equal to 18446744073709551615", "less_than_equal"); return 1; }
    return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : U64_MARK + n.toString();
  };
  const manifest_revision = u64("manifest_revision");
  const plan_revision = u64("plan_revision");
  if (items.length) return { status: 422, body: { detail: items } };
  const backend = get("free_space_backend") ?? "bspline";
  if (!["bspline", "curobo", "legacy"].includes(backend))
    return { status: 422, body: { detail: `unknown free_space_backend ${JSON.stringify(backend)}; expected bspline, curobo or legacy` } };
  return {
    options: {
      k_best, screen_collisions, samples_per_seam, run_weld_trajopt, run_connecting_trajopt,
      free_space_backend: backend as PlanOptions["free_space_backend"], verify, verify_margin_mm, order_seams, dense,
      program_id, manifest_revision, plan_revision,
    },
  };
}

// ---------------------------------------------------------------- service
type Outcome = { kind: "ok"; result: Record<string, any>; denseTmp: string | null; digest: string | null }
  | { kind: "failure"; text: string } | { kind: "crash"; text: string } | { kind: "cancelled" };

export class BlindPlanner {
  private readonly storeDir: string;
  private readonly host: string;
  private readonly port: number;
  private readonly isolate: boolean;
  private readonly testDelayMs: number;
  private server: Server | null = null;
  private busy = false;
  private readonly waiters: Array<() => void> = [];
  private stage: string | null = null;
  private readonly children = new Set<ChildProcess>();
  private started = 0;
  /** Plans that got the slot and started (for tests: a request cancelled while waiting never starts). */
  get startedPlans(): number { return this.started; }

  /**
   * isolate (default true when running under tsx): run each plan in a fresh child process, as document 2 asks; false plans in-process
   * (no cancellation mid-plan). testDelayMs: the child sleeps this long before planning (tests of queue and cancel).
   */
  constructor(o: { storeDir: string; host?: string; port?: number; isolate?: boolean; testDelayMs?: number }) {
    this.storeDir = o.storeDir; this.host = o.host ?? "127.0.0.1"; this.port = o.port ?? DEFAULT_PORT; this.isolate = o.isolate ?? canSpawnWorker();
    this.testDelayMs = o.testDelayMs ?? 0;
  }

  listen(): Promise<string> {
    mkdirSync(this.storeDir, { recursive: true });
    const server = createServer((req, res) => { this.route(req, res).catch((e) => this.send(res, 500, { error: String(e) })); });
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, this.host, () => {
        const a = server.address();
        const port = typeof a === "object" && a ? a.port : this.port;
        const h = this.host === "0.0.0.0" || this.host === "::" ? "127.0.0.1" : this.host.includes(":") ? `[${this.host}]` : this.host;
        resolve(`http://${h}:${port}`);
      });
    });
  }

  async close(): Promise<void> {
    for (const c of this.children) killGroup(c, "SIGKILL");
    const s = this.server; this.server = null;
    if (!s) return;
    await new Promise<void>((resolve) => { s.close(() => resolve()); s.closeAllConnections(); });
  }

  private send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (res.headersSent || res.destroyed) return;
    const b = Buffer.from(u64Json(JSON.stringify(body)));
    res.writeHead(status, { "Content-Type": "application/json", "Content-Length": String(b.length), ...headers });
    res.end(b);
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://planner");
    const path = url.pathname;
    const method = req.method ?? "GET";
    const only = (m: string): boolean => {
      if (method === m || (m === "GET" && method === "HEAD")) return true;
      this.send(res, 405, { detail: "Method Not Allowed" }, { Allow: m }); return false;
    };
    if (path === "/api/motion/health") { if (only("GET")) this.send(res, 200, { cuda: false, device: null }); return; }
    if (path === "/api/motion/progress") { if (only("GET")) this.send(res, 200, { stage: this.stage }); return; }
    if (path === "/api/motion/plan") { if (only("POST")) await this.handlePlan(req, res, url); return; }
    if (path.startsWith("/api/motion/dense/")) { if (only("GET")) this.handleDense(res, decodeURIComponent(path.slice("/api/motion/dense/".length))); return; }
    this.send(res, 404, { detail: "Not Found" });
  }

  private handleDense(res: ServerResponse, digest: string): void {
    const m = DIGEST_PATH_RE.exec(digest);
    if (!m) { this.send(res, 422, { detail: "expected sha256:<64 hex>" }); return; }
    const file = join(this.storeDir, `sha256-${m[1]}.rdt`);
    let data: Buffer;
    try { data = readFileSync(file); } catch { this.send(res, 404, { detail: "trajectory not in store; plan again" }); return; }
    res.writeHead(200, { "Content-Type": "application/octet-stream", "Cache-Control": "no-store", "Content-Length": String(data.length) });
    res.end(data);
  }

  private async readBody(req: IncomingMessage): Promise<Buffer | null> {
    const chunks: Buffer[] = []; let n = 0; let tooBig = false;
    for await (const c of req) {
      n += (c as Buffer).length;
      if (n > MAX_BODY) tooBig = true; else chunks.push(c as Buffer);
    }
    return tooBig ? null : Buffer.concat(chunks);
  }

  private acquire(isGone: () => boolean, onGone: (f: () => void) => void): Promise<boolean> {
    if (!this.busy) { this.busy = true; return Promise.resolve(true); }
    return new Promise((resolve) => {
      const w = (): void => resolve(true);
      this.waiters.push(w);
      onGone(() => { const i = this.waiters.indexOf(w); if (i >= 0) { this.waiters.splice(i, 1); resolve(false); } });
      if (isGone()) { const i = this.waiters.indexOf(w); if (i >= 0) { this.waiters.splice(i, 1); resolve(false); } }
    });
  }

  private release(): void {
    this.stage = null;
    const next = this.waiters.shift();
    if (next) next(); else this.busy = false;
  }

  private async handlePlan(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const parsed = parseOptions(url.searchParams);
    if (!("options" in parsed)) { req.resume(); this.send(res, parsed.status, parsed.body); return; }
    const body = await this.readBody(req);
    if (body === null) { this.send(res, 413, { error: "body too large" }); return; }
    if (body.length === 0) { this.send(res, 400, { error: "empty body is not a weldplan" }); return; }

    let gone = false; const goneHooks: Array<() => void> = [];
    res.on("close", () => { if (!res.writableFinished) { gone = true; for (const h of goneHooks.splice(0)) h(); } });
    const onGone = (f: () => void): void => { if (gone) f(); else goneHooks.push(f); };
    const cancelled = (): void => this.send(res, 499, { error: "Planning cancelled" });

    if (!(await this.acquire(() => gone, onGone))) { cancelled(); return; }
    let outcome: Outcome;
    try {
      this.stage = "starting"; this.started++;
      outcome = this.isolate ? await this.runChild(body, parsed.options, () => gone, onGone) : this.runInProcess(body, parsed.options);
      if (gone) {
        if (outcome.kind === "ok" && outcome.denseTmp) rmSync(outcome.denseTmp, { force: true });
        outcome = { kind: "cancelled" };
      } else if (outcome.kind === "ok") {
        // store only after success and while the client is still connected
        if (outcome.denseTmp && outcome.digest) renameSync(outcome.denseTmp, join(this.storeDir, `sha256-${outcome.digest.slice(7)}.rdt`));
        if (parsed.options.dense && outcome.result.dense_error) this.keepRefused(body, outcome.result);
      }
    } finally {
      this.release();
    }
    if (outcome.kind === "cancelled") cancelled();
    else if (outcome.kind === "failure") this.send(res, 422, { error: outcome.text });
    else if (outcome.kind === "crash") this.send(res, 500, { error: outcome.text });
    else this.send(res, 200, outcome.result);
  }

  private tmpPath(): string { return join(this.storeDir, `.tmp-${process.pid}-${randomBytes(6).toString("hex")}`); }

  private runInProcess(body: Buffer, o: PlanOptions): Outcome {
    try {
      const out = plan(body, o, (s) => { this.stage = s; });
      let denseTmp: string | null = null;
      if (out.dense) { denseTmp = this.tmpPath() + ".rdt"; writeFileSync(denseTmp, out.dense.blob); }
      return { kind: "ok", result: out.result, denseTmp, digest: out.dense?.digest ?? null };
    } catch (e) {
      if (e instanceof PlanFailure) return { kind: "failure", text: e.text };
      return { kind: "crash", text: String(e) };
    }
  }

  private runChild(body: Buffer, o: PlanOptions, isGone: () => boolean, onGone: (f: () => void) => void): Promise<Outcome> {
    const base = this.tmpPath();
    const bodyFile = base + ".weldplan", denseTmp = base + ".rdt";
    writeFileSync(bodyFile, body);
    // The worker beside this module, built the same way: worker.ts from source (tsx), worker.mjs beside a
    // server.mjs built to JavaScript (the harness's clean-room check starts it so, harness/cleanroom/processes.ts).
    const self = fileURLToPath(import.meta.url);
    const worker = join(dirname(self), "worker" + extname(self));
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [...process.execArgv, worker, bodyFile, JSON.stringify(o), denseTmp], {
        detached: true, stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, BLIND_PLANNER_TEST_DELAY_MS: String(this.testDelayMs) },
      });
      this.children.add(child);
      let final: any = null; let buf = ""; let err = "";
      let killTimer: NodeJS.Timeout | null = null;
      child.stdout!.setEncoding("utf8");
      child.stdout!.on("data", (d: string) => {
        buf += d; let i: number;
        while ((i = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, i); buf = buf.slice(i + 1);
          try { const m = JSON.parse(line); if (typeof m.stage === "string") this.stage = m.stage; else final = m; } catch { /* not ours */ }
        }
      });
      child.stderr!.setEncoding("utf8");
      child.stderr!.on("data", (d: string) => { if (err.length < 8192) err += d; });
      onGone(() => {
        killGroup(child, "SIGTERM");
        killTimer = setTimeout(() => killGroup(child, "SIGKILL"), KILL_GRACE_MS);
      });
      child.on("close", () => {
        this.children.delete(child);
        if (killTimer) clearTimeout(killTimer);
        rmSync(bodyFile, { force: true });
        const hasDense = existsSync(denseTmp);
        if (isGone()) { if (hasDense) rmSync(denseTmp, { force: true }); resolve({ kind: "cancelled" }); return; }
        if (final?.result) resolve({ kind: "ok", result: final.result, denseTmp: hasDense && final.dense_digest ? denseTmp : null, digest: final.dense_digest });
        else {
          if (hasDense) rmSync(denseTmp, { force: true });
          if (final?.failure) resolve({ kind: "failure", text: final.failure });
          else resolve({ kind: "crash", text: final?.crash ?? `planning process failed: ${err.trim().slice(-500)}` });
        }
      });
    });
  }

  private keepRefused(body: Buffer, result: Record<string, any>): void {
    const root = join(this.storeDir, "refused");
    const dir = join(root, `${new Date().toISOString().replace(/[:.]/g, "-")}-${String(result.request?.request_sha256 ?? "").slice(0, 12)}-${randomBytes(2).toString("hex")}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "request.weldplan"), body);
    writeFileSync(join(dir, "result.json"), u64Json(JSON.stringify(result)));
    const all = readdirSync(root).map((n) => ({ n, t: statSync(join(root, n)).mtimeMs })).sort((a, b) => b.t - a.t || (b.n < a.n ? -1 : 1));
    for (const old of all.slice(REFUSED_KEEP)) rmSync(join(root, old.n), { recursive: true, force: true });
  }
}

/** The worker is a .ts file: a child can run it only when this process was started with a TypeScript loader (tsx). */
function canSpawnWorker(): boolean {
  return !fileURLToPath(import.meta.url).endsWith(".ts") || process.execArgv.join(" ").includes("tsx");
}

function killGroup(c: ChildProcess, sig: NodeJS.Signals): void {
  if (c.pid === undefined || c.exitCode !== null || c.signalCode !== null) return;
  try { process.kill(-c.pid, sig); } catch { try { c.kill(sig); } catch { /* already gone */ } }
}

export function defaultStoreDir(): string {
  const env = process.env.WELD_PLANNER_DENSE_STORE_DIR;
  if (env) return env;
  const cache = process.env.XDG_CACHE_HOME || join(homedir() || tmpdir(), ".cache");
  return join(cache, "blind-weld-planner", "dense");
}

// ---------------------------------------------------------------- CLI
async function main(argv: string[]): Promise<void> {
  let port = DEFAULT_PORT, host = "127.0.0.1", store: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]; const v = argv[i + 1];
    if (a === "--port") { port = Number(v); i++; }
    else if (a === "--host") { host = v; i++; }
    else if (a === "--dense-store-dir") { store = v; i++; }
    else if (a.startsWith("--port=")) port = Number(a.slice(7));
    else if (a.startsWith("--host=")) host = a.slice(7);
    else if (a.startsWith("--dense-store-dir=")) store = a.slice(18);
    else { process.stderr.write(`unknown argument ${a}\nusage: server.ts [--port N] [--host H] [--dense-store-dir DIR]\n`); process.exit(2); }
  }
  if (!Number.isInteger(port) || port < 0 || port > 65535) { process.stderr.write("bad --port\n"); process.exit(2); }
  const planner = new BlindPlanner({ storeDir: store ?? defaultStoreDir(), host, port });
  const url = await planner.listen();
  process.stdout.write(`ready ${JSON.stringify({ planner: url })}\n`);
  const stop = (): void => { void planner.close().then(() => process.exit(0)); };
  process.on("SIGTERM", stop); process.on("SIGINT", stop);
}

function isMain(): boolean {
  try { return !!process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url)); } catch { return false; }
}
if (isMain()) void main(process.argv.slice(2));
