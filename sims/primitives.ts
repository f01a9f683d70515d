// The reference system's small primitives, each written once: exact uint64 text, the one 16384-byte
// request limit, the bounded body reader, the `after` cursor of the observation endpoints, and the start-up
// and shutdown of a program (its flags, its ready line, its stop on signals and lifeline). The strict
// JSON stack (decoder, byte classes, canonical JSON) is sims/json.ts; the plan's struct of arrays is
// sims/core/protocol.ts `PlanArrays`.

import { Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseArgs, type ParseArgsConfig } from 'node:util';

// ---- uint64 ----

/** 2^64-1, the largest JSON integer the documents allow (document 1 part 2 "Exact integers"). */
/** The host stores multi-byte numbers low byte first: an int64 array can be read as (low, high) int32 pairs. */
export const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export const U64_MAX = (1n << 64n) - 1n;

/** A canonical unsigned decimal of at most 20 digits (no sign, no leading zero); compare with U64_MAX after. */
export const U64_DECIMAL = /^(0|[1-9][0-9]{0,19})$/;

/** The value of a canonical unsigned decimal text, or undefined when it is not one or exceeds 2^64-1. */
export function parseU64(text: string): bigint | undefined {
  if (!U64_DECIMAL.test(text)) return undefined;
  const v = BigInt(text);
  return v <= U64_MAX ? v : undefined;
}

/** parseU64 for a value that must also be nonzero (revisions, epochs). */
export function parseNonzeroU64(text: string): bigint | undefined {
  const v = parseU64(text);
  return v === 0n ? undefined : v;
}

// ---- request bodies ----

/**
 * Document 1 part 8's 16384 bytes: the largest ordinary command body, and the prefix of a
 * prepare_trajectory upload within which its fence fields must end (part 4 "prepare_trajectory").
 */
export const REQUEST_PREFIX_BYTES = 16_384;

/** Bytes of a refused body read and thrown away so that the reply reaches the client; past it the socket closes. */
export const DISCARD_BOUND_BYTES = 64 * 1024 * 1024;

/** Discard a request body nobody will read, up to `bound` bytes; past it the connection is closed. */
export function discardBody(req: IncomingMessage, bound = DISCARD_BOUND_BYTES): void {
  let seen = 0;
  req.on('data', (c: Buffer) => {
    seen += c.length;
    if (seen > bound) req.socket.destroy();
  });
  req.resume();
}

export interface BodyBound {
  /** Most bytes the body may have; one more is 'too_large'. */
  limit: number;
  /**
   * When 'too_large' is answered: 'declared' as soon as Content-Length says so (else as 'counted');
   * 'counted' once the bytes read pass the limit (Content-Length not trusted); 'end' only once the client
   * has sent its whole body. Past the limit the rest is read and thrown away, so that the refusal reaches
   * the client.
   */
  refuse: 'declared' | 'counted' | 'end';
  /** After this many bytes of a body already over the limit, close the connection (default: no bound). */
  discardBound?: number;
}

/**
 * After a reply to a request whose body was not read: at most this much more is taken in (thrown away),
 * and the connection is closed this long after the reply was written.
 */
export const LINGER_BYTES = 1024 * 1024;
export const LINGER_MS = 5000;

/**
 * Node's HTTP server closes an idle kept-alive connection this long after its keepAliveTimeout (a margin
 * for clients that honour the Keep-Alive hint it announces): a documented idle bound is reached by giving
 * the server the bound less this.
 */
export const NODE_KEEP_ALIVE_BUFFER_MS = 1000;

/**
 * Answer a request whose body will not be read (a body over the limit, a refused request) and close the
 * connection, the way HTTP servers close after an early reply ("lingering close"): the reply says
 * `Connection: close`; once it is written the server half-closes, throws away what still arrives up to
 * `lingerBytes` (LINGER_BYTES at least: a client that sends its whole body before it reads finishes and
 * reads the reply), then stops reading (a client that keeps sending is held back by TCP flow control, and
 * can still read the reply), and closes the socket LINGER_MS after the reply. An endless body is never read
 * past that. Call before the reply is written.
 */
export function closeAfterReply(req: IncomingMessage, res: ServerResponse, lingerBytes = LINGER_BYTES): void {
  if (!res.headersSent) res.setHeader('connection', 'close');
  const socket = req.socket as Socket & { destroySoon?: () => void };
  let seen = 0;
  req.on('data', (c: Buffer) => {
    seen += c.length;
    if (seen > Math.max(lingerBytes, LINGER_BYTES)) {
      req.pause();
      socket.pause();
    }
  });
  // Node's HTTP server calls destroySoon once a `Connection: close` reply is written; linger instead.
  socket.destroySoon = () => {
    socket.end();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
}

/**
 * A request body read whole, at most `limit` bytes: the bytes, 'too_large' past the limit, or 'gone' when
 * the client went away (or the request failed) before the body ended. Never rejects.
 */
export function readBoundedBody(req: IncomingMessage, bound: BodyBound): Promise<Buffer | 'too_large' | 'gone'> {
  const { limit, refuse, discardBound = Infinity } = bound;
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let settled = false;
    let ended = false;
    const settle = (v: Buffer | 'too_large' | 'gone') => {
      if (settled) return;
      settled = true;
      resolve(v);
    };
    const declared = Number(req.headers['content-length'] ?? NaN);
    // A declared length past the limit: nothing is kept (the answer is decided by `refuse`).
    let over = Number.isFinite(declared) && declared > limit;
    if (over && refuse === 'declared') settle('too_large');
    req.on('data', (c: Buffer) => {
      total += c.length;
      if (total > limit && refuse !== 'end') settle('too_large');
      if (over || total > limit) {
        over = true;
        chunks.length = 0;
        if (total > discardBound) req.socket.destroy();
        return;
      }
      chunks.push(c);
    });
    req.once('end', () => {
      ended = true;
      settle(over ? 'too_large' : Buffer.concat(chunks, total));
    });
    req.once('error', () => settle('gone'));
    req.once('close', () => {
      if (!ended) {
        chunks.length = 0;
        settle('gone');
      }
    });
  });
}

