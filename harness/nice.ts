// Loaded in every conformance and model worker before each test file (vitest.config.ts setupFiles; setup
// files run again for every file, isolate: false or not): takes the worker's thread to the nice value the
// file runs at (harness/priority.ts says why each file has the one it has), so the stacks, planners and
// helpers the file starts inherit it. HIL_NICE names it: `file` (the conformance project) takes the file's
// own value (priority.ts fileNice), a number (the model project) that value for every file; never below the
// value the worker started at (a run started with `nice -n 15` stays at 15 for every file).
//
// Only the worker's main thread moves (on Linux a nice value is a thread's own): its other threads keep the
// value they started with, the grant keeper's thread its own (harness/clients/keeper.ts KEEPER_NICE).

import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { fileNice, takeNice } from './priority.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const spec = process.env.HIL_NICE;
// expect.getState().testPath: the file this worker is about to collect and run (set before its setup files run).
const testPath = expect.getState().testPath;
const file = relative(ROOT, testPath ?? '').split('\\').join('/');
// Without the file's path every file would run at the default value, the quiet ones included: said, not silent.
if (spec === 'file' && !testPath) process.stderr.write('warning: harness/nice.ts: vitest gave no test path before the file ran; it runs at the default nice value, not its own (harness/priority.ts)\n');
const wanted = spec === 'file' ? fileNice(file) : Number(spec ?? '0');
if (spec !== undefined && Number.isInteger(wanted) && wanted >= 0 && wanted <= 19) {
  const r = takeNice(wanted);
  // Not fatal: the file runs, at the worker's value; its timing checks are judged by the harness's
  // lateness figures as ever (harness/lateness.ts), but beside busier files they may end in
  // HIL_ERR_HOST_TOO_SLOW where the file's own value would have kept time.
  if (r.error) process.stderr.write(`warning: ${file} runs at nice ${r.nice}, not its ${wanted} (this worker's thread could not go back from ${r.from}: ${r.error})\n`);
}
