// The physical side of the fake EtherCAT master: the slaves on the wire (identity, the PDO mapping their
// firmware really uses, SDOs they refuse) and the simulated CiA 402 drives behind them (drivers/sim, the same
// drives the sim driver uses, so the two cannot drift apart). One `cycle` is one LRW exchange of the process
// data domain: outputs are taken from the domain bytes, the drives step, inputs are written back, the working
// counter counts the slaves that took part, and the master's cycle counter moves. It runs in the fake
// master's worker thread at the configured period (thread mode) or when the driver asks (lockstep mode).
// Faults are applied out of band (`apply`), never through the process image.

import { AL, ProcessImage, type BusSetup } from '../bus.ts';
import type { FaultSpec } from '../faults.ts';
import { SimBusDriver, type SimSnapshot } from '../sim/driver.ts';
import { slaveWkc, type MappedEntry } from './layout.ts';
import type { PinType } from './master.ts';

export interface FakeSlaveSpec {
  position: number;
  kind: 'axis' | 'io';
  /** Axis index of the simulated drive behind an axis slave; -1 for the I/O terminal. */
  axis: number;
  vendor: number;
  product: number;
  /** The mapping the slave's firmware really uses (read back through 0x1C12/0x1C13, 0x1600/0x1A00). */
  mapping: MappedEntry[];
  /** SDO downloads the slave refuses, with the CoE abort code it answers. */
  sdoAborts?: Array<{ index: number; subindex: number; abortCode: number }>;
}

/** A bench: what is on the wire, and the plant parameters of the drives behind the axis slaves. */
export interface FakeBusSpec {
  cycleNs: bigint;
  slaves: FakeSlaveSpec[];
  /** Plant parameters for the simulated drives (one per axis slave, by axis index). */
  plant: BusSetup;
  persisted?: SimSnapshot;
  homingNs?: bigint;
}

/** A registered domain entry: where a pin lives in the domain and which slave object it is. */
export interface DomainPin {
  name: string;
  offset: number;
  type: PinType;
  position: number;
  entry: string;
  dir: 'rx' | 'tx';
}

/** Out-of-band conditions of the fake bus (the master-level ones; drive-level ones go to the drives). */
export type FakeFault =
  | { kind: 'link_down' }
  | { kind: 'slave_lost'; position: number }
  | { kind: 'wkc_drop' }
  | { kind: 'stale_cycle' }
  | { kind: 'al_state'; position: number; state: number }
  | { kind: 'drive'; fault: FaultSpec }
  | { kind: 'clear' };

// Status area layout (Int32 words), shared with the master's side.
export const ST = { counter: 0, wkc: 1, link: 2, responding: 3, alOr: 4, wkcExpected: 5, header: 8 } as const;

export function statusBytes(slaves: number, axes: number): number {
  return (ST.header + slaves) * 4 + 8 + axes * 16; // Int32 words, pad to 8, then Float64 counts and bias per axis
}

export class FakeBus {
  private readonly view: DataView;
  private readonly st: Int32Array;
  private readonly kept: Float64Array;
  private readonly drives: SimBusDriver;
  private readonly img: ProcessImage;
  private readonly pinsBySlave: DomainPin[][];
  private readonly axisCount: number;
  // conditions
  private linkDown = false;
  private stale = false;
  private wkcDrop = false;
  private readonly lost: boolean[];
  private readonly alOverride: number[];
  /** AL state each slave reached at activation (OP for a slave that matches its configuration). */
  private readonly reached: number[];
  private opened: Promise<unknown>;

  constructor(
    readonly spec: FakeBusSpec,
    pins: DomainPin[],
    domain: SharedArrayBuffer,
    status: SharedArrayBuffer,
    reached: number[],
  ) {
    this.view = new DataView(domain);
    this.st = new Int32Array(status, 0, ST.header + spec.slaves.length);
    this.axisCount = spec.plant.axes.length;
    const off = Math.ceil(((ST.header + spec.slaves.length) * 4) / 8) * 8;
    this.kept = new Float64Array(status, off, this.axisCount * 2);
    this.pinsBySlave = spec.slaves.map((s) => pins.filter((p) => p.position === s.position));
    this.lost = spec.slaves.map(() => false);
    this.alOverride = spec.slaves.map(() => -1);
    this.reached = reached;
    this.drives = new SimBusDriver({ persisted: spec.persisted, ...(spec.homingNs ? { homingNs: spec.homingNs } : {}) });
    this.opened = this.drives.open(spec.plant);
    this.img = new ProcessImage(this.axisCount);
    let wkc = 0;
    spec.slaves.forEach((s, k) => {
      if (reached[k] === AL.op) wkc += slaveWkc(s);
    });
    this.st[ST.wkcExpected] = wkc;
    this.st[ST.link] = 1;
    this.publishStates();
    this.keep();
  }

  /** Resolves once the drives behind the slaves are powered (SimBusDriver.open). */
  ready(): Promise<unknown> {
    return this.opened;
  }

  apply(f: FakeFault): void {
    switch (f.kind) {
      case 'link_down':
        this.linkDown = true;
        break;
      case 'slave_lost': {
        const k = this.slaveIndex(f.position);
        this.lost[k] = true;
        const s = this.spec.slaves[k]!;
        if (s.kind === 'axis') this.drives.inject({ kind: 'slave_offline', axis: s.axis });
        break;
      }
      case 'wkc_drop':
        this.wkcDrop = true;
        break;
      case 'stale_cycle':
        this.stale = true;
        break;
      case 'al_state':
        this.alOverride[this.slaveIndex(f.position)] = f.state;
        break;
      case 'drive':
        this.drives.inject(f.fault);
        break;
      case 'clear':
        this.linkDown = this.stale = this.wkcDrop = false;
        this.lost.fill(false);
        this.alOverride.fill(-1);
        this.drives.clearInjected();
        break;
    }
    this.publishStates();
  }

