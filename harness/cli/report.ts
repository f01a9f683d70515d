// `hil report`: the HTML report of a run record; and reading a run record for the verbs that compare runs.

import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { writeHtmlReport } from '../report/html.ts';
import { readRunRecord } from '../report/run-reader.ts';
import { DEFAULT_TOLERANCE, type Tolerance } from '../report/compare.ts';
import type { RunRecord } from '../report/run-types.ts';
import { DEFAULT_REPORTS, UsageError, InputError, wantsHelp } from './common.ts';

export async function report(args: string[]): Promise<number> {
  if (wantsHelp(args, 'report')) return 0;
  const { values } = parseArgs({ args, options: { out: { type: 'string' }, reports: { type: 'string' }, baseline: { type: 'string' }, tolerance: { type: 'string' } } });
  const dir = values.reports ? resolve(values.reports) : DEFAULT_REPORTS;
  if (!existsSync(join(dir, 'run.json'))) throw new InputError(`${values.reports ?? 'reports/'}: no run.json there (a directory written by hil run --reports DIR)`);
  const r = await writeHtmlReport({
    runJson: join(dir, 'run.json'),
    allureDir: join(dir, 'allure-results'),
    outFile: values.out ? resolve(values.out) : join(dir, 'html', 'index.html'),
    ...(values.baseline ? { baseline: resolve(values.baseline), tolerance: toleranceOf(values.tolerance) } : {}),
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

export async function readRun(file: string): Promise<RunRecord> {
  const warnings: string[] = [];
  const { run } = await readRunRecord(resolve(file), warnings);
  for (const w of warnings) process.stderr.write(`note: ${file}: ${w}\n`);
  return run;
}
