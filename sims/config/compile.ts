// Machine configuration compiler (document 3 part 2, "Compiled machine configuration"). A machine JSON
// becomes an immutable directory named by configuration_sha256 holding the identity texts and the files
// the core reads. compileMachine is pure; compileToDirectory does the file I/O (temp dir, then rename).
// Decisions where the document says "not shown" are listed in docs/profile.md.

import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, open, readdir, readFile, rename, rm, chmod } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

import { ConfigError } from './errors.ts';
import { flatten, formatG17, identityText } from './format.ts';
import { canonicalJson } from '../json.ts';
import type { CanonObject, CanonValue } from './format.ts';
import { JsonObject, parseJson } from './json.ts';
import { AXIS_BLOCKS, MACHINE, readObject } from './schema.ts';
import type { CompiledAxis, CompiledMachine, LinkProfile } from './types.ts';

export { ConfigError } from './errors.ts';
export type { ConfigErrorCode } from './errors.ts';

export interface CompileOptions {
  /** Used in error messages only. */
  sourceName?: string;
  /** Returns the bytes of a resource the configuration names (relative path); compileToDirectory reads files beside the machine JSON. */
  readResource?: (name: string) => Uint8Array;
}

export interface CompiledFile {
  /** Relative path inside the compiled directory (`resources/<sha256>` for resources). */
  name: string;
  bytes: Uint8Array;
}

export interface CompileResult {
  machine: Omit<CompiledMachine, 'dir'>;
  /** The identity texts exactly as written; `base` is null without an io block. */
  identity: { configuration: string; base: string | null; machine: string; deployment: string };
  files: CompiledFile[];
}

/** Drive profiles known without a `drives` layer in the machine JSON (profile decision). */
export const BUILTIN_DRIVES: Readonly<Record<string, { vendor_id: bigint; product_code: bigint; dc_quantum_ns: bigint }>> = {
  'sim-ds402': { vendor_id: 0n, product_code: 0n, dc_quantum_ns: 0n },
};

/** Default drive speed limit of a machine whose axes are all flat (document 3 part 2). */
const FLAT_DRIVE_SPEED_LIMIT_RPM = 3000;
/** Document 1 part 8 / document 3 part 2: lease ceiling and jog input age per link profile. */
const CONTROL_DEFAULTS: Record<LinkProfile, { lease: bigint; age: bigint }> = {
  lan: { lease: 500_000_000n, age: 250_000_000n },
  internet: { lease: 3_000_000_000n, age: 750_000_000n },
};
const MAX_RESOURCE_BYTES = 16 * 1024 * 1024;
const I32_MAX = 2 ** 31 - 1;

const sha256 = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');
const utf8 = (s: string) => new TextEncoder().encode(s);

/**
 * Which digest a canonical key feeds besides configuration_sha256. Everything alters motion or drive
 * behaviour (machine) except runtime placement, cell metadata, provenance strings, per-axis diagnostics,
 * the bus hold note and the robot description's file name (deployment). See docs/profile.md.
 */
export function digestOf(key: string): 'machine' | 'deployment' {
  const segs = key.split('.');
  const last = segs[segs.length - 1]!;
  if (segs[0] === 'runtime' || segs[0] === 'cell') return 'deployment';
  if (last.endsWith('_source') || last.endsWith('_unverified')) return 'deployment';
  if (key === 'bus.unknown_slaves_note' || key === 'robot.description') return 'deployment';
  if (segs[0] === 'axes' && segs[2] === 'diagnostics') return 'deployment';
  return 'machine';
}

interface Resolved {
  /** Where the kinematic facts were written (`axes[i]` or `robot.joints[j]`), for error paths. */
  kpath: string;
  /** Where min/max/max_velocity were written. */
  lpath: string;
  k: CanonObject; // kinematic facts
  lim: CanonObject; // min, max, max_velocity, jog_acceleration
  track: CanonObject; // tracking limits
  blocks: CanonObject; // startup, jog, brake, collision_watchdog, diagnostics
  id: string;
  idPath: string;
}

