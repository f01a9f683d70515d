// The reason registry (sims/core/reasons.ts) against the catalogue (harness/catalogue, document 1 part 7)
// and the code: every label is a catalogue reason label, a name without a label is not one, the
// documented numbers hold, and each row's decidedBy files are where the reason is decided.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { byId } from '../../harness/catalogue/index.ts';
import type { ReasonEntry } from '../../harness/catalogue/types.ts';
import { JOG_REASON, jogReasonName, jogReasonOf, jogSessionStale, NATIVE_REASON, nativeLabel, REASONS } from './reasons.ts';
import { motionLabel, nativeRefusalLabel } from '../service/native-labels.ts';

const ROOT = join(import.meta.dirname, '..', '..');

test('every label in the registry is a catalogue reason label; every name without one is not', () => {
  for (const r of REASONS) {
    if (r.label !== undefined) {
      expect(byId.get(`reason:${r.label}`)?.family, `${r.kind} ${r.code} ${r.label}`).toBe('reason');
      expect(r.observed).toBe(r.label);
    } else {
      expect(byId.has(`reason:${r.observed}`), `${r.kind} ${r.code} ${r.observed} is catalogued: give it its label`).toBe(false);
    }
  }
});

test('codes are unique per kind, dense from 0, and agree with the numbers the documents give', () => {
  for (const kind of ['native', 'jog'] as const) {
    const codes = REASONS.filter((r) => r.kind === kind).map((r) => r.code);
    expect(codes).toEqual(codes.map((_, i) => i));
  }
  // Document 1: native 2 not_ready, 5 capacity, 7 pdo_mapping_mismatch, 8 outside_limits_outward; jog 15.
  expect([NATIVE_REASON.not_ready, NATIVE_REASON.capacity, NATIVE_REASON.pdo_mapping_mismatch, NATIVE_REASON.outside_limits_outward]).toEqual([2, 5, 7, 8]);
  expect(JOG_REASON.outside_limits_outward).toBe(15);
  for (const e of byId.values()) {
    if (e.family !== 'reason') continue;
    const re = e as ReasonEntry;
    if (re.native !== undefined) expect(nativeLabel(re.native), re.id).toBe(re.label);
    if (re.jogReason !== undefined) expect(jogReasonName(re.jogReason), re.id).toBe(re.label);
  }
});

test('each row names the files that decide it, and each of them does', () => {
  const text = new Map<string, string>();
  const wrong: string[] = [];
  const read = (f: string) => text.get(f) ?? (text.set(f, readFileSync(join(ROOT, f), 'utf8')), text.get(f)!);
  for (const r of REASONS) {
    if (r.name === 'none') continue;
    // A jog reason the service carries over from a native refusal (begin_jog's not_ready) is decided as that.
    const names = r.kind === 'native' ? [`NATIVE_REASON.${r.name}`] : [`JOG_REASON.${r.name}`, `'${r.observed}'`, `NATIVE_REASON.${r.name}`];
    if (r.name === 'jog_session_stale') names.push('jogSessionStale(');
    for (const f of r.decidedBy) if (!names.some((n) => read(f).includes(n))) wrong.push(`${r.kind} ${r.name}: ${f}`);
  }
  expect(wrong).toEqual([]);
  const undecided = REASONS.filter((r) => r.name !== 'none' && r.decidedBy.length === 0).map((r) => `${r.kind} ${r.name}`);
  expect(undecided).toEqual(['native capacity', 'jog superseded']); // reserved numbers (see their rows)
});

test('jog names and labels go both ways; an unknown code keeps its number', () => {
  for (const r of REASONS.filter((x) => x.kind === 'jog')) expect(jogReasonOf(jogReasonName(r.code))).toBe(r.code);
  expect(jogReasonName(31)).toBe('jog_reason_31');
  expect(jogReasonOf('native_rejected')).toBeUndefined();
});

test('the one jog_session_stale rule: each precondition on its own', () => {
  const open = { open: true, independent: true, generation: 5n };
  expect(jogSessionStale(open, 5n)).toBe(false);
  expect(jogSessionStale(open, 4n)).toBe(true);
  expect(jogSessionStale(open, 6n)).toBe(true);
  expect(jogSessionStale({ ...open, open: false }, 5n)).toBe(true);
  expect(jogSessionStale({ ...open, independent: false }, 5n)).toBe(true);
  expect(jogSessionStale({ open: true, independent: true, generation: 0n }, 0n)).toBe(true);
});

test('native labels by operation: its own label where the operation lists it, native_rejected elsewhere', () => {
  expect(motionLabel(NATIVE_REASON.jog_session_stale)).toBe('jog_session_stale');
  expect(motionLabel(NATIVE_REASON.io_not_configured)).toBe('native_rejected');
  expect(motionLabel(NATIVE_REASON.velocity_limit)).toBe('native_rejected');
  expect(nativeRefusalLabel('io_arm', NATIVE_REASON.io_not_configured)).toBe('io_not_configured');
  expect(nativeRefusalLabel('enable', NATIVE_REASON.inhibited)).toBe('native_rejected');
  expect(nativeRefusalLabel('halt', NATIVE_REASON.inhibited)).toBe('inhibited');
  expect(nativeRefusalLabel('home', NATIVE_REASON.invalid_axis_mask)).toBe('invalid_axis_mask');
  expect(nativeRefusalLabel('arm', NATIVE_REASON.invalid_axis_mask)).toBe('native_rejected');
  expect(nativeRefusalLabel('restore_anchor', NATIVE_REASON.not_ready)).toBe('anchor_source_invalid');
  expect(nativeRefusalLabel('enable', NATIVE_REASON.not_ready)).toBe('not_ready');
  expect(nativeRefusalLabel('reset_fault', NATIVE_REASON.wrong_generation)).toBe('wrong_generation');
});
