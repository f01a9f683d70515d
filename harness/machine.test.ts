// harness/machine.ts: the cell a Describe reply and its machine configuration describe. The configuration
// counts only when it agrees with Describe; configured numbers win over the link profile's defaults.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { firstAxisUnfit, Machine } from './machine.ts';

const dir = mkdtempSync(join(tmpdir(), 'hil-machine-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const axisD = (id: string, unit: string, min: number, max: number, nativeHome: boolean) => ({
  id, position_unit: unit, min_position: min, max_position: max, max_velocity: 2, native_home: nativeHome, counts_per_unit: 1000, sign: 1,
});
const describeOf = (o: Record<string, unknown> = {}) => ({
  cycle_ns: 2_000_000n, link_profile: 'internet', max_grant_lease_ms: 3000n, max_jog_input_age_ns: 750_000_000n,
  axes: [axisD('R1', 'rad', -3, 3, false), axisD('X1', 'm', 0, 0.5, true)],
  io: { outputs: [{ name: 'torch', torch: true }, { name: 'clamp', torch: false }] },
  ...o,
});
const limits = (min: number, max: number) => ({
  min, max, max_velocity: 2, jog_acceleration: 4, max_target_lead: 0.05, following_error: 0.02, following_error_timeout_ms: 50, completion_tolerance: 0.001, completion_timeout_ms: 2000,
});
const configOf = (o: Record<string, unknown> = {}) => ({
  cycle_ns: 2_000_000, control: { link_profile: 'internet', max_jog_input_age_ns: 600_000_000 },
  axes: [
    { name: 'R1', slave_position: 0, type: 'rotary', require_home: false, limits: limits(-3, 3), jog: { arrest_ns: 100_000_000 } },
    { name: 'X1', slave_position: 1, type: 'linear', limits: limits(0, 0.5), max_acceleration: 2 },
  ],
  io: { outputs: [{ name: 'torch', torch: true }, { name: 'clamp' }], inputs: [{ name: 'arc_ok', fast: true }] },
  ...o,
});
const file = (name: string, c: unknown) => {
  const f = join(dir, name);
  writeFileSync(f, JSON.stringify(c));
  return f;
};

describe('Machine', () => {
  test('Describe alone: axes by index and bit, units, outputs; the link profile default input age; no configuration facts', () => {
    const m = new Machine(describeOf(), join(dir, 'absent.json'));
    expect(m.axes.map((a) => [a.id, a.index, a.bit, a.rotary, a.nativeHome])).toEqual([['R1', 0, 1, true, false], ['X1', 1, 2, false, true]]);
    expect(m.config).toBeUndefined();
    expect(m.axes[0]!.config).toBeUndefined();
    expect(m.inputs).toBeUndefined();
    expect(m.torch?.name).toBe('torch');
    expect(m.plainOutputs.map((o) => [o.name, o.index])).toEqual([['clamp', 1]]);
    expect(m.homeable.map((a) => a.id)).toEqual(['X1']);
    expect(m.mask()).toBe(3);
    expect(m.unconfiguredBit).toBe(4);
    expect(m.configuredInputAgeNs).toBe(750_000_000n); // internet default
    expect(m.configuredLeaseNs).toBe(3_000_000_000n);
    // no configuration: whether R1 needs Home is not known, and it has no native Home
    expect(firstAxisUnfit(m)).toMatch(/no native Home/);
  });

  test('an agreeing configuration adds tracking figures, inputs and the configured input age', () => {
    const m = new Machine(describeOf(), file('agree.json', configOf()));
    expect(m.config).toBeDefined();
    expect(m.axes[0]!.config).toMatchObject({ type: 'rotary', followingError: 0.02, completionTolerance: 0.001, jogAcceleration: 4, requireHome: false, arrestNs: 100_000_000n, quickStopNs: 300_000_000n });
    expect(m.axes[1]!.config).toMatchObject({ type: 'linear', maxAcceleration: 2, requireHome: false, arrestNs: 200_000_000n });
    expect(m.inputs).toEqual([{ name: 'arc_ok', fast: true, index: 0 }]);
    expect(m.configuredInputAgeNs).toBe(600_000_000n);
    // R1 needs no Home by its configuration: a suite can move it without homing
    expect(firstAxisUnfit(m)).toBeUndefined();
  });

  test('a configuration that disagrees with Describe in any of axis ids, units, limits, cycle or link profile is not used', () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ['another axis name', { axes: [{ ...configOf().axes[0], name: 'R9' }, configOf().axes[1]] }],
      ['another type', { axes: [{ ...configOf().axes[0], type: 'linear' }, configOf().axes[1]] }],
      ['another limit', { axes: [{ ...configOf().axes[0], limits: limits(-2, 3) }, configOf().axes[1]] }],
      ['one axis fewer', { axes: [configOf().axes[0]] }],
      ['another cycle', { cycle_ns: 1_000_000 }],
      ['another link profile', { control: { link_profile: 'lan' } }],
    ];
    for (const [what, o] of cases) {
      const m = new Machine(describeOf(), file(`${what.replace(/ /g, '-')}.json`, configOf(o)));
      expect(m.config, what).toBeUndefined();
      expect(m.configuredInputAgeNs, what).toBe(750_000_000n);
    }
  });
});
