// Every documented range and form rule of the machine configuration (document 3 part 2), refused with
// its code and field path (codes and path syntax: docs/profile.md "Reading the JSON"), and every
// documented boundary accepted. One table, compiled in a single `hil config compile-many` process.

import { afterAll, beforeAll } from 'vitest';
import { covers, describe, expect, test } from '../../harness/fixture.ts';
import { compileMany, isRefused, type Outcome } from '../../harness/clients/config.ts';
import { edited, RawNumber, readMachine, Workspace, writeJson, type JsonObj, type JsonValue } from './toolkit.ts';
import { ROBOT_DESCRIPTION, ROBOT_DESCRIPTION_FILE, robotMachine } from './machines.ts';

type Edits = Record<string, JsonValue | undefined>;
type Base = 'nine' | 'bench' | 'robot' | 'robot-pinned';

interface Row {
  section: string;
  name: string;
  base: Base;
  edits?: Edits;
  /** Raw file content instead of the edited base (syntax rows). */
  text?: (base: JsonObj) => string | Uint8Array;
  /** Absent: the configuration must compile. */
  refuse?: { code: string; path: string };
  covers: string[];
  /** docs/profile.md names `refuse.code`, the compiler answers another code: the path is asserted, the code is an expected failure. */
  deviation?: string;
}

const BASES: Record<Base, () => JsonObj> = {
  nine: () => readMachine('nine-axis'),
  bench: () => readMachine('bench-two-axis'),
  robot: () => robotMachine(),
  'robot-pinned': () => robotMachine({ description: true }),
};

const F = (name: string) => `field:MachineConfig.${name}`;
const L = (name: string) => `limit:machine_${name}`;
const R = (name: string) => `rule:machine_config.${name}`;

let section = '';
const ROWS: Row[] = [];
function refuse(name: string, code: string, path: string, edits: Edits, ids: string[], more: Partial<Row> = {}): void {
  ROWS.push({ section, name, base: 'nine', edits, refuse: { code, path }, covers: ids, ...more });
}
const range = (name: string, path: string, edits: Edits, ids: string[], more: Partial<Row> = {}) => refuse(name, 'config_range', path, edits, ids, more);
function accept(name: string, edits: Edits, ids: string[], more: Partial<Row> = {}): void {
  ROWS.push({ section, name, base: 'nine', edits, covers: ids, ...more });
}

/** n copies of the nine-axis J1 with distinct names and slave positions (the I/O terminal sits at 9). */
const manyAxes = (n: number): JsonValue[] => {
  const j1 = (readMachine('nine-axis').axes as JsonObj[])[0]!;
  return Array.from({ length: n }, (_, i) => ({ ...j1, name: `A${i}`, slave_position: BigInt(100 + i) }));
};
const slaves = (n: number): JsonValue[] => Array.from({ length: n }, (_, i) => BigInt(1000 + i));

// ---------------------------------------------------------------------------------------------------
section = 'top level';
range('schema_version 2', 'schema_version', { schema_version: 2n }, [F('schema_version'), L('schema_version')]);
range('schema_version 0', 'schema_version', { schema_version: 0n }, [L('schema_version')]);
refuse('schema_version written 1.0', 'config_type', 'schema_version', { schema_version: new RawNumber('1.0') }, [F('schema_version')]);
refuse('schema_version absent', 'config_missing_field', 'schema_version', { schema_version: undefined }, [F('schema_version')]);
range('backend "hardware"', 'backend', { backend: 'hardware' }, [F('backend')]);
accept('backend "live"', { backend: 'live' }, [F('backend')]);
range('cycle_ns 249999', 'cycle_ns', { cycle_ns: 249999n }, [F('cycle_ns'), L('cycle_ns')]);
range('cycle_ns 10000001', 'cycle_ns', { cycle_ns: 10000001n }, [L('cycle_ns')]);
accept('cycle_ns 250000', { cycle_ns: 250000n }, [L('cycle_ns')]);
accept('cycle_ns 10000000', { cycle_ns: 10000000n }, [L('cycle_ns')]);
refuse('cycle_ns absent', 'config_missing_field', 'cycle_ns', { cycle_ns: undefined }, [F('cycle_ns')]);
refuse('cycle_ns written 1e6', 'config_type', 'cycle_ns', { cycle_ns: new RawNumber('1e6') }, [F('cycle_ns')]);
range('max_cycle_lateness_ns 0', 'max_cycle_lateness_ns', { max_cycle_lateness_ns: 0n }, [F('max_cycle_lateness_ns'), L('max_cycle_lateness_ns')]);
range('max_cycle_lateness_ns 250000000', 'max_cycle_lateness_ns', { max_cycle_lateness_ns: 250000000n }, [L('max_cycle_lateness_ns')]);
accept('max_cycle_lateness_ns 1', { max_cycle_lateness_ns: 1n }, [L('max_cycle_lateness_ns')]);
accept('max_cycle_lateness_ns 249999999', { max_cycle_lateness_ns: 249999999n }, [L('max_cycle_lateness_ns')]);
refuse('max_cycle_lateness_ns absent', 'config_missing_field', 'max_cycle_lateness_ns', { max_cycle_lateness_ns: undefined }, [F('max_cycle_lateness_ns')]);
range('no axes', 'axes', { axes: [] }, [F('axes[]'), L('axes')]);
range('17 axes', 'axes', { axes: manyAxes(17) }, [L('axes')]);
accept('16 axes', { axes: manyAxes(16) }, [L('axes')]);
refuse('axes absent', 'config_missing_field', 'axes', { axes: undefined }, [F('axes[]')]);
range('drive_speed_limit_motor_rpm 0', 'drive_speed_limit_motor_rpm', { drive_speed_limit_motor_rpm: 0n }, [F('drive_speed_limit_motor_rpm'), L('drive_speed_limit_motor_rpm')]);
range('drive_speed_limit_motor_rpm 6000.5', 'drive_speed_limit_motor_rpm', { drive_speed_limit_motor_rpm: 6000.5 }, [L('drive_speed_limit_motor_rpm')]);
accept('drive_speed_limit_motor_rpm 6000', { drive_speed_limit_motor_rpm: 6000n }, [L('drive_speed_limit_motor_rpm')]);
range('drive_speed_limit_motor_rpm 1000 below what J1 max_velocity needs', 'axes[0].limits.max_velocity', { drive_speed_limit_motor_rpm: 1000n }, [F('drive_speed_limit_motor_rpm')]);
refuse('unknown top-level field', 'config_unknown_field', 'colour', { colour: 'blue' }, ['profile:config.reading_json']);
refuse('runtime absent', 'config_missing_field', 'runtime', { runtime: undefined }, [F('runtime')]);

