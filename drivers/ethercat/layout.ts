// What the EtherCAT driver puts on the bus for a machine configuration (document 3: one CiA 402 slave in
// cyclic synchronous position mode per axis at its slave_position, and the cell I/O terminal), as
// node-ethercat slave definitions, pin names, the expected PDO mapping per slave and the SDO start-up list.
// The object layout beyond the profile's standard CSP mapping is a profile decision (docs/profile.md,
// "EtherCAT bus layout").

import { STANDARD_MAPPING, type BusSetup } from '../bus.ts';
import type { PinType, SdoParams, SlaveOptions } from './master.ts';

export interface MappedEntry {
  dir: 'rx' | 'tx';
  index: number;
  subindex: number;
  name: string;
  type: PinType;
}

const TYPE: Record<string, PinType> = { u8: 'uint8', i8: 'int8', u16: 'uint16', i16: 'int16', u32: 'uint32', i32: 'int32' };

/** Parses one mapping line of the profile form `rx:0x6040:00 controlword u16`. */
export function parseMappingLine(line: string): MappedEntry {
  const m = /^(rx|tx):0x([0-9a-f]{4}):([0-9a-f]{2}) ([a-z_][a-z0-9_]*) (u8|i8|u16|i16|u32|i32)$/.exec(line);
  if (!m) throw new TypeError(`not a PDO mapping line: ${JSON.stringify(line)}`);
  return { dir: m[1] as 'rx' | 'tx', index: Number.parseInt(m[2]!, 16), subindex: Number.parseInt(m[3]!, 16), name: m[4]!, type: TYPE[m[5]!]! };
}

/**
 * An axis slave's mapping: the standard CSP mapping plus the absolute encoder reading and its validity
 * (manufacturer objects 0x2000:01/02; the standard objects carry no absolute reading apart from the
 * incremental position).
 */
export const AXIS_MAPPING: readonly MappedEntry[] = [
  ...STANDARD_MAPPING.map(parseMappingLine),
  { dir: 'tx', index: 0x2000, subindex: 1, name: 'absolute_position', type: 'int32' },
  { dir: 'tx', index: 0x2000, subindex: 2, name: 'absolute_valid', type: 'uint8' },
];

/** The cell I/O terminal: 16 outputs; 32 inputs (readback in the low half, fast inputs in the high half); the E-stop chain. */
export const IO_MAPPING: readonly MappedEntry[] = [
  { dir: 'rx', index: 0x7000, subindex: 1, name: 'outputs', type: 'uint16' },
  { dir: 'tx', index: 0x6000, subindex: 1, name: 'inputs', type: 'uint32' },
  { dir: 'tx', index: 0x6010, subindex: 1, name: 'safety_chain', type: 'uint8' },
];

/** The PDOs the mapping is assigned to (sync manager 2 outputs, 3 inputs). */
export const RX_PDO = 0x1600;
export const TX_PDO = 0x1a00;

/** A PDO mapping entry as CoE stores it in 0x1600/0x1A00: index << 16 | subindex << 8 | bit length. */
export function mappingWord(e: MappedEntry): number {
  const bits = e.type.endsWith('8') ? 8 : e.type.endsWith('16') ? 16 : 32;
  return ((e.index << 16) | (e.subindex << 8) | bits) >>> 0;
}

export interface PlannedSlave {
  /** node-ethercat slave id; pins are `<id>.<entry name>`. */
  id: string;
  kind: 'axis' | 'io';
  position: number;
  /** Axis index for an axis slave, -1 for the I/O terminal. */
  axis: number;
  vendor: number;
  product: number;
  mapping: readonly MappedEntry[];
  sdos: SdoParams[];
}

export interface LayoutOptions {
  /** Where the cell I/O terminal is; default the position after the highest axis position. */
  ioSlavePosition?: number;
  ioVendor?: number;
  ioProduct?: number;
  /** Output watchdog per sync manager (document 3 bus_bringup.disable_output_watchdog). */
  outputWatchdog?: boolean;
  /** Write the PDO assignment and mapping by SDO before the rest of the start-up list (bus_bringup.explicit_pdo_config). */
  explicitPdoConfig?: boolean;
}

/**
 * The SDO writes that configure a slave's PDOs explicitly (CoE: clear the assignment, clear the PDO, write
 * its entries, set their count, assign it, set the assignment count), for both directions.
 */
export function pdoConfigSdos(mapping: readonly MappedEntry[]): SdoParams[] {
  const out: SdoParams[] = [];
  for (const [assign, pdo, dir] of [[0x1c12, RX_PDO, 'rx'], [0x1c13, TX_PDO, 'tx']] as const) {
    const entries = mapping.filter((e) => e.dir === dir);
    out.push({ index: assign, subindex: 0, type: 'uint8', value: 0 }, { index: pdo, subindex: 0, type: 'uint8', value: 0 });
    entries.forEach((e, k) => out.push({ index: pdo, subindex: k + 1, type: 'uint32', value: mappingWord(e) }));
    out.push({ index: pdo, subindex: 0, type: 'uint8', value: entries.length }, { index: assign, subindex: 1, type: 'uint16', value: pdo }, { index: assign, subindex: 0, type: 'uint8', value: 1 });
  }
  return out;
}

