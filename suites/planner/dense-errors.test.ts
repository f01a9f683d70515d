// Every dense_error reason of document 2 part 2 reached from a weldplan: the plan answers 200 without a
// trajectory, dense_error gives reason, detail and segment_index, nothing is stored, and the request and
// result are kept under the refused directory (newest 5). The reason names and the block's fields are
// contract; where document 2 itself says which input gives the reason (dense without both stages, an
// identity that is not a plain identifier, more than 250000 samples, verify off, a seam out of reach) the
// reason is asserted as contract. Which other input reaches which reason, the segment index (the stub
// counts its zero-motion home moves as segments), the frontier causes' wording and `dense` left out rather
// than null are the stub's decisions (docs/profile.md "Weld planner stub: what it plans"), checked through
// inProfile. The resampling triggers use the stub's hook and need the stub.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { covers, describe, expect, inProfile } from '../../harness/fixture.ts';
import { parseExact } from '../../harness/oracle/json.ts';
import type { PlanQuery } from '../../harness/clients/planner.ts';
import { DENSE, type Edit, needsStub, nodeById, obj, plannerTest as test, storeDirOf, TYPE_MESSAGE, usePlanner, weldplan } from './toolkit.ts';

const weld = (p: Record<string, any>) => nodeById(p, 'weld-1');
const line = (y0: number, y1: number) => ({ segments: [{ degree: 1n, control_points_xyz_m: [[0.5, y0, 0.3], [0.5, y1, 0.3]] }] });
const seam = (id: string, y0: number, y1: number) => ({ kind: 'seam', id, reference: 'edge', line: line(y0, y1), orientation: { work_angle_deg: { kind: 'constant', value: 45 }, travel_angle_deg: { kind: 'constant', value: 10 } } });
const hook = (defect: string): Edit => (p) => void (weld(p).extensions = { weld_planner_stub: { resample_defect: defect } });
const node = (id: string, op: string, extra: Record<string, unknown> = {}) => ({ id, op, enabled: true, label: id, comment: '', row_hash: 'x', ...extra });

interface Case {
  reason: string;
  what: string;
  edit?: Edit;
  query?: PlanQuery;
  segment: bigint | null;
  stub?: boolean;
  /** Document 2 says this input gives this reason; otherwise the trigger is the stub's (a profile check). */
  documented?: boolean;
  also?: string[];
}