section = 'runtime';
range('cpu -1', 'runtime.cpu', { 'runtime.cpu': -1n }, [F('runtime.cpu'), L('runtime_cpu')]);
range('cpu 1024', 'runtime.cpu', { 'runtime.cpu': 1024n }, [L('runtime_cpu')]);
accept('cpu 0', { 'runtime.cpu': 0n }, [L('runtime_cpu')]);
accept('cpu 1023', { 'runtime.cpu': 1023n }, [L('runtime_cpu')]);
refuse('cpu absent', 'config_missing_field', 'runtime.cpu', { 'runtime.cpu': undefined }, [F('runtime.cpu')]);
range('priority 0', 'runtime.priority', { 'runtime.priority': 0n }, [F('runtime.priority'), L('runtime_priority')]);
range('priority 100', 'runtime.priority', { 'runtime.priority': 100n }, [L('runtime_priority')]);
accept('priority 1', { 'runtime.priority': 1n }, [L('runtime_priority')]);
accept('priority 99', { 'runtime.priority': 99n }, [L('runtime_priority')]);
range('telemetry.retention_ms 99', 'runtime.telemetry.retention_ms', { 'runtime.telemetry.retention_ms': 99n }, [F('runtime.telemetry.retention_ms'), L('telemetry_retention_ms')]);
range('telemetry.retention_ms 3600001', 'runtime.telemetry.retention_ms', { 'runtime.telemetry.retention_ms': 3600001n }, [L('telemetry_retention_ms')]);
accept('telemetry.retention_ms 100', { 'runtime.telemetry.retention_ms': 100n }, [L('telemetry_retention_ms')]);
accept('telemetry.retention_ms 3600000', { 'runtime.telemetry.retention_ms': 3600000n }, [L('telemetry_retention_ms')]);
range('telemetry.dump_count 0', 'runtime.telemetry.dump_count', { 'runtime.telemetry.dump_count': 0n }, [F('runtime.telemetry.dump_count'), L('telemetry_dump_count')]);
range('telemetry.dump_count 101', 'runtime.telemetry.dump_count', { 'runtime.telemetry.dump_count': 101n }, [L('telemetry_dump_count')]);
accept('telemetry.dump_count 1', { 'runtime.telemetry.dump_count': 1n }, [L('telemetry_dump_count')]);
accept('telemetry.dump_count 100', { 'runtime.telemetry.dump_count': 100n }, [L('telemetry_dump_count')]);
range('telemetry.dump_bytes 529679', 'runtime.telemetry.dump_bytes', { 'runtime.telemetry.dump_bytes': 529679n }, [F('runtime.telemetry.dump_bytes'), L('telemetry_dump_bytes')]);
accept('telemetry.dump_bytes 529680', { 'runtime.telemetry.dump_bytes': 529680n }, [L('telemetry_dump_bytes')]);
range('telemetry.directory empty', 'runtime.telemetry.directory', { 'runtime.telemetry.directory': '' }, [F('runtime.telemetry.directory')]);
range('telemetry.directory with a newline', 'runtime.telemetry.directory', { 'runtime.telemetry.directory': '/var/lib\n/cell' }, [F('runtime.telemetry.directory')]);
accept('telemetry.directory absent', { 'runtime.telemetry.directory': undefined }, [F('runtime.telemetry.directory')]);
// Text lengths at the bound and one over (docs/profile.md "Machine configuration": 1..4096 characters).
accept('telemetry.directory of 4096 characters', { 'runtime.telemetry.directory': `/${'d'.repeat(4095)}` }, [F('runtime.telemetry.directory')]);
range('telemetry.directory of 4097 characters', 'runtime.telemetry.directory', { 'runtime.telemetry.directory': `/${'d'.repeat(4096)}` }, [F('runtime.telemetry.directory')]);

