// The EtherCAT master adapter: the one seam between the EtherCAT driver and whatever master binding runs the
// bus. Its core is shaped exactly like node-ethercat 1.0.5's JavaScript API (read from its package source:
// node-ethercat.js), callbacks and result objects included, so the node-ethercat adapter is a thin wrapper
// and another binding (a different IgH wrapper, SOEM, the fake master) can replace it without touching the
// driver. What node-ethercat does not offer is in optional members below; the driver says in its start-up
// notes what it could not check when a member is absent.

/** Pin (PDO entry) types node-ethercat supports: no 64-bit and no bit-sized entries. */
export type PinType = 'uint8' | 'int8' | 'uint16' | 'int16' | 'uint32' | 'int32';

export const PIN_BITS: Readonly<Record<PinType, 8 | 16 | 32>> = { uint8: 8, int8: 8, uint16: 16, int16: 16, uint32: 32, int32: 32 };

export const PIN_RANGE: Readonly<Record<PinType, readonly [number, number]>> = {
  uint8: [0, 0xff],
  int8: [-0x80, 0x7f],
  uint16: [0, 0xffff],
  int16: [-0x8000, 0x7fff],
  uint32: [0, 0xffff_ffff],
  int32: [-0x8000_0000, 0x7fff_ffff],
};

/** What `EC_WRITE_*` does with an integer that does not fit: keep the low bits, reinterpret as the type. */
export function wrapToPin(type: PinType, value: number): number {
  const v = Math.trunc(value);
  switch (type) {
    case 'uint8':
      return v & 0xff;
    case 'int8':
      return (v << 24) >> 24;
    case 'uint16':
      return v & 0xffff;
    case 'int16':
      return (v << 16) >> 16;
    case 'uint32':
      return v >>> 0;
    case 'int32':
      return v | 0;
  }
}

/** node-ethercat's result object: every call answers `{result: 'ok', data}` or `{result: 'error', error}`. */
export type MasterResult<T = unknown> = { result: 'ok'; data: T } | { result: 'error'; error: string; /** CoE SDO abort code when an SDO was refused. */ abortCode?: number };

export type Callback<T = unknown> = (res: MasterResult<T>) => void;

export interface PdoEntryDefinition {
  /** Object index, as a number or a "0x...." string (node-ethercat passes either through). */
  index: number | string;
  subindex: number;
  /** Pin name suffix: the pin is called `<slave id>.<name>`. */
  name: string;
  type: PinType;
}

export interface SyncDefinition {
  syncManager: number;
  direction: 'input' | 'output';
  watchdog: 'enable' | 'disable';
  pdos: Array<{ index: number | string; entries: PdoEntryDefinition[] }>;
}

/** node-ethercat's slave definition (its sampleConfigs/*.json shape). */
export interface SlaveDefinition {
  id: { vendor: number | string; product: number | string };
  syncs: SyncDefinition[];
}

export interface SdoParams {
  index: number;
  subindex: number;
  type: PinType;
  value: number;
}

/** addSlave's argument. `config` is node-ethercat's start-up list (it runs it inside start()). */
export interface SlaveOptions {
  id: string;
  position: { alias: number; index: number };
  definition: SlaveDefinition;
  config?: Array<{ type: 'sdo'; params: SdoParams }>;
}

export interface PinInfo {
  name: string;
  /** Byte offset in the domain; -1 until start() registered it. */
  offset: number;
  size: 8 | 16 | 32;
  type: PinType;
  slaveId: string;
  index: number | string;
  subindex: number;
}

/** ecrt_master_state_t as node-ethercat returns it. `al_states` is the OR of every responding slave's AL state. */
export interface MasterState {
  slaves_responding: number;
  al_states: number;
  link_up: number | boolean;
}

/** One slave as found on the bus (optional scan). */
export interface FoundSlave {
  position: number;
  vendor: number;
  product: number;
  /** AL state (1 init, 2 preop, 3 boot, 4 safeop, 8 op); 0 when it does not answer. */
  alState: number;
  online: boolean;
}

