// `hil dense inspect`: a dense trajectory file read with the harness's own decoder.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { decodeUtf8Strict, isJsonObject, parseExact, stringifyExact } from '../oracle/json.ts';
import type { JsonExact } from '../oracle/json.ts';
import { blockSha256, decodeDense } from '../oracle/dense.ts';
import { OracleError } from '../oracle/errors.ts';
import { InputError, UsageError, wantsHelp } from './common.ts';

/**
 * hil dense inspect FILE. The verdict is the oracle decoder's (the first broken rule); the listing is
 * read leniently so a person sees as much of a broken file as can be read.
 */
export async function denseCommand(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'dense')) return 0;
  const [sub, file, ...extra] = args;
  if (sub !== 'inspect' || file === undefined || extra.length) throw new UsageError('expected: dense inspect FILE');
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(readFileSync(resolve(file)));
  } catch (e) {
    // A file that cannot be read is the user's to correct (exit 2); 1 is the verdict on a file read.
    throw new InputError(`cannot read ${file}: ${(e as Error).message}`);
  }
  const out: string[] = [`file        ${file} (${bytes.length} bytes)`];
  let header: JsonExact | undefined;
  const headerLength = bytes.length >= 4 ? new DataView(bytes.buffer, bytes.byteOffset).getUint32(0, false) : undefined;
  if (headerLength !== undefined && 4 + headerLength <= bytes.length) {
    out.push(`header_len  ${headerLength}`);
    try {
      header = parseExact(decodeUtf8Strict(bytes.subarray(4, 4 + headerLength)));
    } catch {
      out.push('header      (not valid JSON)');
    }
  }
  if (isJsonObject(header)) {
    const show = (v: JsonExact | undefined) => (v === undefined ? '(absent)' : typeof v === 'string' ? v : stringifyExact(v));
    out.push('header:');
    for (const key of ['schema', 'plan_id', 'program_id', 'program_digest', 'trajectory_digest', 'manifest_revision', 'plan_revision', 'created_at', 'axes', 'sampling', 'limits', 'sample_encoding']) {
      out.push(`  ${key.padEnd(18)} ${show(header[key])}`);
    }
    const others = Object.keys(header).filter((k) => !['segments', 'schema', 'plan_id', 'program_id', 'program_digest', 'trajectory_digest', 'manifest_revision', 'plan_revision', 'created_at', 'axes', 'sampling', 'limits', 'sample_encoding'].includes(k));
    if (others.length) out.push(`  other keys         ${others.join(', ')}`);
    const segs = Array.isArray(header.segments) ? header.segments : [];
    out.push(`segments (${segs.length}):`);
    out.push(`  ${'index'.padEnd(6)}${'kind'.padEnd(11)}${'samples'.padStart(8)}  ${'duration_s'.padEnd(12)}${'offset'.padStart(10)}${'length'.padStart(10)}  block`);
    const bodyStart = 4 + headerLength!;
    for (const seg of segs) {
      if (!isJsonObject(seg)) continue;
      const block = isJsonObject(seg.block) ? seg.block : {};
      const off = typeof block.byte_offset === 'bigint' ? Number(block.byte_offset) : NaN;
      const len = typeof block.byte_length === 'bigint' ? Number(block.byte_length) : NaN;
      const inside = Number.isSafeInteger(off) && Number.isSafeInteger(len) && bodyStart + off + len <= bytes.length;
      const ok = inside ? (blockSha256(bytes.subarray(bodyStart + off, bodyStart + off + len)) === block.sha256 ? 'ok' : 'bad') : 'outside the file';
      out.push(`  ${show(seg.index).padEnd(6)}${show(seg.kind).padEnd(11)}${show(seg.sample_count).padStart(8)}  ${show(seg.duration_s).padEnd(12)}${show(block.byte_offset).padStart(10)}${show(block.byte_length).padStart(10)}  ${ok}`);
    }
  }
  try {
    const d = decodeDense(bytes);
    out.push(`digest      ${d.trajectoryDigest} ok`);
    out.push(`verdict     valid (${d.totalSampleCount} samples in ${d.segments.length} segments, ${d.totalDurationS} s)`);
    process.stdout.write(out.join('\n') + '\n');
    return 0;
  } catch (e) {
    if (!(e instanceof OracleError)) throw e;
    out.push(`verdict     ${e.code}: ${e.message}`);
    process.stdout.write(out.join('\n') + '\n');
    process.stderr.write(`${e.code}\n`);
    return 1;
  }
}
