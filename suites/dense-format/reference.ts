// The reference dense file (fixtures/dense/reference.rdt, document 2 part 2) and minimal edits of it for
// the dense-format suites. Edits work on the bytes as a client would: the header parsed and written back
// as JSON, samples changed at their documented offsets (harness/oracle/dense.ts SAMPLE_FIELDS), and the
// block digests and content digest recomputed with the harness's own oracle so that only the intended
// rule breaks.

import { readFileSync } from 'node:fs';
import type { Machine } from '../../harness/machine.ts';
import { SAMPLE_BYTES, SAMPLE_FIELDS, blockSha256, contentDigest, encodeDense, restToRestSamples, type DecodedDense, type DenseSampleInput, type DenseSpec } from '../../harness/oracle/dense.ts';

const DIR = new URL('../../fixtures/dense/', import.meta.url);
export const REF = new Uint8Array(readFileSync(new URL('reference.rdt', DIR)));
/** The fixture's sidecar: logical content (samples included) and the content digest. */
export const SIDE = JSON.parse(readFileSync(new URL('reference.json', DIR), 'utf8'));
export const REC = SAMPLE_BYTES;

const field = (name: string) => SAMPLE_FIELDS.find((f) => f.field === name)!.offset;
/** Byte offsets inside one record (document 2 "Sample record"). */
export const T_AT = field('t_s');
export const q = (j: number) => field('q_rad') + 8 * j;
export const qd = (j: number) => field('qd_rad_s') + 8 * j;
export const FLAGS_AT = field('flags');

export type Header = Record<string, any>;
export const view = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);

export function split(b: Uint8Array): { header: Header; body: Uint8Array } {
  const n = view(b).getUint32(0, false);
  return { header: JSON.parse(new TextDecoder().decode(b.subarray(4, 4 + n))), body: b.slice(4 + n) };
}

/** header_len (u32 big-endian), the header as UTF-8 JSON (`pad` spaces appended), the body. */
export function join(header: Header, body: Uint8Array, pad = 0): Uint8Array {
  const text = new TextEncoder().encode(JSON.stringify(header) + ' '.repeat(pad));
  const out = new Uint8Array(4 + text.length + body.length);
  view(out).setUint32(0, text.length, false);
  out.set(text, 4);
  out.set(body, 4 + text.length);
  return out;
}


/** The block digests and the content digest of `header` and `body`, recomputed in place. */
export function rehash(header: Header, body: Uint8Array): void {
  const blocks = header.segments.map((s: Header) => blockOf(s, body));
  header.segments.forEach((s: Header, k: number) => (s.block.sha256 = blockSha256(blocks[k])));
  header.trajectory_digest = digestOf(header, body);
}

/** The content digest (document 2 "Content digest") of a header and body, as the harness computes it. */
export function digestOf(header: Header, body: Uint8Array): string {
  return contentDigest({
    axisMask: header.axes.axis_mask, dtS: header.sampling.dt_s, maxAbsQd: header.limits.max_abs_qd_rad_s,
    segments: header.segments.map((s: Header) => ({ kind: s.kind, sourceId: s.source_id, sampleCount: s.sample_count, block: blockOf(s, body) })),
  });
}

const blockOf = (s: Header, body: Uint8Array) => body.subarray(s.block.byte_offset, s.block.byte_offset + s.block.byte_length);

export interface Edit {
  /** Sample edits on the body (before digests are recomputed). */
  samples?: (body: DataView, at: (segment: number, sample: number) => number) => void;
  /** Header edits after the digests are recomputed (identity, unknown keys, a stale digest ...). */
  header?: (h: Header) => void;
  /** Header edits before the digests are recomputed (fields inside the content digest). */
  content?: (h: Header) => void;
  /**
   * Recompute the block and content digests after the edits (default when samples or content change);
   * 'blocks' recomputes the block digests only, leaving the header's content digest stale.
   */
  rehash?: boolean | 'blocks';
  /** Spaces appended to the header text (valid JSON whitespace). */
  pad?: number;
}

/** The reference file with `e` applied. */
export function edited(e: Edit, from: Uint8Array = REF): Uint8Array {
  const { header, body } = split(from);
  const at = (k: number, i: number) => Number(header.segments[k].block.byte_offset) + i * REC;
  e.samples?.(view(body), at);
  e.content?.(header);
  const mode = e.rehash ?? (e.samples !== undefined || e.content !== undefined);
  if (mode === 'blocks') {
    const digest = header.trajectory_digest;
    rehash(header, body);
    header.trajectory_digest = digest;
  } else if (mode) rehash(header, body);
  e.header?.(header);
  return join(header, body, e.pad ?? 0);
}

/** Header velocity ceilings of the files built here (below every sample speed of the nine-axis cell). */
export const CEIL = [2, 2, 2, 4, 4, 5, 1, 1.5, 1];
const Q0 = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.02];
const Q1 = [0.02, 0.12, 0.22, 0.32, 0.42, 0.52, 0.62, 0.72, 0.01];
// The weld ends with J1 at 0.004 rad, where 0.004 + 1e-3 - 0.004 is exactly 1e-3 in float64, and J9 at 0,
// where a step of 1.25 x 1 x 0.01 is exactly that product: limit tests can sit exactly on the tolerance.
const Q2 = [0.004, 0.11, 0.23, 0.31, 0.43, 0.51, 0.63, 0.71, 0];

