// Process entry of the machine configuration compiler (document 3 part 2, "Compiled machine
// configuration"), reached as `hil config ...`. The harness only starts this file as a process
// (DESIGN.md rule 1); everything it learns comes from stdout, the exit status and the written directory.
//
//   compile FILE --out DIR           one JSON line, exit 0 compiled, 1 refused
//   compile-many --out DIR FILE...   one JSON line per FILE in argument order (each with "file"),
//                                    exit 0 when all compiled, 1 when any was refused
//
// Exit status 2 is a usage error (including a FILE that cannot be read), 3 an unexpected failure.

import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { compileToDirectory } from './compile.ts';
import { ConfigError } from './errors.ts';

const USAGE = `usage: hil config compile FILE --out DIR
       hil config compile-many --out DIR FILE...

Compiles a machine configuration JSON into the immutable directory <DIR>/<configuration_sha256>/
(document 3 part 2) and prints one JSON line per file on stdout:
  {"dir": ..., "configuration_sha256": ..., "machine_sha256": ..., "deployment_sha256": ...}
or, when the configuration is refused,
  {"error": <code>, "path": <field path>, "message": ...}
compile-many adds "file" (as given) to each line and prints them in argument order.

  --out DIR    root of the compiled configurations (created when missing)
  -h, --help   this text

exit status: 0 compiled, 1 refused (a config_* code), 2 usage error or unreadable FILE, 3 internal failure
`;

class UsageError extends Error {}

type Line = Record<string, string>;

async function compileOne(file: string, out: string): Promise<{ line: Line; ok: boolean }> {
  try {
    // A file we cannot open is the caller's mistake, not a refusal of its content.
    await readFile(file).catch((e: NodeJS.ErrnoException) => {
      throw new UsageError(`cannot read ${file}: ${e.code ?? e.message}`);
    });
    const m = await compileToDirectory(file, out);
    return {
      ok: true,
      line: { dir: m.dir, configuration_sha256: m.configuration_sha256, machine_sha256: m.machine_sha256, deployment_sha256: m.deployment_sha256 },
    };
  } catch (e) {
    if (e instanceof ConfigError) return { ok: false, line: { error: e.code, path: e.path, message: e.message } };
    throw e;
  }
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
      (cmd === undefined ? process.stderr : process.stdout).write(USAGE);
      return cmd === undefined ? 2 : 0;
    }
    if (cmd !== 'compile' && cmd !== 'compile-many') throw new UsageError(`unknown command ${cmd}`);
    const { values, positionals } = parseArgs({
      args: rest,
      allowPositionals: true,
      strict: true,
      options: { out: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
    if (values.help) {
      process.stdout.write(USAGE);
      return 0;
    }
    if (!values.out) throw new UsageError('--out DIR is required');
    if (cmd === 'compile' && positionals.length !== 1) throw new UsageError('compile takes exactly one FILE');
    if (cmd === 'compile-many' && positionals.length === 0) throw new UsageError('compile-many takes at least one FILE');

    let refused = false;
    for (const file of positionals) {
      const r = await compileOne(file, values.out);
      refused ||= !r.ok;
      process.stdout.write(`${JSON.stringify(cmd === 'compile' ? r.line : { file, ...r.line })}\n`);
    }
    return refused ? 1 : 0;
  } catch (e) {
    if (e instanceof UsageError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`hil config: ${(e as Error).message}\n\n${USAGE}`);
      return 2;
    }
    process.stderr.write(`hil config: internal failure: ${(e as Error).stack ?? String(e)}\n`);
    return 3;
  }
}

const code = await main(process.argv.slice(2));
process.exitCode = code;