section = 'flat axis';
refuse('name absent', 'config_missing_field', 'axes[0].name', { 'axes[0].name': undefined }, [F('axes[].name')]);
range('name with a space', 'axes[0].name', { 'axes[0].name': 'J 1' }, [F('axes[].name')]);
refuse('name repeated', 'config_duplicate_value', 'axes[1].name', { 'axes[1].name': 'J1' }, [F('axes[].name')]);
range('slave_position 65536', 'axes[0].slave_position', { 'axes[0].slave_position': 65536n }, [F('axes[].slave_position'), L('slave_position')]);
range('slave_position -1', 'axes[0].slave_position', { 'axes[0].slave_position': -1n }, [L('slave_position')]);
accept('slave_position 65535', { 'axes[8].slave_position': 65535n }, [L('slave_position')]);
refuse('slave_position repeated on another axis', 'config_duplicate_value', 'axes[1].slave_position', { 'axes[1].slave_position': 0n }, [R('slave_position_unique'), F('axes[].slave_position')]);
refuse('slave_position of the I/O terminal', 'config_duplicate_value', 'io.slave_position', { 'axes[0].slave_position': 9n }, [R('slave_position_unique')]);
refuse('slave_position listed as unused', 'config_duplicate_value', 'bus.unused_slaves[0]', { 'bus.unused_slaves': [3n] }, [R('slave_position_unique')]);
refuse('profile unknown', 'config_reference', 'axes[0].profile', { 'axes[0].profile': 'no-such-drive' }, [F('axes[].profile')]);
range('type "angular"', 'axes[0].type', { 'axes[0].type': 'angular' }, [F('axes[].type')]);
range('wire_counts_per_rev 0', 'axes[0].wire_counts_per_rev', { 'axes[0].wire_counts_per_rev': 0n }, [F('axes[].wire_counts_per_rev')]);
range('wire_counts_per_rev 4294967296', 'axes[0].wire_counts_per_rev', { 'axes[0].wire_counts_per_rev': 4294967296n }, [F('axes[].wire_counts_per_rev')]);
range('motor_encoder_counts_per_rev 0', 'axes[0].motor_encoder_counts_per_rev', { 'axes[0].motor_encoder_counts_per_rev': 0n }, [F('axes[].motor_encoder_counts_per_rev')]);
range('wire_revs_per_axis_rev 0', 'axes[0].wire_revs_per_axis_rev', { 'axes[0].wire_revs_per_axis_rev': 0n }, [F('axes[].wire_revs_per_axis_rev')]);
range('gear_ratio.numerator 0', 'axes[0].gear_ratio.numerator', { 'axes[0].gear_ratio.numerator': 0n }, [F('axes[].gear_ratio.numerator')]);
range('gear_ratio.denominator 0', 'axes[0].gear_ratio.denominator', { 'axes[0].gear_ratio.denominator': 0n }, [F('axes[].gear_ratio.denominator')]);
refuse('gear_ratio disagreeing with wire_revs_per_axis_rev', 'config_inconsistent', 'axes[0].gear_ratio', { 'axes[0].gear_ratio.numerator': 120n }, [F('axes[].gear_ratio.numerator'), F('axes[].wire_revs_per_axis_rev')]);
refuse('lead_m_per_rev on a rotary axis', 'config_forbidden_field', 'axes[0].lead_m_per_rev', { 'axes[0].lead_m_per_rev': 0.01 }, [F('axes[].lead_m_per_rev')]);
refuse('lead_m_per_rev absent on a linear axis', 'config_missing_field', 'axes[1].lead_m_per_rev', { 'axes[1].lead_m_per_rev': undefined }, [F('axes[].lead_m_per_rev')], { base: 'bench' });
range('lead_m_per_rev 0', 'axes[1].lead_m_per_rev', { 'axes[1].lead_m_per_rev': 0n }, [F('axes[].lead_m_per_rev')], { base: 'bench' });
range('sign 0', 'axes[0].sign', { 'axes[0].sign': 0n }, [F('axes[].sign')]);
range('sign 2', 'axes[0].sign', { 'axes[0].sign': 2n }, [F('axes[].sign')]);
refuse('sign written "+1"', 'config_type', 'axes[0].sign', { 'axes[0].sign': '+1' }, [F('axes[].sign')]);
range('coordinate_evidence_mode "absolute"', 'axes[0].coordinate_evidence_mode', { 'axes[0].coordinate_evidence_mode': 'absolute' }, [F('axes[].coordinate_evidence_mode')]);
range('position_tracking_mode "wrapped"', 'axes[0].position_tracking_mode', { 'axes[0].position_tracking_mode': 'wrapped' }, [F('axes[].position_tracking_mode')]);
refuse('require_home "yes"', 'config_type', 'axes[0].require_home', { 'axes[0].require_home': 'yes' }, [F('axes[].require_home')]);
range('max_acceleration 0', 'axes[0].max_acceleration', { 'axes[0].max_acceleration': 0n }, [F('axes[].max_acceleration')]);
refuse('limits absent', 'config_missing_field', 'axes[0].limits', { 'axes[0].limits': undefined }, [F('axes[].limits')]);
range('startup.home_method 128', 'axes[0].startup.home_method', { 'axes[0].startup.home_method': 128n }, [F('axes[].startup')]);
range('brake.release_delay_ms 10001', 'axes[1].brake.release_delay_ms', { 'axes[1].brake.release_delay_ms': 10001n }, [F('axes[].brake')]);
range('collision_watchdog.torque_permille 0', 'axes[0].collision_watchdog.torque_permille', { 'axes[0].collision_watchdog.torque_permille': 0n }, [F('axes[].collision_watchdog')]);
refuse('diagnostics.extended "yes"', 'config_type', 'axes[0].diagnostics.extended', { 'axes[0].diagnostics.extended': 'yes' }, [F('axes[].diagnostics')]);
refuse('unknown axis field', 'config_unknown_field', 'axes[0].colour', { 'axes[0].colour': 'red' }, [F('axes[].name')]);

