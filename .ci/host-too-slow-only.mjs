// Exit 0 when the run recorded in the given run.json (default reports/run.json) did not pass only because
// tests ended in HIL_ERR_HOST_TOO_SLOW, printing them; else exit 1 with why (harness/report/retry-rule.ts).
import { readFileSync } from 'node:fs';
import { register } from 'tsx/esm/api';

register();
const { hostTooSlowOnly } = await import('../harness/report/retry-rule.ts');
const file = process.argv[2] ?? 'reports/run.json';
let run;
try {
  run = JSON.parse(readFileSync(file, 'utf8'));
} catch (e) {
  console.log(`retry rule: ${file} unreadable (${e.message}): no retry`);
  process.exit(1);
}
const d = hostTooSlowOnly(run);
if (!d.retry) {
  console.log(`retry rule: ${d.why}: no retry`);
  // What kept it from passing, at the end of the row's output: CI's log is often read from its tail only.
  for (const t of run.tests ?? []) {
    if ((t.state !== 'failed' && t.state !== 'errored') || t.expected_failure || t.informative) continue;
    console.log(`  ${t.state === 'failed' ? 'FAIL' : 'ERROR'} ${t.file} > ${t.fullName}`);
    const text = (t.errors ?? []).join('\n').split('\n').filter((l) => l.trim() !== '').slice(0, 12);
    for (const l of text) console.log(`    ${l.length > 400 ? `${l.slice(0, 400)}...` : l}`);
  }
  process.exit(1);
}
console.log(`retry rule: only HIL_ERR_HOST_TOO_SLOW kept ${file} from passing; these ${d.tests.length} run once more:`);
for (const t of d.tests) console.log(`  ${t.file} > ${t.fullName}`);
