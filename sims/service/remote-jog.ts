// The remote jog WebSocket lane (document 1 part 5 "Remote jog WebSocket", part 7 close codes, part 8
// "Remote jog idle"). `GET /v1/jog?session=&generation=&jog_generation=` on the remote listener is
// always a WebSocket upgrade; it feeds the same jog lane as jog.sock (JogOps.onInput), with the frame's
// capture time in the producer's clock mapped to host time through a two-sample calibration.
//
// Decisions where the documents say "not shown" are in docs/profile.md "Remote jog": the pre-upgrade
// check order, the calibration arithmetic and the jog_clock_ reasons, which protocol violation gets
// which close code, what is sent before closing and which close code goes with it.

import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { CompiledMachine } from '../config/types.ts';
import { decodeJson, encodeJson, JsonDecodeError, JsonNumber, JsonObject, toUint64, type JsonValue } from '../json.ts';
import type { Authority, Grant } from './authority.ts';
import { Refusal, type Request } from './envelope.ts';
import { JOG_FRAME, type JogOps, type RemoteCapture } from './jog.ts';
import { JOG_REASON, jogSessionStale } from '../core/reasons.ts';
import { parseU64 } from '../primitives.ts';

/** Document 1 part 5 item 6: the three remote jog clock flags (0 = unset). */
export interface RemoteJogFlags {
  maxUncertaintyNs: bigint;
  driftPpb: bigint;
  calibrationMaxAgeNs: bigint;
}

/** Part 8 "Remote jog idle": 5 s without a complete message during setup. */
export const SETUP_IDLE_MS = 5_000;
/**
 * On shutdown, open remote jog connections are closed (1001) and the listener's existing connections are
 * kept this long, answering an upgrade with 503 independent_jog_unavailable (docs/profile.md).
 */
export const SHUTDOWN_GRACE_MS = 2_000;

const hostNow = () => process.hrtime.bigint();

/**
 * The idle bound of one connection (part 8 "Remote jog idle": no complete frame within the bound ends the
 * jog). Re-armed by every message. A timer fires in the event loop's timers phase, before the poll phase
 * reads what the sockets hold: after this process was left without the CPU for longer than the bound (a
 * busy host), a frame that reached the host in time would still be unread and the lane ended although its
 * input never stopped. So the expiry is decided after one poll phase (setImmediate): a message read there
 * re-arms the bound and the lane lives.
 */
export class IdleBound {
  private timer?: NodeJS.Timeout;
  private immediate?: NodeJS.Immediate;
  private arms = 0;

  constructor(private readonly onIdle: () => void) {}

  arm(ms: number): void {
    this.clear();
    const armed = ++this.arms;
    this.timer = setTimeout(() => {
      this.immediate = setImmediate(() => {
        if (armed === this.arms) this.onIdle();
      });
    }, ms);
  }

  clear(): void {
    this.arms++;
    clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
  }
}

const SESSION_RE = /^[0-9a-f]{64}$/;
const INCARNATION_RE = /^[0-9a-fA-F]{32}$/;

/** A message the service cannot accept: closes with `code` (1002 out of order, 1007 malformed). */
class Violation extends Error {
  constructor(
    readonly code: 1002 | 1007,
    message: string,
  ) {
    super(message);
  }
}

/** A refusal of the setup exchange: `rejected {seq, reason}`, then close 1000. */
class Rejected extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

export interface RemoteJogOptions {
  jog: JogOps;
  authority: Authority;
  machine: CompiledMachine;
  flags: RemoteJogFlags;
  log(line: string): void;
}

