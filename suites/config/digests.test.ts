// The three digests move exactly when their documented inputs move (document 3 part 2): a change that
// alters motion or drive behaviour moves machine_sha256, runtime placement and non-motion metadata move
// deployment_sha256, either moves configuration_sha256, and a semantically neutral rewrite of the JSON
// (key order, whitespace, number spelling, a default written out or left out) moves nothing.
// A table of single-field changes runs in one compile batch; fast-check then draws random changes,
// compiling each run's variants in one `hil config compile-many` process.

import fc from 'fast-check';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { identityDigest } from '../../harness/oracle/identity.ts';
import { covers, describe, expect, test } from '../../harness/fixture.ts';
import { compileMany, isRefused, type Compiled, type Outcome } from '../../harness/clients/config.ts';
import { clone, getAt, RawNumber, readMachine, setAt, Workspace, writeJson, type JsonObj, type JsonValue } from './toolkit.ts';
import { ROBOT_DESCRIPTION, ROBOT_DESCRIPTION_FILE, robotMachine } from './machines.ts';
import { propertyRun, seededRandom } from '../../harness/property.ts';

type Edits = Record<string, JsonValue | undefined>;
type Change = 'machine' | 'deployment' | 'both' | 'none';

const NINE = readMachine('nine-axis');
const BENCH = readMachine('bench-two-axis');
const AXES = NINE.axes as JsonObj[];

const C = {
  conf: 'rule:machine_config.configuration_sha256',
  machine: 'rule:machine_config.machine_sha256',
  deployment: 'rule:machine_config.deployment_sha256',
  text: 'rule:machine_config.canonical_identity_text',
  f: (name: string) => `field:MachineConfig.${name}`,
  l: (name: string) => `limit:machine_${name}`,
};

function apply(base: JsonObj, edits: Edits): JsonObj {
  const c = clone(base);
  for (const [p, v] of Object.entries(edits)) setAt(c, p, v);
  return c;
}

// ---------------------------------------------------------------------------------------------------
// Neutral rewrites

