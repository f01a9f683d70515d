// The replay driver's loader. Replaying a recorded session (strict, inputs-only and tolerant modes, the
// first divergence report) is issue 9; until it lands the registry names the driver and says so plainly.

import type { DriverFactory } from '../bus.ts';
import { DriverUnavailable } from '../errors.ts';

export async function loadReplayFactory(): Promise<DriverFactory> {
  throw new DriverUnavailable('DRIVER_NOT_BUILT', 'the replay driver is not built yet (issue 9)');
}