const obj = (v: CanonValue | undefined) => v as CanonObject;
const big = (v: CanonValue | undefined) => v as bigint;
const num = (v: CanonValue | undefined) => v as number;

export function compileMachine(text: string, opts: CompileOptions = {}): CompileResult {
  try {
    return compile(text, opts);
  } catch (e) {
    if (e instanceof ConfigError && opts.sourceName) e.message = `${opts.sourceName}: ${e.message}`;
    throw e;
  }
}

function compile(text: string, opts: CompileOptions): CompileResult {
  const c = readObject(parseJson(text), '', MACHINE);
  const cycle = big(c.cycle_ns);
  const axes = c.axes as CanonObject[];
  const robot = c.robot === undefined ? null : obj(c.robot);
  const drives = c.drives === undefined ? null : obj(c.drives);

  // Axis forms: resolve each axis to the place its facts were written.
  const joints = robot ? (robot.joints as CanonObject[]) : [];
  unique(joints.map((j, i) => [j.id as string, `robot.joints[${i}].id`]), 'robot joint id');
  const resolved: Resolved[] = axes.map((a, i) => {
    if (a.robot_joint === undefined) {
      return { kpath: `axes[${i}]`, lpath: `axes[${i}].limits`, k: a, lim: obj(a.limits), track: obj(a.limits), blocks: a, id: a.name as string, idPath: `axes[${i}].name` };
    }
    const j = joints.findIndex((x) => x.id === a.robot_joint);
    if (j < 0) throw new ConfigError('config_reference', `axes[${i}].robot_joint`, `no robot joint "${String(a.robot_joint)}"${robot ? '' : ' (no robot block)'}`);
    // A robot-bound axis states no startup, jog, brake, watchdog or diagnostics block: it gets their defaults.
    const blocks = readObject(new JsonObject(), `axes[${i}]`, AXIS_BLOCKS);
    return { kpath: `robot.joints[${j}]`, lpath: `robot.joints[${j}]`, k: joints[j]!, lim: joints[j]!, track: obj(a.limits), blocks, id: a.robot_joint as string, idPath: `axes[${i}].robot_joint` };
  });
  unique(resolved.map((r) => [r.id, r.idPath]), 'axis id');

  const robotBound = axes.some((a) => a.robot_joint !== undefined);
  if (robotBound && c.drive_speed_limit_motor_rpm !== undefined) {
    throw new ConfigError('config_forbidden_field', 'drive_speed_limit_motor_rpm', 'forbidden on a machine with robot-bound axes');
  }
  if (!robotBound && c.drive_speed_limit_motor_rpm === undefined) c.drive_speed_limit_motor_rpm = FLAT_DRIVE_SPEED_LIMIT_RPM;
  const rpmLimit = c.drive_speed_limit_motor_rpm === undefined ? null : num(c.drive_speed_limit_motor_rpm);

  // Slave positions are unique across axes, the I/O terminal and the declared unused slaves.
  const bus = obj(c.bus);
  const io = c.io === undefined ? null : obj(c.io);
  unique(
    [
      ...axes.map((a, i): [string, string] => [String(a.slave_position), `axes[${i}].slave_position`]),
      ...(io && io.slave_position !== undefined ? [[String(io.slave_position), 'io.slave_position'] as [string, string]] : []),
      ...(bus.unused_slaves as bigint[]).map((s, i): [string, string] => [String(s), `bus.unused_slaves[${i}]`]),
    ],
    'slave_position',
  );

  const compiledAxes: CompiledAxis[] = resolved.map((r, i) => {
    const a = axes[i]!;
    checkKinematics(r, rpmLimit);
    const profile = r.k.profile as string;
    const drive = (drives && drives[profile] !== undefined ? obj(drives[profile]) : BUILTIN_DRIVES[profile]) as CanonObject | undefined;
    if (!drive) throw new ConfigError('config_reference', `${r.kpath}.profile`, `no drive profile "${profile}" in drives or the built-in profiles`);
    const q = big(drive.dc_quantum_ns);
    if (q !== 0n && cycle % q !== 0n) {
      throw new ConfigError('config_range', 'cycle_ns', `${cycle} is not divisible by the DC quantum ${q} of drive profile "${profile}" (${r.kpath})`);
    }
    a.drive = { vendor_id: big(drive.vendor_id), product_code: big(drive.product_code), dc_quantum_ns: q };
    const jog = obj(r.blocks.jog);
    for (const f of ['arrest_ns', 'quick_stop_ns'] as const) {
      const v = big(jog[f]);
      if (v < cycle || v > 65535n * cycle) throw new ConfigError('config_range', `axes[${i}].jog.${f}`, `${v} outside 1..65535 x cycle_ns (${cycle}..${65535n * cycle})`);
    }
    return viewAxis(i, r, a);
  });

  // control: defaults follow the link profile (document 1 part 8).
  const control = obj(c.control);
  const link = control.link_profile as LinkProfile;
  control.max_grant_lease_ns ??= CONTROL_DEFAULTS[link].lease;
  control.max_jog_input_age_ns ??= CONTROL_DEFAULTS[link].age;
  if (big(control.max_grant_lease_ns) % 1_000_000n !== 0n) throw new ConfigError('config_range', 'control.max_grant_lease_ns', 'must be whole milliseconds');

  if (bus.unknown_slaves === 'hold' && bus.unknown_slaves_note === undefined) throw new ConfigError('config_missing_field', 'bus.unknown_slaves_note', 'unknown_slaves "hold" needs a note');
  if (bus.unknown_slaves === 'refuse' && bus.unknown_slaves_note !== undefined) throw new ConfigError('config_forbidden_field', 'bus.unknown_slaves_note', 'a note belongs only to unknown_slaves "hold"');

  if (io) {
    unique((io.outputs as CanonObject[]).map((o, i) => [o.name as string, `io.outputs[${i}].name`]), 'output name');
    unique((io.inputs as CanonObject[]).map((o, i) => [o.name as string, `io.inputs[${i}].name`]), 'input name');
  }

  const resources = robot ? pinRobotDescription(robot, opts) : [];

  // Identity texts and digests.
  const pairs = flatten(c);
  const configuration = identityText(pairs);
  const machineText = identityText(pairs.filter(([k]) => digestOf(k) === 'machine'));
  const deploymentText = identityText(pairs.filter(([k]) => digestOf(k) === 'deployment'));
  const base = io ? identityText(pairs.filter(([k]) => k.split('.')[0] !== 'io')) : null;
  const configuration_sha256 = sha256(configuration);
  const machine_sha256 = sha256(machineText);
  const deployment_sha256 = sha256(deploymentText);

  const runtime = obj(c.runtime);
  const telemetry = obj(runtime.telemetry);
  const machine: Omit<CompiledMachine, 'dir'> = {
    configuration_sha256,
    machine_sha256,
    deployment_sha256,
    backend: c.backend as CompiledMachine['backend'],
    cycle_ns: cycle,
    max_cycle_lateness_ns: big(c.max_cycle_lateness_ns),
    axes: compiledAxes,
    control: { link_profile: link, max_grant_lease_ns: big(control.max_grant_lease_ns), max_jog_input_age_ns: big(control.max_jog_input_age_ns) },
    runtime: {
      cpu: Number(runtime.cpu),
      priority: Number(runtime.priority),
      telemetry: {
        retention_ms: Number(telemetry.retention_ms),
        dump_count: Number(telemetry.dump_count),
        dump_bytes: Number(telemetry.dump_bytes),
        ...(telemetry.directory !== undefined ? { directory: telemetry.directory as string } : {}),
      },
    },
    io: io
      ? {
          outputs: (io.outputs as CanonObject[]).map((o) => ({ name: o.name as string, torch: o.torch as boolean })),
          inputs: (io.inputs as CanonObject[]).map((o) => ({ name: o.name as string, fast: o.fast as boolean })),
        }
      : null,
    drive_speed_limit_motor_rpm: rpmLimit,
    configuration_base_sha256: base === null ? null : sha256(base),
    robot: robot ? { model_id: robot.model_id as string, description_sha256: (robot.description_sha256 as string | undefined) ?? null } : null,
    bus: {
      io_slave_position: io && io.slave_position !== undefined ? Number(io.slave_position) : null,
      unused_slaves: (bus.unused_slaves as bigint[]).map(Number),
      bringup: {
        explicit_pdo_config: obj(c.bus_bringup).explicit_pdo_config === true,
        disable_output_watchdog: obj(c.bus_bringup).disable_output_watchdog === true,
        no_dc: obj(c.bus_bringup).no_dc === true,
        safeop_op_timeout_ms: Number(obj(c.bus_bringup).safeop_op_timeout_ms),
      },
    },
  };

  const coordinates = compiledAxes.map((ax, i) => coordinateIdentity(ax, resolved[i]!));
  compiledAxes.forEach((ax, i) => (ax.coordinate_sha256 = coordinates[i]!.coordinate_sha256));

  const files: CompiledFile[] = [
    { name: 'argv.json', bytes: utf8(`${canonicalJson(argv(machine, c), 2)}\n`) },
    { name: 'axes.conf', bytes: utf8(axesConf(machine)) },
    { name: 'configuration.identity', bytes: utf8(configuration) },
    ...(base !== null ? [{ name: 'configuration.base.identity', bytes: utf8(base) }] : []),
    { name: 'machine.identity', bytes: utf8(machineText) },
    { name: 'deployment.identity', bytes: utf8(deploymentText) },
    {
      name: 'coordinate.identity.json',
      bytes: utf8(`${canonicalJson({ schema: 'cell.coordinate.identity.v1', axes: coordinates as unknown as CanonValue[] }, 2)}\n`),
    },
    ...(robot && robot.description_sha256 !== undefined ? [{ name: 'robot.json', bytes: utf8(`${canonicalJson(robot, 2)}\n`) }] : []),
    {
      name: 'resources.json',
      bytes: utf8(`${canonicalJson(resources.map((r) => ({ name: r.name, sha256: r.sha256, bytes: BigInt(r.bytes.length) })), 2)}\n`),
    },
    ...resources.map((r) => ({ name: `resources/${r.sha256}`, bytes: r.bytes })),
  ];
  return { machine, identity: { configuration, base, machine: machineText, deployment: deploymentText }, files };
}

