// The `ethercat-fake` driver: the EtherCAT driver (ethercat.ts) over the fake master (fake-master.ts), with
// a bench whose wiring matches the machine configuration unless the params say otherwise. It offers the
// shared fault vocabulary (drivers/faults.ts) through the fake's out-of-band conditions, and keeps the
// drives' counters across a core restart as real drives do.

import type { BusSetup, DriverOptions } from '../bus.ts';
import { FAULT_KINDS, FaultSpecError, type FaultInjection, type FaultKind } from '../faults.ts';
import type { SimSnapshot } from '../sim/driver.ts';
import { EthercatBusDriver, type EthercatParams } from './ethercat.ts';
import type { FakeBusSpec, FakeSlaveSpec } from './fake-bus.ts';
import { FakeEthercatMaster, type FakeCycleMode } from './fake-master.ts';
import type { MappedEntry, PlannedSlave } from './layout.ts';

/** How the bench differs from the configuration (all optional). */
export interface FakeBenchParams {
  /** thread (default): the fake master cycles in its own worker at the configured period; lockstep: one bus cycle per exchange. */
  cycle?: FakeCycleMode;
  /** Axes whose drive firmware uses another PDO mapping (the sim driver's start fault, same shape). */
  startFaults?: Array<{ kind: 'pdo_mapping_mismatch'; axis: number }>;
  /** Start-up SDOs a slave refuses, with its abort code. */
  sdoAborts?: Array<{ position: number; index: number; subindex: number; abortCode: number }>;
  /** Positions where no slave is wired. */
  absent?: number[];
  /** Slaves whose identity differs from the configuration. */
  identity?: Array<{ position: number; vendor: number; product: number }>;
  homingNs?: bigint;
  /** No master answers (node-ethercat's start() error when the IgH master is not running). */
  noMaster?: boolean;
}

/** The fault kinds the fake offers: frozen_feedback is absent because one drive's frozen inputs are invisible to an EtherCAT master (the master's cycle still moves); sluggish_drive (a soft position loop, for showing a failed motion test in the report) only the sim driver plants. */
export const FAKE_FAULT_KINDS: readonly FaultKind[] = (Object.keys(FAULT_KINDS) as FaultKind[]).filter((k) => k !== 'frozen_feedback' && k !== 'sluggish_drive');

/** A drive firmware with a different mapping: position demand (0x6062) where following error actual (0x60F4) belongs. */
function mismatched(mapping: readonly MappedEntry[]): MappedEntry[] {
  return mapping.map((e) => (e.index === 0x60f4 ? { ...e, index: 0x6062, name: 'position_demand' } : { ...e }));
}

export function benchFor(setup: BusSetup, plan: PlannedSlave[], b: FakeBenchParams, persisted?: SimSnapshot, pendingMismatch = 0): FakeBusSpec {
  const slaves: FakeSlaveSpec[] = [];
  for (const s of plan) {
    if (b.absent?.includes(s.position)) continue;
    const id = b.identity?.find((x) => x.position === s.position);
    const wrongMap = s.kind === 'axis' && ((pendingMismatch >>> s.axis) & 1) === 1;
    slaves.push({
      position: s.position,
      kind: s.kind,
      axis: s.axis,
      vendor: id?.vendor ?? s.vendor,
      product: id?.product ?? s.product,
      mapping: wrongMap ? mismatched(s.mapping) : s.mapping.map((e) => ({ ...e })),
      sdoAborts: (b.sdoAborts ?? []).filter((a) => a.position === s.position).map(({ index, subindex, abortCode }) => ({ index, subindex, abortCode })),
    });
  }
  return { cycleNs: setup.cycleNs, slaves, plant: setup, ...(persisted ? { persisted } : {}), ...(b.homingNs ? { homingNs: b.homingNs } : {}) };
}

