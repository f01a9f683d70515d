// The cell a file's tests run against, learnt from the target and never from constants of the default
// fixture. Suites ask this module which axes, units, limits, outputs and link-profile bounds the
// cell has, and skip with a stated reason when it cannot exercise a rule.
//
// Two sources, in this order of trust:
// - Describe (document 1 part 4 "describe"): axes with position unit, limits, max_velocity, native_home,
//   counts_per_unit and sign; io outputs (name, torch); link_profile, max_grant_lease_ms,
//   max_jog_input_age_ns, cycle_ns. Every target answers it.
// - the machine configuration (document 3 part 2), where the run has one: the file `hil run --machine`
//   names (HIL_MACHINE), or the default fixture on the targets that start this repository's stack without
//   one. It holds what Describe does not (following error, completion tolerance, jog acceleration, input
//   definitions, brakes). It is used only when it agrees with Describe (same axis ids, units and limits,
//   cycle, link profile): a configuration that is not the cell's is no source of facts about it.
// Numbers the documents tie to configuration (input age and lease ceiling, document 1 part 8; following
// error and completion tolerance, document 3 part 2) are read from here, so a test asserts them at the
// value the cell was configured with.

import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const DEFAULT_MACHINE = fileURLToPath(new URL('../fixtures/machines/nine-axis.json', import.meta.url));

/** Defaults of the link profiles (document 3 part 2 `control`; document 1 part 8). */
export const LINK_DEFAULTS = {
  lan: { leaseNs: 500_000_000n, inputAgeNs: 250_000_000n },
  internet: { leaseNs: 3_000_000_000n, inputAgeNs: 750_000_000n },
} as const;

/** Tracking and jog figures of one axis from the machine configuration (document 3 part 2 `limits`). */
export interface AxisConfig {
  type: 'rotary' | 'linear';
  jogAcceleration: number;
  maxTargetLead: number;
  followingError: number;
  followingErrorTimeoutMs: number;
  completionTolerance: number;
  completionTimeoutMs: number;
  /** Declared maximum acceleration (finite-difference check of dense admission), when declared. */
  maxAcceleration?: number;
  requireHome: boolean;
  brake: boolean;
  /** Jog arrest and quick-stop times (document 3 part 2 `jog`, defaults 200 ms and 300 ms). */
  arrestNs: bigint;
  quickStopNs: bigint;
  slavePosition: number;
}

export interface Axis {
  id: string;
  /** Position in Describe's axes (bit `index` of an axis_mask). */
  index: number;
  bit: number;
  unit: string;
  /** Position unit rad (the dense file's columns map to these, document 2 part 7). */
  rotary: boolean;
  min: number;
  max: number;
  maxVelocity: number;
  nativeHome: boolean;
  /** Describe require_home, else the configuration's (document 3 part 2 axes[].require_home). */
  requireHome: boolean;
  countsPerUnit: number;
  sign: number;
  /** From the machine configuration when the run has the cell's one. */
  config?: AxisConfig;
}

export interface Output {
  name: string;
  torch: boolean;
  /** Position in the configured outputs (the bit of an output mask in the reference profile). */
  index: number;
}

export interface Input {
  name: string;
  fast: boolean;
  index: number;
}

type Json = Record<string, any>;

export class Machine {
  readonly axes: readonly Axis[];
  readonly outputs: readonly Output[];
  /** Configured inputs (configuration only: Describe does not list them); undefined without a configuration. */
  readonly inputs: readonly Input[] | undefined;
  readonly cycleNs: bigint;
  readonly linkProfile: string;
  readonly maxGrantLeaseMs: number | undefined;
  readonly maxJogInputAgeNs: bigint | undefined;
  /** The machine configuration that agrees with Describe, when the run has one. */
  readonly config: Json | undefined;
  readonly configFile: string | undefined;

  constructor(description: Json, configFile?: string) {
    const axes = (description.axes ?? []) as Json[];
    this.axes = axes.map((a, index) => ({
      id: String(a.id),
      index,
      bit: 2 ** index,
      unit: String(a.position_unit),
      rotary: a.position_unit === 'rad',
      min: Number(a.min_position),
      max: Number(a.max_position),
      maxVelocity: Number(a.max_velocity),
      nativeHome: a.native_home === true,
      requireHome: a.require_home === true,
      countsPerUnit: Number(a.counts_per_unit),
      sign: Number(a.sign),
    }));
    const io = description.io as Json | null | undefined;
    this.outputs = ((io?.outputs ?? []) as Json[]).map((o, index) => ({ name: String(o.name), torch: o.torch === true, index }));
    this.cycleNs = BigInt(description.cycle_ns ?? 0);
    this.linkProfile = String(description.link_profile ?? 'lan');
    this.maxGrantLeaseMs = description.max_grant_lease_ms === undefined ? undefined : Number(description.max_grant_lease_ms);
    this.maxJogInputAgeNs = description.max_jog_input_age_ns === undefined ? undefined : BigInt(description.max_jog_input_age_ns);

    const found = findConfig(this, configFile);
    this.config = found?.config;
    this.configFile = found?.file;
    if (found) {
      const byName = configAxes(found.config);
      for (const a of this.axes) {
        const c = byName.get(a.id);
        (a as { config?: AxisConfig }).config = c;
        if (c?.requireHome && axes[a.index]?.require_home === undefined) (a as { requireHome: boolean }).requireHome = true;
      }
      this.inputs = (((found.config.io as Json | undefined)?.inputs ?? []) as Json[]).map((i, index) => ({ name: String(i.name), fast: i.fast === true, index }));
    } else this.inputs = undefined;
  }

