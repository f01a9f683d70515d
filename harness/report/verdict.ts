// The one verdict of a run, used by the reporter's summary, the `hil` exit status and the HTML report,
// so that the three can never disagree (OpenHTF: FAIL means the system under test broke a rule, ERROR
// means the harness or the environment broke and the run says nothing about the device).
//
//   FAIL   at least one test failed that the target's expectation file does not list
//   ERROR  no unexpected failure, but the run is not a verdict on the device: a test errored, a test
//          skipped without a stated reason (DESIGN.md rule 4: never silently), the traceability gate
//          failed, or nothing ran or passed
//   PASS   otherwise; expected failures (fixtures/expectations/<target>.json) and unexpected passes are
//          stated as notes, not verdicts
//
// A PASS is a statement about what was verified, so the verdict carries coverage: the documented
// catalogue items (profile decisions apart) that a passing test covered in this run, out of all of them.

import { verdictOfError, type ErrorLike } from '../errors.ts';
import { isReferenceTarget } from '../trace.ts';
import type { CoverageEntry, RunRecord, RunTest, TestState } from './run-types.ts';
import { measurementText } from '../measure.ts';

export type Verdict = 'PASS' | 'FAIL' | 'ERROR';

export interface VerdictCounts {
  total: number;
  passed: number;
  /** Failed and errored tests the expectation file does not list. */
  failed: number;
  errored: number;
  skipped: number;
  /** Skipped tests that stated no reason (an ERROR). */
  silentSkips: number;
  expectedFailures: number;
  unexpectedPasses: number;
  /** Profile tests another target answers differently (informative on a non-reference target). */
  informative: number;
  /** Profile checks inside tests (inProfile) another target answers differently. */
  profileDifferences: number;
}

export interface CoverageStatement {
  /** Documented catalogue items (family other than profile). */
  documented: number;
  /** Documented items covered by at least one test that passed in this run. */
  verified: number;
  /** Documented items whose covering tests include a failure in this run. */
  failing: number;
  /** Documented items whose only tests that ran are profile tests answered otherwise on another target (informative). */
  differing: number;
  /** Documented items with covering tests that all skipped or did not run. */
  unverified: number;
  /** Documented items no test covers yet (harness/catalogue/pending.ts). */
  pending: number;
  /** Our own decisions (docs/profile.md) covered by a passing test, of all of them. */
  profileVerified: number;
  profileTotal: number;
  /** Every documented item verified by a passing test. */
  complete: boolean;
}

export interface RunVerdict {
  verdict: Verdict;
  /** The `hil run` / `hil test` exit status: 0 exactly when the verdict is PASS. */
  exitCode: 0 | 1;
  /** Why the verdict is not PASS, most important first (empty for PASS). */
  reasons: string[];
  /** What a reviewer must know even on PASS (expected failures, unexpected passes). */
  notes: string[];
  counts: VerdictCounts;
  coverage: CoverageStatement;
  /** "PASS — 614 of 1391 documented items covered": the first thing the CLI and the report show. */
  headline: string;
  /** "complete" or "partial — 777 documented items pending, ..." */
  completeness: string;
}

export type VerdictInput = Pick<RunRecord, 'tests' | 'gate'> & {
  coverage?: readonly CoverageEntry[];
  run_measurements?: RunRecord['run_measurements'];
  stale_expectations?: readonly string[];
  /** Whose the run measurements are (measurementsOwner). */
  target?: Pick<RunRecord['target'], 'name'> & { driver?: string };
  soak?: RunRecord['soak'];
};

/**
 * Whose figures the run's own measurements (cycle lateness, round trips: harness/report/run-measurements.ts)
 * are: on the sim and replay targets the reference stack's core runs on the harness's own host beside the
 * run, so they are the host's figures and never move the verdict; on a rig they are the target's, and a
 * configured limit crossed is a reason of the verdict; on an external target they are the target's but its
 * host is not ours to judge from here, so they inform.
 */
export function measurementsOwner(target: string | undefined, driver?: string): 'host' | 'target' | 'informative' {
  // A rig rehearsal over the fake master (HIL_RIG_DRIVER=ethercat-fake) runs the reference core on the
  // harness's own host, as the sim target does: its figures are the host's there too.
  if (target === 'rig') return driver === 'ethercat-fake' ? 'host' : 'target';
  if (target === 'external') return 'informative';
  return 'host';
}

