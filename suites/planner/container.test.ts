// The .weldplan container (document 2 part 7: "unreadable container (bad zip, digest mismatch, wrong
// program schema)" answers 422 with error "<type>: <message>"). Document 2 shows no layout: the entries,
// the manifest, the size and name-safety rules and the error type names are profile decisions (docs/
// profile.md "Weld planner: the .weldplan container"). What document 2 names is contract: bytes that are
// no zip, a digest that does not match, a program of another schema are refused with 422 and a
// "<type>: <message>" error, and their valid twin plans. Where the rule itself is ours (a manifest entry,
// an unsafe name, a size ceiling) the whole refusal is a profile check. Malformed zips are written byte
// for byte by the harness.

import { inflateRawSync } from 'node:zlib';
import { covers, describe, expect } from '../../harness/fixture.ts';
import { crc32, packWeldplan, writeZip, type ZipEntry } from '../../harness/clients/weldplan.ts';
import { stringifyExact } from '../../harness/oracle/json.ts';
import { DENSE, expectRefused, plannerTest as test, program, usePlanner, weldplan } from './toolkit.ts';

const enc = new TextEncoder();

/** The standard entries of a valid container, to be rearranged into a malformed one. */
function entriesOf(): ZipEntry[] {
  const prog = program();
  const bytes = packWeldplan({ program: prog });
  // Re-read the entries by writing them again: packWeldplan's own order is manifest, program, tooling.
  const names: string[] = [];
  const out: ZipEntry[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  while (view.getUint32(at, true) === 0x04034b50) {
    const method = view.getUint16(at + 8, true) as 0 | 8;
    const csize = view.getUint32(at + 18, true);
    const nlen = view.getUint16(at + 26, true);
    const name = new TextDecoder().decode(bytes.subarray(at + 30, at + 30 + nlen));
    const body = bytes.subarray(at + 30 + nlen, at + 30 + nlen + csize);
    names.push(name);
    out.push({ name, data: method === 8 ? new Uint8Array(inflateRawSync(body)) : body.slice() });
    at += 30 + nlen + csize;
  }
  return out;
}

/** [what, our error text, the refusal, whether document 2 names the rule (bad zip, digest mismatch, wrong program schema)]. */
const CASES: ReadonlyArray<readonly [string, RegExp, () => Uint8Array, 'documented' | 'ours']> = [
  ['bytes that are not a zip', /^BadZipFile: /, () => enc.encode('PK not really a zip archive'), 'documented'],
  ['a zip cut short', /^BadZipFile: /, () => weldplan().slice(0, 200), 'documented'],
  ['an entry named ../program.json (path traversal)', /^BadZipFile: .*traversal/, () => writeZip([...entriesOf(), { name: '../program.json', data: enc.encode('{}') }]), 'ours'],
  ['an entry with an absolute name', /^BadZipFile: .*absolute/, () => writeZip([...entriesOf(), { name: '/etc/cron.d/weld', data: enc.encode('x') }]), 'ours'],
  ['program.json twice', /^BadZipFile: .*duplicate/, () => writeZip([...entriesOf(), { name: 'program.json', data: enc.encode('{}') }]), 'ours'],
  ['an entry that declares 25 MiB inflated (refused before inflating; the real content is 2 bytes)', /^BadZipFile: .*inflates to 26214400 bytes/, () => writeZip([...entriesOf(), { name: 'workpiece.step', data: enc.encode('{}'), declaredSize: 25 * 1024 * 1024 }]), 'ours'],
  ['a STEP entry of 25 MiB of zeros (a small compressed entry that inflates past the limit)', /^BadZipFile: .*inflates to/, () => writeZip([...entriesOf(), { name: 'workpiece.step', data: new Uint8Array(25 * 1024 * 1024) }]), 'ours'],
  ['no manifest.json', /^WeldplanManifestError: /, () => writeZip(entriesOf().filter((e) => e.name !== 'manifest.json')), 'ours'],
  ['an entry the manifest does not list', /^WeldplanManifestError: .*notes.txt/, () => writeZip([...entriesOf(), { name: 'notes.txt', data: enc.encode('hello') }]), 'ours'],
  ['a manifest listing an entry the zip lacks', /^WeldplanManifestError: /, () => packWeldplan({ program: program(), manifest: (m) => void (m.entries as any[]).push({ name: 'workpiece.step', sha256: `sha256:${'0'.repeat(64)}`, bytes: 0n }) }), 'ours'],
  ['program.json whose digest differs from the manifest', /^DigestMismatch: program.json/, () => packWeldplan({ program: program(), manifest: (m) => void ((m.entries as any[])[0].sha256 = `sha256:${'1'.repeat(64)}`) }), 'ours'],
  ['a manifest program_digest that is not the document\'s', /^DigestMismatch: /, () => packWeldplan({ program: program(), manifest: (m) => void (m.program_digest = `sha256:${'2'.repeat(64)}`) }), 'ours'],
  ['a program of another schema', /^ProgramDocumentInvalid: field: schema: /, () => weldplan((p) => void (p.schema = 'robot.v4.program.v1')), 'documented'],
  ['program.json that is not JSON', /^ProgramDocumentInvalid: program.json is not strict JSON/, () => packWeldplan({ program: program(), programBytes: enc.encode('{"schema": "robot.v4.program.v2",') }), 'documented'],
  ['program.json with a repeated key', /^ProgramDocumentInvalid: program.json is not strict JSON \(json_duplicate_key/, () => packWeldplan({ program: program(), programBytes: enc.encode(stringifyExact(program()).replace('{"schema"', '{"schema":"x","schema"')) }), 'ours'],
];

describe('.weldplan containers a planner must refuse (422 "<type>: <message>")', () => {
  for (const [what, label, make, rule] of CASES) {
    test(what, covers('planner:error.422_planning_failed', 'profile:planner.container'), async ({ planner, skip }) => {
      const p = usePlanner({ skip }, planner);
      // The twin: the fixture's container as the harness packs it (every case differs from it only in the defect).
      await expectRefused(p, make(), { profile: 'profile:planner.container', text: label, refusalIsProfile: rule === 'ours' });
    });
  }

  test('the harness zip writer is what the planner reads: a rebuilt valid container plans', covers('endpoint:POST /api/motion/plan'), async ({ planner, skip }) => {
    const p = usePlanner({ skip }, planner);
    const r = await p.client.plan(writeZip(entriesOf().map((e) => ({ ...e, method: 0 as const }))), DENSE);
    expect(r.status, r.text.slice(0, 300)).toBe(200);
    expect(crc32(enc.encode('123456789'))).toBe(0xcbf43926); // the CRC-32 check value
  });
});
