// `hil expectations`: check or update a target's expectation file from a run.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { expectationProblems, updateExpectations, type ExpectationFile } from '../report/expectations.ts';
import { ROOT, DEFAULT_REPORTS, UsageError, wantsHelp } from './common.ts';
import { readRunInput } from './report.ts';

/** hil expectations update --target T [--run FILE]: the run's failures into fixtures/expectations/<target>.json. */
export async function expectations(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'expectations')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { target: { type: 'string' }, run: { type: 'string' }, dir: { type: 'string' } } });
  if (positionals[0] !== 'update' || positionals.length !== 1) throw new UsageError('expected: expectations update --target T');
  if (!values.target || !/^[a-z][a-z0-9+_.-]{0,63}$/.test(values.target)) throw new UsageError('--target T: the expectation file name (sim, sim+ethercat-fake, rig+bench-two-axis ...)');
  const run = await readRunInput(values.run ?? join(DEFAULT_REPORTS, 'run.json'));
  const file = join(values.dir ? resolve(values.dir) : join(ROOT, 'fixtures', 'expectations'), `${values.target}.json`);
  const current = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as ExpectationFile) : {};
  const problems = expectationProblems(current);
  if (problems.length) throw new UsageError(`${file}: ${problems.join('; ')}`);
  // The run's own context decides which conditional rule its outcomes update (harness/report/expectations.ts).
  const machine = /--machine[= ](\S+)/.exec(run.command)?.[1];
  const u = updateExpectations(run, current, {
    target: run.target.name,
    ...(run.target.driver !== 'unknown' ? { driver: run.target.driver } : {}),
    ...(machine ? { machine: basename(machine).replace(/\.json$/, '') } : {}),
    ...(run.environment.machine_sha256 ? { machine_sha256: run.environment.machine_sha256 } : {}),
  });
  writeFileSync(file, `${JSON.stringify(u.next, null, 2)}\n`);
  const w = (title: string, xs: string[]) => {
    process.stdout.write(`${title}: ${xs.length}\n`);
    for (const x of xs) process.stdout.write(`  ${x}\n`);
  };
  w('added (write a reason)', u.added);
  w('kept', u.kept);
  w('widened by the outcome seen (an ERROR is written as ERROR)', u.widened);
  w('fixed (removed)', u.fixed);
  w('stale: no such test (removed)', u.stale);
  process.stdout.write(`wrote ${file}\n`);
  return 0;
}
