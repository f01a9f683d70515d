// prepare_program admission (document 1 part 4 prepare_program, part 2 "Program", "Program limit
// evidence", part 8 limits; document 2 "Admission by the control service"). Files are written with the
// harness's own encoder; the limit evidence is checked against a Hermite extremum computed here.

import { PassThrough } from 'node:stream';
import { request } from 'undici';
import { encodeDense, restToRestSamples } from '../../harness/oracle/dense.ts';
import type { DenseSpec } from '../../harness/oracle/dense.ts';
import { covers, describe, expect, test } from '../../harness/fixture.ts';
import { postProgram } from './upload.ts';

const LIMIT = 39298580;
const CEIL = [2, 2, 2, 4, 4, 5, 1, 1.5, 1];
const Q0 = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];
const Q1 = Q0.map((x) => x + 0.05);

function spec(edit?: (s: DenseSpec & { segments: any[] }) => void): Uint8Array {
  const s: DenseSpec & { segments: any[] } = {
    planId: 'plan:admission', programId: 'admission', programDigest: 'sha256:' + 'c'.repeat(64), manifestRevision: 1n, maxAbsQd: CEIL,
    segments: [
      { kind: 'freespace', sourceId: 'a', samples: restToRestSamples(Q0, Q1, 11) },
      { kind: 'dwell', sourceId: 'b', samples: restToRestSamples(Q1, Q1, 3) },
      { kind: 'freespace', sourceId: 'c', samples: restToRestSamples(Q1, Q0, 11) },
    ],
  };
  edit?.(s);
  return encodeDense(s);
}

