// The machine-readable catalogue of the three documents (../../shared/spec/). Every documented,
// testable item is one entry with a stable id; tests name the ids they cover and the traceability
// gate compares those with this list. The module validates itself when loaded and throws loudly on
// a duplicated or malformed id, so a broken catalogue can never reach a run.

import type {
  CapabilityEntry,
  CatalogueEntry,
  Family,
  LayoutEntry,
  LimitEntry,
  ReasonEntry,
} from './types.ts';
import { HarnessError } from '../errors.ts';
import { entries as doc1 } from './doc1.ts';
import { entries as doc2 } from './doc2.ts';
import { entries as doc3 } from './doc3.ts';

const NAME = '[a-z][a-z0-9_]*';
const FIELD_SEGMENT = '[A-Za-z][A-Za-z0-9_]*(?:\\[\\])?';

/** Shape of the id per family (the part after `<family>:`). */
const ID_SHAPE: Readonly<Record<Family, RegExp>> = {
  reason: new RegExp(`^${NAME}$`),
  format_reason: new RegExp(`^${NAME}$`),
  dense_error: new RegExp(`^${NAME}$`),
  capability: new RegExp(`^${NAME}$`),
  event: new RegExp(`^${NAME}$`),
  transition: new RegExp(`^(?:handle|grant):${NAME}->${NAME}:${NAME}$`),
  limit: new RegExp(`^${NAME}$`),
  field: new RegExp(`^[A-Z][A-Za-z0-9]*\\.${FIELD_SEGMENT}(?:\\.${FIELD_SEGMENT})*$`),
  layout: new RegExp(`^(?:telemetry_header|capture_record|capture_axis|dense_sample):${NAME}$`),
  rule: /^[a-z][a-z0-9_]*\.[a-z0-9_]+(?:\.[a-z0-9_]+)*$/,
  endpoint: /^(?:GET|POST|PUT|DELETE) \/[A-Za-z0-9_\-/.<>{}]+$/,
  planner: /^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*$/,
  olp: /^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*$/,
  state: /^[a-z][a-z0-9_.:>-]*$/,
  machine_config: /^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*$/,
  profile: /^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*$/, // harness/catalogue/profile.ts items; never in this catalogue
};

/** The id an entry must carry, derived from its own fields where the family defines one. */
function expectedId(e: CatalogueEntry): string | undefined {
  switch (e.family) {
    case 'reason':
      return `reason:${e.label}`;
    case 'format_reason':
      return `format_reason:${e.reason}`;
    case 'dense_error':
      return `dense_error:${e.reason}`;
    case 'capability':
      return `capability:${e.name}`;
    case 'event':
      return `event:${e.type}`;
    case 'limit':
      return `limit:${e.name}`;
    case 'field':
      return `field:${e.type}.${e.path}`;
    case 'layout':
      return `layout:${e.struct}:${e.field}`;
    case 'transition':
      return e.id.startsWith(`transition:${e.machine}:${e.from}->${e.to}:`) ? e.id : `transition:${e.machine}:${e.from}->${e.to}:<trigger>`;
    default:
      return undefined;
  }
}

/** Problems of one entry's id and shape; empty when it is well formed. */
export function idProblems(e: CatalogueEntry): string[] {
  const problems: string[] = [];
  const colon = e.id.indexOf(':');
  const family = e.id.slice(0, colon);
  const name = e.id.slice(colon + 1);
  if (e.family === 'profile') problems.push('profile items belong in harness/catalogue/profile.ts, not the catalogue');
  if (colon <= 0 || family !== e.family) problems.push(`id family "${family}" differs from entry family "${e.family}"`);
  else if (!ID_SHAPE[e.family].test(name)) problems.push(`name "${name}" does not match ${ID_SHAPE[e.family]}`);
  const expected = expectedId(e);
  if (expected !== undefined && expected !== e.id) problems.push(`expected id ${expected}`);
  if (![1, 2, 3].includes(e.doc)) problems.push(`doc ${String(e.doc)} is not 1, 2 or 3`);
  if (!e.section.startsWith('part ')) problems.push(`section "${e.section}" does not name a part`);
  if (!e.title.trim() || e.title.includes('\n')) problems.push('title must be one nonempty line');
  return problems;
}

function build(all: readonly CatalogueEntry[]): ReadonlyMap<string, CatalogueEntry> {
  const map = new Map<string, CatalogueEntry>();
  const errors: string[] = [];
  for (const e of all) {
    for (const p of idProblems(e)) errors.push(`${e.id}: ${p}`);
    if (map.has(e.id)) errors.push(`${e.id}: duplicated id`);
    map.set(e.id, e);
  }
  if (errors.length > 0) {
    throw new HarnessError('HIL_ERR_CATALOGUE', `harness/catalogue is malformed (${errors.length} problems):\n  ${errors.join('\n  ')}`);
  }
  return map;
}

export const catalogue: readonly CatalogueEntry[] = Object.freeze([...doc1, ...doc2, ...doc3]);

export const byId: ReadonlyMap<string, CatalogueEntry> = build(catalogue);

function lookup<F extends Family>(family: F, name: string): Extract<CatalogueEntry, { family: F }> {
  const e = byId.get(`${family}:${name}`);
  if (!e || e.family !== family) throw new HarnessError('HIL_ERR_CATALOGUE', `catalogue has no ${family}:${name}`);
  return e as Extract<CatalogueEntry, { family: F }>;
}

/** The part 7 reason entry for a label (throws when the label is not catalogued). */
export function reason(label: string): ReasonEntry {
  return lookup('reason', label);
}

/** The part 4 capability entry (throws when unknown). */
export function capability(name: string): CapabilityEntry {
  return lookup('capability', name);
}

/** A documented limit (throws when unknown). */
export function limit(name: string): LimitEntry {
  return lookup('limit', name);
}

/** Fields of one binary layout, sorted by offset. */
export function layout(struct: LayoutEntry['struct']): LayoutEntry[] {
  return catalogue
    .filter((e): e is LayoutEntry => e.family === 'layout' && e.struct === struct)
    .sort((a, b) => a.offset - b.offset);
}

/** Ids starting with a prefix, in catalogue order (e.g. ids('reason:'), ids('transition:grant:')). */
export function ids(prefix: string): string[] {
  return catalogue.filter((e) => e.id.startsWith(prefix)).map((e) => e.id);
}
