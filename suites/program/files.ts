// Program files for the program suites, written with the harness's own dense encoder
// (harness/oracle/dense.ts, document 2 part 2), never with the reference system's codec; and the
// independent expectations a test compares the service's reply with: the executed points after the
// boundary merge and their normalised digest (docs/profile.md "Program admission"), the program clock
// of a sample, and the extremes of a cubic Hermite interval found by dense sampling.

import { createHash } from 'node:crypto';
import { contentDigest, encodeBlock, encodeDense, restToRestSamples, type DenseSampleInput, type DenseSpec } from '../../harness/oracle/dense.ts';
import type { JsonExact } from '../../harness/oracle/json.ts';
import type { Description } from '../../harness/fixture.ts';
import { machineOf } from '../../harness/machine.ts';

export const COLS = 9;
export const DT = 0.01;
/** Header velocity ceilings (document 2 limits.max_abs_qd_rad_s), above every fixture's sample speed. */
export const CEIL = [2, 2, 2, 4, 4, 5, 1, 1.5, 1];

export interface Seg {
  kind: 'freespace' | 'weld' | 'dwell';
  sourceId: string;
  samples: DenseSampleInput[];
}

export interface Marker {
  segment: number;
  sample: number;
  action: string;
  value: boolean;
}

export interface ProgramFile {
  segments: Seg[];
  planId?: string;
  programId?: string;
  programDigest?: string;
  manifestRevision: bigint;
  planRevision?: bigint;
  axisMask?: number;
  /** Header ceilings; CEIL by default. */
  maxAbsQd?: number[];
  markers?: Marker[];
  /** Raw header process_markers (for malformed entries); wins over `markers`. */
  rawMarkers?: JsonExact[];
  mutateHeader?: DenseSpec['mutateHeader'];
}

export const IDENT = { planId: 'plan:program-suite', programId: 'program-suite', programDigest: `sha256:${'c'.repeat(64)}`, planRevision: 7n };

export function encodeProgram(f: ProgramFile): Uint8Array {
  const markers = f.rawMarkers ?? f.markers?.map((m) => ({ segment: BigInt(m.segment), sample: BigInt(m.sample), action: m.action, value: m.value }));
  return encodeDense({
    planId: f.planId ?? IDENT.planId,
    programId: f.programId ?? IDENT.programId,
    programDigest: f.programDigest ?? IDENT.programDigest,
    manifestRevision: f.manifestRevision,
    planRevision: f.planRevision ?? IDENT.planRevision,
    axisMask: f.axisMask ?? 0x1ff,
    dtS: DT,
    maxAbsQd: f.maxAbsQd ?? CEIL,
    segments: f.segments.map((s) => ({ kind: s.kind, sourceId: s.sourceId, samples: s.samples })),
    ...(markers ? { processMarkers: markers } : {}),
    ...(f.mutateHeader ? { mutateHeader: f.mutateHeader } : {}),
  });
}

/** The content digest of the file's segments as document 2 defines it (the expected trajectory_digest). */
export function digestOf(f: ProgramFile): string {
  return contentDigest({
    axisMask: f.axisMask ?? 0x1ff,
    dtS: DT,
    segments: f.segments.map((s) => {
      const block = encodeBlock(columns(s.samples));
      return { kind: s.kind, sourceId: s.sourceId, sampleCount: s.samples.length, block };
    }),
    maxAbsQd: f.maxAbsQd ?? CEIL,
  });
}

function columns(samples: DenseSampleInput[]) {
  const n = samples.length;
  const c = { t: new Float64Array(n), q: new Float64Array(n * COLS), qd: new Float64Array(n * COLS), flags: new Uint8Array(n) };
  samples.forEach((s, i) => {
    c.t[i] = s.t;
    for (let j = 0; j < COLS; j++) {
      c.q[i * COLS + j] = s.q[j] ?? 0;
      c.qd[i * COLS + j] = s.qd[j] ?? 0;
    }
    c.flags[i] = s.flags ?? 0;
  });
  return c;
}

/** A move from q0 to q1 at rest at both ends (half-cosine), n samples. */
export const move = (sourceId: string, q0: number[], q1: number[], n: number, kind: Seg['kind'] = 'freespace'): Seg => ({ kind, sourceId, samples: restToRestSamples(q0, q1, n, DT) });
/** Holding q for n samples. */
export const dwell = (sourceId: string, q: number[], n: number): Seg => move(sourceId, q, q, n, 'dwell');
/** Explicit rows: positions and velocities per sample, t = i x DT. */
export const rows = (sourceId: string, q: number[][], qd: number[][], kind: Seg['kind'] = 'freespace'): Seg => ({
  kind, sourceId, samples: q.map((row, i) => ({ t: i * DT, q: row, qd: qd[i]! })),
});

/** `base` with column j set to v. */
export const withCol = (base: number[], j: number, v: number): number[] => base.map((x, k) => (k === j ? v : x));

export interface ExecutedPoint {
  segment: number;
  localNs: bigint;
  /** ns from program start. */
  tNs: bigint;
  q: number[];
  qd: number[];
  flags: number;
  ioMask: number;
  ioValues: number;
}

/**
 * The executed points (document 2 "Admission": samples - segments + 1). docs/profile.md: at a join the
 * earlier segment's last sample executes and the later segment's first does not; a marker on that first
 * sample acts at the join point. Bit n of the intents is the n-th configured output.
 */
