// `hil compare`: two run records compared (regressions past a tolerance).

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { comparisonText, compareRuns, regressed } from '../report/compare.ts';
import { UsageError, InputError, wantsHelp } from './common.ts';
import { toleranceOf, readRun } from './report.ts';

/** hil compare A.json B.json: B (the run under review) against A (the baseline). Exit 1 when B regressed. */
export async function compare(args: string[]): Promise<number> {
  if (wantsHelp(args, 'compare')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { tolerance: { type: 'string' }, json: { type: 'boolean', default: false } } });
  if (positionals.length !== 2) throw new UsageError('expected: compare A.json B.json');
  for (const f of positionals) if (!existsSync(resolve(f))) throw new InputError(`${f}: no such file (a run.json written by hil run)`);
  const runOf = (f: string) =>
    readRun(f).catch((e: unknown) => {
      throw new InputError(`${f}: not a run record: ${String((e as Error).message ?? e).split('\n')[0]}`);
    });
  const c = compareRuns(await runOf(positionals[0]!), await runOf(positionals[1]!), toleranceOf(values.tolerance));
  process.stdout.write(values.json ? `${JSON.stringify(c, null, 2)}\n` : `${comparisonText(c)}\n`);
  return regressed(c) ? 1 : 0;
}