/** The lane: pre-upgrade checks, the one-connection rule, shutdown. */
export class RemoteJogLane {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: JOG_FRAME.maxBytes, perMessageDeflate: false, clientTracking: false });
  private readonly conns = new Set<RemoteJogConnection>();
  private shuttingDown = false;

  constructor(private readonly o: RemoteJogOptions) {}

  get qualified(): boolean {
    const f = this.o.flags;
    return f.maxUncertaintyNs > 0n && f.driftPpb > 0n && f.calibrationMaxAgeNs > 0n;
  }

  /** An upgrade request on the remote listener from a verified client (`owner` = its principal). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, owner: string): void {
    socket.on('error', () => undefined);
    const pre = this.preUpgrade(req, owner);
    if ('status' in pre) return answer(socket, pre.status, pre.body);
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const conn = new RemoteJogConnection(ws, socket, pre, this.o, this.qualified, (c) => {
        this.conns.delete(c);
        this.o.jog.remoteConnections = this.conns.size;
      });
      // One remote jog connection (part 5): a second one closes both with 1008.
      const others = [...this.conns];
      this.conns.add(conn);
      this.o.jog.remoteConnections = this.conns.size;
      if (others.length) {
        this.o.log(`remote jog: a second connection from ${owner}; closing both (1008)`);
        for (const c of [...others, conn]) c.close(1008, 'one remote jog connection at a time');
      }
    });
  }

  /** Checks before the 101, in order (docs/profile.md "Remote jog"); text/plain failures. */
  private preUpgrade(req: IncomingMessage, owner: string): { status: number; body: string } | Target {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const bad = (why: string) => ({ status: 400, body: `invalid websocket upgrade: ${why}` });
    if (req.method !== 'GET' || url.pathname !== '/v1/jog') return bad('only GET /v1/jog is a WebSocket');
    const h = req.headers;
    const connection = String(h.connection ?? '')
      .split(',')
      .map((t) => t.trim().toLowerCase());
    if (!connection.includes('upgrade')) return bad('Connection must include Upgrade');
    if (String(h.upgrade ?? '').toLowerCase() !== 'websocket') return bad('Upgrade must be websocket');
    if (h['sec-websocket-version'] !== '13') return bad('Sec-WebSocket-Version must be 13');
    const key = h['sec-websocket-key'];
    if (typeof key !== 'string' || !/^[A-Za-z0-9+/]{22}==$/.test(key) || Buffer.from(key, 'base64').length !== 16) return bad('Sec-WebSocket-Key must be the base64 text of 16 bytes');
    const names = [...url.searchParams.keys()];
    for (const n of ['session', 'generation', 'jog_generation']) if (names.filter((k) => k === n).length !== 1) return bad(`query needs exactly one ${n}`);
    if (names.length !== 3) return bad('query takes session, generation and jog_generation only');
    const session = url.searchParams.get('session')!;
    const genText = url.searchParams.get('generation')!;
    const jgText = url.searchParams.get('jog_generation')!;
    if (parseU64(genText) === undefined) return bad('generation must be a decimal uint64');
    if (parseU64(jgText) === undefined) return bad('jog_generation must be a decimal uint64');
    if (this.shuttingDown) return { status: 503, body: 'independent_jog_unavailable: the service is shutting down' };
    if (!this.o.jog.served) return { status: 503, body: `independent_jog_unavailable: ${this.o.jog.unavailable}` };
    const generation = BigInt(genText);
    const jogGeneration = BigInt(jgText);
    try {
      this.o.authority.fence('update_jog', session, generation, owner);
    } catch (e) {
      if (!(e instanceof Refusal)) throw e;
      if (e.label === 'session_principal_mismatch') return { status: 403, body: 'session_principal_mismatch' };
      return { status: 409, body: `control_session_stale: ${e.detail ?? e.label}` };
    }
    if (jogGeneration !== 0n) {
      const j = this.o.jog.observation();
      if (jogSessionStale({ open: j.SessionOpen === 1, independent: j.Mode === 1, generation: j.JogGeneration as bigint }, jogGeneration)) return { status: 409, body: `jog_session_stale: jog generation ${jogGeneration} is not the open independent jog generation` };
    }
    return { session, generation, jogGeneration };
  }

  /** The grant changed (renew, stop, release, expiry, loss): connections of a grant no longer current close. */
  grantChanged(g: Grant | null): void {
    for (const c of this.conns) c.grantChanged(g);
  }

  /** Shutdown: no new connection (503), open ones closed with 1001; resolves once they are gone or after the grace. */
  async shutdown(): Promise<boolean> {
    this.shuttingDown = true;
    const had = this.conns.size > 0;
    for (const c of this.conns) c.close(1001, 'independent_jog_unavailable: the service is shutting down');
    return had;
  }
}

