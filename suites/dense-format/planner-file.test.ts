// The samples of a dense file the weld planner wrote (document 2 part 2 "Sample record"), read by the
// harness at the documented offsets and compared with what can be predicted without the planner's code:
// segment-local times on the dt_s grid, positions that start and end where the plan result's knots say
// (connecting_trajectories[] for the moves, seams[].trajectory for the weld, the held axes at their held
// value), velocities that are the time derivative of those positions. Then the three codecs on one file
// (document 2 part 9): the planner's encoder, the harness's decoder and encoder, and the control service's
// decoder must agree on the content digest of the same bytes.

import { createHash } from 'node:crypto';
import { covers, describe, expect, inProfile, type Description } from '../../harness/fixture.ts';
import { decodeDense, encodeDense, SAMPLE_BYTES, type DecodedDense } from '../../harness/oracle/dense.ts';
import { parseExact } from '../../harness/oracle/json.ts';
import { machineOf } from '../../harness/machine.ts';
import { denseFitDecoded } from './reference.ts';
import { postProgram } from '../program/upload.ts';
import { DENSE, obj, planDense, plannerTest as test, usePlanner, weldplan, type Planner } from '../planner/toolkit.ts';

const RAD = Math.PI / 180;
const STUB = 'profile:planner.stub_planning';
/** Record offsets written out here from document 2's table, not taken from the oracle's table. */
const AT = { t: 0, q: (j: number) => 8 + 8 * j, qd: (j: number) => 80 + 8 * j, flags: 152 };

interface Planned {
  result: Record<string, any>;
  blob: Uint8Array;
}
let planned: Promise<Planned> | undefined;
/** The fixture program planned once with dense=true for this file, at the cell's pair revision. */
function plan(p: Planner, revision: bigint): Promise<Planned> {
  planned ??= planDense(p, weldplan(), { ...DENSE, manifest_revision: revision });
  return planned;
}

interface Rows {
  kind: string;
  sourceId: string;
  t: number[];
  q: number[][];
  qd: number[][];
  flags: number[];
}

/** Every segment's records read straight from the bytes: u32 big-endian header_len, JSON header, blocks. */
function readRows(blob: Uint8Array): { header: Record<string, any>; rows: Rows[] } {
  const dv = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  const n = dv.getUint32(0, false);
  const header = obj(parseExact(blob.subarray(4, 4 + n)));
  const rows = (header.segments as Record<string, any>[]).map((s) => {
    const start = 4 + n + Number(s.block.byte_offset);
    const r: Rows = { kind: s.kind, sourceId: s.source_id, t: [], q: [], qd: [], flags: [] };
    for (let i = 0; i < Number(s.sample_count); i++) {
      const at = start + i * 153;
      r.t.push(dv.getFloat64(at + AT.t, false));
      r.q.push(Array.from({ length: 9 }, (_, j) => dv.getFloat64(at + AT.q(j), false)));
      r.qd.push(Array.from({ length: 9 }, (_, j) => dv.getFloat64(at + AT.qd(j), false)));
      r.flags.push(dv.getUint8(at + AT.flags));
    }
    return r;
  });
  return { header, rows };
}

const deg = (row: readonly (number | bigint)[]) => row.map((x) => Number(x) * RAD);

