// Building .weldplan containers the way a client (the offline programming server, a user with
// `hil weldplan pack`) does: the program document with its row_hash and program_digest (document 3 part 2
// "Digests", over the harness's own canonical JSON), tooling, optional STEP bytes and the manifest of
// digests (docs/profile.md "Weld planner: the .weldplan container"). The zip is written here, not with a
// library, so that tests can also write the malformed containers a reader must refuse (repeated names,
// traversal, sizes that lie) byte for byte. Deterministic: fixed timestamps, entries in the given order.

import { readFileSync } from 'node:fs';
import { deflateRawSync } from 'node:zlib';
import { canonicalJson, isJsonObject, parseExact, sha256Hex, stringifyExact, type JsonExact, type JsonObject } from '../oracle/json.ts';

export const MANIFEST_SCHEMA = 'weldplan.manifest.v1';
export const PROGRAM_ENTRY = 'program.json';
export const TOOLING_ENTRY = 'tooling.json';
export const STEP_ENTRY = 'workpiece.step';
export const MANIFEST_ENTRY = 'manifest.json';

const enc = new TextEncoder();
const digest = (b: Uint8Array | string) => `sha256:${sha256Hex(b)}`;

function withoutKey(o: JsonObject, key: string): JsonObject {
  const c: JsonObject = Object.create(null);
  for (const [k, v] of Object.entries(o)) if (k !== key) c[k] = v;
  return c;
}

/** Document 3: row_hash is the SHA-256 of the canonical JSON of the node without row_hash. */
export function rowHash(node: JsonObject): string {
  return digest(canonicalJson(withoutKey(node, 'row_hash')));
}

/** Document 3: program_digest is the SHA-256 of the canonical JSON of the document without program_digest. */
export function programDigest(program: JsonObject): string {
  return digest(canonicalJson(withoutKey(program, 'program_digest')));
}

/** A copy with every node's row_hash and the program_digest computed (the document is otherwise unchanged). */
export function sealProgram(program: JsonObject): JsonObject {
  const p = structuredClone(program) as JsonObject;
  if (Array.isArray(p.nodes)) p.nodes = p.nodes.map((n) => (isJsonObject(n) ? { ...n, row_hash: rowHash(n) } : n));
  p.program_digest = programDigest(p);
  return p;
}