/** Documented defaults (and our profile defaults) written out where the fixture omits them, or left out where it writes them. */
const DEFAULTS: Array<{ label: string; edits: Edits; covers: string[] }> = [
  { label: 'drive_speed_limit_motor_rpm 3000 left out (flat machine)', edits: { drive_speed_limit_motor_rpm: undefined }, covers: [C.f('drive_speed_limit_motor_rpm'), C.l('drive_speed_limit_motor_rpm')] },
  { label: 'jog arrest_ns 200 ms and quick_stop_ns 300 ms left out', edits: Object.fromEntries(AXES.map((_, i) => [`axes[${i}].jog`, undefined])), covers: [C.f('axes[].jog'), C.f('axes[].jog.arrest_ns'), C.f('axes[].jog.quick_stop_ns'), C.l('jog_arrest_ns'), C.l('jog_quick_stop_ns')] },
  {
    label: 'telemetry retention_ms 100000, dump_count 20, dump_bytes 536870912 left out',
    edits: { 'runtime.telemetry.retention_ms': undefined, 'runtime.telemetry.dump_count': undefined, 'runtime.telemetry.dump_bytes': undefined },
    covers: [C.l('telemetry_retention_ms'), C.l('telemetry_dump_count'), C.l('telemetry_dump_bytes')],
  },
  { label: 'lan lease 500000000 and jog input age 250000000 written out', edits: { 'control.max_grant_lease_ns': 500000000n, 'control.max_jog_input_age_ns': 250000000n }, covers: [C.l('max_grant_lease_lan_default_ns'), C.l('max_jog_input_age_lan_default_ns')] },
  { label: 'link_profile lan left out', edits: { 'control.link_profile': undefined }, covers: [C.f('control.link_profile'), C.f('control')] },
  { label: 'unknown_slaves refuse left out', edits: { 'bus.unknown_slaves': undefined }, covers: ['rule:machine_config.unknown_slaves', C.f('bus.unknown_slaves')] },
  { label: 'bus block left out', edits: { bus: undefined }, covers: [C.f('bus'), C.f('bus.unused_slaves[]')] },
  {
    label: 'bus_bringup block left out (every documented default)',
    edits: { bus_bringup: undefined },
    covers: [
      C.f('bus_bringup'),
      C.f('bus_bringup.startup_passive_ms'),
      C.f('bus_bringup.explicit_pdo_config'),
      C.f('bus_bringup.disable_output_watchdog'),
      C.f('bus_bringup.no_dc'),
      C.f('bus_bringup.wait_before_safeop_ms'),
      C.f('bus_bringup.preop_safeop_timeout_ms'),
      C.f('bus_bringup.safeop_op_timeout_ms'),
      C.l('bus_bringup_startup_passive_ms'),
      C.l('bus_bringup_wait_before_safeop_ms'),
      C.l('bus_bringup_preop_safeop_timeout_ms'),
      C.l('bus_bringup_safeop_op_timeout_ms'),
    ],
  },
  // Profile defaults (docs/profile.md "Field shapes and defaults not shown").
  { label: 'backend simulation left out', edits: { backend: undefined }, covers: [C.f('backend')] },
  { label: 'position_tracking_mode bounded and require_home true left out', edits: { 'axes[2].position_tracking_mode': undefined, 'axes[2].require_home': undefined }, covers: [C.f('axes[].position_tracking_mode'), C.f('axes[].require_home')] },
  { label: 'startup home_method 37 and home_offset 0 left out', edits: { 'axes[3].startup': undefined }, covers: [C.f('axes[].startup')] },
  { label: 'brake, diagnostics and collision_watchdog defaults written out', edits: { 'axes[4].brake': { present: false, release_delay_ms: 0n, engage_delay_ms: 0n }, 'axes[4].diagnostics': { extended: false }, 'axes[4].collision_watchdog': { enabled: false, torque_permille: 1000n, torque_cycles: 10n, following_error_cycles: 10n } }, covers: [C.f('axes[].brake'), C.f('axes[].diagnostics'), C.f('axes[].collision_watchdog')] },
  { label: 'io torch false and fast false left out', edits: { 'io.outputs[1].torch': undefined, 'io.inputs[1].fast': undefined }, covers: [C.f('io')] },
];

/** Paths of the fixture's double-valued fields (written with a fraction), which may be spelled differently. */
function doublePaths(v: JsonValue, prefix = '', out: string[] = []): string[] {
  if (Array.isArray(v)) v.forEach((x, i) => doublePaths(x, `${prefix}[${i}]`, out));
  else if (v !== null && typeof v === 'object' && !(v instanceof RawNumber)) for (const [k, x] of Object.entries(v)) doublePaths(x, prefix ? `${prefix}.${k}` : k, out);
  else if (typeof v === 'number') out.push(prefix);
  return out;
}
const DOUBLES = doublePaths(NINE);

/** Other spellings of the same double: trailing zero, exponent forms, -0 for 0. */
function spellings(x: number): string[] {
  const s = String(x);
  const e = x.toExponential();
  const out = [e, e.toUpperCase(), e.replace('e+', 'e')];
  if (!s.includes('e')) out.push(s.includes('.') ? `${s}0` : `${s}.0`);
  if (x === 0) out.push('-0.0', '-0');
  return out.filter((t) => Number(t) === x);
}

function reorder(v: JsonValue, mode: 'asis' | 'reverse' | 'shuffle', next: () => number): JsonValue {
  if (Array.isArray(v)) return v.map((x) => reorder(x, mode, next));
  if (v === null || typeof v !== 'object' || v instanceof RawNumber) return v;
  let keys = Object.keys(v);
  if (mode === 'reverse') keys = keys.reverse();
  if (mode === 'shuffle') {
    for (let i = keys.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [keys[i], keys[j]] = [keys[j]!, keys[i]!];
    }
  }
  const out: JsonObj = {};
  for (const k of keys) out[k] = reorder((v as JsonObj)[k]!, mode, next);
  return out;
}