describe('a planner-written dense file read at the documented offsets', () => {
  test(
    'times, positions, velocities and flags of every sample match the plan result',
    covers('layout:dense_sample:t_s', 'layout:dense_sample:q_rad', 'layout:dense_sample:qd_rad_s', 'layout:dense_sample:flags', 'rule:dense.columns', 'rule:dense.segment_clocks', 'rule:dense.big_endian'),
    async ({ planner, skip, description }) => {
      const p = usePlanner({ skip }, planner);
      const { result, blob } = await plan(p, (description as Description).binding.revision);
      const { header, rows } = readRows(blob);
      const dt = Number(header.sampling.dt_s);
      expect(dt).toBe(0.01);
      const conn = result.connecting_trajectories as Record<string, any>[];
      const seam = (result.seams as Record<string, any>[])[0]!;
      // The held axes (document 2 seams[].held: a map of axis to value, in degrees) stay at their value.
      const cols = (seam.axis_names as string[]).map((a) => Number(a.slice(1)) - 1);
      const heldCols = Object.keys(seam.held ?? {}).map((a) => ({ col: Number(a.slice(1)) - 1, rad: Number(seam.held[a]) * RAD }));
      await inProfile(STUB, () => {
        expect(seam.axis_names).toEqual(['J1', 'J2', 'J3', 'J4', 'J5', 'J6', 'J7', 'J8', 'J9']);
        expect(heldCols.map((h) => h.col)).toEqual([6, 7, 8]);
        expect(rows.map((r) => r.kind)).toEqual(['freespace', 'freespace', 'weld', 'freespace', 'freespace']);
      });
      expect(rows.filter((r) => r.kind === 'weld')).toHaveLength(1);
      // Freespace segments and connecting moves, both in execution order: the k-th of each is one move.
      const freespace = rows.filter((r) => r.kind === 'freespace');
      const moveOf = (r: Rows) => conn[freespace.indexOf(r)];
      expect(freespace.length, 'one freespace segment per connecting move').toBe(conn.length);

      for (const [k, r] of rows.entries()) {
        const n = r.t.length;
        const where = `segment ${k} (${r.sourceId})`;
        // t_s: segment-local, from 0.0 on the dt_s grid; the last equals the segment's duration.
        expect(r.t[0], where).toBe(0);
        r.t.forEach((t, i) => expect(Math.abs(t - i * dt), `${where} t_s of sample ${i}`).toBeLessThanOrEqual(1e-9));
        expect(r.t[n - 1]).toBe(Number(result.dense.segments[k].duration_s));
        // q_rad: from and to the knots the plan result gives for this segment (degrees rounded to 1e-6).
        // A knot holds one angle per commanded axis (seams[].axis_names, in column order).
        const knots = r.kind === 'weld' ? seam.trajectory.knots_deg : moveOf(r)!.knots_deg;
        const [from, to] = [deg(knots[0]), deg(knots.at(-1))];
        for (const [k, col] of cols.entries()) {
          expect(Math.abs(r.q[0]![col]! - from[k]!), `${where} first q J${col + 1}`).toBeLessThan(1e-7);
          expect(Math.abs(r.q[n - 1]![col]! - to[k]!), `${where} last q J${col + 1}`).toBeLessThan(1e-7);
        }
        // A column the cell does not command holds one position (document 2 part 7 "Admission").
        for (let j = 0; j < 9; j++) if (!cols.includes(j)) for (const row of r.q) expect(row[j], `${where} uncommanded J${j + 1}`).toBe(r.q[0]![j]);
        // Held columns (the stub: J7-J9, positioner tables and turn) stay at their held values.
        for (const row of r.q) for (const h of heldCols) expect(Math.abs(row[h.col]! - h.rad), `${where} held J${h.col + 1}`).toBeLessThan(1e-7);
        // qd_rad_s: at rest at both ends (document 2 part 2). That qd is also the time derivative of q within 2%
        // of the segment's peak speed (central difference) holds for the stub's smooth profiles; document 2 sets
        // no such bound (a planner whose moves stop at each via knot is only C1 there), so it is the stub's.
        for (let j = 0; j < 9; j++) {
          expect(Math.abs(r.qd[0]![j]!), `${where} first qd`).toBeLessThanOrEqual(1e-6);
          expect(Math.abs(r.qd[n - 1]![j]!), `${where} last qd`).toBeLessThanOrEqual(1e-6);
        }
        await inProfile(STUB, () => {
          for (let j = 0; j < 9; j++) {
            const peak = Math.max(...r.qd.map((v) => Math.abs(v[j]!)));
            for (let i = 1; i < n - 1; i++) {
              const diff = (r.q[i + 1]![j]! - r.q[i - 1]![j]!) / (2 * dt);
              expect(Math.abs(r.qd[i]![j]! - diff), `${where} qd J${j + 1} sample ${i}: ${r.qd[i]![j]} vs ${diff}`).toBeLessThanOrEqual(0.02 * peak + 1e-9);
            }
          }
        });
        // flags: bits 1-7 reserved, the torch (bit 0) only inside a weld; the stub never sets it in a
        // simulation program (its decision).
        for (const f of r.flags) expect(r.kind === 'weld' ? [0, 1] : [0], where).toContain(f);
        await inProfile(STUB, () => expect(new Set(r.flags), where).toEqual(new Set([0])));
      }
      // The weld moves the arm: some arm column has a nonzero speed inside the weld.
      const weld = rows.find((r) => r.kind === 'weld')!;
      expect(Math.max(...weld.qd.flatMap((v) => v.slice(0, 6).map(Math.abs)))).toBeGreaterThan(0.01);
    },
  );

  test(
    'three codecs agree on one file: the planner\'s bytes, the harness\'s decoder and re-encoding, and the control service\'s admission give one content digest',
    covers('planner:versioning.three_codecs'),
    async ({ planner, skip, description, cell, client }) => {
      const p = usePlanner({ skip }, planner);
      const { result, blob } = await plan(p, (description as Description).binding.revision);
      const digest = result.dense.trajectory_digest as string;
      // The harness's decoder recomputes the planner's digest from the bytes.
      const x = decodeDense(blob);
      expect(x.trajectoryDigest).toBe(digest);
      // The harness's encoder writes the decoded content again: the blocks are the same bytes.
      const again = reencode(x);
      const y = decodeDense(again);
      expect(y.trajectoryDigest).toBe(digest);
      y.segments.forEach((s, k) => expect(s.sha256, `segment ${k} block`).toBe(x.segments[k]!.sha256));
      expect(blocksOf(again)).toEqual(blocksOf(blob));
      // The control service's decoder admits both with that digest as source_digest; on a cell the file
      // does not map to, both pass the format rules and meet the same documented refusal (document 2 part 7).
      const fit = denseFitDecoded(machineOf(description), x);
      if ('skip' in fit) skip(fit.skip);
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      if ('refusal' in fit) {
        for (const [what, bytes] of [['planner file', blob], ['harness re-encoding', again]] as const) {
          const r = await postProgram(client, s, bytes);
          expect({ what, status: r.status, label: r.label }, r.reply.error).toEqual({ what, status: 409, label: fit.refusal });
        }
        skip(`${fit.reason}: the service's digest of an admitted file cannot be shown on this cell`);
      }
      for (const [what, bytes] of [['planner file', blob], ['harness re-encoding', again]] as const) {
        const r = await postProgram(client, s, bytes);
        expect({ what, status: r.status, error: r.reply.error }, JSON.stringify(r.reply.error)).toEqual({ what, status: 200, error: undefined });
        expect((r.reply.data as Record<string, any>).identity.source_digest).toBe(digest);
      }
    },
  );
});

function reencode(x: DecodedDense): Uint8Array {
  return encodeDense({
    planId: x.planId, programId: x.programId, programDigest: x.programDigest, manifestRevision: x.manifestRevision, planRevision: x.planRevision, createdAt: x.createdAt,
    axisMask: x.axisMask, dtS: x.dtS, maxAbsQd: x.maxAbsQd,
    segments: x.segments.map((s) => ({ kind: s.kind, sourceId: s.sourceId, durationS: s.durationS, samples: { t: s.t, q: s.q, qd: s.qd, flags: s.flags } })),
  });
}

/** SHA-256 of the bytes after the header (every block, as stored). */
function blocksOf(b: Uint8Array): string {
  const n = new DataView(b.buffer, b.byteOffset).getUint32(0, false);
  expect((b.length - 4 - n) % SAMPLE_BYTES).toBe(0);
  return createHash('sha256').update(b.subarray(4 + n)).digest('hex');
}
