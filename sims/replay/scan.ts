// Reading a recording once for paced replay (docs/recording.md "The replay target"): frame times, requests,
// the core's replies and events, and the service's own notes.

import { RecordingReader, type RecordingHeader, type RecordingNote } from '../../drivers/replay/format.ts';

export interface PacingScan {
  header: RecordingHeader;
  frames: number;
  complete: boolean;
  /** Recorded frame times relative to the first frame, ns, one per frame. */
  times: Float64Array;
  /** Format 3 on a stepped or fast clock: the host time the core read in each frame's cycle, ns from t0. */
  hostTimes?: Float64Array;
  requests: RecordingNote[];
  /** Replies and events in the order the core sent them. */
  outputs: RecordingNote[];
  /** Format 2: the service's own log (fence decisions in order). */
  service: RecordingNote[];
  /**
   * For each of `service`, how many of `requests` came before it in the recording: the one order in which
   * the core host wrote both (they reach it over one port, docs/recording.md "The tap"), which a cycle alone
   * does not give when a request and a note share one. Absent in scans made by hand (tests).
   */
  serviceAt?: number[];
}

/** Read a recording once for pacing: frame times, requests, replies and events. */
/** A real-time recording's clock origin (header clock_origin_ns), for the replay's schedule (sims/core/clock.ts RecordedClock). */
export function scheduleOf(h: Pick<RecordingHeader, 'clock_origin_ns'>): { scheduleOriginNs?: bigint } {
  return h.clock_origin_ns !== undefined ? { scheduleOriginNs: BigInt(h.clock_origin_ns) } : {};
}

export function scanForPacing(file: string): PacingScan {
  const r = RecordingReader.open(file);
  let times = new Float64Array(4096);
  const withHost = r.header.host_times === true;
  let hostTimes = new Float64Array(withHost ? 4096 : 0);
  const requests: RecordingNote[] = [];
  const outputs: RecordingNote[] = [];
  const service: RecordingNote[] = [];
  const serviceAt: number[] = [];
  const take = () => {
    for (const n of r.takeNotes()) {
      if (n.kind === 'service') serviceAt.push(requests.length);
      (n.kind === 'request' ? requests : n.kind === 'service' ? service : outputs).push(n);
    }
  };
  while (r.next()) {
    if (r.frame > times.length) {
      const t = new Float64Array(times.length * 2);
      t.set(times);
      times = t;
      if (withHost) {
        const h = new Float64Array(t.length);
        h.set(hostTimes);
        hostTimes = h;
      }
    }
    times[r.frame - 1] = r.t;
    if (withHost) hostTimes[r.frame - 1] = r.hostT;
    take();
  }
  take();
  return { header: r.header, frames: r.frame, complete: r.complete, times: times.slice(0, r.frame), ...(withHost ? { hostTimes: hostTimes.slice(0, r.frame) } : {}), requests, outputs, service, serviceAt };
}


/**
 * The cycle the recorded core answered recorded request `note` in, when it is a preparation (`answers`:
 * drivers/replay/session.ts answerCycles): the pacer hands the live one over with it (sims/core/host.ts
 * handle, plan-intake.ts PlanBeside), since how many cycles the recorded core took for a large plan was its
 * wall clock's decision.
 */
export function answerCycleOf(note: RecordingNote, answers: Map<number, number>): number | undefined {
  const d = note.data as { t?: string; id?: unknown };
  return d.t === 'prepare' && typeof d.id === 'number' ? answers.get(d.id) : undefined;
}
