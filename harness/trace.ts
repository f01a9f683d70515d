// Traceability: tests declare the catalogue ids they cover; the gate compares them with the catalogue.
//
//   test('renew keeps lease_ms', covers('transition:grant:owned->owned:renew'), async ({ target }) => { ... })
//
// The ids travel as vitest task meta, so they are known at collection time (hil coverage needs no run)
// and reach the reporters (run.json, Allure labels).

import type { TestOptions } from 'vitest';
import { HarnessError, isAssertionError } from './errors.ts';

declare module '@vitest/runner' {
  interface TaskMeta {
    covers?: string[];
    kind?: 'contract' | 'profile';
    /** Profile checks inside the test that the target answered otherwise (non-reference targets only). */
    profileDifferences?: ProfileDifference[];
    /**
     * Replay target: the replay could not hold a recorded order in this test (HIL_ERR_REPLAY_UNHELD, the
     * message): whatever else the test reported, it ends in ERROR (harness/report/verdict.ts testStateOf).
     */
    replayUnheld?: string;
  }
}

/**
 * Options for a contract test: it asserts documented behaviour. A test whose ids are all profile items
 * (`profile:...`) is a profile test whichever helper declared it. Citing a `profile:` id beside contract
 * ids only traces the test to that decision: it does not make any assertion informative. Every check of a
 * docs/profile.md decision inside a contract test goes through inProfile, which decides at the assertion
 * (strict on the reference stack, an informative difference on another target); a plain expect of a
 * profile detail would fail someone else's implementation for a rule no document gives.
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

/** A profile decision (docs/profile.md) that a target other than the reference stack answers differently. */
export interface ProfileDifference {
  /** The `profile:` catalogue id of the decision. */
  profile: string;
  /** What the check found (the assertion's message). */
  message: string;
}

/**
 * The reference stack (sim, replay, rig: this repository's stack) must answer as docs/profile.md decides;
 * any other target (external: someone else's service) may answer a "not shown" detail its own way.
 */
export function isReferenceTarget(name: string = process.env.HIL_TARGET ?? 'sim'): boolean {
  return name !== 'external';
}

let differences: ProfileDifference[] = [];

/**
 * A check of a profile decision inside a test of documented behaviour (the documented part asserted before
 * it, outside): on the reference stack an assertion like any other; on another target an assertion of the
 * check that does not hold is noted as an informative difference (run.json, the report) and the test goes
 * on. DESIGN.md rule 3: against an external target contract tests are mandatory and profile tests
 * informative. Only the check's assertions inform: a harness error (HarnessError of the error class, a
 * harness-side timeout, a bug of the suite) ends the test as it would anywhere, and a dropped or reset
 * connection is the test's ERROR HIL_ERR_PROFILE_CHECK, or its FAIL when `owed` says the documents owe the
 * answer the check asked for.
 */
export async function inProfile(id: string, check: () => unknown, o: { owed?: boolean } = {}): Promise<void> {
  if (!id.startsWith('profile:')) throw new HarnessError('HIL_ERR_TRACE', `inProfile needs a profile: catalogue id, not ${id}`);
  if (isReferenceTarget()) {
    await check();
    return;
  }
  try {
    await check();
  } catch (e) {
    if (isAssertionError(e)) {
      differences.push({ profile: id, message: String((e as Error)?.message ?? e).split('\n')[0]!.slice(0, 500) });
      return;
    }
    if (!o.owed && e instanceof HarnessError && e.code === 'HIL_ERR_TRANSPORT') {
      throw new HarnessError('HIL_ERR_PROFILE_CHECK', `${id}: the profile check could not complete: ${e.message}`, { cause: e, detail: { ...e.detail } });
    }
    throw e;
  }
}

/** The differences noted since the last call (the test fixture moves them into the test's meta). */
export function takeProfileDifferences(): ProfileDifference[] {
  const d = differences;
  differences = [];
  return d;
}
