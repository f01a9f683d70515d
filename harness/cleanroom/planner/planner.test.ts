// Tests written from document 2 by the clean-room planner's author (they run in `npm test` with the harness unit tests).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll as after, beforeAll as before, describe, test } from "vitest";
import { fileURLToPath } from "node:url";
import { AXIS_COUNT, DenseFormatError, RECORD_BYTES, decodeDense, encodeDense, u64Json, type Sample, type SegmentIn } from "./dense.js";
import { PlanFailure, plan, type PlanOptions } from "./plan.js";
import { BlindPlanner, CELL, parseOptions } from "./server.js";
import { writeZip } from "./zip.js";

const FIXTURE = process.env.BLIND_FIXTURE ?? fileURLToPath(new URL("../../../fixtures/weldplans/line-weld.program.json", import.meta.url));
function program(): any {
  const p = JSON.parse(readFileSync(FIXTURE, "utf8"));
  p.placement.cell_id = CELL; p.robot.model_id = CELL;
  return p;
}
const weldplan = (p: any = program(), extra: Record<string, string> = {}): Buffer => writeZip({ "program.json": JSON.stringify(p), ...extra });
const FULL: PlanOptions = {
  k_best: 5, screen_collisions: true, samples_per_seam: null, run_weld_trajopt: true, run_connecting_trajopt: true,
  free_space_backend: "bspline", verify: true, verify_margin_mm: 2, order_seams: false, dense: true,
  program_id: "line_weld_demo", manifest_revision: 1, plan_revision: 1,
};
const opts = (o: Partial<PlanOptions> = {}): PlanOptions => ({ ...FULL, ...o });

// ---------------------------------------------------------------- dense file format
function restSeg(kind: "freespace" | "weld" | "dwell", id: string, n: number, q0 = 0, q1 = 0.01): SegmentIn {
  const samples: Sample[] = [];
  for (let k = 0; k < n; k++) {
    const u = n === 1 ? 0 : k / (n - 1);
    const q = new Array<number>(AXIS_COUNT).fill(0); q[0] = q0 + (q1 - q0) * u;
    const qd = new Array<number>(AXIS_COUNT).fill(0); if (k > 0 && k < n - 1) qd[0] = (q1 - q0) / ((n - 1) * 0.01);
    samples.push({ t: k * 0.01, q, qd, flags: 0 });
  }
  return { kind, source_id: id, samples };
}
const IDENT = { plan_id: "p:0123456789ab", program_id: "p", program_digest: "sha256:" + "1".repeat(64), manifest_revision: 1, plan_revision: 1, created_at: "2026-11-29T00:00:00Z" };
const CEIL = [2, 2, 2, 2, 2, 2, 1, 1, 1];
const enc = (segs: SegmentIn[], ceil = CEIL, dt = 0.01) => encodeDense({ identity: IDENT, axis_mask: 0x3f, dt_s: dt, max_abs_qd_rad_s: ceil, segments: segs });
const good = (): SegmentIn[] => [restSeg("freespace", "a", 5, 0, 0.02), restSeg("weld", "w", 4, 0.02, 0.03), restSeg("dwell", "d", 2, 0.03, 0.03)];
function reason(blob: Buffer): string {
  try { decodeDense(blob); return "ok"; } catch (e) { if (e instanceof DenseFormatError) return e.reason; throw e; }
}
function withHeader(blob: Buffer, edit: (h: any) => void): Buffer {
  const hl = blob.readUInt32BE(0); const h = JSON.parse(blob.subarray(4, 4 + hl).toString("utf8")); edit(h);
  const hj = Buffer.from(JSON.stringify(h)); const len = Buffer.alloc(4); len.writeUInt32BE(hj.length);
  return Buffer.concat([len, hj, blob.subarray(4 + hl)]);
}

