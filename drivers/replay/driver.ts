// The replay driver: plays a recording (format.ts) back at the bus boundary, one frame per exchange, under
// the common driver interface, so the core runs unchanged on the stepped clock as fast as the machine
// allows. Modes (DriverOptions.params.mode):
//   strict    (default) the outputs the core writes each cycle are compared with the recorded ones; the
//             first difference stops the replay with a divergence report; inputs come from the recording.
//   closed-loop  the outputs may differ (a changed trajectory, a changed core): the inputs come from the
//             recording, except each axis's position, velocity and following error while the drive follows
//             in CSP, which come from a per-axis plant identified from the recording itself (plant.ts). A
//             difference is a finding (closedLoop()), never a stop.
//   open-loop the inputs are replayed verbatim whatever the outputs (for looking at a recording).
//   verify    a recording of the sim driver checked against the sim itself: outputs compared as in strict,
//             then the sim driver (recorded parameters, recorded times, recorded injections) computes the
//             inputs and each is compared with the recorded one; the first differing input (a perturbed or
//             corrupted recording, or a sim that changed) is reported at its cycle, axis and field.
// A recording made against another bus setup is refused as stale with both digests; age never matters.
// Past the last frame (a truncated recording ends at its last complete one) every exchange answers
// REPLAY_RC.end and the report says where the recording ended.

import { writeFileSync } from 'node:fs';
import type { BusDriver, BusSetup, BusStartup, DriverFactory, DriverOptions, ProcessImage } from '../bus.ts';
import type { FaultInjection } from '../faults.ts';
import { AXIS_FIELDS, readImage, RecordingError, RecordingReader, setupDigest, slotLayout, writeInputs, type RecordingNote, type SlotLayout } from './format.ts';
import { identifyPlants, plantStep, type PlantFit } from './plant.ts';

/** What a closed-loop replay found: the plants it used and how the replayed run differed from the recorded one. */
export interface ClosedLoopReport {
  plants: PlantFit[];
  /** The first cycle where the core's outputs differed from the recorded ones (null: they never did). */
  first_output_difference: { cycle: number; axis: number | null; field: string; expected: number; actual: number } | null;
  /** Per axis: the largest following error recorded and replayed (counts), and the cycles the plant drove. */
  axes: Array<{ axis: number; axis_id: string; max_abs_following_error_recorded: number; max_abs_following_error_replayed: number; modelled_cycles: number }>;
}

/** Plant state of one axis in a closed-loop replay. */
interface AxisLoop {
  active: boolean;
  y1: number;
  y2: number;
  /** The live targets of the last MAX_DELAY+1 cycles, newest at index 0. */
  u: number[];
  maxFeRecorded: number;
  maxFeReplayed: number;
  modelled: number;
}

export type ReplayMode = 'strict' | 'closed-loop' | 'open-loop' | 'verify';
const MODES: readonly ReplayMode[] = ['strict', 'closed-loop', 'open-loop', 'verify'];

/** Exchange return codes of the replay driver (negative: the core reports them as bus failures). */
export const REPLAY_RC = {
  /** The core's outputs differed from the recording (strict); see divergence(). */
  diverged: -2001,
  /** The recording has no more frames; see divergence() (kind 'end'). */
  end: -2002,
} as const;

/** How many of the last notes the report carries, and how far back (cycles) it looks. */
const REPORT_NOTES = 32;
const REPORT_WINDOW_CYCLES = 5000;

export interface DivergenceReport {
  kind: 'diverged' | 'end';
  /** The recording. */
  file: string;
  mode: ReplayMode;
  /** The frame (= core cycle count, 1-based) where it happened. */
  cycle: number;
  /** Recorded time of that frame relative to the first frame, ns. */
  time_ns: number;
  /** Axis index and id (null for a cell-wide field); absent for 'end'. */
  axis?: number | null;
  axis_id?: string | null;
  field?: string;
  expected?: number;
  actual?: number;
  /** For 'end': whether the recording was closed by its writer or cut (truncated). */
  complete?: boolean;
  /** Requests (and replies, events) noted in the cycles before it, oldest first. */
  recent: RecordingNote[];
}

export interface ReplayParams {
  file: string;
  mode: ReplayMode;
  /** The configuration under test: a recording made for another machine or configuration is stale. */
  machine_sha256?: string;
  configuration_sha256?: string;
  /** Where the divergence report is written; default `${file}.divergence.json`; '' writes none. */
  reportFile: string;
}