interface Target {
  session: string;
  generation: bigint;
  jogGeneration: bigint;
}

type State = 'calibrate1' | 'calibrate2' | 'begin' | 'streaming' | 'closed';

/** One remote jog connection: the setup exchange, then frames. */
class RemoteJogConnection {
  private state: State;
  private seq = 0n;
  private readonly idle = new IdleBound(() => this.end('jog_stream_idle'));
  private incarnation = '';
  private samples: Array<{ source: bigint; rx: bigint; tx: bigint }> = [];
  private capture?: RemoteCapture;
  private jogGeneration: bigint;

  constructor(
    private readonly ws: WebSocket,
    socket: Duplex,
    private readonly t: Target,
    private readonly o: RemoteJogOptions,
    private readonly qualified: boolean,
    private readonly gone: (c: RemoteJogConnection) => void,
  ) {
    this.jogGeneration = t.jogGeneration;
    if (t.jogGeneration === 0n) this.state = 'calibrate1';
    else {
      // An existing jog generation (opened by begin_jog on POST /v1/control): frames follow at once,
      // stamped in host monotonic ns like jog.sock's (its producer already stamped begin_jog that way).
      this.state = 'streaming';
      this.capture = { qualified, map: (c) => ({ host: c, earliest: c }) };
    }
    ws.on('error', () => undefined); // ws closes with 1002/1007/1009 itself; nothing to add
    ws.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    ws.on('close', () => this.onClose());
    watchFragments(socket, () => this.close(1002, 'fragmented message: frames must be unfragmented'));
    this.arm();
  }

  /** Idle bound: 5 s per message during setup, the input-age ceiling per frame afterwards (part 8). */
  private arm(): void {
    this.idle.arm(this.state === 'streaming' ? Number(this.o.machine.control.max_jog_input_age_ns / 1_000_000n) : SETUP_IDLE_MS);
  }

  /** Tell the client why (rejected {seq, reason}) and close normally. */
  private end(reason: string): void {
    if (this.state === 'closed') return;
    this.send({ type: 'rejected', seq: this.seq, reason });
    this.close(1000, reason);
  }

