// A CellSession over a scripted control link, for the OLP server's unit tests (stop.test.ts,
// telemetry-window.test.ts): one axis J1 in rad, 1 ms cycles, 1000 counts per rad, a 400 ms lease.

import { CellSession, type Describe } from './execution.ts';
import type { ControlLink } from './control.ts';
import type { CatalogueCell } from './cells.ts';

export const DESCRIBE = {
  backend: 'core',
  configuration_sha256: 'c'.repeat(64),
  binding: { pair_id: 'p', revision: 1, configuration_sha256: 'c'.repeat(64) },
  cycle_ns: 1_000_000,
  axes: [{ id: 'J1', position_unit: 'rad', min_position: -1, max_position: 1, native_home: true, counts_per_unit: 1000, sign: 1 }],
  capabilities: [],
} as Describe;

export function session(link: ControlLink): CellSession {
  return new CellSession({ cell_id: 'cell-b' } as CatalogueCell, link, DESCRIBE, { heartbeatMs: 60_000, leaseMs: 400, log: () => undefined });
}
