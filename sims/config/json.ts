// Machine configuration files as the configuration reader sees them. Unlike JSON.parse it keeps every
// number as its source text (so integers above 2^53 stay exact: DESIGN.md "Exact integers"), keeps
// objects as Maps and refuses a key repeated within one object, naming the field path. The decoding
// itself is the reference system's one strict decoder (sims/json.ts).

import * as Strict from '../json.ts';
import { ConfigError } from './errors.ts';

export type JsonValue = string | boolean | null | JsonNumber | JsonValue[] | JsonObject;

/** A JSON number kept as its exact source text. */
export class JsonNumber {
  constructor(readonly raw: string) {}
  /** True when the literal has no fraction and no exponent. */
  get isIntegerLiteral(): boolean {
    return /^-?(0|[1-9][0-9]*)$/.test(this.raw);
  }
}

export class JsonObject {
  readonly entries = new Map<string, JsonValue>();
}

export function jsonTypeName(v: JsonValue): string {
  if (v === null) return 'null';
  if (v instanceof JsonNumber) return 'number';
  if (v instanceof JsonObject) return 'object';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

export function childPath(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return parent ? `${parent}.${key}` : key;
}

/**
 * Parse a machine configuration with the reference system's one strict decoder (sims/json.ts), then keep
 * what the configuration reader needs: numbers as their source text, objects as Maps. A repeated key is
 * config_duplicate_field at its path; anything else that is not one JSON value is config_syntax.
 */
export function parseJson(text: string): JsonValue {
  let tree: Strict.JsonValue;
  try {
    tree = Strict.decodeJson(new TextEncoder().encode(text));
  } catch (e) {
    if (!(e instanceof Strict.JsonDecodeError)) throw e;
    const path = e.path.reduce<string>((p, k) => childPath(p, k), '');
    if (e.code === 'json_duplicate_key') throw new ConfigError('config_duplicate_field', path, `key "${e.key}" appears twice`);
    throw new ConfigError('config_syntax', e.code === 'json_trailing_data' ? '' : path, e.message);
  }
  return convert(tree);
}

function convert(v: Strict.JsonValue): JsonValue {
  if (v instanceof Strict.JsonNumber) return new JsonNumber(v.text);
  if (v instanceof Strict.JsonObject) {
    const o = new JsonObject();
    for (const [k, x] of v.fields) o.entries.set(k, convert(x));
    return o;
  }
  if (Array.isArray(v)) return v.map(convert);
  return v;
}
