// Reading a .weldplan container (docs/profile.md "Weld planner: the .weldplan container"): an entry whose
// central directory understates its inflated size is refused while it inflates, as soon as its output
// crosses the declared size, never inflated in full.

import { deflateRawSync, constants } from 'node:zlib';
import { zipSync } from 'fflate';
import { expect, test } from 'vitest';
import { readZip } from './weldplan.ts';

const MiB = 1024 * 1024;

/**
 * Raw deflate data of `mib` MiB of zeros without holding them: one MiB compressed with a sync flush (its
 * blocks are not final and end on a byte), repeated, then a final empty block.
 */
function zerosDeflated(mib: number): Buffer {
  const one = deflateRawSync(Buffer.alloc(MiB), { finishFlush: constants.Z_SYNC_FLUSH });
  return Buffer.concat([...Array.from({ length: mib }, () => one), deflateRawSync(Buffer.alloc(0))]);
}

/** A one-entry zip (APPNOTE local header, data, central directory, end record) of raw deflate data and the size it declares. */
function lyingZip(name: string, deflated: Buffer, declared: number): Uint8Array {
  const enc = new TextEncoder().encode(name);
  const local = Buffer.alloc(30 + enc.length);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt16LE(8, 8);
  local.writeUInt32LE(deflated.length, 18);
  local.writeUInt32LE(declared, 22);
  local.writeUInt16LE(enc.length, 26);
  local.set(enc, 30);
  const central = Buffer.alloc(46 + enc.length);
  central.writeUInt32LE(0x02014b50, 0);
  central.writeUInt16LE(20, 4);
  central.writeUInt16LE(20, 6);
  central.writeUInt16LE(8, 10);
  central.writeUInt32LE(deflated.length, 20);
  central.writeUInt32LE(declared, 24);
  central.writeUInt16LE(enc.length, 28);
  central.writeUInt32LE(0, 42);
  central.set(enc, 46);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(1, 8);
  end.writeUInt16LE(1, 10);
  end.writeUInt32LE(central.length, 12);
  end.writeUInt32LE(local.length + deflated.length, 16);
  return Buffer.concat([local, deflated, central, end]);
}

test('an entry declaring 100 bytes that inflates to 1 GiB is refused as its output crosses 100 bytes, without inflating the rest', () => {
  const bomb = zerosDeflated(1024);
  expect(bomb.length).toBeLessThan(2 * MiB);
  const zip = lyingZip('workpiece.step', bomb, 100);
  const before = process.memoryUsage().arrayBuffers;
  expect(() => readZip(zip)).toThrow(/^entry "workpiece\.step" inflates past its declared size of 100 bytes$/);
  // Whatever the inflater produced on its way was a few MiB at most, never the gigabyte.
  expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * MiB);
});

test.each([
  ['declares one byte more than it inflates to', 101, /^entry "workpiece\.step" inflates to 100 bytes, not its declared 101$/],
  ['declares one byte less than it inflates to', 99, /^entry "workpiece\.step" inflates past its declared size of 99 bytes$/],
])('an entry that %s is refused', (_what, declared, why) => {
  const zip = lyingZip('workpiece.step', deflateRawSync(Buffer.alloc(100, 7)), declared);
  expect(() => readZip(zip)).toThrow(why);
});

test('an entry that inflates to exactly its declared size reads whole, deflated or stored', () => {
  const data = Buffer.from('ISO-10303-21;'.repeat(5000));
  expect(Buffer.from(readZip(lyingZip('workpiece.step', deflateRawSync(data), data.length)).get('workpiece.step')!).equals(data)).toBe(true);
  const stored = zipSync({ 'a.json': [new Uint8Array(data), { level: 0 }], 'b.json': [new Uint8Array(data), { level: 9 }] });
  const m = readZip(stored);
  expect([...m.keys()]).toEqual(['a.json', 'b.json']);
  for (const v of m.values()) expect(Buffer.from(v).equals(data)).toBe(true);
});
