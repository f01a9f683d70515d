// What a paced replay concludes (docs/recording.md "The replay target"): its first divergence and the
// verdict it writes, whose file shape is fixtures/contract/replay-verdict.schema.json (verdict-file.ts
// checks it before writing). The pacer (pacer.ts) fills it in.

import type { DivergenceReport } from '../../drivers/replay/driver.ts';
import type { RecordingNote } from '../../drivers/replay/format.ts';
import type { LostHold } from './sync-points.ts';

/** One divergence of a paced replay: the bus (the driver's report), a request, a reply or an event. */
export interface PacedDivergence {
  /** 'service': the live service answered a control or program request otherwise than the recorded one. */
  kind: 'request' | 'reply' | 'event' | 'bus' | 'service';
  cycle: number;
  /** For request/reply/event: the recorded note (null: the live side sent one the recording does not have). */
  expected?: unknown;
  actual?: unknown;
  /** The first differing field of the message. */
  path?: string;
  /** For 'bus': the replay driver's report (cycle, axis, field, expected, actual). */
  bus?: DivergenceReport;
}

export interface PacedVerdict {
  file: string;
  mode: string;
  run: string | null;
  recorded: { frames: number; complete: boolean; requests: number; outputs: number; machine_sha256?: string; configuration_sha256?: string };
  cycles: number;
  requests_matched: number;
  outputs_matched: number;
  /** Recorded requests the live side never sent (the test stopped early), or live requests beyond the recording. */
  requests_unsent: number;
  requests_extra: number;
  /** The first recorded request the live side has not sent (the one the replay waits for), if any. */
  first_unsent: RecordingNote | null;
  /** Lease renewals: replayed from the recording at their cycles; the live ones not handed to the core. */
  renewals_replayed: number;
  live_renewals: number;
  /**
   * Whether the service's own timed decisions followed the recording: 'recorded' (format 2: retaken where
   * recorded; its clock is the live host clock all the same, docs/recording.md "Two clocks") or 'live'
   * (format 1: nothing cued).
   */
  service_clock: 'recorded' | 'live';
  /** Lease expiries the recorded service decided, retaken by the live service at the recorded point. */
  expiries_replayed: number;
  outputs_missing: number;
  /** Wall-clock pacing: recorded time per wall time (1: as recorded), or null (flat out). */
  pace: number | null;
  /** Status reads recorded (their publication cycles), served by the live service, and given up. */
  status_reads: { recorded: number; served: number; missed: number };
  /** Telemetry polls recorded, served by the live service (counted while any were recorded), and given up. */
  telemetry_reads: { recorded: number; served: number; missed: number };
  /** Streams the recorded test opened, opened by the live one, and given up (a recording that notes them). */
  watches?: { recorded: number; served: number; missed: number };
  /** The default pace: flat out outside the recorded streams, `pace` inside them (modes.ts WatchedMode). */
  flat_between_watches?: true;
  /** A recording made on the stepped clock: the test's steps answered (each matched with a recorded one). */
  steps?: number;
  /**
   * Format 3: the service's answers to control and program requests (operation, status, leading label),
   * recorded and matched with the live service's. Fewer matched than recorded: the test made fewer
   * requests, or the stack stopped before they were answered.
   */
  service_replies?: { recorded: number; matched: number; first_missing: unknown };
  /**
   * Holds the replay could not keep (sync-points.ts): the live side never came within the bound, so the
   * recorded order was not kept from there on, and what the test saw says nothing about the target.
   */
  holds_lost: LostHold[];
  divergence: PacedDivergence | null;
  /** The end of the recording as the driver reported it (kind 'end'), when the replay reached it. */
  end: DivergenceReport | null;
  wall_ms: number;
  recorded_ms: number;
}
