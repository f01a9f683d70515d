// Query options of POST /api/motion/plan (document 2 part 4): one table gives every option's type, default
// and range. Problems are listed as detail items {loc, msg, type, input} (422); an unknown
// free_space_backend is checked after every typed option passed and answered with a detail string naming
// it (document 2 part 7). Spelling accepted for booleans and numbers: docs/profile.md "Weld planner: query".

import { U64_MAX } from '../primitives.ts';

export interface PlanOptions {
  k_best: number;
  screen_collisions: boolean;
  samples_per_seam: number | null;
  run_weld_trajopt: boolean;
  run_connecting_trajopt: boolean;
  free_space_backend: string;
  verify: boolean;
  verify_margin_mm: number;
  order_seams: boolean;
  dense: boolean;
  program_id: string;
  manifest_revision: bigint;
  plan_revision: bigint;
}

export const BACKENDS = ['bspline', 'curobo', 'legacy'];

export interface DetailItem {
  loc: ['query', string];
  msg: string;
  type: string;
  input: string;
}

type Parse = (text: string) => { ok: unknown } | { msg: string; type: string };

const TRUE = ['true', '1', 'yes', 'on'];
const FALSE = ['false', '0', 'no', 'off'];
const bool: Parse = (t) => (TRUE.includes(t.toLowerCase()) ? { ok: true } : FALSE.includes(t.toLowerCase()) ? { ok: false } : { msg: 'Input should be a valid boolean', type: 'bool_parsing' });
const int = (min: bigint, max: bigint): Parse => (t) => {
  if (!/^[+-]?[0-9]+$/.test(t)) return { msg: 'Input should be a valid integer', type: 'int_parsing' };
  const v = BigInt(t);
  if (v < min) return { msg: `Input should be greater than or equal to ${min}`, type: 'greater_than_equal' };
  if (v > max) return { msg: `Input should be less than or equal to ${max}`, type: 'less_than_equal' };
  return { ok: v };
};
const float = (min: number, max: number): Parse => (t) => {
  if (!/^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$/.test(t)) return { msg: 'Input should be a valid number', type: 'float_parsing' };
  const v = Number(t);
  if (!Number.isFinite(v)) return { msg: 'Input should be a finite number', type: 'finite_number' };
  if (v < min) return { msg: `Input should be greater than or equal to ${min}`, type: 'greater_than_equal' };
  if (v > max) return { msg: `Input should be less than or equal to ${max}`, type: 'less_than_equal' };
  return { ok: v };
};
const text = (maxChars: number): Parse => (t) => ([...t].length > maxChars ? { msg: `String should have at most ${maxChars} characters`, type: 'string_too_long' } : { ok: t });

/** [name, parser, default] in document 2 part 4's order. */
const TABLE: ReadonlyArray<readonly [keyof PlanOptions, Parse, unknown]> = [
  ['k_best', int(1n, 16n), 5n],
  ['screen_collisions', bool, true],
  ['samples_per_seam', int(2n, 512n), null],
  ['run_weld_trajopt', bool, false],
  ['run_connecting_trajopt', bool, true],
  ['free_space_backend', (t) => ({ ok: t }), 'bspline'],
  ['verify', bool, true],
  ['verify_margin_mm', float(0, 50), 2.0],
  ['order_seams', bool, false],
  ['dense', bool, false],
  ['program_id', text(120), ''],
  ['manifest_revision', int(1n, U64_MAX), 1n],
  ['plan_revision', int(1n, U64_MAX), 1n],
];

export type ParsedQuery = { ok: PlanOptions } | { status: 422; body: { detail: DetailItem[] | string } };

/** Parse the query string; a repeated name takes its last value (docs/profile.md); unknown names are ignored. */
export function parsePlanQuery(search: URLSearchParams): ParsedQuery {
  const out: Record<string, unknown> = {};
  const detail: DetailItem[] = [];
  for (const [name, parse, dflt] of TABLE) {
    const all = search.getAll(name);
    if (all.length === 0) {
      out[name] = dflt;
      continue;
    }
    const input = all[all.length - 1]!;
    const r = parse(input);
    if ('ok' in r) out[name] = r.ok;
    else detail.push({ loc: ['query', name], msg: r.msg, type: r.type, input });
  }
  if (detail.length) return { status: 422, body: { detail } };
  if (!BACKENDS.includes(out.free_space_backend as string)) {
    return { status: 422, body: { detail: `unknown free_space_backend ${JSON.stringify(out.free_space_backend)}; expected one of ${BACKENDS.join(', ')}` } };
  }
  const k = out.k_best as bigint;
  const sps = out.samples_per_seam as bigint | null;
  return { ok: { ...(out as unknown as PlanOptions), k_best: Number(k), samples_per_seam: sps === null ? null : Number(sps) } };
}
