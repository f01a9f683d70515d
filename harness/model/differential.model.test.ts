// The model's differential mode (harness/model/differential.ts) against two reference stacks: it reports
// no difference when both are the same stack, and finds a planted one (the second stack started without
// jog.sock, so begin_jog answers independent_jog_unavailable there, document 1 part 4 begin_jog), naming
// the command and both replies.

import { describe, expect, sharedVariant, test } from '../fixture.ts';
import { describedAbilities, MODEL_VARIANT } from './commands.ts';
import { differential, differentialReplay, differentialReport, sequenceOf, sharedAbilities } from './differential.ts';
import { replayStacks } from './replay-side.ts';
import type { Spec } from './model.ts';

const F = { s: 'current', g: 'current' } as const;
/** Grant, programs and a held upload, a jog, a stop: deterministic on the stepped clock (no lease or jog deadline is near). */
const SEQUENCE: Spec[] = [
  { op: 'ready', plan: 'program' },
  { op: 'hold_upload', kind: 'trajectory' },
  { op: 'prepare_program', ...F, prog: 'b' },
  { op: 'finish_upload' },
  { op: 'start_program', ...F, id: 'other' },
  { op: 'start_trajectory', ...F, h: 'prepared' },
  { op: 'begin_jog', ...F, mask: 'traj', clock: 'ok', deadline: 'ok' },
  { op: 'end_jog', ...F, jg: 'current' },
  { op: 'mark_telemetry', ...F, label: 'ok', rid: 'a' },
  { op: 'mark_telemetry', ...F, label: 'other', rid: 'a' },
  { op: 'stop', ...F, drain: true },
  { op: 'renew', ...F },
];

describe('differential mode: one sequence on two targets, the first reply that differs', () => {
  const a = sharedVariant(MODEL_VARIANT);
  const same = sharedVariant(MODEL_VARIANT);
  const noJog = sharedVariant({ ...MODEL_VARIANT, jogSocket: 'off' });

  test('two equal stacks answer alike (none reported)', async ({ skip }) => {
    skip(a.cannot !== undefined || same.cannot !== undefined, a.cannot ?? same.cannot);
    const ab = await sharedAbilities(a.target, same.target);
    // A loaded host can let a kept-alive lease run out on one side: such a run compares only up to there
    // (r.timing), so it is tried again, up to three times, for a run compared to the end.
    let r = await differential(a.target, same.target, SEQUENCE, { ab });
    for (let i = 0; i < 2 && r.timing && !r.first; i++) r = await differential(a.target, same.target, SEQUENCE, { ab });
    const text = differentialReport(r, { names: ['sim', 'sim'] });
    expect(r.first, text).toBeUndefined();
    expect(r.timing, text).toBeUndefined();
    // Every command was sent on both sides and judged (hold_upload is a harness step with no reply of its
    // own): the comparison is not of two empty logs.
    expect(r.a.filter((s) => !s.skipped && !s.mismatch && s.replies.length > 0).length).toBe(SEQUENCE.length - 1);
    expect(r.a.map((s) => s.replies.at(-1))).toEqual(r.b.map((s) => s.replies.at(-1)));
  });

  test('a stack without the independent jog lane: the first difference is begin_jog, with both replies and the sequence up to it', async ({ skip }) => {
    skip(a.cannot !== undefined || noJog.cannot !== undefined, a.cannot ?? noJog.cannot);
    const ab = await sharedAbilities(a.target, noJog.target);
    const r = await differential(a.target, noJog.target, SEQUENCE, { ab });
    expect(r.first?.index, differentialReport(r, { names: ['sim', 'sim-no-jog'] })).toBe(6);
    expect(r.first?.spec.op).toBe('begin_jog');
    // A trajectory runs on the plan's axis: the jog lane is refused mode_conflict where it exists.
    expect(r.first?.a).toBe('409 mode_conflict');
    expect(r.first?.b).toMatch(/^409 independent_jog_unavailable \[the model refuted it: begin_jog: /);
    const text = differentialReport(r, { names: ['sim', 'sim-no-jog'], seed: 7, maxCommands: 12 });
    expect(text).toContain('the first reply that differs is command 7 of 12');
    expect(text).toContain('HIL_MODEL_SEED=7 HIL_MODEL_COMMANDS=12');
  });

  test('a seed gives the same sequence every time (HIL_MODEL_SEED replays it)', async ({ skip }) => {
    skip(a.cannot !== undefined, a.cannot);
    const ab = await sharedAbilities(a.target, a.target);
    const seq = sequenceOf(ab, 4242, 60);
    expect(seq.length).toBeGreaterThan(0);
    expect(seq.every((s) => typeof s.op === 'string')).toBe(true);
    expect(sequenceOf(ab, 4242, 60)).toEqual(seq);
    expect(sequenceOf(ab, 4242, 60)).not.toEqual(sequenceOf(ab, 4243, 60));
  });
});

// Against a replay of the same sequence (hil fuzz --differential sim,replay): the sequence is recorded on a
// sim stack and sent again to a stack replaying the recording. Grant, retry cache and stop only: their
// requests are small, so each reaches the core before the harness steps on, as when it was recorded (a
// large upload that reaches the core a step later on one side is a divergence of the harness's timing,
// which the replay's verdict names; docs/profile.md "Model-based runs").
const GRANT_SEQUENCE: Spec[] = [
  { op: 'acquire', lease: 10_000, binding: 'ok', controller: 'ok' },
  { op: 'renew', s: 'current', g: 'older' },
  { op: 'mark_telemetry', ...F, label: 'ok', rid: 'a' },
  { op: 'mark_telemetry', ...F, label: 'ok', rid: 'a' },
  { op: 'mark_telemetry', ...F, label: 'other', rid: 'a' },
  { op: 'io_arm', ...F },
  { op: 'stop', ...F, drain: true },
  { op: 'renew', ...F },
  { op: 'acquire', lease: 10_000, binding: 'ok', controller: 'ok' },
  { op: 'release', ...F },
];

describe('differential mode against a replay of the same sequence', () => {
  const a = sharedVariant(MODEL_VARIANT);

  test('sim and the replay of its recording answer alike, and the replay follows the recording to its end', async ({ skip }) => {
    skip(a.cannot !== undefined, a.cannot);
    skip(a.target.name !== 'sim', 'the recording and the replay stack are the reference stack\'s (hil serve --record, --driver replay)');
    const stacks = await replayStacks({ run: 'differential.model.test' });
    try {
      const first = await stacks.record();
      const ab = await describedAbilities(first);
      const r = await differentialReplay(GRANT_SEQUENCE, { ab, record: async () => first, replay: stacks.replay });
      const text = `${differentialReport(r, { names: ['sim', 'replay'] })}\n${stacks.verdictText(r.verdict)}`;
      expect(r.first, text).toBeUndefined();
      expect(r.timing, text).toBeUndefined();
      // Every command was judged on both sides with the same status and label.
      expect(r.b.map((s) => s.replies.at(-1)), text).toEqual(r.a.map((s) => s.replies.at(-1)));
      expect(r.a.every((s) => !s.skipped && !s.mismatch && s.replies.length > 0), text).toBe(true);
      // The replay met every recorded request and diverged nowhere (its own verdict, written when it stopped).
      expect(stacks.diverged(r.verdict), text).toBe(false);
      const v = r.verdict as { requests_matched: number };
      expect(v.requests_matched, text).toBeGreaterThan(0);
    } finally {
      await stacks.remove();
    }
  });
});
