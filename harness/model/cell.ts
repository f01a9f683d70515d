// What the model knows of the cell, read from Describe (portable: axes, limits and outputs as described),
// and whether the model's program files fit it.

import { REFERENCE_RULES, type ModelConfig, type Rules } from './model.ts';

export interface Description {
  binding: Record<string, unknown>;
  axes: Array<{ id: string; native_home?: boolean; position_unit?: string }>;
  cycle_ns: bigint;
  max_grant_lease_ms?: bigint | number;
  max_jog_input_age_ns?: bigint | number;
  io?: { outputs: Array<{ name: string; torch: boolean }> } | null;
}

/** What the model knows of the cell, from Describe (portable: axes, limits and outputs as described). */
export function configFrom(d: Description, rules: Rules = REFERENCE_RULES): ModelConfig {
  const axisCount = d.axes.length;
  let nativeHomeMask = 0;
  d.axes.forEach((a, i) => {
    if (a.native_home) nativeHomeMask |= 1 << i;
  });
  const trajAxis = Math.max(0, d.axes.findIndex((a) => a.native_home));
  const outputs = d.io?.outputs ?? [];
  return {
    axisCount,
    nativeHomeMask,
    trajAxis,
    leaseCeilingMs: Number(d.max_grant_lease_ms ?? 500n),
    // Part 8: "omitted or 0 keeps the 500 ms default", capped by the ceiling.
    defaultLeaseMs: 500,
    cycleNs: BigInt(d.cycle_ns),
    plainOutput: outputs.findIndex((o) => !o.torch),
    torchOutput: outputs.findIndex((o) => o.torch),
    outputCount: outputs.length,
    planCycles: 400,
    jogInputAgeMs: Number(BigInt(d.max_jog_input_age_ns ?? 250_000_000n) / 1_000_000n),
    ...(outputs.find((o) => !o.torch) ? { plainOutputName: outputs.find((o) => !o.torch)!.name } : {}),
    ...(programUnfit(d, trajAxis) ? { programUnfit: programUnfit(d, trajAxis)! } : {}),
    rules,
  };
}

/**
 * Why the model's program files do not fit the cell: a dense file's columns map in order to the axes in
 * rad (document 2 part 7, PROFILE "Program admission" Axis map), so those must be the cell's first one to
 * nine axes, and the plan's axis one of them. Undefined when they fit.
 */
export function programUnfit(d: Description, trajAxis: number): string | undefined {
  const rad = d.axes.map((a, i) => (a.position_unit === 'rad' ? i : -1)).filter((i) => i >= 0);
  if (rad.length === 0 || rad.length > 9 || !rad.every((a, i) => a === i)) return `the cell's axes in rad are not its first one to nine axes (the dense columns map to them in order)`;
  if (!rad.includes(trajAxis)) return `the plan's axis ${d.axes[trajAxis]?.id} is not in rad`;
  return undefined;
}