export function verdictOf(run: VerdictInput): RunVerdict {
  const counts = countTests(run.tests);
  const coverage = coverageOf(run.coverage ?? []);
  const reasons: string[] = [];
  const n = (k: number, one: string, many = `${one}s`) => `${k} ${k === 1 ? one : many}`;

  if (counts.failed) reasons.push(`${n(counts.failed, 'test')} failed: the target did not do what the documents say`);
  if (counts.errored) reasons.push(`${n(counts.errored, 'test')} errored: the harness or the environment broke, so these results say nothing about the target`);
  if (counts.silentSkips) reasons.push(`${n(counts.silentSkips, 'test')} skipped without a stated reason`);
  if (!run.gate.ok) reasons.push(`traceability gate failed (${n(run.gate.problems.length, 'problem')}): the suite cannot state what it covers`);
  if (counts.total === 0) reasons.push('no test was recorded');
  else if (counts.passed === 0) reasons.push('no test passed');
  const owner = measurementsOwner(run.target?.name, run.target?.driver);
  const runOutside = (run.run_measurements?.measurements ?? []).filter((m) => m.outcome === 'fail');
  const targetOutside = owner === 'target' ? runOutside : [];
  for (const m of targetOutside) reasons.push(`the target's run measurement outside its limit: ${measurementText(m)}`);
  // The nightly soak (harness/soak.ts) is part of the run: a limit it broke is the target's, unless the
  // refusal that broke it was provably the host's doing (then the run says nothing: ERROR).
  const soak = run.soak;
  const soakOutside = (soak?.measurements ?? []).filter((m) => m.outcome === 'fail');
  const refusal = soak?.first_refusal ? `; first refusal ${soak.first_refusal.at_s} s into the soak: ${soak.first_refusal.status} ${soak.first_refusal.error}` : '';
  const soakFailed = soakOutside.length > 0 && !soak?.host_too_slow;
  if (soakOutside.length) {
    const what = soakOutside.map((m) => measurementText(m)).join('; ');
    if (soak?.host_too_slow) reasons.push(`the soak (${soak.seconds} s) broke a limit but the harness was too slow to blame the target (HIL_ERR_HOST_TOO_SLOW: ${soak.host_too_slow}): ${what}${refusal}`);
    else reasons.unshift(`the soak (${soak!.seconds} s) broke a limit: ${what}${refusal}`);
  }

  const verdict: Verdict = counts.failed || targetOutside.length || soakFailed ? 'FAIL' : reasons.length ? 'ERROR' : 'PASS';
  const notes: string[] = [];
  if (counts.expectedFailures) notes.push(`${n(counts.expectedFailures, 'expected failure')} listed in the target's expectation file (not counted against the verdict)`);
  if (counts.informative || counts.profileDifferences) {
    notes.push(`${n(counts.informative + counts.profileDifferences, 'profile difference')} (${counts.informative} profile ${counts.informative === 1 ? 'test' : 'tests'} failed, ${counts.profileDifferences} profile ${counts.profileDifferences === 1 ? 'check' : 'checks'} inside contract tests): the target answers a detail the documents leave open otherwise than docs/profile.md decides; informative, not counted against the verdict`);
  }
  // The run's own measurements (harness/report/run-measurements.ts) say whose they are; the tests' measurements decide.
  if (owner === 'host') for (const m of runOutside) notes.push(`host figure outside its limit (the reference stack's core on the harness's own host, not a verdict on the target): ${measurementText(m)}`);
  else if (owner === 'informative') for (const m of runOutside) notes.push(`the target's run measurement outside its limit (informative: its host is not the harness's to judge): ${measurementText(m)}`);
  const slow = run.tests.filter((t) => t.host_too_slow).length;
  if (slow) notes.push(`${n(slow, 'test')} ended in HIL_ERR_HOST_TOO_SLOW: the harness was late past what the rule allows (figures with each test)`);
  if (run.stale_expectations?.length) notes.push(`${n(run.stale_expectations.length, 'expectation')} in the target's expectation file name${run.stale_expectations.length === 1 ? 's' : ''} no test of this run (stale): hil expectations update`);
  if (counts.unexpectedPasses) notes.push(`${n(counts.unexpectedPasses, 'unexpected pass', 'unexpected passes')}: the expectation file lists them as failing; update it`);

  const headline = `${verdict} — ${coverage.verified} of ${coverage.documented} documented items covered`;
  const gaps: string[] = [];
  if (coverage.pending) gaps.push(`${coverage.pending} with no test in this run`);
  if (coverage.failing) gaps.push(`${coverage.failing} with a failing test`);
  if (coverage.differing) gaps.push(`${coverage.differing} whose only tests that ran answered a profile decision otherwise (informative)`);
  if (coverage.unverified) gaps.push(`${coverage.unverified} whose tests skipped or did not run`);
  const completeness = coverage.complete ? 'complete: every documented item is covered by a passing test' : `partial: of the documented items, ${gaps.join(', ')}`;
  return { verdict, exitCode: verdict === 'PASS' ? 0 : 1, reasons, notes, counts, coverage, headline, completeness };
}

