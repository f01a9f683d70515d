// Integrity of the catalogue itself: the counts and byte arithmetic the documents state, id shape
// and uniqueness, and the cross-references between families.

import { test, expect } from 'vitest';
import { byId, capability, catalogue, ids, idProblems, layout, limit, reason } from './index.ts';
import type { CatalogueEntry, Family, LayoutEntry } from './types.ts';
import { TRACEABLE, computeCoverage, type TestTrace } from './gate.ts';

function of<F extends Family>(family: F): Extract<CatalogueEntry, { family: F }>[] {
  return catalogue.filter((e): e is Extract<CatalogueEntry, { family: F }> => e.family === family);
}

/** Gaps and overlaps of a layout sorted by offset, plus where it ends. */
function tiling(fields: readonly LayoutEntry[]): { gaps: [number, number][]; overlaps: string[]; end: number } {
  const gaps: [number, number][] = [];
  const overlaps: string[] = [];
  let at = 0;
  for (const f of fields) {
    if (f.offset > at) gaps.push([at, f.offset]);
    if (f.offset < at) overlaps.push(`${f.field}@${f.offset} overlaps up to ${at}`);
    at = Math.max(at, f.offset + f.size);
  }
  return { gaps, overlaps, end: at };
}

const PRIMITIVE: Record<string, number> = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, u64: 8, i64: 8, f64: 8 };

test('every id is unique and well formed', () => {
  expect(new Set(catalogue.map((e) => e.id)).size).toBe(catalogue.length);
  expect(byId.size).toBe(catalogue.length);
  const problems = catalogue.flatMap((e) => idProblems(e).map((p) => `${e.id}: ${p}`));
  expect(problems).toEqual([]);
  for (const e of catalogue) expect([1, 2, 3]).toContain(e.doc);
});

test('lookups find entries and throw on unknown names', () => {
  expect(reason('control_session_stale').group).toBe('authority');
  expect(capability('acquire').fence).toBe('none; binding checked');
  expect(limit('ordinary_body_bytes').max).toBe(16384n);
  expect(() => reason('no_such_label')).toThrow(/no reason:no_such_label/);
  expect(() => capability('no_such_capability')).toThrow();
  expect(() => limit('no_such_limit')).toThrow();
  expect(ids('transition:grant:')).toContain('transition:grant:owned->no_grant:release');
});

test('document 1 part 4 lists exactly 33 capabilities', () => {
  const caps = of('capability');
  expect(caps).toHaveLength(33);
  expect(new Set(caps.map((c) => c.state))).toEqual(new Set(['implemented', 'interim', 'test_only', 'unimplemented']));
  expect(capability('abort').transport).toBe('none');
  expect(capability('readiness').transport).toBe('none');
  expect(caps.filter((c) => c.state === 'unimplemented').map((c) => c.name).sort()).toEqual(['abort', 'readiness']);
  expect(capability('reset_fault').state).toBe('interim');
  expect(capability('jog').state).toBe('test_only');
});

test('document 1 part 6 lists exactly 25 event types', () => {
  const events = of('event');
  expect(events).toHaveLength(25);
  expect(events.find((e) => e.type === 'events_dropped')?.payload).toBe('events_dropped');
});

test('telemetry batch header fields are contiguous and total 312 bytes', () => {
  const h = layout('telemetry_header');
  const t = tiling(h);
  expect(t.overlaps).toEqual([]);
  expect(t.gaps).toEqual([]); // the document declares `reserved` explicitly; no implicit gap
  expect(t.end).toBe(312);
  expect(h[0]).toMatchObject({ field: 'magic', offset: 0, size: 4, type: 'u32' });
  expect(h.at(-1)).toMatchObject({ field: 'daemon_incarnation', offset: 280, size: 32, type: 'u8[32]' });
  expect(limit('telemetry_header_bytes').value).toBe(312n);
});

test('capture record fields plus the ax array total 5392 bytes', () => {
  const r = layout('capture_record');
  const t = tiling(r);
  expect(t.overlaps).toEqual([]);
  expect(t.gaps).toEqual([]); // offset 36 `reserved` is an explicit field, not a gap
  expect(t.end).toBe(5392);
  const ax = byId.get('layout:capture_record:ax') as LayoutEntry;
  expect(ax).toMatchObject({ offset: 272, size: 5120 });
  expect(ax.size).toBe(16 * 320);
  const scalars = r.filter((f) => f.field !== 'ax');
  expect(tiling(scalars).end).toBe(272);
  expect(limit('telemetry_record_bytes').value).toBe(5392n);
});

