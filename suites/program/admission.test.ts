// prepare_program admission over the wire (document 1 part 4 prepare_program, part 2 "Program",
// "Identity", "ProcessMarker", "Program limit evidence", part 8 limits; document 2 part 7 "Admission by
// the control service"). Files are written with the harness's own encoder (suites/program/files.ts);
// expectations (content and normalised digests, program clocks, Hermite extremes) are computed here from
// the samples. Decisions the documents leave open (check order, recovery programs, joins in drive counts,
// the marker header form, acceleration evidence) are docs/profile.md "Program admission".

import { createConnection } from 'node:net';
import { writeFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { onTestFinished } from 'vitest';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { eventCursor, eventsSince } from '../../harness/clients/events.ts';
import { readStatus } from '../../harness/clients/status.ts';
import { Cell } from '../../harness/clients/cell.ts';
import { covers, cycleFree, describe, expect, profile, test, type Description } from '../../harness/fixture.ts';
import { postProgram } from './upload.ts';
import {
  CEIL, IDENT, axisOf, nineColumnsUnfit, digestOf, dwell, encodeProgram, executedPoints, move, normalisedDigest, rows, sampledHermite, withCol,
  type Marker, type ProgramFile,
} from './files.ts';

// No test here needs the file's cell to cycle on its own (harness/fixture.ts cycleFree).
cycleFree();

const LIMIT = 39298580;
const Q0 = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];
const Q1 = Q0.map((x) => x + 0.02);
const ZERO = Q0.map(() => 0);
/** The outputs the marker tests name (fixtures/machines/nine-axis.json io.outputs); a cell without them skips those tests. */
const OUTPUTS = ['torch', 'clamp', 'gas_purge'];
/** Skip a test whose program files this cell cannot map, with the reason (suites/program/files.ts). */
const unfitSkip = (d: Description, skip: (note: string) => never, outputs: readonly string[] = []) => {
  const why = nineColumnsUnfit(d, outputs);
  if (why) skip(why);
};

const rev = (d: Description) => d.binding.revision;
/** 51 + 3 + 51 samples in three segments: 103 executed points. */
const base = (d: Description, extra: Partial<ProgramFile> = {}): ProgramFile => ({
  segments: [move('out', Q0, Q1, 51), dwell('hold', Q1, 3), move('back', Q1, Q0, 51)],
  manifestRevision: rev(d),
  ...extra,
});
/** One segment of explicit rows, every other column at Q0 and at rest. */
const single = (d: Description, col: number, q: number[], qd: number[], extra: Partial<ProgramFile> = {}): ProgramFile => ({
  segments: [rows('one', q.map((v) => withCol(Q0, col, v)), qd.map((v) => withCol(ZERO, col, v)))],
  manifestRevision: rev(d),
  ...extra,
});

/**
 * The step over one 0.01 s interval from rest to `v1` whose cubic Hermite speed peaks at `peak`, in closed
 * form (kept off the event loop's budget: the table builds files while a lease is being renewed). With
 * D = 6 step / h the speed is v(s) = (D - 2 v1) s - (D - 3 v1) s^2, whose maximum (D - 2 v1)^2 / (4 (D - 3 v1))
 * equals `peak` for D = 2 (v1 + peak) + 2 sqrt(peak^2 - peak v1).
 */
function stepForPeak(peak: number, v1: number): number {
  const D = 2 * (v1 + peak) + 2 * Math.sqrt(peak * peak - peak * v1);
  return (D * 0.01) / 6;
}

type Data = Record<string, any>;
const transitions = (evs: Array<Record<string, any>>, h: bigint) =>
  evs.filter((e) => e.type === 'handle_transition' && e.handle.handle === h).map((e) => `${e.handle.from}->${e.handle.to}`);

