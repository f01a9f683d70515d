// blind-olp's robot store (server.ts decision 21): GET /robots lists the URDF files of the store directory,
// POST /robots/capture-model answers one of them by model id and description digest.
import fs from "node:fs";
import path from "node:path";
import { sha256Hex } from "./program.js";
import { HttpError, isBase64 } from "./http.js";

export function robotList(storeDir: string | undefined): { robots: Array<Record<string, unknown>>; problems: string[]; files: Map<string, Buffer> } {
  const robots: Array<Record<string, unknown>> = [];
  const problems: string[] = [];
  const files = new Map<string, Buffer>();
  if (!storeDir) return { robots, problems, files };
  let names: string[];
  try { names = fs.readdirSync(storeDir).filter((n) => n.endsWith(".urdf")).sort(); } catch (err) {
    throw new HttpError(500, "robot_store_unreadable", (err as Error).message);
  }
  for (const n of names) {
    let bytes: Buffer;
    try { bytes = fs.readFileSync(path.join(storeDir, n)); } catch (err) { problems.push(`${n}: ${(err as Error).message}`); continue; }
    const text = bytes.toString("utf8");
    if (!/<robot[\s>]/.test(text)) { problems.push(`${n}: not a URDF robot`); continue; }
    const frames = [...text.matchAll(/<link\s+name="([^"]+)"/g)].map((m) => m[1]!);
    const driven = [...text.matchAll(/<joint\s+name="([^"]+)"\s+type="([^"]+)"/g)].filter((m) => m[2] !== "fixed").map((m) => m[1]!).sort();
    const modelId = n.slice(0, -".urdf".length);
    files.set(modelId, bytes);
    robots.push({
      model_id: modelId, robot_description_sha256: `sha256:${sha256Hex(bytes)}`, frames,
      axes: { driven, held: [] }, reset_pose: Object.fromEntries(driven.map((j) => [j, 0])),
    });
  }
  return { robots, problems, files };
}

export function robots(storeDir: string | undefined): unknown {
  const { robots, problems } = robotList(storeDir);
  return { ok: true, robots, problems };
}

export function captureModel(storeDir: string | undefined, b: Record<string, unknown>): unknown {
  const modelId = b["model_id"];
  const sha = b["robot_description_sha256"];
  if (typeof modelId !== "string" || modelId === "") throw new HttpError(400, "invalid_request", "model_id is required");
  if (typeof sha !== "string" || !/^sha256:[0-9a-f]{64}$/.test(sha)) throw new HttpError(400, "invalid_request", "robot_description_sha256 must be sha256:<64 hex>");
  let calibration: Buffer | undefined;
  if (b["machine_planning_calibration_base64"] !== undefined) {
    if (typeof b["machine_planning_calibration_base64"] !== "string") throw new HttpError(400, "invalid_request", "machine_planning_calibration_base64 must be a string");
    // Changed after integration: a value that is not base64 is refused (document 3 part 4: the field is
    // base64, failure 400) instead of being decoded leniently into other bytes.
    if (!isBase64(b["machine_planning_calibration_base64"])) throw new HttpError(400, "invalid_request", "machine_planning_calibration_base64 is not base64");
    calibration = Buffer.from(b["machine_planning_calibration_base64"], "base64");
  }
  const { robots, files } = robotList(storeDir);
  const r = robots.find((x) => x["model_id"] === modelId);
  if (!r) throw new HttpError(400, "invalid_request", `no robot ${modelId} in the store`);
  if (r["robot_description_sha256"] !== sha) throw new HttpError(400, "invalid_request", `robot ${modelId} has description ${String(r["robot_description_sha256"])}, not ${sha}`);
  const identity: Record<string, unknown> = { model_id: modelId, robot_description_sha256: sha };
  if (calibration) identity["machine_planning_calibration_sha256"] = `sha256:${sha256Hex(calibration)}`;
  return { ok: true, model_id: modelId, urdf: files.get(modelId)!.toString("utf8"), identity };
}
