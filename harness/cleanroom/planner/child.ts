// One admitted plan in a fresh process of its own (document 2 part 1): the parent sends the container and
// the options, this process plans, reports each stage, writes the dense file under a temporary name in the
// store and says so; the parent renames it into place only if the client is still connected.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { plan, toJson, type Options } from './plan.ts';
import { PlanRefused } from './program.ts';

interface Job {
  bytes: Uint8Array;
  options: Options;
  storeDir: string;
}

process.once('message', (job: Job) => {
  void (async () => {
    try {
      const out = await plan(job.bytes, job.options, (stage) => new Promise<void>((r) => process.send!({ stage }, () => r())));
      let tmp: string | undefined;
      if (out.blob) {
        tmp = join(job.storeDir, `.tmp-${process.pid}.rdt`);
        writeFileSync(tmp, out.blob, { flush: true });
      }
      process.send!({ done: toJson(out.result), tmp, digest: (out.result.dense as { trajectory_digest?: string } | undefined)?.trajectory_digest }, () => process.exit(0));
    } catch (e) {
      const error = e instanceof PlanRefused ? e.message : `PlanningFailed: ${String((e as Error)?.message ?? e).split('\n')[0]}`;
      process.send!({ refused: error }, () => process.exit(0));
    }
  })();
});
