// The oracle's binary layout tables and the catalogue's layout rows are two writings of the same
// document tables (document 1 part 2 telemetry; document 2 dense sample). The oracle's drive its codecs
// and types; the catalogue's drive traceability. This test holds them equal field by field (name, offset,
// size, type) in both directions, so neither can drift from the other.

import { describe, expect, test } from 'vitest';
import { catalogue } from '../catalogue/index.ts';
import type { LayoutEntry } from '../catalogue/types.ts';
import { SAMPLE_BYTES, SAMPLE_FIELDS } from './dense.ts';
import { AXIS_ARRAY_OFFSET, AXIS_BYTES, AXIS_FIELDS, AXIS_SLOTS, HEADER_BYTES, HEADER_FIELDS, RECORD_BYTES, RECORD_FIELDS } from './telemetry.ts';

interface Row {
  field: string;
  offset: number;
  size: number;
  type: string;
}

const SCALAR: Readonly<Record<string, number>> = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, u64: 8, i64: 8, f64: 8 };

/** The oracle's telemetry field types in the documents' notation: hex text fields are the u8 arrays that carry them. */
function docType(type: string): { type: string; size: number } {
  if (type === 'hex32') return { type: 'u8[32]', size: 32 };
  if (type === 'hex64') return { type: 'u8[64]', size: 64 };
  const m = /^([a-z]\d+)(?:\[(\d+)\])?$/.exec(type)!;
  return { type, size: SCALAR[m[1]!]! * (m[2] ? Number(m[2]) : 1) };
}

const oracleRows = (fields: readonly (readonly [number, string, string])[]): Row[] =>
  fields.map(([offset, t, field]) => ({ field, offset, ...docType(t) }));

const catalogueRows = (struct: LayoutEntry['struct']): Row[] =>
  catalogue
    .filter((e): e is LayoutEntry => e.family === 'layout' && e.struct === struct)
    .map(({ field, offset, size, type }) => ({ field, offset, size, type }))
    .sort((a, b) => a.offset - b.offset);

const STRUCTS: Array<{ struct: LayoutEntry['struct']; oracle: Row[]; bytes: number }> = [
  { struct: 'telemetry_header', oracle: oracleRows(HEADER_FIELDS), bytes: HEADER_BYTES },
  {
    struct: 'capture_record',
    oracle: [...oracleRows(RECORD_FIELDS), { field: 'ax', offset: AXIS_ARRAY_OFFSET, size: AXIS_SLOTS * AXIS_BYTES, type: `CycleCaptureAxisV2[${AXIS_SLOTS}]` }],
    bytes: RECORD_BYTES,
  },
  { struct: 'capture_axis', oracle: oracleRows(AXIS_FIELDS), bytes: AXIS_BYTES },
  { struct: 'dense_sample', oracle: SAMPLE_FIELDS.map((f) => ({ ...f })), bytes: SAMPLE_BYTES },
];

describe('oracle layout tables equal the catalogue, field by field', () => {
  test.each(STRUCTS)('$struct', ({ struct, oracle }) => {
    const cat = catalogueRows(struct);
    expect(cat.length, `catalogue rows of ${struct}`).toBeGreaterThan(0);
    // Both directions at once: every oracle field is a catalogue row with the same offset, size and type,
    // and the catalogue has no field the oracle lacks.
    expect([...oracle].sort((a, b) => a.offset - b.offset)).toEqual(cat);
  });

  test.each(STRUCTS)('$struct: fields tile the struct with no gap or overlap', ({ oracle, bytes }) => {
    let at = 0;
    for (const f of [...oracle].sort((a, b) => a.offset - b.offset)) {
      expect(f.offset, f.field).toBe(at);
      at += f.size;
    }
    expect(at).toBe(bytes);
  });
});

test('the comparison notices a drift', () => {
  // A moved field, a resized field and a renamed field each make the tables unequal.
  const cat = catalogueRows('capture_axis');
  const oracle = oracleRows(AXIS_FIELDS);
  const moved = oracle.map((r) => (r.field === 'statusword' ? { ...r, offset: r.offset + 2 } : r));
  const resized = oracle.map((r) => (r.field === 'error_code' ? { ...r, type: 'u32', size: 4 } : r));
  const renamed = oracle.map((r) => (r.field === 'di_bits' ? { ...r, field: 'di_word' } : r));
  for (const drift of [moved, resized, renamed]) expect(drift.sort((a, b) => a.offset - b.offset)).not.toEqual(cat);
});
