// Machine configuration compiler (document 3 part 2). Ranges, defaults, the three digests and the file
// list are contract; shapes marked "not shown" are profile decisions (docs/profile.md).

import { test, expect } from 'vitest';
import fc from 'fast-check';
import { mkdtemp, readFile, readdir, rm, stat, writeFile, chmod, mkdir } from 'node:fs/promises';
import { existsSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { compileMachine, compileToDirectory, ConfigError, loadMachine } from './compile.ts';
import type { CompileResult } from './compile.ts';
import { formatG17 } from './format.ts';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '../../fixtures/machines');
const FIXTURE_NAMES = ['nine-axis', 'bench-two-axis'] as const;
const fixtureText = (name: string) => readFileSync(join(FIXTURES, `${name}.json`), 'utf8');
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;
const fixture = (name: string): Doc => JSON.parse(fixtureText(name));
const compileDoc = (doc: Doc): CompileResult => compileMachine(JSON.stringify(doc));
const digests = (r: CompileResult) => ({
  configuration: r.machine.configuration_sha256,
  machine: r.machine.machine_sha256,
  deployment: r.machine.deployment_sha256,
});

function refusal(fn: () => unknown): { code: string; path: string } {
  try {
    fn();
  } catch (e) {
    if (e instanceof ConfigError) return { code: e.code, path: e.path };
    throw e;
  }
  throw new Error('compiled without refusal');
}

