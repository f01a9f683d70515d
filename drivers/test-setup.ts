// The small bus setup the drivers' unit tests open: `axes` identical axes on slaves 0.., two outputs and
// two inputs, 1 ms cycle; `axis` adds fields to every axis (slave identities), `rest` replaces the others.

import type { BusSetup } from './bus.ts';

export function testBusSetup(axes: number, axis: Partial<BusSetup['axes'][number]> = {}, rest: Partial<Omit<BusSetup, 'axes'>> = {}): BusSetup {
  return {
    cycleNs: 1_000_000n,
    axes: Array.from({ length: axes }, (_, i) => ({
      index: i,
      id: `j${i + 1}`,
      slavePosition: i,
      countsPerUnit: 100_000,
      sign: 1 as const,
      minPosition: -3,
      maxPosition: 3,
      maxVelocity: 2,
      followingError: 0.05,
      ...axis,
    })),
    expectedMapping: ['rx:0x6040:00 controlword u16'],
    ioOutputs: 2,
    ioInputs: 2,
    ...rest,
  };
}
