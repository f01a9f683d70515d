// The replay driver: plays a recording (format.ts) back at the bus boundary, one frame per exchange, under
// the common driver interface, so the core runs unchanged on the stepped clock as fast as the machine
// allows. Modes (DriverOptions.params.mode):
//   strict    (default) the outputs the core writes each cycle are compared with the recorded ones; the
//             first difference stops the replay with a divergence report; inputs come from the recording.
//   open-loop the inputs are replayed verbatim whatever the outputs (for looking at a recording).
// A recording made against another bus setup is refused as stale with both digests; age never matters.
// Past the last frame (a truncated recording ends at its last complete one) every exchange answers
// REPLAY_RC.end and the report says where the recording ended.

import { writeFileSync } from 'node:fs';
import type { BusDriver, BusSetup, BusStartup, DriverFactory, DriverOptions, ProcessImage } from '../bus.ts';
import { readImage, RecordingError, RecordingReader, setupDigest, slotLayout, writeInputs, type RecordingNote, type SlotLayout } from './format.ts';

export type ReplayMode = 'strict' | 'open-loop';
const MODES: readonly ReplayMode[] = ['strict', 'open-loop'];

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
  for (const k of Object.keys(p ?? {})) if (!['file', 'mode', 'reportFile'].includes(k)) throw new RecordingError('REPLAY_BAD_PARAMS', `unknown replay parameter ${k}`);
  return { file, mode: mode as ReplayMode, reportFile };
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

  async open(setup: BusSetup): Promise<BusStartup> {
    const r = RecordingReader.open(this.params.file);
    const want = setupDigest(setup);
    if (r.header.setup_sha256 !== want || r.header.axisCount !== setup.axes.length) {
      throw new RecordingError(
        'REPLAY_STALE',
        `recording ${this.params.file} was made for bus setup ${r.header.setup_sha256} (${r.header.axisCount} axes), this configuration is ${want} (${setup.axes.length} axes): re-record it`,
      );
    }
    this.reader = r;
    this.layout = slotLayout(setup.axes.length);
    this.actual = new Float64Array(this.layout.count);
    this.ids = setup.axes.map((a) => a.id);
    const notes = [`replay ${this.params.mode} of ${this.params.file} (recorded from ${r.header.driver}${r.header.run ? `, run ${r.header.run}` : ''})`];
    return { mappingMismatchMask: 0, notes };
  }

  identity(): Record<string, unknown> {
    return { recording: this.params.file, mode: this.params.mode, recorded: this.reader?.header ?? null };
  }

  /** The divergence (or end-of-recording) report, once there is one. */
  divergence(): DivergenceReport | null {
    return this.report;
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
  }
}

export const createReplayDriver: DriverFactory = (options: DriverOptions) => new ReplayDriver(parseReplayParams(options.params));

export async function loadReplayFactory(): Promise<DriverFactory> {
  return createReplayDriver;
}