function unique(entries: Array<[string, string]>, what: string): void {
  const seen = new Map<string, string>();
  for (const [value, path] of entries) {
    const first = seen.get(value);
    if (first !== undefined) throw new ConfigError('config_duplicate_value', path, `${what} ${value} already used at ${first}`);
    seen.set(value, path);
  }
}

/** counts_per_unit = wire counts per axis revolution over the unit travelled in one axis revolution. */
export function countsPerUnit(k: CanonObject): number {
  const perAxisRev = Number(big(k.wire_counts_per_rev)) * num(k.wire_revs_per_axis_rev);
  return k.type === 'rotary' ? perAxisRev / (2 * Math.PI) : perAxisRev / num(k.lead_m_per_rev);
}

function checkKinematics(r: Resolved, rpmLimit: number | null): void {
  const { k, lim, kpath, lpath } = r;
  if (k.type === 'linear' && k.lead_m_per_rev === undefined) throw new ConfigError('config_missing_field', `${kpath}.lead_m_per_rev`, 'a linear axis needs lead_m_per_rev');
  if (k.type === 'rotary' && k.lead_m_per_rev !== undefined) throw new ConfigError('config_forbidden_field', `${kpath}.lead_m_per_rev`, 'a rotary axis has no lead');
  if (k.gear_ratio !== undefined) {
    const g = obj(k.gear_ratio);
    const ratio = Number(big(g.numerator)) / Number(big(g.denominator));
    const revs = num(k.wire_revs_per_axis_rev);
    if (Math.abs(ratio - revs) > 1e-12 * Math.max(1, revs)) {
      throw new ConfigError('config_inconsistent', `${kpath}.gear_ratio`, `numerator/denominator ${ratio} differs from wire_revs_per_axis_rev ${revs}`);
    }
  }
  const min = num(lim.min);
  const max = num(lim.max);
  if (!(min < max)) throw new ConfigError('config_range', `${lpath}.min`, `min ${min} must be below max ${max}`);
  const cpu = countsPerUnit(k);
  if (k.position_tracking_mode === 'bounded') {
    // Telemetry carries positions as i32 drive counts (document 1, CycleCaptureAxisV2).
    for (const f of ['min', 'max'] as const) {
      if (Math.abs(num(lim[f])) * cpu > I32_MAX) throw new ConfigError('config_range', `${lpath}.${f}`, `${num(lim[f])} is beyond the i32 count range at ${cpu} counts per unit`);
    }
  }
  if (rpmLimit !== null) {
    const revsPerSecond = k.type === 'rotary' ? num(lim.max_velocity) / (2 * Math.PI) : num(lim.max_velocity) / num(k.lead_m_per_rev);
    const rpm = revsPerSecond * num(k.wire_revs_per_axis_rev) * 60;
    if (rpm > rpmLimit) throw new ConfigError('config_range', `${lpath}.max_velocity`, `needs ${rpm.toFixed(1)} motor rpm, above drive_speed_limit_motor_rpm ${rpmLimit}`);
  }
}

