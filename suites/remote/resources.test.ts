// GET /v1/resources/<sha256> (document 1 part 4 "Observation endpoints"): one content-addressed compiled
// resource of the machine configuration as binary, on the remote listener only; an unknown digest is
// HTTP 404 resource_unknown. The machine here pins a robot description, which the configuration compiler
// (document 3) turns into a resource named by the SHA-256 of its bytes. Someone else's listener serves
// its own cell, whose resources this file knows only when the run names one of its files
// (--remote-resource FILE, its robot description say); without it only what holds for any digest is judged.

import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { contentType, type ControlClient } from '../../harness/clients/control.ts';
import { checkReply } from '../../harness/oracle/reply.ts';
import { cannotStartRemote, type RemoteOptions } from '../../harness/targets/remote.ts';
import { covers, describe, expect, inProfile, profile, sharedRemote, test } from '../../harness/fixture.ts';

let dir = '';
let remote: ControlClient;
let local: ControlClient;
/**
 * Bytes of the pinned description: every byte value, so a text transcoding would show, then 2048 bytes
 * that look random but are the same every run (the machine's digest covers them, and a replayed run must
 * compile the machine its recording was made with).
 */
const NOISE = Buffer.concat(Array.from({ length: 64 }, (_, i) => createHash('sha256').update(`arm-6 description ${i}`).digest()));
const DESCRIPTION = Buffer.concat([Buffer.from('<robot name="arm-6"/>\n'), Buffer.from(Array.from({ length: 256 }, (_, i) => i)), NOISE]);
const DIGEST = createHash('sha256').update(DESCRIPTION).digest('hex');

/** A six-joint arm bound to six sim axes, with its description pinned (every robot fact has provenance). */
async function robotMachine(at: string): Promise<string> {
  const src = (o: Record<string, number>) => {
    const out: Record<string, unknown> = { ...o };
    for (const k of Object.keys(o)) out[`${k}_source`] = 'vendor datasheet rev C';
    return out;
  };
  const joints = ['J1', 'J2', 'J3', 'J4', 'J5', 'J6'].map((id, i) => ({
    id,
    profile: 'sim-ds402',
    type: 'rotary',
    coordinate_evidence_mode: 'multi_turn',
    ...src({ wire_counts_per_rev: 1048576, motor_encoder_counts_per_rev: 8388608, wire_revs_per_axis_rev: 100, sign: i % 2 ? -1 : 1, min: -2.5, max: 2.5, max_velocity: 2, jog_acceleration: 3 }),
    gear_ratio: src({ numerator: 100, denominator: 1 }),
  }));
  const doc = {
    schema_version: 1,
    cycle_ns: 1000000,
    max_cycle_lateness_ns: 500000,
    runtime: { cpu: 3, priority: 80 },
    robot: { model_id: 'arm-6', joints, description: 'models/arm-6.urdf' },
    axes: joints.map((j, i) => ({
      robot_joint: j.id,
      slave_position: i,
      limits: src({ max_target_lead: 0.05, following_error: 0.01, following_error_timeout_ms: 50, completion_tolerance: 0.001, completion_timeout_ms: 2000 }),
    })),
  };
  await mkdir(join(at, 'models'), { recursive: true });
  await writeFile(join(at, 'models', 'arm-6.urdf'), DESCRIPTION);
  await writeFile(join(at, 'cell.json'), JSON.stringify(doc));
  return join(at, 'cell.json');
}