describe('prepare_program', () => {
  test('a valid file is admitted with data Program: boundary samples merge, both digests present', covers('field:Program.normalised_samples', 'field:Program.samples', 'field:Program.segments', 'field:Identity.source_digest', 'field:Identity.normalised_digest'), async ({ cell, client }) => {
    const s = await cell.grant();
    const r = await postProgram(client, s, spec());
    expect({ status: r.status, label: r.label }).toEqual({ status: 200, label: undefined });
    const d = r.reply.data as Record<string, any>;
    expect([d.samples, d.segments, d.normalised_samples]).toEqual([25n, 3n, 23n]);
    expect(d.axis_mask).toBe(0x1ffn);
    expect(d.requires_process_io).toBe(false);
    expect(d.identity.plan_id).toBe('plan:admission');
    expect(d.identity.manifest_revision).toBe(1n);
    expect(d.identity.source_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(d.identity.normalised_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  test('X-Control-Generation must be a nonzero decimal uint64', covers('reason:invalid_control_generation', 'rule:op.prepare_program.headers'), async ({ cell, client }) => {
    const s = await cell.grant();
    for (const g of ['0', '', 'x1', '18446744073709551616', '-1']) {
      const r = await postProgram(client, { session: s.session, generation: 1n }, spec(), { 'x-control-generation': g });
      expect({ status: r.status, label: r.label }, g).toEqual({ status: 409, label: 'invalid_control_generation' });
    }
  });

  test('the body limit: 39298580 bytes are read, one more is 413 body_too_large', covers('reason:body_too_large', 'limit:prepare_program_body_bytes'), async ({ cell, client }) => {
    const s = await cell.grant();
    // Zero bytes: header_len 0, so a body exactly at the limit is read and refused as a file.
    const at = await postProgram(client, s, new Uint8Array(LIMIT));
    expect({ status: at.status, label: at.label }).toEqual({ status: 409, label: 'header_json_invalid' });
    const over = await postProgram(client, s, new Uint8Array(LIMIT + 1));
    expect({ status: over.status, label: over.label }).toEqual({ status: 413, label: 'body_too_large' });
  });

  test('one upload at a time: a second is busy with native_result.Reason 5', covers('reason:busy', 'rule:op.prepare_program.one_upload', 'rule:op.prepare_program.busy_native_reason'), async ({ cell, client }) => {
    const s = await cell.grant();
    const bytes = spec();
    const slow = new PassThrough();
    const first = request('http://localhost/v1/program', {
      method: 'POST', dispatcher: client.agent, body: slow,
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length), 'x-control-session': s.session, 'x-control-generation': String(s.generation) },
    });
    slow.write(bytes.subarray(0, 100));
    await new Promise((r) => setTimeout(r, 300));
    const second = await postProgram(client, s, bytes);
    expect({ status: second.status, label: second.label }).toEqual({ status: 409, label: 'busy' });
    expect((second.reply.native_result as Record<string, unknown>).Reason).toBe(5n);
    slow.end(bytes.subarray(100));
    const r1 = await first;
    await r1.body.arrayBuffer();
    expect(r1.statusCode).toBe(200);
    expect((await postProgram(client, s, bytes)).status).toBe(200);
  });

  test('identity fields must be nonempty', covers('reason:program_identity_missing'), async ({ cell, client }) => {
    const s = await cell.grant();
    for (const field of ['plan_id', 'program_id', 'program_digest']) {
      const r = await postProgram(client, s, spec((x) => { x.mutateHeader = (h) => { h[field] = ''; }; }));
      expect({ status: r.status, label: r.label }, field).toEqual({ status: 409, label: 'program_identity_missing' });
    }
  });

  test('a torch bit is refused: process_io_executor_not_qualified', covers('reason:process_io_executor_not_qualified'), async ({ cell, client }) => {
    const s = await cell.grant();
    const r = await postProgram(client, s, spec((x) => { x.segments[1] = { kind: 'weld', sourceId: 'w', samples: restToRestSamples(Q1, Q1, 3, 0.01, 1) }; }));
    expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'process_io_executor_not_qualified' });
  });

  test('a Hermite interval bowing past a position limit: native_segment_rate_exceeded with the curve maximum as evidence', covers('reason:native_segment_rate_exceeded', 'field:LimitViolation.value', 'field:LimitViolation.limit'), async ({ cell, client, description }) => {
    const s = await cell.grant();
    const j6 = (description as any).axes?.[5]?.id ?? 'J6';
    const max = 6.2; // fixtures/machines/nine-axis.json J6 limits.max
    const qs = [max - 0.04, max - 0.01, max];
    const vs = [0, 4, 0];
    const rows = qs.map((v, i) => ({ t: i * 0.01, q: Q0.map((x, j) => (j === 5 ? v : x)), qd: Q0.map((_, j) => (j === 5 ? vs[i]! : 0)) }));
    const bytes = spec((x) => { x.segments = [{ kind: 'freespace', sourceId: 'overshoot', samples: rows }]; });
    const r = await postProgram(client, s, bytes);
    expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'native_segment_rate_exceeded' });
    expect(r.reply.error).toBe(`native_segment_rate_exceeded: segment=0 sample=1 axis=${j6}`);
    // Independent maximum of the cubic Hermite from (q1, v1) to (q2, 0) over 0.01 s, by dense sampling.
    let peak = -Infinity;
    for (let k = 0; k <= 200000; k++) {
      const u = k / 200000;
      peak = Math.max(peak, (2 * u ** 3 - 3 * u ** 2 + 1) * qs[1]! + (u ** 3 - 2 * u ** 2 + u) * 0.01 * vs[1]! + (-2 * u ** 3 + 3 * u ** 2) * qs[2]!);
    }
    const ev = (r.reply.data as any).limit_violation;
    expect({ kind: ev.kind, segment: ev.segment, sample: ev.sample, axis: ev.axis, limit: ev.limit, unit: ev.unit }).toEqual({ kind: 'position', segment: 0n, sample: 1n, axis: j6, limit: max, unit: 'rad' });
    expect(peak).toBeGreaterThan(max);
    expect(Math.abs(ev.value - peak)).toBeLessThan(1e-9);
  });
});
