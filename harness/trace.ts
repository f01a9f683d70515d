// Traceability: tests declare the catalogue ids they cover; the gate compares them with the catalogue.
//
//   test('renew keeps lease_ms', covers('transition:grant:owned->owned:renew'), async ({ target }) => { ... })
//
// The ids travel as vitest task meta, so they are known at collection time (hil coverage needs no run)
// and reach the reporters (run.json, Allure labels).

import type { TestOptions } from 'vitest';
import { HarnessError } from './errors.ts';

declare module '@vitest/runner' {
  interface TaskMeta {
    covers?: string[];
    kind?: 'contract' | 'profile';
  }
}

/**
 * Options for a contract test: it asserts documented behaviour. A test whose ids are all profile items
 * (`profile:...`) is a profile test whichever helper declared it.
 */
export function covers(...ids: string[]): TestOptions {
  if (ids.length === 0) throw new HarnessError('HIL_ERR_TRACE', 'covers() needs at least one catalogue id');
  return { meta: { covers: ids, kind: ids.every((i) => i.startsWith('profile:')) ? 'profile' : 'contract' } };
}

/**
 * Options for a profile test: it asserts a decision of ours where the documents say "not shown"
 * (docs/profile.md). Against an external target these are informative.
 */
export function profile(...ids: string[]): TestOptions {
  if (ids.length === 0) throw new HarnessError('HIL_ERR_TRACE', 'profile() needs at least one catalogue id');
  return { meta: { covers: ids, kind: 'profile' } };
}