interface Neutral {
  defaults: number[];
  respell: string[];
  order: 'asis' | 'reverse' | 'shuffle';
  indent: 0 | 1 | 2 | 4 | '\t';
  eol: '\n' | '\r\n';
  escapes: boolean;
  seed: number;
}

/** Apply the neutral default edits (before any other edit, so that the other edit stays in effect). */
function withDefaults(base: JsonObj, n: Pick<Neutral, 'defaults'>): JsonObj {
  return n.defaults.reduce((m, i) => apply(m, DEFAULTS[i]!.edits), base);
}

/** Write `m` as text the neutral way: respelled doubles, reordered keys, other whitespace and string escapes. */
function render(m: JsonObj, n: Omit<Neutral, 'defaults'>): string {
  const next = seededRandom(n.seed);
  const c = clone(m);
  for (const p of n.respell) {
    const x = getAt(c, p);
    if (typeof x !== 'number') continue;
    const alts = spellings(x);
    if (alts.length) setAt(c, p, new RawNumber(alts[Math.floor(next() * alts.length)]!));
  }
  let text = writeJson(reorder(c, n.order, next), n.indent, n.eol);
  // "\u0073imulation" is the same string as "simulation".
  if (n.escapes) text = text.replaceAll('"simulation"', '"\\u0073imulation"').replaceAll('"multi_turn"', '"multi\\u005fturn"');
  return text;
}

const AS_IS: Omit<Neutral, 'defaults'> = { respell: [], order: 'asis', indent: 2, eol: '\n', escapes: false, seed: 1 };

// ---------------------------------------------------------------------------------------------------
// The table: one row per documented input.

type Base = 'nine' | 'bench' | 'robot';
interface Source {
  base: Base;
  edits?: Edits;
  /** Text rendering; default: as is. */
  neutral?: Partial<Neutral>;
  /** Relative file name (the robot machine reads its description beside it). */
  name?: string;
}
interface Row {
  name: string;
  from?: Source;
  to: Source;
  change: Change;
  covers: string[];
  /** configuration.base.identity must not move (only io.* changed). */
  baseIdentitySame?: boolean;
}

const BASES: Record<Base, () => JsonObj> = { nine: () => NINE, bench: () => BENCH, robot: () => robotMachine({ description: true }) };

const motion = (name: string, edits: Edits, ...ids: string[]): Row => ({ name, to: { base: 'nine', edits }, change: 'machine', covers: [C.machine, C.conf, ...ids] });
const deployment = (name: string, edits: Edits, ...ids: string[]): Row => ({ name, to: { base: 'nine', edits }, change: 'deployment', covers: [C.deployment, C.conf, ...ids] });

const LIMIT_CHANGES: Array<[string, JsonValue]> = [
  ['min', -2.8],
  ['max', 2.8],
  ['max_velocity', 2.1],
  ['jog_acceleration', 2.5],
  ['max_target_lead', 0.04],
  ['following_error', 0.02],
  ['following_error_timeout_ms', 60n],
  ['completion_tolerance', 0.002],
  ['completion_timeout_ms', 2500n],
];

