// Property: mutate valid requests (drop, duplicate, retype or rename a field, append, insert, truncate,
// pad to and past 16384 bytes) and send each one. Whatever arrives, the service answers with one of the
// documented statuses and a catalogue label (document 1 part 4 "HTTP status", part 7: "Every refusal
// carries a catalogue label first"; an unknown label is an unknown outcome for a client), 413 exactly
// when the body is over the limit, and keeps answering afterwards. Where the independent oracle can tell
// what is wrong with the body from the JSON alone, the label must be the one the profile's check order
// gives. Every run prints its seed (harness/property.ts; HIL_PROPERTY_RUNS sets the volume, HIL_PROPERTY_SEED
// replays), and fast-check prints the failing path.

import fc from 'fast-check';
import { REQUEST_SCHEMA } from '../../harness/clients/control.ts';
import type { Session } from '../../harness/clients/cell.ts';
import { OracleError } from '../../harness/oracle/errors.ts';
import { isJsonObject, parseExact, stringifyExact, type JsonExact } from '../../harness/oracle/json.ts';
import { checkGrant, type CheckedReply } from '../../harness/oracle/reply.ts';
import { byId, catalogue } from '../../harness/catalogue/index.ts';
import type { CapabilityEntry } from '../../harness/catalogue/types.ts';
import { cycleFree, describe, expect, profile, test } from '../../harness/fixture.ts';
import { propertyRun } from '../../harness/property.ts';

// No test here needs the file's cell to cycle on its own (harness/fixture.ts cycleFree).
cycleFree();

const S = REQUEST_SCHEMA;
const LIMIT = 16384;

const CAPS = catalogue.filter((e): e is CapabilityEntry => e.family === 'capability');
const KNOWN_OPS = new Set(CAPS.map((c) => c.name));
// Reserved operations, plus (set from Describe when the test starts) those the target reports unimplemented.
const RESERVED_OPS = new Set(CAPS.filter((c) => c.state === 'unimplemented').map((c) => c.name));
const CONTROL_OPS = new Set(CAPS.filter((c) => c.transport === 'POST /v1/control' || RESERVED_OPS.has(c.name)).map((c) => c.name));

type Base = 'acquire' | 'renew' | 'mark_telemetry';
type Entry = [string, unknown];

type Structural =
  | { kind: 'drop'; at: number }
  | { kind: 'duplicate'; at: number; to: number }
  | { kind: 'retype'; at: number; value: unknown }
  | { kind: 'rename'; at: number; key: string }
  | { kind: 'inner'; at: number; innerAt: number; value: unknown; drop: boolean };

type Textual =
  | { kind: 'append'; bytes: Uint8Array }
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'truncate'; at: number }
  | { kind: 'pad'; delta: number };

// ---- generators ----

const arbValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.bigInt({ min: -(1n << 66n), max: 1n << 66n }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constant(null),
  fc.boolean(),
  fc.array(fc.oneof(fc.integer(), fc.string({ maxLength: 4 })), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(fc.integer(), fc.string({ maxLength: 4 })), { maxKeys: 2 }),
);

const arbKey = fc.oneof(
  fc.string({ maxLength: 10 }),
  fc.constantFrom('schema', 'operation', 'session', 'generation', 'request_id', 'label', 'controller', 'binding', 'handle', 'Schema', 'bogus', ''),
);

const arbStructural: fc.Arbitrary<Structural> = fc.oneof(
  fc.record({ kind: fc.constant('drop' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('duplicate' as const), at: fc.nat(), to: fc.nat() }),
  fc.record({ kind: fc.constant('retype' as const), at: fc.nat(), value: arbValue }),
  fc.record({ kind: fc.constant('rename' as const), at: fc.nat(), key: arbKey }),
  fc.record({ kind: fc.constant('inner' as const), at: fc.nat(), innerAt: fc.nat(), value: arbValue, drop: fc.boolean() }),
);

const TOKENS = ['{', '}', '[', ']', ',', ':', '"', '\\', ' ', 'null', '0', '-', '1e', '\u0000', '\ufeff', 'é', '{}'];
const arbGarbage = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 8 }),
  fc.constantFrom(...TOKENS).map((t) => new TextEncoder().encode(t)),
);

