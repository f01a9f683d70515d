// The EtherCAT driver's loader. node-ethercat (IgH EtherCAT master bindings, GPL-2.0) is an optional
// dependency: it only builds where IgH's headers are installed, and is loaded here only when this driver
// is chosen. The driver itself (PDO mapping through configSdo, the exchange over readPin/writePin, master
// state into the image) is issue 13; until it lands the loader says so plainly.

import type { DriverFactory } from '../bus.ts';
import { DriverUnavailable } from '../errors.ts';

export async function loadEthercatFactory(): Promise<DriverFactory> {
  try {
    await import('node-ethercat' as string);
  } catch (e) {
    throw new DriverUnavailable(
      'DRIVER_MODULE_MISSING',
      'the ethercat driver needs the optional package node-ethercat (IgH EtherCAT master bindings), which is not ' +
        'installed or did not build on this machine: install the IgH EtherCAT master with its headers, then ' +
        `\`npm install node-ethercat@1.0.5\` (${(e as Error).message.split('\n')[0]})`,
    );
  }
  throw new DriverUnavailable('DRIVER_NOT_BUILT', 'node-ethercat is present, but the ethercat driver is not built yet (issue 13)');
}
