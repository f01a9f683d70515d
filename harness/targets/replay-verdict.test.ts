// The replay verdict's shape is one schema (fixtures/contract/replay-verdict.schema.json) and one type
// (fixtures/contract/replay-verdict.ts), held equal here: a verdict with every field of the type matches the
// schema, and the schema declares no property the type lacks, at every level. The harness's side of the file
// is checked here too: whatever is not a verdict is a problem the test hears about, never a verdict.

import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { SCHEMA_FILE, VALIDATOR_FILE, validatorSource } from '../../fixtures/contract/generate.mjs';
import { parseVerdictFile, verdictProblems, type ReplayVerdict } from '../../fixtures/contract/replay-verdict.ts';

/** Every optional field present and every nullable one not null, all the way down. */
type DeepRequired<T> = T extends readonly (infer U)[] ? DeepRequired<U>[] : T extends object ? { [K in keyof T]-?: DeepRequired<Exclude<T[K], null | undefined>> } : T;

const note = { cycle: 6, kind: 'request' as const, data: { t: 'arm' }, sent_ns: '10', host_ns: '12', origin: 'lease_expired' };
const bus = { kind: 'diverged' as const, file: '/r/t.hilrec', mode: 'strict', cycle: 7, time_ns: 7e6, axis: 1, axis_id: 'J2', field: 'controlword', expected: 15, actual: 7, complete: true, recent: [note] };
const reads = { recorded: 2, served: 2, missed: 0 };
const FULL = {
  file: '/r/t.hilrec',
  mode: 'strict',
  run: 'suites/x.test.ts > t',
  recorded: { frames: 10, complete: true, requests: 2, outputs: 3, machine_sha256: 'a'.repeat(64), configuration_sha256: 'b'.repeat(64) },
  cycles: 10,
  requests_matched: 2,
  outputs_matched: 3,
  requests_unsent: 1,
  requests_extra: 0,
  first_unsent: note,
  renewals_replayed: 1,
  live_renewals: 1,
  service_clock: 'recorded' as const,
  expiries_replayed: 0,
  outputs_missing: 0,
  pace: 1,
  status_reads: reads,
  telemetry_reads: reads,
  watches: reads,
  flat_between_watches: true as const,
  steps: 4,
  service_replies: { recorded: 3, matched: 3, first_missing: { op: 'arm' } },
  holds_lost: [{ kind: 'status_read', cycle: 4, detail: 'publication 3' }],
  divergence: { kind: 'bus' as const, cycle: 7, path: 'controlword', expected: 15, actual: 7, bus },
  end: { ...bus, kind: 'end' as const },
  wall_ms: 12,
  recorded_ms: 10,
} satisfies DeepRequired<ReplayVerdict>;

type Node = { $ref?: string; properties?: Record<string, Node>; oneOf?: Node[]; items?: Node; type?: unknown };
const defs = (JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')) as { definitions: Record<string, Node> }).definitions;
const resolve = (n: Node): Node => (n.$ref ? resolve(defs[n.$ref.replace('#/definitions/', '')]!) : n);

/** Walk schema and value together: at every object, the schema's properties are the value's keys. */
function sameKeys(node: Node, value: unknown, at: string): void {
  const n = resolve(node);
  if (n.oneOf) {
    const branch = n.oneOf.map(resolve).find((b) => (value === null ? b.type === 'null' : b.type !== 'null'));
    return sameKeys(branch!, value, at);
  }
  if (n.properties && value && typeof value === 'object') {
    expect(Object.keys(n.properties).sort(), `schema properties at ${at}`).toEqual(Object.keys(value).sort());
    for (const [k, sub] of Object.entries(n.properties)) sameKeys(sub, (value as Record<string, unknown>)[k], `${at}/${k}`);
  }
  if (n.items && Array.isArray(value) && value.length) sameKeys(n.items, value[0], `${at}/0`);
}

test('a verdict with every field of the type matches the schema, and the schema has no property the type lacks', () => {
  expect(verdictProblems(FULL)).toEqual([]);
  sameKeys(defs.verdict!, FULL, '');
  // and the walk is not vacuous: a key the type does not have is seen
  expect(() => sameKeys(defs.verdict!, { ...FULL, extra: 1 }, '')).toThrow(/schema properties at/);
});

test('the harness reads a verdict file that is not a verdict as a problem with its reason, never as a verdict', () => {
  const text = (v: unknown) => JSON.stringify(v);
  expect(parseVerdictFile(text(FULL))).toEqual({ verdict: FULL });
  const { holds_lost: _h, ...missing } = FULL;
  const cases: Array<[string, string, RegExp]> = [
    ['not JSON (a file cut while written)', '{"file": "/r/t.hilr', /^it is not JSON/],
    ['a field the schema requires is missing', text(missing), /^it does not match fixtures\/contract\/replay-verdict\.schema\.json: \/: must have required property 'holds_lost'/],
    ['a field the harness does not know', text({ ...FULL, replay_ratio: 0.5 }), /must NOT have additional properties \(replay_ratio\)/],
    ['a count of the wrong type', text({ ...FULL, requests_unsent: '1' }), /\/requests_unsent: must be integer/],
    ['a divergence of an unknown kind', text({ ...FULL, divergence: { kind: 'timing', cycle: 1 } }), /\/divergence/],
    ['the stack\'s own refusal', text({ refused: { code: 'REPLAY_VERDICT_INVALID', problems: ['/cycles: must be >= 0'] } }), /^the stack refused its own verdict, which did not match .*: \/cycles: must be >= 0$/],
    ['a refusal without its problems', text({ refused: { code: 'REPLAY_VERDICT_INVALID' } }), /^it is a malformed refusal/],
  ];
  for (const [what, t, re] of cases) {
    const r = parseVerdictFile(t);
    expect('problem' in r, what).toBe(true);
    expect((r as { problem: string }).problem, what).toMatch(re);
  }
});

test('the validator both sides run is the one the schema makes now (else: node fixtures/contract/generate.mjs)', () => {
  expect(readFileSync(VALIDATOR_FILE, 'utf8') === validatorSource(), 'fixtures/contract/replay-verdict.validate.ts is stale: run node fixtures/contract/generate.mjs').toBe(true);
});
