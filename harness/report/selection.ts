// What a filtered run selected, and which catalogue items it left out. The traceability gate applies to whole
// runs (harness/catalogue/gate.ts): on a run of some files, a shard or a name pattern, a documented item
// with no test in the run is "not in this selection", not pending and not a gate failure. The terminal
// summary (reporter.ts) and the HTML report (html.ts) say so alike.

import { NOT_PENDING_REASON } from '../catalogue/gate.ts';
import type { CoverageEntry, RunRecord } from './run-types.ts';

/** What a filtered run selected (file filters, a shard, a name pattern), or undefined for a whole run. */
export function selectionText(run: Pick<RunRecord, 'selection'>): string | undefined {
  const s = run.selection;
  if (!s) return undefined;
  const parts = [...(s.filters.length ? [`files matching ${s.filters.map((f) => `“${f}”`).join(', ')}`] : []), ...(s.shard ? [`shard ${s.shard}`] : []), ...(s.grep ? ['tests named by a pattern'] : [])];
  return parts.length ? parts.join(', ') : undefined;
}

/** An item a filtered run has no test for and that is not on the pending list: the gate did not judge it. */
export function notSelected(run: Pick<RunRecord, 'selection'>, c: CoverageEntry): boolean {
  return c.status === 'pending' && c.reason === NOT_PENDING_REASON && selectionText(run) !== undefined;
}
