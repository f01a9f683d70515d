// A core set up the way a paced replay runs it, for the replay component's tests and the replay bench.

import type { CompiledMachine } from '../config/types.ts';
import { CoreHost } from '../core/host.ts';
import type { FromCore } from '../core/protocol.ts';
import { scheduleOf, type PacingScan } from './scan.ts';

/**
 * A core on the replay driver and the recorded clock of `scan` (frame and host times), as a paced replay
 * runs it; the pacer is the caller's. `steps`: a recording made on the stepped clock with its steps.
 */
export function pacedCoreHost(machine: CompiledMachine, file: string, scan: PacingScan, send: (m: FromCore) => void, o: { steps?: boolean; driverParams?: Record<string, unknown> } = {}): Promise<CoreHost> {
  return CoreHost.create(
    { machine, driver: 'replay', driverParams: { file, reportFile: '', ...o.driverParams }, clock: { mode: 'recorded', ...(o.steps ? { steps: true } : {}) }, captureRetentionMs: 0 },
    send,
    'none',
    { t0Ns: BigInt(scan.header.t0_ns), timesNs: scan.times, hostTimesNs: scan.hostTimes, ...scheduleOf(scan.header) },
  );
}
