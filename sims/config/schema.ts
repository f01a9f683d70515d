// Table-driven field rules of the machine configuration (document 3 part 2) and the reader that applies
// them. The reader turns the parsed JSON into a canonical tree (exact integers as bigint, doubles as
// number, defaults filled in) so that writing a default explicitly and leaving it out give the same
// identity. Cross-field rules (min < max, uniqueness, DC quantum, provenance) live in compile.ts.
// Fields marked "profile" are our decisions where the document says "not shown" (docs/profile.md).

import { ConfigError } from './errors.ts';
import { childPath, JsonNumber, JsonObject, jsonTypeName } from './json.ts';
import type { JsonValue } from './json.ts';
import type { CanonObject, CanonValue } from './format.ts';
import { U64_MAX } from '../primitives.ts';

interface Common {
  /** Absent: may be left out with no value. Otherwise a field without `def` is required. */
  opt?: boolean;
}
export type Spec =
  | (Common & { k: 'int'; min: bigint; max: bigint; def?: bigint })
  | (Common & { k: 'sign'; def?: bigint })
  | (Common & { k: 'dbl'; gt?: number; min?: number; max?: number; def?: number })
  | (Common & { k: 'enum'; values: readonly string[]; def?: string })
  | (Common & { k: 'str'; pattern?: RegExp; def?: string })
  | (Common & { k: 'bool'; def?: boolean })
  | (Common & { k: 'obj'; fields: Fields; provenance?: boolean; def?: 'empty' })
  | (Common & { k: 'map'; key: RegExp; of: Spec; def?: undefined })
  | (Common & { k: 'arr'; of: Spec; min: number; max: number; def?: 'empty' })
  | (Common & { k: 'alt'; choose: (v: JsonValue) => Spec; def?: undefined });

export type Fields = Readonly<Record<string, Spec>>;

const U32_MAX = 4294967295n;
const int = (min: number | bigint, max: number | bigint, o: Common & { def?: number | bigint } = {}): Spec => ({
  k: 'int',
  min: BigInt(min),
  max: BigInt(max),
  ...(o.opt !== undefined ? { opt: o.opt } : {}),
  ...(o.def !== undefined ? { def: BigInt(o.def) } : {}),
});
const dbl = (o: Omit<Extract<Spec, { k: 'dbl' }>, 'k'> = {}): Spec => ({ k: 'dbl', ...o });
const positive = (o: Common & { max?: number } = {}): Spec => dbl({ gt: 0, ...o });
const enm = (values: readonly string[], o: Common & { def?: string } = {}): Spec => ({ k: 'enum', values, ...o });
const str = (o: Common & { pattern?: RegExp } = {}): Spec => ({ k: 'str', ...o });
const bool = (o: Common & { def?: boolean } = {}): Spec => ({ k: 'bool', ...o });
const obj = (fields: Fields, o: Common & { provenance?: boolean; def?: 'empty' } = {}): Spec => ({ k: 'obj', fields, ...o });
const arr = (of: Spec, min: number, max: number, o: Common & { def?: 'empty' } = {}): Spec => ({ k: 'arr', of, min, max, ...o });

export const ID = /^[A-Za-z][A-Za-z0-9_.-]{0,31}$/;
const NAME = /^[a-z][a-z0-9_]{0,31}$/;
const NONEMPTY = /^[^\n\r]{1,256}$/;

/** The five tracking fields, the only limits a robot-bound axis states itself. */
export const TRACKING_LIMITS: Fields = {
  max_target_lead: positive(),
  following_error: positive(),
  following_error_timeout_ms: int(1, 1000),
  completion_tolerance: positive(),
  completion_timeout_ms: int(1, U32_MAX),
};
const LIMITS: Fields = {
  min: dbl(),
  max: dbl(),
  max_velocity: positive(),
  jog_acceleration: positive(),
  ...TRACKING_LIMITS,
};

