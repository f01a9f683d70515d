// `hil report`: the HTML report of a run record; and reading a run record for the verbs that compare runs.

import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { writeHtmlReport } from '../report/html.ts';
import { readRunRecord } from '../report/run-reader.ts';
import { DEFAULT_TOLERANCE, type Tolerance } from '../report/compare.ts';
import type { RunRecord } from '../report/run-types.ts';
import { DEFAULT_REPORTS, UsageError, InputError, wantsHelp, outputDir } from './common.ts';

export async function report(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'report')) return 0;
  const { values } = parseArgs({ args, options: { out: { type: 'string' }, reports: { type: 'string' }, baseline: { type: 'string' }, tolerance: { type: 'string' } } });
  const dir = values.reports ? resolve(values.reports) : DEFAULT_REPORTS;
  if (!existsSync(join(dir, 'run.json'))) throw new InputError(`${values.reports ?? 'reports/'}: no run.json there (a directory written by hil run --reports DIR)`);
  // The baseline is read before anything is written: a missing one is the user's to correct.
  if (values.baseline) await readRunInput(values.baseline);
  const tolerance = toleranceOf(values.tolerance);
  if (values.out) outputDir('--out', dirname(resolve(values.out)));
  const r = await writeHtmlReport({
    runJson: join(dir, 'run.json'),
    allureDir: join(dir, 'allure-results'),
    outFile: values.out ? resolve(values.out) : join(dir, 'html', 'index.html'),
    ...(values.baseline ? { baseline: resolve(values.baseline), tolerance } : {}),
  });
  for (const w of r.warnings) process.stdout.write(`note: ${w}\n`);
  process.stdout.write(`report: ${r.outFile}\n`);
  return 0;
}

export function toleranceOf(text: string | undefined): Tolerance {
  if (text === undefined) return DEFAULT_TOLERANCE;
  const v = Number(text);
  if (!(v >= 0) || !Number.isFinite(v)) throw new UsageError(`--tolerance ${text}: a fraction (0.5 is 50%)`);
  return { ...DEFAULT_TOLERANCE, relative: v };
}

/**
 * A run record the user named on the command line: missing or unreadable is bad input (one line, exit 2,
 * nothing written), never a stack trace.
 */
export async function readRunInput(file: string): Promise<RunRecord> {
  if (!existsSync(resolve(file))) throw new InputError(`${file}: no such file (a run.json written by hil run)`);
  return readRun(file).catch((e: unknown) => {
    throw new InputError(`${file}: not a run record: ${String((e as Error).message ?? e).split('\n')[0]}`);
  });
}

export async function readRun(file: string): Promise<RunRecord> {
  const warnings: string[] = [];
  const { run } = await readRunRecord(resolve(file), warnings);
  for (const w of warnings) process.stderr.write(`note: ${file}: ${w}\n`);
  return run;
}