const arbTextual: fc.Arbitrary<Textual> = fc.oneof(
  fc.record({ kind: fc.constant('append' as const), bytes: arbGarbage }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: arbGarbage }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('pad' as const), delta: fc.integer({ min: -1, max: 2 }) }),
);

const arbCase = fc.record({
  base: fc.constantFrom<Base>('acquire', 'renew', 'renew', 'mark_telemetry', 'mark_telemetry'),
  withId: fc.boolean(),
  structural: fc.array(arbStructural, { maxLength: 3 }),
  textual: fc.array(arbTextual, { maxLength: 2 }),
});
type Case = typeof arbCase extends fc.Arbitrary<infer T> ? T : never;

// ---- building and mutating ----

function baseEntries(base: Base, fence: Pick<Session, 'session' | 'generation'> | undefined, binding: unknown, id: string | undefined): Entry[] {
  const e: Entry[] = [['schema', S], ['operation', base]];
  if (id !== undefined) e.push(['request_id', id]);
  if (base === 'acquire') e.push(['controller', 'hil-property'], ['binding', binding]);
  else e.push(['session', fence!.session], ['generation', fence!.generation]);
  if (base === 'mark_telemetry') e.push(['label', 'property']);
  return e;
}

function applyStructural(entries: Entry[], m: Structural): Entry[] {
  if (entries.length === 0) return entries;
  const at = m.at % entries.length;
  const out = entries.map(([k, v]): Entry => [k, v]);
  switch (m.kind) {
    case 'drop':
      out.splice(at, 1);
      return out;
    case 'duplicate':
      out.splice(m.to % (out.length + 1), 0, [out[at]![0], out[at]![1]]);
      return out;
    case 'retype':
      out[at] = [out[at]![0], m.value];
      return out;
    case 'rename':
      out[at] = [m.key, out[at]![1]];
      return out;
    case 'inner': {
      const v = out[at]![1];
      if (typeof v !== 'object' || v === null || Array.isArray(v)) return out;
      const inner = Object.entries(v as Record<string, unknown>);
      if (inner.length === 0) return out;
      const i = m.innerAt % inner.length;
      if (m.drop) inner.splice(i, 1);
      else inner[i] = [inner[i]![0], m.value];
      out[at] = [out[at]![0], Object.fromEntries(inner)];
      return out;
    }
  }
}

/** Object text from ordered entries; repeated keys stay repeated. */
function render(entries: readonly Entry[]): Uint8Array {
  return new TextEncoder().encode('{' + entries.map(([k, v]) => `${JSON.stringify(k)}:${stringifyExact(v)}`).join(',') + '}');
}

