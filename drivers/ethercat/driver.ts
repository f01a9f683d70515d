// The EtherCAT driver's loaders. node-ethercat (IgH EtherCAT master bindings, GPL-2.0) is an optional
// dependency: it only builds where IgH's headers are installed, and is imported here only when the `ethercat`
// driver is chosen. The driver itself (ethercat.ts) is written against the EthercatMaster adapter; the
// `ethercat-fake` driver runs it over the fake master, which needs nothing native.

import type { DriverFactory } from '../bus.ts';
import { DriverUnavailable } from '../errors.ts';

/** Imports node-ethercat, or explains plainly why it cannot be had. */
export async function importNodeEthercat(): Promise<unknown> {
  try {
    const mod = (await import('node-ethercat' as string)) as { default?: unknown };
    return mod.default ?? mod;
  } catch (e) {
    const first = (e as Error).message.split('\n')[0];
    const notBuilt = /build\/Release\/ethercat|\.node\b|NODE_MODULE_VERSION|undefined symbol|libethercat/.test((e as Error).message);
    if (notBuilt) {
      throw new DriverUnavailable(
        'DRIVER_NOT_BUILT',
        'the ethercat driver needs node-ethercat\'s native part (build/Release/ethercat.node), which is missing or does not load: ' +
          "it builds with node-gyp against the IgH EtherCAT master 1.5.2 headers and libethercat at /usr/local/etherlab, and the published 1.0.5 only after a port to Node 20's V8 API or N-API (see docs/architecture.md, " +
          `"Building node-ethercat") (${first})`,
      );
    }
    throw new DriverUnavailable(
      'DRIVER_MODULE_MISSING',
      'the ethercat driver needs the optional package node-ethercat (IgH EtherCAT master bindings), which is not ' +
        'installed or did not build on this machine: install the IgH EtherCAT master 1.5.2 with its headers and a build of ' +
        "node-ethercat ported to this Node (the published \`npm install node-ethercat@1.0.5\` does not compile against Node 20's headers; " +
        `docs/architecture.md, "Building node-ethercat") (${first})`,
    );
  }
}

export async function loadEthercatFactory(): Promise<DriverFactory> {
  const mod = await importNodeEthercat();
  const { nodeEthercatFactory } = await import('./node-ethercat.ts');
  return nodeEthercatFactory(mod);
}

export async function loadFakeEthercatFactory(): Promise<DriverFactory> {
  return (await import('./fake-driver.ts')).createFakeEthercatDriver;
}
