// The traceability gate: every catalogue item is covered by at least one test or pending with a reason;
// every covered id exists; nothing is both covered and pending (so the pending list only shrinks).

import { catalogue } from './index.ts';
import { pending } from './pending.ts';
import { PROFILE } from './profile.ts';
import type { CatalogueEntry } from './types.ts';

/** The reason of an item with no covering test that is not on the pending list (a gate problem on a whole run). */
export const NOT_PENDING_REASON = '(not pending: gate failure)';

/** One catalogue item's coverage in a run; run.json (harness/report/run-types.ts) carries these. */
export interface CoverageEntry {
  id: string;
  family: string;
  doc: number;
  section: string;
  title: string;
  status: 'covered' | 'pending';
  /** Full names of covering tests (when covered). */
  tests: string[];
  /** Outcome across covering tests in this run: all passed, some failed, all skipped, not run. */
  outcome?: 'passed' | 'failed' | 'informative' | 'skipped' | 'not_run';
  /** Pending reason (when pending). */
  reason?: string;
}

export const TRACEABLE: readonly CatalogueEntry[] = [...catalogue, ...PROFILE];

export interface TestTrace {
  fullName: string;
  covers: readonly string[];
  state?: 'passed' | 'failed' | 'skipped' | 'errored' | 'pending';
  /**
   * A failed profile test on a target other than the reference stack (harness/report/verdict.ts
   * informativeOf): it found a decision of ours answered otherwise, not a documented rule broken.
   */
  informative?: boolean;
}

export interface CoverageResult {
  entries: CoverageEntry[];
  problems: string[];
  unknownCovered: Array<{ id: string; test: string }>;
}

export function computeCoverage(tests: readonly TestTrace[], items: readonly CatalogueEntry[] = TRACEABLE, pend: Readonly<Record<string, string>> = pending): CoverageResult {
  const known = new Map(items.map((e) => [e.id, e]));
  const byId = new Map<string, TestTrace[]>();
  const unknownCovered: CoverageResult['unknownCovered'] = [];
  for (const t of tests) {
    for (const id of t.covers) {
      if (!known.has(id)) unknownCovered.push({ id, test: t.fullName });
      else (byId.get(id) ?? byId.set(id, []).get(id)!).push(t);
    }
  }
  const problems: string[] = [];
  for (const u of unknownCovered) problems.push(`${u.test} covers ${u.id}, which is not in the catalogue`);
  for (const [id, reason] of Object.entries(pend)) {
    if (!known.has(id)) problems.push(`pending.ts lists ${id}, which is not in the catalogue`);
    else if (!reason.trim()) problems.push(`pending.ts lists ${id} without a reason`);
  }
  const entries: CoverageEntry[] = items.map((e) => {
    const ts = byId.get(e.id) ?? [];
    const base = { id: e.id, family: e.family, doc: e.doc, section: e.section, title: e.title };
    if (ts.length) {
      if (pend[e.id] !== undefined) problems.push(`${e.id} is covered now: remove it from harness/catalogue/pending.ts`);
      return { ...base, status: 'covered', tests: ts.map((t) => t.fullName), outcome: outcomeOf(ts) };
    }
    if (pend[e.id] === undefined) problems.push(`${e.id} has no covering test and is not pending`);
    return { ...base, status: 'pending', tests: [], reason: pend[e.id] ?? NOT_PENDING_REASON };
  });
  return { entries, problems, unknownCovered };
}

function outcomeOf(ts: readonly TestTrace[]): CoverageEntry['outcome'] {
  // An informative failure neither verifies an item nor fails it: the item's other tests decide, and when it
  // has none that ran, it is informative (a reader sees its tests differ from our decisions, not a failure).
  if (ts.some((t) => (t.state === 'failed' && !t.informative) || t.state === 'errored')) return 'failed';
  if (ts.some((t) => t.state === 'passed')) return 'passed';
  if (ts.some((t) => t.state === 'failed')) return 'informative';
  if (ts.every((t) => t.state === 'skipped')) return 'skipped';
  return 'not_run';
}

/** Covered and pending counts per family, for `hil coverage`. */
export function familyCounts(entries: readonly CoverageEntry[]): Array<{ family: string; covered: number; pending: number; total: number }> {
  const m = new Map<string, { covered: number; pending: number }>();
  for (const e of entries) {
    const c = m.get(e.family) ?? { covered: 0, pending: 0 };
    c[e.status === 'covered' ? 'covered' : 'pending']++;
    m.set(e.family, c);
  }
  return [...m].map(([family, c]) => ({ family, ...c, total: c.covered + c.pending })).sort((a, b) => a.family.localeCompare(b.family));
}