  close(code: number, reason: string): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.idle.clear();
    this.ws.close(code, reason.slice(0, 120));
  }

  grantChanged(g: Grant | null): void {
    if (this.state === 'closed') return;
    if (!g || g.stopping || g.session !== this.t.session || g.generation !== this.t.generation) this.end('control_session_stale');
  }

  private send(msg: Record<string, unknown>): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(encodeJson(msg));
  }

  private onClose(): void {
    this.state = 'closed';
    this.idle.clear();
    this.gone(this);
    // The producer is gone: its jog ends now rather than at its input deadline.
    if (this.jogGeneration !== 0n) void this.o.jog.endFromLane(this.jogGeneration);
  }

  private onMessage(data: Buffer, binary: boolean): void {
    if (this.state === 'closed') return;
    const rx = hostNow();
    try {
      if (binary) {
        if (this.state !== 'streaming') throw new Violation(1002, 'binary frame before begun');
        this.arm();
        this.o.jog.onInput(data, this.capture);
        return;
      }
      if (this.state === 'streaming') throw new Violation(1002, 'text message after begun: only binary local_jog_update frames');
      this.arm();
      this.setup(parseMessage(data), rx);
    } catch (e) {
      if (e instanceof Violation) return this.close(e.code, e.message);
      if (e instanceof Rejected) return this.end(e.reason);
      throw e;
    }
  }

  private setup(m: Message, rx: bigint): void {
    const expected = this.state === 'begin' ? 'begin' : 'calibrate';
    if (m.type !== expected) throw new Violation(1002, `expected ${expected}, got ${m.type}`);
    const seq = this.seq + 1n;
    if (m.seq !== seq) throw new Violation(1002, `expected seq ${seq}, got ${m.seq}`);
    this.seq = seq;
    const prev = this.samples.at(-1);
    if (this.state !== 'calibrate1') {
      // From the second message on, host_tx_ns echoes the previous reply.
      if (m.host_tx_ns === undefined) throw new Violation(1007, 'host_tx_ns is required from the second message on');
      if (m.host_tx_ns !== prev!.tx) throw new Violation(1007, 'host_tx_ns does not echo the previous reply');
      if (m.source_ns <= prev!.source) throw new Rejected('jog_clock_sample_invalid');
    } else if (m.host_tx_ns !== undefined) throw new Violation(1007, 'the first calibrate carries no host_tx_ns');
    if (m.type === 'calibrate') {
      if (this.state === 'calibrate1') this.incarnation = m.source_incarnation.toLowerCase();
      else if (m.source_incarnation.toLowerCase() !== this.incarnation) throw new Violation(1007, 'source_incarnation changed');
      const tx = hostNow();
      this.samples.push({ source: m.source_ns, rx, tx });
      this.state = this.state === 'calibrate1' ? 'calibrate2' : 'begin';
      // host_tx_ns is stamped as the reply is written (the source measures against it).
      this.send({ type: 'calibrated', seq: m.seq, source_ns: m.source_ns, host_rx_ns: rx, host_tx_ns: tx });
      return;
    }
    void this.begin(m, rx);
  }

  /**
   * The clock map from the second sample (taken after the first reply): the source's s2 happened between
   * the first reply's host_tx and the second message's host_rx, so host(s) = s + offset with offset the
   * midpoint and half the window as uncertainty, growing by the drift bound with distance from s2.
   */
  private async begin(m: Extract<Message, { type: 'begin' }>, rx: bigint): Promise<void> {
    try {
      const [s1, s2] = this.samples as [{ source: bigint; rx: bigint; tx: bigint }, { source: bigint; rx: bigint; tx: bigint }];
      const offset = (s1.tx + s2.rx) / 2n - s2.source;
      const u = (s2.rx - s1.tx) / 2n;
      const f = this.o.flags;
      const unc = (s: bigint) => u + ((s > s2.source ? s - s2.source : s2.source - s) * f.driftPpb) / 1_000_000_000n;
      // The begin sample happened between the second reply's host_tx and this message's host_rx.
      const mapped = m.source_ns + offset;
      const ub = unc(m.source_ns);
      if (mapped + ub < s2.tx || mapped - ub > rx) throw new Rejected('jog_clock_sample_invalid');
      if (this.qualified && ub > f.maxUncertaintyNs) throw new Rejected('jog_clock_uncertain');
      const g = this.o.authority.current;
      if (!g || g.stopping || g.session !== this.t.session || g.generation !== this.t.generation) throw new Rejected('control_session_stale');
      const now = hostNow();
      const origin = mapped < now ? mapped : now;
      const maxAge = this.o.machine.control.max_jog_input_age_ns;
      const r = { operation: 'begin_jog', axis_mask: m.axis_mask, source_origin_host_ns: origin, deadline_host_ns: origin + maxAge, clock_incarnation: this.o.jog.clockIncarnation } as unknown as Request;
      let handle: bigint;
      try {
        const reply = await this.o.jog.begin(r, g);
        handle = (reply.body as { handle: bigint }).handle;
      } catch (e) {
        if (e instanceof Refusal) throw new Rejected(e.label);
        throw e;
      }
      if (this.state === 'closed') {
        // The connection went away while the core admitted the jog: end it again.
        void this.o.jog.endFromLane(handle);
        return;
      }
      const calibratedAt = s2.rx;
      const qualified = this.qualified;
      this.capture = {
        qualified,
        originSourceNs: m.source_ns,
        map: (s, at) => {
          const us = unc(s);
          if (qualified && at - calibratedAt > f.calibrationMaxAgeNs) return JOG_REASON.jog_clock_calibration_expired;
          if (qualified && us > f.maxUncertaintyNs) return JOG_REASON.jog_clock_uncertain;
          const host = s + offset;
          return { host, earliest: host - us };
        },
      };
      this.jogGeneration = handle;
      this.state = 'streaming';
      this.arm();
      this.send({ type: 'begun', seq: m.seq, jog_generation: handle });
    } catch (e) {
      if (e instanceof Rejected) return this.end(e.reason);
      this.o.log(`remote jog: begin failed: ${(e as Error).message}`);
      this.end('native_rejected');
    }
  }
}