  private slaveIndex(position: number): number {
    const k = this.spec.slaves.findIndex((s) => s.position === position);
    if (k < 0) throw new RangeError(`no slave at position ${position}`);
    return k;
  }

  /** The AL state a slave answers with now; 0 when it does not answer. */
  private alOf(k: number): number {
    if (this.linkDown || this.lost[k]) return 0;
    const o = this.alOverride[k]!;
    return o >= 0 ? o : this.reached[k]!;
  }

  private publishStates(): void {
    let or = 0;
    let responding = 0;
    for (let k = 0; k < this.spec.slaves.length; k++) {
      const al = this.alOf(k);
      Atomics.store(this.st, ST.header + k, al);
      if (al !== 0) {
        responding++;
        or |= al;
      }
    }
    Atomics.store(this.st, ST.link, this.linkDown ? 0 : 1);
    Atomics.store(this.st, ST.responding, responding);
    Atomics.store(this.st, ST.alOr, or);
  }

  /** One bus cycle at host time nowNs. */
  cycle(nowNs: bigint): void {
    if (this.stale) return; // the master's cycle stopped: nothing moves, the counter included
    const img = this.img;
    let wkc = 0;
    if (!this.linkDown) {
      for (let k = 0; k < this.spec.slaves.length; k++) {
        const s = this.spec.slaves[k]!;
        const al = this.alOf(k);
        // Outputs reach a slave only in OP; in SAFEOP it keeps its safe outputs (all zero) but sends inputs.
        if (s.kind === 'axis') {
          const a = s.axis;
          img.controlword[a] = al === AL.op ? this.read(k, 'controlword') : 0;
          img.modeOfOperation[a] = al === AL.op ? this.read(k, 'modes_of_operation') : 0;
          img.targetPosition[a] = al === AL.op ? this.read(k, 'target_position') : img.positionActual[a]!;
        } else {
          img.ioOutputWord = al === AL.op ? this.read(k, 'outputs') : 0;
        }
        if (al === AL.op) wkc += slaveWkc(s);
        else if (al === AL.safeop) wkc += 1;
      }
    }
    this.drives.exchange(img, nowNs);
    if (!this.linkDown) {
      for (let k = 0; k < this.spec.slaves.length; k++) {
        const s = this.spec.slaves[k]!;
        const al = this.alOf(k);
        if (al !== AL.op && al !== AL.safeop) continue;
        if (s.kind === 'axis') {
          const a = s.axis;
          this.write(k, 'statusword', img.statusword[a]!);
          this.write(k, 'modes_of_operation_display', img.modeDisplay[a]!);
          this.write(k, 'position_actual', img.positionActual[a]!);
          this.write(k, 'velocity_actual', img.velocityActual[a]!);
          this.write(k, 'following_error_actual', img.followingError[a]!);
          this.write(k, 'torque_actual', img.torqueActual[a]!);
          this.write(k, 'error_code', img.errorCode[a]!);
          this.write(k, 'digital_inputs', img.digitalInputs[a]!);
          this.write(k, 'absolute_position', img.absolutePosition[a]!);
          this.write(k, 'absolute_valid', img.absoluteValid[a]!);
        } else {
          this.write(k, 'inputs', img.ioInputWord >>> 0);
          this.write(k, 'safety_chain', img.safetyChainClosed);
        }
      }
    }
    Atomics.store(this.st, ST.wkc, this.wkcDrop ? Math.max(0, wkc - 1) : wkc);
    this.keep();
    Atomics.add(this.st, ST.counter, 1);
  }

  /** Drive counters for the next incarnation (real drives keep them across a master restart). */
  private keep(): void {
    const snap = this.drives.persistedState();
    for (let a = 0; a < this.axisCount; a++) {
      this.kept[2 * a] = snap.counts[a] ?? 0;
      this.kept[2 * a + 1] = snap.absoluteBias[a] ?? 0;
    }
  }

  private pin(k: number, entry: string): DomainPin | undefined {
    const list = this.pinsBySlave[k]!;
    for (const p of list) if (p.entry === entry) return p;
    return undefined;
  }

  private read(k: number, entry: string): number {
    const p = this.pin(k, entry);
    return p ? readDomain(this.view, p.offset, p.type) : 0;
  }

  private write(k: number, entry: string, v: number): void {
    // A slave whose firmware maps an object the master did not register has nowhere to put it.
    const p = this.pin(k, entry);
    if (p) writeDomain(this.view, p.offset, p.type, v);
  }

  async close(): Promise<void> {
    await this.drives.close();
  }
}

export function readDomain(v: DataView, offset: number, type: PinType): number {
  switch (type) {
    case 'uint8':
      return v.getUint8(offset);
    case 'int8':
      return v.getInt8(offset);
    case 'uint16':
      return v.getUint16(offset, true);
    case 'int16':
      return v.getInt16(offset, true);
    case 'uint32':
      return v.getUint32(offset, true);
    case 'int32':
      return v.getInt32(offset, true);
  }
}

/** EC_WRITE_*: little-endian, the value's low bits (DataView's setters wrap the same way). */
export function writeDomain(v: DataView, offset: number, type: PinType, value: number): void {
  switch (type) {
    case 'uint8':
      return v.setUint8(offset, value);
    case 'int8':
      return v.setInt8(offset, value);
    case 'uint16':
      return v.setUint16(offset, value, true);
    case 'int16':
      return v.setInt16(offset, value, true);
    case 'uint32':
      return v.setUint32(offset, value, true);
    case 'int32':
      return v.setInt32(offset, value, true);
  }
}
