// The run record's JSON Schema (harness/report/run.schema.json), checked with Ajv. The reporter checks
// every run.json before it writes it: a record that does not match is a harness defect, reported as a
// traceability-gate problem (the run is then an ERROR, never a PASS on a record nobody can read back).

import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';

let validate: ValidateFunction | undefined;

export const RUN_SCHEMA_FILE = new URL('./run.schema.json', import.meta.url);

/** Problems of a run record against the schema (empty when it matches), each as "path: message". */
export function runSchemaProblems(rec: unknown): string[] {
  validate ??= new Ajv({ allErrors: true, strict: true, strictRequired: false, strictTypes: false, allowUnionTypes: true }).compile(JSON.parse(readFileSync(RUN_SCHEMA_FILE, 'utf8')) as object);
  if (validate(rec)) return [];
  return (validate.errors ?? []).slice(0, 20).map((e) => `${e.instancePath || '/'}: ${e.message ?? 'invalid'}${e.params && 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : ''}`);
}
