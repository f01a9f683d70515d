// A local jog producer as a client would write it (document 1 part 1 "Jog datagrams", part 4 update_jog,
// GET /v1/jog/clock, GET /v1/jog, GET /v1/jog/ingress). The `local_jog_update` frame layout is the
// reference stack's profile (docs/profile.md "Jog"), written here from that document, not imported.
// Datagrams go out through unix-dgram (node:dgram does UDP only); it is loaded on first use so a missing
// native build gives one clear error. The remote producer (part 5 "Remote jog WebSocket") is a ws 8
// client over TLS with a client certificate; pre-upgrade answers are read with a plain HTTPS request so a
// test can spoil any upgrade header.

import { randomBytes } from 'node:crypto';
import { request as httpsRequest } from 'node:https';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { WebSocket } from 'ws';
import { parseExact, stringifyExact, type JsonExact, type JsonObject } from '../oracle/json.ts';
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

// ---- the remote jog WebSocket (document 1 part 5 "Remote jog WebSocket") ----

/** TLS material of a remote client: PEM texts of its certificate, key and the pair's CA. */
export interface RemoteCreds {
  host: string;
  port: number;
  cert: string;
  key: string;
  ca: string;
}

export interface RemoteJogQuery {
  session: string;
  generation: bigint;
  jogGeneration: bigint;
}

export const remoteJogPath = (q: RemoteJogQuery): string => `/v1/jog?session=${q.session}&generation=${q.generation}&jog_generation=${q.jogGeneration}`;

/** What an upgrade request got: 101, or a pre-upgrade failure with its content type and body. */
export interface UpgradeAnswer {
  status: number;
  contentType: string;
  body: string;
}

/**
 * A lane the service refused before the upgrade, as RemoteJogSocket.open rejects with it: an Error, so a
 * test that did not expect the refusal ends with its status and body in the message, never an empty one.
 * The refusal is the target's answer: where the test needed the lane, that is a FAIL (harness/errors.ts
 * verdictOfError), unless hostBound finds the harness too late for the rule.
 */
export class UpgradeRefused extends Error implements UpgradeAnswer {
  readonly verdict = 'fail' as const;
  constructor(
    readonly status: number,
    readonly contentType: string,
    readonly body: string,
  ) {
    super(`the lane was refused before the upgrade: ${status} ${body.split('\n')[0]!.slice(0, 200)}`);
    this.name = 'UpgradeRefused';
  }
}

/**
 * One GET with the given headers on a fresh TLS connection, as written (no WebSocket library in between,
 * so a test can leave out or spoil any upgrade header). A 101 is reported and the socket closed.
 */
export function upgradeRequest(c: RemoteCreds, path: string, headers: Record<string, string>): Promise<UpgradeAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: c.host, port: c.port, method: 'GET', path, headers, cert: c.cert, key: c.key, ca: c.ca, minVersion: 'TLSv1.3', agent: false });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body: '' });
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The upgrade headers a WebSocket client sends (RFC 6455 section 4.1), each one replaceable. */
export function upgradeHeaders(over: Record<string, string | undefined> = {}): Record<string, string> {
  const h: Record<string, string | undefined> = {
    connection: 'Upgrade',
    upgrade: 'websocket',
    'sec-websocket-version': '13',
    'sec-websocket-key': randomBytes(16).toString('base64'),
    ...over,
  };
  return Object.fromEntries(Object.entries(h).filter(([, v]) => v !== undefined)) as Record<string, string>;
}

export interface CloseInfo {
  code: number;
  reason: string;
}

/** A remote jog producer over ws 8: text setup messages (exact JSON), binary frames, close codes. */
export class RemoteJogSocket {
  private readonly queue: JsonObject[] = [];
  private waiters: Array<(m: JsonObject) => void> = [];
  readonly closed: Promise<CloseInfo>;
  /**
   * The lane's timing as the harness saw it (host ns), for judging a jog_stream_idle the test did not expect
   * (harness/clients/jog-stale.ts remoteIdleByHost): when it opened, when each message left (a ping is not
   * input), moments the test needed the lane alive without sending on it (need), when its frames phase
   * began (begun received, or opened on an existing jog generation) and when the service's jog_stream_idle
   * reached the harness.
   */
  readonly openedNs = hostNs();
  readonly inputsNs: bigint[] = [];
  readonly needsNs: bigint[] = [];
  framesFromNs?: bigint;
  idleNs?: bigint;

  private constructor(
    readonly ws: WebSocket,
    existingGeneration: boolean,
  ) {
    if (existingGeneration) this.framesFromNs = this.openedNs;
    ws.on('error', () => undefined);
    ws.on('message', (data, isBinary) => {
      if (isBinary) return; // the service sends no binary messages
      const m = parseExact(new Uint8Array(data as Buffer)) as JsonObject;
      if (m.type === 'begun') this.framesFromNs ??= hostNs();
      if (m.type === 'rejected' && m.reason === 'jog_stream_idle') this.idleNs ??= hostNs();
      const w = this.waiters.shift();
      if (w) w(m);
      else this.queue.push(m);
    });
    this.closed = new Promise((r) =>
      ws.on('close', (code, reason) => {
        const text = reason.toString('utf8');
        if (text === 'jog_stream_idle') this.idleNs ??= hostNs();
        r({ code, reason: text });
      }),
    );
  }

