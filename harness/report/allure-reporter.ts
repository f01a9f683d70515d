// allure-vitest's reporter with a results writer that does not fsync each file.
//
// allure-js-commons 3.12's FileSystemWriter writes every result, container and attachment through a
// temporary file that it fsyncs before renaming (synchronously, on vitest's main thread). A conformance run
// writes a few thousand such files: in a profile of a whole run on this machine the main thread spent
// 3.5 s blocked in those fsync and open calls, time in which it hands no file to a worker and answers no
// worker's RPC. The results are a report of the run, rewritten by the next run; they need no durability
// beyond the page cache. This writer keeps the write-to-temporary-then-rename (a reader never sees half a
// file) and drops the fsync. Everything else is allure-vitest's own (harness/cli/run.ts names this module
// as the reporter); the file names and contents are the FileSystemWriter's, which
// harness/report/allure-results.ts reads.

import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { stringifyEnvInfo } from 'allure-js-commons/sdk/reporter';
import AllureVitestReporter from 'allure-vitest/reporter';
import { testStateOf } from './verdict.ts';

/** The FileSystemWriter's interface, files written without fsync. */
export class UnsyncedWriter {
  constructor(
    private readonly config: { resultsDir: string },
    /** Called on every test result before it is written (HilAllureReporter sets its status). */
    private readonly beforeWrite?: (result: { uuid: string; status?: string }) => void,
  ) {}

  private path(name: string): string {
    mkdirSync(this.config.resultsDir, { recursive: true });
    return join(this.config.resultsDir, name);
  }

  private publish(path: string, data: string | Uint8Array): void {
    const tmp = join(dirname(path), `.allure-write-${randomUUID()}.tmp`);
    try {
      writeFileSync(tmp, data);
      renameSync(tmp, path);
    } catch (e) {
      rmSync(tmp, { force: true });
      throw e;
    }
  }

  writeAttachment(name: string, content: string | Uint8Array): void {
    this.publish(this.path(name), content);
  }
  writeAttachmentFromPath(name: string, from: string): void {
    this.publish(this.path(name), readFileSync(from));
  }
  writeEnvironmentInfo(info: Record<string, string | undefined>): void {
    this.publish(this.path('environment.properties'), stringifyEnvInfo(info));
  }
  writeCategoriesDefinitions(categories: unknown): void {
    this.publish(this.path('categories.json'), JSON.stringify(categories));
  }
  writeGroup(result: { uuid: string }): void {
    this.publish(this.path(`${result.uuid}-container.json`), JSON.stringify(result));
  }
  writeResult(result: { uuid: string; status?: string }): void {
    this.beforeWrite?.(result);
    this.publish(this.path(`${result.uuid}-result.json`), JSON.stringify(result));
  }
  writeGlobals(name: string, info: unknown): void {
    this.publish(this.path(name), JSON.stringify(info));
  }
}

/**
 * A failed test's Allure status as the run's verdict sees it (harness/report/verdict.ts testStateOf):
 * `failed` as soon as one error says the target broke a rule, `broken` when every error is the harness's
 * or the environment's. allure-vitest looks at the first error only: a motion test whose own code threw a
 * TypeError once the planted fault stopped the axis, then failed its measurement, was `broken` in Allure
 * and FAIL in run.json and the report.
 */
export function allureStatusOf(state: string | undefined, errors: readonly unknown[] | undefined): 'failed' | 'broken' | undefined {
  if (state !== 'fail') return undefined;
  return testStateOf('failed', errors ?? []) === 'errored' ? 'broken' : 'failed';
}

type Task = Parameters<AllureVitestReporter['handleTask']>[0];

export default class HilAllureReporter extends AllureVitestReporter {
  /** The test allure-vitest is turning into a result (it writes the result within handleTask). */
  private current: Task | undefined;

  constructor(private readonly options: { resultsDir: string } & Record<string, unknown>) {
    super(options);
  }

  override onInit(vitest: Parameters<AllureVitestReporter['onInit']>[0]): void {
    super.onInit(vitest);
    // allure-vitest builds its runtime with the default writer; from here on results go through ours.
    (this as unknown as { allureReporterRuntime: { writer: unknown } }).allureReporterRuntime.writer = new UnsyncedWriter({ resultsDir: this.options.resultsDir }, (result) => {
      const t = this.current;
      if (t?.type !== 'test' || (result.status !== 'failed' && result.status !== 'broken')) return;
      const status = allureStatusOf(t.result?.state, t.result?.errors);
      if (status) result.status = status;
    });
  }

  /** Files whose results were written when they ended (onTestModuleEnd), so the run's end skips them. */
  private readonly written = new Set<string>();

  // allure-vitest writes every result at the end of the run, on vitest's main thread, after the last test:
  // about half a second of a conformance run's wall time here, spent when nothing else runs. A file's
  // results are final when it ends, so each file is written then, while the other files still run.
  onTestModuleEnd(module: { task: Task & { id: string } }): void {
    this.written.add(module.task.id);
    this.handleTask(module.task);
  }

  override onTestRunEnd(tests: Parameters<AllureVitestReporter['onTestRunEnd']>[0]): void {
    const rest = [...tests].filter((t) => !this.written.has((t as { task?: { id: string } }).task?.id ?? ''));
    super.onTestRunEnd(rest as typeof tests);
  }

  override handleTask(task: Task): void {
    const outer = this.current;
    this.current = task;
    try {
      super.handleTask(task);
    } finally {
      this.current = outer;
    }
  }
}