/** How drive counts map to the axis coordinate; shared by flat axes and robot joints. */
const KINEMATICS: Fields = {
  profile: str({ pattern: ID }),
  type: enm(['rotary', 'linear']),
  wire_counts_per_rev: int(1, U32_MAX),
  motor_encoder_counts_per_rev: int(1, U32_MAX),
  wire_revs_per_axis_rev: positive(),
  gear_ratio: obj({ numerator: int(1, U32_MAX), denominator: int(1, U32_MAX) }, { opt: true }),
  lead_m_per_rev: positive({ opt: true }),
  sign: { k: 'sign' },
  coordinate_evidence_mode: enm(['multi_turn', 'single_turn_absolute']),
  position_tracking_mode: enm(['bounded', 'continuous'], { def: 'bounded' }), // profile
  require_home: bool({ def: true }), // profile default
  max_acceleration: positive({ opt: true }),
};

// profile: exact contents of startup, brake, collision_watchdog and diagnostics are not shown.
export const AXIS_BLOCKS: Fields = {
  startup: obj(
    { native_home: bool({ opt: true }), home_method: int(-128, 127, { def: 37 }), home_offset: dbl({ def: 0 }) },
    { def: 'empty' },
  ),
  jog: obj({ arrest_ns: int(1, U64_MAX, { def: 200_000_000 }), quick_stop_ns: int(1, U64_MAX, { def: 300_000_000 }) }, { def: 'empty' }),
  brake: obj(
    { present: bool({ def: false }), release_delay_ms: int(0, 10000, { def: 0 }), engage_delay_ms: int(0, 10000, { def: 0 }) },
    { def: 'empty' },
  ),
  collision_watchdog: obj(
    {
      enabled: bool({ def: false }),
      torque_permille: int(1, 3000, { def: 1000 }),
      torque_cycles: int(1, 65535, { def: 10 }),
      following_error_cycles: int(1, 65535, { def: 10 }),
    },
    { def: 'empty' },
  ),
  diagnostics: obj({ extended: bool({ def: false }) }, { def: 'empty' }),
};

export const FLAT_AXIS: Spec = obj({
  name: str({ pattern: ID }),
  slave_position: int(0, 65535),
  ...KINEMATICS,
  limits: obj(LIMITS),
  ...AXIS_BLOCKS,
});

export const ROBOT_BOUND_AXIS: Spec = obj({
  robot_joint: str({ pattern: ID }),
  slave_position: int(0, 65535),
  limits: obj(TRACKING_LIMITS, { provenance: true }),
});

/**
 * Fields of the flat form that a robot-bound axis must not state (its robot joint supplies them):
 * config_forbidden_field rather than config_unknown_field.
 */
const FORBIDDEN = new WeakMap<Fields, ReadonlySet<string>>();
function forbidOthers(own: Spec, other: Spec): void {
  if (own.k !== 'obj' || other.k !== 'obj') return;
  FORBIDDEN.set(own.fields, new Set(Object.keys(other.fields).filter((k) => !Object.hasOwn(own.fields, k))));
  for (const [k, sub] of Object.entries(own.fields)) {
    const o = other.fields[k];
    if (sub.k === 'obj' && o?.k === 'obj') forbidOthers(sub, o);
  }
}
forbidOthers(ROBOT_BOUND_AXIS, FLAT_AXIS);

const ROBOT_JOINT: Spec = obj({
  id: str({ pattern: ID }),
  ...KINEMATICS,
  native_home: bool({ opt: true }),
  min: dbl(),
  max: dbl(),
  max_velocity: positive(),
  jog_acceleration: positive(),
});

