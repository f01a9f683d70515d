// Global setup of the conformance project: the run's stack hosts, shared by its workers (host-broker.ts),
// named to them in HIL_HOST_BROKER. A run with HIL_STACK_HOST=off starts no host, and one that already names
// a broker (an enclosing run) is left alone.

import { startBroker } from './host-broker.ts';
import { BROKER_ENV, hostingEnabled } from './stack-host.ts';

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (!hostingEnabled() || process.env[BROKER_ENV]) return undefined;
  const broker = await startBroker();
  process.env[BROKER_ENV] = broker.path;
  return async () => {
    delete process.env[BROKER_ENV];
    await broker.close();
  };
}