test('capture axis fields cover exactly 320 bytes with no gap or overlap', () => {
  const a = layout('capture_axis');
  const t = tiling(a);
  expect(t.overlaps).toEqual([]);
  expect(t.gaps).toEqual([]); // the document's axis list leaves no gap
  expect(t.end).toBe(320);
  expect(byId.get('layout:capture_axis:absolute_value')).toMatchObject({ offset: 16, size: 64, type: 'i32[16]' });
  expect(byId.get('layout:capture_axis:audit_coherence_error_counts')).toMatchObject({ offset: 312, size: 8, type: 'u64' });
});

test('dense sample fields tile 153 big-endian bytes', () => {
  const d = layout('dense_sample');
  const t = tiling(d);
  expect(t).toEqual({ gaps: [], overlaps: [], end: 153 });
  expect(d.map((f) => [f.field, f.offset, f.type])).toEqual([
    ['t_s', 0, 'f64'],
    ['q_rad', 8, 'f64[9]'],
    ['qd_rad_s', 80, 'f64[9]'],
    ['flags', 152, 'u8'],
  ]);
  for (const f of d) expect(f.note).toMatch(/big-endian/);
  for (const f of layout('telemetry_header')) expect(f.note).toMatch(/little-endian/);
  expect(limit('dense_record_bytes').value).toBe(153n);
});

test('layout sizes agree with their declared types', () => {
  for (const f of of('layout')) {
    const m = /^([a-z]\d+)(?:\[(\d+)\])?$/.exec(f.type);
    if (!m) continue; // the nested CycleCaptureAxisV2[16] array is checked above
    expect(f.size, f.id).toBe(PRIMITIVE[m[1]!]! * (m[2] ? Number(m[2]) : 1));
  }
});

test('the documented byte arithmetic holds between limits', () => {
  expect(limit('telemetry_batch_bytes').max).toBe(312n + 4096n * 5392n);
  expect(limit('telemetry_batch_records').max).toBe(4096n);
  expect(limit('prepare_program_body_bytes').max).toBe(1048580n + 250000n * 153n);
  expect(limit('dense_admission_body_bytes').max).toBe(limit('prepare_program_body_bytes').max);
  expect(limit('control_idle_timeout_ns').value).toBe((limit('idle_connection_s').value as bigint) * 1_000_000_000n);
  expect(limit('fence_prefix_bytes').max).toBe(limit('ordinary_body_bytes').max);
});

test('required limits carry the documented values', () => {
  const expected: Record<string, Partial<Record<'min' | 'max' | 'value', bigint>>> = {
    ordinary_body_bytes: { max: 16384n },
    prepare_trajectory_body_bytes: { max: 222516384n },
    fence_prefix_bytes: { max: 16384n },
    prepare_program_body_bytes: { max: 39298580n },
    points_per_trajectory: { min: 2n, max: 250000n },
    request_id_bytes: { min: 1n, max: 64n },
    request_id_outcomes: { max: 256n },
    label_bytes: { min: 1n, max: 128n },
    controller_bytes: { min: 1n, max: 63n },
    legacy_jog_timeout_ms: { min: 1n, max: 250n },
    requested_lease_ms: { min: 1n, max: 10000n },
    default_lease_ms: { value: 500n },
    session_token_hex: { value: 64n },
    events_per_poll: { max: 64n },
    event_log_retained: { value: 256n },
    telemetry_batch_records: { max: 4096n },
    telemetry_batch_bytes: { max: 22085944n },
    telemetry_axis_count: { min: 1n, max: 16n },
    home_wait_s: { max: 60n },
    recovery_observation_wait_s: { value: 1n },
    idle_connection_s: { value: 90n },
    control_idle_timeout_ns: { value: 90000000000n },
  };
  for (const [name, facts] of Object.entries(expected)) expect(limit(name), name).toMatchObject(facts);
});

test('reason entries name real capabilities, groups and statuses', () => {
  const groups = new Set(['envelope', 'authority', 'handles', 'native', 'program', 'dense', 'recovery', 'io', 'jog', 'telemetry']);
  for (const r of of('reason')) {
    expect(groups.has(r.group), r.id).toBe(true);
    for (const o of r.operations) expect(byId.get(`capability:${o}`)?.family, `${r.id} -> ${o}`).toBe('capability');
    const http = r.label === 'body_too_large' ? 413 : r.label === 'resource_unknown' ? 404 : 409;
    expect(r.http, r.id).toBe(http);
  }
  expect(reason('expired').operations.sort()).toEqual(['release', 'renew', 'stop']);
  expect(reason('handle_active').operations).toEqual(['discard_trajectory']);
});

