// `hil replay FILE` (docs/recording.md "Replaying"): one recording on a fresh core, no live side. The core
// runs flat out on the recording's own clock (clock `recorded`: cycle k at the recorded time of frame k),
// each recorded request handed over at its recorded cycle with the host time the recorded core read while
// handling it (`host_ns`, RecordedClock.at), as a paced replay does (sims/replay/pacer.ts handOver). On the
// stepped clock it ran before, the core judged leases and jog deadlines on the replaying machine's clock,
// long past every recorded deadline: a Home under a lease lost its grant at once and diverged
// (suites/machine/home.test.ts "a Home whose HTTP reply is lost ..." and "lease expiry during Home ...").

import { CoreHost } from '../core/host.ts';
import type { CompiledMachine } from '../config/types.ts';
import { runReplay, scanRecording, type ReplayOutcome } from '../../drivers/replay/session.ts';
import { scanForPacing, scheduleOf } from './scan.ts';

export interface StandaloneReplay {
  scan: ReturnType<typeof scanRecording>;
  out: ReplayOutcome;
  /** Closed-loop mode: the plants identified from the recording and the following errors (the driver's). */
  closedLoop?: unknown;
}

/** Replay `file` in `mode` (strict, verify, open-loop, closed-loop) on `machine`, to its end or its first divergence. */
export async function replayRecording(file: string, machine: CompiledMachine, mode: string): Promise<StandaloneReplay> {
  const scan = scanRecording(file);
  const times = scanForPacing(file);
  const host = await CoreHost.create(
    { machine, driver: 'replay', driverParams: { file, mode, machine_sha256: machine.machine_sha256, configuration_sha256: machine.configuration_sha256 }, clock: { mode: 'recorded', ...(times.header.clock === 'stepped' && times.header.format >= 3 ? { steps: true } : {}) }, captureRetentionMs: 0 },
    () => undefined,
    'none (replay)',
    { t0Ns: BigInt(times.header.t0_ns), timesNs: times.times, ...(times.hostTimes ? { hostTimesNs: times.hostTimes } : {}), ...scheduleOf(times.header) },
  );
  try {
    const out = runReplay(host, scan);
    const closedLoop = (host.driverHost.driver as { closedLoop?: () => unknown }).closedLoop?.() ?? undefined;
    return { scan, out, ...(closedLoop ? { closedLoop } : {}) };
  } finally {
    await host.close();
  }
}
