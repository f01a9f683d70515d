// `hil merge`: several run records of one target merged into one.

import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { mergeRuns } from '../report/merge.ts';
import { ROOT, UsageError, wantsHelp, outputDir } from './common.ts';
import { loadExpectations } from './run.ts';

/** hil merge DIR... --out DIR: shard runs merged into one run per target (harness/report/merge.ts). */
export async function merge(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'merge')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { out: { type: 'string' }, 'no-report': { type: 'boolean', default: false } } });
  if (!values.out || positionals.length === 0) throw new UsageError('expected: merge DIR... --out DIR');
  for (const d of positionals) if (!existsSync(join(resolve(d), 'run.json'))) throw new UsageError(`${d}: no run.json (a directory written by hil run --reports DIR)`);
  outputDir('--out', values.out);
  const merged = await mergeRuns({
    root: ROOT,
    dirs: positionals.map((d) => resolve(d)),
    out: resolve(values.out),
    report: !values['no-report'],
    // The sim target on another driver has its own file (as hil run chooses it); a rig's is chosen by its machine file, which a record does not keep.
    expectationsFor: (r) => loadExpectations(r.target.name === 'sim' && r.target.driver !== 'sim' && r.target.driver !== 'unknown' ? `sim+${r.target.driver}` : r.target.name),
  });
  for (const m of merged) process.stdout.write(`${m.group}: ${m.closing}\n`);
  return merged.some((m) => m.exitCode !== 0) ? 1 : 0;
}
