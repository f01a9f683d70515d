// Row-to-entry builders shared by the three document files: each document keeps compact tables and turns
// them into catalogue entries the same way.

import type { DocumentNumber, FieldEntry, LimitEntry } from './types.ts';

/** [path, valueType, required (undefined when the document does not say), rule] */
export type FieldRow = readonly [path: string, valueType: string, required: boolean | undefined, rule: string];

export function fieldEntries(doc: DocumentNumber, type: string, section: string, rows: readonly FieldRow[]): FieldEntry[] {
  return rows.map(([path, valueType, required, rule]) => {
    const e: FieldEntry = {
      family: 'field',
      id: `field:${type}.${path}`,
      doc,
      section,
      title: `${type}.${path} (${valueType}): ${rule.split(';')[0] || 'documented field'}`,
      type,
      path,
      valueType,
      rule,
    };
    if (required !== undefined) e.required = required;
    return e;
  });
}

type Num = bigint | number | undefined;
/** [name, section, min, max, value, unit, text] */
export type LimitRow = readonly [name: string, section: string, min: Num, max: Num, value: Num, unit: string, text: string];

export function limitEntries(doc: DocumentNumber, rows: readonly LimitRow[]): LimitEntry[] {
  return rows.map(([name, section, min, max, value, unit, text]) => {
    const e: LimitEntry = { family: 'limit', id: `limit:${name}`, doc, section, title: `Limit: ${text}`, name, text };
    if (min !== undefined) e.min = min;
    if (max !== undefined) e.max = max;
    if (value !== undefined) e.value = value;
    if (unit) e.unit = unit;
    return e;
  });
}
