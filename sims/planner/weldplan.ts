// Reading a .weldplan container (document 2 part 1: "a client posts a .weldplan container"; the
// container's layout is ours: docs/profile.md "Weld planner: the .weldplan container"). A zip read with
// fflate whose filter refuses unsafe names, repeated names, too many entries and oversize entries before
// anything is inflated; then the manifest, the entry digests, the program document and the tooling.
//
// Failures are PlanningFailure(type, message): the service answers 422 with error "<type>: <message>"
// (document 2 part 7).

import { createHash } from 'node:crypto';
import { Inflate, unzipSync } from 'fflate';
import { decodeJson, JsonDecodeError, JsonObject, type JsonValue } from '../json.ts';
import { validateProgram, ProgramInvalid, type ProgramView } from './program.ts';
import { canonicalDigest } from './canonical.ts';
import { CanonicalError } from '../json.ts';

export const MANIFEST_SCHEMA = 'weldplan.manifest.v1';
export const ENTRY_NAMES = ['manifest.json', 'program.json', 'tooling.json', 'workpiece.step'] as const;
/** Largest inflated entry: the OLP server's /weld-plan body limit (document 3 part 2, 24 MiB). */
export const ENTRY_LIMIT = 24 * 1024 * 1024;
export const MAX_ENTRIES = 16;

export class PlanningFailure extends Error {
  constructor(readonly type: string, message: string) {
    super(message);
    this.name = type;
  }
  get text(): string {
    return `${this.type}: ${this.message}`;
  }
}

export interface Weldplan {
  manifest: JsonObject;
  program: ProgramView;
  tooling: JsonObject;
  step?: Uint8Array;
  /** sha256:<hex> of each entry's bytes. */
  entryDigests: Record<string, string>;
}

const sha = (b: Uint8Array) => 'sha256:' + createHash('sha256').update(b).digest('hex');

/** Why a zip entry name is unsafe, or undefined. */
export function unsafeName(name: string): string | undefined {
  if (name === '') return 'an empty entry name';
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) return `absolute entry name ${JSON.stringify(name)}`;
  if (name.includes('\\')) return `entry name with a backslash ${JSON.stringify(name)}`;
  if (name.split('/').some((p) => p === '..')) return `path traversal in entry name ${JSON.stringify(name)}`;
  if (name.includes('\0')) return 'entry name with a NUL';
  return undefined;
}

/** Compressed bytes handed to the inflater at a time: one push inflates to at most about 1032 times this. */
const INFLATE_STEP = 4096;

/**
 * Where each entry's data lies, from the central directory and the local headers (APPNOTE 4.3.7, 4.3.12,
 * 4.3.16): name, method, compressed and declared sizes, data offset. Sizes of 0xFFFFFFFF (zip64) are
 * refused: no entry may come near 4 GiB here.
 */
