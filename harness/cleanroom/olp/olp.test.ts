// Tests of blind-olp from document 3, written by its author for node:test; in the project they run under vitest
// with the harness unit tests. Kept: the program rules, the server without a cell and without a catalogue. Left
// out: the author's live-cell part (hil serve behind the server), whose jog, heartbeat and play checks sleep and
// read wall-clock results; `hil cleanroom check-olp` runs the OLP suites against this server on a live cell instead.
import { afterAll as after, beforeAll as before, describe, test } from "vitest";
import assert from "node:assert/strict";
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BlindOlp } from "./server.js";
import { canonicalJson, checkProgram, sha256Hex } from "./program.js";

const PREFIX = "/api/offline-programming/v1";
const URDF = fileURLToPath(new URL("../../../fixtures/robots/sim-nine-axis.urdf", import.meta.url));
const URDF_SHA = `sha256:${sha256Hex(fs.readFileSync(URDF))}`;

interface Reply { status: number; body: Record<string, unknown>; headers: http.IncomingHttpHeaders }

function req(base: string, method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const u = new URL(base + PREFIX + p);
  const data = body === undefined ? undefined : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const r = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: { "content-type": "application/json", ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const t = Buffer.concat(chunks).toString("utf8");
        let b: Record<string, unknown> = {};
        try { b = JSON.parse(t) as Record<string, unknown>; } catch { b = { raw: t }; }
        resolve({ status: res.statusCode ?? 0, body: b, headers: res.headers });
      });
    });
    r.on("error", reject);
    r.end(data);
  });
}


function node(n: Record<string, unknown>): Record<string, unknown> {
  return { ...n, row_hash: `sha256:${sha256Hex(canonicalJson(n))}` };
}

function program(id = "blind_p1"): Record<string, unknown> {
  const p: Record<string, unknown> = {
    schema: "robot.v4.program.v2", program_id: id, program_name: "blind one", program_revision: 1, base_program_revision: 0,
    program_state: "saved_unplanned", execution_mode: "simulation", created_utc: "2026-11-29T03:00:00Z",
    units: { length: "m", angle: "rad", time: "s", joint_order: ["J1", "J2", "J3", "J4", "J5", "J6", "J7", "J8", "J9"] },
    producer: { component: "offline-programming-v1", source_revision: "blind", inputs: [{ kind: "project", ref: "blind", sha256: "0".repeat(64) }] },
    workpiece: { frame_id: "workpiece" },
    placement: { cell_id: "sim-nine-axis", anchor_xyz_m: [1.4, 0, 0.75], offset_xyz_m: [0, 0, 0], rpy_rad: [0, 0, 0] },
    robot: { model_id: "sim-nine-axis", robot_description_sha256: URDF_SHA },
    defaults: { clearance_min_mm: 2, speed_scale: 1, torch_policy: "free", positioner_policy: "free" },
    nodes: [
      node({ id: "a1", op: "approach", enabled: true, label: "a", comment: "" }),
      node({
        id: "w1", op: "weld", enabled: true, label: "w", comment: "",
        geometry: { kind: "posed_polyline", frame_id: "workpiece", points: [{ xyz_m: [0, 0, 0.01], rpy_rad: [3.14159, 0, 0] }, { xyz_m: [0.01, 0, 0.01], rpy_rad: [3.14159, 0, 0] }] },
        travel_speed_mm_s: 10, standoff_mm: { kind: "constant", value: 15 }, weave: { kind: "none" }, weld_parameters: {},
      }),
      node({ id: "r1", op: "retract", enabled: true, label: "r", comment: "" }),
    ],
    planner_owns: ["freespace"], speed_scale: 0.15,
  };
  p["program_digest"] = `sha256:${sha256Hex(canonicalJson(p))}`;
  return p;
}

// ---------------------------------------------------------------- document rules without a cell