const ROWS: Row[] = [
  motion('cycle_ns', { cycle_ns: 2000000n }, C.f('cycle_ns')),
  motion('max_cycle_lateness_ns', { max_cycle_lateness_ns: 400000n }, C.f('max_cycle_lateness_ns')),
  motion('backend', { backend: 'live' }, C.f('backend')),
  motion('drive_speed_limit_motor_rpm', { drive_speed_limit_motor_rpm: 2900 }, C.f('drive_speed_limit_motor_rpm')),
  motion('axis name (the dense axis map refers to it)', { 'axes[8].name': 'J9b' }, C.f('axes[].name')),
  motion('axis slave_position', { 'axes[8].slave_position': 20n }, C.f('axes[].slave_position')),
  motion('axis wire_counts_per_rev', { 'axes[1].wire_counts_per_rev': 524288n }, C.f('axes[].wire_counts_per_rev')),
  motion('axis motor_encoder_counts_per_rev', { 'axes[1].motor_encoder_counts_per_rev': 4194304n }, C.f('axes[].motor_encoder_counts_per_rev')),
  motion('axis wire_revs_per_axis_rev with its gear_ratio', { 'axes[3].wire_revs_per_axis_rev': 61, 'axes[3].gear_ratio.numerator': 61n }, C.f('axes[].wire_revs_per_axis_rev'), C.f('axes[].gear_ratio.numerator')),
  motion('axis gear_ratio written as 120/2', { 'axes[3].gear_ratio': { numerator: 120n, denominator: 2n } }, C.f('axes[].gear_ratio.denominator')),
  motion('axis sign', { 'axes[0].sign': -1n }, C.f('axes[].sign')),
  motion('axis coordinate_evidence_mode', { 'axes[0].coordinate_evidence_mode': 'single_turn_absolute' }, C.f('axes[].coordinate_evidence_mode')),
  motion('axis position_tracking_mode', { 'axes[0].position_tracking_mode': 'continuous' }, C.f('axes[].position_tracking_mode')),
  motion('axis require_home', { 'axes[0].require_home': false }, C.f('axes[].require_home')),
  motion('axis max_acceleration', { 'axes[0].max_acceleration': 9.5 }, C.f('axes[].max_acceleration')),
  ...LIMIT_CHANGES.map(([f, v]) => motion(`axis limits.${f}`, { [`axes[0].limits.${f}`]: v }, C.f(`axes[].limits.${f}`), C.f('axes[].limits'))),
  motion('axis startup.home_method', { 'axes[0].startup.home_method': 35n }, C.f('axes[].startup')),
  motion('axis jog.arrest_ns', { 'axes[0].jog.arrest_ns': 150000000n }, C.f('axes[].jog.arrest_ns')),
  motion('axis jog.quick_stop_ns', { 'axes[0].jog.quick_stop_ns': 250000000n }, C.f('axes[].jog.quick_stop_ns')),
  motion('axis brake', { 'axes[1].brake.present': false }, C.f('axes[].brake')),
  motion('axis collision_watchdog', { 'axes[0].collision_watchdog.enabled': false }, C.f('axes[].collision_watchdog')),
  motion('control.link_profile (its defaults follow)', { 'control.link_profile': 'internet' }, C.f('control.link_profile')),
  motion('control.max_grant_lease_ns', { 'control.max_grant_lease_ns': 400000000n }, C.f('control.max_grant_lease_ns')),
  motion('control.max_jog_input_age_ns', { 'control.max_jog_input_age_ns': 200000000n }, C.f('control.max_jog_input_age_ns')),
  motion('bus.unused_slaves', { 'bus.unused_slaves': [20n] }, C.f('bus.unused_slaves[]')),
  motion('bus_bringup.startup_passive_ms', { 'bus_bringup.startup_passive_ms': 100n }, C.f('bus_bringup.startup_passive_ms')),
  motion('bus_bringup.explicit_pdo_config', { 'bus_bringup.explicit_pdo_config': true }, C.f('bus_bringup.explicit_pdo_config')),
  motion('bus_bringup.disable_output_watchdog', { 'bus_bringup.disable_output_watchdog': true }, C.f('bus_bringup.disable_output_watchdog')),
  motion('bus_bringup.no_dc', { 'bus_bringup.no_dc': true }, C.f('bus_bringup.no_dc')),
  motion('bus_bringup.wait_before_safeop_ms', { 'bus_bringup.wait_before_safeop_ms': 300n }, C.f('bus_bringup.wait_before_safeop_ms')),
  motion('bus_bringup.preop_safeop_timeout_ms', { 'bus_bringup.preop_safeop_timeout_ms': 6000n }, C.f('bus_bringup.preop_safeop_timeout_ms')),
  motion('bus_bringup.safeop_op_timeout_ms', { 'bus_bringup.safeop_op_timeout_ms': 6000n }, C.f('bus_bringup.safeop_op_timeout_ms')),
  { ...motion('io output torch flag', { 'io.outputs[1].torch': true }, C.f('io'), 'rule:machine_config.base_identity_with_io'), baseIdentitySame: true },
  { ...motion('io slave_position', { 'io.slave_position': 12n }, C.f('io'), 'rule:machine_config.base_identity_with_io'), baseIdentitySame: true },
  { name: 'drive layer vendor_id (resolved drive configuration)', from: { base: 'bench' }, to: { base: 'bench', edits: { 'drives.bench-servo.vendor_id': 1338n } }, change: 'machine', covers: [C.machine, C.conf, C.f('axes[].profile')] },
  { name: 'drive layer DC quantum', from: { base: 'bench' }, to: { base: 'bench', edits: { 'drives.bench-servo.dc_quantum_ns': 500000n } }, change: 'machine', covers: [C.machine, C.conf, 'rule:machine_config.cycle_divisible'] },
  { name: 'robot model_id', from: { base: 'robot' }, to: { base: 'robot', edits: { 'robot.model_id': 'arm-3' } }, change: 'machine', covers: [C.machine, C.conf, C.f('robot')] },
  { name: 'robot joint fact', from: { base: 'robot' }, to: { base: 'robot', edits: { 'robot.joints[0].max': 2.9 } }, change: 'machine', covers: [C.machine, C.conf, C.f('robot'), C.f('axes[].robot_joint')] },
  { name: 'robot-bound axis tracking limit', from: { base: 'robot' }, to: { base: 'robot', edits: { 'axes[0].limits.following_error': 0.02 } }, change: 'machine', covers: [C.machine, C.conf, 'rule:machine_config.robot_bound_form'] },
  { name: 'robot description content (same file name)', from: { base: 'robot' }, to: { base: 'robot', name: 'v2/robot.json' }, change: 'machine', covers: [C.machine, C.conf, 'rule:machine_config.robot_json_when_pinned'] },

  deployment('runtime.cpu', { 'runtime.cpu': 5n }, C.f('runtime.cpu'), C.f('runtime')),
  deployment('runtime.priority', { 'runtime.priority': 70n }, C.f('runtime.priority')),
  deployment('telemetry.retention_ms', { 'runtime.telemetry.retention_ms': 200000n }, C.f('runtime.telemetry.retention_ms')),
  deployment('telemetry.dump_count', { 'runtime.telemetry.dump_count': 10n }, C.f('runtime.telemetry.dump_count')),
  deployment('telemetry.dump_bytes', { 'runtime.telemetry.dump_bytes': 1073741824n }, C.f('runtime.telemetry.dump_bytes')),
  deployment('telemetry.directory', { 'runtime.telemetry.directory': '/srv/cell/telemetry' }, C.f('runtime.telemetry.directory')),
  deployment('cell label and site', { 'cell.label': 'Renamed cell', 'cell.site': 'plant 2' }),
  deployment('axis diagnostics (observation only)', { 'axes[0].diagnostics.extended': false }, C.f('axes[].diagnostics')),
  deployment('provenance string beside a flat axis limit', { 'axes[0].limits.max_velocity_source': 'drive datasheet' }, 'rule:machine_config.provenance'),
  { name: 'robot provenance string', from: { base: 'robot' }, to: { base: 'robot', edits: { 'robot.joints[0].min_source': 'measured 2026-04' } }, change: 'deployment', covers: [C.deployment, C.conf, 'rule:machine_config.provenance'] },
  { name: 'robot description file name (same content)', from: { base: 'robot' }, to: { base: 'robot', edits: { 'robot.description': 'copy/arm-2.urdf' } }, change: 'deployment', covers: [C.deployment, C.conf, C.f('robot')] },
  {
    name: 'unknown_slaves hold note',
    from: { base: 'nine', edits: { 'bus.unknown_slaves': 'hold', 'bus.unknown_slaves_note': 'spare terminal at 12' } },
    to: { base: 'nine', edits: { 'bus.unknown_slaves': 'hold', 'bus.unknown_slaves_note': 'spare terminal at 13' } },
    change: 'deployment',
    covers: [C.deployment, C.conf, 'rule:machine_config.unknown_slaves'],
  },
  { name: 'unknown_slaves hold (with its note)', to: { base: 'nine', edits: { 'bus.unknown_slaves': 'hold', 'bus.unknown_slaves_note': 'spare terminal at 12' } }, change: 'both', covers: [C.machine, C.deployment, C.conf, 'rule:machine_config.unknown_slaves', C.f('bus.unknown_slaves')] },

  ...DEFAULTS.map((d, i): Row => ({ name: `default: ${d.label}`, to: { base: 'nine', neutral: { defaults: [i] } }, change: 'none', covers: [C.conf, C.machine, C.deployment, ...d.covers] })),
  { name: 'internet defaults: lease 3000000000 and jog input age 750000000 written out', from: { base: 'nine', edits: { 'control.link_profile': 'internet' } }, to: { base: 'nine', edits: { 'control.link_profile': 'internet', 'control.max_grant_lease_ns': 3000000000n, 'control.max_jog_input_age_ns': 750000000n } }, change: 'none', covers: [C.conf, C.l('max_grant_lease_internet_default_ns'), C.l('max_jog_input_age_internet_default_ns')] },
  { name: 'keys in reverse order at every level', to: { base: 'nine', neutral: { order: 'reverse' } }, change: 'none', covers: [C.conf, C.text] },
  { name: 'compact JSON, no whitespace', to: { base: 'nine', neutral: { indent: 0 } }, change: 'none', covers: [C.conf, C.text] },
  { name: 'tab indentation and CRLF line ends', to: { base: 'nine', neutral: { indent: '\t', eol: '\r\n' } }, change: 'none', covers: [C.conf, C.text] },
  { name: 'every double spelled differently (8.0 as 8e+0, 0.05 as 0.050 ...)', to: { base: 'nine', neutral: { respell: DOUBLES } }, change: 'none', covers: [C.conf, C.text] },
  { name: 'strings written with \\u escapes', to: { base: 'nine', neutral: { escapes: true } }, change: 'none', covers: [C.conf, C.text] },
  { name: 'robot machine keys reordered and recompiled', from: { base: 'robot' }, to: { base: 'robot', neutral: { order: 'shuffle', seed: 7, indent: 0 } }, change: 'none', covers: [C.conf, C.text, C.f('robot')] },
];