  /** Mask of the given axes (all configured axes by default). */
  mask(axes: readonly Axis[] = this.axes): number {
    return axes.reduce((m, a) => m + a.bit, 0);
  }
  /** A mask bit no configured axis has, when one fits a 32-bit mask (invalid_axis_mask tests). */
  get unconfiguredBit(): number | undefined {
    return this.axes.length < 32 ? 2 ** this.axes.length : undefined;
  }
  get rotaryAxes(): readonly Axis[] {
    return this.axes.filter((a) => a.rotary);
  }
  get homeable(): readonly Axis[] {
    return this.axes.filter((a) => a.nativeHome);
  }
  /**
   * The first axis a suite can make ready on its own, given the status's home_valid_mask: one with Home
   * evidence already, or a native Home, or that requires no Home (document 1 part 4 arm: the start gate
   * needs Home "where required"). An axis that requires Home and has no native Home can only be made ready
   * from an anchor; suites that need one skip with `readyAxisMissing`.
   */
  readyAxis(homeValidMask: bigint | number): Axis | undefined {
    return this.axes.find((a) => this.canReady(a, homeValidMask));
  }
  canReady(a: Axis, homeValidMask: bigint | number): boolean {
    return ((BigInt(homeValidMask) >> BigInt(a.index)) & 1n) === 1n || a.nativeHome || !a.requireHome;
  }
  /** The Home an axis needs before a Start may use it: its bit when it lacks evidence and has a native Home, else 0. */
  homeFor(a: Axis, homeValidMask: bigint | number): number {
    return ((BigInt(homeValidMask) >> BigInt(a.index)) & 1n) === 0n && a.nativeHome && a.requireHome ? a.bit : 0;
  }
  get readyAxisMissing(): string {
    return `every axis of this cell requires Home without a native Home (${this}): none can be made ready without an anchor`;
  }
  byId(id: string): Axis | undefined {
    return this.axes.find((a) => a.id === id);
  }
  output(name: string): Output | undefined {
    return this.outputs.find((o) => o.name === name);
  }
  get torch(): Output | undefined {
    return this.outputs.find((o) => o.torch);
  }
  /** Outputs a process marker or intent may drive (document 1: torch output is refused everywhere). */
  get plainOutputs(): readonly Output[] {
    return this.outputs.filter((o) => !o.torch);
  }
  /** A name no configured output has. */
  get unconfiguredOutput(): string {
    let n = 'no_such_output';
    while (this.output(n)) n += '_';
    return n;
  }
  /**
   * The jog input age the cell was configured with (document 3 part 2 control.max_jog_input_age_ns,
   * default by link profile): the configuration's value, else the profile default. Undefined when the
   * link profile is not one the documents give a default for and no configuration says.
   */
  get configuredInputAgeNs(): bigint | undefined {
    const c = this.config?.control as Json | undefined;
    if (c?.max_jog_input_age_ns !== undefined) return BigInt(c.max_jog_input_age_ns);
    return (LINK_DEFAULTS as Record<string, { inputAgeNs: bigint }>)[this.linkProfile]?.inputAgeNs;
  }
  /** The lease ceiling the cell was configured with, in ns (control.max_grant_lease_ns, default by link profile). */
  get configuredLeaseNs(): bigint | undefined {
    const c = this.config?.control as Json | undefined;
    if (c?.max_grant_lease_ns !== undefined) return BigInt(c.max_grant_lease_ns);
    return (LINK_DEFAULTS as Record<string, { leaseNs: bigint }>)[this.linkProfile]?.leaseNs;
  }

  /** A one-line summary for skip reasons and report parameters. */
  toString(): string {
    const units = this.axes.map((a) => `${a.id}[${a.unit}${a.nativeHome ? ',home' : ''}]`).join(' ');
    return `${this.axes.length} axes ${units}; outputs ${this.outputs.map((o) => o.name + (o.torch ? '(torch)' : '')).join(',') || 'none'}; link ${this.linkProfile}`;
  }
}

const cache = new WeakMap<object, Machine>();

/**
 * The machine a Describe reply describes (memoised per reply object, which the file's tests share), with
 * `configFile` as its configuration when given, else the run's (HIL_MACHINE, or the default fixture on the
 * targets that start this repository's stack).
 */
export function machineOf(description: object, configFile?: string): Machine {
  if (configFile !== undefined) return new Machine(description as Json, configFile);
  let m = cache.get(description);
  // A per-test stack refreshes the description in place (harness/targets/described.ts): same cell.
  if (!m) cache.set(description, (m = new Machine(description as Json)));
  return m;
}

