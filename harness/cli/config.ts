// `hil config`: the machine configuration compiler, as a process of the reference system.

import { spawn } from 'node:child_process';
import { CONFIG_ENTRY, TS_NODE_ARGS } from '../targets/reference.ts';

export function config(args: string[]): Promise<number> {
  // The compiler runs as its own process, like the stack in serve; its exit status is ours.
  const child = spawn(process.execPath, [...TS_NODE_ARGS, CONFIG_ENTRY, ...args], { stdio: 'inherit' });
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}
