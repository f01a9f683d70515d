// The fragment watch of the remote jog lane: client frame headers read off the raw socket as bytes arrive,
// payloads skipped without buffering; a continuation frame or a data frame without FIN is a fragment.

import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { expect, test } from 'vitest';
import { IdleBound, watchFragments } from './remote-jog.ts';

function frame(opcode: number, payloadLength: number, fin = true): Buffer {
  const head = [(fin ? 0x80 : 0) | opcode];
  if (payloadLength < 126) head.push(0x80 | payloadLength);
  else if (payloadLength < 65536) head.push(0x80 | 126, payloadLength >> 8, payloadLength & 0xff);
  else {
    head.push(0x80 | 127);
    for (let i = 7; i >= 0; i--) head.push(Math.floor(payloadLength / 2 ** (8 * i)) & 0xff);
  }
  return Buffer.concat([Buffer.from(head), Buffer.alloc(4, 0x5a), Buffer.alloc(payloadLength, 0x00)]);
}

/** Feed the bytes in chunks of `size`; how many fragments were reported. */
function feed(bytes: Buffer, size: number): number {
  const s = new PassThrough();
  let n = 0;
  watchFragments(s, () => n++);
  for (let i = 0; i < bytes.length; i += size) s.emit('data', bytes.subarray(i, i + size));
  return n;
}

test('whole frames of every length form, split anywhere, are not fragments', () => {
  // Payload bytes 0x00 (which would read as a continuation header) inside payloads must be skipped, not parsed.
  const bytes = Buffer.concat([frame(2, 152), frame(1, 125), frame(2, 126), frame(2, 4096), frame(9, 3), frame(10, 0), frame(2, 70_000)]);
  for (const size of [1, 2, 3, 7, 13, 1000, bytes.length]) expect(feed(bytes, size), `chunks of ${size}`).toBe(0);
});

test('a data frame without FIN, or a continuation frame, is reported once, wherever the chunks split', () => {
  for (const size of [1, 5, 64, 10_000]) {
    expect(feed(Buffer.concat([frame(2, 200), frame(2, 10, false), frame(0, 10)]), size), `no FIN, chunks of ${size}`).toBe(1);
    expect(feed(Buffer.concat([frame(1, 3), frame(0, 10)]), size), `continuation, chunks of ${size}`).toBe(1);
  }
});

test('the idle bound reads what reached the socket before it ends the lane: input sent in time while the process had no CPU past the bound keeps the lane; silence after it still ends it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'idle-bound-'));
  const path = join(dir, 's.sock');
  let idled = 0;
  let reads = 0;
  const bound = new IdleBound(() => idled++);
  let resolveSock!: (s: Socket) => void;
  const accepted = new Promise<Socket>((r) => (resolveSock = r));
  const srv = createServer((sock) => {
    sock.on('data', () => {
      reads++;
      bound.arm(50);
    });
    bound.arm(50);
    resolveSock(sock);
  });
  await new Promise<void>((r) => srv.listen(path, r));
  const client = createConnection(path);
  const sock = await accepted;
  try {
    // Input leaves at once; then this process gets no CPU for 120 ms (a busy host), past the 50 ms bound.
    client.write('frame');
    const until = performance.now() + 120;
    while (performance.now() < until);
    await new Promise((r) => setTimeout(r, 20));
    expect({ reads, idled }).toEqual({ reads: 1, idled: 0 });
    // Then nothing arrives: the bound ends the lane.
    await new Promise((r) => setTimeout(r, 150));
    expect({ reads, idled }).toEqual({ reads: 1, idled: 1 });
  } finally {
    bound.clear();
    client.destroy();
    sock.destroy();
    srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