/** The process data domain's working counter (ecrt_domain_state). */
export interface DomainState {
  workingCounter: number;
  expected: number;
}

export interface EthercatMaster {
  /** A name for notes and doctor output (`node-ethercat 1.0.5`, `fake`). */
  readonly label: string;
  addSlave(options: SlaveOptions, cb: Callback<{ index: number }>): void;
  /** Registers every pin as a domain entry (offsets become known) and runs each slave's `config` list. */
  start(options: Record<string, unknown>, cb: Callback): void;
  activate(options: Record<string, unknown>, cb: Callback): void;
  /** Queues one SDO download for a slave's start-up (before activate). */
  configSdo(options: SdoParams & { slaveId: string }, cb: Callback): void;
  readPin(name: string): number | undefined;
  writePin(name: string, value: number): void;
  getPins(): Record<string, PinInfo>;
  getMasterState(): MasterState;

  // Beyond node-ethercat 1.0.5: optional, used when present.
  /** SDO upload (PDO mapping read-back). node-ethercat has none. */
  uploadSdo?(options: { slaveId: string; index: number; subindex: number }, cb: Callback<{ value: number }>): void;
  /** Every slave the master sees, by position. node-ethercat has none. */
  scanSlaves?(): FoundSlave[];
  /** AL state of the slave at a bus position, 0 when none answers there. node-ethercat has only the OR of all states. */
  slaveAlState?(position: number): number;
  /** Counts the master's own cycles; stale inputs show as a counter that does not move. node-ethercat keeps it in C (`_times`) and does not export it. */
  cycleCounter?(): number;
  /** The domain working counter. node-ethercat does not export ecrt_domain_state. */
  domainState?(): DomainState;
  /**
   * A master whose cycle the application drives (send/receive in the caller's cycle, SOEM style, or the fake
   * in lockstep mode) runs one exchange here; a master with its own cycle thread leaves it out.
   */
  sync?(nowNs: bigint): void;
  /** Stop the master and release the bus. node-ethercat cannot (its cycle thread runs until the process ends). */
  close?(): Promise<void>;
}

/** Promise forms of the callback calls. */
export function call<T>(fn: (cb: Callback<T>) => void): Promise<MasterResult<T>> {
  return new Promise((resolve) => {
    let done = false;
    try {
      fn((res) => {
        if (done) return;
        done = true;
        resolve(res);
      });
    } catch (e) {
      if (!done) {
        done = true;
        resolve({ result: 'error', error: e instanceof Error ? e.message : String(e) });
      }
    }
  });
}

export function parseIndex(v: number | string): number {
  return typeof v === 'number' ? v : Number.parseInt(v, v.startsWith('0x') || v.startsWith('0X') ? 16 : 10);
}

export function hex(v: number, digits = 4): string {
  return `0x${v.toString(16).padStart(digits, '0')}`;
}

/** CoE SDO abort codes the driver and the fake name (ETG.1000.6 table). */
export const SDO_ABORT: Readonly<Record<number, string>> = {
  0x05040000: 'SDO protocol timed out',
  0x06010000: 'unsupported access to an object',
  0x06010002: 'attempt to write a read only object',
  0x06020000: 'the object does not exist in the object dictionary',
  0x06040041: 'the object cannot be mapped into the PDO',
  0x06070010: 'data type does not match, length of service parameter does not match',
  0x06090011: 'subindex does not exist',
  0x06090030: 'value range of parameter exceeded',
  0x06090031: 'value of parameter written too high',
  0x06090032: 'value of parameter written too low',
  0x08000000: 'general error',
  0x08000022: 'data cannot be transferred or stored because of the present device state',
};

export function abortText(code: number): string {
  return `SDO abort ${hex(code >>> 0, 8)} (${SDO_ABORT[code] ?? 'unknown abort code'})`;
}
