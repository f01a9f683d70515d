// The sim target's record mode (`hil run --record DIR`; docs/recording.md "Recording a suite run"): the sim
// target with a record directory gives every test stacks of its own, each recording its whole session under
// DIR/sim/<machine digest>/ (the stacks and their files: recorder.ts, recording-store.ts). Not a target of its
// own: its option is one of the sim target's (sim.ts), and this module is what that option brings: the
// recorder, the machine digest `hil run` computes once, and the per-test fixture's recording hooks (a test
// that never opened the target is noted as recorded without a stack; each recording notes the test's wall
// time, which a replay compares with its own).

import { perTestFixture } from './test-stacks.ts';
import { machineDigest, Recorder } from './recorder.ts';
import { RecordingStore } from './recording-store.ts';
import type { PerTestFixture, TargetOption } from './types.ts';

/** What the record mode reads of the sim target's options. */
export interface RecordOptions {
  recordDir?: string;
  machineSha256?: string;
  machine?: string;
}

/** The sim target's option that turns the record mode on. */
export const RECORD_OPTION: TargetOption = {
  key: 'recordDir',
  flag: 'record',
  value: 'DIR',
  env: 'HIL_RECORD_DIR',
  help: 'record every test into its own recording under DIR/sim/<machine digest>/ (a fresh stack per test; docs/recording.md "Recording a suite run")',
  path: true,
};

/** The sim target's recorder: record with a record directory, off without. */
export function recorderOf(o: RecordOptions): Recorder {
  return o.recordDir ? Recorder.of('record', o) : Recorder.off();
}

/** `hil run --record`: the digest a test that never opens the target is noted under (a stackless sidecar, recording-store.ts). */
export async function recordPrepare(o: RecordOptions): Promise<Record<string, string>> {
  if (!o.recordDir) return {};
  return { HIL_MACHINE_SHA256: await machineDigest({ ...(o.machine ? { machine: o.machine } : {}) }) };
}

/** The record mode's per-test fixture, or undefined on a plain run of the sim target. */
export function recordFixture(o: RecordOptions): PerTestFixture | undefined {
  const recorder = recorderOf(o);
  if (!recorder.perTest) return undefined;
  return perTestFixture({
    before: () => Promise.resolve({}),
    after(test, stacks, wallMs) {
      // Recorded, but the test never opened the target: say so beside where its recording would be, so
      // its replay runs it (without a stack) rather than skipping it as not recorded. Its variants, if it
      // opened any, have recordings of their own beside that.
      if (!stacks.some((s) => s.recording)) recorder.noteStackless(test, wallMs);
      // Tries thrown away because the host was too slow: the recording holds requests a replay does not repeat.
      if (test.droppedTries) recorder.noteRetried(test.id, test.droppedTries);
      // The test's wall time beside its recording: a replay says how much faster (or slower) it ran.
      for (const s of stacks) if (s.recording && !s.variant) RecordingStore.noteSidecar(s.recording, { test_wall_ms: wallMs });
      return { wallMs };
    },
    // The codes a test ended in ERROR with: its replay is skipped (recorder.ts precheck), the recording being
    // of the harness's trouble then rather than of the target.
    erred: (test, codes) => recorder.noteErred(test, codes),
    modeName: () => 'record',
  });
}
