// Exit 0 when the run recorded in the given run.json (default reports/run.json) did not pass only because
// tests ended in HIL_ERR_HOST_TOO_SLOW, printing them; else exit 1 with why (harness/report/retry-rule.ts).
import { readFileSync } from 'node:fs';
import { register } from 'tsx/esm/api';
import { printFailed } from './failed-tests.mjs';

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
  printFailed(run);
  process.exit(1);
}
console.log(`retry rule: only HIL_ERR_HOST_TOO_SLOW kept ${file} from passing; these ${d.tests.length} run once more:`);
for (const t of d.tests) console.log(`  ${t.file} > ${t.fullName}`);