// A machine with six robot-bound axes and one flat positioner axis; every robot fact carries provenance.
function robotMachine(): Doc {
  const src = (o: Record<string, unknown>) => {
    const out: Record<string, unknown> = { ...o };
    for (const [k, v] of Object.entries(o)) if (typeof v === 'number') out[`${k}_source`] = 'vendor datasheet rev C';
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
  const bench = fixture('bench-two-axis');
  return {
    schema_version: 1,
    cycle_ns: 1000000,
    max_cycle_lateness_ns: 500000,
    robot: { model_id: 'arm-6', joints },
    axes: [
      ...joints.map((j, i) => ({
        robot_joint: j.id,
        slave_position: i,
        limits: src({ max_target_lead: 0.05, following_error: 0.01, following_error_timeout_ms: 50, completion_tolerance: 0.001, completion_timeout_ms: 2000 }),
      })),
      { ...bench.axes[0], name: 'J7', slave_position: 6, profile: 'sim-ds402' },
    ],
    runtime: { cpu: 3, priority: 80 },
  };
}

// ---------------------------------------------------------------------------------------------- golden

const UPDATE = process.env.UPDATE_GOLDEN === '1';

test.each(FIXTURE_NAMES)('golden files and digests of %s', (name) => {
  const r = compileMachine(fixtureText(name));
  const dir = join(FIXTURES, 'expected', name);
  const produced = new Map<string, string>(r.files.filter((f) => !f.name.startsWith('resources/')).map((f) => [f.name, new TextDecoder().decode(f.bytes)]));
  produced.set('digests.json', `${JSON.stringify({ configuration_sha256: r.machine.configuration_sha256, machine_sha256: r.machine.machine_sha256, deployment_sha256: r.machine.deployment_sha256, configuration_base_sha256: r.machine.configuration_base_sha256 ?? null }, null, 2)}\n`);
  if (UPDATE) {
    mkdirSync(dir, { recursive: true });
    for (const [file, text] of produced) writeFileSync(join(dir, file), text);
  }
  for (const [file, text] of produced) expect(text, `${name}/${file}`).toBe(readFileSync(join(dir, file), 'utf8'));
  expect(r.identity.configuration).toBe(produced.get('configuration.identity'));
});

test('nine-axis fixture: view, io, identity layout', () => {
  const r = compileMachine(fixtureText('nine-axis'));
  const m = r.machine;
  expect(m.axes.map((a) => a.id)).toEqual(['J1', 'J2', 'J3', 'J4', 'J5', 'J6', 'J7', 'J8', 'J9']);
  expect(m.axes.every((a) => a.require_home && a.native_home && a.position_unit === 'rad')).toBe(true);
  expect(m.cycle_ns).toBe(1000000n);
  expect(m.control).toEqual({ link_profile: 'lan', max_grant_lease_ns: 500000000n, max_jog_input_age_ns: 250000000n });
  expect(m.io?.outputs).toEqual([
    { name: 'torch', torch: true },
    { name: 'clamp', torch: false },
    { name: 'gas_purge', torch: false },
  ]);
  expect(m.io?.inputs.filter((i) => i.fast).map((i) => i.name)).toEqual(['arc_ok']);
  expect(m.axes[0]!.counts_per_unit).toBe((1048576 * 121) / (2 * Math.PI));
  expect(r.files.map((f) => f.name)).toEqual([
    'argv.json',
    'axes.conf',
    'configuration.identity',
    'configuration.base.identity',
    'machine.identity',
    'deployment.identity',
    'coordinate.identity.json',
    'resources.json',
  ]);
  expect(r.identity.configuration).toContain('axes.0.limits.max=2.8999999999999999\n');
  expect(r.identity.base).not.toMatch(/^io\./m);
  // configuration = machine lines + deployment lines, nothing else
  const lines = (t: string) => t.split('\n').filter(Boolean);
  expect(lines(r.identity.configuration).sort()).toEqual([...lines(r.identity.machine), ...lines(r.identity.deployment)].sort());
});

test('bench fixture: linear counts, native home without require_home, no io files', () => {
  const r = compileMachine(fixtureText('bench-two-axis'));
  const x1 = r.machine.axes[1]!;
  expect(x1).toMatchObject({ id: 'X1', type: 'linear', position_unit: 'm', sign: -1, require_home: false, native_home: true });
  expect(x1.counts_per_unit).toBe((131072 * 1) / 0.01);
  expect(r.machine.io).toBeNull();
  expect(r.identity.base).toBeNull();
  expect(r.files.some((f) => f.name === 'configuration.base.identity')).toBe(false);
  expect(r.machine.drive_speed_limit_motor_rpm).toBe(3000);
});

test('robot-bound machine: facts from the robot block, no drive speed limit', () => {
  const r = compileDoc(robotMachine());
  expect(r.machine.axes).toHaveLength(7);
  expect(r.machine.axes[1]).toMatchObject({ id: 'J2', sign: -1, min_position: -2.5, max_position: 2.5, following_error: 0.01, native_home: true });
  expect(r.machine.drive_speed_limit_motor_rpm).toBeNull();
  expect(r.identity.deployment).toContain('robot.joints.0.max_source="vendor datasheet rev C"\n');
  expect(r.identity.machine).not.toContain('_source');
  expect(r.files.some((f) => f.name === 'robot.json')).toBe(false); // no description pinned
});

// ---------------------------------------------------------------------------------------------- refusals

type Case = [string, (d: Doc) => void, string, string];
const set = (path: string, value: unknown) => (d: Doc) => {
  const keys = path.split('.');
  let o = d;
  for (const k of keys.slice(0, -1)) o = o[k] ??= {};
  if (value === undefined) delete o[keys.at(-1)!];
  else o[keys.at(-1)!] = value;
};

const BENCH_CASES: Case[] = [
  ['schema_version 2', set('schema_version', 2), 'config_range', 'schema_version'],
  ['schema_version missing', set('schema_version', undefined), 'config_missing_field', 'schema_version'],
  ['backend unknown', set('backend', 'hybrid'), 'config_range', 'backend'],
  ['cycle_ns below', set('cycle_ns', 249999), 'config_range', 'cycle_ns'],
  ['cycle_ns above', set('cycle_ns', 10000001), 'config_range', 'cycle_ns'],
  ['cycle_ns fraction', set('cycle_ns', 2000000.5), 'config_type', 'cycle_ns'],
  ['cycle_ns string', set('cycle_ns', '2000000'), 'config_type', 'cycle_ns'],
  ['cycle_ns missing', set('cycle_ns', undefined), 'config_missing_field', 'cycle_ns'],
  ['cycle_ns not divisible by DC quantum', set('cycle_ns', 2125000), 'config_range', 'cycle_ns'],
  ['lateness 0', set('max_cycle_lateness_ns', 0), 'config_range', 'max_cycle_lateness_ns'],
  ['lateness above', set('max_cycle_lateness_ns', 250000000), 'config_range', 'max_cycle_lateness_ns'],
  ['lateness missing', set('max_cycle_lateness_ns', undefined), 'config_missing_field', 'max_cycle_lateness_ns'],
  ['axes empty', set('axes', []), 'config_range', 'axes'],
  ['axes 17', (d) => (d.axes = Array.from({ length: 17 }, (_, i) => ({ ...d.axes[0], name: `A${i}`, slave_position: i }))), 'config_range', 'axes'],
  ['axes missing', set('axes', undefined), 'config_missing_field', 'axes'],
  ['rpm 0', set('drive_speed_limit_motor_rpm', 0), 'config_range', 'drive_speed_limit_motor_rpm'],
  ['rpm 6001', set('drive_speed_limit_motor_rpm', 6001), 'config_range', 'drive_speed_limit_motor_rpm'],
  ['rpm too low for max_velocity', set('drive_speed_limit_motor_rpm', 500), 'config_range', 'axes[0].limits.max_velocity'],
  ['runtime missing', set('runtime', undefined), 'config_missing_field', 'runtime'],
  ['cpu 1024', set('runtime.cpu', 1024), 'config_range', 'runtime.cpu'],
  ['cpu -1', set('runtime.cpu', -1), 'config_range', 'runtime.cpu'],
  ['priority 0', set('runtime.priority', 0), 'config_range', 'runtime.priority'],
  ['priority 100', set('runtime.priority', 100), 'config_range', 'runtime.priority'],
  ['retention 99', set('runtime.telemetry.retention_ms', 99), 'config_range', 'runtime.telemetry.retention_ms'],
  ['retention 3600001', set('runtime.telemetry.retention_ms', 3600001), 'config_range', 'runtime.telemetry.retention_ms'],
  ['dump_count 0', set('runtime.telemetry.dump_count', 0), 'config_range', 'runtime.telemetry.dump_count'],
  ['dump_count 101', set('runtime.telemetry.dump_count', 101), 'config_range', 'runtime.telemetry.dump_count'],
  ['dump_bytes 529679', set('runtime.telemetry.dump_bytes', 529679), 'config_range', 'runtime.telemetry.dump_bytes'],
  ['telemetry unknown', set('runtime.telemetry.colour', 1), 'config_unknown_field', 'runtime.telemetry.colour'],
  ['slave 65536', set('axes.1.slave_position', 65536), 'config_range', 'axes[1].slave_position'],
  ['slave duplicate', set('axes.1.slave_position', 0), 'config_duplicate_value', 'axes[1].slave_position'],
  ['unused slave collides', set('bus.unused_slaves', [1]), 'config_duplicate_value', 'bus.unused_slaves[0]'],
  ['axis name duplicate', set('axes.1.name', 'R1'), 'config_duplicate_value', 'axes[1].name'],
  ['sign 0', set('axes.0.sign', 0), 'config_range', 'axes[0].sign'],
  ['sign 2', set('axes.0.sign', 2), 'config_range', 'axes[0].sign'],
  ['type angular', set('axes.0.type', 'angular'), 'config_range', 'axes[0].type'],
  ['evidence mode', set('axes.0.coordinate_evidence_mode', 'absolute'), 'config_range', 'axes[0].coordinate_evidence_mode'],
  ['tracking mode', set('axes.0.position_tracking_mode', 'wrapped'), 'config_range', 'axes[0].position_tracking_mode'],
  ['wire counts 0', set('axes.0.wire_counts_per_rev', 0), 'config_range', 'axes[0].wire_counts_per_rev'],
  ['wire revs 0', set('axes.0.wire_revs_per_axis_rev', 0), 'config_range', 'axes[0].wire_revs_per_axis_rev'],
  ['linear without lead', set('axes.1.lead_m_per_rev', undefined), 'config_missing_field', 'axes[1].lead_m_per_rev'],
  ['rotary with lead', set('axes.0.lead_m_per_rev', 0.01), 'config_forbidden_field', 'axes[0].lead_m_per_rev'],
  ['gear ratio disagrees', set('axes.0.gear_ratio', { numerator: 11, denominator: 1 }), 'config_inconsistent', 'axes[0].gear_ratio'],
  ['unknown profile', set('axes.0.profile', 'nope'), 'config_reference', 'axes[0].profile'],
  ['min >= max', set('axes.0.limits.min', 3.1), 'config_range', 'axes[0].limits.min'],
  ['max beyond i32 counts', set('axes.0.limits.max', 1e6), 'config_range', 'axes[0].limits.max'],
  ['max_velocity 0', set('axes.0.limits.max_velocity', 0), 'config_range', 'axes[0].limits.max_velocity'],
  ['max_velocity missing', set('axes.0.limits.max_velocity', undefined), 'config_missing_field', 'axes[0].limits.max_velocity'],
  ['following_error negative', set('axes.0.limits.following_error', -0.1), 'config_range', 'axes[0].limits.following_error'],
  ['fe timeout 0', set('axes.0.limits.following_error_timeout_ms', 0), 'config_range', 'axes[0].limits.following_error_timeout_ms'],
  ['fe timeout 1001', set('axes.0.limits.following_error_timeout_ms', 1001), 'config_range', 'axes[0].limits.following_error_timeout_ms'],
  ['completion timeout 0', set('axes.0.limits.completion_timeout_ms', 0), 'config_range', 'axes[0].limits.completion_timeout_ms'],
  ['completion timeout 2^32', set('axes.0.limits.completion_timeout_ms', 4294967296), 'config_range', 'axes[0].limits.completion_timeout_ms'],
  ['limits unknown key', set('axes.0.limits.maxx', 1), 'config_unknown_field', 'axes[0].limits.maxx'],
  ['max_acceleration 0', set('axes.1.max_acceleration', 0), 'config_range', 'axes[1].max_acceleration'],
  ['arrest below cycle', set('axes.0.jog.arrest_ns', 1999999), 'config_range', 'axes[0].jog.arrest_ns'],
  ['quick stop above 65535 cycles', set('axes.0.jog.quick_stop_ns', 65535 * 2000000 + 1), 'config_range', 'axes[0].jog.quick_stop_ns'],
  ['quick stop 0', set('axes.0.jog.quick_stop_ns', 0), 'config_range', 'axes[0].jog.quick_stop_ns'],
  ['home_method 128', set('axes.0.startup.home_method', 128), 'config_range', 'axes[0].startup.home_method'],
  ['brake delay', set('axes.0.brake.release_delay_ms', 10001), 'config_range', 'axes[0].brake.release_delay_ms'],
  ['watchdog permille', set('axes.0.collision_watchdog.torque_permille', 0), 'config_range', 'axes[0].collision_watchdog.torque_permille'],
  ['link profile', set('control.link_profile', 'wan'), 'config_range', 'control.link_profile'],
  ['lease below', set('control.max_grant_lease_ns', 999999), 'config_range', 'control.max_grant_lease_ns'],
  ['lease above', set('control.max_grant_lease_ns', 10000000001), 'config_range', 'control.max_grant_lease_ns'],
  ['lease not whole ms', set('control.max_grant_lease_ns', 1500001), 'config_range', 'control.max_grant_lease_ns'],
  ['input age 0', set('control.max_jog_input_age_ns', 0), 'config_range', 'control.max_jog_input_age_ns'],
  ['input age above', set('control.max_jog_input_age_ns', 2000000001), 'config_range', 'control.max_jog_input_age_ns'],
  ['unknown_slaves', set('bus.unknown_slaves', 'ignore'), 'config_range', 'bus.unknown_slaves'],
  ['hold without note', set('bus.unknown_slaves', 'hold'), 'config_missing_field', 'bus.unknown_slaves_note'],
  ['note with refuse', set('bus.unknown_slaves_note', 'x'), 'config_forbidden_field', 'bus.unknown_slaves_note'],
  ['unused slaves 257', set('bus.unused_slaves', Array.from({ length: 257 }, (_, i) => 100 + i)), 'config_range', 'bus.unused_slaves'],
  ['bringup bool', set('bus_bringup.no_dc', 'yes'), 'config_type', 'bus_bringup.no_dc'],
  ['bringup timeout 0', set('bus_bringup.safeop_op_timeout_ms', 0), 'config_range', 'bus_bringup.safeop_op_timeout_ms'],
  ['bringup unknown', set('bus_bringup.turbo', true), 'config_unknown_field', 'bus_bringup.turbo'],
  ['io duplicate output', set('io', { outputs: [{ name: 'torch', torch: true }, { name: 'torch' }] }), 'config_duplicate_value', 'io.outputs[1].name'],
  ['io 33 outputs', set('io', { outputs: Array.from({ length: 33 }, (_, i) => ({ name: `o${i}` })) }), 'config_range', 'io.outputs'],
  ['io bad name', set('io', { inputs: [{ name: 'Arc OK' }] }), 'config_range', 'io.inputs[0].name'],
  ['io slave collides', set('io', { slave_position: 2 }), 'config_duplicate_value', 'bus.unused_slaves[0]'],
  ['drive quantum range', set('drives.bench-servo.dc_quantum_ns', 10000001), 'config_range', 'drives.bench-servo.dc_quantum_ns'],
  ['unknown top-level', set('colour', 'red'), 'config_unknown_field', 'colour'],
  ['provenance sibling without field', set('axes.0.max_acceleration_source', 'x'), 'config_unknown_field', 'axes[0].max_acceleration_source'],
];

test.each(BENCH_CASES)('refuses %s', (_label, mutate, code, path) => {
  const doc = fixture('bench-two-axis');
  mutate(doc);
  expect(refusal(() => compileDoc(doc))).toEqual({ code, path });
});

const ROBOT_CASES: Case[] = [
  ['joint fact without provenance', set('robot.joints.0.min_source', undefined), 'config_provenance_missing', 'robot.joints[0].min'],
  ['nested gear fact without provenance', (d) => delete d.robot.joints[2].gear_ratio.numerator_source, 'config_provenance_missing', 'robot.joints[2].gear_ratio.numerator'],
  ['tracking limit without provenance', (d) => delete d.axes[3].limits.following_error_source, 'config_provenance_missing', 'axes[3].limits.following_error'],
  ['drive speed limit forbidden', set('drive_speed_limit_motor_rpm', 3000), 'config_forbidden_field', 'drive_speed_limit_motor_rpm'],
  ['kinematic limit on a robot-bound axis', (d) => ((d.axes[0].limits.max = 1), (d.axes[0].limits.max_source = 'x')), 'config_forbidden_field', 'axes[0].limits.max'],
  ['unknown robot joint', (d) => (d.axes[0].robot_joint = 'J9'), 'config_reference', 'axes[0].robot_joint'],
  ['joint bound twice', (d) => (d.axes[1].robot_joint = 'J1'), 'config_duplicate_value', 'axes[1].robot_joint'],
  ['no robot block', set('robot', undefined), 'config_reference', 'axes[0].robot_joint'],
  ['description digest malformed', set('robot.description_sha256', 'abc'), 'config_range', 'robot.description_sha256'],
  ['description without reader', set('robot.description', 'arm.urdf'), 'config_resource', 'robot.description'],
  ['description path escapes', set('robot.description', '../arm.urdf'), 'config_resource', 'robot.description'],
];

test('an _unverified sibling is provenance too', () => {
  const doc = robotMachine();
  delete doc.axes[3].limits.following_error_source;
  doc.axes[3].limits.following_error_unverified = 'estimated from the previous cell';
  const r = compileDoc(doc);
  expect(r.identity.deployment).toContain('axes.3.limits.following_error_unverified="estimated from the previous cell"\n');
  expect(r.machine.machine_sha256).toBe(compileDoc(robotMachine()).machine.machine_sha256);
});

test.each(ROBOT_CASES)('refuses robot-bound %s', (_label, mutate, code, path) => {
  const doc = robotMachine();
  mutate(doc);
  expect(refusal(() => compileDoc(doc))).toEqual({ code, path });
});

test.each([
  ['duplicate key', (t: string) => t.replace('"max": 3.1,', '"max": 3.1, "max": 3.2,'), 'config_duplicate_field', 'axes[0].limits.max'],
  ['duplicate top-level key', (t: string) => t.replace('"cycle_ns": 2000000,', '"cycle_ns": 2000000, "cycle_ns": 2000000,'), 'config_duplicate_field', 'cycle_ns'],
  ['trailing data', (t: string) => `${t} {}`, 'config_syntax', ''],
  ['comment', (t: string) => `// c\n${t}`, 'config_syntax', ''],
  ['cycle_ns exponent', (t: string) => t.replace('"cycle_ns": 2000000', '"cycle_ns": 2e6'), 'config_type', 'cycle_ns'],
  // integers are compared exactly as bigint, never through a double
  ['cycle_ns above 2^53', (t: string) => t.replace('"cycle_ns": 2000000', '"cycle_ns": 9007199256740993'), 'config_range', 'cycle_ns'],
  ['lease far beyond uint64', (t: string) => t.replace('"runtime"', '"control": {"max_grant_lease_ns": 184467440737095516150000}, "runtime"'), 'config_range', 'control.max_grant_lease_ns'],
  ['root not an object', () => '[1]', 'config_type', ''],
] as const)('refuses raw text: %s', (_label, edit, code, path) => {
  expect(refusal(() => compileMachine(edit(fixtureText('bench-two-axis'))))).toEqual({ code, path });
});

test('sourceName prefixes the message, code and path unchanged', () => {
  const doc = fixture('bench-two-axis');
  doc.cycle_ns = 1;
  try {
    compileMachine(JSON.stringify(doc), { sourceName: 'cell.json' });
    expect.unreachable();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).message.startsWith('cell.json: config_range at cycle_ns')).toBe(true);
  }
});

