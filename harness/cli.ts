// The `hil` command: run the conformance suites against a target, serve the reference stack, print
// catalogue coverage, and render the qualification report. Exit status: 0 all passed, 1 failures,
// 2 usage errors.
//
// One file per verb under harness/cli/ (common.ts: what they share; help.ts: the usage texts); this module
// dispatches a command line to its verb and turns usage errors into exit status 2.

import { OLP_ENTRY, PLANNER_ENTRY } from './targets/reference.ts';
import { run } from './cli/run.ts';
import { serve, startProcess } from './cli/serve.ts';
import { cleanroom } from './cli/cleanroom.ts';
import { config } from './cli/config.ts';
import { coverage } from './cli/coverage.ts';
import { fuzz } from './cli/fuzz.ts';
import { certs } from './cli/certs.ts';
import { report } from './cli/report.ts';
import { compare } from './cli/compare.ts';
import { expectations } from './cli/expectations.ts';
import { merge } from './cli/merge.ts';
import { nightly } from './cli/nightly.ts';
import { denseCommand } from './cli/dense.ts';
import { historyCommand } from './cli/history.ts';
import { allureCommand } from './cli/allure.ts';
import { weldplanCommand } from './cli/weldplan.ts';
import { ROOT, InputError, UsageError, wantsHelp } from './cli/common.ts';
import { HELP } from './cli/help.ts';
import './trace.ts';

export { PLANTABLE_FAULTS } from './cli/common.ts';

export async function main(argv: string[]): Promise<number> {
  const [cmd = 'help', ...rest] = argv;
  try {
    switch (cmd) {
      case 'run':
        return await run(rest, false);
      case 'test':
        return await run(rest, true);
      case 'serve':
        return await serve(rest);
      case 'cleanroom':
        return await cleanroom(rest);
      case 'replay':
        // The stack's own replay subcommand, as a separate process (DESIGN.md rule 1; docs/recording.md).
        return await serve(['replay', ...rest]);
      case 'doctor':
        // Checks what a rig needs (module, master, slaves); the stack's own subcommand, as a process.
        return await serve(['doctor', ...rest]);
      case 'config':
        return await config(rest);
      case 'coverage':
        return await coverage(rest);
      case 'fuzz':
        return await fuzz(rest);
      case 'certs':
        return await certs(rest);
      case 'report':
        return await report(rest);
      case 'compare':
        return await compare(rest);
      case 'expectations':
        return await expectations(rest);
      case 'merge':
        return await merge(rest);
      case 'nightly':
        return await nightly(rest);
      case 'dense':
        return denseCommand(rest);
      case 'history':
        return await historyCommand(rest);
      case 'allure':
        return await allureCommand(rest);
      case 'planner':
        // The planner stub is a process of the reference system (DESIGN.md rule 1): started, never imported.
        if (rest[0] !== 'serve') {
          if (wantsHelp(rest, 'planner')) return 0;
          throw new UsageError('expected: planner serve [options]');
        }
        return await startProcess(PLANNER_ENTRY, rest);
      case 'olp':
        // The OLP server is a process of the reference system (DESIGN.md rule 1): started, never imported.
        if (rest[0] !== 'serve') {
          if (wantsHelp(rest, 'olp')) return 0;
          throw new UsageError('expected: olp serve [options]');
        }
        return await startProcess(OLP_ENTRY, rest);
      case 'weldplan':
        return weldplanCommand(rest);
      case '--version':
      case 'version': {
        const { versionText } = await import('./version.ts');
        process.stdout.write(`${versionText(ROOT)}\n`);
        return 0;
      }
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(HELP['']! + '\n');
        return 0;
      default:
        throw new UsageError(`unknown command ${cmd}`);
    }
  } catch (e) {
    if (e instanceof InputError) {
      process.stderr.write(`hil: ${e.message}\n`);
      return 2;
    }
    if (e instanceof UsageError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`hil: ${(e as Error).message}\n\n${HELP[cmd] ?? HELP['']}\n`);
      return 2;
    }
    throw e;
  }
}