describe('admitted programs', () => {
  test(
    'a valid file is admitted: data Program with the identity from the header, both digests and the merged point count; the handle is prepared',
    covers(
      'endpoint:POST /v1/program',
      'field:Program.identity', 'field:Program.requires_process_io', 'field:Program.segments', 'field:Program.samples', 'field:Program.normalised_samples', 'field:Program.axis_mask', 'field:Program.process_markers',
      'field:Identity.plan_id', 'field:Identity.program_id', 'field:Identity.program_digest', 'field:Identity.trajectory_digest', 'field:Identity.source_digest', 'field:Identity.normalised_digest', 'field:Identity.manifest_revision', 'field:Identity.plan_revision',
      'field:DenseHeader.plan_id', 'field:DenseHeader.program_id', 'field:DenseHeader.program_digest', 'field:DenseHeader.trajectory_digest', 'field:DenseHeader.manifest_revision', 'field:DenseHeader.plan_revision',
      'rule:dense_admission.boundary_merge', 'rule:dense_admission.digests_to_start', 'rule:dense_admission.identity_nonempty',
      'profile:program.normalised_digest',
    ),
    async ({ cell, client, description, skip }) => {
      unfitSkip(description, skip);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      const f = base(description);
      const cursor = await eventCursor(client);
      const r = await postProgram(client, s, encodeProgram(f));
      expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
      const digest = digestOf(f);
      const identity = {
        plan_id: IDENT.planId, program_id: IDENT.programId, program_digest: IDENT.programDigest, trajectory_digest: digest, source_digest: digest,
        normalised_digest: normalisedDigest(executedPoints(f).points), manifest_revision: rev(description), plan_revision: IDENT.planRevision,
      };
      expect(r.reply.data).toEqual({ process_markers: [], identity, requires_process_io: false, segments: 3n, samples: 105n, normalised_samples: 103n, axis_mask: 0x1ffn });
      expect(r.reply.handle).toBeUndefined(); // "response carries handle for trajectories" (document 1 part 3)
      const st = (await readStatus(client)) as unknown as { execution: Data };
      const rec = st.execution.handles.at(-1);
      expect(rec).toEqual({ handle: rec.handle, state: 'prepared', generation: s.generation, execution_generation: 0n, native_sequence: 0n, identity });
      expect(st.execution).toMatchObject({ state: 'prepared', identity });
      expect(transitions(await eventsSince(client, cursor), rec.handle)).toEqual(['->prepared']);
    },
  );

  test(
    'process markers on configured non-torch outputs: admitted with their program clock, requires_process_io, and in the normalised digest',
    covers('field:ProcessMarker.time_ns', 'field:ProcessMarker.segment', 'field:ProcessMarker.sample', 'field:ProcessMarker.action', 'field:ProcessMarker.value', 'field:DenseHeader.process_markers', 'rule:dense_admission.process_io', 'profile:program.process_markers'),
    async ({ cell, client, description, skip }) => {
      unfitSkip(description, skip, ['clamp', 'gas_purge']);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      const markers: Marker[] = [
        { segment: 0, sample: 10, action: 'clamp', value: true },
        { segment: 1, sample: 0, action: 'gas_purge', value: true }, // the join point: executes at the end of segment 0
        { segment: 2, sample: 50, action: 'clamp', value: false },
      ];
      const f = base(description, { markers });
      const r = await postProgram(client, s, encodeProgram(f));
      expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
      const d = r.reply.data as Data;
      // segment 0 runs 0.5 s, the dwell 0.02 s, segment 2 another 0.5 s
      expect(d.process_markers).toEqual([
        { time_ns: 100_000_000n, segment: 0n, sample: 10n, action: 'clamp', value: true },
        { time_ns: 500_000_000n, segment: 1n, sample: 0n, action: 'gas_purge', value: true },
        { time_ns: 1_020_000_000n, segment: 2n, sample: 50n, action: 'clamp', value: false },
      ]);
      expect(d.requires_process_io).toBe(true);
      expect(d.identity.normalised_digest).toBe(normalisedDigest(executedPoints(f, OUTPUTS).points));
      expect(d.identity.normalised_digest).not.toBe(normalisedDigest(executedPoints(base(description)).points));
    },
  );

  test(
    'uploads are not deduplicated: the same file twice gives two handles, the first superseded',
    covers('rule:idempotency.program_no_dedup'),
    async ({ cell, client, description, skip }) => {
      unfitSkip(description, skip);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      const bytes = encodeProgram(base(description));
      expect((await postProgram(client, s, bytes)).status).toBe(200);
      const h1 = ((await readStatus(client)) as unknown as { execution: Data }).execution.handles.at(-1).handle as bigint;
      expect((await postProgram(client, s, bytes)).status).toBe(200);
      const hs = ((await readStatus(client)) as unknown as { execution: Data }).execution.handles as Data[];
      expect(hs.find((h) => h.handle === h1)!.state).toBe('superseded');
      expect(hs.at(-1)).toMatchObject({ state: 'prepared' });
      expect(hs.at(-1)!.handle).toBeGreaterThan(h1);
    },
  );

  test(
    'an axis starting outside its limits may be brought back in (a recovery program is admitted)',
    profile('profile:program.recovery'),
    async ({ cell, client, description, skip }) => {
      unfitSkip(description, skip);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      const j3 = axisOf(description, 2);
      const r = await postProgram(client, s, encodeProgram(single(description, 2, [j3.max + 1e-4, j3.max + 5e-5, j3.max + 5e-5], [0, 0, 0])));
      expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
    },
  );
});

