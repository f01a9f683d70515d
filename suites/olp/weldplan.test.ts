// POST /weld-plan and /weld-plan/export of the OLP server (document 3 parts 4, 7, 8): the container is
// packed, the planner of document 2 is always asked for weld and connecting optimisation, verification and
// a dense trajectory, one plan at a time, within the plan bound; the planner's answer comes back unchanged
// with the dense file, and each planner failure has its code. No cell is needed. The planner failures
// that the stub cannot produce (an invalid 200, a vanished or unreachable dense file) come from a small
// planner of this file's own on loopback.

import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { unzipSync } from 'fflate';
import { covers, describe, expect, inProfile, profile } from '../../harness/fixture.ts';
import { decodeDense } from '../../harness/oracle/dense.ts';
import { stringifyExact } from '../../harness/oracle/json.ts';
import { PlannerClient } from '../../harness/clients/planner.ts';
import { sealProgram } from '../../harness/clients/weldplan.ts';
import { baseProgram, nodeById } from '../planner/toolkit.ts';
import { HarnessError } from '../../harness/errors.ts';
import { BASE, discoverCells, expectAuthoringError, olpTest as test, ownPlannerAddress, useOlp, type Olp, type OlpReply } from './toolkit.ts';

const sha = (b: Uint8Array) => 'sha256:' + createHash('sha256').update(b).digest('hex');
const TOOLING = { tool_id: 'torch-olp', tcp_xyz_m: [0, 0, 0.4] };

/** A /weld-plan body for the fixture program, edited then sealed. */
function body(edit?: (p: Record<string, any>) => void, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const p = baseProgram() as Record<string, any>;
  edit?.(p);
  const program = sealProgram(p);
  return { program, tooling: TOOLING, step_base64: '', workpiece_absent: true, cell_id: 'sim-nine-axis', program_id: 'line_weld_demo', program_digest: program.program_digest, ...extra };
}

/** A stand-in planner answering /api/motion/plan and /api/motion/dense/* as told. */
async function fakePlanner(plan: (res: import('node:http').ServerResponse) => void, dense: (res: import('node:http').ServerResponse) => void, at: { host: string; port: number }): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => (req.url?.startsWith('/api/motion/dense/') ? dense(res) : plan(res)));
  });
  await new Promise<void>((r, reject) => {
    server.once('error', (e) => reject(new HarnessError('HIL_ERR_TARGET_OPTION', `the test's own planner cannot listen on ${at.host}:${at.port}: ${e.message}`)));
    server.listen(at.port, at.host, () => r());
  });
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))) };
}

/** The fixture body without one field. */
function without(key: string): string {
  const b = body();
  delete b[key];
  return stringifyExact(b);
}

/**
 * The planner behind the server is this project's stub, whose hooks (docs/profile.md "Weld planner stub: what
 * it plans", test hooks) slow a plan down or make it fail a given way: the one the harness started beside a
 * server it configured, or on someone else's server when the facts file says so (planner_stub).
 */
function stubPlanner(o: Olp, skip: (c: boolean, n?: string) => void, what: string): string {
  const url = o.endpoint.configured || o.endpoint.facts?.planner_stub ? o.endpoint.plannerUrl : undefined;
  skip(url === undefined, `${what} needs the weld planner stub's hooks behind the server (the OLP facts file's planner_stub and planner_url)`);
  return url!;
}

/** A refusal of /weld-plan in part 7's authoring shape whose code is one of `codes`; the exact code is checked by the caller. */
function refusedAs(r: OlpReply, status: number, codes: readonly string[]): void {
  expect(r.status, r.text.slice(0, 300)).toBe(status);
  expect([r.json?.ok, typeof r.json?.error], r.text.slice(0, 300)).toEqual([false, 'string']);
  expect(codes, r.text.slice(0, 300)).toContain(r.json?.code);
}

const PLAN_FAILURES = ['motion_plan_seam_refused', 'motion_plan_unjoined', 'motion_plan_no_trajectory', 'motion_plan_failed', 'motion_plan_invalid_response', 'dense_blob_unreachable'] as const;

const VALID_RESULT = { schema: 'amr-weld-planner-v1.motion-plan-result.v1', dense: { trajectory_digest: 'sha256:' + 'ab'.repeat(32), plan_id: 'p:1', total_sample_count: 2, segments: [], robot_cell: {} } };

