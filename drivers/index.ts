// The driver registry: drivers are chosen by name, never by class. Each entry loads its module only when
// chosen (a dynamic import), so an optional or hardware-only dependency (node-ethercat) is never loaded
// for a simulator run, and a missing one produces a clear message instead of a crash at start-up.

import type { BusDriver, DriverFactory, DriverOptions } from './bus.ts';
import { DriverUnavailable } from './errors.ts';

export { DriverUnavailable } from './errors.ts';

export interface DriverDescriptor {
  readonly name: string;
  readonly summary: string;
  /** Loads the driver's module and returns its factory. Throws DriverUnavailable when it cannot. */
  load(): Promise<DriverFactory>;
}

export const DRIVERS: Readonly<Record<string, DriverDescriptor>> = Object.freeze({
  sim: {
    name: 'sim',
    summary: 'simulated CiA 402 drives and plant, with out-of-band fault injection',
    load: async () => (await import('./sim/driver.ts')).createSimDriver,
  },
  replay: {
    name: 'replay',
    summary: 'plays a recorded session back cycle by cycle and reports the first divergence',
    load: async () => (await import('./replay/driver.ts')).loadReplayFactory(),
  },
  ethercat: {
    name: 'ethercat',
    summary: 'real drives on an EtherCAT bus through the optional package node-ethercat (IgH master)',
    load: async () => (await import('./ethercat/driver.ts')).loadEthercatFactory(),
  },
  'ethercat-fake': {
    name: 'ethercat-fake',
    summary: 'the ethercat driver over a fake EtherCAT master and simulated CiA 402 drives (no hardware, no native module)',
    load: async () => (await import('./ethercat/driver.ts')).loadFakeEthercatFactory(),
  },
});

export function driverNames(): string[] {
  return Object.keys(DRIVERS);
}

/** Create a driver by registry name. */
export async function createDriver(name: string, options: DriverOptions = {}): Promise<BusDriver> {
  const d = Object.hasOwn(DRIVERS, name) ? DRIVERS[name] : undefined;
  if (!d) throw new DriverUnavailable('DRIVER_UNKNOWN', `no bus driver named ${JSON.stringify(name)}; known: ${driverNames().join(', ')}`);
  const factory = await d.load();
  const driver = factory(options);
  if (driver.name !== name) throw new TypeError(`driver registered as ${name} calls itself ${driver.name}`);
  return driver;
}
