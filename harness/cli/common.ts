// What every `hil` verb shares: the repository root, the reports directory, the usage errors (exit 2) and
// --help.

import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

// HIL_REPORTS_DIR: another directory for a run's reports (a nested run, such as hil cleanroom check's);
// --reports DIR says the same on the command line.
export const DEFAULT_REPORTS = process.env.HIL_REPORTS_DIR ? resolve(process.env.HIL_REPORTS_DIR) : join(ROOT, 'reports');

export class UsageError extends Error {}

/**
 * Bad input a user can correct from one line (a name that matches nothing, a file that is not there):
 * exit 2 with `hil: <message>` alone, before anything under reports/ is touched.
 */
export class InputError extends UsageError {}

/**
 * Faults --plant may inject: the sim driver's test-channel faults that take one axis and nothing else (the
 * planted fault is `{kind, axis}`, harness/evidence.ts maybePlant). cli.test.ts checks them against the
 * driver's fault table, which the harness does not import.
 */
export const PLANTABLE_FAULTS = ['following_error', 'frozen_feedback', 'slave_offline', 'pdo_mapping_mismatch', 'homing_fails', 'sluggish_drive'] as const;

/** The conformance suite files (the conformance project's include, vitest.config.ts), relative to ROOT. */
export function suiteFiles(): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const e of readdirSync(join(ROOT, rel), { withFileTypes: true })) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) walk(r);
      else if (e.name.endsWith('.test.ts')) out.push(r);
    }
  };
  walk('suites');
  return out;
}

/** A filter of hil run selects files as vitest does: a file whose path contains it (relative or absolute). */
export function filterMatches(filter: string, files: string[]): boolean {
  filter = filter.replace(/:[0-9]+$/, ''); // vitest's FILE:LINE form
  const abs = resolve(filter);
  return files.some((f) => f.includes(filter) || join(ROOT, f).includes(filter) || join(ROOT, f).startsWith(abs));
}

/**
 * `--help` or `-h` among a verb's arguments: prints the verb's usage and says so. The usage texts load only
 * then: the run's text lists every target's options, and its descriptors are most of what a verb such as
 * `hil certs` would load otherwise.
 */
export async function wantsHelp(args: string[], cmd: string): Promise<boolean> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${await (await import('./help.ts')).helpOf(cmd)}\n`);
    return true;
  }
  return false;
}

/**
 * Creates DIR and its missing parents one level at a time. Node's recursive mkdir does not return on some
 * paths a user may type (under /proc it retries the missing parent forever): `hil run --reports /proc/x`
 * hung with nothing printed. Made level by level, the first level that cannot be made fails with the
 * system's reason.
 */
export function makeDirs(dir: string): string {
  const abs = resolve(dir);
  const missing: string[] = [];
  let p = abs;
  while (!existsSync(p)) {
    missing.push(p);
    const up = dirname(p);
    if (up === p) break;
    p = up;
  }
  if (existsSync(p) && !statSync(p).isDirectory()) throw new Error(`${p} is not a directory`);
  for (const m of missing.reverse()) {
    try {
      mkdirSync(m);
    } catch (e) {
      // Made by someone else meanwhile (two runs sharing a reports parent) is as good as made here.
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(m).isDirectory()) throw e;
    }
  }
  return abs;
}

/** An output directory named on the command line, made now: one line and exit 2 when it cannot be. */
export function outputDir(flag: string, dir: string): string {
  try {
    return makeDirs(dir);
  } catch (e) {
    throw new InputError(`${flag} ${dir}: cannot create the directory: ${(e as Error).message}`);
  }
}
