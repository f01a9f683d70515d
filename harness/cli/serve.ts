// `hil serve` (and `replay`, `doctor`, `planner serve`, `olp serve`): the reference stack's processes,
// started, never imported (DESIGN.md rule 1).

import { spawn } from 'node:child_process';
import { TS_NODE_ARGS, referenceCommand } from '../targets/reference.ts';

export function serve(args: string[]): Promise<number> {
  // The stack is a separate process (DESIGN.md rule 1): the harness only starts it. Descriptor 3 is its
  // lifeline, a pipe this process never writes: however this process ends (kill -9 included) the kernel
  // closes it, and the stack stops the orderly way, its planner and OLP server with it (their own lifelines).
  const stack = !['replay', 'doctor', 'sessions'].includes(args[0] ?? '') && !args.includes('-h') && !args.includes('--help');
  // From source through tsx, or from the bundle HIL_STACK_PREBUILT names (harness/targets/reference.ts): the
  // harness's own tests of hil serve build one bundle for all their stacks.
  const child = spawn(process.execPath, [...referenceCommand('stack'), ...args, ...(stack ? ['--lifeline-fd', '3'] : [])], { stdio: ['inherit', 'inherit', 'inherit', 'pipe'] });
  const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
  process.on('SIGINT', forward('SIGINT'));
  process.on('SIGTERM', forward('SIGTERM'));
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

export function startProcess(entry: string, args: string[]): Promise<number> {
  const child = spawn(process.execPath, [...TS_NODE_ARGS, entry, ...args], { stdio: 'inherit' });
  const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
  process.on('SIGINT', forward('SIGINT'));
  process.on('SIGTERM', forward('SIGTERM'));
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}
