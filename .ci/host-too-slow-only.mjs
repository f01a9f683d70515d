// CI's retry rule (README "Continuous integration"): exit 0 when the run recorded in the given run.json did
// not pass only because tests ended in HIL_ERR_HOST_TOO_SLOW (the harness could not judge them on CI's
// loaded host: they say nothing about the target), printing those tests; exit 1 when anything else kept it
// from passing (a FAIL, another ERROR, the gate, a measurement, the soak), so that nothing but an
// unjudged test is ever run again.
import { readFileSync } from 'node:fs';

const file = process.argv[2] ?? 'reports/run.json';
let run;
try {
  run = JSON.parse(readFileSync(file, 'utf8'));
} catch (e) {
  console.log(`retry rule: ${file} unreadable (${e.message}): no retry`);
  process.exit(1);
}
const counted = (run.tests ?? []).filter((t) => (t.state === 'failed' || t.state === 'errored') && !t.expected_failure && !t.informative);
const slow = counted.filter((t) => typeof t.host_too_slow === 'string' && t.file);
const other = counted.length - slow.length;
const silentSkips = (run.tests ?? []).filter((t) => t.state === 'skipped' && !String(t.skip_reason ?? '').trim()).length;
const targetMeasurement = run.target?.name === 'rig' && (run.run_measurements?.measurements ?? []).some((m) => m.outcome === 'fail');
const soak = (run.soak?.measurements ?? []).some((m) => m.outcome === 'fail');
if (slow.length === 0 || other > 0 || silentSkips > 0 || run.gate?.ok === false || targetMeasurement || soak) {
  console.log(`retry rule: ${other} failed or errored otherwise than HIL_ERR_HOST_TOO_SLOW${run.gate?.ok === false ? ', the gate failed' : ''}: no retry`);
  process.exit(1);
}
console.log(`retry rule: only HIL_ERR_HOST_TOO_SLOW kept ${file} from passing; these ${slow.length} run once more:`);
for (const t of slow) console.log(`  ${t.file} > ${t.fullName}`);
