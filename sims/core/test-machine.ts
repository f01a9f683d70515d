// The nine-axis fixture machine compiled in process, for the core's unit tests (no digest directory), and a
// core set up the way a paced replay runs it.

import { readFileSync } from 'node:fs';
import { compileMachine } from '../config/compile.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { PacingScan } from '../../drivers/replay/pacer.ts';
import { CoreHost } from './host.ts';
import type { FromCore } from './protocol.ts';

export function nineAxisMachine(): CompiledMachine {
  return { ...compileMachine(readFileSync(new URL('../../fixtures/machines/nine-axis.json', import.meta.url), 'utf8')).machine, dir: '' };
}

/**
 * A core on the replay driver and the recorded clock of `scan` (frame and host times), as a paced replay
 * runs it; the pacer is the caller's. `steps`: a recording made on the stepped clock with its steps.
 */
export function pacedCoreHost(machine: CompiledMachine, file: string, scan: PacingScan, send: (m: FromCore) => void, o: { steps?: boolean; driverParams?: Record<string, unknown> } = {}): Promise<CoreHost> {
  return CoreHost.create(
    { machine, driver: 'replay', driverParams: { file, reportFile: '', ...o.driverParams }, clock: { mode: 'recorded', ...(o.steps ? { steps: true } : {}) }, captureRetentionMs: 0 },
    send,
    'none',
    { t0Ns: BigInt(scan.header.t0_ns), timesNs: scan.times, hostTimesNs: scan.hostTimes },
  );
}
