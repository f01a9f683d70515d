// blind-olp's weld planning (server.ts decisions 17 and 18): the .weldplan container, the planner's plan
// call and its refusals mapped to document 3's labels, one plan at a time; and the dense blob fetch that
// Load uses too (decision 12).
import http from "node:http";
import { checkProgram, packWeldplan, sha256Hex } from "./program.js";
import { HttpError, isObj } from "./http.js";

export class WeldPlanning {
  private planning = false;

  constructor(private readonly plannerUrl: string | undefined) {}

    async fetchDense(digest: string, err: (code: string, detail: string) => HttpError): Promise<Buffer> {
      if (!this.plannerUrl) throw err("motion_origin_unavailable", "no planner is configured");
      if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw new HttpError(400, "invalid_request", "trajectory_digest must be sha256:<64 hex>");
      let r: Response;
      try { r = await fetch(`${this.plannerUrl}/api/motion/dense/${digest}`); } catch (e) { throw err("dense_blob_unreachable", (e as Error).message); }
      if (r.status === 404) throw err("dense_blob_not_found", `planner no longer holds ${digest}`);
      if (r.status !== 200) throw err("dense_blob_unreachable", `planner answered ${r.status}`);
      return Buffer.from(await r.arrayBuffer());
    }

    async weldPlan(res: http.ServerResponse, b: Record<string, unknown>, exportOnly: boolean, connected: boolean): Promise<unknown> {
      const bad = (d: string, extra: Record<string, unknown> = {}) => new HttpError(400, "weld_plan_invalid", d, extra);
      if (!isObj(b["program"])) throw bad("program (object) is required");
      if (!isObj(b["tooling"])) throw bad("tooling (object) is required");
      if (typeof b["cell_id"] !== "string" || b["cell_id"] === "") throw bad("cell_id is required");
      const absent = b["workpiece_absent"] === true;
      if (typeof b["step_base64"] !== "string") throw bad("step_base64 is required");
      if (b["step_base64"] === "" && !absent) throw bad("missing STEP: step_base64 is empty and workpiece_absent is not true");
      const fsb = b["free_space_backend"];
      if (fsb !== undefined && !["bspline", "curobo", "legacy"].includes(fsb as string)) throw bad("free_space_backend must be bspline, curobo or legacy");
      const problems = checkProgram(b["program"]);
      if (problems.length) throw bad(`program refused: ${problems.slice(0, 5).join("; ")}`, { problems });
      const program = b["program"];
      const programId = typeof b["program_id"] === "string" ? b["program_id"] : String(program["program_id"]);
      const calibration = !connected && typeof b["machine_planning_calibration_base64"] === "string" ? Buffer.from(b["machine_planning_calibration_base64"], "base64") : undefined;
      const container = packWeldplan({
        program, tooling: b["tooling"], step: Buffer.from(b["step_base64"], "base64"),
        stepName: typeof b["step_filename"] === "string" && /^[A-Za-z0-9._-]{1,100}$/.test(b["step_filename"]) ? b["step_filename"] : "workpiece.step",
        calibration,
      });
      const weldplanSha = sha256Hex(container);
      if (exportOnly) {
        const safe = programId.replace(/[^A-Za-z0-9._-]/g, "_") || "program";
        res.writeHead(200, {
          "content-type": "application/octet-stream",
          "content-disposition": `attachment; filename="${safe}.weldplan"`,
          "x-weldplan-sha256": weldplanSha,
          "content-length": container.length,
        });
        res.end(container);
        return undefined;
      }
      if (!this.plannerUrl) throw new HttpError(503, "motion_origin_unavailable", "no planner is configured");
      if (this.planning) throw new HttpError(429, "busy", "one weld plan at a time");
      this.planning = true;
      const ac = new AbortController();
      let clientGone = false;
      const onClose = () => { if (!res.writableEnded) { clientGone = true; ac.abort(); } };
      res.on("close", onClose);
      const timer = setTimeout(() => ac.abort(), 30 * 60 * 1000);
      try {
        const q = new URLSearchParams({
          run_weld_trajopt: "true", run_connecting_trajopt: "true", verify: "true", dense: "true",
          free_space_backend: typeof fsb === "string" ? fsb : "bspline", program_id: programId,
        });
        if (Number.isSafeInteger(b["manifest_revision"])) q.set("manifest_revision", String(b["manifest_revision"]));
        if (Number.isSafeInteger(b["plan_revision"])) q.set("plan_revision", String(b["plan_revision"]));
        let r: Response;
        try {
          r = await fetch(`${this.plannerUrl}/api/motion/plan?${q.toString()}`, {
            method: "POST", body: new Uint8Array(container), headers: { "content-type": "application/octet-stream" }, signal: ac.signal,
          });
        } catch (e) {
          if (clientGone) throw new HttpError(408, "canceled", "client went away");
          if (ac.signal.aborted) throw new HttpError(504, "timeout", "planner ran out of time");
          throw new HttpError(502, "motion_plan_failed", `planner unreachable: ${(e as Error).message}`);
        }
        const text = await r.text();
        let result: unknown;
        try { result = JSON.parse(text); } catch { throw new HttpError(502, "motion_plan_invalid_response", `planner answered ${r.status} with invalid JSON`); }
        if (r.status !== 200) {
          const msg = isObj(result) ? String(result["error"] ?? JSON.stringify(result["detail"] ?? "")) : text;
          throw new HttpError(502, "motion_plan_failed", `planner ${r.status}: ${msg}`);
        }
        if (!isObj(result)) throw new HttpError(502, "motion_plan_invalid_response", "plan result is not an object");
        const seams = Array.isArray(result["seams"]) ? (result["seams"] as unknown[]) : [];
        const refused = seams.filter((s) => isObj(s) && s["crossed"] === false).map((s) => (s as Record<string, unknown>)["id"]);
        if (refused.length) throw new HttpError(502, "motion_plan_seam_refused", `seams not planned: ${refused.join(", ")}`, { result });
        if (result["connecting_trajectories_error"] !== undefined) throw new HttpError(502, "motion_plan_unjoined", String(JSON.stringify(result["connecting_trajectories_error"])), { result });
        if (isObj(result["dense_error"])) {
          const de = result["dense_error"];
          throw new HttpError(502, "motion_plan_no_trajectory", `${String(de["reason"])}: ${String(de["detail"] ?? "")}`, { dense_error: de, result });
        }
        const dense = result["dense"];
        if (!isObj(dense) || typeof dense["trajectory_digest"] !== "string") throw new HttpError(502, "motion_plan_no_trajectory", "result has no dense block", { dense_error: { reason: "result_empty", detail: "no dense block", segment_index: null }, result });
        const blob = await this.fetchDense(dense["trajectory_digest"], (code, detail) => new HttpError(502, code, detail));
        return {
          ok: true, result, weldplan_sha256: `sha256:${weldplanSha}`,
          program_digest: typeof b["program_digest"] === "string" ? b["program_digest"] : (program["program_digest"] ?? null),
          dense: {
            digest: dense["trajectory_digest"], plan_id: dense["plan_id"] ?? null, samples: dense["total_sample_count"] ?? null,
            segments: dense["segments"] ?? [], robot_cell: dense["robot_cell"] ?? null,
          },
          dense_blob_base64: blob.toString("base64"),
        };
      } finally {
        clearTimeout(timer);
        res.off("close", onClose);
        this.planning = false;
      }
    }
}
