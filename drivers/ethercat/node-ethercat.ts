// The adapter from node-ethercat 1.0.5's module object to the EthercatMaster interface. Most of it passes
// straight through (the interface was shaped on this API); what it corrects, from reading the package's
// node-ethercat.js and ethercatBindings.cc:
// - readPin on an int8 pin returns 0..255 (the C side reads it into a uint8_t): sign-extended here;
// - writePin converts its value with `int value = NumberValue()`, undefined above 2^31 - 1: uint32 values
//   are passed as the int32 with the same bits;
// - configSdo writes every SDO with ecrt_slave_config_sdo8 whatever its type, so a 16- or 32-bit value
//   would be cut to its low byte: refused here unless it fits in 8 bits, with a message saying why;
// - the module is a process-wide singleton whose cycle thread cannot be stopped: a second start in the
//   same process fails ("Already started"), and close() cannot release the bus.
// It exports no SDO upload, slave list, per-slave AL state, domain working counter or cycle counter, so
// those optional members are absent and the driver says what it could not check.

import type { DriverFactory, DriverOptions } from '../bus.ts';
import { EthercatBusDriver, type EthercatParams } from './ethercat.ts';
import { PIN_RANGE, type Callback, type EthercatMaster, type MasterState, type PinInfo, type SdoParams, type SlaveOptions } from './master.ts';

/** The subset of node-ethercat's exports the adapter uses. */
export interface NodeEthercatModule {
  addSlave(options: SlaveOptions, cb: Callback<{ index: number }>): void;
  start(options: Record<string, unknown>, cb: Callback): void;
  activate(options: Record<string, unknown>, cb: Callback): void;
  configSdo(options: SdoParams & { slaveId: string }, cb: Callback): void;
  readPin(name: string): number | undefined;
  writePin(name: string, value: number): void;
  getPins(): Record<string, PinInfo>;
  getMasterState(): MasterState;
}

export function isNodeEthercat(m: unknown): m is NodeEthercatModule {
  const o = m as Record<string, unknown>;
  return !!o && ['addSlave', 'start', 'activate', 'configSdo', 'readPin', 'writePin', 'getPins', 'getMasterState'].every((k) => typeof o[k] === 'function');
}

export class NodeEthercatMaster implements EthercatMaster {
  readonly label = 'node-ethercat 1.0.5 (IgH)';
  constructor(private readonly mod: NodeEthercatModule) {}

  addSlave(options: SlaveOptions, cb: Callback<{ index: number }>): void {
    this.mod.addSlave(options, cb);
  }
  start(options: Record<string, unknown>, cb: Callback): void {
    this.mod.start(options, cb);
  }
  activate(options: Record<string, unknown>, cb: Callback): void {
    this.mod.activate(options, cb);
  }
  configSdo(o: SdoParams & { slaveId: string }, cb: Callback): void {
    if (o.type !== 'uint8' && o.type !== 'int8' && !(o.value >= 0 && o.value <= 0xff)) {
      return cb({ result: 'error', error: `node-ethercat 1.0.5 writes every SDO as 8 bits (ecrt_slave_config_sdo8); ${o.type} value ${o.value} would be cut to ${o.value & 0xff}` });
    }
    const [lo, hi] = PIN_RANGE[o.type];
    if (!(Number.isInteger(o.value) && o.value >= lo && o.value <= hi)) return cb({ result: 'error', error: `SDO value ${o.value} does not fit ${o.type}` });
    this.mod.configSdo(o, cb);
  }
  readPin(name: string): number | undefined {
    const v = this.mod.readPin(name);
    if (v === undefined) return undefined;
    const pin = this.mod.getPins()[name];
    return pin?.type === 'int8' ? (v << 24) >> 24 : v;
  }
  writePin(name: string, value: number): void {
    const pin = this.mod.getPins()[name];
    this.mod.writePin(name, pin?.type === 'uint32' ? value | 0 : value);
  }
  getPins(): Record<string, PinInfo> {
    return this.mod.getPins();
  }
  getMasterState(): MasterState {
    return this.mod.getMasterState();
  }
}

let claimed = false;

export function nodeEthercatFactory(mod: unknown): DriverFactory {
  if (!isNodeEthercat(mod)) throw new TypeError('node-ethercat loaded, but it does not export addSlave/start/activate/configSdo/readPin/writePin/getPins/getMasterState');
  return (o: DriverOptions) => {
    const params = (o.params ?? {}) as EthercatParams;
    return new EthercatBusDriver({
      name: 'ethercat',
      params,
      master: async () => {
        // node-ethercat is one master per process and cannot be restarted: say so rather than fail obscurely.
        if (claimed) throw new Error('node-ethercat runs one master per process and cannot restart it; restart the stack process instead');
        claimed = true;
        return new NodeEthercatMaster(mod);
      },
    });
  };
}
