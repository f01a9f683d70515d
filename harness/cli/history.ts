// `hil history`: the kept runs of the nightly history.

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { UsageError, wantsHelp } from './common.ts';
import { readRun } from './report.ts';

/** hil history DIR [--json] [--nights N]: the nightly history as the night's report shows it (harness/history.ts). */
export async function historyCommand(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'history')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { json: { type: 'boolean', default: false }, nights: { type: 'string' } } });
  if (positionals.length !== 1) throw new UsageError('expected: history DIR (the --out DIR of hil nightly)');
  const dir = resolve(positionals[0]!);
  if (!existsSync(dir)) throw new UsageError(`${positionals[0]}: no such directory`);
  const { analyse, backfillHistory, historyText, HISTORY_NIGHTS } = await import('../history.ts');
  const nights = values.nights === undefined ? HISTORY_NIGHTS : Number(values.nights);
  if (!Number.isInteger(nights) || nights < 1) throw new UsageError(`--nights ${values.nights}: a whole number of nights, at least 1`);
  const warnings: string[] = [];
  // Nights missing from history.jsonl are read from their run records, without writing the file.
  const a = analyse(await backfillHistory(dir, readRun, warnings, false), nights);
  for (const w of warnings) process.stderr.write(`note: ${w}\n`);
  process.stdout.write(values.json ? `${JSON.stringify({ nights: a.nights.map((n) => ({ night: n.night, verdict: n.verdict, identity: n.identity })), failing: a.failing, flaky: a.flaky, trends: a.trends }, null, 2)}\n` : historyText(a));
  return 0;
}
