// The small JSON toolkit the config suites use to build machine variants: exact reading (bigint
// integers), path edits and a writer with raw number text, and a temporary workspace per test file.
// The compiler itself is reached through harness/clients/config.ts (`hil config`, a process).

import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { MACHINES } from '../../harness/clients/config.ts';
import { parseExact, type JsonExact } from '../../harness/oracle/json.ts';

/** A temporary directory per test file, removed afterwards. */
export class Workspace {
  private n = 0;
  private constructor(readonly dir: string) {}

  static async create(prefix: string): Promise<Workspace> {
    return new Workspace(await mkdtemp(join(tmpdir(), `hil-${prefix}-`)));
  }

  /** Root for compiled directories. */
  get out(): string {
    return join(this.dir, 'out');
  }

  /** Write a machine JSON (a value, written by writeJson, or text or bytes) under a fresh or given relative name. */
  async write(content: JsonValue | string | Uint8Array, name?: string): Promise<string> {
    const path = join(this.dir, name ?? `machine-${String(++this.n).padStart(3, '0')}.json`);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, typeof content === 'string' || content instanceof Uint8Array ? content : writeJson(content, 2));
    return path;
  }

  remove(): Promise<void> {
    return rm(this.dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------
// JSON values: parseExact reads integer literals as bigint and other numbers as float64.

export function readMachine(name: string): JsonObj {
  return parseExact(readFileSync(join(MACHINES, `${name}.json`))) as JsonObj;
}

export type JsonObj = { [k: string]: JsonValue };
/** A number written with exactly this text (`8.0`, `80e-1`), to vary spelling without changing value. */
export class RawNumber {
  constructor(readonly text: string) {}
}
export type JsonValue = JsonExact | RawNumber | JsonValue[] | { [k: string]: JsonValue };

export function clone<T extends JsonValue>(v: T): T {
  if (Array.isArray(v)) return v.map((x) => clone(x)) as T;
  if (v !== null && typeof v === 'object' && !(v instanceof RawNumber)) {
    const out: JsonObj = {};
    for (const [k, x] of Object.entries(v)) out[k] = clone(x);
    return out as T;
  }
  return v;
}

/** `axes[3].limits.max` -> ['axes', 3, 'limits', 'max'] */
function segments(path: string): Array<string | number> {
  return [...path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) => (m[2] !== undefined ? Number(m[2]) : m[1]!));
}

function parentOf(root: JsonValue, path: string): [Record<string | number, JsonValue>, string | number] {
  const segs = segments(path);
  let cur = root as Record<string | number, JsonValue>;
  for (const s of segs.slice(0, -1)) {
    if (cur[s] === undefined) cur[s] = {};
    cur = cur[s] as Record<string | number, JsonValue>;
  }
  return [cur, segs[segs.length - 1]!];
}

export function getAt(root: JsonValue, path: string): JsonValue | undefined {
  let cur: unknown = root;
  for (const s of segments(path)) cur = (cur as Record<string | number, unknown> | undefined)?.[s];
  return cur as JsonValue | undefined;
}

/** Set (creating objects on the way) or, with `undefined`, delete the field at `path`. Returns root. */
export function setAt<T extends JsonValue>(root: T, path: string, value: JsonValue | undefined): T {
  if (value === undefined) {
    const segs = segments(path);
    const parent = getAt(root, segs.slice(0, -1).map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`)).join('').replace(/^\./, ''));
    if (parent !== null && typeof parent === 'object') delete (parent as Record<string | number, JsonValue>)[segs[segs.length - 1]!];
    return root;
  }
  const [parent, key] = parentOf(root, path);
  parent[key] = value;
  return root;
}

/** Copy of `root` with the edits applied in order. */
export function edited<T extends JsonValue>(root: T, edits: Record<string, JsonValue | undefined>): T {
  const c = clone(root);
  for (const [p, v] of Object.entries(edits)) setAt(c, p, v);
  return c;
}

/**
 * JSON text with keys in insertion order, bigint exact, RawNumber verbatim. `indent`: 0 compact, a number
 * of spaces or an indent string (e.g. a tab); `eol` separates lines when indented.
 */
export function writeJson(v: JsonValue, indent: number | string = 0, eol = '\n'): string {
  const unit = typeof indent === 'number' ? ' '.repeat(indent) : indent;
  const nl = (level: number) => (unit ? `${eol}${unit.repeat(level)}` : '');
  const go = (x: JsonValue, level: number): string => {
    if (x === null) return 'null';
    if (x instanceof RawNumber) return x.text;
    switch (typeof x) {
      case 'bigint':
        return x.toString();
      case 'number':
        if (!Number.isFinite(x)) throw new RangeError('non-finite number');
        return String(x);
      case 'string':
      case 'boolean':
        return JSON.stringify(x);
    }
    if (Array.isArray(x)) return x.length ? `[${x.map((e) => nl(level + 1) + go(e, level + 1)).join(',')}${nl(level)}]` : '[]';
    const keys = Object.keys(x);
    if (!keys.length) return '{}';
    const sep = unit ? ': ' : ':';
    return `{${keys.map((k) => `${nl(level + 1)}${JSON.stringify(k)}${sep}${go((x as JsonObj)[k]!, level + 1)}`).join(',')}${nl(level)}}`;
  };
  return go(v, 0);
}
