// The robot store (document 3 part 4 GET /robots, POST /robots/capture-model): a directory of robot
// descriptions. The description format is ours (docs/profile.md "OLP server: robot store"): URDF, one
// robot per `*.urdf` file, parsed with fast-xml-parser. model_id is the <robot name>, the description
// digest is sha256 over the file's bytes, frames are the link names, driven axes the movable joints
// (revolute, prismatic, continuous) whose limits leave room to move, held axes movable joints whose
// lower and upper limits are equal (held at that value), reset_pose each axis at 0 clamped into its limits.
// A file that cannot be used is a problem of the list, not a failure of the route.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { XMLParser, XMLValidator } from 'fast-xml-parser';

export interface RobotAxis {
  name: string;
  type: string;
  lower_rad: number;
  upper_rad: number;
  velocity_rad_s: number;
}

export interface Robot {
  model_id: string;
  robot_description_sha256: string;
  file: string;
  frames: string[];
  axes: { driven: RobotAxis[]; held: Array<RobotAxis & { held_rad: number }> };
  reset_pose: Record<string, number>;
  urdf: string;
}

export interface RobotStore {
  robots: Robot[];
  problems: Array<{ file: string; problem: string }>;
}

export class StoreUnreadable extends Error {}

const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '', isArray: (name) => name === 'link' || name === 'joint' });
const MOVABLE = new Set(['revolute', 'prismatic', 'continuous']);

/** Parse one URDF text into a robot, or throw with the problem in words. */
export function parseUrdf(text: string, file: string): Robot {
  const valid = XMLValidator.validate(text);
  if (valid !== true) throw new Error(`not well-formed XML: ${valid.err.msg} (line ${valid.err.line})`);
  const doc = parser.parse(text) as { robot?: { name?: string; link?: Array<{ name?: string }>; joint?: Array<Record<string, any>> } };
  const r = doc.robot;
  if (!r || typeof r !== 'object') throw new Error('no <robot> element');
  if (typeof r.name !== 'string' || r.name === '') throw new Error('<robot> has no name (the model id)');
  const frames = (r.link ?? []).map((l) => l.name).filter((n): n is string => typeof n === 'string');
  if (frames.length === 0) throw new Error('no <link>');
  const driven: RobotAxis[] = [];
  const held: Array<RobotAxis & { held_rad: number }> = [];
  const names = new Set<string>();
  for (const j of r.joint ?? []) {
    const name = j.name;
    if (typeof name !== 'string' || name === '') throw new Error('a <joint> has no name');
    if (names.has(name)) throw new Error(`joint ${name} appears twice`);
    names.add(name);
    if (!MOVABLE.has(j.type)) continue;
    const lim = j.limit as Record<string, string> | undefined;
    const lower = Number(lim?.lower ?? (j.type === 'continuous' ? -Math.PI : NaN));
    const upper = Number(lim?.upper ?? (j.type === 'continuous' ? Math.PI : NaN));
    const velocity = Number(lim?.velocity ?? NaN);
    if (![lower, upper, velocity].every(Number.isFinite) || lower > upper) throw new Error(`joint ${name} has no usable <limit lower upper velocity>`);
    const axis = { name, type: String(j.type), lower_rad: lower, upper_rad: upper, velocity_rad_s: velocity };
    if (lower === upper) held.push({ ...axis, held_rad: lower });
    else driven.push(axis);
  }
  if (driven.length === 0) throw new Error('no driven joint');
  const reset_pose: Record<string, number> = {};
  for (const a of driven) reset_pose[a.name] = Math.min(a.upper_rad, Math.max(a.lower_rad, 0));
  for (const a of held) reset_pose[a.name] = a.held_rad;
  return {
    model_id: r.name,
    robot_description_sha256: 'sha256:' + createHash('sha256').update(text).digest('hex'),
    file,
    frames,
    axes: { driven, held },
    reset_pose,
    urdf: text,
  };
}

/** Read the store; StoreUnreadable when the directory itself cannot be read. */
export function readStore(dir: string | undefined): RobotStore {
  if (!dir) throw new StoreUnreadable('no robot store directory configured (--robot-store)');
  let names: string[];
  try {
    if (!statSync(dir).isDirectory()) throw new Error('not a directory');
    names = readdirSync(dir).filter((n) => n.endsWith('.urdf')).sort();
  } catch (e) {
    throw new StoreUnreadable(`robot store ${dir}: ${(e as Error).message}`);
  }
  const robots: Robot[] = [];
  const problems: RobotStore['problems'] = [];
  for (const n of names) {
    try {
      const r = parseUrdf(readFileSync(join(dir, n), 'utf8'), n);
      if (robots.some((x) => x.model_id === r.model_id)) problems.push({ file: n, problem: `model ${r.model_id} is described by another file too` });
      else robots.push(r);
    } catch (e) {
      problems.push({ file: n, problem: (e as Error).message });
    }
  }
  return { robots, problems };
}

/** The public view of a robot (GET /robots). */
export function robotView(r: Robot): Record<string, unknown> {
  return { model_id: r.model_id, robot_description_sha256: r.robot_description_sha256, file: r.file, frames: r.frames, axes: r.axes, reset_pose: r.reset_pose };
}
