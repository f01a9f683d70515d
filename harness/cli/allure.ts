// `hil allure`: the Allure report of a run's results.

import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_REPORTS, UsageError, wantsHelp, outputDir } from './common.ts';

/** hil allure [--reports DIR] [--out DIR] [--history FILE]: Allure's report of a run, configured by allurerc.mjs, with no analytics tag. */
export async function allureCommand(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'allure')) return 0;
  const { values } = parseArgs({ args, options: { reports: { type: 'string' }, out: { type: 'string' }, history: { type: 'string' } } });
  const dir = values.reports ? resolve(values.reports) : DEFAULT_REPORTS;
  if (!existsSync(join(dir, 'allure-results'))) throw new UsageError(`${join(dir, 'allure-results')}: no Allure results (run hil run first)`);
  if (values.out) outputDir('--out', values.out);
  const { generateAllureReport } = await import('../report/allure-report.ts');
  const index = await generateAllureReport({ results: [join(dir, 'allure-results')], out: values.out ? resolve(values.out) : join(dir, 'allure-report'), historyPath: values.history ? resolve(values.history) : join(dir, 'allure-history.jsonl') });
  process.stdout.write(`allure: ${index} (one file; open it from disk)\n`);
  return 0;
}