function viewAxis(index: number, r: Resolved, a: CanonObject): CompiledAxis {
  const { k, lim, track, blocks } = r;
  const startup = obj(blocks.startup);
  const jog = obj(blocks.jog);
  const nativeFlag = r.kpath.startsWith('robot') ? k.native_home : startup.native_home;
  const drive = obj(a.drive);
  const brake = obj(blocks.brake);
  const watchdog = obj(blocks.collision_watchdog);
  return {
    index,
    id: r.id,
    type: k.type as CompiledAxis['type'],
    position_unit: k.type === 'rotary' ? 'rad' : 'm',
    slave_position: Number(a.slave_position),
    min_position: num(lim.min),
    max_position: num(lim.max),
    max_velocity: num(lim.max_velocity),
    ...(k.max_acceleration !== undefined ? { max_acceleration: num(k.max_acceleration) } : {}),
    jog_acceleration: num(lim.jog_acceleration),
    following_error: num(track.following_error),
    following_error_timeout_ms: Number(track.following_error_timeout_ms),
    completion_tolerance: num(track.completion_tolerance),
    completion_timeout_ms: Number(track.completion_timeout_ms),
    max_target_lead: num(track.max_target_lead),
    native_home: (nativeFlag as boolean | undefined) ?? (k.require_home as boolean),
    require_home: k.require_home as boolean,
    counts_per_unit: countsPerUnit(k),
    sign: Number(k.sign) as 1 | -1,
    coordinate_evidence_mode: k.coordinate_evidence_mode as CompiledAxis['coordinate_evidence_mode'],
    jog_arrest_ns: big(jog.arrest_ns),
    jog_quick_stop_ns: big(jog.quick_stop_ns),
    position_tracking_mode: k.position_tracking_mode as 'bounded' | 'continuous',
    drive: { profile: k.profile as string, vendor_id: Number(drive.vendor_id), product_code: Number(drive.product_code), dc_quantum_ns: big(drive.dc_quantum_ns) },
    home_method: Number(startup.home_method),
    home_offset: num(startup.home_offset),
    brake: { present: brake.present as boolean, release_delay_ms: Number(brake.release_delay_ms), engage_delay_ms: Number(brake.engage_delay_ms) },
    collision_watchdog: {
      enabled: watchdog.enabled as boolean,
      torque_permille: Number(watchdog.torque_permille),
      torque_cycles: Number(watchdog.torque_cycles),
      following_error_cycles: Number(watchdog.following_error_cycles),
    },
    diagnostics_extended: obj(blocks.diagnostics).extended as boolean,
  };
}