export function createFakeEthercatDriver(o: DriverOptions): EthercatBusDriver {
  const p = { ...(o.params ?? {}) } as Record<string, unknown>;
  const known = ['cycle', 'startFaults', 'sdoAborts', 'absent', 'identity', 'homingNs', 'noMaster', 'staleAfterCycles', 'opTimeoutMs', 'ioSlavePosition', 'ioVendor', 'ioProduct', 'outputWatchdog', 'explicitPdoConfig'];
  for (const k of Object.keys(p)) if (!known.includes(k)) throw new TypeError(`ethercat-fake driver: unknown parameter ${k}`);
  const cycle = (p.cycle ?? 'thread') as FakeCycleMode;
  if (cycle !== 'thread' && cycle !== 'lockstep') throw new TypeError('ethercat-fake driver: cycle must be thread or lockstep');
  const startFaults = (p.startFaults ?? []) as FakeBenchParams['startFaults'];
  if (!Array.isArray(startFaults) || !startFaults.every((f) => f?.kind === 'pdo_mapping_mismatch' && Number.isSafeInteger(f.axis) && f.axis >= 0)) {
    throw new TypeError('ethercat-fake driver: startFaults may only hold pdo_mapping_mismatch with an axis index');
  }
  const ints = (v: unknown) => Array.isArray(v) && v.every((x) => Number.isSafeInteger(x) && x >= 0);
  const sdoAborts = (p.sdoAborts ?? []) as NonNullable<FakeBenchParams['sdoAborts']>;
  if (!Array.isArray(sdoAborts) || !sdoAborts.every((a) => ints([a?.position, a?.index, a?.subindex, a?.abortCode]))) throw new TypeError('ethercat-fake driver: sdoAborts entries need position, index, subindex and abortCode');
  if (p.absent !== undefined && !ints(p.absent)) throw new TypeError('ethercat-fake driver: absent must list slave positions');
  const identity = (p.identity ?? []) as NonNullable<FakeBenchParams['identity']>;
  if (!Array.isArray(identity) || !identity.every((x) => ints([x?.position, x?.vendor, x?.product]))) throw new TypeError('ethercat-fake driver: identity entries need position, vendor and product');
  if (p.homingNs !== undefined && (typeof p.homingNs !== 'bigint' || p.homingNs <= 0n)) throw new TypeError('ethercat-fake driver: homingNs must be a positive bigint');
  const persisted = o.persisted as SimSnapshot | undefined;
  if (persisted !== undefined && !(Array.isArray(persisted?.counts) && Array.isArray(persisted?.absoluteBias))) throw new TypeError('ethercat-fake driver: the persisted snapshot is not one this driver made');
  if (p.noMaster !== undefined && typeof p.noMaster !== 'boolean') throw new TypeError('ethercat-fake driver: noMaster must be a boolean');
  const bench: FakeBenchParams = { cycle, startFaults, sdoAborts, identity, ...(p.absent ? { absent: p.absent as number[] } : {}), ...(p.homingNs ? { homingNs: p.homingNs as bigint } : {}) };
  // The fake's cycle thread asks for SCHED_FIFO like node-ethercat's, but on a shared development machine
  // (many real-time threads, real-time throttling) it was seen to stall up to ~17 ms at load 12 (more under heavier load); a rig's master does
  // not. So on its own thread the fake tolerates 100 cycles without a bus cycle before inputs count as stale
  // (the driver's default is 3); the stale-cycle fault is shown with the master stopped outright.
  const params: EthercatParams = cycle === 'thread' ? { staleAfterCycles: 100 } : {};
  for (const k of ['staleAfterCycles', 'opTimeoutMs', 'ioSlavePosition', 'ioVendor', 'ioProduct', 'outputWatchdog', 'explicitPdoConfig'] as const) if (p[k] !== undefined) (params as Record<string, unknown>)[k] = p[k];

  let pendingMismatch = 0;
  for (const f of startFaults ?? []) pendingMismatch |= 1 << f.axis;
  let fake: FakeEthercatMaster | undefined;
  let axes = 0;
  const faults: FaultInjection = {
    kinds: FAKE_FAULT_KINDS,
    inject(f) {
      if (!FAKE_FAULT_KINDS.includes(f.kind)) throw new FaultSpecError('FAULT_NOT_SUPPORTED', `the ethercat-fake driver cannot inject ${f.kind}`);
      if ('axis' in f && (f.axis >= axes || f.axis < 0)) throw new FaultSpecError('FAULT_NO_SUCH_AXIS', `no axis ${f.axis}`);
      const m = fake;
      if (!m) throw new FaultSpecError('FAULT_NOT_SUPPORTED', 'the ethercat-fake bus is not open');
      switch (f.kind) {
        case 'slave_offline': {
          const pos = m.options.bench.slaves.find((s) => s.kind === 'axis' && s.axis === f.axis)?.position;
          if (pos === undefined) throw new FaultSpecError('FAULT_NO_SUCH_AXIS', `axis ${f.axis} has no slave on this bench`);
          return m.inject({ kind: 'slave_lost', position: pos });
        }
        case 'wkc_drop':
          return m.inject({ kind: 'wkc_drop' });
        case 'pdo_mapping_mismatch':
          // Like the sim driver: the drive's mapping differs from the next bus start on.
          pendingMismatch |= 1 << f.axis;
          return;
        default:
          return m.inject({ kind: 'drive', fault: f });
      }
    },
    clear() {
      fake?.inject({ kind: 'clear' });
    },
  };
  return new EthercatBusDriver({
    name: 'ethercat-fake',
    params,
    master: async (setup, plan) => {
      axes = setup.axes.length;
      fake = new FakeEthercatMaster({ mode: cycle, bench: benchFor(setup, plan, bench, persisted, pendingMismatch), noMaster: p.noMaster === true });
      return fake;
    },
    faults,
    persist: { snapshot: () => fake?.driveCounters() ?? persisted ?? { counts: [], absoluteBias: [] } },
  });
}