function sourceText(s: Source): string {
  const n = { ...AS_IS, defaults: [], ...s.neutral };
  return render(apply(withDefaults(BASES[s.base](), n), s.edits ?? {}), n);
}

function expectChange(a: Compiled, b: Compiled, change: Change, label: string): void {
  const moved = {
    configuration: a.configuration_sha256 !== b.configuration_sha256,
    machine: a.machine_sha256 !== b.machine_sha256,
    deployment: a.deployment_sha256 !== b.deployment_sha256,
  };
  const want = {
    configuration: change !== 'none',
    machine: change === 'machine' || change === 'both',
    deployment: change === 'deployment' || change === 'both',
  };
  expect(moved, label).toEqual(want);
}

const compiled = (o: Outcome | undefined, label: string): Compiled => {
  if (!o || isRefused(o)) throw new Error(`${label}: expected a compiled configuration, got ${JSON.stringify(o)}`);
  return o;
};

// ---------------------------------------------------------------------------------------------------

let ws: Workspace;
let nineBase: Compiled;
const results = new Map<Row, { from: Compiled; to: Compiled }>();

beforeAll(async () => {
  ws = await Workspace.create('config-digests');
  for (const dir of ['', 'copy/']) await ws.write(ROBOT_DESCRIPTION, `${dir}${ROBOT_DESCRIPTION_FILE}`);
  await ws.write(`${ROBOT_DESCRIPTION}<!-- revised -->\n`, `v2/${ROBOT_DESCRIPTION_FILE}`);

  const files: string[] = [];
  const index = new Map<string, number>(); // text+name -> file index
  const fileOf = async (s: Source): Promise<number> => {
    const text = sourceText(s);
    const key = `${s.name ?? (s.base === 'robot' ? 'robot.json' : '')}\0${text}`;
    if (!index.has(key)) {
      index.set(key, files.length);
      files.push(await ws.write(text, s.name ?? (s.base === 'robot' ? `robot-${files.length}.json` : undefined)));
    }
    return index.get(key)!;
  };
  const plan: Array<{ row: Row; from: number; to: number }> = [];
  for (const row of ROWS) plan.push({ row, from: await fileOf(row.from ?? { base: 'nine' }), to: await fileOf(row.to) });
  const nine = await fileOf({ base: 'nine' });
  const outs = await compileMany(files, ws.out);
  nineBase = compiled(outs[nine], 'nine-axis');
  for (const p of plan) results.set(p.row, { from: compiled(outs[p.from], `${p.row.name} (from)`), to: compiled(outs[p.to], `${p.row.name} (to)`) });
});

