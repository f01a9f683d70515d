// The driver host: the one place that enforces a driver's lifecycle and catches its failures, so no driver
// re-implements either (ros2_control's hardware component lifecycle is the model). States:
//
//   unconfigured --open()--> opened --activate()--> active --close()--> closed
//        |                      |                      |
//        +---- open throws -----+--- exchange throws --+--> errored --close()--> closed
//
// A throw inside exchange never reaches the cycle: the host records it, marks every axis's feedback stale
// and offline, and from then on answers BUS_RC.threw once and BUS_RC.inactive after that, without calling
// the driver again (its state is unknown). A negative return from an active driver is passed through: the
// core reports it in telemetry (bus_submission_return_code) and reacts to it.

import { BUS_RC, type BusDriver, type BusSetup, type BusStartup, type ProcessImage } from './bus.ts';
import type { DrivePersistence, FaultInjection } from './faults.ts';

export type DriverState = 'unconfigured' | 'opened' | 'active' | 'errored' | 'closed';

/** Stable codes for lifecycle misuse and driver failures seen by the host. */
export class DriverHostError extends Error {
  constructor(
    readonly code: 'DRIVER_OPEN_FAILED' | 'DRIVER_BAD_STATE' | 'DRIVER_CLOSE_FAILED',
    message: string,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'DriverHostError';
  }
}

export interface DriverFailure {
  /** Where it failed. */
  hook: 'open' | 'exchange' | 'close';
  message: string;
  /** Host time of the failing cycle (exchange) or 0. */
  atNs: bigint;
}

export class DriverHost {
  private st: DriverState = 'unconfigured';
  private failure: DriverFailure | null = null;
  /** Negative returns seen while active, and the last one. */
  submissionFailures = 0;
  lastReturn = 0;

  constructor(readonly driver: BusDriver) {}

  get name(): string {
    return this.driver.name;
  }
  get state(): DriverState {
    return this.st;
  }
  /** The failure that put the host in `errored`, if any. */
  get lastFailure(): DriverFailure | null {
    return this.failure;
  }
  get faults(): FaultInjection | undefined {
    return this.driver.faults;
  }
  get persist(): DrivePersistence | undefined {
    return this.driver.persist;
  }

  async open(setup: BusSetup): Promise<BusStartup> {
    this.expect('open', 'unconfigured');
    try {
      const startup = await this.driver.open(setup);
      this.st = 'opened';
      return startup;
    } catch (e) {
      this.fail('open', e, 0n);
      throw new DriverHostError('DRIVER_OPEN_FAILED', `driver ${this.name} failed to open: ${message(e)}`, e);
    }
  }

  activate(): void {
    this.expect('activate', 'opened');
    this.st = 'active';
  }

  /** One exchange; never throws. */
  exchange(image: ProcessImage, nowNs: bigint): number {
    if (this.st !== 'active') {
      this.lastReturn = BUS_RC.inactive;
      return BUS_RC.inactive;
    }
    let rc: number;
    try {
      rc = this.driver.exchange(image, nowNs);
    } catch (e) {
      this.fail('exchange', e, nowNs);
      // Nothing the driver wrote this cycle can be trusted.
      image.pdoFresh.fill(0);
      image.online.fill(0);
      this.lastReturn = BUS_RC.threw;
      return BUS_RC.threw;
    }
    if (!Number.isInteger(rc)) {
      this.fail('exchange', new TypeError(`exchange returned ${String(rc)}, not an integer`), nowNs);
      image.pdoFresh.fill(0);
      image.online.fill(0);
      this.lastReturn = BUS_RC.threw;
      return BUS_RC.threw;
    }
    if (rc < 0) this.submissionFailures++;
    this.lastReturn = rc;
    return rc;
  }

  async close(): Promise<void> {
    if (this.st === 'closed') return;
    const was = this.st;
    this.st = 'closed';
    if (was === 'unconfigured') return;
    try {
      await this.driver.close();
    } catch (e) {
      this.failure ??= { hook: 'close', message: message(e), atNs: 0n };
      throw new DriverHostError('DRIVER_CLOSE_FAILED', `driver ${this.name} failed to close: ${message(e)}`, e);
    }
  }

  private expect(what: string, state: DriverState): void {
    if (this.st !== state) throw new DriverHostError('DRIVER_BAD_STATE', `cannot ${what} driver ${this.name} in state ${this.st} (needs ${state})`);
  }

  private fail(hook: DriverFailure['hook'], e: unknown, atNs: bigint): void {
    this.st = 'errored';
    this.failure = { hook, message: message(e), atNs };
  }
}

function message(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}
