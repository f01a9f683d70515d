// The `hil` command: run the conformance suites against a target, serve the reference stack, print
// catalogue coverage, and render the qualification report. Exit status: 0 all passed, 1 failures,
// 2 usage errors.
//
// One file per verb under harness/cli/ (common.ts: what they share; help.ts: the usage texts); this module
// dispatches a command line to its verb and turns usage errors into exit status 2. A verb's module is
// imported when that verb runs, not before: `hil certs` or `hil config` then loads what it uses, not the
// runner, the report and the fuzzer (a `hil certs` call took 2.3 s of CPU with every verb loaded, 0.7 s
// with its own). The usage texts load only for --help and usage errors (harness/cli/help.ts helpOf: the
// run's text lists every target's options).

import { ROOT, InputError, UsageError, wantsHelp } from './cli/common.ts';
import './trace.ts';

export { PLANTABLE_FAULTS } from './cli/common.ts';

/** A process of the reference system (DESIGN.md rule 1): started, never imported. */
async function startProcess(program: 'planner' | 'olp', args: string[]): Promise<number> {
  const [{ startProcess: start }, { OLP_ENTRY, PLANNER_ENTRY }] = await Promise.all([import('./cli/serve.ts'), import('./targets/reference.ts')]);
  return start(program === 'planner' ? PLANNER_ENTRY : OLP_ENTRY, args);
}

export async function main(argv: string[]): Promise<number> {
  const [cmd = 'help', ...rest] = argv;
  try {
    switch (cmd) {
      case 'run':
        return await (await import('./cli/run.ts')).run(rest, false);
      case 'test':
        return await (await import('./cli/run.ts')).run(rest, true);
      case 'serve':
        return await (await import('./cli/serve.ts')).serve(rest);
      case 'cleanroom':
        return await (await import('./cli/cleanroom.ts')).cleanroom(rest);
      case 'replay':
        // The stack's own replay subcommand, as a separate process (DESIGN.md rule 1; docs/recording.md).
        return await (await import('./cli/serve.ts')).serve(['replay', ...rest]);
      case 'doctor':
        // Checks what a rig needs (module, master, slaves); the stack's own subcommand, as a process.
        return await (await import('./cli/serve.ts')).serve(['doctor', ...rest]);
      case 'config':
        return await (await import('./cli/config.ts')).config(rest);
      case 'coverage':
        return await (await import('./cli/coverage.ts')).coverage(rest);
      case 'fuzz':
        return await (await import('./cli/fuzz.ts')).fuzz(rest);
      case 'certs':
        return await (await import('./cli/certs.ts')).certs(rest);
      case 'report':
        return await (await import('./cli/report.ts')).report(rest);
      case 'compare':
        return await (await import('./cli/compare.ts')).compare(rest);
      case 'expectations':
        return await (await import('./cli/expectations.ts')).expectations(rest);
      case 'merge':
        return await (await import('./cli/merge.ts')).merge(rest);
      case 'nightly':
        return await (await import('./cli/nightly.ts')).nightly(rest);
      case 'dense':
        return await (await import('./cli/dense.ts')).denseCommand(rest);
      case 'history':
        return await (await import('./cli/history.ts')).historyCommand(rest);
      case 'allure':
        return await (await import('./cli/allure.ts')).allureCommand(rest);
      case 'planner':
        // The planner stub is a process of the reference system (DESIGN.md rule 1): started, never imported.
        if (rest[0] !== 'serve') {
          if (await wantsHelp(rest, 'planner')) return 0;
          throw new UsageError('expected: planner serve [options]');
        }
        return await startProcess('planner', rest);
      case 'olp':
        // The OLP server is a process of the reference system (DESIGN.md rule 1): started, never imported.
        if (rest[0] !== 'serve') {
          if (await wantsHelp(rest, 'olp')) return 0;
          throw new UsageError('expected: olp serve [options]');
        }
        return await startProcess('olp', rest);
      case 'weldplan':
        return await (await import('./cli/weldplan.ts')).weldplanCommand(rest);
      case '--version':
      case 'version': {
        const { versionText } = await import('./version.ts');
        process.stdout.write(`${versionText(ROOT)}\n`);
        return 0;
      }
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(`${await (await import('./cli/help.ts')).helpOf('')}\n`);
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
      const { helpOf } = await import('./cli/help.ts');
      process.stderr.write(`hil: ${(e as Error).message}\n\n${(await helpOf(cmd)) ?? (await helpOf(''))}\n`);
      return 2;
    }
    throw e;
  }
}
