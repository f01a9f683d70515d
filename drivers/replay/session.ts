// Replaying one recorded session outside the suites (`hil replay FILE`): the requests the core received,
// noted in the recording at the cycle they arrived, are handed to a fresh core on the replay driver at the
// same cycles, and the core runs on the stepped clock, without sleeping, until the recording ends or the
// first divergence. The core itself is passed in (sims/main.ts makes it), so this module stays a driver's.

import type { BusDriver } from '../bus.ts';
import type { DivergenceReport } from './driver.ts';
import { RecordingReader, typedFromNote, type RecordingHeader, type RecordingNote } from './format.ts';

/** The parts of CoreHost (sims/core/host.ts) a replay session drives. */
export interface SteppedCore {
  /** A clock that takes the host time of the request being handed over (sims/core/clock.ts RecordedClock.at). */
  readonly clock?: object;
  /** `answerAtCycle`: a prepare's recorded answer cycle, beside the request (sims/core/host.ts handle). */
  handle(msg: never, answerAtCycle?: number): boolean;
  cycle(): void;
  readonly core: { readonly cycleCount: number };
  readonly driverHost: { readonly driver: BusDriver; readonly submissionFailures: number };
}

export interface RecordedRequest {
  cycle: number;
  msg: Record<string, unknown>;
  /** The host time the recorded core read while handling it (format 2 and later). */
  hostNs?: bigint;
  /** A preparation: the cycle the recorded core answered it in. */
  answerAtCycle?: number;
}

/**
 * Fields of the requests to the core that travel as bigints (JSON turned them into decimal strings):
 * sims/core/protocol.ts ToCore, a command's jog fields (JogCmd) and a jog.sock frame (jog_update) included.
 * Left a string, a jog frame's generation never equals the open one's, and the replayed core refused every
 * frame it had taken when recorded (`hil replay` of suites/jog/jog.test.ts "jog.sock frames ...").
 */
const BIGINT_FIELDS = new Set(['generation', 'deadlineNs', 'homingNs', 'handle', 'jogGeneration', 'sequence', 'captureNs', 'inputDeadlineNs', 'originNs', 'timeoutNs']);

function revive(data: unknown): Record<string, unknown> {
  const o = { ...(data as Record<string, unknown>) };
  for (const k of Object.keys(o)) {
    const v = o[k];
    if (BIGINT_FIELDS.has(k) && typeof v === 'string' && /^-?\d+$/.test(v)) o[k] = BigInt(v);
    else if (k === 'jog' && v !== null && typeof v === 'object' && !Array.isArray(v)) o[k] = revive(v);
    else o[k] = typedFromNote(v) ?? v; // a trajectory's arrays, written as their bytes
  }
  return o;
}

/**
 * Reads the recording once: its header, its frame count, whether it was closed, and its requests. A
 * preparation is handed over with the cycle the recorded core answered it in (`answerAtCycle`, beside the
 * request: sims/core/host.ts handle): on the real-time clock
 * the core took a large plan in for a share of each cycle's wall time (sims/core/plan-intake.ts), so the
 * replayed core answers when the recorded one did.
 */
export function scanRecording(file: string): { header: RecordingHeader; frames: number; complete: boolean; requests: RecordedRequest[] } {
  const r = RecordingReader.open(file);
  const requests: RecordedRequest[] = [];
  const replies: RecordingNote[] = [];
  const take = () => {
    for (const n of r.takeNotes()) {
      if (n.kind === 'request') requests.push({ cycle: n.cycle, msg: revive(n.data), ...(n.host_ns !== undefined ? { hostNs: BigInt(n.host_ns) } : {}) });
      else if (n.kind === 'reply') replies.push(n);
    }
  };
  while (r.next()) take();
  take();
  const answered = answerCycles(replies);
  for (const q of requests) {
    const at = q.msg.t === 'prepare' && typeof q.msg.id === 'number' ? answered.get(q.msg.id) : undefined;
    if (at !== undefined) q.answerAtCycle = at;
  }
  return { header: r.header, frames: r.frame, complete: r.complete, requests };
}

/** The cycle each recorded request was first replied to, by the request's id (the core's replies carry it). */
export function answerCycles(notes: readonly RecordingNote[]): Map<number, number> {
  const at = new Map<number, number>();
  for (const o of notes) {
    const d = o.data as { t?: string; id?: unknown };
    if (o.kind === 'reply' && d.t === 'reply' && typeof d.id === 'number' && !at.has(d.id)) at.set(d.id, o.cycle);
  }
  return at;
}

export interface ReplayOutcome {
  frames: number;
  cycles: number;
  complete: boolean;
  wallMs: number;
  /** Recorded time covered divided by the wall time the replay took. */
  speedup: number;
  divergence: DivergenceReport | null;
}

/** Runs the whole recording through `host` (a core on the replay driver, stepped clock). */
export function runReplay(host: SteppedCore, scan: ReturnType<typeof scanRecording>): ReplayOutcome {
  const driver = host.driverHost.driver as BusDriver & { divergence(): DivergenceReport | null };
  const t0 = performance.now();
  let next = 0;
  const reqs = scan.requests;
  const at = host.clock && 'at' in host.clock ? (host.clock as { at: bigint | null }) : null;
  while (host.core.cycleCount < scan.frames) {
    while (next < reqs.length && reqs[next]!.cycle <= host.core.cycleCount) {
      const q = reqs[next++]!;
      // On the recorded clock the request is judged at the host time the recorded core read for it.
      if (at && q.hostNs !== undefined) at.at = q.hostNs;
      try {
        host.handle(q.msg as never, q.answerAtCycle);
      } finally {
        if (at) at.at = null;
      }
    }
    host.cycle();
    if (driver.divergence()) break;
  }
  const wallMs = performance.now() - t0;
  const recordedMs = (host.core.cycleCount * Number(BigInt(scan.header.cycle_ns))) / 1e6;
  return { frames: scan.frames, cycles: host.core.cycleCount, complete: scan.complete, wallMs, speedup: recordedMs / Math.max(wallMs, 1e-3), divergence: driver.divergence() };
}