/** What fixes an axis's coordinate: anchors are refused when it changes (document 1, restore_anchor). */
function coordinateIdentity(ax: CompiledAxis, r: Resolved): { index: bigint; id: string; coordinate_sha256: string; identity: string[] } {
  const k = r.k;
  const tree: CanonObject = {
    id: ax.id,
    slave_position: BigInt(ax.slave_position),
    type: ax.type,
    position_unit: ax.position_unit,
    sign: BigInt(ax.sign),
    wire_counts_per_rev: big(k.wire_counts_per_rev),
    motor_encoder_counts_per_rev: big(k.motor_encoder_counts_per_rev),
    wire_revs_per_axis_rev: num(k.wire_revs_per_axis_rev),
    coordinate_evidence_mode: ax.coordinate_evidence_mode,
    position_tracking_mode: k.position_tracking_mode as string,
    home_method: BigInt(ax.home_method!),
    home_offset: ax.home_offset!,
    drive: { vendor_id: BigInt(ax.drive!.vendor_id), product_code: BigInt(ax.drive!.product_code) },
  };
  if (k.gear_ratio !== undefined) tree.gear_ratio = k.gear_ratio;
  if (k.lead_m_per_rev !== undefined) tree.lead_m_per_rev = k.lead_m_per_rev;
  const text = identityText(flatten(tree));
  return { index: BigInt(ax.index), id: ax.id, coordinate_sha256: sha256(text), identity: text.trimEnd().split('\n') };
}