afterAll(async () => {
  await ws?.remove();
});

describe('which digests a change moves', () => {
  for (const row of ROWS) {
    const what = { machine: 'moves machine_sha256 and configuration_sha256 only', deployment: 'moves deployment_sha256 and configuration_sha256 only', both: 'moves all three digests', none: 'moves no digest' }[row.change];
    test(`${row.name}: ${what}`, covers(...new Set(row.covers)), async () => {
      const r = results.get(row)!;
      expectChange(r.from, r.to, row.change, row.name);
      if (row.baseIdentitySame) {
        const base = async (c: Compiled) => identityDigest(await readFile(join(c.dir, 'configuration.base.identity')));
        expect(await base(r.to)).toBe(await base(r.from));
      }
    });
  }
});

// ---------------------------------------------------------------------------------------------------
// Random changes

interface Edit {
  path: string;
  value: JsonValue;
}

const axis = fc.integer({ min: 0, max: AXES.length - 1 });
const num = (p: string) => getAt(NINE, p) as number;
const big = (p: string) => getAt(NINE, p) as bigint;
const revs = (i: number) => Number(getAt(NINE, `axes[${i}].wire_revs_per_axis_rev`));
const intEdit = (path: string, min: number, max: number) => fc.integer({ min, max }).filter((v) => BigInt(v) !== big(path)).map((v): Edit => ({ path, value: BigInt(v) }));

