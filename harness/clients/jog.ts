// A local jog producer as a client would write it (document 1 part 1 "Jog datagrams", part 4 update_jog,
// GET /v1/jog/clock, GET /v1/jog, GET /v1/jog/ingress). The `local_jog_update` frame layout is the
// reference stack's profile (docs/profile.md "Jog"), written here from that document, not imported.
// Datagrams go out through unix-dgram (node:dgram does UDP only); it is loaded on first use so a missing
// native build gives one clear error.

import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { JsonObject } from '../oracle/json.ts';
import type { ControlClient } from './control.ts';

export const JOG_FRAME_MAGIC = 0x474f4a4c;
export const JOG_FRAME_VERSION = 1;
export const JOG_FRAME_HEADER = 80;
export const JOG_FRAME_MAX = 4096;

export interface JogFrame {
  magic?: number;
  version?: number;
  axisCount?: number;
  session: string;
  generation: bigint;
  jogGeneration: bigint;
  sourceSequence: bigint;
  captureHostNs: bigint;
  reserved?: bigint;
  velocity: number[];
}

/** Encode a local_jog_update frame (fixed little-endian layout; docs/profile.md "Jog"). */
export function encodeJogFrame(f: JogFrame): Buffer {
  const b = Buffer.alloc(JOG_FRAME_HEADER + 8 * f.velocity.length);
  b.writeUInt32LE(f.magic ?? JOG_FRAME_MAGIC, 0);
  b.writeUInt16LE(f.version ?? JOG_FRAME_VERSION, 4);
  b.writeUInt16LE(f.axisCount ?? f.velocity.length, 6);
  Buffer.from(f.session, 'hex').copy(b, 8, 0, 32);
  b.writeBigUInt64LE(f.generation, 40);
  b.writeBigUInt64LE(f.jogGeneration, 48);
  b.writeBigUInt64LE(f.sourceSequence, 56);
  b.writeBigUInt64LE(f.captureHostNs, 64);
  b.writeBigUInt64LE(f.reserved ?? 0n, 72);
  f.velocity.forEach((v, i) => b.writeDoubleLE(v, 80 + 8 * i));
  return b;
}

interface DgramSocket {
  send(buf: Buffer, offset: number, length: number, path: string, cb: (e?: Error) => void): void;
  close(): void;
}
let dgram: { createSocket(type: 'unix_dgram'): DgramSocket } | undefined;

/** A datagram sender to {socket_dir}/jog.sock (the directory of the control socket). */
export class JogSender {
  private readonly socket: DgramSocket;
  readonly path: string;
  constructor(controlSocket: string) {
    if (!dgram) {
      try {
        dgram = createRequire(import.meta.url)('unix-dgram') as typeof dgram;
      } catch (e) {
        throw new Error(`JOG_SENDER_MODULE_MISSING: unix-dgram could not be loaded (${(e as Error).message.split('\n')[0]})`);
      }
    }
    this.socket = dgram!.createSocket('unix_dgram');
    this.path = join(dirname(controlSocket), 'jog.sock');
  }
  send(buf: Buffer): Promise<void> {
    return new Promise((resolve, reject) => this.socket.send(buf, 0, buf.length, this.path, (e) => (e ? reject(e) : resolve())));
  }
  close(): void {
    this.socket.close();
  }
}

/** Host monotonic ns as this process reads it (CLOCK_MONOTONIC, the clock GET /v1/jog/clock names). */
export const hostNs = (): bigint => process.hrtime.bigint();

async function observe(client: ControlClient, path: string, op: string): Promise<JsonObject> {
  const r = await client.get(path, op);
  if (r.status !== 200) throw new Error(`${path} refused: ${r.status} ${r.reply.error}`);
  return r.reply.data as JsonObject;
}
export const readJogClock = (c: ControlClient) => observe(c, '/v1/jog/clock', 'jog_clock');
export const readJog = (c: ControlClient) => observe(c, '/v1/jog', 'jog_status');
export const readJogIngress = (c: ControlClient) => observe(c, '/v1/jog/ingress', 'jog_ingress');

/** Wait until the ingress has counted `received` frames (a datagram is handled asynchronously). */
export async function waitIngress(c: ControlClient, received: bigint, timeoutMs = 3000): Promise<JsonObject> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const g = await readJogIngress(c);
    if ((g.received as bigint) >= received || Date.now() > until) return g;
    await new Promise((r) => setTimeout(r, 2));
  }
}