function pinRobotDescription(robot: CanonObject, opts: CompileOptions): Array<{ name: string; sha256: string; bytes: Uint8Array }> {
  if (robot.description === undefined) return [];
  const name = robot.description as string;
  if (name.startsWith('/') || name.split('/').some((s) => s === '' || s === '.' || s === '..')) {
    throw new ConfigError('config_resource', 'robot.description', `"${name}" must be a relative path without . or .. segments`);
  }
  if (!opts.readResource) throw new ConfigError('config_resource', 'robot.description', 'no resource reader given to the compiler');
  let bytes: Uint8Array;
  try {
    bytes = opts.readResource(name);
  } catch (e) {
    throw new ConfigError('config_resource', 'robot.description', `cannot read "${name}": ${(e as Error).message}`);
  }
  if (bytes.length > MAX_RESOURCE_BYTES) throw new ConfigError('config_resource', 'robot.description', `larger than ${MAX_RESOURCE_BYTES} bytes`);
  const digest = sha256(bytes);
  if (robot.description_sha256 !== undefined && robot.description_sha256 !== `sha256:${digest}`) {
    throw new ConfigError('config_resource', 'robot.description_sha256', `pinned ${String(robot.description_sha256)} but the file has sha256:${digest}`);
  }
  robot.description_sha256 = `sha256:${digest}`;
  return [{ name, sha256: digest, bytes }];
}

/** Core command line; paths are relative to the compiled directory. Pair id and revision are service flags. */
function argv(m: Omit<CompiledMachine, 'dir'>, c: CanonObject): string[] {
  const t = m.runtime.telemetry;
  const bb = obj(c.bus_bringup);
  const bus = obj(c.bus);
  return [
    `--backend=${m.backend}`,
    `--cycle-ns=${m.cycle_ns}`,
    `--max-cycle-lateness-ns=${m.max_cycle_lateness_ns}`,
    `--cpu=${m.runtime.cpu}`,
    `--priority=${m.runtime.priority}`,
    `--axes=axes.conf`,
    `--configuration-sha256=${m.configuration_sha256}`,
    `--machine-sha256=${m.machine_sha256}`,
    `--deployment-sha256=${m.deployment_sha256}`,
    `--link-profile=${m.control.link_profile}`,
    `--max-grant-lease-ns=${m.control.max_grant_lease_ns}`,
    `--max-jog-input-age-ns=${m.control.max_jog_input_age_ns}`,
    ...(m.drive_speed_limit_motor_rpm !== null && m.drive_speed_limit_motor_rpm !== undefined ? [`--drive-speed-limit-motor-rpm=${formatG17(m.drive_speed_limit_motor_rpm)}`] : []),
    `--telemetry-retention-ms=${t.retention_ms}`,
    `--telemetry-dump-count=${t.dump_count}`,
    `--telemetry-dump-bytes=${t.dump_bytes}`,
    ...(t.directory !== undefined ? [`--telemetry-directory=${t.directory}`] : []),
    `--unknown-slaves=${String(bus.unknown_slaves)}`,
    ...(bus.unused_slaves as bigint[]).map((s) => `--unused-slave=${s}`),
    ...Object.keys(bb)
      .sort()
      .map((key) => `--bus-${key.replaceAll('_', '-')}=${String(bb[key])}`),
    ...(m.io
      ? [...m.io.outputs.map((o) => `--io-output=${o.name}${o.torch ? ':torch' : ''}`), ...m.io.inputs.map((i) => `--io-input=${i.name}${i.fast ? ':fast' : ''}`)]
      : []),
    ...(c.io !== undefined && obj(c.io).slave_position !== undefined ? [`--io-slave=${String(obj(c.io).slave_position)}`] : []),
  ];
}