const motionEdit: fc.Arbitrary<Edit> = fc.oneof(
  fc.tuple(axis, fc.double({ min: 0.001, max: 0.5, noNaN: true })).map(([i, d]): Edit => ({ path: `axes[${i}].limits.min`, value: num(`axes[${i}].limits.min`) - d })),
  fc.tuple(axis, fc.double({ min: 0.001, max: 0.5, noNaN: true })).map(([i, d]): Edit => ({ path: `axes[${i}].limits.max`, value: num(`axes[${i}].limits.max`) + d })),
  // Within the drive speed limit of 3000 motor rpm (docs/profile.md "Drive speed check").
  axis.chain((i) =>
    fc
      .double({ min: 0.05, max: ((3000 * 2 * Math.PI) / (60 * revs(i))) * 0.999, noNaN: true })
      .filter((v) => v !== num(`axes[${i}].limits.max_velocity`))
      .map((v): Edit => ({ path: `axes[${i}].limits.max_velocity`, value: v })),
  ),
  axis.chain((i) => intEdit(`axes[${i}].limits.following_error_timeout_ms`, 1, 1000)),
  axis.map((i): Edit => ({ path: `axes[${i}].sign`, value: -1n })),
  axis.map((i): Edit => ({ path: `axes[${i}].require_home`, value: false })),
  axis.chain((i) => fc.bigInt({ min: 1000000n, max: 65535000000n }).filter((v) => v !== 200000000n).map((v): Edit => ({ path: `axes[${i}].jog.arrest_ns`, value: v }))),
  intEdit('cycle_ns', 250000, 10000000),
  intEdit('max_cycle_lateness_ns', 1, 249999999),
  fc.integer({ min: 1, max: 2000000000 }).filter((v) => v !== 250000000).map((v): Edit => ({ path: 'control.max_jog_input_age_ns', value: BigInt(v) })),
  intEdit('bus_bringup.wait_before_safeop_ms', 0, 60000),
  fc.integer({ min: 0, max: 2 }).map((k): Edit => ({ path: `io.outputs[${k}].torch`, value: !getAt(NINE, `io.outputs[${k}].torch`) })),
);