describe("dense file", () => {
  test("layout: u32 BE header length, JSON header, 153-byte big-endian records, contiguous blocks", () => {
    const { blob, header, digest } = enc(good());
    const hl = blob.readUInt32BE(0);
    const h: any = JSON.parse(blob.subarray(4, 4 + hl).toString("utf8"));
    assert.deepEqual(h, header as any);
    assert.equal(h.schema, "robot.v4.dense-joint-trajectory.v1");
    assert.equal(h.trajectory_digest, digest);
    assert.deepEqual(h.sample_encoding, { encoding: "f64-be-aos.v1", record_bytes: 153 });
    assert.equal(h.axes.axis_count, 9); assert.equal(h.axes.axis_mask, 0x3f);
    assert.equal(h.sampling.total_sample_count, 11);
    assert.equal(blob.length, 4 + hl + 11 * RECORD_BYTES);
    let off = 0;
    h.segments.forEach((s: any, i: number) => {
      assert.equal(s.index, i); assert.equal(s.block.byte_offset, off); assert.equal(s.block.byte_length, s.sample_count * 153);
      const bytes = blob.subarray(4 + hl + off, 4 + hl + off + s.block.byte_length);
      assert.equal(s.block.sha256, "sha256:" + createHash("sha256").update(bytes).digest("hex"));
      off += s.block.byte_length;
    });
    // sample 1 of segment 0: t at offset 0, q_rad[0] at 8, qd[0] at 80, flags at 152
    const r = blob.subarray(4 + hl + 153, 4 + hl + 306);
    assert.equal(r.readDoubleBE(0), 0.01);
    assert.equal(r.readDoubleBE(8), 0.005);
    assert.equal(r.readDoubleBE(80), 0.5);
    assert.equal(r.readUInt8(152), 0);
    assert.equal(reason(blob), "ok");
  });

  test("content digest by hand (identity and robot_cell excluded)", () => {
    const segs = good(); const a = enc(segs);
    const hl = a.blob.readUInt32BE(0); const body = a.blob.subarray(4 + hl);
    const u64 = (n: number): Buffer => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; };
    const f64 = (x: number): Buffer => { const b = Buffer.alloc(8); b.writeDoubleBE(x); return b; };
    const str = (s: string): Buffer => Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s)]);
    const parts: Buffer[] = [Buffer.from("robot.v4.dense-joint-trajectory.v1\0", "ascii"), u64(9), u64(0x3f), f64(0.01), u64(3)];
    let off = 0;
    for (const s of segs) { const len = s.samples.length * 153; parts.push(str(s.kind), str(s.source_id), u64(s.samples.length), body.subarray(off, off + len)); off += len; }
    parts.push(u64(9), ...CEIL.map(f64));
    assert.equal(a.digest, "sha256:" + createHash("sha256").update(Buffer.concat(parts)).digest("hex"));
    const b = encodeDense({ identity: { ...IDENT, plan_id: "other:1", program_id: "other" }, axis_mask: 0x3f, dt_s: 0.01, max_abs_qd_rad_s: CEIL, segments: segs, robot_cell: { model_id: "x" } });
    assert.equal(b.digest, a.digest);
  });

  test("unknown header keys are ignored", () => {
    assert.equal(reason(withHeader(enc(good()).blob, (h) => { h.future_key = { x: 1 }; })), "ok");
  });

  const cases: Array<[string, () => Buffer]> = [
    ["header_truncated", () => Buffer.from([0, 0])],
    ["header_truncated", () => { const b = enc(good()).blob; b.writeUInt32BE(b.length, 0); return b; }],
    ["header_json_invalid", () => { const b = Buffer.from("{nope"); const l = Buffer.alloc(4); l.writeUInt32BE(b.length); return Buffer.concat([l, b]); }],
    ["header_json_invalid", () => withHeader(enc(good()).blob, (h) => { h.manifest_revision = "1"; })],
    ["schema_mismatch", () => withHeader(enc(good()).blob, (h) => { h.schema = "robot.v4.dense-joint-trajectory.v2"; })],
    ["axis_count_mismatch", () => withHeader(enc(good()).blob, (h) => { h.axes.axis_count = 6; })],
    ["sample_encoding_mismatch", () => withHeader(enc(good()).blob, (h) => { h.sample_encoding.record_bytes = 152; })],
    ["limits_invalid", () => withHeader(enc(good()).blob, (h) => { h.limits.max_abs_qd_rad_s[8] = 0; })],
    ["limits_invalid", () => withHeader(enc(good()).blob, (h) => { h.limits.max_abs_qd_rad_s = [1, 1, 1]; })],
    ["time_grid_invalid", () => withHeader(enc(good()).blob, (h) => { h.sampling.dt_s = 0; })],
    ["segments_empty", () => withHeader(enc(good()).blob, (h) => { h.segments = []; })],
    ["segment_index_out_of_order", () => withHeader(enc(good()).blob, (h) => { h.segments[1].index = 2; })],
    ["kind_invalid", () => withHeader(enc(good()).blob, (h) => { h.segments[1].kind = "hold"; })],
    ["segment_too_short", () => enc([restSeg("freespace", "a", 1)]).blob],
    ["block_layout_invalid", () => withHeader(enc(good()).blob, (h) => { h.segments[1].block.byte_offset += 1; })],
    ["blob_length_mismatch", () => Buffer.concat([enc(good()).blob, Buffer.from([0])])],
    ["block_sha256_mismatch", () => { const b = enc(good()).blob; b[b.length - 2] ^= 1; return b; }],
    ["reserved_flags_set", () => { const s = good(); s[1].samples[1].flags = 2; return enc(s).blob; }],
    ["total_sample_count_mismatch", () => withHeader(enc(good()).blob, (h) => { h.sampling.total_sample_count = 12; })],
    ["sample_count_overflow", () => {
      const n = 250001; const q = new Array<number>(9).fill(0), qd = new Array<number>(9).fill(0);
      const samples: Sample[] = Array.from({ length: n }, (_, k) => ({ t: k * 0.01, q, qd, flags: 0 }));
      return enc([{ kind: "dwell", source_id: "d", samples }]).blob;
    }],
    ["nonfinite_sample", () => { const s = good(); s[0].samples[2].q[3] = NaN; return enc(s).blob; }],
    ["time_grid_invalid", () => { const s = good(); s[1].samples.forEach((x) => { x.t += 0.01; }); return enc(s).blob; }],
    ["time_grid_invalid", () => { const s = good(); s[0].samples[2].t += 2e-9; return enc(s).blob; }],
    ["qd_limit_exceeded", () => { const s = good(); s[0].samples[2].qd[7] = 1.5; return enc(s).blob; }],
    ["torch_outside_weld", () => { const s = good(); s[0].samples[1].flags = 1; return enc(s).blob; }],
    ["q_step_exceeded", () => { const s = good(); s[0].samples[2].q[4] = 1.25 * 2 * 0.01 + 1e-6; return enc(s).blob; }],
    ["boundary_qd_nonzero", () => { const s = good(); s[1].samples[3].qd[0] = 2e-6; return enc(s).blob; }],
    ["boundary_q_discontinuity", () => { const s = good(); s[2] = restSeg("dwell", "d", 2, 0.0312, 0.0312); return enc(s).blob; }],
    ["duration_mismatch", () => withHeader(enc(good()).blob, (h) => { h.segments[0].duration_s = 0.041; })],
    ["trajectory_digest_mismatch", () => withHeader(enc(good()).blob, (h) => { h.trajectory_digest = "sha256:" + "0".repeat(64); })],
  ];
  for (const [r, make] of cases) test(`format reason ${r}`, () => { assert.equal(reason(make()), r); });

  test("torch bit allowed in weld segments; boundary within tolerances passes", () => {
    const s = good(); s[1].samples[1].flags = 1;
    s[2] = restSeg("dwell", "d", 2, 0.0309, 0.0309); // 0.9e-3 rad from the previous end
    s[0].samples[0].qd[2] = 1e-6;
    assert.equal(reason(enc(s).blob), "ok");
  });
});