/** One axis per line: space-separated key=value tokens, doubles in %.17g, booleans 0/1 (profile format). */
function axesConf(m: Omit<CompiledMachine, 'dir'>): string {
  const g = formatG17;
  const b = (x: boolean) => (x ? '1' : '0');
  const lines = m.axes.map((a) =>
    [
      `index=${a.index}`,
      `id=${a.id}`,
      `slave=${a.slave_position}`,
      `type=${a.type}`,
      `unit=${a.position_unit}`,
      `counts_per_unit=${g(a.counts_per_unit)}`,
      `sign=${a.sign}`,
      `min=${g(a.min_position)}`,
      `max=${g(a.max_position)}`,
      `max_velocity=${g(a.max_velocity)}`,
      `max_acceleration=${a.max_acceleration === undefined ? 'none' : g(a.max_acceleration)}`,
      `jog_acceleration=${g(a.jog_acceleration)}`,
      `max_target_lead=${g(a.max_target_lead)}`,
      `following_error=${g(a.following_error)}`,
      `following_error_timeout_ms=${a.following_error_timeout_ms}`,
      `completion_tolerance=${g(a.completion_tolerance)}`,
      `completion_timeout_ms=${a.completion_timeout_ms}`,
      `require_home=${b(a.require_home)}`,
      `native_home=${b(a.native_home)}`,
      `evidence=${a.coordinate_evidence_mode}`,
      `tracking=${a.position_tracking_mode}`,
      `jog_arrest_ns=${a.jog_arrest_ns}`,
      `jog_quick_stop_ns=${a.jog_quick_stop_ns}`,
      `drive_profile=${a.drive!.profile}`,
      `vendor_id=${a.drive!.vendor_id}`,
      `product_code=${a.drive!.product_code}`,
      `dc_quantum_ns=${a.drive!.dc_quantum_ns}`,
      `home_method=${a.home_method}`,
      `home_offset=${g(a.home_offset!)}`,
      `brake=${b(a.brake!.present)}`,
      `brake_release_delay_ms=${a.brake!.release_delay_ms}`,
      `brake_engage_delay_ms=${a.brake!.engage_delay_ms}`,
      `collision_watchdog=${b(a.collision_watchdog!.enabled)}`,
      `collision_torque_permille=${a.collision_watchdog!.torque_permille}`,
      `collision_torque_cycles=${a.collision_watchdog!.torque_cycles}`,
      `collision_following_error_cycles=${a.collision_watchdog!.following_error_cycles}`,
      `diagnostics_extended=${b(a.diagnostics_extended!)}`,
      `coordinate_sha256=${a.coordinate_sha256}`,
    ].join(' '),
  );
  return `# axes.conf 1 count=${m.axes.length} cycle_ns=${m.cycle_ns}\n${lines.map((l) => `${l}\n`).join('')}`;
}

/**
 * compileMachine is pure: the same machine text with the same bytes in every resource it reads gives the
 * same result (the file's name only appears in a refusal's message). A process that starts many stacks (a
 * stack host, sims/sessions.ts: a session per test file, most with the same fixture or a copy of it)
 * compiles each machine text once and reuses the result while every resource it read, looked up beside the
 * file now compiled, has the same bytes (each is read again and compared, so a changed or missing robot
 * description compiles anew). A refused machine is never kept: it is compiled, and refused, each time.
 */