interface Case {
  name: string;
  file: (d: Description) => ProgramFile;
  label: string;
  /** The exact error text when the case pins it. */
  text?: (d: Description) => string | RegExp;
  /** A file-format reason, which comes before every live-machine check: no fit needed. */
  format?: boolean;
  /** Outputs the case's markers name. */
  outputs?: string[];
  ids: string[];
}

const weldWithTorch = (d: Description): ProgramFile => {
  const seg = move('weld', Q1, Q1, 3, 'weld');
  seg.samples.forEach((x) => (x.flags = 1));
  return { segments: [move('out', Q0, Q1, 51), seg], manifestRevision: rev(d) };
};

const CASES: Case[] = [
  ...(['plan_id', 'program_id', 'program_digest'] as const).map((field, k): Case => ({
    name: `${field} ${k === 1 ? 'absent' : 'empty'}`,
    file: (d) => base(d, { mutateHeader: (h) => { if (k === 1) delete h[field]; else h[field] = ''; } }),
    label: 'program_identity_missing',
    text: () => `program_identity_missing: ${field}`,
    ids: ['reason:program_identity_missing'],
  })),
  { name: 'a manifest revision other than the pair revision', file: (d) => base(d, { manifestRevision: rev(d) + 1n }), label: 'manifest_revision_mismatch', ids: ['reason:manifest_revision_mismatch'] },
  { name: 'a torch bit in a weld segment', file: weldWithTorch, label: 'process_io_executor_not_qualified', ids: ['reason:process_io_executor_not_qualified', 'rule:dense_admission.process_io'] },
  { name: 'a marker on the torch-class output', file: (d) => base(d, { markers: [{ segment: 0, sample: 3, action: 'torch', value: true }] }), label: 'io_torch_unqualified', ids: ['reason:io_torch_unqualified'], outputs: ['torch'] },
  { name: 'a marker naming an output that is not configured', file: (d) => base(d, { markers: [{ segment: 0, sample: 3, action: 'nozzle', value: true }] }), label: 'io_marker_invalid', ids: ['reason:io_marker_invalid'], outputs: ['torch'] },
  { name: 'a marker past the last sample of its segment', file: (d) => base(d, { markers: [{ segment: 1, sample: 3, action: 'clamp', value: true }] }), label: 'io_marker_invalid', ids: ['reason:io_marker_invalid'], outputs: ['clamp'] },
  { name: 'a marker on a segment that does not exist', file: (d) => base(d, { markers: [{ segment: 3, sample: 0, action: 'clamp', value: true }] }), label: 'io_marker_invalid', ids: ['reason:io_marker_invalid'], outputs: ['clamp'] },
  { name: 'a marker without a boolean value', file: (d) => base(d, { rawMarkers: [{ segment: 0n, sample: 0n, action: 'clamp', value: 'on' }] }), label: 'io_marker_invalid', ids: ['reason:io_marker_invalid', 'profile:program.process_markers'], outputs: ['clamp'] },
  {
    name: 'a sample past a position limit',
    file: (d) => { const m = axisOf(d, 2).max; return single(d, 2, [m, m + 1e-6, m], [0, 0, 0]); },
    label: 'native_limit_exceeded',
    text: (d) => `native_limit_exceeded: segment=0 sample=1 axis=${axisOf(d, 2).id}`,
    ids: ['reason:native_limit_exceeded', 'rule:dense_admission.sample_limits', 'rule:limit_violation.with_reasons'],
  },
  {
    name: 'a sample faster than the axis (below the header ceiling)',
    file: (d) => single(d, 0, [0, 0.0115, 0.023], [0, 2.3, 0], { maxAbsQd: withCol(CEIL, 0, 3) }),
    label: 'native_limit_exceeded',
    text: (d) => `native_limit_exceeded: segment=0 sample=1 axis=${axisOf(d, 0).id}`,
    ids: ['reason:native_limit_exceeded', 'rule:dense_admission.sample_limits'],
  },
  {
    name: 'a Hermite interval bowing past a position limit',
    file: (d) => { const m = axisOf(d, 5).max; return single(d, 5, [m - 0.04, m - 0.01, m], [0, 4, 0]); },
    label: 'native_segment_rate_exceeded',
    text: (d) => `native_segment_rate_exceeded: segment=0 sample=1 axis=${axisOf(d, 5).id}`,
    ids: ['reason:native_segment_rate_exceeded', 'rule:dense_admission.hermite_intervals', 'rule:dense_admission.no_slack'],
  },
  {
    name: 'a Hermite interval faster than the lower of the two ceilings',
    file: (d) => single(d, 0, [0.1, 0.115, 0.13], [0, 1.2, 0]),
    label: 'native_segment_rate_exceeded',
    text: (d) => `native_segment_rate_exceeded: segment=0 sample=0 axis=${axisOf(d, 0).id}`,
    ids: ['reason:native_segment_rate_exceeded', 'rule:dense_admission.hermite_intervals'],
  },
  {
    // The axis ceiling is the lower one here (the header's is raised to 1.5 times it): an implementation
    // that checks intervals against the header ceiling only admits this file.
    name: 'a Hermite interval faster than the axis where the header ceiling is higher',
    file: (d) => {
      const m = axisOf(d, 0).maxVelocity;
      const v1 = m / 2;
      const dq = stepForPeak(m * 1.1, v1);
      return single(d, 0, [0.1, 0.1 + dq, 0.1 + dq + (v1 * 0.01) / 2], [0, v1, 0], { maxAbsQd: withCol(CEIL, 0, m * 1.5) });
    },
    label: 'native_segment_rate_exceeded',
    text: (d) => `native_segment_rate_exceeded: segment=0 sample=0 axis=${axisOf(d, 0).id}`,
    ids: ['reason:native_segment_rate_exceeded', 'rule:dense_admission.hermite_intervals'],
  },
  {
    name: 'a finite-difference acceleration above the axis maximum',
    // J9 declares max_acceleration 2 rad/s^2: 0 -> 0.025 rad/s in one 0.01 s step is 2.5
    file: (d) => single(d, 8, [0.8, 0.80025, 0.8005], [0, 0.025, 0]),
    label: 'native_segment_rate_exceeded',
    text: (d) => new RegExp(`^native_segment_rate_exceeded: segment=0 sample=0 axis=${axisOf(d, 8).id} acceleration=2\\.5\\d* limit=2$`),
    ids: ['reason:native_segment_rate_exceeded', 'rule:dense_admission.acceleration', 'profile:program.acceleration'],
  },
  {
    name: 'a recovery program going further out than it starts',
    file: (d) => { const m = axisOf(d, 2).max; return single(d, 2, [m + 1e-4, m + 2e-4, m + 2e-4], [0, 0, 0]); },
    label: 'outside_limits_outward',
    ids: ['reason:outside_limits_outward', 'profile:program.recovery'],
  },
  {
    name: 'a recovery program whose curve bows further out than it starts',
    file: (d) => { const m = axisOf(d, 2).max; return single(d, 2, [m + 1e-4, m + 1e-4, m + 1e-4], [0, 0.1, 0]); },
    label: 'outside_limits_outward',
    ids: ['reason:outside_limits_outward', 'profile:program.recovery'],
  },
  {
    name: 'segments joined three drive counts apart',
    file: (d) => {
      const a = axisOf(d, 0);
      const q = withCol(Q0, 0, 0.1);
      return { segments: [dwell('a', q, 3), dwell('b', withCol(q, 0, 0.1 + 3 / (a.countsPerUnit * a.sign)), 3)], manifestRevision: rev(d) };
    },
    label: 'segment_boundary_discontinuous',
    text: (d) => `segment_boundary_discontinuous: join=0 axis=${axisOf(d, 0).id} gap_counts=3`,
    ids: ['reason:segment_boundary_discontinuous', 'profile:program.joins'],
  },
  {
    name: 'a format error and a live-machine error: the format reason (digest first)',
    file: (d) => base(d, { planId: '', mutateHeader: (h) => { (h.segments as any)[0].block.sha256 = `sha256:${'0'.repeat(64)}`; } }),
    label: 'block_sha256_mismatch',
    ids: ['rule:op.prepare_program.check_order'],
    format: true,
  },
  {
    name: 'identity missing and a torch bit: identity first',
    file: (d) => ({ ...weldWithTorch(d), programId: '' }),
    label: 'program_identity_missing',
    ids: ['rule:op.prepare_program.check_order', 'profile:program.check_order'],
  },
];

