// What the core tells its bus driver about the cell (document 3: axes, slave positions, drives, I/O,
// bring-up), derived from the compiled machine alone: the core opens its driver with it, and `hil doctor`
// checks a bus against it without starting a core.

import { STANDARD_MAPPING, type BusSetup } from '../../drivers/bus.ts';
import type { CompiledMachine } from '../config/types.ts';

/** What the bus driver is told about the cell (document 3: axes, slave positions, drives, I/O, bring-up). */
export function busSetupFor(machine: CompiledMachine): BusSetup {
  return {
    cycleNs: machine.cycle_ns,
    axes: machine.axes.map((a) => ({
      index: a.index,
      id: a.id,
      slavePosition: a.slave_position,
      countsPerUnit: a.counts_per_unit,
      sign: a.sign,
      minPosition: a.min_position,
      maxPosition: a.max_position,
      maxVelocity: a.max_velocity,
      followingError: a.following_error,
      ...(a.drive ? { vendorId: a.drive.vendor_id, productCode: a.drive.product_code } : {}),
    })),
    expectedMapping: STANDARD_MAPPING,
    ioOutputs: machine.io?.outputs.length ?? 0,
    ioInputs: machine.io?.inputs.length ?? 0,
    ...(machine.bus?.io_slave_position != null ? { ioSlavePosition: machine.bus.io_slave_position } : {}),
    ...(machine.bus
      ? {
          bringup: {
            explicitPdoConfig: machine.bus.bringup.explicit_pdo_config,
            disableOutputWatchdog: machine.bus.bringup.disable_output_watchdog,
            safeopOpTimeoutMs: machine.bus.bringup.safeop_op_timeout_ms,
          },
        }
      : {}),
  };
}
