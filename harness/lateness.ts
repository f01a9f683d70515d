// The harness's own lateness (DESIGN.md rule 6: a slow host is not a broken target). A conformance test
// that checks a documented deadline (a lease, a drain, a jog input age, an expiry, a telemetry window) can
// only blame the target when the harness itself kept time: a request sent late because the test's event
// loop stalled, or because the host gave the process no CPU, would make a correct target look wrong.
//
// Each worker samples its event loop: a timer due every SAMPLE_MS records how late it fired (a stall of
// the loop and a process the scheduler left waiting both show as lateness). `hostBound` wraps one
// timing-sensitive exchange with the margin the rule under test allows the client: when the exchange fails
// and the harness was late past that margin inside it, the test ends in ERROR HIL_ERR_HOST_TOO_SLOW with
// the figures, never in FAIL; when the harness kept within the margin, the failure stands (a target that
// extends a deadline is still caught on a loaded host). Tests not about a timing rule keep their grant out
// of reach of the test's event loop (harness/clients/keeper.ts).
//
// Where the target is a process this harness started on the same host (the sim target's stack), the host
// can starve it as it starves the harness: a rule the target keeps by acting in time may then be judged
// against that process's run-queue wait too (HostBoundOptions.targetOnHost), which the kernel counts.

import { closeSync, openSync, readSync } from 'node:fs';
import { HarnessError, verdictOfError } from './errors.ts';

declare module '@vitest/runner' {
  interface TaskMeta {
    /**
     * The harness was too slow for a rule the test depends on (a grant its keeper lost to the host's
     * lateness, harness/clients/keeper.ts): the figures. A test that failed with it ends in ERROR
     * (harness/report/verdict.ts testStateOf).
     */
    hostTooSlow?: string;
    /**
     * The harness's own equipment failed under the test (a rig's bench box opened the E-stop chain although
     * the harness had kept its heartbeat, harness/targets/rig.ts benchLoss): what. A test that failed with
     * it ends in ERROR HIL_ERR_BENCH_BOX.
     */
    equipmentLoss?: string;
    /** The harness's event-loop lateness while the test ran (harness/fixture.ts). */
    lateness?: { p99_ms: number; max_ms: number };
  }
}

/** Sampling period of the event-loop lateness, ms. */
export const SAMPLE_MS = 10;
const RING = 8192; // about 80 s of samples at 10 ms

/** One worker's sampler: when each timer fired (performance.now()) and how late, ms. */
class LatenessMonitor {
  private readonly at = new Float64Array(RING);
  private readonly late = new Float64Array(RING);
  private n = 0;
  private timer: NodeJS.Timeout | undefined;
  private last = 0;
  private readonly watched = new Set<RunQueueWait>();

  /**
   * Sample, beside the loop, how long the main thread of the process `pidOf()` names (a stack this worker
   * started on this host; asked at each sample, since a restarted service has a new one) waits on the run
   * queue; until the returned function is called. Nothing is sampled where /proc does not say (not Linux,
   * a process of another host).
   */
  watch(pidOf: () => number | undefined): () => void {
    if (process.platform !== 'linux') return () => {};
    const w = new RunQueueWait(pidOf);
    this.watched.add(w);
    return () => {
      this.watched.delete(w);
      w.close();
    };
  }

  /**
   * The longest run-queue wait, summed over [from, to], of any watched process: time its main thread was
   * ready to run and the host ran something else.
   */
  targetWait(from: number, to: number): { ms: number; pid: number } | undefined {
    let worst: { ms: number; pid: number } | undefined;
    for (const w of this.watched) {
      const x = w.waited(from, to);
      if (x && (!worst || x.ms > worst.ms)) worst = x;
    }
    return worst;
  }

  /**
   * Whether a target process on this host is watched (the sim target's stack, an external service named with
   * its process ids): an open target with no process here (an external service of unknown process, a
   * replay's) is registered too, and does not count.
   */
  targetOnHost(): boolean {
    for (const w of this.watched) if (w.onHost()) return true;
    return false;
  }

  start(): void {
    if (this.timer) return;
    this.last = performance.now();
    this.timer = setInterval(() => {
      const now = performance.now();
      const late = Math.max(0, now - this.last - SAMPLE_MS);
      this.last = now;
      const i = this.n++ % RING;
      this.at[i] = now;
      this.late[i] = late;
      for (const w of this.watched) w.sample(now);
    }, SAMPLE_MS);
    this.timer.unref();
  }