export function parseReplayParams(p: Readonly<Record<string, unknown>> | undefined): ReplayParams {
  const file = p?.file;
  if (typeof file !== 'string' || file === '') throw new RecordingError('REPLAY_BAD_PARAMS', 'the replay driver needs params.file: the recording to play');
  const mode = p?.mode ?? 'strict';
  if (typeof mode !== 'string' || !MODES.includes(mode as ReplayMode)) throw new RecordingError('REPLAY_BAD_PARAMS', `params.mode ${JSON.stringify(mode)}: expected ${MODES.join(' or ')}`);
  const reportFile = p?.reportFile ?? `${file}.divergence.json`;
  if (typeof reportFile !== 'string') throw new RecordingError('REPLAY_BAD_PARAMS', 'params.reportFile must be a path or empty');
  for (const k of Object.keys(p ?? {})) if (!['file', 'mode', 'reportFile', 'machine_sha256', 'configuration_sha256'].includes(k)) throw new RecordingError('REPLAY_BAD_PARAMS', `unknown replay parameter ${k}`);
  const digests: Pick<ReplayParams, 'machine_sha256' | 'configuration_sha256'> = {};
  for (const k of ['machine_sha256', 'configuration_sha256'] as const) {
    const v = p?.[k];
    if (v === undefined) continue;
    if (typeof v !== 'string' || !/^[0-9a-f]{64}$/.test(v)) throw new RecordingError('REPLAY_BAD_PARAMS', `params.${k} must be a sha256 in lower-case hex`);
    digests[k] = v;
  }
  return { file, mode: mode as ReplayMode, reportFile, ...digests };
}

export class ReplayDriver implements BusDriver {
  readonly name = 'replay';
  private reader: RecordingReader | null = null;
  private layout: SlotLayout | null = null;
  private actual = new Float64Array(0);
  private ids: string[] = [];
  private report: DivergenceReport | null = null;
  private notes: RecordingNote[] = [];

  constructor(readonly params: ReplayParams) {}

  /**
   * A replay offers no fault injection (it cannot change the bus), but a recorded fault is evidence in the
   * recorded inputs: the core host accepts an injection the test asks for as a no-op when the driver says
   * so here, and a paced replay matches it with the recorded injection as a request, so the same
   * assertions hold (docs/recording.md "The replay target").
   */
  get faultsAreRecorded(): boolean {
    return this.params.mode !== 'verify';
  }
  /** verify: the re-simulating sim driver, whose fault injection the recorded injections reach. */
  private sim: BusDriver | null = null;
  get faults(): FaultInjection | undefined {
    return this.sim?.faults;
  }
  private t0 = 0n;
  private simInputs = new Float64Array(0);

  async open(setup: BusSetup): Promise<BusStartup> {
    const r = RecordingReader.open(this.params.file);
    const want = setupDigest(setup);
    if (r.header.setup_sha256 !== want || r.header.axisCount !== setup.axes.length) {
      throw new RecordingError(
        'REPLAY_STALE',
        `recording ${this.params.file} was made for bus setup ${r.header.setup_sha256} (${r.header.axisCount} axes), this configuration is ${want} (${setup.axes.length} axes): re-record it`,
      );
    }
    // The configuration under test: a recording is stale when its machine or configuration digest differs
    // (never because of its age). A recording without digests (a bare driver session) is judged by
    // its bus setup alone.
    for (const k of ['machine_sha256', 'configuration_sha256'] as const) {
      const want = this.params[k];
      const got = r.header[k];
      if (want !== undefined && got !== undefined && want !== got) {
        throw new RecordingError('REPLAY_STALE', `recording ${this.params.file} was made for ${k.replace('_sha256', '')} ${got}, this configuration is ${want}: re-record it`);
      }
    }
    this.reader = r;
    this.layout = slotLayout(setup.axes.length);
    this.actual = new Float64Array(this.layout.count);
    this.ids = setup.axes.map((a) => a.id);
    if (this.params.mode === 'closed-loop') this.identify(setup.cycleNs);
    if (this.params.mode === 'verify') {
      if (r.header.driver !== 'sim') throw new RecordingError('REPLAY_BAD_PARAMS', `verify re-simulates a recording of the sim driver; this one was made with ${r.header.driver}`);
      const p = { ...(r.header.driver_params ?? {}) };
      if (typeof p.homingNs === 'string') p.homingNs = BigInt(p.homingNs);
      const { createSimDriver } = await import('../sim/driver.ts');
      this.sim = createSimDriver({ params: p });
      await this.sim.open(setup);
      this.t0 = BigInt(r.header.t0_ns);
      this.simInputs = new Float64Array(this.layout.count);
    }
    const notes = [`replay ${this.params.mode} of ${this.params.file} (recorded from ${r.header.driver}${r.header.run ? `, run ${r.header.run}` : ''})`];
    // Bring-up as recorded: a mapping mismatch the recorded driver found is found again.
    const m = r.header.mapping_mismatch_mask;
    return { mappingMismatchMask: Number.isInteger(m) && m! > 0 ? m! : 0, notes };
  }