// ---------------------------------------------------------------------------------------------- digest split

interface Mutation {
  label: string;
  apply: (d: Doc) => void;
}
const axisIndex = fc.integer({ min: 0, max: 8 });
const MACHINE_MUTATIONS: fc.Arbitrary<Mutation> = fc.oneof(
  fc.constantFrom(1250000, 2000000, 2500000, 5000000, 250000).map((v) => ({ label: `cycle_ns=${v}`, apply: set('cycle_ns', v) })),
  fc.tuple(axisIndex, fc.double({ min: 0.1, max: 0.99, noNaN: true })).map(([i, f]) => ({ label: `axes[${i}].limits.max_velocity*${f}`, apply: (d: Doc) => (d.axes[i].limits.max_velocity *= f) })),
  fc.tuple(axisIndex, fc.double({ min: 1e-4, max: 0.5, noNaN: true })).map(([i, v]) => ({ label: `axes[${i}].limits.following_error=${v}`, apply: (d: Doc) => (d.axes[i].limits.following_error = v === d.axes[i].limits.following_error ? v + 0.001 : v) })),
  axisIndex.map((i) => ({ label: `axes[${i}].sign flip`, apply: (d: Doc) => (d.axes[i].sign = -d.axes[i].sign) })),
  axisIndex.map((i) => ({ label: `axes[${i}].name`, apply: (d: Doc) => (d.axes[i].name = `K${i}`) })),
  fc.tuple(axisIndex, fc.integer({ min: 2, max: 60000 })).map(([i, c]) => ({ label: `axes[${i}].jog.arrest_ns`, apply: (d: Doc) => (d.axes[i].jog.arrest_ns = c * 1000000 + (c === 200 ? 1000000 : 0)) })),
  axisIndex.map((i) => ({ label: `axes[${i}].brake`, apply: (d: Doc) => (d.axes[i].brake = { present: !(d.axes[i].brake?.present ?? false) }) })),
  fc.constant({ label: 'link_profile internet', apply: set('control.link_profile', 'internet') }),
  fc.integer({ min: 0, max: 60000 }).filter((v) => v !== 250).map((v) => ({ label: `wait_before_safeop_ms=${v}`, apply: set('bus_bringup.wait_before_safeop_ms', v) })),
  fc.integer({ min: 0, max: 2 }).map((i) => ({ label: `io.outputs[${i}].torch flip`, apply: (d: Doc) => (d.io.outputs[i].torch = !d.io.outputs[i].torch) })),
  fc.constant({ label: 'io output added', apply: (d: Doc) => d.io.outputs.push({ name: 'wire_feed' }) }),
  fc.integer({ min: 10, max: 65535 }).map((s) => ({ label: `unused slave ${s}`, apply: set('bus.unused_slaves', [s]) })),
);
const DEPLOYMENT_MUTATIONS: fc.Arbitrary<Mutation> = fc.oneof(
  fc.integer({ min: 0, max: 1023 }).filter((v) => v !== 2).map((v) => ({ label: `runtime.cpu=${v}`, apply: set('runtime.cpu', v) })),
  fc.integer({ min: 1, max: 99 }).filter((v) => v !== 80).map((v) => ({ label: `runtime.priority=${v}`, apply: set('runtime.priority', v) })),
  fc.integer({ min: 100, max: 3600000 }).filter((v) => v !== 100000).map((v) => ({ label: `retention_ms=${v}`, apply: set('runtime.telemetry.retention_ms', v) })),
  fc.integer({ min: 1, max: 100 }).filter((v) => v !== 20).map((v) => ({ label: `dump_count=${v}`, apply: set('runtime.telemetry.dump_count', v) })),
  fc.integer({ min: 529680, max: 2 ** 40 }).filter((v) => v !== 536870912).map((v) => ({ label: `dump_bytes=${v}`, apply: set('runtime.telemetry.dump_bytes', v) })),
  fc.stringMatching(/^\/[a-z]{1,12}$/).map((p) => ({ label: `directory=${p}`, apply: set('runtime.telemetry.directory', p) })),
  fc.stringMatching(/^[A-Za-z ]{1,20}$/).filter((s) => s !== 'simulation').map((s) => ({ label: `cell.site=${s}`, apply: set('cell.site', s) })),
  axisIndex.map((i) => ({ label: `axes[${i}].diagnostics flip`, apply: (d: Doc) => (d.axes[i].diagnostics = { extended: !(d.axes[i].diagnostics?.extended ?? false) }) })),
  axisIndex.map((i) => ({ label: `axes[${i}].max_velocity_source`, apply: (d: Doc) => (d.axes[i].limits.max_velocity_source = 'bench measurement 2024') })),
);
/** Edits that do not change the semantics: explicit defaults, dropped defaults, key order. */
const NEUTRAL_MUTATIONS: fc.Arbitrary<Mutation> = fc.constantFrom<Mutation>(
  { label: 'drop explicit defaults', apply: (d) => (delete d.bus_bringup, delete d.bus, delete d.control.link_profile, delete d.runtime.telemetry.dump_count) },
  { label: 'write control defaults', apply: (d) => Object.assign(d.control, { max_grant_lease_ns: 500000000, max_jog_input_age_ns: 250000000 }) },
  { label: 'write axis defaults', apply: (d) => Object.assign(d.axes[3], { collision_watchdog: { enabled: false }, diagnostics: {}, brake: { present: false, release_delay_ms: 0 } }) },
  { label: 'reverse key order', apply: (d) => {
    const rev = (o: Doc): Doc => (Array.isArray(o) ? o.map(rev) : o && typeof o === 'object' ? Object.fromEntries(Object.entries(o).reverse().map(([k, v]) => [k, rev(v)])) : o);
    const r = rev(d);
    for (const k of Object.keys(d)) delete d[k];
    Object.assign(d, r);
  } },
);

