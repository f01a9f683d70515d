// Strict JSON reader for machine configuration files. Unlike JSON.parse it keeps every number as its
// source text (so integers above 2^53 stay exact: DESIGN.md "Exact integers"), keeps objects as Maps and
// refuses a key repeated within one object, naming the field path.

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

const MAX_DEPTH = 64;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

export function parseJson(text: string): JsonValue {
  let pos = 0;

  const fail = (path: string, what: string): never => {
    throw new ConfigError('config_syntax', path, `${what} at offset ${pos}`);
  };
  const ws = () => {
    while (pos < text.length) {
      const c = text.charCodeAt(pos);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) pos++;
      else break;
    }
  };

  const parseString = (path: string): string => {
    if (text[pos] !== '"') fail(path, 'expected a string');
    pos++;
    let out = '';
    for (;;) {
      if (pos >= text.length) fail(path, 'unterminated string');
      const c = text.charCodeAt(pos);
      if (c === 0x22) {
        pos++;
        return out;
      }
      if (c < 0x20) fail(path, 'control character in string');
      if (c !== 0x5c) {
        out += text[pos++];
        continue;
      }
      const e = text[pos + 1];
      pos += 2;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          const hex = text.slice(pos, pos + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail(path, 'bad \\u escape');
          out += String.fromCharCode(parseInt(hex, 16));
          pos += 4;
          break;
        }
        default:
          fail(path, 'bad escape');
      }
    }
  };

  const parseValue = (path: string, depth: number): JsonValue => {
    if (depth > MAX_DEPTH) fail(path, 'nesting too deep');
    ws();
    const c = text[pos];
    if (c === '{') {
      pos++;
      const obj = new JsonObject();
      ws();
      if (text[pos] === '}') {
        pos++;
        return obj;
      }
      for (;;) {
        ws();
        const key = parseString(path);
        const p = childPath(path, key);
        if (obj.entries.has(key)) throw new ConfigError('config_duplicate_field', p, `key "${key}" appears twice`);
        ws();
        if (text[pos] !== ':') fail(p, 'expected ":"');
        pos++;
        obj.entries.set(key, parseValue(p, depth + 1));
        ws();
        if (text[pos] === ',') {
          pos++;
          continue;
        }
        if (text[pos] === '}') {
          pos++;
          return obj;
        }
        fail(path, 'expected "," or "}"');
      }
    }
    if (c === '[') {
      pos++;
      const arr: JsonValue[] = [];
      ws();
      if (text[pos] === ']') {
        pos++;
        return arr;
      }
      for (;;) {
        arr.push(parseValue(childPath(path, arr.length), depth + 1));
        ws();
        if (text[pos] === ',') {
          pos++;
          continue;
        }
        if (text[pos] === ']') {
          pos++;
          return arr;
        }
        fail(path, 'expected "," or "]"');
      }
    }
    if (c === '"') return parseString(path);
    for (const [lit, val] of [['true', true], ['false', false], ['null', null]] as const) {
      if (text.startsWith(lit, pos)) {
        pos += lit.length;
        return val;
      }
    }
    NUMBER.lastIndex = pos;
    const m = NUMBER.exec(text);
    if (m) {
      pos += m[0].length;
      return new JsonNumber(m[0]);
    }
    return fail(path, 'unexpected character');
  };

  const value = parseValue('', 0);
  ws();
  if (pos !== text.length) fail('', 'trailing data after the JSON value');
  return value;
}