const COMPILED_KEPT = 8;
const compiled = new Map<string, { result: CompileResult; resources: Array<{ name: string; bytes: Uint8Array }> }>();

function compiledOnce(file: string, base: string, text: string): CompileResult {
  const kept = compiled.get(text);
  if (kept && kept.resources.every((r) => sameBytes(join(base, r.name), r.bytes))) {
    compiled.delete(text);
    compiled.set(text, kept); // most recently used last
    return cloneResult(kept.result);
  }
  const resources: Array<{ name: string; bytes: Uint8Array }> = [];
  const result = compileMachine(text, {
    sourceName: file,
    readResource: (name) => {
      const bytes = readFileSync(join(base, name));
      resources.push({ name, bytes });
      return bytes;
    },
  });
  compiled.delete(text);
  compiled.set(text, { result: cloneResult(result), resources });
  while (compiled.size > COMPILED_KEPT) compiled.delete(compiled.keys().next().value!);
  return result;
}

/** Each caller gets objects of its own (the kept result is never handed out). */
function cloneResult(r: CompileResult): CompileResult {
  return structuredClone(r);
}

function sameBytes(path: string, bytes: Uint8Array): boolean {
  try {
    return Buffer.compare(readFileSync(path), bytes) === 0;
  } catch {
    return false;
  }
}

/** Compile `file` into `<outRoot>/<configuration_sha256>/`, reusing an identical existing directory. */
export async function compileToDirectory(file: string, outRoot: string): Promise<CompiledMachine> {
  const raw = await readFile(file);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(raw); // a BOM stays and is refused as syntax
  } catch {
    throw new ConfigError('config_syntax', '', `${file} is not UTF-8`);
  }
  const base = dirname(resolve(file));
  const result = compiledOnce(file, base, text);
  const root = resolve(outRoot);
  const dir = join(root, result.machine.configuration_sha256);
  await mkdir(root, { recursive: true });

  if (await sameContent(dir, result.files)) return { ...result.machine, dir };
  const tmp = await mkdtemp(join(root, `.tmp-${result.machine.configuration_sha256.slice(0, 12)}-`));
  try {
    for (const f of result.files) {
      const path = join(tmp, f.name);
      await mkdir(dirname(path), { recursive: true });
      const fh = await open(path, 'wx', 0o644);
      try {
        await fh.writeFile(f.bytes);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await chmod(path, 0o444);
    }
    try {
      await rename(tmp, dir);
    } catch (e) {
      // Another compiler won the race (or a stale directory exists): reuse only identical content.
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST' && code !== 'ENOTEMPTY' && code !== 'EPERM') throw e;
      if (!(await sameContent(dir, result.files))) {
        throw new ConfigError('config_directory_conflict', '', `${dir} exists with different content`);
      }
    }
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return { ...result.machine, dir };
}

/** Convenience for the service and core: compile (or reuse) and return the view. */
export async function loadMachine(file: string, cacheRoot: string): Promise<CompiledMachine> {
  return compileToDirectory(file, cacheRoot);
}

/** True when `dir` holds exactly `files`; false when it does not exist; a conflict error otherwise. */
async function sameContent(dir: string, files: CompiledFile[]): Promise<boolean> {
  let present: string[];
  try {
    present = await listFiles(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
  const want = new Map(files.map((f) => [f.name, f.bytes]));
  const same =
    present.length === want.size &&
    (await Promise.all(present.map(async (name) => {
      const bytes = want.get(name);
      return bytes !== undefined && Buffer.compare(await readFile(join(dir, name)), bytes) === 0;
    }))).every(Boolean);
  if (!same) throw new ConfigError('config_directory_conflict', '', `${dir} exists with different content`);
  return true;
}

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await listFiles(join(dir, e.name), rel)));
    else out.push(rel);
  }
  return out;
}
