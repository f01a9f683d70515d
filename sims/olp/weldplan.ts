// POST /weld-plan and /weld-plan/export (document 3 part 4): pack a .weldplan container (layout:
// docs/profile.md "Weld planner: the .weldplan container", the same one sims/planner/weldplan.ts reads),
// call the weld planner of document 2 always asking for weld and connecting optimisation, verification
// and a dense trajectory, one plan at a time, for up to 30 minutes, and map the planner's failures to the
// part 7 codes. The container is written with fflate at a fixed time, so the same request packs the same
// bytes (and the same weldplan_sha256).

import { createHash } from 'node:crypto';
import { zipSync } from 'fflate';
import { request } from 'undici';
import { JsonObject, type JsonValue } from '../json.ts';
import { canonicalDigest, without } from '../planner/canonical.ts';
import { canonicalJson } from '../json.ts';
import { MANIFEST_SCHEMA } from '../planner/weldplan.ts';
import { OlpError, plain } from './http.ts';

export const WELD_PLAN_MINUTES = 30;
const FIXED_MTIME = new Date('1980-01-01T00:00:00Z');
const enc = new TextEncoder();
const sha = (b: Uint8Array) => 'sha256:' + createHash('sha256').update(b).digest('hex');

export interface WeldPlanRequest {
  program: JsonObject;
  tooling: JsonObject;
  step?: Uint8Array;
  programId: string;
  programDigest?: string;
  cellId: string;
  freeSpaceBackend?: string;
  manifestRevision?: string;
  planRevision?: string;
  calibration?: Uint8Array;
}

const invalid = (why: string) => new OlpError(400, 'weld_plan_invalid', why);

/** Read a /weld-plan body (already decoded strictly); weld_plan_invalid when it cannot be planned. */
export function readWeldPlanRequest(v: JsonValue): WeldPlanRequest {
  if (!(v instanceof JsonObject)) throw invalid('body is not a JSON object');
  const program = v.get('program');
  if (!(program instanceof JsonObject)) throw invalid('program must be an object');
  const tooling = v.get('tooling');
  if (!(tooling instanceof JsonObject)) throw invalid('tooling must be an object');
  const stepText = v.get('step_base64');
  const absent = v.get('workpiece_absent');
  if (absent !== undefined && typeof absent !== 'boolean') throw invalid('workpiece_absent must be a boolean');
  if (typeof stepText !== 'string') throw invalid('step_base64 is required');
  if (stepText === '' && absent !== true) throw invalid('step_base64 is empty and workpiece_absent is not true: the STEP file is missing');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(stepText) || stepText.length % 4 !== 0) throw invalid('step_base64 is not base64');
  const cellId = v.get('cell_id');
  if (typeof cellId !== 'string' || cellId === '') throw invalid('cell_id is required');
  const s = (k: string): string | undefined => {
    const x = v.get(k);
    if (x === undefined || x === null) return undefined;
    if (typeof x !== 'string') throw invalid(`${k} must be a string`);
    return x;
  };
  const rev = (k: string): string | undefined => {
    const x = v.get(k);
    if (x === undefined || x === null) return undefined;
    const t = plain(x);
    if (!(typeof t === 'number' || typeof t === 'bigint') || !/^[1-9][0-9]*$/.test(String(t))) throw invalid(`${k} must be an integer >= 1`);
    return String(t);
  };
  const backend = s('free_space_backend');
  if (backend !== undefined && !['bspline', 'curobo', 'legacy'].includes(backend)) throw invalid('free_space_backend must be bspline, curobo or legacy');
  const cal = s('machine_planning_calibration_base64');
  const pid = s('program_id') ?? (typeof program.get('program_id') === 'string' ? (program.get('program_id') as string) : '');
  return {
    program,
    tooling,
    ...(stepText !== '' ? { step: Buffer.from(stepText, 'base64') } : {}),
    programId: pid,
    ...(s('program_digest') !== undefined ? { programDigest: s('program_digest') } : {}),
    cellId,
    ...(backend ? { freeSpaceBackend: backend } : {}),
    ...(rev('manifest_revision') ? { manifestRevision: rev('manifest_revision') } : {}),
    ...(rev('plan_revision') ? { planRevision: rev('plan_revision') } : {}),
    ...(cal !== undefined ? { calibration: Buffer.from(cal, 'base64') } : {}),
  };
}

