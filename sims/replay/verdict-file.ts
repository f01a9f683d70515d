// Writing a paced replay's verdict file (`hil serve --replay-paced FILE`, docs/recording.md "The replay
// target"). The shape is the one the harness reads, fixtures/contract/replay-verdict.schema.json, checked
// here before the file is written: a verdict that does not match is written as a refusal naming the
// problems (the harness reports it as HIL_ERR_REPLAY_VERDICT_INVALID with them), and said once on stderr.

import { writeFileSync } from 'node:fs';
import { verdictFileText, VERDICT_SCHEMA, type ReplayVerdict } from '../../fixtures/contract/replay-verdict.ts';

let told = false;

/** Write the verdict where the target reads it. Never throws: the verdict is a report, the core runs on. */
export function writeVerdictFile(path: string, verdict: ReplayVerdict): void {
  const { text, problems } = verdictFileText(verdict);
  if (problems.length && !told) {
    told = true;
    process.stderr.write(`replay: the verdict does not match ${VERDICT_SCHEMA}, written as a refusal: ${problems.join('; ')}\n`);
  }
  try {
    writeFileSync(path, text);
  } catch {
    /* a read-only directory must not crash the core: the harness then reports no verdict */
  }
}
