#!/usr/bin/env node
// The `hil` command. Nothing needs compiling after npm ci: the first call bundles harness/cli.ts and what it
// imports with esbuild into node_modules/.cache/hil-cli, and every call whose sources are byte for byte
// the ones bundled loads that bundle (cli-cache.mjs says how a changed source is noticed). Without a bundle
// (HIL_CLI_BUNDLE=off, or a build that failed) the TypeScript sources run through tsx's loader.
import { readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

// The host's CPU counters before anything loads: `hil run` judges the host's load over its own start-up
// (harness/sequencer.ts hostLoadNow, START_SAMPLE) instead of stopping to sample it afterwards.
try {
  globalThis[Symbol.for('cell-hil.start-sample')] = { stat: readFileSync('/proc/stat', 'utf8'), at: performance.now(), own: process.cpuUsage() };
} catch {
  // no /proc/stat (not Linux): hostLoadNow falls back to the load average
}

const root = fileURLToPath(new URL('../..', import.meta.url));
let entry;
if (process.env.HIL_CLI_BUNDLE !== 'off') {
  const { freshBundle, buildBundle } = await import('./cli-cache.mjs');
  entry = freshBundle(root);
  if (process.env.HIL_CLI_TRACE) process.stderr.write(`hil: bundle ${entry ? 'reused' : 'building'}\n`);
  entry ??= await buildBundle(root);
  if (process.env.HIL_CLI_TRACE) process.stderr.write(`hil: bundle ${entry ?? 'none: through tsx'}\n`);
}
let main;
if (entry) {
  // Stack traces name the TypeScript sources and their lines, as under tsx.
  process.setSourceMapsEnabled(true);
  ({ main } = await import(pathToFileURL(entry).href));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../cli.ts'));
}
const code = await main(process.argv.slice(2));
if (typeof code === 'number') process.exitCode = code;
