// What a same-host HTTP server that commands the cell refuses from a browser (the OLP server, document 3
// parts 1 and 5: "meant for same-host use", no authentication; the weld planner, document 2 parts 1 and 5:
// no authentication, bound to localhost unless other hosts must reach it). A web page open in a browser on
// that host can send requests to it: "simple" cross-origin POSTs (text/plain or form bodies, no
// preflight) are delivered even though the page cannot read the reply, and a page under a name that
// rebinds to 127.0.0.1 can read replies too. The rules are those local development servers use against
// the same attacks (a Host allow-list, Origin and Sec-Fetch-Site checks, a body type a browser cannot send
// without a preflight); docs/profile.md "Local servers: browser guard" writes them down:
//
// 1. Host: the request's Host names this server: `localhost`, `127.0.0.1` or `[::1]`, the listen
//    address when it is a name or a specific address, or a name given with --allowed-host, each with the
//    port the server listens on; a server listening on every interface (0.0.0.0, ::) also takes any IP
//    address literal (an address cannot be rebound, a name can). Else 403 host_not_allowed.
// 2. Every method but GET and HEAD: an Origin header, when present, must be http:// and an allowed Host
//    (the page is this server's own); a Sec-Fetch-Site header, when present, must be same-origin or none.
//    Else 403 cross_site_request. A preflight (OPTIONS) from another origin is refused the same way, and no
//    reply carries an Access-Control-Allow-* header.
// 3. A request that carries a body (POST, PUT, PATCH) names the route's body type in Content-Type
//    (application/json; the planner's container application/octet-stream, document 2 part 4): a type a
//    browser cannot send across origins without a preflight. Else 415 unsupported_content_type.

import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

export type GuardLabel = 'host_not_allowed' | 'cross_site_request' | 'unsupported_content_type';

export interface GuardRefusal {
  status: 403 | 415;
  label: GuardLabel;
  detail: string;
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];
const WILDCARDS = new Set(['0.0.0.0', '::', '']);
const SAFE_METHODS = new Set(['GET', 'HEAD']);
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/** An --allowed-host value: a DNS name or an address, without port or scheme. */
export function validAllowedHost(name: string): boolean {
  if (isIP(name.replace(/^\[(.*)\]$/, '$1')) !== 0) return true;
  return /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(name);
}

/**
 * The host name as a browser writes it in Host: lower case, an IPv6 address in brackets and in its shortest
 * form (RFC 5952, as the URL standard serializes it), so that `[0:0:0:0:0:0:0:1]` is `[::1]`.
 */
function hostForm(name: string): string {
  const bare = name.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  return isIP(bare) === 6 ? new URL(`http://[${bare}]/`).hostname : bare;
}

/** Split a Host value (`name`, `name:port`, `[v6]`, `[v6]:port`) into name and port; undefined when malformed. */
export function splitHost(value: string): { name: string; port: number | undefined } | undefined {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]\s/@?#]+)(?::([0-9]{1,5}))?$/.exec(value);
  if (!m) return undefined;
  const port = m[2] === undefined ? undefined : Number(m[2]);
  if (port !== undefined && (port < 1 || port > 65535)) return undefined;
  return { name: m[1]!.toLowerCase(), port };
}

export class LocalGuard {
  private readonly names: Set<string>;
  private readonly anyAddress: boolean;
  private port = 0;

  /**
   * `listenHost`: the address the server was told to listen on; `extraHosts`: names from --allowed-host;
   * `bodyType`: the media type a request body must declare.
   */
  constructor(listenHost: string, extraHosts: readonly string[] = [], readonly bodyType = 'application/json') {
    this.anyAddress = WILDCARDS.has(listenHost.replace(/^\[(.*)\]$/, '$1'));
    this.names = new Set([...LOOPBACK_NAMES, ...(this.anyAddress ? [] : [hostForm(listenHost)]), ...extraHosts.map(hostForm)]);
  }

  /** The port the server listens on (known once it listens; port 0 picks one). */
  listening(port: number): void {
    this.port = port;
  }

  /** Rule 1: whether a Host (or an Origin's authority) names this server. */
  hostAllowed(value: string | undefined): boolean {
    if (value === undefined) return false;
    const h = splitHost(value);
    if (!h) return false;
    if ((h.port ?? 80) !== this.port) return false;
    if (this.names.has(hostForm(h.name))) return true;
    return this.anyAddress && isIP(h.name.replace(/^\[(.*)\]$/, '$1')) !== 0;
  }

  /** The refusal a request gets before it is routed, or undefined when it passes every rule. */
  check(req: IncomingMessage): GuardRefusal | undefined {
    const host = req.headers.host;
    if (!this.hostAllowed(host)) {
      return { status: 403, label: 'host_not_allowed', detail: `Host ${JSON.stringify(host ?? '')} does not name this server (a local server answers its own names only)` };
    }
    const method = (req.method ?? 'GET').toUpperCase();
    if (SAFE_METHODS.has(method)) return undefined;
    const origin = req.headers.origin;
    if (origin !== undefined) {
      const m = /^http:\/\/([^/]+)$/.exec(origin);
      if (!m || !this.hostAllowed(m[1])) {
        return { status: 403, label: 'cross_site_request', detail: `Origin ${JSON.stringify(origin)} is not this server: ${method} is refused across origins` };
      }
    }
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none') {
      return { status: 403, label: 'cross_site_request', detail: `Sec-Fetch-Site ${JSON.stringify(site)}: ${method} is refused unless same-origin` };
    }
    if (BODY_METHODS.has(method)) {
      const ct = req.headers['content-type'];
      const type = (ct ?? '').split(';')[0]!.trim().toLowerCase();
      if (type !== this.bodyType) {
        return { status: 415, label: 'unsupported_content_type', detail: `${method} needs Content-Type ${this.bodyType}${ct === undefined ? ' (none was given)' : `, not ${JSON.stringify(ct)}`}` };
      }
    }
    return undefined;
  }
}
