// The two stacks of the differential mode against a replay (`hil fuzz --differential sim,replay`,
// harness/model/differential.ts differentialReplay): a sim stack on the model's variant (stepped clock, short
// Home) that records its core session, and a stack on the replay driver that plays that recording back while
// the same sequence is sent live. Both are `hil serve` processes started with documented flags
// (docs/recording.md "Making one", "The replay target"); the recording and the verdict file are the only
// things read, in a temporary directory of the run's own (removed afterwards).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimTarget, startStack, variantStart } from '../targets/sim.ts';
import { HarnessError } from '../errors.ts';
import type { ReplayVerdict } from '../targets/pertest.ts';
import { readVerdict } from '../targets/recorder.ts';
import type { Target } from '../targets/types.ts';
import { MODEL_VARIANT } from './commands.ts';

export interface ReplayStacks {
  /** The recording sim stack (its session is recorded until it stops). */
  record(): Promise<Target>;
  /** A stack replaying the closed recording; its verdict is readable once the target is closed. */
  replay(): Promise<{ target: Target; verdict: () => ReplayVerdict | null }>;
  /** The verdict in one line: what matched, and the first divergence if any. */
  verdictText(v: unknown): string;
  /** The replay diverged from the recording, or left recorded requests unsent. */
  diverged(v: unknown): boolean;
  /** Remove the temporary directory (recording and verdict). */
  remove(): Promise<void>;
}

export async function replayStacks(o: { machine?: string; run: string }): Promise<ReplayStacks> {
  const dir = mkdtempSync(join(tmpdir(), 'hil-fuzz-replay-'));
  const recording = join(dir, 'sequence.hilrec');
  const verdictFile = join(dir, 'verdict.json');
  const base = ['--test-channel', ...(o.machine ? ['--machine', o.machine] : [])];
  return {
    async record() {
      const start = { args: [...base, ...variantStart(MODEL_VARIANT).args, '--record', recording, '--record-run', o.run] };
      return new SimTarget(await startStack(start), start);
    },
    async replay() {
      // The sim driver's own flags (--sim-homing-ms) and --clock are not given: their effects are in the
      // recorded inputs, and the replay runs on the recorded clock, following the live side's steps.
      const start = { args: [...base, '--driver', 'replay', '--replay-file', recording, '--replay-mode', 'strict', '--replay-paced', verdictFile, '--replay-speed', '1'] };
      const target = new SimTarget(await startStack(start), start);
      return {
        target,
        verdict: () => {
          // Checked against the schema the stack wrote it by (fixtures/contract/replay-verdict.schema.json).
          const r = readVerdict(verdictFile);
          if (r.verdictProblem) throw new HarnessError('HIL_ERR_REPLAY_VERDICT_INVALID', `the replay stack wrote a verdict the harness cannot read: ${r.verdictProblem}`);
          return r.verdict ?? null;
        },
      };
    },
    verdictText(v) {
      const r = v as ReplayVerdict | null;
      if (!r) return 'replay verdict: none written (the replay stack did not stop cleanly)';
      const d = r.divergence ? `first divergence at cycle ${r.divergence.cycle}: ${r.divergence.kind}${r.divergence.path ? ` ${r.divergence.path}` : ''} expected ${JSON.stringify(r.divergence.expected)} got ${JSON.stringify(r.divergence.actual)}` : 'no divergence';
      return `replay verdict: ${r.cycles} cycles, ${r.requests_matched} requests matched, ${r.requests_unsent} recorded requests unsent, ${r.requests_extra} extra; ${d}`;
    },
    diverged(v) {
      const r = v as ReplayVerdict | null;
      return !r || r.divergence !== null || r.requests_unsent > 0;
    },
    async remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
