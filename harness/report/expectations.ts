// Per-target expectation files (fixtures/expectations/<target>.json: {"<file> > <test>": {"expected":
// "fail", "reason": "..."}}, the wptrunner habit): `hil expectations update --target T` writes the current
// failures of a run into the file, keeping the reasons already written and asking for one for each new
// entry; an entry whose test no longer exists is stale and goes, said aloud.

import type { Expectation, RunRecord } from './run-types.ts';

/** The reason a new entry gets until a person writes one (the reporter refuses no entry, a reviewer sees it). */
export const REASON_TO_FILL = 'TODO: say why this target cannot pass this test';

export interface ExpectationUpdate {
  next: Record<string, Expectation>;
  /** New failures written with REASON_TO_FILL. */
  added: string[];
  /** Still failing, reason kept. */
  kept: string[];
  /** Listed but passed in this run: taken out. */
  fixed: string[];
  /** Listed but no such test in the run (a whole run): taken out. */
  stale: string[];
}

const key = (t: { file: string; fullName: string }): string => `${t.file} > ${t.fullName}`;

/**
 * The file's next content from a run. Entries for tests the run did not include are kept as they are
 * unless the run was whole (no file filter, no shard, no name filter): then they are stale.
 */
export function updateExpectations(run: Pick<RunRecord, 'tests'> & { selection?: RunRecord['selection'] }, current: Record<string, Expectation>): ExpectationUpdate {
  const whole = wholeRun(run);
  const byKey = new Map(run.tests.map((t) => [key(t), t]));
  const next: Record<string, Expectation> = {};
  const u: ExpectationUpdate = { next, added: [], kept: [], fixed: [], stale: [] };
  for (const [k, e] of Object.entries(current)) {
    const t = byKey.get(k);
    if (!t) {
      if (whole) u.stale.push(k);
      else next[k] = e;
    } else if (t.state === 'failed' || t.state === 'errored') {
      next[k] = e;
      u.kept.push(k);
    } else if (t.state === 'passed') u.fixed.push(k);
    else next[k] = e; // skipped: says nothing either way
  }
  for (const t of run.tests) {
    const k = key(t);
    if ((t.state === 'failed' || t.state === 'errored') && !(k in next)) {
      next[k] = { expected: 'fail', reason: REASON_TO_FILL };
      u.added.push(k);
    }
  }
  const sorted: Record<string, Expectation> = {};
  for (const k of Object.keys(next).sort()) sorted[k] = next[k]!;
  u.next = sorted;
  return u;
}

/** Expectations that name no test of a whole run (the reporter states them as a verdict note). */
export function staleExpectations(run: Pick<RunRecord, 'tests'> & { selection?: RunRecord['selection'] }, current: Record<string, Expectation>): string[] {
  if (!wholeRun(run)) return [];
  const have = new Set(run.tests.map(key));
  return Object.keys(current).filter((k) => !have.has(k)).sort();
}

function wholeRun(run: { selection?: RunRecord['selection'] }): boolean {
  const s = run.selection;
  return s !== undefined && s.filters.length === 0 && !s.shard && !s.grep;
}