export function executedPoints(f: ProgramFile, outputs: readonly string[] = []): { points: ExecutedPoint[]; pointOf: (segment: number, sample: number) => number } {
  const points: ExecutedPoint[] = [];
  const index: number[][] = [];
  let clock = 0n;
  f.segments.forEach((s, k) => {
    index.push([]);
    s.samples.forEach((x, i) => {
      if (k > 0 && i === 0) {
        index[k]!.push(points.length - 1);
        return;
      }
      const localNs = BigInt(Math.round(x.t * 1e9));
      index[k]!.push(points.length);
      points.push({ segment: k, localNs, tNs: clock + localNs, q: Array.from(x.q), qd: Array.from(x.qd), flags: x.flags ?? 0, ioMask: 0, ioValues: 0 });
    });
    clock += BigInt(Math.round(s.samples.at(-1)!.t * 1e9));
  });
  for (const m of f.markers ?? []) {
    const p = points[index[m.segment]![m.sample]!]!;
    const bit = 1 << outputs.indexOf(m.action);
    p.ioMask |= bit;
    if (m.value) p.ioValues |= bit;
  }
  return { points, pointOf: (segment, sample) => index[segment]![sample]! };
}

/** docs/profile.md "Program admission" normalised_digest, computed here from the file's samples. */
export function normalisedDigest(points: ExecutedPoint[]): string {
  const h = createHash('sha256');
  h.update(Buffer.from('robot.v4.normalised-program.v1\0', 'latin1'));
  const count = Buffer.alloc(8);
  count.writeBigUInt64BE(BigInt(points.length));
  h.update(count);
  for (const p of points) {
    const rec = Buffer.alloc(163);
    rec.writeBigUInt64BE(BigInt(p.segment), 0);
    rec.writeBigUInt64BE(p.localNs, 8);
    for (let j = 0; j < COLS; j++) {
      rec.writeDoubleBE(p.q[j] ?? 0, 16 + 8 * j);
      rec.writeDoubleBE(p.qd[j] ?? 0, 88 + 8 * j);
    }
    rec.writeUInt8(p.flags, 160);
    rec.writeUInt8(p.ioMask, 161);
    rec.writeUInt8(p.ioValues, 162);
    h.update(rec);
  }
  return `sha256:${h.digest('hex')}`;
}

/** The extremes of the cubic Hermite from (q0, v0) to (q1, v1) over DT, by sampling 200001 points. */
export function sampledHermite(q0: number, v0: number, q1: number, v1: number, h = DT): { qMin: number; qMax: number; vPeak: number } {
  let qMin = Infinity;
  let qMax = -Infinity;
  let vPeak = 0;
  for (let k = 0; k <= 200_000; k++) {
    const s = k / 200_000;
    const q = (2 * s ** 3 - 3 * s ** 2 + 1) * q0 + (s ** 3 - 2 * s ** 2 + s) * h * v0 + (-2 * s ** 3 + 3 * s ** 2) * q1 + (s ** 3 - s ** 2) * h * v1;
    const v = ((6 * s ** 2 - 6 * s) * q0 + (3 * s ** 2 - 4 * s + 1) * h * v0 + (-6 * s ** 2 + 6 * s) * q1 + (3 * s ** 2 - 2 * s) * h * v1) / h;
    qMin = Math.min(qMin, q);
    qMax = Math.max(qMax, q);
    if (Math.abs(v) > Math.abs(vPeak)) vPeak = v;
  }
  return { qMin, qMax, vPeak };
}

/** Numbers of a Describe axis (integer literals arrive as bigint). */
export function axisOf(d: Description, i: number) {
  const a = d.axes[i]! as Record<string, unknown>;
  const n = (k: string) => Number(a[k] as number | bigint);
  return { id: a.id as string, min: n('min_position'), max: n('max_position'), maxVelocity: n('max_velocity'), countsPerUnit: n('counts_per_unit'), sign: n('sign') };
}

export const IDENTITY_FIELDS = ['plan_id', 'program_id', 'program_digest', 'trajectory_digest', 'source_digest', 'normalised_digest', 'manifest_revision', 'plan_revision'] as const;

/**
 * Why this cell cannot run the suite's nine-column program files, or undefined when it can: the files
 * command all nine dense columns (axis_mask 0x1ff) around Q0 = 0, 0.1 .. 0.8 rad, and the columns map in
 * order to the axes in rad (document 2 part 7): the cell needs its first nine axes in rad, no other axis
 * in rad, and each column's positions inside its axis's limits. Cells with fewer rad axes meet the
 * documented refusals (unmapped_dense_axis, dense_axis_map_requires_nine_ids), shown in the "other
 * machines" tests on variants made for them. `outputs` names outputs a test's markers drive.
 */
export function nineColumnsUnfit(d: Description, outputs: readonly string[] = []): string | undefined {
  const m = machineOf(d);
  const rad = m.rotaryAxes;
  if (rad.length !== 9 || !m.axes.slice(0, 9).every((a) => a.rotary)) {
    return `the program files command nine rad columns; this cell (${m}) has ${rad.length} axes in rad${rad.length === 9 ? ', not its first nine' : ''}, so the columns do not map (document 2 part 7)`;
  }
  for (let j = 0; j < 9; j++) {
    const a = m.axes[j]!;
    const lo = j * 0.1 - 0.05;
    const hi = j * 0.1 + 0.07;
    if (a.min > lo || a.max < hi) return `the program files move column ${j + 1} between ${lo} and ${hi} rad; ${a.id}'s limits are [${a.min}, ${a.max}]`;
    if (a.maxVelocity < 0.5) return `the program files move column ${j + 1} at up to 0.5 rad/s; ${a.id}'s max_velocity is ${a.maxVelocity}`;
  }
  const missing = outputs.filter((o) => !m.output(o) || m.output(o)!.torch !== (o === 'torch'));
  if (missing.length) return `the test's markers drive outputs ${missing.join(', ')}; this cell's outputs are ${m.outputs.map((o) => o.name).join(', ') || 'none'}`;
  return undefined;
}
