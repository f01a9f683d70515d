// Dense file format reasons through the control service (document 2 part 7 "File-format reasons";
// document 1 part 4 prepare_program: "every file-format reason of document 2"). Each case is a minimal
// corruption of the reference file fixtures/dense/reference.rdt: a header field edited, or sample bytes
// changed with block and content digests recomputed so that only the intended rule breaks. The service
// checks the digest first (document 2 part 7).

import { postProgram } from '../program/upload.ts';
import { covers, cycleFree, describe, expect, test } from '../../harness/fixture.ts';
import { REC, REF, SIDE, edited, join, q, qd, split, view, type Edit, type Header } from './reference.ts';

// No test here needs the file's cell to cycle on its own (harness/fixture.ts cycleFree).
cycleFree();

const withHeader = (edit: (h: Header) => void) => () => edited({ header: edit });
/** Change sample values in place, then recompute every block digest and the content digest. */
const withSamples = (edit: NonNullable<Edit['samples']>, headerEdit?: (h: Header) => void) => () => edited({ samples: edit, ...(headerEdit ? { header: headerEdit } : {}) });

const CASES: ReadonlyArray<readonly [string, string, () => Uint8Array]> = [
  ['header_truncated', 'blob of 3 bytes', () => REF.slice(0, 3)],
  ['header_truncated', 'header_len one past the end', () => { const b = REF.slice(); view(b).setUint32(0, b.length - 3, false); return b; }],
  ['header_json_invalid', 'header text broken', () => { const b = REF.slice(); b[4] = 0x5b; return b; }],
  ['dense_schema_mismatch', 'schema v2', withHeader((h) => { h.schema = 'robot.v4.dense-joint-trajectory.v2'; })],
  ['axis_count_mismatch', 'axis_count 6', withHeader((h) => { h.axes.axis_count = 6; })],
  ['sample_encoding_mismatch', 'record_bytes 152', withHeader((h) => { h.sample_encoding.record_bytes = 152; })],
  ['limits_invalid', 'a zero ceiling', withHeader((h) => { h.limits.max_abs_qd_rad_s[4] = 0; })],
  ['time_grid_invalid', 'dt_s 0', withHeader((h) => { h.sampling.dt_s = 0; })],
  ['segments_empty', 'no segments', withHeader((h) => { h.segments = []; })],
  ['segment_index_out_of_order', 'index 2 at position 1', withHeader((h) => { h.segments[1].index = 2; })],
  ['kind_invalid', 'kind hold', withHeader((h) => { h.segments[2].kind = 'hold'; })],
  ['segment_too_short', 'sample_count 1', withHeader((h) => { h.segments[2].sample_count = 1; })],
  ['block_layout_invalid', 'offset off by one', withHeader((h) => { h.segments[1].block.byte_offset += 1; })],
  ['blob_length_mismatch', 'one trailing byte', () => { const b = new Uint8Array(REF.length + 1); b.set(REF); return b; }],
  ['total_sample_count_mismatch', 'total one more', withHeader((h) => { h.sampling.total_sample_count += 1; })],
  ['sample_count_overflow', 'one segment of 250001 samples', () => {
    const { header } = split(REF);
    header.sampling.total_sample_count = 250001;
    header.segments.splice(1);
    Object.assign(header.segments[0], { sample_count: 250001 });
    header.segments[0].block.byte_length = 250001 * REC;
    return join(header, new Uint8Array(250001 * REC));
  }],
  ['block_sha256_mismatch', 'one sample bit flipped', () => { const b = REF.slice(); b[4 + view(b).getUint32(0, false) + SIDE.segments[1].byte_offset + 20] ^= 1; return b; }],
  ['trajectory_digest_mismatch', 'last digest digit changed', withHeader((h) => { h.trajectory_digest = h.trajectory_digest.slice(0, -1) + (h.trajectory_digest.endsWith('0') ? '1' : '0'); })],
  ['reserved_flags_set', 'flag bit 1', withSamples((v, at) => v.setUint8(at(1, 2) + 152, 3))],
  ['nonfinite_sample', 'NaN position', withSamples((v, at) => v.setFloat64(at(0, 2) + q(5), NaN, false))],
  ['time_grid_invalid', 'step off by 2e-9 s', withSamples((v, at) => v.setFloat64(at(1, 3), v.getFloat64(at(1, 3), false) + 2e-9, false))],
  ['qd_limit_exceeded', 'J7 just above its 1 rad/s ceiling', withSamples((v, at) => v.setFloat64(at(0, 2) + qd(6), 1.0000001, false))],
  ['torch_outside_weld', 'torch in the dwell', withSamples((v, at) => v.setUint8(at(2, 1) + 152, 1))],
  ['q_step_exceeded', 'J9 step past 1.25 x 1 x 0.01', withSamples((v, at) => v.setFloat64(at(2, 1) + q(8), v.getFloat64(at(2, 1) + q(8), false) + 0.0126, false))],
  ['boundary_qd_nonzero', 'last weld sample at 2e-6 rad/s', withSamples((v, at) => v.setFloat64(at(1, 4) + qd(3), 2e-6, false))],
  ['boundary_q_discontinuity', 'dwell starts 1.1e-3 rad away', withSamples((v, at) => { for (let i = 0; i < 3; i++) v.setFloat64(at(2, i) + q(0), v.getFloat64(at(2, i) + q(0), false) + 0.0011, false); })],
  ['duration_mismatch', 'weld duration_s 2e-9 s long', withSamples(() => undefined, (h) => { h.segments[1].duration_s += 2e-9; h.sampling.total_duration_s += 2e-9; })],
];

describe('every file-format reason through POST /v1/program', () => {
  for (const [reason, what, make] of CASES) {
    const id = `format_reason:${reason}`;
    test(`${reason}: ${what}`, covers(id, `reason:${reason}`), async ({ cell, client }) => {
      const body = make(); // built before the grant: a 250001-sample file takes longer than a lease on a loaded machine
      const s = await cell.hold();
      const r = await postProgram(client, s, body);
      expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: reason });
      expect(r.reply.operation).toBe('prepare_program');
    });
  }
  test('the reference file itself passes every format rule and reaches the live checks (manifest revision 7 is not the service\'s 1)', covers('reason:manifest_revision_mismatch'), async ({ cell, client }) => {
    const s = await cell.hold();
    const r = await postProgram(client, s, REF);
    expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'manifest_revision_mismatch' });
  });
});