const CASES: readonly Case[] = [
  { reason: 'result_empty', what: 'dense asked for without the weld trajectory stage', documented: true, query: { run_weld_trajopt: false }, segment: null, also: ['planner:plan.dense_needs_both_stages'] },
  { reason: 'result_empty', what: 'dense asked for without the connecting trajectory stage', documented: true, query: { run_connecting_trajopt: false }, segment: null, also: ['planner:plan.dense_needs_both_stages'] },
  { reason: 'identity_invalid', what: 'program_id empty', documented: true, query: { program_id: '' }, segment: null, also: ['planner:plan.program_id_charset'] },
  { reason: 'identity_invalid', what: 'program_id with a slash and a space', documented: true, query: { program_id: 'line weld/1' }, segment: null, also: ['planner:plan.program_id_charset'] },
  { reason: 'seam_not_planned', what: 'a seam 5 m to the side, beyond the reach of J1', documented: true, edit: (p) => void (weld(p).geometry.points.forEach((pt: any) => (pt.xyz_m[1] += 5))), segment: null, also: ['field:PlanResult.seams[].frontier', 'field:PlanResult.seams[].frontier_causes'] },
  { reason: 'motion_not_verified', what: 'a 1.5 mm standoff under the 2 mm verify margin', edit: (p) => void (weld(p).standoff_mm = { kind: 'constant', value: 1.5 }), segment: null },
  { reason: 'motion_not_verified', what: 'verify=false', documented: true, query: { verify: false }, segment: null },
  { reason: 'motion_join_failed', what: 'the curobo backend on a planner without a GPU', query: { free_space_backend: 'curobo' }, segment: null, also: ['field:PlanResult.connecting_trajectories_error'] },
  {
    reason: 'motion_result_invalid', what: 'two welds on the same seam id', segment: null,
    edit: (p) => {
      weld(p).geometry = seam('s-1', -0.025, 0.025);
      p.nodes.splice(3, 0, node('transit-1', 'transit'), { ...weld(p), id: 'weld-2', geometry: seam('s-1', 0.05, 0.1) });
    },
  },
  {
    reason: 'motion_not_planned', what: 'a taught move to a Cartesian target (the stub has no inverse kinematics)', segment: null,
    edit: (p) => void p.nodes.splice(4, 0, node('move-c', 'move', {
      motion: 'linear', target_space: 'cartesian', speed_scale: 1, speed_mm_s: 50,
      target: { frame_id: 'world', xyz_m: [0.5, 0, 0.5], rpy_rad: [0, 0, 0], joint_names: ['J1'], joint_values_rad: [0.1] },
      capture: { source: 'preview', observed_at: '2026-11-20T09:00:00Z', model_id: 'sim-nine-axis', robot_description_sha256: `sha256:${'0'.repeat(64)}`, pose: { frame_id: 'world', xyz_m: [0.5, 0, 0.5], rpy_rad: [0, 0, 0], joint_names: ['J1'], joint_values_rad: [0.1] } },
    })),
  },
  { reason: 'qd_limit_exceeded', what: 'a 2 m seam at 4000 mm/s (J1 at about 5 rad/s against a 2 rad/s ceiling)', edit: (p) => {
    weld(p).geometry.points[0].xyz_m[1] = -1;
    weld(p).geometry.points[1].xyz_m[1] = 1;
    weld(p).travel_speed_mm_s = 4000;
  }, segment: 2n },
  { reason: 'q_step_exceeded', what: 'the stub hook: one weld sample displaced', edit: hook('q_step_exceeded'), segment: 2n, stub: true },
  { reason: 'boundary_qd_nonzero', what: 'the stub hook: the last weld sample still moving', edit: hook('boundary_qd_nonzero'), segment: 2n, stub: true },
  { reason: 'boundary_q_discontinuity', what: 'the approach disabled: the weld starts away from where the home move ended', edit: (p) => void (p.nodes[1].enabled = false), segment: 1n },
  { reason: 'time_grid_invalid', what: 'a dwell of 0.015 s (off the 0.01 s grid)', edit: (p) => void p.nodes.splice(3, 0, node('dwell-1', 'dwell', { duration_s: 0.015 })), segment: 3n },
  { reason: 'sample_count_overflow', what: 'a dwell of 2500 s (250001 samples by itself)', documented: true, edit: (p) => void p.nodes.splice(3, 0, node('dwell-1', 'dwell', { duration_s: 2500 })), segment: null, also: ['limit:dense_samples'] },
  // Valid input whose samples would not fit in memory: the limit is answered, not an out-of-memory crash.
  { reason: 'sample_count_overflow', what: 'a weld at travel_speed_mm_s 1e-9 (about 5e12 samples)', documented: true, edit: (p) => void (weld(p).travel_speed_mm_s = 1e-9), segment: null, also: ['limit:dense_samples'] },
  { reason: 'sample_count_overflow', what: 'a dwell of 1e9 s (1e11 samples)', documented: true, edit: (p) => void p.nodes.splice(3, 0, node('dwell-1', 'dwell', { duration_s: 1e9 })), segment: null, also: ['limit:dense_samples'] },
];

const stored = (dir: string) => readdirSync(dir).filter((n) => n.endsWith('.rdt') || n.startsWith('.tmp')).sort();
let lastRefused: { reason: string; bytes: Uint8Array } | undefined;

