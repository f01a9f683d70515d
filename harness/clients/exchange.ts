// One HTTP exchange through an undici dispatcher, its whole reply collected: what undici's `request()`
// followed by `body.arrayBuffer()` gives, without the response stream and async resource `request()` builds
// for every reply. The harness's clients make thousands of small exchanges a run (every control request,
// status poll and stepped-clock step), and those two objects were about half of the client's CPU per
// exchange (bench/client-exchange.bench.ts). Same URL handling (the origin and path undici derives from
// `origin + path`), same parsed headers, same undici errors (codes such as UND_ERR_SOCKET) for a failure
// before or during the reply.

import { util, type Dispatcher } from 'undici';
import type { IncomingHttpHeaders } from 'undici/types/header.js';

export interface ExchangeReply {
  status: number;
  headers: IncomingHttpHeaders;
  /** The reply's bytes, in an array of their own. */
  body: Uint8Array;
}

export interface ExchangeOptions {
  method: Dispatcher.HttpMethod;
  body?: string | Uint8Array;
  headers?: Record<string, string>;
}

/** Send `method origin+path` through `dispatcher` and collect the reply (1xx replies are skipped, as request() does). */
export function exchange(dispatcher: Dispatcher, url: string, o: ExchangeOptions): Promise<ExchangeReply> {
  return new Promise<ExchangeReply>((resolve, reject) => {
    let u: URL;
    try {
      // As undici's request(url) reads a URL string (lib/core/util.js parseURL and index.js makeDispatcher).
      u = new URL(url);
    } catch (e) {
      reject(e);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let status = 0;
    let headers: IncomingHttpHeaders = {};
    const handler: Dispatcher.DispatchHandler = {
      onConnect() {},
      onHeaders(statusCode, rawHeaders) {
        if (statusCode < 200) return true;
        status = statusCode;
        headers = util.parseHeaders(rawHeaders as unknown as Buffer[]) as IncomingHttpHeaders;
        return true;
      },
      onData(chunk) {
        chunks.push(chunk);
        size += chunk.length;
        return true;
      },
      onComplete() {
        const body = new Uint8Array(size);
        let at = 0;
        for (const c of chunks) {
          body.set(c, at);
          at += c.length;
        }
        resolve({ status, headers, body });
      },
      onError(err) {
        reject(err);
      },
    };
    try {
      dispatcher.dispatch({ origin: u.origin, path: u.search ? `${u.pathname}${u.search}` : u.pathname, method: o.method, body: o.body ?? null, headers: o.headers ?? {} }, handler);
    } catch (e) {
      reject(e);
    }
  });
}
