// The paced replay loop of the core's worker thread (docs/recording.md "The replay target"): the core runs
// on the replay driver and the recorded clock; the pacer runs it up to each recorded hold and matches the
// live requests; the port is read between slices so live requests and shutdown get in. The worker
// entry (worker.ts) runs it for the clock 'recorded' (sims/core-loops.ts).

import type { MessagePort } from 'node:worker_threads';
import { CoreHost } from '../core/host.ts';
import type { CoreStartOptions, FromCore, ToCore } from '../core/protocol.ts';
import { isTap, type FromTap, type ToTap } from '../../drivers/replay/tap.ts';
import { ReplayPacer } from './pacer.ts';
import { scanForPacing, scheduleOf } from './scan.ts';

/** Cycles run between two looks at the port in paced replay (about a millisecond of work). */
const PACE_BUDGET = 200;
/** How often a held paced core publishes its (unchanged) status: the core's own publication period off real time. */
const HELD_PUBLISH_MS = 10;
/**
 * Held periods (of HELD_PUBLISH_MS) between two looks at whether the verdict changed while nothing came in
 * (a hold the pacer gave up at its bound changes it without a message).
 */
export const VERDICT_LOOK_PERIODS = 100;

/**
 * When a held core looks at its verdict again (and writes the file if it changed: ReplayPacer.writeVerdict).
 * The file is what a stack killed outright leaves; a clean stop writes it in finish(). It is looked at once
 * the core has stood held for a whole publication period with nothing coming in, not at every hold: a test
 * sending requests back to back stops the core at each of them, and writing and checking the file there
 * took more of the core thread than running its cycles (0.2 to 1 ms per write against 0.05 to 0.15 ms per
 * slice, suites/machine/machine.test.ts replayed). After the first look of a quiet spell, every
 * VERDICT_LOOK_PERIODS periods.
 */
export class VerdictLooks {
  /** Held periods that passed with nothing coming in since the last activity. */
  private quiet = 0;
  /** A message came in or cycles ran: the verdict may have changed. */
  activity(): void {
    this.quiet = 0;
  }
  /** A held period passed with nothing coming in: whether to look at the verdict now. */
  heldPeriod(): boolean {
    return this.quiet++ % VERDICT_LOOK_PERIODS === 0;
  }
}

/**
 * Paced replay (clock 'recorded'): the pacer runs the core up to each recorded request and matches the live
 * one; the port is read between slices so live requests and shutdown get in.
 */
export async function runPaced(port: MessagePort, options: CoreStartOptions): Promise<void> {
  let pacer: ReplayPacer | undefined;
  /** What the core sent while it was being created (bring-up events), for the pacer to check first. */
  let beforePacer: FromCore[] | undefined;
  const send = (m: FromCore) => {
    if (pacer) {
      pacer.observe(m);
      const out = pacer.publication(pacer.outward(m));
      if (out) port.postMessage(out);
      return;
    }
    // Kept until the pacer has cued the service (below): 'ready' lets the service serve requests.
    beforePacer?.push(m);
  };
  const file = (options.driverParams?.file as string | undefined) ?? '';
  const scan = scanForPacing(file);
  beforePacer = [];
  // The tap's answers (drivers/replay/tap.ts) go straight to the service: they are no output of the core.
  const sendTap = (m: FromTap) => port.postMessage(m);
  const host = await CoreHost.create(options, send, 'none (paced replay)', { t0Ns: BigInt(scan.header.t0_ns), timesNs: scan.times, hostTimesNs: scan.hostTimes, ...scheduleOf(scan.header) }, sendTap);
  const p = (pacer = new ReplayPacer(host, scan, { file, mode: String(options.driverParams?.mode ?? 'strict'), reportFile: options.replayPace?.verdictFile, toService: (m) => port.postMessage(m), speed: options.replayPace?.speed ?? null, watched: options.replayPace?.watched === true }));
  // Events of bring-up (a latched restart_required) were recorded at cycle 0: compared like any other.
  // They, and 'ready', go to the service only now, after the pacer's first cue: a service that served a
  // request before it (a loaded machine can keep this thread from running for a while after 'ready') took
  // its decisions unheld and noted none of its answers (suites/machine/recovery.test.ts "io_arm with torch
  // outputs only ...": 0 of 4 answers matched, a status with no core publication; HIL_ERR_REPLAY_DIVERGED).
  for (const m of beforePacer.splice(0)) {
    p.observe(m);
    // Counted among the outputs the service has taken in (the pacer's publication keeps back none at the start).
    const out = p.publication(m);
    if (out) port.postMessage(out);
  }
  beforePacer = undefined;
  /** What the pacer kept back for a pending status read (outputs, a publication), sent once that read is served or given up. */
  const flushPublication = () => {
    for (const kept of p.takePublications()) port.postMessage(kept);
  };
  const answerPollTurns = () => {
    for (const id of p.takePollTurns()) sendTap({ tap: 'poll_turn', id });
  };
  let running = true;
  let wake: (() => void) | null = null;
  const looks = new VerdictLooks();
  port.on('message', (msg: ToCore | ToTap) => {
    if (!running) return;
    looks.activity();
    if (isTap(msg)) {
      if (msg.tap === 'flush') {
        // A simulated crash comes next: the recorded core ran to the end of its recording before it died.
        p.runToEnd();
        sendTap({ tap: 'flushed', id: msg.id });
      }
      // A live telemetry poll asking to be served: answered once the core is where the recorded one was.
      else if (msg.tap === 'poll_turn') p.pollTurn(msg.id);
      // A service note: what the live service decided, served or answered (the pacer's holds and verdict).
      else if (msg.tap === 'note') p.note(msg.data);
      // The harness's query of what the core owes (CoreHost.owed): the replayed core's own figure, not a request.
      else host.handle(msg);
    } else if (msg.t === 'shutdown') running = false;
    // A recording made on the stepped clock has the test's steps among its requests: matched like any other.
    else if (msg.t === 'step' && !p.steps) host.handle(msg);
    else p.offer(msg);
    answerPollTurns();
    flushPublication();
    wake?.();
  });
  while (running) {
    const before = host.core.cycleCount;
    const s = p.advance(PACE_BUDGET);
    if (host.core.cycleCount !== before) looks.activity();
    flushPublication(); // a read given up in advance() no longer keeps a newer publication back
    answerPollTurns();
    if (s === 'more') await new Promise<void>((r) => setImmediate(r));
    else if (s === 'pace') {
      // Paced to the recorded time: sleep until the next cycle is due (at least a timer tick; the cycles
      // due by then run back to back), or until a message comes in.
      await new Promise<void>((r) => {
        const timer = setTimeout(() => {
          wake = null;
          r();
        }, Math.max(1, Math.min(p.pauseMs, HELD_PUBLISH_MS)));
        wake = () => {
          clearTimeout(timer);
          wake = null;
          r();
        };
      });
    } else {
      // Held (waiting for a live request, or past the recording): time stands still, but a core keeps
      // publishing its status, and the service may be waiting for the next publication (reset_fault's fresh
      // observation) before it sends the very request the replay waits for.
      const woken = await new Promise<boolean>((r) => {
        const timer = setTimeout(() => {
          wake = null;
          r(false);
        }, HELD_PUBLISH_MS);
        wake = () => {
          clearTimeout(timer);
          wake = null;
          r(true);
        };
      });
      if (!woken && running) {
        if (looks.heldPeriod()) p.writeVerdict(true);
        if (p.mayPublish()) host.core.publish(host.core.now);
      }
    }
  }
  p.finish();
  answerPollTurns();
  await host.close().catch(() => undefined);
  port.close();
}

