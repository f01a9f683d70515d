// The `hil` command run inside the calling process, for the harness's own tests of what a verb answers
// (its exit status, what it writes on stdout and stderr) where nothing about the answer is a property of a
// process: a usage error, --help, a file that is not there. harness/bin/hil.mjs does nothing but load
// cli.ts (its bundle, harness/bin/cli-cache.mjs) and hand main's status to the process, so each spawned
// `hil` pays a Node start and the verb's modules before it reaches the same code; here the module is
// loaded once per test file.
//
// Not for verbs that start processes of their own and stay in charge of them (serve, doctor, replay,
// planner serve, olp serve: they forward this process's signals to their child) nor for a whole run (hil
// run starts vitest, which is what runs this test): those stay spawned.

import { main } from '../cli.ts';

export interface InProcessResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** Queue of calls: two verbs at once would write into each other's capture. */
let queue: Promise<unknown> = Promise.resolve();

/**
 * `hil ARGS` through cli.ts main() in this process: its status and everything written to process.stdout
 * and process.stderr while it ran. The environment is restored afterwards (hil run sets HIL_* variables
 * for the run it would start). A verb that throws (a stack trace, in a real process) rejects.
 */
export function hilInProcess(args: string[], env: Record<string, string | undefined> = {}): Promise<InProcessResult> {
  const next = queue.then(() => runOnce(args, env));
  queue = next.catch(() => undefined);
  return next;
}

async function runOnce(args: string[], env: Record<string, string | undefined>): Promise<InProcessResult> {
  const savedEnv = { ...process.env };
  const out: string[] = [];
  const err: string[] = [];
  const realOut = process.stdout.write;
  const realErr = process.stderr.write;
  const capture = (into: string[]) =>
    function (this: unknown, chunk: string | Uint8Array, ...rest: unknown[]): boolean {
      into.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      const cb = rest.find((x): x is () => void => typeof x === 'function');
      if (cb) queueMicrotask(cb);
      return true;
    };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  process.stdout.write = capture(out) as typeof process.stdout.write;
  process.stderr.write = capture(err) as typeof process.stderr.write;
  try {
    const status = await main(args);
    return { status, stdout: out.join(''), stderr: err.join('') };
  } finally {
    process.stdout.write = realOut;
    process.stderr.write = realErr;
    for (const k of Object.keys(process.env)) if (!(k in savedEnv)) delete process.env[k];
    Object.assign(process.env, savedEnv);
  }
}
