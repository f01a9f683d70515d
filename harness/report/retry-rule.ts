// CI's retry rule (README "Continuous integration"): a run that did not pass only because tests ended in
// HIL_ERR_HOST_TOO_SLOW (the harness could not judge them on a loaded host: they say nothing about the
// target) may run those tests once more. Anything else that kept it from passing (a FAIL, another ERROR, a
// silent skip, the gate, a rig's measurement, the soak) rules a retry out, so that nothing but an unjudged
// test is ever run again.

import type { RunRecord, RunTest } from './run-types.ts';
import { measurementsOwner } from './verdict.ts';

export type RetryDecision = { retry: true; tests: RunTest[] } | { retry: false; why: string };

export function hostTooSlowOnly(run: Pick<RunRecord, 'tests' | 'gate' | 'target' | 'run_measurements' | 'soak'>): RetryDecision {
  const counted = run.tests.filter((t) => (t.state === 'failed' || t.state === 'errored') && !t.expected_failure && !t.informative);
  const slow = counted.filter((t) => typeof t.host_too_slow === 'string' && t.file !== '');
  const why: string[] = [];
  if (counted.length > slow.length) why.push(`${counted.length - slow.length} failed or errored otherwise than HIL_ERR_HOST_TOO_SLOW`);
  if (run.tests.some((t) => t.state === 'skipped' && !t.skip_reason?.trim())) why.push('a test skipped without a reason');
  if (run.gate && !run.gate.ok) why.push('the gate failed');
  // Only a measurement the verdict holds against the target rules a retry out: on a rig rehearsal over the
  // fake master the figure is the harness's own host's (a note of the verdict, harness/report/verdict.ts).
  const owner = measurementsOwner(run.target?.name, run.target?.driver);
  if (owner === 'target' && (run.run_measurements?.measurements ?? []).some((m) => m.outcome === 'fail')) why.push("the target's run measurement is outside its limit");
  if ((run.soak?.measurements ?? []).some((m) => m.outcome === 'fail')) why.push('the soak broke a limit');
  if (slow.length === 0 && why.length === 0) why.push('no test ended in HIL_ERR_HOST_TOO_SLOW');
  return why.length ? { retry: false, why: why.join('; ') } : { retry: true, tests: slow };
}