section = 'limits';
range('min equal to max', 'axes[0].limits.min', { 'axes[0].limits.min': 2.9 }, [F('axes[].limits.min'), F('axes[].limits.max')]);
range('min above max', 'axes[0].limits.min', { 'axes[0].limits.min': 3.0 }, [F('axes[].limits.min')]);
refuse('max absent', 'config_missing_field', 'axes[0].limits.max', { 'axes[0].limits.max': undefined }, [F('axes[].limits.max')]);
range('min beyond the i32 count range (bounded tracking)', 'axes[0].limits.min', { 'axes[0].limits.min': -200n }, [F('axes[].limits.min'), F('axes[].position_tracking_mode')]);
accept('min beyond the i32 count range with continuous tracking', { 'axes[0].limits.min': -200n, 'axes[0].position_tracking_mode': 'continuous' }, [F('axes[].position_tracking_mode')]);
range('max_velocity 0', 'axes[0].limits.max_velocity', { 'axes[0].limits.max_velocity': 0n }, [F('axes[].limits.max_velocity')]);
range('max_velocity -1', 'axes[0].limits.max_velocity', { 'axes[0].limits.max_velocity': -1.0 }, [F('axes[].limits.max_velocity')]);
range('jog_acceleration 0', 'axes[0].limits.jog_acceleration', { 'axes[0].limits.jog_acceleration': 0n }, [F('axes[].limits.jog_acceleration')]);
range('max_target_lead 0', 'axes[0].limits.max_target_lead', { 'axes[0].limits.max_target_lead': 0n }, [F('axes[].limits.max_target_lead')]);
range('following_error 0', 'axes[0].limits.following_error', { 'axes[0].limits.following_error': 0n }, [F('axes[].limits.following_error')]);
range('completion_tolerance 0', 'axes[0].limits.completion_tolerance', { 'axes[0].limits.completion_tolerance': 0n }, [F('axes[].limits.completion_tolerance')]);
range('following_error_timeout_ms 0', 'axes[0].limits.following_error_timeout_ms', { 'axes[0].limits.following_error_timeout_ms': 0n }, [F('axes[].limits.following_error_timeout_ms'), L('following_error_timeout_ms')]);
range('following_error_timeout_ms 1001', 'axes[0].limits.following_error_timeout_ms', { 'axes[0].limits.following_error_timeout_ms': 1001n }, [L('following_error_timeout_ms')]);
accept('following_error_timeout_ms 1 and 1000', { 'axes[0].limits.following_error_timeout_ms': 1n, 'axes[1].limits.following_error_timeout_ms': 1000n }, [L('following_error_timeout_ms')]);
range('completion_timeout_ms 0', 'axes[0].limits.completion_timeout_ms', { 'axes[0].limits.completion_timeout_ms': 0n }, [F('axes[].limits.completion_timeout_ms'), L('completion_timeout_ms')]);
range('completion_timeout_ms 4294967296', 'axes[0].limits.completion_timeout_ms', { 'axes[0].limits.completion_timeout_ms': 4294967296n }, [L('completion_timeout_ms')]);
accept('completion_timeout_ms 1 and 4294967295', { 'axes[0].limits.completion_timeout_ms': 1n, 'axes[1].limits.completion_timeout_ms': 4294967295n }, [L('completion_timeout_ms')]);
refuse('following_error_timeout_ms written 50.0', 'config_type', 'axes[0].limits.following_error_timeout_ms', { 'axes[0].limits.following_error_timeout_ms': new RawNumber('50.0') }, [F('axes[].limits.following_error_timeout_ms')]);

