// The root members of an upload body typed as decodeRequest types them (envelope.ts REQUEST_FIELDS and
// convertField), and the order in which a decoded body is refused (docs/profile.md "Envelope check order";
// document 1 part 4 "Envelope rules" and "prepare_trajectory"). The decoder (decoder.ts) hands each root
// member here as it completes; points are its own.

import { CAPABILITY, capabilityInfo } from '../capabilities.ts';
import { convertField, REQUEST_FIELDS, REQUEST_SCHEMA, REQUIRED, Refusal, refuse, validRequestId } from '../envelope.ts';
import { REQUEST_PREFIX_BYTES } from '../../primitives.ts';
import type { JsonValue } from '../../json.ts';
import { sameValue, UploadRefusal, type MemberInfo } from './types.ts';

const bad = (detail: string) => refuse('invalid_request_envelope', detail);

export class EnvelopeFields {
  private readonly rootKeys = new Set<string>();
  /** Root members repeated outside the prefix: where the repeat starts and the first value. */
  readonly redeclared = new Map<string, { at: number; first: unknown }>();
  readonly memberInfo: MemberInfo[] = [];
  readonly env: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  rawSchema: JsonValue | undefined;
  rawOperation: JsonValue | undefined;
  /** Offset of the root key "points" (its opening quote), when read. */
  pointsKeyAt = -1;
  /** The root value was not an object. */
  rootNotObject = false;

  /**
   * A root key read at body offset `at`: false when it is a duplicate to refuse at once. A member repeated
   * outside the prefix (past byte 16384 or after points) is judged when the body ends instead: a member of
   * the admitted prefix whose value changed is request_envelope_changed, any other repeat
   * duplicate_request_field (docs/profile.md "prepare_trajectory uploads").
   */
  key(key: string, at: number): boolean {
    if (this.rootKeys.has(key)) {
      const outside = at >= REQUEST_PREFIX_BYTES || this.pointsKeyAt >= 0;
      if (!outside || key === 'points' || this.redeclared.has(key)) return false;
      this.redeclared.set(key, { at, first: this.memberValue(key) });
    }
    this.rootKeys.add(key);
    if (key === 'points' && this.pointsKeyAt < 0) this.pointsKeyAt = at;
    return true;
  }

  /** A root member's value, complete: typed into the envelope, or its problem handed to `note`. */
  member(key: string, v: JsonValue, end: number, note: (r: Refusal) => void): void {
    if (key === 'schema') this.rawSchema = v;
    if (key === 'operation') this.rawOperation = v;
    this.memberDone(key, end);
    // Own keys only: "__proto__" and friends are unknown fields like any other (envelope.ts).
    const kind = Object.hasOwn(REQUEST_FIELDS, key) ? REQUEST_FIELDS[key] : undefined;
    if (!kind) {
      note(new UploadRefusal('envelope', 409, 'invalid_request_envelope', `unknown field ${JSON.stringify(key).slice(0, 80)}`));
      return;
    }
    if (key === 'request_id') {
      if (!validRequestId(v)) note(refuse('invalid_request_id', 'request_id must be 1..64 printable ASCII bytes'));
      else this.env[key] = v;
      return;
    }
    try {
      this.env[key] = convertField(kind, v, key);
    } catch (e) {
      if (e instanceof Refusal) note(e);
      else throw e;
    }
  }

  memberDone(key: string, end: number): void {
    this.memberInfo.push({ key, end });
  }

  /** The first member repeated outside the prefix, as the refusal a body that then breaks gets. */
  firstRepeat(): { key: string; at: number } | undefined {
    const repeat = this.redeclared.entries().next().value;
    return repeat ? { key: repeat[0], at: repeat[1].at } : undefined;
  }

  /**
   * The refusal of a body that decoded as JSON, in docs/profile.md "Envelope check order": a plain repeat,
   * the root not an object, a changed prefix member, schema, operation, capability, the first field problem
   * (`semantic`), missing fields, another operation. Throws it (an UploadRefusal carrying the operation).
   */
  judge(semantic: UploadRefusal | undefined, sawPoints: boolean): void {
    const named = this.rawOperation;
    const repeats = this.changedPrefixMembers();
    if (repeats.duplicate) {
      const [key, at] = repeats.duplicate;
      const u = new UploadRefusal('json', 409, 'duplicate_request_field', `field "${key}" repeated at byte ${at}`);
      if (typeof named === 'string') u.operation = named;
      throw u;
    }
    try {
      if (this.rootNotObject) throw bad('body must be a JSON object');
      // Document 1 part 4 "Envelope rules": the fully decoded request differs from the admitted prefix.
      // Judged first: the admitted prefix was a valid envelope, so a changed member is the change, whatever
      // its new value (a repeated operation with an unknown name is still request_envelope_changed).
      if (repeats.changed.length > 0) {
        throw new UploadRefusal('envelope_changed', 409, 'request_envelope_changed', `field ${repeats.changed[0]} differs from the admitted prefix`);
      }
      const schema = this.rawSchema;
      if (schema !== REQUEST_SCHEMA) {
        throw refuse('schema_mismatch', schema === undefined ? 'schema missing' : `schema must be ${REQUEST_SCHEMA}`);
      }
      const operation = this.rawOperation;
      const cap = typeof operation === 'string' ? CAPABILITY.get(operation) : undefined;
      if (!cap || !cap.control) {
        throw refuse(
          'unknown_operation',
          typeof operation === 'string' ? `operation ${JSON.stringify(operation).slice(0, 80)} is not dispatched by /v1/control` : 'operation missing',
        );
      }
      if (cap.state === 'unimplemented') throw refuse('capability_unimplemented', `${cap.name} is reserved`, capabilityInfo(cap));
      if (semantic) throw semantic;
      const required = [...(cap.fenced ? ['session', 'generation'] : []), ...(REQUIRED[cap.name] ?? [])];
      for (const f of required) {
        if (f === 'points' ? !sawPoints : !(f in this.env)) throw bad(`missing field ${f} for operation ${cap.name}`);
      }
      if (cap.name !== 'prepare_trajectory') {
        throw new UploadRefusal('not_trajectory', 409, 'invalid_request_envelope', `operation ${cap.name} is not prepare_trajectory`);
      }
    } catch (e) {
      if (e instanceof Refusal) {
        const u = e instanceof UploadRefusal ? e : UploadRefusal.from('envelope', e);
        if (typeof named === 'string') u.operation = named;
        throw u;
      }
      throw e;
    }
  }

  /** A root member's value as decoded (schema and operation raw, the others converted). */
  private memberValue(key: string): unknown {
    return key === 'schema' ? this.rawSchema : key === 'operation' ? this.rawOperation : this.env[key];
  }

  /**
   * Members repeated outside the prefix: the first that is a plain duplicate (not a member of the admitted
   * prefix, or repeated with the same value), and the admitted members whose value changed.
   */
  private changedPrefixMembers(): { duplicate?: [string, number]; changed: string[] } {
    const changed: string[] = [];
    for (const [key, r] of this.redeclared) {
      const first = this.memberInfo.find((m) => m.key === key)!;
      const admitted = first.end <= REQUEST_PREFIX_BYTES && (this.pointsKeyAt < 0 || first.end <= this.pointsKeyAt);
      if (!admitted || sameValue(r.first, this.memberValue(key))) return { duplicate: [key, r.at], changed };
      changed.push(key);
    }
    return { changed };
  }
}