function applyTextual(b: Uint8Array, m: Textual): Uint8Array {
  switch (m.kind) {
    case 'append':
      return concat(b, m.bytes);
    case 'insert': {
      const at = m.at % (b.length + 1);
      return concat(b.subarray(0, at), m.bytes, b.subarray(at));
    }
    case 'truncate':
      return b.subarray(0, m.at % (b.length + 1));
    case 'pad': {
      const target = LIMIT + m.delta;
      return b.length >= target ? b : concat(b, new Uint8Array(target - b.length).fill(0x20));
    }
  }
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

// ---- the oracle's expectation ----

interface Expectation {
  /** The label the profile's check order gives, when it is determined by the JSON alone. */
  label?: string;
  /** The operation the reply must name (profile: requested operation when known, else "unknown"). */
  operation?: string;
}

function expectation(body: Uint8Array): Expectation {
  if (body.length > LIMIT) return { label: 'body_too_large' };
  let v: JsonExact;
  try {
    v = parseExact(body);
  } catch (e) {
    if (!(e instanceof OracleError)) throw e;
    if (e.code === 'json_duplicate_key') return { label: 'duplicate_request_field' };
    if (e.code === 'json_trailing_data') return { label: 'trailing_request_data' };
    if (e.code === 'json_syntax') return { label: 'invalid_request_envelope' };
    return {}; // invalid UTF-8 or number range: which of the JSON-stage labels comes first is not modelled
  }
  if (!isJsonObject(v)) return { label: 'invalid_request_envelope' };
  const op = v.operation;
  const operation = typeof op === 'string' && KNOWN_OPS.has(op) ? op : 'unknown';
  if (v.schema !== S) return { label: 'schema_mismatch', operation };
  if (typeof op !== 'string' || !CONTROL_OPS.has(op)) return { label: 'unknown_operation', operation };
  if (RESERVED_OPS.has(op)) return { label: 'capability_unimplemented', operation };
  return { operation };
}

// ---------------------------------------------------------------------------------------------

describe('mutated requests (property)', () => {
  test(
    'every mutated request gets 200, 409 or 413 with a catalogue label, as the check order says; the service keeps answering',
    {
      ...profile('profile:envelope.check_order', 'profile:envelope.refusal_operation', 'rule:envelope.strict_decoding', 'rule:envelope.body_limit', 'rule:common_sets.envelope'),
      timeout: 120_000,
    },
    async ({ client, cell, description }) => {
      for (const c of description.capabilities) if (c.state === 'unimplemented' && CONTROL_OPS.has(c.name)) RESERVED_OPS.add(c.name);
      // Mutations of a mark_telemetry request become mutations of a renew where the target does not serve it.
      const markServed = !RESERVED_OPS.has('mark_telemetry');
      let current: Session | undefined;
      let n = 0;

      const ensureGrant = async (): Promise<Session> => {
        if (current) {
          const r = await cell.fenced('renew', current);
          if (r.status === 200) return current;
          current = undefined;
        }
        current = await cell.grant();
        return current;
      };
      const dropGrant = async (): Promise<void> => {
        if (current) await cell.fenced('release', current);
        current = undefined;
      };

      const check = async (asked: Case): Promise<void> => {
        n++;
        const c: Case = asked.base === 'mark_telemetry' && !markServed ? { ...asked, base: 'renew' } : asked;
        const fence = c.base === 'acquire' ? (await dropGrant(), undefined) : await ensureGrant();
        let entries = baseEntries(c.base, fence, description.binding, c.withId ? `property-${n}` : undefined);
        for (const m of c.structural) entries = applyStructural(entries, m);
        let body = render(entries);
        for (const m of c.textual) body = applyTextual(body, m);

        const r = await client.control(body);
        // Nothing may stay held: a mutated acquire that was admitted is released at once.
        await releaseIfAcquired(r);
        const what = `${c.base} body ${JSON.stringify(new TextDecoder().decode(body.subarray(0, 400)))}`;
        expect([200, 409, 413], what).toContain(r.status);
        expect(r.status === 413, `${what}: 413 exactly past ${LIMIT} bytes (${body.length})`).toBe(body.length > LIMIT);
        if (r.status !== 200) expect(byId.has(`reason:${r.label}`), `${what}: label ${r.label} is not in the catalogue`).toBe(true);

        const exp = expectation(body);
        if (exp.label !== undefined) expect(r.label, what).toBe(exp.label);
        if (exp.operation !== undefined && r.status !== 413) expect(r.reply.operation, what).toBe(exp.operation);
        if (c.structural.length === 0 && c.textual.length === 0) expect(r.status, `${what}: unmutated`).toBe(200);
      };

      const releaseIfAcquired = async (r: CheckedReply): Promise<void> => {
        if (r.status !== 200 || r.reply.operation !== 'acquire') return;
        const g = checkGrant(r.reply.data);
        await client.op('release', { session: g.session, generation: g.generation });
      };

      await fc.assert(fc.asyncProperty(arbCase, check), propertyRun('envelope mutations', 150));
      await dropGrant();

      // The service still answers observations and commands.
      expect((await client.describe()).status).toBe(200);
      const s = await cell.grant();
      expect((await cell.fenced('renew', s)).status).toBe(200);
    },
  );
});
