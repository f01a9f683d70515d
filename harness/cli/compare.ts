// `hil compare`: two run records compared (regressions past a tolerance).

import { parseArgs } from 'node:util';
import { comparisonText, compareRuns, regressed } from '../report/compare.ts';
import { UsageError, wantsHelp } from './common.ts';
import { toleranceOf, readRunInput } from './report.ts';

/** hil compare A.json B.json: B (the run under review) against A (the baseline). Exit 1 when B regressed. */
export async function compare(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'compare')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { tolerance: { type: 'string' }, json: { type: 'boolean', default: false } } });
  if (positionals.length !== 2) throw new UsageError('expected: compare A.json B.json');
  const c = compareRuns(await readRunInput(positionals[0]!), await readRunInput(positionals[1]!), toleranceOf(values.tolerance));
  process.stdout.write(values.json ? `${JSON.stringify(c, null, 2)}\n` : `${comparisonText(c)}\n`);
  return regressed(c) ? 1 : 0;
}