section = 'jog';
range('arrest_ns one ns below cycle_ns', 'axes[0].jog.arrest_ns', { 'axes[0].jog.arrest_ns': 999999n }, [F('axes[].jog.arrest_ns'), L('jog_stop_cycles')]);
range('arrest_ns 0', 'axes[0].jog.arrest_ns', { 'axes[0].jog.arrest_ns': 0n }, [L('jog_stop_cycles')]);
range('arrest_ns above 65535 x cycle_ns', 'axes[0].jog.arrest_ns', { 'axes[0].jog.arrest_ns': 65535000001n }, [L('jog_stop_cycles')]);
accept('arrest_ns cycle_ns and quick_stop_ns 65535 x cycle_ns', { 'axes[0].jog.arrest_ns': 1000000n, 'axes[0].jog.quick_stop_ns': 65535000000n }, [L('jog_stop_cycles'), F('axes[].jog.quick_stop_ns')]);
range('quick_stop_ns one ns below cycle_ns', 'axes[0].jog.quick_stop_ns', { 'axes[0].jog.quick_stop_ns': 999999n }, [F('axes[].jog.quick_stop_ns'), L('jog_stop_cycles')]);
range('quick_stop_ns above 65535 x cycle_ns', 'axes[0].jog.quick_stop_ns', { 'axes[0].jog.quick_stop_ns': 65535000001n }, [L('jog_stop_cycles')]);

section = 'control';
range('link_profile "wan"', 'control.link_profile', { 'control.link_profile': 'wan' }, [F('control.link_profile')]);
range('max_grant_lease_ns 999999', 'control.max_grant_lease_ns', { 'control.max_grant_lease_ns': 999999n }, [F('control.max_grant_lease_ns'), L('max_grant_lease_ns')]);
range('max_grant_lease_ns 10000000001', 'control.max_grant_lease_ns', { 'control.max_grant_lease_ns': 10000000001n }, [L('max_grant_lease_ns')]);
range('max_grant_lease_ns 1500000 (not whole ms)', 'control.max_grant_lease_ns', { 'control.max_grant_lease_ns': 1500000n }, [R('lease_whole_ms'), L('max_grant_lease_ns')]);
accept('max_grant_lease_ns 1000000', { 'control.max_grant_lease_ns': 1000000n }, [L('max_grant_lease_ns'), R('lease_whole_ms')]);
accept('max_grant_lease_ns 10000000000', { 'control.max_grant_lease_ns': 10000000000n }, [L('max_grant_lease_ns')]);
range('max_jog_input_age_ns 0', 'control.max_jog_input_age_ns', { 'control.max_jog_input_age_ns': 0n }, [F('control.max_jog_input_age_ns'), L('max_jog_input_age_ns')]);
range('max_jog_input_age_ns 2000000001', 'control.max_jog_input_age_ns', { 'control.max_jog_input_age_ns': 2000000001n }, [L('max_jog_input_age_ns')]);
accept('max_jog_input_age_ns 1', { 'control.max_jog_input_age_ns': 1n }, [L('max_jog_input_age_ns')]);
accept('max_jog_input_age_ns 2000000000', { 'control.max_jog_input_age_ns': 2000000000n }, [L('max_jog_input_age_ns')]);
refuse('control not an object', 'config_type', 'control', { control: 'lan' }, [F('control')]);

section = 'bus';
range('unknown_slaves "ignore"', 'bus.unknown_slaves', { 'bus.unknown_slaves': 'ignore' }, [F('bus.unknown_slaves'), R('unknown_slaves')]);
refuse('unknown_slaves "hold" without a note', 'config_missing_field', 'bus.unknown_slaves_note', { 'bus.unknown_slaves': 'hold' }, [R('unknown_slaves')]);
refuse('a note with unknown_slaves "refuse"', 'config_forbidden_field', 'bus.unknown_slaves_note', { 'bus.unknown_slaves_note': 'why' }, [R('unknown_slaves')]);
accept('unknown_slaves "hold" with a note', { 'bus.unknown_slaves': 'hold', 'bus.unknown_slaves_note': 'terminal 12 is a spare' }, [R('unknown_slaves'), F('bus.unknown_slaves')]);
accept('an unknown_slaves note of 256 characters', { 'bus.unknown_slaves': 'hold', 'bus.unknown_slaves_note': 'n'.repeat(256) }, [R('unknown_slaves')]);
range('an unknown_slaves note of 257 characters', 'bus.unknown_slaves_note', { 'bus.unknown_slaves': 'hold', 'bus.unknown_slaves_note': 'n'.repeat(257) }, [R('unknown_slaves')]);
range('257 unused slaves', 'bus.unused_slaves', { 'bus.unused_slaves': slaves(257) }, [F('bus.unused_slaves[]'), L('unused_slaves')]);
accept('256 unused slaves', { 'bus.unused_slaves': slaves(256) }, [L('unused_slaves')]);
refuse('an unused slave listed twice', 'config_duplicate_value', 'bus.unused_slaves[1]', { 'bus.unused_slaves': [20n, 20n] }, [F('bus.unused_slaves[]'), R('slave_position_unique')]);
range('unused slave 65536', 'bus.unused_slaves[0]', { 'bus.unused_slaves': [65536n] }, [F('bus.unused_slaves[]')]);
refuse('bus not an object', 'config_type', 'bus', { bus: [] }, [F('bus')]);