describe("program document (D3 part 2)", () => {
  test("a well-formed program passes, digests are canonical", () => {
    assert.deepEqual(checkProgram(program()), []);
    assert.equal(canonicalJson({ b: 1, a: [1, { d: 2, c: 3 }] }), '{"a":[1,{"c":3,"d":2}],"b":1}');
    assert.throws(() => canonicalJson({ a: Number.NaN }));
  });
  test("forbidden keys at any depth are refused", () => {
    const p = program();
    (p["workpiece"] as Record<string, unknown>)["extensions"] = { deep: { trajectory: [] } };
    assert.ok(checkProgram(p).some((s) => s.includes("forbidden key")));
  });
  test("ordering home? approach weld (transit weld)* retract home?", () => {
    const p = program();
    const nodes = p["nodes"] as Record<string, unknown>[];
    p["nodes"] = [nodes[1], nodes[0], nodes[2]];
    delete p["program_digest"];
    assert.ok(checkProgram(p).some((s) => s.startsWith("nodes: ordering")));
  });
  test("unknown node keys, tampered row_hash and program_digest are refused", () => {
    const p = program();
    (p["nodes"] as Record<string, unknown>[])[0]!["speed"] = 1;
    const probs = checkProgram(p);
    assert.ok(probs.some((s) => s.includes("unknown key speed")));
    assert.ok(probs.some((s) => s.includes("row_hash")));
    assert.ok(probs.some((s) => s.includes("program_digest")));
  });
  test("depart_standoff is not allowed on approach; path vocabulary refused on freespace nodes", () => {
    const p = program();
    const nodes = p["nodes"] as Record<string, unknown>[];
    nodes[0] = node({ id: "a1", op: "approach", enabled: true, label: "a", comment: "", depart_standoff: { direction: "torch_axis", distance_mm: 5 } });
    nodes[2] = node({ id: "r1", op: "retract", enabled: true, label: "r", comment: "", overrides: { knots: [] } });
    delete p["program_digest"];
    const probs = checkProgram(p);
    assert.ok(probs.some((s) => s.includes("depart_standoff")));
    assert.ok(probs.some((s) => s.includes("path vocabulary")));
  });
});

