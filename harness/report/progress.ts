// Progress of a run while it runs: files done of the files selected, tests passed, failed and errored so far
// (as the verdict counts them, HilReporter.outcomeOf), and the time left. In a terminal it is one line
// redrawn in place under the per-file lines; with no terminal, or CI set, a plain line after each file,
// which a CI log keeps readable.
//
// The time left comes from harness/sequencer.ts's per-file durations (a file not listed there counts as a
// short one), at this run's pace (the files done took so many times their listed durations), laid out on
// the run's workers the way the pool hands out files: what each running file has left, then the files not
// started, longest first, each to the worker that is free first. The run ends when the last worker does.
// A running file is given at least its listed time, however fast the run goes: the longest files (remote
// timeouts, OLP execution, remote jog) mostly wait out documented timeouts, which a faster host does not
// shorten, and at a pace of 0.6 the 33 s remote timeouts file had been counted done about 12 s before it ended.
// Dividing the time so far by the share of the durations done instead counted the workers as one: after the
// first 1.4 s file of a six-worker run it said 15 minutes for a one-minute run.

import { relative } from 'node:path';
import type { Reporter, TestCase, TestModule, TestSpecification, Vitest } from 'vitest/node';
import { durations } from '../sequencer.ts';

/** Weight of a file sequencer.ts does not list (it lists the files of 2.5 s or more). */
export const UNLISTED_MS = 1_500;
/** Listed time counted as already run at the listed pace when the pace is measured (see left()). */
export const PACE_PRIOR_MS = 10_000;

export interface ProgressOptions {
  /** Redraw one line in place (a terminal) or print plain lines (CI, a pipe). */
  tty: boolean;
  write: (s: string) => void;
  /** Terminal width for the redrawn line. */
  columns?: number;
  now?: () => number;
  durations?: Readonly<Record<string, number>>;
  /**
   * How the run counts a finished test (HilReporter.outcomeOf): an expected failure or an informative profile
   * difference is neither passed nor failed there, and a test the harness could not judge is errored. Without
   * it, vitest's own passed and failed are counted.
   */
  classify?: (t: TestCase) => 'passed' | 'failed' | 'errored' | 'expected' | 'skipped';
}

/** True when stdout is a terminal and no CI variable says otherwise. */
export function isInteractive(stream: { isTTY?: boolean } = process.stdout, env: NodeJS.ProcessEnv = process.env): boolean {
  const ci = env.CI;
  return Boolean(stream.isTTY) && (ci === undefined || ci === '' || ci === '0' || ci.toLowerCase() === 'false');
}

export class Progress implements Reporter {
  private root = process.cwd();
  private files = new Map<string, boolean>();
  /** When each file was handed to a worker (vitest's onTestModuleQueued), and how long the files done took. */
  private startedAtOf = new Map<string, number>();
  private took = new Map<string, number>();
  /** The most files seen running at once: the run's workers. */
  private workers = 1;
  private passed = 0;
  private failed = 0;
  private errored = 0;
  private startedAt = 0;
  private shown = false;
  private readonly now: () => number;
  private readonly durations: Readonly<Record<string, number>>;

  constructor(private readonly o: ProgressOptions) {
    this.now = o.now ?? (() => performance.now());
    this.durations = o.durations ?? durations();
  }

  /** Output of other reporters goes through here: the redrawn line is cleared first and drawn again after. */
  readonly print = (s: string): void => {
    if (!this.o.tty || !this.shown) return this.o.write(s);
    this.o.write(`\r\x1b[K${s}`);
    // Every file done: the summary that follows is not interleaved with a finished progress line.
    if ([...this.files.values()].every(Boolean)) this.shown = false;
    else this.o.write(this.line());
  };

  onInit(vitest: Vitest): void {
    this.root = vitest.config.root;
  }

  onTestRunStart(specifications: ReadonlyArray<TestSpecification>): void {
    this.start(specifications.map((s) => relative(this.root, s.moduleId)));
  }

  onTestCaseResult(t: TestCase): void {
    const s = this.o.classify ? this.o.classify(t) : t.result().state;
    if (s === 'passed' || s === 'failed' || s === 'errored') this.testDone(s);
  }

  onTestModuleQueued(m: TestModule): void {
    this.fileStarted(relative(this.root, m.moduleId));
  }

  onTestModuleEnd(m: TestModule): void {
    this.fileDone(relative(this.root, m.moduleId));
  }

  onTestRunEnd(): void {
    if (this.o.tty && this.shown) this.o.write('\r\x1b[K');
    this.shown = false;
  }