  /**
   * The samples whose late interval touches [from, to] (performance.now() ms): a sample fired at `at`
   * `late` ms late means the loop did not run during [at - late, at] (at least: the stall may have begun up to
   * SAMPLE_MS before the sample was due). `max_ms` and `p99_ms` are of those samples' lateness; `total_ms`
   * is how long, in all, the loop did not run inside the window: each late interval clipped to it, summed.
   * Two stalls of 100 ms explain a request sent 200 ms late where the longest alone explains half of it.
   */
  window(from: number, to: number): { samples: number; max_ms: number; p99_ms: number; total_ms: number } {
    const xs: number[] = [];
    let total = 0;
    const count = Math.min(this.n, RING);
    for (let k = 0; k < count; k++) {
      const i = (this.n - 1 - k) % RING;
      const at = this.at[i]!;
      if (at < from) break;
      const late = this.late[i]!;
      if (at - late - SAMPLE_MS <= to) xs.push(late);
      total += Math.max(0, Math.min(at, to) - Math.max(at - late, from));
    }
    if (xs.length === 0) return { samples: 0, max_ms: 0, p99_ms: 0, total_ms: 0 };
    xs.sort((a, b) => a - b);
    const r = (v: number) => Math.round(v * 10) / 10;
    return { samples: xs.length, max_ms: r(xs[xs.length - 1]!), p99_ms: r(xs[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))]!), total_ms: r(total) };
  }

  /** Let a sample due now fire, so that a stall that just ended is counted. */
  settle(): Promise<void> {
    return new Promise((r) => setTimeout(r, SAMPLE_MS + 2));
  }
}

/**
 * One process's run-queue wait as the kernel counts it (/proc/<pid>/task/<pid>/schedstat: time on the CPU,
 * time waiting on a run queue, timeslices; nanoseconds). Only the main thread: a control service answers
 * its requests there, and a stack's own real-time core runs on a thread of its own at a priority that is
 * not what is in question.
 */
class RunQueueWait {
  private readonly at = new Float64Array(WAIT_RING);
  private readonly waitMs = new Float64Array(WAIT_RING);
  private readonly pid = new Int32Array(WAIT_RING);
  private n = 0;

  constructor(private readonly pidOf: () => number | undefined) {}

  /** The watched target names a process now. */
  onHost(): boolean {
    try {
      const pid = this.pidOf();
      return pid !== undefined && pid > 0;
    } catch {
      return false;
    }
  }

  /** The schedstat file open for `fdPid` (reread in place at every sample: no open and close each 10 ms). */
  private fd = -1;
  private fdPid = 0;
  private static readonly buf = Buffer.alloc(128);

  sample(now: number): void {
    let pid: number | undefined;
    try {
      pid = this.pidOf();
    } catch {
      return; // not started, or stopped: nothing to sample now
    }
    if (pid === undefined || !(pid > 0)) return;
    const waited = this.read(pid);
    if (waited === undefined) return;
    const i = this.n++ % WAIT_RING;
    this.at[i] = now;
    this.waitMs[i] = waited / 1e6;
    this.pid[i] = pid;
  }

  /**
   * The second field of /proc/<pid>/task/<pid>/schedstat (ns waited on a run queue), or undefined when the
   * process has ended (until pidOf names another) or the kernel has no schedstat. The file is kept open
   * and read again from its start: the kernel generates it anew at each read from offset 0, and the open
   * file of an ended process answers an error rather than another process's figures.
   */
  private read(pid: number): number | undefined {
    const buf = RunQueueWait.buf;
    if (this.fdPid !== pid) {
      this.close();
      try {
        this.fd = openSync(`/proc/${pid}/task/${pid}/schedstat`, 'r');
        this.fdPid = pid;
      } catch {
        return undefined;
      }
    }
    let n: number;
    try {
      n = readSync(this.fd, buf, 0, buf.length, 0);
    } catch {
      this.close();
      return undefined;
    }
    // "<on cpu ns> <waited ns> <timeslices>\n"
    const a = buf.indexOf(32);
    if (a < 0 || a >= n) return undefined;
    const b = buf.indexOf(32, a + 1);
    const waited = Number(buf.toString('latin1', a + 1, b < 0 || b > n ? n : b));
    return Number.isFinite(waited) ? waited : undefined;
  }

  close(): void {
    if (this.fd >= 0) {
      try {
        closeSync(this.fd);
      } catch {
        /* already closed */
      }
    }
    this.fd = -1;
    this.fdPid = 0;
  }