section = 'bus_bringup';
range('startup_passive_ms -1', 'bus_bringup.startup_passive_ms', { 'bus_bringup.startup_passive_ms': -1n }, [F('bus_bringup.startup_passive_ms')]);
refuse('explicit_pdo_config "false"', 'config_type', 'bus_bringup.explicit_pdo_config', { 'bus_bringup.explicit_pdo_config': 'false' }, [F('bus_bringup.explicit_pdo_config')]);
refuse('disable_output_watchdog 1', 'config_type', 'bus_bringup.disable_output_watchdog', { 'bus_bringup.disable_output_watchdog': 1n }, [F('bus_bringup.disable_output_watchdog')]);
refuse('no_dc null', 'config_type', 'bus_bringup.no_dc', { 'bus_bringup.no_dc': null }, [F('bus_bringup.no_dc')]);
range('wait_before_safeop_ms -1', 'bus_bringup.wait_before_safeop_ms', { 'bus_bringup.wait_before_safeop_ms': -1n }, [F('bus_bringup.wait_before_safeop_ms')]);
range('preop_safeop_timeout_ms 0', 'bus_bringup.preop_safeop_timeout_ms', { 'bus_bringup.preop_safeop_timeout_ms': 0n }, [F('bus_bringup.preop_safeop_timeout_ms')]);
range('safeop_op_timeout_ms 0', 'bus_bringup.safeop_op_timeout_ms', { 'bus_bringup.safeop_op_timeout_ms': 0n }, [F('bus_bringup.safeop_op_timeout_ms')]);
refuse('unknown bus_bringup field', 'config_unknown_field', 'bus_bringup.turbo', { 'bus_bringup.turbo': true }, [F('bus_bringup')]);

section = 'drive layer';
range('cycle_ns not divisible by a drive DC quantum', 'cycle_ns', { cycle_ns: 2100000n }, [R('cycle_divisible'), F('cycle_ns')], { base: 'bench' });
range('not divisible even with no_dc', 'cycle_ns', { cycle_ns: 2100000n, 'bus_bringup.no_dc': true }, [R('cycle_divisible')], { base: 'bench' });
accept('cycle_ns a multiple of the DC quantum', { cycle_ns: 2250000n }, [R('cycle_divisible')], { base: 'bench' });
accept('a quantum of 0 constrains nothing', { cycle_ns: 2100000n, 'drives.bench-servo.dc_quantum_ns': 0n }, [R('cycle_divisible')], { base: 'bench' });

section = 'io';
refuse('output name repeated', 'config_duplicate_value', 'io.outputs[1].name', { 'io.outputs[1].name': 'torch' }, [F('io')]);
range('output name with capitals', 'io.outputs[0].name', { 'io.outputs[0].name': 'Torch' }, [F('io')]);
range('io slave_position 65536', 'io.slave_position', { 'io.slave_position': 65536n }, [F('io'), L('slave_position')]);

section = 'identifiers at their length bound';
// docs/profile.md "Field shapes and defaults not shown": axis ids and drive profile names match
// [A-Za-z][A-Za-z0-9_.-]{0,31}, io names [a-z][a-z0-9_]{0,31}: 1..32 characters, each bound from both sides.
{
  const id = (first: string, n: number) => first + 'x'.repeat(n - 1);
  const ID = 'profile:config.identifiers';
  accept('axis name of 1 character', { 'axes[0].name': 'A' }, [ID, F('axes[].name')]);
  range('axis name empty', 'axes[0].name', { 'axes[0].name': '' }, [ID, F('axes[].name')]);
  accept('axis name of 32 characters', { 'axes[0].name': id('J', 32) }, [ID, F('axes[].name')]);
  range('axis name of 33 characters', 'axes[0].name', { 'axes[0].name': id('J', 33) }, [ID, F('axes[].name')]);
  accept('output name of 32 characters', { 'io.outputs[1].name': id('c', 32) }, [ID, F('io')]);
  range('output name of 33 characters', 'io.outputs[1].name', { 'io.outputs[1].name': id('c', 33) }, [ID, F('io')]);
  accept('input name of 32 characters', { 'io.inputs[1].name': id('c', 32) }, [ID, F('io')]);
  range('input name of 33 characters', 'io.inputs[1].name', { 'io.inputs[1].name': id('c', 33) }, [ID, F('io')]);
  const servo = { vendor_id: 1337n, product_code: 4660n, dc_quantum_ns: 250000n };
  accept('drive profile name of 32 characters', { [`drives.${id('d', 32)}`]: servo }, [ID, F('axes[].profile')], { base: 'bench' });
  range(`drive profile name of 33 characters`, `drives.${id('d', 33)}`, { [`drives.${id('d', 33)}`]: servo }, [ID, F('axes[].profile')], { base: 'bench' });
  range('an axis naming a drive profile of 33 characters', 'axes[0].profile', { 'axes[0].profile': id('d', 33) }, [ID, F('axes[].profile')], { base: 'bench' });
}