// ---- the `after` cursor ----

/** Why an `after` query value is not a cursor (the caller refuses with its own label). */
export class CursorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CursorError';
  }
}

/**
 * The `after` query value of the events and telemetry endpoints (docs/profile.md "Events" and "Telemetry
 * endpoints"): absent means 0; otherwise given once, one canonical unsigned decimal, at most 2^64-1.
 * Throws CursorError with the one wording both endpoints use.
 */
export function parseAfterCursor(query: URLSearchParams): bigint {
  const all = query.getAll('after');
  if (all.length === 0) return 0n;
  if (all.length > 1) throw new CursorError('after must be given at most once');
  const raw = all[0]!;
  if (!U64_DECIMAL.test(raw)) throw new CursorError('after must be one unsigned decimal number');
  const v = BigInt(raw);
  if (v > U64_MAX) throw new CursorError('after exceeds uint64');
  return v;
}

// ---- a program's start-up and shutdown ----

/**
 * A program's flags parsed strictly, with `-h/--help` added: the parsed flags, or the exit status when
 * there is nothing to run (a usage error: the message and the usage on stderr, 2; --help: the usage on
 * stdout, 0). One wording for `hil serve`, `hil planner serve`, `hil olp serve` and the rest.
 */
export function parseProgramArgs<T extends ParseArgsConfig & { args: string[] }>(config: T, usage: string): ReturnType<typeof parseArgs<T>> | number {
  let parsed;
  try {
    parsed = parseArgs({ ...config, options: { ...config.options, help: { type: 'boolean', short: 'h' } }, strict: true });
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n${usage}`);
    return 2;
  }
  if ((parsed.values as { help?: boolean }).help) {
    process.stdout.write(usage);
    return 0;
  }
  return parsed as ReturnType<typeof parseArgs<T>>;
}

/** Signals closer together than this are one delivery reaching the process by two paths (runUntilStopped). */
export const SIGNAL_BURST_MS = 250;

export interface Running {
  /** The orderly stop, run once (later calls return the same promise); it does not exit the process. */
  stop(why: string): Promise<void>;
  /** Print the ready line: "ready " and the program's JSON (one line), once it answers. */
  ready(json: string): void;
}

/**
 * Run a server program until it is told to stop: on SIGINT or SIGTERM, and with `lifeline` when standard
 * input closes (the parent that started it went away), run `stop` once and exit 0.
 *
 * A service manager stops a unit by signalling every process of it (systemd's control group, a container's
 * process group): a program then gets the signal twice at once, from the manager and forwarded by its
 * parent (`hil serve` stops its planner and OLP server). Signals within SIGNAL_BURST_MS of the last one
 * counted are that one delivery. The first starts the orderly stop; a second while it runs (the remote
 * listener's grace, README "hil serve") is reported and changes nothing; a third ends the process at once
 * with 128 + the signal number (143 for SIGTERM).
 */
export function runUntilStopped(stop: (why: string) => Promise<void>, o: { name: string; lifeline?: boolean; lifelineFd?: number }): Running {
  let stopping: Promise<void> | undefined;
  const once = (why: string) =>
    (stopping ??= stop(why).catch((e: Error) => {
      process.stderr.write(`${o.name}: stop: ${e.message}\n`);
    }));
  const stopAndExit = (why: string) => void once(why).then(() => process.exit(0));
  let signals = 0;
  let lastSignalMs = -Infinity;
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      const now = performance.now();
      if (now - lastSignalMs < SIGNAL_BURST_MS) return;
      lastSignalMs = now;
      signals++;
      if (signals === 1) stopAndExit(sig);
      else if (signals === 2) process.stderr.write(`${o.name}: ${sig}: signal again while stopping; the orderly stop goes on (a third signal ends it at once)\n`);
      else {
        process.stderr.write(`${o.name}: ${sig}: third signal: exiting now\n`);
        process.exit(128 + (sig === 'SIGINT' ? 2 : 15));
      }
    });
  }
  if (o.lifeline) {
    process.stdin.on('end', () => stopAndExit('stdin closed'));
    process.stdin.on('error', () => stopAndExit('stdin error'));
    process.stdin.resume();
  }
  // A lifeline on another descriptor: the read end of a pipe whose only writer is the parent. The kernel
  // closes the write end however the parent ends (kill -9 included), so end of file here means the parent
  // is gone, and the program stops the orderly way instead of running on re-parented to pid 1.
  if (o.lifelineFd !== undefined) {
    const line = new Socket({ fd: o.lifelineFd, readable: true, writable: false });
    line.on('end', () => stopAndExit('lifeline closed'));
    line.on('close', () => stopAndExit('lifeline closed'));
    line.on('error', () => stopAndExit('lifeline error'));
    line.on('data', () => undefined); // nothing is ever written; read so that end of file is seen
    line.unref(); // the lifeline alone keeps nothing running
  }
  return { stop: once, ready: (json) => void process.stdout.write(`ready ${json}\n`) };
}