let machine = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hil-resources-'));
  machine = await robotMachine(dir);
});
/** Why the stack serves no resource this file knows (someone else's listener), or undefined. */
let unknownCell: string | undefined;
/** A resource the listener serves and its digest: the description pinned here, or the file the run named. */
let known: { bytes: Buffer; digest: string } | undefined;
// The listener's resources play no part in the core's cycles: a stack the harness starts runs on the
// stepped clock and costs no CPU while the file runs (an idle real-time core wakes 1000 times a second).
sharedRemote(async (open) => {
  const withRobot: RemoteOptions = { args: ['--machine', machine, '--config-cache', join(dir, 'compiled')], cycleFree: true };
  unknownCell = cannotStartRemote(withRobot);
  const stack = await open(unknownCell === undefined ? withRobot : { cycleFree: true });
  remote = await stack.client('viewer-1');
  local = stack.local();
  const theirs = stack.knownResource;
  known = unknownCell === undefined ? { bytes: DESCRIPTION, digest: DIGEST } : theirs ? { bytes: theirs, digest: createHash('sha256').update(theirs).digest('hex') } : undefined;
});
const KNOWN = 'needs a stack serving the robot description this file wrote, or a file the listener serves named with --remote-resource FILE';
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('resources', () => {
  test('a known digest returns the resource bytes, whose SHA-256 is the digest', covers('endpoint:GET /v1/resources/<sha256>', 'rule:observation.resource_remote_only'), async ({ skip }) => {
    skip(known === undefined, `${KNOWN}: ${unknownCell}`);
    const r = await remote.raw('GET', `/v1/resources/${known!.digest}`);
    expect(r.status, Buffer.from(r.body.subarray(0, 200)).toString('latin1')).toBe(200);
    expect(contentType(r)).toBe('application/octet-stream');
    expect(createHash('sha256').update(r.body).digest('hex')).toBe(known!.digest);
    expect(Buffer.compare(Buffer.from(r.body), known!.bytes)).toBe(0);
  });

  test('an unknown digest is HTTP 404 resource_unknown', covers('reason:resource_unknown', 'rule:observation.resource_remote_only'), async () => {
    const unknown = createHash('sha256').update(DESCRIPTION).update('x').digest('hex');
    for (const d of [unknown, '0'.repeat(64)]) {
      const r = await remote.raw('GET', `/v1/resources/${d}`);
      const c = checkReply(r.status, contentType(r), r.body, 'resource');
      expect(c.status, d).toBe(404);
      expect(c.label, d).toBe('resource_unknown');
    }
  });

  test('digest text other than 64 lowercase hex digits is resource_unknown', profile('profile:remote.resource_digest'), async () => {
    for (const d of [DIGEST.toUpperCase(), `sha256:${DIGEST}`, DIGEST.slice(1), `${DIGEST}0`, '..%2Fresources.json']) {
      const r = await remote.raw('GET', `/v1/resources/${d}`);
      const c = checkReply(r.status, contentType(r), r.body, 'resource');
      expect(c.label, d).toBe('resource_unknown');
    }
  });

  test('Describe over the remote listener reports resource implemented on its documented transport, and it answers there', covers('capability:resource', 'rule:observation.resource_remote_only'), async () => {
    const d = (await remote.describe()).reply.data as unknown as { capabilities: Array<{ name: string; state: string; transport: string }> };
    expect(d.capabilities.find((c) => c.name === 'resource')).toEqual({ name: 'resource', state: 'implemented', transport: 'GET /v1/resources/<sha256>' });
    if (known) expect((await remote.raw('GET', `/v1/resources/${known.digest}`)).status).toBe(200);
  });

  test('the local Unix socket does not serve resources (remote mutual TLS required): unknown_endpoint', covers('rule:observation.resource_remote_only', 'profile:remote.resource_digest'), async () => {
    const r = await local.raw('GET', `/v1/resources/${DIGEST}`);
    expect(Buffer.from(r.body).includes(DESCRIPTION.subarray(0, 64))).toBe(false);
    expect(r.status).not.toBe(200);
    // Which refusal the local socket gives is docs/profile.md's ("Resources").
    await inProfile('profile:remote.resource_digest', () => {
      const c = checkReply(r.status, contentType(r), r.body);
      expect(c.status).toBe(409);
      expect(c.label).toBe('unknown_endpoint');
    });
    // The digest is right: the same path answers over the remote listener (on a stack serving it).
    if (known) expect((await remote.raw('GET', `/v1/resources/${known.digest}`)).status).toBe(200);
  });
});
