// The one interface every bus driver implements (sim, replay, ethercat). The core owns the cycle and the
// CiA 402 logic; a driver only moves the process image between the core and the drives (ros2_control's
// read/write hooks), reports start-up evidence, and shuts down. See docs/architecture.md.

import type { DrivePersistence, FaultInjection } from './faults.ts';

/** Per-cycle process image, struct-of-arrays so the cycle loop allocates nothing. */
export class ProcessImage {
  // master -> drives (RxPDO)
  readonly controlword: Uint16Array;
  readonly modeOfOperation: Int8Array;
  readonly targetPosition: Int32Array;
  // drives -> master (TxPDO)
  readonly statusword: Uint16Array;
  readonly modeDisplay: Int8Array;
  readonly positionActual: Int32Array;
  readonly velocityActual: Int32Array;
  readonly followingError: Int32Array;
  readonly torqueActual: Int16Array;
  readonly errorCode: Uint16Array;
  readonly digitalInputs: Uint32Array;
  /** 1 when this cycle's feedback for the axis is fresh. */
  readonly pdoFresh: Uint8Array;
  /** Absolute encoder reading in raw counts (unaffected by homing) and its validity. */
  readonly absolutePosition: Int32Array;
  readonly absoluteValid: Uint8Array;
  // slaves (one per axis in this profile)
  readonly alState: Uint8Array;
  readonly online: Uint8Array;
  // cell I/O
  ioOutputWord = 0;
  ioInputWord = 0;
  ioInputValid = 0;
  /** Safety (E-stop) chain as read back by the bus: 1 closed, 0 open. */
  safetyChainClosed = 1;
  // bus health
  wkcExpected = 0;
  wkcActual = 0;

  constructor(readonly axisCount: number) {
    this.controlword = new Uint16Array(axisCount);
    this.modeOfOperation = new Int8Array(axisCount);
    this.targetPosition = new Int32Array(axisCount);
    this.statusword = new Uint16Array(axisCount);
    this.modeDisplay = new Int8Array(axisCount);
    this.positionActual = new Int32Array(axisCount);
    this.velocityActual = new Int32Array(axisCount);
    this.followingError = new Int32Array(axisCount);
    this.torqueActual = new Int16Array(axisCount);
    this.errorCode = new Uint16Array(axisCount);
    this.digitalInputs = new Uint32Array(axisCount);
    this.pdoFresh = new Uint8Array(axisCount);
    this.absolutePosition = new Int32Array(axisCount);
    this.absoluteValid = new Uint8Array(axisCount);
    this.alState = new Uint8Array(axisCount);
    this.online = new Uint8Array(axisCount);
  }
}

/** EtherCAT application-layer states as reported in slave_al_state. */
export const AL = { init: 1, preop: 2, boot: 3, safeop: 4, op: 8 } as const;

/** What the core tells a driver about the cell at start-up. */
export interface BusSetup {
  cycleNs: bigint;
  axes: Array<{
    index: number;
    id: string;
    slavePosition: number;
    countsPerUnit: number;
    sign: 1 | -1;
    minPosition: number;
    maxPosition: number;
    maxVelocity: number;
    followingError: number;
    /** The drive's identity from the drive layer (document 3 profile `drives`), when the configuration has one. */
    vendorId?: number;
    productCode?: number;
  }>;
  /** The PDO mapping the core expects every drive to use. */
  expectedMapping: readonly string[];
  ioOutputs: number;
  ioInputs: number;
  /** Where the cell I/O terminal sits on the bus (document 3 io.slave_position), when configured. */
  ioSlavePosition?: number;
  /** Bus bring-up choices (document 3 bus_bringup), for a bus that has them. */
  bringup?: { explicitPdoConfig: boolean; disableOutputWatchdog: boolean; safeopOpTimeoutMs: number };
}

/** Start-up evidence: per-axis PDO mapping verification. */
export interface BusStartup {
  /** Axes whose drive mapping differs from the expected one (pdo_mapping_mismatch, fault bit 11). */
  mappingMismatchMask: number;
  notes: string[];
}

/** Bus submission return codes the driver host itself produces (a driver returns 0 or its own negative code). */
export const BUS_RC = {
  ok: 0,
  /** The driver threw inside exchange; the host marked it errored and stops calling it. */
  threw: -1000,
  /** The driver is not active (errored or closed): nothing was exchanged this cycle. */
  inactive: -1001,
} as const;

/**
 * What every driver implements: a few hooks, in the manner of ros2_control's hardware components. The
 * lifecycle (unconfigured -> opened -> active -> errored/closed) and the error boundary are enforced by
 * DriverHost (drivers/host.ts), never re-implemented by a driver.
 */
export interface BusDriver {
  /** The registry name the driver was created under (sim, replay, ethercat, or any other). */
  readonly name: string;
  /** Bring the bus up and verify mappings. May be slow; never called from the cycle. */
  open(setup: BusSetup): Promise<BusStartup>;
  /**
   * One cyclic exchange: write outputs from the image, fill inputs into it. Synchronous: runs in the
   * cycle. Returns the bus submission return code (0 ok, negative on failure).
   */
  exchange(image: ProcessImage, nowNs: bigint): number;
  close(): Promise<void>;
  /** Optional facet: out-of-band fault injection (drivers/faults.ts). */
  readonly faults?: FaultInjection;
  /** Optional facet: drive state kept across a core restart. */
  readonly persist?: DrivePersistence;
  /** Optional: identity of the bus as found at open (per slave vendor, product, revision, serial ...). */
  identity?(): Record<string, unknown>;
}

/** Options a driver factory receives. `params` are the driver's own, validated by the driver. */
export interface DriverOptions {
  /** A DrivePersistence snapshot from the previous core incarnation of the same driver. */
  persisted?: unknown;
  params?: Readonly<Record<string, unknown>>;
}

export type DriverFactory = (options: DriverOptions) => BusDriver;

/** The standard CSP mapping of the profile (docs/profile.md). */
export const STANDARD_MAPPING: readonly string[] = [
  'rx:0x6040:00 controlword u16',
  'rx:0x6060:00 modes_of_operation i8',
  'rx:0x607a:00 target_position i32',
  'tx:0x6041:00 statusword u16',
  'tx:0x6061:00 modes_of_operation_display i8',
  'tx:0x6064:00 position_actual i32',
  'tx:0x606c:00 velocity_actual i32',
  'tx:0x60f4:00 following_error_actual i32',
  'tx:0x6077:00 torque_actual i16',
  'tx:0x603f:00 error_code u16',
  'tx:0x60fd:00 digital_inputs u32',
];