section = 'robot-bound axes and provenance';
accept('robot machine: every robot fact with provenance, bus wiring without', {}, [R('provenance'), R('robot_bound_form'), F('axes[].robot_joint'), F('robot')], { base: 'robot' });
accept('_unverified instead of _source', { 'robot.joints[0].min_source': undefined, 'robot.joints[0].min_unverified': 'estimated from CAD' }, [R('provenance')], { base: 'robot' });
accept('a provenance text of 256 characters', { 'robot.joints[0].min_source': 's'.repeat(256) }, [R('provenance')], { base: 'robot' });
range('a provenance text of 257 characters', 'robot.joints[0].min_source', { 'robot.joints[0].min_source': 's'.repeat(257) }, [R('provenance')], { base: 'robot' });
refuse('robot joint min without provenance', 'config_provenance_missing', 'robot.joints[0].min', { 'robot.joints[0].min_source': undefined }, [R('provenance')], { base: 'robot' });
refuse('robot joint sign without provenance', 'config_provenance_missing', 'robot.joints[1].sign', { 'robot.joints[1].sign_source': undefined }, [R('provenance')], { base: 'robot' });
refuse('robot joint wire_counts_per_rev without provenance', 'config_provenance_missing', 'robot.joints[0].wire_counts_per_rev', { 'robot.joints[0].wire_counts_per_rev_source': undefined }, [R('provenance')], { base: 'robot' });
refuse('robot-bound axis tracking limit without provenance', 'config_provenance_missing', 'axes[1].limits.completion_timeout_ms', { 'axes[1].limits.completion_timeout_ms_source': undefined }, [R('provenance'), R('robot_bound_form')], { base: 'robot' });
range('empty provenance string', 'robot.joints[0].max_source', { 'robot.joints[0].max_source': '' }, [R('provenance')], { base: 'robot' });
refuse('provenance that is not a string', 'config_type', 'robot.joints[0].max_source', { 'robot.joints[0].max_source': 5n }, [R('provenance')], { base: 'robot' });
refuse('provenance beside an absent field', 'config_unknown_field', 'axes[0].max_acceleration_source', { 'axes[0].max_acceleration_source': 'datasheet' }, [R('provenance')], { base: 'bench' });
accept('provenance beside a flat axis field', { 'axes[0].limits.max_velocity_source': 'datasheet' }, [R('provenance')]);
refuse('drive_speed_limit_motor_rpm on a robot-bound machine', 'config_forbidden_field', 'drive_speed_limit_motor_rpm', { drive_speed_limit_motor_rpm: 3000n }, [R('drive_speed_robot_bound'), F('drive_speed_limit_motor_rpm')], { base: 'robot' });
refuse('robot_joint naming no joint', 'config_reference', 'axes[0].robot_joint', { 'axes[0].robot_joint': 'A9' }, [F('axes[].robot_joint')], { base: 'robot' });
refuse('a robot joint bound twice', 'config_duplicate_value', 'axes[1].robot_joint', { 'axes[1].robot_joint': 'A1' }, [F('axes[].robot_joint')], { base: 'robot' });
refuse('robot-bound axis without a tracking limit', 'config_missing_field', 'axes[0].limits.following_error', { 'axes[0].limits.following_error': undefined, 'axes[0].limits.following_error_source': undefined }, [R('robot_bound_form')], { base: 'robot' });
refuse('robot-bound axis stating type', 'config_forbidden_field', 'axes[0].type', { 'axes[0].type': 'rotary' }, [R('robot_bound_form')], { base: 'robot' });
refuse('robot-bound axis stating limits.min', 'config_forbidden_field', 'axes[0].limits.min', { 'axes[0].limits.min': -1.0, 'axes[0].limits.min_source': 'x' }, [R('robot_bound_form'), F('axes[].limits')], { base: 'robot' });
refuse('robot-bound axis stating jog', 'config_forbidden_field', 'axes[0].jog', { 'axes[0].jog': {} }, [R('robot_bound_form'), F('axes[].jog')], { base: 'robot' });

