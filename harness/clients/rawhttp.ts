// A plain HTTP/1.1 exchange with every header as the test writes it (a Host of another name, an Origin, a
// Sec-Fetch-Site, any Content-Type or none), the way a browser or a hostile client would send it; and a
// body that is held back or never ends, to see when a server answers an oversize request. undici sets Host
// and Content-Length itself, so these go through node:http.

import { request, type IncomingHttpHeaders } from 'node:http';
import { gunzipSync } from 'node:zlib';

export interface RawReply {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body after gzip decoding. */
  body: Buffer;
  text: string;
  /** The body as JSON, or undefined when it is not JSON. */
  json: any;
}

function reply(status: number, headers: IncomingHttpHeaders, wire: Buffer): RawReply {
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
  /** Body bytes the client had written when the server closed the connection (or the cap was reached). */
  writtenAtClose: number;
  /** The server closed the connection before the client wrote `capBytes`. */
  closedByServer: boolean;
}

/**
 * Send a request whose body never ends: `declared` sets a Content-Length (the client then writes at most
 * `capBytes` of it and never finishes), else the body is chunked. Bytes are written as fast as the
 * connection takes them, until the server closes the connection or `capBytes` were written. The reply is
 * whatever came meanwhile.
 */
export function heldBody(url: string, path: string, headers: Record<string, string>, o: { declared?: number; capBytes: number; chunkBytes?: number }): Promise<HeldBodyOutcome> {
  const u = new URL(url);
  const chunk = Buffer.alloc(o.chunkBytes ?? 64 * 1024, 0x61);
  return new Promise((resolve) => {
    let written = 0;
    let atReply = -1;
    let got: RawReply | undefined;
    let done = false;
    let replyRead: Promise<void> = Promise.resolve();
    const finish = (closedByServer: boolean) => {
      if (done) return;
      done = true;
      // A reply whose head arrived is read to its end (or for 5 s) before the outcome is told.
      void Promise.race([replyRead, new Promise((r) => setTimeout(r, 5_000).unref())]).then(() => {
        req.destroy();
        resolve({ ...(got ? { reply: got } : {}), writtenAtReply: atReply, writtenAtClose: written, closedByServer });
      });
    };
    const req = request(
      { host: u.hostname, port: u.port, method: 'POST', path, agent: false, headers: { ...headers, ...(o.declared !== undefined ? { 'content-length': String(o.declared) } : { 'transfer-encoding': 'chunked' }) } },
      (res) => {
        atReply = written;
        const chunks: Buffer[] = [];
        replyRead = new Promise<void>((r) => {
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            got = reply(res.statusCode ?? 0, res.headers, Buffer.concat(chunks));
            r();
          });
          res.on('error', () => r());
          res.on('close', () => r());
        });
      },
    );
    req.on('error', () => finish(true));
    req.on('close', () => finish(written < o.capBytes));
    const pump = () => {
      while (!done && written < o.capBytes) {
        written += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      if (!done && written >= o.capBytes) setTimeout(() => finish(false), 2_000);
    };
    req.flushHeaders();
    pump();
  });
}
