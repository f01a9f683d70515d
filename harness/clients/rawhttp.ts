// A plain HTTP/1.1 exchange with every header as the test writes it (a Host of another name, an Origin, a
// Sec-Fetch-Site, any Content-Type or none), the way a browser or a hostile client would send it; and a
// body that is held back or never ends, to see when a server answers an oversize request and whether it
// reads on. undici sets Host and Content-Length itself, so requests go through node:http, and a body that
// never ends through a plain socket.

import { request, type IncomingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { HarnessError } from '../errors.ts';

export interface RawReply {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body after gzip decoding. */
  body: Buffer;
  text: string;
  /** The body as JSON, or undefined when it is not JSON. */
  json: any;
}

function reply(status: number, headers: IncomingHttpHeaders | Record<string, string>, wire: Buffer): RawReply {
  const body = headers['content-encoding'] === 'gzip' ? gunzipSync(wire) : wire;
  const text = body.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, headers, body, text, json };
}

/** One request on its own connection; `headers` are sent as given (a `host` among them replaces the URL's). */
export function rawRequest(url: string, method: string, path: string, headers: Record<string, string> = {}, body?: string | Uint8Array): Promise<RawReply> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(reply(res.statusCode ?? 0, res.headers, Buffer.concat(chunks))));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

export interface HeldBodyOutcome {
  /** The reply, when one came while the body was still being sent (never after the client ended it: it never does). */
  reply?: RawReply;
  /** Body bytes the client had written when the reply's head arrived. */
  writtenAtReply: number;
  /** Body bytes the client had written when the server ended the connection (or the cap was reached). */
  writtenAtClose: number;
  /** The server ended the connection (its FIN or a reset) before the client wrote `capBytes`. */
  closedByServer: boolean;
}

/** The head and body of a reply read off the wire, once its Content-Length worth has arrived. */
function parseReply(buf: Buffer): RawReply | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  if (buf.length < end + 4 + length) return undefined;
  return reply(status, headers, buf.subarray(end + 4, end + 4 + length));
}

/** A reply read to its end on a connection the caller then leaves open and idle (see keptReply). */
export interface KeptReply {
  reply: RawReply;
  /** performance.now() just before the request was written. */
  sent: number;
  /** performance.now() once the whole reply (its Content-Length) had arrived. */
  replied: number;
  /** Resolves with performance.now() when the server closes the connection. */
  closed: Promise<number>;
  /** Bytes that arrived after the reply. */
  extra(): number;
}

/**
 * One GET on a connected socket (plain, or TLS after its handshake), read to the end of its reply: for the
 * idle bounds of a kept-alive connection (document 1 part 8), whose timer starts once the server has
 * written that reply. Rejects when the reply is not whole within `ms` or the connection ends first.
 */
export function keptReply(socket: Socket, path: string, host: string, ms = 10_000): Promise<KeptReply> {
  const chunks: Buffer[] = [];
  let received = 0;
  let replyBytes = -1;
  const closed = new Promise<number>((r) => socket.once('close', () => r(performance.now())));
  socket.on('error', () => undefined);
  return new Promise((resolve, reject) => {
    // The target's doing either way (a request it accepted and left unanswered: HIL_ERR_TRANSPORT, a fail),
    // unless the test finds the host too slow for it (hostBound).
    const timer = setTimeout(() => reject(new HarnessError('HIL_ERR_TRANSPORT', `keptReply: no whole reply to GET ${path} within ${ms} ms`)), ms);
    void closed.then(() => {
      clearTimeout(timer);
      reject(new HarnessError('HIL_ERR_TRANSPORT', `keptReply: the connection ended before the reply to GET ${path} was whole`));
    });
    const k = { sent: performance.now(), closed, extra: () => received - replyBytes };
    socket.on('data', (d: Buffer) => {
      chunks.push(d);
      received += d.length;
      if (replyBytes >= 0) return;
      const buf = Buffer.concat(chunks);
      const reply = parseReply(buf);
      if (!reply) return;
      replyBytes = buf.indexOf('\r\n\r\n') + 4 + reply.body.length;
      clearTimeout(timer);
      resolve({ ...k, reply, replied: performance.now() });
    });
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  });
}

/**
 * Send a request whose body never ends, over a plain socket (an HTTP client library would end the exchange
 * itself once a reply comes): `declared` sets a Content-Length (the client then writes at most `capBytes`
 * of it and never finishes), else the body is chunked. Bytes are written as fast as the connection takes
 * them, until the server ends the connection or `capBytes` were written. The reply is whatever came
 * meanwhile (with a Content-Length). `socketPath`: a Unix socket instead of the URL's host and port.
 */
export function heldBody(url: string, path: string, headers: Record<string, string>, o: { declared?: number; capBytes: number; chunkBytes?: number; socketPath?: string }): Promise<HeldBodyOutcome> {
  const u = new URL(url);
  const data = Buffer.alloc(o.chunkBytes ?? 64 * 1024, 0x61);
  const chunk = o.declared !== undefined ? data : Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')]);
  const head = [`POST ${path} HTTP/1.1`, `host: ${u.host}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), o.declared !== undefined ? `content-length: ${o.declared}` : 'transfer-encoding: chunked', '', ''].join('\r\n');
  return new Promise((resolve) => {
    const socket = o.socketPath !== undefined ? connect(o.socketPath) : connect(Number(u.port), u.hostname.replace(/^\[(.*)\]$/, '$1'));
    let written = 0;
    let atReply = -1;
    let got: RawReply | undefined;
    let incoming = Buffer.alloc(0);
    let done = false;
    const finish = (closedByServer: boolean) => {
      if (done) return;
      done = true;
      socket.destroy();
      resolve({ ...(got ? { reply: got } : {}), writtenAtReply: atReply, writtenAtClose: written, closedByServer });
    };
    socket.on('data', (c: Buffer) => {
      if (atReply < 0) atReply = written;
      incoming = Buffer.concat([incoming, c]);
      got ??= parseReply(incoming);
    });
    // The server's FIN (it ends its side after the reply), a reset, or its close: the server ended it.
    socket.on('end', () => finish(true));
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(written < o.capBytes));
    const pump = () => {
      while (!done && written < o.capBytes) {
        written += data.length;
        if (!socket.write(chunk)) return void socket.once('drain', pump);
      }
      if (!done && written >= o.capBytes) setTimeout(() => finish(false), 2_000);
    };
    socket.once('connect', () => {
      socket.write(head);
      pump();
    });
  });
}