type Message =
  | { type: 'calibrate'; seq: bigint; source_incarnation: string; source_ns: bigint; host_tx_ns?: bigint }
  | { type: 'begin'; seq: bigint; axis_mask: number; source_ns: bigint; host_tx_ns?: bigint };

const FIELDS: Record<string, { required: string[]; optional: string[] }> = {
  calibrate: { required: ['type', 'source_incarnation', 'source_ns', 'seq'], optional: ['host_tx_ns'] },
  begin: { required: ['type', 'seq', 'axis_mask', 'source_ns', 'host_tx_ns'], optional: [] },
};

/** Strict decoding of a setup message: a JSON object of a known type with exactly its fields (else 1007). */
function parseMessage(data: Buffer): Message {
  let v: JsonValue;
  try {
    v = decodeJson(data);
  } catch (e) {
    if (e instanceof JsonDecodeError) throw new Violation(1007, `not JSON: ${e.message}`);
    throw e;
  }
  if (!(v instanceof JsonObject)) throw new Violation(1007, 'a setup message is a JSON object');
  const type = v.get('type');
  if (typeof type !== 'string' || !FIELDS[type]) throw new Violation(1007, 'type must be calibrate or begin');
  const f = FIELDS[type]!;
  for (const k of v.keys()) if (!f.required.includes(k) && !f.optional.includes(k)) throw new Violation(1007, `unknown field ${k}`);
  for (const k of f.required) if (!v.has(k)) throw new Violation(1007, `${k} is required`);
  const u64 = (k: string): bigint | undefined => {
    const x = v.get(k);
    if (x === undefined) return undefined;
    const n = x instanceof JsonNumber ? toUint64(x) : undefined;
    if (n === undefined) throw new Violation(1007, `${k} must be a uint64`);
    return n;
  };
  const seq = u64('seq')!;
  const source_ns = u64('source_ns')!;
  const host_tx_ns = u64('host_tx_ns');
  if (type === 'calibrate') {
    const inc = v.get('source_incarnation');
    // 32 hex digits: 16 bytes, not all zero (part 5 "Remote jog WebSocket").
    if (typeof inc !== 'string' || !INCARNATION_RE.test(inc) || /^0+$/.test(inc)) throw new Violation(1007, 'source_incarnation must be 32 hex digits of 16 nonzero bytes');
    return { type, seq, source_incarnation: inc, source_ns, host_tx_ns };
  }
  const mask = u64('axis_mask')!;
  if (mask > 0xffffffffn) throw new Violation(1007, 'axis_mask must be a uint32');
  return { type: 'begin', seq, axis_mask: Number(mask), source_ns, host_tx_ns };
}

/** A pre-upgrade failure: text/plain with the label first, then the connection closes. */
function answer(socket: Duplex, status: number, body: string): void {
  const text = `${body}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
}

/**
 * ws reassembles fragmented messages without telling; the documents want frames unfragmented. This reads
 * the client's frame headers off the socket as they arrive (a continuation frame, or a data frame without
 * FIN, is a fragment) and skips payloads without buffering them.
 */
export function watchFragments(socket: Duplex, onFragment: () => void): void {
  let header = Buffer.alloc(0);
  let skip = 0;
  let fired = false;
  socket.prependListener('data', (chunk: Buffer) => {
    let at = 0;
    while (at < chunk.length && !fired) {
      if (skip > 0) {
        const n = Math.min(skip, chunk.length - at);
        skip -= n;
        at += n;
        continue;
      }
      // A header is at most 14 bytes: take it a byte at a time until it is complete.
      header = Buffer.concat([header, chunk.subarray(at, at + 1)]);
      at += 1;
      if (header.length < 2) continue;
      const len7 = header[1]! & 0x7f;
      const need = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (header[1]! & 0x80 ? 4 : 0);
      if (header.length < need) continue;
      const fin = (header[0]! & 0x80) !== 0;
      const opcode = header[0]! & 0x0f;
      skip = len7 === 126 ? header.readUInt16BE(2) : len7 === 127 ? Number(header.readBigUInt64BE(2)) : len7;
      header = Buffer.alloc(0);
      if (opcode === 0 || (!fin && opcode < 8)) {
        fired = true;
        onFragment();
      }
    }
  });
}