const NINE = compileMachine(fixtureText('nine-axis'));

test('machine-affecting edits move machine and configuration digests, not deployment', () => {
  fc.assert(
    fc.property(MACHINE_MUTATIONS, (m) => {
      const doc = fixture('nine-axis');
      m.apply(doc);
      const after = digests(compileDoc(doc));
      expect(after.machine, m.label).not.toBe(NINE.machine.machine_sha256);
      expect(after.configuration, m.label).not.toBe(NINE.machine.configuration_sha256);
      expect(after.deployment, m.label).toBe(NINE.machine.deployment_sha256);
    }),
    { numRuns: 200 },
  );
});

test('deployment-only edits move deployment and configuration digests, not machine', () => {
  fc.assert(
    fc.property(DEPLOYMENT_MUTATIONS, (m) => {
      const doc = fixture('nine-axis');
      m.apply(doc);
      const after = digests(compileDoc(doc));
      expect(after.deployment, m.label).not.toBe(NINE.machine.deployment_sha256);
      expect(after.configuration, m.label).not.toBe(NINE.machine.configuration_sha256);
      expect(after.machine, m.label).toBe(NINE.machine.machine_sha256);
    }),
    { numRuns: 200 },
  );
});

test('semantics-preserving edits keep all three digests', () => {
  fc.assert(
    fc.property(fc.array(NEUTRAL_MUTATIONS, { minLength: 1, maxLength: 4 }), (ms) => {
      const doc = fixture('nine-axis');
      for (const m of ms) m.apply(doc);
      expect(digests(compileDoc(doc))).toEqual(digests(NINE));
    }),
  );
});