// ---------------------------------------------------------------- planning (in process)
describe("planning", () => {
  let full: ReturnType<typeof plan>;
  before(() => { full = plan(weldplan(), FULL); });

  test("fixture weld: result document, dense summary and file", () => {
    const r = full.result;
    assert.equal(r.schema, "amr-weld-planner-v1.motion-plan-result.v1");
    assert.equal(r.cell_id, CELL);
    assert.equal(r.k_best, 5); assert.equal(r.screened, true);
    const sha = createHash("sha256").update(weldplan()).digest("hex");
    assert.equal(r.request.request_sha256, sha);
    for (const k of ["module", "source_revision", "source_revision_state"]) assert.ok(k in r.producer);
    for (const k of ["candidate_collision_screening", "weld_trajectory_continuous_verification", "connecting_trajectory_continuous_verification",
      "canonical_motion_server", "physical_motion", "execution_authority", "candidate_limit_checks"]) assert.ok(k in r.coverage, k);
    const s = r.seams[0];
    assert.equal(s.id, "weld-1"); assert.equal(s.crossed, true); assert.ok(Math.abs(s.length_mm - 50) < 1e-6);
    assert.deepEqual(s.axis_names, ["J1", "J2", "J3", "J4", "J5", "J6"]);
    assert.ok(s.candidates.length >= 1 && s.candidates.length <= 5);
    assert.equal(s.trajectory.verdict.verdict, "PASS"); assert.equal(s.trajectory.tracking.verdict, "PASS");
    assert.ok(s.trajectory.tracking.bound_mm >= s.trajectory.tracking.worst_seen_mm);
    assert.equal(s.trajectory.sampled_tracking_mm.midpoints.length, s.trajectory.times_s.length - 1);
    assert.deepEqual(r.connecting_trajectories.map((c: any) => [c.kind, c.from, c.to, c.node_id]), [["approach", null, "weld-1", "approach-1"], ["retract", "weld-1", null, "retract-1"]]);
    for (const c of r.connecting_trajectories) assert.equal(c.verdict.verdict, "PASS");
    const d = r.dense;
    assert.equal(d.plan_id, `line_weld_demo:${sha.slice(0, 12)}`);
    assert.equal(d.program_digest, `sha256:${sha}`);
    assert.equal(d.dt_s, 0.01);
    assert.equal(d.robot_cell.model_id, CELL);
    assert.deepEqual(d.segments.map((x: any) => [x.index, x.kind, x.source_id]), [[0, "freespace", "approach-1"], [1, "weld", "weld-1"], [2, "freespace", "retract-1"]]);
    assert.ok(full.dense);
    assert.equal(d.trajectory_digest, full.dense!.digest); assert.equal(d.bytes, full.dense!.blob.length);
    const dec = decodeDense(full.dense!.blob);
    assert.equal(dec.header.axes.axis_mask, 0x3f);
    assert.equal(dec.header.program_id, "line_weld_demo");
    assert.equal(dec.header.sampling.total_sample_count, d.total_sample_count);
    assert.deepEqual(dec.header.limits.max_abs_qd_rad_s, d.max_abs_qd_rad_s);
    for (const seg of dec.segments) for (const x of seg.samples) {
      assert.deepEqual(x.q.slice(6), [0, 0, 0]); assert.deepEqual(x.qd.slice(6), [0, 0, 0]); assert.equal(x.flags, 0);
    }
    // weld segment tracks the seam: TCP 12 mm above the line x 0.5, z 0.3 (torch pointing down)
    assert.ok(dec.segments[1].samples.length > 100);
  });

  test("default options (no weld trajectory optimisation) with dense gives result_empty", () => {
    const r = plan(weldplan(), opts({ run_weld_trajopt: false })).result;
    assert.equal(r.dense_error.reason, "result_empty");
    assert.equal(r.seams[0].trajectory, undefined);
    assert.equal(plan(weldplan(), opts({ run_connecting_trajopt: false })).result.dense_error.reason, "result_empty");
  });

  test("identity_invalid for an empty or non-plain program_id", () => {
    assert.equal(plan(weldplan(), opts({ program_id: "" })).result.dense_error.reason, "identity_invalid");
    assert.equal(plan(weldplan(), opts({ program_id: "a b" })).result.dense_error.reason, "identity_invalid");
    assert.ok(plan(weldplan(), opts({ program_id: "A-z_0.9:x" })).result.dense);
  });

  test("seam_not_planned with frontier when the seam is out of reach", () => {
    const p = program();
    for (const pt of p.nodes[2].geometry.points) pt.xyz_m[0] = 2.5;
    const r = plan(weldplan(p), opts()).result;
    assert.equal(r.seams[0].crossed, false);
    assert.ok(r.seams[0].frontier && Array.isArray(r.seams[0].frontier_causes) && r.seams[0].frontier_causes.length > 0);
    assert.equal(r.dense_error.reason, "seam_not_planned");
  });

  test("collision: screened search stops (cause collision); unscreened plan fails verification", () => {
    const p = program();
    for (const pt of p.nodes[2].geometry.points) pt.xyz_m[2] = 0.15; // inside the weld table (top at z 0.2)
    const screened = plan(weldplan(p), opts()).result;
    assert.equal(screened.seams[0].crossed, false);
    assert.ok(screened.seams[0].frontier_causes.includes("collision"));
    const unscreened = plan(weldplan(p), opts({ screen_collisions: false })).result;
    assert.equal(unscreened.screened, false);
    assert.equal(unscreened.seams[0].crossed, true);
    const v = unscreened.seams[0].trajectory.verdict;
    assert.equal(v.verdict, "FAIL"); assert.ok(v.collisions > 0 && v.penetrating > 0 && v.worst_clearance_mm < 0);
    assert.equal(unscreened.dense_error.reason, "motion_not_verified");
  });

  test("verify=false: verdicts are not PASS, dense refuses motion_not_verified", () => {
    const r = plan(weldplan(), opts({ verify: false })).result;
    assert.notEqual(r.seams[0].trajectory.verdict.verdict, "PASS");
    assert.equal(r.dense_error.reason, "motion_not_verified");
  });

  test("curobo backend unavailable: connecting_trajectories_error and motion_join_failed", () => {
    const r = plan(weldplan(), opts({ free_space_backend: "curobo" })).result;
    assert.ok(r.connecting_trajectories_error);
    assert.equal(r.dense_error.reason, "motion_join_failed");
  });

  test("taught moves: program_order present; joint move planned; circular move not planned", () => {
    const p = program();
    const mv = { id: "mv-1", op: "move", enabled: true, label: "m", comment: "", row_hash: "x", motion: "joint",
      target: { frame_id: "world", xyz_m: [0, 0, 0], rpy_rad: [0, 0, 0], joint_names: ["J1", "J2"], joint_values_rad: [0.3, -0.1] }, target_space: "joint" };
    p.nodes.splice(4, 0, mv);
    const r = plan(weldplan(p), opts()).result;
    assert.deepEqual(r.program_order, ["home-start", "approach-1", "weld-1", "retract-1", "mv-1", "home-end"]);
    assert.deepEqual(r.connecting_trajectories.map((c: any) => c.node_id), ["approach-1", "retract-1", "mv-1", "home-end"]);
    assert.ok(r.dense, JSON.stringify(r.dense_error));
    const p2 = program(); p2.nodes.splice(4, 0, { ...mv, motion: "circular" });
    assert.equal(plan(weldplan(p2), opts()).result.dense_error.reason, "motion_not_planned");
  });

  test("dwell node becomes a dwell segment; speed_scale below 1 stretches time", () => {
    const p = program();
    p.nodes.splice(3, 0, { id: "dw", op: "dwell", enabled: true, label: "", comment: "", row_hash: "x", duration_s: 0.5 });
    p.speed_scale = 0.5;
    const r = plan(weldplan(p), opts()).result;
    assert.equal(r.speed_scale, 0.5);
    const seg = r.dense.segments.find((s: any) => s.kind === "dwell");
    assert.equal(seg.source_id, "dw"); assert.equal(seg.sample_count, 51);
    assert.ok(r.dense.total_duration_s > full.result.dense.total_duration_s * 1.8);
  });

  // Changed after integration: document 2 part 8 (250000 samples) answered as dense_error, never a crash.
  test("a weld or dwell longer than the dense file can hold gives sample_count_overflow without allocating it", () => {
    const slow = program(); slow.nodes.find((n: any) => n.op === "weld").travel_speed_mm_s = 1e-9;
    const dw = program(); dw.nodes.splice(3, 0, { id: "dw", op: "dwell", enabled: true, label: "", comment: "", row_hash: "x", duration_s: 1e9 });
    for (const p of [slow, dw]) {
      const r = plan(weldplan(p), opts()).result;
      assert.equal(r.dense, undefined);
      assert.equal(r.dense_error.reason, "sample_count_overflow");
      assert.equal(r.dense_error.segment_index, null);
    }
  });

  test("container failures are planning failures (422 type: message)", () => {
    const fails = (b: Buffer): string => { try { plan(b, FULL); return "planned"; } catch (e) { assert.ok(e instanceof PlanFailure); return e.text; } };
    assert.match(fails(Buffer.from("not a zip")), /^BadZipFile: /);
    assert.match(fails(weldplan(program(), { "manifest.json": JSON.stringify({ files: { "program.json": "0".repeat(64) } }) })), /^DigestMismatch: /);
    const wrong = program(); wrong.schema = "robot.v4.program.v1";
    assert.match(fails(weldplan(wrong)), /^ValueError: program schema/);
    const other = program(); other.placement.cell_id = "sim-nine-axis"; other.robot.model_id = "sim-nine-axis";
    assert.match(fails(weldplan(other)), /^FileNotFoundError: no cell meshes/);
    const good = weldplan(); const sha = createHash("sha256").update(JSON.stringify(program())).digest("hex");
    assert.equal(fails(writeZip({ "program.json": JSON.stringify(program()), "manifest.json": JSON.stringify({ files: { "program.json": sha } }) })), "planned");
    void good;
  });

  test("query options: defaults, ranges and types", () => {
    const d = parseOptions(new URLSearchParams(""));
    assert.ok("options" in d);
    if ("options" in d) assert.deepEqual(d.options, { ...FULL, run_weld_trajopt: false, dense: false, program_id: "" });
    const bad = (q: string): any => { const r = parseOptions(new URLSearchParams(q)); assert.ok(!("options" in r), q); return (r as any).body.detail; };
    for (const q of ["k_best=0", "k_best=17", "k_best=2.5", "samples_per_seam=1", "samples_per_seam=513", "verify_margin_mm=-0.1", "verify_margin_mm=50.5",
      "verify_margin_mm=x", "manifest_revision=0", "plan_revision=0", "dense=maybe", `program_id=${"a".repeat(121)}`]) assert.ok(Array.isArray(bad(q)), q);
    assert.match(bad("free_space_backend=rrt"), /free_space_backend/);
    // Changed after integration: the revisions are u64 (document 2 part 2), written exactly.
    const top = parseOptions(new URLSearchParams("manifest_revision=18446744073709551615&plan_revision=9007199254740993"));
    assert.ok("options" in top);
    if ("options" in top) assert.equal(u64Json(JSON.stringify([top.options.manifest_revision, top.options.plan_revision])), "[18446744073709551615,9007199254740993]");
    assert.ok(Array.isArray(bad("manifest_revision=18446744073709551616")));
    for (const q of ["k_best=16", "samples_per_seam=2", "samples_per_seam=512", "verify_margin_mm=0", "verify_margin_mm=50", "free_space_backend=legacy", `program_id=${"a".repeat(120)}`])
      assert.ok("options" in parseOptions(new URLSearchParams(q)), q);
  });
});