  /**
   * The wait between the first sample at or after `from` and the last at or before `to` plus one sampling
   * period (hostBound lets one more sample fire before it asks), over consecutive samples of one process.
   * The wait before the first sample is not counted: short of the truth, never past it.
   */
  waited(from: number, to: number): { ms: number; pid: number } | undefined {
    const count = Math.min(this.n, WAIT_RING);
    let ms = 0;
    let pid = 0;
    let any = false;
    for (let k = 0; k < count - 1; k++) {
      const i = (this.n - 1 - k) % WAIT_RING;
      const j = (this.n - 2 - k) % WAIT_RING;
      if (this.at[j]! < from) break;
      if (this.at[i]! > to + SAMPLE_MS + 2) continue;
      any = true;
      if (this.pid[i] === this.pid[j]) {
        ms += this.waitMs[i]! - this.waitMs[j]!;
        pid = this.pid[i]!;
      }
    }
    return any ? { ms: Math.round(ms * 10) / 10, pid } : undefined;
  }
}

const WAIT_RING = 8192;

export const lateness = new LatenessMonitor();

/** What a timing-sensitive exchange measured of the harness itself, for the ERROR's figures. */
export interface HostFigures {
  /** The documented rule and its source (document and part). */
  rule: string;
  /** How late the harness may be inside the exchange before the rule's outcome says nothing, ms. */
  margin_ms: number;
  /** The harness's worst event-loop lateness inside the exchange, ms. */
  loop_late_ms: number;
  /** loop_late_ms is the sum of the loop's stalls inside the exchange, not its longest (HostBoundOptions.stalls). */
  total?: boolean;
  /** Further lateness the exchange measured itself (a request sent after it was due, a round trip), ms. */
  measured_ms?: number;
  what?: string;
  /** How long the target's own process on this host waited on the run queue inside the exchange (HostBoundOptions.targetOnHost), ms. */
  target_wait_ms?: number;
  /** How late the target's real-time core on this host ran its latest-running cycle inside the exchange (HostBoundOptions.coreLate), ms. */
  core_late_ms?: number;
  core_what?: string;
}

export function hostFiguresText(f: HostFigures): string {
  const extra = f.measured_ms !== undefined ? `, ${f.what ?? 'measured'} ${f.measured_ms} ms` : '';
  const own = Math.max(f.loop_late_ms, f.measured_ms ?? 0);
  const head = `${f.rule}: the harness was late by ${own} ms (event loop ${f.total ? 'stalls totalling ' : ''}${f.loop_late_ms} ms${extra})`;
  const target = f.target_wait_ms !== undefined ? `, and the target's process on this host waited at least ${f.target_wait_ms} ms on the run queue (ready to run, the host running something else)` : '';
  const core = f.core_late_ms !== undefined ? `, and the target's real-time core on this host ran ${f.core_what ?? 'a cycle'} ${f.core_late_ms} ms late` : '';
  return `${head}${target}${core} against a margin of ${f.margin_ms} ms the rule allows: a slow host, not a verdict on the target`;
}

export interface HostBoundOptions {
  /** The documented rule (its catalogue id or document part) the exchange checks. */
  rule: string;
  /** The lateness the rule allows the client inside the exchange, ms (the lease less the renewal period, the input age less the frame period ...). */
  marginMs: number;
  /** Lateness the exchange measured itself (send time against due time, a round trip), read after a failure. */
  measured?: () => { ms: number; what: string } | undefined;
  /** performance.now() when the exchange began, when it began before this call (a wait already done). */
  since?: number;
  /**
   * How the loop's lateness counts against the margin: its longest stall (default; a deadline one stall
   * can miss) or the sum of its stalls (a count of events the exchange must see inside a window, such as
   * telemetry batches in a stream read: every stall shortens the window), or not at all (`none`: the check
   * judges records the target already wrote, whose timing the harness's loop played no part in).
   */
  stalls?: 'max' | 'total' | 'none';
  /**
   * The rule is one the target keeps by acting in time (answering a renewal within the lease, admitting it
   * before the deadline the last one set): when the target is a process this harness started on this host
   * (the sim target's stack), the time the host kept that process's main thread waiting on the run queue
   * inside the exchange counts against the margin too. A target that runs late because the host ran other
   * work is the host's, as the harness's own lateness is. Never for a rule the target breaks by acting too
   * early (an expiry early): a slower target only makes that less likely, so its wait explains nothing
   * there; nor for a deadline the target could extend inside a real-time core. A deadline the target ends
   * on a timer of a normal-priority process (the OLP server's heartbeat interval) is the exception: a
   * process the host did not run cannot end it on time.
   */
  targetOnHost?: boolean;
  /**
   * How late the target's real-time core ran its cycles inside the exchange, by its own record (the largest
   * cycle_jitter_ns of its telemetry records, ms), read after a failure. It counts against the margin only
   * when the target is a process this harness started on this host: a core the host kept from its cycles
   * is the host's doing there, as the harness's own lateness is; a target on a host of its own answers for
   * its core's lateness, and a failure stays a failure.
   */
  coreLate?: () => { ms: number; what: string } | undefined;
}