describe('refusals', () => {
  for (const c of CASES) {
    test(`${c.name}: 409 ${c.label}`, covers(...c.ids), async ({ cell, client, description, skip }) => {
      if (!c.format) unfitSkip(description, skip, c.outputs);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      const r = await postProgram(client, s, encodeProgram(c.file(description)));
      expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: c.label });
      const want = c.text?.(description);
      if (typeof want === 'string') expect(r.reply.error).toBe(want);
      else if (want) expect(r.reply.error).toMatch(want);
      // nothing was prepared
      const st = (await readStatus(client)) as unknown as { execution: Data };
      expect(st.execution.handles.filter((h: Data) => h.state === 'prepared')).toEqual([]);
    });
  }

  test(
    'limit evidence: exact for a sample, the Hermite extremum for an interval, the ceiling for a speed; absent for acceleration',
    covers(
      'field:LimitViolation.kind', 'field:LimitViolation.segment', 'field:LimitViolation.sample', 'field:LimitViolation.axis', 'field:LimitViolation.value', 'field:LimitViolation.limit', 'field:LimitViolation.unit',
      'rule:limit_violation.with_reasons', 'profile:program.acceleration',
    ),
    async ({ cell, client, description: d, skip }) => {
      unfitSkip(d, skip);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      // integral float64 values arrive as JSON integers (bigint here): compare numbers
      const ev = async (f: ProgramFile) => {
        const v = ((await postProgram(client, s, encodeProgram(f))).reply.data as Data | undefined)?.limit_violation;
        return v && { ...v, value: Number(v.value), limit: Number(v.limit) };
      };
      const j3 = axisOf(d, 2);
      expect(await ev(single(d, 2, [j3.max, j3.max + 1e-6, j3.max], [0, 0, 0]))).toEqual({ kind: 'position', segment: 0n, sample: 1n, axis: j3.id, value: j3.max + 1e-6, limit: j3.max, unit: 'rad' });
      const j1 = axisOf(d, 0);
      expect(await ev(single(d, 0, [0, 0.0115, 0.023], [0, 2.3, 0], { maxAbsQd: withCol(CEIL, 0, 3) }))).toEqual({ kind: 'velocity', segment: 0n, sample: 1n, axis: j1.id, value: 2.3, limit: j1.maxVelocity, unit: 'rad/s' });
      const j6 = axisOf(d, 5);
      const bow = await ev(single(d, 5, [j6.max - 0.04, j6.max - 0.01, j6.max], [0, 4, 0]));
      const peak = sampledHermite(j6.max - 0.01, 4, j6.max, 0).qMax;
      expect(peak).toBeGreaterThan(j6.max);
      expect({ ...bow, value: undefined }).toEqual({ kind: 'position', segment: 0n, sample: 1n, axis: j6.id, value: undefined, limit: j6.max, unit: 'rad' });
      expect(Math.abs(bow.value - peak)).toBeLessThan(1e-9);
      const fast = await ev(single(d, 0, [0.1, 0.115, 0.13], [0, 1.2, 0]));
      const vPeak = sampledHermite(0.1, 0, 0.115, 1.2).vPeak;
      expect(vPeak).toBeGreaterThan(2);
      expect({ ...fast, value: undefined }).toEqual({ kind: 'velocity', segment: 0n, sample: 0n, axis: j1.id, value: undefined, limit: Math.min(j1.maxVelocity, CEIL[0]!), unit: 'rad/s' });
      expect(Math.abs(fast.value - vPeak)).toBeLessThan(1e-6);
      expect(await ev(single(d, 8, [0.8, 0.80025, 0.8005], [0, 0.025, 0]))).toBeUndefined();
      // at the limit exactly is inside (no slack either way)
      const at = await postProgram(client, s, encodeProgram(single(d, 2, [j3.max - 1e-6, j3.max, j3.max], [0, 0, 0])));
      expect({ status: at.status, error: at.reply.error }).toEqual({ status: 200, error: undefined });
    },
  );

  test(
    'the fence travels in headers: X-Control-Generation must be a nonzero decimal uint64; a malformed session is control_session_stale',
    covers('reason:invalid_control_generation', 'rule:op.prepare_program.headers'),
    async ({ cell, client, description, skip }) => {
      unfitSkip(description, skip);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      const bytes = encodeProgram(base(description));
      for (const g of ['0', '', 'x1', '18446744073709551616', '-1', '01', '1.0']) {
        const r = await postProgram(client, { session: s.session, generation: 1n }, bytes, { 'x-control-generation': g });
        expect({ g, status: r.status, label: r.label }).toEqual({ g, status: 409, label: 'invalid_control_generation' });
      }
      const stale = await postProgram(client, { session: 'x'.repeat(64), generation: s.generation }, bytes);
      expect({ status: stale.status, label: stale.label }).toEqual({ status: 409, label: 'control_session_stale' });
      const ok = await postProgram(client, s, bytes);
      expect(ok.status).toBe(200);
    },
  );

  test(
    'the body limit: 39298580 bytes are read and judged as a file, one more byte is 413 body_too_large',
    covers('reason:body_too_large', 'limit:prepare_program_body_bytes', 'limit:dense_admission_body_bytes', 'rule:dense_admission.body_bytes'),
    async ({ cell, client }) => {
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      // header_len 0: a body exactly at the limit is read whole and refused as a file
      const at = await postProgram(client, s, new Uint8Array(LIMIT));
      expect({ status: at.status, label: at.label }).toEqual({ status: 409, label: 'header_json_invalid' });
      const over = await postProgram(client, s, new Uint8Array(LIMIT + 1));
      expect({ status: over.status, label: over.label }).toEqual({ status: 413, label: 'body_too_large' });
    },
  );

  test(
    'one upload at a time: a second is busy with the native receipt, Reason 5 (capacity)',
    covers('reason:busy', 'rule:op.prepare_program.one_upload', 'rule:op.prepare_program.busy_native_reason', 'rule:native.reason_capacity'),
    async ({ cell, client, description, target, skip }) => {
      unfitSkip(description, skip);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      const bytes = encodeProgram(base(description));
      // The first upload on its own connection: headers and 100 bytes, the rest held back.
      const sock = createConnection(target.address);
      await new Promise<void>((r) => sock.once('connect', () => r()));
      sock.write(
        `POST /v1/program HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\nContent-Length: ${bytes.length}\r\n` +
          `X-Control-Session: ${s.session}\r\nX-Control-Generation: ${s.generation}\r\n\r\n`,
      );
      sock.write(bytes.subarray(0, 100));
      let answer = '';
      sock.on('data', (c: Buffer) => (answer += c.toString('latin1')));
      // the service admits it when its headers arrive: ask until the slot shows taken
      let second = await postProgram(client, s, bytes);
      for (let i = 0; i < 50 && second.status === 200; i++) second = await postProgram(client, s, bytes);
      expect({ status: second.status, label: second.label }).toEqual({ status: 409, label: 'busy' });
      // checkReply has read native_result as a whole CommandResult (every field present)
      expect(second.reply.native_result).toMatchObject({ Result: 1, Reason: 5, Handle: 0n });
      sock.write(bytes.subarray(100));
      for (let i = 0; i < 500 && !/\r\n\r\n[\s\S]*\}/.test(answer); i++) await new Promise((r) => setTimeout(r, 20));
      sock.destroy();
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
      expect((await postProgram(client, s, bytes)).status).toBe(200);
    },
  );
  test(
    'a client that goes away mid-upload frees the slot and leaves nothing prepared',
    covers('rule:op.prepare_program.one_upload'),
    async ({ cell, client, description, target, skip }) => {
      unfitSkip(description, skip);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      const bytes = encodeProgram(base(description));
      const sock = createConnection(target.address);
      await new Promise<void>((r) => sock.once('connect', () => r()));
      sock.write(
        `POST /v1/program HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\nContent-Length: ${bytes.length}\r\n` +
          `X-Control-Session: ${s.session}\r\nX-Control-Generation: ${s.generation}\r\n\r\n`,
      );
      sock.write(bytes.subarray(0, 100));
      // wait until the service holds the slot for it, then disconnect
      let probe = await postProgram(client, s, bytes);
      for (let i = 0; i < 50 && probe.status === 200; i++) probe = await postProgram(client, s, bytes);
      expect(probe.label).toBe('busy');
      const newest = async () => (((await readStatus(client)) as unknown as { execution: Data }).execution.handles as Data[]).reduce((m, h) => (h.handle > m ? h.handle : m), 0n);
      const before = await newest();
      sock.destroy();
      let after = await postProgram(client, s, bytes);
      for (let i = 0; i < 50 && after.label === 'busy'; i++) {
        await new Promise((r) => setTimeout(r, 20));
        after = await postProgram(client, s, bytes);
      }
      expect({ status: after.status, error: after.reply.error }).toEqual({ status: 200, error: undefined });
      // exactly one new handle number: the one just admitted, none for the abandoned upload
      expect(await newest()).toBe(before + 1n);
    },
  );
});

