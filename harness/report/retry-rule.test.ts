import { describe, expect, it } from 'vitest';
import { hostTooSlowOnly } from './retry-rule.ts';
import type { RunRecord, RunTest } from './run-types.ts';

const t = (state: RunTest['state'], extra: Partial<RunTest> = {}): RunTest => ({ file: 'suites/a.test.ts', project: 'conformance', name: 'n', fullName: `x > ${state} ${JSON.stringify(extra)}`, state, duration_ms: 1, covers: [], kind: 'contract', ...extra }) as RunTest;
const run = (tests: RunTest[], extra: Partial<RunRecord> = {}) => ({ tests, gate: { ok: true, problems: [] }, ...extra }) as unknown as RunRecord;
const SLOW = { host_too_slow: 'the harness was late' };

describe('CI retries only what the harness could not judge (hostTooSlowOnly)', () => {
  it('a run whose only non-PASS outcomes are HIL_ERR_HOST_TOO_SLOW: those tests', () => {
    const d = hostTooSlowOnly(run([t('passed'), t('errored', SLOW), t('failed', SLOW), t('skipped', { skip_reason: 'why' })]));
    expect(d.retry && d.tests.map((x) => x.state)).toEqual(['errored', 'failed']);
  });
  it('a FAIL, another ERROR or a silent skip beside them rules the retry out', () => {
    expect(hostTooSlowOnly(run([t('errored', SLOW), t('failed')])).retry).toBe(false);
    expect(hostTooSlowOnly(run([t('errored', SLOW), t('errored')])).retry).toBe(false);
    expect(hostTooSlowOnly(run([t('errored', SLOW), t('skipped')])).retry).toBe(false);
  });
  it('expected failures and informative profile tests do not count either way', () => {
    expect(hostTooSlowOnly(run([t('errored', SLOW), t('failed', { expected_failure: 'known' }), t('failed', { informative: 'profile' })])).retry).toBe(true);
    expect(hostTooSlowOnly(run([t('failed', { expected_failure: 'known' })])).retry).toBe(false);
  });
  it("a failed gate, a rig's measurement outside its limit or a soak that broke one rules it out; a host figure of a rehearsal over the fake master does not", () => {
    expect(hostTooSlowOnly(run([t('errored', SLOW)], { gate: { ok: false, problems: ['x'] } } as Partial<RunRecord>)).retry).toBe(false);
    const outside = { measurements: [{ name: 'm', unit: 'us', value: 1, outcome: 'fail' }] };
    expect(hostTooSlowOnly(run([t('errored', SLOW)], { target: { name: 'rig' }, run_measurements: outside } as unknown as Partial<RunRecord>)).retry).toBe(false);
    expect(hostTooSlowOnly(run([t('errored', SLOW)], { target: { name: 'rig', driver: 'ethercat' }, run_measurements: outside } as unknown as Partial<RunRecord>)).retry).toBe(false);
    expect(hostTooSlowOnly(run([t('errored', SLOW)], { target: { name: 'rig', driver: 'ethercat-fake' }, run_measurements: outside } as unknown as Partial<RunRecord>)).retry).toBe(true);
    expect(hostTooSlowOnly(run([t('errored', SLOW)], { target: { name: 'sim' }, run_measurements: outside } as unknown as Partial<RunRecord>)).retry).toBe(true);
    expect(hostTooSlowOnly(run([t('errored', SLOW)], { soak: { seconds: 60, ...outside } } as unknown as Partial<RunRecord>)).retry).toBe(false);
  });
  it('nothing to retry when nothing ended in HIL_ERR_HOST_TOO_SLOW', () => {
    expect(hostTooSlowOnly(run([t('passed')])).retry).toBe(false);
  });
});