export const MACHINE: Fields = {
  schema_version: int(1, 1),
  backend: enm(['simulation', 'live'], { def: 'simulation' }), // profile default
  cycle_ns: int(250_000, 10_000_000),
  max_cycle_lateness_ns: int(1, 249_999_999),
  // An axis with `robot_joint` is robot-bound, otherwise flat (document 3 part 2, "Axis forms").
  axes: arr({ k: 'alt', choose: (v) => (v instanceof JsonObject && v.entries.has('robot_joint') ? ROBOT_BOUND_AXIS : FLAT_AXIS) }, 1, 16),
  drive_speed_limit_motor_rpm: positive({ max: 6000, opt: true }),
  runtime: obj({
    cpu: int(0, 1023),
    priority: int(1, 99),
    telemetry: obj(
      {
        retention_ms: int(100, 3_600_000, { def: 100_000 }),
        dump_count: int(1, 100, { def: 20 }),
        dump_bytes: int(529_680, Number.MAX_SAFE_INTEGER, { def: 536_870_912 }),
        directory: str({ opt: true, pattern: /^[^\n\r\0]{1,4096}$/ }),
      },
      { def: 'empty' },
    ),
  }),
  robot: obj(
    {
      model_id: str({ pattern: NONEMPTY }),
      description: str({ opt: true, pattern: /^[A-Za-z0-9_.\-/]{1,255}$/ }),
      description_sha256: str({ opt: true, pattern: /^sha256:[0-9a-f]{64}$/ }),
      joints: arr(ROBOT_JOINT, 1, 16),
    },
    { opt: true, provenance: true },
  ),
  control: obj(
    {
      link_profile: enm(['lan', 'internet'], { def: 'lan' }),
      max_grant_lease_ns: int(1_000_000, 10_000_000_000, { opt: true }),
      max_jog_input_age_ns: int(1, 2_000_000_000, { opt: true }),
    },
    { def: 'empty' },
  ),
  bus: obj(
    {
      unknown_slaves: enm(['refuse', 'hold'], { def: 'refuse' }),
      unknown_slaves_note: str({ opt: true, pattern: NONEMPTY }),
      unused_slaves: arr(int(0, 65535), 0, 256, { def: 'empty' }),
    },
    { def: 'empty' },
  ),
  bus_bringup: obj(
    {
      startup_passive_ms: int(0, 600_000, { def: 0 }),
      explicit_pdo_config: bool({ def: false }),
      disable_output_watchdog: bool({ def: false }),
      no_dc: bool({ def: false }),
      wait_before_safeop_ms: int(0, 60_000, { def: 250 }),
      preop_safeop_timeout_ms: int(1, 600_000, { def: 5000 }),
      safeop_op_timeout_ms: int(1, 600_000, { def: 5000 }),
      init_preop_timeout_ms: int(1, 600_000, { def: 5000 }), // profile: remaining bus_bringup fields
    },
    { def: 'empty' },
  ),
  io: obj(
    {
      slave_position: int(0, 65535, { opt: true }),
      outputs: arr(obj({ name: str({ pattern: NAME }), torch: bool({ def: false }) }), 0, 32, { def: 'empty' }),
      inputs: arr(obj({ name: str({ pattern: NAME }), fast: bool({ def: false }) }), 0, 32, { def: 'empty' }),
    },
    { opt: true },
  ),
  drives: {
    k: 'map',
    key: ID,
    opt: true,
    of: obj({ vendor_id: int(0, U32_MAX), product_code: int(0, U32_MAX), dc_quantum_ns: int(0, 10_000_000, { def: 0 }) }),
  },
  cell: obj({ label: str({ opt: true, pattern: NONEMPTY }), site: str({ opt: true, pattern: NONEMPTY }) }, { opt: true }),
};

const PROVENANCE_SUFFIXES = ['_source', '_unverified'] as const;
const isNumeric = (s: Spec) => s.k === 'int' || s.k === 'dbl' || s.k === 'sign';

/**
 * Read one object against its field table. `provenance` is inherited by nested objects: inside the robot
 * block and a robot-bound axis's limits every numeric field present needs a provenance sibling string.
 */
export function readObject(v: JsonValue, path: string, fields: Fields, provenance = false): CanonObject {
  if (!(v instanceof JsonObject)) throw typeError(path, 'object', v);
  const out: CanonObject = Object.create(null) as CanonObject;
  for (const [key, child] of v.entries) {
    const base = provenanceBase(key);
    if (base !== null && fields[base] && isNumeric(fields[base]!) && v.entries.has(base)) {
      out[key] = readValue(child, childPath(path, key), str({ pattern: NONEMPTY }), false) as string;
      continue;
    }
    if (!Object.hasOwn(fields, key)) {
      if (FORBIDDEN.get(fields)?.has(key)) throw new ConfigError('config_forbidden_field', childPath(path, key), `"${key}" is not allowed in this axis form`);
      throw new ConfigError('config_unknown_field', childPath(path, key), `unknown field "${key}"`);
    }
  }
  for (const [key, spec] of Object.entries(fields)) {
    const p = childPath(path, key);
    const child = v.entries.get(key);
    if (child === undefined) {
      const d = defaultOf(spec, p, provenance);
      if (d !== undefined) out[key] = d;
      else if (!spec.opt) throw new ConfigError('config_missing_field', p, `required field "${key}" is absent`);
      continue;
    }
    if (provenance && isNumeric(spec) && !PROVENANCE_SUFFIXES.some((s) => v.entries.has(key + s))) {
      throw new ConfigError('config_provenance_missing', p, `numeric robot fact needs ${key}_source or ${key}_unverified`);
    }
    out[key] = readValue(child, p, spec, provenance);
  }
  return out;
}

