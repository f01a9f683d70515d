// The recorder: a driver wrapping any driver at the bus boundary. Each exchange becomes one frame of the
// recording (format.ts): the outputs the core wrote before the exchange, the inputs and return code the
// wrapped driver gave back, and the time. The core is unchanged: CoreHost wraps the created driver when its
// start options carry a record path (`hil serve --record FILE`). Facets pass through untouched.

import type { BusDriver, BusSetup, BusStartup, ProcessImage } from '../bus.ts';
import { readImage, RecordingWriter, setupDigest, slotLayout, type RecordingHeader, type RecordingNote } from './format.ts';

/** What the recorder adds to the header besides what it learns from the driver and the setup. */
export type RecordingMeta = Pick<RecordingHeader, 'machine_sha256' | 'configuration_sha256' | 'deployment_sha256' | 'package_version' | 'git_revision' | 'run' | 'driver_params' | 'clock' | 'host_times' | 'watch_notes' | 'status_reads'>;



export class RecordingDriver implements BusDriver {
  private writer: RecordingWriter | null = null;
  private values = new Float64Array(0);
  /** With `host_times` in the meta: the host time the core read in the cycle being exchanged (CoreHost sets it). */
  hostTime?: () => bigint;
  /** When the first frame would have been (CoreHost sets it): the t0 of a recording closed before any frame. */
  firstFrameNs?: () => bigint;
  /** The real-time clock's origin (CoreHost sets it; the clock exists by the time the bus opens): the header's clock_origin_ns. */
  clockOrigin?: () => bigint;

  constructor(
    readonly inner: BusDriver,
    readonly path: string,
    private readonly meta: RecordingMeta = {},
  ) {}

  get name(): string {
    return this.inner.name;
  }
  get faults() {
    return this.inner.faults;
  }
  get persist() {
    return this.inner.persist;
  }
  identity(): Record<string, unknown> {
    return this.inner.identity?.() ?? {};
  }

  async open(setup: BusSetup): Promise<BusStartup> {
    const startup = await this.inner.open(setup);
    const axisCount = setup.axes.length;
    const identity = this.inner.identity?.();
    this.writer = new RecordingWriter(this.path, {
      driver: this.inner.name,
      axisCount,
      cycle_ns: setup.cycleNs.toString(),
      setup_sha256: setupDigest(setup),
      ...this.meta,
      ...(this.meta.clock === 'realtime' && this.clockOrigin ? { clock_origin_ns: this.clockOrigin().toString() } : {}),
      ...(identity ? { identity } : {}),
      // What bring-up found before the first frame (a drive whose PDO mapping differs): replay reports it.
      ...(startup.mappingMismatchMask ? { mapping_mismatch_mask: startup.mappingMismatchMask } : {}),
    });
    this.values = new Float64Array(slotLayout(axisCount).count);
    return startup;
  }

  exchange(image: ProcessImage, nowNs: bigint): number {
    readImage(image, this.values, true);
    // A throw from the wrapped driver propagates unrecorded: the host's error boundary handles it.
    const rc = this.inner.exchange(image, nowNs);
    readImage(image, this.values, false);
    this.writer?.frame(this.values, rc, nowNs, this.hostTime?.());
    return rc;
  }

  /** Write out the frames and notes buffered so far (the file then ends at the last of them until more come). */
  flush(): void {
    this.writer?.flush();
  }

  /** A request, reply or event aligned to the core's cycle count. */
  note(n: RecordingNote): void {
    this.writer?.note(n);
  }

  get frames(): number {
    return this.writer?.frames ?? 0;
  }

  async close(): Promise<void> {
    try {
      this.writer?.close(this.firstFrameNs?.());
    } finally {
      await this.inner.close();
    }
  }
}
