// Machine configurations nobody hand-tuned: a seeded generator of valid machine configuration
// JSON (document 3 part 2 "Machine top level", "Axis forms"; the field rules docs/profile.md "Machine
// configuration" fills in), 1..16 flat axes of mixed rotary and linear types, with random limits, tracking
// figures, link profile and cell I/O. The suites run on such a cell (`.ci/matrix`) must give true verdicts:
// every test passes for that cell or skips with the reason it cannot exercise the rule.
//
// Run as a script to write one: `npx tsx harness/machine-gen.ts --seed 7 --out /tmp/m.json` (prints the
// path and a one-line summary). The seed is the whole recipe: the same seed gives the same bytes.

import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { seededRandom } from './property.ts';

/** Rounded to `d` decimals (short, readable doubles in the file). */
const round = (x: number, d: number) => Number(x.toFixed(d));

export interface GeneratedMachine {
  seed: number;
  config: Record<string, unknown>;
  summary: string;
}

/** Drive speed ceiling of the flat fixtures (document 3: default 3000 rpm for flat machines). */
const RPM = 3000;

export function generateMachine(seed: number, opts: { axes?: number } = {}): GeneratedMachine {
  const r = seededRandom(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const between = (lo: number, hi: number) => lo + r() * (hi - lo);
  const int = (lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));

  const n = opts.axes ?? int(1, 16);
  const cycleNs = pick([500_000, 1_000_000, 2_000_000, 4_000_000]);
  const axes: Array<Record<string, unknown>> = [];
  const kinds: string[] = [];
  for (let i = 0; i < n; i++) {
    const rotary = r() < 0.7;
    const name = rotary ? `R${i + 1}` : `L${i + 1}`;
    const requireHome = r() < 0.6;
    const startup: Record<string, unknown> = {};
    if (r() < 0.5) startup.native_home = r() < 0.7;
    if (r() < 0.3) startup.home_method = pick([35, 37]);
    const nativeHome = (startup.native_home as boolean | undefined) ?? requireHome; // docs/profile.md: Describe native_home
    kinds.push(`${name}${nativeHome ? '+home' : ''}${requireHome ? '!' : ''}`);
    let axis: Record<string, unknown>;
    if (rotary) {
      const revs = int(1, 121);
      const wcpr = 2 ** int(16, 20);
      // drive speed: max_velocity / (2 pi) x revs x 60 <= 3000 rpm (docs/profile.md "Drive speed check")
      const vMax = (RPM * 2 * Math.PI) / (60 * revs);
      const min = round(-between(0.3, 3.2), 3);
      const max = round(between(0.3, 3.2), 3);
      axis = {
        name, slave_position: i, profile: 'sim-ds402', type: 'rotary',
        wire_counts_per_rev: wcpr, motor_encoder_counts_per_rev: wcpr, wire_revs_per_axis_rev: revs, gear_ratio: { numerator: revs, denominator: 1 },
        sign: pick([1, -1]), coordinate_evidence_mode: pick(['multi_turn', 'single_turn_absolute']), require_home: requireHome,
        ...(r() < 0.5 ? { max_acceleration: round(between(4, 20), 2) } : {}),
        limits: {
          min, max, max_velocity: round(Math.min(between(0.6, 5), 0.9 * vMax), 3), jog_acceleration: round(between(1, 20), 2),
          max_target_lead: round(between(0.02, 0.1), 3), following_error: round(between(0.005, 0.05), 4), following_error_timeout_ms: int(20, 200),
          completion_tolerance: round(between(0.0005, 0.005), 5), completion_timeout_ms: int(1000, 5000),
        },
      };
    } else {
      const revs = int(1, 4);
      const lead = pick([0.005, 0.01, 0.02]);
      const wcpr = 2 ** int(16, 18);
      const vMax = (RPM * lead) / (60 * revs);
      const min = round(-between(0, 0.2), 3);
      const max = round(between(0.2, 1), 3);
      axis = {
        name, slave_position: i, profile: 'sim-ds402', type: 'linear',
        wire_counts_per_rev: wcpr, motor_encoder_counts_per_rev: wcpr, wire_revs_per_axis_rev: revs, gear_ratio: { numerator: revs, denominator: 1 }, lead_m_per_rev: lead,
        sign: pick([1, -1]), coordinate_evidence_mode: pick(['multi_turn', 'single_turn_absolute']), require_home: requireHome,
        ...(r() < 0.5 ? { max_acceleration: round(between(0.5, 4), 2) } : {}),
        limits: {
          min, max, max_velocity: round(Math.min(between(0.05, 0.5), 0.9 * vMax), 4), jog_acceleration: round(between(0.2, 2), 3),
          max_target_lead: round(between(0.002, 0.01), 4), following_error: round(between(0.001, 0.005), 4), following_error_timeout_ms: int(20, 200),
          completion_tolerance: round(between(0.00005, 0.0005), 6), completion_timeout_ms: int(1000, 5000),
        },
      };
    }
    if (Object.keys(startup).length) axis.startup = startup;
    if (r() < 0.3) axis.jog = { arrest_ns: cycleNs * int(50, 300), quick_stop_ns: cycleNs * int(100, 400) };
    if (r() < 0.2) axis.brake = { present: true, release_delay_ms: int(0, 80), engage_delay_ms: int(0, 50) };
    axes.push(axis);
  }

  const linkProfile = pick(['lan', 'internet']);
  const control: Record<string, unknown> = { link_profile: linkProfile };
  if (r() < 0.3) control.max_jog_input_age_ns = pick([150_000_000, 300_000_000, 500_000_000]);
  if (r() < 0.3) control.max_grant_lease_ns = pick([400_000_000, 1_000_000_000, 2_500_000_000]);

  const config: Record<string, unknown> = {
    schema_version: 1,
    backend: 'simulation',
    cycle_ns: cycleNs,
    max_cycle_lateness_ns: cycleNs / 2,
    axes,
    runtime: { cpu: int(0, 3), priority: int(50, 90) },
    control,
  };
  let io = 'no I/O';
  if (r() < 0.7) {
    const outputs: Array<Record<string, unknown>> = [];
    if (r() < 0.7) outputs.push({ name: 'torch', torch: true });
    for (let k = int(0, 3); k > 0; k--) outputs.push({ name: `out_${outputs.length}`, torch: false });
    const inputs = Array.from({ length: int(0, 3) }, (_, k) => ({ name: `in_${k}`, fast: r() < 0.5 }));
    config.io = { slave_position: n, outputs, inputs };
    io = `outputs ${outputs.map((o) => o.name).join(',') || 'none'}; inputs ${inputs.map((i) => i.name + (i.fast ? '(fast)' : '')).join(',') || 'none'}`;
  }
  const summary = `seed ${seed}: ${n} axes (${kinds.join(' ')}), cycle ${cycleNs} ns, link ${linkProfile}, ${io}`;
  return { seed, config, summary };
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const { values } = parseArgs({ options: { seed: { type: 'string' }, out: { type: 'string' }, axes: { type: 'string' } } });
  const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed ${values.seed}: not a non-negative integer`);
  const g = generateMachine(seed, values.axes ? { axes: Number(values.axes) } : {});
  const out = resolve(values.out ?? `generated-${seed}.json`);
  writeFileSync(out, JSON.stringify(g.config, null, 2) + '\n');
  process.stdout.write(`${out}\n${g.summary}\n`);
}
