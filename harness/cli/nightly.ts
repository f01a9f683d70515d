// `hil nightly`: the nightly run (conformance, soak, model) and its kept history.

import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { writeHtmlReport } from '../report/html.ts';
import { comparisonText, compareRuns, regressed } from '../report/compare.ts';
import { verdictOf } from '../report/verdict.ts';
import { measurementText } from '../report/run-measurements.ts';
import { DEFAULT_RSS_GROWTH_MIB, noteSoak, soak } from '../soak.ts';
import { openTarget } from '../targets/index.ts';
import type { BindingInput } from '../clients/control.ts';
import { InputError, UsageError, wantsHelp, makeDirs } from './common.ts';
import { run } from './run.ts';
import { readRun } from './report.ts';
import { withBinding } from '../targets/binding.ts';

/** hil nightly: run, soak, compare with the previous night (harness/soak.ts, harness/report/compare.ts). */
export async function nightly(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'nightly')) return 0;
  const outAt = args.indexOf('--out');
  const soakAt = args.indexOf('--soak-minutes');
  if (outAt < 0 || !args[outAt + 1]) throw new UsageError('expected: nightly --out DIR [--soak-minutes N] [run options]');
  const out = resolve(args[outAt + 1]!);
  const minutes = soakAt >= 0 ? Number(args[soakAt + 1]) : 10;
  const rssAt = args.indexOf('--soak-rss-growth-mib');
  const rssGrowthMiB = rssAt >= 0 ? Number(args[rssAt + 1]) : DEFAULT_RSS_GROWTH_MIB;
  if (!(rssGrowthMiB > 0) || !Number.isFinite(rssGrowthMiB)) throw new UsageError('--soak-rss-growth-mib N: a positive number of MiB');
  if (!(minutes >= 0) || !Number.isFinite(minutes)) throw new UsageError('--soak-minutes N: a number of minutes (0 skips the soak)');
  const runArgs = args.filter((_, i) => ![outAt, outAt + 1, soakAt, soakAt >= 0 ? soakAt + 1 : -1, rssAt, rssAt >= 0 ? rssAt + 1 : -1].includes(i) && args[i] !== '--no-record' && args[i] !== '--no-long');
  if (runArgs.some((a) => a === '--reports' || a === '--shard' || a === '--record')) throw new UsageError('nightly chooses its own --reports and --record and runs every file');
  const targetAt = runArgs.indexOf('--target');
  const targetName = targetAt >= 0 ? runArgs[targetAt + 1] : 'sim';
  // The run recorded (hil run --record: a stack per test, each test's recording kept) where a recording
  // can be made: the sim target, our stack. A morning's failure then replays without the rig or the night.
  const record = !args.includes('--no-record') && targetName === 'sim';
  const earlier = existsSync(out) ? readdirSync(out).filter((d) => /^\d{4}-\d{2}-\d{2}(-\d+)?$/.test(d) && existsSync(join(out, d, 'run', 'run.json'))).sort() : [];
  const day = new Date().toISOString().slice(0, 10);
  let dated = join(out, day);
  for (let k = 2; existsSync(dated); k++) dated = join(out, `${day}-${k}`);
  try {
    makeDirs(dated);
  } catch (e) {
    throw new InputError(`--out ${args[outAt + 1]}: cannot create ${dated}: ${(e as Error).message}`);
  }
  // The night has the time for the long tier (tests waiting out a bound of more than a minute) unless told not to.
  const long = !args.includes('--no-long') && !runArgs.includes('--long') ? ['--long'] : [];
  const code = await run([...runArgs, ...long, '--reports', join(dated, 'run'), '--blob', '--no-report', ...(record ? ['--record', join(dated, 'recordings')] : [])], false);
  process.stdout.write(record ? `nightly: recordings in ${join(dated, 'recordings')} (replay: hil run --target replay --recordings ${join(dated, 'recordings')})\n` : `nightly: the run is not recorded (${targetName === 'sim' ? '--no-record' : `only the sim target records; this is ${targetName}`})\n`);
  let soaked: { measurements: import('../measure.ts').MeasurementRecord[] } | undefined;
  // The soak is part of the night's verdict: its figures, its first refusal and memory against a limit go
  // into the run's record, so the verdict, the report and the next night's comparison all carry it.
  // The soak's own Describe fills in a record whose run noted none (the digests of what ran).
  const target = await openTarget();
  try {
    const described = await target.client().describe();
    const d = withBinding(described.reply.data as Record<string, unknown>) as unknown as { binding: BindingInput };
    const soakRecord = minutes > 0 ? await soak(target, d.binding, minutes * 60_000, { rssGrowthMiB }) : undefined;
    soaked = soakRecord;
    if (soakRecord) {
      writeFileSync(join(dated, 'soak.json'), `${JSON.stringify(soakRecord, null, 2)}\n`);
      for (const m of soakRecord.measurements) process.stdout.write(`soak: ${measurementText(m)}${m.outcome === 'fail' ? '  OUTSIDE THE LIMIT' : ''}\n`);
      if (soakRecord.first_refusal) process.stdout.write(`soak: first refusal ${soakRecord.first_refusal.at_s} s in: ${soakRecord.first_refusal.status} ${soakRecord.first_refusal.error}\n`);
      if (soakRecord.host_too_slow) process.stdout.write(`soak: HIL_ERR_HOST_TOO_SLOW: ${soakRecord.host_too_slow}\n`);
    }
    noteSoak(join(dated, 'run', 'run.json'), soakRecord, described.status === 200 ? { driver: target.driver, describe: described.reply.data } : undefined);
  } finally {
    await target.close();
  }
  const previous = earlier.at(-1);
  let regressedSince = false;
  if (previous) {
    const c = compareRuns(await readRun(join(out, previous, 'run', 'run.json')), await readRun(join(dated, 'run', 'run.json')));
    writeFileSync(join(dated, 'comparison.txt'), `since ${previous}\n${comparisonText(c)}\n`);
    regressedSince = regressed(c);
    process.stdout.write(`compared with ${previous}: ${c.newFailures.length} new failures, ${c.fixed.length} fixed, ${c.drifts.length} drifted measurements\n`);
  }
  // Across nights: DIR/history.jsonl, the report's History section, Allure's report with its history (harness/history.ts).
  const { nightlyHistory } = await import('../history.ts');
  const { sections } = await nightlyHistory({ out, dated, night: basename(dated), run: await readRun(join(dated, 'run', 'run.json')), ...(soaked ? { soak: soaked } : {}), readRun, log: (s) => process.stdout.write(s) });
  const r = await writeHtmlReport({
    runJson: join(dated, 'run', 'run.json'),
    allureDir: join(dated, 'run', 'allure-results'),
    outFile: join(dated, 'report.html'),
    sections,
    ...(previous ? { baseline: join(out, previous, 'run', 'run.json') } : {}),
  });
  const night = await readRun(join(dated, 'run', 'run.json'));
  const v = verdictOf(night);
  process.stdout.write(`nightly: ${dated} (report ${r.outFile})\nnightly verdict: ${v.headline}\n`);
  for (const reason of v.reasons) process.stdout.write(`  - ${reason}\n`);
  return code === 0 && v.exitCode === 0 && !regressedSince ? 0 : 1;
}