test('io edits leave configuration.base.identity unchanged', () => {
  const doc = fixture('nine-axis');
  doc.io.outputs[1].torch = true;
  const r = compileDoc(doc);
  expect(r.machine.configuration_sha256).not.toBe(NINE.machine.configuration_sha256);
  expect(r.machine.configuration_base_sha256).toBe(NINE.machine.configuration_base_sha256);
  expect(r.identity.base).toBe(NINE.identity.base);
});

// ---------------------------------------------------------------------------------------------- %.17g

// Produced by glibc printf("%.17g") on the same doubles.
const C_G17: Array<[number, string]> = [
  [0.1, '0.10000000000000001'],
  [1, '1'],
  [1e-7, '9.9999999999999995e-08'],
  [250000, '250000'],
  [2 ** -25, '2.9802322387695312e-08'], // exact tie: C rounds half to even, toExponential would give ...313
  [1e17, '1e+17'],
  [1e16, '10000000000000000'],
  [123456789012345678, '1.2345678901234568e+17'],
  [1e-4, '0.0001'],
  [1e-5, '1.0000000000000001e-05'],
  [-0, '-0'],
  [0, '0'],
  [5e-324, '4.9406564584124654e-324'],
  [1.7976931348623157e308, '1.7976931348623157e+308'],
  [Math.PI, '3.1415926535897931'],
  [0.3, '0.29999999999999999'],
  [-2.9, '-2.8999999999999999'],
  [1e21, '1e+21'],
  [123.456, '123.456'],
  [0.000123, '0.00012300000000000001'],
  [9007199254740993, '9007199254740992'],
];