  identity(): Record<string, unknown> {
    return { recording: this.params.file, mode: this.params.mode, recorded: this.reader?.header ?? null };
  }

  /** The divergence (or end-of-recording) report, once there is one. */
  divergence(): DivergenceReport | null {
    return this.report;
  }

  private plants: PlantFit[] = [];
  private loops: AxisLoop[] = [];
  private firstDiff: ClosedLoopReport['first_output_difference'] = null;
  private prevY = new Float64Array(0);
  private prevY2 = new Float64Array(0);
  private cycleS = 0.001;

  /** Identify the plants from the recording itself (a second read) and store them beside it with their fit. */
  private identify(cycleNs: bigint): void {
    this.plants = identifyPlants(RecordingReader.open(this.params.file));
    const n = this.plants.length;
    this.loops = this.plants.map(() => ({ active: false, y1: 0, y2: 0, u: [], maxFeRecorded: 0, maxFeReplayed: 0, modelled: 0 }));
    this.prevY = new Float64Array(n);
    this.prevY2 = new Float64Array(n);
    this.cycleS = Number(cycleNs) / 1e9;
    if (this.params.reportFile) {
      try {
        writeFileSync(`${this.params.file}.plant.json`, JSON.stringify({ file: this.params.file, plants: this.plants }, null, 2) + '\n');
      } catch {
        /* stored where possible; the fit is in closedLoop() either way */
      }
    }
  }

  /** Closed loop: the plants and what differed (null in the other modes). */
  closedLoop(): ClosedLoopReport | null {
    if (this.params.mode !== 'closed-loop') return null;
    return {
      plants: this.plants,
      first_output_difference: this.firstDiff,
      axes: this.loops.map((l, a) => ({ axis: a, axis_id: this.ids[a] ?? '', max_abs_following_error_recorded: l.maxFeRecorded, max_abs_following_error_replayed: l.maxFeReplayed, modelled_cycles: l.modelled })),
    };
  }

  /** One closed-loop cycle: recorded inputs, then each following axis's motion from its plant. */
  private closedLoopExchange(image: ProcessImage, r: RecordingReader): void {
    const L = this.layout!;
    readImage(image, this.actual, true);
    if (!this.firstDiff) {
      for (let s = 0; s < L.count; s++) {
        if (!L.isOutput(s) || this.actual[s] === r.values[s]) continue;
        const d = L.describe(s);
        this.firstDiff = { cycle: r.frame, axis: d.axis, field: d.field, expected: r.values[s]!, actual: this.actual[s]! };
        break;
      }
    }
    writeInputs(image, r.values);
    const n = L.axisCount;
    const slot = (f: string, a: number) => AXIS_FIELDS.indexOf(f as (typeof AXIS_FIELDS)[number]) * n + a;
    for (let a = 0; a < n; a++) {
      const l = this.loops[a]!;
      const f = this.plants[a]!;
      l.u.unshift(image.targetPosition[a]!);
      if (l.u.length > 8) l.u.length = 8;
      const recY = r.values[slot('positionActual', a)]!;
      const recFe = r.values[slot('followingError', a)]!;
      l.maxFeRecorded = Math.max(l.maxFeRecorded, Math.abs(recFe));
      const following = f.identified && r.values[slot('modeDisplay', a)] === 8 && image.modeOfOperation[a] === 8;
      // The plant takes over an axis only once the core asks it for something else than the recording did;
      // until then the recorded motion is the truth and is replayed verbatim.
      const same = image.targetPosition[a] === r.values[slot('targetPosition', a)] && image.modeOfOperation[a] === r.values[slot('modeOfOperation', a)];
      if (!following || (!l.active && same)) {
        if (!following) l.active = false;
        l.maxFeReplayed = Math.max(l.maxFeReplayed, Math.abs(recFe));
      } else {
        if (!l.active) {
          l.active = true;
          l.y1 = this.prevY[a]!;
          l.y2 = this.prevY2[a]!;
        }
        const u = l.u[Math.min(f.delay_cycles, l.u.length - 1)]!;
        const y = Math.max(-0x80000000, Math.min(0x7fffffff, plantStep(f, l.y1, l.y2, u)));
        const pos = Math.round(y);
        image.positionActual[a] = pos;
        image.velocityActual[a] = Math.max(-0x80000000, Math.min(0x7fffffff, Math.round((y - l.y1) / this.cycleS)));
        const fe = Math.max(-0x80000000, Math.min(0x7fffffff, Math.round(image.targetPosition[a]! - y)));
        image.followingError[a] = fe;
        image.absolutePosition[a] = Math.max(-0x80000000, Math.min(0x7fffffff, r.values[slot('absolutePosition', a)]! + (pos - recY)));
        l.y2 = l.y1;
        l.y1 = y;
        l.modelled++;
        l.maxFeReplayed = Math.max(l.maxFeReplayed, Math.abs(fe));
      }
      this.prevY2[a] = this.prevY[a]!;
      this.prevY[a] = recY;
    }
  }

