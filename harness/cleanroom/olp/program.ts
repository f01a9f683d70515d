// Document 3 part 2: the robot.v4.program.v2 document (structural checks), canonical JSON and digests,
// plus the .weldplan container packing and the dense trajectory header reader (document 2).
import crypto from "node:crypto";
import zlib from "node:zlib";

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export function sha256Hex(b: Buffer | string): string {
  return crypto.createHash("sha256").update(b).digest("hex");
}

/** Canonical JSON: keys sorted at every level, no whitespace, non-finite numbers refused. */
export function canonicalJson(v: unknown): string {
  if (v === null) return "null";
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new Error("non-finite number in canonical JSON");
    return JSON.stringify(v);
  }
  if (typeof v === "string" || typeof v === "boolean") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(",")}}`;
  }
  throw new Error(`value of type ${typeof v} has no canonical JSON`);
}

const SHA_LABEL = /^sha256:[0-9a-f]{64}$/;
const HEX64 = /^[0-9a-f]{64}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
const PROGRAM_STATES = ["draft", "saved_unplanned", "needs_plan", "planning", "planned", "accepted_simulation", "accepted_physical", "execution_ready", "running", "completed", "stopped", "faulted"];
const FORBIDDEN = new Set(["joints", "joint_positions_rad", "target_joints_rad", "q_rad", "qd_rad_s", "target_tcp_m", "tcp_pose_m", "trajectory", "planned_path", "accepted_plan", "preloaded_plan", "waypoints", "rows"]);
const PATH_VOCAB = ["knots", "knots_u", "times_s", "control_points_xyz_m", "segments", "samples", "points", "poses", "rpy_rad", "path"];
const NODE_COMMON = ["id", "op", "enabled", "label", "comment", "row_hash", "extensions"];
const NODE_EXTRA: Record<string, string[]> = {
  weld: ["geometry", "travel_speed_mm_s", "standoff_mm", "weave", "weld_parameters", "weld_preset_id"],
  approach: ["depart_standoff", "arrive_standoff", "overrides"],
  transit: ["depart_standoff", "arrive_standoff", "overrides"],
  retract: ["depart_standoff", "arrive_standoff", "overrides"],
  home: ["depart_standoff", "arrive_standoff", "overrides"],
  move: ["motion", "target", "speed_scale", "speed_mm_s", "capture", "target_space", "via", "acceleration_scale", "constant_tcp_speed"],
  dwell: ["duration_s"],
  io: ["channel", "state"],
};

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function isVec3(v: unknown): boolean {
  return Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === "number" && Number.isFinite(x));
}

function findForbidden(v: unknown, path: string): string | null {
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const r = findForbidden(v[i], `${path}[${i}]`);
      if (r) return r;
    }
  } else if (isObj(v)) {
    for (const k of Object.keys(v)) {
      if (FORBIDDEN.has(k)) return `${path}.${k}`;
      const r = findForbidden(v[k], `${path}.${k}`);
      if (r) return r;
    }
  }
  return null;
}

function hasPathVocab(v: unknown): string | null {
  if (Array.isArray(v)) {
    for (const x of v) { const r = hasPathVocab(x); if (r) return r; }
  } else if (isObj(v)) {
    for (const k of Object.keys(v)) {
      if (PATH_VOCAB.includes(k)) return k;
      const r = hasPathVocab(v[k]);
      if (r) return r;
    }
  }
  return null;
}

/** Structural check of a robot.v4.program.v2 document. Returns a list of problems (empty when acceptable). */
export function checkProgram(p: unknown): string[] {
  const bad: string[] = [];
  if (!isObj(p)) return ["program is not an object"];
  const forb = findForbidden(p, "$");
  if (forb) bad.push(`forbidden key ${forb}`);
  const str = (k: string) => { if (typeof p[k] !== "string" || (p[k] as string).length === 0) bad.push(`${k}: required string`); };
  if (p["schema"] !== "robot.v4.program.v2") bad.push("schema: must be robot.v4.program.v2");
  str("program_id"); str("program_name");
  if (!Number.isInteger(p["program_revision"]) || (p["program_revision"] as number) < 1) bad.push("program_revision: integer >= 1");
  if (!Number.isInteger(p["base_program_revision"]) || (p["base_program_revision"] as number) < 0) bad.push("base_program_revision: integer >= 0");
  if (p["program_digest"] !== undefined && (typeof p["program_digest"] !== "string" || !SHA_LABEL.test(p["program_digest"]))) bad.push("program_digest: sha256:<64 hex>");
  if (!PROGRAM_STATES.includes(p["program_state"] as string)) bad.push("program_state: unknown");
  if (!["simulation", "dry_run", "production"].includes(p["execution_mode"] as string)) bad.push("execution_mode: unknown");
  if (typeof p["created_utc"] !== "string" || !RFC3339.test(p["created_utc"])) bad.push("created_utc: RFC 3339");
  if (!isObj(p["units"])) bad.push("units: required object");
  const prod = p["producer"];
  if (!isObj(prod)) bad.push("producer: required object");
  else {
    if (!["offline-programming-v1", "weld-planner-v1"].includes(prod["component"] as string)) bad.push("producer.component: unknown");
    if (typeof prod["source_revision"] !== "string") bad.push("producer.source_revision: required string");
    const inputs = prod["inputs"];
    if (!Array.isArray(inputs) || inputs.length < 1) bad.push("producer.inputs: at least one");
    else inputs.forEach((inp, i) => {
      if (!isObj(inp) || !["project", "weld_program", "cad", "cell", "tool"].includes(inp["kind"] as string) || typeof inp["ref"] !== "string" || typeof inp["sha256"] !== "string" || !HEX64.test(inp["sha256"])) bad.push(`producer.inputs[${i}]: {kind, ref, sha256 (64 hex)}`);
    });
  }
  const wp = p["workpiece"];
  let frame = "";
  if (!isObj(wp) || typeof wp["frame_id"] !== "string") bad.push("workpiece.frame_id: required");
  else {
    frame = wp["frame_id"];
    if (wp["weld_joints"] !== undefined) {
      if (!Array.isArray(wp["weld_joints"])) bad.push("workpiece.weld_joints: array");
      else {
        const ids = (wp["weld_joints"] as unknown[]).map((j) => (isObj(j) ? j["id"] : undefined));
        if (new Set(ids).size !== ids.length) bad.push("workpiece.weld_joints: ids not unique");
      }
    }
  }
  const robot = p["robot"];
  const pl = p["placement"];
  if (!isObj(robot) || typeof robot["model_id"] !== "string" || typeof robot["robot_description_sha256"] !== "string" || !SHA_LABEL.test(robot["robot_description_sha256"])) bad.push("robot: model_id and robot_description_sha256 (sha256:<64 hex>) required");
  if (!isObj(pl)) bad.push("placement: required object");
  else {
    if (typeof pl["cell_id"] !== "string") bad.push("placement.cell_id: required string");
    else if (isObj(robot) && pl["cell_id"] !== robot["model_id"]) bad.push("placement.cell_id: must equal robot.model_id");
    for (const k of ["anchor_xyz_m", "offset_xyz_m", "rpy_rad"]) if (!isVec3(pl[k])) bad.push(`placement.${k}: 3 numbers`);
  }
  if (p["speed_scale"] !== undefined && !(typeof p["speed_scale"] === "number" && p["speed_scale"] >= 0.01 && p["speed_scale"] <= 1)) bad.push("speed_scale: 0.01..1");
  const d = p["defaults"];
  if (!isObj(d)) bad.push("defaults: required object");
  else {
    if (!(typeof d["clearance_min_mm"] === "number" && d["clearance_min_mm"] >= 0)) bad.push("defaults.clearance_min_mm: >= 0");
    if (!(typeof d["speed_scale"] === "number" && d["speed_scale"] > 0 && d["speed_scale"] <= 1)) bad.push("defaults.speed_scale: (0,1]");
    if (!["free", "hold_last", "torch_down"].includes(d["torch_policy"] as string)) bad.push("defaults.torch_policy: unknown");
    if (!["free", "hold"].includes(d["positioner_policy"] as string)) bad.push("defaults.positioner_policy: unknown");
  }
  if (!Array.isArray(p["planner_owns"]) || p["planner_owns"].length < 1 || !p["planner_owns"].every((x) => typeof x === "string")) bad.push("planner_owns: at least one string");
  const nodes = p["nodes"];
  if (!Array.isArray(nodes) || nodes.length < 1 || nodes.length > 4096) { bad.push("nodes: 1..4096 nodes"); return bad; }
  const ids = new Set<string>();
  const motion: string[] = [];
  nodes.forEach((n, i) => {
    const at = `nodes[${i}]`;
    if (!isObj(n)) { bad.push(`${at}: not an object`); return; }
    const op = n["op"] as string;
    if (!(op in NODE_EXTRA)) { bad.push(`${at}.op: unknown`); return; }
    if (typeof n["id"] !== "string" || ids.has(n["id"])) bad.push(`${at}.id: missing or duplicate`);
    else ids.add(n["id"]);
    if (typeof n["row_hash"] !== "string" || n["row_hash"].length === 0) bad.push(`${at}.row_hash: nonempty string`);
    else {
      const { row_hash: _rh, ...rest } = n;
      try {
        const want = `sha256:${sha256Hex(canonicalJson(rest))}`;
        if (SHA_LABEL.test(n["row_hash"]) && n["row_hash"] !== want) bad.push(`${at}.row_hash: does not match node`);
      } catch (e) { bad.push(`${at}: ${(e as Error).message}`); }
    }
    const allowed = [...NODE_COMMON, ...NODE_EXTRA[op]!];
    for (const k of Object.keys(n)) if (!allowed.includes(k)) bad.push(`${at}: unknown key ${k}`);
    if (op === "dwell" && !(typeof n["duration_s"] === "number" && n["duration_s"] >= 0)) bad.push(`${at}.duration_s: >= 0`);
    if (op === "io") {
      if (typeof n["channel"] !== "string" || n["channel"].length === 0) bad.push(`${at}.channel: nonempty`);
      if (typeof n["state"] !== "boolean") bad.push(`${at}.state: boolean`);
    }
    if (op === "weld") {
      if (!isObj(n["geometry"])) bad.push(`${at}.geometry: required`);
      else {
        const g = n["geometry"];
        if (g["kind"] === "manual_pose_wp" && g["frame_id"] !== frame) bad.push(`${at}.geometry.frame_id: must equal workpiece frame`);
      }
      if (!isObj(n["weld_parameters"]) || Object.keys(n["weld_parameters"]).length !== 0) bad.push(`${at}.weld_parameters: present and empty`);
      if (n["standoff_mm"] === undefined) bad.push(`${at}.standoff_mm: required`);
      if (!(typeof n["travel_speed_mm_s"] === "number" || isObj(n["travel_speed_mm_s"]))) bad.push(`${at}.travel_speed_mm_s: required`);
    }
    if (["approach", "transit", "retract", "home"].includes(op)) {
      if ((op === "approach" || op === "home") && n["depart_standoff"] !== undefined) bad.push(`${at}.depart_standoff: not allowed on ${op}`);
      if ((op === "retract" || op === "home") && n["arrive_standoff"] !== undefined) bad.push(`${at}.arrive_standoff: not allowed on ${op}`);
      const v = hasPathVocab({ a: n["depart_standoff"], b: n["arrive_standoff"], c: n["overrides"] });
      if (v) bad.push(`${at}: path vocabulary key ${v} refused on freespace nodes`);
    }
    if (op === "move") {
      if (!["joint", "linear", "circular"].includes(n["motion"] as string)) bad.push(`${at}.motion: joint, linear or circular`);
      if (!(typeof n["speed_scale"] === "number" && n["speed_scale"] > 0 && n["speed_scale"] <= 1)) bad.push(`${at}.speed_scale: (0,1]`);
      if (!(typeof n["speed_mm_s"] === "number" && n["speed_mm_s"] > 0)) bad.push(`${at}.speed_mm_s: > 0`);
      if (n["target"] === undefined) bad.push(`${at}.target: required`);
      if (n["capture"] === undefined) bad.push(`${at}.capture: required`);
    }
    if (op !== "dwell" && op !== "io") motion.push(op);
  });
  const ord = checkOrder(motion);
  if (ord) bad.push(`nodes: ordering ${ord}`);
  if (typeof p["program_digest"] === "string" && SHA_LABEL.test(p["program_digest"])) {
    const { program_digest: _pd, ...rest } = p;
    try {
      if (`sha256:${sha256Hex(canonicalJson(rest))}` !== p["program_digest"]) bad.push("program_digest: does not match document");
    } catch (e) { bad.push((e as Error).message); }
  }
  return bad;
}

/** Motion order `home? approach weld (transit weld)* retract home?`, move nodes outside or between complete weld blocks. */
function checkOrder(ops: string[]): string | null {
  let i = 0;
  if (ops[i] === "home") i++;
  const endHome = ops.length > i && ops[ops.length - 1] === "home" ? 1 : 0;
  const body = ops.slice(i, ops.length - endHome);
  if (body.includes("home")) return "home only starts or ends the program";
  let k = 0;
  let blocks = 0;
  while (k < body.length) {
    if (body[k] === "move") { k++; continue; }
    if (body[k] !== "approach") return `expected approach at motion node ${k + i}, found ${body[k]}`;
    k++;
    if (body[k] !== "weld") return "a weld must follow an approach";
    k++;
    while (body[k] === "transit") {
      k++;
      if (body[k] !== "weld") return "a transit sits between two welds";
      k++;
    }
    if (body[k] !== "retract") return "a weld block ends with a retract";
    k++;
    blocks++;
  }
  return null;
}

/** The document's program_digest when present, else sha256 of its canonical JSON without program_digest. */
export function programDigest(p: unknown): string {
  if (isObj(p) && typeof p["program_digest"] === "string") return p["program_digest"];
  const rest = isObj(p) ? Object.fromEntries(Object.entries(p).filter(([k]) => k !== "program_digest")) : p;
  return `sha256:${sha256Hex(canonicalJson(rest))}`;
}

// ---- .weldplan container (zip, stored entries) ----

function crc32(b: Buffer): number {
  return zlib.crc32(b) >>> 0;
}

/** A zip archive of stored (uncompressed) entries. */
export function zipStored(files: Array<{ name: string; data: Buffer }>): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const f of files) {
    const name = Buffer.from(f.name, "utf8");
    const crc = crc32(f.data);
    const lh = Buffer.alloc(30);
    lh.writeUInt32LE(0x04034b50, 0); lh.writeUInt16LE(20, 4); lh.writeUInt16LE(0x0800, 6); lh.writeUInt16LE(0, 8);
    lh.writeUInt16LE(0, 10); lh.writeUInt16LE(0x21, 12); lh.writeUInt32LE(crc, 14);
    lh.writeUInt32LE(f.data.length, 18); lh.writeUInt32LE(f.data.length, 22); lh.writeUInt16LE(name.length, 26); lh.writeUInt16LE(0, 28);
    locals.push(lh, name, f.data);
    const ch = Buffer.alloc(46);
    ch.writeUInt32LE(0x02014b50, 0); ch.writeUInt16LE(20, 4); ch.writeUInt16LE(20, 6); ch.writeUInt16LE(0x0800, 8); ch.writeUInt16LE(0, 10);
    ch.writeUInt16LE(0, 12); ch.writeUInt16LE(0x21, 14); ch.writeUInt32LE(crc, 16); ch.writeUInt32LE(f.data.length, 20);
    ch.writeUInt32LE(f.data.length, 24); ch.writeUInt16LE(name.length, 28); ch.writeUInt32LE(offset, 42);
    centrals.push(ch, name);
    offset += 30 + name.length + f.data.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0); end.writeUInt16LE(files.length, 8); end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(cd.length, 12); end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}

/** Pack program, tooling, optional STEP and calibration into a .weldplan container with a weldplan.manifest.v1 manifest. */
export function packWeldplan(parts: { program: unknown; tooling: unknown; step?: Buffer | undefined; stepName?: string | undefined; calibration?: Buffer | undefined }): Buffer {
  const files: Array<{ name: string; data: Buffer }> = [
    { name: "program.json", data: Buffer.from(JSON.stringify(parts.program), "utf8") },
    { name: "tooling.json", data: Buffer.from(JSON.stringify(parts.tooling), "utf8") },
  ];
  if (parts.step && parts.step.length > 0) files.push({ name: parts.stepName ?? "workpiece.step", data: parts.step });
  if (parts.calibration && parts.calibration.length > 0) files.push({ name: "machine_planning_calibration.bin", data: parts.calibration });
  const manifest = {
    schema: "weldplan.manifest.v1",
    program_id: isObj(parts.program) ? parts.program["program_id"] ?? null : null,
    program_digest: programDigest(parts.program),
    cell_id: isObj(parts.program) && isObj(parts.program["placement"]) ? parts.program["placement"]["cell_id"] ?? null : null,
    entries: files.map((f) => ({ name: f.name, sha256: `sha256:${sha256Hex(f.data)}`, bytes: f.data.length })),
  };
  return zipStored([{ name: "manifest.json", data: Buffer.from(JSON.stringify(manifest), "utf8") }, ...files]);
}

// ---- dense trajectory header (document 2) ----

export function readDenseHeader(blob: Buffer): Record<string, unknown> {
  if (blob.length < 4) throw new Error("header_truncated");
  const len = blob.readUInt32BE(0);
  if (4 + len > blob.length) throw new Error("header_truncated");
  let h: unknown;
  try { h = JSON.parse(blob.subarray(4, 4 + len).toString("utf8")); } catch { throw new Error("header_json_invalid"); }
  if (!isObj(h)) throw new Error("header_json_invalid");
  if (h["schema"] !== "robot.v4.dense-joint-trajectory.v1") throw new Error("dense_schema_mismatch");
  return h;
}