  start(files: string[]): void {
    this.files = new Map([...new Set(files)].map((f) => [f, false]));
    this.startedAtOf = new Map();
    this.took = new Map();
    this.workers = 1;
    this.passed = 0;
    this.failed = 0;
    this.errored = 0;
    this.startedAt = this.now();
    if (this.o.tty) this.draw();
  }

  testDone(state: 'passed' | 'failed' | 'errored'): void {
    if (state === 'passed') this.passed++;
    else if (state === 'failed') this.failed++;
    else this.errored++;
    if (this.o.tty) this.draw();
  }

  /** A worker has taken `file`. */
  fileStarted(file: string): void {
    this.startedAtOf.set(file, this.now());
    this.workers = Math.max(this.workers, this.running().length);
  }

  fileDone(file: string): void {
    const at = this.startedAtOf.get(file);
    if (at !== undefined) this.took.set(file, this.now() - at);
    this.files.set(file, true);
    if (this.o.tty) this.draw();
    else this.o.write(`progress: ${this.text()}\n`);
  }

  /** "12 of 40 files, 301 passed, 1 failed, about 35 s left" (", 2 errored" after the failed once there are any). */
  text(): string {
    return `${this.filesDone()} files, ${this.tests()}, ${this.left()}`;
  }

  /** "12 of 40". */
  private filesDone(): string {
    return `${[...this.files.values()].filter(Boolean).length} of ${this.files.size}`;
  }

  /** "301 passed, 1 failed" (", 2 errored" after the failed once there are any). */
  private tests(): string {
    return `${this.passed} passed, ${this.failed} failed${this.errored ? `, ${this.errored} errored` : ''}`;
  }

  /**
   * What a run stopped by a signal had done: vitest exits at once on SIGINT and SIGTERM, before any verdict
   * or run record is written, so this line is all the run says. The redrawn line is cleared first.
   */
  interrupted(signal: string): void {
    const running = this.running();
    const cut = running.length ? `; cut short: ${running.join(', ')}` : '';
    if (this.o.tty && this.shown) this.o.write('\r\x1b[K');
    this.shown = false;
    this.o.write(`interrupted (${signal}): ${this.filesDone()} files done, ${this.tests()}${cut}; no verdict, run record or report was written\n`);
  }

  /** The files a worker has taken that are not done. */
  private running(): string[] {
    return [...this.startedAtOf.keys()].filter((f) => this.files.get(f) === false);
  }

  /** Time left (see the head of this file); 'time left: estimating' until a file is done. */
  left(): string {
    const weight = (f: string) => this.durations[f] ?? UNLISTED_MS;
    const now = this.now();
    const done = [...this.files].filter(([, d]) => d).map(([f]) => f);
    if (done.length === this.files.size) return 'done';
    if (done.length === 0) return 'time left: estimating';
    // The pace: from the listed files whose start was seen; else, when no start was seen (files run one after
    // another), from the run's time so far. An unlisted file's weight is a guess, not a duration measured
    // on a run: one that took 14 s for its 1.5 s said a 4-minute `hil test` (its unit files first) would
    // take half an hour, so unlisted files alone leave the pace at the prior's, the listed one.
    const timed = done.filter((f) => this.took.has(f) && this.durations[f] !== undefined);
    // PACE_PRIOR_MS of listed time counts as taken at the listed pace, so that the first short file (its
    // collection and a worker's start-up inside its time) does not set the pace of the whole run alone.
    const pace = this.took.size
      ? (timed.reduce((a, f) => a + this.took.get(f)!, 0) + PACE_PRIOR_MS) / (timed.reduce((a, f) => a + weight(f), 0) + PACE_PRIOR_MS)
      : (now - this.startedAt) / done.reduce((a, f) => a + weight(f), 0);
    const running = this.running();
    const free = running.map((f) => Math.max(0, weight(f) * Math.max(pace, 1) - (now - this.startedAtOf.get(f)!)));
    while (free.length < this.workers) free.push(0);
    const waiting = [...this.files].filter(([f, d]) => !d && !this.startedAtOf.has(f)).map(([f]) => weight(f) * pace);
    for (const w of waiting.sort((a, b) => b - a)) {
      let i = 0;
      for (let j = 1; j < free.length; j++) if (free[j]! < free[i]!) i = j;
      free[i]! += w;
    }
    return `about ${formatLeft(Math.max(...free))} left`;
  }

  private line(): string {
    const t = `progress: ${this.text()}`;
    const cols = this.o.columns ?? 0;
    return cols > 10 && t.length >= cols ? t.slice(0, cols - 1) : t;
  }

  private draw(): void {
    this.o.write(`\r\x1b[K${this.line()}`);
    this.shown = true;
  }
}

export function formatLeft(ms: number): string {
  const s = Math.max(1, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
}