function provenanceBase(key: string): string | null {
  for (const s of PROVENANCE_SUFFIXES) if (key.endsWith(s) && key.length > s.length) return key.slice(0, -s.length);
  return null;
}

function defaultOf(spec: Spec, path: string, provenance: boolean): CanonValue | undefined {
  if (spec.k === 'map' || spec.def === undefined) return undefined;
  if (spec.k === 'obj') return readObject(new JsonObject(), path, spec.fields, provenance || !!spec.provenance);
  if (spec.k === 'arr') return [];
  return spec.def;
}

function typeError(path: string, want: string, got: JsonValue): ConfigError {
  return new ConfigError('config_type', path, `expected ${want}, got ${jsonTypeName(got)}`);
}

export function readValue(v: JsonValue, path: string, spec: Spec, provenance: boolean): CanonValue {
  switch (spec.k) {
    case 'int':
    case 'sign': {
      if (!(v instanceof JsonNumber)) throw typeError(path, 'integer', v);
      if (!v.isIntegerLiteral) throw new ConfigError('config_type', path, `expected an exact integer, got ${v.raw}`);
      const n = BigInt(v.raw);
      if (spec.k === 'sign') {
        if (n !== 1n && n !== -1n) throw new ConfigError('config_range', path, `must be -1 or +1, got ${v.raw}`);
      } else if (n < spec.min || n > spec.max) {
        throw new ConfigError('config_range', path, `${v.raw} outside ${spec.min}..${spec.max}`);
      }
      return n;
    }
    case 'dbl': {
      if (!(v instanceof JsonNumber)) throw typeError(path, 'number', v);
      const x = Number(v.raw);
      if (!Number.isFinite(x)) throw new ConfigError('config_range', path, `${v.raw} is not a finite double`);
      if ((spec.gt !== undefined && !(x > spec.gt)) || (spec.min !== undefined && x < spec.min) || (spec.max !== undefined && x > spec.max)) {
        const bounds = [spec.gt !== undefined ? `> ${spec.gt}` : '', spec.min !== undefined ? `>= ${spec.min}` : '', spec.max !== undefined ? `<= ${spec.max}` : ''];
        throw new ConfigError('config_range', path, `${v.raw} must be ${bounds.filter(Boolean).join(' and ')}`);
      }
      return Object.is(x, -0) ? 0 : x;
    }
    case 'enum':
      if (typeof v !== 'string') throw typeError(path, 'string', v);
      if (!spec.values.includes(v)) throw new ConfigError('config_range', path, `"${v}" is not one of ${spec.values.join(', ')}`);
      return v;
    case 'str':
      if (typeof v !== 'string') throw typeError(path, 'string', v);
      if (spec.pattern && !spec.pattern.test(v)) throw new ConfigError('config_range', path, `"${v}" does not match ${spec.pattern}`);
      return v;
    case 'bool':
      if (typeof v !== 'boolean') throw typeError(path, 'boolean', v);
      return v;
    case 'obj':
      return readObject(v, path, spec.fields, provenance || !!spec.provenance);
    case 'map': {
      if (!(v instanceof JsonObject)) throw typeError(path, 'object', v);
      const out: CanonObject = Object.create(null) as CanonObject;
      for (const [key, child] of v.entries) {
        if (!spec.key.test(key)) throw new ConfigError('config_range', childPath(path, key), `key "${key}" does not match ${spec.key}`);
        out[key] = readValue(child, childPath(path, key), spec.of, provenance);
      }
      return out;
    }
    case 'alt':
      return readValue(v, path, spec.choose(v), provenance);
    case 'arr': {
      if (!Array.isArray(v)) throw typeError(path, 'array', v);
      if (v.length < spec.min || v.length > spec.max) {
        throw new ConfigError('config_range', path, `${v.length} entries, allowed ${spec.min}..${spec.max}`);
      }
      return v.map((item, i) => readValue(item, childPath(path, i), spec.of, provenance));
    }
  }
}