describe('axis maps on other machines', () => {
  test(
    'a one-rad-axis machine: column 1 drives it, other columns must be idle and unset (unmapped_dense_axis); markers without cell I/O are io_not_configured',
    covers('reason:unmapped_dense_axis', 'rule:dense_admission.axis_map', 'rule:dense_admission.unmapped_column', 'reason:io_not_configured'),
    async ({ variant }) => {
      const t = await variant({ machine: 'bench-two-axis' });
      const client = t.client();
      const d = (await client.describe()).reply.data as unknown as Description;
      const cell = new Cell(client, d.binding);
      try {
        const s = await cell.hold({ requested_lease_ms: 5_000 });
        const q0 = Q0.map(() => 0.1);
        const q1 = withCol(q0, 0, 0.12);
        const one = (extra: Partial<ProgramFile> = {}) => ({ segments: [move('m', q0, q1, 51)], manifestRevision: d.binding.revision, axisMask: 0x1, ...extra });
        const ok = await postProgram(client, s, encodeProgram(one()));
        expect({ status: ok.status, error: ok.reply.error }).toEqual({ status: 200, error: undefined });
        expect((ok.reply.data as Data).axis_mask).toBe(1n);
        const masked = await postProgram(client, s, encodeProgram(one({ axisMask: 0x3 })));
        expect({ status: masked.status, error: masked.reply.error }).toEqual({ status: 409, error: 'unmapped_dense_axis: J2' });
        const moving = await postProgram(client, s, encodeProgram(one({ segments: [move('m', q0, withCol(q1, 4, 0.12), 51)] })));
        expect({ status: moving.status, error: moving.reply.error }).toEqual({ status: 409, error: 'unmapped_dense_axis: J5' });
        const io = await postProgram(client, s, encodeProgram(one({ markers: [{ segment: 0, sample: 1, action: 'clamp', value: true }] })));
        expect({ status: io.status, label: io.label }).toEqual({ status: 409, label: 'io_not_configured' });
      } finally {
        await cell.cleanup();
      }
    },
  );

  test(
    'a machine with ten rad axes cannot take the nine dense columns: dense_axis_map_requires_nine_ids',
    covers('reason:dense_axis_map_requires_nine_ids', 'rule:dense_admission.axis_map'),
    async ({ variant }) => {
      const nine = JSON.parse(readFileSync(fileURLToPath(new URL('../../fixtures/machines/nine-axis.json', import.meta.url)), 'utf8'));
      nine.axes.push({ ...nine.axes[8], name: 'J10', slave_position: 10 });
      const dir = mkdtempSync(join(tmpdir(), 'hil-ten-axis-'));
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, 'ten-axis.json');
      writeFileSync(file, JSON.stringify(nine));
      const t = await variant({ machine: file });
      const client = t.client();
      const d = (await client.describe()).reply.data as unknown as Description;
      expect(d.axes.length).toBe(10);
      const cell = new Cell(client, d.binding);
      try {
        const s = await cell.hold({ requested_lease_ms: 5_000 });
        const r = await postProgram(client, s, encodeProgram({ segments: [move('m', Q0, Q1, 51)], manifestRevision: d.binding.revision }));
        expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'dense_axis_map_requires_nine_ids' });
      } finally {
        await cell.cleanup();
      }
    },
  );

  test(
    'a machine with no rad axis has no dense axis map either: dense_axis_map_requires_nine_ids (the "none" side)',
    covers('reason:dense_axis_map_requires_nine_ids', 'rule:dense_admission.axis_map'),
    async ({ variant }) => {
      // The two-axis bench with its rotary axis made linear (a lead like the other's): only m axes.
      const bench = JSON.parse(readFileSync(fileURLToPath(new URL('../../fixtures/machines/bench-two-axis.json', import.meta.url)), 'utf8'));
      const r1 = bench.axes[0];
      bench.axes[0] = { ...r1, type: 'linear', lead_m_per_rev: 0.01, gear_ratio: undefined, wire_revs_per_axis_rev: 1, limits: { ...bench.axes[1].limits } };
      const dir = mkdtempSync(join(tmpdir(), 'hil-linear-'));
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, 'all-linear.json');
      writeFileSync(file, JSON.stringify(bench));
      const t = await variant({ machine: file });
      const client = t.client();
      const d = (await client.describe()).reply.data as unknown as Description & { axes: Array<{ position_unit: string }> };
      expect(d.axes.map((a) => a.position_unit)).toEqual(d.axes.map(() => 'm'));
      const cell = new Cell(client, d.binding);
      try {
        const s = await cell.hold({ requested_lease_ms: 5_000 });
        const r = await postProgram(client, s, encodeProgram({ segments: [dwell('still', Q0, 3)], manifestRevision: d.binding.revision, axisMask: 0 }));
        expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'dense_axis_map_requires_nine_ids' });
      } finally {
        await cell.cleanup();
      }
    },
  );
});
