// The OLP server's service routes and conventions (document 3 parts 1, 2, 4, 5, 7): /health (always
// 200, every field), /capabilities, /robots and /robots/capture-model from the robot store, JSON bodies
// (unknown fields ignored, trailing data refused), gzip when accepted, the three body limits, both error
// shapes, the default listen address and the absence of authentication. No cell is needed: the servers
// of this file have no target.

import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { covers, describe, expect, inProfile, profile } from '../../harness/fixture.ts';
import { BASE, discoverCells, expectAuthoringError, expectMachineError, needsConfigured, olpTest as test, useOlp, type Olp, type OlpReply } from './toolkit.ts';

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

const HEALTH_FIELDS = ['ok', 'schema', 'mode', 'network_required', 'connected', 'connected_targets', 'local_simulator', 'local_ready', 'execution_enabled', 'target_planning', 'teleop_enabled', 'program_catalog'];

/** A robot of the server's store (GET /robots): the fixture robot on a server the harness configured. */
async function aRobot(o: Olp, skip: (c: boolean, n?: string) => void): Promise<{ model_id: string; robot_description_sha256: string; urdf?: string }> {
  if (o.endpoint.configured) return { model_id: 'sim-nine-axis', robot_description_sha256: URDF_SHA, urdf: urdfText };
  const r = await o.client.get('/robots');
  const robots = Array.isArray(r.json?.robots) ? (r.json?.robots as any[]) : [];
  const x = robots.find((v) => typeof v?.model_id === 'string' && typeof v?.robot_description_sha256 === 'string' && SHA256.test(v.robot_description_sha256));
  skip(x === undefined, `the server's robot store lists no robot with a model_id and a sha256:<64 hex> robot_description_sha256 (${r.status} ${r.text.slice(0, 160)})`);
  return { model_id: x.model_id, robot_description_sha256: x.robot_description_sha256 };
}

const SHA256 = /^sha256:[0-9a-f]{64}$/;