test.each(C_G17)('%%.17g of %d is %s', (x, want) => {
  expect(formatG17(x)).toBe(want);
});

test('%.17g round-trips every finite double', () => {
  fc.assert(
    fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (x) => {
      const s = formatG17(x);
      expect(Object.is(Number(s), x)).toBe(true);
      expect(s.replace(/^-/, '').replace(/e.*$/, '').replace('.', '').replace(/^0+/, '').length).toBeLessThanOrEqual(17);
    }),
    { numRuns: 2000 },
  );
});

// ---------------------------------------------------------------------------------------------- directory

test('compileToDirectory writes atomically, reuses identical content, refuses a changed directory', async () => {
  const root = await mkdtemp(join(tmpdir(), 'machine-config-'));
  try {
    const file = join(FIXTURES, 'nine-axis.json');
    const m = await compileToDirectory(file, join(root, 'out'));
    expect(m.dir).toBe(join(root, 'out', NINE.machine.configuration_sha256));
    expect(m.configuration_sha256).toBe(NINE.machine.configuration_sha256);
    const names = (await readdir(m.dir)).sort();
    expect(names).toEqual(
      ['argv.json', 'axes.conf', 'configuration.base.identity', 'configuration.identity', 'coordinate.identity.json', 'deployment.identity', 'machine.identity', 'resources.json'].sort(),
    );
    expect(await readFile(join(m.dir, 'configuration.identity'), 'utf8')).toBe(NINE.identity.configuration);
    expect((await readdir(join(root, 'out'))).filter((n) => n.startsWith('.tmp-'))).toEqual([]);

    const before = await stat(join(m.dir, 'axes.conf'));
    const again = await loadMachine(file, join(root, 'out'));
    expect(again.dir).toBe(m.dir);
    expect((await stat(join(m.dir, 'axes.conf'))).mtimeMs).toBe(before.mtimeMs);
    expect(await readdir(join(root, 'out'))).toEqual([NINE.machine.configuration_sha256]);

    // concurrent compiles of the same file agree on one directory
    const all = await Promise.all(Array.from({ length: 4 }, () => compileToDirectory(file, join(root, 'race'))));
    expect(new Set(all.map((x) => x.dir)).size).toBe(1);
    expect(await readdir(join(root, 'race'))).toEqual([NINE.machine.configuration_sha256]);

    const victim = join(m.dir, 'axes.conf');
    await chmod(victim, 0o644);
    await writeFile(victim, 'tampered\n');
    await expect(compileToDirectory(file, join(root, 'out'))).rejects.toMatchObject({ code: 'config_directory_conflict' });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('a pinned robot description is copied as a content-addressed resource', async () => {
  const root = await mkdtemp(join(tmpdir(), 'machine-config-'));
  try {
    const doc = robotMachine();
    doc.robot.description = 'models/arm-6.urdf';
    await mkdir(join(root, 'models'));
    const urdf = '<robot name="arm-6"/>\n';
    await writeFile(join(root, 'models/arm-6.urdf'), urdf);
    await writeFile(join(root, 'cell.json'), JSON.stringify(doc));
    const m = await compileToDirectory(join(root, 'cell.json'), join(root, 'out'));
    const { createHash } = await import('node:crypto');
    const hex = createHash('sha256').update(urdf).digest('hex');
    expect(m.robot?.description_sha256).toBe(`sha256:${hex}`);
    expect(await readFile(join(m.dir, 'resources', hex), 'utf8')).toBe(urdf);
    expect(JSON.parse(await readFile(join(m.dir, 'resources.json'), 'utf8'))).toEqual([{ bytes: urdf.length, name: 'models/arm-6.urdf', sha256: hex }]);
    expect(JSON.parse(await readFile(join(m.dir, 'robot.json'), 'utf8')).description_sha256).toBe(`sha256:${hex}`);
    expect(existsSync(join(m.dir, 'configuration.base.identity'))).toBe(false);

    // the description's bytes are machine identity; its file name is deployment identity
    const renamed = compileMachine(JSON.stringify({ ...doc, robot: { ...doc.robot, description: 'other.urdf' } }), { readResource: () => new TextEncoder().encode(urdf) });
    expect(renamed.machine.machine_sha256).toBe(m.machine_sha256);
    expect(renamed.machine.deployment_sha256).not.toBe(m.deployment_sha256);
    const changed = compileMachine(JSON.stringify(doc), { readResource: () => new TextEncoder().encode('<robot name="arm-7"/>\n') });
    expect(changed.machine.machine_sha256).not.toBe(m.machine_sha256);
    expect(changed.machine.deployment_sha256).toBe(m.deployment_sha256);

    const wrongPin = { ...doc, robot: { ...doc.robot, description_sha256: `sha256:${'0'.repeat(64)}` } };
    expect(refusal(() => compileMachine(JSON.stringify(wrongPin), { readResource: () => new TextEncoder().encode(urdf) }))).toEqual({
      code: 'config_resource',
      path: 'robot.description_sha256',
    });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('a machine compiled again in the same process: the same result while text and resources are unchanged, compiled anew when a resource changed, each caller with objects of its own', async () => {
  const root = await mkdtemp(join(tmpdir(), 'machine-config-'));
  try {
    const doc = robotMachine();
    doc.robot.description = 'models/arm-6.urdf';
    await mkdir(join(root, 'models'));
    await writeFile(join(root, 'models/arm-6.urdf'), '<robot name="arm-6"/>\n');
    const file = join(root, 'cell.json');
    await writeFile(file, JSON.stringify(doc));
    const first = await compileToDirectory(file, join(root, 'out'));
    const second = await compileToDirectory(file, join(root, 'out'));
    expect(second).toEqual(first);
    // A caller that changes its machine changes nobody else's.
    expect(second).not.toBe(first);
    expect(second.axes).not.toBe(first.axes);
    (second.axes as unknown as unknown[]).length = 0;
    expect((await compileToDirectory(file, join(root, 'out'))).axes).toEqual(first.axes);

    // The description's bytes changed, its name did not: a new machine identity and directory.
    await writeFile(join(root, 'models/arm-6.urdf'), '<robot name="arm-7"/>\n');
    const changed = await compileToDirectory(file, join(root, 'out'));
    expect(changed.machine_sha256).not.toBe(first.machine_sha256);
    expect(changed.dir).not.toBe(first.dir);
    // The same text in another directory reads its resources there: a different description there is a
    // different machine, the same one the same machine.
    const other = join(root, 'copy');
    await mkdir(join(other, 'models'), { recursive: true });
    await writeFile(join(other, 'cell.json'), JSON.stringify(doc));
    await writeFile(join(other, 'models/arm-6.urdf'), '<robot name="arm-6"/>\n');
    expect((await compileToDirectory(join(other, 'cell.json'), join(root, 'out'))).machine_sha256).toBe(first.machine_sha256);
    await writeFile(join(other, 'models/arm-6.urdf'), '<robot name="arm-8"/>\n');
    const third = await compileToDirectory(join(other, 'cell.json'), join(root, 'out'));
    expect([first.machine_sha256, changed.machine_sha256]).not.toContain(third.machine_sha256);
    // The description removed: refused, as a first compile would be, with the file's name in the message.
    await rm(join(root, 'models/arm-6.urdf'));
    await expect(compileToDirectory(file, join(root, 'out'))).rejects.toMatchObject({ code: 'config_resource', message: expect.stringContaining(file) });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
