/**
 * Busy loops beside a run (`hil run --busy-loops N`, README "Verdicts"): N processes that each keep one core
 * busy while the conformance run goes on, so that a team can see what its verdicts are worth on a loaded host.
 * A correct stack must still PASS there; a test whose harness was held up past what its rule allows ends in
 * HIL_ERR_HOST_TOO_SLOW with its figures, never in FAIL.
 *
 * Each loop stops by itself: when the process that started it is gone (it asks the kernel every few
 * milliseconds of spinning) and at its time limit, whichever comes first, so a killed `hil run` leaves no
 * loop behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';

/** The loop's own program: spin, and every ~10 ms of spinning check the parent and the time limit. */
function loopSource(parent: number, untilMs: number): string {
  return `
    const parent = ${parent}, until = ${untilMs};
    for (;;) {
      const t = Date.now();
      while (Date.now() - t < 10) {}
      if (Date.now() > until) process.exit(0);
      try { process.kill(parent, 0); } catch { process.exit(0); }
    }`;
}

export interface BusyLoops {
  /** The loops' process ids (the run record notes how many). */
  readonly pids: readonly number[];
  /** Stops every loop and waits until each has exited. */
  stop(): Promise<void>;
}

/** Starts `n` busy loops, each for at most `maxMs` (they also end when this process does). */
export function startBusyLoops(n: number, maxMs: number): BusyLoops {
  const children: ChildProcess[] = [];
  for (let i = 0; i < n; i++) {
    children.push(spawn(process.execPath, ['-e', loopSource(process.pid, Date.now() + maxMs)], { stdio: 'ignore' }));
  }
  return {
    pids: children.map((c) => c.pid!).filter((p) => p !== undefined),
    async stop() {
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((done) => {
              if (c.exitCode !== null || c.signalCode !== null) return done();
              c.once('exit', () => done());
              c.kill('SIGKILL');
            }),
        ),
      );
    },
  };
}