export interface ZipEntry {
  name: string;
  data: Uint8Array;
  /** 0 stored, 8 deflated (default). */
  method?: 0 | 8;
  /** Write this uncompressed size in the headers instead of the true one (a lying entry). */
  declaredSize?: number;
  /** The entry's raw deflate bytes as given (method 8), for content too large to hold inflated; `data` then only feeds the CRC. */
  deflated?: Uint8Array;
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(b: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < b.length; i++) c = CRC_TABLE[(c ^ b[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A zip archive (APPNOTE 6.3: local headers, central directory, end record; DOS time 1980-01-01 00:00). */
export function writeZip(entries: readonly ZipEntry[]): Uint8Array {
  const locals: Uint8Array[] = [];
  const centrals: Uint8Array[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = enc.encode(e.name);
    const method = e.deflated ? 8 : (e.method ?? 8);
    const body = e.deflated ?? (method === 8 ? new Uint8Array(deflateRawSync(e.data)) : e.data);
    const crc = crc32(e.data);
    const size = e.declaredSize ?? e.data.length;
    const local = new Uint8Array(30 + name.length);
    const lv = new DataView(local.buffer);
    lv.setUint32(0, 0x04034b50, true);
    lv.setUint16(4, 20, true);
    lv.setUint16(6, 0x0800, true); // UTF-8 names
    lv.setUint16(8, method, true);
    lv.setUint16(10, 0, true);
    lv.setUint16(12, 0x0021, true);
    lv.setUint32(14, crc, true);
    lv.setUint32(18, body.length, true);
    lv.setUint32(22, size, true);
    lv.setUint16(26, name.length, true);
    lv.setUint16(28, 0, true);
    local.set(name, 30);
    const central = new Uint8Array(46 + name.length);
    const cv = new DataView(central.buffer);
    cv.setUint32(0, 0x02014b50, true);
    cv.setUint16(4, 20, true);
    cv.setUint16(6, 20, true);
    cv.setUint16(8, 0x0800, true);
    cv.setUint16(10, method, true);
    cv.setUint16(12, 0, true);
    cv.setUint16(14, 0x0021, true);
    cv.setUint32(16, crc, true);
    cv.setUint32(20, body.length, true);
    cv.setUint32(24, size, true);
    cv.setUint16(28, name.length, true);
    cv.setUint32(42, offset, true);
    central.set(name, 46);
    locals.push(local, body);
    centrals.push(central);
    offset += local.length + body.length;
  }
  const cdSize = centrals.reduce((a, c) => a + c.length, 0);
  const end = new Uint8Array(22);
  const ev = new DataView(end.buffer);
  ev.setUint32(0, 0x06054b50, true);
  ev.setUint16(8, entries.length, true);
  ev.setUint16(10, entries.length, true);
  ev.setUint32(12, cdSize, true);
  ev.setUint32(16, offset, true);
  const out = new Uint8Array(offset + cdSize + 22);
  let at = 0;
  for (const part of [...locals, ...centrals, end]) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

export interface PackInput {
  program: JsonObject;
  tooling?: JsonObject;
  step?: Uint8Array;
  /** Edit the manifest before it is written (tests of manifest refusals). */
  manifest?: (m: JsonObject) => void;
  /** Further entries after the standard ones (tests of unexpected entries). */
  extra?: readonly ZipEntry[];
  /** Program bytes to write instead of the program's JSON text (tests of unreadable documents). */
  programBytes?: Uint8Array;
}

/**
 * The container: manifest.json {schema, program_id, cell_id, program_digest, entries[{name, sha256, bytes}]},
 * program.json, tooling.json and workpiece.step when given. The program is written as given (seal it first).
 */
export function packWeldplan(input: PackInput): Uint8Array {
  const program = input.programBytes ?? enc.encode(stringifyExact(input.program));
  const tooling = enc.encode(stringifyExact(input.tooling ?? { tool_id: 'torch-stub', tcp_xyz_m: [0, 0, 0.4] }));
  const files: Array<[string, Uint8Array]> = [[PROGRAM_ENTRY, program], [TOOLING_ENTRY, tooling]];
  if (input.step) files.push([STEP_ENTRY, input.step]);
  const placement = input.program.placement;
  const manifest: JsonObject = {
    schema: MANIFEST_SCHEMA,
    program_id: (input.program.program_id ?? null) as JsonExact,
    cell_id: (isJsonObject(placement) ? placement.cell_id ?? null : null) as JsonExact,
    program_digest: programDigest(input.program),
    entries: files.map(([name, data]) => ({ name, sha256: digest(data), bytes: BigInt(data.length) })),
  };
  input.manifest?.(manifest);
  return writeZip([{ name: MANIFEST_ENTRY, data: enc.encode(stringifyExact(manifest)) }, ...files.map(([name, data]) => ({ name, data })), ...(input.extra ?? [])]);
}

/** The project's fixture weld program (a line weld), as its weld plan is built from it. */
const FIXTURE_PROGRAM = new URL('../../fixtures/weldplans/line-weld.program.json', import.meta.url);

/**
 * The fixture program sealed and packed as a weld plan; with `hooks`, the stub's test hooks set in its
 * `extensions.weld_planner_stub` (docs/profile.md "Weld planner stub", Test hooks).
 */
export function fixtureWeldplan(hooks?: JsonObject): Uint8Array {
  const p = parseExact(readFileSync(FIXTURE_PROGRAM)) as JsonObject;
  if (hooks) p.extensions = { weld_planner_stub: hooks };
  return packWeldplan({ program: sealProgram(p) });
}

/**
 * The planning options of a plan of the fixture with dense output (document 2 part 1: the plan request's
 * options, every one at a value the stub plans the fixture with), and the plan's identity: the job a test or
 * benchmark that drives one planning process directly sends it, as the planner would.
 */
export function fixtureJobOptions(id: { program_id: string; manifest_revision: bigint; plan_revision: bigint }): Record<string, unknown> {
  return {
    k_best: 2, screen_collisions: true, samples_per_seam: null, run_weld_trajopt: true, run_connecting_trajopt: true,
    free_space_backend: 'bspline', verify: true, verify_margin_mm: 5, order_seams: true, dense: true, ...id,
  };
}