export function countTests(tests: readonly RunTest[]): VerdictCounts {
  const c: VerdictCounts = { total: 0, passed: 0, failed: 0, errored: 0, skipped: 0, silentSkips: 0, expectedFailures: 0, unexpectedPasses: 0, informative: 0, profileDifferences: 0 };
  for (const t of tests) {
    c.total++;
    if (t.state === 'passed') c.passed++;
    else if (t.state === 'skipped') {
      c.skipped++;
      if (!t.skip_reason?.trim()) c.silentSkips++;
    } else if (t.expected_failure) c.expectedFailures++;
    else if (t.informative) c.informative++;
    else if (t.state === 'failed') c.failed++;
    else c.errored++;
    if (t.unexpected_pass) c.unexpectedPasses++;
    c.profileDifferences += t.profile_differences?.length ?? 0;
  }
  return c;
}

export function coverageOf(entries: readonly CoverageEntry[]): CoverageStatement {
  const s: CoverageStatement = { documented: 0, verified: 0, failing: 0, differing: 0, unverified: 0, pending: 0, profileVerified: 0, profileTotal: 0, complete: false };
  for (const e of entries) {
    if (e.family === 'profile') {
      s.profileTotal++;
      if (e.status === 'covered' && e.outcome === 'passed') s.profileVerified++;
      continue;
    }
    s.documented++;
    if (e.status !== 'covered') s.pending++;
    else if (e.outcome === 'passed') s.verified++;
    else if (e.outcome === 'failed') s.failing++;
    else if (e.outcome === 'informative') s.differing++;
    else s.unverified++;
  }
  s.complete = s.documented > 0 && s.verified === s.documented;
  return s;
}

/**
 * The state of a finished test from vitest's state and the errors that ended it: a failed test is
 * `errored` when every error is the harness's or the environment's (harness/errors.ts), `failed` as soon
 * as one says the target broke a rule.
 */
/**
 * Against a target other than the reference stack a failed profile test (our decision where the documents
 * say "not shown") is an informative difference, not a failure (DESIGN.md rule 3); an errored one stays an
 * error (the harness broke). Returns what the report says of it, or undefined.
 */
export function informativeOf(t: Pick<RunTest, 'kind' | 'state' | 'covers' | 'errors'>, targetName: string): string | undefined {
  if (t.kind !== 'profile' || t.state !== 'failed' || isReferenceTarget(targetName)) return undefined;
  const decisions = t.covers.filter((c) => c.startsWith('profile:'));
  return `differs from ${decisions.join(', ') || 'a profile decision'}: ${t.errors?.[0]?.split('\n')[0] ?? 'failed'}`;
}

export function testStateOf(state: 'passed' | 'failed' | 'skipped' | 'pending', errors: readonly (ErrorLike | unknown)[], o: { replayUnheld?: string; hostTooSlow?: string; equipmentLoss?: string } = {}): TestState {
  if (state === 'passed') return 'passed';
  if (state !== 'failed') return 'skipped';
  // A replay that could not hold the recorded order (HIL_ERR_REPLAY_UNHELD): an assertion that failed
  // after that point says nothing about the target.
  if (o.replayUnheld) return 'errored';
  // The harness lost a grant to its own lateness (harness/clients/keeper.ts, HIL_ERR_HOST_TOO_SLOW): what
  // failed after that says nothing about the target either.
  if (o.hostTooSlow) return 'errored';
  // The harness's own equipment failed under the test (a rig's bench box opened its chain on its own).
  if (o.equipmentLoss) return 'errored';
  return errors.length > 0 && errors.every((e) => verdictOfError(e) === 'error') ? 'errored' : 'failed';
}

/**
 * The plain closing line of a run, counting what the verdict counts, each test once: failed (the target),
 * errored (the harness or the environment, a skip without a stated reason included), skipped with a reason.
 * "0 failed, 0 errored" exactly when the exit status is 0.
 */
export function closingLine(v: RunVerdict): string {
  const c = v.counts;
  let failed = c.failed;
  let errored = c.errored + c.silentSkips;
  // A verdict that no test's outcome explains (the gate, nothing ran, the soak, a rig's measurement) is still one.
  if (v.verdict === 'FAIL' && failed === 0) failed = 1;
  if (v.verdict === 'ERROR' && failed + errored === 0) errored = 1;
  return `total: ${c.passed} passed, ${failed} failed, ${errored} errored, ${c.skipped - c.silentSkips} skipped`;
}
