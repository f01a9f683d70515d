// Setup file of every vitest project (vitest.config.ts): a worker whose run has gone ends too. Vitest's
// forks worker ends when a message to its run fails, so a worker busy with a file notices a run that died
// (SIGKILL, or `hil run | head` ending it on a closed stdout); a worker idle between files sends nothing
// and would wait for a file that never comes, kept alive by what it holds (its stack hosts, the grant
// keeper's thread), with every stack host it keeps beside it. The IPC channel closing is the run ending:
// the worker exits then, and its stack hosts, planners and OLP servers follow it through their lifelines.

const KEY = Symbol.for('cell-hil.worker-lifeline');
const state = globalThis as { [KEY]?: true };

// Setup files run again before every file of a worker (isolate: false): one listener per process.
if (process.send && !state[KEY]) {
  state[KEY] = true;
  process.once('disconnect', () => {
    process.exitCode = 1;
    process.exit();
  });
}