// ---------------------------------------------------------------- HTTP service
function call(base: string, method: string, path: string, body?: Buffer, signal?: AbortSignal): Promise<{ status: number; headers: Record<string, any>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(base + path, { method, signal, headers: body ? { "Content-Type": "application/octet-stream", "Content-Length": body.length } : {} }, (res) => {
      const chunks: Buffer[] = []; res.on("data", (c) => chunks.push(c)); res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on("error", reject);
    req.end(body);
  });
}
const json = (b: Buffer): any => JSON.parse(b.toString("utf8"));

describe("HTTP service (in-process planning)", () => {
  const store = mkdtempSync(join(tmpdir(), "blind-planner-"));
  const svc = new BlindPlanner({ storeDir: store, port: 0, isolate: false });
  let base = "";
  before(async () => { base = await svc.listen(); });
  after(async () => { await svc.close(); rmSync(store, { recursive: true, force: true }); });

  test("health and progress", async () => {
    assert.deepEqual(json((await call(base, "GET", "/api/motion/health")).body), { cuda: false, device: null });
    assert.deepEqual(json((await call(base, "GET", "/api/motion/progress")).body), { stage: null });
  });

  test("errors: empty body 400, query 422 items, backend 422, bad container 422", async () => {
    const e = await call(base, "POST", "/api/motion/plan", Buffer.alloc(0));
    assert.equal(e.status, 400); assert.equal(json(e.body).error, "empty body is not a weldplan");
    const q = await call(base, "POST", "/api/motion/plan?k_best=99", weldplan());
    assert.equal(q.status, 422); assert.ok(Array.isArray(json(q.body).detail));
    const b = await call(base, "POST", "/api/motion/plan?free_space_backend=ompl", weldplan());
    assert.equal(b.status, 422); assert.match(json(b.body).detail, /ompl/);
    const z = await call(base, "POST", "/api/motion/plan", Buffer.from("PK nonsense"));
    assert.equal(z.status, 422); assert.match(json(z.body).error, /^BadZipFile: /);
  });

  test("plan with dense stores sha256-<hex>.rdt and serves it; 404 and 422 on fetch", async () => {
    const r = await call(base, "POST", "/api/motion/plan?dense=true&run_weld_trajopt=true&program_id=line_weld_demo", weldplan());
    assert.equal(r.status, 200);
    const d = json(r.body).dense; assert.ok(d);
    assert.ok(existsSync(join(store, `sha256-${d.trajectory_digest.slice(7)}.rdt`)));
    const f = await call(base, "GET", `/api/motion/dense/${d.trajectory_digest}`);
    assert.equal(f.status, 200); assert.equal(f.headers["content-type"], "application/octet-stream"); assert.equal(f.headers["cache-control"], "no-store");
    assert.equal(f.body.length, d.bytes);
    assert.equal(decodeDense(f.body).header.trajectory_digest, d.trajectory_digest);
    assert.equal((await call(base, "GET", `/api/motion/dense/sha256:${"a".repeat(64)}`)).status, 404);
    assert.equal((await call(base, "GET", `/api/motion/dense/sha256:${"A".repeat(64)}`)).status, 422);
    assert.equal((await call(base, "GET", "/api/motion/dense/deadbeef")).status, 422);
  });

  test("200 without trajectory keeps request and result under refused/ (newest 5)", async () => {
    for (let i = 0; i < 6; i++) {
      const r = await call(base, "POST", `/api/motion/plan?dense=true&program_id=p${i}`, weldplan());
      assert.equal(r.status, 200); assert.equal(json(r.body).dense_error.reason, "result_empty");
    }
    const dirs = readdirSync(join(store, "refused"));
    assert.equal(dirs.length, 5);
    for (const d of dirs) assert.deepEqual(readdirSync(join(store, "refused", d)).sort(), ["request.weldplan", "result.json"]);
  });
});

// The author's two tests of the planning process, the queue and cancel were timed on the wall clock and needed
// the planner started under a TypeScript loader (a fresh process per plan); in the project the planner suites
// judge one plan at a time and cancel from outside against this planner (`hil cleanroom check --planner`).