/**
 * A test that ran out of its time (vitest's "Test timed out in N ms") is an ERROR of the harness whatever
 * the cause: a test keeps its own deadlines for the target, well inside its time. When the host took a
 * tenth of that time or more from the harness's event loop inside [from, to] (the stalls summed), or kept
 * the target's process on this host waiting on the run queue that long, it was the host that ran the test
 * out of time: the figures, for an ERROR HIL_ERR_HOST_TOO_SLOW (which CI's retry rule runs again, and a
 * test that runs out of its time on a quiet host too stays a plain ERROR there). Else undefined.
 */
export async function timeoutByHost(errors: ReadonlyArray<{ message?: string } | string> | undefined, from: number, to: number): Promise<string | undefined> {
  const limit = (errors ?? []).map((e) => /Test timed out in (\d+)ms/.exec(typeof e === 'string' ? e : (e?.message ?? ''))).find((m) => m !== null);
  if (!limit) return undefined;
  const ms = Number(limit[1]);
  await lateness.settle();
  const win = lateness.window(from, to);
  const tw = lateness.targetWait(from, to);
  if (Math.max(win.total_ms, tw?.ms ?? 0) < ms / 10) return undefined;
  const target = tw ? `, and the target's process on this host waited ${tw.ms} ms on the run queue (ready to run, the host running something else)` : '';
  return `the test ran out of its ${ms} ms while the host kept the harness's event loop from running for ${win.total_ms} ms of it (its longest stall ${win.max_ms} ms)${target}: a tenth of the test's time or more, a slow host, not a verdict on the target`;
}

/**
 * Run one timing-sensitive exchange. A failure that says the target broke the rule (an assertion, a
 * refusal) while the harness was late inside the exchange past the rule's margin is rethrown as
 * HIL_ERR_HOST_TOO_SLOW (ERROR) with the figures and the original failure as its cause; within the margin
 * the failure stands as it was. A harness error is never turned into anything else.
 */
export async function hostBound<T>(o: HostBoundOptions, fn: () => Promise<T>): Promise<T> {
  lateness.start();
  const from = o.since ?? performance.now();
  try {
    return await fn();
  } catch (e) {
    if (verdictOfError(e) !== 'fail') throw e;
    const to = performance.now();
    await lateness.settle();
    const win = lateness.window(from, to);
    const w = { max_ms: o.stalls === 'none' ? 0 : o.stalls === 'total' ? win.total_ms : win.max_ms };
    const m = o.measured?.();
    const tw = o.targetOnHost ? lateness.targetWait(from, to) : undefined;
    const cl = o.coreLate && lateness.targetOnHost() ? o.coreLate() : undefined;
    const figures: HostFigures = {
      rule: o.rule,
      margin_ms: o.marginMs,
      loop_late_ms: w.max_ms,
      ...(o.stalls === 'total' ? { total: true } : {}),
      ...(m ? { measured_ms: Math.round(m.ms * 10) / 10, what: m.what } : {}),
      ...(tw ? { target_wait_ms: tw.ms } : {}),
      ...(cl ? { core_late_ms: Math.round(cl.ms * 1000) / 1000, core_what: cl.what } : {}),
    };
    if (Math.max(w.max_ms, m?.ms ?? 0, tw?.ms ?? 0, cl?.ms ?? 0) <= o.marginMs) throw e;
    const first = String((e as Error)?.message ?? e).split('\n')[0];
    throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `${hostFiguresText(figures)}; the check that failed: ${first}`, {
      cause: e,
      detail: { rule: o.rule, margin_ms: o.marginMs, loop_late_ms: w.max_ms, ...(m ? { measured_ms: figures.measured_ms, measured: m.what } : {}), ...(tw ? { target_wait_ms: tw.ms, target_pid: tw.pid } : {}), ...(cl ? { core_late_ms: figures.core_late_ms } : {}) },
    });
  }
}