/**
 * A file shaped like the reference (freespace, weld, dwell) but slow enough for every live check of the
 * reference stack's nine-axis cell (the reference fixture's accelerations are above its 8 rad/s^2), so it
 * is admitted: the base for edits whose one side must be admitted. Written with the harness's encoder.
 */
export function base(revision: bigint, spec: Partial<DenseSpec> = {}): Uint8Array {
  return encodeDense({
    planId: 'plan:dense-rules', programId: 'dense_rules', programDigest: `sha256:${'d'.repeat(64)}`, manifestRevision: revision, planRevision: 1n,
    maxAbsQd: CEIL,
    segments: baseSegments(),
    ...spec,
  });
}

/** The base file's segments: 31 freespace samples, 31 weld samples, `dwell` dwell samples. */
export function baseSegments(dwell = 3): DenseSpec['segments'] {
  return [
    { kind: 'freespace', sourceId: 'approach-1', samples: restToRestSamples(Q0, Q1, 31) },
    { kind: 'weld', sourceId: 'seam-1', samples: restToRestSamples(Q1, Q2, 31) },
    { kind: 'dwell', sourceId: 'hold-1', samples: restToRestSamples(Q2, Q2, dwell) },
  ];
}

/**
 * What the live-machine checks of prepare_program make of the base file on this cell (document 2 part 7
 * "Admission by the control service": wire columns map in order to the axes whose position unit is rad;
 * more than nine or none is dense_axis_map_requires_nine_ids; a commanded column past the map is
 * unmapped_dense_axis; every sample inside the limits and below the described velocity; finite-difference
 * acceleration against a declared maximum).
 *
 * - `admitted`: the base passes every live check, so the cases whose one side is admitted can show it.
 * - `refusal`: the documented refusal this cell gives the base after the file-format rules (the base
 *   commands nine columns): a case the format rules admit ends there instead, which still shows the format
 *   rule let it through; a case that expects a later live check cannot reach it (`reason` says why).
 * - `skip`: the base maps but breaks a limit of this cell; which live label comes first is not documented.
 */
export type DenseFit = { admitted: true } | { refusal: string; reason: string } | { skip: string };

export function denseFit(m: Machine, spec: { segments?: DenseSpec['segments'] } = {}): DenseFit {
  const segments = spec.segments ?? baseSegments();
  return denseFitRows(m, segments.map((s) => s.samples as readonly DenseSampleInput[]));
}

/** denseFit of a decoded file (a planner's, say): its segments' rows. */
export function denseFitDecoded(m: Machine, x: DecodedDense): DenseFit {
  return denseFitRows(
    m,
    x.segments.map((s) => Array.from({ length: s.sampleCount }, (_, i) => ({ t: s.t[i]!, q: s.q.subarray(i * 9, i * 9 + 9), qd: s.qd.subarray(i * 9, i * 9 + 9) }))),
    x.axisMask,
  );
}

function denseFitRows(m: Machine, segments: ReadonlyArray<readonly DenseSampleInput[]>, axisMask = 0x1ff): DenseFit {
  const rad = m.rotaryAxes;
  if (rad.length === 0 || rad.length > 9) {
    return { refusal: 'dense_axis_map_requires_nine_ids', reason: `the cell has ${rad.length} axes in rad (${m}); dense columns map to one to nine of them` };
  }
  const commanded = [...Array(9).keys()].filter((j) => axisMask & (1 << j));
  if (commanded.some((j) => j >= rad.length)) {
    return { refusal: 'unmapped_dense_axis', reason: `the file commands columns ${commanded.map((j) => j + 1).join(', ')}; the cell maps ${rad.length} (${rad.map((a) => a.id).join(', ')}), so columns past them are unmapped` };
  }
  if (rad.length < 9) return { skip: `the file's unused columns would have to map to this cell's ${rad.length} rad axes; not the case the file was built for` };
  for (let j = 0; j < 9; j++) {
    const a = rad[j]!;
    for (const rows of segments) {
      let prev: { t: number; qd: number } | undefined;
      for (const x of rows) {
        const q = x.q[j]!;
        const qd = x.qd[j]!;
        if (q < a.min || q > a.max) return { skip: `the file's column ${j + 1} reaches ${q} rad, outside ${a.id}'s limits [${a.min}, ${a.max}]` };
        if (Math.abs(qd) >= a.maxVelocity) return { skip: `the file's column ${j + 1} reaches ${qd} rad/s, not below ${a.id}'s ${a.maxVelocity}` };
        const max = a.config?.maxAcceleration;
        if (max !== undefined && prev && x.t > prev.t && Math.abs(qd - prev.qd) / (x.t - prev.t) > max / 2) {
          return { skip: `the file's column ${j + 1} accelerates near ${a.id}'s declared maximum ${max} rad/s^2` };
        }
        prev = { t: x.t, qd };
      }
    }
  }
  return { admitted: true };
}
