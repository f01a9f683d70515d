// The OLP server's service routes and conventions (document 3 parts 1, 2, 4, 5, 7): /health (always
// 200, every field), /capabilities, /robots and /robots/capture-model from the robot store, JSON bodies
// (unknown fields ignored, trailing data refused), gzip when accepted, the three body limits, both error
// shapes, the default listen address and the absence of authentication. No cell is needed: the servers
// of this file have no target.

import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { covers, describe, expect, profile } from '../../harness/fixture.ts';
import { BASE, expectAuthoringError, expectMachineError, needsConfigured, olpTest as test, useOlp } from './toolkit.ts';

const URDF = new URL('../../fixtures/robots/sim-nine-axis.urdf', import.meta.url);
const urdfText = readFileSync(URDF, 'utf8');
const URDF_SHA = 'sha256:' + createHash('sha256').update(readFileSync(URDF)).digest('hex');
const MiB = 1024 * 1024;

/** A JSON object body of exactly `bytes` bytes: {"pad":"aaaa..."} plus the given prefix fields. */
function paddedBody(bytes: number, prefix = ''): string {
  const head = `{${prefix}"pad":"`;
  const tail = '"}';
  return head + 'a'.repeat(bytes - head.length - tail.length) + tail;
}

describe('service routes', () => {
  test(
    'GET /health always answers 200 with every documented field',
    covers('olp:route.health', ...['ok', 'schema', 'mode', 'network_required', 'connected', 'connected_targets', 'local_simulator', 'local_ready', 'execution_enabled', 'target_planning', 'teleop_enabled', 'program_catalog'].map((f) => `field:OlpHealth.${f}`)),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
      const r = await o.client.get('/health');
      expect(r.status).toBe(200);
      const h = r.json;
      expect(h.ok).toBe(true);
      expect(typeof h.schema).toBe('string');
      expect(typeof h.mode).toBe('string');
      for (const f of ['network_required', 'connected', 'local_simulator', 'local_ready', 'execution_enabled', 'target_planning', 'teleop_enabled']) expect(typeof h[f], f).toBe('boolean');
      expect(Array.isArray(h.connected_targets)).toBe(true);
      expect(['boolean', 'object', 'string'], 'program_catalog').toContain(typeof h.program_catalog);
      // A server that is not connected to any cell still answers 200, and says so.
      if (o.endpoint.configured) {
        expect([h.connected, h.connected_targets, h.target_planning]).toEqual([false, [], false]);
        // A broken robot store does not make health fail: always 200.
        const broken = useOlp({ skip }, await olps.open('no-store', () => ({ planner: 'none', robotStore: 'missing' })));
        const b = await broken.client.get('/health');
        expect([b.status, b.json.ok]).toEqual([200, true]);
      }
    },
  );

  test('GET /capabilities names schema offline-programming.capabilities.v1', covers('olp:route.capabilities'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const r = await o.client.get('/capabilities');
    expect(r.status).toBe(200);
    expect(r.json.schema).toBe('offline-programming.capabilities.v1');
  });

  test(
    'GET /robots lists the store: model id, description digest, frames, driven and held axes, reset pose, problems',
    covers('olp:route.robots'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
      needsConfigured({ skip }, o, 'a robot store with the fixture robot and a broken description');
      const dir = mkdtempSync(join(tmpdir(), 'hil-robots-'));
      try {
        writeFileSync(join(dir, 'sim-nine-axis.urdf'), urdfText);
        writeFileSync(join(dir, 'broken.urdf'), '<robot name="broken"><link name="a"/>');
        // A held joint: lower equals upper.
        writeFileSync(join(dir, 'held.urdf'), '<robot name="arm-held"><link name="a"/><link name="b"/><link name="c"/><joint name="A1" type="revolute"><parent link="a"/><child link="b"/><limit lower="-1" upper="2" velocity="1"/></joint><joint name="T1" type="prismatic"><parent link="b"/><child link="c"/><limit lower="0.5" upper="0.5" velocity="1"/></joint></robot>');
        const s = useOlp({ skip }, await olps.open('store', () => ({ planner: 'none', robotStore: { dir } })));
        const r = await s.client.get('/robots');
        expect(r.status, r.text).toBe(200);
        const robots = r.json.robots as any[];
        expect(robots.map((x) => x.model_id).sort()).toEqual(['arm-held', 'sim-nine-axis']);
        const nine = robots.find((x) => x.model_id === 'sim-nine-axis');
        expect(nine.robot_description_sha256).toBe(URDF_SHA);
        expect(nine.frames).toContain('tool0');
        expect(nine.axes.driven.map((a: any) => a.name)).toEqual(['J1', 'J2', 'J3', 'J4', 'J5', 'J6', 'J7', 'J8', 'J9']);
        expect(nine.axes.held).toEqual([]);
        expect(Object.keys(nine.reset_pose)).toHaveLength(9);
        const held = robots.find((x) => x.model_id === 'arm-held');
        expect(held.axes.driven.map((a: any) => a.name)).toEqual(['A1']);
        expect(held.axes.held.map((a: any) => [a.name, Number(a.held_rad)])).toEqual([['T1', 0.5]]);
        expect(Object.fromEntries(Object.entries(held.reset_pose).map(([k, v]) => [k, Number(v)]))).toEqual({ A1: 0, T1: 0.5 });
        expect((r.json.problems as any[]).map((p) => p.file)).toEqual(['broken.urdf']);
      } finally {
        await olps.drop('store');
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  test('GET /robots answers 500 robot_store_unreadable when the store cannot be read', covers('olp:error.robot_store_unreadable', 'olp:errors.authoring_shape', 'field:OlpAuthoringError.ok', 'field:OlpAuthoringError.code', 'field:OlpAuthoringError.error'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('no-store', () => ({ planner: 'none', robotStore: 'missing' })));
    needsConfigured({ skip }, o, 'an unreadable robot store');
    expectAuthoringError(await o.client.get('/robots'), 500, 'robot_store_unreadable');
  });

  test(
    'POST /robots/capture-model returns the URDF and identity; unknown fields are ignored',
    covers('olp:route.robots_capture_model', 'field:OlpCaptureModelRequest.model_id', 'field:OlpCaptureModelRequest.robot_description_sha256', 'field:OlpCaptureModelRequest.machine_planning_calibration_base64', 'olp:conventions.unknown_fields_ignored'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
      needsConfigured({ skip }, o, 'the fixture robot in the store');
      const cal = Buffer.from('calibration of cell A\n');
      const r = await o.client.post('/robots/capture-model', { model_id: 'sim-nine-axis', robot_description_sha256: URDF_SHA, machine_planning_calibration_base64: cal.toString('base64'), some_future_field: { x: 1 } });
      expect(r.status, r.text).toBe(200);
      expect(r.json.urdf).toBe(urdfText);
      expect(r.json.identity).toMatchObject({ model_id: 'sim-nine-axis', robot_description_sha256: URDF_SHA, machine_planning_calibration_sha256: 'sha256:' + createHash('sha256').update(cal).digest('hex') });
      const plain = await o.client.post('/robots/capture-model', { model_id: 'sim-nine-axis', robot_description_sha256: URDF_SHA });
      expect([plain.status, plain.json.identity.machine_planning_calibration_sha256]).toEqual([200, '']);
    },
  );

  test.for([
    ['model_id missing', { robot_description_sha256: URDF_SHA }],
    ['model_id not a string', { model_id: 7, robot_description_sha256: URDF_SHA }],
    ['digest missing', { model_id: 'sim-nine-axis' }],
    ['digest without the sha256: prefix', { model_id: 'sim-nine-axis', robot_description_sha256: URDF_SHA.slice(7) }],
    ['digest of another description', { model_id: 'sim-nine-axis', robot_description_sha256: 'sha256:' + '0'.repeat(64) }],
    ['unknown model', { model_id: 'no-such-robot', robot_description_sha256: URDF_SHA }],
    ['calibration not base64', { model_id: 'sim-nine-axis', robot_description_sha256: URDF_SHA, machine_planning_calibration_base64: 'not base64!' }],
  ] as const)('POST /robots/capture-model refuses %s with 400', covers('olp:route.robots_capture_model', 'olp:errors.authoring_shape'), async ([, body], { olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const r = await o.client.post('/robots/capture-model', body);
    expect(r.status, r.text).toBe(400);
    expect(r.json.ok).toBe(false);
    expect(typeof r.json.code).toBe('string');
  });

  test('the 400 of capture-model carries the invalid_request code', profile('profile:olp.invalid_request'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    expectAuthoringError(await o.client.post('/robots/capture-model', { model_id: 'no-such-robot', robot_description_sha256: URDF_SHA }), 400, 'invalid_request');
  });
});

describe('conventions (part 2)', () => {
  test('trailing data after the JSON value is refused, whitespace is not', covers('olp:conventions.trailing_data_refused', 'olp:error.invalid_request'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const good = JSON.stringify({ model_id: 'sim-nine-axis', robot_description_sha256: URDF_SHA });
    for (const trailing of [' x', '{}', '0', ',']) expectAuthoringError(await o.client.post('/robots/capture-model', good + trailing), 400, 'invalid_request');
    if (o.endpoint.configured) expect((await o.client.post('/robots/capture-model', `\n ${good} \n`)).status).toBe(200);
  });

  test('replies are gzip-compressed when the client accepts gzip, and only then', covers('olp:conventions.gzip'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const gz = await o.client.get('/capabilities', { 'accept-encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect([gz.wire[0], gz.wire[1]]).toEqual([0x1f, 0x8b]);
    const plain = await o.client.get('/capabilities', { 'accept-encoding': 'identity' });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(gz.json).toEqual(plain.json);
    // Refusals too.
    const e = await o.client.post('/robots/capture-model', '{} x', { 'accept-encoding': 'gzip, deflate' });
    expect([e.headers['content-encoding'], e.json?.ok]).toEqual(['gzip', false]);
  });

  test('numeric fields carry their unit in the name', covers('olp:conventions.units_in_names'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    needsConfigured({ skip }, o, 'the fixture robot in the store');
    const r = await o.client.get('/robots');
    const axis = r.json.robots[0].axes.driven[0];
    for (const [k, v] of Object.entries(axis)) if (typeof v === 'number') expect(k, k).toMatch(/_(rad|deg|mm|m|s|ms|ns|rad_s)$/);
  });

  test(
    'a dense-execution body over 64 KiB is refused 413 payload_too_large; 64 KiB is read',
    covers('limit:olp_dense_execution_body_bytes', 'olp:error.payload_too_large', 'olp:errors.machine_shape', 'field:OlpMachineError.error', 'field:OlpMachineError.detail'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
      expectMachineError(await o.client.post('/dense-execution/heartbeat', paddedBody(65537)), 413, 'payload_too_large');
      const at = await o.client.post('/dense-execution/heartbeat', paddedBody(65536));
      expect(at.status, at.text).not.toBe(413);
    },
  );

  test('a /seam or /cadquery/topology body over 12 MiB is refused 413; 12 MiB is read', covers('limit:olp_cad_seam_body_bytes', 'olp:error.payload_too_large'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    for (const route of ['/seam', '/cadquery/topology']) {
      expectAuthoringError(await o.client.post(route, paddedBody(12 * MiB + 1, '"operation":"detect_joints",')), 413, 'payload_too_large');
      const at = await o.client.post(route, paddedBody(12 * MiB, '"operation":"detect_joints",'));
      expect(at.status, at.text.slice(0, 200)).not.toBe(413);
    }
  });

  test('without a seam or CAD worker the routes answer 503 seam_worker_unavailable', covers('olp:error.seam_worker_unavailable'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    needsConfigured({ skip }, o, 'a server without workers');
    expectAuthoringError(await o.client.post('/seam', { operation: 'detect_joints' }), 503, 'seam_worker_unavailable');
  });

  test('a /weld-plan body over 24 MiB is refused 413; 24 MiB is read', covers('limit:olp_weld_plan_body_bytes', 'olp:error.payload_too_large'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    expectAuthoringError(await o.client.post('/weld-plan', paddedBody(24 * MiB + 1)), 413, 'payload_too_large');
    const at = await o.client.post('/weld-plan', paddedBody(24 * MiB));
    expect(at.status, at.text.slice(0, 200)).not.toBe(413);
    expect(at.json?.code).toBe('weld_plan_invalid'); // read and judged: no program in it
  });

  test('/weld-plan without a planner origin answers 503 motion_origin_unavailable', covers('olp:error.motion_origin_unavailable'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    needsConfigured({ skip }, o, 'a server without a planner');
    const body = { program: JSON.parse(readFileSync(new URL('../../fixtures/weldplans/line-weld.program.json', import.meta.url), 'utf8')), tooling: {}, step_base64: '', workpiece_absent: true, cell_id: 'sim-nine-axis' };
    expectAuthoringError(await o.client.post('/weld-plan', body), 503, 'motion_origin_unavailable');
  });

  test('machine-control routes answer in the machine shape: /targets/select without a catalogue is 503 cell_catalogue_unavailable', covers('olp:error.cell_catalogue_unavailable', 'olp:errors.machine_shape'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    needsConfigured({ skip }, o, 'a server without a cell catalogue');
    expectMachineError(await o.client.post('/targets/select', { cell_id: 'a', model_id: 'b' }), 503, 'cell_catalogue_unavailable');
    expectMachineError(await o.client.post('/dense-execution/cells', { cell_id: 'a', model_id: 'b', control: { socket: '/nonexistent' } }), 503, 'cell_catalogue_unavailable');
  });

  test('POST /dense-execution/go-home is not available on the core backend', covers('olp:route.dense_execution_go_home'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const r = await o.client.post('/dense-execution/go-home', {});
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(typeof r.json?.error).toBe('string');
  });
});

describe('listening and authentication (parts 1 and 5)', () => {
  test('by default the server listens on 127.0.0.1:8794, routes under /api/offline-programming/v1', covers('olp:listen_default', 'limit:olp_port', 'olp:same_host_only'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('default-listen', () => ({ planner: 'none', defaultListen: true })));
    needsConfigured({ skip }, o, 'the default listen address');
    try {
      expect(o.endpoint.url).toBe('http://127.0.0.1:8794');
      expect((await o.client.get('/health')).status).toBe(200);
      // Nothing answers outside the base path.
      const outside = await fetch(`${o.endpoint.url}/health`);
      expect(outside.status).toBe(404);
    } finally {
      await olps.drop('default-listen');
    }
  });

  test('no authentication: requests without credentials are served', covers('olp:auth.none'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const r = await o.client.get('/health');
    expect(r.status).toBe(200);
    expect(r.headers['www-authenticate']).toBeUndefined();
    expect(`${BASE}`).toBe('/api/offline-programming/v1');
  });
});