const text = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }).filter((s) => !/[\r\n]/.test(s) && s.length <= 256);
const deploymentEdit: fc.Arbitrary<Edit> = fc.oneof(
  intEdit('runtime.cpu', 0, 1023),
  intEdit('runtime.priority', 1, 99),
  intEdit('runtime.telemetry.retention_ms', 100, 3600000),
  intEdit('runtime.telemetry.dump_count', 1, 100),
  fc.bigInt({ min: 529680n, max: 2n ** 53n - 1n }).filter((v) => v !== 536870912n).map((v): Edit => ({ path: 'runtime.telemetry.dump_bytes', value: v })),
  fc.stringMatching(/^\/[a-z0-9_.-]{1,20}(\/[a-z0-9_.-]{1,20}){0,3}$/).filter((s) => s !== getAt(NINE, 'runtime.telemetry.directory')).map((v): Edit => ({ path: 'runtime.telemetry.directory', value: v })),
  fc.tuple(fc.constantFrom('label', 'site'), text).filter(([k, s]) => s !== getAt(NINE, `cell.${k}`)).map(([k, v]): Edit => ({ path: `cell.${k}`, value: v })),
  fc.tuple(axis, fc.constantFrom(...LIMIT_CHANGES.map(([f]) => f)), fc.constantFrom('_source', '_unverified'), text).map(([i, f, suffix, v]): Edit => ({ path: `axes[${i}].limits.${f}${suffix}`, value: v })),
  axis.map((i): Edit => ({ path: `axes[${i}].diagnostics.extended`, value: getAt(NINE, `axes[${i}].diagnostics.extended`) !== true })),
);

const neutral: fc.Arbitrary<Neutral> = fc.record({
  defaults: fc.subarray([...DEFAULTS.keys()]),
  respell: fc.subarray(DOUBLES, { maxLength: 30 }),
  order: fc.constantFrom('asis', 'reverse', 'shuffle'),
  indent: fc.constantFrom<Neutral['indent']>(0, 1, 2, 4, '\t'),
  eol: fc.constantFrom('\n', '\r\n'),
  escapes: fc.boolean(),
  seed: fc.integer(),
});

describe('random changes (fast-check, one compile process per run)', () => {
  test(
    'a motion change moves machine only, a deployment change deployment only, a neutral rewrite nothing, and a neutral rewrite does not disturb a change',
    { ...covers(C.conf, C.machine, C.deployment, C.text), timeout: 120_000 },
    async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(motionEdit, deploymentEdit, neutral, async (m, d, n) => {
          const base = NINE;
          const variants = {
            motion: render(apply(base, { [m.path]: m.value }), AS_IS),
            deployment: render(apply(base, { [d.path]: d.value }), AS_IS),
            neutral: render(withDefaults(base, n), n),
            motionNeutral: render(apply(withDefaults(base, n), { [m.path]: m.value }), n),
            deploymentNeutral: render(apply(withDefaults(base, n), { [d.path]: d.value }), n),
          };
          const names = Object.keys(variants) as Array<keyof typeof variants>;
          run++;
          const files = await Promise.all(names.map((k) => ws.write(variants[k], `fc-${run}-${k}.json`)));
          const outs = await compileMany(files, ws.out);
          const got = Object.fromEntries(names.map((k, i) => [k, compiled(outs[i], k)])) as Record<keyof typeof variants, Compiled>;
          expectChange(nineBase, got.motion, 'machine', `motion ${m.path}`);
          expectChange(nineBase, got.deployment, 'deployment', `deployment ${d.path}`);
          expectChange(nineBase, got.neutral, 'none', 'neutral');
          expectChange(got.motion, got.motionNeutral, 'none', 'motion + neutral');
          expectChange(got.deployment, got.deploymentNeutral, 'none', 'deployment + neutral');
        }),
        propertyRun('digests.test.ts:428', 10),
      );
    },
  );
});
