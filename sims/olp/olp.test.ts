// Unit tests of the OLP server's pieces from the inside: the URDF reader, the body limit reader, gzip
// negotiation, the deterministic container and the weld-plan body reader. The suites in suites/olp/ test
// the server from the outside.

import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { unzipSync } from 'fflate';
import { expect, test } from 'vitest';
import { decodeJson } from '../json.ts';
import { readWeldplan } from '../planner/weldplan.ts';
import { acceptsGzip, OlpError, readBody } from './http.ts';
import { parseUrdf } from './robots.ts';
import { pack, readWeldPlanRequest } from './weldplan.ts';

const URDF = readFileSync(new URL('../../fixtures/robots/sim-nine-axis.urdf', import.meta.url), 'utf8');

test('the fixture robot: nine driven joints with the nine-axis machine limits', () => {
  const r = parseUrdf(URDF, 'sim-nine-axis.urdf');
  expect(r.model_id).toBe('sim-nine-axis');
  expect(r.axes.driven.map((a) => a.name)).toEqual(['J1', 'J2', 'J3', 'J4', 'J5', 'J6', 'J7', 'J8', 'J9']);
  const machine = JSON.parse(readFileSync(new URL('../../fixtures/machines/nine-axis.json', import.meta.url), 'utf8')) as { axes: Array<{ name: string; limits: { min: number; max: number; max_velocity: number } }> };
  for (const a of machine.axes) {
    const j = r.axes.driven.find((x) => x.name === a.name)!;
    expect([j.lower_rad, j.upper_rad, j.velocity_rad_s], a.name).toEqual([a.limits.min, a.limits.max, a.limits.max_velocity]);
  }
  expect(r.robot_description_sha256).toMatch(/^sha256:[0-9a-f]{64}$/);
});

test.each([
  ['not XML', '<robot name="x"><link name="a"/>', /not well-formed/],
  ['no robot', '<model name="x"/>', /no <robot>/],
  ['no name', '<robot><link name="a"/></robot>', /no name/],
  ['no link', '<robot name="x"></robot>', /no <link>/],
  ['joint without limits', '<robot name="x"><link name="a"/><joint name="j" type="revolute"/></robot>', /usable <limit/],
  ['only fixed joints', '<robot name="x"><link name="a"/><joint name="j" type="fixed"/></robot>', /no driven joint/],
  ['a joint twice', '<robot name="x"><link name="a"/><joint name="j" type="fixed"/><joint name="j" type="fixed"/></robot>', /twice/],
])('a URDF with %s is a problem', (_what, text, why) => {
  expect(() => parseUrdf(text, 'f.urdf')).toThrow(why);
});

async function bodyOf(bytes: number, limit: number, chunked: boolean): Promise<number | string> {
  const server = createServer((req, res) => {
    readBody(req, limit).then(
      (b) => res.end(String(b.length)),
      (e: OlpError) => res.end(e.code),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  try {
    return await new Promise((resolve, reject) => {
      const req = httpRequest({ port, host: '127.0.0.1', method: 'POST', headers: chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(bytes) } }, (res) => {
        let t = '';
        res.setEncoding('utf8').on('data', (d: string) => (t += d)).on('end', () => resolve(/^\d+$/.test(t) ? Number(t) : t));
      });
      req.on('error', reject);
      const chunk = Buffer.alloc(1000, 0x20);
      for (let left = bytes; left > 0; left -= chunk.length) req.write(chunk.subarray(0, Math.min(left, chunk.length)));
      req.end();
    });
  } finally {
    server.close();
  }
}

test.each([false, true])('the body limit counts bytes from both sides (chunked %s)', async (chunked) => {
  expect(await bodyOf(4096, 4096, chunked)).toBe(4096);
  expect(await bodyOf(4097, 4096, chunked)).toBe('payload_too_large');
});

test('gzip is accepted unless its q is 0', () => {
  const req = (v: string) => ({ headers: { 'accept-encoding': v } }) as never;
  expect([acceptsGzip(req('gzip')), acceptsGzip(req('deflate, gzip;q=0.5')), acceptsGzip(req('gzip;q=0')), acceptsGzip(req('identity')), acceptsGzip(req('x-gzip'))]).toEqual([true, true, false, false, false]);
});

test('the same /weld-plan body packs the same container, which the planner reads', () => {
  const program = readFileSync(new URL('../../fixtures/weldplans/line-weld.program.json', import.meta.url));
  const body = Buffer.concat([Buffer.from('{"program":'), program, Buffer.from(',"tooling":{"tool_id":"t"},"step_base64":"","workpiece_absent":true,"cell_id":"c"}')]);
  const a = pack(readWeldPlanRequest(decodeJson(body)));
  const b = pack(readWeldPlanRequest(decodeJson(body)));
  expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
  expect(Object.keys(unzipSync(a)).sort()).toEqual(['manifest.json', 'program.json', 'tooling.json']);
  expect(readWeldplan(a).program.programId).toBe('line_weld_demo');
});

test('the robot-bound machine fixture pins the fixture robot: same model, description digest and joint limits', async () => {
  const { compileMachine } = await import('../config/compile.ts');
  const text = readFileSync(new URL('../../fixtures/machines/nine-axis-robot.json', import.meta.url), 'utf8');
  const compiled = compileMachine(text);
  const robot = parseUrdf(URDF, 'sim-nine-axis.urdf');
  expect(compiled.machine.robot).toEqual({ model_id: robot.model_id, description_sha256: robot.robot_description_sha256 });
  expect(compiled.files.some((f) => f.name === 'robot.json')).toBe(true);
  const doc = JSON.parse(text) as { robot: { joints: Array<{ id: string; min: number; max: number; max_velocity: number }> } };
  expect(doc.robot.joints.map((j) => [j.id, j.min, j.max, j.max_velocity])).toEqual(robot.axes.driven.map((a) => [a.name, a.lower_rad, a.upper_rad, a.velocity_rad_s]));
});