describe('service routes', () => {
  test(
    'GET /health always answers 200 with every documented field',
    covers('olp:route.health', 'profile:olp.service_fields', ...HEALTH_FIELDS.map((f) => `field:OlpHealth.${f}`)),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
      const r = await o.client.get('/health');
      expect(r.status).toBe(200);
      const h = r.json;
      // Part 4 names the fields; their types are not shown (docs/profile.md "OLP server: service fields").
      for (const f of HEALTH_FIELDS) expect(h, f).toHaveProperty(f);
      await inProfile('profile:olp.service_fields', () => {
        expect(h.ok).toBe(true);
        expect(typeof h.schema).toBe('string');
        expect(typeof h.mode).toBe('string');
        for (const f of ['network_required', 'connected', 'local_simulator', 'local_ready', 'execution_enabled', 'target_planning', 'teleop_enabled']) expect(typeof h[f], f).toBe('boolean');
        expect(Array.isArray(h.connected_targets)).toBe(true);
        expect(['boolean', 'object', 'string'], 'program_catalog').toContain(typeof h.program_catalog);
      });
      // A server that is not connected to any cell still answers 200, and says so.
      if (o.endpoint.configured) {
        expect([h.connected, h.connected_targets, h.target_planning]).toEqual([false, [], false]);
        // A broken robot store does not make health fail: always 200.
        const broken = useOlp({ skip }, await olps.open('no-store', () => ({ planner: 'none', robotStore: 'missing' })));
        const b = await broken.client.get('/health');
        expect([b.status, b.json?.ok]).toEqual([200, true]);
      }
    },
  );

  test('GET /capabilities names schema offline-programming.capabilities.v1', covers('olp:route.capabilities'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const r = await o.client.get('/capabilities');
    expect(r.status).toBe(200);
    expect(r.json?.schema).toBe('offline-programming.capabilities.v1');
  });

  test(
    'GET /robots lists the store: model id, description digest, frames, driven and held axes, reset pose, problems',
    covers('olp:route.robots', 'profile:olp.robot_store'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
      /** What part 4 shows of every entry: the fields, the digest's form (sha256:<64 hex>), axes driven and held, a problems list. */
      const documented = (r: OlpReply) => {
        expect(r.status, r.text).toBe(200);
        expect(Array.isArray(r.json?.robots), r.text.slice(0, 200)).toBe(true);
        expect(Array.isArray(r.json?.problems), r.text.slice(0, 200)).toBe(true);
        for (const x of r.json?.robots as any[]) {
          for (const f of ['model_id', 'robot_description_sha256', 'frames', 'axes', 'reset_pose']) expect(x, f).toHaveProperty(f);
          expect(x.robot_description_sha256).toMatch(SHA256);
          expect(x.axes, 'axes').toHaveProperty('driven');
          expect(x.axes, 'axes').toHaveProperty('held');
        }
      };
      if (!o.endpoint.configured) {
        // Someone else's store, as its owner filled it.
        const r = await o.client.get('/robots');
        documented(r);
        skip((r.json?.robots as any[]).length === 0, 'the server\'s robot store is empty');
        return;
      }
      const dir = mkdtempSync(join(tmpdir(), 'hil-robots-'));
      try {
        writeFileSync(join(dir, 'sim-nine-axis.urdf'), urdfText);
        writeFileSync(join(dir, 'broken.urdf'), '<robot name="broken"><link name="a"/>');
        // A held joint: lower equals upper.
        writeFileSync(join(dir, 'held.urdf'), '<robot name="arm-held"><link name="a"/><link name="b"/><link name="c"/><joint name="A1" type="revolute"><parent link="a"/><child link="b"/><limit lower="-1" upper="2" velocity="1"/></joint><joint name="T1" type="prismatic"><parent link="b"/><child link="c"/><limit lower="0.5" upper="0.5" velocity="1"/></joint></robot>');
        const s = useOlp({ skip }, await olps.open('store', () => ({ planner: 'none', robotStore: { dir } })));
        const r = await s.client.get('/robots');
        documented(r);
        const robots = r.json?.robots as any[];
        expect(robots.map((x) => x.model_id).sort()).toEqual(['arm-held', 'sim-nine-axis']);
        const nine = robots.find((x) => x.model_id === 'sim-nine-axis');
        // The URDF format, the digest of the file's bytes and the axis objects are ours (docs/profile.md "OLP server: robot store").
        await inProfile('profile:olp.robot_store', () => {
          expect(nine.robot_description_sha256).toBe(URDF_SHA);
          expect(nine.frames).toContain('tool0');
          expect(nine.axes.driven.map((a: any) => a.name)).toEqual(['J1', 'J2', 'J3', 'J4', 'J5', 'J6', 'J7', 'J8', 'J9']);
          expect(nine.axes.held).toEqual([]);
          expect(Object.keys(nine.reset_pose)).toHaveLength(9);
          const held = robots.find((x) => x.model_id === 'arm-held');
          expect(held.axes.driven.map((a: any) => a.name)).toEqual(['A1']);
          expect(held.axes.held.map((a: any) => [a.name, Number(a.held_rad)])).toEqual([['T1', 0.5]]);
          expect(Object.fromEntries(Object.entries(held.reset_pose).map(([k, v]) => [k, Number(v)]))).toEqual({ A1: 0, T1: 0.5 });
          expect((r.json?.problems as any[]).map((p) => p.file)).toEqual(['broken.urdf']);
        });
      } finally {
        await olps.drop('store');
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  test('GET /robots answers 500 robot_store_unreadable when the store cannot be read', covers('olp:error.robot_store_unreadable', 'olp:errors.authoring_shape', 'field:OlpAuthoringError.ok', 'field:OlpAuthoringError.code', 'field:OlpAuthoringError.error'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('no-store', () => ({ planner: 'none', robotStore: 'missing' })));
    // A client cannot make someone else's store unreadable through the routes of part 4 (nor a file it can name).
    needsConfigured({ skip }, o, 'a server whose robot store cannot be read (500 robot_store_unreadable)');
    expectAuthoringError(await o.client.get('/robots'), 500, 'robot_store_unreadable');
  });

  test(
    'POST /robots/capture-model returns the URDF and identity; unknown fields are ignored',
    covers('olp:route.robots_capture_model', 'field:OlpCaptureModelRequest.model_id', 'field:OlpCaptureModelRequest.robot_description_sha256', 'field:OlpCaptureModelRequest.machine_planning_calibration_base64', 'olp:conventions.unknown_fields_ignored', 'profile:olp.robot_store'),
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
      const robot = await aRobot(o, skip);
      const cal = Buffer.from('calibration of cell A\n');
      const r = await o.client.post('/robots/capture-model', { model_id: robot.model_id, robot_description_sha256: robot.robot_description_sha256, machine_planning_calibration_base64: cal.toString('base64'), some_future_field: { x: 1 } });
      expect(r.status, r.text).toBe(200);
      expect(typeof r.json?.urdf, 'urdf').toBe('string');
      expect(r.json, 'identity').toHaveProperty('identity');
      if (robot.urdf) expect(r.json?.urdf).toBe(robot.urdf);
      await inProfile('profile:olp.robot_store', () => {
        expect(r.json?.identity).toMatchObject({ model_id: robot.model_id, robot_description_sha256: robot.robot_description_sha256, machine_planning_calibration_sha256: 'sha256:' + createHash('sha256').update(cal).digest('hex') });
      });
      const plain = await o.client.post('/robots/capture-model', { model_id: robot.model_id, robot_description_sha256: robot.robot_description_sha256 });
      expect(plain.status, plain.text).toBe(200);
      await inProfile('profile:olp.robot_store', () => expect(plain.json?.identity?.machine_planning_calibration_sha256).toBe(''));
    },
  );

  test.for([
    ['model_id missing', (b: Record<string, unknown>): void => void delete b.model_id],
    ['model_id not a string', (b: Record<string, unknown>): void => void (b.model_id = 7)],
    ['digest missing', (b: Record<string, unknown>): void => void delete b.robot_description_sha256],
    ['digest without the sha256: prefix', (b: Record<string, unknown>): void => void (b.robot_description_sha256 = String(b.robot_description_sha256).slice(7))],
    ['digest of another description', (b: Record<string, unknown>): void => void (b.robot_description_sha256 = 'sha256:' + '0'.repeat(64))],
    ['unknown model', (b: Record<string, unknown>): void => void (b.model_id = 'no-such-robot')],
    ['calibration not base64', (b: Record<string, unknown>): void => void (b.machine_planning_calibration_base64 = 'not base64!')],
  ] as const)('POST /robots/capture-model refuses %s with 400; the valid twin is served', covers('olp:route.robots_capture_model', 'olp:errors.authoring_shape'), async ([, edit], { olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const robot = await aRobot(o, skip);
    const valid = { model_id: robot.model_id, robot_description_sha256: robot.robot_description_sha256, machine_planning_calibration_base64: Buffer.from('cal').toString('base64') };
    // The twin: the same body without the fault is served, so the 400 below is for that fault.
    const twin = await o.client.post('/robots/capture-model', valid);
    expect(twin.status, twin.text).toBe(200);
    const body: Record<string, unknown> = { ...valid };
    edit(body);
    const r = await o.client.post('/robots/capture-model', body);
    expect(r.status, r.text).toBe(400);
    expect(r.json?.ok).toBe(false);
    expect(typeof r.json?.code).toBe('string');
    expect(typeof r.json?.error).toBe('string');
  });

  test('the 400 of capture-model carries the invalid_request code', profile('profile:olp.invalid_request'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    expectAuthoringError(await o.client.post('/robots/capture-model', { model_id: 'no-such-robot', robot_description_sha256: URDF_SHA }), 400, 'invalid_request');
  });
});

describe('conventions (part 2)', () => {
  test('trailing data after the JSON value is refused, whitespace is not', covers('olp:conventions.trailing_data_refused', 'olp:error.invalid_request'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const robot = await aRobot(o, skip);
    const good = JSON.stringify({ model_id: robot.model_id, robot_description_sha256: robot.robot_description_sha256 });
    for (const trailing of [' x', '{}', '0', ',']) {
      const r = await o.client.post('/robots/capture-model', good + trailing);
      // Refused 400 in the authoring shape (part 7); the code for it is ours.
      expect(r.status, r.text).toBe(400);
      expect([r.json?.ok, typeof r.json?.code, typeof r.json?.error], r.text).toEqual([false, 'string', 'string']);
      await inProfile('profile:olp.invalid_request', () => expectAuthoringError(r, 400, 'invalid_request'));
    }
    // The valid twin: the same value with whitespace around it is served.
    expect((await o.client.post('/robots/capture-model', `\n ${good} \n`)).status).toBe(200);
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

  // Accept-Encoding as clients send it (RFC 9110 12.5.3): several codings, weights, any case. gzip is
  // accepted when it is listed with a nonzero weight, and only then.
  test.for([
    ['deflate, gzip', true],
    ['br;q=1.0, gzip;q=0.5, *;q=0', true],
    ['GZip', true],
    ['deflate, br', false],
    ['gzip;q=0, deflate', false],
    ['identity', false],
  ] as const)('Accept-Encoding "%s": gzip %s', covers('olp:conventions.gzip'), async ([header, gz], { olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const r = await o.client.get('/capabilities', { 'accept-encoding': header });
    expect(r.status, r.text.slice(0, 200)).toBe(200);
    if (gz) {
      expect(r.headers['content-encoding'], header).toBe('gzip');
      expect([r.wire[0], r.wire[1]]).toEqual([0x1f, 0x8b]);
    } else expect(r.headers['content-encoding'] ?? 'identity', header).toBe('identity');
    expect(r.json?.schema).toBe('offline-programming.capabilities.v1');
  });

  test('numeric fields carry their unit in the name', covers('olp:conventions.units_in_names'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    const r = await o.client.get('/robots');
    const axis = r.json?.robots?.[0]?.axes?.driven?.[0];
    skip(typeof axis !== 'object' || axis === null, 'the server\'s robot store has no robot with a driven axis object to read');
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
    const r = await o.client.post('/seam', { operation: 'detect_joints' });
    // Someone else's server: judged when it has no seam worker (a 503); one that has a worker has nothing to show here.
    skip(!o.endpoint.configured && r.status !== 503, `the server has a seam worker (/seam answered ${r.status})`);
    expectAuthoringError(r, 503, 'seam_worker_unavailable');
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
    const body = { program: JSON.parse(readFileSync(new URL('../../fixtures/weldplans/line-weld.program.json', import.meta.url), 'utf8')), tooling: {}, step_base64: '', workpiece_absent: true, cell_id: 'sim-nine-axis' };
    const r = await o.client.post('/weld-plan', body);
    skip(!o.endpoint.configured && r.status !== 503, `the server has a planner origin (/weld-plan answered ${r.status})`);
    expectAuthoringError(r, 503, 'motion_origin_unavailable');
  });

  test('machine-control routes answer in the machine shape: /targets/select without a catalogue is 503 cell_catalogue_unavailable', covers('olp:error.cell_catalogue_unavailable', 'olp:errors.machine_shape'), async ({ olps, skip }) => {
    const o = useOlp({ skip }, await olps.open('plain', () => ({ planner: 'none' })));
    if (!o.endpoint.configured) skip((await discoverCells(o, undefined, undefined)).catalogue, 'the server has a cell catalogue (an unknown cell\'s selection is not 503)');
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
    skip(!o.endpoint.configured && new URL(o.endpoint.url).port !== '8794', `the server was started at ${o.endpoint.url}: the default address is seen only on a server started without --listen`);
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
