// The planning process (document 2 part 1: "each admitted request runs in a fresh process"). Started by
// the service in its own process group with an IPC channel; receives one job, reports stages, writes the
// dense file (if any) to the temporary path it was given and answers with the result text. It never
// touches the store's final names: the service renames the file only when the client is still there.
//
// Prebuilt (harness/targets/reference.ts), the process starts from a V8 startup snapshot of this bundle:
// Node's modules and this file's are loaded and initialised when the snapshot is built, once per run,
// and each planning process only deserialises them (about a quarter of what a planning process costs,
// bench/README.md). So nothing here may read the process's own state (environment, arguments, time) while
// it loads: only `main` does, and in a snapshot it is what runs when the process starts.

import { startupSnapshot } from 'node:v8';
import { existsSync, writeFileSync, fsyncSync, openSync, closeSync } from 'node:fs';
import { encodeJson } from '../json.ts';
import type { PlanOptions } from './options.ts';
import { plan, releasePath, stubHooks, type StubHooks } from './plan.ts';
import { PlanningFailure, readWeldplan } from './weldplan.ts';

export interface Job {
  bytes: Uint8Array;
  options: PlanOptions;
  tmpPath: string;
}

export type ChildMessage =
  | { kind: 'stage'; stage: string }
  | { kind: 'done'; resultText: string; dense: { digest: string; bytes: number } | null; denseError: boolean; requestSha256: string }
  | { kind: 'failed'; text: string };

const send = (m: ChildMessage) => new Promise<void>((r) => process.send!(m, () => r()));

let planning = false;
let answered = false;

function main(): void {
  // A parent that goes away takes its planning processes with it: the spare waiting on this channel, and
  // one that is planning (nobody is left to read its answer or to end it at its time limit), with its
  // process group (the helpers a plan started; this process leads the group, document 2 part 1).
  process.once('disconnect', () => {
    if (answered) return;
    if (planning) {
      try {
        process.kill(-process.pid, 'SIGKILL');
      } catch {
        // not a group leader (started otherwise): this process alone
      }
    }
    process.exit(0);
  });

  process.once('message', (job: Job) => {
    planning = true;
    void run(job).then(
      () => {
        answered = true;
        process.disconnect();
      },
      (e: unknown) => {
        process.stderr.write(`planner child: ${(e as Error).stack ?? String(e)}\n`);
        process.exit(70);
      },
    );
  });
}

if (startupSnapshot.isBuildingSnapshot()) startupSnapshot.setDeserializeMainFunction(main);
else main();

/** The stage delay hook: stageDelayMs, or less when the stage's release file appears first (polled every 10 ms). */
async function stageWait(hooks: StubHooks): Promise<void> {
  const end = performance.now() + hooks.stageDelayMs;
  const release = hooks.stageRelease === undefined ? undefined : releasePath(hooks.stageRelease);
  for (;;) {
    if (release !== undefined && existsSync(release)) return;
    const left = end - performance.now();
    if (left <= 0) return;
    await new Promise((r) => setTimeout(r, release === undefined ? left : Math.min(10, left)));
  }
}

async function run(job: Job): Promise<void> {
  let w;
  try {
    w = readWeldplan(job.bytes);
  } catch (e) {
    if (e instanceof PlanningFailure) return send({ kind: 'failed', text: e.text });
    throw e;
  }
  const hooks = stubHooks(w);
  if (hooks.ignoreSigterm) process.on('SIGTERM', () => undefined);
  if (hooks.helperProcess) {
    // A helper in the same process group (a stand-in for a GPU worker): only a group signal ends it.
    // node:child_process is loaded only here (Node does not vouch for it in a startup snapshot), and through
    // getBuiltinModule where there is one: a process started from a snapshot has no dynamic import.
    const { spawn } = process.getBuiltinModule?.('node:child_process') ?? (await import('node:child_process'));
    const h = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)'], { stdio: 'ignore' });
    h.unref();
  }
  try {
    const out = await plan(w, job.options, async (stage) => {
      await send({ kind: 'stage', stage });
      if (hooks.stageDelayMs > 0) await stageWait(hooks);
    });
    if (out.dense) {
      const fd = openSync(job.tmpPath, 'w', 0o644);
      try {
        writeFileSync(fd, out.dense.bytes);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
    await send({
      kind: 'done', resultText: encodeJson(out.result), dense: out.dense ? { digest: out.dense.digest, bytes: out.dense.bytes.length } : null,
      denseError: out.denseError !== undefined, requestSha256: out.requestSha256,
    });
  } catch (e) {
    if (e instanceof PlanningFailure) return send({ kind: 'failed', text: e.text });
    throw e;
  }
}