describe('weld planning', () => {
  test(
    'a plan returns the planner document unchanged, the container digest, the echoed program digest and the dense file',
    covers(
      'olp:route.weld_plan', 'olp:weld_plan.always_dense',
      ...['program', 'tooling', 'step_base64', 'step_filename', 'workpiece_absent', 'cell_id', 'free_space_backend', 'program_id', 'program_digest', 'manifest_revision', 'plan_revision', 'fixtures'].map((f) => `field:OlpWeldPlanRequest.${f}`),
      ...['result', 'weldplan_sha256', 'program_digest', 'dense', 'dense.digest', 'dense.plan_id', 'dense.samples', 'dense.segments', 'dense.robot_cell', 'dense_blob_base64'].map((f) => `field:OlpWeldPlanResponse.${f}`),
    ),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('stub', () => ({})));
      const step = Buffer.from('ISO-10303-21;\nHEADER;\nENDSEC;\nDATA;\nENDSEC;\nEND-ISO-10303-21;\n');
      const req = body(undefined, { step_base64: step.toString('base64'), step_filename: 'part.step', workpiece_absent: false, free_space_backend: 'legacy', manifest_revision: 1, plan_revision: 3, fixtures: [{ id: 'clamp-1' }] });
      const r = await o.client.post('/weld-plan', req);
      // Neither document gives the .weldplan layout ("pack a weldplan"): a server that packs the STEP file under
      // another name than the stub planner reads is refused by that planner, a profile difference, not a failure.
      let planned = false;
      await inProfile('profile:planner.container', () => {
        expect(r.status, r.text.slice(0, 400)).toBe(200);
        planned = true;
      });
      if (!planned) return;
      const x = r.json;
      const res = x.result;
      expect(res.schema).toBe('amr-weld-planner-v1.motion-plan-result.v1');
      // Always weld and connecting optimisation, verification and dense output, whatever the body says.
      expect(res.options).toMatchObject({ run_weld_trajopt: true, run_connecting_trajopt: true, verify: true, dense: true, free_space_backend: 'legacy' });
      expect(x.program_digest).toBe(req.program_digest);
      // The same body exported gives the container that was planned.
      const e = await o.client.post('/weld-plan/export', req);
      expect(String(x.weldplan_sha256).replace(/^sha256:/, '')).toBe(sha(e.body).slice(7));
      await inProfile('profile:olp.service_fields', () => expect(x.weldplan_sha256).toBe(sha(e.body)));
      // "Unchanged": the planner's own answer for the same container and options, timings aside (where the
      // suite can reach that planner).
      if (o.endpoint.plannerUrl) {
      const direct = await new PlannerClient(o.endpoint.plannerUrl).plan(e.body, { dense: true, run_weld_trajopt: true, run_connecting_trajopt: true, verify: true, program_id: 'line_weld_demo', free_space_backend: 'legacy', manifest_revision: 1, plan_revision: 3 } as never);
      const strip = (v: any) => ({ ...v, timings_ms: undefined });
      expect(strip(res)).toEqual(strip(direct.json));
      }
      expect(res.request.step_sha256 ?? sha(step)).toBe(sha(step));
      const d = res.dense;
      expect(x.dense).toEqual({ digest: d.trajectory_digest, plan_id: d.plan_id, samples: d.total_sample_count, segments: d.segments, robot_cell: d.robot_cell });
      const blob = Buffer.from(x.dense_blob_base64, 'base64');
      const dec = decodeDense(blob);
      expect(dec.trajectoryDigest).toBe(d.trajectory_digest);
      expect([dec.planId, dec.programId, dec.planRevision]).toEqual([d.plan_id, 'line_weld_demo', 3n]);
    },
  );

  test('/weld-plan/export returns the container as <program_id>.weldplan with X-Weldplan-SHA256', covers('olp:route.weld_plan_export', 'profile:olp.service_fields'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('stub', () => ({})));
    const req = body(undefined, { program_id: 'line_weld_demo' });
    const r = await o.client.post('/weld-plan/export', req, { 'accept-encoding': 'identity' });
    expect(r.status, r.text.slice(0, 300)).toBe(200);
    expect(String(r.headers['content-disposition'])).toMatch(/^attachment;\s*filename="?line_weld_demo\.weldplan"?$/);
    // The header carries the container's SHA-256; its spelling (sha256: and hex) is ours.
    expect(String(r.headers['x-weldplan-sha256'] ?? '').replace(/^sha256:/, '').toLowerCase()).toBe(sha(r.body).slice(7));
    await inProfile('profile:olp.service_fields', () => expect(r.headers['x-weldplan-sha256']).toBe(sha(r.body)));
    const entries = unzipSync(r.body);
    const program = JSON.parse(Buffer.from(entries['program.json']!).toString('utf8'));
    expect(program.program_digest).toBe(req.program_digest);
  });

  test.for([
    ['a body that is not JSON', '{"program": '],
    ['trailing data', stringifyExact(body()) + ' []'],
    ['no program', without('program')],
    ['no tooling', without('tooling')],
    ['no step_base64', without('step_base64')],
    ['an empty STEP without workpiece_absent', stringifyExact({ ...body(), workpiece_absent: false })],
    ['no cell_id', without('cell_id')],
  ] as const)('%s is refused 400 weld_plan_invalid; the whole body is not', covers('olp:error.weld_plan_invalid'), async ([, text], { olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('stub', () => ({})));
    expectAuthoringError(await o.client.post('/weld-plan', text), 400, 'weld_plan_invalid');
    // The valid twin: the fixture body with nothing missing gets past the request check.
    const twin = await o.client.post('/weld-plan', body());
    expect(twin.json?.code, twin.text.slice(0, 200)).not.toBe('weld_plan_invalid');
    expect(twin.status, twin.text.slice(0, 200)).not.toBe(400);
  });

  test.for([
    // The last column: the segment_index the stub planner's dense_error gives (none for a seam it did not verify or a join it could not plan).
    ['a weld below the verify margin', 'motion_plan_seam_refused', (p: Record<string, any>) => (nodeById(p, 'weld-1').standoff_mm = { kind: 'constant', value: 1 }), {}, 'motion_not_verified', null],
    ['connecting moves that cannot be planned', 'motion_plan_unjoined', undefined, { free_space_backend: 'curobo' }, 'motion_join_failed', null],
    ['a resampled file that breaks a format rule', 'motion_plan_no_trajectory', (p: Record<string, any>) => (nodeById(p, 'weld-1').extensions = { weld_planner_stub: { resample_defect: 'q_step_exceeded' } }), {}, 'q_step_exceeded', 2],
  ] as const)('%s: 502 %s with the planner\'s dense_error', covers('olp:error.motion_plan_seam_refused', 'olp:error.motion_plan_unjoined', 'olp:error.motion_plan_no_trajectory', 'profile:olp.weld_plan_mapping'), async ([, code, edit, extra, reason, segment], { olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('stub', () => ({})));
    stubPlanner(o, skip, 'a planner failure of a given kind');
    const r = await o.client.post('/weld-plan', body(edit, extra));
    // Part 7: a planner failure is 502 in the authoring shape; which code a planner reason maps to is ours.
    refusedAs(r, 502, PLAN_FAILURES);
    await inProfile('profile:olp.weld_plan_mapping', () => {
      expectAuthoringError(r, 502, code);
      expect(r.json?.dense_error?.reason).toBe(reason);
    });
    if (r.json?.code === 'motion_plan_no_trajectory') {
      // "dense_error gives reason, detail, segment_index" (part 7).
      expect(r.json?.dense_error?.reason, r.text.slice(0, 300)).toBe(reason);
      expect(typeof r.json?.dense_error?.detail).toBe('string');
      // The planner's own segment_index (2: the weld segment of the resampled file; none where the planner names none).
      const at = r.json?.dense_error?.segment_index;
      expect(at === null || at === undefined ? null : Number(at)).toBe(segment);
    }
  });

  test('a planner refusal (422) is 502 motion_plan_failed', covers('olp:error.motion_plan_failed', 'profile:olp.weld_plan_mapping'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('stub', () => ({})));
    // A forbidden key in the program: any planner of document 2 refuses it (part 7, 422); the OLP server
    // answers a planner failure 502 (part 7), and the twin without the key is planned.
    const r = await o.client.post('/weld-plan', body((p) => (p.extensions = { q_rad: [0] })));
    skip(!o.endpoint.configured && r.status === 503, `the server has no planner origin (${r.text.slice(0, 120)})`);
    // Document 3 does not say whether the OLP server checks the program rules itself before packing: a server
    // that does refuses the key 400 weld_plan_invalid without calling the planner (a profile difference).
    if (r.status === 400) expectAuthoringError(r, 400, 'weld_plan_invalid');
    else refusedAs(r, 502, PLAN_FAILURES);
    await inProfile('profile:olp.weld_plan_mapping', () => expectAuthoringError(r, 502, 'motion_plan_failed'));
    expect((await o.client.post('/weld-plan', body())).status).toBe(200);
  });

  test(
    'a planner that answers 200 without a plan result, or whose dense file is gone or unreachable',
    covers('olp:error.motion_plan_invalid_response', 'olp:error.dense_blob_not_found', 'olp:error.dense_blob_unreachable'),
    async ({ olps, skip }) => {
      useOlp({ skip }, await olps.open('stub', () => ({})));
      const at = ownPlannerAddress(skip);
      const cases: Array<[string, (res: import('node:http').ServerResponse) => void, (res: import('node:http').ServerResponse) => void, number, string]> = [
        ['not-json', (res) => res.end('<html>planner</html>'), (res) => res.end(), 502, 'motion_plan_invalid_response'],
        ['no-schema', (res) => res.end(JSON.stringify({ hello: 'world' })), (res) => res.end(), 502, 'motion_plan_invalid_response'],
        ['gone', (res) => res.end(JSON.stringify(VALID_RESULT)), (res) => ((res.statusCode = 404), res.end()), 409, 'dense_blob_not_found'],
        ['unreachable', (res) => res.end(JSON.stringify(VALID_RESULT)), (res) => res.destroy(), 502, 'dense_blob_unreachable'],
      ];
      // One planner of the test's own, told before each case how to answer; one OLP server in front of it.
      let mode = cases[0]!;
      const fake = await fakePlanner((res) => mode[1](res), (res) => mode[2](res), at);
      try {
        const o = useOlp({ skip }, await olps.open('fake', () => ({ planner: { url: fake.url } })));
        for (const c of cases) {
          mode = c;
          const [name, , , status, code] = c;
          const r = await o.client.post('/weld-plan', body());
          expect(r.status, `${name}: ${r.text}`).toBe(status);
          expect(r.json?.code, name).toBe(code);
        }
      } finally {
        await olps.drop('fake');
        await fake.close();
      }
    },
  );

  test('one weld plan at a time: a second plan while one runs is refused 429 busy', covers('olp:error.busy', 'limit:olp_concurrent_weld_plans'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('stub', () => ({})));
    stubPlanner(o, skip, 'a plan that lasts');
    const slow = body((p) => (p.extensions = { ...(p.extensions ?? {}), weld_planner_stub: { stage_delay_ms: 150 } }));
    const first = o.client.post('/weld-plan', slow);
    await new Promise((r) => setTimeout(r, 150));
    const second = await o.client.post('/weld-plan', body());
    // One at a time (parts 4, 8): refused in the authoring shape; its status and code (part 7's busy row) are ours.
    expect(second.status, second.text.slice(0, 200)).toBeGreaterThanOrEqual(400);
    expect([second.json?.ok, typeof second.json?.code], second.text.slice(0, 200)).toEqual([false, 'string']);
    await inProfile('profile:olp.weld_plan_mapping', () => expectAuthoringError(second, 429, 'busy'));
    expect((await first).status).toBe(200);
    // Once it is done the next plan is admitted.
    expect((await o.client.post('/weld-plan', body())).status).toBe(200);
  });

  test('a client that goes away during a plan: 408 canceled, the planner stops, the next plan is admitted', covers('olp:error.canceled'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('stub', () => ({})));
    const plannerUrl = stubPlanner(o, skip, 'a plan that lasts');
    const slow = Buffer.from(stringifyExact(body((p) => (p.extensions = { weld_planner_stub: { stage_delay_ms: 2_000 } }))));
    const u = new URL(o.endpoint.url);
    const reply = await new Promise<string>((resolve, reject) => {
      const s = connect(Number(u.port), u.hostname, () => {
        s.write(`POST ${BASE}/weld-plan HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\nContent-Length: ${slow.length}\r\n\r\n`);
        s.write(slow);
        // Leave after the plan has started: half-close, then read what the server still says.
        setTimeout(() => s.end(), 400);
      });
      let text = '';
      s.setEncoding('utf8').on('data', (d: string) => (text += d));
      s.on('close', () => resolve(text));
      s.on('error', reject);
    });
    // Part 7 names 408 canceled for a client that went away; whether a half-closed client is still answered
    // (rather than the plan dropped silently) is ours. What is contract: the plan stops, the next is admitted.
    await inProfile('profile:olp.weld_plan_mapping', () => {
      expect(reply.split('\r\n')[0], reply.replace(/\r\n/g, ' ')).toBe('HTTP/1.1 408 Request Timeout');
      expect(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4))).toMatchObject({ ok: false, code: 'canceled' });
    });
    // The planner's plan stops (its progress goes idle long before the 12 s the slow plan needs).
    const planner = new PlannerClient(plannerUrl);
    for (let i = 0; i < 100; i++) {
      const p = await planner.progress();
      if ((p.json as any)?.stage === null) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(((await planner.progress()).json as any)?.stage).toBeNull();
    expect((await o.client.post('/weld-plan', body())).status).toBe(200);
  });

  test('a plan that outlives the bound is 504 timeout; the bound is 30 minutes by default', covers('olp:error.timeout', 'limit:olp_weld_plan_minutes'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('stub', () => ({})));
    // Thirty minutes cannot be waited out in a conformance run: the bound is judged through a shorter one
    // the server was configured with (--weld-plan-timeout-ms on the reference server; the facts file's
    // weld_plan_timeout_ms on someone else's), with a plan the stub planner makes last past it.
    const bound = o.endpoint.configured ? 3_000 : o.endpoint.facts?.weld_plan_timeout_ms;
    skip(bound === undefined, 'the server offers no shorter plan bound to judge the 30-minute one through (the OLP facts file\'s weld_plan_timeout_ms)');
    stubPlanner(o, skip, 'a plan that outlives the bound');
    // The default bound as the server reports it: on someone else's deployment its bare server's, which was
    // left at the documented defaults (the facts file's bare_olp_url), where there is one.
    const dflt = o.endpoint.configured ? o : ((await olps.open('bare', () => ({ planner: 'none' }))) ?? o);
    if (dflt.endpoint.configured || dflt.endpoint.bare) await inProfile('profile:olp.weld_plan_mapping', async () => expect((await dflt.client.get('/capabilities')).json?.limits?.weld_plan_timeout_s).toBe(1800n));
    const short = o.endpoint.configured ? useOlp({ skip }, await olps.open('short', () => ({ weldPlanTimeoutMs: bound! }))) : o;
    // Stages of a third of the bound: six of them outlive it; a plain plan (well under a second) does not.
    const stage = Math.ceil(bound! / 3);
    const r = await short.client.post('/weld-plan', body((p) => (p.extensions = { weld_planner_stub: { stage_delay_ms: stage } })));
    expectAuthoringError(r, 504, 'timeout');
    // Well inside the bound a plan of the same server completes.
    expect((await short.client.post('/weld-plan', body())).status).toBe(200);
  });

  test(
    'machine_planning_calibration_base64 is read when no cell is connected',
    covers('olp:weld_plan.calibration_when_disconnected', 'field:OlpWeldPlanRequest.machine_planning_calibration_base64', 'profile:olp.weld_plan_mapping'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('stub', () => ({})));
      // No cell connected: on someone else's server with a catalogue, the selection cleared (part 4 /dense-execution/target).
      if (!o.endpoint.configured && (await discoverCells(o, undefined, undefined)).catalogue) expect((await o.client.post('/dense-execution/target', { cell: '' })).status).toBe(200);
      const cal = Buffer.from('offline calibration');
      const r = await o.client.post('/weld-plan', body(undefined, { machine_planning_calibration_base64: cal.toString('base64') }));
      // Where the calibration goes is not shown (no container layout in either document): a server that packs it
      // as an entry the stub planner does not read is refused by that planner, a profile difference.
      let planned = false;
      await inProfile('profile:planner.container', () => {
        expect(r.status, r.text.slice(0, 300)).toBe(200);
        planned = true;
      });
      if (!planned) return;
      // How the reply says which calibration was used is ours (docs/profile.md "OLP server: weld planning").
      await inProfile('profile:olp.weld_plan_mapping', () => expect(r.json?.planning_calibration).toEqual({ sha256: sha(cal), source: '' }));
    },
  );

  test('the planner mapping and the reply\'s planning_calibration are as docs/profile.md says', profile('profile:olp.weld_plan_mapping'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('stub', () => ({})));
    if (!o.endpoint.configured && (await discoverCells(o, undefined, undefined)).catalogue) await o.client.post('/dense-execution/target', { cell: '' });
    const r = await o.client.post('/weld-plan', body());
    expect(r.json?.planning_calibration).toEqual({ sha256: '', source: '' });
    expect(r.json?.ok).toBe(true);
  });
});

export type { Olp };
