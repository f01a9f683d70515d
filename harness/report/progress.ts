// Progress of a run while it runs: files done of the files selected, tests passed, failed and errored so far
// (as the verdict counts them, HilReporter.outcomeOf), and the time left, estimated from harness/sequencer.ts's per-file durations (a file not listed there counts
// as a short one) scaled by how fast this run has got through the files done so far. In a terminal it is
// one line redrawn in place under the per-file lines; with no terminal, or CI set, a plain line after each
// file, which a CI log keeps readable.

import { relative } from 'node:path';
import type { Reporter, TestCase, TestModule, TestSpecification, Vitest } from 'vitest/node';
import { DURATION_MS } from '../sequencer.ts';

/** Weight of a file sequencer.ts does not list (it lists the files of 2.5 s or more). */
export const UNLISTED_MS = 1_500;

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
  private passed = 0;
  private failed = 0;
  private errored = 0;
  private startedAt = 0;
  private shown = false;
  private readonly now: () => number;
  private readonly durations: Readonly<Record<string, number>>;

  constructor(private readonly o: ProgressOptions) {
    this.now = o.now ?? (() => performance.now());
    this.durations = o.durations ?? DURATION_MS;
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

  onTestModuleEnd(m: TestModule): void {
    this.fileDone(relative(this.root, m.moduleId));
  }

  onTestRunEnd(): void {
    if (this.o.tty && this.shown) this.o.write('\r\x1b[K');
    this.shown = false;
  }

  start(files: string[]): void {
    this.files = new Map([...new Set(files)].map((f) => [f, false]));
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

  fileDone(file: string): void {
    this.files.set(file, true);
    if (this.o.tty) this.draw();
    else this.o.write(`progress: ${this.text()}\n`);
  }

  /** "12 of 40 files, 301 passed, 1 failed, about 35 s left" (", 2 errored" after the failed once there are any). */
  text(): string {
    const done = [...this.files.values()].filter(Boolean).length;
    const errored = this.errored ? `, ${this.errored} errored` : '';
    return `${done} of ${this.files.size} files, ${this.passed} passed, ${this.failed} failed${errored}, ${this.left()}`;
  }

  /** Time left: the weight of the files not done at the pace of the files done (elapsed per unit of weight). */
  left(): string {
    let done = 0;
    let rest = 0;
    for (const [f, d] of this.files) {
      const w = this.durations[f] ?? UNLISTED_MS;
      if (d) done += w;
      else rest += w;
    }
    if (rest === 0) return 'done';
    if (done === 0) return 'time left: estimating';
    const ms = ((this.now() - this.startedAt) * rest) / done;
    return `about ${formatLeft(ms)} left`;
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