/**
 * The value, or a skip with `reason` (a rule this machine cannot exercise). `skip` is the test context's.
 */
export function needs<T>(skip: (note: string) => never, value: T | undefined | null | false, reason: string): T {
  if (value === undefined || value === null || value === false) skip(reason);
  return value as T;
}

function runConfigFile(): string | undefined {
  if (process.env.HIL_MACHINE) return process.env.HIL_MACHINE;
  const t = process.env.HIL_TARGET ?? 'sim';
  return t === 'sim' || t === 'replay' ? DEFAULT_MACHINE : undefined;
}

function findConfig(m: Machine, explicit: string | undefined): { file: string; config: Json } | undefined {
  const file = explicit ?? runConfigFile();
  if (!file || !existsSync(file)) return undefined;
  let config: Json;
  try {
    config = JSON.parse(readFileSync(file, 'utf8')) as Json;
  } catch {
    return undefined;
  }
  return agrees(m, config) ? { file, config } : undefined;
}

/** The configuration describes the same cell as Describe: axis ids, units, limits, cycle, link profile. */
function agrees(m: Machine, config: Json): boolean {
  const axes = configAxes(config);
  if (axes.size !== m.axes.length) return false;
  if (config.cycle_ns !== undefined && BigInt(config.cycle_ns) !== m.cycleNs) return false;
  if (String((config.control as Json | undefined)?.link_profile ?? 'lan') !== m.linkProfile) return false;
  const limits = configLimits(config);
  return m.axes.every((a) => {
    const c = axes.get(a.id);
    const l = limits.get(a.id);
    return c !== undefined && l !== undefined && (c.type === 'rotary') === a.rotary && l.min === a.min && l.max === a.max && l.max_velocity === a.maxVelocity;
  });
}

/** Per axis id: the merged flat fields (robot-bound axes take their joint's facts, document 3 "Axis forms"). */
function merged(config: Json): Map<string, Json> {
  const joints = new Map<string, Json>((((config.robot as Json | undefined)?.joints ?? []) as Json[]).map((j) => [String(j.id), j]));
  const out = new Map<string, Json>();
  for (const a of (config.axes ?? []) as Json[]) {
    if (a.robot_joint !== undefined) {
      const j = joints.get(String(a.robot_joint)) ?? {};
      const { min, max, max_velocity, jog_acceleration } = j;
      out.set(String(a.robot_joint), { ...j, ...a, limits: { min, max, max_velocity, jog_acceleration, ...(a.limits ?? {}) } });
    } else out.set(String(a.name), a);
  }
  return out;
}

function configLimits(config: Json): Map<string, Json> {
  return new Map([...merged(config)].map(([id, a]) => [id, (a.limits ?? {}) as Json]));
}

function configAxes(config: Json): Map<string, AxisConfig> {
  const out = new Map<string, AxisConfig>();
  for (const [id, a] of merged(config)) {
    const l = (a.limits ?? {}) as Json;
    const jog = (a.jog ?? {}) as Json;
    const cycle = BigInt(config.cycle_ns ?? 1_000_000);
    out.set(id, {
      type: a.type === 'linear' ? 'linear' : 'rotary',
      jogAcceleration: Number(l.jog_acceleration),
      maxTargetLead: Number(l.max_target_lead),
      followingError: Number(l.following_error),
      followingErrorTimeoutMs: Number(l.following_error_timeout_ms),
      completionTolerance: Number(l.completion_tolerance),
      completionTimeoutMs: Number(l.completion_timeout_ms),
      ...(a.max_acceleration !== undefined ? { maxAcceleration: Number(a.max_acceleration) } : {}),
      requireHome: a.require_home === true,
      brake: (a.brake as Json | undefined)?.present === true,
      arrestNs: jog.arrest_ns !== undefined ? BigInt(jog.arrest_ns) : 200_000_000n - (200_000_000n % cycle),
      quickStopNs: jog.quick_stop_ns !== undefined ? BigInt(jog.quick_stop_ns) : 300_000_000n - (300_000_000n % cycle),
      slavePosition: Number(a.slave_position),
    });
  }
  return out;
}

/**
 * Why a suite that moves the cell's first axis (bit 0, positions in rad, homed natively when it has no
 * Home evidence) cannot run on this cell, or undefined when it can. An axis without native Home that needs
 * Home (require_home) can only be made ready from an anchor, which such a suite does not have.
 */
export function firstAxisUnfit(m: Machine): string | undefined {
  const a = m.axes[0];
  if (!a) return 'the cell describes no axes';
  if (!a.rotary) return `the test moves the first axis in rad; this cell's first axis ${a.id} is in ${a.unit} (${m})`;
  if (!a.nativeHome && a.config?.requireHome !== false) {
    return `the test homes the first axis natively; this cell's ${a.id} has no native Home${a.config ? ' and requires Home' : ' (and the run has no configuration saying it needs none)'}`;
  }
  if (a.min > -0.1 || a.max < 0.1) return `the test moves ${a.id} about 0.05 rad either side of 0; its limits are [${a.min}, ${a.max}]`;
  return undefined;
}
