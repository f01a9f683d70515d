// The replay target (`hil run --target replay --recordings DIR`; docs/recording.md "The replay target"): every
// test runs against a fresh reference stack on the replay driver, playing the recording `hil run --record DIR`
// made of that very test. The stack follows the recording (`hil serve --replay-paced`): its core runs on the
// recorded frame times up to each recorded request, waits there for the live one, matches it (same operation
// and fields, fences rewritten consistently) and compares the replies and events it sends with the recorded
// ones. The suites run unchanged; at the end of each test the stack's verdict decides, besides the test's own
// assertions, whether the replay agreed with the recording.
//
// A test without a recording is skipped with "not recorded"; a recording made for another machine digest is
// refused as stale with both digests; a missing recordings directory is a usage error in `hil run`.

// The target is the sim target's SimTarget with a Recorder in replay mode (harness/targets/recorder.ts): the
// recorder finds each stack's recording (RecordingStore), starts the stack on the replay driver and reads its
// verdict when it stops.

import { HarnessError } from '../errors.ts';
import type { ReplayVerdict } from './pertest.ts';
import { Recorder } from './recorder.ts';
import { openPerTest, openVariant, startTestStack, type StackStart } from './sim.ts';
import { openStubPlanner } from './spawn.ts';
import type { Target, TargetDescriptor, TargetOptions } from './types.ts';

export { STEPPED_FORMAT_2 } from './recorder.ts';

/** Replay modes a suite run offers (closed-loop and open-loop are for `hil replay FILE`: see docs/recording.md). */
export const SUITE_REPLAY_MODES = ['strict'] as const;

/**
 * Before a test on the replay target: its recording, or why it cannot run (Recorder.precheck). Not recorded:
 * a skip reason. Stale (the same test recorded for another machine digest): HIL_ERR_REPLAY_STALE naming both
 * digests.
 */
export function replayPrecheck(testId: string, o: TargetOptions): Promise<{ path: string } | { skip: string } | { stackless: string }> {
  return Recorder.of('replay', o).precheck(testId);
}

/** The replay stack's own flags come from the recorder; the file target's are the machine and the test channel. */
function baseStart(o: TargetOptions): StackStart {
  return { args: ['--test-channel', ...(o.machine ? ['--machine', o.machine] : [])] };
}

/** A value as JSON for a message, cut at `max` characters (a recorded prepare can carry megabytes of points). */
export function clipJson(v: unknown, max = 1_000): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length <= max ? s : `${s.slice(0, max)}... (${s.length} characters)`;
}

/** One line saying what a replay verdict found (for a failing test's message and the report). */
export function describeVerdict(v: ReplayVerdict): string {
  const d = v.divergence;
  const service = v.service_replies ? `, ${v.service_replies.matched}/${v.service_replies.recorded} service replies` : '';
  const streams = v.watches?.recorded ?? 0;
  const watched = !v.flat_between_watches ? '' : streams ? `; flat out but while a stream was open (${v.watches?.served ?? 0}/${streams} recorded streams opened)` : '; flat out (no stream was open)';
  const head = `replayed ${v.cycles} of ${v.recorded.frames} recorded cycles (${v.mode}), ${v.requests_matched}/${v.recorded.requests} requests and ${v.outputs_matched}/${v.recorded.outputs} replies and events${service} matched${watched}`;
  if (!d) return head;
  if (d.kind === 'bus' && d.bus) {
    const b = d.bus;
    return `${head}; diverged on the bus at cycle ${String(b.cycle)}, axis ${String(b.axis_id ?? b.axis)}, field ${String(b.field)}: expected ${String(b.expected)}, actual ${String(b.actual)}`;
  }
  return `${head}; diverged at cycle ${d.cycle}: ${d.kind} ${d.path ? `field ${d.path} ` : ''}expected ${clipJson(d.expected)}, actual ${clipJson(d.actual)}`;
}

export const replayTarget: TargetDescriptor = {
  name: 'replay',
  summary: 'each test replayed from its recording (hil run --record) on a fresh reference stack on the replay driver, requests matched, replies and events compared',
  options: {
    HIL_RECORDINGS: 'directory of recordings made with hil run --record DIR',
    HIL_REPLAY_MODE: 'strict (the only mode a suite run offers)',
    HIL_REPLAY_SPEED: 'the replayed core\'s pace: auto (default; flat out to the next sync point, but each cycle at its recorded wall time since the replay last met the test while the recorded test had a telemetry or event stream open), a number (so paced throughout; 1: what a test measures over wall time is as recorded), or max (flat out throughout)',
    HIL_MACHINE: 'machine configuration file (default fixtures/machines/nine-axis.json)',
  },
  async open(o: TargetOptions): Promise<Target> {
    if (o.replayMode !== undefined && !(SUITE_REPLAY_MODES as readonly string[]).includes(o.replayMode)) {
      throw new HarnessError('HIL_ERR_TARGET_START', `replay mode ${o.replayMode}: a suite run replays ${SUITE_REPLAY_MODES.join(', ')}`);
    }
    return openPerTest(Recorder.of('replay', o), baseStart(o));
  },
  cannotProvide: (v, o) => Recorder.of('replay', o).cannotProvide(v),
  openVariant: (v, o) => openVariant(Recorder.of('replay', o), v, baseStart(o)),
  // The planner is not replayed: the stub runs live beside the replayed stacks.
  openPlanner: () => openStubPlanner(),
  cannotStartStack: (s, o) => Recorder.of('replay', o).cannotProvide(s.variant),
  startStack: (s, o) => startTestStack(Recorder.of('replay', o), s),
};