describe('dense_error reasons (200 with no trajectory)', () => {
  for (const c of CASES) {
    test(`${c.reason}: ${c.what}`, covers(`dense_error:${c.reason}`, 'profile:planner.stub_planning', 'profile:planner.absent_blocks', 'planner:result.200_without_trajectory', 'field:PlanResult.dense_error', 'field:PlanResult.dense_error.reason', 'field:PlanResult.dense_error.detail', 'field:PlanResult.dense_error.segment_index', ...(c.also ?? [])), async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      if (c.stub) needsStub({ skip }, p, 'the resampling fault hook');
      const store = storeDirOf(p);
      const before = store ? stored(store) : [];
      const bytes = weldplan(c.edit);
      const r = await p.client.plan(bytes, { ...DENSE, ...c.query });
      if (!c.documented && r.status === 422 && TYPE_MESSAGE.test(String(obj(r.json)?.error ?? ''))) {
        // Document 2 does not say this input reaches a plan: a planner that plans no seam geometry of this kind,
        // or reads document 3's ordering over enabled nodes only (a disabled approach leaves a weld without
        // one), refuses the program as part 7's "<type>: <message>"; that the stub plans it is its decision.
        await inProfile('profile:planner.stub_planning', () => expect(r.status, `the stub plans this program: ${r.text.slice(0, 300)}`).toBe(200));
        return;
      }
      expect(r.status, r.text.slice(0, 300)).toBe(200);
      const res = obj(r.json);
      if (!c.documented && res.dense_error === undefined) {
        // Document 2 does not say this input fails: the stub's trigger (its decision) planned here.
        await inProfile('profile:planner.stub_planning', () => expect(res.dense_error, `the stub answers dense_error ${c.reason}`).toBeDefined());
        expect(res.dense, 'no dense_error: a dense block').toBeDefined();
        return;
      }
      await inProfile('profile:planner.absent_blocks', () => expect(res.dense, 'dense left out, not null').toBeUndefined());
      expect(res.dense ?? null).toBeNull();
      expect(typeof res.dense_error.detail).toBe('string');
      const si = res.dense_error.segment_index;
      expect(si === null || (typeof si === 'bigint' && si >= 0n), `segment_index ${String(si)}: null or a segment index`).toBe(true);
      if (c.documented) expect(res.dense_error.reason).toBe(c.reason);
      else expect(DENSE_ERROR_REASONS, `${res.dense_error.reason} is a documented reason`).toContain(res.dense_error.reason);
      await inProfile('profile:planner.stub_planning', () => {
        expect(res.dense_error.reason).toBe(c.reason);
        expect(res.dense_error.segment_index).toBe(c.segment);
      });
      if (c.reason === 'seam_not_planned') {
        expect(res.seams[0].crossed).toBe(false);
        expect(res.seams[0].frontier).toBeDefined();
        expect(Array.isArray(res.seams[0].frontier_causes)).toBe(true);
        await inProfile('profile:planner.stub_planning', () => expect(res.seams[0].frontier_causes).toEqual(['joint_limit:J1']));
      }
      if (c.reason === 'motion_join_failed' && res.dense_error.reason === c.reason) expect(isObject(res.connecting_trajectories_error)).toBe(true);
      if (store) expect(stored(store)).toEqual(before); // nothing stored, no temporary file left
      lastRefused = { reason: c.reason, bytes };
    });
  }

  test(
    'the stub hook writing schema version 2: the planner\'s own check (a decoder other than the control service) names it schema_mismatch',
    covers('format_reason:schema_mismatch', 'profile:planner.stub_planning', 'field:PlanResult.dense_error.reason'),
    async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      needsStub({ skip }, p, 'the header fault hook');
      const before = stored(p.storeDir!);
      const bytes = weldplan((q) => void (q.extensions = { ...(q.extensions ?? {}), weld_planner_stub: { header_defect: 'schema' } }));
      const r = await p.client.plan(bytes, DENSE);
      expect(r.status, r.text.slice(0, 300)).toBe(200);
      const res = obj(r.json);
      expect(res.dense ?? null).toBeNull();
      expect({ reason: res.dense_error.reason, segment: res.dense_error.segment_index }).toEqual({ reason: 'schema_mismatch', segment: null });
      expect(stored(p.storeDir!)).toEqual(before);
      lastRefused = { reason: 'schema_mismatch', bytes };
    },
  );

  test(
    'exactly 250000 samples is a dense trajectory; one more is sample_count_overflow (a dwell sized from the plan without it)',
    covers('limit:dense_samples', 'format_reason:sample_count_overflow', 'dense_error:sample_count_overflow'),
    async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      const base = obj((await p.client.plan(weldplan(), DENSE)).json);
      expect(base.dense_error).toBeUndefined();
      const counted = (res: Record<string, any>) => (res.dense.segments as Array<{ sample_count: bigint }>).reduce((a, x) => a + Number(x.sample_count), 0);
      const without = counted(base);
      // A dwell of d s on the 0.01 s grid is d / 0.01 + 1 samples (document 2: both ends are samples).
      const dwellOf = (samples: number) => weldplan((q) => void q.nodes.splice(3, 0, node('dwell-1', 'dwell', { duration_s: Number(((samples - 1) / 100).toFixed(2)) })));
      const at = obj((await p.client.plan(dwellOf(250_000 - without), DENSE)).json);
      expect(at.dense_error).toBeUndefined();
      expect(counted(at)).toBe(250_000);
      const overBytes = dwellOf(250_001 - without);
      const over = obj((await p.client.plan(overBytes, DENSE)).json);
      expect(over.dense ?? null).toBeNull();
      expect(over.dense_error.reason).toBe('sample_count_overflow');
      lastRefused = { reason: 'sample_count_overflow', bytes: overBytes };
    },
  );

  test('a program_id of letters, digits, dot, underscore, colon and hyphen is a valid identity', covers('planner:plan.program_id_charset'), async ({ planner, skip }) => {
    const p = usePlanner({ skip }, planner);
    const r = await p.client.plan(weldplan(), { ...DENSE, program_id: 'Cell_7.line-weld:A9' });
    expect(obj(r.json).dense_error).toBeUndefined();
    expect(obj(r.json).dense.plan_id).toMatch(/^Cell_7\.line-weld:A9:[0-9a-f]{12}$/);
  });

  test('the refused directory keeps the newest 5 refused plans, each with its request and result', covers('limit:planner_refused_results_kept', 'planner:result.200_without_trajectory'), async ({ planner, skip }) => {
    const p = usePlanner({ skip }, planner);
    needsStub({ skip }, p, 'reading the refused directory');
    expect(lastRefused, 'the dense_error cases ran first in this file').toBeDefined();
    const dir = join(p.storeDir!, 'refused');
    const kept = readdirSync(dir).filter((n) => !n.startsWith('.')).sort();
    expect(kept).toHaveLength(5);
    for (const k of kept) expect(readdirSync(join(dir, k)).sort()).toEqual(['request.json', 'request.weldplan', 'result.json']);
    const newest = join(dir, kept[kept.length - 1]!);
    expect(Buffer.from(readFileSync(join(newest, 'request.weldplan'))).equals(Buffer.from(lastRefused!.bytes))).toBe(true);
    expect(obj(obj(parseExact(readFileSync(join(newest, 'result.json')))).dense_error).reason).toBe(lastRefused!.reason);
  });
});

/** Document 2 part 2's dense_error reasons, and the file-format reasons its last row admits (part 7). */
const DENSE_ERROR_REASONS = [
  'result_empty', 'identity_invalid', 'seam_not_planned', 'motion_not_verified', 'motion_join_failed', 'motion_result_invalid', 'motion_not_planned', 'qd_limit_exceeded',
  'header_truncated', 'header_json_invalid', 'schema_mismatch', 'axis_count_mismatch', 'sample_encoding_mismatch', 'limits_invalid', 'time_grid_invalid', 'segments_empty',
  'segment_index_out_of_order', 'kind_invalid', 'segment_too_short', 'block_layout_invalid', 'blob_length_mismatch', 'block_sha256_mismatch', 'reserved_flags_set',
  'total_sample_count_mismatch', 'sample_count_overflow', 'nonfinite_sample', 'torch_outside_weld', 'q_step_exceeded', 'boundary_qd_nonzero', 'boundary_q_discontinuity',
  'duration_mismatch', 'trajectory_digest_mismatch',
];
const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);
