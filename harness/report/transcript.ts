// A failed test's transcript as a reader wants it: the requests just before the failure in full, the ones
// before them folded away, and a run of the same request answered the same way (a status poll waiting for
// a state) shown as one line with how many times and over which milliseconds.

import type { TranscriptEntry } from '../evidence.ts';

/** One line of the condensed transcript: a single exchange, or a run of `count` alike ones (the last shown). */
export interface TranscriptRow {
  x: TranscriptEntry;
  count: number;
  /** ms since the test began of the first exchange of the run. */
  from_ms: number;
}

/** How many rows before the failure (the transcript's end) stay in view. */
export const AROUND_FAILURE = 10;

/** The same request: method, path without its query (a poll moves its `after=`), body, and the same status. */
function alike(a: TranscriptEntry, b: TranscriptEntry): boolean {
  const route = (x: TranscriptEntry) => x.path.split('?')[0];
  return a.method === b.method && route(a) === route(b) && a.request === b.request && a.status === b.status && a.error === b.error;
}

export function condense(exchanges: readonly TranscriptEntry[]): TranscriptRow[] {
  const rows: TranscriptRow[] = [];
  for (const x of exchanges) {
    const last = rows.at(-1);
    if (last && alike(last.x, x)) {
      last.count++;
      last.x = x;
    } else rows.push({ x, count: 1, from_ms: x.at_ms });
  }
  return rows;
}

/** The rows before the failure shown in full, and the earlier ones (folded). */
export function aroundFailure(rows: readonly TranscriptRow[], keep = AROUND_FAILURE): { earlier: TranscriptRow[]; recent: TranscriptRow[] } {
  const at = Math.max(0, rows.length - keep);
  return { earlier: rows.slice(0, at), recent: rows.slice(at) };
}