/**
 * Interpolation time period (0x60C2): value (:01, u8) times 10^index (:02, i8) seconds. The cycle is
 * written with the coarsest exponent that represents it exactly in a byte.
 */
export function interpolationPeriod(cycleNs: bigint): { value: number; exponent: number } {
  for (let exp = -3; exp >= -9; exp--) {
    const unitNs = 10n ** BigInt(9 + exp);
    if (cycleNs % unitNs === 0n && cycleNs / unitNs <= 255n) return { value: Number(cycleNs / unitNs), exponent: exp };
  }
  throw new RangeError(`cycle ${cycleNs} ns cannot be written as an interpolation period`);
}

/** The SDO start-up list of one axis slave, from the machine configuration (profile: docs/profile.md). */
export function axisStartupSdos(setup: BusSetup, axis: BusSetup['axes'][number]): SdoParams[] {
  const ip = interpolationPeriod(setup.cycleNs);
  const cpu = axis.countsPerUnit;
  const lo = Math.round(axis.sign * axis.minPosition * cpu);
  const hi = Math.round(axis.sign * axis.maxPosition * cpu);
  const clampI32 = (v: number) => Math.max(-0x8000_0000, Math.min(0x7fff_ffff, v));
  const clampU32 = (v: number) => Math.max(0, Math.min(0xffff_ffff, v));
  return [
    { index: 0x6060, subindex: 0, type: 'int8', value: 8 }, // modes of operation: cyclic synchronous position
    { index: 0x60c2, subindex: 1, type: 'uint8', value: ip.value },
    { index: 0x60c2, subindex: 2, type: 'int8', value: ip.exponent },
    { index: 0x6065, subindex: 0, type: 'uint32', value: clampU32(Math.round(axis.followingError * cpu)) }, // following error window
    { index: 0x607d, subindex: 1, type: 'int32', value: clampI32(Math.min(lo, hi)) }, // software position limits
    { index: 0x607d, subindex: 2, type: 'int32', value: clampI32(Math.max(lo, hi)) },
    { index: 0x607f, subindex: 0, type: 'uint32', value: clampU32(Math.round(axis.maxVelocity * cpu)) }, // max profile velocity
  ];
}

export function planBus(setup: BusSetup, o: LayoutOptions = {}): PlannedSlave[] {
  const axes: PlannedSlave[] = setup.axes.map((a) => ({
    id: `s${a.slavePosition}`,
    kind: 'axis',
    position: a.slavePosition,
    axis: a.index,
    vendor: a.vendorId ?? 0,
    product: a.productCode ?? 0,
    mapping: AXIS_MAPPING,
    sdos: [...(o.explicitPdoConfig ? pdoConfigSdos(AXIS_MAPPING) : []), ...axisStartupSdos(setup, a)],
  }));
  const used = new Set(axes.map((s) => s.position));
  if (used.size !== axes.length) throw new TypeError('two axes share a slave position');
  const ioPos = o.ioSlavePosition ?? setup.ioSlavePosition ?? Math.max(-1, ...axes.map((s) => s.position)) + 1;
  if (used.has(ioPos)) throw new TypeError(`the I/O terminal's slave position ${ioPos} is an axis's`);
  const io: PlannedSlave = { id: `s${ioPos}`, kind: 'io', position: ioPos, axis: -1, vendor: o.ioVendor ?? 0, product: o.ioProduct ?? 0, mapping: IO_MAPPING, sdos: o.explicitPdoConfig ? pdoConfigSdos(IO_MAPPING) : [] };
  return [...axes, io];
}

/** node-ethercat's addSlave argument for a planned slave. */
export function slaveOptions(s: PlannedSlave, o: LayoutOptions = {}): SlaveOptions {
  const entries = (dir: 'rx' | 'tx') =>
    s.mapping.filter((e) => e.dir === dir).map((e) => ({ index: `0x${e.index.toString(16).padStart(4, '0')}`, subindex: e.subindex, name: e.name, type: e.type }));
  return {
    id: s.id,
    position: { alias: 0, index: s.position },
    definition: {
      id: { vendor: s.vendor, product: s.product },
      syncs: [
        { syncManager: 2, direction: 'output', watchdog: o.outputWatchdog === false ? 'disable' : 'enable', pdos: [{ index: `0x${RX_PDO.toString(16)}`, entries: entries('rx') }] },
        { syncManager: 3, direction: 'input', watchdog: 'disable', pdos: [{ index: `0x${TX_PDO.toString(16)}`, entries: entries('tx') }] },
      ],
    },
  };
}

/** Working counter a slave adds to the domain's LRW datagram: 1 for reading its inputs, 2 for taking its outputs. */
export function slaveWkc(s: { mapping: readonly MappedEntry[] }): number {
  return (s.mapping.some((e) => e.dir === 'tx') ? 1 : 0) + (s.mapping.some((e) => e.dir === 'rx') ? 2 : 0);
}
