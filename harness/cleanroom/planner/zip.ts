// Minimal ZIP reader (stored and deflate entries, CRC checked, no ZIP64) and a stored-only writer for tests.
import { inflateRawSync } from "node:zlib";

export class BadZipFile extends Error { override name = "BadZipFile"; }

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) { let c = n; for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1; t[n] = c >>> 0; }
  return t;
})();
export function crc32(b: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < b.length; i++) c = CRC_TABLE[(c ^ b[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

export function readZip(data: Buffer): Map<string, Buffer> {
  if (data.length < 22) throw new BadZipFile("File is not a zip file");
  let eocd = -1;
  for (let i = data.length - 22; i >= Math.max(0, data.length - 22 - 65535); i--) if (data.readUInt32LE(i) === 0x06054b50) { eocd = i; break; }
  if (eocd < 0) throw new BadZipFile("File is not a zip file");
  const count = data.readUInt16LE(eocd + 10);
  const cdSize = data.readUInt32LE(eocd + 12);
  let p = data.readUInt32LE(eocd + 16);
  if (count === 0xffff || p === 0xffffffff || p + cdSize > data.length) throw new BadZipFile("unsupported or truncated central directory");
  const out = new Map<string, Buffer>();
  for (let e = 0; e < count; e++) {
    if (p + 46 > data.length || data.readUInt32LE(p) !== 0x02014b50) throw new BadZipFile("bad central directory entry");
    const flags = data.readUInt16LE(p + 8), method = data.readUInt16LE(p + 10), crc = data.readUInt32LE(p + 16);
    const csize = data.readUInt32LE(p + 20), usize = data.readUInt32LE(p + 24);
    const nlen = data.readUInt16LE(p + 28), xlen = data.readUInt16LE(p + 30), clen = data.readUInt16LE(p + 32);
    const lho = data.readUInt32LE(p + 42);
    const name = data.subarray(p + 46, p + 46 + nlen).toString("utf8");
    p += 46 + nlen + xlen + clen;
    if (flags & 1) throw new BadZipFile(`encrypted entry ${name}`);
    if (lho + 30 > data.length || data.readUInt32LE(lho) !== 0x04034b50) throw new BadZipFile(`bad local header for ${name}`);
    const start = lho + 30 + data.readUInt16LE(lho + 26) + data.readUInt16LE(lho + 28);
    if (start + csize > data.length) throw new BadZipFile(`truncated entry ${name}`);
    const raw = data.subarray(start, start + csize);
    let content: Buffer;
    if (method === 0) content = Buffer.from(raw);
    else if (method === 8) { try { content = inflateRawSync(raw); } catch (err) { throw new BadZipFile(`cannot inflate ${name}: ${String(err)}`); } }
    else throw new BadZipFile(`compression method ${method} unsupported for ${name}`);
    if (content.length !== usize || crc32(content) !== crc) throw new BadZipFile(`Bad CRC-32 for file '${name}'`);
    if (name.endsWith("/")) continue;
    out.set(name, content);
  }
  return out;
}

export function writeZip(files: Record<string, Uint8Array | string>): Buffer {
  const locals: Buffer[] = [], centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, v] of Object.entries(files)) {
    const content = typeof v === "string" ? Buffer.from(v, "utf8") : Buffer.from(v);
    const n = Buffer.from(name, "utf8"); const crc = crc32(content);
    const lh = Buffer.alloc(30);
    lh.writeUInt32LE(0x04034b50, 0); lh.writeUInt16LE(20, 4); lh.writeUInt16LE(0x0800, 6); lh.writeUInt16LE(0, 8);
    lh.writeUInt32LE(crc, 14); lh.writeUInt32LE(content.length, 18); lh.writeUInt32LE(content.length, 22); lh.writeUInt16LE(n.length, 26);
    const ch = Buffer.alloc(46);
    ch.writeUInt32LE(0x02014b50, 0); ch.writeUInt16LE(20, 4); ch.writeUInt16LE(20, 6); ch.writeUInt16LE(0x0800, 8);
    ch.writeUInt32LE(crc, 16); ch.writeUInt32LE(content.length, 20); ch.writeUInt32LE(content.length, 24); ch.writeUInt16LE(n.length, 28);
    ch.writeUInt32LE(offset, 42);
    locals.push(lh, n, content); centrals.push(ch, n);
    offset += 30 + n.length + content.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0); end.writeUInt16LE(centrals.length / 2, 8); end.writeUInt16LE(centrals.length / 2, 10);
  end.writeUInt32LE(cd.length, 12); end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}