function entryData(bytes: Uint8Array): Array<{ name: string; method: number; compressed: number; declared: number; offset: number }> {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const bad = (why: string) => new PlanningFailure('BadZipFile', why);
  let eocd = -1;
  for (let i = bytes.length - 22; i >= Math.max(0, bytes.length - 22 - 0xffff); i--) {
    if (v.getUint32(i, true) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw bad('not a readable zip archive (no end of central directory)');
  const count = v.getUint16(eocd + 10, true);
  let at = v.getUint32(eocd + 16, true);
  const out = [];
  const dec = new TextDecoder();
  for (let k = 0; k < count; k++) {
    if (at + 46 > bytes.length || v.getUint32(at, true) !== 0x02014b50) throw bad('not a readable zip archive (central directory)');
    const method = v.getUint16(at + 10, true);
    const compressed = v.getUint32(at + 20, true);
    const declared = v.getUint32(at + 24, true);
    const nameLen = v.getUint16(at + 28, true);
    const local = v.getUint32(at + 42, true);
    const name = dec.decode(bytes.subarray(at + 46, at + 46 + nameLen));
    at += 46 + nameLen + v.getUint16(at + 30, true) + v.getUint16(at + 32, true);
    if (compressed === 0xffffffff || declared === 0xffffffff || local === 0xffffffff) throw bad(`entry ${JSON.stringify(name)} has zip64 sizes`);
    if (local + 30 > bytes.length || v.getUint32(local, true) !== 0x04034b50) throw bad(`entry ${JSON.stringify(name)} has no local header`);
    const offset = local + 30 + v.getUint16(local + 26, true) + v.getUint16(local + 28, true);
    if (offset + compressed > bytes.length) throw bad(`entry ${JSON.stringify(name)} runs past the end of the archive`);
    out.push({ name, method, compressed, declared, offset });
  }
  return out;
}

/**
 * Inflate one entry, never past the size its central directory declared: the compressed bytes go to a
 * streaming inflater a few KiB at a time and the output is counted as it comes, so an entry that lies
 * about its size is refused as soon as its output crosses the declared size, having produced at most a
 * few MiB, never the gigabyte it would inflate to.
 */
function inflateBounded(bytes: Uint8Array, e: { name: string; method: number; compressed: number; declared: number; offset: number }): Uint8Array {
  const data = bytes.subarray(e.offset, e.offset + e.compressed);
  const lied = () => new PlanningFailure('BadZipFile', `entry ${JSON.stringify(e.name)} inflates past its declared size of ${e.declared} bytes`);
  if (e.method === 0) {
    if (e.compressed !== e.declared) throw lied();
    return data.slice();
  }
  if (e.method !== 8) throw new PlanningFailure('BadZipFile', `entry ${JSON.stringify(e.name)} uses compression method ${e.method} (stored or deflated only)`);
  const out = new Uint8Array(e.declared);
  let filled = 0;
  let ended = false;
  const inflater = new Inflate((chunk, final) => {
    if (filled + chunk.length > e.declared) throw lied();
    out.set(chunk, filled);
    filled += chunk.length;
    if (final) ended = true;
  });
  try {
    for (let i = 0; i < data.length && !ended; i += INFLATE_STEP) inflater.push(data.subarray(i, Math.min(data.length, i + INFLATE_STEP)), i + INFLATE_STEP >= data.length);
  } catch (x) {
    if (x instanceof PlanningFailure) throw x;
    throw new PlanningFailure('BadZipFile', `entry ${JSON.stringify(e.name)} is not valid deflate data (${(x as Error).message})`);
  }
  if (!ended || filled !== e.declared) throw new PlanningFailure('BadZipFile', `entry ${JSON.stringify(e.name)} inflates to ${filled} bytes, not its declared ${e.declared}`);
  return out;
}

/** The zip's entries, refused before inflating when a name is unsafe or repeated or an entry is too large. */
export function readZip(bytes: Uint8Array): Map<string, Uint8Array> {
  const seen = new Set<string>();
  const out = new Map<string, Uint8Array>();
  try {
    // First pass: every entry is judged from the central directory and nothing is inflated.
    unzipSync(bytes, {
      filter(f) {
        const bad = unsafeName(f.name);
        if (bad) throw new PlanningFailure('BadZipFile', bad);
        if (seen.has(f.name)) throw new PlanningFailure('BadZipFile', `duplicate entry name ${JSON.stringify(f.name)}`);
        seen.add(f.name);
        if (seen.size > MAX_ENTRIES) throw new PlanningFailure('BadZipFile', `more than ${MAX_ENTRIES} entries`);
        if (f.originalSize > ENTRY_LIMIT) throw new PlanningFailure('BadZipFile', `entry ${JSON.stringify(f.name)} inflates to ${f.originalSize} bytes, more than ${ENTRY_LIMIT}`);
        return false;
      },
    });
    // Second pass: inflate what passed, each entry bounded by its declared size while it inflates.
    for (const e of entryData(bytes)) out.set(e.name, inflateBounded(bytes, e));
  } catch (e) {
    if (e instanceof PlanningFailure) throw e;
    throw new PlanningFailure('BadZipFile', `not a readable zip archive (${(e as Error).message})`);
  }
  return out;
}

function json(name: string, bytes: Uint8Array, type: string): JsonValue {
  try {
    return decodeJson(bytes);
  } catch (e) {
    if (e instanceof JsonDecodeError) throw new PlanningFailure(type, `${name} is not strict JSON (${e.code} at byte ${e.offset})`);
    throw e;
  }
}

export function readWeldplan(bytes: Uint8Array): Weldplan {
  const entries = readZip(bytes);
  const manifestBytes = entries.get('manifest.json');
  if (!manifestBytes) throw new PlanningFailure('WeldplanManifestError', 'the container has no manifest.json');
  const manifest = json('manifest.json', manifestBytes, 'WeldplanManifestError');
  if (!(manifest instanceof JsonObject) || manifest.get('schema') !== MANIFEST_SCHEMA) throw new PlanningFailure('WeldplanManifestError', `manifest.json is not a ${MANIFEST_SCHEMA} object`);
  const listed = manifest.get('entries');
  if (!Array.isArray(listed)) throw new PlanningFailure('WeldplanManifestError', 'manifest entries is not an array');
  const digests: Record<string, string> = { 'manifest.json': sha(manifestBytes) };
  const names = new Set<string>();
  for (const e of listed) {
    const name = e instanceof JsonObject ? e.get('name') : undefined;
    const digest = e instanceof JsonObject ? e.get('sha256') : undefined;
    if (typeof name !== 'string' || typeof digest !== 'string') throw new PlanningFailure('WeldplanManifestError', 'a manifest entry is {name, sha256, bytes}');
    if (name === 'manifest.json' || !ENTRY_NAMES.includes(name as (typeof ENTRY_NAMES)[number])) throw new PlanningFailure('WeldplanManifestError', `manifest lists an unknown entry ${JSON.stringify(name)}`);
    if (names.has(name)) throw new PlanningFailure('WeldplanManifestError', `manifest lists ${name} twice`);
    names.add(name);
    const data = entries.get(name);
    if (!data) throw new PlanningFailure('WeldplanManifestError', `manifest lists ${name}, which the container does not hold`);
    const actual = sha(data);
    if (actual !== digest) throw new PlanningFailure('DigestMismatch', `${name}: manifest says ${digest}, content is ${actual}`);
    digests[name] = actual;
  }
  for (const name of entries.keys()) {
    if (name !== 'manifest.json' && !names.has(name)) throw new PlanningFailure('WeldplanManifestError', `container entry ${JSON.stringify(name)} is not in the manifest`);
  }
  for (const required of ['program.json', 'tooling.json']) if (!names.has(required)) throw new PlanningFailure('WeldplanManifestError', `the container has no ${required}`);

  const doc = json('program.json', entries.get('program.json')!, 'ProgramDocumentInvalid');
  let program: ProgramView;
  try {
    program = validateProgram(doc);
  } catch (e) {
    if (e instanceof ProgramInvalid) throw new PlanningFailure('ProgramDocumentInvalid', e.message);
    throw e;
  }
  const declared = manifest.get('program_digest');
  if (declared !== program.digest) throw new PlanningFailure('DigestMismatch', `manifest program_digest ${JSON.stringify(declared ?? null)} differs from the program document's ${program.digest}`);
  if (manifest.get('program_id') !== program.programId) throw new PlanningFailure('WeldplanManifestError', 'manifest program_id differs from the program document');
  if (manifest.get('cell_id') !== program.cellId) throw new PlanningFailure('WeldplanManifestError', 'manifest cell_id differs from the program placement.cell_id');
  const tooling = json('tooling.json', entries.get('tooling.json')!, 'WeldplanManifestError');
  if (!(tooling instanceof JsonObject)) throw new PlanningFailure('WeldplanManifestError', 'tooling.json is not a JSON object');
  try {
    canonicalDigest(tooling); // tooling enters the request digest: refuse what has no canonical form now
  } catch (e) {
    if (e instanceof CanonicalError) throw new PlanningFailure('WeldplanManifestError', `tooling.json: ${e.message}`);
    throw e;
  }
  return { manifest, program, tooling, step: entries.get('workpiece.step'), entryDigests: digests };
}
