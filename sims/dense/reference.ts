// The logical content of the reference .rdt (fixtures/dense/reference.rdt): three segments on the
// nine-axis cell (fixtures/machines/nine-axis.json, columns J1..J9), every value inside that cell's
// position limits and velocity ceilings. `npx tsx sims/dense/reference.ts` rewrites the fixture and
// its sidecar; the tests prove the encoder still reproduces it byte for byte.

import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { COLS, decode, encode } from './codec.ts';
import type { SegmentContent, TrajectoryContent } from './codec.ts';

const DT = 0.01;
/** Per-axis ceilings below the nine-axis cell's max_velocity (2.2 2.2 2.5 4.5 4.5 6 1.5 1.8 1.2). */
export const REFERENCE_CEILING = [2, 2, 2, 4, 4, 5, 1, 1.5, 1];
const HOME = [0, 0.3, 0.6, 0, -0.5, 0, 0, 0, 0];
const SEAM_START = [0.05, 0.32, 0.58, 0.02, -0.48, 0.03, 0.01, 0.04, -0.02];
const SEAM_END = [0.07, 0.33, 0.575, 0.025, -0.47, 0.035, 0.012, 0.05, -0.025];

/** Rest-to-rest half-cosine move: q(s) = a + d (1 - cos(pi s)) / 2, s = t / T, exact rest at both ends. */
function move(kind: string, sourceId: string, from: number[], to: number[], n: number, torch: number): SegmentContent {
  const T = (n - 1) * DT;
  const t: number[] = [];
  const q: number[] = [];
  const qd: number[] = [];
  const flags: number[] = [];
  for (let i = 0; i < n; i++) {
    t.push(i * DT);
    const edge = i === 0 || i === n - 1;
    const ph = (Math.PI * i) / (n - 1);
    for (let j = 0; j < COLS; j++) {
      const d = to[j]! - from[j]!;
      q.push(i === n - 1 ? to[j]! : from[j]! + (d * (1 - Math.cos(ph))) / 2);
      qd.push(edge ? 0 : ((d * Math.PI) / (2 * T)) * Math.sin(ph));
    }
    flags.push(torch);
  }
  return { kind, sourceId, t, q, qd, flags };
}

export function referenceContent(): TrajectoryContent {
  return {
    planId: 'plan:reference-0001',
    programId: 'reference_program',
    programDigest: 'sha256:' + '5a'.repeat(32),
    manifestRevision: 7n,
    planRevision: 3n,
    createdAt: '2026-01-15T08:30:00Z',
    axisMask: 0x1ff,
    dtS: DT,
    maxAbsQd: REFERENCE_CEILING,
    segments: [
      move('freespace', 'approach-1', HOME, SEAM_START, 6, 0),
      move('weld', 'seam-1', SEAM_START, SEAM_END, 5, 1),
      move('dwell', 'hold-1', SEAM_END, SEAM_END, 3, 0),
    ],
  };
}

/** The sidecar: logical content (samples included) plus what a decoder must find. */
export function referenceSidecar(): object {
  const c = referenceContent();
  const x = decode(encode(c));
  return {
    file: 'reference.rdt',
    digest: x.digest,
    sample_count: x.t.length,
    header: {
      schema: 'robot.v4.dense-joint-trajectory.v1',
      plan_id: c.planId, program_id: c.programId, program_digest: c.programDigest,
      manifest_revision: Number(c.manifestRevision), plan_revision: Number(c.planRevision), created_at: c.createdAt,
      axis_mask: c.axisMask, dt_s: c.dtS, total_duration_s: x.totalDurationS, max_abs_qd_rad_s: Array.from(c.maxAbsQd),
    },
    segments: c.segments.map((s, k) => ({
      index: k, kind: s.kind, source_id: s.sourceId, sample_count: s.t.length, duration_s: x.segments[k]!.durationS,
      byte_offset: x.segments[k]!.byteOffset, byte_length: x.segments[k]!.byteLength, sha256: x.segments[k]!.sha256,
      t: Array.from(s.t), q: Array.from(s.q), qd: Array.from(s.qd), flags: Array.from(s.flags),
    })),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = new URL('../../fixtures/dense/', import.meta.url);
  writeFileSync(new URL('reference.rdt', dir), encode(referenceContent()));
  writeFileSync(new URL('reference.json', dir), JSON.stringify(referenceSidecar(), null, 1) + '\n');
}