/** The container's bytes. */
export function pack(r: WeldPlanRequest): Uint8Array {
  let programDigest: string;
  let programBytes: Uint8Array;
  let toolingBytes: Uint8Array;
  try {
    programDigest = canonicalDigest(without(r.program, 'program_digest'));
    programBytes = enc.encode(canonicalJson(r.program));
    toolingBytes = enc.encode(canonicalJson(r.tooling));
  } catch (e) {
    throw invalid(`program or tooling has no canonical JSON: ${(e as Error).message}`);
  }
  const files: Array<[string, Uint8Array]> = [['program.json', programBytes], ['tooling.json', toolingBytes]];
  if (r.step) files.push(['workpiece.step', r.step]);
  const placement = r.program.get('placement');
  const manifest = {
    schema: MANIFEST_SCHEMA,
    program_id: r.program.get('program_id') ?? null,
    cell_id: placement instanceof JsonObject ? placement.get('cell_id') ?? null : null,
    program_digest: programDigest,
    entries: files.map(([name, data]) => ({ name, sha256: sha(data), bytes: data.length })),
  };
  const zip: Record<string, [Uint8Array, { mtime: Date }]> = { 'manifest.json': [enc.encode(JSON.stringify(manifest)), { mtime: FIXED_MTIME }] };
  for (const [name, data] of files) zip[name] = [data, { mtime: FIXED_MTIME }];
  return zipSync(zip, { level: 6 });
}

export function weldplanSha256(bytes: Uint8Array): string {
  return sha(bytes);
}

/** The planner's seam and join failures, from dense_error (document 2 part 2). */
const SEAM_REASONS = new Set(['seam_not_planned', 'motion_not_verified']);

/**
 * Plan: the planner call with the options the OLP server always sends, then the dense file. `signal`
 * aborts when the client goes away or the plan runs out of time.
 */
export async function planWeldplan(plannerUrl: string, r: WeldPlanRequest, container: Uint8Array, signal: AbortSignal): Promise<{ result: Record<string, any>; blob: Buffer }> {
  const q = new URLSearchParams({ dense: 'true', run_weld_trajopt: 'true', run_connecting_trajopt: 'true', verify: 'true', program_id: r.programId });
  if (r.freeSpaceBackend) q.set('free_space_backend', r.freeSpaceBackend);
  if (r.manifestRevision) q.set('manifest_revision', r.manifestRevision);
  if (r.planRevision) q.set('plan_revision', r.planRevision);
  let status: number;
  let text: string;
  try {
    const res = await request(`${plannerUrl}/api/motion/plan?${q}`, { method: 'POST', body: container, headers: { 'content-type': 'application/octet-stream' }, signal, headersTimeout: 0, bodyTimeout: 0 });
    status = res.statusCode;
    text = await res.body.text();
  } catch (e) {
    if (signal.aborted) throw e;
    throw new OlpError(502, 'motion_plan_failed', `planner call failed: ${(e as Error).message}`);
  }
  if (status !== 200) throw new OlpError(502, 'motion_plan_failed', `planner answered HTTP ${status}: ${text.slice(0, 500)}`);
  let result: Record<string, any>;
  try {
    result = JSON.parse(text) as Record<string, any>;
  } catch {
    throw new OlpError(502, 'motion_plan_invalid_response', 'planner answered 200 with a body that is not JSON');
  }
  if (!result || typeof result !== 'object' || result.schema !== 'amr-weld-planner-v1.motion-plan-result.v1') {
    throw new OlpError(502, 'motion_plan_invalid_response', 'planner answered 200 without a motion-plan-result.v1 document');
  }
  const de = result.dense_error as { reason?: string; detail?: string; segment_index?: number | null } | undefined;
  if (de) {
    const dense_error = { reason: de.reason ?? '', detail: de.detail ?? '', segment_index: de.segment_index ?? null };
    if (SEAM_REASONS.has(dense_error.reason)) throw new OlpError(502, 'motion_plan_seam_refused', `welds could not be planned: ${dense_error.reason}: ${dense_error.detail}`, { dense_error });
    if (dense_error.reason === 'motion_join_failed' || result.connecting_trajectories_error) throw new OlpError(502, 'motion_plan_unjoined', `welds planned, connecting moves not: ${dense_error.detail}`, { dense_error });
    throw new OlpError(502, 'motion_plan_no_trajectory', `no dense trajectory: ${dense_error.reason}`, { dense_error });
  }
  const d = result.dense as { trajectory_digest?: string } | undefined;
  if (!d || typeof d.trajectory_digest !== 'string') throw new OlpError(502, 'motion_plan_invalid_response', 'planner result has neither dense nor dense_error');
  const blob = await fetchDense(plannerUrl, d.trajectory_digest, signal);
  return { result, blob };
}

/** GET the stored dense file: dense_blob_not_found (404) or dense_blob_unreachable. */
export async function fetchDense(plannerUrl: string, digest: string, signal?: AbortSignal): Promise<Buffer> {
  let status: number;
  let body: Buffer;
  try {
    const res = await request(`${plannerUrl}/api/motion/dense/${encodeURIComponent(digest)}`, { method: 'GET', ...(signal ? { signal } : {}) });
    status = res.statusCode;
    body = Buffer.from(await res.body.arrayBuffer());
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new OlpError(502, 'dense_blob_unreachable', `dense fetch failed: ${(e as Error).message}`);
  }
  if (status === 404) throw new OlpError(409, 'dense_blob_not_found', `the planner no longer holds ${digest}`);
  if (status !== 200) throw new OlpError(502, 'dense_blob_unreachable', `dense fetch answered HTTP ${status}`);
  return body;
}
