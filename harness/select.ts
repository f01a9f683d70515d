// Selections a developer makes by what failed or by what is documented, rather than by file name:
// `hil run --last-failed` (the failed and errored tests of the last run.json) and `hil run --covers ID`
// (the tests whose covers() name a catalogue item, or any item matching a pattern such as 'reason:*').
// Both become what vitest already selects by: the test files, and a test name pattern that matches
// exactly the chosen tests' full names.

import { TRACEABLE } from './catalogue/gate.ts';
import type { RunRecord } from './report/run-types.ts';

/** A selection of whole tests: their files and a name pattern vitest (and the run record's grep) applies. */
export interface TestSelection {
  files: string[];
  /** Anchored pattern matching the chosen full names, with describe blocks joined by " > " or " " (vitest's own form). */
  pattern: string;
  tests: string[];
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** file > full name pairs into files and an exact name pattern. */
export function selectionOf(tests: ReadonlyArray<{ file: string; fullName: string }>): TestSelection {
  const files = [...new Set(tests.map((t) => t.file))].sort();
  const names = [...new Set(tests.map((t) => t.fullName))].sort();
  const pattern = `^(?:${names.map((n) => n.split(' > ').map(escapeRe).join('(?: > | )')).join('|')})$`;
  return { files, pattern, tests: tests.map((t) => `${t.file} > ${t.fullName}`) };
}

/** The tests of a run that failed or errored (expected failures included: a rerun shows whether they still do). */
export function lastFailed(run: Pick<RunRecord, 'tests'>): TestSelection | undefined {
  // A file that failed as a whole (no test to name) is rerun whole: its pattern must not exclude its tests.
  const failed = run.tests.filter((t) => (t.state === 'failed' || t.state === 'errored') && t.file !== '');
  if (failed.length === 0) return undefined;
  const wholeFiles = new Set(failed.filter((t) => t.fullName === '(file)').map((t) => t.file));
  const named = failed.filter((t) => !wholeFiles.has(t.file));
  const sel = selectionOf(named);
  if (wholeFiles.size === 0) return sel;
  const files = [...new Set([...sel.files, ...wholeFiles])].sort();
  // Whole files plus named tests: a pattern can only narrow every file alike, so the named tests' files run whole too.
  return { files, pattern: '', tests: [...sel.tests, ...[...wholeFiles].map((f) => `${f} (whole file)`)] };
}

/** A --covers argument: an exact catalogue id, or a pattern with * (any characters) such as 'reason:*'. */
export function coversMatcher(patterns: readonly string[]): (id: string) => boolean {
  const res = patterns.map((p) => new RegExp(`^${p.split('*').map(escapeRe).join('.*')}$`));
  return (id) => res.some((r) => r.test(id));
}

export interface CoversResult {
  selection?: TestSelection;
  /** Each argument with the catalogue items it named; an argument naming none is a usage error. */
  matched: Array<{ pattern: string; items: string[] }>;
  /** Items named that no test covers (pending), with the pending reason where the catalogue gives one. */
  uncovered: string[];
}

/** The collected tests that cover any item the patterns name (catalogue and profile items, harness/catalogue/gate.ts TRACEABLE). */
export function selectCovering(patterns: readonly string[], tests: ReadonlyArray<{ file: string; fullName: string; covers: readonly string[] }>, items: readonly string[] = TRACEABLE.map((e) => e.id)): CoversResult {
  const matched = patterns.map((p) => ({ pattern: p, items: items.filter(coversMatcher([p])) }));
  const wanted = new Set(matched.flatMap((m) => m.items));
  const chosen = tests.filter((t) => t.covers.some((c) => wanted.has(c)));
  const covered = new Set(chosen.flatMap((t) => t.covers));
  return {
    ...(chosen.length ? { selection: selectionOf(chosen) } : {}),
    matched,
    uncovered: [...wanted].filter((id) => !covered.has(id)).sort(),
  };
}

/** Every conformance test the filters select, with its covers() (collected, not run: as hil coverage does). */
export async function collectTests(root: string, projects: string[], filters: string[]): Promise<{ tests: Array<{ file: string; fullName: string; covers: string[]; tags: string[] }>; errors: string[] }> {
  const { createVitest } = await import('vitest/node');
  const vitest = await createVitest('test', { root, watch: false, project: projects, reporters: [] });
  const tests: Array<{ file: string; fullName: string; covers: string[]; tags: string[] }> = [];
  try {
    const result = await vitest.collect(filters);
    for (const m of result.testModules) for (const t of m.children.allTests()) tests.push({ file: m.relativeModuleId, fullName: t.fullName, covers: t.meta().covers ?? [], tags: [...t.tags] });
    return { tests, errors: result.unhandledErrors.map((e) => (e as Error).message) };
  } finally {
    await vitest.close();
  }
}