  /** The test needs the lane alive now (what it does next is judged on a live lane) without sending on it. */
  need(): void {
    this.needsNs.push(hostNs());
  }

  /** Connect; rejects with the pre-upgrade answer (an UpgradeRefused) when there is no 101. */
  static open(c: RemoteCreds, q: RemoteJogQuery): Promise<RemoteJogSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`wss://${c.host}:${c.port}${remoteJogPath(q)}`, { cert: c.cert, key: c.key, ca: c.ca, minVersion: 'TLSv1.3', perMessageDeflate: false });
      ws.once('open', () => resolve(new RemoteJogSocket(ws, q.jogGeneration !== 0n)));
      ws.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => reject(new UpgradeRefused(res.statusCode ?? 0, String(res.headers['content-type'] ?? ''), Buffer.concat(chunks).toString('utf8'))));
      });
      ws.once('error', (e) => reject(e));
    });
  }

  /** The next text message from the service. */
  next(timeoutMs = 5_000): Promise<JsonObject> {
    const m = this.queue.shift();
    if (m) return Promise.resolve(m);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        reject(new Error(`no message from the service within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = (x: JsonObject) => {
        clearTimeout(t);
        resolve(x);
      };
      this.waiters.push(done);
    });
  }

  /** Text messages received and not yet read. */
  pending(): JsonObject[] {
    return this.queue.splice(0);
  }

  sendJson(m: Record<string, JsonExact | undefined>): void {
    this.inputsNs.push(hostNs());
    this.ws.send(stringifyExact(Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)) as JsonObject));
  }

  sendBinary(b: Buffer, opts: { fin?: boolean } = {}): Promise<void> {
    this.inputsNs.push(hostNs());
    return new Promise((resolve, reject) => this.ws.send(b, { binary: true, fin: opts.fin ?? true }, (e) => (e ? reject(e) : resolve())));
  }

  /** A text frame carrying arbitrary bytes (invalid UTF-8 included). */
  sendTextBytes(b: Buffer): void {
    this.inputsNs.push(hostNs());
    this.ws.send(b, { binary: false });
  }

  /** Bytes written to the TLS socket as they are, bypassing ws's framing (unmasked frames, bad opcodes). */
  writeRaw(b: Buffer): void {
    this.inputsNs.push(hostNs());
    (this.ws as unknown as { _socket: { write(b: Buffer): void } })._socket.write(b);
  }

  ping(timeoutMs = 5_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no pong')), timeoutMs);
      this.ws.once('pong', () => {
        clearTimeout(t);
        resolve();
      });
      this.ws.ping(Buffer.from('hil'));
    });
  }

  close(code = 1000): Promise<CloseInfo> {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(code);
    return this.closed;
  }
}

/** A masked client frame built by hand (RFC 6455 section 5.2), for what ws will not send. */
export function rawFrame(opcode: number, payload: Buffer, o: { fin?: boolean; masked?: boolean } = {}): Buffer {
  const masked = o.masked ?? true;
  const len = payload.length;
  const head = [((o.fin ?? true) ? 0x80 : 0) | opcode];
  if (len < 126) head.push((masked ? 0x80 : 0) | len);
  else head.push((masked ? 0x80 : 0) | 126, len >> 8, len & 0xff);
  const key = masked ? randomBytes(4) : Buffer.alloc(0);
  const body = Buffer.from(payload);
  if (masked) for (let i = 0; i < body.length; i++) body[i]! ^= key[i % 4]!;
  return Buffer.concat([Buffer.from(head), key, body]);
}

/**
 * The setup exchange with jog_generation=0 (part 5): calibrate twice (the second after the first reply),
 * then begin. `source` reads the producer's clock. Returns every message the service sent, in order.
 */
export async function calibrateAndBegin(
  s: RemoteJogSocket,
  o: { source: () => bigint; incarnation: string; axisMask: number },
): Promise<{ calibrated: JsonObject[]; answer: JsonObject; beginSourceNs: bigint; beginSentNs: bigint; answeredNs: bigint }> {
  s.sendJson({ type: 'calibrate', source_incarnation: o.incarnation, source_ns: o.source(), seq: 1n });
  const c1 = await s.next();
  s.sendJson({ type: 'calibrate', source_incarnation: o.incarnation, source_ns: o.source(), seq: 2n, host_tx_ns: c1.host_tx_ns as bigint });
  const c2 = await s.next();
  const beginSourceNs = o.source();
  const beginSentNs = hostNs();
  s.sendJson({ type: 'begin', seq: 3n, axis_mask: BigInt(o.axisMask), source_ns: beginSourceNs, host_tx_ns: c2.host_tx_ns as bigint });
  const answer = await s.next();
  // When the begin left and its answer came (host ns): a begin whose input deadline (its sample plus the
  // input age) passed on the way is refused by the rule, which says nothing when the harness was that slow.
  return { calibrated: [c1, c2], answer, beginSourceNs, beginSentNs, answeredNs: hostNs() };
}