  /** verify: outputs as recorded, then the sim's inputs for them against the recorded inputs. */
  private verifyExchange(image: ProcessImage, r: RecordingReader): number {
    const L = this.layout!;
    readImage(image, this.actual, true);
    for (let s = 0; s < L.count; s++) {
      if (!L.isOutput(s) || this.actual[s] === r.values[s]) continue;
      return this.mismatch(r, s, r.values[s]!, this.actual[s]!);
    }
    const rc = this.sim!.exchange(image, this.t0 + BigInt(r.t));
    readImage(image, this.simInputs, false);
    for (let s = 0; s < L.count; s++) {
      if (L.isOutput(s) || this.simInputs[s] === r.values[s]) continue;
      return this.mismatch(r, s, r.values[s]!, this.simInputs[s]!);
    }
    if (rc !== r.rc) {
      this.stop({ kind: 'diverged', cycle: r.frame, time_ns: r.t, axis: null, axis_id: null, field: 'return_code', expected: r.rc, actual: rc });
      return REPLAY_RC.diverged;
    }
    return rc;
  }

  private mismatch(r: RecordingReader, s: number, expected: number, actual: number): number {
    const d = this.layout!.describe(s);
    this.stop({ kind: 'diverged', cycle: r.frame, time_ns: r.t, axis: d.axis, axis_id: d.axis === null ? null : (this.ids[d.axis] ?? null), field: d.field, expected, actual });
    return REPLAY_RC.diverged;
  }

  exchange(image: ProcessImage, _nowNs: bigint): number {
    if (this.report) return this.report.kind === 'end' ? REPLAY_RC.end : REPLAY_RC.diverged;
    const r = this.reader;
    if (!r) throw new Error('replay driver exchanged before open');
    if (!r.next()) {
      this.stop({ kind: 'end', cycle: r.frame + 1, time_ns: r.t, complete: r.complete });
      return REPLAY_RC.end;
    }
    this.keep(r.takeNotes());
    if (this.params.mode === 'closed-loop') {
      this.closedLoopExchange(image, r);
      return r.rc;
    }
    if (this.params.mode === 'verify') return this.verifyExchange(image, r);
    if (this.params.mode === 'strict') {
      readImage(image, this.actual, true);
      const L = this.layout!;
      for (let s = 0; s < L.count; s++) {
        if (!L.isOutput(s) || this.actual[s] === r.values[s]) continue;
        const d = L.describe(s);
        this.stop({ kind: 'diverged', cycle: r.frame, time_ns: r.t, axis: d.axis, axis_id: d.axis === null ? null : (this.ids[d.axis] ?? null), field: d.field, expected: r.values[s]!, actual: this.actual[s]! });
        return REPLAY_RC.diverged;
      }
    }
    writeInputs(image, r.values);
    return r.rc;
  }

  private keep(n: RecordingNote[]): void {
    if (n.length === 0) return;
    this.notes.push(...n);
    if (this.notes.length > REPORT_NOTES * 2) this.notes.splice(0, this.notes.length - REPORT_NOTES);
  }

  private stop(r: Omit<DivergenceReport, 'file' | 'mode' | 'recent'>): void {
    const recent = this.notes.filter((n) => n.cycle >= r.cycle - REPORT_WINDOW_CYCLES && n.cycle < r.cycle).slice(-REPORT_NOTES);
    this.report = { file: this.params.file, mode: this.params.mode, ...r, recent };
    if (this.params.reportFile) {
      try {
        writeFileSync(this.params.reportFile, JSON.stringify(this.report, null, 2) + '\n');
      } catch {
        /* the report stays available through divergence(); a read-only directory must not crash the cycle */
      }
    }
  }

  async close(): Promise<void> {
    this.reader = null;
    await this.sim?.close();
    this.sim = null;
  }
}

export const createReplayDriver: DriverFactory = (options: DriverOptions) => new ReplayDriver(parseReplayParams(options.params));

export async function loadReplayFactory(): Promise<DriverFactory> {
  return createReplayDriver;
}