describe("server without a live cell", () => {
  let olp: BlindOlp;
  let base: string;
  before(async () => {
    olp = new BlindOlp({ cells: [{ cell_id: "ghost", control_socket: "/nonexistent/control.sock", model_id: "m" }], port: 0, robotStoreDir: path.dirname(URDF) });
    base = await olp.listen();
  });
  after(async () => { await olp.close(); });

  test("refuses a non-loopback listen address", () => {
    assert.throws(() => new BlindOlp({ cells: [], host: "0.0.0.0", port: 0 }));
  });
  test("health is 200 with the documented fields", async () => {
    const r = await req(base, "GET", "/health");
    assert.equal(r.status, 200);
    for (const k of ["ok", "schema", "mode", "network_required", "connected", "connected_targets", "local_simulator", "local_ready", "execution_enabled", "target_planning", "teleop_enabled", "program_catalog"]) assert.ok(k in r.body, k);
    assert.equal(r.body["connected"], false);
  });
  test("capabilities schema", async () => {
    const r = await req(base, "GET", "/capabilities");
    assert.equal(r.body["schema"], "offline-programming.capabilities.v1");
  });
  test("foreign Host and Origin are refused", async () => {
    assert.equal((await req(base, "GET", "/health", undefined, { host: "evil.example:80" })).status, 403);
    assert.equal((await req(base, "GET", "/health", undefined, { origin: "http://evil.example" })).status, 403);
    assert.equal((await req(base, "GET", "/health", undefined, { origin: base })).status, 200);
  });
  test("bodies are bounded: 64 KiB on dense-execution routes", async () => {
    const r = await req(base, "POST", "/dense-execution/heartbeat", { pad: "x".repeat(70 * 1024) });
    assert.equal(r.status, 413);
    assert.equal(r.body["error"], "payload_too_large");
  });
  test("trailing data after the JSON value is refused", async () => {
    const r = await req(base, "POST", "/targets/select", '{"cell_id":"ghost"} {}');
    assert.equal(r.status, 400);
  });
  test("unknown cell: 409 cell_id_unknown; unreachable cell: 409 cell_unreachable", async () => {
    const a = await req(base, "POST", "/targets/select", { cell_id: "nope", model_id: "m" });
    assert.equal(a.status, 409);
    assert.equal(a.body["error"], "cell_id_unknown");
    const b = await req(base, "POST", "/targets/select", { cell_id: "ghost", model_id: "m" });
    assert.equal(b.body["error"], "cell_unreachable");
    const c = await req(base, "POST", "/targets/select", { cell_id: "ghost", model_id: "other" });
    assert.equal(c.body["error"], "cell_model_mismatch");
  });
  test("targets list reports the unreachable backend with a reason", async () => {
    const r = await req(base, "GET", "/targets");
    const t = (r.body["targets"] as Record<string, unknown>[])[0]!;
    assert.equal((t["backend"] as Record<string, unknown>)["reason"], "cell_unreachable");
  });
  test("fenced POST without headers is target_changed; exempt routes pass", async () => {
    const r = await req(base, "POST", "/dense-execution/home", {});
    assert.equal(r.status, 409);
    assert.equal(r.body["error"], "target_changed");
    assert.equal((await req(base, "POST", "/dense-execution/stop", {})).status, 200);
    assert.equal((await req(base, "POST", "/dense-execution/heartbeat", {})).status, 200);
    assert.equal((await req(base, "POST", "/dense-execution/arm", { armed: false })).status, 200);
    assert.equal((await req(base, "POST", "/dense-execution/cartesian/stop", {})).body["error"], "target_changed");
  });
  test("robots lists the fixture URDF; capture-model checks the digest", async () => {
    const r = await req(base, "GET", "/robots");
    const robots = r.body["robots"] as Record<string, unknown>[];
    const m = robots.find((x) => x["model_id"] === "sim-nine-axis")!;
    assert.equal(m["robot_description_sha256"], URDF_SHA);
    const ok = await req(base, "POST", "/robots/capture-model", { model_id: "sim-nine-axis", robot_description_sha256: URDF_SHA });
    assert.equal(ok.status, 200);
    assert.ok(String(ok.body["urdf"]).includes("<robot"));
    const bad = await req(base, "POST", "/robots/capture-model", { model_id: "sim-nine-axis", robot_description_sha256: `sha256:${"0".repeat(64)}` });
    assert.equal(bad.status, 400);
    assert.equal(bad.body["ok"], false);
  });
  test("weld-plan: missing STEP is weld_plan_invalid; no planner is motion_origin_unavailable; export packs", async () => {
    const a = await req(base, "POST", "/weld-plan", { program: program(), tooling: {}, step_base64: "", cell_id: "ghost" });
    assert.equal(a.status, 400);
    assert.equal(a.body["code"], "weld_plan_invalid");
    const b = await req(base, "POST", "/weld-plan", { program: program(), tooling: {}, step_base64: "", workpiece_absent: true, cell_id: "ghost" });
    assert.equal(b.status, 503);
    assert.equal(b.body["code"], "motion_origin_unavailable");
    const c = await req(base, "POST", "/weld-plan/export", { program: program(), tooling: {}, step_base64: "", workpiece_absent: true, cell_id: "ghost" });
    assert.equal(c.status, 200);
    assert.match(String(c.headers["content-disposition"]), /blind_p1\.weldplan/);
    assert.match(String(c.headers["x-weldplan-sha256"]), /^[0-9a-f]{64}$/);
  });
  test("workers not offered answer 503", async () => {
    assert.equal((await req(base, "POST", "/cadquery/topology", { operation: "extract_topology" })).status, 503);
    const s = await req(base, "POST", "/seam", { operation: "detect_joints" });
    assert.equal(s.body["code"], "seam_worker_unavailable");
  });
});

describe("no catalogue", () => {
  test("selection answers 503 cell_catalogue_unavailable", async () => {
    const olp = new BlindOlp({ cells: [{ cell_id: "only", control_socket: "/nonexistent/control.sock", model_id: "m" }], port: 0, catalogue: false });
    const base = await olp.listen();
    try {
      const r = await req(base, "POST", "/targets/select", { cell_id: "only", model_id: "m" });
      assert.equal(r.status, 503);
      assert.equal(r.body["error"], "cell_catalogue_unavailable");
      // no fencing without a catalogue: the route reaches the (unreachable) cell
      const h = await req(base, "POST", "/dense-execution/home", {});
      assert.notEqual(h.body["error"], "target_changed");
    } finally { await olp.close(); }
  });
});