section = 'robot description';
accept('description pinned from its file', {}, [R('robot_json_when_pinned')], { base: 'robot-pinned' });
refuse('description file missing', 'config_resource', 'robot.description', { 'robot.description': 'missing.urdf' }, [F('robot')], { base: 'robot-pinned' });
refuse('description outside the configuration directory', 'config_resource', 'robot.description', { 'robot.description': '../arm-2.urdf' }, [F('robot')], { base: 'robot-pinned' });
refuse('description_sha256 not the file digest', 'config_resource', 'robot.description_sha256', { 'robot.description_sha256': `sha256:${'0'.repeat(64)}` }, [R('robot_json_when_pinned')], { base: 'robot-pinned' });
range('description_sha256 malformed', 'robot.description_sha256', { 'robot.description_sha256': 'sha256:XYZ' }, [F('robot')], { base: 'robot' });

section = 'reading the JSON';
const text = (name: string, code: string, path: string, t: (base: JsonObj) => string | Uint8Array, ids: string[], more: Partial<Row> = {}) => ROWS.push({ section, name, base: 'nine', text: t, refuse: { code, path }, covers: ids, ...more });
text('a key repeated', 'config_duplicate_field', 'cycle_ns', (b) => writeJson(b, 2).replace('{', '{"cycle_ns": 1000000,'), [F('cycle_ns')]);
text('a key repeated in escaped form', 'config_duplicate_field', 'cycle_ns', (b) => writeJson(b, 2).replace('{', '{"cycle\\u005fns": 1000000,'), [F('cycle_ns')]);
text('trailing data', 'config_syntax', '', (b) => `${writeJson(b, 2)}\n{}`, ['profile:config.reading_json']);
text('a comment', 'config_syntax', '', (b) => `// machine\n${writeJson(b, 2)}`, ['profile:config.reading_json']);
text('invalid UTF-8', 'config_syntax', '', (b) => {
  const [pre, post] = writeJson(b, 2).split('"Nine-axis');
  return Buffer.concat([Buffer.from(`${pre}"Nine`), Buffer.from([0xff]), Buffer.from(`-axis${post}`)]);
}, ['profile:config.reading_json']);
text('a byte order mark', 'config_syntax', '', (b) => `\ufeff${writeJson(b, 2)}`, ['profile:config.reading_json']);

// ---------------------------------------------------------------------------------------------------

let ws: Workspace;
const results = new Map<Row, Outcome>();

beforeAll(async () => {
  ws = await Workspace.create('config-refusals');
  await ws.write(ROBOT_DESCRIPTION, ROBOT_DESCRIPTION_FILE);
  const files: string[] = [];
  for (const [i, row] of ROWS.entries()) {
    const base = BASES[row.base]();
    files.push(await ws.write(row.text ? row.text(base) : writeJson(edited(base, row.edits ?? {}), 2), `row-${String(i).padStart(3, '0')}.json`));
  }
  const outs = await compileMany(files, ws.out);
  ROWS.forEach((row, i) => results.set(row, outs[i]!));
});

afterAll(async () => {
  await ws?.remove();
});

for (const s of [...new Set(ROWS.map((r) => r.section))]) {
  describe(s, () => {
    for (const row of ROWS.filter((r) => r.section === s)) {
      if (!row.refuse) {
        test(`${row.name}: accepted`, covers(...row.covers, ...(row.refuse ? ['profile:config.error_codes'] : [])), () => {
          const o = results.get(row)!;
          expect(isRefused(o) ? `${o.error} at ${o.path}: ${o.message}` : 'compiled').toBe('compiled');
        });
        continue;
      }
      const { code, path } = row.refuse;
      if (!row.deviation) {
        test(`${row.name}: ${code} at ${path || '(document)'}`, covers(...row.covers, ...(row.refuse ? ['profile:config.error_codes'] : [])), () => {
          const o = results.get(row)!;
          expect(isRefused(o) ? { error: o.error, path: o.path } : 'compiled').toEqual({ error: code, path });
        });
        continue;
      }
      // Known deviation from docs/profile.md: what the documents require (a refusal, at that path) is asserted;
      // the profile's code is an expected failure, so a fix shows up as an unexpected pass.
      if (row.text) {
        test.fails(`${row.name}: ${code} (known deviation: ${row.deviation})`, covers(...row.covers, ...(row.refuse ? ['profile:config.error_codes'] : [])), () => {
          const o = results.get(row)!;
          expect(isRefused(o) ? { error: o.error, path: o.path } : 'compiled').toEqual({ error: code, path });
        });
        continue;
      }
      test(`${row.name}: refused at ${path}`, covers(...row.covers, ...(row.refuse ? ['profile:config.error_codes'] : [])), () => {
        const o = results.get(row)!;
        expect(isRefused(o) ? { refused: true, path: o.path } : 'compiled').toEqual({ refused: true, path });
      });
      test.fails(`${row.name}: code ${code} as docs/profile.md says (known deviation: ${row.deviation})`, covers(...row.covers, ...(row.refuse ? ['profile:config.error_codes'] : [])), () => {
        const o = results.get(row)!;
        expect(isRefused(o) && o.error).toBe(code);
      });
    }
  });
}