test('documented numeric native reasons are present', () => {
  expect(reason('not_ready').native).toBe(2);
  expect(reason('pdo_mapping_mismatch').native).toBe(7);
  expect(reason('outside_limits_outward').native).toBe(8);
  expect(reason('outside_limits_outward').jogReason).toBe(15);
  expect(of('reason').filter((r) => r.native !== undefined).map((r) => r.label).sort()).toEqual([
    'not_ready',
    'outside_limits_outward',
    'pdo_mapping_mismatch',
  ]);
});

test('dense file-format reasons appear in document 2 and as control-service labels', () => {
  const formats = of('format_reason');
  expect(formats).toHaveLength(26);
  expect(byId.has('format_reason:schema_mismatch')).toBe(true);
  expect(byId.has('format_reason:dense_schema_mismatch')).toBe(true);
  for (const f of formats) {
    if (f.reason === 'schema_mismatch') continue; // the control service reports dense_schema_mismatch
    const r = reason(f.reason);
    expect(r.operations, r.id).toContain('prepare_program');
  }
  expect(reason('dense_schema_mismatch').group).toBe('dense');
  expect(reason('schema_mismatch').group).toBe('envelope');
  expect(of('dense_error')).toHaveLength(13);
});

test('transition tables are complete and well named', () => {
  const handle = ids('transition:handle:');
  const grant = ids('transition:grant:');
  expect(handle).toHaveLength(11);
  expect(grant).toHaveLength(10); // nine rows; "stopping, then revoked" adds stopping->revoked:drain
  for (const id of [
    'transition:grant:no_grant->owned:acquire',
    'transition:grant:owned->no_grant:release',
    'transition:grant:owned->no_grant:lease_expiry',
    'transition:grant:owned->stopping:stop',
    'transition:grant:stopping->revoked:drain',
    'transition:grant:owned->session_retired:reset_fault',
    'transition:handle:started->refused:discard',
    'transition:handle:prepared->prepared:start_refused',
  ]) {
    expect(byId.has(id), id).toBe(true);
  }
});

test('field entries cover the documented resource types', () => {
  const types = new Set(of('field').map((f) => f.type));
  for (const t of [
    'Request', 'Fence', 'Binding', 'Grant', 'GrantObservation', 'Response', 'CommandResult', 'CapabilityInfo', 'Point',
    'Identity', 'HandleRecord', 'Execution', 'MotionState', 'Program', 'ProcessMarker', 'LimitViolation', 'PlanCursor',
    'RecoveryStatus', 'FaultRecovery', 'Description', 'ProcessStatus', 'Event', 'EventBatch', 'DenseHeader',
    'DenseSegment', 'PlannerHealth', 'PlannerProgress', 'PlanResult', 'PlannerQuery', 'ProgramDocument', 'MachineConfig',
  ]) {
    expect(types.has(t), t).toBe(true);
  }
  expect(of('field').filter((f) => f.type === 'Request')).toHaveLength(20);
  expect(of('field').filter((f) => f.type === 'GrantObservation')).toHaveLength(17);
  expect(of('field').filter((f) => f.type === 'PlannerQuery')).toHaveLength(13);
  expect(byId.get('field:DenseHeader.axes.axis_count')).toBeDefined();
  expect(byId.get('field:DenseHeader.sampling.dt_s')).toBeDefined();
  expect(byId.get('field:ProcessStatus.core.armed')).toBeDefined();
});

test('the documents reserve exactly abort and readiness (state unimplemented, transport none)', () => {
  const reserved = catalogue.filter((e) => e.family === 'capability' && e.state === 'unimplemented');
  expect(reserved.map((e) => (e as { name: string }).name).sort()).toEqual(['abort', 'readiness']);
  for (const e of reserved) expect((e as { transport: string }).transport).toBe('none');
});

test("a covered item's outcome: a failure or an error fails it; an informative failure (a profile test on someone else's service) neither fails nor verifies it", () => {
  const item = TRACEABLE.find((e) => e.id.startsWith('reason:'))!;
  const outcome = (...states: Array<[TestTrace['state'], boolean?]>) =>
    computeCoverage(
      states.map(([state, informative], i) => ({ fullName: `t${i}`, covers: [item.id], state, ...(informative ? { informative } : {}) })),
      [item],
      {},
    ).entries[0]!.outcome;
  expect(outcome(['passed'], ['failed'])).toBe('failed');
  expect(outcome(['passed'], ['errored'])).toBe('failed');
  expect(outcome(['passed'], ['failed', true])).toBe('passed');
  expect(outcome(['skipped'], ['failed', true])).toBe('informative');
  expect(outcome(['failed', true], ['failed'])).toBe('failed');
  expect(outcome(['skipped'], ['skipped'])).toBe('skipped');
  expect(outcome(['pending'])).toBe('not_run');
});
